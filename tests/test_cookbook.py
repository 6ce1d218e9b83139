"""The SQL cookbook (examples/sql, issue 21 item 8): every file is one view a trader monitors,
its first line a ``--`` comment saying what it is.  Each is compiled from its file and checked
against DuckDB running the same SELECT over the replayed book: through the interpreter on
hypothesis streams and every line of tiny, through the engine (all views in one program, one
compile) on hypothesis streams, every line of tiny and every 25th of standard (every 1,000th of
big with ``-m slow``).  The README lists every file with the cost class ``ddms compile`` prints."""

from __future__ import annotations

import re

import pytest
from conftest import REPO, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import strip_comments
from test_sql_minmax import HEADER, line
from viewcheck import REAL_RUNS, check_lines, check_real_data, stream_lines

from ddms.backend.codegen import generate
from ddms.backend.cost import view_costs
from ddms.compiler import compile_sql, compile_sql_file
from ddms.runtime.engine import Engine

FILES = sorted((REPO / "examples" / "sql").glob("*.sql"))


def select_of(path) -> str:
    stmts = [s.strip() for s in strip_comments(path.read_text()).split(";")]
    [sel] = [s for s in stmts if s.upper().startswith(("SELECT", "WITH"))]
    return sel


# per-symbol views (streams with a symbol column) are checked in test_symbols.py
SYMBOL_FILES = [p for p in FILES if re.search(r"\bsymbol\s+VARCHAR\b", p.read_text(), re.IGNORECASE)]
VIEWS = {p.stem.upper(): select_of(p) for p in FILES if p not in SYMBOL_FILES}


def test_every_file_is_a_documented_view() -> None:
    assert len(FILES) >= 25
    for p in FILES:
        first = p.read_text().splitlines()[0]
        assert first.startswith("-- ") and len(first) > 10, p
        prog = compile_sql_file(p).program
        assert [q.name for q in prog.queries] == [p.stem.upper()], p


def test_readme_lists_every_file_with_its_cost_class() -> None:
    readme = (REPO / "README.md").read_text()
    for p in FILES:
        prog = compile_sql_file(p).program
        [(_, cls, _)] = view_costs(prog, generate(prog).plan)
        row = re.search(rf"^\| `{p.name}` \|.*$", readme, re.MULTILINE)
        assert row is not None, f"{p.name} is not listed in the README"
        assert f"| {cls} |" in row.group(0), f"{p.name}: README says {row.group(0)!r}, ddms compile says {cls}"


@pytest.fixture(scope="module")
def program():
    return compile_sql(HEADER + ";\n".join(VIEWS.values()) + ";", "<cookbook>").program


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # one compile, cached for every engine below
    return program


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=25))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_lines(program, stream_lines(stream), VIEWS, interp=True, engine=None, rel=1e-8)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=25))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), VIEWS, interp=False, engine=Engine(engine_program), rel=1e-8)


def test_tiny(engine_program) -> None:
    lines = shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, VIEWS, interp=True, engine=Engine(engine_program), rel=1e-8)


def test_standard(engine_program) -> None:
    lines = shared_file("data", "orderbook", "standard", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, VIEWS, interp=False, engine=Engine(engine_program), every=25, rel=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, VIEWS, run, rel=1e-8)
