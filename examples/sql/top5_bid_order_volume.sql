-- volume of the 5 best bid orders: highest price first, ties at a price broken by order id
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT SUM(o.volume) AS top5_bid_order_volume
FROM (SELECT price, volume FROM bids ORDER BY price DESC, id LIMIT 5) o;
