-- large bid orders (volume of 100 or more): how many, their volume and their average size to one decimal, by FILTER
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT COUNT(*) FILTER (WHERE volume >= 100) AS large_bid_orders,
       SUM(volume) FILTER (WHERE volume >= 100) AS large_volume,
       ROUND(AVG(volume) FILTER (WHERE volume >= 100), 1) AS large_avg
FROM bids;
