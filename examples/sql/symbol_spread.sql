-- per symbol: bid-ask spread of each instrument with bids (NULL while it has no asks)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT s.symbol,
       (SELECT MIN(a.price) FROM asks a WHERE a.symbol = s.symbol)
     - (SELECT MAX(b.price) FROM bids b WHERE b.symbol = s.symbol) AS symbol_spread
FROM   (SELECT symbol FROM bids GROUP BY symbol) s
GROUP BY s.symbol;
