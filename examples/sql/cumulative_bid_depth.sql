-- cumulative depth per bid price level: the bid volume at that price or better
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT lv.price, SUM(b.volume) AS cumulative_bid_depth
FROM (SELECT price FROM bids GROUP BY price) lv, bids b
WHERE b.price >= lv.price GROUP BY lv.price;
