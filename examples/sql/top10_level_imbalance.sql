-- imbalance at the top 10 levels: (bid volume - ask volume) / (bid volume + ask volume) over the 10 best levels of each side
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT ((SELECT SUM(b.volume) FROM (SELECT price, SUM(volume) AS volume FROM bids GROUP BY price ORDER BY price DESC LIMIT 10) b)
      - (SELECT SUM(a.volume) FROM (SELECT price, SUM(volume) AS volume FROM asks GROUP BY price ORDER BY price LIMIT 10) a))
     / NULLIF((SELECT SUM(b.volume) FROM (SELECT price, SUM(volume) AS volume FROM bids GROUP BY price ORDER BY price DESC LIMIT 10) b)
      + (SELECT SUM(a.volume) FROM (SELECT price, SUM(volume) AS volume FROM asks GROUP BY price ORDER BY price LIMIT 10) a), 0) AS top10_level_imbalance;
