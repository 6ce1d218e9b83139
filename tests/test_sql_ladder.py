"""Views whose rows are a top-N, SELECT DISTINCT, and OFFSET (issue 21, items 2 and 4): a price
ladder (the n best levels of a side as rows), the n best orders, written as a view's own ``ORDER
BY .. LIMIT .. OFFSET``, as a plain selection of a top-N subquery in FROM, or with ``ROW_NUMBER()``;
a grouped view ordered by an aggregate with its key as tie-break; the distinct keys of a book.
Every view is compared with DuckDB running the same SQL after every input line -- the rows shown,
and their order where the SQL orders them -- through the interpreter and the engine (one program
for all), on hypothesis streams (ties at the cut, deletes of the n-th level, empty books, fewer
than n levels) and tiny/finance.csv.  Callbacks see a row enter or leave the top n."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import REPO, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Book, Duck, coalesce_sums, same
from test_cookbook import select_of
from test_sql_minmax import HEADER, line
from test_symbols import LINE as SYMBOL_LINE
from test_symbols import SYM_HEADER, SymbolBooks
from viewcheck import stream_lines

from ddms.backend.cost import read_costs
from ddms.compiler import compile_sql, compile_sql_file
from ddms.errors import SqlError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.io.symbols import symbol_id, with_symbol
from ddms.m3.interpreter import Interpreter
from ddms.m3.parser import parse_program
from ddms.m3.printer import print_program
from ddms.runtime.driver import split_lines
from ddms.runtime.engine import Engine
from ddms.runtime.views import TopView

VIEWS = {
    "BID_LADDER": "SELECT price, SUM(volume) AS bid_ladder FROM bids GROUP BY price ORDER BY price DESC LIMIT 3",
    "ASK_LADDER": "SELECT l.price, l.v AS ask_ladder, l.n FROM (SELECT price, SUM(volume) AS v, COUNT(*) AS n "
                  "FROM asks GROUP BY price ORDER BY price LIMIT 3) l",
    "RN_LADDER": "SELECT x.price, x.v AS rn_ladder FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER "
                 "(ORDER BY price DESC) AS rn FROM bids GROUP BY price) x WHERE x.rn <= 2",
    "OFF_LADDER": "SELECT price, SUM(volume) AS off_ladder FROM bids GROUP BY price ORDER BY price DESC "
                  "LIMIT 2 OFFSET 1",
    "RN_OFF": "SELECT x.price, x.v AS rn_off FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER "
              "(ORDER BY price) AS rn FROM asks GROUP BY price) x WHERE x.rn BETWEEN 2 AND 3",
    "ORDERS": "SELECT id, price, volume AS orders FROM bids ORDER BY price DESC, id LIMIT 4",
    "ORDERS_OFF": "SELECT o.id, o.price, o.volume AS orders_off FROM (SELECT id, price, volume FROM asks "
                  "ORDER BY price, id LIMIT 3 OFFSET 2) o",
    "TOP_BROKERS": "SELECT broker_id, SUM(volume) AS top_brokers FROM bids GROUP BY broker_id "
                   "ORDER BY top_brokers DESC, broker_id LIMIT 3",
    "ALL_LEVELS": "SELECT price, COUNT(*) AS all_levels FROM asks GROUP BY price ORDER BY price DESC",
    "BROKERS": "SELECT DISTINCT broker_id AS brokers FROM bids",
    "PRICES": "SELECT price AS prices FROM asks GROUP BY price ORDER BY prices LIMIT 2",
    "DIST_TOP": "SELECT DISTINCT price AS dist_top FROM bids ORDER BY dist_top DESC LIMIT 2 OFFSET 1",
}
ORDERED = {n for n, sql in VIEWS.items() if sql.upper().rstrip().split(")")[-1].find("ORDER BY") >= 0}
# views whose SELECT orders its own rows (the others come in the top-N's order, which DuckDB
# does not promise for a selection of a subquery: compared as sets)

OFFSET_SUMS = {   # OFFSET in the aggregated shapes (ranks 2..4), beside the rows views
    "OFF_SUM": "SELECT SUM(t.v) AS off_sum FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
               "ORDER BY price DESC LIMIT 3 OFFSET 1) t",
    "OFF_ORDERS": "SELECT SUM(o.volume) AS off_orders, COUNT(*) AS off_n FROM (SELECT volume FROM asks "
                  "ORDER BY price, id LIMIT 2 OFFSET 1) o",
    "RN_OFF_SUM": "SELECT SUM(x.volume) AS rn_off_sum FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, "
                  "id) AS rn FROM bids) x WHERE x.rn BETWEEN 3 AND 5",
}
ALL = {**VIEWS, **OFFSET_SUMS}


@pytest.fixture(scope="module")
def program():
    prog = compile_sql(HEADER + ";\n".join(ALL.values()) + ";", "<ladder>").program
    assert [q.name for q in prog.queries] == list(ALL)
    return prog


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # compiled once; each test's engine loads it from numba's cache
    return program


def _floats(row) -> tuple:
    return tuple(math.nan if x is None else float(x) for x in row)


def _same_rows(got: list[tuple], want: list[tuple]) -> bool:
    return len(got) == len(want) and all(len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
                                         for a, b in zip(got, want, strict=True))


def _interp_rows(it: Interpreter, name: str) -> list[tuple]:
    got = it.view(name)
    if not isinstance(got, dict):
        return [_floats(got if isinstance(got, tuple) else (got,))]
    return [_floats((*k, *(v if isinstance(v, tuple) else (v,)))) for k, v in got.items()]


def _engine_rows(engine: Engine, name: str) -> list[tuple]:
    v = engine.views[name]
    if isinstance(v, TopView):
        return [_floats(r) for r in v.rows()]
    got = engine.value(name)
    return [_floats(got if isinstance(got, tuple) else (got,))]


def check(program, lines: list[str], *, interp: bool = True, engine: Engine | None = None, every: int = 1,
          check_every: int = 1) -> int:
    """Apply ``lines`` one at a time and compare every view with DuckDB after each ``every``-th
    (and the last) -- rows in order for the views that order their rows, as sorted lists for the
    others -- checking the engine's structures at every ``check_every``-th comparison.  Returns
    how many rows DuckDB's answers held in all (the test shows rows are reached)."""
    it = Interpreter(program) if interp else None
    batch = OrderBookParser(brokers=10).feed(("\n".join(lines) + "\n").encode())
    book, duck = Book(), Duck()
    relmap = engine.relmap(("bids", "asks")) if engine is not None else None
    queries = {n: coalesce_sums(sql) for n, sql in ALL.items()}
    i = total = 0
    for n, text in enumerate(lines, start=1):
        j = i
        while j < len(batch) and batch.line[j] == n:
            j += 1
        if it is not None:
            for k in range(i, j):
                it.apply("+" if batch.sign[k] > 0 else "-", ("BIDS", "ASKS")[int(batch.rel[k])], tuple(batch.cols[k]))
        if engine is not None:
            head, _ = split_lines(batch, n)
            engine.apply(type(batch)(head.rel[i:], head.sign[i:], head.cols[i:], head.line[i:], n, n), relmap)
        i = j
        book.line(text)
        if n % every and n != len(lines):
            continue
        if engine is not None and (n // every) % check_every == 0:
            engine._check()   # O(state) in Python: every ``check_every``-th comparison on the long files
        for name, sql in queries.items():
            want = [_floats(r) for r in duck.query(book, sql)]
            total += len(want)
            for who, got in (("interpreter", _interp_rows(it, name) if it else None),
                             ("engine", _engine_rows(engine, name) if engine else None)):
                if got is None:
                    continue
                if name not in ORDERED:
                    got, want_cmp = sorted(got), sorted(want)
                else:
                    want_cmp = want
                assert _same_rows(got, want_cmp), f"{name} line {n} ({text}): {who} {got} != DuckDB {want_cmp}"
    return total


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check(program, stream_lines(stream))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check(engine_program, stream_lines(stream), interp=False, engine=Engine(engine_program))


def test_tiny_every_line(engine_program) -> None:
    lines = shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()
    assert check(engine_program, lines, engine=Engine(engine_program)) > 0


@pytest.mark.slow
def test_standard_every_line(engine_program) -> None:
    lines = shared_file("data", "orderbook", "standard", "finance.csv").read_text().splitlines()
    assert check(engine_program, lines, interp=False, engine=Engine(engine_program), check_every=25) > 0


@pytest.mark.slow
def test_big_every_1000th_line(engine_program) -> None:
    lines = shared_file("data", "orderbook", "big", "finance.csv").read_text().splitlines()
    assert check(engine_program, lines, interp=False, engine=Engine(engine_program), every=1000) > 0


def test_m3_text_round_trip(program) -> None:
    """The row cut is part of the M3 text ``ddms compile`` prints, and reads back the same."""
    text = print_program(program)
    assert "ROWS OF" in text and "ORDER BY 0 DESC LIMIT 3" in text and "KEYS" in text
    assert parse_program(text).queries == program.queries


def test_ladders_read_by_rank(engine_program) -> None:
    """A view ordered by key columns alone with a LIMIT (partitioned by the other keys) keeps its
    row counts per ORDER BY prefix in range trees and reads its n rows by rank (O(n log g): a price
    ladder, one level; the n best orders by price then id, two); the others (ordered by an
    aggregate, or without LIMIT) sort their groups (O(g log g)): both kinds are among the views the
    tests above compare with DuckDB, every line."""
    engine = Engine(engine_program)
    ranked = {n for n, v in engine.views.items() if isinstance(v, TopView) and v._ranked is not None}
    assert ranked == {"BID_LADDER", "ASK_LADDER", "RN_LADDER", "OFF_LADDER", "RN_OFF", "ORDERS", "ORDERS_OFF",
                      "PRICES", "DIST_TOP"}
    costs = dict(read_costs(engine_program))
    assert "by rank" in costs["ORDERS"] and "O(g log g)" in costs["TOP_BROKERS"]


def test_callbacks_see_rows_enter_and_leave(engine_program) -> None:
    """Deleting the best of three levels brings the fourth into a top-3 ladder: its callback
    sees the deleted row leave (new 0) and the fourth enter (old 0), though no map entry of the
    entering level was written on that line."""
    engine = Engine(engine_program)
    seen: list[tuple] = []
    engine.on("BID_LADDER", lambda v, k, old, new, pos: seen.append((pos, k, old, new)))
    for oid, price in ((1, 100), (2, 101), (3, 102), (4, 99)):
        engine.insert("BIDS", 0.0, float(oid), float(oid % 10), 10.0, float(price))
    assert [r[0] for r in engine.views["BID_LADDER"].rows()] == [102.0, 101.0, 100.0]
    seen.clear()
    engine.delete("BIDS", 0.0, 3.0, 3.0, 10.0, 102.0)
    assert sorted(seen) == [(5, (99.0,), 0.0, 10.0), (5, (102.0,), 10.0, 0.0)]
    assert [r[0] for r in engine.views["BID_LADDER"].rows()] == [101.0, 100.0, 99.0]
    assert engine.snapshot("BID_LADDER")["BID_LADDER"] == [[101.0, 10.0], [100.0, 10.0], [99.0, 10.0]]


REJECTED = {
    "ties at the cut": ("SELECT broker_id, SUM(volume) AS v FROM bids GROUP BY broker_id ORDER BY v DESC LIMIT 3",
                        "end the ORDER BY with the key column"),
    "orders without tie-break": ("SELECT id, price FROM bids ORDER BY price DESC LIMIT 3", "unique tie-break"),
    "order id not selected": ("SELECT price, volume AS v FROM bids ORDER BY price DESC, id LIMIT 3", "select id"),
    "one-row view": ("SELECT SUM(volume) AS v FROM bids ORDER BY v LIMIT 1", "one row"),
    "two cuts": ("SELECT l.price, l.v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price "
                 "DESC LIMIT 5) l ORDER BY l.price LIMIT 2", "one cut per view"),
    "rank rows": ("SELECT x.price, x.volume AS rk FROM (SELECT price, volume, RANK() OVER (ORDER BY price DESC) AS r "
                  "FROM bids) x WHERE x.r <= 2", "RANK()"),
    "nulls first": ("SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC NULLS FIRST",
                    "NULLS FIRST"),
    "order by unknown": ("SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY volume LIMIT 2",
                         "ORDER BY volume"),
}


@pytest.mark.parametrize("case", list(REJECTED))
def test_rejected_with_a_located_reason(case: str) -> None:
    sql, reason = REJECTED[case]
    with pytest.raises(SqlError) as e:
        compile_sql(HEADER + sql + ";", "v.sql")
    assert reason in str(e.value) and str(e.value).startswith("v.sql:"), str(e.value)


def test_rows_are_exact_python_values(engine_program) -> None:
    """Integer columns read as ints, rows in the view's order (Python views and --json)."""
    engine = Engine(engine_program)
    for oid, price in ((11, 100), (12, 103), (13, 101)):
        engine.insert("BIDS", 0.0, float(oid), float(oid % 10), 5.0, float(price))
    v = engine.views["ORDERS"]
    assert v.rows() == [[12, 103.0, 5.0], [13, 101.0, 5.0], [11, 100.0, 5.0]]
    assert list(v) == [(12, 103.0), (13, 101.0), (11, 100.0)] and v[(13, 101.0)] == 5.0
    assert engine.value("BROKERS") == {(1,): (), (2,): (), (3,): ()}
    assert list(np.array(engine.views["BROKERS"].rows()).ravel()) == [1, 2, 3]


# -- per-symbol ladders: several instruments in one stream ---------------------------------------

SYMBOL_VIEWS = {
    "SYM_LADDER": "SELECT x.symbol, x.price, x.v AS sym_ladder FROM (SELECT symbol, price, SUM(volume) AS v, "
                  "ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY price DESC) AS rn FROM bids "
                  "GROUP BY symbol, price) x WHERE x.rn <= 2",
    "SYM_ORDERS": "SELECT t.symbol, t.id, t.price, t.volume AS sym_orders FROM (SELECT symbol, id, price, volume, "
                  "ROW_NUMBER() OVER (PARTITION BY symbol ORDER BY price, id) AS rn FROM asks) t WHERE t.rn <= 2",
    "SYM_OFF": "SELECT x.symbol, x.price, x.n AS sym_off FROM (SELECT symbol, price, COUNT(*) AS n, ROW_NUMBER() "
               "OVER (PARTITION BY symbol ORDER BY price) AS rn FROM asks GROUP BY symbol, price) x "
               "WHERE x.rn BETWEEN 2 AND 3",
    "SYMS": "SELECT DISTINCT symbol AS syms FROM bids",
    # the cookbook's per-symbol views of rows (examples/sql; test_symbols checks the other per-symbol
    # files, test_cookbook the single-book ladders)
    **{p.stem.upper(): select_of(p) for p in sorted((REPO / "examples" / "sql").glob("symbol_*.sql"))
       if compile_sql_file(p).program.queries[0].limit is not None},
}


@pytest.fixture(scope="module")
def symbol_program():
    prog = compile_sql(SYM_HEADER + ";\n".join(SYMBOL_VIEWS.values()) + ";", "<ladder-symbols>").program
    assert [q.name for q in prog.queries] == list(SYMBOL_VIEWS) and "SYMBOL_BID_LADDER" in SYMBOL_VIEWS
    return prog


def _sym(x) -> float:
    return float(symbol_id(x)) if isinstance(x, str) else float(x)


def check_symbols(program, stream: list[tuple], engine: Engine | None) -> None:
    """Per-symbol lines through the interpreter (and ``engine``), every view's rows (as a sorted
    list: DuckDB does not order a selection of a subquery) equal to DuckDB's after each line."""
    it = Interpreter(program)
    parsers: dict[str, OrderBookParser] = {}
    books, duck = SymbolBooks(), Duck()
    queries = {n: coalesce_sums(sql) for n, sql in SYMBOL_VIEWS.items()}
    relmap = engine.relmap(("bids", "asks")) if engine is not None else None
    for n, (sym, (a, oid, v, p)) in enumerate(stream, start=1):
        text = f"{n},{oid},{a},{v},{p}"
        b = parsers.setdefault(sym, OrderBookParser(brokers=10)).feed((text + "\n").encode())
        cols = with_symbol(b.cols, symbol_id(sym))
        for i in range(len(b)):
            it.apply("+" if b.sign[i] > 0 else "-", ("BIDS", "ASKS")[int(b.rel[i])], tuple(cols[i]))
        if engine is not None:
            engine.apply(EventBatch(b.rel, b.sign, cols, np.full(len(b), n, np.int64), n, n), relmap)
            engine._check()
        books.line(sym, text)
        for name, sql in queries.items():
            want = sorted(tuple(_sym(x) if x is not None else math.nan for x in r) for r in duck.query(books, sql))
            got = sorted(_interp_rows(it, name))
            assert _same_rows(got, want), f"{name} line {n} ({sym} {text}): interpreter {got} != DuckDB {want}"
            if engine is not None:
                got = sorted(tuple(_sym(x) for x in r) for r in engine.views[name].rows())
                assert _same_rows(got, want), f"{name} line {n} ({sym} {text}): engine {got} != DuckDB {want}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_ladders_interpreter(symbol_program, stream) -> None:
    check_symbols(symbol_program, stream, None)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_ladders_engine(symbol_program, stream) -> None:
    check_symbols(symbol_program, stream, Engine(symbol_program))
