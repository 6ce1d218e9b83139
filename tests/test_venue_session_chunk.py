"""VenueSession.feed_many (a drained run of messages through the venue's chunk lane) against
VenueSession.feed one message at a time (the reference): the same actions, touched symbols,
engine events (VenueSession.take_events: one batch per symbol in first-touch order, rows
numbered with the last message's line), counters, summary, reports and resyncs in flight, on
hypothesis streams of several symbols with faults (gaps, duplicates, snapshots, tickers,
trades, unknown fields, malformed JSON, symbols the session does not follow); Kraken, OKX and
Coinbase on their real captures, mutated copies and generated streams with faults.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.feeds.venue_session import VenueSession
from ddms.io.venues.binance_chunk import ChunkLane
from tests.test_binance_chunk import _gen
from tests.test_io_venues import faulted_stream
from tests.test_venue_chunk import _mutated, _real

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
       sizes=st.lists(st.integers(1, 200), min_size=1, max_size=3), follow=st.integers(1, 4),
       others=st.booleans())
def test_feed_many_equals_feed(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, sizes: list[int],
                               follow: int, others: bool) -> None:
    """``others``: the kernel also takes bookTickers, trades and klines (feed_many's own lane)."""
    ops = _ops(seed, market, nsym, nmsg, p_bad)
    syms = [f"S{i}USDT" for i in range(min(follow, nsym))]     # the others are not followed
    a = VenueSession("binance", syms, _URL[market], market=market)
    b = VenueSession("binance", syms, _URL[market], market=market)
    b.core._lane = ChunkLane(b.core, adaptive=False, follow=b.stats.__contains__, others=others)
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


# -- Kraken, OKX, Coinbase: the in-stream venues' chunk lanes ----------------------------------------------

_VURL = {"kraken": "wss://ws.kraken.com", "okx": "wss://ws.okx.com:8443/ws/v5/public",
         "coinbase": "wss://ws-feed.exchange.coinbase.com"}


def _symbols(venue: str, msgs: list[bytes]) -> list[str]:
    """The symbols of a stream, in order of first appearance (as the session spells them)."""
    probe = VenueSession(venue, ["X"], _VURL[venue])
    out: dict[str, None] = {}
    for m in msgs:
        try:
            sym = probe._symbol_of(json.loads(m))
        except ValueError:
            continue
        if sym is not None:
            out.setdefault(sym)
    return list(out)


def _same_sessions(venue: str, msgs: list[bytes], follow: list[str], sizes: list[int]) -> VenueSession:
    ops = [("msg", m) for m in msgs]
    a = VenueSession(venue, follow, _VURL[venue])
    b = VenueSession(venue, follow, _VURL[venue])
    la, lb = _drive(a, ops, sizes, False), _drive(b, ops, sizes, True)
    assert la == lb
    sa, sb = a.summary(), b.summary()
    assert json.dumps(sa, default=str) == json.dumps(sb, default=str)      # key order too
    assert (a.messages, a.numbered, a.malformed_json, a._inflight) == (b.messages, b.numbered, b.malformed_json,
                                                                      b._inflight)
    assert {s: x.received for s, x in a.stats.items()} == {s: x.received for s, x in b.stats.items()}
    assert [(r.reason, r.line, r.text) for r in a.core.reports] == [(r.reason, r.line, r.text) for r in b.core.reports]
    b._check()
    return b


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
def test_in_stream_real_capture_feed_many_equals_feed(venue: str) -> None:
    msgs = _real(venue)
    syms = _symbols(venue, msgs)
    b = _same_sessions(venue, msgs, syms, [1, 7, 300, 64])
    assert b.core._lane is not None and b.core._lane.fast_messages > len(msgs) // 2
    _same_sessions(venue, msgs, syms[::2], [50, 1000])      # half the symbols not followed


@pytest.mark.parametrize("venue,seed", [(v, s) for v in ("kraken", "okx", "coinbase") for s in range(4)])
def test_in_stream_mutated_capture_feed_many_equals_feed(venue: str, seed: int) -> None:
    msgs = _mutated(seed, 800, venue)
    rng = random.Random(seed)
    syms = _symbols(venue, _real(venue))
    follow = syms if seed % 2 == 0 else rng.sample(syms, max(1, len(syms) // 2))
    _same_sessions(venue, msgs, follow, [rng.randrange(1, 400) for _ in range(3)])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(venue=st.sampled_from(["coinbase", "okx", "kraken"]), seed=st.integers(0, 2**32 - 1),
       fault=st.sampled_from([None, "drop", "duplicate", "reorder", "corrupt_price", "corrupt_checksum"]),
       sizes=st.lists(st.integers(1, 120), min_size=1, max_size=3), follow=st.integers(1, 3))
def test_in_stream_generated_feed_many_equals_feed(venue: str, seed: int, fault: str | None, sizes: list[int],
                                                   follow: int) -> None:
    """tests/venue_sim.py's streams with a protocol fault (resyncs per symbol: checksum, gaps)."""
    msgs, truth, rng = faulted_stream(venue, seed, fault, 120)
    raw = [json.dumps(m).encode() for _, m in msgs]
    syms = _symbols(venue, raw) or ["X"]
    _same_sessions(venue, raw, syms[:follow], sizes)
