-- A small order-book program without ORDERED maps (scalar sums, a division, grouped maps with
-- one and two keys), shared by the runtime and CLI tests.
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

DECLARE MAP BID_VOL(float)[];
DECLARE MAP ASK_VOL(float)[];
DECLARE MAP BID_N(int)[];
DECLARE MAP BID_AVG(float)[];
DECLARE MAP BROKER_VOL(float)[B: int];
DECLARE MAP BP_VOL(float)[B: int, P: float];

DECLARE QUERY BID_VOL := BID_VOL;
DECLARE QUERY ASK_VOL := ASK_VOL;
DECLARE QUERY BID_N := BID_N;
DECLARE QUERY BID_AVG := BID_AVG;
DECLARE QUERY BROKER_VOL := BROKER_VOL;
DECLARE QUERY BP_VOL := BP_VOL;

ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_VOL[] += VOLUME;
  BID_N[] += 1;
  BID_AVG[] := BID_VOL[] / BID_N[];
  BROKER_VOL[BROKER_ID] += VOLUME;
  BP_VOL[BROKER_ID, PRICE] += VOLUME;
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_VOL[] += -VOLUME;
  BID_N[] += -1;
  BID_AVG[] := BID_VOL[] / BID_N[];
  BROKER_VOL[BROKER_ID] += -VOLUME;
  BP_VOL[BROKER_ID, PRICE] += -VOLUME;
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_VOL[] += VOLUME;
}

ON - ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_VOL[] += -VOLUME;
}
