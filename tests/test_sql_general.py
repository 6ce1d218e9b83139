"""Generality of the SQL compiler: views written for these tests (other k-fractions and
directions, COUNT/AVG, GROUP BY on other columns, joins of bids and asks on other conditions,
correlated and uncorrelated subqueries, OR/NOT/BETWEEN, plain subqueries in FROM), compiled and
run by the reference interpreter on random order-book streams (hypothesis: adds, partial
executions, deletes, duplicates, unknown ids, ties, empty books), checked against DuckDB running
the same SQL after every line.  A few of them also run through the numba engine."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from viewcheck import check_lines, stream_lines

from ddms.compiler import compile_sql
from ddms.runtime.engine import Engine

HEADER = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
"""

VIEWS = {
    "selection": "SELECT SUM(volume) AS tv FROM bids WHERE price > 100",
    "count_group": "SELECT broker_id, COUNT(*) AS n FROM asks GROUP BY broker_id",
    "avg_group": "SELECT broker_id, AVG(price) AS ap FROM bids GROUP BY broker_id",
    "ask_vwap_half": """SELECT SUM(a1.price * a1.volume) AS av FROM asks a1
        WHERE 0.5 * (SELECT SUM(a3.volume) FROM asks a3)
              > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.price < a1.price)""",
    "top_tenth_by_broker": """SELECT b1.broker_id, SUM(b1.volume) AS topv FROM bids b1
        WHERE 0.1 * (SELECT SUM(b3.volume) FROM bids b3)
              >= (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price >= b1.price)
        GROUP BY b1.broker_id""",
    "crossed_volume": "SELECT SUM(a.volume * b.volume) AS x FROM bids b, asks a WHERE a.price <= b.price",
    "broker_join": """SELECT b.broker_id, SUM(a.price - b.price) AS s FROM bids b, asks a
        WHERE a.broker_id = b.broker_id AND a.price > b.price GROUP BY b.broker_id""",
    "above_broker_avg": """SELECT b.broker_id, SUM(b.volume) AS big FROM bids b
        WHERE b.volume > (SELECT AVG(b2.volume) FROM bids b2 WHERE b2.broker_id = b.broker_id) GROUP BY b.broker_id""",
    "not_or": "SELECT COUNT(*) AS n FROM bids WHERE NOT (price > 100 OR volume < 10)",
    "same_price_pairs": "SELECT COUNT(*) AS pairs FROM bids b1, bids b2 WHERE b1.price = b2.price AND b1.id < b2.id",
    "from_subquery": """SELECT SUM(x.volume) AS v FROM (SELECT b.volume, b.price FROM bids b WHERE b.price >= 100) x
        WHERE x.volume > 5""",
    "below_avg_bid": "SELECT COUNT(*) AS n FROM asks a WHERE a.price < (SELECT AVG(b.price) FROM bids b)",
    "ratio": "SELECT SUM(price * volume) / SUM(volume) AS vw FROM bids",
    "join_on": "SELECT a.broker_id, SUM(b.volume + a.volume) AS v FROM bids b JOIN asks a ON a.broker_id = b.broker_id "
               "WHERE b.price BETWEEN 99 AND 150 GROUP BY a.broker_id",
    "spread_pairs": """SELECT SUM(a.price - b.price) AS sp FROM bids b, asks a
        WHERE (a.price - b.price > 50) OR (b.price - a.price > 50)""",
    # two occurrences of one relation chained through a third and equal on a column: the delta
    # for an event that is both occurrences writes the diagonal entry m[P, P] of a pair map
    "chain_same_broker": """SELECT COUNT(*) AS n FROM bids b1, asks a, bids b2
        WHERE b1.price < a.price AND b2.price > a.price AND b1.broker_id = b2.broker_id""",
    "ask_chain_same_volume": """SELECT SUM(a1.volume) AS v FROM asks a1, asks a2, asks a3
        WHERE a1.price < a2.price AND a2.price < a3.price AND a1.volume = a3.volume""",
}

PRICES = [1, 99, 100, 101, 102, 150, 200]
IDS = st.integers(1, 10)
line = st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_COMPILED: dict[str, object] = {}


def compiled(name: str):
    if name not in _COMPILED:
        _COMPILED[name] = compile_sql(HEADER + VIEWS[name] + ";", f"<{name}>")
    return _COMPILED[name]


def check_stream(name: str, stream: list[tuple], engine: Engine | None = None) -> None:
    """View ``name`` against DuckDB after every line of ``stream`` (interpreter, and engine)."""
    sql = compiled(name)
    view = sql.program.queries[0].name
    check_lines(sql.program, stream_lines(stream), {view: VIEWS[name]}, engine=engine)


@pytest.mark.parametrize("name", sorted(VIEWS))
@SETTINGS
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_view_matches_duckdb_on_random_streams(name: str, stream: list[tuple]) -> None:
    check_stream(name, stream)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_matches_duckdb_on_tiny(name: str) -> None:
    from conftest import data_file
    rows = []
    for text in data_file("tiny").read_text().splitlines():
        t, oid, a, v, p = text.split(",")
        rows.append((a, int(oid), int(float(v)), int(float(p))))
    check_stream(name, rows)


@pytest.mark.parametrize("name", ["ask_vwap_half", "broker_join", "avg_group", "chain_same_broker"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb_on_random_streams(name: str, stream: list[tuple]) -> None:
    check_stream(name, stream, Engine(compiled(name).program))
