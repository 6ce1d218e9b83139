"""Views of the qa32 outside check (issue 21's shapes, written as a quant would, without reading
the cookbook, ``outside_views.py`` or the other tests' view lists).

``VIEWS``: name -> one SELECT over ``bids``/``asks`` (t, id, broker_id, volume, price); the same
text is compiled by ddms and run by DuckDB (sums read as ``COALESCE(SUM(x), 0)``).  The name is
what ddms names the view (the alias of the first output, upper case; ``CREATE VIEW`` names it
itself).  ``SYMBOL_VIEWS``: the same over streams with a ``symbol VARCHAR`` column.
``REJECTED``: name -> (SQL, a part of the located reason) for views outside the subset."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # -- MIN / MAX, odd but legal spellings --------------------------------------------------
    "BEST_BID": 'SELECT MAX(b.price) AS "best_bid" FROM bids AS b',
    "BEST_ASK": "select min(PRICE) as Best_Ask from ASKS",
    "TOTVOL": "SeLeCt Sum(Volume) As TotVol FrOm Bids -- mixed case everywhere",
    "SPREAD_BPS": ("SELECT ((SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids))\n"
                   "       / (((SELECT MIN(price) FROM asks) + (SELECT MAX(price) FROM bids)) / 2) * 10000 AS "
                   "spread_bps"),
    "TOUCH_BID_VOL": ("SELECT SUM(volume) AS touch_bid_vol FROM bids /* the touch */\n"
                      "WHERE price = (SELECT MAX(price) FROM bids) -- best price only"),
    "VOL": ("SELECT broker_id, SUM(volume) AS vol, COUNT(*) AS n, MAX(price) AS hi, MIN(price) AS lo\n"
                    "FROM bids GROUP BY broker_id"),
    # -- HAVING, CASE, DISTINCT ---------------------------------------------------------------
    "ASK_VOL_BUSY": ("SELECT broker_id, SUM(volume) AS ask_vol_busy FROM asks GROUP BY broker_id\n"
                     "HAVING COUNT(*) >= 2 AND SUM(volume) > 60"),
    "BIG_VOL": "SELECT SUM(CASE WHEN volume >= 100 THEN volume ELSE 0 END) AS big_vol, SUM(volume) AS all_vol "
    "FROM bids",
    "PRESSURE": ("SELECT CASE WHEN (SELECT SUM(volume) FROM bids) > (SELECT SUM(volume) FROM asks) THEN 1\n"
                 "            WHEN (SELECT SUM(volume) FROM bids) < (SELECT SUM(volume) FROM asks) THEN -1 ELSE "
                 "0 END AS pressure"),
    "BID_LEVELS": "SELECT COUNT(DISTINCT price) AS bid_levels FROM bids",
    "ASK_LEVELS_BY_BROKER": "SELECT broker_id, COUNT(DISTINCT price) AS ask_levels_by_broker FROM asks GROUP BY "
        "broker_id",
    "DISTINCT_VOL": "SELECT SUM(DISTINCT volume) AS distinct_vol FROM asks",
    "AVG_BIG_PX": "SELECT AVG(CASE WHEN volume > 50 THEN price END) AS avg_big_px FROM bids",
    "BROKER_HI": ("SELECT broker_id, MAX(price) AS broker_hi FROM bids GROUP BY broker_id\n"
                  "HAVING MAX(price) > MIN(price) OR COUNT(*) = 1"),
    # -- EXISTS / IN -----------------------------------------------------------------------------
    "BOTH_SIDES": ("SELECT COUNT(*) AS both_sides FROM bids b\n"
                   "WHERE EXISTS (SELECT 1 FROM asks a WHERE a.broker_id = b.broker_id)"),
    "UNCROSSED_BID_VOL": ("SELECT SUM(volume) AS uncrossed_bid_vol FROM bids b\n"
                          "WHERE NOT EXISTS (SELECT * FROM asks a WHERE a.price <= b.price)"),
    "IN_BIG_ASKERS": ("SELECT SUM(volume) AS in_big_askers FROM bids\n"
                      "WHERE broker_id IN (SELECT broker_id FROM asks WHERE volume > 50)"),
    "NOT_IN_LIST": "SELECT COUNT(*) AS not_in_list FROM asks WHERE broker_id NOT IN (0, 1, 2)",
    "ANY_ASKS": "SELECT COUNT(*) AS any_asks FROM bids WHERE EXISTS (SELECT 1 FROM asks)",
    # -- CTEs, top-N in both spellings -------------------------------------------------------------
    "MID_CTE": ("WITH bb AS (SELECT MAX(price) AS p FROM bids), ba AS (SELECT MIN(price) AS p FROM asks)\n"
                "SELECT (bb.p + ba.p) / 2 AS mid_cte FROM bb, ba"),
    "TOP3_ASK_VOL": ("SELECT SUM(t.v) AS top3_ask_vol FROM\n"
                     "  (SELECT price, SUM(volume) AS v FROM asks GROUP BY price ORDER BY price ASC LIMIT 3) t"),
    "TOP4_BID_VWAP": ("SELECT SUM(lv.price * lv.v) / SUM(lv.v) AS top4_bid_vwap FROM\n"
                      "  (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn\n"
                      "   FROM bids GROUP BY price) lv WHERE lv.rn <= 4"),
    "TOP5_ASK_ORDERS": "SELECT SUM(x.volume) AS top5_ask_orders FROM (SELECT price, volume FROM asks ORDER BY "
        "price, id LIMIT 5) x",
    "BROKER_TOP2": ("SELECT broker_id, SUM(volume) AS broker_top2 FROM\n"
                    "  (SELECT broker_id, volume, RANK() OVER (PARTITION BY broker_id ORDER BY price DESC) AS r "
                    "FROM bids) z\n"
                    "WHERE r <= 2 GROUP BY broker_id"),
    "TOP_CTE": ("WITH lv AS (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price ASC) AS k\n"
                "            FROM asks GROUP BY price)\n"
                "SELECT COUNT(*) AS top_cte, SUM(v) AS top_cte_vol FROM lv WHERE k <= 2"),
    # -- arithmetic over scalar subqueries, NULL handling --------------------------------------------
    "VOL_RATIO": "SELECT (SELECT SUM(volume) FROM bids) / NULLIF((SELECT SUM(volume) FROM asks), 0) AS vol_ratio",
    "NO_BIDS": "SELECT CASE WHEN (SELECT MAX(price) FROM bids) IS NULL THEN 1 ELSE 0 END AS no_bids",
    "GAP": "SELECT COALESCE((SELECT MIN(price) FROM asks), 0) - COALESCE((SELECT MAX(price) FROM bids), 0) AS gap",
    "HI_LO": ("SELECT GREATEST((SELECT MAX(price) FROM bids), (SELECT MAX(price) FROM asks)) AS hi_lo,\n"
              "       LEAST((SELECT MIN(price) FROM bids), (SELECT MIN(price) FROM asks)) AS lo"),
    "ABS_IMB": "SELECT ABS((SELECT SUM(volume) FROM bids) - (SELECT SUM(volume) FROM asks)) AS abs_imb",
    "MICRO": ("SELECT ((SELECT MAX(price) FROM bids) * (SELECT SUM(a.volume) FROM asks a WHERE a.price = "
              "(SELECT MIN(price) FROM asks))\n"
              "      + (SELECT MIN(price) FROM asks) * (SELECT SUM(b.volume) FROM bids b WHERE b.price = "
              "(SELECT MAX(price) FROM bids)))\n"
              "     / ((SELECT SUM(a.volume) FROM asks a WHERE a.price = (SELECT MIN(price) FROM asks))\n"
              "      + (SELECT SUM(b.volume) FROM bids b WHERE b.price = (SELECT MAX(price) FROM bids))) AS micro"),
    "BID_SHARE": "SELECT SUM(volume) / (SELECT SUM(volume) FROM asks) AS bid_share FROM bids",
    # -- bands, comparisons ---------------------------------------------------------------------------
    "BAND_VOL": ("SELECT SUM(volume) AS band_vol FROM bids\n"
                 "WHERE price BETWEEN (SELECT MAX(price) FROM bids) * 0.98 AND (SELECT MAX(price) FROM bids)"),
    "NON_TOUCH": "SELECT COUNT(*) AS non_touch FROM bids WHERE price <> (SELECT MAX(price) FROM bids)",
    "NON_TOUCH_ASK": "SELECT COUNT(*) AS non_touch_ask FROM asks WHERE price != (SELECT MIN(price) FROM asks)",
    "ASK_DEPTH": ('SELECT SUM("a"."volume") AS "ask_depth" FROM "asks" "a" WHERE "a"."price" <= 1.01 * (SELECT '
                  'MIN(price) FROM asks)'),
    "EVEN_IDS": "SELECT COUNT(*) AS even_ids FROM bids WHERE id % 2 = 0",
    "FAR_ASK_VOL": "SELECT SUM(volume) AS far_ask_vol FROM asks WHERE price < 100000 OR price > 1000000",
    "ABOVE_AVG": "SELECT COUNT(*) AS above_avg FROM bids WHERE price > (SELECT AVG(price) FROM bids)",
    "N_ASKS": "SELECT COUNT(*) AS n_asks, SUM(volume) / COUNT(*) AS avg_size FROM asks",
    "OUTSIDE_BAND": "SELECT COUNT(*) AS outside_band FROM asks WHERE price NOT BETWEEN 200000 AND 300000",
    # -- joins, per broker ------------------------------------------------------------------------------
    "BROKER_AVG": "SELECT broker_id, AVG(price) AS broker_avg, SUM(price * volume) / SUM(volume) AS vwap FROM "
        "asks GROUP BY broker_id",
    "PAIRS": ("SELECT b.broker_id, COUNT(*) AS pairs FROM bids b JOIN asks a\n"
              "  ON a.broker_id = b.broker_id AND a.price > b.price GROUP BY b.broker_id"),
    "BROKER_TOUCH": ("SELECT b.broker_id, SUM(b.volume) AS broker_touch FROM bids b\n"
                     "WHERE b.price = (SELECT MAX(b2.price) FROM bids b2 WHERE b2.broker_id = b.broker_id) "
                     "GROUP BY b.broker_id"),
    "CUM_DEPTH": ("SELECT lv.price, SUM(b.volume) AS cum_depth FROM (SELECT price FROM bids GROUP BY price) lv, "
                  "bids b\n"
                  "WHERE b.price >= lv.price GROUP BY lv.price"),
    "BROKER_SPREAD": ("SELECT b.broker_id, MIN(a.price) - MAX(b.price) AS broker_spread FROM bids b, asks a\n"
                      "WHERE a.broker_id = b.broker_id GROUP BY b.broker_id"),
    "ONE_ROW_MIX": ("SELECT bb.p - ba.p AS one_row_mix, bb.n + ba.n AS orders, bb.n / NULLIF(ba.n, 0) AS ratio\n"
                    "FROM (SELECT MAX(price) AS p, COUNT(*) AS n FROM bids) bb,\n"
                    "     (SELECT MIN(price) AS p, COUNT(*) AS n FROM asks) ba"),
    "IMBALANCE": ("CREATE VIEW imbalance AS SELECT (bv.v - av.v) / (bv.v + av.v) AS imb FROM\n"
                  "  (SELECT SUM(volume) AS v FROM bids) bv, (SELECT SUM(volume) AS v FROM asks) av"),
    # -- NULL corners, self-joins, correlated EXISTS/IN ----------------------------------------------------
    "ABOVE_BEST_ASK": "SELECT COUNT(*) AS above_best_ask FROM bids WHERE price >= (SELECT MIN(price) FROM asks)",
    "NOT_IN_NULL": "SELECT COUNT(*) AS not_in_null FROM bids WHERE price NOT IN (SELECT MAX(price) FROM asks)",
    "LOCKED_LEVELS": "SELECT COUNT(*) AS locked_levels FROM bids WHERE price IN (SELECT price FROM asks)",
    "HAS_BETTER": ("SELECT SUM(b1.volume) AS has_better FROM bids b1\n"
                   "WHERE EXISTS (SELECT 1 FROM bids b2 WHERE b2.price > b1.price)"),
    "SAME_PRICE_PAIRS": ("SELECT COUNT(*) AS same_price_pairs FROM bids b1, bids b2\n"
                         "WHERE b1.price = b2.price AND b1.id < b2.id"),
    "NEG_BEST": "SELECT -MAX(price) AS neg_best, COALESCE(MIN(price), -1) AS worst FROM bids",
    "CAPPED": "SELECT LEAST(MAX(price), 200000) AS capped, GREATEST(SUM(volume), 1000) AS floor_vol FROM asks",
    "NEAR_TOUCH_SUM": ("SELECT SUM(CASE WHEN price >= (SELECT MAX(price) FROM bids) * 0.99 THEN volume ELSE 0 END)\n"
                       "       AS near_touch_sum FROM bids"),
    "BIG_ORDERS": "SELECT SUM(volume) AS big_orders FROM bids WHERE volume > 0.5 * (SELECT AVG(volume) FROM bids)",
    "NULLIF_VOL": "SELECT SUM(NULLIF(volume, 100)) AS nullif_vol, COUNT(NULLIF(volume, 100)) AS n_not100 FROM asks",
    "BROKER_RANGE": ("SELECT broker_id, MAX(price) - MIN(price) AS broker_range FROM asks GROUP BY broker_id\n"
                     "HAVING COUNT(*) > 1 AND AVG(volume) >= 10"),
    "EMPTY_BAND": "SELECT COUNT(*) AS empty_band FROM bids WHERE price BETWEEN 300000 AND 100000",
    "NOT_NULL_PX": "SELECT COUNT(*) AS not_null_px FROM asks WHERE price IS NOT NULL AND volume IS NOT NULL",
    "DISTINCT_BROKERS_PAIRED": ("SELECT COUNT(DISTINCT b.broker_id) AS distinct_brokers_paired FROM bids b, asks a\n"
                                "WHERE a.broker_id = b.broker_id"),
    "NOTIONAL": 'SELECT SUM("PRICE" * "Volume") AS "Notional" FROM "BIDS"',
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_BEST": "SELECT symbol, MAX(price) AS sym_best, COUNT(*) AS n FROM bids GROUP BY symbol",
    "SYM_SPREAD": ("SELECT b.symbol, (SELECT MIN(a.price) FROM asks a WHERE a.symbol = b.symbol) - MAX(b.price) "
    "AS sym_spread\n"
                   "FROM bids b GROUP BY b.symbol"),
    "SYM_TOUCH": ("SELECT b.symbol, SUM(b.volume) AS sym_touch FROM bids b\n"
                  "WHERE b.price = (SELECT MAX(b2.price) FROM bids b2 WHERE b2.symbol = b.symbol) GROUP BY b.symbol"),
    "SYM_TOP2": ("SELECT symbol, SUM(v) AS sym_top2 FROM (SELECT symbol, price, SUM(volume) AS v,\n"
                 "  ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY price DESC) AS rn FROM bids GROUP BY "
                 "symbol, price) t\n"
                 "WHERE rn <= 2 GROUP BY symbol"),
    "SYM_ASK_DEPTH": ("SELECT a.symbol, SUM(a.volume) AS sym_ask_depth FROM asks a\n"
                      "WHERE a.price <= 1.01 * (SELECT MIN(a2.price) FROM asks a2 WHERE a2.symbol = a.symbol) "
                      "GROUP BY a.symbol"),
}

REJECTED: dict[str, tuple[str, str]] = {
    # a NATURAL JOIN joins on every common column: it used to compile as a cross join
    "NATURAL": ("SELECT COUNT(*) AS natural_pairs FROM bids NATURAL JOIN asks", "NATURAL JOIN is not supported"),
    "ASOF": ("SELECT COUNT(*) AS asof_pairs FROM bids b ASOF JOIN asks a ON a.t >= b.t", "ASOF JOIN is not supported"),
    "LEFT": ("SELECT COUNT(*) AS left_pairs FROM bids b LEFT JOIN asks a ON a.broker_id = b.broker_id",
             "LEFT JOIN is not supported"),
    "UNION": ("SELECT SUM(volume) AS u FROM bids UNION SELECT SUM(volume) AS u FROM asks", "not UNION"),
    "LAG": ("SELECT SUM(d) AS lagged FROM (SELECT price - LAG(price) OVER (ORDER BY t) AS d FROM bids) x",
            "window function"),
    "STDDEV": ("SELECT STDDEV(price) AS sd FROM bids", "unsupported expression (STDDEV)"),
    "MAX_BELOW": ("SELECT SUM(b1.volume) AS s FROM bids b1\n"
                  "WHERE b1.price > (SELECT MAX(b2.price) FROM bids b2 WHERE b2.price < b1.price)",
                  "correlated other than by equality"),
    "USING": ("SELECT COUNT(*) AS using_pairs FROM bids b JOIN asks a USING (broker_id)", "USING is not supported"),
    # plain columns beside an aggregate: SQL (DuckDB) refuses it, so does ddms
    "ONE_ROW_AND_AGG": ("SELECT bb.p AS one_row_and_agg, COUNT(*) AS n FROM (SELECT MAX(price) AS p FROM bids) bb",
                        "cannot be used here"),
    "NO_AGG_CTE": ("WITH x AS (SELECT price, volume FROM bids) SELECT x.price * 2 AS dbl FROM x",
                   "a view needs an aggregate output"),
}
