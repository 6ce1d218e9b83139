-- per symbol: SOBI signal of each instrument with bids: (ask VWAP - mid) - (mid - bid VWAP), top quarter of each book
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT s.symbol,
       ((SELECT SUM(a1.price * a1.volume) / SUM(a1.volume) FROM asks a1
         WHERE a1.symbol = s.symbol
           AND 0.25 * (SELECT SUM(a3.volume) FROM asks a3 WHERE a3.symbol = s.symbol)
               > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.symbol = s.symbol AND a2.price < a1.price))
        - ((SELECT MIN(a.price) FROM asks a WHERE a.symbol = s.symbol)
           + (SELECT MAX(b.price) FROM bids b WHERE b.symbol = s.symbol)) / 2)
     - (((SELECT MIN(a.price) FROM asks a WHERE a.symbol = s.symbol)
         + (SELECT MAX(b.price) FROM bids b WHERE b.symbol = s.symbol)) / 2
        - (SELECT SUM(b1.price * b1.volume) / SUM(b1.volume) FROM bids b1
           WHERE b1.symbol = s.symbol
             AND 0.25 * (SELECT SUM(b3.volume) FROM bids b3 WHERE b3.symbol = s.symbol)
                 > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.symbol = s.symbol AND b2.price > b1.price))) AS symbol_sobi
FROM   (SELECT symbol FROM bids GROUP BY symbol) s
GROUP BY s.symbol;
