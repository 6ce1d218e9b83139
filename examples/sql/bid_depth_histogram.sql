-- depth histogram of the bids: resting volume and orders per price bucket of 1000 (a row per non-empty bucket, keyed by its lowest price)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT FLOOR(price / 1000) * 1000 AS bucket, SUM(volume) AS bid_depth_histogram, COUNT(*) AS orders
FROM bids GROUP BY bucket;
