"""Sample data in every format the readers take, generated from :mod:`replay.synthetic`
(``ddms sample-data DIR``).

Why: a fresh clone has no data, and the README's commands need some.  Everything here is
generated from a seed, so the same command writes the same bytes on every machine (gzip files
carry no time stamp), and every book is uncrossed (the generator's marketable orders execute
instead of crossing; see :mod:`replay.synthetic`).

What :func:`write_sample_data` writes under ``DIR`` (default sizes; see :data:`SAMPLE_FILES`):

====================================  ========================================================
``finance.csv``                       DBToaster order-book stream, 100,000 lines (2.6 MB)
``big/finance.csv``                   the same format, 1,000,000 lines (26 MB)
``finance.parquet``                   ``finance.csv`` as ddms Parquet (what ``ddms convert`` writes)
``binance/usdm_btcusdt.gz``           USD-M futures capture in hftbacktest's recorder format:
                                      ``<recv_ts_ns> <json>`` lines, REST snapshot, ``depth@0ms``
                                      diff updates (U/u/pu), bookTicker, trade (4,000 depth events)
``binance/spot_btcusdt.gz``           spot capture: ``depth@100ms`` updates (U = previous u + 1),
                                      bookTicker without e/E/T, trade (2,000 depth events)
``lobster/SYNTH_..._message_5.csv``   LOBSTER message file (20,000 messages) and its
``lobster/SYNTH_..._orderbook_5.csv`` orderbook file (5 levels a side after each message)
====================================  ========================================================

Binance captures: a synthetic order-by-order flow is aggregated into price levels (a level's
quantity is the sum of its orders' volumes); each book-changing order line takes the next
update id, consecutive lines are grouped into depth events (futures: 1-12 lines, with unused ids
between events as the real futures stream has; spot: the lines of each 100 ms), and each event
lists the final quantity of every level it changed (0: removed).  A bookTicker follows every
line that changes the best bid or ask (``u`` = that line's id, values the top after it), so the
tickers whose ``u`` ends a depth event can be checked against the rebuilt book; a trade follows
every execution at the best level (``m`` true when the resting order was a bid).  The REST
snapshot is the book at an update id inside the 6th event (futures: ``U <= lastUpdateId <= u``;
spot: the end of the 5th event, so ``U = lastUpdateId + 1``), recorded two events later, as
Binance's documented book procedure expects.  Times: event times in ms from 2025-01-01 09:00 UTC
(one synthetic time unit = 1 ms), receive times 3-9 ms later in ns.

Cost: the order-book files at the generator's ~10M lines/s plus the writes; the Binance and
LOBSTER files go through a Python aggregation at a few us a line (about 2 s of CPU for the
defaults; 3 s for the whole folder).
"""

from __future__ import annotations

import gzip
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddms.io.venues.binance_book import format_units
from replay.synthetic import SyntheticOrderFlow, write_orderbook

__all__ = ["SAMPLE_FILES", "SampleSizes", "binance_capture_lines", "lobster_lines", "write_sample_data"]

T0_MS = 1_735_722_000_000
"""2025-01-01 09:00:00 UTC in ms: the first event time of the Binance samples."""
LOBSTER_STEM = "SYNTH_2025-01-02_34200000_57600000"

SAMPLE_FILES = ("finance.csv", "big/finance.csv", "finance.parquet", "binance/usdm_btcusdt.gz",
                "binance/spot_btcusdt.gz", f"lobster/{LOBSTER_STEM}_message_5.csv",
                f"lobster/{LOBSTER_STEM}_orderbook_5.csv")
"""The files :func:`write_sample_data` writes, relative to its folder."""


@dataclass(frozen=True)
class SampleSizes:
    """How much :func:`write_sample_data` writes."""

    lines: int = 100_000            # finance.csv
    big_lines: int = 1_000_000      # big/finance.csv
    futures_events: int = 4_000     # depth events of binance/usdm_btcusdt.gz
    spot_events: int = 2_000        # depth events of binance/spot_btcusdt.gz
    lobster_messages: int = 20_000  # lines of the LOBSTER message file


# ------------------------------------------------------------------------------------------
# a level book over the synthetic order flow
# ------------------------------------------------------------------------------------------

class _LevelBook:
    """Orders and per-level quantities of the synthetic flow, applied one line at a time (the
    order-book adaptor's semantics), reporting what each line did."""

    def __init__(self) -> None:
        from sortedcontainers import SortedDict
        self.orders: dict[int, list[int]] = {}          # id -> [side, volume, price]
        self.levels = (SortedDict(), SortedDict())       # price -> quantity, per side

    def top(self) -> tuple[int, int, int, int] | None:
        """(bid price, bid qty, ask price, ask qty), or None while a side is empty."""
        bids, asks = self.levels
        if not bids or not asks:
            return None
        (bp, bq), (ap, aq) = bids.peekitem(-1), asks.peekitem(0)
        return bp, bq, ap, aq

    def _add(self, side: int, price: int, qty: int) -> None:
        lv = self.levels[side]
        left = lv.get(price, 0) + qty
        if left:
            lv[price] = left
        else:
            del lv[price]

    def apply(self, line: bytes) -> tuple[str, int, int, int, int] | None:
        """Apply one line; returns (what, side, price, order id, volume) -- what is "add",
        "exec" (an execution at the best level of its side), "cancel" (the order is gone) or
        "partial_cancel" -- or None for a line that changes nothing."""
        _, oid_s, act, vol_s, px_s = line.split(b",")
        oid = int(oid_s)
        if act in (b"B", b"S"):
            side, vol, px = (0 if act == b"B" else 1), int(vol_s), int(px_s)
            self.orders[oid] = [side, vol, px]
            self._add(side, px, vol)
            return "add", side, px, oid, vol
        o = self.orders.get(oid)
        if o is None or act not in (b"E", b"F", b"D"):
            return None
        side, left, px = o
        taken = min(int(vol_s), left) if act == b"E" else left
        lv = self.levels[side]
        at_best = px == (lv.peekitem(-1)[0] if side == 0 else lv.peekitem(0)[0])
        if taken == left:
            del self.orders[oid]
        else:
            o[1] = left - taken
        self._add(side, px, -taken)
        what = "exec" if act != b"D" and at_best else ("cancel" if taken == left else "partial_cancel")
        return what, side, px, oid, taken


def _flow_lines(flow: SyntheticOrderFlow, chunk: int = 4096) -> Iterator[bytes]:
    while True:
        yield from flow.lines(chunk).splitlines()


# ------------------------------------------------------------------------------------------
# Binance captures
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Market:
    futures: bool
    px_dec: int          # decimals of the generator's integer prices
    px_pad: int          # zeros appended to the price text (spot sends 8 decimals)
    qty_dec: int         # decimals of a quantity in the text
    qty_mult: int        # quantity units per volume unit
    mid: int
    tick: int


_FUTURES = _Market(True, 2, 0, 3, 1, 6_180_000, 10)           # 61800.00, tick 0.10, qty 0.001 a unit
_SPOT = _Market(False, 2, 6, 8, 100_000, 6_183_763, 1)         # 61837.63, tick 0.01, qty 0.001 a unit


def _px(m: _Market, p: int) -> str:
    return format_units(p, m.px_dec) + "0" * m.px_pad


def _qty(m: _Market, q: int) -> str:
    return format_units(q * m.qty_mult, m.qty_dec)


def _dumps(obj: dict) -> str:
    return json.dumps(obj, separators=(",", ":"))


def binance_capture_lines(market: str, n_events: int, *, seed: int = 0, symbol: str = "BTCUSDT") -> Iterator[str]:
    """The lines (without newline) of a synthetic capture of ``n_events`` depth events for
    ``market`` ``"futures"`` or ``"spot"``; see the module docstring for the model."""
    if market not in ("futures", "spot"):
        raise ValueError(f"market must be 'futures' or 'spot', got {market!r}")
    if n_events < 8:
        raise ValueError(f"n_events must be >= 8 (the snapshot comes after the 6th event), got {n_events}")
    m = _FUTURES if market == "futures" else _SPOT
    flow = SyntheticOrderFlow(seed=seed, depth=2000, levels=100, mid=m.mid, tick=m.tick, t0=0,
                              drift_rate=0.05, outlier_rate=0.0)
    rng = np.random.default_rng(seed)
    lower = symbol.lower()
    depth_stream = f"{lower}@depth@0ms" if m.futures else f"{lower}@depth@100ms"
    book = _LevelBook()
    lines = _flow_lines(flow)
    for _ in range(3000):                     # warm up: a book with depth before the capture starts
        book.apply(next(lines))
    uid = 5_000_000_000 + int(rng.integers(0, 1_000_000))
    prev_u: int | None = None
    trade_id = 3_000_000_000
    recv = 0
    top = book.top()
    snap_event = 5
    snapshot: str | None = None
    pending = next(lines)
    for k in range(n_events):
        if m.futures:
            uid += int(rng.integers(1, 40))   # ids of other symbols' updates
            quota = int(rng.integers(1, 13))
        changed: tuple[dict[int, int], dict[int, int]] = ({}, {})
        side_msgs: list[tuple[int, str]] = []     # (event ms, message) before the depth event
        first_u = None
        window = None
        done = 0
        ev_ms = 0
        while True:
            line = pending
            t_ms = T0_MS + int(line.split(b",", 1)[0])
            if not m.futures:
                if window is None or not done:
                    window = t_ms // 100
                elif t_ms // 100 != window:
                    break
            elif done >= quota:
                break
            pending = next(lines)
            ev_ms = t_ms
            did = book.apply(line)
            if did is None:
                continue
            what, side, px, _, vol = did
            uid += 1
            done += 1
            first_u = uid if first_u is None else first_u
            changed[side][px] = book.levels[side].get(px, 0)
            if m.futures and k == snap_event and done == 1:
                snapshot = _snapshot(m, book, uid, t_ms)
            if what == "exec":
                trade_id += 1
                trade = {"e": "trade", "E": t_ms, "T": t_ms, "s": symbol, "t": trade_id, "p": _px(m, px),
                         "q": _qty(m, vol), "X": "MARKET", "m": side == 0} if m.futures else \
                    {"e": "trade", "E": t_ms, "s": symbol, "t": trade_id, "p": _px(m, px), "q": _qty(m, vol),
                     "T": t_ms, "m": side == 0, "M": True}
                side_msgs.append((t_ms, _dumps({"stream": f"{lower}@trade", "data": trade})))
            now = book.top()
            if now is not None and now != top:
                tick = {"e": "bookTicker", "u": uid, "s": symbol, "b": _px(m, now[0]), "B": _qty(m, now[1]),
                        "a": _px(m, now[2]), "A": _qty(m, now[3]), "T": t_ms, "E": t_ms} if m.futures else \
                    {"u": uid, "s": symbol, "b": _px(m, now[0]), "B": _qty(m, now[1]), "a": _px(m, now[2]),
                     "A": _qty(m, now[3])}
                side_msgs.append((t_ms, _dumps({"stream": f"{lower}@bookTicker", "data": tick})))
            top = now
        data = {"e": "depthUpdate", "E": ev_ms}
        if m.futures:
            data["T"] = ev_ms
        data.update({"s": symbol, "U": first_u, "u": uid})
        if m.futures:
            data["pu"] = prev_u if prev_u is not None else first_u - int(rng.integers(1, 40))
        data["b"] = [[_px(m, p), _qty(m, q)] for p, q in sorted(changed[0].items(), reverse=True)]
        data["a"] = [[_px(m, p), _qty(m, q)] for p, q in sorted(changed[1].items())]
        for ms, msg in side_msgs:
            recv = max(recv + 1_000, (ms + 3) * 1_000_000 + int(rng.integers(0, 1_000_000)))
            yield f"{recv} {msg}"
        recv = max(recv + 1_000, (ev_ms + 5) * 1_000_000 + int(rng.integers(0, 4_000_000)))
        yield f"{recv} {_dumps({'stream': depth_stream, 'data': data})}"
        prev_u = uid
        if not m.futures and k == snap_event - 1:
            snapshot = _snapshot(m, book, uid, ev_ms)
        if k == snap_event + 2:
            recv += 1_000_000
            yield f"{recv} {snapshot}"


def _snapshot(m: _Market, book: _LevelBook, last: int, t_ms: int) -> str:
    """The REST depth snapshot of ``book`` after update ``last`` (best levels first)."""
    bids, asks = book.levels
    snap: dict = {"lastUpdateId": last}
    if m.futures:
        snap.update({"E": t_ms + 2, "T": t_ms})
    snap["bids"] = [[_px(m, p), _qty(m, q)] for p, q in reversed(bids.items())]
    snap["asks"] = [[_px(m, p), _qty(m, q)] for p, q in asks.items()]
    return _dumps(snap)


# ------------------------------------------------------------------------------------------
# LOBSTER
# ------------------------------------------------------------------------------------------

def lobster_lines(n_messages: int, *, seed: int = 0, levels: int = 5) -> Iterator[tuple[str, str]]:
    """(message line, orderbook line) pairs of a synthetic LOBSTER day: submissions (type 1),
    cancels and deletes (3), executions (4) of the synthetic flow; times in seconds after
    midnight from 9:30; prices in 1/10000 dollars; the orderbook line holds ``levels`` levels a
    side after the message (ask price, ask size, bid price, bid size per level; empty levels
    as LOBSTER pads them: 9999999999 / -9999999999 with size 0)."""
    flow = SyntheticOrderFlow(seed=seed, depth=1000, levels=40, outlier_rate=0.0, t0=0)
    book = _LevelBook()
    emitted = 0
    for line in _flow_lines(flow):
        if emitted >= n_messages:
            return
        t = 34_200 + int(line.split(b",", 1)[0]) / 1000.0
        did = book.apply(line)
        if did is None:
            continue
        what, side, px, oid, vol = did
        typ = {"add": 1, "partial_cancel": 2, "cancel": 3, "exec": 4}[what]
        direction = 1 if side == 0 else -1
        msg = f"{t:.9f},{typ},{oid},{vol},{px},{direction}"
        bids, asks = book.levels
        row: list[int] = []
        for i in range(levels):
            row += list(asks.peekitem(i)) if i < len(asks) else [9_999_999_999, 0]
            row += list(bids.peekitem(-1 - i)) if i < len(bids) else [-9_999_999_999, 0]
        emitted += 1
        yield msg, ",".join(map(str, row))


# ------------------------------------------------------------------------------------------
# the folder
# ------------------------------------------------------------------------------------------

def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file renamed into place: an interrupted run leaves no half
    file under a sample's name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_gz_lines(path: Path, lines: Iterator[str]) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
        for line in lines:
            gz.write(line.encode() + b"\n")


def write_sample_data(folder: str | os.PathLike, *, seed: int = 0, sizes: SampleSizes = SampleSizes(),
                      progress: Callable[[str], None] | None = None) -> list[Path]:
    """Write every file of :data:`SAMPLE_FILES` under ``folder`` (created; existing sample files
    are replaced) from ``seed``; returns the paths.  ``progress`` receives a line per file
    written.  Deterministic: the same seed and sizes give the same bytes."""
    root = Path(folder)
    say = progress or (lambda _msg: None)
    out: list[Path] = []

    def done(path: Path, what: str, t0: float) -> None:
        out.append(path)
        say(f"wrote {path} ({what}, {path.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")

    for rel, n, s in (("finance.csv", sizes.lines, seed), ("big/finance.csv", sizes.big_lines, seed + 1)):
        t0 = time.perf_counter()
        _atomic(root / rel, lambda p, n=n, s=s: write_orderbook(p, n, seed=s))
        done(root / rel, f"{n:,} order-book lines", t0)

    t0 = time.perf_counter()
    from ddms.io.columnar import convert
    from ddms.io.sources import open_source
    info = None

    def parquet(p: Path) -> None:
        nonlocal info
        info = convert([open_source(root / "finance.csv", name="finance")], p)

    _atomic(root / "finance.parquet", parquet)
    done(root / "finance.parquet", f"{info.events:,} events of finance.csv", t0)

    for rel, market, n, s in (("binance/usdm_btcusdt.gz", "futures", sizes.futures_events, seed + 2),
                              ("binance/spot_btcusdt.gz", "spot", sizes.spot_events, seed + 3)):
        t0 = time.perf_counter()
        _atomic(root / rel, lambda p, market=market, n=n, s=s: _write_gz_lines(
            p, binance_capture_lines(market, n, seed=s)))
        done(root / rel, f"Binance {market} capture, {n:,} depth events", t0)

    t0 = time.perf_counter()
    msg_path = root / "lobster" / f"{LOBSTER_STEM}_message_5.csv"
    book_path = root / "lobster" / f"{LOBSTER_STEM}_orderbook_5.csv"
    pairs = list(lobster_lines(sizes.lobster_messages, seed=seed + 4))
    _atomic(msg_path, lambda p: p.write_text("".join(f"{a}\n" for a, _ in pairs)))
    _atomic(book_path, lambda p: p.write_text("".join(f"{b}\n" for _, b in pairs)))
    done(msg_path, f"LOBSTER, {len(pairs):,} messages", t0)
    done(book_path, "LOBSTER order book, 5 levels", t0)
    return out
