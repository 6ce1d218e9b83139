"""The cryptofeed reader's chunked path (CryptofeedParser.feed_lines through the Binance chunk
lane) against feeding the same lines one at a time (CryptofeedParser.feed, the reference).

Events (symbol, rows, lines), errors (strict mode: the same error after the same events),
counters, summaries, actions and reports must be identical, on hypothesis streams of several
symbols written as cryptofeed captures (with line-level faults: malformed JSON, junk lines, blank
lines, streams the core ignores, non-UTF-8 bytes) and on the real captures of ../shared.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.errors import InputError
from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
from ddms.io.venues.binance_chunk import ChunkLane
from tests.conftest import shared_file
from tests.test_binance_chunk import _gen, same_events

_URL = {"spot": "wss://stream.binance.com:9443/stream?streams=", "futures": "wss://fstream.binance.com/stream?streams="}
_REST = {"spot": "https://api.binance.com/api/v3/depth", "futures": "https://fapi.binance.com/fapi/v1/depth"}


def _capture(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, p_line: float) -> list[bytes]:
    """A one-file cryptofeed capture (REST snapshots inline) of :func:`_gen`'s stream, with
    line-level faults at rate ``p_line``."""
    rng = random.Random(seed ^ 0x5A5A)
    streams = "/".join(f"s{i}usdt@depth" for i in range(nsym))
    lines = [f"{_URL[market]}{streams} <-> 1700000000.0\n".encode()]
    t = 1700000000.0
    for op in _gen(seed, market, nsym, nmsg, p_bad):
        t += rng.choice((0.0, 0.001, 0.25))
        ts = f"{t:.3f}".encode()
        if op[0] == "snap":
            if market == "futures":   # _gen's first event has U = lastUpdateId + 1: make it straddle
                body = json.loads(op[2])
                body["lastUpdateId"] += 1
                op = ("snap", op[1], json.dumps(body).encode())
            lines.append(f"{_REST[market]}?symbol={op[1]}&limit=1000 -> ".encode() + ts + b": " + op[2] + b"\n")
        else:
            m = op[1]
            raw = json.dumps(m).encode() if isinstance(m, dict) else m.encode() if isinstance(m, str) else m
            lines.append(ts + b": " + raw + b"\n")
        if rng.random() < p_line:
            kind = rng.randrange(7)
            lines.append([ts + b': {"stream":"s0usdt@depth","data":{"e":',                 # malformed JSON
                          b"not a capture line\n"[:-1],
                          b"",                                                             # blank
                          ts + b': {"stream":"s0usdt@kline_1m","data":{"e":"kline","k":{"t":1}}}',
                          ts + b': {"stream":"s0usdt@aggTrade","data":{"e":"aggTrade","s":"S0USDT"}}',
                          ts + b': {"stream":"s0usdt@depth","data":{"e":"depthUpdate","s":"S0\xffT"}}',
                          ts + b': {"result":null,"id":1}'][kind] + b"\n")
    return lines


def _items(lines: list[bytes]) -> list[tuple[bytes, int, None]]:
    return [(raw, n, None) for n, raw in enumerate(lines, 1)]


def _per_line(lines: list[bytes], skip_bad: bool) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser("<t>", skip_bad=skip_bad)
    events: list = []
    try:
        for raw, n, src in _items(lines):
            events += p.feed(raw, n, src)
    except InputError as e:
        return p, events, str(e)
    return p, events, None


def _chunked(lines: list[bytes], skip_bad: bool, sizes: list[int], adaptive: bool
             ) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser("<t>", skip_bad=skip_bad)
    items = _items(lines)
    events: list = []
    try:
        events += p.feed_lines(items[:1])            # the connection line: the venue core exists
        p.core._lane = ChunkLane(p.core, adaptive=adaptive)
        i, k = 1, 0
        while i < len(items):
            size = sizes[k % len(sizes)]
            k += 1
            events += p.feed_lines(items[i:i + size])
            i += size
    except InputError as e:
        return p, events, str(e)
    return p, events, None


def _same(a: tuple[CryptofeedParser, list, str | None], b: tuple[CryptofeedParser, list, str | None]) -> None:
    (pa, ea, xa), (pb, eb, xb) = a, b
    assert xa == xb
    same_events(ea, eb)
    assert pa.summary() == pb.summary()
    assert pa.actions == pb.actions
    assert (pa.messages, pa.bad_lines) == (pb.messages, pb.bad_lines)
    assert [str(e) for e in pa.bad_samples] == [str(e) for e in pb.bad_samples]
    reports = [[(r.reason, r.line, r.text) for r in p.core.reports] for p in (pa, pb)]
    assert reports[0] == reports[1]
    pb._check()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), market=st.sampled_from(["spot", "futures"]), nsym=st.integers(1, 5),
       nmsg=st.integers(0, 120), p_bad=st.sampled_from([0.0, 0.05, 0.3]), p_line=st.sampled_from([0.0, 0.02, 0.1]),
       skip_bad=st.booleans(), sizes=st.lists(st.integers(1, 300), min_size=1, max_size=3))
def test_feed_lines_equals_feed(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, p_line: float,
                                skip_bad: bool, sizes: list[int]) -> None:
    lines = _capture(seed, market, nsym, nmsg, p_bad, p_line)
    _same(_per_line(lines, skip_bad), _chunked(lines, skip_bad, sizes, adaptive=False))


def test_feed_lines_takes_the_fast_path_and_stops_at_the_bad_line() -> None:
    lines = _capture(7, "futures", 4, 400, 0.0, 0.0)
    ref, got = _per_line(lines, False), _chunked(lines, False, [4096], adaptive=False)
    _same(ref, got)
    assert ref[0].summary()["synced"]
    assert got[0].core._lane.fast_messages > 300        # else only the Python path was compared with itself
    bad = lines[:300] + [b'1700000999.0: {"stream":"s0usdt@depth","data":{"e":\n'] + lines[300:]
    ref, got = _per_line(bad, False), _chunked(bad, False, [4096], adaptive=False)
    _same(ref, got)
    assert got[2] is not None and "malformed JSON" in got[2] and len(got[1]) > 200


def test_read_cryptofeed_chunk_sizes_agree(tmp_path: Path) -> None:
    """The file reader: chunk=1 (line by line) and the default give the same output."""
    path = tmp_path / "BINANCE.ws.1.0"
    path.write_bytes(b"".join(_capture(3, "spot", 3, 300, 0.05, 0.05)))
    for skip_bad in (True, False):
        out = []
        for chunk in (1, 4096):
            p = CryptofeedParser(str(path), skip_bad=skip_bad)
            evs: list = []
            err = None
            try:
                evs += read_cryptofeed(path, parser=p, chunk=chunk)
            except InputError as e:
                err = str(e)
            out.append((p, evs, err))
        _same(*out)


@pytest.mark.parametrize("venue", ["BINANCE", "BINANCE_FUTURES"])
def test_read_cryptofeed_real_captures_chunked(venue: str) -> None:
    ws = shared_file("data", "venues", f"{venue}.ws.1.0")
    out = []
    for chunk in (1, 4096):
        p = CryptofeedParser(str(ws))
        out.append((p, list(read_cryptofeed(ws, parser=p, chunk=chunk)), None))
    _same(*out)
    assert out[1][0].summary()["gaps"] == 0 and out[1][0].core._lane.fast_messages > 0


@pytest.mark.parametrize("body", [
    b'{"lastUpdateId": 10, "bids": [["99.5", "1.00"], ["99.0", "2"]], "asks": [["100.5", "1.5"]]}',
    b'{"lastUpdateId":10,"E":5,"T":4,"bids":[],"asks":[["100.50","1.500"]]}',
    b'{"lastUpdateId": 10, "bids": [["99.5", "1.00"]], "asks": [], "extra": 1}',          # unknown field
    b'{"lastUpdateId": 10, "bids": [["99.5", "1.00"], ["99.5", "2"]], "asks": []}',      # repeated level
    b'{"lastUpdateId": 10, "bids": [["99.5", "x"]], "asks": []}',                         # bad decimal
    b'{"lastUpdateId": 10, "bids": [["9\\u0039.5", "1"]], "asks": []}',                   # escape: slow path
    b'{"lastUpdateId": 10, "lastUpdateId": 11, "bids": [], "asks": []}',                  # repeated key
    b'{"lastUpdateId": -1, "bids": [], "asks": []}',
    b'[1, 2]',
])
def test_snapshot_from_bytes_equals_snapshot_from_dict(body: bytes) -> None:
    """The reader hands a REST snapshot to the core as the record decoded from its bytes when
    the scan reads it cleanly: the same outcome as the parsed dict it used to hand over."""
    from ddms.io.venues.binance import BinanceBooks
    p = CryptofeedParser("<t>", venue="binance")
    out = []
    for arg in (json.loads(body), p._snapshot_record(body, json.loads(body))):
        core = BinanceBooks("spot", "<t>")
        core.feed(b'{"stream":"abcusdt@depth","data":{"e":"depthUpdate","E":1,"s":"ABCUSDT","U":11,"u":11,'
                  b'"b":[],"a":[]}}', 1)
        acts = core.apply_snapshot("ABCUSDT", arg, 2, 5_000_000)
        ev = core.take_events()
        out.append((acts, core.summary(), [(r.reason, r.line, r.text) for r in core.reports],
                    [(e.symbol, e.batch.cols.tolist(), e.batch.line.tolist()) for e in ev]))
    assert out[0] == out[1]


@settings(max_examples=200, deadline=None)
@given(src=st.lists(st.integers(0, 6), max_size=12).map(sorted), line=st.integers(0, 5),
       last=st.one_of(st.none(), st.integers(0, 6)))
def test_renumber_equals_the_loop(src: list[int], line: int, last: int | None) -> None:
    """formats._renumber (numpy) against the per-row loop it replaced."""
    from ddms.io.formats import _renumber
    want, ln, ls = [], line, last
    for x in src:
        if x != ls:
            ln += 1
            ls = x
        want.append(ln)
    new, got_line, got_last = _renumber(np.array(src, np.int64), line, last)
    assert new.tolist() == want and new.dtype == np.int64 and (got_line, got_last) == (ln, ls)
