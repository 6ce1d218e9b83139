"""Views with several output columns (issue 21, item 2): one view whose rows carry every column,
grouped or not, with arithmetic over aggregates and over scalar subqueries (no FROM), named by
the first output's alias or by ``CREATE VIEW name AS``.  Checked against DuckDB after every line of
hypothesis streams, through the interpreter and the engine (one program); the engine's view
objects expose ``columns``, rows ``[key..., v1, v2, ...]``, and one column as ``VIEW.COLUMN``
for callbacks; a future never fires on NULL."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, line
from viewcheck import REAL_RUNS, check_lines, check_real_data, stream_lines

from ddms.compiler import compile_sql
from ddms.errors import ViewError
from ddms.m3.parser import parse_program
from ddms.m3.printer import print_program
from ddms.runtime.engine import Engine

VIEWS = {
    "STATS": "SELECT broker_id, SUM(volume) AS stats, COUNT(*) AS n, MAX(price) AS best FROM bids GROUP BY broker_id",
    "RANGE": "SELECT MAX(price) AS range, MIN(price) AS low, SUM(volume) AS vol, (MAX(price) + MIN(price)) / 2 AS mr "
             "FROM bids",
    "BOOK": "CREATE VIEW book AS SELECT (SELECT MAX(price) FROM bids) AS bid, (SELECT MIN(price) FROM asks) AS ask, "
            "(SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids) AS spread",
    "ASKV": "SELECT broker_id, SUM(price * volume) / SUM(volume) AS askv, AVG(volume) AS avgv, MIN(price) AS lo "
            "FROM asks GROUP BY broker_id",
}
SCRIPT = HEADER + ";\n".join(VIEWS.values()) + ";"
# the SELECT DuckDB runs for each view (a CREATE VIEW's body)
DUCK_VIEWS = {name: re.sub(r"(?i)^CREATE\s+VIEW\s+\w+\s+AS\s+", "", sql) for name, sql in VIEWS.items()}


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<columns>").program


def check_stream(program, stream: list[tuple], engine: Engine | None = None) -> None:
    """Every view against DuckDB after every line: the interpreter's, and the engine's read as
    the rows of its table view."""
    check_lines(program, stream_lines(stream), DUCK_VIEWS, engine=engine, table_rows=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream, Engine(program))


def test_m3_round_trip(program) -> None:
    text = print_program(program)
    assert "DECLARE QUERY STATS[BROKER_ID] := (STATS := STATS__STATS, N := STATS__N, BEST := STATS__BEST);" in text
    assert print_program(parse_program(text)) == text


def test_view_objects(program) -> None:
    eng = Engine(program)
    stats, book = eng.views["STATS"], eng.views["BOOK"]
    assert stats.columns == ("BROKER_ID", "STATS", "N", "BEST")
    assert book.columns == ("BID", "ASK", "SPREAD") and book.value == (None, None, None)
    assert eng.snapshot()["BOOK"] == [None, None, None]
    with pytest.raises(ViewError, match="several columns"):
        eng.on("BOOK", lambda *a: None)
    fut = eng.future("BOOK.SPREAD", lambda s: s <= 100)   # never on NULL (an empty book)
    seen = []
    eng.on("BOOK.BID", lambda v, k, old, new, pos: seen.append(new), above=50)
    eng.insert("BIDS", 0, 1, 1, 10, 100)
    eng.insert("BIDS", 1, 2, 2, 5, 90)
    assert stats[(1.0,)] == (10.0, 1.0, 100.0) and sorted(stats) == [(1.0,), (2.0,)]
    assert stats.rows() == [[1.0, 10.0, 1.0, 100.0], [2.0, 5.0, 1.0, 90.0]]
    assert eng.value("STATS") == dict(stats) == {(1.0,): (10.0, 1.0, 100.0), (2.0,): (5.0, 1.0, 90.0)}
    assert stats.key_names == ("BROKER_ID",) and stats.column("N")[(2.0,)] == 1.0
    assert not fut.done() and seen == [100.0]
    eng.insert("ASKS", 2, 3, 3, 5, 150)
    assert not fut.done() and book.value == (100.0, 150.0, 50.0) or fut.done()
    assert fut.done() and fut.result().value == 50.0
    eng.delete("BIDS", 0, 1, 1, 10, 100)
    eng.delete("BIDS", 1, 2, 2, 5, 90)
    assert book.value == (None, 150.0, None) and seen == [100.0, 90.0]   # not on NULL


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(program, DUCK_VIEWS, run, table_rows=True)
