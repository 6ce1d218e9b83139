"""The qa36 outside check's views: shapes the qa32..qa35 families do not have (MIN/MAX over
arithmetic and CASE, GREATEST/LEAST with NULL arguments and of aggregates and scalar subqueries,
scalar subqueries nested two deep, correlated MIN/MAX of the other side per broker, AVG and
COUNT(DISTINCT) with HAVING on MIN/MAX and on scalar subqueries, top-N per broker with a WHERE
inside, top-N levels compared with and joined to the other side, NULLS LAST over nullable
aggregates, SELECT lists mixing aggregates and scalar subqueries, IS [NOT] NULL on aggregates and
subqueries, CAST/ROUND/TRUNC at halves and negatives, fractional and negative constants, NOT
BETWEEN with a NULL bound, IN/ANY/ALL over subqueries returning NULLs, aliases swapped inside a
subquery, a table aliased as the other one, symbol literals over the VARCHAR symbol stream),
written the way a trader or quant writes them.

Wrong answers qa36 found (now refused at the part): a ``VARCHAR`` symbol column was read as its
id, a hash, where SQL needs its name's order or a number: ``ORDER BY symbol`` (and as a tie-break,
``ORDER BY v DESC, symbol``) ordered by the hash, ``MIN/MAX(symbol)`` returned an id (so ``b.symbol
= (SELECT MIN(a.symbol) ...)`` picked the wrong symbol), and ``symbol = 1``, ``symbol IN (1, 2)``,
``symbol = broker_id``, ``symbol IN (SELECT broker_id ...)``, ``symbol + 0``, ``SUM/AVG(symbol)``,
``CAST(symbol AS INTEGER)`` compiled (DuckDB refuses them).  A set operation (UNION ALL) is now
pointed at by its keyword, not at the statement's first column.  HAVING on a view with ORDER BY /
LIMIT / OFFSET / DISTINCT kept the groups it drops as rows of 0 in the cut (taking places before
the LIMIT: ``HAVING SUM(volume) > 10 ORDER BY price DESC LIMIT 3`` showed fewer levels than
DuckDB): now refused at the HAVING (qa34's ``TOPN_HAVING_DISTINCT`` moved to its rejections).

The form is qa35's: ``VIEWS`` (over ``bids``/``asks`` of ``test_sql_minmax.HEADER``) and
``SYMBOL_VIEWS`` (with ``symbol`` of ``test_symbols.SYM_HEADER``) map a name to the SELECT DuckDB
runs; ddms compiles ``CREATE VIEW <name> AS <SELECT>`` (:func:`as_view`).  ``REJECTED``: name ->
(SQL, part of the located reason); ``SYMBOL_REJECTED`` the same over the symbol streams."""

from __future__ import annotations

VIEWS: dict[str, str] = {
    # --- MIN / MAX over arithmetic and CASE ---------------------------------------------------------
    "MAX_MIN_NOTIONAL": "SELECT MAX(price * volume) AS mx, MIN(price * volume) AS mn FROM bids",
    "MIN_NEG_PRICE": "SELECT MIN(-price) AS m, MAX(-price) AS x FROM asks",
    "BROKER_MAX_NOTIONAL": "SELECT broker_id, MAX(price * volume) AS mx FROM asks GROUP BY broker_id",
    "MAX_SIGNED_CASE": "SELECT MAX(CASE WHEN broker_id < 5 THEN price ELSE -price END) AS m FROM bids",
    "MIN_DIST_FROM_BID": "SELECT MIN(price - (SELECT MAX(price) FROM bids)) AS d FROM asks",
    "MAX_FRACTIONAL_SCORE": "SELECT MAX(price * 0.25 - volume * 1.5) AS m FROM bids",
    "MIN_ABS_FROM_100": "SELECT MIN(ABS(price - 100)) AS d, MAX(ABS(volume - 20)) AS e FROM bids",
    # --- GREATEST / LEAST with NULL arguments, of aggregates and scalar subqueries -------------------
    "GREATEST_NULL_ARG": "SELECT GREATEST(MAX(price), NULL) AS g, LEAST(MIN(price), NULL) AS l FROM asks",
    "GREATEST_OF_SIDES": "SELECT GREATEST((SELECT MAX(price) FROM bids), (SELECT MIN(price) FROM asks)) AS g",
    "LEAST_MIN_AVG": "SELECT broker_id, LEAST(MIN(price), AVG(price) - 5) AS l FROM bids GROUP BY broker_id",
    "GREATEST_NULLIFS": "SELECT SUM(GREATEST(NULLIF(volume, 10), NULLIF(price, 100))) AS s FROM bids",
    "GREATEST_GROUP_SUB": "SELECT broker_id, GREATEST(MAX(price), (SELECT MIN(price) FROM asks)) AS g FROM bids GROUP"
                          " BY broker_id",
    "LEAST_COALESCE_MIN": "SELECT LEAST(COALESCE(MIN(price), 0), 100) AS l FROM asks",
    "NULLIF_AGGS": "SELECT NULLIF(MAX(price), MIN(price)) AS x FROM bids",
    # --- scalar subqueries nested two deep -----------------------------------------------------------
    "THIRD_BID_BELOW_ASK": "SELECT (SELECT MAX(price) FROM bids WHERE price < (SELECT MAX(price) FROM bids WHERE "
                           "price < (SELECT MIN(price) FROM asks))) AS p",
    "SECOND_LEVEL_VOLUME": "SELECT SUM(volume) AS v FROM bids WHERE price = (SELECT MAX(price) FROM bids WHERE price "
                           "< (SELECT MAX(price) FROM bids))",
    "SECOND_ASK_GAP": "SELECT (SELECT MIN(price) FROM asks WHERE price > (SELECT MIN(price) FROM asks)) - (SELECT "
                      "MIN(price) FROM asks) AS gap2",
    # --- correlated MIN / MAX of the other side per broker --------------------------------------------
    "BID_AT_OWN_ASK": "SELECT COUNT(*) AS n FROM bids b WHERE b.price >= (SELECT MIN(a.price) FROM asks a WHERE "
                      "a.broker_id = b.broker_id)",
    "BROKER_OWN_SPREAD": "SELECT b.broker_id, (SELECT MIN(a.price) FROM asks a WHERE a.broker_id = b.broker_id) - "
                         "MAX(b.price) AS s FROM bids b GROUP BY b.broker_id",
    "ASK_NEAR_OWN_BID": "SELECT a.broker_id, SUM(a.volume) AS v FROM asks a WHERE a.price < (SELECT MAX(b.price) FROM"
                        " bids b WHERE b.broker_id = a.broker_id) + 5 GROUP BY a.broker_id",
    "ASK_LO_BID_HI": "SELECT a.broker_id, MIN(a.price) AS lo, (SELECT MAX(b.price) FROM bids b WHERE b.broker_id = "
                     "a.broker_id) AS hi FROM asks a GROUP BY a.broker_id",
    # --- AVG / COUNT(DISTINCT) with HAVING on MIN / MAX and on scalar subqueries ---------------------
    "AVG_HAVING_RANGE": "SELECT broker_id, AVG(volume) AS av FROM bids GROUP BY broker_id HAVING MAX(price) - "
                        "MIN(price) >= 5",
    "NDIST_HAVING_MIN": "SELECT broker_id, COUNT(DISTINCT price) AS nd FROM asks GROUP BY broker_id HAVING "
                        "MIN(volume) < 10",
    "AVG_HAVING_MAX_NOT_NULL": "SELECT price, AVG(volume) AS av FROM bids GROUP BY price HAVING MAX(CASE WHEN "
                               "broker_id = 1 THEN volume END) IS NOT NULL",
    "NDIST_HAVING_AVG_MIN": "SELECT broker_id, COUNT(DISTINCT volume) AS nv FROM bids GROUP BY broker_id HAVING "
                            "AVG(price) > MIN(price) + 1",
    "HAVING_CROSS_SIDE": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING MAX(price) >= "
                         "(SELECT MIN(price) FROM asks)",
    "HAVING_SUB_NULL_OR": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id HAVING (SELECT MAX(price) "
                          "FROM bids) IS NULL OR MIN(price) < (SELECT MAX(price) FROM bids) + 10",
    "NDIST_EXPR_HAVING": "SELECT broker_id, COUNT(DISTINCT price * 2) AS n FROM bids GROUP BY broker_id HAVING "
                         "MAX(volume) > 5",
    "HAVING_NO_GROUP": "SELECT SUM(volume) AS v FROM bids HAVING COUNT(*) > 2",
    "HAVING_ALIAS": "SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id HAVING v > 30",
    # --- top-N per broker with a WHERE inside; top-N levels against the other side -------------------
    "BROKER_TOP2_BIG": "SELECT broker_id, SUM(volume) AS v FROM (SELECT broker_id, volume, ROW_NUMBER() OVER "
                       "(PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids WHERE volume >= 10) x WHERE "
                       "rn <= 2 GROUP BY broker_id",
    "TOP_LEVELS_NEAR_ASK": "SELECT COUNT(*) AS n FROM (SELECT price FROM bids GROUP BY price ORDER BY price DESC "
                           "LIMIT 3) t WHERE t.price >= (SELECT MIN(price) FROM asks) - 10",
    "TOP_LEVELS_JOINED": "SELECT SUM(a.volume) AS v FROM (SELECT price FROM asks GROUP BY price ORDER BY price LIMIT "
                         "2) t JOIN asks a ON a.price = t.price",
    "TOP_LEVELS_CROSSING": "SELECT COUNT(*) AS n FROM (SELECT price FROM bids GROUP BY price ORDER BY price DESC "
                           "LIMIT 3) b JOIN (SELECT price FROM asks GROUP BY price ORDER BY price LIMIT 3) a ON "
                           "b.price >= a.price",
    "LIMIT_ZERO": "SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price, id LIMIT 0) x",
    # --- NULLS LAST over nullable aggregates, the default NULL order -----------------------------------
    "BROKERS_NULLS_LAST": "SELECT broker_id, MAX(price) AS hi FROM bids GROUP BY broker_id ORDER BY hi DESC NULLS "
                          "LAST, broker_id LIMIT 2",
    "LEVELS_NULLS_FIRST": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER "
                          "BY price DESC NULLS FIRST LIMIT 2) x",
    "NULLS_LAST_NULLABLE": "SELECT broker_id, MAX(CASE WHEN volume > 20 THEN price END) AS hi FROM bids GROUP BY "
                           "broker_id ORDER BY hi DESC NULLS LAST, broker_id LIMIT 2",
    "NULLS_DEFAULT_ASC": "SELECT broker_id, MIN(CASE WHEN volume > 20 THEN price END) AS lo FROM asks GROUP BY "
                         "broker_id ORDER BY lo, broker_id LIMIT 2",
    # --- aggregates and scalar subqueries mixed in arithmetic ----------------------------------------
    "BID_SHARE_OF_BOTH": "SELECT SUM(volume) / ((SELECT SUM(volume) FROM asks) + SUM(volume)) AS share FROM bids",
    "BROKER_PCT_AND_GAP": "SELECT broker_id, SUM(volume) * 100.0 / (SELECT SUM(volume) FROM bids) AS pct, MAX(price) "
                          "- (SELECT MIN(price) FROM asks) AS gap FROM bids GROUP BY broker_id",
    "COUNTS_AND_RATIO": "SELECT COUNT(*) + (SELECT COUNT(*) FROM asks) AS n, MAX(price) / (SELECT MIN(price) FROM "
                        "asks) AS r FROM bids",
    "SUM_OVER_MAX": "SELECT SUM(volume) / MAX(volume) AS r, MIN(price) / MAX(price) AS q FROM bids",
    "CASE_OF_RANGE": "SELECT CASE WHEN MAX(price) - MIN(price) > 50 THEN MAX(price) ELSE MIN(price) END AS p FROM "
                     "asks",
    "NEG_ZERO_DIV": "SELECT SUM(volume) / (COUNT(*) - COUNT(*)) AS x FROM bids",
    # --- IS [NOT] NULL on aggregates and subqueries ---------------------------------------------------
    "SUB_IS_NULL_FLAG": "SELECT CASE WHEN (SELECT MAX(price) FROM bids WHERE volume > 35) IS NULL THEN 0 ELSE 1 END "
                        "AS has_big",
    "WHERE_SUB_NOT_NULL": "SELECT SUM(volume) AS v FROM asks WHERE (SELECT MAX(price) FROM bids) IS NOT NULL",
    "NO_OWN_ASK": "SELECT COUNT(*) AS n FROM bids b WHERE (SELECT MIN(a.price) FROM asks a WHERE a.broker_id = "
                  "b.broker_id) IS NULL",
    "GROUP_AGG_IS_NULL": "SELECT broker_id, CASE WHEN MAX(CASE WHEN volume > 30 THEN price END) IS NULL THEN 1 ELSE 0"
                         " END AS none_big FROM asks GROUP BY broker_id",
    # --- CAST, ROUND, TRUNC, SIGN, MOD at halves and negatives ----------------------------------------
    "CAST_INTEGER": "SELECT SUM(CAST(price AS INTEGER)) AS s, MAX(CAST(volume / 3 AS INTEGER)) AS m FROM bids",
    "CAST_DOUBLE": "SELECT SUM(CAST(volume AS DOUBLE) / 4) AS s FROM asks",
    "CAST_BIGINT_MOD": "SELECT COUNT(*) AS n FROM bids WHERE CAST(id AS BIGINT) % 2 = 0",
    "CAST_HALF": "SELECT SUM(CAST(volume / 4 AS INTEGER)) AS s, SUM(CAST(-volume / 4 AS INTEGER)) AS t FROM bids",
    "ROUND_HALF": "SELECT SUM(ROUND(volume / 4)) AS s, SUM(ROUND(-volume / 4)) AS t FROM bids",
    "ROUND_AVG_2": "SELECT broker_id, ROUND(AVG(price), 2) AS ap FROM bids GROUP BY broker_id",
    "ROUND_DIGITS_HALF": "SELECT SUM(ROUND(volume / 8, 1)) AS s FROM asks",
    "SIGN_FN": "SELECT SUM(SIGN(price - 100)) AS s FROM asks",
    "TRUNC_FN": "SELECT SUM(TRUNC(-volume / 3)) AS s FROM asks",
    "MOD_FN": "SELECT SUM(MOD(id, 3)) AS s FROM asks",
    # --- fractional and negative constants -------------------------------------------------------------
    "NEAR_TOUCH_FRACTION": "SELECT SUM(volume) AS v FROM bids WHERE price >= (SELECT MAX(price) FROM bids) * 0.995",
    "NEG_FRACTION_WEIGHTS": "SELECT SUM(volume * -0.5 + price * 0.125) AS s FROM asks",
    "NEG_DIFF_SUB": "SELECT COUNT(*) AS n FROM asks WHERE (SELECT MAX(price) FROM bids) - price > -2.5",
    "IN_NEG_LIST": "SELECT COUNT(*) AS n FROM bids WHERE broker_id - 5 IN (-1, -2, 0.5)",
    # --- NOT BETWEEN ------------------------------------------------------------------------------------
    "NOT_BETWEEN_NULL_BOUND": "SELECT COUNT(*) AS n FROM bids WHERE price NOT BETWEEN (SELECT MIN(price) FROM asks) "
                              "AND 200",
    "NOT_BETWEEN_GROUPED": "SELECT broker_id, SUM(volume) AS v FROM asks WHERE volume NOT BETWEEN 10 AND 30 GROUP BY "
                           "broker_id",
    # --- IN / ANY / ALL over subqueries that return NULLs ----------------------------------------------
    "IN_SUB_NULLIF": "SELECT COUNT(*) AS n FROM bids WHERE broker_id IN (SELECT NULLIF(broker_id, 2) FROM asks)",
    "NOT_IN_SUB_CASE_NULL": "SELECT SUM(volume) AS v FROM asks WHERE price NOT IN (SELECT CASE WHEN volume > 20 THEN "
                            "price END FROM bids)",
    "IN_SUB_NULL_GROUPED": "SELECT broker_id, COUNT(*) AS n FROM bids WHERE price IN (SELECT NULLIF(price, 100) FROM "
                           "asks) GROUP BY broker_id",
    "EQ_ANY_NULLS": "SELECT COUNT(*) AS n FROM bids WHERE broker_id = ANY (SELECT NULLIF(broker_id, 3) FROM asks)",
    "NE_ALL_NULLS": "SELECT COUNT(*) AS n FROM bids WHERE broker_id <> ALL (SELECT NULLIF(broker_id, 3) FROM asks)",
    "NE_ANY": "SELECT COUNT(*) AS n FROM bids WHERE price <> ANY (SELECT price FROM asks)",
    "EQ_ALL": "SELECT COUNT(*) AS n FROM bids WHERE price = ALL (SELECT price FROM asks WHERE broker_id = 1)",
    # --- names: aliases swapped in a subquery, a table aliased as the other, unqualified inner columns -
    "ALIAS_SWAP_SUB": "SELECT SUM(x.volume) AS s FROM (SELECT price AS volume, volume AS price FROM asks) x",
    "ALIAS_SWAP_TOPN": "SELECT SUM(x.volume) AS s FROM (SELECT price AS volume, volume AS price FROM asks ORDER BY "
                       "volume, id LIMIT 2) x",
    "ALIAS_TABLE_AS_OTHER": "SELECT SUM(asks.volume) AS s FROM bids asks",
    "UNQUALIFIED_INNER": "SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE a.price = price)",
    "QUOTED_IDENTS": "SELECT MAX(\"PRICE\") AS p, SUM(\"Volume\") AS v FROM \"bids\"",
    "BLOCK_COMMENT": "SELECT /* best */ MAX(price) /* bid */ AS p FROM bids -- trailing\n",
    "BUCKET_ALIAS_GROUP": "SELECT FLOOR(price / 10) * 10 AS bucket, SUM(volume) AS v FROM bids GROUP BY bucket",
    "GROUP_BY_ALL": "SELECT broker_id, SUM(volume) AS v FROM asks GROUP BY ALL",
    # --- constants -----------------------------------------------------------------------------------------
    "WHERE_FALSE": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM bids WHERE 1 = 0",
    "COUNT_ONE": "SELECT COUNT(1) AS a, SUM(1) AS b, COUNT(0) AS c FROM asks",
    "CONST_VIEW": "SELECT 1 AS one",
    # --- qa36 round 2: correlated HAVING and nets per broker, nested correlation, joins of three, a CTE
    # joined with itself, ROW_NUMBER ranges, cuts over groups of zeros, levels as subqueries ------------
    "NULLS_DEFAULT_DESC": "SELECT broker_id, MAX(CASE WHEN volume > 20 THEN price END) AS hi FROM bids GROUP BY "
                          "broker_id ORDER BY hi DESC, broker_id LIMIT 2",
    "HAVING_CORR_GROUP": "SELECT b.broker_id, MAX(b.price) AS hi FROM bids b GROUP BY b.broker_id HAVING MAX(b.price)"
                         " >= (SELECT MIN(a.price) FROM asks a WHERE a.broker_id = b.broker_id)",
    "NET_BY_BROKER": "SELECT b.broker_id, SUM(b.volume) - COALESCE((SELECT SUM(a.volume) FROM asks a WHERE "
                     "a.broker_id = b.broker_id), 0) AS net FROM bids b GROUP BY b.broker_id",
    "NESTED_CORR_2": "SELECT COUNT(*) AS n FROM bids b WHERE b.price = (SELECT MAX(b2.price) FROM bids b2 WHERE "
                     "b2.broker_id = b.broker_id AND b2.price < (SELECT MIN(a.price) FROM asks a WHERE a.broker_id = "
                     "b2.broker_id))",
    "TOUCH_MAX_VOL": "SELECT COUNT(*) AS n FROM bids WHERE price = (SELECT MAX(price) FROM bids) AND volume = (SELECT"
                     " MAX(volume) FROM bids WHERE price = (SELECT MAX(price) FROM bids))",
    "THREE_WAY": "SELECT COUNT(*) AS n FROM bids b, asks a, bids b2 WHERE a.price <= b.price AND b2.broker_id = "
                 "a.broker_id AND b2.price > b.price",
    "SAME_PRICE_PAIRS": "SELECT COUNT(*) AS n FROM bids b1 JOIN bids b2 ON b1.price = b2.price AND b1.id < b2.id",
    "GROUP_BOTH_SIDES": "SELECT b.broker_id, a.broker_id AS ab, COUNT(*) AS n FROM bids b JOIN asks a ON a.price <= "
                        "b.price GROUP BY b.broker_id, a.broker_id",
    "CTE_SELF_JOIN": "WITH lv AS (SELECT price, SUM(volume) AS v FROM bids GROUP BY price) SELECT COUNT(*) AS n FROM "
                     "lv l1, lv l2 WHERE l1.price < l2.price AND l1.v > l2.v",
    "RN_BETWEEN": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                  "FROM bids) x WHERE rn BETWEEN 2 AND 3",
    "ZERO_GROUP_LIMIT": "SELECT broker_id, SUM(CASE WHEN price > 100 THEN volume ELSE 0 END) AS v FROM bids GROUP BY "
                        "broker_id ORDER BY broker_id LIMIT 2",
    "ZERO_GROUP_TOPV": "SELECT broker_id, SUM(CASE WHEN price > 100 THEN volume ELSE 0 END) AS v FROM bids GROUP BY "
                       "broker_id ORDER BY v, broker_id LIMIT 2",
    "WHERE_GROUP_LIMIT": "SELECT broker_id, COUNT(*) AS n FROM bids WHERE price > 100 GROUP BY broker_id ORDER BY n "
                         "DESC, broker_id LIMIT 2",
    "SUB_TOP_HAVING": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids WHERE volume > 5 GROUP BY "
                      "price ORDER BY price DESC LIMIT 2) x WHERE x.v > 20",
    "EXISTS_CORR_AGG": "SELECT b.broker_id, COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE "
                       "a.broker_id = b.broker_id AND a.volume > b.volume) GROUP BY b.broker_id HAVING COUNT(*) > 1",
    "AVG_OF_MAXES": "SELECT AVG(m) AS a, MAX(m) - MIN(m) AS r FROM (SELECT broker_id, MAX(price) AS m FROM bids GROUP"
                    " BY broker_id) x",
    "PRICE_OF_BIGGEST_LEVEL": "SELECT MAX(x.price) AS p FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY "
                              "price) x WHERE x.v = (SELECT MAX(y.v) FROM (SELECT price, SUM(volume) AS v FROM bids "
                              "GROUP BY price) y)",
    "MICRO_PRICE": "SELECT ((SELECT MAX(price) FROM bids) * (SELECT SUM(volume) FROM asks WHERE price = (SELECT "
                   "MIN(price) FROM asks)) + (SELECT MIN(price) FROM asks) * (SELECT SUM(volume) FROM bids WHERE "
                   "price = (SELECT MAX(price) FROM bids))) / ((SELECT SUM(volume) FROM asks WHERE price = (SELECT "
                   "MIN(price) FROM asks)) + (SELECT SUM(volume) FROM bids WHERE price = (SELECT MAX(price) FROM "
                   "bids))) AS micro",
    "BETWEEN_NEG_RANGE": "SELECT COUNT(*) AS n FROM bids WHERE price BETWEEN 150 AND 100",
    "GROUP_BY_ID_MOD_HAVING": "SELECT id % 3 AS k, MAX(price) - MIN(price) AS r FROM bids GROUP BY id % 3 HAVING "
                              "COUNT(*) > 1",
    "LADDER_SCALAR_WHERE": "SELECT price, SUM(volume) AS v FROM bids WHERE price > (SELECT MIN(price) FROM asks) - "
                           "100 GROUP BY price ORDER BY price DESC LIMIT 2",
    "NULLS_LAST_OFFSET": "SELECT broker_id, MAX(CASE WHEN volume > 20 THEN price END) AS hi FROM bids GROUP BY "
                         "broker_id ORDER BY hi DESC NULLS LAST, broker_id LIMIT 2 OFFSET 1",
    "LEVELS_BY_COUNT": "SELECT price, COUNT(*) AS n FROM asks GROUP BY price ORDER BY n DESC, price LIMIT 2",
    "MAX_OF_NULL_SUMS": "SELECT MAX(x.v) AS m, COUNT(x.v) AS c FROM (SELECT broker_id, SUM(CASE WHEN price > 100 THEN"
                        " volume END) AS v FROM bids GROUP BY broker_id) x",
    "BROKER_TOP2_LEVELS": "SELECT broker_id, SUM(v) AS v FROM (SELECT broker_id, price, SUM(volume) AS v, "
                          "ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price DESC) AS rn FROM bids GROUP BY "
                          "broker_id, price) x WHERE rn <= 2 GROUP BY broker_id",
    "TOP_ORDER_ROWS_WHERE": "SELECT price, id, volume FROM asks WHERE broker_id = 2 ORDER BY price, id LIMIT 2",
    "CORR_AVG_WHERE": "SELECT SUM(b.volume) AS v FROM bids b WHERE b.volume > (SELECT AVG(a.volume) FROM asks a WHERE"
                      " a.broker_id = b.broker_id)",
    "CORR_SUM_CMP_GROUP": "SELECT b.broker_id, COUNT(*) AS n FROM bids b WHERE b.volume * 2 > (SELECT SUM(a.volume) "
                          "FROM asks a WHERE a.broker_id = b.broker_id) GROUP BY b.broker_id",
    "DISTINCT_TOP_SUB": "SELECT COUNT(*) AS n, SUM(x.price) AS s FROM (SELECT DISTINCT price FROM asks ORDER BY price"
                        " LIMIT 3) x",
    "MINMAX_JOIN_GROUP": "SELECT a.broker_id, MIN(a.price) - MAX(b.price) AS d FROM asks a JOIN bids b ON b.broker_id"
                         " = a.broker_id GROUP BY a.broker_id",
    # refused before qa37 (IS [NOT] DISTINCT FROM, IS [NOT] TRUE/FALSE, GROUP BY (), WHERE NULL): exact now
    "IS_DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(broker_id, 1) IS DISTINCT FROM 2",
    "IS_NOT_DISTINCT_FROM": "SELECT COUNT(*) AS n FROM bids WHERE NULLIF(broker_id, 1) IS NOT DISTINCT FROM "
                            "NULLIF(volume, volume)",
    "IS_NOT_TRUE": "SELECT COUNT(*) AS n FROM bids WHERE (price > (SELECT MIN(price) FROM asks)) IS NOT TRUE",
    "IS_FALSE": "SELECT COUNT(*) AS n FROM bids WHERE (price > (SELECT MIN(price) FROM asks)) IS FALSE",
    "GROUP_BY_EMPTY": "SELECT MAX(price) AS p FROM bids GROUP BY ()",
    "WHERE_NULL": "SELECT COUNT(*) AS n FROM bids WHERE NULL",
    "CASE_WHEN_NULL": "SELECT SUM(CASE WHEN NULL THEN 1 ELSE volume END) AS s FROM bids",
    # refused before qa37 (rn > m, DENSE_RANK): exact now
    "RN_GT_1": "SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM "
              "bids) x WHERE rn > 1",
    "DENSE_RANK_LV": "SELECT COUNT(*) AS n, SUM(volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price "
                    "DESC) AS dr FROM bids) x WHERE dr <= 2",
}

SYMBOL_VIEWS: dict[str, str] = {
    "SYM_AAA_TOP_LEVELS": "SELECT SUM(x.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids WHERE symbol = 'AAA' "
                          "GROUP BY price ORDER BY price DESC LIMIT 2) x",
    "SYM_IN_HAVING_MIN": "SELECT symbol, SUM(volume) AS v FROM asks WHERE symbol IN ('AAA', 'BBB') GROUP BY symbol "
                         "HAVING MIN(price) < 150",
    "SYM_CASE_NET": "SELECT SUM(CASE WHEN symbol = 'AAA' THEN volume WHEN symbol = 'BBB' THEN -volume ELSE 0 END) AS "
                    "net FROM bids",
    "SYM_TOUCH_COUNT": "SELECT b.symbol, COUNT(*) AS n FROM bids b WHERE b.price = (SELECT MAX(b2.price) FROM bids b2"
                       " WHERE b2.symbol = b.symbol) GROUP BY b.symbol",
    "SYM_SPREAD_NOT_CD": "SELECT a.symbol, MIN(a.price) - (SELECT MAX(b.price) FROM bids b WHERE b.symbol = a.symbol)"
                         " AS sp FROM asks a WHERE a.symbol <> 'C/D' GROUP BY a.symbol",
    "SYM_HAVING_IN": "SELECT symbol, MAX(price) AS hi FROM bids GROUP BY symbol HAVING symbol IN ('AAA', 'C/D') AND "
                     "COUNT(DISTINCT broker_id) >= 1",
    "SYM_TOP2_NOT_BBB": "SELECT symbol, SUM(volume) AS v FROM (SELECT symbol, volume, ROW_NUMBER() OVER (PARTITION BY"
                        " symbol ORDER BY price DESC, id) AS rn FROM bids WHERE symbol <> 'BBB') x WHERE rn <= 2 "
                        "GROUP BY symbol",
    "SYM_AAA_MINUS_BBB": "SELECT (SELECT MAX(price) FROM bids WHERE symbol = 'AAA') - (SELECT MAX(price) FROM bids "
                         "WHERE symbol = 'BBB') AS d",
    "SYM_CASE_GROUP": "SELECT CASE WHEN symbol = 'AAA' THEN 1 ELSE 0 END AS is_a, SUM(volume) AS v FROM asks GROUP BY"
                      " CASE WHEN symbol = 'AAA' THEN 1 ELSE 0 END",
    "SYM_COUNT_DISTINCT": "SELECT COUNT(DISTINCT symbol) AS n FROM bids WHERE volume > 10",
    "SYM_MAX_NOTIONAL": "SELECT symbol, MAX(price * volume) AS mx FROM asks WHERE symbol NOT IN ('ZZZ') GROUP BY "
                        "symbol",
    "SYM_COUNT_SYMBOL": "SELECT COUNT(symbol) AS n FROM bids",
    "SYM_COUNT_DISTINCT_G": "SELECT broker_id, COUNT(DISTINCT symbol) AS n FROM bids GROUP BY broker_id",
    "SYM_IN_SUB": "SELECT COUNT(*) AS n FROM bids WHERE symbol IN (SELECT symbol FROM asks WHERE price > 150)",
    "SYM_ANY_SUB": "SELECT COUNT(*) AS n FROM bids WHERE symbol = ANY (SELECT symbol FROM asks WHERE volume > 30)",
    "SYM_OR_PRICE": "SELECT SUM(volume) AS v FROM bids WHERE symbol = 'AAA' OR price > 100",
    "SYM_IN_NULL": "SELECT COUNT(*) AS n FROM bids WHERE symbol IN ('AAA', NULL)",
    "SYM_NOT_IN_NULL": "SELECT COUNT(*) AS n FROM bids WHERE symbol NOT IN ('AAA', NULL)",
    "SYM_IS_NULL": "SELECT COUNT(*) AS n FROM bids WHERE symbol IS NULL",
    "SYM_NE_ALL": "SELECT COUNT(*) AS n FROM bids b WHERE b.symbol <> ALL (SELECT a.symbol FROM asks a)",
    "SYM_FILTER": "SELECT SUM(volume) FILTER (WHERE symbol = 'AAA') AS a, MAX(price) FILTER (WHERE symbol <> 'BBB') "
                  "AS b FROM bids",
    "SYM_CASE_ELSE_NUM": "SELECT symbol, MAX(CASE symbol WHEN 'AAA' THEN price WHEN 'BBB' THEN -price END) AS m FROM "
                         "asks GROUP BY symbol",
    "SYM_CASE_SIMPLE": "SELECT symbol, MAX(CASE symbol WHEN 'AAA' THEN price WHEN 'BBB' THEN -price END) AS m FROM "
                       "asks GROUP BY symbol",
    "SYM_DISTINCT_CTE": "WITH s AS (SELECT DISTINCT symbol FROM bids) SELECT COUNT(*) AS n FROM s",
    "SYM_LOWER_LITERAL": "SELECT COUNT(*) AS n FROM bids WHERE symbol = 'aaa'",
    "SYM_JOIN_EQ": "SELECT b.symbol, COUNT(*) AS n FROM bids b JOIN asks a ON b.symbol = a.symbol AND a.price <= "
                   "b.price GROUP BY b.symbol",
    "SYM_NET": "SELECT b.symbol, SUM(b.volume) - COALESCE((SELECT SUM(a.volume) FROM asks a WHERE a.symbol = "
               "b.symbol), 0) AS net FROM bids b GROUP BY b.symbol",
    "SYM_CROSS_SYMBOL": "SELECT COUNT(*) AS n FROM bids b JOIN asks a ON a.price <= b.price WHERE b.symbol = 'AAA' "
                        "AND a.symbol = 'BBB'",
    "SYM_SUB_OTHER": "SELECT (SELECT SUM(volume) FROM bids WHERE symbol = 'AAA') / (SELECT SUM(volume) FROM bids "
                     "WHERE symbol <> 'AAA') AS r",
    "SYM_GROUP_HAVING_SUB": "SELECT symbol, SUM(volume) AS v FROM bids GROUP BY symbol HAVING SUM(volume) > (SELECT "
                            "SUM(volume) FROM bids WHERE symbol = 'AAA')",
    "SYM_CORR_COUNT": "SELECT b.symbol, COUNT(*) AS n FROM bids b WHERE (SELECT COUNT(*) FROM asks a WHERE a.symbol ="
                      " b.symbol AND a.price <= b.price) > 0 GROUP BY b.symbol",
}

REJECTED: dict[str, tuple[str, str]] = {
    # a set operation: one view per part (was pointed at the statement's first column)
    "UNION_ALL": ("SELECT MAX(price) AS p FROM bids UNION ALL SELECT MIN(price) AS p FROM asks",
                  "only SELECT views are supported, not UNION"),
    "INTERSECT": ("SELECT broker_id FROM bids INTERSECT SELECT broker_id FROM asks",
                  "only SELECT views are supported, not INTERSECT"),
    # HAVING with a cut: the dropped groups were rows of 0 taking places in the LIMIT (wrong answers)
    "HAVING_THEN_LIMIT": ("SELECT price, SUM(volume) AS v FROM bids GROUP BY price HAVING SUM(volume) > 10 ORDER BY "
                          "price DESC LIMIT 3",
                          "HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported"),
    "HAVING_LIMIT_COUNT": ("SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id HAVING MIN(price) > 99 ORDER"
                           " BY broker_id LIMIT 2",
                           "HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported"),
    "LADDER_HAVING_OFFSET": ("SELECT price, COUNT(*) AS n FROM asks GROUP BY price HAVING COUNT(*) >= 2 ORDER BY "
                             "price LIMIT 2 OFFSET 1",
                             "HAVING with ORDER BY / LIMIT / OFFSET / DISTINCT on a view is not supported"),
    # legal SQL without an exact incremental form here (yet): refused at the part
    "RN_NE_1": ("SELECT COUNT(*) AS n FROM (SELECT volume, ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price, "
                "id) AS rn FROM asks) x WHERE rn <> 1",
                "keeps the first rows of a top-N"),
    "RN_IN": ("SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price, id) AS rn FROM asks) x"
              " WHERE rn IN (1, 3)",
              "keeps the first rows of a top-N"),
    "RN_OR_VOLUME": ("SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                     "FROM bids) x WHERE rn <= 2 OR volume > 30",
                     "keeps the first rows of a top-N"),
    "RN_NOT_GT": ("SELECT SUM(volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn "
                  "FROM bids) x WHERE NOT rn > 2",
                  "keeps the first rows of a top-N"),
    "IN_SUB_GROUP_HAVING": ("SELECT COUNT(*) AS n FROM bids WHERE broker_id IN (SELECT broker_id FROM asks GROUP BY "
                            "broker_id HAVING COUNT(*) > 1)",
                            "IN (SELECT ...) with GROUP BY or HAVING is not supported"),
    "IN_SUB_GROUP": ("SELECT COUNT(*) AS n FROM bids WHERE price IN (SELECT MIN(price) FROM asks GROUP BY broker_id)",
                     "IN (SELECT ...) with GROUP BY or HAVING is not supported"),
    "IN_TWO_COL_SUB": ("SELECT COUNT(*) AS n FROM bids b WHERE (b.broker_id, b.price) IN (SELECT a.broker_id, a.price"
                       " FROM asks a)",
                       "unsupported expression (TUPLE)"),
    "TOP_NOTIONAL_ORDERS": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price * volume DESC, id"
                            " LIMIT 3) x",
                            "a top-N is ordered by columns"),
    "NEAREST_TO_100": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM asks ORDER BY ABS(price - 100), id LIMIT "
                       "2) x",
                       "a top-N is ordered by columns"),
    "NULLS_FIRST_NULLABLE": ("SELECT broker_id, MAX(CASE WHEN volume > 20 THEN price END) AS hi FROM bids GROUP BY "
                             "broker_id ORDER BY hi DESC NULLS FIRST, broker_id LIMIT 2",
                             "NULLS FIRST is not supported"),
    "CTE_SHADOWS_STREAM": ("WITH bids AS (SELECT * FROM asks) SELECT MAX(price) AS p FROM bids",
                           "SELECT * is not supported"),
    "SELECT_STAR_AGG": ("SELECT COUNT(*) AS n FROM (SELECT * FROM bids WHERE price > 100) x",
                        "SELECT * is not supported"),
    "LEFT_JOIN_COUNT": ("SELECT b.broker_id, COUNT(a.id) AS n FROM bids b LEFT JOIN asks a ON a.broker_id = "
                        "b.broker_id GROUP BY b.broker_id",
                        "LEFT JOIN is not supported"),
    "LEFT_JOIN_STAR": ("SELECT COUNT(*) AS n FROM bids b LEFT JOIN asks a ON a.broker_id = b.broker_id",
                       "LEFT JOIN is not supported"),
    "JOIN_USING": ("SELECT COUNT(*) AS n FROM bids JOIN asks USING (broker_id)",
                   "JOIN ... USING is not supported"),
    "COALESCE_COND": ("SELECT COUNT(*) AS n FROM bids WHERE COALESCE(price > (SELECT MIN(price) FROM asks), TRUE)",
                      "unsupported condition (COALESCE)"),
    "QUALIFY_TOP": ("SELECT SUM(volume) AS v FROM (SELECT volume FROM bids QUALIFY ROW_NUMBER() OVER (ORDER BY price "
                    "DESC, id) <= 2) x",
                    "QUALIFY is not supported"),
    "WINDOW_SUM_PART": ("SELECT MAX(x.tot) AS m FROM (SELECT SUM(volume) OVER (PARTITION BY broker_id) AS tot FROM "
                        "bids) x",
                        "ROW_NUMBER(), RANK() and DENSE_RANK() (a top-N) are supported"),
    "COUNT_OVER_EMPTY": ("SELECT MAX(x.n) AS m FROM (SELECT COUNT(*) OVER () AS n FROM bids) x",
                         "ROW_NUMBER(), RANK() and DENSE_RANK() (a top-N) are supported"),
    "POWER_FN": ("SELECT SUM(POWER(volume, 2)) AS s FROM bids",
                 "unsupported expression (POW)"),
    "CARET_POW": ("SELECT SUM(volume ^ 2) AS s FROM bids", "unsupported expression (^, a power)"),
    "STDDEV": ("SELECT STDDEV_POP(price) AS s FROM bids",
               "unsupported expression (STDDEVPOP)"),
    "MEDIAN": ("SELECT MEDIAN(price) AS m FROM bids",
               "unsupported expression (MEDIAN)"),
    "STRING_NUM_CMP": ("SELECT COUNT(*) AS n FROM bids WHERE price > '100'",
                       "price is not a VARCHAR column"),
    "IN_SUB_LIMIT": ("SELECT COUNT(*) AS n FROM bids WHERE price IN (SELECT price FROM asks ORDER BY price, id LIMIT "
                     "1)",
                     "ORDER BY ... LIMIT is supported in a subquery in FROM"),
    "EXISTS_LIMIT": ("SELECT COUNT(*) AS n FROM bids b WHERE EXISTS (SELECT 1 FROM asks a WHERE a.price <= b.price "
                     "LIMIT 1)",
                     "ORDER BY ... LIMIT is supported in a subquery in FROM"),
    "WHERE_ALIAS": ("SELECT SUM(x.n) AS s FROM (SELECT price * volume AS n FROM bids WHERE n > 1000) x",
                    "unknown column n"),
    "DISTINCT_ON": ("SELECT SUM(x.volume) AS v FROM (SELECT DISTINCT ON (broker_id) broker_id, volume FROM bids ORDER"
                    " BY broker_id, price DESC, id) x",
                    "ORDER BY without LIMIT in a subquery changes no aggregate"),
    "TOPN_NO_TIEBREAK": ("SELECT SUM(x.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC LIMIT 2) x",
                         "needs a unique tie-break"),
    "BETWEEN_SYM_SUB": ("SELECT COUNT(*) AS n FROM bids WHERE price BETWEEN SYMMETRIC (SELECT MIN(price) FROM asks) "
                        "AND 100",
                        "BETWEEN SYMMETRIC is not supported"),
    "COUNT_STAR_ALIAS_ORDER": ("SELECT broker_id, COUNT(*) AS cnt FROM bids GROUP BY broker_id ORDER BY COUNT(*) "
                               "DESC, broker_id LIMIT 2",
                               "ORDER BY names its output columns"),
    "ORDER_BY_EXPR_GROUP": ("SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id ORDER BY SUM(price * "
                            "volume) DESC, broker_id LIMIT 2",
                            "ORDER BY names its output columns"),
    "INT_DIV_COUNT": ("SELECT COUNT(*) / 2 AS h, broker_id / 3 AS b3 FROM bids GROUP BY broker_id",
                      "outside an aggregate, the SELECT list may name GROUP BY columns"),
}

SYMBOL_REJECTED: dict[str, tuple[str, str]] = {
    # a symbol read as a number (its id, a hash): wrong answers before qa36, now refused at the part
    "SYM_ORDER_BY_SYMBOL": ("SELECT symbol, SUM(volume) AS v FROM bids GROUP BY symbol ORDER BY symbol LIMIT 2",
                            "ORDER BY symbol: a VARCHAR column"),
    "SYM_ORDER_BY_V": ("SELECT symbol, SUM(volume) AS v FROM bids GROUP BY symbol ORDER BY v DESC, symbol LIMIT 2",
                       "ORDER BY symbol: a VARCHAR column"),
    "SYM_TOP_LEVELS_SYM": ("SELECT SUM(x.v) AS v FROM (SELECT symbol, SUM(volume) AS v FROM bids GROUP BY symbol "
                           "ORDER BY symbol LIMIT 1) x",
                           "not a number for an ORDER BY of a top-N"),
    "SYM_MIN_SYMBOL": ("SELECT MIN(symbol) AS s FROM bids",
                       "not a number for MIN"),
    "SYM_MAX_SYMBOL_G": ("SELECT broker_id, MAX(symbol) AS s FROM bids GROUP BY broker_id",
                         "not a number for MAX"),
    "SYM_SUB_SCALAR": ("SELECT COUNT(*) AS n FROM bids b WHERE b.symbol = (SELECT MIN(a.symbol) FROM asks a)",
                       "not a number for MIN"),
    "SYM_AVG_SYMBOL": ("SELECT AVG(symbol) AS s FROM bids",
                       "not a number for AVG"),
    "SYM_SUM_DISTINCT": ("SELECT SUM(DISTINCT symbol) AS s FROM bids",
                         "not a number for SUM(DISTINCT)"),
    "SYM_GT_ALL": ("SELECT COUNT(*) AS n FROM bids WHERE symbol > ALL (SELECT symbol FROM asks)",
                   "not a number for MAX"),
    "SYM_EQ_NUM": ("SELECT COUNT(*) AS n FROM bids WHERE symbol = 1",
                   "not with a number"),
    "SYM_EQ_BROKER": ("SELECT COUNT(*) AS n FROM bids WHERE symbol = broker_id",
                      "not with a number"),
    "SYM_IN_SUB_BROKER": ("SELECT COUNT(*) AS n FROM bids WHERE symbol IN (SELECT broker_id FROM asks)",
                          "not with a number"),
    "SYM_IN_NUMS": ("SELECT COUNT(*) AS n FROM bids WHERE symbol IN (1, 2)",
                    "an IN list of numbers never names a symbol"),
    "SYM_PLUS": ("SELECT SUM(symbol + 0) AS s FROM bids",
                 "not a number for arithmetic"),
    "SYM_CASE_THEN": ("SELECT SUM(CASE WHEN volume > 10 THEN symbol ELSE 0 END) AS s FROM bids",
                      "not a number for a CASE result"),
    "SYM_CAST": ("SELECT SUM(CAST(symbol AS INTEGER)) AS s FROM bids",
                 "not a number for"),
    "SYM_LT_SYM": ("SELECT COUNT(*) AS n FROM bids b JOIN asks a ON b.symbol < a.symbol",
                   "symbols compare with = and <> only, not <"),
    "SYM_BETWEEN": ("SELECT COUNT(*) AS n FROM bids WHERE symbol BETWEEN 'A' AND 'B'",
                    "symbols compare with = and <> only"),
    "SYM_LIKE": ("SELECT COUNT(*) AS n FROM bids WHERE symbol LIKE 'A%'",
                 "unsupported condition (LIKE)"),
    "SYM_LOWER": ("SELECT COUNT(*) AS n FROM bids WHERE LOWER(symbol) = 'aaa'",
                  "unsupported expression (LOWER)"),
    "SYM_CONCAT": ("SELECT COUNT(*) AS n FROM bids WHERE symbol || 'X' = 'AAAX'",
                   "unsupported expression (DPIPE)"),
    "SYM_JOIN_USING": ("SELECT COUNT(*) AS n FROM bids JOIN asks USING (symbol)",
                       "JOIN ... USING is not supported"),
    "SYM_ZERO_LIMIT": ("SELECT symbol, broker_id, SUM(CASE WHEN price > 100 THEN volume ELSE 0 END) AS v FROM bids "
                       "GROUP BY symbol, broker_id ORDER BY broker_id, v LIMIT 2",
                       "LIMIT/OFFSET over the rows of every symbol"),
    "SYM_LADDER_TOP": ("SELECT symbol, price, SUM(volume) AS v FROM bids GROUP BY symbol, price ORDER BY price DESC "
                       "LIMIT 2",
                       "LIMIT/OFFSET over the rows of every symbol"),
}


def as_view(name: str, sql: str) -> str:
    """The view as a user names it in a file of several views."""
    return f"CREATE VIEW {name} AS {sql}"
