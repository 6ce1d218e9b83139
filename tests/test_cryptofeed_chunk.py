"""The cryptofeed reader's chunked path (CryptofeedParser.feed_lines through the Binance chunk
lane) against feeding the same lines one at a time (CryptofeedParser.feed, the reference).

Events (symbol, rows, lines), errors (strict mode: the same error after the same events),
counters, summaries, actions and reports must be identical, on hypothesis streams of several
symbols written as cryptofeed captures (with line-level faults: malformed JSON, junk lines, blank
lines, streams the core ignores, non-UTF-8 bytes) and on the real captures of ../shared.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ddms.errors import InputError
from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
from ddms.io.levels import per_symbol
from ddms.io.venues.binance_chunk import ChunkLane
from tests.conftest import shared_file
from tests.test_binance_chunk import _gen, same_events
from tests.test_io_venues import faulted_stream

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


def _feed_in_sizes(p: CryptofeedParser, items: list, sizes: list[int], events: list) -> None:
    """``p.feed_lines`` over ``items`` in runs of ``sizes`` (cycled), appending to ``events`` as it
    goes (so the events before a bad line stay when it raises)."""
    i, k = 0, 0
    while i < len(items):
        size = sizes[k % len(sizes)]
        k += 1
        events += p.feed_lines(items[i:i + size])
        i += size


def _chunked(lines: list[bytes], skip_bad: bool, sizes: list[int], adaptive: bool
             ) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser("<t>", skip_bad=skip_bad)
    items = _items(lines)
    events: list = []
    try:
        events += p.feed_lines(items[:1])            # the connection line: the venue core exists
        p.core._lane = ChunkLane(p.core, adaptive=adaptive)
        _feed_in_sizes(p, items[1:], sizes, events)
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
    """formats.renumber (numpy) against the per-row loop it replaced."""
    from ddms.io.formats import renumber as _renumber
    want, ln, ls = [], line, last
    for x in src:
        if x != ls:
            ln += 1
            ls = x
        want.append(ln)
    new, got_line, got_last = _renumber(np.array(src, np.int64), line, last)
    assert new.tolist() == want and new.dtype == np.int64 and (got_line, got_last) == (ln, ls)


# ------------------------------------------------------------------------------------------
# Kraken, OKX, Coinbase: feed_lines takes runs of messages through CryptofeedParser._flush_levels
# ------------------------------------------------------------------------------------------

_VURL = {"kraken": "wss://ws.kraken.com", "okx": "wss://ws.okx.com:8443/ws/v5/public",
         "coinbase": "wss://ws-feed.pro.coinbase.com"}


def _venue_capture(venue: str, seed: int, fault: str | None, p_line: float) -> list[bytes]:
    """A synthetic capture of tests/venue_sim.py's stream with one protocol fault in one symbol
    (tests/test_io_venues.py's inject) and line-level faults at rate ``p_line``."""
    msgs, truth, rng = faulted_stream(venue, seed, fault, 80)
    lines = [f"{_VURL[venue]} <-> 1600000000.0\n".encode(), f'{_VURL[venue]} <- 1600000000.1: {{"op":1}}\n'.encode()]
    for i, (_, m) in enumerate(msgs):
        ts = f"{1600000001 + i / 10:.1f}".encode()
        lines.append(ts + b": " + json.dumps(m, separators=(",", ":")).encode() + b"\n")
        if rng.random() < p_line:
            lines.append(rng.choice([ts + b': {"type":"l2update","product_id":', b"junk line", b"",
                                     ts + b': {"event":"heartbeat"}', ts + b": NaN", ts + b": [1e999]",
                                     ts + b': {"a":18446744073709551616}', ts + b': "\\ud800"',
                                     ts + b": \xff\xfe"]) + b"\n")
    return lines


def _per_line_venue(lines: list[bytes], skip_bad: bool, name: str) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser(name, skip_bad=skip_bad)
    events: list = []
    try:
        for raw, n, src in _items(lines):
            events += p.feed(raw, n, src)
    except InputError as e:
        return p, events, str(e)
    return p, events, None


def _lines_venue(lines: list[bytes], skip_bad: bool, name: str, sizes: list[int]
                 ) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser(name, skip_bad=skip_bad)
    items = _items(lines)
    events: list = []
    try:
        _feed_in_sizes(p, items, sizes, events)
    except InputError as e:
        return p, events, str(e)
    return p, events, None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(venue=st.sampled_from(["kraken", "okx", "coinbase"]), seed=st.integers(0, 2**32 - 1),
       fault=st.sampled_from([None, "drop", "duplicate", "reorder", "corrupt_price", "corrupt_checksum"]),
       p_line=st.sampled_from([0.0, 0.03, 0.15]), skip_bad=st.booleans(),
       sizes=st.lists(st.integers(1, 200), min_size=1, max_size=3))
def test_venue_feed_lines_equals_feed(venue: str, seed: int, fault: str | None, p_line: float, skip_bad: bool,
                                      sizes: list[int]) -> None:
    if venue == "coinbase" and fault == "corrupt_checksum":
        fault = "corrupt_price"
    lines = _venue_capture(venue, seed, fault, p_line)
    name = f"{venue.upper()}.ws.1.0"
    _same(_per_line_venue(lines, skip_bad, name), _lines_venue(lines, skip_bad, name, sizes))


@pytest.mark.parametrize("name", ["KRAKEN.ws.50.0", "OKX.ws.1.0", "COINBASE.ws.28.0"])
def test_venue_real_captures_chunked(name: str) -> None:
    """chunk=1 (line by line: CryptofeedParser.feed) and the default (feed_lines) agree on the
    real captures, receive times included; every checksum the capture carries verifies."""
    ws = shared_file("data", "venues", name)
    out = []
    for chunk in (1, 4096):
        p = CryptofeedParser(str(ws))
        out.append((p, list(read_cryptofeed(ws, parser=p, chunk=chunk)), None))
    _same(*out)
    for x, y in zip(per_symbol(out[0][1]), per_symbol(out[1][1]), strict=True):
        assert x.batch.recv is not None and np.array_equal(x.batch.recv, y.batch.recv)
    s = out[1][0].summary()
    assert s["synced"] and s["gaps"] == 0 and s["checksum_mismatch"] == 0
    assert s["checksum_checked"] == {"KRAKEN.ws.50.0": 4269, "OKX.ws.1.0": 290, "COINBASE.ws.28.0": 0}[name]


_JSONISH = st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                 lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=40),
    st.sampled_from([b"NaN", b"[Infinity]", b'{"a":1,"a":2}', b"18446744073709551616", b'"\\ud800"',
                     b"\xef\xbb\xbf[1]", '[1]'.encode("utf-16"), b"[1.5e999]", b"[" * 2000 + b"]" * 2000, b"-0",
                     b"1E400", b'{"x": 1}  ', b"\x00", b"[1,]"]))


@settings(max_examples=400, deadline=None)
@given(payload=_JSONISH)
def test_loads_json_is_json_loads(payload: bytes) -> None:
    """orjson with the standard library behind it: the same value, or the same exception."""
    from ddms.io.venues.base import loads_json

    def outcome(f):
        try:
            v = f(payload)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            return type(e).__name__, str(e)
        try:
            return "ok", repr(type(v)), json.dumps(v, allow_nan=True)
        except RecursionError:          # too deep to show: compared by depth of the first items
            return "ok", "deep"
    assert outcome(loads_json) == outcome(json.loads)


# ------------------------------------------------------------------------------------------
# the plain one-file reader: received messages found by the numba scan, handed to the lane as
# spans of the step's buffer (CryptofeedReader._events_plain, CryptofeedParser.feed_block)
# ------------------------------------------------------------------------------------------

_KLINE = b'{"stream":"s0usdt@kline_1m","data":{"e":"kline","k":{"t":1}}}'
_ODD_LINES = [
    b"1700000000.1234567890123456789: " + _KLINE,        # a time the kernel leaves to Python's float
    b"00001700000000.5: " + _KLINE,                       # leading zeros
    b"1700000000.: " + _KLINE,                            # no decimals after the dot
    b"1700000000.25: \t \r",                              # blank payload (strict: malformed JSON)
    b"1" * 31 + b": " + _KLINE,                           # a 31-byte head (not a timestamp)
    b"1700000000.5:" + _KLINE,                            # no space after the colon
    b"9" * 400 + b": " + _KLINE,                          # an infinite time (receive times clamp)
    b"wss://example.com/x <- 1700000000.7: {}",           # a sent line
]


def _odd_capture(seed: int, nsym: int, nmsg: int, p_odd: float, crlf: bool) -> bytes:
    rng = random.Random(seed)
    out = []
    for raw in _capture(seed, "spot", nsym, nmsg, 0.05, 0.05):
        out.append(raw[:-1] + b"\r\n" if crlf and raw.endswith(b"\n") and rng.random() < 0.5 else raw)
        if rng.random() < p_odd:
            out.append(rng.choice(_ODD_LINES) + b"\n")
    return b"".join(out)


def _read_all(path: Path, skip_bad: bool, chunk: int) -> tuple[CryptofeedParser, list, str | None]:
    p = CryptofeedParser(str(path), skip_bad=skip_bad)
    evs: list = []
    err = None
    try:
        evs += read_cryptofeed(path, parser=p, chunk=chunk)
    except InputError as e:
        err = str(e)
    return p, evs, err


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), nsym=st.integers(1, 4), nmsg=st.integers(0, 150),
       p_odd=st.sampled_from([0.0, 0.05, 0.2]), crlf=st.booleans(), skip_bad=st.booleans(),
       chunk=st.sampled_from([2, 7, 64, 4096]))
def test_plain_reader_equals_the_line_merge(tmp_path: Path, seed: int, nsym: int, nmsg: int, p_odd: float,
                                            crlf: bool, skip_bad: bool, chunk: int) -> None:
    """A plain one-file capture (the scan and span path) reads exactly as its gzip copy (the
    per-line merge path of before) and as line by line (chunk=1): events, receive times,
    errors, counters, summaries, actions, reports."""
    import gzip
    data = _odd_capture(seed, nsym, nmsg, p_odd, crlf)
    path = tmp_path / "BINANCE.ws.1.0"       # one path: errors name it
    path.write_bytes(gzip.compress(data))
    ref = _read_all(path, skip_bad, chunk)
    path.write_bytes(data)
    a = _read_all(path, skip_bad, chunk)
    for b in (ref, _read_all(path, skip_bad, 1)):
        _same(a, b)
        for x, y in zip(per_symbol(a[1]), per_symbol(b[1]), strict=True):     # Binance's lane: ChunkEvents
            assert x.batch.recv is not None and np.array_equal(x.batch.recv, y.batch.recv)


def test_plain_reader_takes_the_span_path_and_survives_an_infinite_time(tmp_path: Path) -> None:
    """The bench's layout goes through the kernel (else the test above compares the Python path
    with itself); a 400-digit time, which overflowed the receive-time conversion before (an
    OverflowError traceback), clamps every later receive time to the int64 maximum."""
    from bench.ingest import binance_feed, write_capture
    path = tmp_path / "BINANCE.ws.1.0"
    write_capture(path, *binance_feed(3, 400, 5))
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:200]) + b"9" * 400 + b": " + _KLINE + b"\n" + b"".join(lines[200:]))
    p, evs, err = _read_all(path, True, 4096)
    assert err is None and p.bad_lines == 1 and p.core._lane.fast_messages > 300
    recv = np.concatenate([ev.batch.recv for ev in evs])
    assert recv[0] < 2**62 and recv[-1] == 2**63 - 1
    assert (np.diff(recv) >= 0).all()


def _py_received(raw: bytes) -> tuple[float, bytes] | None:
    """CryptofeedParser.feed_into's fast test, the reference of scan_received."""
    from ddms.io.cryptofeed import _TS
    head, sep, payload = raw.rstrip(b"\r\n").partition(b": ")
    if sep and b" " not in head and len(head) <= 30 and _TS.match(head) and payload.strip():
        return float(head), payload
    return None


_LINE_BYTES = st.lists(st.sampled_from(list(b"0123456789.: \r\n\t\x0bx{\xff")), max_size=14).map(bytes)
_TIME_LINES = st.builds(lambda d, i, f, p: (f"{i}" + (f".{f}" if d else "")).encode() + b": " + p,
                        st.booleans(), st.integers(0, 10**12), st.integers(0, 10**25).map(str),
                        st.sampled_from([b"x", b" ", b"", b"{}\r\n", b"a: b\n"]))


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(st.one_of(_LINE_BYTES, _TIME_LINES), max_size=30))
def test_scan_received_is_the_python_test(lines: list[bytes]) -> None:
    """The numba scan marks exactly the lines the Python test takes as received messages, with
    the same payload, and their time as Python's float reads it (or leaves it to Python)."""
    from ddms.io.kernels.recvlines import RECV, RECV_PY, scan_received
    n = len(lines)
    buf = np.frombuffer(b"".join(lines), np.uint8)
    offs = np.zeros(n + 1, np.int64)
    np.cumsum([len(x) for x in lines], out=offs[1:])
    kind, ps, pe, ts = np.empty(n, np.int8), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n)
    other = scan_received(buf, offs, kind, ps, pe, ts)
    assert other == int((kind != RECV).sum())
    for i, raw in enumerate(lines):
        ref = _py_received(raw)
        assert (kind[i] != 0) == (ref is not None), raw
        if ref is not None:
            assert buf[ps[i]:pe[i]].tobytes() == ref[1]
            head = buf[offs[i]:ps[i] - 2].tobytes()
            assert float(head) == ref[0]
            if kind[i] == RECV:
                assert ts[i] == ref[0]
            else:
                assert kind[i] == RECV_PY


def _halfway(a: float, shift: int) -> str:
    """The decimal halfway between the double ``a`` and the next one up, moved ``shift`` units of
    its last digit: the ties and near-ties of rounding."""
    from decimal import Decimal
    mid = (Decimal(a) + Decimal(float(np.nextafter(a, np.inf)))) / 2
    return format(mid + shift * Decimal(10) ** mid.as_tuple().exponent, "f")


@settings(max_examples=300, deadline=None)
@given(heads=st.lists(st.one_of(
    st.builds(lambda i, f, z: f"{'0' * z}{i}.{f}", st.integers(1, 2**53 - 1), st.integers(0, 10**18).map(str),
              st.integers(0, 2)),
    st.builds(lambda e, x, d: _halfway(x * 2.0 ** (e - 1), d), st.integers(35, 53), st.floats(1, 2, exclude_max=True),
              st.integers(-1, 1)),
    st.integers(1, 2**53 + 5).map(str)), min_size=1, max_size=20))
@example(heads=["1618678132.8258188", "1652459225.50374915", "9007199254740993", "4503599627370495.5",
                "4503599627370496.5", "1.000000000000000000", "0001618678132.38581510"])
def test_exact_seconds_is_pythons_float(heads: list[str]) -> None:
    """recvlines._exact_seconds (the times parse_number_general cannot round: 17-18 digits) is
    float() exactly where it answers -- ties to even included -- and answers for every capture-like
    time (an integer part from 1 to 2**53 - 1, at most 18 digits each side)."""
    from ddms.io.kernels.recvlines import _exact_seconds
    for h in heads:
        buf = np.frombuffer(h.encode(), np.uint8)
        ok, v = _exact_seconds(buf, 0, len(buf))
        ip, _, frac = h.partition(".")
        if 0 < int(ip) < 2**53 and len(ip.lstrip("0")) <= 18 and len(frac.rstrip("0")) <= 18:
            assert ok, h
        if ok:
            assert v == float(h), h


@settings(max_examples=200, deadline=None)
@given(heads=st.lists(st.builds(lambda i, f, d: (f"{i}" + (f".{f}" if d else "")).encode()[:30],
                                st.integers(0, 10**12), st.integers(0, 10**19).map(str), st.booleans()),
                      min_size=1, max_size=20))
@example(heads=[b"1618678132.8258188", b"0", b"9007199254740993", b"1652459225.50374915",
                b"123456789012345678901234567890"])
def test_reader_floats_are_pythons(heads: list[bytes]) -> None:
    """cryptofeed._floats (the times scan_received leaves to Python, read all at once through
    a NumPy bytes array) is float() of each span exactly: halfway cases, 17-30 digits."""
    from ddms.io.cryptofeed import _floats
    junk = [b"xx: ", b"{", b""]
    buf = b""
    starts, ends = [], []
    for k, h in enumerate(heads):
        buf += junk[k % 3]
        starts.append(len(buf))
        buf += h
        ends.append(len(buf))
        buf += b": {}"
    got = _floats(np.frombuffer(buf, np.uint8), np.array(starts, np.int64), np.array(ends, np.int64))
    assert got.tolist() == [float(h) for h in heads]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=40),
       tail=st.sampled_from([b"", b"end", b"\r"]), read=st.sampled_from([1, 2, 3, 7, 64, 1 << 22]),
       sizes=st.lists(st.integers(1, 9), min_size=1, max_size=5), skip=st.integers(0, 45))
def test_line_cursor_spans_are_the_lines(tmp_path: Path, lines: list[bytes], tail: bytes, read: int,
                                         sizes: list[int], skip: int) -> None:
    """LineCursor.spans: the lines of iteration (any read size, a line split across reads, a
    last line without a newline, from a saved position), as buffer spans and as ``Lines``; the
    same position after each block as after its last line."""
    import ddms.io.cursor as cursor
    from ddms.io.cursor import LineCursor
    path = tmp_path / "f"
    data = b"".join(lines) + tail
    assume(not data.startswith(b"\x1f\x8b"))   # gzip's magic: the cursor reads such a file as gzip
    path.write_bytes(data)
    ref = LineCursor(path)
    want = [(raw, ref.mark()) for raw in ref]
    skip = min(skip, len(want))
    cur = LineCursor(path)
    if skip:
        cur.seek(ref.position(want[skip - 1][1]))
    got: list[bytes] = []
    size = itertools.cycle(sizes)
    old, cursor._READ = cursor._READ, read
    try:
        for buf, offs, block in cur.spans(lambda: next(size)):
            cut = [buf[offs[i]:offs[i + 1]].tobytes() for i in range(len(offs) - 1)]
            assert cut == list(block) == block[:] == [block[i] for i in range(len(block))]
            assert block[-1] == cut[-1] and block[1:3] == cut[1:3]
            got += cut
            assert cur.mark() == want[skip + len(got) - 1][1]
    finally:
        cursor._READ = old
    assert got == [w[0] for w in want[skip:]]


def test_line_cursor_blocks_are_the_lines(tmp_path: Path) -> None:
    """LineCursor.blocks: the lines of iteration, the same position after each block as after
    its last line; a gzip file is refused (its damage is met line by line)."""
    import gzip

    from ddms.io.cursor import LineCursor
    data = b"".join(b"%d: x%s\n" % (i, b"y" * (i % 7)) for i in range(1000)) + b"last without newline"
    path = tmp_path / "f"
    path.write_bytes(data)
    ref = LineCursor(path)
    want = []
    for raw in ref:
        want.append((raw, ref.mark()))
    sizes = itertools.cycle([1, 3, 500, 2, 10_000])
    cur = LineCursor(path)
    got = []
    for block in cur.blocks(lambda: next(sizes)):
        assert cur.mark() == want[len(got) + len(block) - 1][1]
        got += block
    assert got == [w[0] for w in want]
    half = LineCursor(path)
    half.seek(ref.position(want[499][1]))
    assert [x for b in half.blocks(lambda: 64) for x in b] == got[500:]
    gz = tmp_path / "g"
    gz.write_bytes(gzip.compress(data))
    with pytest.raises(ValueError, match="gzip"):
        next(LineCursor(gz).blocks(lambda: 8))
