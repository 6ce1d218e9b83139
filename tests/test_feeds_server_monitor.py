"""serve-feed + monitor over real loopback websockets (127.0.0.1 only).

* real captures: slices replay with no gap, never crossed, every checkable bookTicker matches;
  the spot capture in full through the two CLI commands as separate processes (the issue's
  ``ddms monitor <URL> --once --json`` with no other option);
* each injected fault (drop, dup, reorder, corrupt, close, stall) is detected and reported, the
  monitor recovers (resync or reconnect), bookTickers match again afterwards, and the final book
  equals the capture's own book;
* a consumer that stalls makes the transport drop and say so (Overflow), and the monitor resyncs;
* finance.csv through server and monitor gives ``ddms run``'s views, also across a lost message;
* the server's routes: Binance paths, raw /ws streams, SUBSCRIBE, clear errors, --empty-book;
* the reconnect policy: stated, bounded, one plain line per attempt; a stream the server ended
  exits 0 once the policy runs out, a lost feed 3; ``--once`` exits 0 at the end of the replay;
* strategy orders: in the display's orders panel (never between the display's lines, never on
  stderr), in ``--orders-log``, as JSON events; the README's strategy example places orders.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import io
import json
import re
import socket
import sys
import time
from pathlib import Path

import pytest
from clitools import cli, serve, small_book
from conftest import REPO, SHARED, data_file

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import DdmsError, ReplayError
from ddms.feeds import DEFAULT_RETRIES, retry_policy
from ddms.feeds.monitor import Monitor, MonitorConfig
from ddms.feeds.server import Fault, load_replay, parse_fault
from ddms.feeds.transport import (
    ClientConfig,
    Disconnected,
    Ended,
    FeedClient,
    ServeConfig,
    http_get,
    permanent_refusal,
    serve_replay,
)
from ddms.io.capture import iter_lines
from ddms.io.venues.binance_book import ASKS, BIDS, BinanceBook

BINANCE = SHARED / "data" / "binance"
FUT = "usdm_btcusdt_20240808.gz"
SPOT = "spot_btcusdt_20240808.gz"
MARKET = {FUT: "futures", SPOT: "spot"}
SLICE = 5000          # capture lines per slice (~350 depth messages with the snapshot line early)


def _free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    """Nothing listens: the client backs off (capped, jittered), says which attempt of how many
    comes next in plain words, and gives up after max_retries reconnect attempts."""
    async def go():
        cfg = ClientConfig(f"ws://127.0.0.1:{_free_port()}/none", backoff_base=0.01, backoff_cap=0.04,
                           max_retries=3, open_timeout=1)
        client = FeedClient(cfg)
        delays = [client.backoff(k) for k in range(1, 8)]
        assert all(0.005 <= d <= 0.04 for d in delays) and delays[-1] >= 0.02
        await asyncio.wait_for(client.run(), 10)
        items = []
        while not client.queue.empty():
            items.append(client.queue.get_nowait())
        assert isinstance(items[-1], Ended) and not items[-1].normal
        assert items[-1].reason == "gave up after 3 reconnect attempts in a row failed: connection refused " \
                                   "(no server listens there)"
        lost = [x for x in items if isinstance(x, Disconnected)]
        assert [(d.attempt, d.attempts, d.retry_in is None) for d in lost] == [
            (1, 3, False), (2, 3, False), (3, 3, False), (3, 3, True)]
        assert all(d.reason == "connection refused (no server listens there)" and not d.connected for d in lost)
        assert client.stats.connects == 0 and client.stats.failures == 4
    run(go())


def test_a_refused_handshake_is_not_retried(tmp_path):
    """A 404 at the handshake (a mistyped path) is the server's final answer: the client stops at
    the first refusal with the status and the server's text, instead of backing off through every
    reconnect attempt; 408/429 and 5xx stay retried."""
    assert permanent_refusal(404) and permanent_refusal(403) and permanent_refusal(400)
    assert not permanent_refusal(429) and not permanent_refusal(408) and not permanent_refusal(503)
    path = _slice(tmp_path, SPOT, 50)

    async def go():
        server, url = await _serve(load_replay(path), speed=1)
        client = FeedClient(ClientConfig(url.split("/stream")[0] + "/nope", backoff_base=0.01, max_retries=5,
                                         open_timeout=5))
        await asyncio.wait_for(client.run(), 10)
        server.cancel()
        items = []
        while not client.queue.empty():
            items.append(client.queue.get_nowait())
        end = items[-1]
        assert isinstance(end, Ended) and not end.normal
        assert end.reason.startswith("handshake refused: HTTP 404") and "not retried" in end.reason, end.reason
        assert client.stats.failures == 1 and client.stats.connects == 0
        assert [d.retry_in for d in items if isinstance(d, Disconnected)] == [None]
    run(go())


def test_failures_are_described_in_plain_words():
    """What a failed connection or snapshot request says: no exception repr, no errno."""
    from ddms.feeds.transport import FeedError, describe_error
    url = f"http://127.0.0.1:{_free_port()}/api/v3/depth"
    with pytest.raises(FeedError) as e:
        run(http_get(url, 5))
    assert str(e.value) == f"{url}: snapshot request failed: connection refused (no server listens there)"
    assert describe_error(ConnectionRefusedError(111, "Connect call failed"), 10) == \
        "connection refused (no server listens there)"
    assert describe_error(OSError("Multiple exceptions: [Errno 111] Connect call failed ('::1', 1), "
                                  "[Errno 111] Connect call failed ('127.0.0.1', 1)"), 10) == \
        "connection refused (no server listens there)"
    assert describe_error(TimeoutError(), 10) == "no answer within 10 s"
    assert describe_error(socket.gaierror(-2, "Name or service not known"), 10) == \
        "cannot resolve the host name (Name or service not known)"


def test_retry_policy_is_stated():
    assert retry_policy(8) == ("up to 8 reconnect attempts, waiting 0.1 s before the first and doubling up to 10 s "
                               "(22.7 s of waiting at most)")
    assert retry_policy(None).startswith("reconnect forever") and retry_policy(0) == "no reconnect attempt"
    assert ClientConfig("ws://x/").policy() == retry_policy(DEFAULT_RETRIES)
    with pytest.raises(DdmsError, match="max_retries must be >= 0"):
        ClientConfig("ws://x/", max_retries=-1)


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
    from ddms.io.orderproto import OrderEncoder
    enc = OrderEncoder()
    with open(path, "rb") as f:
        for line in f:
            enc.encode(line)
    return enc._book.orders


# ------------------------------------------------------------------------------------------
# the CLI, as separate processes
# ------------------------------------------------------------------------------------------

def _cli_capture(name: str) -> dict:
    path = BINANCE / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    server = cli("serve-feed", str(path), "--speed", "max")
    try:
        url = server.stdout.readline().decode().strip()
        assert url.startswith("ws://127.0.0.1:"), server.stderr.read().decode()
        mon = cli("monitor", url, "--once", "--json")
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


def test_monitor_stops_after_the_stated_policy_when_the_server_is_gone(tmp_path):
    """Without --once: the server ends the stream and exits; the monitor says so, states its
    policy, makes --reconnect attempts (one plain line each, no exception repr), then stops with
    exit 0 (a stream the server ended normally is not a failure), within the policy's time."""
    server, url = serve(small_book(tmp_path), "--rate", "3000")
    try:
        mon = cli("monitor", url, "--reconnect", "2", "--no-display")
        server.wait(timeout=120)
        gone = time.monotonic()
        out, err = mon.communicate(timeout=120)
        after = time.monotonic() - gone
    finally:
        server.kill()
        mon.kill()
    text = err.decode()
    assert mon.returncode == 0, text
    assert after < 15           # the policy waits at most 0.3 s; the rest is connecting and exiting
    lines = [x for x in text.splitlines() if "reconnect attempt" in x or x.startswith("monitor: stopped")]
    assert len(lines) == 4, text
    assert lines[0].startswith("monitor: the server ended the stream normally (end of replay); "
                               "reconnect attempt 1 of 2 in ")
    assert f"(policy: {retry_policy(2)}; --reconnect forever never gives up, --once stops when" in lines[0]
    assert lines[1].startswith("monitor: connection attempt failed: connection refused (no server listens there); "
                               "reconnect attempt 2 of 2 in ")
    assert lines[2] == "monitor: connection attempt failed: connection refused (no server listens there); " \
                       "no more reconnect attempts"
    assert lines[3] == "monitor: stopped: the server ended the stream normally (end of replay) and did not come " \
                       "back (2 reconnect attempts failed, the last: connection refused (no server listens there))"
    assert "Error" not in text and "Errno" not in text
    s = json.loads(out.decode().splitlines()[-1])
    assert s["end"] == lines[3].removeprefix("monitor: stopped: ") and s["applied"] > 200


def test_once_exits_0_when_the_replay_ends(tmp_path):
    """--once: exit 0 at the end of the replay, no reconnect; with --strategy the wait for the
    strategy's program is announced (as ddms run announces its compile)."""
    server, url = serve(small_book(tmp_path), "--rate", "3000")
    try:
        mon = cli("monitor", url, "--once", "--no-display", "--strategy", "sobi")
        out, err = mon.communicate(timeout=120)
        server.wait(timeout=30)
    finally:
        server.kill()
    text = err.decode()
    assert mon.returncode == 0 and server.returncode == 0, text
    assert "monitor: stopped: server closed the stream normally (end of replay)" in text
    assert "reconnect attempt" not in text
    assert re.search(r"^(loaded|compiled) sobi\.m3 \(strategy sobi\) in [\d.]+ s$", text, re.M), text
    s = json.loads(out.decode().splitlines()[-1])
    assert s["synced"] and s["applied"] > 200 and s["reconnects"] == 0


def test_lost_feed_gives_up_with_exit_3():
    """Nothing ever answers: the stated number of attempts, then exit 3 (not a finished stream)."""
    mon = cli("monitor", f"ws://127.0.0.1:{_free_port()}/orders", "--reconnect", "1", "--no-display")
    out, err = mon.communicate(timeout=120)
    text = err.decode()
    assert mon.returncode == 3, text
    assert "monitor: connection attempt failed: connection refused (no server listens there); reconnect attempt " \
           "1 of 1 in " in text
    assert "monitor: stopped: gave up after 1 reconnect attempt in a row failed: connection refused" in text
    assert "Error" not in text


def test_reconnect_option_is_checked(capsys):
    from ddms.cli import main
    for bad in ("-1", "often"):
        with pytest.raises(SystemExit):
            main(["monitor", "ws://127.0.0.1:9/x", "--reconnect", bad])
        assert "--reconnect" in capsys.readouterr().err
    assert main(["monitor", "ws://127.0.0.1:9/x", "--orders-log", "o.csv"]) == 2
    assert "--orders-log needs --strategy" in capsys.readouterr().err


def test_monitor_reports_unusable_url():
    p = cli("monitor", "http://127.0.0.1:1/x", "--once", "--json")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and b"not a websocket URL" in err


# ------------------------------------------------------------------------------------------
# strategy and display
# ------------------------------------------------------------------------------------------

class _Terminal(io.StringIO):
    """A buffer that says it is a terminal: rich draws the live display into it as it would on
    a screen (cursor moves and all), so the test sees every refresh, not just the last."""

    def isatty(self) -> bool:
        return True


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
_ORDER_LINE = re.compile(r"line [\d,]+  (order \d+: (limit|market) (buy|sell)|cancel order \d+)")


def _screen_lines(raw: str) -> list[str]:
    """What a terminal shows, line by line: escape sequences removed, split at CR and LF."""
    return [x for x in re.split(r"[\r\n]", _ANSI.sub("", raw)) if x.strip()]


def test_strategy_orders_go_to_their_panel_and_log(tmp_path, capsys):
    """--strategy sobi on its own program over a spot slice, the rich display drawn into a
    terminal-like buffer and an orders log: the strategy's views follow the book (BEST_BID equals
    the book's best bid); every order line the display shows sits inside the orders panel's
    border (never between the display's lines, never on stderr); the log holds every action."""
    path = _slice(tmp_path, SPOT, 3000)
    log = tmp_path / "orders.csv"

    async def go():
        server, url = await _serve(load_replay(path), rate=400)
        out = _Terminal()
        mon = Monitor(MonitorConfig(url, strategy="sobi", once=True, display=True, orders_log=str(log),
                                    strategy_params=(("threshold", 0.001),)), out=out)
        s = await mon.run()
        await server
        return mon, s, out.getvalue()
    mon, s, raw = run(go())
    assert s["gaps"] == 0 and s["bookticker_mismatch"] == 0 and s["strategy"]["name"] == "sobi"
    assert mon.engine.value("BEST_BID") == float(mon.book.best_bid()[0])
    actions = s["strategy"]["orders"] + s["strategy"]["cancels"]
    assert s["strategy"]["orders"] >= 2 and s["strategy"]["cancels"] >= 1
    with open(log, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == actions == len(mon.strategy_ctx.orders)
    assert {r["action"] for r in rows} == {"limit", "cancel"} and all(float(r["qty"]) in (0.0, 1.0) for r in rows)
    assert [int(r["line"]) for r in rows] == [o.line for o in mon.strategy_ctx.orders]
    screen = _screen_lines(raw.rsplit("\n", 2)[0])         # all but the summary line
    assert json.loads(_ANSI.sub("", raw.splitlines()[-1]))["event"] == "summary"
    shown = [x for x in screen if _ORDER_LINE.search(x)]
    assert shown, "the orders panel shows the orders"
    assert all(x.startswith("│") and x.rstrip().endswith("│") for x in shown), shown   # inside the panel
    titles = [x for x in screen if "orders (sobi):" in x]
    assert titles and f"{s['strategy']['orders']} placed" in titles[-1] and "all orders in /" in raw
    assert "ddms monitor" in raw and "bookTicker checked" in raw and "SIGNAL" in raw
    assert not _ORDER_LINE.search(capsys.readouterr().err)


def test_strategy_orders_as_json_events(tmp_path):
    """With --json each strategy action is one ``order`` event line, in order, with its fields."""
    path = _slice(tmp_path, SPOT, 3000)
    _, mon, s, lines, _ = run(_session(path, rate=400, strategy="sobi", strategy_params=(("threshold", 0.001),)))
    orders = [x for x in lines if x.get("event") == "order"]
    assert len(orders) == s["strategy"]["orders"] + s["strategy"]["cancels"] >= 3
    assert [(o["line"], o["action"], o["order_id"]) for o in orders] == [
        (r.line, r.action, r.order_id) for r in mon.strategy_ctx.orders]
    assert all(o["qty"] == 1.0 for o in orders if o["action"] == "limit")      # the default size: 1 lot


def test_unknown_strategy_is_a_clear_error():
    p = cli("monitor", "ws://127.0.0.1:9/x", "--strategy", "nope", "--once")
    _, err = p.communicate(timeout=60)
    assert p.returncode == 2 and b"unknown strategy 'nope'" in err and b"sobi" in err


def _readme_strategy_example() -> tuple[list[str], list[str]]:
    """The README's block that runs ``ddms monitor --strategy``: its serve-feed and monitor command
    lines (argv after ``ddms``), read from README.md itself so that this test follows the text."""
    import shlex

    from test_readme import BLOCKS
    (block,) = [b for b in BLOCKS if "ddms monitor" in b.text and "--strategy" in b.text]
    commands = [shlex.split(line, comments=True) for line in block.text.replace("\\\n", " ").splitlines()]
    serve = next(c for c in commands if c[:2] == ["ddms", "serve-feed"])
    monitor = next(c for c in commands if c[:2] == ["ddms", "monitor"])
    return [x for x in serve[1:] if x != "&"], monitor[1:]


def test_readme_strategy_example_places_orders(tmp_path):
    """The README's strategy example, with its capture, strategy and parameters, places orders
    (run in-process on a free port: the same server and monitor code as the two commands)."""
    from ddms.cli import build_parser
    from ddms.feeds.cli import monitor_config
    serve_argv, monitor_argv = _readme_strategy_example()
    parser = build_parser()
    sargs, margs = parser.parse_args(serve_argv), parser.parse_args(monitor_argv)
    capture = REPO / sargs.input
    if not capture.exists():
        pytest.skip(f"{capture} not available")
    config = monitor_config(margs)
    assert config.strategy and config.once and config.orders_log

    async def go():
        server, url = await _serve(load_replay(capture), speed=sargs.speed, rate=sargs.rate)
        path = config.url.split("/", 3)[3]          # the README's path on the README's port
        cfg = dataclasses.replace(config, url=url.split("/stream")[0] + "/" + path,
                                  orders_log=str(tmp_path / config.orders_log))
        mon = Monitor(cfg, out=io.StringIO())
        s = await mon.run()
        await server
        return cfg, s
    cfg, s = run(go())
    assert s["end"].startswith("server closed the stream normally") and s["gaps"] == 0
    with open(cfg.orders_log, newline="") as f:
        rows = list(csv.DictReader(f))
    placed = [r for r in rows if r["action"] != "cancel"]
    assert s["strategy"]["orders"] == len(placed) >= 1
    assert all(float(r["qty"]) == 1.0 for r in placed)


def test_a_snapshot_in_flight_when_the_stream_ends_is_answered(tmp_path, monkeypatch):
    """``once``: the server ends the stream while a snapshot request is in flight; its answer
    still reaches the queue, before the end record.  It used to be cancelled with the client's
    other tasks, so a replay whose messages all arrived during the fetch (an unthrottled replay
    of a capture without a snapshot line, on a loaded machine) applied nothing."""
    from clitools import small_book

    from ddms.feeds import transport
    from ddms.feeds.transport import SnapshotReply

    async def slow_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
        await asyncio.sleep(0.5)
        return 200, b'{"late": true}'

    monkeypatch.setattr(transport, "http_get", slow_get)

    async def go() -> list:
        server, url = await _serve(load_replay(small_book(tmp_path, 30)))
        client = FeedClient(ClientConfig(url, once=True))
        client.request_snapshot("http://127.0.0.1:1/snapshot")
        await asyncio.wait_for(client.run(), 30)
        await asyncio.wait_for(server, 10)
        items = []
        while not client.queue.empty():
            items.append(client.queue.get_nowait())
        return items

    items = run(go())
    assert isinstance(items[-1], Ended) and items[-1].normal, items[-1]
    replies = [x for x in items if isinstance(x, SnapshotReply)]
    assert [r.body for r in replies] == [b'{"late": true}']
