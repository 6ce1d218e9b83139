"""An outside check of the SQL compiler (issue 21): views a quant writes in the issue's shapes
(``tests/outside_views.py``, written without reading the cookbook or the other tests' view
lists) must compile and equal DuckDB running the same SELECT after every input line, through
the interpreter and the engine, or be rejected with ``file:line:column: reason`` and a caret.

Single-book views run over tiny/finance.csv and hypothesis streams (deletes, executions,
replaced ids, ties at the extremes, empty books); the per-symbol views over hypothesis streams
of several symbols, against DuckDB with a VARCHAR symbol column.  One program per family is
compiled once for the module (the engine's numba compile dominates a cold run).

The engine's compile of all 75 single-book views costs several CPU minutes cold (about 7 s a
view), more than the whole suite can spend on one file: the default suite runs every view
through the interpreter (the front end, where this check's fixes live, is shared with the engine);
``-m slow`` runs every view through the engine as well, the tie-break views (``TIES``) and the
per-symbol views included (two more programs of a minute or two each cold)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Duck, coalesce_sums, same
from outside_views import REJECTED, SYMBOL_VIEWS, VIEWS
from test_sql_minmax import HEADER, line
from test_symbols import LINE as SYMBOL_LINE
from test_symbols import SYM_HEADER, SymbolBooks
from viewcheck import REAL_RUNS, check_lines, check_real_data, stream_lines

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.io.symbols import symbol_id, with_symbol
from ddms.m3.interpreter import Interpreter
from ddms.runtime.engine import Engine

TIES = ("TIE3", "TIE3_RN", "RK_TV", "TIE_BROKER")   # top-N over orders with several tie-break columns


@pytest.fixture(scope="module")
def program():
    prog = compile_sql(HEADER + ";\n".join(VIEWS.values()) + ";", "<outside>").program
    assert [q.name for q in prog.queries] == list(VIEWS)
    return prog


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # compile once (numba caches it for the engines of each example)
    return program


@pytest.fixture(scope="module")
def ties_engine_program():
    """The tie-break views alone, compiled for the engine (the default suite's engine check)."""
    prog = compile_sql(HEADER + ";\n".join(VIEWS[k] for k in TIES) + ";", "<outside-ties>").program
    Engine(prog)
    return prog


@pytest.fixture(scope="module")
def symbol_program():
    prog = compile_sql(SYM_HEADER + ";\n".join(SYMBOL_VIEWS.values()) + ";", "<outside-symbols>").program
    assert [q.name for q in prog.queries] == list(SYMBOL_VIEWS)
    return prog


@pytest.fixture(scope="module")
def symbol_engine_program(symbol_program):
    Engine(symbol_program)
    return symbol_program


def test_each_view_compiles_alone_under_its_name() -> None:
    """Each view is a script of its own too (no help from the others' shared maps)."""
    for name, sql in {**VIEWS, **SYMBOL_VIEWS}.items():
        header = SYM_HEADER if name in SYMBOL_VIEWS else HEADER
        assert [q.name for q in compile_sql(header + sql + ";", "v.sql").program.queries] == [name]


@pytest.mark.parametrize("name", list(REJECTED))
def test_rejected_with_location_and_caret(name: str) -> None:
    """Outside the subset: ``v.sql:line:column: reason``, the statement's line, a caret under
    the construct (after a leading comment too: comments are blanked, not counted as code)."""
    sql, reason = REJECTED[name]
    for lead in ("", "-- a comment; with a semicolon\n", "/* a block\n   comment; */ "):
        text = HEADER + lead + sql + ";"
        with pytest.raises(SqlError) as e:
            compile_sql(text, "v.sql")
        msg = str(e.value)
        head, src, caret = msg.split("\n")[:3]
        file, ln, col, why = head.split(":", 3)
        assert file == "v.sql" and reason in why, msg
        code = text.splitlines()[int(ln) - 1]
        pad = src.index(code.strip()) - (len(code) - len(code.lstrip()))   # the message's indent
        assert code.strip() and caret.index("^") == pad + int(col) - 1, msg   # under the column named
        assert code[int(col) - 1] not in " -/*", msg                        # on code, not a comment


def _tiny() -> list[str]:
    return shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()


def test_tiny_every_line(program) -> None:
    lines = _tiny()
    nulls = check_lines(program, lines, VIEWS)
    assert nulls > 0   # the NULL-producing views (MIN/MAX/AVG over nothing) are reached


@pytest.mark.slow
def test_tiny_every_line_engine(engine_program, ties_engine_program) -> None:
    lines = _tiny()
    ties = {k: VIEWS[k] for k in TIES}
    check_lines(ties_engine_program, lines, ties, interp=False, engine=Engine(ties_engine_program), check_state=True)
    check_lines(engine_program, _tiny(), VIEWS, interp=False, engine=Engine(engine_program), check_state=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_lines(program, stream_lines(stream), VIEWS)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), VIEWS, interp=False, engine=Engine(engine_program),
                check_state=True)


# times from a few values: orders tie on ``t`` as well as on price, so a top-N ordered by
# ``price DESC, t, id`` reaches its last tie-break (the hypothesis lines of the other tests have
# one time per line)
tie_line = st.tuples(st.integers(0, 2), line)


def _tie_lines(stream: list[tuple]) -> list[str]:
    return [f"{t},{oid},{a},{v},{p}" for t, (a, oid, v, p) in stream]


ORDERED = {name: sql for name, sql in VIEWS.items() if "ORDER BY" in sql.upper()}   # the top-N views


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(tie_line, min_size=1, max_size=30))
def test_ties_on_every_order_column(program, stream: list[tuple]) -> None:
    check_lines(program, _tie_lines(stream), ORDERED)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(tie_line, min_size=1, max_size=30))
def test_ties_on_every_order_column_engine(engine_program, ties_engine_program, stream: list[tuple]) -> None:
    lines = _tie_lines(stream)
    check_lines(engine_program, lines, ORDERED, interp=False, engine=Engine(engine_program), check_state=True)
    ties = {k: VIEWS[k] for k in TIES}
    check_lines(ties_engine_program, lines, ties, interp=False, engine=Engine(ties_engine_program), check_state=True)

# -- per-symbol views: several instruments in one stream ---------------------------------------

def _key(k) -> float:
    return float(symbol_id(k)) if isinstance(k, str) else float(k)


def _rows(got: dict) -> dict[tuple, tuple]:
    """key -> tuple of values, symbols as their ids, NULL as NaN, all-zero rows left out."""
    out = {}
    for k, v in got.items():
        k = k if isinstance(k, tuple) else (k,)
        v = v if isinstance(v, tuple) else (v,)
        v = tuple(math.nan if x is None or math.isinf(float(x)) else float(x) for x in v)   # viewcheck.duck_rows
        if any(x != 0 for x in v):
            out[tuple(_key(x) for x in k)] = v
    return out


def _same(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(
        all(same(a, b, 1e-9) for a, b in zip(got[k], want[k], strict=True)) for k in want)


def _as_dict(got, keys: int) -> dict:
    """A view's value as key -> value: a view without keys (``WHERE symbol = 'AAA'`` over the
    whole book) as one row keyed by the empty tuple, like DuckDB's one row."""
    return dict(got) if keys else {(): got}


class SymbolRun:
    """A multi-symbol stream applied one line at a time to the interpreter and/or an engine,
    every per-symbol view compared with DuckDB after each line."""

    def __init__(self, program, *, interp: bool, engine: bool) -> None:
        self.it = Interpreter(program) if interp else None
        self.engine = Engine(program) if engine else None
        self.parsers: dict[str, OrderBookParser] = {}
        self.books, self.duck = SymbolBooks(), Duck()
        self.keys = {q.name: len(q.keys) if q.columns else len(program.map(q.map).keys) for q in program.queries}
        self.queries = {n: coalesce_sums(sql) for n, sql in SYMBOL_VIEWS.items()}
        self.n = 0

    def line(self, symbol: str, text: str) -> None:
        self.n += 1
        b = self.parsers.setdefault(symbol, OrderBookParser(brokers=10)).feed((text + "\n").encode())
        cols = with_symbol(b.cols, symbol_id(symbol))
        if self.it is not None:
            for i in range(len(b)):
                self.it.apply("+" if b.sign[i] > 0 else "-", ("BIDS", "ASKS")[int(b.rel[i])], tuple(cols[i]))
        if self.engine is not None:
            batch = EventBatch(b.rel, b.sign, cols, np.full(len(b), self.n, np.int64), self.n, self.n)
            self.engine.apply(batch, self.engine.relmap(("bids", "asks")))
            self.engine._check()
        self.books.line(symbol, text)
        for name, sql in self.queries.items():
            k = self.keys[name]
            want = _rows({tuple(r[:k]): tuple(r[k:]) for r in self.duck.query(self.books, sql)})
            where = f"{name} line {self.n} ({symbol} {text})"
            if self.it is not None:
                got = _rows(_as_dict(self.it.view(name), k))
                assert _same(got, want), f"{where}: interpreter {got} != DuckDB {want}"
            if self.engine is not None:
                view = self.engine.views[name]
                got = _rows(_as_dict(view if k else view.value, k))
                assert _same(got, want), f"{where}: engine {got} != DuckDB {want}"


def _apply(run: SymbolRun, stream: list[tuple]) -> None:
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        run.line(sym, f"{i},{oid},{a},{v},{p}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_interpreter(symbol_program, stream) -> None:
    _apply(SymbolRun(symbol_program, interp=True, engine=False), stream)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_engine(symbol_engine_program, stream) -> None:
    """The engine on streams of several symbols whose order ids repeat across symbols (unique per
    symbol only), with the per-symbol order top-N among the views: ``ROW_NUMBER() OVER (PARTITION
    BY symbol ORDER BY price DESC, id) <= 2`` (OV2) and ``... ORDER BY price, t DESC, id`` (OT2)."""
    _apply(SymbolRun(symbol_engine_program, interp=False, engine=True), stream)


@pytest.mark.slow
def test_symbol_views_tiny_split_into_symbols(symbol_engine_program) -> None:
    """tiny/finance.csv split into three symbols by order id (an order's lines stay in its
    symbol): every line, interpreter and engine."""
    run = SymbolRun(symbol_engine_program, interp=True, engine=True)
    for text in _tiny():
        run.line(f"F{int(text.split(',')[1]) % 3}", text)


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, VIEWS, run)
