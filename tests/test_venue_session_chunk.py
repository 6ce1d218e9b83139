"""VenueSession.feed_many (a drained run of messages through the Binance chunk lane) against
VenueSession.feed one message at a time (the reference): the same actions, touched symbols,
engine events (VenueSession.take_events: one batch per symbol in first-touch order, rows
numbered with the last message's line), counters, summary, reports and resyncs in flight, on
hypothesis streams of several symbols with faults (gaps, duplicates, snapshots, tickers,
trades, unknown fields, malformed JSON, symbols the session does not follow).
"""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.feeds.venue_session import VenueSession
from ddms.io.venues.binance_chunk import ChunkLane
from tests.test_binance_chunk import _gen

_URL = {"spot": "wss://stream.binance.com:9443/stream?streams=s0usdt@depth/s1usdt@depth",
        "futures": "wss://fstream.binance.com/stream?streams=s0usdt@depth/s1usdt@depth"}


def _ops(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, junk: bool = True) -> list[tuple]:
    out = []
    for n, op in enumerate(_gen(seed, market, nsym, nmsg, p_bad)):
        if op[0] == "snap":
            body = json.loads(op[2])
            if market == "futures":   # _gen's first event has U = lastUpdateId + 1: make it straddle
                body["lastUpdateId"] += 1
            out.append(("snap", op[1], json.dumps(body).encode()))
            continue
        m = op[1]
        out.append(("msg", json.dumps(m).encode() if isinstance(m, dict) else m.encode() if isinstance(m, str) else m))
        if junk and n % 17 == 5:
            out.append(("msg", b'{"stream":"s0usdt@depth","data":{'))      # malformed JSON
    return out


def _drive(sess: VenueSession, ops: list[tuple], sizes: list[int], many: bool) -> list:
    """Feed ``ops``: runs of messages (``sizes``) then a take_events; snapshots between runs."""
    log: list = []
    i, k = 0, 0
    while i < len(ops):
        if ops[i][0] == "snap":
            log.append(("snap", sess.apply_snapshot(ops[i][1], ops[i][2])))
            i += 1
            continue
        j = i
        size = sizes[k % len(sizes)]
        k += 1
        while j < len(ops) and ops[j][0] == "msg" and j - i < size:
            j += 1
        datas = [op[1] for op in ops[i:j]]
        if many:
            acts, syms = sess.feed_many(datas)
        else:
            acts, syms = [], []
            for d in datas:
                a, s = sess.feed(d)
                acts += a
                syms.append(s)
        log.append(("run", acts, syms))
        for ev in sess.take_events():
            b = ev.batch
            log.append(("ev", ev.symbol, b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), b.line.tolist(),
                        b.first_line, b.last_line, b.rel.dtype, b.cols.dtype))
        i = j
    return log


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), market=st.sampled_from(["spot", "futures"]), nsym=st.integers(1, 4),
       nmsg=st.integers(0, 150), p_bad=st.sampled_from([0.0, 0.05, 0.3]),
       sizes=st.lists(st.integers(1, 200), min_size=1, max_size=3), follow=st.integers(1, 4))
def test_feed_many_equals_feed(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, sizes: list[int],
                               follow: int) -> None:
    ops = _ops(seed, market, nsym, nmsg, p_bad)
    syms = [f"S{i}USDT" for i in range(min(follow, nsym))]     # the others are not followed
    a = VenueSession("binance", syms, _URL[market], market=market)
    b = VenueSession("binance", syms, _URL[market], market=market)
    b.core._lane = ChunkLane(b.core, adaptive=False, follow=b.stats.__contains__)
    la, lb = _drive(a, ops, sizes, False), _drive(b, ops, sizes, True)
    assert la == lb
    assert a.summary() == b.summary()
    assert (a.messages, a.malformed_json, a._inflight) == (b.messages, b.malformed_json, b._inflight)
    assert {s: x.received for s, x in a.stats.items()} == {s: x.received for s, x in b.stats.items()}
    assert [(r.reason, r.line, r.text) for r in a.core.reports] == [(r.reason, r.line, r.text) for r in b.core.reports]
    b._check()


def test_feed_many_takes_the_fast_path() -> None:
    ops = _ops(4, "spot", 2, 400, 0.0, junk=False)
    syms = ["S0USDT", "S1USDT"]
    a = VenueSession("binance", syms, _URL["spot"], market="spot")
    b = VenueSession("binance", syms, _URL["spot"], market="spot")
    assert _drive(a, ops, [64], False) == _drive(b, ops, [64], True)
    assert b.summary()["synced"] and b.core._lane.fast_messages > 300
    assert np.sum([x.received for x in b.stats.values()]) == 400
