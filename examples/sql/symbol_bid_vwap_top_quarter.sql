-- per symbol: VWAP of the top quarter of each instrument's bid book
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT b1.symbol, SUM(b1.price * b1.volume) / SUM(b1.volume) AS symbol_bid_vwap_top_quarter
FROM   bids b1
WHERE  0.25 * (SELECT SUM(b3.volume) FROM bids b3 WHERE b3.symbol = b1.symbol)
       > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.symbol = b1.symbol AND b2.price > b1.price)
GROUP BY b1.symbol;
