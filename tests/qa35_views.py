"""The qa35 outside check's views: 50+ views in shapes the qa32, qa33 and qa34 families do not
have (nested CASE with NULL branches inside SUM/COUNT/AVG/MIN, COALESCE chains over MIN/MAX of
possibly empty books, divisions by differences of aggregates that can be 0, correlated
subqueries on broker_id with inequalities, bids x asks and bids x bids joins with conditions on
both sides, ROW_NUMBER per broker with a WHERE on another column, LIMIT .. OFFSET over groups,
DISTINCT inside AVG/MAX/SUM of expressions, HAVING with OR and NOT, GROUP BY CASE, chains of two
CTEs, IN-lists holding NULL or a column, COUNT(col) against COUNT(*), AVG of expressions, % on
ids, negative constants, BETWEEN over expressions and scalars, EXISTS twice), written the way a
trader or quant writes them.

The form is qa34's: ``VIEWS`` (over ``bids``/``asks`` of ``test_sql_minmax.HEADER``) and
``SYMBOL_VIEWS`` (with ``symbol`` of ``test_symbols.SYM_HEADER``) map a name to the SELECT DuckDB
runs; ddms compiles ``CREATE VIEW <name> AS <SELECT>`` (:func:`as_view`).  ``REJECTED``: name ->
(SQL, part of the located reason)."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # --- nested CASE with NULL branches inside aggregates ----------------------------------------
    "SUM_NESTED_CASE_NULL": "SELECT SUM(CASE WHEN volume > 20 THEN CASE WHEN price > 100 THEN volume END "
                            "ELSE NULL END) AS v, COUNT(CASE WHEN price > 100 THEN CASE WHEN volume <= 20 THEN 1 "
                            "END END) AS n FROM asks",
    "AVG_CASE_NULL_GROUPED": "SELECT broker_id, AVG(CASE WHEN volume > 10 THEN price END) AS ap, "
                             "COUNT(CASE WHEN volume > 10 THEN 1 END) AS n FROM bids GROUP BY broker_id",
    "MIN_MINUS_MAX_CASES": "SELECT MIN(CASE WHEN broker_id % 2 = 0 THEN price ELSE NULL END) - "
                           "MAX(CASE WHEN broker_id % 2 = 1 THEN price END) AS d FROM asks",
    "CASE_OF_CASE_SUM": "SELECT SUM(CASE WHEN (CASE WHEN volume > 20 THEN price END) > 100 THEN 1 ELSE 0 END) AS k "
                        "FROM bids",
    # --- COALESCE over MIN/MAX of possibly empty books ------------------------------------------
    "COALESCE_MID": "SELECT (COALESCE((SELECT MAX(price) FROM bids), (SELECT MIN(price) FROM asks)) + "
                    "COALESCE((SELECT MIN(price) FROM asks), (SELECT MAX(price) FROM bids))) / 2 AS mid",
    "COALESCE_GROUP_MAX": "SELECT broker_id, COALESCE(MAX(CASE WHEN price > 150 THEN volume END), -1) AS v "
                          "FROM bids GROUP BY broker_id",
    "COALESCE_BAND_WHERE": "SELECT SUM(volume) AS v FROM asks WHERE price <= COALESCE((SELECT MAX(price) FROM bids), "
                           "0) + 50",
    "COALESCE_AGG_CHAIN": "SELECT COALESCE(MAX(CASE WHEN volume > 35 THEN price END), "
                          "MAX(CASE WHEN volume > 20 THEN price END), -1) AS p FROM bids",
    # --- divisions by aggregates that can be 0 ---------------------------------------------------
    "DIV_BY_COUNT_DIFF": "SELECT ((SELECT SUM(volume) FROM bids) - (SELECT SUM(volume) FROM asks)) / "
                         "((SELECT COUNT(*) FROM bids) - (SELECT COUNT(*) FROM asks)) AS x",
    "SPREAD_OVER_SUM": "SELECT ((SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids)) / "
                       "((SELECT MIN(price) FROM asks) + (SELECT MAX(price) FROM bids) - 200) AS rel",
    "VOL_PER_LEVEL": "SELECT (SELECT SUM(volume) FROM bids WHERE price > 100) / "
                     "(SELECT COUNT(DISTINCT price) FROM bids WHERE price > 100) AS x",
    "AVG_RATIO_SUBS": "SELECT (SELECT AVG(volume) FROM bids) / (SELECT AVG(volume) FROM asks) - 1 AS x",
    "GROUP_DIV_BY_SUM_CASE": "SELECT broker_id, SUM(volume) / SUM(CASE WHEN price > 100 THEN volume ELSE 0 END) "
                             "AS r FROM asks GROUP BY broker_id",
    # --- correlated subqueries on broker_id with inequalities ------------------------------------
    "ASK_ABOVE_LOWER_BROKERS": "SELECT a.broker_id, SUM(a.volume) AS v FROM asks a WHERE a.volume > "
                               "(SELECT AVG(a2.volume) FROM asks a2 WHERE a2.broker_id < a.broker_id) "
                               "GROUP BY a.broker_id",
    "EXISTS_NEAR_SAME_BROKER": "SELECT b.broker_id, SUM(b.volume) AS v FROM bids b WHERE EXISTS (SELECT 1 FROM "
                               "asks a WHERE a.broker_id = b.broker_id AND a.price < b.price + 10) "
                               "GROUP BY b.broker_id",
    "CORR_COUNT_IN_SELECT": "SELECT b.broker_id, COUNT(*) AS n, (SELECT COUNT(*) FROM asks a "
                            "WHERE a.broker_id = b.broker_id) AS na FROM bids b GROUP BY b.broker_id",
    "ANY_CORRELATED": "SELECT COUNT(*) AS n FROM bids b WHERE b.price > ANY (SELECT a.price FROM asks a "
                      "WHERE a.broker_id = b.broker_id)",
    # --- joins with conditions on both sides -------------------------------------------------------
    "CROSSED_PAIRS": "SELECT COUNT(*) AS n, SUM(b.volume + a.volume) AS v FROM bids b JOIN asks a "
                     "ON b.price >= a.price AND b.broker_id <> a.broker_id WHERE b.volume > 5 AND a.volume > 5",
    "PAIR_GAP_BY_BROKER": "SELECT b.broker_id, MIN(a.price - b.price) AS gap FROM bids b, asks a "
                          "WHERE a.broker_id = b.broker_id AND a.price > b.price GROUP BY b.broker_id",
    "BID_SELF_BETTER": "SELECT b1.broker_id, COUNT(*) AS n FROM bids b1 JOIN bids b2 ON b2.price > b1.price "
                       "AND b2.broker_id = b1.broker_id GROUP BY b1.broker_id",
    "ASK_DEPTH_BELOW": "SELECT a1.broker_id, SUM(a2.volume) AS v FROM asks a1 JOIN asks a2 ON a2.price < a1.price "
                       "GROUP BY a1.broker_id",
    # --- ROW_NUMBER per broker -----------------------------------------------------------------------
    "BROKER_WORST_ASK": "SELECT broker_id, MAX(price) AS p FROM (SELECT broker_id, price, ROW_NUMBER() OVER "
                        "(PARTITION BY broker_id ORDER BY price DESC, id DESC) AS rn FROM asks) x WHERE rn = 1 "
                        "GROUP BY broker_id",
    "BROKER_TOP3_VWAP": "SELECT broker_id, SUM(price * volume) / SUM(volume) AS vw FROM (SELECT broker_id, price, "
                        "volume, ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) x "
                        "WHERE rn <= 3 GROUP BY broker_id",
    "TOP2_ALL_BROKERS": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER "
                        "(PARTITION BY broker_id ORDER BY price, id) AS rn FROM asks) x WHERE rn <= 2",
    "ROWNUM_AND_VOLUME": "SELECT broker_id, COUNT(*) AS n FROM (SELECT broker_id, volume, ROW_NUMBER() OVER "
                         "(PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) x "
                         "WHERE rn <= 2 AND volume > 10 GROUP BY broker_id",
    # --- LIMIT .. OFFSET -------------------------------------------------------------------------------
    "ASK_SKIP1_ORDERS": "SELECT SUM(x.volume) AS v, MIN(x.price) AS p FROM (SELECT price, volume FROM asks "
                        "ORDER BY price, id LIMIT 3 OFFSET 1) x",
    "SECOND_BID_LEVEL": "SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC LIMIT 1 OFFSET 1",
    "BROKERS_RANKED_OFFSET": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id ORDER BY n DESC, "
                             "broker_id LIMIT 3 OFFSET 1",
    # --- DISTINCT inside aggregates ------------------------------------------------------------------
    "AVG_DISTINCT_GROUPED": "SELECT broker_id, AVG(DISTINCT price) AS ap, COUNT(DISTINCT volume) AS nv FROM bids "
                            "GROUP BY broker_id",
    "SUM_DISTINCT_EXPR": "SELECT SUM(DISTINCT price - 100) AS s, MAX(DISTINCT volume) AS m FROM asks",
    "COUNT_DISTINCT_JOIN": "SELECT COUNT(DISTINCT a.broker_id) AS nb FROM asks a JOIN bids b ON a.price = b.price",
    # --- HAVING with OR / NOT --------------------------------------------------------------------------
    "HAVING_OR": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING SUM(volume) > 50 "
                 "OR COUNT(*) >= 3",
    "HAVING_NOT_AND": "SELECT broker_id, MIN(price) AS lo FROM asks GROUP BY broker_id "
                      "HAVING NOT (MIN(price) > 100 AND COUNT(*) = 1)",
    "HAVING_OR_NULL_MAX": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id "
                          "HAVING MAX(CASE WHEN volume > 30 THEN price END) > 100 OR NOT (SUM(volume) < 20)",
    # --- GROUP BY CASE ----------------------------------------------------------------------------------
    "GROUP_BY_CASE_BAND": "SELECT CASE WHEN price >= 150 THEN 2 WHEN price >= 100 THEN 1 ELSE 0 END AS band, "
                          "SUM(volume) AS v, COUNT(*) AS n FROM asks GROUP BY CASE WHEN price >= 150 THEN 2 "
                          "WHEN price >= 100 THEN 1 ELSE 0 END",
    "GROUP_BY_CASE_ORDINAL": "SELECT CASE WHEN volume > 20 THEN 1 ELSE 0 END AS big, broker_id % 2 AS par, "
                             "MAX(price) AS hi FROM bids GROUP BY 1, 2",
    # --- chains of two CTEs ------------------------------------------------------------------------------
    "CTE_CHAIN_LEVELS": "WITH lv AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price), "
                        "big AS (SELECT price, v FROM lv WHERE v > 20) SELECT COUNT(*) AS n, SUM(v) AS tot FROM big",
    "CTE_CHAIN_BEST": "WITH bb AS (SELECT MAX(price) AS p FROM bids), near AS (SELECT b.volume FROM bids b, bb "
                      "WHERE b.price >= bb.p - 2) SELECT SUM(volume) AS v FROM near",
    # --- IN-lists holding NULL or a column -------------------------------------------------------------
    "IN_NULL_IN_CASE": "SELECT SUM(CASE WHEN broker_id IN (2, NULL) THEN volume ELSE 0 END) AS v, "
                       "SUM(CASE WHEN broker_id NOT IN (2, NULL) THEN 1 ELSE 0 END) AS n FROM asks",
    "NOT_IN_COLUMN_LIST": "SELECT COUNT(*) AS n FROM asks WHERE price NOT IN (100, NULLIF(volume, 10))",
    "HAVING_NOT_IN_NULL": ("SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id "
                           "HAVING COUNT(*) NOT IN (1, NULL)"),
    # --- COUNT(col) against COUNT(*) ------------------------------------------------------------------
    "COUNT_COL_VS_STAR": "SELECT COUNT(*) AS n, COUNT(price) AS np, COUNT(NULLIF(broker_id, 0)) AS nb FROM bids",
    "COUNT_STAR_MINUS_COL": "SELECT broker_id, COUNT(*) - COUNT(NULLIF(volume, 10)) AS n10 FROM asks "
                            "GROUP BY broker_id",
    # --- AVG of expressions ---------------------------------------------------------------------------
    "AVG_NOTIONAL_DIST": "SELECT AVG(price * volume) AS an, AVG(price - (SELECT MIN(price) FROM asks)) AS dist "
                         "FROM asks",
    "AVG_CASE_ZERO_GROUP": "SELECT broker_id, AVG(CASE WHEN volume > 10 THEN volume ELSE 0 END) AS a FROM bids "
                           "GROUP BY broker_id",
    "AVG_MOD_DIV": "SELECT AVG(id % 3) AS a, AVG(volume / 4) AS b FROM bids",
    # --- % on ids, negative constants -----------------------------------------------------------------
    "ID_MOD_GROUPS": "SELECT id % 4 AS k, SUM(volume) AS v, MIN(price) AS lo FROM asks GROUP BY id % 4",
    "NEG_ID_MOD": "SELECT SUM((-id) % 3) AS s, COUNT(*) FILTER (WHERE (id - 5) % 2 = -1) AS n FROM bids",
    "NEG_CONST_CMP": "SELECT COUNT(*) AS n FROM bids WHERE -price < -100 AND volume - 20 > -5",
    "NEG_BETWEEN": "SELECT SUM(volume) AS v FROM asks WHERE price - 150 BETWEEN -50 AND -1",
    # --- BETWEEN over expressions and scalars -------------------------------------------------------
    "BETWEEN_COLS": "SELECT COUNT(*) AS n FROM bids WHERE price BETWEEN volume * 3 AND volume * 10",
    "BETWEEN_SUBS": "SELECT COUNT(*) AS n FROM bids WHERE price BETWEEN (SELECT MIN(price) FROM asks) - 50 "
                    "AND (SELECT MAX(price) FROM asks)",
    "NOT_BETWEEN_SCALARS": "SELECT SUM(volume) AS v FROM asks WHERE price NOT BETWEEN (SELECT MAX(price) FROM bids) "
                           "AND (SELECT MAX(price) FROM bids) + 50",
    # --- EXISTS twice -------------------------------------------------------------------------------
    "EXISTS_TWICE": "SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE a.broker_id = "
                    "b.broker_id) AND EXISTS (SELECT 1 FROM asks a2 WHERE a2.price = b.price)",
    "EXISTS_AND_NOT_EXISTS": "SELECT b.broker_id, SUM(b.volume) AS v FROM bids b WHERE EXISTS (SELECT 1 FROM asks a "
                             "WHERE a.broker_id = b.broker_id) AND NOT EXISTS (SELECT 1 FROM bids b2 "
                             "WHERE b2.broker_id = b.broker_id AND b2.price > b.price) GROUP BY b.broker_id",
    "EXISTS_OR_EXISTS": "SELECT COUNT(*) AS n FROM asks a WHERE EXISTS (SELECT 1 FROM bids b WHERE b.id = a.id) "
                        "OR EXISTS (SELECT 1 FROM bids b WHERE b.price = a.price)",
    # --- top-N with a WHERE on another column ------------------------------------------------------
    "TOPN_WHERE_VOLUME": "SELECT SUM(x.volume) AS v FROM (SELECT price, volume FROM bids WHERE volume > 10 "
                         "ORDER BY price DESC, id LIMIT 3) x",
    "LADDER_WHERE_BROKER": "SELECT price, SUM(volume) AS v FROM asks WHERE broker_id <> 3 GROUP BY price "
                           "ORDER BY price LIMIT 3",
    "ROWNUM_WHERE_INSIDE": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER "
                           "(ORDER BY price DESC) AS rn FROM bids WHERE broker_id % 2 = 0 GROUP BY price) x "
                           "WHERE x.rn <= 2",
    # --- odds and ends ------------------------------------------------------------------------------
    "BEHIND_BEST_GROUPED": "SELECT broker_id, MAX(price) - (SELECT MAX(price) FROM bids) AS behind FROM bids "
                           "GROUP BY broker_id",
    "CASE_ON_SCALAR_NULL": "SELECT CASE WHEN (SELECT MIN(price) FROM asks) > (SELECT MAX(price) FROM bids) THEN 1 "
                           "WHEN (SELECT MIN(price) FROM asks) IS NULL THEN -1 ELSE 2 END AS state",
    "GREATEST_OF_NULL": "SELECT GREATEST(MAX(CASE WHEN volume > 30 THEN price END), MIN(price)) AS g, "
                        "LEAST(MIN(CASE WHEN volume > 30 THEN price END), MAX(price)) AS l FROM asks",
    "ABS_SIGNED_SUM": "SELECT ABS(SUM(CASE WHEN broker_id < 5 THEN -volume ELSE volume END)) AS a FROM asks",
    "IS_NULL_OR": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(volume, 10) IS NULL OR price IS NULL",
    "ALL_EMPTY_SUB": "SELECT COUNT(*) AS n FROM bids WHERE price > ALL (SELECT price FROM asks WHERE volume > 1000)",
    "NOT_LE_EMPTY_MAX": "SELECT COUNT(*) AS n FROM bids WHERE NOT (price <= (SELECT MAX(price) FROM asks "
                        "WHERE volume > 30))",
    # --- a second round: precedence, simple CASE, FILTER, IN/EXISTS inside CASE, NULL corners ----
    "NOT_PRECEDENCE_HAVING": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING NOT COUNT(*) > 1",
    "AND_OR_NOT_PRECEDENCE": "SELECT COUNT(*) AS n FROM bids WHERE price > 100 AND NOT volume > 10 OR broker_id = 1",
    "BETWEEN_AND_PRECEDENCE": "SELECT COUNT(*) AS n FROM asks WHERE price BETWEEN 100 AND 150 AND volume > 10 "
                              "OR price = 1",
    "LEFT_ASSOC_ARITH": "SELECT SUM(volume - 10 - 5) AS a, SUM(price / 2 / 5) AS b, SUM(2 * volume % 7) AS c, "
                        "SUM(-volume % 3) AS d FROM bids",
    "IN_EXPR_LIST": "SELECT COUNT(*) AS n FROM asks WHERE price + 1 IN (101, 102, 103) AND NOT volume IN (1, 2)",
    "SIMPLE_CASE": "SELECT SUM(CASE broker_id WHEN 1 THEN volume WHEN 2 THEN -volume ELSE 0 END) AS x FROM bids",
    "SIMPLE_CASE_NULL": "SELECT SUM(CASE NULLIF(broker_id, 1) WHEN 1 THEN 100 WHEN 2 THEN volume ELSE 1 END) AS x "
                        "FROM asks",
    "SCI_LITERALS": "SELECT SUM(volume * 1e-1) AS a, SUM(price * .5) AS b, COUNT(*) FILTER (WHERE price > 1.5e2) AS c "
                    "FROM bids",
    "MOD_NEG_DIVISOR": "SELECT SUM(id % -3) AS s, SUM(price::INTEGER % 7) AS t FROM asks",
    "MAX_FILTER": "SELECT MAX(price) FILTER (WHERE volume > 20) AS hi, MIN(price) FILTER (WHERE broker_id IN (1, 3)) "
                  "AS lo FROM asks",
    "CORR_SCALAR_TIMES": "SELECT SUM(b.volume * (SELECT MAX(a.price) FROM asks a WHERE a.broker_id = b.broker_id)) "
                         "AS x FROM bids b",
    "JOIN_ON_NULLIF": "SELECT COUNT(*) AS n FROM bids b JOIN asks a ON NULLIF(a.broker_id, 1) = b.broker_id",
    "COUNT_DISTINCT_NULLIF": "SELECT COUNT(DISTINCT NULLIF(broker_id, 0)) AS n, AVG(DISTINCT NULLIF(volume, 10)) AS a "
                             "FROM bids",
    "HAVING_MIN_IS_NULL": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id "
                          "HAVING MIN(CASE WHEN volume > 30 THEN price END) IS NULL",
    "EQ_OR_VOLUME": "SELECT SUM(volume) AS v FROM bids WHERE price = (SELECT MAX(price) FROM bids) OR volume > 30",
    "NOT_IN_SUB_OR": "SELECT COUNT(*) AS n FROM bids WHERE NOT (broker_id IN (SELECT broker_id FROM asks) "
                     "OR price > 150)",
    "CASE_NOT_IN_SUB": "SELECT SUM(CASE WHEN price NOT IN (SELECT NULLIF(price, 100) FROM asks) THEN 1 ELSE 0 END) "
                       "AS n FROM bids",
    "CASE_EXISTS": "SELECT SUM(CASE WHEN EXISTS (SELECT 1 FROM asks a WHERE a.broker_id = b.broker_id) "
                   "THEN b.volume ELSE 0 END) AS v FROM bids b",
    "NULLIF_AVG_SCALAR": "SELECT 100 / NULLIF(AVG(volume) - 20, 0) AS x, COUNT(NULL) AS z FROM bids",
    "FLOOR_NEG": "SELECT SUM(FLOOR(-volume / 3)) AS a, SUM(CEIL(-price / 7)) AS b FROM asks",
    "AVG_OF_COUNTS_CTE": "WITH c AS (SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id) "
                         "SELECT AVG(n) AS a, SUM(n) / COUNT(*) AS b FROM c",
    "DISTINCT_PAIRS_SUM": "SELECT COUNT(*) AS n, SUM(d.broker_id) AS s FROM (SELECT DISTINCT broker_id, volume "
                          "FROM asks) d",
    # ORDER BY a position of the SELECT list (was refused: "names its output columns")
    "ORDINAL_TOPN": "SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 2",
    "ORDINAL_ORDERS": "SELECT id, price, volume FROM asks ORDER BY 2, 1 DESC LIMIT 3",
    "GREATEST_NULLIF": "SELECT SUM(GREATEST(volume, 10, NULLIF(broker_id, 0))) AS a FROM asks",
    # refused before qa37 (OFFSET without LIMIT in a subquery): exact now
    "ORDER_OFFSET_FROM": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
                        "ORDER BY price DESC OFFSET 2) x",
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_BROKER_BEST": "SELECT symbol, broker_id, MAX(price) AS hi FROM bids WHERE broker_id % 2 = 0 "
                       "GROUP BY symbol, broker_id",
    "SYM_CROSSED_PAIRS": "SELECT b.symbol, COUNT(*) AS n FROM bids b JOIN asks a ON a.symbol = b.symbol "
                         "AND a.price <= b.price GROUP BY b.symbol",
    "SYM_AVG_CASE": "SELECT symbol, AVG(CASE WHEN volume > 10 THEN price END) AS ap FROM asks GROUP BY symbol",
    "SYM_EXISTS_BOTH": "SELECT b.symbol, SUM(b.volume) AS v FROM bids b WHERE EXISTS (SELECT 1 FROM asks a "
                       "WHERE a.symbol = b.symbol AND a.broker_id = b.broker_id) GROUP BY b.symbol",
}

REJECTED: dict[str, tuple[str, str]] = {
    # a column list after an alias was dropped and the subquery's own names read: swapped, a wrong answer
    "SWAP_ALIAS": ("SELECT SUM(x.volume) AS s FROM (SELECT price, volume FROM asks ORDER BY price, id LIMIT 3) "
                   "AS x(volume, price)", "a column list after an alias (x(volume, price)) is not supported"),
    "CTE_COLUMN_LIST": ("WITH lv(volume, price) AS (SELECT price, SUM(volume) FROM bids GROUP BY price) "
                        "SELECT SUM(volume) AS s FROM lv", "a column list after an alias"),
    # OFFSET without LIMIT in a subquery was dropped (every row kept): a wrong answer
    "OFFSET_ONLY_FROM": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids OFFSET 2) x",
                         "OFFSET without ORDER BY"),
    # legal SQL without an exact incremental form here (yet): refused at the part
    "BELOW_OTHER_BROKERS": ("SELECT COUNT(*) AS n FROM bids b WHERE b.price < (SELECT MAX(b2.price) FROM bids b2 "
                            "WHERE b2.broker_id <> b.broker_id)", "correlated other than by equality"),
    "PLAIN_OVER_GROUPED_CTE": ("WITH bv AS (SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY broker_id), "
                               "tot AS (SELECT SUM(v) AS s FROM bv) SELECT bv.broker_id, bv.v / tot.s AS share "
                               "FROM bv, tot", "a view needs an aggregate output"),
    "DISTINCT_EXPRESSION": ("SELECT DISTINCT broker_id % 3 AS k FROM asks", "SELECT DISTINCT takes columns"),
    "EXISTS_HAVING": ("SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a "
                      "WHERE a.broker_id = b.broker_id HAVING COUNT(*) > 1)",
                      "EXISTS (SELECT ... GROUP BY / HAVING) is not supported"),
    "SCALAR_ORDER_LIMIT": ("SELECT (SELECT price FROM asks ORDER BY price, id LIMIT 1 OFFSET 1) AS p2",
                           "ORDER BY ... LIMIT is supported in a subquery in FROM"),
    "BOOL_CAST": ("SELECT SUM(CAST(volume > 10 AS INTEGER)) AS n FROM bids", "unsupported expression (GT)"),
    "ORDER_BY_PAST_END": ("SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY 1 ORDER BY 3 LIMIT 2",
                          "ORDER BY 3: the SELECT list has 2 columns"),
    "INTEGER_DIVIDE": ("SELECT SUM(id // 2) AS b FROM bids", "not valid SQL"),
}


def as_view(name: str, sql: str) -> str:
    """The view as a user names it in a file of several views."""
    return f"CREATE VIEW {name} AS {sql}"
