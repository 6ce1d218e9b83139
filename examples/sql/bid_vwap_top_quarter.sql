-- VWAP of the top quarter of the bid book: bids with less than 25% of the bid volume at better prices
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT (SELECT SUM(b1.price * b1.volume) / SUM(b1.volume) FROM bids b1
      WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3)
            > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price)) AS bid_vwap_top_quarter;
