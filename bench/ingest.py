"""Section ingest: the readers of ddms/io end to end, bytes in -> bids/asks rows out (issue 22).

``python -m bench.ingest [--quick]`` prints the table alone; ``python -m bench --only ingest``
puts it in the full bench.  Rows (each best of N interleaved repetitions, after one warm-up pass
so numba compile/cache-load time is excluded; the machine is shared, so state its load):

* ``binance multi-symbol``: a generated Binance combined stream (``{"stream":..,"data":..}``
  raw JSON lines, spot U/u continuity) of S symbols, each with its REST snapshot, through
  :meth:`ddms.io.venues.binance.BinanceBooks.feed_chunk` (8,192 raw messages per call: the
  numba chunk lane of :mod:`ddms.io.venues.binance_chunk`, the rest through the per-message
  path): price-level updates/s and messages/s, end to end including the snapshots; interleaved
  with the same feed one message per :meth:`~ddms.io.venues.binance.BinanceBooks.feed` call;
* ``hftbacktest-style L2``: the Binance USD-M capture (``<ns> <json>`` lines, gzip) through
  :func:`ddms.io.sources.open_source` (the reader ``ddms run``/``backtest`` use): level
  updates/s;
* the cryptofeed captures of ../shared/data/venues (Kraken, OKX, Coinbase, Binance spot and
  futures) through :func:`ddms.io.cryptofeed.read_cryptofeed`: level updates/s (the venue
  cores' count) -- small files (1-2 s each), so these are rough;
* ``MBO (DBN)``: the CME ESH4 market-by-order file through :func:`ddms.io.dbn.read_dbn`:
  records/s and rows/s (``events/s`` = records: one add/cancel/modify each).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import SHARED, Row, Shared

SECTION = "12 ingest"
VENUES = SHARED / "data" / "venues"
USDM = SHARED / "data" / "binance" / "usdm_btcusdt_20240808.gz"
MBO = SHARED / "data" / "mbo" / "esh4-glbx-mdp3-20231225.mbo.dbn.zst"


def binance_feed(symbols: int, messages: int, levels: int, seed: int = 1) -> tuple[dict[str, bytes], list[bytes]]:
    """A combined-stream feed: ``(snapshots by symbol, raw depth messages)``; each message
    changes ``levels`` price levels (about a fifth of them removals) of one symbol, U/u
    contiguous per symbol, symbols interleaved at random.  Books stay near 200 levels a side."""
    rng = random.Random(seed)
    names = [f"S{i:04d}USDT" for i in range(symbols)]
    last = {s: 1000 for s in names}
    snaps = {}
    for s in names:
        bids = [[f"{100 - i * 0.01:.2f}", f"{rng.uniform(1, 9):.3f}"] for i in range(1, 201)]
        asks = [[f"{100 + i * 0.01:.2f}", f"{rng.uniform(1, 9):.3f}"] for i in range(1, 201)]
        snaps[s] = json.dumps({"lastUpdateId": last[s], "bids": bids, "asks": asks}).encode()
    out = []
    for m in range(messages):
        s = names[rng.randrange(symbols)]
        u0 = last[s] + 1
        last[s] = u0 + rng.randrange(3)
        b, a = [], []
        for _ in range(levels):
            i = rng.randrange(1, 260)
            q = "0.000" if rng.random() < 0.2 else f"{rng.uniform(1, 9):.3f}"
            (b if rng.random() < 0.5 else a).append(
                [f"{100 - i * 0.01:.2f}" if len(b) >= len(a) else f"{100 + i * 0.01:.2f}", q])
        # keep sides honest: bids below 100, asks above
        bids = [x for x in b + a if float(x[0]) < 100]
        asks = [x for x in b + a if float(x[0]) > 100]
        data = {"e": "depthUpdate", "E": 1_700_000_000_000 + m, "s": s, "U": u0, "u": last[s], "b": bids, "a": asks}
        out.append(json.dumps({"stream": f"{s.lower()}@depth@100ms", "data": data}, separators=(",", ":")).encode())
    return snaps, out


def _binance_multi(snaps: dict[str, bytes], msgs: list[bytes]) -> tuple[int, int, int]:
    from ddms.io.venues.binance import BinanceBooks
    core = BinanceBooks("spot", "<bench>")
    for s, body in snaps.items():
        core.apply_snapshot(s, body, 0)
    core.take_events()
    rows = 0
    for i, raw in enumerate(msgs, 1):
        core.feed(raw, i)
        for ev in core.take_events():
            rows += len(ev.batch)
    summ = core.summary()
    assert summ["gaps"] == 0 and summ["resyncs"] == 0, summ
    return summ["level_updates"], len(msgs), rows


def _binance_chunked(snaps: dict[str, bytes], msgs: list[bytes], chunk: int = 8192) -> tuple[int, int, int]:
    from ddms.io.venues.binance import BinanceBooks
    core = BinanceBooks("spot", "<bench>")
    for s, body in snaps.items():
        core.apply_snapshot(s, body, 0)
    core.take_events()
    rows = 0
    for c in range(0, len(msgs), chunk):
        _, events = core.feed_chunk(msgs[c:c + chunk], range(c + 1, c + 1 + len(msgs[c:c + chunk])))
        for ev in events:
            rows += len(ev.batch)
    summ = core.summary()
    assert summ["gaps"] == 0 and summ["resyncs"] == 0, summ
    return summ["level_updates"], len(msgs), rows


def _interleaved(fns: list[Callable[[], tuple[int, int, int]]], reps: int
                 ) -> list[tuple[float, tuple[int, int, int], list[float]]]:
    """:func:`_best` of several functions run A, B, A, B, ... (the load changes between runs)."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    res: list = [None] * len(fns)
    for _ in range(reps):
        for j, fn in enumerate(fns):
            t = time.perf_counter()
            res[j] = fn()
            times[j].append(time.perf_counter() - t)
    return [(min(ts), r, ts) for ts, r in zip(times, res, strict=True)]


def _cryptofeed(path: Path) -> tuple[int, int, int]:
    from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
    rows = 0
    parser = CryptofeedParser(str(path))
    for ev in read_cryptofeed(str(path), parser=parser):
        rows += len(ev.batch)
    return parser.summary()["level_updates"], 0, rows


def _l2(path: Path) -> tuple[int, int, int]:
    from ddms.io.sources import open_source
    rows = 0
    for b in open_source(str(path)):
        rows += len(b)
    return rows, 0, rows


def _mbo(path: Path) -> tuple[int, int, int]:
    from ddms.io.dbn import MboBook, read_dbn
    book = MboBook(str(path))
    rows = 0
    for ev in read_dbn(str(path), book=book):
        rows += len(ev.batch)
    return book.records, 0, rows


def _best(fn: Callable[[], tuple[int, int, int]], reps: int) -> tuple[float, tuple[int, int, int], list[float]]:
    fn()   # warm-up: compile or load numba kernels, fill the page cache
    times = []
    res = None
    for _ in range(reps):
        t = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t)
    return min(times), res, times


def _verdict(rate: float, target: float, times: list[float]) -> str:
    runs = ", ".join(f"{t:.2f}" for t in times)
    if not target:
        return f"runs {runs} s"
    return f"{'PASS' if rate >= target else 'FAIL'} ({rate / target:.2f}x target); runs {runs} s"


def measure(quick: bool = False) -> list[Row]:
    reps = 2 if quick else 5
    rows: list[Row] = []
    syms, nmsg, lv = (100, 20_000, 20) if quick else (1000, 100_000, 20)
    snaps, msgs = binance_feed(syms, nmsg, lv)
    (dt0, (lv0, _, _), times0), (dt, (levels, messages, out), times) = _interleaved(
        [lambda: _binance_multi(snaps, msgs), lambda: _binance_chunked(snaps, msgs)], reps)
    rows.append(Row(SECTION, f"binance multi-symbol: {syms} symbols, {nmsg:,} generated msgs (feed_chunk)",
                    levels / dt, "level updates/s", ">= 1M", _verdict(levels / dt, 1e6, times)))
    rows.append(Row(SECTION, "  same run: messages/s, rows/s", messages / dt, "msgs/s", "",
                    f"{out / dt:,.0f} rows/s"))
    rows.append(Row(SECTION, "  same feed, one message per call (feed), interleaved", lv0 / dt0,
                    "level updates/s", "", _verdict(0, 0, times0)))
    if USDM.exists():
        dt, (levels, _, _), times = _best(lambda: _l2(USDM), reps)
        rows.append(Row(SECTION, "hftbacktest-style L2: usdm capture via open_source", levels / dt, "level rows/s",
                        "", _verdict(0, 0, times)))
    for name in ("KRAKEN.ws.50.0", "OKX.ws.1.0", "COINBASE.ws.28.0", "BINANCE.ws.1.0", "BINANCE_FUTURES.ws.1.0"):
        path = VENUES / name
        if path.exists():
            dt, (levels, _, out), times = _best(lambda p=path: _cryptofeed(p), reps)
            rows.append(Row(SECTION, f"cryptofeed {name} (read_cryptofeed)", levels / dt, "level updates/s",
                            ">= 1M", _verdict(levels / dt, 1e6, times)))
    if MBO.exists():
        dt, (recs, _, out), times = _best(lambda: _mbo(MBO), reps)
        rows.append(Row(SECTION, "MBO replay: CME ESH4 DBN via read_dbn", recs / dt, "records/s", "",
                        f"{out / dt:,.0f} rows/s; " + _verdict(0, 0, times)))
    return rows


def run(shared: Shared) -> list[Row]:
    return measure(quick=shared.sizes.quick)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller feed, 2 repetitions")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    table = measure(args.quick)
    w = max(len(r.case) for r in table)
    print(f"ingest (load average {load[0]:.1f} on {os.cpu_count()} cores; best of N after a warm-up)")
    for r in table:
        print(f"{r.case:<{w}}  {r.value:>14,.0f} {r.unit:<16} {r.target:<6} {r.verdict}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
