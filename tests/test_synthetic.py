"""Synthetic order flow: deterministic, chunking-independent, parses cleanly, holds its depth."""

from __future__ import annotations

import numpy as np
import pytest

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.streams.orderbook import OrderBookParser, orderbook_rows
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
