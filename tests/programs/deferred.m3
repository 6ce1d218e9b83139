-- Which := statements run once per line or batch instead of once per event (ddms/backend/deferral.py):
-- X, Z and G may be deferred; V, Y, S and W may not (see tests/test_deferral.py for why).
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

DECLARE MAP A(float)[];
DECLARE MAP B(float)[];
DECLARE MAP LEVELS(float)[P: float];
DECLARE MAP V(float)[];
DECLARE MAP X(float)[];
DECLARE MAP Y(float)[];
DECLARE MAP Z(float)[];
DECLARE MAP G(float)[P: float];
DECLARE MAP S(float)[];
DECLARE MAP W(float)[];
DECLARE MAP U(float)[];

DECLARE QUERY V := V;
DECLARE QUERY X := X;
DECLARE QUERY Y := Y;
DECLARE QUERY Z := Z;
DECLARE QUERY G := G;
DECLARE QUERY S := S;
DECLARE QUERY U := U;

ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  V[] := A[];
  A[] += VOLUME;
  LEVELS[PRICE] += VOLUME;
  X[] := 1 + A[];
  Y[] := B[] + A[];
  Z[] := X[] * 2;
  G[P] := AggSum([P], LEVELS[P] * 2 * {P > 100});
  S[] := S[] + 1;
  W[] := A[];
  U[] += W[] * VOLUME;
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  V[] := A[];
  A[] += -VOLUME;
  LEVELS[PRICE] += -VOLUME;
  X[] := 1 + A[];
  Y[] := B[] + A[];
  Z[] := X[] * 2;
  G[P] := AggSum([P], LEVELS[P] * 2 * {P > 100});
  S[] := S[] + 1;
  W[] := A[];
  U[] += W[] * VOLUME;
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  B[] += VOLUME;
}
