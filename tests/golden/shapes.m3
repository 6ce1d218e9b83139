-- streams
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

-- maps
DECLARE MAP VOL_BY_BROKER(float)[B: int];
DECLARE MAP PV_BY_BROKER(float)[B: int];
DECLARE MAP AVG_BY_BROKER(float)[B: int];
DECLARE MAP BV(float)[B: int, P: float] ORDERED;
DECLARE MAP AV(float)[P: float] ORDERED;
DECLARE MAP AV_TOTAL(float)[];
DECLARE MAP ACNT(int)[P: float];
DECLARE MAP ABOVE_MINE(float)[B: int];
DECLARE MAP CROSS(float)[];
DECLARE MAP WORST_ASK(float)[];
DECLARE MAP BEST_ASK(float)[];
DECLARE MAP LOW_HALF(float)[];
DECLARE MAP HIGH_PART(float)[];
DECLARE MAP AT_BEST(float)[];
DECLARE MAP NOT_100(float)[];
DECLARE MAP BROKER_LEVELS(int)[B: int];

-- queries
DECLARE QUERY VOL_BY_BROKER := VOL_BY_BROKER;
DECLARE QUERY AVG_BY_BROKER := AVG_BY_BROKER;
DECLARE QUERY ABOVE_MINE := ABOVE_MINE;
DECLARE QUERY CROSS := CROSS;
DECLARE QUERY WORST_ASK := WORST_ASK;
DECLARE QUERY BEST_ASK := BEST_ASK;
DECLARE QUERY LOW_HALF := LOW_HALF;
DECLARE QUERY HIGH_PART := HIGH_PART;
DECLARE QUERY AT_BEST := AT_BEST;
DECLARE QUERY NOT_100 := NOT_100;
DECLARE QUERY BROKER_LEVELS := BROKER_LEVELS;

-- triggers
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  VOL_BY_BROKER[BROKER_ID] += VOLUME;
  PV_BY_BROKER[BROKER_ID] += PRICE * VOLUME;
  BV[BROKER_ID, PRICE] += VOLUME;
  AVG_BY_BROKER[B] := AggSum([B], PV_BY_BROKER[B] / VOL_BY_BROKER[B]);
  ABOVE_MINE[BROKER_ID] := AggSum([], BV[BROKER_ID, Q] * {Q > PRICE});
  CROSS[] := AggSum([], BV[B, P] * AggSum([], AV[Q] * {Q < P}));
  BROKER_LEVELS[B] := AggSum([B], BV[B, P]) * 0 + AggSum([B], BV[B, P] * {P = P});
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  VOL_BY_BROKER[BROKER_ID] += -VOLUME;
  PV_BY_BROKER[BROKER_ID] += -(PRICE * VOLUME);
  BV[BROKER_ID, PRICE] += -VOLUME;
  AVG_BY_BROKER[B] := AggSum([B], PV_BY_BROKER[B] / VOL_BY_BROKER[B]);
  ABOVE_MINE[BROKER_ID] := AggSum([], BV[BROKER_ID, Q] * {Q > PRICE});
  CROSS[] := AggSum([], BV[B, P] * AggSum([], AV[Q] * {Q < P}));
  BROKER_LEVELS[B] := AggSum([B], BV[B, P]) * 0 + AggSum([B], BV[B, P] * {P = P});
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  AV[PRICE] += VOLUME;
  AV_TOTAL[] += VOLUME;
  ACNT[PRICE] += 1;
  CROSS[] := AggSum([], BV[B, P] * AggSum([], AV[Q] * {Q < P}));
  WORST_ASK[] := Max(P, ACNT[P]);
  BEST_ASK[] := Min(P, AV[P]);
  LOW_HALF[] := AggSum([], AV[P1] * {AggSum([], AV[P2] * {P2 <= P1}) <= 0.5 * AV_TOTAL[]});
  HIGH_PART[] := AggSum([], AV[P1] * {0.3 * AV_TOTAL[] <= AggSum([], AV[P2] * {P2 >= P1})});
  AT_BEST[] := AggSum([], (M ^= Min(P, AV[P])) * AV[M]);
  NOT_100[] := AggSum([], AV[P] * {P != 100});
}

ON - ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  AV[PRICE] += -VOLUME;
  AV_TOTAL[] += -VOLUME;
  ACNT[PRICE] += -1;
  CROSS[] := AggSum([], BV[B, P] * AggSum([], AV[Q] * {Q < P}));
  WORST_ASK[] := Max(P, ACNT[P]);
  BEST_ASK[] := Min(P, AV[P]);
  LOW_HALF[] := AggSum([], AV[P1] * {AggSum([], AV[P2] * {P2 <= P1}) <= 0.5 * AV_TOTAL[]});
  HIGH_PART[] := AggSum([], AV[P1] * {0.3 * AV_TOTAL[] <= AggSum([], AV[P2] * {P2 >= P1})});
  AT_BEST[] := AggSum([], (M ^= Min(P, AV[P])) * AV[M]);
  NOT_100[] := AggSum([], AV[P] * {P != 100});
}
