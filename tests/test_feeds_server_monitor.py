"""serve-feed + monitor over real loopback websockets (127.0.0.1 only).

* real captures: slices replay with no gap, never crossed, every checkable bookTicker matches;
  the spot capture in full through the two CLI commands as separate processes (the issue's
  ``ddms monitor <URL> --once --json`` with no other option);
* each injected fault (drop, dup, reorder, corrupt, close, stall) is detected and reported, the
  monitor recovers (resync or reconnect), bookTickers match again afterwards, and the final book
  equals the capture's own book;
* a consumer that stalls makes the transport drop and say so (Overflow), and the monitor resyncs;
* finance.csv through server and monitor gives ``ddms run``'s views, also across a lost message;
* the server's routes: Binance paths, raw /ws streams, SUBSCRIBE, clear errors, --empty-book.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, SHARED, data_file

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import ReplayError
from ddms.feeds.binance import ASKS, BIDS, BinanceBook
from ddms.feeds.capture import iter_lines
from ddms.feeds.monitor import Monitor, MonitorConfig
from ddms.feeds.server import Fault, load_replay, parse_fault
from ddms.feeds.transport import ClientConfig, Ended, FeedClient, ServeConfig, http_get, serve_replay

BINANCE = SHARED / "data" / "binance"
FUT = "usdm_btcusdt_20240808.gz"
SPOT = "spot_btcusdt_20240808.gz"
MARKET = {FUT: "futures", SPOT: "spot"}
SLICE = 5000          # capture lines per slice (~350 depth messages with the snapshot line early)


def _slice(tmp_path: Path, name: str, n: int = SLICE) -> Path:
    src = BINANCE / name
    if not src.exists():
        pytest.skip(f"{src} not available")
    out = tmp_path / f"{name}.{n}.txt"
    with open(out, "wb") as f:
        for i, line in enumerate(iter_lines(src)):
            if i >= n:
                break
            f.write(line)
    return out


def _reference(path: Path, market: str) -> BinanceBook:
    bk = BinanceBook(market)
    for line in iter_lines(path):
        ts, _, js = line.rstrip(b"\n").partition(b" ")
        bk.feed_message(js, int(ts))
    bk.discard_events()
    return bk


async def _serve(core, *, speed: float = 0.0, rate: float = 0.0, log=lambda m: None) -> tuple[asyncio.Task, str]:
    """Start ``serve_replay`` on ``core`` in this loop: (its task, the stream URL once listening)."""
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_replay(core, ServeConfig(speed=speed, rate=rate), ready.set_result, log=log))
    return server, await asyncio.wait_for(ready, 30)


async def _session(path: Path, *, faults: tuple[Fault, ...] = (), rate: float = 0.0, speed: float = 0.0,
                   empty_book: bool = False, monitor_cls: type[Monitor] = Monitor, engine=None, **mon_kw):
    core = load_replay(path, faults=faults, empty_book=empty_book)
    logs: list[str] = []
    server, url = await _serve(core, speed=speed, rate=rate, log=logs.append)
    out = io.StringIO()
    mon = monitor_cls(MonitorConfig(url, json=True, once=True, display=False, **mon_kw), out=out, engine=engine)
    summary = await asyncio.wait_for(mon.run(), 60)
    await asyncio.wait_for(server, 10)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert lines[-1] == summary
    return core, mon, summary, lines, logs


def run(coro):
    return asyncio.run(coro)


def _assert_clean_match(mon: Monitor, ref: BinanceBook) -> None:
    bk = mon.book
    assert isinstance(bk, BinanceBook) and bk.synced
    bk._check()
    assert bk.levels(BIDS) == ref.levels(BIDS) and bk.levels(ASKS) == ref.levels(ASKS)


# ------------------------------------------------------------------------------------------
# real captures
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [FUT, SPOT])
def test_capture_slice_replays_clean(tmp_path, name):
    path = _slice(tmp_path, name)
    ref = _reference(path, MARKET[name])
    core, mon, s, lines, _ = run(_session(path))
    assert s["market"] == MARKET[name] and s["protocol"] == "binance"
    assert s["messages"] == core.sent == len(core.frames) - 1        # all but the snapshot line
    assert s["gaps"] == s["resyncs"] == s["crossed"] == s["malformed"] == s["stale"] == 0
    assert s["bookticker_mismatch"] == 0 and s["bookticker_checked"] == ref.bookticker_checked > 20
    assert s["depth_events"] == ref.depth_events and s["applied"] == ref.applied
    assert s["reconnects"] == 0 and s["end"].startswith("server closed the stream normally")
    _assert_clean_match(mon, ref)
    assert not [x for x in lines if x.get("event") == "problem"]


def test_unknown_fields_are_counted_in_the_summary_not_fatal(tmp_path):
    """A COIN-M-style extra field (``ps``) in every depth message: no gap, no malformed message,
    ``unknown_fields`` in the summary counts it per message."""
    path = _slice(tmp_path, FUT, 1500)
    data = path.read_bytes().replace(b'"e":"depthUpdate",', b'"e":"depthUpdate","ps":"BTCUSD",')
    path.write_bytes(data)
    _, mon, s, lines, _ = run(_session(path))
    assert s["gaps"] == s["resyncs"] == s["malformed"] == 0 and s["depth_events"] > 50
    assert s["unknown_fields"] == {"ps": s["depth_events"]}
    problems = [x["reason"] for x in lines if x.get("event") == "problem"]
    assert problems.count("unknown field 'ps' ignored (counted in unknown_fields)") <= 1


FAULTS = ["drop", "dup", "reorder", "corrupt", "close", "stall"]


@pytest.mark.parametrize("name,kind", [(FUT, k) for k in FAULTS] + [(SPOT, "drop"), (SPOT, "reorder")])
def test_injected_fault_is_detected_and_recovered(tmp_path, name, kind):
    path = _slice(tmp_path, name)
    ref = _reference(path, MARKET[name])
    fault = parse_fault(f"{kind}@60:1.2" if kind == "stall" else f"{kind}@60")
    kw = {"watchdog": 0.4} if kind == "stall" else {}
    core, mon, s, lines, logs = run(_session(path, faults=(fault,), rate=1500, **kw))
    assert core.faults_done and core.faults_done[0].startswith(f"{kind}@60")
    problems = [x for x in lines if x.get("event") == "problem"]
    if kind == "dup":       # a duplicate is stale: reported and dropped, the book never left
        assert s["stale"] == 1 and s["gaps"] == s["resyncs"] == 0
        assert "stale depth update" in problems[0]["reason"]
    elif kind in ("drop", "reorder"):
        assert s["gaps"] == 1 and s["resyncs"] == 1 and s["snapshots"] == 2
        assert problems[0]["reason"].startswith("gap")
    elif kind == "corrupt":
        assert s["malformed"] == 1 and s["gaps"] == 1 and s["resyncs"] == 1
        assert problems[0]["reason"].startswith("malformed JSON")
    elif kind == "close":
        assert s["reconnects"] == 1 and s["resyncs"] == 1 and s["gaps"] == 0
        assert any(x.get("event") == "disconnected" and x["code"] == 1012 for x in lines)
    elif kind == "stall":
        # the stall outlasts the watchdog more than once: each silent connection is closed
        assert s["watchdog"] >= 1 and s["reconnects"] == s["watchdog"] and s["resyncs"] == s["reconnects"]
        assert any(x.get("event") == "disconnected" and "watchdog" in x["reason"] for x in lines)
    assert all(p["message"] >= 1 and p["reason"] for p in problems)
    assert s["crossed"] == 0 and s["bookticker_mismatch"] == 0
    assert s["bookticker_checked_since_resync"] > 5        # the book matches the exchange again
    _assert_clean_match(mon, ref)


class _SlowMonitor(Monitor):
    """A consumer that stops reading once (as a strategy awaiting an order would)."""

    paused = False

    async def _after_batch(self) -> None:
        book = self.book
        if not self.paused and book is not None and book.synced and book.applied > 40:
            self.paused = True
            await asyncio.sleep(0.25)


def test_slow_consumer_overflow_is_reported_and_resyncs(tmp_path):
    path = _slice(tmp_path, FUT)
    ref = _reference(path, "futures")
    _, mon, s, lines, _ = run(_session(path, rate=500, monitor_cls=_SlowMonitor, queue_size=16,
                                       overflow_wait=0.05))
    assert s["overflows"] >= 1 and s["dropped"] >= 1
    assert any(x.get("event") == "overflow" for x in lines)
    assert s["resyncs"] >= 1 and s["bookticker_mismatch"] == 0 and s["bookticker_checked_since_resync"] > 5
    _assert_clean_match(mon, ref)


def test_feed_client_backoff_and_give_up():
    """Nothing listens: the client backs off (capped, jittered) and gives up after max_failures."""
    async def go():
        cfg = ClientConfig("ws://127.0.0.1:9/none", backoff_base=0.01, backoff_cap=0.04, max_failures=3,
                           open_timeout=1)
        client = FeedClient(cfg)
        delays = [client.backoff(k) for k in range(1, 8)]
        assert all(0.005 <= d <= 0.04 for d in delays) and delays[-1] >= 0.02
        await asyncio.wait_for(client.run(), 10)
        items = []
        while not client.queue.empty():
            items.append(client.queue.get_nowait())
        assert isinstance(items[-1], Ended) and not items[-1].normal and "gave up" in items[-1].reason
        assert client.stats.connects == 0 and client.stats.failures == 4
    run(go())


# ------------------------------------------------------------------------------------------
# server routes
# ------------------------------------------------------------------------------------------

def test_routes_raw_streams_subscribe_and_errors(tmp_path):
    import websockets
    path = _slice(tmp_path, SPOT, 400)

    async def go():
        server, url = await _serve(load_replay(path), speed=4)
        base = url.split("/stream")[0].replace("ws://", "http://")
        st, body = await http_get(base + "/nope")
        assert st == 404 and "no such path" in json.loads(body)["msg"]
        st, body = await http_get(base + "/api/v3/depth?symbol=ETHUSDT")
        assert st == 400 and "BTCUSDT" in json.loads(body)["msg"]
        st, body = await http_get(base + "/fapi/v1/depth?symbol=BTCUSDT")
        assert st == 404 and "spot" in json.loads(body)["msg"]
        st, body = await http_get(base + "/api/v3/depth?symbol=BTCUSDT&limit=1000")
        assert st == 200 and json.loads(body)["lastUpdateId"] > 0      # the capture's own snapshot
        ws_base = url.split("/stream")[0]
        async with websockets.connect(ws_base + "/ws/btcusdt@bookTicker", proxy=None) as ws:
            assert ws.response.headers["X-DDMS-Market"] == "spot"
            msg = json.loads(await ws.recv())
            assert "stream" not in msg and {"u", "b", "B", "a", "A"} <= set(msg)     # the bare payload
            await ws.send(json.dumps({"method": "SUBSCRIBE", "params": ["btcusdt@trade"], "id": 7}))
            await ws.send(json.dumps({"method": "LIST_SUBSCRIPTIONS", "id": 8}))
            replies = []
            async for raw in ws:
                m = json.loads(raw)
                if "id" in m:
                    replies.append(m)
                if len(replies) == 2:
                    break
            assert replies[0] == {"result": None, "id": 7}
            assert replies[1] == {"result": ["btcusdt@bookTicker", "btcusdt@trade"], "id": 8}
            async for _ in ws:      # to the end of the replay
                pass
            assert ws.close_code == 1000
        await asyncio.wait_for(server, 10)
    run(go())


def test_capture_without_snapshot_needs_empty_book(tmp_path):
    src = _slice(tmp_path, FUT, 600)
    lines = [x for x in src.read_bytes().splitlines(keepends=True) if b"lastUpdateId" not in x]
    path = tmp_path / "nosnap.txt"
    path.write_bytes(b"".join(lines))
    with pytest.raises(ReplayError, match="no depth snapshot line.*--empty-book"):
        load_replay(path)
    core = load_replay(path, empty_book=True)
    snap = json.loads(core.snapshot_response().body)
    assert snap["bids"] == [] and snap["asks"] == []
    _, mon, s, _, _ = run(_session(path, empty_book=True))
    assert s["gaps"] == 0 and s["resyncs"] == 0 and s["applied"] > 10 and mon.book.synced


def test_fault_parsing():
    assert parse_fault("drop@3") == Fault("drop", 3)
    assert parse_fault("stall@2:0.5") == Fault("stall", 2, 0.5)
    for bad in ("drop", "nuke@3", "drop@0", "drop@x", "dup@3:1"):
        with pytest.raises(ReplayError):
            parse_fault(bad)


# ------------------------------------------------------------------------------------------
# finance.csv: the order protocol
# ------------------------------------------------------------------------------------------

def _run_views(program: Path, data: Path) -> dict:
    from ddms.cli import main
    buf = io.StringIO()
    old = sys.stdout
    sys.stdout = buf
    try:
        assert main(["run", str(program), "--data", str(data), "--json"]) == 0
    finally:
        sys.stdout = old
    return json.loads(buf.getvalue().splitlines()[-1])


@pytest.mark.parametrize("fault", [None, "drop@700", "close@1200"])
def test_finance_csv_views_equal_ddms_run(tmp_path, fault):
    src = data_file("standard")
    path = tmp_path / "finance.csv"
    with open(src, "rb") as f:
        path.write_bytes(b"".join(next(f) for _ in range(3000)))
    program = REPO / "examples" / "m3" / "vwap.m3"
    want = _run_views(program, path)
    faults = (parse_fault(fault),) if fault else ()
    _, mon, s, lines, _ = run(_session(path, faults=faults, rate=4000, views=str(program)))
    views = [x for x in lines if "views" in x]
    assert s["protocol"] == "orders" and s["synced"]
    if fault is None:
        assert views[-1] == want
        assert s["gaps"] == s["resyncs"] == 0 and s["applied"] == 3000
        assert any(x.get("event") == "change" for x in lines)
    else:
        assert s["resyncs"] == 1
        assert views[-1]["views"] == want["views"]      # positions differ: a snapshot is one update
    assert mon.book.orders == _ref_orders(path)


def _ref_orders(path: Path) -> dict:
    from ddms.feeds.orderproto import OrderEncoder
    enc = OrderEncoder()
    with open(path, "rb") as f:
        for line in f:
            enc.encode(line)
    return enc._book.orders


# ------------------------------------------------------------------------------------------
# the CLI, as separate processes
# ------------------------------------------------------------------------------------------

def _cli(*args: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "ddms.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=REPO, **kw)


def _cli_capture(name: str) -> dict:
    path = BINANCE / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    server = _cli("serve-feed", str(path), "--speed", "max")
    try:
        url = server.stdout.readline().decode().strip()
        assert url.startswith("ws://127.0.0.1:"), server.stderr.read().decode()
        mon = _cli("monitor", url, "--once", "--json")
        out, err = mon.communicate(timeout=120)
        assert mon.returncode == 0, err.decode()[-2000:]
        server.wait(timeout=30)
    finally:
        server.kill()
    return json.loads(out.decode().splitlines()[-1])


def test_cli_spot_capture_end_to_end():
    s = _cli_capture(SPOT)
    assert s["messages"] == 41248 and s["depth_events"] == 3451
    assert s["gaps"] == s["resyncs"] == s["crossed"] == s["bookticker_mismatch"] == 0
    assert s["bookticker_checked"] == 564


@pytest.mark.slow
def test_cli_futures_capture_end_to_end():
    s = _cli_capture(FUT)
    assert s["messages"] == 93953 and s["depth_events"] == 6551
    assert s["gaps"] == s["resyncs"] == s["crossed"] == s["bookticker_mismatch"] == 0
    assert s["bookticker_checked"] == 629


def test_monitor_reports_unusable_url():
    p = _cli("monitor", "http://127.0.0.1:1/x", "--once", "--json")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and b"not a websocket URL" in err


# ------------------------------------------------------------------------------------------
# strategy and display
# ------------------------------------------------------------------------------------------

def test_strategy_runs_on_the_live_book_and_display_renders(tmp_path):
    """--strategy sobi on its own program over a futures slice, with the rich display drawn into a
    buffer: the strategy's views follow the book (BEST_BID equals the book's best bid)."""
    path = _slice(tmp_path, FUT, 3000)
    errs = io.StringIO()

    async def go():
        server, url = await _serve(load_replay(path))
        out = io.StringIO()
        import ddms.feeds.monitor as monitor_mod
        real = monitor_mod.load_strategy
        mon_cfg = MonitorConfig(url, strategy="sobi", once=True, display=True,
                                strategy_params=(("threshold", 0.05),))
        monitor_mod.load_strategy = lambda n, e, p, out=None: real(n, e, p, out=errs)
        try:
            mon = Monitor(mon_cfg, out=out)
        finally:
            monitor_mod.load_strategy = real
        s = await mon.run()
        await server
        return mon, s, out.getvalue()
    mon, s, shown = run(go())
    assert s["gaps"] == 0 and s["bookticker_mismatch"] == 0 and s["strategy"]["name"] == "sobi"
    best = mon.book.best_bid()
    assert mon.engine.value("BEST_BID") == float(best[0])
    assert "ddms monitor" in shown and "bookTicker checked" in shown and "SIGNAL" in shown
    assert json.loads(shown.splitlines()[-1])["event"] == "summary"


def test_unknown_strategy_is_a_clear_error():
    p = _cli("monitor", "ws://127.0.0.1:9/x", "--strategy", "nope", "--once")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and b"unknown strategy 'nope'" in err and b"sobi" in err
