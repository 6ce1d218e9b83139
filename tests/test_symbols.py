"""Instruments everywhere (issue 22 item 2): order-book streams that declare a ``symbol VARCHAR``
column, per-symbol views, readers that fill the column.

The per-symbol cookbook views (``examples/sql/symbol_*.sql``: best bid/ask, touch volume,
top-quarter VWAP, spread and SOBI per symbol, the nested subqueries correlated on the symbol) are
compiled into one program and checked, after every line of hypothesis streams of several symbols
(deletes, partial executions, replaced ids, ties, empty books) and of real data split into
symbols, against two independent oracles:

* DuckDB running each file's SELECT over the resting orders of every symbol (a plain-Python
  replay), with the symbol as a VARCHAR column;
* one engine per symbol running the single-book cookbook views (``best_bid.sql``, ``sobi.sql``,
  ...; streams without a symbol column) on that symbol's lines only: the per-symbol row of the
  multi-symbol engine equals the single-book engine's value.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO, shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Book, Duck, coalesce_sums, same, strip_comments
from test_cookbook import VIEWS as BOOK_VIEWS
from test_sql_minmax import HEADER

from ddms.backend.codegen import generate
from ddms.backend.cost import view_costs
from ddms.compiler import compile_sql, compile_sql_file
from ddms.errors import ProgramError, SqlError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.io.symbols import known_symbols, symbol_id, symbol_name, with_symbol
from ddms.m3.interpreter import Interpreter
from ddms.m3.parser import parse_program
from ddms.runtime.engine import Engine

pytestmark = pytest.mark.long(150)   # minutes of cold numba compile in CI: scheduled first (tests/conftest.py)

SQL = REPO / "examples" / "sql"
# (views of rows, the per-symbol ladder, are checked with the other ladders in test_sql_ladder.py)
ALL_SYMBOL_FILES = sorted(SQL.glob("symbol_*.sql"))
SYMBOL_FILES = [p for p in ALL_SYMBOL_FILES if compile_sql_file(p).program.queries[0].limit is None]
# the single-book cookbook view each per-symbol view equals, symbol by symbol
SINGLE = {"SYMBOL_BEST_BID": "best_bid", "SYMBOL_BEST_ASK": "best_ask",
          "SYMBOL_BID_TOUCH_VOLUME": "bid_touch_volume", "SYMBOL_BID_VWAP_TOP_QUARTER": "bid_vwap_top_quarter",
          "SYMBOL_SPREAD": "spread", "SYMBOL_SOBI": "sobi"}
SYM_HEADER = HEADER.replace("price FLOAT)", "price FLOAT, symbol VARCHAR)")


def select_of(path) -> str:
    stmts = [s.strip() for s in strip_comments(path.read_text()).split(";")]
    [sel] = [s for s in stmts if s.upper().startswith(("SELECT", "WITH"))]
    return sel


VIEWS = {p.stem.upper(): select_of(p) for p in SYMBOL_FILES}
# the cookbook's single-book program, as test_cookbook compiles it (the same text: one compile, cached)
SINGLE_VIEWS = BOOK_VIEWS


@pytest.fixture(scope="module")
def program():
    return compile_sql(SYM_HEADER + ";\n".join(VIEWS.values()) + ";", "<symbols>").program


@pytest.fixture(scope="module")
def single_program():
    return compile_sql(HEADER + ";\n".join(SINGLE_VIEWS.values()) + ";", "<cookbook>").program


@pytest.fixture(scope="module")
def engines(program, single_program):
    Engine(program)          # one compile each, cached for every engine below
    Engine(single_program)
    return program, single_program


# -- the column, its type, its ids ----------------------------------------------------------------

def test_symbol_ids_are_stable_distinct_and_named() -> None:
    names = [f"S{i}" for i in range(2000)] + ["BTCUSDT", "XBT/CHF", "ESH4", "BTC-USDT-SWAP"]
    ids = [symbol_id(n) for n in names]
    assert len(set(ids)) == len(names)
    assert all(0 <= i < 2**53 and float(i) == i for i in ids)          # exact in float64
    assert [symbol_name(float(i)) for i in ids] == names
    assert symbol_id("BTCUSDT") == symbol_id("BTCUSDT") and symbol_id("btcusdt") != symbol_id("BTCUSDT")
    assert symbol_name(12.0) == "#12" and symbol_name(math.nan).startswith("#")
    with pytest.raises(ValueError):
        symbol_id("")
    assert with_symbol(np.ones((2, 5)), 7).tolist() == [[1, 1, 1, 1, 1, 7]] * 2


def test_varchar_declares_a_string_column_and_typed_keys(program) -> None:
    bids = program.stream("BIDS")
    assert [c.type for c in bids.columns] == ["float", "int", "int", "float", "float", "string"]
    for q in program.queries:   # every view is keyed by the symbol, typed string
        assert [c.type for c in program.map(q.map).keys] == ["string"], q.name
    p = parse_program("CREATE STREAM B(T float, ID int, BROKER_ID int, VOLUME float, PRICE float, S varchar(12));")
    assert p.streams[0].columns[-1].type == "string"


def test_programs_without_symbols_have_no_string_keys() -> None:
    """Single-book programs: no map key is typed ``string`` (their keys show as numbers)."""
    for p in sorted(SQL.glob("*.sql")):
        if p in ALL_SYMBOL_FILES:
            continue
        prog = compile_sql_file(p).program
        assert all(c.type != "string" for m in prog.maps for c in m.keys), p


def test_symbol_column_must_be_last_and_a_string() -> None:
    bad = HEADER.replace("price FLOAT)", "price FLOAT, symbol INT)", 1)
    with pytest.raises(SqlError, match="symbol VARCHAR"):
        compile_sql(bad + "SELECT SUM(volume) AS v FROM bids;")


def test_per_symbol_views_cost_log_n(program) -> None:
    """The correlated shapes compile to range trees keyed by (symbol, price) and re-evaluate the
    event's symbol only: O(log n) in that instrument's book (ddms compile's cost class)."""
    costs = {name: cls for name, cls, _ in view_costs(program, generate(program).plan)}
    assert costs == dict.fromkeys(VIEWS, "O(log n)")


# -- the oracle: per-symbol books, DuckDB, one engine per symbol ------------------------------------

class SymbolBooks:
    """Resting orders per symbol (a :class:`oracle.Book` each) as DuckDB tables with a VARCHAR
    symbol column."""

    def __init__(self) -> None:
        self.books: dict[str, Book] = {}
        self.version = 0

    def line(self, symbol: str, text: str) -> None:
        self.version += 1
        self.books.setdefault(symbol, Book()).line(text)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        out = []
        for side in ("bids", "asks"):
            parts = []
            for s, b in self.books.items():
                t = b.table(side)
                parts.append(t.append_column("symbol", pa.array([s] * t.num_rows, pa.string())))
            if not parts:
                parts = [Book().table(side).append_column("symbol", pa.array([], pa.string()))]
            out.append(pa.concat_tables(parts))
        return out[0], out[1]


def duck_rows(duck: Duck, books: SymbolBooks, sql: str) -> dict[str, float]:
    return {r[0]: (math.nan if r[1] is None else float(r[1])) for r in duck.query(books, sql) if r[1] != 0}


def _nonzero(d: dict) -> dict:
    return {k: v for k, v in d.items() if v != 0}


def _same_rows(got: dict, want: dict) -> bool:
    return got.keys() == want.keys() and all(same(got[k], want[k], 1e-8) for k in want)


class Run:
    """One multi-symbol stream applied line by line to the engine (and the interpreter) and to
    one single-book engine per symbol, with the oracle book kept beside them."""

    def __init__(self, program, single, *, interp: bool, engine: bool) -> None:
        self.program, self.single = program, single
        self.it = Interpreter(program) if interp else None
        self.engine = Engine(program) if engine else None
        self.singles: dict[str, Engine] = {}
        self.parsers: dict[str, OrderBookParser] = {}
        self.books, self.duck = SymbolBooks(), Duck()
        self.queries = {n: coalesce_sums(sql) for n, sql in VIEWS.items()}
        self.n = 0

    def line(self, symbol: str, text: str) -> None:
        self.n += 1
        n = self.n
        p = self.parsers.setdefault(symbol, OrderBookParser(brokers=10))
        b = p.feed((text + "\n").encode())
        k = len(b)
        cols = with_symbol(b.cols, symbol_id(symbol))
        batch = EventBatch(b.rel, b.sign, cols, np.full(k, n, np.int64), n, n)
        if self.it is not None:
            for i in range(k):
                self.it.apply("+" if b.sign[i] > 0 else "-", ("BIDS", "ASKS")[int(b.rel[i])], tuple(cols[i]))
        if self.engine is not None:
            self.engine.apply(batch, self.engine.relmap(("bids", "asks")))
            if symbol not in self.singles:
                self.singles[symbol] = Engine(self.single)
            e = self.singles[symbol]
            e.apply(EventBatch(b.rel, b.sign, b.cols, np.full(k, n, np.int64), n, n), e.relmap(("bids", "asks")))
        self.books.line(symbol, text)

    def check(self, where: str) -> None:
        for name, sql in self.queries.items():
            want = duck_rows(self.duck, self.books, sql)
            if self.it is not None:
                got = {symbol_name(k[0]): v for k, v in self.it.view(name).items()}
                assert _same_rows(_nonzero(got), want), f"{name} {where}: interpreter {got} != DuckDB {want}"
            if self.engine is not None:
                got = dict(self.engine.views[name])
                got = {k[0]: v for k, v in got.items()}
                assert _same_rows(_nonzero(got), want), f"{name} {where}: engine {got} != DuckDB {want}"
                single = SINGLE[name].upper()
                for s, e in self.singles.items():     # one engine per symbol, single-book views
                    one = e.views[single].value
                    one = math.nan if one is None else one
                    if s in got:
                        assert same(got[s], one, 1e-9), f"{name} {where} {s}: {got[s]} != single-book {one}"
                    else:
                        assert one == 0 or math.isnan(one), f"{name} {where} {s}: no row, single-book {one}"


SYMBOLS = ["AAA", "BBB", "C/D"]
PRICES = [1, 99, 100, 101, 102, 150, 200]
IDS = st.integers(1, 6)
LINE = st.tuples(st.sampled_from(SYMBOLS), st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
))


def _apply(run: Run, stream: list[tuple]) -> None:
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        run.line(sym, f"{i},{oid},{a},{v},{p}")
        run.check(f"line {i + 1} ({sym} {a} {oid} {v} {p})")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(LINE, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, single_program, stream) -> None:
    _apply(Run(program, single_program, interp=True, engine=False), stream)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(LINE, min_size=1, max_size=30))
def test_engine_matches_duckdb_and_one_engine_per_symbol(engines, stream) -> None:
    program, single = engines
    _apply(Run(program, single, interp=False, engine=True), stream)


def _finance_split(size: str, k: int) -> list[tuple[str, str]]:
    """finance.csv split into ``k`` symbols by order id (an order's lines stay in its symbol)."""
    lines = shared_file("data", "orderbook", size, "finance.csv").read_text().splitlines()
    return [(f"F{int(t.split(',')[1]) % k}", t) for t in lines]


def test_tiny_split_into_symbols(engines) -> None:
    program, single = engines
    run = Run(program, single, interp=True, engine=True)
    for n, (sym, text) in enumerate(_finance_split("tiny", 3), start=1):
        run.line(sym, text)
        run.check(f"line {n}")


def test_standard_split_into_symbols(engines) -> None:
    program, single = engines
    run = Run(program, single, interp=False, engine=True)
    rows = _finance_split("standard", 4)
    for n, (sym, text) in enumerate(rows, start=1):
        run.line(sym, text)
        if n % 50 == 0 or n == len(rows):
            run.check(f"line {n}")


# -- real multi-symbol captures through ddms/io ---------------------------------------------------

def _capture_check(program, path, every: int) -> int:
    """The capture's batches with every symbol (ddms/io), applied to the engine line by line;
    DuckDB over the rows the events leave resting (an independent multiset replay) after every
    ``every``-th line.  Returns the number of symbols seen."""
    from ddms.io.sources import open_source
    src = open_source(path, symbols=True)
    engine, duck = Engine(program), Duck()
    relmap = engine.relmap(("bids", "asks"))
    rows = (Counter(), Counter())
    queries = {n: coalesce_sums(sql) for n, sql in VIEWS.items()}
    names: set[str] = set()
    n_lines = 0
    for batch in src:
        assert batch.cols.shape[1] == 6
        assert (np.diff(batch.line) >= 0).all()
        for line in range(batch.first_line, batch.last_line + 1):   # a line's events: one slice (lines ascend)
            sel = slice(*np.searchsorted(batch.line, [line, line + 1]))
            one = EventBatch(batch.rel[sel], batch.sign[sel], batch.cols[sel], batch.line[sel], line, line)
            engine.apply(one, relmap)
            for r, s, c in zip(one.rel.tolist(), one.sign.tolist(), one.cols.tolist(), strict=True):
                rows[r][tuple(c)] += s
                if rows[r][tuple(c)] == 0:
                    del rows[r][tuple(c)]
                names.add(symbol_name(c[5]))
            n_lines += 1
            if n_lines % every:
                continue
            for side, name in ((0, "bids"), (1, "asks")):
                flat = [c for c, m in rows[side].items() for _ in range(m)]
                arr = np.array(flat, dtype=np.float64).reshape(-1, 6)
                t = pa.table({c: arr[:, i] for i, c in enumerate(("t", "id", "broker_id", "volume", "price"))})
                duck.con.register(name, t.append_column("symbol", pa.array([symbol_name(x) for x in arr[:, 5]],
                                                                             pa.string())))
            for name, sql in queries.items():
                want = {r[0]: (math.nan if r[1] is None else float(r[1])) for r in duck.con.execute(sql).fetchall()
                        if r[1] != 0}
                got = _nonzero({k[0]: v for k, v in dict(engine.views[name]).items()})
                assert _same_rows(got, want), f"{path} line {n_lines} {name}: engine {got} != DuckDB {want}"
    return len(names)


@pytest.mark.parametrize("capture", ["KRAKEN.ws.50.0", "OKX.ws.1.0"])
def test_venue_capture_per_symbol_views_match_duckdb(engines, capture) -> None:
    program, _ = engines
    path = shared_file("data", "venues", capture)
    assert _capture_check(program, path, every=60) > 1   # every line: -m slow (test_venue_capture_every_line)


@pytest.mark.slow
@pytest.mark.parametrize("capture", ["KRAKEN.ws.50.0", "OKX.ws.1.0", "COINBASE.ws.28.0", "BINANCE.ws.1.0"])
def test_venue_capture_every_line(engines, capture) -> None:
    program, _ = engines
    _capture_check(program, shared_file("data", "venues", capture), every=1)


# -- readers fill the column ------------------------------------------------------------------------

def test_io_reader_batches_carry_every_symbol() -> None:
    from ddms.io.sources import open_source
    path = shared_file("data", "venues", "KRAKEN.ws.50.0")
    one = [b for b in open_source(f"{path}#XBT/CHF")]
    every = [b for b in open_source(path, symbols=True)]
    assert all(b.cols.shape[1] == 5 for b in one) and all(b.cols.shape[1] == 6 for b in every)
    sym = np.concatenate([b.cols[:, 5] for b in every])
    names = {symbol_name(x) for x in np.unique(sym)}
    assert "XBT/CHF" in names and len(names) > 1
    # the rows of one symbol, in order, are the one-symbol source's rows
    mine = np.concatenate([b.cols[b.cols[:, 5] == symbol_id("XBT/CHF"), :5] for b in every])
    assert np.array_equal(mine, np.concatenate([b.cols for b in one]))
    chosen = [b for b in open_source(f"{path}#XBT/CHF", symbols=True)]
    assert {symbol_name(x) for b in chosen for x in b.cols[:, 5]} == {"XBT/CHF"}


def test_binance_capture_carries_its_symbol() -> None:
    from ddms.io.sources import open_source
    path = shared_file("data", "binance", "spot_btcusdt_20240808.gz")
    b = next(iter(open_source(path, symbols=True)))
    assert b.cols.shape[1] == 6 and set(b.cols[:, 5].tolist()) == {symbol_id("BTCUSDT")}


def test_orderbook_csv_symbol_from_option_or_file_name(engines, tmp_path) -> None:
    from ddms.io.inputs import open_program_input
    program, _ = engines
    data = tmp_path / "aapl.csv"
    data.write_text("1,1,B,10,100\n2,2,S,5,101\n")
    pi = open_program_input(program, tmp_path, data=data)
    [b] = list(pi.batches(lambda p: [p.read_bytes()]))
    assert b.cols.shape[1] == 6 and set(b.cols[:, 5].tolist()) == {symbol_id("AAPL")}
    text = SYM_HEADER.replace("deterministic := 'yes'", "symbol := 'MSFT'") + VIEWS["SYMBOL_BEST_BID"] + ";"
    prog = compile_sql(text).program
    (tmp_path / "finance.csv").write_text("1,1,B,10,100\n")
    pi = open_program_input(prog, tmp_path)
    [b] = list(pi.batches(lambda p: [p.read_bytes()]))
    assert set(b.cols[:, 5].tolist()) == {symbol_id("MSFT")}
    e = Engine(program)
    fired = []
    e.on("SYMBOL_BEST_BID", lambda view, key, old, new, line: fired.append((key, new, line)))
    pi = open_program_input(program, tmp_path, data=data)
    for batch in pi.batches(lambda p: [p.read_bytes()]):
        e.apply(batch, e.relmap(pi.names))
    assert fired == [(("AAPL",), 100.0, 1)]
    assert e.snapshot()["SYMBOL_BEST_BID"] == [["AAPL", 100.0]]
    assert dict(e.views["SYMBOL_BEST_ASK"]) == {("AAPL",): 101.0}
    assert e.views["SYMBOL_BEST_ASK"]["AAPL"] == 101.0
    table = e.views["SYMBOL_BEST_BID"].to_arrow()
    assert table.column(0).to_pylist() == ["AAPL"] and table.schema.field(0).type == pa.string()
    e.insert("BIDS", 3, 9, 0, 1, 105, "MSFT")            # a symbol column takes the name
    assert e.views["SYMBOL_BEST_BID"]["MSFT"] == 105.0 and fired[-1][0] == ("MSFT",)


def test_a_single_book_program_refuses_nothing_and_sees_five_columns(tmp_path) -> None:
    """A program without the column reads the same sources as before (5-column batches)."""
    from ddms.io.sources import open_source
    path = shared_file("data", "binance", "spot_btcusdt_20240808.gz")
    assert next(iter(open_source(path))).cols.shape[1] == 5
    assert known_symbols()   # ids registered by the readers above
    with pytest.raises(ProgramError):
        from ddms.io.inputs import orderbook_options
        from ddms.m3.ir import Column, Source, Stream
        orderbook_options(Stream("BIDS", tuple(Column(c, "float") for c in "abcdefg"),
                                 Source("x.csv", "orderbook", ()), "STREAM"))


def test_cli_prints_symbol_names(tmp_path) -> None:
    import json
    import subprocess
    import sys
    data = tmp_path / "ibm.csv"
    data.write_text("1,1,B,10,100\n2,2,B,5,102\n")
    out = subprocess.run([sys.executable, "-m", "ddms", "run", str(SQL / "symbol_best_bid.sql"), "--data", str(data),
                          "--json"], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["views"] == {"SYMBOL_BEST_BID": [["IBM", 102.0]]}
    assert re.search(r"IBM", out.stdout)


def test_file_symbol_names() -> None:
    from ddms.io.sources import file_symbol
    assert file_symbol("data/aapl.csv") == "AAPL" and file_symbol("x/book.parquet") == "BOOK"
    assert file_symbol("x/AAPL_2012-06-21_34200000_57600000_message_10.csv", "lobster") == "AAPL"


@pytest.mark.parametrize("parts", [("mbo", "esh4-glbx-mdp3-20231224.mbo.dbn.zst"),
                                   ("tardis", "deribit_incremental_book_L2_BTC-PERPETUAL.csv"),
                                   ("venues", "OKX.ws.1.0"), ("venues", "BINANCE_FUTURES.ws.1.0")])
def test_every_multi_symbol_reader_fills_the_column(parts) -> None:
    """DBN (by instrument), tardis and cryptofeed captures: the column holds exactly the symbols
    the reader reports, row by row in its order."""
    from ddms.io.levels import per_symbol
    from ddms.io.sources import _IO_FORMATS, open_source
    path = shared_file("data", *parts)
    src = open_source(path, symbols=True)
    # the chunk lanes hand out a ChunkEvents per kernel run: split into per-message events
    want = [(ev.symbol, ev.batch.cols) for ev in per_symbol(list(_IO_FORMATS[src.kind].read(str(path), False)))]
    got = np.concatenate([b.cols for b in src])
    assert got.shape == (sum(len(c) for _, c in want), 6)
    assert np.array_equal(got[:, :5], np.concatenate([c for _, c in want]))
    assert got[:, 5].tolist() == [float(symbol_id(s)) for s, c in want for _ in range(len(c))]


# -- keyed deferral: per-symbol statements run once per touched symbol per line ------------------

def test_per_symbol_statements_are_deferred_per_key(program) -> None:
    """Every per-symbol view's keyed re-evaluation leaves the per-event triggers
    (deferral.keyed_deferred_maps): the plan names each view in a keyed group of its symbol."""
    plan = [p for p in generate(program).plan if "once per value of" in p]
    for name in VIEWS:
        assert any(re.search(rf"[:,] {name}(,|$)", p) for p in plan), name
    assert all(re.search(r"once per value of (BIDS|ASKS)_SYMBOL seen", p) for p in plan)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(LINE, min_size=1, max_size=30))
def test_watched_per_symbol_views_fire_after_every_line(engines, stream) -> None:
    """The whole stream in ONE batch with per-symbol views watched: the keyed statements then
    run at the end of each line (not of the batch), so a callback reading every view sees
    DuckDB's rows after its line, and every line that changed a watched view fires."""
    program, _ = engines
    batch = _one_batch(stream)
    engine = Engine(program)
    seen: dict[int, dict[str, dict]] = {}

    def snapshot(_view, _key, _old, _new, position):
        seen[position] = {n: {k[0]: v for k, v in dict(engine.views[n]).items()} for n in VIEWS}
    watched = ("SYMBOL_SOBI", "SYMBOL_BID_VWAP_TOP_QUARTER", "SYMBOL_BEST_ASK")
    for name in watched:
        engine.on(name, snapshot)
    engine.apply(batch, engine.relmap(("bids", "asks")))
    engine._check()
    books, duck = SymbolBooks(), Duck()
    queries = {n: coalesce_sums(sql) for n, sql in VIEWS.items()}
    before = {n: {} for n in VIEWS}
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        books.line(sym, f"{i},{oid},{a},{v},{p}")
        want = {n: duck_rows(duck, books, sql) for n, sql in queries.items()}
        if any(not _same_rows(want[n], before[n]) for n in watched):
            assert i + 1 in seen, f"line {i + 1}: a watched view changed, no callback"
        if i + 1 in seen:
            for n in VIEWS:
                got = _nonzero(seen[i + 1][n])
                assert _same_rows(got, want[n]), f"{n} line {i + 1}: callback saw {got}, DuckDB {want[n]}"
        before = want


def _one_batch(stream: list[tuple]) -> EventBatch:
    """The whole stream as one batch (each symbol's lines parsed by its own parser)."""
    parsers: dict[str, OrderBookParser] = {}
    parts = []
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        b = parsers.setdefault(sym, OrderBookParser(brokers=10)).feed(f"{i},{oid},{a},{v},{p}\n".encode())
        parts.append((b.rel, b.sign, with_symbol(b.cols, symbol_id(sym)), np.full(len(b), i + 1, np.int64)))
    rel, sign, cols, line = (np.concatenate([x[j] for x in parts]) for j in range(4))
    return EventBatch(rel.astype(np.int8), sign.astype(np.int8), np.ascontiguousarray(cols.reshape(-1, 6)), line,
                      1, len(stream))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(LINE, min_size=2, max_size=40), ask_after=st.integers(1, 6))
def test_unwatched_chunks_defer_per_symbol_statements_to_the_batch_end(engines, stream, ask_after) -> None:
    """One unwatched batch run in chunks of 4 events: the per-symbol statements of every chunk but
    the last stay pending (the symbols a chunk touched are still in the keyed tables when the next
    chunk starts: once per batch, not per chunk), yet a snapshot request served between two chunks
    (queued as a reader thread queues it) and the views after the batch equal DuckDB's rows after
    their line."""
    import concurrent.futures

    import ddms.runtime.engine as engine_mod
    program, _ = engines
    batch = _one_batch(stream)
    engine = Engine(program)
    module = engine.module
    inner = module.run_batch
    lazy = [f for f in module.FIELDS if f.startswith("lazy_keys_")]
    assert lazy
    calls: list[tuple[bool, bool]] = []   # (deferred, keys left pending) per chunk
    fut: concurrent.futures.Future = concurrent.futures.Future()

    def run_batch(*args):
        end = inner(*args)
        calls.append((args[-1], any(getattr(engine.state, f)[-1, 0] > 0 for f in lazy)))
        if len(calls) == ask_after:
            engine._requests.append((lambda: (engine.position, {n: dict(engine.views[n]) for n in VIEWS}), fut))
        return end
    chunk, engine_mod.CHUNK_EVENTS = engine_mod.CHUNK_EVENTS, 4
    module.run_batch = run_batch
    try:
        engine.apply(batch, engine.relmap(("bids", "asks")))
    finally:
        module.run_batch = inner
        engine_mod.CHUNK_EVENTS = chunk
    engine._check()
    assert not calls or calls[-1] == (False, False)
    assert all(deferred for deferred, _ in calls[:-1])
    if len(batch) > 8:   # the first chunk's symbols are still pending when the second starts
        assert calls[0][1]
    books, duck = SymbolBooks(), Duck()
    queries = {n: coalesce_sums(sql) for n, sql in VIEWS.items()}
    asked = fut.result(0)[0] if fut.done() else None
    assert fut.done() == (len(calls) >= ask_after)   # (queued after the last chunk: served as apply ends)
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        books.line(sym, f"{i},{oid},{a},{v},{p}")
        if i + 1 == asked:
            for n, sql in queries.items():
                got = _nonzero({k[0]: v for k, v in fut.result(0)[1][n].items()})
                assert _same_rows(got, duck_rows(duck, books, sql)), f"{n}: request served after line {asked}"
    for n, sql in queries.items():
        got = _nonzero({k[0]: v for k, v in dict(engine.views[n]).items()})
        assert _same_rows(got, duck_rows(duck, books, sql)), n
