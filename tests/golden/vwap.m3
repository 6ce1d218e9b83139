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
