-- book totals in one row: bid and ask orders and volumes
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT (SELECT COUNT(*) FROM bids) AS book_totals, (SELECT COUNT(*) FROM asks) AS ask_orders,
       (SELECT SUM(volume) FROM bids) AS bid_volume, (SELECT SUM(volume) FROM asks) AS ask_volume;
