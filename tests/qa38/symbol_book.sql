-- qa38: per symbol, the whole visible book summarised: best price, volume sum and level count a side
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'none.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'none.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT symbol, MAX(price) AS best_bid, SUM(volume) AS bid_volume, COUNT(*) AS bid_levels
FROM bids GROUP BY symbol;

SELECT symbol, MIN(price) AS best_ask, SUM(volume) AS ask_volume, COUNT(*) AS ask_levels
FROM asks GROUP BY symbol;
