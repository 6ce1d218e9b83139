-- Two-key ORDERED maps stored in range trees alone (one tree per broker, no hash map) when every
-- read fixes the broker: range sums, a threshold sum, a point read, a walk of one broker's tree
-- and its best price.  BOOK_ALL is also walked whole, so it keeps its hash map.
-- Checked against the reference interpreter.
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

DECLARE MAP BOOK(float)[B: int, P: float] ORDERED;
DECLARE MAP BOOK_PV(float)[B: int, P: float] ORDERED;
DECLARE MAP BOOK_TOTAL(float)[B: int];
DECLARE MAP BOOK_ALL(float)[B: int, P: float] ORDERED;
DECLARE MAP ABOVE(float)[B: int];
DECLARE MAP AT_PRICE(float)[B: int];
DECLARE MAP TOP_PV(float)[B: int];
DECLARE MAP LEVEL_PV(float)[B: int];
DECLARE MAP BEST(float)[B: int];
DECLARE MAP CROSSING(float)[];

DECLARE QUERY ABOVE := ABOVE;
DECLARE QUERY AT_PRICE := AT_PRICE;
DECLARE QUERY TOP_PV := TOP_PV;
DECLARE QUERY LEVEL_PV := LEVEL_PV;
DECLARE QUERY BEST := BEST;
DECLARE QUERY CROSSING := CROSSING;

ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BOOK[BROKER_ID, PRICE] += VOLUME;
  BOOK_PV[BROKER_ID, PRICE] += PRICE * VOLUME;
  BOOK_TOTAL[BROKER_ID] += VOLUME;
  BOOK_ALL[BROKER_ID, PRICE] += VOLUME;
  ABOVE[BROKER_ID] := AggSum([], BOOK[BROKER_ID, Q] * {Q > PRICE}) + AggSum([], BOOK[BROKER_ID, Q] * {Q <= PRICE + -2});
  AT_PRICE[BROKER_ID] := BOOK[BROKER_ID, PRICE];
  TOP_PV[BROKER_ID] := AggSum([], BOOK_PV[BROKER_ID, P1] * {0.5 * BOOK_TOTAL[BROKER_ID] > AggSum([], BOOK[BROKER_ID, P2] * {P2 > P1})});
  LEVEL_PV[BROKER_ID] := AggSum([], BOOK_PV[BROKER_ID, P] * {P < 150});
  BEST[BROKER_ID] := Max(P, BOOK[BROKER_ID, P]);
  CROSSING[] := AggSum([], BOOK_ALL[B, P] * {P > 100});
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BOOK[BROKER_ID, PRICE] += -VOLUME;
  BOOK_PV[BROKER_ID, PRICE] += -(PRICE * VOLUME);
  BOOK_TOTAL[BROKER_ID] += -VOLUME;
  BOOK_ALL[BROKER_ID, PRICE] += -VOLUME;
  ABOVE[BROKER_ID] := AggSum([], BOOK[BROKER_ID, Q] * {Q > PRICE}) + AggSum([], BOOK[BROKER_ID, Q] * {Q <= PRICE + -2});
  AT_PRICE[BROKER_ID] := BOOK[BROKER_ID, PRICE];
  TOP_PV[BROKER_ID] := AggSum([], BOOK_PV[BROKER_ID, P1] * {0.5 * BOOK_TOTAL[BROKER_ID] > AggSum([], BOOK[BROKER_ID, P2] * {P2 > P1})});
  LEVEL_PV[BROKER_ID] := AggSum([], BOOK_PV[BROKER_ID, P] * {P < 150});
  BEST[BROKER_ID] := Max(P, BOOK[BROKER_ID, P]);
  CROSSING[] := AggSum([], BOOK_ALL[B, P] * {P > 100});
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  LEVEL_PV[BROKER_ID] := AggSum([], BOOK_PV[BROKER_ID, P] * P * {P >= PRICE});
}
