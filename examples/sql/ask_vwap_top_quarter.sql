-- VWAP of the top quarter of the ask book
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT (SELECT SUM(a1.price * a1.volume) / SUM(a1.volume) FROM asks a1
      WHERE 0.25 * (SELECT SUM(a3.volume) FROM asks a3)
            > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.price < a1.price)) AS ask_vwap_top_quarter;
