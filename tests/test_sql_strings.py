"""Symbol names in SQL: string literals compared with a ``VARCHAR`` column (``WHERE symbol =
'BTCUSDT'``, ``symbol IN ('A', 'B')``, ``<>``, ``NOT IN``, inside CASE and scalar subqueries), and
HAVING over GROUP BY columns (a filter on the groups' rows).

A string literal compiles to the symbol's id (:func:`ddms.io.symbols.symbol_id`, the number the
readers put in the column), so the views are checked where the ids matter: after every line of
hypothesis streams of several symbols (deletes, executions, replaced ids, empty books, ties, a
symbol named in a view that never trades) through the interpreter and the engine, against
DuckDB running the same SQL over the resting orders with the symbol as a VARCHAR column.  What
a string literal cannot mean (an order, arithmetic, a non-VARCHAR column) is refused with a
located error.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Duck, coalesce_sums, same
from test_sql_minmax import HEADER
from test_symbols import SymbolBooks
from viewcheck import key_count

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.io.symbols import symbol_id, with_symbol
from ddms.m3.interpreter import Interpreter
from ddms.runtime.engine import Engine

SYMBOLS = ["AAA", "BBB", "C/D"]
SYM_HEADER = HEADER.replace("price FLOAT)", "price FLOAT, symbol VARCHAR)")

VIEWS = {
    "AAA_BEST_BID": "SELECT MAX(price) AS aaa_best_bid FROM bids WHERE symbol = 'AAA'",
    "AAA_SPREAD": "SELECT (SELECT MIN(price) FROM asks WHERE symbol = 'AAA') - "
                  "(SELECT MAX(price) FROM bids WHERE 'AAA' = symbol) AS aaa_spread",
    "TWO_VOLUME": "SELECT SUM(volume) AS two_volume FROM bids WHERE symbol IN ('AAA', 'C/D')",
    "OTHER_VOLUME": "SELECT symbol, SUM(volume) AS other_volume FROM bids WHERE symbol <> 'AAA' GROUP BY symbol",
    "NOT_LISTED": "SELECT symbol, COUNT(*) AS not_listed FROM asks WHERE symbol NOT IN ('BBB', 'ZZZ') "
                  "GROUP BY symbol",
    "BBB_SHARE": "SELECT SUM(CASE WHEN symbol = 'BBB' THEN volume ELSE 0 END) AS bbb_share FROM bids",
    "NEVER": "SELECT SUM(volume) AS never FROM bids WHERE symbol = 'ZZZ'",
    "KEPT_BROKERS": "SELECT symbol, broker_id, COUNT(*) AS kept_brokers FROM asks GROUP BY symbol, broker_id "
                    "HAVING symbol = 'C/D' AND broker_id <> 3 AND COUNT(*) > 1",
    "AAA_TOUCH": "SELECT SUM(volume) AS aaa_touch FROM bids b WHERE b.symbol = 'AAA' "
                 "AND b.price = (SELECT MAX(price) FROM bids WHERE symbol = 'AAA')",
}


@pytest.fixture(scope="module")
def program():
    return compile_sql(SYM_HEADER + ";\n".join(VIEWS.values()) + ";", "<strings>").program


def _rows(got, keyed: bool) -> dict:
    """A view's value as key -> value (a symbol id key as its name), zero rows left out."""
    names = {float(symbol_id(s)): s for s in SYMBOLS}
    out = {tuple(names.get(k, k) if isinstance(k, float) else k for k in (key if isinstance(key, tuple) else (key,))): v
           for key, v in dict(got).items()} if keyed else {(): got}
    return {k: (math.nan if v is None else float(v)) for k, v in out.items() if v is None or v != 0}


def _duck(duck: Duck, books: SymbolBooks, sql: str) -> dict:
    out = {}
    for r in duck.query(books, coalesce_sums(sql)):
        v = math.nan if r[-1] is None else float(r[-1])
        if v != 0:
            out[tuple(k if isinstance(k, str) else float(k) for k in r[:-1])] = v
    return out


def _same(got: dict, want: dict) -> bool:
    norm = {tuple(float(x) if not isinstance(x, str) else x for x in k): v for k, v in got.items()}
    return norm.keys() == want.keys() and all(same(norm[k], want[k], 1e-9) for k in want)


class Run:
    def __init__(self, program, engine: bool) -> None:
        self.program = program
        self.it = Interpreter(program)
        self.engine = Engine(program) if engine else None
        self.parsers: dict[str, OrderBookParser] = {}
        self.books, self.duck = SymbolBooks(), Duck()
        self.n = 0

    def line(self, symbol: str, text: str) -> None:
        self.n += 1
        b = self.parsers.setdefault(symbol, OrderBookParser(brokers=10)).feed((text + "\n").encode())
        cols = with_symbol(b.cols, symbol_id(symbol))
        for i in range(len(b)):
            self.it.apply("+" if b.sign[i] > 0 else "-", ("BIDS", "ASKS")[int(b.rel[i])], tuple(cols[i]))
        if self.engine is not None:
            batch = EventBatch(b.rel, b.sign, cols, np.full(len(b), self.n, np.int64), self.n, self.n)
            self.engine.apply(batch, self.engine.relmap(("bids", "asks")))
        self.books.line(symbol, text)

    def check(self, where: str) -> None:
        for name, sql in VIEWS.items():
            want = _duck(self.duck, self.books, sql)
            keyed = key_count(self.program, name) > 0
            got = _rows(self.it.view(name), keyed)
            assert _same(got, want), f"{name} {where}: interpreter {got} != DuckDB {want}"
            if self.engine is not None:
                view = self.engine.views[name]
                got = _rows(dict(view) if keyed else view.value, keyed)
                assert _same(got, want), f"{name} {where}: engine {got} != DuckDB {want}"
        if self.engine is not None:
            self.engine._check()


LINE = st.tuples(st.sampled_from(SYMBOLS), st.one_of(
    st.tuples(st.sampled_from("BS"), st.integers(1, 6), st.integers(1, 40), st.sampled_from([1, 99, 100, 101, 150])),
    st.tuples(st.just("E"), st.integers(1, 6), st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), st.integers(1, 6), st.just(0), st.just(0)),
))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(LINE, min_size=1, max_size=30))
def test_symbol_literals_match_duckdb(program, stream) -> None:
    run = Run(program, engine=True)
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        run.line(sym, f"{i},{oid},{a},{v},{p}")
        run.check(f"line {i + 1} ({sym} {a} {oid} {v} {p})")


def test_literal_is_the_symbol_id(program) -> None:
    """The constant in the trigger program is the id the readers write for that name."""
    text = str(program)
    assert repr(float(symbol_id("AAA"))) in text and repr(float(symbol_id("C/D"))) in text


@pytest.mark.parametrize(("select", "col", "reason"), [
    ("SELECT SUM(volume) AS v FROM bids WHERE symbol < 'AAA'", "'AAA'", "symbols compare with = and <> only"),
    ("SELECT SUM(volume) AS v FROM bids WHERE price = 'AAA'", "'AAA'", "PRICE is not a VARCHAR column"),
    ("SELECT SUM(volume) AS v FROM bids WHERE 'A' = 'A'", "'A'", "two string literals"),
    ("SELECT SUM(volume) AS v FROM bids WHERE symbol IN ('AAA', 3)", "symbol", "mixes string literals and numbers"),
    ("SELECT SUM(volume + 'AAA') AS v FROM bids", "'AAA'", "compared with a VARCHAR column only"),
    ("SELECT SUM(volume) AS v FROM bids WHERE symbol = ''", "''", "not a symbol name"),
])
def test_refused_with_a_location(select, col, reason) -> None:
    src = SYM_HEADER + select + ";"
    with pytest.raises(SqlError) as e:
        compile_sql(src, "<bad>")
    msg = str(e.value)
    assert reason.lower() in msg.lower(), msg
    line = src.count("\n", 0, src.index(select)) + 1
    assert f"<bad>:{line}:" in msg, msg
    caret_col = int(msg.split(f"<bad>:{line}:")[1].split(":")[0])
    assert select[caret_col - 1:].startswith(col), (caret_col, msg)
