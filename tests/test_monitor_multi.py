"""``ddms monitor URL URL ...``: several connections (venues, or one Binance feed split over
connections) feeding one engine, over real loopback websockets (``serve-feed`` in-process).

* two venues' captures at once (the real Kraken + OKX of ../shared/data/venues, skipped where
  absent): every symbol synced, 0 gaps, the checksums verified with each venue's counts alone,
  the per-symbol views equal to each venue monitored alone;
* a fault on one connection (close, checksum corruption) is recovered on that connection only,
  the other one keeps running untouched, and every book ends equal to the truth;
* two venues spelling a symbol alike (Binance spot and USD-M) are keyed ``VENUE:SYMBOL`` in the
  views and the summary; one venue's symbol on two connections is refused;
* a Binance feed with more symbols than one connection carries (the cap lowered by a
  parameter) opens several connections by itself, each under the cap;
* ``--record`` writes one recording per connection, which replays to the same per-symbol
  summary and which ``ddms run --data A --data B`` reads to the monitor's final views;
* the command line: URLs, ``--symbols`` once or per URL, ``--checkpoint`` refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from pathlib import Path

import pytest
from conftest import REPO, SHARED
from test_feeds_venues import _books_equal_truth, _session, write_binance_capture, write_venue_capture

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import DdmsError
from ddms.feeds import server as feed_server
from ddms.feeds import venue_server
from ddms.feeds.monitor import Monitor, MonitorConfig, _symbol_table, numbered_recording
from ddms.feeds.server import load_replay, parse_fault
from ddms.feeds.transport import ServeConfig, serve_replay

VENUES = SHARED / "data" / "venues"
SPREAD = str(REPO / "examples" / "sql" / "symbol_spread.sql")
BEST_BID = str(REPO / "examples" / "sql" / "symbol_best_bid.sql")
_SAME = ("depth_events", "gaps", "resyncs", "checksum_checked", "checksum_mismatch", "bookticker_checked",
         "bookticker_mismatch", "crossed", "synced", "best_bid", "best_ask")


async def _multi(paths: list[Path], *, faults: dict[int, list[str]] | None = None, rate: float = 0.0,
                 **mon_kw) -> tuple[Monitor, dict, list[dict]]:
    """One ``serve-feed`` per capture and one monitor of all their URLs (in this process)."""
    faults = faults or {}
    loop = asyncio.get_running_loop()
    servers, urls = [], []
    for i, p in enumerate(paths):
        core = load_replay(p, faults=tuple(parse_fault(f) for f in faults.get(i, ())))
        ready: asyncio.Future = loop.create_future()
        servers.append(asyncio.create_task(serve_replay(core, ServeConfig(speed=0.0, rate=rate), ready.set_result,
                                                        log=lambda _m: None)))
        urls.append(await asyncio.wait_for(ready, 30))
    out = io.StringIO()
    mon = Monitor(MonitorConfig(urls[0], urls=tuple(urls[1:]), json=True, once=True, display=False, **mon_kw),
                  out=out)
    try:
        summary = await asyncio.wait_for(mon.run(), 120)
        for s in servers:
            await asyncio.wait_for(s, 30)
    finally:
        for s in servers:
            s.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await s
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[-1] == summary
    mon._check()
    return mon, summary, lines


def run(coro):
    return asyncio.run(coro)


def _clean_multi(s: dict) -> None:
    assert s["synced"] and s["gaps"] == 0 and s["resyncs"] == 0 and s["crossed"] == 0
    assert s["checksum_mismatch"] == 0 and s["bookticker_mismatch"] == 0 and s["problems"] == 0
    for d in s["symbols"].values():
        assert d["synced"] and d["gaps"] == d["resyncs"] == d["crossed"] == 0


# ------------------------------------------------------------------------------------------
# two real venues at once
# ------------------------------------------------------------------------------------------

def test_kraken_and_okx_at_once_equal_each_alone():
    paths = [VENUES / "KRAKEN.ws.50.0", VENUES / "OKX.ws.1.0"]
    if not all(p.exists() for p in paths):
        pytest.skip("../shared/data/venues not available")
    mon, s, lines = run(_multi(paths, views=SPREAD))
    _clean_multi(s)
    assert s["venues"] == ["kraken", "okx"] and len(s["connections"]) == 2
    assert s["checksum_checked"] == 4269 + 290
    alone = [run(_session(p, views=SPREAD)) for p in paths]
    want_rows: list = []
    for (_, single, a, _), venue in zip(alone, ("kraken", "okx"), strict=True):
        for sym, d in a["symbols"].items():        # each symbol keyed as its venue spells it
            got = s["symbols"][sym]
            assert got["venue"] == venue and got["symbol"] == sym
            assert {k: got[k] for k in _SAME} == {k: d[k] for k in _SAME}, sym
        want_rows += single.engine.snapshot()["SYMBOL_SPREAD"]
    assert len(s["symbols"]) == 13
    for k in ("messages", "depth_events", "checksum_checked", "level_updates", "snapshots"):
        assert s[k] == sum(a[k] for _, _, a, _ in alone), k      # top-level fields summed
    got_rows = mon.engine.snapshot()["SYMBOL_SPREAD"]
    assert sorted(got_rows) == sorted(want_rows) and len(got_rows) == 13
    # JSON lines say which connection and venue; the views' changes carry the symbol in their key
    conn = [x for x in lines if x.get("event") == "connected"]
    assert sorted((x["connection"], x["venue"]) for x in conn) == [(1, "kraken"), (2, "okx")]
    changes = [x for x in lines if x.get("event") == "change"]
    assert changes and {x["line"] for x in changes} <= set(range(1, mon.engine.position + 1))
    assert {x["key"][0] for x in changes if x["view"] == "SYMBOL_SPREAD"} == set(s["symbols"])


# ------------------------------------------------------------------------------------------
# a fault on one connection
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("faulty,fault", [(1, "close@60"), (0, "checksum@5#{sym}"), (1, "corrupt@8#{sym}")])
def test_fault_on_one_connection_is_recovered_there_only(tmp_path, faulty, fault):
    (tmp_path / "k").mkdir()
    (tmp_path / "o").mkdir()
    kpath, ktruth, _ = write_venue_capture(tmp_path / "k", "kraken", 21)
    opath, otruth, _ = write_venue_capture(tmp_path / "o", "okx", 22)
    truths = [ktruth, otruth]
    target = sorted(truths[faulty])[1]
    mon, s, lines = run(_multi([kpath, opath], faults={faulty: [fault.format(sym=target)]}, rate=400))
    conns = mon.conns()
    for i, m in enumerate(conns):
        _books_equal_truth(m, truths[i], ("kraken", "okx")[i])
    per = s["connections"]
    other = 1 - faulty
    assert per[other]["reconnects"] == 0 and per[other]["resyncs"] == 0 and per[other]["gaps"] == 0
    assert per[other]["checksum_mismatch"] == 0 and per[other]["problems"] == 0
    for sym in truths[other]:
        assert s["symbols"][sym]["resyncs"] == 0 and s["symbols"][sym]["synced"]
    if fault.startswith("close"):
        assert per[faulty]["reconnects"] == 1
        assert all(s["symbols"][sym]["resyncs"] == 1 for sym in truths[faulty])
    else:
        assert per[faulty]["reconnects"] == 0 and s["symbols"][target]["resyncs"] >= 1
        assert all(s["symbols"][sym]["resyncs"] == 0 for sym in truths[faulty] if sym != target)
        problems = [x for x in lines if x.get("event") == "problem"]
        assert problems and all(x["connection"] == faulty + 1 and x["symbol"] == target for x in problems)
    assert all(d["synced"] and d["crossed"] == 0 for d in s["symbols"].values())


# ------------------------------------------------------------------------------------------
# two venues spelling a symbol alike
# ------------------------------------------------------------------------------------------

def test_same_symbol_on_two_venues_is_keyed_by_venue(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "f").mkdir()
    spath, struth = write_binance_capture(tmp_path / "s", 31, "spot")
    fpath, ftruth = write_binance_capture(tmp_path / "f", 32, "futures")
    assert set(struth) == set(ftruth)
    mon, s, _ = run(_multi([spath, fpath], views=BEST_BID))
    _clean_multi(s)
    want = {f"binance:{x}" for x in struth} | {f"binance_futures:{x}" for x in ftruth}
    assert set(s["symbols"]) == want
    for key, d in s["symbols"].items():
        assert key == f"{d['venue']}:{d['symbol']}"
    rows = {r[0]: r[1] for r in mon.engine.snapshot()["SYMBOL_BEST_BID"]}
    for venue, truth in (("binance", struth), ("binance_futures", ftruth)):
        for sym, (bids, _) in truth.items():
            assert rows[f"{venue}:{sym}"] == max(float(p) for p in bids), (venue, sym)
    _books_equal_truth(mon.conns()[0], struth, "binance")
    _books_equal_truth(mon.conns()[1], ftruth, "binance")


def test_different_symbols_keep_their_spelling_and_one_symbol_twice_is_refused(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    spath, struth = write_binance_capture(tmp_path / "a", 33, "spot", symbols=("AAAUSDT", "BBBUSDT"))
    fpath, ftruth = write_binance_capture(tmp_path / "b", 34, "futures", symbols=("CCCUSDT",))
    _, s, _ = run(_multi([spath, fpath]))
    assert set(s["symbols"]) == {"AAAUSDT", "BBBUSDT", "CCCUSDT"}
    assert s["symbols"]["CCCUSDT"]["venue"] == "binance_futures" and s["symbols"]["AAAUSDT"]["connection"] == 1
    with pytest.raises(DdmsError, match="followed on two connections"):
        run(_multi([spath, spath]))
    # a view of one book is refused over several symbols, whichever connection has them
    with pytest.raises(DdmsError, match="declare a symbol column"):
        run(_multi([spath, fpath], views=str(REPO / "examples" / "sql" / "best_bid.sql")))


# ------------------------------------------------------------------------------------------
# one Binance feed over several connections
# ------------------------------------------------------------------------------------------

SYMS = ("AAAUSDT", "BBBUSDT", "CCCUSDT", "DDDUSDT", "EEEUSDT")


def test_binance_feed_with_more_symbols_than_a_connection_carries_is_split(tmp_path, monkeypatch):
    """A bare ``/stream`` with 5 symbols and a cap of 4 streams per connection (the server
    refuses more than 4 on a connection, as Binance refuses 1,024): two connections of 3 and 2
    symbols, each subscribing under the cap; every symbol synced, books equal the truth."""
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    monkeypatch.setattr(venue_server, "MAX_STREAMS", 4)
    monkeypatch.setattr(feed_server, "MAX_STREAMS", 4)
    path, truth = write_binance_capture(tmp_path, 41, "spot", symbols=SYMS)
    _, mon, s, lines = run(_session(path, max_streams=4, views=BEST_BID))
    assert isinstance(s["url"], list) and len(s["url"]) == 2 and s["url"][0].endswith("/stream")
    _clean_multi(s)
    assert set(s["symbols"]) == set(SYMS)
    shares = [m.session.symbols for m in mon.conns()]
    assert [len(x) for x in shares] == [3, 2] and sorted(shares[0] + shares[1]) == list(SYMS)
    for m in mon.conns():
        _books_equal_truth(m, {k: truth[k] for k in m.session.symbols}, "binance")
    subs = [(x["connection"], json.loads(x["text"])) for x in lines if x.get("event") == "subscription"]
    for k in (1, 2):
        streams = [p for c, msg in subs if c == k for p in msg["params"]]
        assert 0 < len(streams) <= 4
    assert not [x for x in lines if x.get("event") == "problem"]
    rows = {r[0]: r[1] for r in mon.engine.snapshot()["SYMBOL_BEST_BID"]}
    assert rows == {sym: max(float(p) for p in truth[sym][0]) for sym in SYMS}
    assert any(x.get("event") == "split" for x in lines)
    mon._check()


def test_split_with_checkpoint_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    path, _ = write_binance_capture(tmp_path, 42, "spot", symbols=SYMS, n=60)
    with pytest.raises(DdmsError, match="--checkpoint follows one"):
        run(_session(path, max_streams=4, views=BEST_BID, checkpoint=str(tmp_path / "ck")))


# ------------------------------------------------------------------------------------------
# --record: one recording per connection
# ------------------------------------------------------------------------------------------

def test_recording_of_several_connections_replays(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "o").mkdir()
    kpath, ktruth, _ = write_venue_capture(tmp_path / "k", "kraken", 51)
    opath, otruth, _ = write_venue_capture(tmp_path / "o", "okx", 52)
    rec = tmp_path / "session.rec"
    mon, live, _ = run(_multi([kpath, opath], views=SPREAD, record=str(rec)))
    files = [rec, Path(numbered_recording(str(rec), 2))]
    assert files[1].name == "session.2.rec" and all(f.exists() for f in files)
    assert "#venue=kraken" in files[0].read_text().splitlines()[0]
    assert "#venue=okx" in files[1].read_text().splitlines()[0]
    _, again, _ = run(_multi(files))
    for key, d in live["symbols"].items():
        assert {k: again["symbols"][key][k] for k in _SAME} == {k: d[k] for k in _SAME}, key
    from ddms.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = main(["run", SPREAD, "--data", str(files[0]), "--data", str(files[1]), "--json"])
    assert rc == 0
    final = json.loads(out.getvalue().splitlines()[-1])["views"]["SYMBOL_SPREAD"]
    want = json.loads(json.dumps(mon.engine.snapshot()["SYMBOL_SPREAD"], default=str))
    assert sorted(map(str, final)) == sorted(map(str, want)) and len(final) == 6


# ------------------------------------------------------------------------------------------
# the command line, the display
# ------------------------------------------------------------------------------------------

def test_command_line_urls_symbols_and_checkpoint():
    from ddms.cli import build_parser
    from ddms.feeds.cli import monitor_config
    p = build_parser()
    c = monitor_config(p.parse_args(["monitor", "ws://a:1/", "ws://b:2/ws/v5/public", "--symbols", "x/y,z"]))
    assert (c.url, c.urls, c.symbols, c.symbols_shared) == ("ws://a:1/", ("ws://b:2/ws/v5/public",), ("X/Y", "Z"),
                                                           True)
    c = monitor_config(p.parse_args(["monitor", "ws://a:1/", "ws://b:2/", "--symbols", "A", "--symbols", "B,C"]))
    assert (c.symbols, c.peer_symbols, c.symbols_shared) == (("A",), (("B", "C"),), False)
    c = monitor_config(p.parse_args(["monitor", "ws://a:1/", "--symbols", "A,B"]))
    assert (c.urls, c.symbols, c.symbols_shared) == ((), ("A", "B"), False)
    with pytest.raises(DdmsError, match="once per URL"):
        monitor_config(p.parse_args(["monitor", "ws://a:1/", "ws://b:2/", "ws://c:3/", "--symbols", "A",
                                     "--symbols", "B"]))
    with pytest.raises(DdmsError, match="--checkpoint with several URLs"):
        monitor_config(p.parse_args(["monitor", "ws://a:1/", "ws://b:2/", "--views", SPREAD, "--checkpoint", "ck"]))
    with pytest.raises(DdmsError, match="--checkpoint with several URLs"):
        Monitor(MonitorConfig("ws://a:1/", urls=("ws://b:2/",), checkpoint="ck"))


def test_shared_symbols_follow_each_feed_its_own(tmp_path):
    (tmp_path / "k").mkdir()
    (tmp_path / "o").mkdir()
    kpath, ktruth, _ = write_venue_capture(tmp_path / "k", "kraken", 61, n=120)
    opath, otruth, _ = write_venue_capture(tmp_path / "o", "okx", 62, n=120)
    want = (sorted(ktruth)[0], sorted(otruth)[2])
    _, s, _ = run(_multi([kpath, opath], symbols=want, symbols_shared=True))
    assert sorted(s["symbols"]) == sorted(want)
    assert [c["symbols"] for c in s["connections"]] == [[want[0]], [want[1]]]
    with pytest.raises(DdmsError, match="none of --symbols"):
        run(_multi([kpath, opath], symbols=(want[0],), symbols_shared=True))


def test_display_has_a_row_per_venue_and_symbol():
    from rich.console import Console
    s = {"symbols": {"binance:BTCUSDT": {"symbol": "BTCUSDT", "venue": "binance", "connection": 1, "synced": True,
                                         "best_bid": ["1.0", "2"], "best_ask": ["1.1", "3"], "gaps": 0, "resyncs": 0,
                                         "checksum_checked": 0, "crossed": 0},
                     "binance_futures:BTCUSDT": {"symbol": "BTCUSDT", "venue": "binance_futures", "connection": 2,
                                                 "synced": False, "gaps": 0, "resyncs": 1, "crossed": 0}}}
    con = Console(file=io.StringIO(), width=200)
    con.print(_symbol_table(s))
    out = con.file.getvalue()
    assert "binance_futures" in out and out.count("BTCUSDT") == 2 and "venue" in out and "resyncing" in out


def test_records_of_several_connections_are_taken_in_receive_order():
    """:meth:`Monitor._take_ready` without a network: two connections' queues with interleaved
    receive times come out in receive order, each connection's own order kept (a control record
    stays after the messages before it); until every first connection reported, messages wait."""
    from types import SimpleNamespace

    from ddms.feeds.transport import Connected, Disconnected

    async def go():
        mon = Monitor(MonitorConfig("ws://a:1/", urls=("ws://b:2/",)), out=io.StringIO())
        a, b = mon.conns()
        for m in (a, b):
            m.client = SimpleNamespace(queue=asyncio.Queue())
        a.client.queue.put_nowait(Connected(1, "ws://a:1/", {}))
        a.client.queue.put_nowait((10, b"a1"))
        first = mon._take_ready()
        assert [it for _, _, it in first] == [Connected(1, "ws://a:1/", {})]    # a1 waits for b's first record
        a.started = True
        assert a._held == [(10, (10, b"a1"))]
        b.client.queue.put_nowait(Disconnected(None, "refused", 0.1, 1, 8, False))
        assert [type(it) for _, _, it in mon._take_ready()] == [Disconnected]
        b.started = True
        mon._named = True
        for m, items in ((a, [(30, b"a2"), (50, b"a3")]), (b, [(20, b"b1"), (40, b"b2"), (60, b"b3")])):
            for it in items:
                m.client.queue.put_nowait(it)
        a.client.queue.put_nowait(Disconnected(1000, "closed", 0.1, 1, 8, True))   # after a3, before b3
        got = [(m.index, it if type(it) is tuple else type(it).__name__) for _, m, it in mon._take_ready()]
        assert got == [(1, (10, b"a1")), (2, (20, b"b1")), (1, (30, b"a2")), (2, (40, b"b2")), (1, (50, b"a3")),
                       (1, "Disconnected"), (2, (60, b"b3"))]
    asyncio.run(go())


@pytest.mark.slow
def test_real_binance_spot_and_usdm_btcusdt_at_once():
    """The issue's case on this repository's real captures: BTCUSDT on Binance spot and USD-M at
    once, keyed by venue, each with the counts of the README's table (alone)."""
    paths = [SHARED / "data" / "binance" / "spot_btcusdt_20240808.gz",
             SHARED / "data" / "binance" / "usdm_btcusdt_20240808.gz"]
    if not all(p.exists() for p in paths):
        pytest.skip("../shared/data/binance not available")
    _, s, _ = run(_multi(paths))
    _clean_multi(s)
    got = {k: (d["depth_events"], d["bookticker_checked"]) for k, d in s["symbols"].items()}
    assert got == {"binance:BTCUSDT": (3451, 564), "binance_futures:BTCUSDT": (6551, 629)}


def test_binance_replay_waits_for_subscriptions_before_its_first_frame(tmp_path, monkeypatch):
    """A Binance replay on a subscription-gated bare ``/stream`` starts with a hold until no
    client waits for its SUBSCRIBE (2 s at most): frames sent before would reach no connection,
    and a symbol's first REST hold would then wait for a snapshot request that never comes.  The
    hold returns as soon as the clients subscribed, without waiting for a snapshot request."""
    from ddms.feeds.server import Hold, WsRoute
    from ddms.feeds.transport import _hold, _Hub
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    path, _ = write_binance_capture(tmp_path, 43, "spot", symbols=SYMS, n=60)
    core = load_replay(path)
    first = next(iter(core.timeline()))
    assert first == Hold(2.0, subscribed=True)

    async def go(act: Hold, routes: list[WsRoute], subscribe_after: float | None = None) -> None:
        hub = _Hub()
        for i, r in enumerate(routes):
            hub.set_route(i, r)
        if subscribe_after is not None:
            asyncio.get_running_loop().call_later(subscribe_after, hub.set_route, 0,
                                                  WsRoute(frozenset({"aaausdt@depth"}), True))
        await asyncio.wait_for(_hold(core, hub, act), 1.5)
    subscribed = WsRoute(frozenset({"aaausdt@depth"}), True)
    run(go(first, [subscribed]))
    run(go(first, [WsRoute(frozenset(), True)], subscribe_after=0.2))     # waits for the SUBSCRIBE only
    with pytest.raises(TimeoutError):       # a symbol's hold waits for its snapshot request
        run(go(Hold(5.0, "AAAUSDT"), [subscribed]))
