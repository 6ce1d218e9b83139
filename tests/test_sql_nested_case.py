"""Nested COALESCE/NULLIF/GREATEST/LEAST/ABS and CASE: generated code linear in the SQL.

Regression (qa36 ``GREATEST_NULLIFS``, found by nankey38): these functions arrive as a CASE, a sum of
guarded branches that names each argument two to four times (its tests and branches), and a CASE's
lowering copies each test into every later branch.  Nested, every level multiplied the code:
``SUM(GREATEST(NULLIF(volume, 10), NULLIF(price, 100)))`` was one 190 KB generated expression (784
``div(0.0, 0.0)``, > 8 GB to compile), one more level 5 MB.  Where an argument (or a condition)
holds a CASE, the translator now takes the function (``Func('greatest', ...)``, or ``If(t, a, b)``
for a CASE), each argument once (:meth:`ddms.sql.translate._Translator.sugar`, ``choice``); a CASE
still too large is refused with a located error (``bounded``).

Each view is checked against DuckDB after every line of tiny and of hypothesis streams where
``volume = 10`` and ``price = 100`` hit the NULLIFs, through the interpreter and the engine (one
small program)."""

from __future__ import annotations

import pytest
import qa36_views as qa36
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, line
from viewcheck import check_lines, stream_lines

from ddms.backend.codegen import generate
from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.m3.ir import Func, walk
from ddms.runtime.engine import Engine

VIEWS = {
    "GREATEST_NULLIFS": qa36.VIEWS["GREATEST_NULLIFS"],
    "DEEP_SUGAR": "SELECT SUM(GREATEST(NULLIF(volume, 10), LEAST(NULLIF(price, 100), COALESCE(NULLIF(volume, 20), "
                  "ABS(price - 150))))) AS s FROM bids",
    "GROUPED_SUGAR": "SELECT broker_id, SUM(LEAST(COALESCE(NULLIF(volume, 10), NULLIF(price, 100)), 150)) AS s, "
                     "COUNT(GREATEST(NULLIF(volume, 10), NULLIF(price, 99))) AS c FROM asks GROUP BY broker_id",
    "CASE_IN_CONDITION": "SELECT SUM(CASE WHEN CASE WHEN NULLIF(volume, 10) > 5 THEN price END > 100 THEN volume "
                         "ELSE NULLIF(price, 99) END) AS s FROM bids",
    "CASE_IN_VALUE": "SELECT AVG(CASE WHEN price > 100 THEN ABS(NULLIF(volume, 10) - 20) WHEN COALESCE(NULLIF(price, "
                     "100), 0) < 50 THEN -volume END) AS a FROM bids",
    "NULLIF_OF_SUGAR": "SELECT SUM(NULLIF(COALESCE(NULLIF(volume, 10), price), 100)) AS s, COUNT(NULLIF(ABS(price "
                       "- 100), 0)) AS c FROM asks",
    "SUGAR_IN_WHERE": "SELECT COUNT(*) AS n FROM bids WHERE GREATEST(NULLIF(volume, 10), NULLIF(price, 100)) > 50",
    "SUGAR_OF_AGGREGATES": "SELECT broker_id, GREATEST(NULLIF(MAX(price), 100), NULLIF(MIN(volume), 10)) AS g "
                           "FROM bids GROUP BY broker_id",
    "SUGAR_ACROSS_JOIN": "SELECT SUM(GREATEST(NULLIF(b.volume, 10), NULLIF(a.volume, 20))) AS s FROM bids b, asks a "
                         "WHERE b.broker_id = a.broker_id",
}

SCRIPT = HEADER + "\n;\n".join(f"CREATE VIEW {n} AS {s}" for n, s in VIEWS.items()) + "\n;"

# volume 10 and 20, price 99, 100 and 150 hit the NULLIFs and the ABS's zero; then ordinary rows
NULLS = [("B", 1, 10, 100), ("S", 2, 10, 100), ("B", 3, 20, 99), ("S", 4, 20, 99), ("B", 5, 7, 150),
         ("E", 1, 10, 0), ("B", 6, 30, 102), ("S", 7, 10, 101), ("D", 3, 0, 0)]


def _nested(depth: int, shape: str) -> str:
    """A SUM over ``depth`` levels of one nested shape, each level a few SQL tokens more."""
    e = "NULLIF(volume, 10)"
    for i in range(depth):
        e = {"greatest": f"GREATEST({e}, NULLIF(price, {100 + i}))",
             "least_coalesce": f"LEAST(COALESCE({e}, NULLIF(price, {100 + i})), {50 + i})",
             "case_condition": f"CASE WHEN {e} > {i} THEN price END",
             "abs": f"ABS({e} - {i})"}[shape]
    return f"CREATE VIEW V AS SELECT SUM({e}) AS s FROM bids;"


@pytest.mark.parametrize("shape", ["greatest", "least_coalesce", "case_condition", "abs"])
def test_generated_code_grows_linearly_with_nesting(shape: str) -> None:
    """Generated source size grows by about the same amount per level of nesting (it multiplied
    by 25 per level before; depth 1 of ``greatest`` alone was 196 KB)."""
    sizes = []
    for depth in range(1, 6):
        sizes.append(len(generate(compile_sql(HEADER + _nested(depth, shape), "<nested>").program).source))
        assert sizes[0] < 20_000, sizes
    steps = [b - a for a, b in zip(sizes, sizes[1:], strict=False)]
    assert max(steps) <= 2 * max(min(steps), 200), sizes


def test_nested_functions_are_one_function_each() -> None:
    """GREATEST of two NULLIFs: one ``greatest`` over the two NULLIFs' CASE forms (columns, kept as
    sums); a NULLIF of a column stays a CASE."""
    p = compile_sql(HEADER + f"CREATE VIEW V AS {VIEWS['GREATEST_NULLIFS']};", "<nested>").program
    names = [x.name for t in p.triggers for st_ in t.statements for x in walk(st_.expr) if isinstance(x, Func)]
    assert names and set(names) == {"greatest"}, names
    every = compile_sql(SCRIPT, "<nested>").program
    assert {x.name for t in every.triggers for st_ in t.statements for x in walk(st_.expr) if isinstance(x, Func)} \
        == {"greatest", "least", "coalesce", "nullif", "abs", "if"}
    plain = compile_sql(HEADER + "CREATE VIEW V AS SELECT SUM(NULLIF(volume, 10)) AS s FROM bids;", "<n>").program
    assert not any(isinstance(x, Func) for t in plain.triggers for st_ in t.statements for x in walk(st_.expr))


def test_a_case_too_large_is_refused_with_its_location() -> None:
    """A CASE of many branches copies each test into every later branch (quadratic): past the
    budget it is a located SqlError naming the CASE, not a program that exhausts memory."""
    whens = " ".join(f"WHEN price = {i} THEN {i}" for i in range(200))
    sql = HEADER + f"CREATE VIEW V AS\nSELECT SUM(CASE {whens} END) AS s FROM bids;"
    with pytest.raises(SqlError) as err:
        compile_sql(sql, "big.sql")
    assert "big.sql:" in str(err.value) and "expression nodes" in str(err.value), str(err.value)


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<nested-case>").program


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # numba compiles once; each test's engine loads it from the cache
    return program


def test_interpreter_null_rows(program) -> None:
    assert check_lines(program, stream_lines(NULLS), VIEWS) > 0


def test_null_rows(engine_program) -> None:
    assert check_lines(engine_program, stream_lines(NULLS), VIEWS, engine=Engine(engine_program),
                       check_state=True) > 0


def test_tiny_every_line(engine_program) -> None:
    lines = shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, VIEWS, engine=Engine(engine_program), check_state=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(st.one_of(line, st.tuples(st.sampled_from("BS"), st.integers(1, 8), st.sampled_from([10, 20]),
                                                 st.sampled_from([99, 100, 150]))), min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), VIEWS, engine=Engine(engine_program), check_state=True)
