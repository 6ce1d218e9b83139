-- DBToaster's VWAP query (queries/finance/vwap.sql) as a hand-written trigger program:
--   SELECT SUM(b1.price * b1.volume) FROM bids b1
--   WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3)
--         > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price);
-- The bids are kept per price level in two ORDERED (range-cumulative) maps.  The condition
-- depends on b1 only through its price, and the volume strictly above a price falls as the price
-- rises, so the qualifying levels are all prices from a threshold up: the backend finds that
-- threshold with one O(log n) descent of BID_VOL and sums BID_PV above it with another.

-- streams
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

-- maps
DECLARE MAP VWAP(float)[];
DECLARE MAP BID_TOTAL(float)[];
DECLARE MAP BID_VOL(float)[P: float] ORDERED;
DECLARE MAP BID_PV(float)[P: float] ORDERED;

-- queries
DECLARE QUERY VWAP := VWAP;

-- triggers
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += VOLUME;
  BID_VOL[PRICE] += VOLUME;
  BID_PV[PRICE] += PRICE * VOLUME;
  VWAP[] := AggSum([], BID_PV[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += -VOLUME;
  BID_VOL[PRICE] += -VOLUME;
  BID_PV[PRICE] += -(PRICE * VOLUME);
  VWAP[] := AggSum([], BID_PV[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
}
