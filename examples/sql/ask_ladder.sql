-- ask ladder: the 5 best ask price levels as rows, best (lowest) first (Materialize's top-N shape)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT l.price, l.volume AS ask_ladder
FROM (SELECT price, SUM(volume) AS volume FROM asks GROUP BY price ORDER BY price LIMIT 5) l;
