-- crossed or locked book: 1 when the best bid reaches the best ask, else 0 (also while a side is empty)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT CASE WHEN (SELECT MAX(b.price) FROM bids b) >= (SELECT MIN(a.price) FROM asks a) THEN 1 ELSE 0 END AS crossed;
