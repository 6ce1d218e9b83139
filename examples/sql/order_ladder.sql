-- order ladder: the 10 best bid orders as rows, highest price first, ties at a price by order id
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT id, price, volume AS order_ladder
FROM bids ORDER BY price DESC, id LIMIT 10;
