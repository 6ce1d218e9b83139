-- SOBI (static order book imbalance, DBToaster CIDR paper) inputs and signal, for both books.
--   BID_VWAP  volume-weighted average price of the top k-fraction of the bids: the bids whose
--             volume at strictly higher prices is below k * total bid volume (k = 0.25)
--   ASK_VWAP  the same over the asks, where "top" is the lowest prices
--   BEST_BID, BEST_ASK, SPREAD, MID   top of book (NaN/null while a side is empty)
--   SOBI      (ASK_VWAP - MID) - (MID - BID_VWAP): positive when the asks' weight sits farther
--             from the mid than the bids' (buy pressure), negative for sell pressure
-- Thresholds use ORDERED (range-cumulative) maps: O(log n) per update, no loop over levels.

-- streams
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

-- maps
DECLARE MAP BID_TOTAL(float)[];
DECLARE MAP BID_CNT(int)[P: float] ORDERED;
DECLARE MAP BID_VOL(float)[P: float] ORDERED;
DECLARE MAP BID_PV(float)[P: float] ORDERED;
DECLARE MAP BID_TOP_PV(float)[];
DECLARE MAP BID_TOP_VOL(float)[];
DECLARE MAP BID_VWAP(float)[] := BID_TOP_PV[] / BID_TOP_VOL[];
DECLARE MAP ASK_TOTAL(float)[];
DECLARE MAP ASK_CNT(int)[P: float] ORDERED;
DECLARE MAP ASK_VOL(float)[P: float] ORDERED;
DECLARE MAP ASK_PV(float)[P: float] ORDERED;
DECLARE MAP ASK_TOP_PV(float)[];
DECLARE MAP ASK_TOP_VOL(float)[];
DECLARE MAP ASK_VWAP(float)[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
DECLARE MAP BEST_BID(float)[] := Max(P, BID_CNT[P]);
DECLARE MAP BEST_ASK(float)[] := Min(P, ASK_CNT[P]);
DECLARE MAP SPREAD(float)[] := BEST_ASK[] - BEST_BID[];
DECLARE MAP MID(float)[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
DECLARE MAP SOBI(float)[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);

-- queries
DECLARE QUERY BID_VWAP := BID_VWAP;
DECLARE QUERY ASK_VWAP := ASK_VWAP;
DECLARE QUERY BEST_BID := BEST_BID;
DECLARE QUERY BEST_ASK := BEST_ASK;
DECLARE QUERY SPREAD := SPREAD;
DECLARE QUERY MID := MID;
DECLARE QUERY SOBI := SOBI;

-- triggers
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += VOLUME;
  BID_CNT[PRICE] += 1;
  BID_VOL[PRICE] += VOLUME;
  BID_PV[PRICE] += PRICE * VOLUME;
  BID_TOP_PV[] := AggSum([], BID_PV[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_TOP_VOL[] := AggSum([], BID_VOL[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_VWAP[] := BID_TOP_PV[] / BID_TOP_VOL[];
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += -VOLUME;
  BID_CNT[PRICE] += -1;
  BID_VOL[PRICE] += -VOLUME;
  BID_PV[PRICE] += -(PRICE * VOLUME);
  BID_TOP_PV[] := AggSum([], BID_PV[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_TOP_VOL[] := AggSum([], BID_VOL[P1] * {0.25 * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_VWAP[] := BID_TOP_PV[] / BID_TOP_VOL[];
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_TOTAL[] += VOLUME;
  ASK_CNT[PRICE] += 1;
  ASK_VOL[PRICE] += VOLUME;
  ASK_PV[PRICE] += PRICE * VOLUME;
  ASK_TOP_PV[] := AggSum([], ASK_PV[P1] * {0.25 * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_TOP_VOL[] := AggSum([], ASK_VOL[P1] * {0.25 * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_VWAP[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
}

ON - ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_TOTAL[] += -VOLUME;
  ASK_CNT[PRICE] += -1;
  ASK_VOL[PRICE] += -VOLUME;
  ASK_PV[PRICE] += -(PRICE * VOLUME);
  ASK_TOP_PV[] := AggSum([], ASK_PV[P1] * {0.25 * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_TOP_VOL[] := AggSum([], ASK_VOL[P1] * {0.25 * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_VWAP[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
}
