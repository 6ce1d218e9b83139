"""BinanceBooks.feed_chunk (the numba chunk lane) against feeding the same messages one by one.

The oracle is the per-message path (:meth:`BinanceBooks.feed` + :meth:`take_events`): events
(symbol, rows, lines), actions, reports, counters, bookTicker checks and the books themselves
must be identical, on hypothesis streams of several symbols (gaps, duplicates, stale events,
snapshots mid-stream, scale changes, crossed books, bookTickers, trades, unknown fields,
malformed messages, unknown symbols) and on the real captures of ../shared (skipped where
absent).  The lane must also have taken the fast path for most plain messages (else the test
would only compare the Python path with itself).
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.io.venues.binance import BinanceBooks
from ddms.io.venues.binance_book import format_units
from ddms.io.venues.binance_chunk import ChunkLane
from tests.conftest import SHARED, shared_file

Op = tuple  # ("msg", bytes) | ("snap", symbol, bytes)


def _run_single(market: str, ops: list[Op], history: int | None = None) -> tuple[list, list, BinanceBooks]:
    """``history``: each book's (set when its snapshot comes)."""
    core = BinanceBooks(market, "<t>")
    actions: list = []
    events: list = []
    for n, op in enumerate(ops, 1):
        if op[0] == "msg":
            actions += core.feed(op[1], n)
        else:
            actions += core.apply_snapshot(op[1], op[2], n)
            if history is not None:
                core.books[op[1]].history = history
        events += core.take_events()
    return actions, events, core


def _run_chunked(market: str, ops: list[Op], sizes: list[int], rows: int = 1 << 14, adaptive: bool = False,
                 others: bool = True, history: int | None = None) -> tuple[list, list, BinanceBooks]:
    """``adaptive`` False: every message is offered to the kernel first (the lane never rests).
    ``others``: the kernel also takes bookTickers, ignored streams and known unknown fields (the
    lane of ``BinanceBooks.feed_chunk``; a monitor session's lane has it off)."""
    core = BinanceBooks(market, "<t>")
    core._lane = ChunkLane(core, rows=rows, adaptive=adaptive, others=others)
    actions: list = []
    events: list = []
    i, k = 0, 0
    while i < len(ops):
        if ops[i][0] == "snap":
            actions += core.apply_snapshot(ops[i][1], ops[i][2], i + 1)
            if history is not None:
                core.books[ops[i][1]].history = history
            events += core.take_events()
            i += 1
            continue
        j = i
        size = sizes[k % len(sizes)] if sizes else 1 << 30
        k += 1
        while j < len(ops) and ops[j][0] == "msg" and j - i < size:
            j += 1
        a, e = core.feed_chunk([op[1] for op in ops[i:j]], range(i + 1, j + 1))
        actions += a
        events += e
        i = j
    a, e = core.feed_chunk([], [])
    return actions + a, events + e, core


def same_events(ev_a: list, ev_b: list) -> None:
    """Two lists of venue events equal: venue, symbol, lines, and every array of each batch,
    dtypes included (the check of every chunk-versus-one-by-one test, here and in
    test_cryptofeed_chunk).  A chunk lane's ChunkEvents count as the per-message events they
    hold (ddms.io.levels.per_symbol), with their receive times."""
    from ddms.io.levels import per_symbol
    ev_a, ev_b = per_symbol(ev_a), per_symbol(ev_b)
    assert len(ev_a) == len(ev_b)
    for x, y in zip(ev_a, ev_b, strict=True):
        assert (x.venue, x.symbol, x.batch.first_line, x.batch.last_line) == (
            y.venue, y.symbol, y.batch.first_line, y.batch.last_line)
        for f in ("rel", "sign", "cols", "line"):
            u, v = getattr(x.batch, f), getattr(y.batch, f)
            assert u.dtype == v.dtype and np.array_equal(u, v), f


def _same(a: tuple[list, list, BinanceBooks], b: tuple[list, list, BinanceBooks]) -> None:
    (act_a, ev_a, ca), (act_b, ev_b, cb) = a, b
    assert act_a == act_b
    same_events(ev_a, ev_b)
    assert ca.summary() == cb.summary()
    assert list(ca.ignored.items()) == list(cb.ignored.items())                  # key order too
    assert list(ca.unknown_fields.items()) == list(cb.unknown_fields.items())
    cb._check()
    assert [(r.reason, r.line, r.text) for r in ca.reports] == [(r.reason, r.line, r.text) for r in cb.reports]
    assert ca.books.keys() == cb.books.keys()
    for sym, bk in ca.books.items():
        bb = cb.books[sym]
        bb._check()
        assert bk.counters() == bb.counters()
        assert (bk.last_u, bk.synced, bk.top_units(), bk.updates) == (bb.last_u, bb.synced, bb.top_units(), bb.updates)
        assert bk._hist == bb._hist and list(bk._pending) == list(bb._pending)
        assert list(bk._hist_order) == list(bb._hist_order)      # the eviction order (the lane's bulk history)
        assert (bk._crossed_now, bk._taken, bk._state) == (bb._crossed_now, bb._taken, bb._state)
        for side in (0, 1):
            assert bk.levels(side) == bb.levels(side)
        assert [(r.reason, r.line) for r in bk.reports] == [(r.reason, r.line) for r in bb.reports]


# ------------------------------------------------------------------------------------------
# generated streams
# ------------------------------------------------------------------------------------------

def _gen(seed: int, market: str, nsym: int, nmsg: int, p_bad: float, p_snap: float = 0.8) -> list[Op]:
    """A stream of ``nmsg`` operations over ``nsym`` symbols: mostly in-sequence depth updates;
    with probability ``p_bad`` each a fault (gap, duplicate, snapshot, ticker, ...); each symbol
    has a snapshot at the start with probability ``p_snap`` (else its events stay buffered)."""
    rng = random.Random(seed)
    names = [f"S{i}USDT" for i in range(nsym)]
    last = dict.fromkeys(names, 100)
    recent: dict[str, list[int]] = {s: [] for s in names}
    fut = market == "futures"
    ops: list[Op] = []

    def snap(s: str, lid: int) -> Op:
        bids = [[f"{100 - i * 0.5:.2f}", f"{rng.randint(1, 9)}.{rng.randint(0, 99):02d}"] for i in range(1, 6)]
        asks = [[f"{100 + i * 0.5:.2f}", f"{rng.randint(1, 9)}.{rng.randint(0, 99):02d}"] for i in range(1, 6)]
        return ("snap", s, json.dumps({"lastUpdateId": lid, "bids": bids, "asks": asks}).encode())

    def levels(n: int, cross: bool = False) -> tuple[list, list]:
        b, a = [], []
        for _ in range(n):
            i = rng.randint(1, 12)
            q = "0.00" if rng.random() < 0.25 else f"{rng.randint(0, 9)}.{rng.randint(1, 99):02d}"
            if rng.random() < 0.5:
                b.append([f"{100 - i * 0.5 + (2 if cross else 0):.2f}", q])
            else:
                a.append([f"{100 + i * 0.5:.2f}", q])
        return b, a

    def depth(s: str, u0: int, u1: int, pu: int, b: list, a: list, extra: dict | None = None,
              env: bool = True, sym: str | None = None) -> bytes:
        d = {"e": "depthUpdate", "E": 1_700_000_000_000 + len(ops), "s": sym or s, "U": u0, "u": u1}
        if fut:
            d.update(T=1_700_000_000_000 + len(ops), pu=pu)
        d["b"], d["a"] = b, a
        if extra:
            d.update(extra)
        if not env:
            return json.dumps(d, separators=(",", ":")).encode()
        return json.dumps({"stream": f"{s.lower()}@depth", "data": d}, separators=(",", ":")).encode()

    for s in names:
        if rng.random() < p_snap:
            ops.append(snap(s, last[s]))
    for _ in range(nmsg):
        s = rng.choice(names)
        u0 = last[s] + 1
        u1 = u0 + rng.randrange(3)
        b, a = levels(rng.randint(0, 6))
        r = rng.random()
        if r >= p_bad:
            raw = depth(s, u0, u1, last[s], b, a, env=rng.random() < 0.9)
            if p_bad and rng.random() < 0.05:   # parsed or str messages take the Python path
                ops.append(("msg", json.loads(raw) if rng.random() < 0.5 else raw.decode()))
            else:
                ops.append(("msg", raw))
            recent[s].append(u1)
            last[s] = u1
            continue
        kind = rng.randrange(16)
        if kind == 0:     # gap
            ops.append(("msg", depth(s, u0 + 5, u1 + 5, last[s] + 3, b, a)))
            last[s] = u1 + 5
        elif kind == 1 and recent[s]:   # duplicate / stale
            u = rng.choice(recent[s][-5:])
            ops.append(("msg", depth(s, u - 1, u, u - 2, b, a)))
        elif kind == 2:   # a fresh snapshot (after a gap: resync; otherwise unsolicited)
            ops.append(snap(s, last[s] + rng.choice((0, 0, 3))))
        elif kind == 3 and recent[s]:   # a bookTicker of a recent update (mostly a mismatch)
            u = rng.choice(recent[s][-3:] + [last[s] + 1])
            bt = {"u": u, "s": s, "b": "99.50", "B": "1.00", "a": "100.50", "A": "2.00"}
            ops.append(("msg", json.dumps({"stream": f"{s.lower()}@bookTicker", "data": bt}).encode()))
        elif kind == 4:   # a trade
            t = {"e": "trade", "E": 1, "s": s, "t": 5, "p": "100.00", "q": "1.00", "T": 1, "m": True}
            ops.append(("msg", json.dumps({"stream": f"{s.lower()}@trade", "data": t}).encode()))
        elif kind == 5:   # unknown field
            ops.append(("msg", depth(s, u0, u1, last[s], b, a, {"ps": "X"})))
            last[s] = u1
        elif kind == 6:   # more decimals: a scale change
            b2 = [[p + "0", q + "5"] for p, q in b]
            ops.append(("msg", depth(s, u0, u1, last[s], b2, a)))
            last[s] = u1
        elif kind == 7:   # a crossing bid
            b2, a2 = levels(3, cross=True)
            ops.append(("msg", depth(s, u0, u1, last[s], b2, a2)))
            last[s] = u1
        elif kind == 8:   # malformed
            ops.append(("msg", b'{"stream":"x@depth","data":{"e":"depthUpdate",'))
        elif kind == 9:   # a symbol without a book yet / lower case
            ops.append(("msg", depth(s, u0, u1, last[s], b, a, sym=rng.choice(("NEWUSDT", s.lower())))))
        elif kind == 10:  # U > u
            ops.append(("msg", depth(s, u1 + 1, u1, last[s], b, a)))
        elif kind == 12:  # a kline (nested object) or an aggTrade, maybe with odd stream names
            name = rng.choice(("kline_1m", "aggTrade", "KLINE_1M", "kline_1m@x", ""))
            stream = f"{s.lower()}@{name}" if name else s.lower()
            if rng.random() < 0.5:
                data = {"e": "kline", "E": 1, "s": s, "k": {"t": 1, "o": "1.0", "x": False, "n": [1, 2.5e3, None]}}
            else:
                data = {"e": "aggTrade", "E": 1, "s": s, "a": 7, "p": "100.00", "q": "1.00", "f": 1, "l": 2,
                        "T": 1, "m": True}
            raw = json.dumps({"stream": stream, "data": data}, separators=(",", ":")).encode()
            odd = rng.randrange(8)
            if odd == 0:
                raw = raw.replace(b'"stream"', b'"str\\u0065am"')   # an escaped key: the Python path
            elif odd == 1:
                raw = raw.replace(b'"data"', b'"x":"\xc3\xa9","data"')   # non-ASCII: the Python path
            elif odd == 2:
                raw = raw[:-1] + b',"stream":"y@trade"}'             # a repeated stream: json keeps the last
            elif odd == 3:
                raw = raw.replace(b'"E":1', b'"E":NaN')             # json.loads reads NaN
            elif odd == 4:
                raw = raw[:-2]                                     # malformed
            ops.append(("msg", raw))
        elif kind == 13 and recent[s]:   # a futures-style bookTicker ("e", "E", "T"), maybe of the top
            u = rng.choice(recent[s][-3:] + [last[s], last[s] + 1])
            bt = {"e": "bookTicker", "u": u, "s": s, "b": "99.50", "B": "1.00", "a": "100.50", "A": "2.00",
                  "T": 5, "E": 6}
            if rng.random() < 0.3:
                bt["ps"] = s                     # COIN-M's extra field
            if rng.random() < 0.2:
                bt["b"] = "99.5x"                 # not a decimal: malformed
            ops.append(("msg", json.dumps({"stream": f"{s.lower()}@bookTicker", "data": bt}).encode()))
        elif kind == 14:  # COIN-M-like depth update with "ps" (and maybe a second unknown field)
            extra = {"ps": s} if rng.random() < 0.7 else {"ps": s, "zz": 1}
            ops.append(("msg", depth(s, u0, u1, last[s], b, a, extra)))
            last[s] = u1
        else:             # escaped string: off the scanner's fast path, same record
            ops.append(("msg", depth(s, u0, u1, last[s], b, a).replace(b'"e":"depthUpdate"',
                                                                        b'"e":"depth\\u0055pdate"')))
            last[s] = u1
    return ops


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), market=st.sampled_from(["spot", "futures"]), nsym=st.integers(1, 6),
       nmsg=st.integers(0, 150), p_bad=st.sampled_from([0.0, 0.05, 0.3]),
       sizes=st.lists(st.integers(1, 40), max_size=4), others=st.booleans())
def test_chunk_equals_per_message(seed: int, market: str, nsym: int, nmsg: int, p_bad: float,
                                  sizes: list[int], others: bool) -> None:
    ops = _gen(seed, market, nsym, nmsg, p_bad)
    _same(_run_single(market, ops), _run_chunked(market, ops, sizes, adaptive=seed % 3 == 0, others=others))


def test_chunk_lane_takes_the_fast_path() -> None:
    """On a clean stream nearly every message is applied by the kernel (one fallback per symbol:
    the first event after the snapshot), and rows still equal the per-message path's."""
    ops = _gen(7, "spot", 20, 2000, 0.0, p_snap=1.0)
    single = _run_single("spot", ops)
    chunked = _run_chunked("spot", ops, [])
    _same(single, chunked)
    fast = chunked[2]._lane.fast_messages
    assert fast >= 2000 - 20 - 1, fast


@pytest.mark.parametrize("market", ["spot", "futures"])
def test_chunk_lane_bulk_books(market: str) -> None:
    """With ``others`` the books whose messages of a run make no report take them in bulk (their
    counters, top and history once per run), the others one by one in message order: the same
    result as the per-message path on a faulted stream of many symbols with tickers (pending,
    held, mismatched), trades and crossed books, in chunks of several sizes."""
    clean = _gen(7, market, 20, 2000, 0.0, p_snap=1.0)
    faulted = _gen(12, market, 12, 3000, 0.05, p_snap=1.0)
    for ops in (clean, faulted, clean[:1500] + faulted[12:]):
        single = _run_single(market, ops)
        for sizes in ([], [7, 300], [1000]):      # short runs (< _BULK_MIN messages) are walked
            chunked = _run_chunked(market, ops, sizes, others=True)
            _same(single, chunked)
            lane = chunked[2]._lane
            if ops is clean and sizes == [] and market == "spot":   # (_gen's futures snapshots do not straddle)
                assert 0 < lane.bulk_messages <= lane.fast_messages, (lane.bulk_messages, lane.fast_messages)


def test_chunk_lane_grows_outputs() -> None:
    """Level scratch and row output growth (a message of 600 levels; a full output handed out
    mid-chunk), and a book that needs more blocks than it has (the Python path grows it), give
    the same result."""
    rng = random.Random(3)
    bids = [[f"{1000 - i * 0.01:.2f}", "1.00"] for i in range(1, 40)]
    ops: list[Op] = [("snap", "AUSDT", json.dumps({"lastUpdateId": 1, "bids": bids, "asks": []}).encode())]
    u = 1
    for m in range(30):
        n = 600 if m % 7 == 3 else 20
        lv = [[f"{1000 - rng.randint(1, 5000) * 0.01:.2f}", rng.choice(("0.00", "2.00"))] for _ in range(n)]
        lv = [list(x) for x in dict((p, q) for p, q in lv).items()]
        d = {"e": "depthUpdate", "E": m, "s": "AUSDT", "U": u + 1, "u": u + 1, "b": lv, "a": []}
        u += 1
        ops.append(("msg", json.dumps(d).encode()))
    for rows in (1, 50, 1 << 14):
        chunked = _run_chunked("spot", ops, [5, 100], rows)
        _same(_run_single("spot", ops), chunked)
        assert chunked[2]._lane.fast_messages > 20


def _ticker_ops(seed: int, market: str, nsym: int, nupd: int) -> list[Op]:
    """Depth updates of ``nsym`` books, each after up to 40 bookTickers of that symbol as a real
    capture interleaves them: ahead of the book (of the update that comes next, with its top or
    one quantity off -- a mismatch --, between it and the last, or beyond it), and late (of a
    recent update, again right or off, of no update, or of an old one); trades now and then.
    The tops come from a reference book fed the depth updates alone."""
    rng = random.Random(seed)
    fut = market == "futures"
    ref = BinanceBooks(market, "<ref>")
    names = [f"T{i}USDT" for i in range(nsym)]
    last = dict.fromkeys(names, 100)
    done: dict[str, list[tuple[int, tuple[int, ...]]]] = {s: [] for s in names}
    ops: list[Op] = []
    for s in names:
        bids = [[f"{100 - i * 0.5:.2f}", "1.00"] for i in range(1, 6)]
        asks = [[f"{100 + i * 0.5:.2f}", "1.00"] for i in range(1, 6)]
        raw = json.dumps({"lastUpdateId": 100, "bids": bids, "asks": asks}).encode()
        ops.append(("snap", s, raw))
        ref.apply_snapshot(s, raw, 0)

    def ticker(s: str, u: int, top: tuple[int, ...], wrong: bool) -> Op:
        b, bq, a, aq = (format_units(v, 2) if v >= 0 else "0.00" for v in top)
        if wrong:
            bq = format_units(top[1] + 7, 2) if top[1] >= 0 else "1.00"
        d = {"e": "bookTicker", "u": u, "s": s, "b": b, "B": bq, "a": a, "A": aq, "E": 1, "T": 2} if fut else \
            {"u": u, "s": s, "b": b, "B": bq, "a": a, "A": aq}
        return ("msg", json.dumps({"stream": f"{s.lower()}@bookTicker", "data": d}, separators=(",", ":")).encode())

    for _ in range(nupd):
        s = rng.choice(names)
        u0 = last[s] + (0 if fut else 1)      # futures: the first one straddles the snapshot (U <= id <= u)
        u1 = last[s] + 1 + rng.randrange(4)
        b = [[f"{100 - rng.randint(1, 8) * 0.5:.2f}", rng.choice(("0.00", "2.00", "3.50"))] for _ in range(2)]
        a = [[f"{100 + rng.randint(1, 8) * 0.5:.2f}", rng.choice(("0.00", "1.25"))] for _ in range(2)]
        d = {"e": "depthUpdate", "E": 1, "s": s, "U": u0, "u": u1, "b": b, "a": a}
        if fut:
            d.update(T=1, pu=last[s])
        raw = json.dumps({"stream": f"{s.lower()}@depth", "data": d}, separators=(",", ":")).encode()
        ref.feed(raw, 0)
        top = ref.books[s].top_units()
        for _ in range(rng.choice((0, 1, 3, 10, 40))):
            r = rng.random()
            if r < 0.3:
                ops.append(ticker(s, u1, top, rng.random() < 0.1))
            elif r < 0.5:
                ops.append(ticker(s, rng.randint(u0, u1), top, False))
            elif r < 0.6:
                ops.append(ticker(s, u1 + rng.randint(1, 3), top, rng.random() < 0.5))
            elif r < 0.8 and done[s]:
                u, t = rng.choice(done[s][-20:])
                ops.append(ticker(s, u, t, rng.random() < 0.1))
            elif r < 0.9 and done[s]:
                ops.append(ticker(s, done[s][-1][0] - rng.randint(0, 2), top, False))
            else:
                t = {"e": "trade", "E": 1, "s": s, "t": 5, "p": "100.00", "q": "1.00", "T": 1, "m": True}
                ops.append(("msg", json.dumps({"stream": f"{s.lower()}@trade", "data": t}).encode()))
        ops.append(("msg", raw))
        done[s].append((u1, top))
        last[s] = u1
    return ops


@pytest.mark.parametrize("market", ["spot", "futures"])
@pytest.mark.parametrize("history", [None, 8, 40])
def test_chunk_lane_checks_tickers_in_the_kernel(market: str, history: int | None) -> None:
    """The kernel keeps each book's pending bookTickers and its last history entries (rings that
    grow past 16 waiting tickers; at a small ``history`` the book drops the oldest as
    ``_pending`` does): checks, mismatch reports (file/line), counters, ``_pending`` and history
    equal the per-message path's, in chunks of several sizes, and nearly every message is the
    kernel's."""
    ops = _ticker_ops(5, market, 6, 1200)
    single = _run_single(market, ops, history)
    counters = single[2].summary()
    assert counters["bookticker_mismatch"] > 10 and counters["bookticker_checked"] > 100, counters
    for sizes in ([], [7, 300]):
        chunked = _run_chunked(market, ops, sizes, history=history)
        _same(single, chunked)
        if not sizes:
            lane = chunked[2]._lane
            assert lane.fast_messages > 0.9 * (len(ops) - 6), (lane.fast_messages, len(ops))


# ------------------------------------------------------------------------------------------
# real captures
# ------------------------------------------------------------------------------------------

def _hft_ops(path: Path, limit: int) -> list[Op]:
    """An hftbacktest capture (``<ns> <json>``, one symbol, its REST snapshot unenveloped)."""
    sym = path.name.split("_")[1].upper()
    ops: list[Op] = []
    with gzip.open(path, "rb") as f:
        for raw in f:
            _, _, js = raw.rstrip(b"\r\n").partition(b" ")
            ops.append(("snap", sym, js) if b'"lastUpdateId"' in js[:40] else ("msg", js))
            if len(ops) >= limit:
                break
    return ops


@pytest.mark.parametrize("name", ["spot_btcusdt_20240808.gz", "usdm_btcusdt_20240808.gz"])
def test_chunk_equals_per_message_on_hftbacktest_captures(name: str) -> None:
    path = shared_file("data", "binance", name)
    market = "spot" if name.startswith("spot") else "futures"
    ops = _hft_ops(path, 40_000)
    single = _run_single(market, ops)
    chunked = _run_chunked(market, ops, [1000, 37])
    _same(single, chunked)
    assert chunked[2].summary()["gaps"] == 0 and chunked[2]._lane.fast_messages > 1000
    _same(single, _run_chunked(market, ops, [5000], adaptive=True, others=False))   # resting after short runs
    _same(single, _run_chunked(market, ops, [5000], adaptive=True))


def _cryptofeed_ops(ws: Path, http: Path) -> list[Op]:
    """A cryptofeed capture: websocket payloads raw, REST snapshots by the ``symbol=`` of their
    URL, merged by timestamp as recorded."""
    from ddms.io.cryptofeed import parse_line
    items = []
    for src in (ws, http):
        for n, raw in enumerate(src.read_bytes().splitlines()):
            p = parse_line(raw, n)
            if p is None:
                continue
            kind, url, ts, payload = p
            if kind == "recv":
                items.append((ts, 1, n, ("msg", payload)))
            elif kind == "http":
                sym = parse_qs(urlsplit(url).query)["symbol"][0].upper()
                items.append((ts, 0, n, ("snap", sym, payload)))
    items.sort(key=lambda x: x[:3])
    return [op for *_, op in items]


@pytest.mark.parametrize("venue", ["BINANCE", "BINANCE_FUTURES"])
def test_chunk_equals_per_message_on_cryptofeed_captures(venue: str) -> None:
    ws = shared_file("data", "venues", f"{venue}.ws.1.0")
    http = SHARED / "data" / "venues" / f"{venue}.http.0.0"
    if not http.exists():
        pytest.skip(f"{http} not available")
    market = "spot" if venue == "BINANCE" else "futures"
    ops = _cryptofeed_ops(ws, http)
    chunked = _run_chunked(market, ops, [64, 5])
    _same(_run_single(market, ops), chunked)
    assert chunked[2]._lane.fast_messages > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), market=st.sampled_from(["spot", "futures"]), nsym=st.integers(1, 4),
       nmsg=st.integers(0, 120))
def test_feed_raw_equals_feed_parsed(seed: int, market: str, nsym: int, nmsg: int) -> None:
    """``BinanceBooks.feed`` counts a raw message as the parsed one (what a capture's reader and a
    monitor feed): a trade or kline stream is ``ignored`` by its stream name, a bad message of a
    book stream is its book's -- raw bytes once counted an aggTrade or a kline as malformed."""
    from ddms.io.venues.base import loads_json
    ops = _gen(seed, market, nsym, nmsg, 0.3)
    raw, parsed = BinanceBooks(market, "<t>"), BinanceBooks(market, "<t>")
    for n, op in enumerate(ops, 1):
        for core, parse in ((raw, False), (parsed, True)):
            if op[0] == "snap":
                core.apply_snapshot(op[1], op[2], n)
            else:
                msg = op[1]
                if parse and isinstance(msg, (bytes, str)):
                    try:
                        msg = loads_json(msg.encode() if isinstance(msg, str) else msg)
                    except (ValueError, UnicodeDecodeError):
                        pass
                core.feed(msg, n)
            core.take_events()
    assert raw.summary() == parsed.summary()
    assert list(raw.ignored.items()) == list(parsed.ignored.items())
    assert [(r.reason, r.line) for r in raw.reports] == [(r.reason, r.line) for r in parsed.reports]
