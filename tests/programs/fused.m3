-- Maps stored as the columns of one range tree (ddms/backend/fusion.py; tests/test_fusion.py):
-- CNT, VOL and BIG per price, BV and BC per broker and price.  BIG is the volume of orders above
-- 20 units, so most levels hold 0 in its column while CNT and VOL keep them alive; the views read
-- every column through every range-tree query: extremes, a threshold, range sums, loops.
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

DECLARE MAP TOTAL(float)[];
DECLARE MAP CNT(float)[P: float] ORDERED;
DECLARE MAP VOL(float)[P: float] ORDERED;
DECLARE MAP BIG(float)[P: float] ORDERED;
DECLARE MAP BV(float)[B: float, P: float] ORDERED;
DECLARE MAP BC(float)[B: float, P: float] ORDERED;
DECLARE MAP BEST(float)[];
DECLARE MAP LOW(float)[];
DECLARE MAP TOPBIG(float)[];
DECLARE MAP ABOVE(float)[];
DECLARE MAP SQ(float)[];
DECLARE MAP NBIG(float)[];
DECLARE MAP BTOP(float)[B: float];
DECLARE MAP BHIGH(float)[B: float];

DECLARE QUERY BEST := BEST;
DECLARE QUERY LOW := LOW;
DECLARE QUERY TOPBIG := TOPBIG;
DECLARE QUERY ABOVE := ABOVE;
DECLARE QUERY SQ := SQ;
DECLARE QUERY NBIG := NBIG;
DECLARE QUERY BTOP := BTOP;
DECLARE QUERY BHIGH := BHIGH;

ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  TOTAL[] += VOLUME;
  CNT[PRICE] += 1;
  VOL[PRICE] += VOLUME;
  BIG[PRICE] += VOLUME * {VOLUME > 20};
  BV[BROKER_ID, PRICE] += VOLUME;
  BC[BROKER_ID, PRICE] += 1;
  BEST[] := Max(P, BIG[P]);
  LOW[] := Min(P, BIG[P]);
  TOPBIG[] := AggSum([], BIG[P1] * {0.25 * TOTAL[] > AggSum([], VOL[P2] * {P2 > P1})});
  ABOVE[] := AggSum([], CNT[Q] * {Q > 100});
  SQ[] := AggSum([], BIG[P] * BIG[P]);
  NBIG[] := AggSum([], BIG[P] / BIG[P]);
  BTOP[BROKER_ID] := AggSum([], BV[BROKER_ID, P] * {P > 100});
  BHIGH[BROKER_ID] := Max(P, BC[BROKER_ID, P]);
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  TOTAL[] += -VOLUME;
  CNT[PRICE] += -1;
  VOL[PRICE] += -VOLUME;
  BIG[PRICE] += -(VOLUME * {VOLUME > 20});
  BV[BROKER_ID, PRICE] += -VOLUME;
  BC[BROKER_ID, PRICE] += -1;
  BEST[] := Max(P, BIG[P]);
  LOW[] := Min(P, BIG[P]);
  TOPBIG[] := AggSum([], BIG[P1] * {0.25 * TOTAL[] > AggSum([], VOL[P2] * {P2 > P1})});
  ABOVE[] := AggSum([], CNT[Q] * {Q > 100});
  SQ[] := AggSum([], BIG[P] * BIG[P]);
  NBIG[] := AggSum([], BIG[P] / BIG[P]);
  BTOP[BROKER_ID] := AggSum([], BV[BROKER_ID, P] * {P > 100});
  BHIGH[BROKER_ID] := Max(P, BC[BROKER_ID, P]);
}
