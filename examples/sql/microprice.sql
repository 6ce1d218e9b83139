-- microprice: best prices weighted by the volume at the opposite touch
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT ((SELECT MAX(b.price) FROM bids b) * (SELECT SUM(a1.volume) FROM asks a1 WHERE a1.price = (SELECT MIN(a2.price) FROM asks a2))
      + (SELECT MIN(a.price) FROM asks a) * (SELECT SUM(b1.volume) FROM bids b1 WHERE b1.price = (SELECT MAX(b2.price) FROM bids b2)))
     / ((SELECT SUM(b1.volume) FROM bids b1 WHERE b1.price = (SELECT MAX(b2.price) FROM bids b2)) + (SELECT SUM(a1.volume) FROM asks a1 WHERE a1.price = (SELECT MIN(a2.price) FROM asks a2))) AS microprice;
