"""Generated programs keep a map that no view exposes and that they only probe and update at one key
in a hash table (``codegen._point_candidates``: a plain array instead of a typed Dict), and the keys
a keyed deferred group has seen in a table that a flush shrinks back after a big batch
(``codegen.LAZY_KEYS_SMALL``).  Both are checked here against a plain-Python replay of the book,
with ``Engine._check`` (which checks every such table's invariants) after every batch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import REPO

from ddms.compiler import compile_sql_file
from ddms.io.events import EventBatch
from ddms.io.symbols import symbol_id
from ddms.runtime.engine import Engine

SQL = REPO / "examples" / "sql"


def bids_batch(events: list[tuple[int, float, float, float]], first_line: int, per_line: int = 1) -> EventBatch:
    """Bid events ``(sign, id, group key, price)``, ``per_line`` to a line: columns t, id, broker,
    volume, price, symbol; the group key is both the broker and the symbol."""
    n = len(events)
    cols = np.array([[0.0, oid, key, 1.0, price, key] for _, oid, key, price in events]).reshape(n, 6)
    lines = first_line + np.arange(n, dtype=np.int64) // per_line
    return EventBatch(np.zeros(n, np.int8), np.array([s for s, *_ in events], np.int8), cols, lines,
                      first_line, int(lines[-1]))


def best_per_key(resting: dict[float, tuple[float, float]]) -> dict[float, float]:
    out: dict[float, float] = {}
    for key, price in resting.values():
        out[key] = max(out.get(key, -np.inf), price)
    return out


def random_events(rng, keys: list[float], n: int, resting: dict) -> list[tuple[int, float, float, float]]:
    """n inserts and deletes of bids over ``keys`` (ties and deletes of the best included); updates
    ``resting`` (id -> (key, price)) as it goes."""
    out = []
    next_id = max(resting, default=0.0) + 1.0
    for _ in range(n):
        if resting and rng.random() < 0.45:
            oid = list(resting)[rng.integers(len(resting))]
            key, price = resting.pop(oid)
            out.append((-1, oid, key, price))
        else:
            key = keys[rng.integers(len(keys))]
            price = float(rng.integers(90, 110))
            resting[next_id] = (key, price)
            out.append((1, next_id, key, price))
            next_id += 1.0
    return out


@pytest.fixture(scope="module")
def broker_engine_program():
    return compile_sql_file(SQL / "broker_best_bid.sql").program


def test_a_count_beside_a_grouped_max_is_a_hash_table(broker_engine_program) -> None:
    engine = Engine(broker_engine_program)
    tables = [f for f in engine.module.FIELDS if f.startswith("m_")
              and isinstance(getattr(engine.state, f), np.ndarray) and getattr(engine.state, f).ndim == 2]
    assert tables, "the per-broker count is not kept in a hash table"
    rng = np.random.default_rng(7)
    resting: dict[float, tuple[float, float]] = {}
    relmap = engine.relmap(("bids", "asks"))
    line = 1
    for _ in range(6):
        batch = bids_batch(random_events(rng, [float(b) for b in range(10)], 300, resting), line)
        line = batch.last_line + 1
        engine.apply(batch, relmap)
        engine._check()
        got = {k[0]: v for k, v in engine.views["BROKER_BEST_BID"].items()}
        assert got == best_per_key(resting)


def test_keyed_deferral_set_shrinks_after_a_big_batch_and_stays_exact() -> None:
    engine = Engine(compile_sql_file(SQL / "symbol_best_bid.sql").program)
    relmap = engine.relmap(("bids", "asks"))
    keys = [symbol_id(f"PM{s:03d}") for s in range(100)]
    rng = np.random.default_rng(3)
    resting: dict[float, tuple[float, float]] = {}
    # one big unwatched batch touching every symbol: the key table grows past LAZY_KEYS_SMALL rows
    first = [(1, float(i + 1), k, 100.0 + i % 7) for i, k in enumerate(keys)]
    for _, oid, k, p in first:
        resting[oid] = (k, p)
    engine.apply(bids_batch(first, 1), relmap)
    engine._check()
    assert engine.state.lazy_keys_0.shape[0] > 17
    # then watched, a line at a time: each flush scans a small table again
    seen: list[tuple] = []
    engine.on("SYMBOL_BEST_BID", lambda view, key, old, new, line: seen.append(key))
    batch = bids_batch(random_events(rng, keys[:5], 60, resting), 2)
    engine.apply(batch, relmap)
    engine._check()
    assert engine.state.lazy_keys_0.shape[0] == 9
    assert seen, "no callback fired"
    view = engine.views["SYMBOL_BEST_BID"]
    want = best_per_key(resting)
    name = {k: f"PM{s:03d}" for s, k in enumerate(keys)}
    assert len(view) == len(want)
    assert {name[k]: view[name[k]] for k in want} == {name[k]: v for k, v in want.items()}
