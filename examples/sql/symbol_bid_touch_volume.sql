-- per symbol: volume resting at the best bid of each instrument (the subquery correlates on the symbol)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT b1.symbol, SUM(b1.volume) AS symbol_bid_touch_volume
FROM   bids b1
WHERE  b1.price = (SELECT MAX(b2.price) FROM bids b2 WHERE b2.symbol = b1.symbol)
GROUP BY b1.symbol;
