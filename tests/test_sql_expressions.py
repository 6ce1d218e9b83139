"""HAVING, CASE WHEN, COALESCE, NULLIF, ABS, GREATEST, LEAST, %, IS [NOT] NULL, WITH, EXISTS / NOT
EXISTS / IN / NOT IN (subqueries, correlated, and lists), COUNT/SUM/AVG(DISTINCT x) (issue 21,
item 5), checked against DuckDB after every line of hypothesis streams through the interpreter
and the engine (one program), with NULLs from MIN/MAX and AVG of empty books and groups."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, check_stream, line

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.runtime.engine import Engine

# The engine's program of these 27 views costs about three minutes of cold compile, more than the
# default suite can spend on one file: the engine run is ``-m slow``, the interpreter's runs every time.

BB = "(SELECT MAX(price) FROM bids)"
BA = "(SELECT MIN(price) FROM asks)"

VIEWS = {
    "HIGH_VOL": "SELECT SUM(CASE WHEN price > 100 THEN volume ELSE 0 END) AS high_vol FROM bids",
    "BUCKETS": "SELECT SUM(CASE WHEN price < 100 THEN 1 WHEN price < 150 THEN 2 ELSE 3 END * volume) AS buckets "
               "FROM asks",
    "BUSY_BROKERS": "SELECT broker_id, SUM(volume) AS busy_brokers FROM bids GROUP BY broker_id HAVING COUNT(*) > 1",
    "HAVING_AVG": "SELECT broker_id, AVG(price) AS having_avg FROM asks GROUP BY broker_id "
                  "HAVING AVG(volume) > 10 OR MAX(price) >= 150",
    "DEVIATION": "SELECT SUM(ABS(price - 100) * volume) AS deviation FROM bids",
    "BID_OR_ZERO": f"SELECT COALESCE({BB}, 0) AS bid_or_zero",
    "SAFE_SPREAD": f"SELECT COALESCE({BA} - {BB}, -1) AS safe_spread",
    "TOP_OF_BOTH": "SELECT GREATEST((SELECT MAX(price) FROM bids), (SELECT MAX(price) FROM asks)) AS top_of_both",
    "LOW_OF_BOTH": "SELECT LEAST((SELECT MIN(price) FROM bids), (SELECT MIN(price) FROM asks), 150) AS low_of_both",
    "NOT_AT_100": "SELECT SUM(NULLIF(price, 100)) AS not_at_100 FROM bids",
    "EMPTY_SIDES": f"SELECT CASE WHEN {BB} IS NULL THEN 1 ELSE 0 END + CASE WHEN {BA} IS NOT NULL THEN 10 ELSE 0 END "
                   "AS empty_sides",
    "CTE": "WITH big AS (SELECT price, volume FROM bids WHERE volume >= 20) SELECT SUM(price * volume) AS cte FROM big",
    "HAS_ASK_BROKER": "SELECT SUM(b.volume) AS has_ask_broker FROM bids b WHERE EXISTS (SELECT * FROM asks a "
                      "WHERE a.broker_id = b.broker_id)",
    "NO_CHEAP_ASK": "SELECT COUNT(*) AS no_cheap_ask FROM bids b WHERE b.broker_id NOT IN "
                    "(SELECT a.broker_id FROM asks a WHERE a.price < 150)",
    "SOME_BROKERS": "SELECT SUM(volume) AS some_brokers FROM bids WHERE broker_id IN (1, 3, 5, 3)",
    "NONE_ABOVE": "SELECT COUNT(*) AS none_above FROM bids b1 WHERE NOT EXISTS (SELECT 1 FROM bids b2 "
                  "WHERE b2.price > b1.price)",
    "BID_LEVELS": "SELECT COUNT(DISTINCT price) AS bid_levels FROM bids",
    "DISTINCT_BY_BROKER": "SELECT broker_id, COUNT(DISTINCT price) AS distinct_by_broker FROM asks GROUP BY broker_id",
    "DISTINCT_SUM": "SELECT broker_id, SUM(DISTINCT volume) AS distinct_sum FROM asks GROUP BY broker_id",
    "DISTINCT_AVG": "SELECT AVG(DISTINCT price) AS distinct_avg FROM asks",
    "MANY_ASK_LEVELS": "SELECT SUM(volume) AS many_ask_levels FROM bids "
                       "WHERE (SELECT COUNT(DISTINCT a.price) FROM asks a) > 2",
    "CASE_AGG": "SELECT broker_id, CASE WHEN SUM(volume) > 30 THEN MAX(price) ELSE MIN(price) END AS case_agg "
                "FROM bids GROUP BY broker_id",
    # % is C's fmod, as DuckDB's on DOUBLE: the dividend's sign; NULL (NaN) for a zero divisor
    "MOD_IDS": "SELECT SUM(volume) AS mod_ids FROM bids WHERE id % 3 = 0",
    "MOD_NEG": "SELECT broker_id, SUM((price - 120) % 7) AS mod_neg FROM asks GROUP BY broker_id",
    "MOD_BY_COL": "SELECT SUM(volume % (broker_id + 1)) AS mod_by_col FROM bids",
    "MOD_AGG": "SELECT SUM(volume) % 100 AS mod_agg FROM asks",
    "MOD_ZERO": f"SELECT {BB} % 0 AS mod_zero",
}
SCRIPT = HEADER + ";\n".join(VIEWS.values()) + ";"


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<expressions>").program


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream, views=VIEWS)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream, Engine(program), views=VIEWS)


@pytest.mark.parametrize("sql, reason", [
    ("SELECT FLOOR(price) AS f, COUNT(*) AS n FROM bids GROUP BY price", "may name GROUP BY columns and expressions"),
    ("SELECT COUNT(DISTINCT b2.price) AS m FROM bids b1 WHERE b1.volume > (SELECT COUNT(DISTINCT b2.price) "
     "FROM bids b2 WHERE b2.price > b1.price)", "correlated other than by equality"),
    ("SELECT SUM(x.v) AS s FROM (SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id "
     "HAVING SUM(volume) > 1) x", "HAVING is supported in a view's top-level SELECT only"),
])
def test_rejected_with_location(sql: str, reason: str) -> None:
    with pytest.raises(SqlError) as e:
        compile_sql(HEADER + sql + ";", "e.sql")
    assert reason in str(e.value) and "e.sql:6:" in str(e.value), str(e.value)
