"""Views written for an outside check of the SQL compiler (issue 21): the shapes a quant writes
(MIN/MAX, several outputs, HAVING, CASE, DISTINCT, EXISTS/IN, CTEs, top-N), spelled the ways
people spell them, written without reading the cookbook or the other tests' view lists.

``VIEWS`` over the one-book header of :mod:`test_sql_minmax`, ``SYMBOL_VIEWS`` over streams with
a ``symbol`` column; each name is the view's name (its first output's alias, upper case)."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    "BESTBID": 'select max(b.price) as "BestBid" from bids as b',
    "LO": "SELECT MIN(price) AS lo, MAX(price) AS hi, MAX(price) - MIN(price) AS width, COUNT(*) AS n FROM asks",
    "WORST": "SELECT broker_id, MIN(price) AS worst, MAX(price) AS best, AVG(volume) AS avgvol "
             "FROM bids GROUP BY broker_id",
    "SPREAD_BPS": "SELECT ((SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids)) / "
                  "((SELECT MIN(price) FROM asks) + (SELECT MAX(price) FROM bids)) * 20000 AS spread_bps",
    "HVOL": "SELECT broker_id, SUM(volume) AS hvol FROM asks GROUP BY broker_id "
            "HAVING COUNT(*) >= 2 AND SUM(volume) > 50",
    "BIG_VOL": "SELECT SUM(CASE WHEN volume >= 20 THEN volume ELSE 0 END) AS big_vol, "
               "SUM(CASE WHEN volume < 20 THEN 1 ELSE 0 END) AS small_n FROM bids",
    "LEVELS": "SELECT COUNT(DISTINCT price) AS levels FROM bids",
    "BROKER_LEVELS": "SELECT broker_id, COUNT(DISTINCT price) AS broker_levels FROM asks GROUP BY broker_id",
    "CROSSING_VOL": "SELECT SUM(b.volume) AS crossing_vol FROM bids b "
                    "WHERE EXISTS (SELECT 1 FROM asks a WHERE a.price <= b.price)",
    "BROKER_TOPS": "SELECT COUNT(*) AS broker_tops FROM bids b WHERE NOT EXISTS "
                   "(SELECT * FROM bids b2 WHERE b2.broker_id = b.broker_id AND b2.price > b.price)",
    "TWO_SIDED": "SELECT SUM(volume) AS two_sided FROM asks WHERE broker_id IN "
                 "(SELECT b.broker_id FROM bids b WHERE b.price >= 100)",
    "UNMATCHED": "SELECT COUNT(*) AS unmatched FROM bids WHERE price NOT IN (SELECT price FROM asks)",
    "IMB_ABS": "SELECT ABS((SELECT SUM(volume) FROM bids) - (SELECT SUM(volume) FROM asks)) AS imb_abs",
    "TOP_PX": "SELECT GREATEST((SELECT MAX(price) FROM bids), (SELECT MAX(price) FROM asks)) AS top_px, "
              "LEAST((SELECT MIN(price) FROM bids), (SELECT MIN(price) FROM asks)) AS bottom_px",
    "REF_PX": "SELECT COALESCE((SELECT MAX(price) FROM bids), (SELECT MIN(price) FROM asks), -1) AS ref_px",
    "ASK_VWAP": "SELECT SUM(price * volume) / NULLIF(SUM(volume), 0) AS ask_vwap FROM asks",
    "NEAR_VOL": "WITH best AS (SELECT MAX(price) AS px FROM bids) "
                "SELECT SUM(b.volume) AS near_vol FROM bids b, best WHERE b.price >= best.px - 100",
    "EVEN_VOL": "SELECT SUM(volume) AS even_vol FROM bids WHERE id % 2 = 0",
    "MOD_N": "SELECT COUNT(*) AS mod_n FROM asks WHERE broker_id % 3 = 1",
    "TOP3_ASK": "SELECT SUM(t.v) AS top3_ask FROM "
                "(SELECT price, SUM(volume) AS v FROM asks GROUP BY price ORDER BY price LIMIT 3) t",
    "VW4": "SELECT SUM(x.px * x.v) / SUM(x.v) AS vw4 FROM (SELECT price AS px, SUM(volume) AS v, "
           "ROW_NUMBER() OVER (ORDER BY price DESC) AS r FROM bids GROUP BY price) x WHERE x.r <= 4",
    "N7": "SELECT COUNT(*) AS n7, SUM(o.volume) AS vol7 FROM "
          "(SELECT volume, price FROM asks ORDER BY price ASC, id LIMIT 7) o",
    "RK2": "SELECT r.broker_id, SUM(r.volume) AS rk2 FROM (SELECT broker_id, volume, RANK() OVER "
           "(PARTITION BY broker_id ORDER BY price DESC) AS rk FROM bids) r WHERE r.rk <= 2 GROUP BY r.broker_id",
    "FIRST_ASK": "SELECT q.broker_id, SUM(q.volume) AS first_ask FROM (SELECT broker_id, volume, ROW_NUMBER() "
                 "OVER (PARTITION BY broker_id ORDER BY price, id) AS rn FROM asks) q WHERE q.rn = 1 "
                 "GROUP BY q.broker_id",
    "BAND": "SELECT SUM(volume) AS band FROM bids WHERE price BETWEEN (SELECT MAX(price) FROM bids) - 200 "
            "AND (SELECT MAX(price) FROM bids)",
    "OFF_TOUCH": "SELECT COUNT(*) AS off_touch FROM asks WHERE price <> (SELECT MIN(price) FROM asks)",
    "N_BIDS": '/* how many sizeable bids */ select Count(*) as "N_Bids" -- trailing comment\n'
              "FROM Bids B where B.Volume > 10",
    "PRESSURE": "SELECT CASE WHEN (SELECT SUM(volume) FROM bids) > (SELECT SUM(volume) FROM asks) THEN 1 "
                "WHEN (SELECT SUM(volume) FROM bids) < (SELECT SUM(volume) FROM asks) THEN -1 ELSE 0 END "
                "AS pressure",
    "SELF_CROSS": "SELECT b.broker_id, SUM(b.volume) AS self_cross FROM bids b WHERE b.price > "
                  "(SELECT MIN(a.price) FROM asks a WHERE a.broker_id = b.broker_id) GROUP BY b.broker_id",
    "PREM": "SELECT broker_id, SUM(price * volume) / SUM(volume) - MIN(price) AS prem FROM bids GROUP BY broker_id",
    "AVG_PX": "SELECT AVG(price) AS avg_px, MAX(volume) AS max_vol, SUM(volume) / COUNT(*) AS mean_vol FROM asks",
    "RATIO": "SELECT SUM(volume) / (SELECT SUM(volume) FROM asks) AS ratio FROM bids",
    "NEAR_OWN": "SELECT COUNT(*) AS near_own FROM bids b1 WHERE b1.price >= "
                "(SELECT MAX(b2.price) FROM bids b2 WHERE b2.broker_id = b1.broker_id) - 10",
    "W": "SELECT MAX(price) - MIN(price) AS w FROM bids WHERE volume > 30",
    "AP": "SELECT broker_id, AVG(price) AS ap FROM asks WHERE volume > 5 GROUP BY broker_id HAVING MAX(price) > 100",
    "CUM": "SELECT lv.price, SUM(a.volume) AS cum FROM (SELECT price FROM asks GROUP BY price) lv, asks a "
           "WHERE a.price <= lv.price GROUP BY lv.price",
    "PAIRS": "SELECT COUNT(*) AS pairs FROM bids b JOIN asks a ON a.broker_id = b.broker_id "
             "WHERE a.price - b.price < 50",
    "SD": "SELECT SUM(DISTINCT price) AS sd FROM bids",
    "NOT_123": "SELECT SUM(volume) AS not_123 FROM bids WHERE broker_id NOT IN (1, 2, 3)",
    "SAME_PX": "SELECT COUNT(*) AS same_px FROM bids b WHERE b.price IN "
               "(SELECT a.price FROM asks a WHERE a.broker_id = b.broker_id)",
    "NEG": "SELECT -MIN(price) AS neg FROM asks",
    "CTE_TOUCH": "WITH b AS (SELECT price, volume FROM bids WHERE volume > 5), t AS (SELECT MAX(price) AS m FROM b) "
                 "SELECT SUM(b.volume) AS cte_touch FROM b, t WHERE b.price = t.m",
    "EX3": "SELECT SUM(o.volume) AS ex3 FROM (SELECT price, volume FROM bids WHERE broker_id <> 3 "
           "ORDER BY price DESC, id LIMIT 4) o",
    "WORST2": "SELECT SUM(w.volume) AS worst2 FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price ASC, id) AS rn "
              "FROM bids) w WHERE w.rn <= 2",
    "TIE3": "SELECT SUM(o.volume) AS tie3 FROM (SELECT volume FROM bids ORDER BY price DESC, t, id LIMIT 3) o",
    "TIE3_RN": "SELECT SUM(o.volume) AS tie3_rn FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, t DESC, "
               "id) AS rn FROM bids) o WHERE o.rn <= 3",
    "RK_TV": "SELECT SUM(o.volume) AS rk_tv, COUNT(*) AS rk_n FROM (SELECT volume, RANK() OVER (ORDER BY price DESC, "
             "t, volume DESC) AS rk FROM bids) o WHERE o.rk <= 3",
    "TIE_BROKER": "SELECT q.broker_id, SUM(q.volume) AS tie_broker, COUNT(*) AS tie_n FROM (SELECT broker_id, volume, "
                  "ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price, t, id) AS rn FROM asks) q "
                  "WHERE q.rn <= 2 GROUP BY q.broker_id",
    "MIDVW": "SELECT ((SELECT MAX(price) FROM bids) + (SELECT MIN(price) FROM asks)) / 2 - "
             "(SELECT SUM(price * volume) / SUM(volume) FROM bids) AS midvw",
    "TOUCH_SHARE": "SELECT b.broker_id, SUM(b.volume) / (SELECT SUM(b3.volume) FROM bids b3 WHERE b3.price = "
                   "(SELECT MAX(price) FROM bids)) AS touch_share FROM bids b WHERE b.price = "
                   "(SELECT MAX(b2.price) FROM bids b2) GROUP BY b.broker_id",
    "BEST": ('SELECT max(price) best FROM bids'),
    "QV": ('SELECT SUM("volume") AS qv FROM "bids" WHERE "price" BETWEEN 100 AND 150'),
    "NE": ('select count(price) as ne from BIDS where PRICE != 100'),
    "C1": ('SELECT COUNT(1) AS c1, 2 * SUM(volume) + 1 AS lin FROM asks'),
    "OR_V": ('SELECT SUM(volume) AS or_v FROM bids WHERE price > 100 OR broker_id = 3'),
    "HAV_NOGROUP": ('SELECT SUM(volume) AS hav_nogroup FROM bids HAVING COUNT(*) > 3'),
    "CMAX": ('SELECT COALESCE(MAX(price), 0) AS cmax FROM asks'),
    "CASE_NULL": ('SELECT CASE WHEN MAX(price) IS NULL THEN -1 ELSE MAX(price) END AS case_null FROM bids'),
    "NEAR_BROKERS": ('SELECT COUNT(DISTINCT broker_id) AS near_brokers FROM bids WHERE price >= (SELECT MAX(price) '
        'FROM bids) - 100'),
    "ANY_ASK": ('SELECT SUM(volume) AS any_ask FROM bids WHERE EXISTS (SELECT 1 FROM asks)'),
    "PARITY": ('SELECT COUNT(*) % 2 AS parity FROM bids'),
    "NOT_IN_NULL": ('SELECT COUNT(*) AS not_in_null FROM bids WHERE price NOT IN (SELECT MAX(price) FROM asks)'),
    "IN_MAX": ('SELECT SUM(volume) AS in_max FROM bids WHERE price IN (SELECT MAX(a.price) FROM asks a WHERE '
        'a.broker_id = bids.broker_id)'),
    "NESTED_CTE": ('WITH lv AS (SELECT price, SUM(volume) AS v FROM asks GROUP BY price), top AS (SELECT MIN(price) '
        'AS p FROM asks) SELECT SUM(lv.v) AS nested_cte FROM lv, top WHERE lv.price <= top.p + 50'),
    "AVG_DIST": ('SELECT AVG(DISTINCT price) AS avg_dist FROM asks'),
    "DIV_AGG": ('SELECT (SELECT MAX(price) FROM bids) / AVG(price) AS div_agg FROM asks'),
    "LEAST3": ('SELECT LEAST(MIN(price), 100, MAX(price) - 50) AS least3 FROM asks'),
    "NULLIF_EQ": ('SELECT NULLIF(MAX(price), MIN(price)) AS nullif_eq FROM bids'),
    "ABS_NEG": ('SELECT broker_id, ABS(SUM(volume) - 50) AS abs_neg FROM asks GROUP BY broker_id'),
    "RN_EQ": ('SELECT SUM(x.volume) AS rn_eq FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) '
        'AS rn FROM bids) x WHERE x.rn BETWEEN 1 AND 3'),
    "RN_LT": ('SELECT SUM(x.volume) AS rn_lt FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) '
        'AS rn FROM bids) x WHERE x.rn < 4 AND x.volume > 5'),
    "MOD_NEG": ('SELECT SUM((price - 150) % 7) AS mod_neg FROM bids'),
    "SELF_JOIN_MAX": ('SELECT MAX(b1.price - b2.price) AS self_join_max FROM bids b1, bids b2 WHERE b1.broker_id = '
        'b2.broker_id'),
    "CAST_DBL": ('SELECT SUM(CAST(price / 3 AS DOUBLE)) AS cast_dbl FROM bids'),
    "IN_MINMAX_OR": ('SELECT COUNT(*) AS in_minmax_or FROM asks WHERE price IN (SELECT MIN(price) FROM asks) OR price '
        'NOT IN (SELECT MAX(a.price) - 1 FROM asks a WHERE a.broker_id = asks.broker_id)'),
    # once rejected (REJECTED below), accepted since: GROUP BY expressions and ordinals, ALL, ROUND,
    # FILTER, CAST AS INTEGER
    "V": "SELECT broker_id % 3 AS g, SUM(volume) AS v FROM bids GROUP BY broker_id % 3",
    "GT_ALL": 'SELECT COUNT(*) AS gt_all FROM bids WHERE price > ALL (SELECT price FROM asks)',
    "RND": 'SELECT ROUND(AVG(price), 2) AS rnd FROM bids',
    "FLT": 'SELECT SUM(volume) FILTER (WHERE price > 100) AS flt FROM bids',
    "PG": 'SELECT broker_id, SUM(volume) AS pg FROM bids GROUP BY 1',
    "CAST_INT": 'SELECT SUM(CAST(price / 3 AS INTEGER)) AS cast_int FROM bids',
    # views of rows (accepted since sqlrows): the distinct keys, OFFSET in a top-N, a ladder
    "DISTINCT_ROWS": "SELECT DISTINCT broker_id AS distinct_rows FROM bids",
    "OFFSET": "SELECT SUM(t.v) AS offset FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
              "ORDER BY price DESC LIMIT 3 OFFSET 1) t",
    "LADDER": "SELECT l.price, l.v AS ladder FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
              "ORDER BY price DESC LIMIT 5) l",
}

# rejected views: (sql, words of the reason); the caret and location are checked by the test
REJECTED: dict[str, tuple[str, str]] = {
    "TIE_NOT_UNIQUE": ("SELECT SUM(o.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC, id, t LIMIT 3) o",
                       "ends its tie-break with a column the stream keeps unique"),
    "NOT_IN_AGG_GRP": ('SELECT COUNT(*) AS n FROM bids WHERE price IN (SELECT MAX(price) FROM asks GROUP BY broker_id)',
        'with GROUP BY or HAVING is not supported'),
    "LEFT_JOIN": ("SELECT COUNT(*) AS n FROM bids b LEFT JOIN asks a ON a.broker_id = b.broker_id",
                  "LEFT JOIN is not supported"),
    "NULL_KEY": ("SELECT price / broker_id AS q, SUM(volume) AS v FROM bids GROUP BY 1", "a key that can be NULL"),
    "ALL_GROUPED": ("SELECT COUNT(*) AS n FROM bids WHERE price > ALL (SELECT MAX(price) FROM asks GROUP BY broker_id)",
                    "ALL (SELECT ... GROUP BY / HAVING) is not supported"),
}

SYMBOL_VIEWS: dict[str, str] = {
    "RNG": "SELECT symbol, MAX(price) - MIN(price) AS rng FROM bids GROUP BY symbol",
    "NEAR2": "SELECT b.symbol, SUM(b.volume) AS near2 FROM bids b WHERE b.price >= "
             "(SELECT MAX(b2.price) FROM bids b2 WHERE b2.symbol = b.symbol) - 2 GROUP BY b.symbol",
    "LV3": "SELECT x.symbol, SUM(x.v) AS lv3 FROM (SELECT symbol, price, SUM(volume) AS v, ROW_NUMBER() OVER "
           "(PARTITION BY symbol ORDER BY price DESC) AS rn FROM bids GROUP BY symbol, price) x WHERE x.rn <= 3 "
           "GROUP BY x.symbol",
    "OV2": "SELECT t.symbol, SUM(t.volume) AS ov2, COUNT(*) AS on2 FROM (SELECT symbol, volume, ROW_NUMBER() OVER "
           "(PARTITION BY symbol ORDER BY price DESC, id) AS rn FROM bids) t WHERE t.rn <= 2 GROUP BY t.symbol",
    "SPR": "SELECT b.symbol, (SELECT MIN(a.price) FROM asks a WHERE a.symbol = b.symbol) - MAX(b.price) AS spr "
           "FROM bids b GROUP BY b.symbol",
    "SLEVELS": "SELECT symbol, COUNT(DISTINCT price) AS slevels FROM asks GROUP BY symbol",
    "SHAVE": "SELECT symbol, SUM(volume) AS shave FROM asks GROUP BY symbol HAVING MIN(price) < 100",
    "OT2": "SELECT t.symbol, SUM(t.volume * t.price) AS ot2 FROM (SELECT symbol, volume, price, ROW_NUMBER() OVER "
           "(PARTITION BY symbol ORDER BY price, t DESC, id) AS rn FROM asks) t WHERE t.rn <= 2 GROUP BY t.symbol",
    "SYM_BUCKET": "SELECT symbol, FLOOR(price / 2) * 2 AS bucket, SUM(volume) AS sym_bucket, COUNT(*) FILTER "
                  "(WHERE volume > 20) AS sym_big FROM bids GROUP BY symbol, 2",
    "SBEST_ORDERS": "SELECT a.symbol, COUNT(*) AS sbest_orders FROM asks a WHERE a.price = "
                    "(SELECT MIN(a2.price) FROM asks a2 WHERE a2.symbol = a.symbol) GROUP BY a.symbol",
}
