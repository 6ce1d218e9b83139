-- depth imbalance within 1% of the touch: (bid depth - ask depth) / (bid depth + ask depth)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT ((SELECT SUM(b1.volume) FROM bids b1 WHERE b1.price >= 0.99 * (SELECT MAX(b2.price) FROM bids b2)) - (SELECT SUM(a1.volume) FROM asks a1 WHERE a1.price <= 1.01 * (SELECT MIN(a2.price) FROM asks a2)))
     / NULLIF((SELECT SUM(b1.volume) FROM bids b1 WHERE b1.price >= 0.99 * (SELECT MAX(b2.price) FROM bids b2)) + (SELECT SUM(a1.volume) FROM asks a1 WHERE a1.price <= 1.01 * (SELECT MIN(a2.price) FROM asks a2)), 0) AS depth_imbalance_1pct;
