"""The SQL cookbook (examples/sql, issue 21 item 8): every file is one view a trader monitors,
its first line a ``--`` comment saying what it is.  Each is compiled from its file and checked
against DuckDB running the same SELECT over the replayed book: through the interpreter on
hypothesis streams and every line of tiny, through the engine (all views in one program, one
compile) on hypothesis streams, every line of tiny and every 25th of standard (every 1,000th of
big with ``-m slow``).  The README lists every file with the cost class ``ddms compile`` prints."""

from __future__ import annotations

import math
import re

import pytest
from conftest import REPO, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Book, Duck, coalesce_sums, same, strip_comments
from test_sql_minmax import HEADER, line

from ddms.backend.codegen import generate
from ddms.backend.cost import view_costs
from ddms.compiler import compile_sql, compile_sql_file
from ddms.io.orderbook import OrderBookParser
from ddms.m3.interpreter import Interpreter
from ddms.runtime.driver import split_lines
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


def _rows(program, name: str, got) -> dict[tuple, tuple]:
    """A view's value (interpreter or engine) as key -> tuple of values, rows of zeros left out."""
    q = next(q for q in program.queries if q.name == name)
    keyed = bool(q.keys) if q.columns else bool(program.map(q.map).keys)
    if not keyed:
        vals = got if isinstance(got, tuple) else (got,)
        rows = {(): tuple(math.nan if v is None else float(v) for v in vals)}
    else:
        rows = {k: (v if isinstance(v, tuple) else (v,)) for k, v in dict(got).items()}
    return {k: v for k, v in rows.items() if any(x != 0 for x in v)}


def _duck_rows(result: list[tuple], keys: int) -> dict[tuple, tuple]:
    out = {}
    for r in result:
        vals = tuple(math.nan if x is None else float(x) for x in r[keys:])
        if any(v != 0 for v in vals):
            out[tuple(float(k) for k in r[:keys])] = vals
    return out


def _keys(program, name: str) -> int:
    q = next(q for q in program.queries if q.name == name)
    return len(q.keys) if q.columns else len(program.map(q.map).keys)


def _same(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        all(same(a, b, 1e-8) for a, b in zip(got[k], want[k], strict=True)) for k in want)


def check_lines(program, lines: list[str], *, interp: bool, engine: Engine | None, every: int = 1) -> None:
    """Apply ``lines`` (order-book text) and compare every view with DuckDB after every
    ``every``-th line and the last one."""
    it = Interpreter(program) if interp else None
    batch = OrderBookParser(brokers=10).feed(("\n".join(lines) + "\n").encode())
    book, duck = Book(), Duck()
    relmap = engine.relmap(("bids", "asks")) if engine is not None else None
    names = {0: "BIDS", 1: "ASKS"}
    queries = {name: coalesce_sums(sql) for name, sql in VIEWS.items()}
    i = 0
    for n, text in enumerate(lines, start=1):
        j = i
        while j < len(batch) and batch.line[j] == n:
            j += 1
        if it is not None:
            for k in range(i, j):
                it.apply("+" if batch.sign[k] > 0 else "-", names[int(batch.rel[k])], tuple(batch.cols[k]))
        if engine is not None and j > i:
            head, _ = split_lines(batch, n)
            engine.apply(type(batch)(head.rel[i:], head.sign[i:], head.cols[i:], head.line[i:], n, n), relmap)
        i = j
        book.line(text)
        if n % every and n != len(lines):
            continue
        for name, sql in queries.items():
            want = _duck_rows(duck.query(book, sql), _keys(program, name))
            if it is not None:
                got = _rows(program, name, it.view(name))
                assert _same(got, want), f"{name} line {n} ({text}): interpreter {got} != DuckDB {want}"
            if engine is not None:
                v = engine.views[name]
                got = _rows(program, name, v.value if not _keys(program, name) else dict(v))
                assert _same(got, want), f"{name} line {n} ({text}): engine {got} != DuckDB {want}"


def _stream_lines(stream: list[tuple]) -> list[str]:
    return [f"{i},{oid},{a},{v},{p}" for i, (a, oid, v, p) in enumerate(stream)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=25))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_lines(program, _stream_lines(stream), interp=True, engine=None)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=25))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, _stream_lines(stream), interp=False, engine=Engine(engine_program))


def test_tiny(engine_program) -> None:
    lines = shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, interp=True, engine=Engine(engine_program))


def test_standard(engine_program) -> None:
    lines = shared_file("data", "orderbook", "standard", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, interp=False, engine=Engine(engine_program), every=25)


@pytest.mark.slow
def test_big(engine_program) -> None:
    lines = shared_file("data", "orderbook", "big", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, interp=False, engine=Engine(engine_program), every=1000)
