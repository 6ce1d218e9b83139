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
* ``end to end``: the same feed written as a capture file in the cryptofeed format ``ddms monitor
  --record`` writes (connection line, REST snapshots inline, ``<ts>: <raw>`` lines), read by
  :func:`ddms.io.cryptofeed.read_cryptofeed` (the reader of ``ddms run``/``backtest``/``convert``:
  a step's lines scanned in numba, the messages handed to the chunk lane as spans of the step's
  buffer), and through :func:`ddms.io.sources.open_source`
  (``symbols=True``: six-column batches) into an :class:`~ddms.runtime.engine.Engine` running
  ``examples/sql/symbol_best_bid.sql`` (best bid per symbol); CPU seconds of this process
  (``time.process_time``: one core), interleaved with the kernel row;
* ``hftbacktest-style L2``: the Binance USD-M capture (``<ns> <json>`` lines, gzip) through
  :func:`ddms.io.sources.open_source` (the reader ``ddms run``/``backtest`` use): level
  updates/s;
* ``hftbacktest recorder capture``: generated 1,000-symbol captures in that format
  (:func:`write_recorder`: depth, bookTicker and trade streams) and the real USD-M and spot
  ones, through the capture reader's chunk lane, interleaved with its line-by-line path: level
  updates/s in CPU seconds;
* the cryptofeed captures of ../shared/data/venues (Kraken, OKX, Coinbase, Binance spot and
  futures) through :func:`ddms.io.cryptofeed.read_cryptofeed`: level updates/s (the venue
  cores' count) in CPU seconds -- small files (0.01-0.2 s each): the Kraken, OKX and Coinbase rows
  take as many repetitions as fill ~0.5 s (at most 25, :func:`_enough`), best and median shown; OKX and
  Coinbase interleaved with the same file line by line (the per-message Python path), and their
  cores' ``feed_chunk`` (the numba lanes) against ``loads_json`` + ``feed`` on the messages in
  memory; Kraken too (its lane: snapshots, updates, truncation and checksums in numba);
* ``MBO (DBN)``: the CME ESH4 market-by-order file through :func:`ddms.io.dbn.read_dbn` (its
  numba replay, :class:`ddms.io.dbn.MboReplay`): records/s and rows/s (``events/s`` = records: one
  add/cancel/modify each).
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
from typing import Any

from bench.common import SHARED, Row, Shared, Timing, interleaved

SECTION = "12 ingest"
VENUES = SHARED / "data" / "venues"
USDM = SHARED / "data" / "binance" / "usdm_btcusdt_20240808.gz"
SPOT = SHARED / "data" / "binance" / "spot_btcusdt_20240808.gz"
MBO = SHARED / "data" / "mbo" / "esh4-glbx-mdp3-20231225.mbo.dbn.zst"


def binance_feed(symbols: int, messages: int, levels: int, seed: int = 1, *, market: str = "spot",
                 others: bool = False, trades: bool = False) -> tuple[dict[str, bytes], list[bytes]]:
    """A combined-stream feed: ``(snapshots by symbol, raw depth messages)``; each message
    changes ``levels`` price levels (about a fifth of them removals) of one symbol, U/u
    contiguous per symbol, symbols interleaved at random.  Books stay near 200 levels a side.

    ``market``: ``spot`` (U/u continuity), ``usdm`` (futures: ``T``, ``pu``) or ``coinm``
    (futures plus COIN-M's ``ps`` field in every message).  ``others``: the other streams of a
    real capture interleaved as Binance sends them (``../shared/data/venues/BINANCE*.ws.1.0``
    carry ~0.8 bookTickers, ~0.1 aggTrades and ~0.1 klines per depth update): after (or, one
    time in five, before) about 80% of the depth messages a bookTicker of that update's top
    of book (the generator keeps each book), an aggTrade one time in ten, a kline (a nested
    object) one time in ten.  ``trades``: instead of those two, a ``trade`` message one time in
    four (the streams hftbacktest's recorder takes: ``../shared/data/binance``, ~0.3 trades per
    depth update there).  ``messages`` counts the depth messages only."""
    rng = random.Random(seed)
    fut = market != "spot"
    names = [f"S{i:04d}USDT" for i in range(symbols)]
    last = {s: 1000 for s in names}
    snaps = {}
    book: dict[str, list[list[str | None]]] = {}     # per symbol: bid and ask qty strings at grid step i (0 = none)
    for s in names:
        bids = [[f"{100 - i * 0.01:.2f}", f"{rng.uniform(1, 9):.3f}"] for i in range(1, 201)]
        asks = [[f"{100 + i * 0.01:.2f}", f"{rng.uniform(1, 9):.3f}"] for i in range(1, 201)]
        # futures: the first event after the snapshot has U <= lastUpdateId <= u
        snaps[s] = json.dumps({"lastUpdateId": last[s] + fut, "bids": bids, "asks": asks}).encode()
        if others:
            book[s] = [[None] + [q for _, q in bids] + [None] * 60, [None] + [q for _, q in asks] + [None] * 60]
    out = []
    for m in range(messages):
        s = names[rng.randrange(symbols)]
        u0 = last[s] + 1
        pu = last[s]
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
        data: dict[str, Any] = {"e": "depthUpdate", "E": 1_700_000_000_000 + m, "s": s, "U": u0, "u": last[s]}
        if fut:
            data.update(T=1_700_000_000_000 + m, pu=pu)
        data.update(b=bids, a=asks)
        if market == "coinm":
            data["ps"] = s[:-4]
        depth = json.dumps({"stream": f"{s.lower()}@depth@100ms", "data": data}, separators=(",", ":")).encode()
        if not others:
            out.append(depth)
            continue
        for side, lv in ((0, bids), (1, asks)):
            for p, q in lv:
                i = round(abs(float(p) - 100) * 100)
                book[s][side][i] = None if q == "0.000" else q
        ticker = None
        if rng.random() < 0.8:
            bi = next((i for i, q in enumerate(book[s][0]) if q is not None), None)
            ai = next((i for i, q in enumerate(book[s][1]) if q is not None), None)
            if bi is not None and ai is not None:
                t: dict[str, Any] = {"u": last[s], "s": s, "b": f"{100 - bi * 0.01:.2f}", "B": book[s][0][bi],
                                     "a": f"{100 + ai * 0.01:.2f}", "A": book[s][1][ai]}
                if fut:
                    t = {"e": "bookTicker", **t, "T": 1_700_000_000_000 + m, "E": 1_700_000_000_001 + m}
                if market == "coinm":
                    t["ps"] = s[:-4]
                ticker = json.dumps({"stream": f"{s.lower()}@bookTicker", "data": t}, separators=(",", ":")).encode()
        if ticker is not None and rng.random() < 0.2:
            out += [ticker, depth]
        else:
            out += [depth] if ticker is None else [depth, ticker]
        r = rng.random()
        if trades:
            if r < 0.25:
                tr = {"e": "trade", "E": 1_700_000_000_000 + m, "T": 1_700_000_000_000 + m, "s": s, "t": m,
                      "p": "100.00", "q": "1.000", "X": "MARKET", "m": rng.random() < 0.5}
                if not fut:
                    del tr["X"]
                    tr["M"] = True
                out.append(json.dumps({"stream": f"{s.lower()}@trade", "data": tr}, separators=(",", ":")).encode())
        elif r < 0.1:
            tr = {"e": "aggTrade", "E": 1_700_000_000_000 + m, "s": s, "a": m, "p": "100.00", "q": "1.000", "f": m,
                  "l": m, "T": 1_700_000_000_000 + m, "m": rng.random() < 0.5}
            out.append(json.dumps({"stream": f"{s.lower()}@aggTrade", "data": tr}, separators=(",", ":")).encode())
        elif r < 0.2:
            k = {"t": 1_700_000_000_000, "T": 1_700_000_059_999, "s": s, "i": "1m", "f": 1, "L": 2, "o": "100.00",
                 "c": "100.01", "h": "100.02", "l": "99.99", "v": "12.000", "n": 2, "x": False, "q": "1200.0",
                 "V": "6.000", "Q": "600.0", "B": "0"}
            kl = {"e": "kline", "E": 1_700_000_000_000 + m, "s": s, "k": k}
            out.append(json.dumps({"stream": f"{s.lower()}@kline_1m", "data": kl}, separators=(",", ":")).encode())
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


def write_capture(path: Path, snaps: dict[str, bytes], msgs: list[bytes], spot: bool = True,
                  as_recorded: bool = False, market: str | None = None) -> None:
    """The feed as a one-file cryptofeed capture (what ``ddms monitor --record`` writes): the
    connection line naming every symbol's depth stream, each REST snapshot inline, then the
    messages, 0.1 ms apart.  ``as_recorded``: each snapshot follows its symbol's first depth
    message (when a recording client fetched it), not all of them up front -- the layout
    ``ddms serve-feed`` replays without waiting for snapshot requests that cannot come yet.
    ``market`` (``spot``, ``usdm``, ``coinm``; default from ``spot``) picks the hosts."""
    market = market or ("spot" if spot else "usdm")
    host, rest = {"spot": ("stream.binance.com:9443", "https://api.binance.com/api/v3/depth"),
                  "usdm": ("fstream.binance.com", "https://fapi.binance.com/fapi/v1/depth"),
                  "coinm": ("dstream.binance.com", "https://dapi.binance.com/dapi/v1/depth")}[market]
    streams = "/".join(f"{s.lower()}@depth@100ms" for s in snaps)
    t = 1_700_000_000.0
    with open(path, "wb") as f:
        f.write(f"wss://{host}/stream?streams={streams} <-> {t:.4f}\n".encode())
        pending = dict(snaps)

        def snapshot(s: str) -> None:
            nonlocal t
            t += 1e-4
            f.write(f"{rest}?symbol={s}&limit=1000 -> {t:.4f}: ".encode() + pending.pop(s) + b"\n")
        if not as_recorded:
            for s in list(pending):
                snapshot(s)
        for m in msgs:
            t += 1e-4
            f.write(f"{t:.4f}: ".encode() + m + b"\n")
            if pending:
                s = json.loads(m)["data"]["s"]
                if s in pending:
                    snapshot(s)


def write_recorder(path: Path, snaps: dict[str, bytes], msgs: list[bytes]) -> None:
    """The feed as an hftbacktest recorder capture (``<recv ns> <json>`` lines, the format of
    ``../shared/data/binance``; plain text): each symbol's REST snapshot (no envelope) right
    after its first depth message, as the recorder fetches it; lines 0.1 ms apart."""
    t = 1_700_000_000_000_000_000
    pending = dict(snaps)
    with open(path, "wb") as f:
        for m in msgs:
            t += 100_000
            f.write(b"%d " % t + m + b"\n")
            if b"depthUpdate" in m:
                s = json.loads(m)["data"]["s"]
                if s in pending:
                    t += 100_000
                    f.write(b"%d " % t + pending.pop(s) + b"\n")


def _recorder(path: Path, lane: bool = True) -> tuple[int, int, int]:
    """A recorder capture through the reader of ``open_source`` (``lane``: the chunk lane, as
    ``ddms run`` reads it; else line by line, the path a checkpointed run takes): level updates,
    messages, rows."""
    from ddms.io.sources import BinanceCaptureReader, open_source
    r = BinanceCaptureReader(open_source(str(path)), [], symbols=True, lane=lane)
    rows = sum(len(b) for b in r.batches())
    return sum(bk.level_updates for bk in r.books.values()), r.parser.lines, rows


def _recorder_rows(syms: int, nmsg: int, lv: int, reps: int) -> list[Row]:
    """Generated hftbacktest recorder captures (depth, bookTicker, trade streams as the real
    ones; spot and USD-M) and the real USD-M and spot captures through the capture reader,
    chunk lane and line by line interleaved; CPU time."""
    import tempfile
    out = []
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for market in ("spot", "usdm"):
            snaps, msgs = binance_feed(syms, nmsg, lv, market=market, others=True, trades=True)
            path = Path(d) / f"{market}_generated.txt"
            write_recorder(path, snaps, msgs)
            paths.append((f"generated {market}, {syms} symbols, {nmsg:,} depth msgs", path))
        for real in (USDM, SPOT):
            if real.exists():
                paths.append((f"real {real.name}", real))
        for label, path in paths:
            (d1, (lv1, n1, _), t1), (d0, (lv0, _, _), t0) = _interleaved(
                [lambda p=path: _recorder(p), lambda p=path: _recorder(p, lane=False)], reps, time.process_time)
            out.append(Row(SECTION, f"hftbacktest recorder capture ({label}, {n1:,} lines) -> open_source, chunk lane, "
                           "CPU time", lv1 / d1, "level updates/s", ">= 1M", _verdict(lv1 / d1, 1e6, t1)))
            out.append(Row(SECTION, "  same file line by line (the per-line path), interleaved", lv0 / d0,
                           "level updates/s", "", _verdict(0, 0, t0)))
    return out


def _capture_reader(path: Path) -> tuple[int, int, int]:
    from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
    p = CryptofeedParser(str(path))
    rows = 0
    for ev in read_cryptofeed(path, parser=p):
        rows += len(ev.batch)
    summ = p.summary()
    assert summ["gaps"] == 0 and summ["synced"], summ
    return summ["level_updates"], summ["messages_read"], rows


def _capture_engine(path: Path, program: Any, levels: int) -> tuple[int, int, int]:
    from ddms.io.sources import open_source
    from ddms.runtime.engine import Engine
    e = Engine(program)
    relmap = e.relmap(("bids", "asks"))
    rows = 0
    for b in open_source(str(path), symbols=True).batches():
        e.apply(b, relmap)
        rows += len(b)
    assert len(e.views["SYMBOL_BEST_BID"].values()) > 0
    return levels, 0, rows


def _interleaved(fns: list[Callable[[], tuple[int, int, int]]], reps: int,
                 clock: Callable[[], float] = time.perf_counter) -> list[Timing]:
    """:func:`bench.common.interleaved` (``clock``: wall time, or ``time.process_time`` for CPU
    seconds of this process)."""
    return interleaved(fns, reps, clock=clock)


def _end_to_end(snaps: dict[str, bytes], msgs: list[bytes], syms: int, nmsg: int, lv: int, reps: int) -> list[Row]:
    """The end-to-end rows (see the module docstring), in CPU seconds, interleaved with the
    kernel alone (``feed_chunk`` on the messages in memory)."""
    import tempfile

    from ddms.compiler import compile_sql_file
    program = compile_sql_file(Path(__file__).parent.parent / "examples" / "sql" / "symbol_best_bid.sql").program
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "BINANCE.ws.1.0"
        write_capture(path, snaps, msgs)
        mb = path.stat().st_size / 1e6
        levels = _binance_chunked(snaps, msgs)[0]
        (dk, (lk, _, _), tk), (dr, (lr, _, _), tr), (de, _, te) = _interleaved(
            [lambda: _binance_chunked(snaps, msgs), lambda: _capture_reader(path),
             lambda: _capture_engine(path, program, levels)], reps, time.process_time)
    return [
        Row(SECTION, f"END TO END multi-symbol: {syms} symbols x {lv} levels, {nmsg:,} msgs, capture file "
            f"({mb:.0f} MB, cryptofeed format) -> read_cryptofeed, CPU time", lr / dr, "level updates/s", ">= 1M",
            _verdict(lr / dr, 1e6, tr)),
        Row(SECTION, "  same file -> open_source(symbols) -> Engine (symbol_best_bid.sql), CPU time", lr / de,
            "level updates/s", "", _verdict(0, 0, te)),
        Row(SECTION, "  kernel alone (feed_chunk on the messages in memory), CPU time, interleaved", lk / dk,
            "level updates/s", "", _verdict(0, 0, tk)),
    ]


def _cryptofeed(path: Path, chunk: int = 4096) -> tuple[int, int, int]:
    from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
    rows = 0
    parser = CryptofeedParser(str(path))
    for ev in read_cryptofeed(str(path), parser=parser, chunk=chunk):
        rows += len(ev.batch)
    return parser.summary()["level_updates"], 0, rows


def _payloads(path: Path) -> list[bytes]:
    """The received messages of a capture, in memory (the lane's input without the reader)."""
    out = []
    for line in path.read_bytes().split(b"\n")[1:]:
        head, sep, body = line.partition(b": ")
        if sep and b" " not in head:
            out.append(body)
    return out


def _core_chunk(venue: str, msgs: list[bytes]) -> tuple[int, int, int]:
    """The venue core's ``feed_chunk`` on the messages (the numba lane, Python for the rest)."""
    core = _core(venue)
    rows = 0
    for i in range(0, len(msgs), 4096):
        _, events = core.feed_chunk(msgs[i:i + 4096], range(i + 1, min(i + 4097, len(msgs) + 1)))
        rows += sum(len(e.batch) for e in events)
    return core.summary()["level_updates"], len(msgs), rows


def _core_each(venue: str, msgs: list[bytes]) -> tuple[int, int, int]:
    """The same messages one at a time: ``loads_json`` + ``feed`` (the per-message path)."""
    from ddms.io.venues.base import loads_json
    core = _core(venue)
    rows = 0
    for n, m in enumerate(msgs, 1):
        core.feed(loads_json(m), n)
        rows += sum(len(e.batch) for e in core.take_events())
    return core.summary()["level_updates"], len(msgs), rows


def _core(venue: str) -> Any:
    if venue == "kraken":
        from ddms.io.venues.kraken import KrakenBooks
        return KrakenBooks()
    if venue == "okx":
        from ddms.io.venues.okx import OkxBooks
        return OkxBooks()
    from ddms.io.venues.coinbase import CoinbaseBooks
    return CoinbaseBooks()


def _lane_rows(name: str, reps: int) -> list[Row]:
    """A Kraken, OKX or Coinbase capture: the reader with the chunk lane against the reader line by line
    (``chunk=1``: the per-message Python path), and the core's ``feed_chunk`` against its
    per-message ``feed`` on the messages in memory; CPU seconds, interleaved, best of ``reps``."""
    path = VENUES / name
    venue = name.split(".")[0].lower()
    reps = _enough(lambda: _cryptofeed(path), reps)
    (d1, (lv1, _, _), t1), (d0, (lv0, _, _), t0) = _interleaved(
        [lambda: _cryptofeed(path), lambda: _cryptofeed(path, chunk=1)], reps, time.process_time)
    msgs = _payloads(path)
    (dk, (lvk, nk, _), tk), (de, (lve, _, _), te) = _interleaved(
        [lambda: _core_chunk(venue, msgs), lambda: _core_each(venue, msgs)], reps, time.process_time)
    return [
        Row(SECTION, f"cryptofeed {name} (read_cryptofeed, numba chunk lane), CPU time", lv1 / d1,
            "level updates/s", ">= 1M", _verdict(lv1 / d1, 1e6, t1)),
        Row(SECTION, "  same file line by line (chunk=1: the per-message Python path), interleaved", lv0 / d0,
            "level updates/s", "", _verdict(0, 0, t0)),
        Row(SECTION, f"  {venue} core alone: feed_chunk on the {nk:,} messages in memory", lvk / dk,
            "level updates/s", "", f"{nk / dk:,.0f} msgs/s; " + _verdict(0, 0, tk)),
        Row(SECTION, "  same messages through loads_json + feed, interleaved", lve / de, "level updates/s", "",
            _verdict(0, 0, te)),
    ]


def _binance_generated(syms: int, nmsg: int, lv: int, reps: int) -> list[Row]:
    """Generated Binance captures in the cryptofeed format as a real one looks (bookTickers,
    aggTrades and klines between the depth updates: :func:`binance_feed` with ``others``), one
    per market shape (spot, USD-M, COIN-M with its ``ps`` field), through ``read_cryptofeed``;
    CPU time, the three interleaved."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        paths = []
        for market, name in (("spot", "BINANCE"), ("usdm", "BINANCE_FUTURES"), ("coinm", "BINANCE_DELIVERY")):
            snaps, msgs = binance_feed(syms, nmsg, lv, market=market, others=True)
            path = Path(d) / market / f"{name}.ws.1.0"
            path.parent.mkdir()
            write_capture(path, snaps, msgs, market=market)
            paths.append((market, path, len(msgs)))
        got = _interleaved([lambda p=p: _cryptofeed(p) for _, p, _ in paths], reps, time.process_time)
    out = []
    for (market, _path, n), (dt, (levels, _, _), times) in zip(paths, got, strict=True):
        out.append(Row(SECTION, f"cryptofeed generated Binance {market}: {syms} symbols, {nmsg:,} depth msgs + "
                       f"bookTickers/trades/klines ({n:,} msgs) -> read_cryptofeed, CPU time", levels / dt,
                       "level updates/s", ">= 1M", _verdict(levels / dt, 1e6, times)))
    return out


def _snapshots(path: Path) -> tuple[int, int, int]:
    """The REST snapshots of a Binance cryptofeed capture (its ``.http.`` files) as the reader
    applies them: ``loads_json``, the snapshot scan, the book's load."""
    from ddms.io.cryptofeed import CryptofeedParser, capture_files, parse_line
    from ddms.io.venues.base import loads_json
    from ddms.io.venues.binance import BinanceBooks
    p = CryptofeedParser(str(path))
    core = BinanceBooks("futures" if "FUTURES" in path.name else "spot")
    levels = 0
    for http in capture_files(path)[1]:
        with open(http, "rb") as f:
            for n, raw in enumerate(f, 1):
                parsed = parse_line(raw, n, http)
                if parsed is None:
                    continue
                url, body = parsed[1], parsed[3]
                sym = url.split("symbol=")[1].split("&")[0]
                rec = p._snapshot_record(body, loads_json(body))
                core.apply_snapshot(sym, rec, n)
                levels += len(rec.bids) + len(rec.asks)
    core.take_events()
    return levels, 0, 0


def _binance_real(path: Path, reps: int) -> list[Row]:
    """A real Binance capture: the whole read, and its fixed cost (the REST snapshots) apart,
    so the update rate is stated without it; CPU time, interleaved."""
    reps = _enough(lambda: _cryptofeed(path), reps)
    (dt, (levels, _, out), times), (ds, (slv, _, _), stimes) = _interleaved(
        [lambda: _cryptofeed(path), lambda: _snapshots(path)], reps, time.process_time)
    rate = levels / max(dt - ds, 1e-9)
    return [
        Row(SECTION, f"cryptofeed {path.name} (read_cryptofeed), CPU time", levels / dt,
            "level updates/s", "", _verdict(0, 0, times)),
        Row(SECTION, f"  of which the REST snapshots ({slv:,} levels: JSON, scan, book load)", ds * 1e3,
            "ms", "", _verdict(0, 0, stimes)),
        Row(SECTION, "  the rest (updates, tickers, trades; best read minus best snapshots)", rate,
            "level updates/s", ">= 1M", _verdict(rate, 1e6, [])),
    ]


def _l2(path: Path) -> tuple[int, int, int]:
    from ddms.io.sources import open_source
    rows = 0
    for b in open_source(str(path)):
        rows += len(b)
    return rows, 0, rows


def _mbo(path: Path) -> tuple[int, int, int]:
    from ddms.io.dbn import MboReplay, read_dbn
    book = MboReplay(str(path))
    rows = 0
    for ev in read_dbn(str(path), book=book):
        rows += len(ev.batch)
    return book.records, 0, rows


def _best(fn: Callable[[], tuple[int, int, int]], reps: int, clock: Callable[[], float] = time.perf_counter
          ) -> Timing:
    """:func:`_interleaved` of one function (the warm-up compiles or loads numba kernels and fills
    the page cache)."""
    return _interleaved([fn], reps, clock)[0]


def _enough(fn: Callable[[], Any], reps: int, seconds: float = 0.5, most: int = 25) -> int:
    """Repetitions for a small input: at least ``reps``, and as many as fill ``seconds`` of
    CPU time (at most ``most``).  A capture read in 10-20 ms is at the mercy of one busy
    spell of the shared machine: best of 5 of those moved by 10-15% from one run of the bench
    to the next, more repetitions let the best find a quiet moment.  Costs one untimed run."""
    fn()
    t = time.process_time()
    fn()
    dt = time.process_time() - t
    return max(reps, min(most, int(seconds / max(dt, 1e-6))))


def _verdict(rate: float, target: float, times: list[float]) -> str:
    if len(times) > 6:         # many repetitions: the best, the median and how many
        srt = sorted(times)
        runs = f"best {srt[0]:.3f}, median {srt[len(srt) // 2]:.3f} of {len(srt)}"
    else:
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
    rows += _end_to_end(snaps, msgs, syms, nmsg, lv, reps)
    if USDM.exists():
        dt, (levels, _, _), times = _best(lambda: _l2(USDM), reps)
        rows.append(Row(SECTION, "hftbacktest-style L2: usdm capture via open_source", levels / dt, "level rows/s",
                        "", _verdict(0, 0, times)))
    rows += _binance_generated(syms, nmsg, lv, reps)
    rows += _recorder_rows(syms, nmsg, lv, reps)
    for name in ("KRAKEN.ws.50.0", "OKX.ws.1.0", "COINBASE.ws.28.0", "BINANCE.ws.1.0", "BINANCE_FUTURES.ws.1.0"):
        path = VENUES / name
        if path.exists() and name.startswith(("KRAKEN", "OKX", "COINBASE")):
            rows += _lane_rows(name, reps)
        elif path.exists():
            rows += _binance_real(path, reps)
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
