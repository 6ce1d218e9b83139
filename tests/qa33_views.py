"""The qa33 outside check's views: 40 more views a quant writes in the issue-21 shapes (MIN/MAX,
several outputs, HAVING, CASE, DISTINCT, EXISTS/IN, CTEs, top-N and ladders in both spellings,
OFFSET, GROUP BY expressions, FILTER, ROUND/CAST, ALL/ANY, arithmetic over scalar subqueries,
odd but legal spellings), written before reading ``tests/qa_views.py`` so as not to copy it.

``VIEWS`` (over ``bids``/``asks`` of ``test_sql_minmax.HEADER``) and ``SYMBOL_VIEWS`` (with the
``symbol`` column of ``test_symbols.SYM_HEADER``) map each view's name to its SQL; DuckDB runs the
same SELECT; each is compiled as ``CREATE VIEW <name> AS <SELECT>`` (:func:`as_view`).
``REJECTED`` maps a name to (SQL, part of the reason) for
views the compiler must refuse with ``file:line:column`` and a caret (SQL that has no exact
incremental form, or no deterministic answer)."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # --- MIN/MAX and several outputs ---------------------------------------------------------
    "ASK_BROKER_STATS": "SELECT broker_id, MIN(price) AS lo, MAX(price) AS hi, COUNT(*) AS n, "
                        "SUM(volume) AS vol FROM asks GROUP BY broker_id",
    "BID_PRICE_RANGE": "SELECT MAX(price) - MIN(price) AS rng, (MAX(price) + MIN(price)) * 0.5 AS centre "
                       "FROM bids",
    "SPREAD_BPS": "SELECT ((SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids)) * 10000 * 2 / "
                  "((SELECT MIN(price) FROM asks) + (SELECT MAX(price) FROM bids)) AS spread_bps",
    "BROKER_BEST_COUNT": "SELECT COUNT(*) AS n FROM bids b1 WHERE b1.price = "
                         "(SELECT MAX(b2.price) FROM bids b2 WHERE b2.broker_id = b1.broker_id)",
    "ASK_BAND_DEPTH": "SELECT SUM(volume) AS v, COUNT(*) AS n FROM asks "
                      "WHERE price <= (SELECT MIN(price) FROM asks) * 1.002",
    # --- HAVING ------------------------------------------------------------------------------
    "BUSY_BID_BROKERS": "SELECT broker_id, SUM(volume) AS vol FROM bids GROUP BY broker_id HAVING COUNT(*) >= 3",
    "WIDE_ASK_BROKERS": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id "
                        "HAVING MAX(price) - MIN(price) > 50",
    "BID_VOL_IF_DEEP": "SELECT SUM(volume) AS v FROM bids HAVING COUNT(*) > 4",
    # --- CASE --------------------------------------------------------------------------------
    "BID_SIZE_SPLIT": "SELECT SUM(CASE WHEN volume >= 100 THEN volume ELSE 0 END) AS big_vol, "
                      "SUM(CASE WHEN volume < 100 THEN 1 ELSE 0 END) AS small_n FROM bids",
    "ASK_VWAP_CASE": "SELECT CASE WHEN SUM(volume) > 0 THEN SUM(price * volume) / SUM(volume) END AS vwap "
                     "FROM asks",
    "BOOK_SIDE_SIGN": "SELECT CASE WHEN (SELECT SUM(volume) FROM bids) > (SELECT SUM(volume) FROM asks) "
                      "THEN 1 WHEN (SELECT SUM(volume) FROM bids) < (SELECT SUM(volume) FROM asks) "
                      "THEN -1 ELSE 0 END AS side",
    # --- DISTINCT ----------------------------------------------------------------------------
    "BID_DISTINCTS": "SELECT COUNT(DISTINCT price) AS levels, COUNT(DISTINCT broker_id) AS brokers FROM bids",
    "ASK_SUM_DISTINCT_PRICE": "SELECT broker_id, SUM(DISTINCT price) AS s, AVG(DISTINCT volume) AS av "
                              "FROM asks GROUP BY broker_id",
    "ASK_BROKERS_PRESENT": "SELECT DISTINCT broker_id FROM asks",
    # --- EXISTS / IN -------------------------------------------------------------------------
    "SELF_CROSS_N": "SELECT COUNT(*) AS n FROM bids b WHERE EXISTS "
                    "(SELECT 1 FROM asks a WHERE a.broker_id = b.broker_id AND a.price <= b.price)",
    "ONE_SIDED_BID_VOL": "SELECT SUM(b.volume) AS v FROM bids b WHERE NOT EXISTS "
                         "(SELECT * FROM asks a WHERE a.broker_id = b.broker_id)",
    "ASK_VOL_OF_BIG_BIDDERS": "SELECT SUM(volume) AS v FROM asks WHERE broker_id IN "
                              "(SELECT broker_id FROM bids WHERE volume > 150)",
    "BIDS_OUTSIDE_123": "SELECT COUNT(*) AS n FROM bids WHERE broker_id NOT IN (1, 2, 3)",
    "ASK_AT_BEST_IN": "SELECT SUM(volume) AS v FROM asks WHERE price IN (SELECT MIN(price) FROM asks)",
    # --- CTEs --------------------------------------------------------------------------------
    "TOUCH_VOL_CTE": "WITH best AS (SELECT MAX(price) AS p FROM bids) "
                     "SELECT SUM(b.volume) AS touch_vol FROM bids b, best WHERE b.price = best.p",
    "SPREAD_MID_CTE": "WITH bb AS (SELECT MAX(price) AS p FROM bids), ba AS (SELECT MIN(price) AS p FROM asks) "
                      "SELECT ba.p - bb.p AS spread, (ba.p + bb.p) / 2 AS mid FROM bb, ba",
    "LEVEL_STATS_CTE": "WITH lv AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price) "
                       "SELECT COUNT(*) AS levels, SUM(lv.v) AS depth FROM lv WHERE lv.v >= 50",
    # --- top-N, both spellings, OFFSET, ladders ----------------------------------------------
    "ASK_TOP3_LEVEL_VOL": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM asks "
                          "GROUP BY price ORDER BY price ASC LIMIT 3) x",
    "BID_TOP4_LEVEL_VWAP_RN": "SELECT SUM(x.price * x.v) / SUM(x.v) AS vw FROM (SELECT price, v, "
                              "ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM "
                              "(SELECT price, SUM(volume) AS v FROM bids GROUP BY price) l) x WHERE x.rn <= 4",
    "BID_LEVELS_3_TO_5": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids "
                         "GROUP BY price ORDER BY price DESC LIMIT 3 OFFSET 2) x",
    "ASK_TOP2_ORDERS": "SELECT SUM(o.volume) AS v, COUNT(*) AS n FROM (SELECT price, volume FROM asks "
                       "ORDER BY price, id LIMIT 2) o",
    "ASK_LADDER": "SELECT price, SUM(volume) AS v, COUNT(*) AS n FROM asks GROUP BY price "
                  "ORDER BY price LIMIT 4",
    "BID_ORDER_LADDER_OFFSET": "SELECT id, price, volume FROM bids ORDER BY price DESC, id LIMIT 3 OFFSET 1",
    "TOP_BROKERS_BY_VOL": "SELECT broker_id, SUM(volume) AS vol FROM bids GROUP BY broker_id "
                          "ORDER BY vol DESC, broker_id LIMIT 3",
    "BID_RANK_LE2_VOL": "SELECT SUM(r.volume) AS v FROM (SELECT volume, RANK() OVER (ORDER BY price DESC) "
                        "AS rk FROM bids) r WHERE r.rk <= 2",
    # --- GROUP BY expressions, FILTER, ROUND/CAST ------------------------------------------
    "ASK_BUCKETS": "SELECT FLOOR(price / 50) AS bucket, COUNT(*) AS n, SUM(volume) AS v FROM asks "
                   "GROUP BY FLOOR(price / 50)",
    "BID_SIZE_CLASS": "SELECT CASE WHEN volume >= 100 THEN 1 ELSE 0 END AS big, SUM(volume) AS v "
                      "FROM bids GROUP BY 1",
    "ASK_FILTERED": "SELECT COUNT(*) FILTER (WHERE volume > 100) AS big_n, "
                    "SUM(volume) FILTER (WHERE broker_id = 1) AS b1_vol FROM asks",
    "BID_AVG_ROUNDED": "SELECT broker_id, ROUND(AVG(price), 1) AS avgp, CEIL(AVG(volume)) AS avgv "
                       "FROM bids GROUP BY broker_id",
    "ASK_INT_TICKS": "SELECT SUM(CAST(price / 7 AS INTEGER)) AS s, SUM(TRUNC(volume / 3)) AS t FROM asks",
    # --- ALL / ANY, scalar subquery arithmetic ----------------------------------------------
    "BID_AT_BEST_ALL": "SELECT COUNT(*) AS n FROM bids WHERE price >= ALL (SELECT price FROM bids)",
    "BID_CROSSING_ANY": "SELECT SUM(b.volume) AS v FROM bids b WHERE b.price >= ANY (SELECT a.price FROM asks a)",
    "NET_AND_TOTAL": "SELECT (SELECT SUM(volume) FROM bids) - (SELECT SUM(volume) FROM asks) AS net, "
                     "(SELECT COUNT(*) FROM bids) + (SELECT COUNT(*) FROM asks) AS orders",
    # --- odd but legal spellings ------------------------------------------------------------
    "ODD_SPELLING": 'select sum ( "b"."volume" ) as "Odd_Spelling" from bids as "b" '
                    "where not (b.price < 100) and ((b.volume)) between 1 and 1e9",
    "JOIN_ON_BROKER": "SELECT b.broker_id, SUM(b.volume * a.volume) AS x, MAX(a.price - b.price) AS gap "
                      "FROM bids AS b INNER JOIN asks AS a ON a.broker_id = b.broker_id GROUP BY b.broker_id",
    # --- beyond the 40: a second round of harder shapes ---------------------------------------
    # a GROUP BY expression with a MAX and a nested aggregate in WHERE: the internal verifier's
    # "group variable K0 is neither bound nor bound by the aggregated expression" (the per-group
    # re-evaluation lost the key bound by the lift of FLOOR(...) inside its inner sum)
    "BUCKET_MAX_NEAR_TOP": "SELECT FLOOR(b.price / 100) * 100 AS bucket, SUM(b.volume) AS v, MAX(b.volume) AS mx "
                           "FROM bids b WHERE b.price > (SELECT MAX(price) FROM bids) * 0.9 GROUP BY bucket",
    "TOP2_LEVEL_IMBALANCE": "SELECT (SELECT SUM(x.v) FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
                            "ORDER BY price DESC LIMIT 2) x) - (SELECT SUM(y.v) FROM (SELECT price, SUM(volume) AS v "
                            "FROM asks GROUP BY price ORDER BY price LIMIT 2) y) AS imb2",
    "BROKER_ORDERS_2_TO_4": "SELECT x.broker_id, SUM(x.volume) AS v FROM (SELECT broker_id, volume, ROW_NUMBER() "
                            "OVER (PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) x "
                            "WHERE x.rn BETWEEN 2 AND 4 GROUP BY x.broker_id",
    "NESTED_CTES": "WITH lv AS (SELECT price, SUM(volume) AS v FROM asks GROUP BY price), "
                   "big AS (SELECT price FROM lv WHERE v > 100) SELECT COUNT(*) AS n FROM big",
    # legal spellings that were refused: an output alias in HAVING (DuckDB reads it as the
    # output, even where a FROM column has the name), GROUP BY ALL, FETCH FIRST n ROWS ONLY
    "BUSY_BROKERS_ALIAS": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING n > 1",
    "BIG_BROKERS_SHADOW": "SELECT broker_id, SUM(volume) AS volume FROM bids GROUP BY broker_id HAVING volume > 100",
    "SHADOW_INSIDE_AGG": "SELECT broker_id, SUM(volume) AS volume FROM bids GROUP BY broker_id "
                         "HAVING MAX(volume) > 60 AND volume > 100",
    "ASK_CELLS_GROUP_ALL": "SELECT FLOOR(price / 50) AS k, broker_id, SUM(volume) AS v FROM asks GROUP BY ALL",
    "BID_LADDER_FETCH": "SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC "
                        "FETCH FIRST 3 ROWS ONLY",
    "ASK_TOP2_FETCH": "SELECT SUM(x.v) AS s FROM (SELECT price, SUM(volume) AS v FROM asks GROUP BY price "
                      "ORDER BY price FETCH FIRST 2 ROWS ONLY) x",
    "ABOVE_BROKER_AVG": "SELECT COUNT(*) AS n FROM bids b WHERE b.volume > "
                        "(SELECT AVG(b2.volume) FROM bids b2 WHERE b2.broker_id = b.broker_id)",
    # refused before qa37 (IS [NOT] DISTINCT FROM, IS [NOT] TRUE/FALSE, GROUP BY ()): exact now
    "DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids WHERE broker_id IS DISTINCT FROM 3",
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_SPREAD": "SELECT a.symbol, MIN(a.price) - (SELECT MAX(b.price) FROM bids b WHERE b.symbol = a.symbol) "
                  "AS spread FROM asks a GROUP BY a.symbol",
    "SYM_TOP2_BID_LEVELS": "SELECT x.symbol, SUM(x.v) AS v FROM (SELECT symbol, price, SUM(volume) AS v, "
                           "ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY price DESC) AS rn FROM bids "
                           "GROUP BY symbol, price) x WHERE x.rn <= 2 GROUP BY x.symbol",
}

REJECTED: dict[str, tuple[str, str]] = {
    "ORDERS_NO_TIEBREAK": ("SELECT SUM(o.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC LIMIT 3) o",
                           "needs a unique tie-break"),
    "LIMIT_NO_ORDER": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids LIMIT 3) x",
                       "LIMIT without ORDER BY keeps arbitrary rows"),
    "TOP_BROKERS_NO_TIE": ("SELECT broker_id, SUM(volume) AS vol FROM bids GROUP BY broker_id "
                           "ORDER BY vol DESC LIMIT 3", "end the ORDER BY with the key column(s) broker_id"),
    "LEFT_JOIN": ("SELECT SUM(b.volume) AS v FROM bids b LEFT JOIN asks a ON a.broker_id = b.broker_id",
                  "LEFT JOIN is not supported"),
    "LAG": ("SELECT SUM(x.d) AS s FROM (SELECT price - LAG(price) OVER (ORDER BY price) AS d FROM bids) x",
            "window function"),
    "UNION_ALL": ("SELECT SUM(v) AS s FROM (SELECT volume AS v FROM bids UNION ALL SELECT volume AS v FROM asks) u",
                  "only SELECT subqueries are supported in FROM"),
    "MEDIAN": ("SELECT MEDIAN(price) AS m FROM bids", "unsupported expression (MEDIAN)"),
    "EPOCH_NOW": ("SELECT SUM(volume) AS v FROM bids WHERE t > EPOCH(NOW())",
                  "unsupported expression (function EPOCH)"),   # was "(ANONYMOUS)", sqlglot's class
    "NULL_KEY": ("SELECT price / broker_id AS r, COUNT(*) AS n FROM bids GROUP BY 1", "a key that can be NULL"),
    "MIN_CORRELATED_BELOW": ("SELECT COUNT(*) AS n FROM bids b WHERE b.price > (SELECT MIN(a.price) FROM asks a "
                             "WHERE a.broker_id < b.broker_id)", "correlated other than by equality"),
    "IN_GROUPED": ("SELECT SUM(volume) AS v FROM bids WHERE broker_id IN "
                   "(SELECT broker_id FROM asks GROUP BY broker_id HAVING COUNT(*) > 2)",
                   "IN (SELECT ...) with GROUP BY or HAVING is not supported"),
    "FETCH_WITH_TIES": ("SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC "
                        "FETCH FIRST 3 ROWS WITH TIES", "WITH TIES / PERCENT is not supported"),
    # a constant beside aggregates: was "the SELECT list may name GROUP BY columns ... only"
    "CONSTANT_COLUMN": ("SELECT SUM(volume) AS v, 1 AS one FROM bids", "a constant output column (one)"),
    "CONSTANT_GROUPED": ("SELECT broker_id, ROUND(-2.5) AS r, COUNT(*) AS n FROM bids GROUP BY broker_id",
                         "a constant output column (r)"),
}


def as_view(name: str, sql: str) -> str:
    """The view as a user names it in a file of several views."""
    return f"CREATE VIEW {name} AS {sql}"
