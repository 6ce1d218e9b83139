"""qa38 (issue 22, outside checker): captures ddms has not seen, written by tests/qa38_gen.py from the
venues' documentation, replayed as a user would (`ddms run`, `ddms serve-feed` + `ddms monitor`),
against the generator's ground truth (the final book per symbol: best prices and sizes, volume sums,
level counts); faults injected per symbol must resync that symbol only; `--skip-bad` must hold for
every command over multi-symbol files.

Fast (default suite): the backtest `--skip-bad` regression (in process) and one `ddms run` over
several venues' captures merged. Slow (`-m slow`): every venue through serve-feed + monitor, 50
USD-M symbols, per-symbol fault injection. Each CLI call is a subprocess (~1-3 s plus replay).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import qa38_drive as drive
import qa38_gen as gen

from ddms.errors import InputError
from ddms.io.sources import file_symbols
from replay.backtest import symbol_partitions

# unusual spellings: leading digits, long names, dots, dashes, slashes, options and dated futures
SPOT = ["BTCUSDT", "1000SATSUSDT", "ETH2BTC", "A2ZUSDT", "1INCHUSDT", "BNBFDUSD", "XRPTRY", "PEPEUSDT",
        "SPOT9USDT", "SPOT10USDT"]
USDM = ["ETHUSDT", "1000SHIBUSDT", "1000000MOGUSDT", "ETHUSDT_240628", "BTCDOMUSDT"] + [f"Z{i}USDT" for i in range(7)]
COINM = ["BTCUSD_PERP", "ETHUSD_PERP", "BTCUSD_240927", "DOGEUSD_PERP", "1000SHIBUSD_PERP"]
KRAKEN = ["XBT/USD", "ETH/XBT", "1INCH/EUR", "XDG/USD", "WAVES/EUR", "SHIB/USD", "USDT/USD", "ETH2.S/ETH",
          "A0B/EUR", "A1B/EUR", "A2B/EUR"]
OKX = ["BTC-USD-SWAP", "BTC-USDT", "ETH-USD-240329", "1INCH-USDT", "SHIB-USDT-SWAP", "BTC-USD-240329-60000-C"]
COINBASE = ["BTC-USD", "00-USD", "1INCH-USD", "SHIB-USDC", "ETH-BTC", "WBTC-BTC", "T0-EUR", "T1-EUR"]
TARDIS = ["XRPUSDT", "1000PEPEUSDT", "SOLUSDT"]


def _captures(root: Path, events: int = 600) -> dict[str, dict]:
    """One generated capture per venue (symbols distinct across venues, so they merge)."""
    c = {}
    c["spot"] = gen.binance(gen.Truth(SPOT, seed=1, events=events, pdec=[2, 8, 6], qdec=[5, 0, 3]),
                            root / "spot", market="spot")
    c["usdm"] = gen.binance(gen.Truth(USDM, seed=2, events=events, pdec=[1, 6, 7], qdec=[3, 0]),
                            root / "usdm", market="usdm")
    c["coinm"] = gen.binance(gen.Truth(COINM, seed=3, events=events // 2, pdec=[1, 2, 5], qdec=0),
                             root / "coinm", market="coinm")
    c["kraken"] = gen.kraken(gen.Truth(KRAKEN, seed=4, events=events, pdec=[1, 5, 9, 7], qdec=8),
                             root / "kraken", depth=10)
    c["okx"] = gen.okx(gen.Truth(OKX, seed=5, events=events, pdec=[1, 2, 8], qdec=[0, 8, 2], levels=60),
                       root / "okx")
    c["coinbase"] = gen.coinbase(gen.Truth(COINBASE, seed=6, events=events, pdec=[2, 8, 5], qdec=[8, 2]),
                                 root / "coinbase")
    c["tardis"] = gen.tardis(gen.Truth(TARDIS, seed=7, events=events // 2, pdec=[1, 6], qdec=3), root / "tardis")
    return c


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> dict[str, dict]:
    return _captures(tmp_path_factory.mktemp("qa38"))


def _want(cap: dict) -> dict:
    return {s: gen.summary(b) for s, b in cap["expected"].items()}


# ------------------------------------------------------------------------------ fast


def _kraken_with_bad_line_10(tmp_path):
    """A two-symbol Kraken capture whose line 10 is junk (not UTF-8): the file and the generator's record."""
    cap = gen.kraken(gen.Truth(["XBT/USD", "1INCH/EUR"], seed=14, events=80, pdec=[1, 5], qdec=8), tmp_path,
                     depth=10)
    f = cap["files"][0]
    lines = f.read_bytes().split(b"\n")
    lines.insert(9, b"\xff\xfe junk")
    f.write_bytes(b"\n".join(lines))
    return f, cap


def test_backtest_skip_bad_lists_symbols_of_a_file_with_bad_lines(tmp_path) -> None:
    """`ddms backtest FILE --skip-bad` over a multi-symbol capture with a bad line: the symbol
    listing (one partition per symbol) skipped the bad line as the runs do; it used to stop with
    the line's InputError before any run (cryptofeed captures and tardis CSV)."""
    f, cap = _kraken_with_bad_line_10(tmp_path)
    with pytest.raises(InputError, match=":10:"):
        file_symbols(f)
    assert file_symbols(f, skip_bad=True) == ["XBT/USD", "1INCH/EUR"]
    assert symbol_partitions([str(f)], skip_bad=True) == [f"{f}#XBT/USD", f"{f}#1INCH/EUR"]
    t = tmp_path / "t"
    tcap = gen.tardis(gen.Truth(["A1", "B2"], seed=3, events=40), t)
    tf = tcap["files"][0]
    tf.write_text(tf.read_text().replace("\n", "\nnot,a,row\n", 1))
    assert file_symbols(tf, skip_bad=True) == ["A1", "B2"]


def test_run_merged_venues_equals_truth(captures) -> None:
    """`ddms run` over six venues' captures at once (--data repeated, merged by receive time):
    every symbol's best bid/ask, volume sums and level counts equal the generator's truth."""
    files = [c["files"][0] for c in captures.values()]
    p, got = drive.run_views(files)
    assert p.returncode == 0 and got is not None, p.stderr[-2000:]
    want = {}
    for c in captures.values():
        want.update(_want(c))
    assert drive.compare(got, want) == []


# ------------------------------------------------------------------------------ slow


@pytest.mark.slow
@pytest.mark.parametrize("venue", ["spot", "usdm", "coinm", "kraken", "okx", "coinbase", "tardis"])
def test_run_each_venue(captures, venue) -> None:
    p, got = drive.run_views(captures[venue]["files"][:1])
    assert p.returncode == 0 and got is not None, p.stderr[-2000:]
    assert drive.compare(got, _want(captures[venue])) == []


@pytest.mark.slow
@pytest.mark.parametrize("venue", ["spot", "usdm", "coinm", "kraken", "okx", "coinbase"])
def test_serve_feed_monitor_each_venue(captures, venue) -> None:
    """serve-feed --speed max + monitor --once --json: every symbol synced, 0 gaps/resyncs/crossed,
    every checksum checked (Kraken: every update; OKX: snapshot + every update), every bookTicker
    checked and equal, the final best bid/ask (price and size strings) equal the truth."""
    cap = captures[venue]
    summary, _, srv, err = drive.serve_monitor(cap["files"][0])
    assert summary is not None, srv[-2000:] + err[-2000:]
    assert drive.check_summary(summary, cap["expected"], checksums=cap.get("checksums"),
                               booktickers=cap.get("booktickers")) == []


@pytest.mark.slow
def test_fifty_usdm_symbols_late_snapshots(tmp_path) -> None:
    """50 USD-M symbols, 3,000 events, every snapshot taken 1-12 events in and received up to 8
    messages late (or straddling an event): run and monitor both equal the truth."""
    names = [f"S{i}{'X' * (i % 9)}USDT" for i in range(45)] + ["1000SHIBUSDT", "1000BONKUSDT", "BTCUSDT",
                                                               "ETHUSDT_250328", "1000000MOGUSDT"]
    cap = gen.binance(gen.Truth(names, seed=50, events=3000, pdec=[1, 4, 7], qdec=[3, 0]), tmp_path,
                      market="usdm")
    p, got = drive.run_views(cap["files"][:1])
    assert p.returncode == 0 and got is not None, p.stderr[-2000:]
    assert drive.compare(got, _want(cap)) == []
    summary, _, srv, err = drive.serve_monitor(cap["files"][0])
    assert summary is not None, srv[-2000:] + err[-2000:]
    assert drive.check_summary(summary, cap["expected"], booktickers=cap["booktickers"]) == []


FAULTS = [("spot", "1000SATSUSDT", "drop"), ("spot", "1000SATSUSDT", "reorder"),
          ("usdm", "1000000MOGUSDT", "drop"), ("usdm", "1000000MOGUSDT", "corrupt"),
          ("coinm", "BTCUSD_240927", "reorder"),
          ("kraken", "1INCH/EUR", "checksum"), ("kraken", "ETH2.S/ETH", "drop"),
          ("okx", "BTC-USD-240329-60000-C", "checksum"), ("okx", "1INCH-USDT", "drop"),
          ("coinbase", "00-USD", "corrupt")]


@pytest.mark.slow
@pytest.mark.parametrize(("venue", "symbol", "kind"), FAULTS)
def test_fault_resyncs_that_symbol_only(captures, venue, symbol, kind) -> None:
    """A fault at the symbol's 20th book message: that symbol reports a gap/mismatch/malformed
    message and resyncs, no other symbol does, and every book (the faulted one after its
    resync) ends equal to the truth."""
    cap = captures[venue]
    summary, _, srv, err = drive.serve_monitor(cap["files"][0], "--fault", f"{kind}@20#{symbol}")
    assert summary is not None, srv[-2000:] + err[-2000:]
    syms = summary["symbols"]
    hit = {s for s, v in syms.items()
           if v.get("gaps") or v.get("resyncs") or v.get("checksum_mismatch") or v.get("malformed")}
    assert hit == {symbol}, syms
    assert syms[symbol]["resyncs"] >= 1
    # at --speed max the server may finish the replay before the resync's snapshot arrives (the
    # monitor lags behind on a loaded machine): then the symbol truthfully ends unsynced
    assert all(v["synced"] and not v.get("crossed") for s, v in syms.items() if s != symbol)
    for s, book in cap["expected"].items():
        if s == symbol and not syms[s]["synced"]:
            continue
        assert syms[s]["best_bid"] == list(book["bids"][0]), s
        assert syms[s]["best_ask"] == list(book["asks"][0]), s


def test_partition_views_skip_bad(tmp_path) -> None:
    """`ddms run --spark M --skip-bad`: each (file, symbol) task skips bad lines too (the task's
    parameters carry skip_bad; before, the tasks replayed without it and stopped at the line)."""
    from replay.viewtask import partition_views

    f, cap = _kraken_with_bad_line_10(tmp_path)
    with pytest.raises(InputError, match=":10:"):
        partition_views(f"{f}#1INCH/EUR", str(drive.SQL), {"every": 0})
    row = partition_views(f"{f}#1INCH/EUR", str(drive.SQL), {"every": 0, "skip_bad": 1})
    want = gen.summary(cap["expected"]["1INCH/EUR"])
    import json
    views = json.loads(row["rows"][-1])["views"]
    assert views["BEST_BID"][0][:2] == ["1INCH/EUR", want["best_bid"]]
    assert views["BEST_ASK"][0][:2] == ["1INCH/EUR", want["best_ask"]]


def test_binance_book_ignores_other_streams() -> None:
    """A one-symbol Binance feed (serve-feed of an hftbacktest capture, a live single-book monitor)
    carrying aggTrade / kline / markPrice streams: counted in ``ignored`` by stream kind, not as
    malformed messages (the multi-symbol venue core already did so); a real junk message still is."""
    from ddms.io.venues.binance_book import FUTURES, BinanceBook

    bk = BinanceBook(FUTURES, source="t")
    agg = (b'{"stream":"1000shibusdt@aggTrade","data":{"e":"aggTrade","E":1,"s":"1000SHIBUSDT","a":5,'
           b'"p":"0.011","q":"1","f":5,"l":5,"T":1,"m":true}}')
    bk.feed_message(agg)
    bk.feed_message(agg.decode())
    bk.feed_message({"stream": "btcusdt@kline_1m", "data": {"e": "kline", "k": {}}})
    bk.feed_message(b'{"stream":"btcusdt@markPrice@1s","data":{"e":"markPriceUpdate","p":"1"}}')
    assert bk.ignored == {"aggtrade": 2, "kline_1m": 1, "markprice@1s": 1}
    assert bk.malformed == 0 and not bk.reports
    bk.feed_message(b'{"stream":"btcusdt@depth@100ms","data":{"e":"junk"}}')
    bk.feed_message(b"\xff not json")
    assert bk.malformed == 2 and len(bk.reports) == 2
    meta, _ = bk.save_state()
    assert meta["ignored"] == bk.ignored


MBO = {"ESH4": 17077, "NQH4": 2130, "ESH4-ESM4": 99001, "6EH4": 42, "UD:1V: VT 0123": 7000001}


def _check_mbo_every_line(tmp_path, events: int, seed: int) -> None:
    cap = gen.dbn_mbo(tmp_path, MBO, seed=seed, events=events)
    p, rows = drive.run_views_every(cap["files"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(rows) == len(cap["trace"])
    for (line, got), want in zip(rows, cap["trace"], strict=True):
        assert drive.compare(got, want) == [], line


def test_dbn_mbo_unseen_every_line(tmp_path) -> None:
    """A DBN MBO file written by databento-dbn (5 instruments with odd names, snapshot, partial
    cancels, modifies of price and size, Trade+Fill+Cancel events of 3 records, None records, a
    cleaR each): after every ddms update (one per F_LAST event that changes rows) each
    instrument's best bid/ask, volume sums and order counts equal the generator's truth."""
    _check_mbo_every_line(tmp_path, 600, 1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3])
def test_dbn_mbo_unseen_every_line_long(tmp_path, seed) -> None:
    _check_mbo_every_line(tmp_path, 5000, seed)


@pytest.mark.slow
def test_hftbacktest_two_symbols(tmp_path) -> None:
    """An hftbacktest capture of two USD-M symbols (their REST snapshot lines name no symbol, each
    received late, after a few buffered events): run and serve-feed + monitor equal the truth."""
    a = gen.binance(gen.Truth(["1000SHIBUSDT"], seed=21, events=300, pdec=6, qdec=0), tmp_path, market="usdm",
                    hft=True, name="a.txt")
    b = gen.binance(gen.Truth(["BTCUSDT"], seed=22, events=300, pdec=1, qdec=3, t0=1700000000.003), tmp_path,
                    market="usdm", hft=True, name="b.txt")
    lines = (tmp_path / "a.txt").read_text().splitlines() + (tmp_path / "b.txt").read_text().splitlines()
    both = tmp_path / "both.txt"
    both.write_text("\n".join(sorted(lines, key=lambda ln: int(ln.split(" ", 1)[0]))) + "\n")
    expected = {**a["expected"], **b["expected"]}
    p, got = drive.run_views([both])
    assert p.returncode == 0 and got is not None, p.stderr[-2000:]
    assert drive.compare(got, {s: gen.summary(bk) for s, bk in expected.items()}) == []
    summary, _, srv, err = drive.serve_monitor(both)
    assert summary is not None, srv[-2000:] + err[-2000:]
    assert drive.check_summary(summary, expected, booktickers=a["booktickers"] + b["booktickers"]) == []


def test_hftbacktest_two_symbols_one_id_space(tmp_path) -> None:
    """USD-M update ids come from one sequence shared by the symbols: with the two symbols' ids
    shifted into the same range, a snapshot line's lastUpdateId fits both symbols' events, and
    serve-feed must place it where `ddms run` does (the book waiting for it), not refuse the
    capture ("no depth snapshot line fits", found by the qa38 outside check)."""
    a = gen.binance(gen.Truth(["1000SHIBUSDT"], seed=21, events=300, pdec=6, qdec=0), tmp_path, market="usdm",
                    hft=True, name="a.txt")
    b = gen.binance(gen.Truth(["BTCUSDT"], seed=22, events=300, pdec=1, qdec=3, t0=1700000000.003), tmp_path,
                    market="usdm", hft=True, name="b.txt")
    ids = re.compile(rb'"(U|u|pu|lastUpdateId)":(\d+)')
    first = [int(ids.search((tmp_path / n).read_bytes()).group(2)) for n in ("a.txt", "b.txt")]
    shift = first[0] - first[1]
    b_lines = [ids.sub(lambda m: b'"%s":%d' % (m.group(1), int(m.group(2)) + shift), ln)
               for ln in (tmp_path / "b.txt").read_bytes().splitlines()]
    lines = (tmp_path / "a.txt").read_bytes().splitlines() + b_lines
    both = tmp_path / "both.txt"
    both.write_bytes(b"\n".join(sorted(lines, key=lambda ln: int(ln.split(b" ", 1)[0]))) + b"\n")
    expected = {**a["expected"], **b["expected"]}
    p, got = drive.run_views([both])
    assert p.returncode == 0 and got is not None, p.stderr[-2000:]
    assert drive.compare(got, {s: gen.summary(bk) for s, bk in expected.items()}) == []
    summary, _, srv, err = drive.serve_monitor(both)
    assert summary is not None, srv[-2000:] + err[-2000:]
    assert drive.check_summary(summary, expected, booktickers=a["booktickers"] + b["booktickers"]) == []


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
def test_run_every_line_in_stream_snapshots(tmp_path, venue) -> None:
    """Kraken (depth 10: client-side truncation, republished levels), OKX (empty updates make no
    line) and Coinbase: after every book message, each started symbol's best bid/ask, volume sums
    and level counts equal the truth (`ddms run --every 1`)."""
    truths = {"kraken": lambda: gen.kraken(gen.Truth(KRAKEN[:5], seed=4, events=200, pdec=[1, 5, 9, 7], qdec=8),
                                           tmp_path, depth=10),
              "okx": lambda: gen.okx(gen.Truth(OKX, seed=5, events=200, pdec=[1, 2, 8], qdec=[0, 8, 2], levels=60),
                                     tmp_path),
              "coinbase": lambda: gen.coinbase(gen.Truth(COINBASE[:5], seed=6, events=200, pdec=[2, 8, 5],
                                                         qdec=[8, 2]), tmp_path)}
    cap = truths[venue]()
    p, rows = drive.run_views_every(cap["files"])
    assert p.returncode == 0, p.stderr[-2000:]
    assert len(rows) == len(cap["trace"])
    for (line, got), want in zip(rows, cap["trace"], strict=True):
        assert drive.compare(got, want) == [], line


@pytest.mark.slow
@pytest.mark.parametrize(("venue", "symbol"), [("kraken", "XDG/USD"), ("okx", "1INCH-USDT"), ("coinbase", "SHIB-USDC")])
def test_lost_snapshot_resubscribes(captures, venue, symbol) -> None:
    """The symbol's first book message (its snapshot) dropped: its updates arrive with no book.
    The monitor reports it and resubscribes that symbol (it used to drop every update of the
    symbol silently for the rest of the session: 0 gaps, 0 resyncs, never synced)."""
    cap = captures[venue]
    summary, events, srv, err = drive.serve_monitor(cap["files"][0], "--fault", f"drop@1#{symbol}")
    assert summary is not None, srv[-2000:] + err[-2000:]
    st = summary["symbols"][symbol]
    assert st["gaps"] == 1 and st["resyncs"] == 1, st
    assert any(e.get("event") == "problem" and "no snapshot (lost)" in e.get("reason", "") for e in events)
    assert any(e.get("event") == "subscription" and f"resubscribe {symbol}" in e.get("reason", "") for e in events)
    others = {s: v for s, v in summary["symbols"].items() if s != symbol}
    assert all(v["synced"] and not v["gaps"] and not v["resyncs"] for v in others.values()), others
    if st["synced"]:   # (unless the max-speed replay ended before the new snapshot)
        book = cap["expected"][symbol]
        assert st["best_bid"] == list(book["bids"][0]) and st["best_ask"] == list(book["asks"][0])


def test_session_lost_snapshot_in_process() -> None:
    """VenueSession (no sockets): an OKX book update of a symbol with no snapshot yet is a resync
    (a resubscribe of that symbol), once; a later snapshot syncs it."""
    from ddms.feeds.venue_session import SendText, VenueSession

    sess = VenueSession("okx", ["BTC-USDT", "ETH-USDT"], "wss://ws.okx.com:8443/ws/v5/public")
    upd = {"arg": {"channel": "books", "instId": "BTC-USDT"}, "action": "update",
           "data": [{"asks": [["100.1", "1", "0", "1"]], "bids": [], "ts": "1", "prevSeqId": 5, "seqId": 6}]}
    acts, sym = sess.feed(json_bytes(upd))
    assert sym == "BTC-USDT" and [type(a) for a in acts] == [SendText, SendText]
    assert "resubscribe BTC-USDT" in acts[0].reason and "no snapshot (lost)" in acts[0].reason
    acts, _ = sess.feed(json_bytes(upd))            # dropped until the snapshot, no second resync
    assert acts == [] and sess.core.status["BTC-USDT"].resyncs == 1
    snap = {"arg": {"channel": "books", "instId": "BTC-USDT"}, "action": "snapshot",
            "data": [{"asks": [["100.1", "1", "0", "1"]], "bids": [["99.9", "2", "0", "1"]], "ts": "2",
                      "prevSeqId": -1, "seqId": 7}]}
    acts, _ = sess.feed(json_bytes(snap))
    assert acts == [] and sess.core.status["BTC-USDT"].synced
    assert "ETH-USDT" not in sess.core.status or not sess.core.status["ETH-USDT"].resyncs


def json_bytes(obj) -> bytes:
    import json
    return json.dumps(obj).encode()
