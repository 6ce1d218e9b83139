-- VWAP of the 5 best ask levels (Feldera's ROW_NUMBER() shape)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT SUM(l.price * l.volume) / SUM(l.volume) AS top5_ask_level_vwap
FROM (SELECT price, SUM(volume) AS volume, ROW_NUMBER() OVER (ORDER BY price) AS rn
      FROM asks GROUP BY price) l
WHERE l.rn <= 5;
