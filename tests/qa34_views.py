"""The qa34 outside check's views: 40+ views in shapes the qa32 and qa33 families do not have
(nested CASE inside MIN/MAX, HAVING over MIN/MAX and COUNT(DISTINCT), top-N per broker by
PARTITION BY, IN-lists, NOT EXISTS correlated on two columns, COALESCE over empty scalar
subqueries, arithmetic of several scalar subqueries without FROM, CTEs used twice, LIMIT with
OFFSET, ascending ORDER BY on asks, NULLIF divisions, integer %, BETWEEN, bids-asks joins), written
by a user who read only the README.

The form is qa33's: ``VIEWS`` (over ``bids``/``asks`` of ``test_sql_minmax.HEADER``) and
``SYMBOL_VIEWS`` (with ``symbol`` of ``test_symbols.SYM_HEADER``) map a name to the SELECT DuckDB
runs; ddms compiles ``CREATE VIEW <name> AS <SELECT>`` (:func:`as_view`).  ``REJECTED``: name ->
(SQL, part of the located reason)."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # --- nested CASE inside MIN / MAX ----------------------------------------------------------
    "BID_NESTED_CASE_MAX": "SELECT MAX(CASE WHEN volume >= 20 THEN CASE WHEN broker_id % 2 = 0 THEN price "
                           "ELSE price - 1 END END) AS m FROM bids",
    "ASK_CASE_MIN_GROUPED": "SELECT broker_id, MIN(CASE WHEN volume > 10 THEN price ELSE price + 1000 END) AS adj, "
                            "MAX(CASE WHEN price > 100 THEN volume END) AS vhi FROM asks GROUP BY broker_id",
    "MAX_OF_GREATEST": "SELECT MAX(GREATEST(price, volume)) AS g, MIN(LEAST(price, volume * 10)) AS l FROM bids",
    # --- HAVING over MIN / MAX and COUNT(DISTINCT) ---------------------------------------------
    "BROKERS_MULTI_LEVEL": "SELECT broker_id, MAX(price) AS hi FROM bids GROUP BY broker_id "
                           "HAVING COUNT(DISTINCT price) >= 2",
    "ASK_BROKERS_TIGHT": "SELECT broker_id, COUNT(*) AS n, MIN(price) AS lo FROM asks GROUP BY broker_id "
                         "HAVING MIN(price) < 150 AND MAX(volume) >= 10",
    "PRICE_LEVEL_BROKERS": "SELECT price, COUNT(DISTINCT broker_id) AS nb, SUM(volume) AS v FROM bids "
                           "GROUP BY price HAVING COUNT(DISTINCT broker_id) > 1",
    "HAVING_MAX_VS_AVG": "SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY broker_id "
                         "HAVING MAX(volume) > 2 * AVG(volume)",
    # --- top-N per broker (PARTITION BY) --------------------------------------------------------
    "BROKER_TOP2_BIDS": "SELECT broker_id, COUNT(*) AS n, SUM(price) AS sp FROM (SELECT broker_id, price, "
                        "ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) x "
                        "WHERE rn <= 2 GROUP BY broker_id",
    "BROKER_BEST_ASK_ORDER": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, ROW_NUMBER() "
                             "OVER (PARTITION BY broker_id ORDER BY price ASC, id ASC) AS rn FROM asks) x "
                             "WHERE x.rn = 1 GROUP BY broker_id",
    "BROKER_RANK_ASKS": "SELECT broker_id, MAX(price) AS hi, COUNT(*) AS n FROM (SELECT broker_id, price, "
                        "RANK() OVER (PARTITION BY broker_id ORDER BY price) AS rk FROM asks) z "
                        "WHERE rk < 3 GROUP BY broker_id",
    # --- IN-lists --------------------------------------------------------------------------------
    "ASK_VOL_IN_LIST": "SELECT SUM(volume) AS v, COUNT(*) AS n FROM asks WHERE price IN (100, 101, 102) "
                       "AND broker_id NOT IN (3)",
    "BID_CASE_IN": "SELECT SUM(CASE WHEN broker_id IN (1, 2) THEN volume ELSE -volume END) AS net FROM bids",
    "GROUPED_IN_LIST": "SELECT broker_id, MAX(price) AS hi FROM asks WHERE broker_id IN (0, 2, 4, 6, 8) "
                       "GROUP BY broker_id",
    # --- EXISTS / NOT EXISTS correlated on two columns --------------------------------------------
    "UNMATCHED_BIDS": "SELECT COUNT(*) AS n FROM bids b WHERE NOT EXISTS (SELECT 1 FROM asks a "
                      "WHERE a.broker_id = b.broker_id AND a.price = b.price)",
    "EXISTS_TWO_COL": "SELECT broker_id, SUM(volume) AS v FROM asks a WHERE EXISTS (SELECT * FROM bids b "
                      "WHERE b.broker_id = a.broker_id AND b.volume = a.volume) GROUP BY broker_id",
    "NOT_EXISTS_SAME_ID": "SELECT SUM(a.volume) AS v, MAX(a.price) AS hi FROM asks a WHERE NOT EXISTS "
                          "(SELECT 1 FROM bids b WHERE b.id = a.id AND b.broker_id = a.broker_id)",
    # --- COALESCE over (possibly empty) scalar subqueries ------------------------------------------
    "COALESCE_FAR": "SELECT COALESCE((SELECT MAX(price) FROM bids WHERE price > 1000000), "
                    "(SELECT MIN(price) FROM asks), -1) AS x",
    "COALESCE_EMPTY_SUM": "SELECT COALESCE((SELECT SUM(volume) FROM asks WHERE price < 0), 0) + "
                          "COALESCE((SELECT MAX(volume) FROM bids WHERE broker_id = 99), 0) AS x",
    "COALESCE_IN_WHERE": "SELECT COUNT(*) AS n FROM bids WHERE price >= COALESCE((SELECT MIN(price) FROM asks), 0)",
    # --- arithmetic of several scalar subqueries, no FROM -------------------------------------------
    "BOOK_SUMMARY": "SELECT (SELECT MAX(price) FROM bids) * 2 - (SELECT MIN(price) FROM asks) + "
                    "(SELECT COUNT(*) FROM bids) / NULLIF((SELECT COUNT(*) FROM asks), 0) AS x, "
                    "(SELECT MAX(volume) FROM asks) - (SELECT MIN(volume) FROM bids) AS dv",
    "RATIO_OF_MAXES": "SELECT (SELECT MAX(volume) FROM bids) / (SELECT AVG(volume) FROM bids) AS peak, "
                      "ABS((SELECT MIN(price) FROM asks) - (SELECT AVG(price) FROM asks)) AS dev",
    # --- CTEs used twice ----------------------------------------------------------------------------
    "CTE_TWICE": "WITH lv AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price) "
                 "SELECT (SELECT MAX(v) FROM lv) - (SELECT MIN(v) FROM lv) AS spread_v",
    "CTE_BEST_TWICE": "WITH best AS (SELECT MAX(price) AS p FROM bids) SELECT COUNT(*) AS n FROM bids b, best "
                      "WHERE b.price >= best.p - 2 AND b.price <= (SELECT p FROM best)",
    "CTE_ABOVE_AVG_BROKER": "WITH bv AS (SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id) "
                            "SELECT COUNT(*) AS n, SUM(x.v) AS tot FROM bv x WHERE x.v > (SELECT AVG(v) FROM bv)",
    # --- LIMIT with OFFSET, ascending ORDER BY on asks ----------------------------------------------
    "ASK_LEVELS_3_TO_5": "SELECT SUM(l.v) AS v FROM (SELECT price, SUM(volume) AS v FROM asks GROUP BY price "
                         "ORDER BY price LIMIT 3 OFFSET 2) l",
    "BID_LADDER_OFFSET": "SELECT price, COUNT(*) AS n FROM bids GROUP BY price ORDER BY price DESC LIMIT 2 OFFSET 1",
    "ASK_ORDERS_OFFSET": "SELECT id, price, volume FROM asks ORDER BY price ASC, id DESC LIMIT 4 OFFSET 2",
    "ASK_TOP3_NOTIONAL": "SELECT SUM(x.price * x.volume) AS notional FROM (SELECT price, volume FROM asks "
                         "ORDER BY price ASC, id ASC LIMIT 3) x",
    "ASK_ROWNUM_ASC": "SELECT MAX(x.price) AS third_px, SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v, "
                      "ROW_NUMBER() OVER (ORDER BY price ASC) AS rn FROM asks GROUP BY price) x WHERE x.rn <= 3",
    # --- NULLIF divisions -----------------------------------------------------------------------------
    "NULLIF_VWAP": "SELECT SUM(price * volume) / NULLIF(SUM(volume), 0) AS vwap, "
                   "COUNT(*) / NULLIF(COUNT(DISTINCT broker_id), 0) AS per_broker FROM asks",
    "BROKER_SHARE_NULLIF": "SELECT broker_id, SUM(volume) / NULLIF((SELECT SUM(volume) FROM asks), 0) AS share "
                           "FROM bids GROUP BY broker_id",
    "NULLIF_INSIDE": "SELECT SUM(volume / NULLIF(broker_id, 0)) AS s, MAX(price / NULLIF(volume - 10, 0)) AS m "
                     "FROM bids",
    # --- integer % ------------------------------------------------------------------------------------
    "BROKER_MOD3": "SELECT broker_id % 3 AS k, SUM(volume) AS v FROM bids GROUP BY broker_id % 3",
    "ID_PARITY_EXTREMES": "SELECT MAX(CASE WHEN id % 2 = 1 THEN price END) AS odd_best, "
                          "MIN(CASE WHEN id % 2 = 0 THEN price END) AS even_worst FROM bids",
    "ID_MOD_COUNT": "SELECT COUNT(*) AS n FROM asks WHERE (id + broker_id) % 4 = 1",
    # --- BETWEEN --------------------------------------------------------------------------------------
    "BID_BAND_BETWEEN": "SELECT broker_id, COUNT(*) AS n FROM bids WHERE price BETWEEN 100 AND 150 "
                        "AND volume NOT BETWEEN 10 AND 20 GROUP BY broker_id",
    "ASK_NEAR_BEST_BETWEEN": "SELECT SUM(volume) AS v FROM asks WHERE price BETWEEN (SELECT MIN(price) FROM asks) "
                             "AND (SELECT MIN(price) FROM asks) + 2",
    "CASE_BETWEEN_SCORE": "SELECT SUM(CASE WHEN volume BETWEEN 5 AND 15 THEN 1 WHEN volume BETWEEN 16 AND 30 "
                          "THEN 2 ELSE 3 END) AS score FROM asks",
    # --- joins mixing bids and asks --------------------------------------------------------------------
    "CROSS_PAIRS_BY_PRICE": "SELECT b.price, COUNT(*) AS n, SUM(a.volume) AS av FROM bids b JOIN asks a "
                            "ON a.price <= b.price GROUP BY b.price",
    "BROKER_NET": "SELECT b.broker_id, SUM(b.volume) - (SELECT COALESCE(SUM(a.volume), 0) FROM asks a "
                  "WHERE a.broker_id = b.broker_id) AS net FROM bids b GROUP BY b.broker_id",
    "JOIN_MAX_MIN": "SELECT a.broker_id, MAX(b.price) AS bb, MIN(a.price) AS ba, COUNT(DISTINCT b.id) AS nb "
                    "FROM asks a JOIN bids b ON a.broker_id = b.broker_id AND a.volume >= b.volume "
                    "GROUP BY a.broker_id",
    "JOIN_SAME_LEVEL": "SELECT SUM(b.volume * a.volume) AS x, MAX(b.price) AS p FROM bids b, asks a "
                       "WHERE b.price = a.price",
    # --- a second round: functions, signs, NULLs in lists, a CTE joined with itself ----------------
    "SCALAR_OF_CTES": "WITH bb AS (SELECT MAX(price) AS p FROM bids), ba AS (SELECT MIN(price) AS p FROM asks) "
                      "SELECT COUNT(*) AS n FROM asks WHERE price <= (SELECT ba.p + (ba.p - bb.p) FROM bb, ba)",
    "NEG_MOD_GROUPS": "SELECT (broker_id - 5) % 3 AS k, COUNT(*) AS n FROM bids GROUP BY 1",
    "FLOAT_MOD": "SELECT SUM(price % 7) AS s, MAX(-price % 7) AS m FROM asks",
    "ROUND_HALVES": "SELECT SUM(ROUND(volume / 2)) AS s, SUM(ROUND(-volume / 2)) AS t FROM bids",
    "ROUND_NEG_DIGITS": "SELECT broker_id, ROUND(SUM(volume), -1) AS v10 FROM asks GROUP BY broker_id",
    "MAX_CASE_SCALAR": "SELECT MAX(CASE WHEN price < (SELECT MIN(price) FROM asks) THEN price END) AS uncrossed_best "
                       "FROM bids",
    "SUM_COALESCE_CASE": "SELECT SUM(COALESCE(CASE WHEN volume > 20 THEN volume END, 0)) AS big, "
                         "COUNT(CASE WHEN volume > 20 THEN 1 END) AS nbig FROM asks",
    "NOT_IN_WITH_NULL": "SELECT COUNT(*) AS n FROM bids WHERE broker_id NOT IN (1, NULL)",
    "NOT_AND_EMPTY_SCALAR": "SELECT COUNT(*) AS n FROM bids WHERE NOT (price > (SELECT MIN(price) FROM asks) "
                            "AND volume > 5)",
    "NOT_IN_NULLIF": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(broker_id, 1) NOT IN (2, 3)",
    "NOT_OR_NULLIF": "SELECT SUM(volume) AS v FROM asks WHERE NOT (NULLIF(volume, 10) < 5 OR price > 150)",
    "HAVING_NOT_NULL_AVG": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id "
                           "HAVING NOT (SUM(volume) / NULLIF(COUNT(*), 1) > 20)",
    "CASE_NOT_OVER_AGGS": "SELECT broker_id, CASE WHEN NOT (MAX(volume) / NULLIF(MIN(volume), 10) >= 2 OR "
                          "COUNT(*) > 3) THEN 1 ELSE 0 END AS flag, SUM(volume) AS v FROM asks GROUP BY broker_id",
    "IN_WITH_NULL": "SELECT COUNT(*) AS n FROM bids WHERE broker_id IN (1, NULL)",
    "COUNT_DISTINCT_EXPR": "SELECT COUNT(DISTINCT price * 2 + broker_id) AS n, COUNT(DISTINCT volume % 5) AS m "
                           "FROM bids",
    "SCALAR_MOD": "SELECT (SELECT COUNT(*) FROM bids) % 3 AS r, (SELECT SUM(volume) FROM asks) % 10 AS s",
    "WORST_ASKS_DESC": "SELECT SUM(x.volume) AS v FROM (SELECT volume FROM asks ORDER BY price DESC, id LIMIT 2) x",
    "CTE_SELF_JOIN": "WITH lv AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price) "
                     "SELECT COUNT(*) AS n, SUM(a.v - b.v) AS d FROM lv a, lv b WHERE a.price = b.price + 1",
    "MIN_OVER_JOIN_EMPTY": "SELECT MIN(a.price - b.price) AS gap, MAX(b.volume + a.volume) AS vv FROM bids b "
                           "JOIN asks a ON a.id = b.id",
    # --- three-valued NOT IN over subqueries, IN-lists in HAVING ---------------------------------
    "NOT_IN_SUB_NULLABLE": "SELECT COUNT(*) AS n FROM bids WHERE broker_id NOT IN "
                           "(SELECT NULLIF(a.broker_id, 1) FROM asks a)",
    "NULLABLE_NOT_IN_SUB": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(broker_id, 2) NOT IN "
                           "(SELECT a.broker_id FROM asks a)",
    "NEQ_ALL_NULLABLE": "SELECT COUNT(*) AS n FROM bids WHERE price <> ALL (SELECT NULLIF(a.price, 100) FROM asks a)",
    "HAVING_IN_LIST": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING COUNT(*) IN (1, 2)",
    "HAVING_NOT_IN_LIST": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id "
                          "HAVING NOT (MAX(volume) / NULLIF(MIN(volume), 5) IN (1, 2))",
    "NOT_BETWEEN_NULLIF": "SELECT COUNT(*) AS n FROM asks WHERE NOT (price BETWEEN NULLIF(volume, 10) AND 150)",
    "NOT_EXISTS_OR_NULL": "SELECT COUNT(*) AS n FROM bids b WHERE NOT (EXISTS (SELECT 1 FROM asks a "
                          "WHERE a.broker_id = b.broker_id) OR b.volume / NULLIF(b.volume - 10, 0) > 1)",
    "COALESCE_NOT_IN": "SELECT COUNT(*) AS n FROM bids WHERE COALESCE(NULLIF(broker_id, 1), 9) NOT IN (9, 2)",
    "NOT_ABOVE_EMPTY_AVG": "SELECT COUNT(*) AS n FROM bids WHERE NOT (price > (SELECT AVG(a.price) FROM asks a "
                           "WHERE a.volume > 1000))",
    "SUM_CASE_NOT_OR": "SELECT broker_id, SUM(CASE WHEN NOT (volume / NULLIF(volume - 10, 0) > 1 OR price > 150) "
                       "THEN 1 ELSE 0 END) AS k FROM bids GROUP BY broker_id",
    # --- a fourth round: k-th rows, EXISTS of an aggregate, two top-Ns, aggregates of aggregates ----
    "SECOND_PER_BROKER": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, ROW_NUMBER() OVER "
                         "(PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) x WHERE rn = 2 "
                         "GROUP BY broker_id",
    "THIRD_ASK_LEVEL": "SELECT MAX(x.price) AS p, SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() "
                       "OVER (ORDER BY price) AS rn FROM asks GROUP BY price) x WHERE x.rn = 3",
    "EXISTS_OF_AGGREGATE": "SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT MAX(a.price) FROM asks a "
                           "WHERE a.broker_id = b.broker_id)",
    "NOT_EXISTS_OF_COUNT": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM bids b WHERE NOT EXISTS "
                           "(SELECT COUNT(*) FROM asks a WHERE a.broker_id = b.broker_id)",
    "GROUP_MAX_ALL_NULL": "SELECT broker_id, MAX(CASE WHEN volume > 35 THEN price END) AS m, COUNT(*) AS n FROM bids "
                          "GROUP BY broker_id",
    "CAST_NEG_HALF": "SELECT SUM(CAST(-volume / 2 AS INTEGER)) AS s, SUM(CAST(volume / 2 AS BIGINT)) AS t FROM bids",
    "COUNT_DISTINCT_CASE": "SELECT COUNT(DISTINCT CASE WHEN volume > 10 THEN broker_id END) AS nb, "
                           "SUM(DISTINCT NULLIF(volume, 10)) AS sv FROM asks",
    "TWO_TOPNS": "SELECT SUM(b.v * a.v) AS x FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
                 "ORDER BY price DESC LIMIT 2) b, (SELECT price, SUM(volume) AS v FROM asks GROUP BY price "
                 "ORDER BY price LIMIT 2) a",
    "COUNT_DISTINCT_PAIRS": "SELECT COUNT(*) AS n FROM (SELECT DISTINCT broker_id, price FROM bids) d",
    "CTE_JOIN_ASKS": "WITH bb AS (SELECT broker_id, MAX(price) AS p FROM bids GROUP BY broker_id) "
                     "SELECT COUNT(*) AS n, SUM(a.volume) AS v FROM asks a JOIN bb "
                     "ON bb.broker_id = a.broker_id AND a.price <= bb.p",
    "MAX_OF_COUNTS": "SELECT MAX(x.n) AS mx, MIN(x.n) AS mn FROM (SELECT broker_id, COUNT(*) AS n FROM bids "
                     "GROUP BY broker_id) x",
    "NOT_IN_CORRELATED": "SELECT COUNT(*) AS n FROM bids b WHERE b.price NOT IN (SELECT a.price FROM asks a "
                         "WHERE a.broker_id = b.broker_id)",
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_CROSSED_N": "SELECT b.symbol, COUNT(*) AS n FROM bids b WHERE b.price >= "
                     "(SELECT MIN(a.price) FROM asks a WHERE a.symbol = b.symbol) GROUP BY b.symbol",
    "SYM_LEVELS_HAVING": "SELECT symbol, COUNT(DISTINCT price) AS lv, MAX(price) - MIN(price) AS rng FROM asks "
                         "GROUP BY symbol HAVING COUNT(*) >= 2",
    "SYM_MID": "SELECT a.symbol, (MIN(a.price) + (SELECT MAX(b.price) FROM bids b WHERE b.symbol = a.symbol)) / 2 "
               "AS mid FROM asks a GROUP BY a.symbol",
    "SYM_TOP_ASK_ORDERS": "SELECT symbol, SUM(volume) AS v FROM (SELECT symbol, volume, ROW_NUMBER() OVER "
                          "(PARTITION BY symbol ORDER BY price ASC, id) AS rn FROM asks) x WHERE rn <= 2 "
                          "GROUP BY symbol",
    "SYM_BROKER_N": "SELECT symbol, broker_id, COUNT(*) AS n FROM bids WHERE broker_id IN (1, 2, 3) "
                    "GROUP BY symbol, broker_id",
    "SYM_TOUCH_NESTED": "SELECT b.symbol, SUM(b.volume) AS v FROM bids b WHERE b.price = (SELECT MAX(b2.price) "
                        "FROM bids b2 WHERE b2.symbol = b.symbol AND b2.price < (SELECT MIN(a.price) FROM asks a "
                        "WHERE a.symbol = b2.symbol)) GROUP BY b.symbol",
}

REJECTED: dict[str, tuple[str, str]] = {
    # accepted until qa36, which found the groups HAVING drops shown as rows of 0 in the cut (hidden
    # here by the comparison dropping all-zero rows, and by DESC putting the zeros last)
    "TOPN_HAVING_DISTINCT": ("SELECT broker_id, COUNT(DISTINCT price) AS lv FROM asks GROUP BY broker_id "
                             "HAVING COUNT(*) > 1 ORDER BY lv DESC, broker_id LIMIT 3",
                             "HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported"),
    "TOP_BROKERS_HAVING": ("SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY broker_id HAVING COUNT(*) > 1 "
                           "ORDER BY v DESC, broker_id LIMIT 2",
                           "HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported"),
    # was read as a plain BETWEEN (a reversed range: nothing kept), where SQL's SYMMETRIC swaps the bounds
    "BETWEEN_SYMMETRIC": ("SELECT COUNT(*) AS n FROM asks WHERE price BETWEEN SYMMETRIC 150 AND 100",
                          "BETWEEN SYMMETRIC is not supported"),
    "ORDERS_BY_HIDDEN_PRICE": ("SELECT id, volume FROM asks ORDER BY price ASC, id DESC LIMIT 4 OFFSET 2",
                               "select price: rows of orders are keyed by the columns they are ordered"),
    "STRING_IN_LIST": ("SELECT COUNT(*) AS n FROM bids WHERE broker_id IN ('1', '2')",
                       "broker_id is not a VARCHAR column"),
    "SQRT": ("SELECT SUM(SQRT(volume)) AS r FROM bids", "unsupported expression (SQRT)"),
    "HAVING_IN_FROM": ("SELECT COUNT(*) AS n FROM (SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id "
                       "HAVING SUM(volume) > 50) x", "HAVING is supported in a view's top-level SELECT only"),
}


def as_view(name: str, sql: str) -> str:
    """The view as a user names it in a file of several views."""
    return f"CREATE VIEW {name} AS {sql}"
