"""The qa37 outside check's views (issue 21): shapes the qa32..qa36 families do not have, written
the way a trader writes them -- MIN/MAX in correlated subqueries (in WHERE, SELECT, HAVING, NOT IN,
IS NULL), several outputs per view, HAVING on aggregates not selected (COUNT, AVG, COUNT(DISTINCT),
CASE sums, nullable MAX, BETWEEN, IN-lists, NOT), CASE inside aggregates with NULL branches,
COUNT/SUM/AVG(DISTINCT), correlated EXISTS / NOT EXISTS / IN / NOT IN (NULLs inside), ABS /
GREATEST / LEAST / COALESCE / NULLIF with NULLs, WITH chains, ``%`` on negatives, top-N in both
shapes (LIMIT/OFFSET in FROM, ROW_NUMBER/RANK/DENSE_RANK with PARTITION BY, ties), OFFSET on a view,
integer vs float division, aggregates compared with NULL, empty books, negative volumes, duplicate
ids across the sides, and per-symbol views over ``test_symbols.SYM_HEADER``.

Shapes qa37 made exact (refused before, legal SQL traders write): ``IS [NOT] DISTINCT FROM``
(symbols too), ``IS [NOT] TRUE/FALSE``, ``GROUP BY ()``, ``WHERE NULL`` / ``CASE WHEN NULL``, a
``LEFT JOIN`` of a one-row aggregate subquery ``ON TRUE`` (the cross join), ``rn > m`` /
``rn >= m`` (every row past the first m), ``OFFSET m`` without LIMIT in a subquery, and
``DENSE_RANK() <= n`` over one ORDER BY column.

The form is qa36's: ``VIEWS`` (over ``bids``/``asks`` of ``test_sql_minmax.HEADER``) and
``SYMBOL_VIEWS`` map a name to the SELECT DuckDB runs; ddms compiles ``CREATE VIEW <name> AS
<SELECT>`` (:func:`as_view`).  ``REJECTED``: name -> (SQL, part of the located reason) for legal SQL
without an exact incremental form here yet."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    "BID_ABOVE_OWN_MIN": "SELECT COUNT(*) AS n FROM bids b WHERE b.price > (SELECT MIN(b2.price) FROM bids b2 WHERE "
                         "b2.broker_id = b.broker_id)",
    "BROKER_TOP_VOL_AT_MAX": "SELECT b.broker_id, SUM(b.volume) AS v FROM bids b WHERE b.volume = (SELECT "
                             "MAX(b2.volume) FROM bids b2 WHERE b2.broker_id = b.broker_id) GROUP BY b.broker_id",
    "CORR_MIN_IN_SELECT": "SELECT b.broker_id, MAX(b.price) - (SELECT MIN(b2.price) FROM bids b2 WHERE b2.broker_id "
                          "= b.broker_id) AS rng FROM bids b GROUP BY b.broker_id",
    "CORR_MAX_PRICE_LEVEL": "SELECT COUNT(*) AS n FROM asks a WHERE a.volume >= (SELECT MAX(a2.volume) FROM asks a2 "
                            "WHERE a2.price = a.price)",
    "CORR_MAX_OTHER_SIDE_VOL": "SELECT SUM(b.volume) AS v FROM bids b WHERE b.volume > COALESCE((SELECT "
                               "MAX(a.volume) FROM asks a WHERE a.price = b.price), 0)",
    "CORR_MIN_NULL_CMP": "SELECT COUNT(*) AS n FROM bids b WHERE NOT (b.price < (SELECT MIN(a.price) FROM asks a "
                         "WHERE a.broker_id = b.broker_id))",
    "FIVE_STATS": "SELECT COUNT(*) AS n, SUM(volume) AS v, MIN(price) AS lo, MAX(price) AS hi, AVG(volume) AS av "
                  "FROM asks",
    "BROKER_FOUR": "SELECT broker_id, COUNT(*) AS n, MIN(volume) AS mn, MAX(volume) AS mx, SUM(price * volume) AS "
                   "notional FROM bids GROUP BY broker_id",
    "BOTH_SIDES_ROW": "SELECT (SELECT COUNT(*) FROM bids) AS nb, (SELECT COUNT(*) FROM asks) AS na, (SELECT "
                      "SUM(volume) FROM bids) - (SELECT SUM(volume) FROM asks) AS imb",
    "LEVEL_MULTI": "SELECT price, SUM(volume) AS v, COUNT(*) AS n, MAX(volume) AS big, COUNT(DISTINCT broker_id) AS "
                   "nb FROM asks GROUP BY price",
    "HAVING_COUNT_NOT_SELECTED": "SELECT price, SUM(volume) AS v FROM bids GROUP BY price HAVING COUNT(*) >= 2",
    "HAVING_MIN_VOL": "SELECT broker_id, MAX(price) AS hi FROM asks GROUP BY broker_id HAVING MIN(volume) > 5 AND "
                      "SUM(volume) < 60",
    "HAVING_AVG_NOT_SEL": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING AVG(volume) >= 20",
    "HAVING_NDIST": "SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY broker_id HAVING COUNT(DISTINCT price) > "
                    "1",
    "HAVING_CASE_SUM": "SELECT price, COUNT(*) AS n FROM bids GROUP BY price HAVING SUM(CASE WHEN broker_id < 5 THEN "
                       "volume END) > 10",
    "HAVING_MAX_NULL_CMP": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING MAX(CASE WHEN "
                           "volume > 30 THEN price END) > 50",
    "HAVING_NOT_NULLABLE": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING NOT (MAX(CASE "
                           "WHEN volume > 30 THEN price END) > 50)",
    "AVG_CASE_NULL": "SELECT AVG(CASE WHEN price > 100 THEN volume END) AS a, AVG(CASE WHEN price <= 100 THEN volume "
                     "ELSE NULL END) AS b FROM bids",
    "COUNT_CASE_NULL": "SELECT COUNT(CASE WHEN volume > 20 THEN 1 END) AS big, COUNT(CASE WHEN volume > 20 THEN NULL "
                       "ELSE 1 END) AS small FROM asks",
    "MIN_CASE_NULL_GROUP": "SELECT broker_id, MIN(CASE WHEN price > 100 THEN price END) AS lo FROM asks GROUP BY "
                           "broker_id",
    "SUM_CASE_ALL_NULL": "SELECT SUM(CASE WHEN volume > 1000 THEN volume END) AS s, COUNT(CASE WHEN volume > 1000 "
                         "THEN volume END) AS c FROM bids",
    "CASE_NESTED_NULLS": "SELECT SUM(CASE WHEN price > 100 THEN CASE WHEN volume > 10 THEN volume END ELSE -volume "
                         "END) AS s FROM bids",
    "SIMPLE_CASE_AGG": "SELECT SUM(CASE broker_id WHEN 1 THEN volume WHEN 2 THEN -volume END) AS s FROM asks",
    "SUM_DISTINCT_PRICE": "SELECT SUM(DISTINCT price) AS s, COUNT(DISTINCT price) AS n FROM bids",
    "SUM_DISTINCT_GROUP": "SELECT broker_id, SUM(DISTINCT volume) AS s FROM asks GROUP BY broker_id",
    "COUNT_DISTINCT_CASE": "SELECT COUNT(DISTINCT CASE WHEN volume > 10 THEN broker_id END) AS n FROM bids",
    "AVG_DISTINCT": "SELECT AVG(DISTINCT volume) AS a FROM bids",
    "COUNT_DISTINCT_HAVING": "SELECT price, COUNT(*) AS n FROM asks GROUP BY price HAVING COUNT(DISTINCT broker_id) "
                             ">= 2",
    "COUNT_DISTINCT_EXPR2": "SELECT COUNT(DISTINCT broker_id % 3) AS n FROM bids",
    "NOT_EXISTS_BETTER": "SELECT COUNT(*) AS n FROM bids b WHERE NOT EXISTS (SELECT 1 FROM bids b2 WHERE b2.price > "
                         "b.price)",
    "EXISTS_SAME_BROKER_ASK": "SELECT b.broker_id, SUM(b.volume) AS v FROM bids b WHERE EXISTS (SELECT * FROM asks a "
                              "WHERE a.broker_id = b.broker_id) GROUP BY b.broker_id",
    "NOT_EXISTS_CROSS": "SELECT SUM(a.volume) AS v FROM asks a WHERE NOT EXISTS (SELECT 1 FROM bids b WHERE b.price "
                        ">= a.price)",
    "IN_CORR": "SELECT COUNT(*) AS n FROM bids b WHERE b.price IN (SELECT a.price - 1 FROM asks a WHERE a.broker_id "
               "= b.broker_id)",
    "NOT_IN_CORR": "SELECT COUNT(*) AS n FROM bids b WHERE b.volume NOT IN (SELECT a.volume FROM asks a WHERE "
                   "a.broker_id = b.broker_id)",
    "NOT_IN_CORR_NULLS": "SELECT COUNT(*) AS n FROM bids b WHERE b.volume NOT IN (SELECT NULLIF(a.volume, 10) FROM "
                         "asks a WHERE a.broker_id = b.broker_id)",
    "EXISTS_OR_NOT_EXISTS": "SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE a.price = "
                            "b.price) OR NOT EXISTS (SELECT 1 FROM asks)",
    "EXISTS_IN_SELECT": "SELECT CASE WHEN EXISTS (SELECT 1 FROM bids WHERE volume > 30) THEN 1 ELSE 0 END AS has_big",
    "NOT_EXISTS_GROUPED": "SELECT price, SUM(volume) AS v FROM asks a WHERE NOT EXISTS (SELECT 1 FROM bids b WHERE "
                          "b.broker_id = a.broker_id) GROUP BY price",
    "ABS_SPREAD_NULL": "SELECT ABS((SELECT MAX(price) FROM bids) - (SELECT MIN(price) FROM asks)) AS d",
    "COALESCE_THREE": "SELECT COALESCE((SELECT MAX(price) FROM bids WHERE volume > 30), (SELECT MAX(price) FROM "
                      "bids), -1) AS p",
    "NULLIF_ZERO_COUNT": "SELECT SUM(volume) / NULLIF(COUNT(*), 0) AS av FROM asks",
    "NULLIF_SUM_DIV": "SELECT broker_id, SUM(price * volume) / NULLIF(SUM(volume), 0) AS vwap FROM bids GROUP BY "
                      "broker_id",
    "GREATEST_ROWWISE": "SELECT SUM(GREATEST(volume, 10)) AS s, SUM(LEAST(volume, 10)) AS t FROM asks",
    "LEAST_NULL_ROW": "SELECT COUNT(LEAST(price, NULLIF(volume, 10))) AS n FROM bids",
    "ABS_NEG_AGG": "SELECT broker_id, ABS(SUM(volume) - 50) AS d FROM asks GROUP BY broker_id",
    "COALESCE_NULLIF_CHAIN": "SELECT SUM(COALESCE(NULLIF(volume, 10), NULLIF(price, 100), 0)) AS s FROM bids",
    "WITH_CHAIN_3": "WITH l AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price), big AS (SELECT price, v "
                    "FROM l WHERE v > 20) SELECT COUNT(*) AS n, SUM(v) AS s FROM big",
    "WITH_BEST_THEN_TOUCH": "WITH bb AS (SELECT MAX(price) AS p FROM bids) SELECT SUM(b.volume) AS v FROM bids b, bb "
                            "WHERE b.price = bb.p",
    "WITH_TWO_SIDES": "WITH bv AS (SELECT SUM(volume) AS v FROM bids), av AS (SELECT SUM(volume) AS v FROM asks) "
                      "SELECT (bv.v - av.v) / (bv.v + av.v) AS imb FROM bv, av",
    "WITH_BROKER_NET": "WITH b AS (SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id) SELECT MAX(v) AS "
                       "mx, MIN(v) AS mn FROM b",
    "MOD_NEG_DIVIDEND": "SELECT SUM((price - 150) % 7) AS s FROM bids",
    "MOD_NEG_DIVISOR": "SELECT SUM(volume % -3) AS s FROM asks",
    "MOD_NEG_GROUP": "SELECT (broker_id - 5) % 3 AS g, COUNT(*) AS n FROM bids GROUP BY (broker_id - 5) % 3",
    "MOD_FRACTION": "SELECT SUM(price % 0.75) AS s FROM asks",
    "TOP3_VOL_LIMIT": "SELECT SUM(x.volume) AS v, COUNT(*) AS n FROM (SELECT volume FROM asks ORDER BY price, id "
                      "LIMIT 3) x",
    "TOP2_LEVELS_OFFSET": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER "
                          "BY price DESC LIMIT 2 OFFSET 1) x",
    "RN_PER_BROKER_MAX": "SELECT broker_id, MAX(price) AS p FROM (SELECT broker_id, price, ROW_NUMBER() OVER "
                         "(PARTITION BY broker_id ORDER BY volume DESC, id) AS rn FROM asks) x WHERE rn = 1 GROUP BY "
                         "broker_id",
    "RANK_TIES": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM (SELECT volume, RANK() OVER (ORDER BY price DESC) AS r "
                 "FROM bids) x WHERE r <= 2",
    "DENSE_RANK_LEVELS": "SELECT SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price) AS r FROM "
                         "asks) x WHERE r <= 2",
    "RANK_PER_BROKER": "SELECT broker_id, COUNT(*) AS n FROM (SELECT broker_id, RANK() OVER (PARTITION BY broker_id "
                       "ORDER BY price) AS r FROM asks) x WHERE r = 1 GROUP BY broker_id",
    "RN_GT_1": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM "
               "bids) x WHERE rn > 1",
    "RN_BETWEEN_2_5": "SELECT COUNT(*) AS n FROM (SELECT ROW_NUMBER() OVER (ORDER BY price, id) AS rn FROM asks) x "
                      "WHERE rn BETWEEN 2 AND 5",
    "VIEW_LIMIT_OFFSET": "SELECT price, SUM(volume) AS v FROM asks GROUP BY price ORDER BY price LIMIT 2 OFFSET 1",
    "VIEW_OFFSET_ONLY": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id ORDER BY broker_id OFFSET 7",
    "TOPN_DESC_TIES_ID": "SELECT SUM(x.id) AS s FROM (SELECT id FROM bids ORDER BY volume DESC, id DESC LIMIT 3) x",
    "INT_DIV_LITERAL": "SELECT SUM(volume * (7 / 2)) AS s FROM bids",
    "BROKER_HALF": "SELECT SUM(broker_id / 2) AS s FROM asks",
    "AVG_INT_COL": "SELECT AVG(broker_id) AS a, SUM(broker_id) / COUNT(*) AS b FROM bids",
    "COUNT_RATIO": "SELECT COUNT(*) / (SELECT COUNT(*) FROM asks) AS r FROM bids",
    "AGG_EQ_NULL": "SELECT COUNT(*) AS n FROM bids WHERE price = (SELECT MAX(price) FROM asks WHERE volume > 1000)",
    "AGG_NE_NULL_GROUP": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING MAX(price) <> (SELECT "
                         "MIN(price) FROM asks)",
    "CASE_AGG_NULL_CMP": "SELECT CASE WHEN MAX(price) > (SELECT MIN(price) FROM asks) THEN 1 WHEN MAX(price) <= "
                         "(SELECT MIN(price) FROM asks) THEN 0 ELSE -1 END AS crossed FROM bids",
    "NULL_LITERAL_CMP": "SELECT COUNT(*) AS n FROM bids WHERE price > NULL OR volume > 10",
    "AGG_IN_NULL_LIST": "SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY broker_id HAVING COUNT(*) NOT IN (1, "
                        "NULL)",
    "EMPTY_SAFE_MID": "SELECT COALESCE(((SELECT MAX(price) FROM bids) + (SELECT MIN(price) FROM asks)) / 2, 0) AS "
                      "mid",
    "MIN_VOL_NEG": "SELECT MIN(volume) AS mn, SUM(CASE WHEN volume < 0 THEN 1 ELSE 0 END) AS neg FROM bids",
    "DUP_ID_PAIRS": "SELECT COUNT(*) AS n FROM bids b JOIN asks a ON a.id = b.id",
    "SAME_ID_BROKER": "SELECT b.broker_id, COUNT(*) AS n FROM bids b, bids b2 WHERE b.id = b2.id GROUP BY "
                      "b.broker_id",
    "IS_DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(volume, 10) IS DISTINCT FROM 20",
    "IS_NOT_DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids b WHERE (SELECT MIN(price) FROM asks) IS NOT DISTINCT "
                            "FROM NULL",
    "GROUP_BY_EMPTY": "SELECT SUM(volume) AS v FROM bids GROUP BY ()",
    "LEFT_JOIN_ONE_ROW": "SELECT b.broker_id, SUM(b.volume) AS v, MAX(t.p) AS best FROM bids b LEFT JOIN (SELECT "
                         "MAX(price) AS p FROM asks) t ON TRUE GROUP BY b.broker_id",
    "DEPTH_WITHIN_1PCT": "SELECT SUM(volume) AS v FROM asks WHERE price <= 1.01 * (SELECT MIN(price) FROM asks)",
    "IMBALANCE_TOP": "SELECT (SUM(CASE WHEN price = (SELECT MAX(price) FROM bids) THEN volume ELSE 0 END)) AS bv "
                     "FROM bids",
    "WEIGHTED_MID": "SELECT ((SELECT MAX(price) FROM bids) * (SELECT SUM(volume) FROM asks) + (SELECT MIN(price) "
                    "FROM asks) * (SELECT SUM(volume) FROM bids)) / NULLIF((SELECT SUM(volume) FROM bids) + (SELECT "
                    "SUM(volume) FROM asks), 0) AS wm",
    "BROKER_SHARE_HAVING": "SELECT broker_id, SUM(volume) / (SELECT SUM(volume) FROM asks) AS share FROM asks GROUP "
                           "BY broker_id HAVING SUM(volume) / (SELECT SUM(volume) FROM asks) > 0.2",
    "LEVEL_COUNT_BOTH": "SELECT COUNT(DISTINCT price) AS nb, (SELECT COUNT(DISTINCT price) FROM asks) AS na FROM "
                        "bids",
    "FILTER_CLAUSE": "SELECT COUNT(*) FILTER (WHERE volume > 10) AS big, SUM(volume) FILTER (WHERE broker_id = 3) AS "
                     "b3 FROM asks",
    "BETWEEN_SUBS": "SELECT COUNT(*) AS n FROM bids WHERE price BETWEEN (SELECT MIN(price) FROM bids) + 1 AND "
                    "(SELECT MAX(price) FROM bids) - 1",
    "IN_LIST_EXPR_GROUP": "SELECT broker_id, SUM(volume) AS v FROM bids WHERE broker_id % 4 IN (0, 1) GROUP BY "
                          "broker_id",
    "NEG_AGG_ORDER_LIMIT": "SELECT broker_id, -SUM(volume) AS nv FROM asks GROUP BY broker_id ORDER BY nv, broker_id "
                           "LIMIT 3",
    "GROUP_CASE_BUCKETS": "SELECT CASE WHEN volume < 10 THEN 0 WHEN volume < 25 THEN 1 ELSE 2 END AS b, COUNT(*) AS "
                          "n, SUM(volume) AS v FROM asks GROUP BY 1",
    "SELF_JOIN_BETTER_VOL": "SELECT b1.broker_id, SUM(b2.volume) AS ahead FROM bids b1 JOIN bids b2 ON b2.price > "
                            "b1.price GROUP BY b1.broker_id",
    "CUM_DEPTH_LEVEL": "SELECT l1.price, SUM(l2.v) AS cum FROM (SELECT price FROM asks GROUP BY price) l1 JOIN "
                       "(SELECT price, SUM(volume) AS v FROM asks GROUP BY price) l2 ON l2.price <= l1.price GROUP "
                       "BY l1.price",
    "DISTINCT_VIEW": "SELECT DISTINCT broker_id FROM asks WHERE volume > 20",
    "SCALAR_SUB_CORR_COUNT": "SELECT b.broker_id, (SELECT COUNT(*) FROM asks a WHERE a.broker_id = b.broker_id) AS "
                             "na, COUNT(*) AS nb FROM bids b GROUP BY b.broker_id",
    "ANY_GT_CORR": "SELECT COUNT(*) AS n FROM bids b WHERE b.price > ANY (SELECT a.price FROM asks a WHERE "
                   "a.broker_id = b.broker_id)",
    "ALL_LE_EMPTY": "SELECT COUNT(*) AS n FROM bids b WHERE b.price <= ALL (SELECT a.price FROM asks a WHERE "
                    "a.volume > 1000)",
    "SIGN_OF_IMB": "SELECT SIGN(COALESCE((SELECT SUM(volume) FROM bids), 0) - COALESCE((SELECT SUM(volume) FROM "
                   "asks), 0)) AS s",
    "ROUND_VWAP": "SELECT ROUND(SUM(price * volume) / SUM(volume), 1) AS vwap FROM asks",
    "FLOOR_CEIL": "SELECT SUM(FLOOR(price / 7)) AS f, SUM(CEIL(-price / 7)) AS c FROM bids",
    "MAX_OF_AVG_GROUPS": "SELECT MAX(a) AS m FROM (SELECT broker_id, AVG(price) AS a FROM bids GROUP BY broker_id) x",
    "HAVING_SUM_DISTINCT": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING SUM(DISTINCT volume) "
                           "> 30",
    "TOPN_WITH_CTE": "WITH top AS (SELECT price, volume FROM bids ORDER BY price DESC, id LIMIT 3) SELECT MIN(price) "
                     "AS p, SUM(volume) AS v FROM top",
    "RN_EQ_2_PER_BROKER": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, ROW_NUMBER() OVER "
                          "(PARTITION BY broker_id ORDER BY price, id) AS rn FROM asks) x WHERE rn = 2 GROUP BY "
                          "broker_id",
    "DENSE_RANK_PER_BROKER": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, DENSE_RANK() OVER "
                             "(PARTITION BY broker_id ORDER BY price DESC) AS r FROM bids) x WHERE r <= 2 GROUP BY "
                             "broker_id",
    "IS_TRUE": "SELECT COUNT(*) AS n FROM bids WHERE (volume > 10) IS TRUE",
    "CORR_MAX_NOT_IN": "SELECT COUNT(*) AS n FROM bids b WHERE b.price NOT IN (SELECT MAX(a.price) FROM asks a WHERE "
                       "a.broker_id = b.broker_id)",
    "CORR_MIN_IN_HAVING_NULL": "SELECT b.broker_id, COUNT(*) AS n FROM bids b GROUP BY b.broker_id HAVING (SELECT "
                               "MIN(a.price) FROM asks a WHERE a.broker_id = b.broker_id) IS NULL",
    "CORR_MAX_CASE_SELECT": "SELECT b.broker_id, CASE WHEN MAX(b.price) >= (SELECT MIN(a.price) FROM asks a WHERE "
                            "a.broker_id = b.broker_id) THEN 1 ELSE 0 END AS x FROM bids b GROUP BY b.broker_id",
    "CORR_COUNT_ZERO": "SELECT COUNT(*) AS n FROM bids b WHERE (SELECT COUNT(*) FROM asks a WHERE a.broker_id = "
                       "b.broker_id) = 0",
    "CORR_SUM_NULL_CMP": "SELECT COUNT(*) AS n FROM bids b WHERE (SELECT SUM(a.volume) FROM asks a WHERE a.broker_id "
                         "= b.broker_id) < 10",
    "CORR_AVG_GT": "SELECT SUM(b.volume) AS v FROM bids b WHERE b.volume > (SELECT AVG(b2.volume) FROM bids b2 WHERE "
                   "b2.price = b.price)",
    "HAVING_OR_NULL_AGG": "SELECT price, SUM(volume) AS v FROM asks GROUP BY price HAVING MIN(CASE WHEN broker_id = "
                          "1 THEN volume END) > 5 OR COUNT(*) > 2",
    "HAVING_BETWEEN_AGG": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING SUM(volume) BETWEEN "
                          "20 AND 60",
    "HAVING_IN_AGG": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING COUNT(*) IN (2, 3)",
    "CASE_ELSE_NULL_MIN": "SELECT MIN(CASE WHEN broker_id % 2 = 0 THEN price ELSE NULL END) AS even_lo, MAX(CASE "
                          "WHEN broker_id % 2 = 1 THEN price END) AS odd_hi FROM asks",
    "CASE_NULL_THEN_CMP": "SELECT COUNT(*) AS n FROM bids WHERE CASE WHEN volume > 20 THEN price END > 100",
    "CASE_NULL_NOT_CMP": "SELECT COUNT(*) AS n FROM bids WHERE NOT (CASE WHEN volume > 20 THEN price END > 100)",
    "COUNT_DISTINCT_NULLIF": "SELECT COUNT(DISTINCT NULLIF(broker_id, 0)) AS n, COUNT(NULLIF(broker_id, 0)) AS m "
                             "FROM asks",
    "SUM_DISTINCT_CASE_NULL": "SELECT SUM(DISTINCT CASE WHEN price > 100 THEN volume END) AS s FROM bids",
    "EXISTS_AND_NOT_EXISTS": "SELECT b.broker_id, COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE "
                             "a.broker_id = b.broker_id) AND NOT EXISTS (SELECT 1 FROM asks a WHERE a.broker_id = "
                             "b.broker_id AND a.price <= b.price) GROUP BY b.broker_id",
    "NOT_IN_TWO_LEVEL": "SELECT COUNT(*) AS n FROM asks WHERE broker_id NOT IN (SELECT broker_id FROM bids WHERE "
                        "price NOT IN (SELECT price FROM asks))",
    "IN_SUB_AND_NULL_LIST": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(broker_id, 1) IN (SELECT broker_id FROM "
                            "asks)",
    "NOT_EXISTS_NULL_CORR": "SELECT COUNT(*) AS n FROM bids b WHERE NOT EXISTS (SELECT 1 FROM asks a WHERE a.price = "
                            "NULLIF(b.price, 100))",
    "GREATEST_AGG_NULLS": "SELECT broker_id, GREATEST(MAX(CASE WHEN volume > 30 THEN price END), MIN(CASE WHEN "
                          "volume < 5 THEN price END)) AS g FROM bids GROUP BY broker_id",
    "LEAST_THREE_SUBS": "SELECT LEAST((SELECT MIN(price) FROM asks), (SELECT MAX(price) FROM bids), (SELECT "
                        "AVG(price) FROM asks)) AS l",
    "ABS_MOD_NEG": "SELECT SUM(ABS((price - 150) % 7)) AS s, SUM((100 - volume) % 6) AS t FROM asks",
    "NULLIF_CMP_WHERE": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(price, 100) >= 100",
    "COALESCE_MIN_GROUP": "SELECT broker_id, COALESCE(MIN(CASE WHEN volume > 25 THEN price END), MAX(price)) AS p "
                          "FROM asks GROUP BY broker_id",
    "WITH_CTE_TWICE": "WITH lv AS (SELECT price, SUM(volume) AS v FROM asks GROUP BY price) SELECT MAX(v) AS mx, "
                      "(SELECT COUNT(*) FROM lv) AS n FROM lv",
    "WITH_TOP_THEN_AGG": "WITH t AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC "
                         "LIMIT 3) SELECT SUM(v) AS v, MIN(price) AS p FROM t",
    "WITH_NESTED_CORR": "WITH b AS (SELECT broker_id, MAX(price) AS p FROM bids GROUP BY broker_id) SELECT COUNT(*) "
                        "AS n FROM b WHERE b.p >= (SELECT MIN(price) FROM asks)",
    "MOD_NEG_WHERE": "SELECT COUNT(*) AS n FROM bids WHERE (price - 150) % 4 = -2",
    "MOD_NEG_AGG": "SELECT (SUM(volume) - 100) % 7 AS r FROM asks",
    "LIMIT_OFFSET_SUB_ORDERS": "SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC, id "
                               "LIMIT 2 OFFSET 2) x",
    "LIMIT_TIES_BROKERS": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id ORDER BY n DESC, broker_id "
                          "LIMIT 2 OFFSET 1",
    "RANK_EQ_2": "SELECT COUNT(*) AS n FROM (SELECT RANK() OVER (ORDER BY price DESC) AS r FROM bids) x WHERE r = 2",
    "RANK_LT_3_PER_BROKER": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, RANK() OVER "
                            "(PARTITION BY broker_id ORDER BY volume DESC) AS r FROM asks) x WHERE r < 3 GROUP BY "
                            "broker_id",
    "RN_TOP_VS_SUB": "SELECT COUNT(*) AS n FROM (SELECT price, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                     "FROM bids) x WHERE rn <= 3 AND x.price >= (SELECT MIN(price) FROM asks)",
    "TOPN_JOIN_OTHER": "SELECT SUM(t.volume) AS v FROM (SELECT broker_id, volume FROM bids ORDER BY price DESC, id "
                       "LIMIT 3) t JOIN asks a ON a.broker_id = t.broker_id",
    "VIEW_LIMIT_LEVELS_ASC": "SELECT price, COUNT(*) AS n FROM bids GROUP BY price ORDER BY price LIMIT 1 OFFSET 2",
    "VIEW_TOPN_ORDER_AGG": "SELECT price, SUM(volume) AS v FROM asks GROUP BY price ORDER BY v DESC, price LIMIT 2",
    "FLOAT_DIV_COUNTS": "SELECT COUNT(*) * 1.0 / NULLIF((SELECT COUNT(*) FROM asks), 0) AS r FROM bids",
    "INT_LITERAL_DIV": "SELECT SUM(volume) / 2 AS h, SUM(volume) * 3 / 4 AS q FROM asks",
    "BROKER_DIV_GROUP": "SELECT broker_id / 4 AS g, COUNT(*) AS n FROM bids GROUP BY broker_id / 4",
    "AGG_GT_NULL_SUB": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING SUM(volume) > (SELECT "
                       "SUM(volume) FROM asks WHERE volume > 1000)",
    "AGG_LT_NULL_AVG": "SELECT COUNT(*) AS n FROM bids WHERE volume < (SELECT AVG(volume) FROM asks)",
    "NULL_EQ_NULL": "SELECT COUNT(*) AS n FROM bids WHERE NULL = NULL",
    "CASE_IS_NULL_AGG": "SELECT CASE WHEN MIN(price) IS NULL THEN -1 ELSE MIN(price) END AS p FROM asks",
    "NEG_VOL_SUM_ABS": "SELECT SUM(ABS(volume)) AS a, SUM(volume) AS s, COUNT(*) FILTER (WHERE volume <= 0) AS z "
                       "FROM asks",
    "DUP_ID_SAME_SIDE": "SELECT COUNT(*) AS n FROM bids b1, bids b2 WHERE b1.id = b2.id AND b1.price <> b2.price",
    "DUP_ID_CROSS_SIDE_VOL": "SELECT SUM(b.volume + a.volume) AS s FROM bids b JOIN asks a ON a.id = b.id",
    "EMPTY_BOTH_RATIO": "SELECT (SELECT COUNT(*) FROM bids) * 1.0 / NULLIF((SELECT COUNT(*) FROM bids) + (SELECT "
                        "COUNT(*) FROM asks), 0) AS r",
    "CROSSED_LEVELS": "SELECT COUNT(*) AS n FROM (SELECT price FROM bids GROUP BY price) b, (SELECT price FROM asks "
                      "GROUP BY price) a WHERE b.price >= a.price",
    "BEST_LEVEL_BROKERS": "SELECT COUNT(DISTINCT broker_id) AS n FROM bids WHERE price = (SELECT MAX(price) FROM "
                          "bids)",
    "SECOND_BEST_VIA_OFFSET": "SELECT MAX(x.price) AS p FROM (SELECT price FROM bids GROUP BY price ORDER BY price "
                              "DESC LIMIT 1 OFFSET 1) x",
    "VOL_WEIGHTED_SPREAD": "SELECT SUM(a.volume * (a.price - (SELECT MAX(price) FROM bids))) / NULLIF(SUM(a.volume), "
                           "0) AS s FROM asks a",
    "TOUCH_RATIO": "SELECT (SELECT SUM(volume) FROM bids WHERE price = (SELECT MAX(price) FROM bids)) / "
                   "NULLIF((SELECT SUM(volume) FROM asks WHERE price = (SELECT MIN(price) FROM asks)), 0) AS r",
    "BROKER_BOTH_SIDES": "SELECT b.broker_id, SUM(b.volume) AS bv FROM bids b WHERE b.broker_id IN (SELECT broker_id "
                         "FROM asks) GROUP BY b.broker_id",
    "DISTINCT_PAIRS": "SELECT DISTINCT broker_id, price FROM bids WHERE volume > 15",
    "GROUP_TWO_KEYS_HAVING": "SELECT broker_id, price, SUM(volume) AS v FROM asks GROUP BY broker_id, price HAVING "
                             "COUNT(*) > 1",
    "IN_LIST_NULL_ONLY": "SELECT COUNT(*) AS n FROM bids WHERE price IN (NULL)",
    "NOT_IN_LIST_EXPRS": "SELECT COUNT(*) AS n FROM asks WHERE price NOT IN (volume, volume * 2)",
    "IS_DISTINCT_PAIR": "SELECT COUNT(*) AS n FROM bids b, asks a WHERE NULLIF(b.volume, 10) IS NOT DISTINCT FROM "
                        "NULLIF(a.volume, 20)",
    "IS_DISTINCT_SUB": "SELECT COUNT(*) AS n FROM bids WHERE price IS DISTINCT FROM (SELECT MIN(price) FROM asks)",
    "NOT_IS_DISTINCT": "SELECT COUNT(*) AS n FROM bids WHERE NOT (NULLIF(volume, 10) IS DISTINCT FROM 20)",
    "IS_NOT_TRUE": "SELECT COUNT(*) AS n FROM bids WHERE (price > (SELECT MIN(price) FROM asks)) IS NOT TRUE",
    "IS_FALSE": "SELECT COUNT(*) AS n FROM bids WHERE (NULLIF(volume, 10) > 20) IS FALSE",
    "NOT_IS_FALSE": "SELECT COUNT(*) AS n FROM bids WHERE NOT ((NULLIF(volume, 10) > 20) IS FALSE)",
    "GROUP_BY_EMPTY_HAVING": "SELECT COUNT(*) AS n FROM asks GROUP BY () HAVING COUNT(*) > 1",
    "GROUP_BY_EMPTY_KEY": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY (), broker_id",
    "HAVING_IS_DISTINCT": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING MAX(CASE WHEN volume "
                          "> 20 THEN price END) IS DISTINCT FROM MIN(price)",
    "CASE_IS_NOT_DISTINCT": "SELECT SUM(CASE WHEN NULLIF(volume, 5) IS NOT DISTINCT FROM NULLIF(price, 100) THEN 1 "
                            "ELSE 0 END) AS n FROM asks",
    "HAVING_IS_NOT_TRUE": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING (MAX(CASE WHEN "
                          "volume > 30 THEN price END) > 50) IS NOT TRUE",
    "EXISTS_GROUP_EMPTY": "SELECT COUNT(*) AS n FROM bids WHERE EXISTS (SELECT COUNT(*) FROM asks GROUP BY ())",
    "DISTINCT_FROM_NULL_LIT": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(volume, 10) IS DISTINCT FROM NULL",
    "LEFT_JOIN_CTE_ONE_ROW": "WITH ba AS (SELECT MIN(price) AS p, SUM(volume) AS v FROM asks) SELECT COUNT(*) AS n, "
                             "SUM(b.volume / ba.v) AS r FROM bids b LEFT OUTER JOIN ba ON TRUE WHERE b.price >= ba.p "
                             "- 50",
    "LEFT_JOIN_EMPTY_AGG": "SELECT COUNT(*) AS n, SUM(COALESCE(t.p, 0)) AS s FROM bids b LEFT JOIN (SELECT "
                           "MAX(price) AS p FROM asks WHERE volume > 1000) t ON TRUE",
    "WHERE_NULL": "SELECT COUNT(*) AS n FROM bids WHERE NULL",
    "WHERE_NOT_NULL_LIT": "SELECT COUNT(*) AS n FROM bids WHERE NOT NULL",
    "WHERE_NOT_NULL_EQ": "SELECT COUNT(*) AS n FROM bids WHERE NOT (NULL = NULL)",
    "CASE_WHEN_NULL": "SELECT SUM(CASE WHEN NULL THEN 1 ELSE volume END) AS s FROM bids",
    "CASE_WHEN_NOT_NULL": "SELECT SUM(CASE WHEN NOT NULL THEN 1 ELSE volume END) AS s FROM bids",
    "NULL_OR_TRUE": "SELECT COUNT(*) AS n FROM bids WHERE NULL OR volume > 10",
    "NOT_NULL_AND": "SELECT COUNT(*) AS n FROM bids WHERE NOT (NULL AND volume > 10)",
    "HAVING_NOT_NULL": "SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING NOT (NULL OR COUNT(*) > "
                       "1)",
    "NULL_IS_NOT_TRUE": "SELECT COUNT(*) AS n FROM bids WHERE NULL IS NOT TRUE",
    "RN_GE_3_PER_BROKER": "SELECT broker_id, COUNT(*) AS n FROM (SELECT broker_id, ROW_NUMBER() OVER (PARTITION BY "
                          "broker_id ORDER BY price, id) AS rn FROM asks) x WHERE rn >= 3 GROUP BY broker_id",
    "RN_GT_FLIPPED": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price, id) AS rn FROM "
                     "asks) x WHERE 2 < rn",
    "RANK_GT_1": "SELECT COUNT(*) AS n FROM (SELECT RANK() OVER (ORDER BY price DESC) AS r FROM bids) x WHERE r > 1",
    "DENSE_RANK_EQ_2": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY "
                       "price DESC) AS r FROM bids) x WHERE r = 2",
    "DENSE_RANK_GT_1": "SELECT SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price) AS r FROM "
                       "asks) x WHERE r > 1",
    "DENSE_RANK_BETWEEN": "SELECT SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price DESC) AS r "
                          "FROM bids) x WHERE r BETWEEN 2 AND 3",
    "DENSE_RANK_VOL": "SELECT COUNT(*) AS n FROM (SELECT DENSE_RANK() OVER (ORDER BY volume DESC) AS r FROM asks) x "
                      "WHERE r <= 1",
    "OFFSET_NO_LIMIT_SUB": "SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC, id OFFSET "
                           "2) x",
    "OFFSET_NO_LIMIT_LEVELS": "SELECT SUM(x.v) AS v, COUNT(*) AS n FROM (SELECT price, SUM(volume) AS v FROM asks "
                              "GROUP BY price ORDER BY price OFFSET 1) x",
    "RN_GT_LEVELS": "SELECT COUNT(*) AS n FROM (SELECT price, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM "
                    "bids GROUP BY price) x WHERE rn > 2",
    "RN_GT_0": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM "
               "bids) x WHERE rn > 0",
    "RN_GT_BIG": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                 "FROM bids) x WHERE rn > 1000",
    "WITH_DENSE": "WITH r AS (SELECT broker_id, volume, DENSE_RANK() OVER (ORDER BY price DESC) AS d FROM bids) "
                  "SELECT broker_id, SUM(volume) AS v FROM r WHERE d <= 2 GROUP BY broker_id",
    "OFFSET_ROWS_VIEW": "SELECT SUM(x.volume) AS v FROM (SELECT volume FROM asks ORDER BY price, id LIMIT 100 OFFSET "
                        "1) x",
    # refused by qa37 ("filter it once"), exact since qa39: the ranks both conjuncts keep
    "RN_TWO_FILTERS": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                      "FROM bids) x WHERE rn > 1 AND rn <= 3",
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_LEVELS": "SELECT symbol, COUNT(DISTINCT price) AS n FROM bids GROUP BY symbol",
    "SYM_SPREAD_CORR": "SELECT b.symbol, (SELECT MIN(a.price) FROM asks a WHERE a.symbol = b.symbol) - MAX(b.price) "
                       "AS spread FROM bids b GROUP BY b.symbol",
    "SYM_TOP2": "SELECT symbol, SUM(volume) AS v FROM (SELECT symbol, volume, ROW_NUMBER() OVER (PARTITION BY symbol "
                "ORDER BY price DESC, id) AS rn FROM bids) x WHERE rn <= 2 GROUP BY symbol",
    "SYM_HAVING": "SELECT symbol, SUM(volume) AS v FROM asks GROUP BY symbol HAVING COUNT(*) > 1",
    "SYM_NOT_EXISTS": "SELECT symbol, COUNT(*) AS n FROM bids b WHERE NOT EXISTS (SELECT 1 FROM asks a WHERE "
                      "a.symbol = b.symbol AND a.price <= b.price) GROUP BY symbol",
    "SYM_CASE_NULL": "SELECT symbol, AVG(CASE WHEN volume > 20 THEN price END) AS a FROM asks GROUP BY symbol",
    "SYM_RANK": "SELECT symbol, COUNT(*) AS n FROM (SELECT symbol, RANK() OVER (PARTITION BY symbol ORDER BY price) "
                "AS r FROM asks) x WHERE r = 1 GROUP BY symbol",
    "SYM_DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids WHERE symbol IS DISTINCT FROM 'AAA'",
    "SYM_IN_LIST": "SELECT symbol, MAX(price) AS p FROM bids WHERE symbol IN ('AAA', 'BBB') GROUP BY symbol",
    "SYM_WITH": "WITH s AS (SELECT symbol, SUM(volume) AS v FROM bids GROUP BY symbol) SELECT MAX(v) AS m FROM s",
    "SYM_CORR_MAX": "SELECT COUNT(*) AS n FROM bids b WHERE b.price = (SELECT MAX(b2.price) FROM bids b2 WHERE "
                    "b2.symbol = b.symbol)",
    "SYM_HAVING_NOT_SEL": "SELECT symbol, MAX(price) AS p FROM asks GROUP BY symbol HAVING SUM(volume) > 20",
    "SYM_OFFSET_RN": "SELECT symbol, SUM(volume) AS v FROM (SELECT symbol, volume, ROW_NUMBER() OVER (PARTITION BY "
                     "symbol ORDER BY price, id) AS rn FROM asks) x WHERE rn BETWEEN 2 AND 3 GROUP BY symbol",
    "SYM_NOT_IN": "SELECT symbol, COUNT(*) AS n FROM bids WHERE symbol NOT IN ('AAA') GROUP BY symbol",
    "SYM_JOIN_SPREAD": "SELECT b.symbol, MIN(a.price) - MAX(b.price) AS s FROM bids b JOIN asks a ON a.symbol = "
                       "b.symbol GROUP BY b.symbol",
    "SYM_COUNT_DISTINCT": "SELECT COUNT(DISTINCT symbol) AS n FROM bids",
    "SYM_IS_NOT_DISTINCT": "SELECT symbol, COUNT(*) AS n FROM asks WHERE symbol IS NOT DISTINCT FROM 'BBB' GROUP BY "
                           "symbol",
    "SYM_CASE_SYMBOL": "SELECT SUM(CASE WHEN symbol = 'AAA' THEN volume ELSE -volume END) AS s FROM bids",
    "SYM_EXISTS_OTHER": "SELECT symbol, COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE a.symbol "
                        "<> b.symbol) GROUP BY symbol",
    "SYM_AVG_CASE_HAVING": "SELECT symbol, AVG(volume) AS a FROM asks GROUP BY symbol HAVING MIN(price) < 150",
    "SYM_DISTINCT_COLS": "SELECT COUNT(*) AS n FROM bids b, asks a WHERE b.symbol IS NOT DISTINCT FROM a.symbol AND "
                         "b.price >= a.price",
    "SYM_DENSE": "SELECT symbol, SUM(volume) AS v FROM (SELECT symbol, volume, DENSE_RANK() OVER (PARTITION BY "
                 "symbol ORDER BY price) AS r FROM asks) x WHERE r <= 2 GROUP BY symbol",
    "SYM_RN_GT": "SELECT symbol, COUNT(*) AS n FROM (SELECT symbol, ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY "
                 "price DESC, id) AS rn FROM bids) x WHERE rn > 1 GROUP BY symbol",
}

DEFAULT = ("IS_DISTINCT_FROM", "IS_NOT_TRUE", "NOT_IS_FALSE", "GROUP_BY_EMPTY_HAVING", "WHERE_NOT_NULL_EQ",
           "HAVING_NOT_NULL", "LEFT_JOIN_EMPTY_AGG", "RN_GT_1", "RN_GE_3_PER_BROKER", "RANK_GT_1",
           "DENSE_RANK_PER_BROKER", "DENSE_RANK_BETWEEN", "OFFSET_NO_LIMIT_LEVELS", "CORR_MIN_NULL_CMP",
           "HAVING_NOT_NULLABLE", "AGG_IN_NULL_LIST")
"""The views of the default suite (its cost: ~30 s): the shapes qa37 made exact and the NULL-heavy
ones; every view of ``VIEWS`` runs under ``-m slow`` (family ``qa37_more`` of test_qa_views)."""
SYMBOL_DEFAULT = ("SYM_DISTINCT_FROM", "SYM_DENSE", "SYM_RN_GT")

REJECTED: dict[str, tuple[str, str]] = {
    "MIN_CORR_NE": ("SELECT SUM(a.volume) AS v FROM asks a WHERE a.price <= (SELECT MIN(a2.price) FROM asks a2 WHERE "
                    "a2.broker_id <> a.broker_id)", "correlated other than by equality"),
    "SELECT_STAR_CTE": ("WITH a1 AS (SELECT * FROM asks WHERE volume > 5) SELECT broker_id, COUNT(*) AS n FROM a1 "
                        "GROUP BY broker_id", "SELECT * is not supported"),
    "TOPN_ORDER_EXPR": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price * volume DESC, id "
                        "LIMIT 2) x", "a top-N is ordered by columns"),
    "TOPN_GROUPS_BY_AGG": ("SELECT SUM(x.v) AS v FROM (SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id "
                           "ORDER BY v DESC, broker_id LIMIT 2) x", "ordered by one column, its GROUP BY key"),
    "RN_READ": ("SELECT COUNT(*) AS n FROM (SELECT price, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM "
                "bids) b JOIN (SELECT price, ROW_NUMBER() OVER (ORDER BY price, id) AS rn FROM asks) a ON a.rn = b.rn "
                "WHERE b.rn <= 3 AND a.rn <= 3", "it can only be filtered"),
    "RN_NE": ("SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM "
              "bids) x WHERE rn <> 1", "keeps the first rows of a top-N"),
    "DENSE_RANK_TIEBREAK": ("SELECT SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price DESC, id) "
                            "AS r FROM bids) x WHERE r <= 2", "DENSE_RANK() is supported ordered by one column"),
    "OFFSET_NO_ORDER": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids OFFSET 2) x",
                        "OFFSET without ORDER BY"),
    "INT_DIV": ("SELECT SUM(volume // 4) AS s FROM bids", "not valid SQL"),
    "NULLS_FIRST_VIEW": ("SELECT broker_id, MIN(CASE WHEN volume > 20 THEN price END) AS lo FROM asks GROUP BY "
                         "broker_id ORDER BY lo NULLS FIRST, broker_id LIMIT 3", "NULLS FIRST is not supported"),
    "HAVING_NOT_IN_SUB": ("SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id HAVING MAX(price) NOT IN "
                          "(SELECT price FROM bids)", "over aggregates (in HAVING"),
    "HAVING_EXISTS": ("SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING EXISTS (SELECT 1 FROM "
                      "asks WHERE volume > 30)", "over aggregates (in HAVING"),
    "GROUP_NULLABLE_CASE": ("SELECT CASE WHEN price >= 100 THEN 1 END AS hi, SUM(volume) AS v FROM bids GROUP BY CASE "
                            "WHEN price >= 100 THEN 1 END", "a key that can be NULL"),
    "LEFT_JOIN_ON_COND": ("SELECT COUNT(*) AS n FROM bids b LEFT JOIN (SELECT MAX(price) AS p FROM asks) t ON t.p > "
                          "b.price", "LEFT JOIN is not supported"),
    "LEFT_JOIN_GROUPED": ("SELECT COUNT(*) AS n FROM bids b LEFT JOIN (SELECT broker_id, MAX(price) AS p FROM asks "
                          "GROUP BY broker_id) t ON TRUE", "LEFT JOIN is not supported"),
    "LEFT_JOIN_OFFSET": ("SELECT COUNT(*) AS n FROM bids b LEFT JOIN (SELECT MAX(price) AS p FROM asks LIMIT 1 "
                         "OFFSET 1) t ON TRUE", "LEFT JOIN is not supported"),
    "SUM_OVER": ("SELECT MAX(x.s) AS m FROM (SELECT SUM(volume) OVER (ORDER BY price) AS s FROM bids) x",
                 "ROW_NUMBER(), RANK() and DENSE_RANK() (a top-N) are supported"),
    "COALESCE_COND": ("SELECT COUNT(*) AS n FROM bids WHERE COALESCE(volume > 10, TRUE)",
                      "unsupported condition (COALESCE)"),
}


def as_view(name: str, sql: str) -> str:
    """The view as a user names it in a file of several views."""
    return f"CREATE VIEW {name} AS {sql}"
