-- per symbol: bid ladder, the 3 best bid price levels of each instrument as rows (Feldera's ROW_NUMBER() shape)
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE '../../data/finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');

SELECT x.symbol, x.price, x.volume AS symbol_bid_ladder
FROM (SELECT symbol, price, SUM(volume) AS volume,
             ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY price DESC) AS rn
      FROM bids GROUP BY symbol, price) x
WHERE x.rn <= 3;
