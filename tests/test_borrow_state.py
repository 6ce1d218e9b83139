"""The borrowed state handle (``btree.borrow_state``) that ``run_batch`` passes to the triggers it
inlines: generated code uses it for every trigger and prefetch call of its event loop, field reads
and stores through it reach the state's own payload, and a store through it counts the stored
array's references as a store through the state does (nothing leaked, nothing freed early)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import njit, types
from numba.experimental import structref

from ddms.backend.codegen import generate
from ddms.compiler import compile_sql
from ddms.storage import extheap
from ddms.storage.btree import borrow, borrow_state, keep_alive

SQL = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'f.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'f.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
SELECT (SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids) AS spread;
"""


def test_run_batch_passes_the_borrowed_state() -> None:
    src = generate(compile_sql(SQL).program).source
    body = src[src.index("def run_batch("):]
    assert "    bst = borrow_state(st)\n" in body
    calls = re.findall(r"\b(on_(?:insert|delete)_\w+|prefetch_hash|prefetch)\((\w+),", body)
    assert calls and all(arg == "bst" for _, arg in calls), calls
    assert "xh_wadd(" in src   # EXTREME writers try the window first


@structref.register
class _BoxType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((n, types.unliteral(t)) for n, t in fields)


class _Box(structref.StructRefProxy):
    @property
    def a(self):
        return _get_a(self)

    @property
    def n(self):
        return _get_n(self)


@njit
def _get_a(box):
    return box.a


@njit
def _get_n(box):
    return box.n


structref.define_proxy(_Box, _BoxType, ["a", "n"])


@njit
def _new_box():
    return _Box(np.arange(4.0), np.zeros(1))


@njit
def _grow(box):
    b = borrow_state(box)
    old = b.a
    b.a = np.concatenate((old, old + 10.0))   # a store through the borrowed handle
    b.n[0] += old.sum()
    return b.a.shape[0]


@njit
def _grow_twice(box):
    return _grow(box) + _grow(box)


def test_stores_through_the_borrowed_state_count_references() -> None:
    box = _new_box()
    first = box.a
    assert _grow(box) == 8
    np.testing.assert_array_equal(first, np.arange(4.0))   # the old array, still ours, intact
    np.testing.assert_array_equal(box.a, np.concatenate((np.arange(4.0), np.arange(4.0) + 10.0)))
    assert box.n[0] == 6.0
    held = box.a
    assert _grow_twice(box) == 16 + 32
    np.testing.assert_array_equal(held[:4], np.arange(4.0))   # replaced twice, still ours
    assert box.a.shape[0] == 32
    # the state holds its field array once, and the Python handles above their own references
    assert box.a.base.refcount == 2     # the state's and this expression's


# -- borrowed local arrays (btree.keep_alive) ------------------------------------------------------

@njit
def _borrowed_local(n, keep):
    a = np.full(n, -1, np.int64)
    ba = borrow(a)
    m = a.shape[0]                   # a's last use unless kept: numba frees it here
    b = np.full(n, 7, np.int64)      # (the allocator hands a's block out again)
    s = 0
    for i in range(m):
        s += ba[i]
    if keep:
        keep_alive(a)
    return s + b[0] - 7


def test_a_kept_local_outlives_its_borrowed_copy() -> None:
    """A borrowed copy of a local array reads the local's values after later allocations when the
    local is kept alive to the return (without ``keep_alive``, numba frees it after its last use:
    the copy then reads the next array's 7s, or faults).  Sizes below and above malloc's mmap
    threshold."""
    for n in (8, 1000, 100_000):
        assert _borrowed_local(n, True) == -n


def _locals_borrowed(fn_src: str) -> set[str]:
    """Names ``x`` of ``b = borrow(x)`` in a generated function where ``x`` is assigned in it (a
    local array, not a parameter nor a state field)."""
    assigned = set(re.findall(r"^    (\w+) = ", fn_src, re.M))
    return {x for x in re.findall(r"= borrow\((\w+)\)", fn_src) if x in assigned}


@pytest.mark.parametrize("which", ["symbols", "extremes"])
def test_generated_functions_keep_their_borrowed_locals_alive(which) -> None:
    """Every generated function that borrows an array it made (``run_batch``'s prefetch ring
    ``pfr`` and its list of tree events ``tev``) calls ``keep_alive`` on it before each return:
    numba frees a local after its last use, and ``run_batch`` read both only through borrowed
    copies, so its event loop wrote and read freed memory (the crash of ``bench.symbols``)."""
    if which == "symbols":
        from test_symbols import SYM_HEADER, VIEWS
        text = SYM_HEADER + ";\n".join(VIEWS.values()) + ";"
    else:
        text = HOIST_SQL
    src = generate(compile_sql(text).program).source
    fns = re.split(r"\n(?=@njit)", src)
    kept = 0
    for fn in fns:
        owned = _locals_borrowed(fn)
        if not owned:
            continue
        body = fn[fn.index("\n    "):]
        returns = [m.start() for m in re.finditer(r"^ +return\b", body, re.M)]
        assert returns, fn[:200]
        for x in owned:
            for r in returns:
                before = body[:r].rstrip().rsplit("\n", len(owned) + 2)
                assert any(f"keep_alive({x})" in ln for ln in before[1:]), (x, body[max(0, r - 300):r + 20])
            kept += 1
    if which == "symbols":   # the per-slice path prefetch: ring and event list
        assert kept >= 2


# -- the EXTREME maps' windows hoisted into run_batch (codegen._Codegen._hx_tuple) -------------------

HOIST_VIEWS = {
    "BEST_BID": "SELECT MAX(price) AS best_bid FROM bids",
    "RANGE_MID": "SELECT (MAX(price) + MIN(price)) / 2 AS range_mid FROM bids",   # one window, both ends
    "TOUCH_N": "SELECT COUNT(*) AS touch_n FROM asks WHERE price = (SELECT MIN(price) FROM asks)",
}
HOIST_SQL = SQL[:SQL.index("SELECT")] + ";\n".join(HOIST_VIEWS.values()) + ";"


def test_run_batch_hoists_the_windows() -> None:
    src = generate(compile_sql(HOIST_SQL).program).source
    body = src[src.index("def run_batch("):]
    # (best bid and range share one map, read by both ends: one window; the asks' map another)
    assert "    hx = (borrow(st.xw_BEST_BID_m1), borrow(st.xw_TOUCH_N_m1),)\n" in body
    calls = re.findall(r"\b(on_(?:insert|delete)_\w+|prefetch_hash)\((\w+), (\w+),", body)
    assert calls and all((a, b) == ("bst", "hx") for _, a, b in calls), calls
    assert re.search(r"if xh_wadd\(hx\[\d\], key\[0\], delta\):", src)
    assert "xh_retire(win)" in src and "xh_retired(st.xg_" in body


def _drift_lines(n: int, seed: int) -> list[str]:
    """Bids and asks whose prices drift far (the windows regrow again and again, both ways), with
    deletes and executions of live orders, fractions now and then (the overflow)."""
    rng = np.random.default_rng(seed)
    out, live, oid = [], [], 0
    for k in range(n):
        if live and rng.random() < 0.4:
            o = live.pop(int(rng.integers(len(live))))
            out.append(f"{k},{o},D,0,0" if rng.random() < 0.7 else f"{k},{o},E,1,0")
            if out[-1].endswith("E,1,0"):
                live.append(o)
            continue
        oid += 1
        centre = 1000 + 40 * k if k < n // 2 else 1000 + 40 * (n - k)
        p = centre + int(rng.integers(-3000, 3000)) + (0.5 if rng.random() < 0.02 else 0)
        out.append(f"{k},{oid},{'B' if rng.random() < 0.5 else 'S'},{int(rng.integers(1, 50))},{p}")
        live.append(oid)
    return out


@pytest.mark.parametrize("out_of_line", [False, True], ids=["inlined", "out-of-line"])
def test_windows_regrown_inside_one_batch_match_duckdb(out_of_line, monkeypatch) -> None:
    """Whole batches of thousands of events whose windows regrow inside the batch (the hoisted
    window is then stale: its adds must reach the state's current window): every view equals
    DuckDB's after each batch, the state passes ``_check()``, and no retired window is kept.
    Also with the prefetches and watch checks out of ``run_batch`` (their budgets forced to 0, as
    a program of ~100 views has them), which then take the hoisted windows as arguments."""
    from oracle import Book, Duck, coalesce_sums
    from viewcheck import duck_rows, engine_rows, same_rows

    from ddms.backend import codegen
    from ddms.io.orderbook import OrderBookParser
    from ddms.runtime.engine import Engine

    prog = compile_sql(HOIST_SQL).program
    if out_of_line:
        monkeypatch.setattr(codegen, "WATCH_INLINE_BUDGET", 0)
        monkeypatch.setattr(codegen, "PREFETCH_INLINE_BUDGET", 0)
    g = generate(prog)
    assert ("@njit(cache=True)\ndef prefetch_hash(st, hx," in g.source) == out_of_line
    eng = Engine(prog, generated=g)
    relmap = eng.relmap(("bids", "asks"))
    lines = _drift_lines(12_000, 7)
    parser, book, duck = OrderBookParser(brokers=10), Book(), Duck()
    regrown = 0
    for a in range(0, len(lines), 3_000):
        part = lines[a:a + 3_000]
        before = {f: getattr(eng.state, f).shape[0] for f in eng.module.FIELDS if f.startswith("xw_")}
        eng.apply(parser.feed(("\n".join(part) + "\n").encode()), relmap)
        regrown += sum(getattr(eng.state, f).shape[0] != n for f, n in before.items())
        for text in part:
            book.line(text)
        eng._check()
        for name, sql in HOIST_VIEWS.items():
            want = duck_rows(duck.query(book, coalesce_sums(sql)), 0)
            got = engine_rows(prog, name, eng.views[name], False)
            assert same_rows(got, want), f"{name} after line {a + len(part)}: engine {got} != DuckDB {want}"
        assert all(getattr(eng.state, f).shape[0] == extheap.WH for f in eng.module.FIELDS if f.startswith("xg_"))
    assert regrown >= 2   # (the stream does regrow the windows inside batches)
