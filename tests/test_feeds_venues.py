"""serve-feed + monitor for many symbols and venues, over real loopback websockets.

* synthetic multi-symbol captures of every venue (tests/venue_sim.py: true books and checksums
  computed independently), written as cryptofeed captures (and Binance as hftbacktest captures
  too): every symbol synced, no gap, every checksum verified, the final books equal the truth;
* a fault in one symbol (drop, dup, reorder, corrupt, checksum, close) is detected for it and
  recovered (resubscribe / fresh REST snapshot), the other symbols keep running untouched
  (close: every symbol resyncs, the connection is shared), and the final books equal the truth;
* ``--record``: the recording replays to the same summary, and the file readers read it;
* the real captures of ../shared/data/venues (skipped where absent): clean, checksums 4,269
  (Kraken) and 290 (OKX), every comparable bookTicker equal.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import SHARED
from venue_sim import binance, coinbase, kraken, okx

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import ReplayError
from ddms.feeds.monitor import Monitor, MonitorConfig, _symbol_table
from ddms.feeds.server import load_replay, parse_fault
from ddms.feeds.transport import ServeConfig, serve_replay
from ddms.feeds.venue_server import VenueReplay
from ddms.feeds.venue_session import VenueSession, venue_from_url
from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed, venue_of
from ddms.io.levels import ASKS, BIDS

VENUES = SHARED / "data" / "venues"
URLS = {"kraken": "wss://ws.kraken.com", "okx": "wss://ws.okx.com:8443/ws/v5/public",
        "coinbase": "wss://ws-feed.pro.coinbase.com"}
GEN = {"kraken": kraken, "okx": okx, "coinbase": coinbase}
SYMS = {"kraken": ("AAA/USD", "BBB/EUR", "CCC/XBT"), "okx": ("BTC-USDT", "ETH-USD-SWAP", "UNI-USDT"),
        "coinbase": ("BTC-USD", "ETH-EUR", "SKL-GBP")}


def _line(obj) -> str:
    return json.dumps(obj, separators=(",", ":"))


def write_venue_capture(tmp_path: Path, venue: str, seed: int, n: int = 300) -> tuple[Path, dict, list]:
    """A cryptofeed capture of a synthetic multi-symbol stream: (path, true books, messages)."""
    msgs, truth = GEN[venue](random.Random(seed), n=n)
    url = URLS[venue]
    lines = [f"{url} <-> 1600000000.0", f'{url} <- 1600000000.1: {{"op":"subscribe"}}']
    lines += [f"{1600000001 + i / 100:.6f}: {_line(m)}" for i, (_, m) in enumerate(msgs)]
    p = tmp_path / f"{venue.upper()}.ws.1.0"
    p.write_text("\n".join(lines) + "\n")
    return p, truth, msgs


def write_binance_capture(tmp_path: Path, seed: int, market: str = "futures", coin_m: bool = False,
                          form: str = "cryptofeed", n: int = 300, symbols: tuple[str, ...] | None = None
                          ) -> tuple[Path, dict]:
    """A synthetic Binance capture of three symbols (or ``symbols``): cryptofeed (ws + http
    files) or hftbacktest (``<ns> <json>`` lines, snapshots as bare lines)."""
    kw = {"symbols": symbols} if symbols else {}
    msgs, truth, snaps = binance(random.Random(seed), n=n, market=market, coin_m=coin_m, **kw)
    at: dict[int, list] = {}
    for sym, (pos, snap) in snaps.items():
        at.setdefault(pos, []).append((sym, snap))
    host = "dstream" if coin_m else ("fstream" if market == "futures" else "stream")
    streams = sorted({m["stream"] for _, m in msgs})
    ws, http = [f"wss://{host}.binance.com/stream?streams={'/'.join(streams)} <-> 1600000000.0"], []
    rest = {"spot": "https://api.binance.com/api/v3/depth", "futures": "https://fapi.binance.com/fapi/v1/depth"}
    path = "https://dapi.binance.com/dapi/v1/depth" if coin_m else rest[market]
    hft = []
    for i in range(len(msgs) + 1):
        t = 1600000001 + i / 100
        for sym, snap in at.get(i, ()):
            http.append(f"{path}?symbol={sym}&limit=1000 -> {t - 0.005:.6f}: {_line(snap)}")
            hft.append(f"{int((t - 0.005) * 1e9)} {_line(snap)}")
        if i < len(msgs):
            ws.append(f"{t:.6f}: {_line(msgs[i][1])}")
            hft.append(f"{int(t * 1e9)} {_line(msgs[i][1])}")
    name = "BINANCE_DELIVERY" if coin_m else ("BINANCE_FUTURES" if market == "futures" else "BINANCE")
    if form == "hftbacktest":
        p = tmp_path / f"{name.lower()}.txt"
        p.write_text("\n".join(hft) + "\n")
        return p, truth
    p = tmp_path / f"{name}.ws.1.0"
    p.write_text("\n".join(ws) + "\n")
    (tmp_path / f"{name}.http.0.0").write_text("\n".join(http) + "\n")
    return p, truth


async def _session(path: Path, *, faults=(), rate: float = 0.0, **mon_kw):
    core = load_replay(path, faults=tuple(faults))
    logs: list[str] = []
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_replay(core, ServeConfig(speed=0.0, rate=rate), ready.set_result,
                                              log=logs.append))
    url = await asyncio.wait_for(ready, 30)
    out = io.StringIO()
    mon = Monitor(MonitorConfig(url, json=True, once=True, display=False, **mon_kw), out=out)
    summary = await asyncio.wait_for(mon.run(), 120)
    await asyncio.wait_for(server, 30)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[-1] == summary
    return core, mon, summary, lines


def run(coro):
    return asyncio.run(coro)


def _books_equal_truth(mon: Monitor, truth: dict, venue: str) -> None:
    sess = mon.session
    assert sess is not None
    sess._check()
    for sym, (bids, asks) in truth.items():
        if venue == "binance":
            bk = sess.core.books[sym]
            for side, want in ((BIDS, bids), (ASKS, asks)):
                got = dict(bk.top_levels(side, 10**6))
                assert got == {Decimal(p): Decimal(q) for p, q in want.items()}, (sym, side)
        else:
            book = sess.core.books[sym]
            assert dict(book.top(BIDS, 10**6)) == bids, sym
            assert dict(book.top(ASKS, 10**6)) == asks, sym


def _clean(s: dict, symbols) -> None:
    assert s["synced"] and s["gaps"] == 0 and s["resyncs"] == 0 and s["crossed"] == 0 and s["malformed"] == 0
    assert s["bookticker_mismatch"] == 0 and s["checksum_mismatch"] == 0
    assert set(s["symbols"]) == set(symbols)
    for d in s["symbols"].values():
        assert d["synced"] and d["gaps"] == d["resyncs"] == d["crossed"] == 0
        for k in ("depth_events", "bookticker_checked", "bookticker_mismatch", "checksum_checked",
                  "checksum_mismatch"):
            assert k in d


# ------------------------------------------------------------------------------------------
# synthetic captures of every venue
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_venue_capture_replays_clean(tmp_path, venue, seed):
    path, truth, msgs = write_venue_capture(tmp_path, venue, seed)
    core, mon, s, lines = run(_session(path))
    assert isinstance(core, VenueReplay) and s["protocol"] == venue
    _clean(s, truth)
    if venue in ("kraken", "okx"):      # every checksum the capture carries is verified
        carried = sum(1 for sym, m in msgs if sym is not None for d in (m[1:-2] if venue == "kraken" else m["data"])
                      if ("c" if venue == "kraken" else "checksum") in d)
        assert s["checksum_checked"] == carried > 50
    _books_equal_truth(mon, truth, venue)
    assert not [x for x in lines if x.get("event") == "problem"]


@pytest.mark.parametrize("market,coin_m,form", [("spot", False, "cryptofeed"), ("futures", False, "cryptofeed"),
                                                ("futures", True, "cryptofeed"), ("spot", False, "hftbacktest"),
                                                ("futures", False, "hftbacktest")])
def test_synthetic_binance_many_symbols_replays_clean(tmp_path, market, coin_m, form):
    path, truth = write_binance_capture(tmp_path, 5, market, coin_m, form)
    core, mon, s, _ = run(_session(path))
    assert isinstance(core, VenueReplay) and len(core.symbols) == 3
    if coin_m:
        assert core.market == "coinm" and "/dapi/v1/depth" in core.snapshot_path()
        assert s["unknown_fields"].get("ps", 0) > 0           # counted, not fatal
    _clean(s, truth)
    assert s["bookticker_checked"] > 10
    _books_equal_truth(mon, truth, "binance")


# ------------------------------------------------------------------------------------------
# faults in one symbol
# ------------------------------------------------------------------------------------------

FAULTS = [("kraken", "checksum"), ("kraken", "corrupt"), ("kraken", "reorder"), ("okx", "drop"),
          ("okx", "checksum"), ("okx", "dup"), ("okx", "corrupt"), ("coinbase", "corrupt"), ("binance", "drop"),
          ("binance", "reorder"), ("binance", "corrupt"), ("binance", "dup")]


@pytest.mark.parametrize("venue,kind", FAULTS)
def test_fault_in_one_symbol_is_recovered_for_it_only(tmp_path, venue, kind):
    if venue == "binance":
        path, truth = write_binance_capture(tmp_path, 7, "futures")
    else:
        path, truth, _ = write_venue_capture(tmp_path, venue, 3)
    target = sorted(truth)[1]
    at = 70 if venue == "binance" else 5     # after the symbol's REST snapshot (earlier events are stale)
    fault = parse_fault(f"{kind}@{at}#{target}")
    core, mon, s, lines = run(_session(path, faults=[fault], rate=400))
    assert core.faults_done and target in core.faults_done[0]
    syms = s["symbols"]
    if kind != "dup":       # a duplicate is harmless (idempotent or stale): nothing to recover
        assert syms[target]["resyncs"] >= 1, syms[target]
        problems = [x for x in lines if x.get("event") == "problem" and x.get("symbol") == target]
        assert problems and all(p["message"] > 0 and p["reason"] for p in problems)
    for sym, d in syms.items():
        assert d["synced"], sym
        assert d["crossed"] == 0
        if sym != target:
            assert d["resyncs"] == d["gaps"] == d["checksum_mismatch"] == 0, sym
    _books_equal_truth(mon, truth, venue)


@pytest.mark.parametrize("venue", ["kraken", "binance"])
def test_close_resyncs_every_symbol_and_recovers(tmp_path, venue):
    if venue == "binance":
        path, truth = write_binance_capture(tmp_path, 8, "spot")
    else:
        path, truth, _ = write_venue_capture(tmp_path, venue, 4)
    core, mon, s, _ = run(_session(path, faults=[parse_fault("close@60")], rate=400))
    assert s["reconnects"] == 1 and core.faults_done
    for sym, d in s["symbols"].items():
        assert d["synced"] and d["resyncs"] == 1 and d["crossed"] == 0, sym
    _books_equal_truth(mon, truth, venue)


def test_fault_parsing_and_refusals(tmp_path):
    f = parse_fault("drop@7#xbt/chf")
    assert (f.kind, f.at, f.symbol) == ("drop", 7, "XBT/CHF")
    assert parse_fault("stall@3:1.5#A").seconds == 1.5
    with pytest.raises(ReplayError, match="symbol after #"):
        parse_fault("drop@7#")
    path, _ = write_binance_capture(tmp_path, 1, "spot")
    with pytest.raises(ReplayError, match="carries no checksum"):
        load_replay(path, faults=(parse_fault("checksum@3"),))
    with pytest.raises(ReplayError, match="no such symbol"):
        load_replay(path, faults=(parse_fault("drop@3#NOPE"),))


# ------------------------------------------------------------------------------------------
# recording
# ------------------------------------------------------------------------------------------

_SAME = ("depth_events", "gaps", "resyncs", "checksum_checked", "checksum_mismatch", "bookticker_checked",
         "bookticker_mismatch", "crossed", "synced", "best_bid", "best_ask")


@pytest.mark.parametrize("venue,fault", [("okx", None), ("binance", None), ("kraken", "checksum@9"),
                                         ("okx", "drop@7")])
def test_recording_replays_to_the_same_summary_and_reads_back(tmp_path, venue, fault):
    if venue == "binance":
        path, truth = write_binance_capture(tmp_path, 9, "futures")
    else:
        path, truth, _ = write_venue_capture(tmp_path, venue, 6)
    rec = tmp_path / "session.rec"
    faults = [parse_fault(f"{fault}#{sorted(truth)[0]}")] if fault else []
    _, _, live, _ = run(_session(path, record=str(rec), faults=faults, rate=400 if fault else 0.0))
    if fault:      # the recording holds the fault and the answer to the resubscription: replayed as is
        assert live["symbols"][sorted(truth)[0]]["resyncs"] == 1
    text = rec.read_text().splitlines()
    assert " <-> " in text[0] and "#venue=" in text[0]        # a loopback URL: the venue is appended
    assert venue_of(text[0].split(" ")[0]) == ("binance_futures" if venue == "binance" else venue)
    core, mon, again, _ = run(_session(rec))
    assert isinstance(core, VenueReplay)
    for sym in truth:
        assert {k: again["symbols"][sym][k] for k in _SAME} == {k: live["symbols"][sym][k] for k in _SAME}
    _books_equal_truth(mon, truth, venue)
    parser = CryptofeedParser(str(rec))                      # what run/backtest/convert read
    for _ in read_cryptofeed(rec, parser=parser):
        pass
    s = parser.summary()
    assert s["synced"] and s["gaps"] == live["gaps"] and s["checksum_mismatch"] == live["checksum_mismatch"]
    for sym in truth:
        assert s["symbols"][sym]["depth_events"] == live["symbols"][sym]["depth_events"]
        assert s["symbols"][sym]["resyncs"] == live["symbols"][sym]["resyncs"]


# ------------------------------------------------------------------------------------------
# detection, display
# ------------------------------------------------------------------------------------------

def test_venue_from_url_and_session_messages():
    assert venue_from_url("wss://ws.kraken.com")[0] == "kraken"
    assert venue_from_url("wss://ws.okx.com:8443/ws/v5/public")[0] == "okx"
    assert venue_from_url("wss://fstream.binance.com/stream?streams=a@depth/b@depth") == ("binance", ["A", "B"])
    assert venue_from_url("wss://fstream.binance.com/stream?streams=a@depth/a@bookTicker") == (None, [])
    s = VenueSession("kraken", ["XBT/USD"], "wss://ws.kraken.com")
    assert json.loads(s.subscribe_messages()[0])["pair"] == ["XBT/USD"]
    b = VenueSession("binance", ["BTCUSD_PERP"], "wss://dstream.binance.com/stream?streams=btcusd_perp@depth")
    assert b.snapshot_url("BTCUSD_PERP") == "https://dapi.binance.com/dapi/v1/depth?symbol=BTCUSD_PERP&limit=1000"


def test_display_has_a_row_per_symbol():
    from rich.console import Console
    s = {"symbols": {"A/B": {"synced": True, "best_bid": ["1.0", "2"], "best_ask": ["1.1", "3"], "gaps": 0,
                             "resyncs": 1, "checksum_checked": 10, "checksum_mismatch": 1, "crossed": 0,
                             "messages_per_s": 5.0, "latency_us": 12.5},
                     "C-D": {"synced": False, "gaps": 0, "resyncs": 0, "checksum_checked": 0, "crossed": 0}}}
    con = Console(file=io.StringIO(), width=160)
    con.print(_symbol_table(s))
    out = con.file.getvalue()
    assert "A/B" in out and "C-D" in out and "1 bad / 10" in out and "resyncing" in out and "1.0 x 2" in out


# ------------------------------------------------------------------------------------------
# the real captures
# ------------------------------------------------------------------------------------------

REAL = {"KRAKEN.ws.50.0": ("kraken", 10, 4269), "OKX.ws.1.0": ("okx", 3, 290),
        "COINBASE.ws.28.0": ("coinbase", 10, 0), "BINANCE.ws.1.0": ("binance", 4, 0),
        "BINANCE_FUTURES.ws.1.0": ("binance", 4, 0)}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_venue_capture_replays_clean(name):
    path = VENUES / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    venue, nsym, checksums = REAL[name]
    ref = CryptofeedParser(str(path))                   # the file reader, an independent replay
    for _ in read_cryptofeed(path, parser=ref):
        pass
    want = ref.summary()
    _, _, s, _ = run(_session(path))
    assert s["protocol"] == venue and len(s["symbols"]) == nsym
    _clean(s, want["symbols"])
    assert s["checksum_checked"] == checksums
    for sym, d in s["symbols"].items():
        w = want["symbols"][sym]
        assert (d["depth_events"], d["checksum_checked"], d["bookticker_checked"]) == \
            (w["depth_events"], w["checksum_checked"], w.get("bookticker_checked", 0)), sym


# ------------------------------------------------------------------------------------------
# views on one symbol of a multi-symbol feed
# ------------------------------------------------------------------------------------------

def test_views_follow_the_chosen_symbol(tmp_path):
    from conftest import REPO
    path, truth, _ = write_venue_capture(tmp_path, "kraken", 11)
    sym = sorted(truth)[0]
    views = str(REPO / "examples" / "sql" / "best_bid.sql")
    _, mon, s, lines = run(_session(path, views=views, symbols=(sym,)))
    assert list(s["symbols"]) == [sym] and s["symbols"][sym]["synced"]
    best = max(float(p) for p in truth[sym][BIDS])
    assert mon.engine.snapshot()["BEST_BID"] == best
    changes = [x for x in lines if x.get("event") == "change"]
    assert changes and all(x["symbol"] == sym for x in changes)
    with pytest.raises(Exception, match="choose one with --symbols"):
        run(_session(path, views=views))


# ------------------------------------------------------------------------------------------
# bad input: a clear located error or a counted skip, never a traceback
# ------------------------------------------------------------------------------------------

def _replay_offline(path: Path, skip_bad: bool) -> None:
    """Load a capture and run its whole timeline without a network: subscribe every symbol at
    the start, ask for fresh snapshots along the way (what the server does for its clients)."""
    from ddms.feeds.server import Hold, WsRoute
    core = load_replay(path, skip_bad=skip_bad)
    if not isinstance(core, VenueReplay):
        return
    route = core.route(core.ws_path())
    if isinstance(route, WsRoute) and core.venue != "binance":
        sub = VenueSession(core.venue, list(core.symbols), "ws://x/").subscribe_messages()[0]
        core.subscribe(route, sub)
    for i, act in enumerate(core.timeline()):
        if isinstance(act, Hold) and act.symbol:
            core.route(f"{core.snapshot_path().replace('{symbol}', act.symbol)}")
        if i % 97 == 0:
            for sym in core.symbols:
                if core.venue == "binance":
                    core.route(core.snapshot_path().replace("{symbol}", sym))
                else:
                    core._fresh_snapshot(sym)
    core._check()


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase", "binance"])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_venue_replay(tmp_path, venue, skip_bad):
    from mutate import fuzz
    if venue == "binance":
        path, _ = write_binance_capture(tmp_path, 3, "futures", n=120)
    else:
        path, _, _ = write_venue_capture(tmp_path, venue, 3, n=120)
    data = path.read_bytes()

    def read(mutant: bytes) -> None:
        path.write_bytes(mutant)
        _replay_offline(path, skip_bad)

    out = fuzz(read, data, 40, seed=13)
    assert out["ok"] + out["error"] == 40


def test_rest_half_of_a_capture_is_refused_with_a_reason(tmp_path):
    write_binance_capture(tmp_path, 2, "spot")
    with pytest.raises(ReplayError, match="REST half"):
        load_replay(tmp_path / "BINANCE.http.0.0")


def test_symbols_option_follows_only_the_chosen_binance_symbols(tmp_path):
    path, truth = write_binance_capture(tmp_path, 12, "futures")
    chosen = sorted(truth)[:2]
    _, mon, s, _ = run(_session(path, symbols=tuple(chosen)))
    assert sorted(s["symbols"]) == chosen and s["ignored"]["other_symbol"] > 0
    _clean(s, chosen)
    _books_equal_truth(mon, {k: truth[k] for k in chosen}, "binance")


def test_coin_m_hftbacktest_capture_is_served_on_the_coin_m_paths(tmp_path):
    path, truth = write_binance_capture(tmp_path, 4, "futures", coin_m=True, form="hftbacktest",
                                        symbols=("BTCUSD_PERP",))
    core, mon, s, _ = run(_session(path))
    assert isinstance(core, VenueReplay) and core.market == "coinm"
    assert core.headers()["X-DDMS-Snapshot"].startswith("/dapi/v1/depth")
    _clean(s, truth)
    _books_equal_truth(mon, truth, "binance")
