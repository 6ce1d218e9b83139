-- bid ladder: the 5 best bid price levels as rows, best first: price, volume, orders
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT price, SUM(volume) AS bid_ladder, COUNT(*) AS orders
FROM bids GROUP BY price ORDER BY price DESC LIMIT 5;
