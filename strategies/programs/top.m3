-- Top of book for both books (used by the market maker, strategies/mm.py):
--   BEST_BID, BEST_ASK   best prices (NaN/null while a side is empty)
--   SPREAD, MID          BEST_ASK - BEST_BID and their midpoint
-- Best prices use ORDERED maps of order counts per price: O(log n) per update.

-- streams
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);

-- maps
DECLARE MAP BID_CNT(int)[P: float] ORDERED;
DECLARE MAP ASK_CNT(int)[P: float] ORDERED;
DECLARE MAP BEST_BID(float)[] := Max(P, BID_CNT[P]);
DECLARE MAP BEST_ASK(float)[] := Min(P, ASK_CNT[P]);
DECLARE MAP SPREAD(float)[] := BEST_ASK[] - BEST_BID[];
DECLARE MAP MID(float)[] := 0.5 * (BEST_BID[] + BEST_ASK[]);

-- queries
DECLARE QUERY BEST_BID := BEST_BID;
DECLARE QUERY BEST_ASK := BEST_ASK;
DECLARE QUERY SPREAD := SPREAD;
DECLARE QUERY MID := MID;

-- triggers
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_CNT[PRICE] += 1;
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
}

ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  BID_CNT[PRICE] += -1;
  BEST_BID[] := Max(P, BID_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
}

ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_CNT[PRICE] += 1;
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
}

ON - ASKS(T, ID, BROKER_ID, VOLUME, PRICE) {
  ASK_CNT[PRICE] += -1;
  BEST_ASK[] := Min(P, ASK_CNT[P]);
  SPREAD[] := BEST_ASK[] - BEST_BID[];
  MID[] := 0.5 * (BEST_BID[] + BEST_ASK[]);
}
