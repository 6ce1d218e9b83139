-- SOBI (static order book imbalance, DBToaster CIDR paper) for strategies/sobi.py: the views of
-- examples/m3/sobi.m3 with the fraction k read from a one-column parameter stream instead of the
-- constant 0.25, so one compiled program serves every k of a sweep, plus the signal relative to
-- the mid:
--   SOBI_PARAMS(KFRAC)  insert once before the data: k := KFRAC (all VWAPs re-evaluated)
--   BID_VWAP, ASK_VWAP  VWAP of the bids (asks) whose volume at better prices is below k * total
--   BEST_BID, BEST_ASK, SPREAD, MID   top of book (NaN/null while a side is empty)
--   SOBI      (ASK_VWAP - MID) - (MID - BID_VWAP): > 0 buy pressure, < 0 sell pressure
--   SIGNAL    SOBI / MID: the imbalance as a fraction of the mid (what the threshold compares)

-- streams
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM SOBI_PARAMS(KFRAC float);

-- maps
DECLARE MAP SOBI_K(float)[];
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
DECLARE MAP SIGNAL(float)[] := SOBI[] / MID[];

-- queries
DECLARE QUERY BID_VWAP := BID_VWAP;
DECLARE QUERY ASK_VWAP := ASK_VWAP;
DECLARE QUERY BEST_BID := BEST_BID;
DECLARE QUERY BEST_ASK := BEST_ASK;
DECLARE QUERY SPREAD := SPREAD;
DECLARE QUERY MID := MID;
DECLARE QUERY SOBI := SOBI;
DECLARE QUERY SIGNAL := SIGNAL;

-- triggers
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += VOLUME;
  BID_CNT[PRICE] += 1;
  BID_VOL[PRICE] += VOLUME;
  BID_PV[PRICE] += PRICE * VOLUME;
  BID_TOP_PV[] := AggSum([], BID_PV[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_TOP_VOL[] := AggSum([], BID_VOL[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_VWAP[] := BID_TOP_PV[] / BID_TOP_VOL[];
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
  SIGNAL[] := SOBI[] / MID[];
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_TOTAL[] += -VOLUME;
  BID_CNT[PRICE] += -1;
  BID_VOL[PRICE] += -VOLUME;
  BID_PV[PRICE] += -(PRICE * VOLUME);
  BID_TOP_PV[] := AggSum([], BID_PV[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_TOP_VOL[] := AggSum([], BID_VOL[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_VWAP[] := BID_TOP_PV[] / BID_TOP_VOL[];
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
  SIGNAL[] := SOBI[] / MID[];
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_TOTAL[] += VOLUME;
  ASK_CNT[PRICE] += 1;
  ASK_VOL[PRICE] += VOLUME;
  ASK_PV[PRICE] += PRICE * VOLUME;
  ASK_TOP_PV[] := AggSum([], ASK_PV[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_TOP_VOL[] := AggSum([], ASK_VOL[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_VWAP[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
  SIGNAL[] := SOBI[] / MID[];
}

ON - ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_TOTAL[] += -VOLUME;
  ASK_CNT[PRICE] += -1;
  ASK_VOL[PRICE] += -VOLUME;
  ASK_PV[PRICE] += -(PRICE * VOLUME);
  ASK_TOP_PV[] := AggSum([], ASK_PV[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_TOP_VOL[] := AggSum([], ASK_VOL[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_VWAP[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
  SIGNAL[] := SOBI[] / MID[];
}

ON + SOBI_PARAMS(KFRAC) {
  SOBI_K[] := KFRAC;
  BID_TOP_PV[] := AggSum([], BID_PV[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_TOP_VOL[] := AggSum([], BID_VOL[P1] * {SOBI_K[] * BID_TOTAL[] > AggSum([], BID_VOL[P2] * {P2 > P1})});
  BID_VWAP[] := BID_TOP_PV[] / BID_TOP_VOL[];
  ASK_TOP_PV[] := AggSum([], ASK_PV[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_TOP_VOL[] := AggSum([], ASK_VOL[P1] * {SOBI_K[] * ASK_TOTAL[] > AggSum([], ASK_VOL[P2] * {P2 < P1})});
  ASK_VWAP[] := ASK_TOP_PV[] / ASK_TOP_VOL[];
  SOBI[] := ASK_VWAP[] - MID[] - (MID[] - BID_VWAP[]);
  SIGNAL[] := SOBI[] / MID[];
}
