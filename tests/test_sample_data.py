"""``ddms sample-data``: every file reads back through the project's readers without errors, the
Binance captures replay with no gap and every checkable bookTicker equal to the rebuilt book,
the books are never crossed, and the output depends only on the seed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from oracle import Book

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.cli import main
from ddms.io.capture import read_capture
from ddms.io.sources import open_source
from ddms.io.venues.binance_book import BinanceBook
from replay.sample_data import LOBSTER_STEM, SAMPLE_FILES, SampleSizes, write_sample_data

SMALL = SampleSizes(lines=4000, big_lines=12_000, futures_events=500, spot_events=200, lobster_messages=3000)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sample")
    said: list[str] = []
    paths = write_sample_data(root, seed=5, sizes=SMALL, progress=said.append)
    assert [p.relative_to(root).as_posix() for p in paths] == list(SAMPLE_FILES)
    assert len(said) == len(SAMPLE_FILES) and all("wrote" in s for s in said)
    return root


def _events(path: Path, **kw) -> tuple[str, int, int]:
    """(kind, events, last line) of a file read through open_source; any error raises."""
    src = open_source(path, **kw)
    events, last = 0, 0
    for b in src:
        assert b.error is None
        events += len(b)
        last = max(last, b.last_line)
    return src.kind, events, last


@pytest.mark.parametrize("rel, kind", [("finance.csv", "orderbook"), ("big/finance.csv", "orderbook"),
                                       ("finance.parquet", "parquet"), ("binance/usdm_btcusdt.gz", "binance"),
                                       ("binance/spot_btcusdt.gz", "binance"),
                                       (f"lobster/{LOBSTER_STEM}_message_5.csv", "lobster")])
def test_every_file_reads_back_without_errors(sample, rel, kind):
    got, events, last = _events(sample / rel)
    assert got == kind and events > 0
    if rel == "finance.csv":
        assert last == SMALL.lines
    if rel == "big/finance.csv":
        assert last == SMALL.big_lines
    if rel == f"lobster/{LOBSTER_STEM}_message_5.csv":
        assert last == SMALL.lobster_messages


def test_parquet_copy_holds_the_csv_events(sample):
    def cat(path):
        bs = list(open_source(path))
        return (np.concatenate([b.rel for b in bs]), np.concatenate([b.sign for b in bs]),
                np.concatenate([b.cols for b in bs]), np.concatenate([b.line for b in bs]))
    for a, b in zip(cat(sample / "finance.csv"), cat(sample / "finance.parquet"), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("name, market", [("usdm_btcusdt.gz", "futures"), ("spot_btcusdt.gz", "spot")])
def test_binance_capture_replays_with_no_gap_and_bookticker_checks_equal(sample, name, market):
    path = sample / "binance" / name
    assert open_source(path).market == market
    book = BinanceBook(market)
    kinds = set()
    for cap in read_capture(path):
        kinds.add(type(cap.record).__name__)
        book.feed_message(cap.record, cap.recv_ts_ns)
        book.discard_events()
    c = book.counters()
    assert kinds == {"DepthUpdate", "DepthSnapshot", "BookTicker", "Trade"}
    assert c["depth_events"] == (SMALL.futures_events if market == "futures" else SMALL.spot_events)
    assert c["gaps"] == c["resyncs"] == c["stale"] == c["malformed"] == c["snapshots_rejected"] == 0
    assert c["snapshots"] == 1 and c["crossed"] == 0 and c["trades"] > 0
    assert c["applied"] >= c["depth_events"] - 6            # only the events before the snapshot are dropped
    assert c["bookticker_checked"] >= 5 and c["bookticker_mismatch"] == 0
    book._check()


def test_order_book_file_is_never_crossed(sample):
    book = Book()
    crossed = both = 0
    for line in (sample / "finance.csv").read_text().splitlines():
        book.line(line)
        bids = [r[4] for b, r in book.rows.values() if b == "bids"]
        asks = [r[4] for b, r in book.rows.values() if b == "asks"]
        if bids and asks:
            both += 1
            crossed += max(bids) >= min(asks)
    assert both > 0.8 * SMALL.lines and crossed == 0


def test_lobster_orderbook_file_matches_the_message_file(sample):
    """The orderbook file's 5 levels a side after each message, against an independent replay of
    the message file (LOBSTER's semantics: 1 submit, 2 partial cancel, 3 delete, 4 execute)."""
    msgs = (sample / "lobster" / f"{LOBSTER_STEM}_message_5.csv").read_text().splitlines()
    rows = (sample / "lobster" / f"{LOBSTER_STEM}_orderbook_5.csv").read_text().splitlines()
    assert len(msgs) == len(rows) == SMALL.lobster_messages
    orders: dict[int, list] = {}
    types = set()
    for m, r in zip(msgs, rows, strict=True):
        _, typ, oid, size, price, direction = m.split(",")
        typ, oid, size = int(typ), int(oid), int(size)
        types.add(typ)
        if typ == 1:
            orders[oid] = [int(direction), size, int(price)]
        elif typ in (2, 3, 4):
            o = orders[oid]
            o[1] -= size if typ != 3 else o[1]
            assert o[1] >= 0
            if o[1] == 0:
                del orders[oid]
        levels = {1: {}, -1: {}}
        for d, s, p in orders.values():
            levels[d][p] = levels[d].get(p, 0) + s
        asks, bids = sorted(levels[-1].items()), sorted(levels[1].items(), reverse=True)
        want = []
        for i in range(5):
            want += list(asks[i]) if i < len(asks) else [9_999_999_999, 0]
            want += list(bids[i]) if i < len(bids) else [-9_999_999_999, 0]
        assert [int(x) for x in r.split(",")] == want
        if asks and bids:
            assert bids[0][0] < asks[0][0]
    assert types == {1, 2, 3, 4}


def _digest(root: Path) -> dict[str, str]:
    out = {}
    for rel in SAMPLE_FILES:
        if rel.endswith(".parquet"):      # the metadata names the source path: compare the rows
            out[rel] = str(pq.read_table(root / rel).to_pydict())
        else:
            out[rel] = hashlib.sha256((root / rel).read_bytes()).hexdigest()
    return out


def test_same_seed_same_files_and_the_cli(sample, tmp_path, capsys):
    again = tmp_path / "again"
    write_sample_data(again, seed=5, sizes=SMALL)
    assert _digest(again) == _digest(sample)
    other = tmp_path / "other"
    write_sample_data(other, seed=6, sizes=SMALL)
    assert _digest(other)["finance.csv"] != _digest(sample)["finance.csv"]
    cli = tmp_path / "cli"
    assert main(["sample-data", str(cli), "--lines", "1000", "--big-lines", "2000", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert f"under {cli}/" in err and "ddms run examples/m3/vwap.m3 --data" in err
    assert all((cli / rel).is_file() for rel in SAMPLE_FILES)
    assert (cli / "finance.csv").read_text().count("\n") == 1000
    assert not list(cli.rglob(".*.tmp*"))                 # no temporary file left behind
    (tmp_path / "file").write_text("x")
    assert main(["sample-data", str(tmp_path / "file")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("name, market", [("usdm_btcusdt.gz", "futures"), ("spot_btcusdt.gz", "spot")])
def test_binance_capture_through_serve_feed_and_monitor(sample, name, market):
    """The sample captures work where the README uses captures: ddms serve-feed's replay server
    (REST snapshot and streams) and the monitor's book, over loopback websockets."""
    import asyncio
    import io
    import json

    from ddms.feeds.monitor import Monitor, MonitorConfig
    from ddms.feeds.server import load_replay
    from ddms.feeds.transport import ServeConfig, serve_replay

    async def session():
        core = load_replay(sample / "binance" / name)
        ready = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve_replay(core, ServeConfig(), ready.set_result, log=lambda m: None))
        url = await asyncio.wait_for(ready, 30)
        out = io.StringIO()
        mon = Monitor(MonitorConfig(url, json=True, once=True, display=False), out=out)
        summary = await asyncio.wait_for(mon.run(), 60)
        await asyncio.wait_for(server, 10)
        return summary, [json.loads(x) for x in out.getvalue().splitlines()]

    s, lines = asyncio.run(session())
    assert s["market"] == market and s["protocol"] == "binance"
    assert s["depth_events"] == (SMALL.futures_events if market == "futures" else SMALL.spot_events)
    assert s["gaps"] == s["resyncs"] == s["crossed"] == s["malformed"] == s["stale"] == 0
    assert s["bookticker_checked"] >= 5 and s["bookticker_mismatch"] == 0 and s["snapshots"] == 1
    assert not [x for x in lines if x.get("event") == "problem"]
