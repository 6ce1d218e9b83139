"""Synthetic order flow: deterministic, chunking-independent, parses cleanly, holds its depth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.io.orderbook import OrderBookParser, orderbook_rows
from replay.synthetic import ACTIONS, SyntheticOrderFlow, generate_orderbook, write_orderbook


def _flow_bytes(n: int, **kw) -> bytes:
    return b"".join(generate_orderbook(n, **kw))


def test_deterministic_and_independent_of_chunking():
    a = _flow_bytes(20_000, seed=7, depth=300)
    assert a == _flow_bytes(20_000, seed=7, depth=300, chunk_lines=997)
    assert a.startswith(_flow_bytes(1000, seed=7, depth=300, chunk_lines=1))
    assert a != _flow_bytes(20_000, seed=8, depth=300)
    assert a.count(b"\n") == 20_000 and a.endswith(b"\n")
    f = SyntheticOrderFlow(seed=7, depth=300)
    assert f.lines(5000) + f.lines(15_000) == a and f.lines_emitted == 20_000
    assert f.lines(0) == b""


def test_parses_cleanly_with_every_action_and_model_matches_parser():
    flow = SyntheticOrderFlow(seed=3, depth=400)
    p = OrderBookParser(source="synthetic")
    seen: set[bytes] = set()
    for _ in range(6):
        chunk = flow.lines(10_000)
        seen |= {line.split(b",")[2] for line in chunk.splitlines()}
        b = p.feed(chunk)
        assert b.error is None
        assert (p.resting, p.resting_bids, p.resting_asks) == \
            (flow.resting, flow.resting_bids, flow.resting_asks)
    assert p.close().error is None and p.bad_lines == 0 and p.lines_consumed == 60_000
    assert seen == {a.encode() for a in ACTIONS}
    counts = flow.counts
    assert sum(counts.values()) == 60_000 and all(counts[a] > 100 for a in ACTIONS)
    rows = orderbook_rows(p)
    prices = np.concatenate([rows["bids"][:, 4], rows["asks"][:, 4]])
    assert np.all(prices > 0) and np.all(prices == np.round(prices)) and np.all(prices % 100 == 0)
    bids, asks = rows["bids"][:, 4], rows["asks"][:, 4]
    assert np.median(bids) < np.median(asks)
    assert np.all(rows["bids"][:, 3] > 0) and np.all(rows["asks"][:, 3] > 0)


@pytest.mark.parametrize("depth", [50, 1000, 5000])
def test_depth_is_held(depth):
    flow = SyntheticOrderFlow(seed=depth, depth=depth)
    flow.lines(4 * depth)  # ramp up
    samples = []
    for _ in range(20):
        flow.lines(max(depth // 2, 500))
        samples.append(flow.resting)
    assert 0.85 * depth <= np.mean(samples) <= 1.15 * depth
    assert min(samples) >= 0.6 * depth and max(samples) <= 1.4 * depth


def test_timestamps_and_prices_look_like_the_real_data(tmp_path):
    path = tmp_path / "syn.csv"
    size = write_orderbook(path, 30_000, seed=11, depth=200)
    data = path.read_bytes()
    assert size == len(data) and data == _flow_bytes(30_000, seed=11, depth=200)
    cols = np.array([[int(x) for x in (f[0], f[1], f[3], f[4])]
                     for f in (line.split(b",") for line in data.splitlines())])
    t = cols[:, 0]
    assert np.all(np.diff(t) >= 0) and t[0] >= 25_000_000
    adds = np.array([line.split(b",")[2] in (b"B", b"S") for line in data.splitlines()])
    ids = cols[adds, 1]
    assert np.all(np.diff(ids) == 1)  # fresh increasing ids, never reused
    add_px = cols[adds, 3]
    assert 900_000 < np.median(add_px) < 1_100_000


def test_bad_parameters():
    for kw in ({"depth": 0}, {"tick": 0}, {"ignored_rate": 1.5}, {"ignored_rate": 0.6, "unknown_rate": 0.5}):
        with pytest.raises(ValueError):
            SyntheticOrderFlow(**kw)
    with pytest.raises(ValueError):
        list(generate_orderbook(10, chunk_lines=0))


# ------------------------------------------------------------------------------------------
# an honest book: never crossed unless asked
# ------------------------------------------------------------------------------------------

class _Book:
    """An independent plain-Python order book with the README's semantics (B/S add, E reduces
    and removes at 0, F/D remove, unknown ids and other letters ignored): orders by id and a
    count of orders per price level and side."""

    def __init__(self) -> None:
        from sortedcontainers import SortedDict
        self.orders: dict[int, list[int]] = {}
        self.levels = [SortedDict(), SortedDict()]

    def apply(self, line: bytes) -> str | None:
        """Apply one line; returns what it did to the book ("add", "partial", "exec", "delete")."""
        _, oid_s, act, vol_s, px_s = line.split(b",")
        oid, vol, px = int(oid_s), int(vol_s), int(px_s)
        if act in (b"B", b"S"):
            s = 0 if act == b"B" else 1
            assert oid not in self.orders, line
            self.orders[oid] = [s, vol, px]
            self.levels[s][px] = self.levels[s].get(px, 0) + 1
            return "add"
        if act not in (b"E", b"F", b"D") or oid not in self.orders:
            return None
        s, left, p = self.orders[oid]
        if act == b"E" and vol < left:
            self.orders[oid][1] = left - vol
            return "partial"
        del self.orders[oid]
        self.levels[s][p] -= 1
        if not self.levels[s][p]:
            del self.levels[s][p]
        return "delete" if act == b"D" else "exec"

    def best(self, side: int, tick: int | None = None) -> int | None:
        """The best price of a side; with the generator's ``tick``, leaving out its outlier
        prices (bids at ``tick``, asks at 1999999900), which no grid price can equal."""
        lv = self.levels[side]
        outlier = 1_999_999_900 if side else tick
        prices = [p for p in lv if p != outlier] if tick is not None else list(lv)
        if not prices:
            return None
        return max(prices) if side == 0 else min(prices)


def _replay_book(data: bytes) -> dict:
    """Replay ``data`` through :class:`_Book`, counting the lines after which the book is
    crossed (best bid >= best ask, both sides non-empty) and what the stream exercised."""
    book = _Book()
    stats = {"crossed": 0, "both_sides": 0, "partial": 0, "exec": 0, "delete": 0, "add": 0, "max_levels": 0,
             "spread_min": None}
    for line in data.splitlines():
        did = book.apply(line)
        if did:
            stats[did] += 1
        bids, asks = book.levels
        stats["max_levels"] = max(stats["max_levels"], len(bids), len(asks))
        if bids and asks:
            stats["both_sides"] += 1
            spread = asks.peekitem(0)[0] - bids.peekitem(-1)[0]
            stats["crossed"] += spread <= 0
            if stats["spread_min"] is None or spread < stats["spread_min"]:
                stats["spread_min"] = spread
    return stats


@pytest.mark.parametrize("seed, n, depth", [(0, 60_000, 1000), (1, 30_000, 50), (2, 40_000, 300),
                                            (3, 20_000, 5), (4, 50_000, 2000)])
def test_book_is_never_crossed_and_the_flow_is_still_rich(seed, n, depth):
    data = _flow_bytes(n, seed=seed, depth=depth, chunk_lines=4999)
    stats = _replay_book(data)
    assert stats["both_sides"] > (0.8 if depth >= 50 else 0.5) * n     # the test is not vacuous
    assert stats["crossed"] == 0 and stats["spread_min"] > 0
    assert stats["partial"] > 0.005 * n and stats["exec"] > 0.005 * n and stats["delete"] > 0.05 * n
    assert stats["add"] > 0.3 * n
    assert stats["max_levels"] >= min(depth // 4, 40)


def test_model_invariants_and_best_prices_match_the_independent_replay():
    flow = SyntheticOrderFlow(seed=9, depth=200, levels=20, drift_rate=0.1)   # a fast mid: many marketable adds
    book = _Book()
    for _ in range(40):
        for line in flow.lines(500).splitlines():
            book.apply(line)
        flow._check()
        assert (flow.best_bid, flow.best_ask) == (book.best(0, flow.tick), book.best(1, flow.tick))
        assert flow.resting == len(book.orders)
        assert flow.resting_bids == sum(1 for s, _, _ in book.orders.values() if s == 0)
    assert flow.best_bid is not None and flow.best_ask is not None


def test_allow_crossing_keeps_the_naive_model():
    data = _flow_bytes(30_000, seed=1, allow_crossing=True)
    assert _replay_book(data)["crossed"] > 1000
    flow = SyntheticOrderFlow(seed=1, allow_crossing=True)
    flow.lines(30_000)
    flow._check()                      # the FIFOs are kept in this mode too; only the order test is off


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**63), depth=st.integers(1, 400), levels=st.integers(1, 60), tick=st.integers(1, 500),
       mid=st.integers(1, 5_000_000), drift=st.floats(0.0, 0.5), outliers=st.floats(0.0, 0.05),
       chunk=st.integers(1, 3000))
def test_never_crossed_for_any_parameters(seed, depth, levels, tick, mid, drift, outliers, chunk):
    flow = SyntheticOrderFlow(seed=seed, depth=depth, levels=levels, tick=tick, mid=mid, drift_rate=drift,
                              outlier_rate=outliers)
    data = b""
    while flow.lines_emitted < 3000:
        data += flow.lines(min(chunk, 3000 - flow.lines_emitted))
        flow._check()
    book = _Book()
    for line in data.splitlines():
        book.apply(line)
        bid, ask = book.best(0), book.best(1)             # outliers included: they never cross either
        assert bid is None or ask is None or bid < ask, line
    assert (flow.best_bid, flow.best_ask) == (book.best(0, tick), book.best(1, tick))
