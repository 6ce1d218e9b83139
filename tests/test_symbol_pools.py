"""Per-symbol views on pools big enough for ``run_batch``'s prefetch of the per-slice paths.

The hypothesis streams of tests/test_symbols.py keep every book tiny, so the generated prefetch
(``btree_prefetch_level`` of the root and level 1 of each event's per-symbol tree a few events
ahead, then its leaf: codegen ``PF_PATH``), which runs only once a pool has ``btree.PF_LEAVES``
leaves, never runs there.  Here the bench's stream (``bench.symbols``: 60 instruments of 1,000
resting orders, their sorted load packed into 20 leaves a side; every line a delete and an
insert of one order of a random instrument) fills the pools past that size; the views after it
must equal DuckDB over the resting orders, and the state must check.  A prefetch is a hint, so
a wrong one costs time, not results; what this guards is a prefetch that reads outside the pool
or a fused tree that answers wrongly at scale.

The engine runs tests/test_symbols.py's program (every ``examples/sql/symbol_*.sql`` view in one
program, the same text): one cold compile serves both files.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import REPO
from oracle import Duck, coalesce_sums, same, strip_comments
from test_symbols import SYM_HEADER, VIEWS

from bench.symbols import book_events
from ddms.compiler import compile_sql, compile_sql_file
from ddms.io.symbols import symbol_name
from ddms.runtime.engine import Engine
from ddms.storage.btree import btree_big

pytestmark = pytest.mark.long(60)   # test_symbols' program, if that file has not compiled it yet

SQL = REPO / "examples" / "sql"
FILES = ("symbol_bid_vwap_top_quarter.sql", "symbol_sobi.sql")


def select_of(path) -> str:
    stmts = [s.strip() for s in strip_comments(path.read_text()).split(";")]
    [sel] = [s for s in stmts if s.upper().startswith(("SELECT", "WITH"))]
    return sel


class Resting:
    """The resting orders after the batches, replayed in Python (an order is its id's last insert
    unless deleted since): bids and asks as DuckDB tables with a VARCHAR symbol."""

    version = 0

    def __init__(self, *batches) -> None:
        live: dict[tuple[int, float], tuple] = {}
        for b in batches:
            for rel, sign, row in zip(b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), strict=True):
                key = (rel, row[1])
                if sign > 0:
                    live[key] = row
                else:
                    assert live.pop(key)[3:5] == row[3:5]   # a delete names the resting order
        self.rows = live

    def tables(self) -> tuple[pa.Table, pa.Table]:
        out = []
        for rel in (0, 1):
            rows = [r for (k, _), r in self.rows.items() if k == rel]
            cols = np.array(rows).reshape(-1, 6)
            out.append(pa.table({"t": cols[:, 0], "id": cols[:, 1].astype(np.int64),
                                 "broker_id": cols[:, 2].astype(np.int64), "volume": cols[:, 3],
                                 "price": cols[:, 4], "symbol": [symbol_name(s) for s in cols[:, 5]]}))
        return out[0], out[1]


SYMBOLS = 60   # x 20 leaves a side: past btree.PF_LEAVES


@pytest.fixture(scope="module")
def stream():
    return book_events(SYMBOLS, 1000, 3000, seed=3)


@pytest.fixture(scope="module")
def program():
    return compile_sql(SYM_HEADER + ";\n".join(VIEWS.values()) + ";", "<symbols>").program


@pytest.mark.parametrize("name", FILES)
def test_views_over_prefetched_pools_equal_duckdb(stream, program, name) -> None:
    pre, upd = stream
    engine = Engine(program)
    relmap = engine.relmap(("bids", "asks"))
    engine.apply(pre, relmap)
    pools = [getattr(engine.state, f) for f in engine.module.FIELDS if f.startswith("op_")]
    assert any(btree_big(p) for p in pools)   # the prefetching path of run_batch runs below
    assert any("per-slice range tree" in p for p in engine.generated.plan)
    _apply_and_check(engine, relmap, name, pre, upd)


def test_one_side_view_counts_its_own_events_ahead(stream) -> None:
    """A bid-side view alone: the ask events update no per-symbol tree, so ``run_batch``'s path
    prefetch stages run at the bid events only, counting bid events ahead (codegen.PF_EVENTS,
    ``pf_events``).  The view after the stream equals DuckDB; ``pf_events`` lists exactly the bid
    events of a range."""
    pre, upd = stream
    name = "symbol_bid_vwap_top_quarter.sql"
    engine = Engine(compile_sql(SYM_HEADER + ";\n" + VIEWS[name.removesuffix(".sql").upper()] + ";", "<vwap>").program)
    relmap = engine.relmap(("bids", "asks"))
    engine.apply(pre, relmap)
    pools = [getattr(engine.state, f) for f in engine.module.FIELDS if f.startswith("op_")]
    assert any(btree_big(p) for p in pools)
    tev = engine.module.pf_events(relmap, upd.rel, upd.sign, 3, len(upd) - 5)
    want_ev = 3 + np.flatnonzero(relmap[upd.rel[3:len(upd) - 5]] == 0)
    assert tev.tolist() == want_ev.tolist() and 0 < len(tev) < len(upd) - 8
    _apply_and_check(engine, relmap, name, pre, upd)


def _apply_and_check(engine, relmap, name: str, pre, upd) -> None:
    """Apply ``upd`` after ``pre``, then the view of ``name`` equals DuckDB over the resting orders."""
    engine.apply(upd, relmap)
    engine._check()
    view = name.removesuffix(".sql").upper()
    got = {k[0]: v for k, v in engine.views[view].items()}
    want = {r[0]: r[1] for r in Duck().query(Resting(pre, upd), coalesce_sums(select_of(SQL / name)))
            if r[1] is not None and r[1] != 0}
    assert got.keys() == want.keys() and len(got) == SYMBOLS
    assert all(same(got[s], want[s], 1e-9) for s in want), {s: (got[s], want[s]) for s in want}


def test_watched_views_over_a_churned_heap(stream) -> None:
    """A watched per-symbol view whose callback, after every line, allocates arrays of many sizes
    holding event numbers (0, 1, 2, ...: what ``run_batch``'s list of tree events holds), every
    7th far out of range: had ``run_batch`` freed that list or its prefetch ring while still
    reading them through borrowed copies (``btree.keep_alive``), the allocator would hand their
    blocks to these arrays and the path prefetch would index the event arrays with the bad
    numbers (a fault: this test crashed the process before the fix, most runs).  The state checks
    and the views equal DuckDB."""
    pre, upd = stream
    name = "symbol_sobi.sql"
    engine = Engine(compile_sql_file(SQL / name).program)   # (the file's program: the bench's)
    relmap = engine.relmap(("bids", "asks"))
    engine.apply(pre, relmap)
    assert any(btree_big(getattr(engine.state, f)) for f in engine.module.FIELDS if f.startswith("op_"))
    assert len(engine.module.pf_events(relmap, upd.rel, upd.sign, 0, len(upd))) == len(upd)   # path stages run
    held: list[np.ndarray] = []
    fired = []

    def churn(view, key, old, new, position) -> None:
        fired.append(position)
        if len(held) > 200:
            held.clear()
        for n in range(1, 8192, 53):
            a = np.arange(n)
            a[6::7] = 1 << 62
            held.append(a)

    engine.on(name.removesuffix(".sql").upper(), churn)
    _apply_and_check(engine, relmap, name, pre, upd)
    assert len(fired) > (upd.last_line - upd.first_line) // 4
