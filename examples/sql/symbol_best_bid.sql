-- per symbol: best bid, the highest bid price of each instrument
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT symbol, MAX(price) AS symbol_best_bid FROM bids GROUP BY symbol;
