"""The qa32 outside check's views (``tests/qa_views.py``): each compiles alone under its name and
equals DuckDB running the same SELECT after every line, through the interpreter (default) and
one shared engine program (``-m slow``: its numba compile costs minutes cold); the per-symbol
views over streams of several symbols; the rejected ones with ``file:line:column`` and a caret.

Regressions found by this check: a NATURAL (or ASOF) JOIN compiled as a cross join (a wrong
answer, now rejected at the join); a non-aggregate expression over the columns of one-row
aggregate subqueries in FROM (``WITH bb AS (SELECT MAX(price) AS p FROM bids), ba AS (...)
SELECT (bb.p + ba.p) / 2 AS mid FROM bb, ba``) was refused with a caret inside the WITH query."""

from __future__ import annotations

import pytest
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qa_views import REJECTED, SYMBOL_VIEWS, VIEWS
from test_sql_minmax import HEADER, line
from test_sql_outside import SymbolRun
from test_symbols import LINE as SYMBOL_LINE
from test_symbols import SYM_HEADER
from viewcheck import REAL_RUNS, check_lines, check_real_data, stream_lines

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.runtime.engine import Engine

# the SELECT DuckDB runs for each view (a CREATE VIEW's body)
DUCK = {n: s.split(" AS ", 1)[1] if s.upper().startswith("CREATE VIEW") else s for n, s in VIEWS.items()}


@pytest.fixture(scope="module")
def program():
    prog = compile_sql(HEADER + "\n;\n".join(VIEWS.values()) + "\n;", "<qa>").program
    assert [q.name for q in prog.queries] == list(VIEWS)
    return prog


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # numba compiles once; each test's engine loads it from the cache
    return program


@pytest.fixture(scope="module")
def symbol_program():
    prog = compile_sql(SYM_HEADER + "\n;\n".join(SYMBOL_VIEWS.values()) + "\n;", "<qa-symbols>").program
    assert [q.name for q in prog.queries] == list(SYMBOL_VIEWS)
    return prog


def test_each_view_compiles_alone_under_its_name() -> None:
    for name, sql in {**VIEWS, **SYMBOL_VIEWS}.items():
        header = SYM_HEADER if name in SYMBOL_VIEWS else HEADER
        assert [q.name for q in compile_sql(header + sql + "\n;", "v.sql").program.queries] == [name]


@pytest.mark.parametrize("name", list(REJECTED))
def test_rejected_with_location_and_caret(name: str) -> None:
    sql, reason = REJECTED[name]
    text = HEADER + "-- a comment\n" + sql + ";"
    with pytest.raises(SqlError) as e:
        compile_sql(text, "v.sql")
    head, src, caret = str(e.value).split("\n")[:3]
    file, ln, col, why = head.split(":", 3)
    assert file == "v.sql" and reason in why, str(e.value)
    code = text.splitlines()[int(ln) - 1]
    assert code.strip() and src.strip() == code.strip(), str(e.value)
    pad = src.index(code.strip()) - (len(code) - len(code.lstrip()))
    assert caret.index("^") == pad + int(col) - 1, str(e.value)


def _tiny() -> list[str]:
    return shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()


def test_tiny_every_line(program) -> None:
    check_lines(program, _tiny(), DUCK)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    """Hypothesis streams: deletes, executions, repeated ids, ties at the extremes, empty books."""
    check_lines(program, stream_lines(stream), DUCK)


@pytest.mark.slow
def test_engine_tiny_every_line(engine_program) -> None:
    check_lines(engine_program, _tiny(), DUCK, interp=False, engine=Engine(engine_program), check_state=True)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), DUCK, interp=False, engine=Engine(engine_program),
                check_state=True)


class _Run(SymbolRun):
    """tests/test_sql_outside's multi-symbol runner over this check's per-symbol views."""

    def __init__(self, program, *, interp: bool, engine: bool) -> None:
        super().__init__(program, interp=interp, engine=engine)
        from oracle import coalesce_sums
        self.queries = {n: coalesce_sums(s) for n, s in SYMBOL_VIEWS.items()}


def _apply(run: _Run, stream: list[tuple]) -> None:
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        run.line(sym, f"{i},{oid},{a},{v},{p}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_interpreter(symbol_program, stream) -> None:
    _apply(_Run(symbol_program, interp=True, engine=False), stream)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_engine(symbol_program, stream) -> None:
    _apply(_Run(symbol_program, interp=False, engine=True), stream)


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, DUCK, run)
