-- per broker: bid volume, bid orders, best and worst bid, in one view
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT broker_id, SUM(volume) AS broker_book, COUNT(*) AS orders, MAX(price) AS best, MIN(price) AS worst
FROM bids GROUP BY broker_id;
