-- SOBI signal: (ask VWAP - mid) - (mid - bid VWAP), top quarter of each book, mid from the best prices
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT ((SELECT SUM(a1.price * a1.volume) / SUM(a1.volume) FROM asks a1
      WHERE 0.25 * (SELECT SUM(a3.volume) FROM asks a3)
            > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.price < a1.price))
       - ((SELECT MIN(a.price) FROM asks a) + (SELECT MAX(b.price) FROM bids b)) / 2)
     - (((SELECT MIN(a.price) FROM asks a) + (SELECT MAX(b.price) FROM bids b)) / 2
       - (SELECT SUM(b1.price * b1.volume) / SUM(b1.volume) FROM bids b1
      WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3)
            > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price))) AS sobi;
