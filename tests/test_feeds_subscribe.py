"""Binance with many symbols: what the venue does when one URL cannot name every stream.

``ddms serve-feed`` advertises a bare ``/stream`` when the stream URL would be too long (an HTTP
server refuses a request line over ~8 KB with 414) or name more than 1,024 streams (Binance's
limit per connection); a bare ``/stream`` carries nothing until the client SUBSCRIBEs; a
connection never listens to more than 1,024 streams; long ``X-DDMS-*`` header values go as
several header lines.  ``ddms monitor`` then subscribes in batches (paced for the venue's
message rate) and every symbol syncs as over a stream URL.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from test_feeds_venues import _books_equal_truth, _clean, _session, run, write_binance_capture

from ddms.errors import DdmsError
from ddms.feeds import venue_server, venue_session
from ddms.feeds.server import HttpAnswer, WsRoute, load_replay, streams_route
from ddms.feeds.transport import _header_lines
from ddms.feeds.venue_session import SendText, VenueSession
from ddms.io.venues.binance_book import MAX_STREAMS

SYMS = ("AAAUSDT", "BBBUSDT", "CCCUSDT", "DDDUSDT", "EEEUSDT")


def test_stream_routes_follow_binance() -> None:
    streams = ("aaausdt@depth", "aaausdt@bookTicker")
    assert streams_route(streams, [], True) == WsRoute(None, True)        # bare /stream: every stream
    assert streams_route(streams, [], False) == WsRoute(frozenset(), False)
    assert streams_route(streams, ["AAAUSDT@depth"], True) == WsRoute(frozenset({"aaausdt@depth"}), True)
    many = tuple(f"s{i}usdt@depth" for i in range(MAX_STREAMS + 1))
    assert streams_route(many, [], True) == WsRoute(frozenset(), True)   # too many: nothing until SUBSCRIBE
    r = streams_route(many, list(many), True)
    assert isinstance(r, HttpAnswer) and r.status == 400 and "1024" in json.loads(r.body)["msg"]
    assert streams_route(many, list(many[:MAX_STREAMS]), True).streams == frozenset(many[:MAX_STREAMS])


def test_subscribe_accepts_quiet_streams_of_known_symbols_and_caps_a_connection(tmp_path: Path) -> None:
    path, _ = write_binance_capture(tmp_path, 3, "spot", symbols=SYMS[:3], n=60)
    core = load_replay(path)
    kinds = core.stream_kinds()
    assert "bookTicker" in kinds and any(k.startswith("depth") for k in kinds)
    assert core.headers()["X-DDMS-Streams"] == ",".join(kinds)
    depth = next(k for k in kinds if k.startswith("depth"))
    assert core.stream_name(f"aaausdt@{depth}") is not None
    assert core.stream_name("zzzusdt@bookTicker") is None            # not a symbol of the capture
    assert core.stream_name("aaausdt@kline_1m") is None              # not a kind it holds
    route = WsRoute(frozenset(), True)
    r, replies = core.subscribe(route, json.dumps({"method": "SUBSCRIBE", "params": [f"aaausdt@{depth}"], "id": 1}))
    assert replies == [json.dumps({"result": None, "id": 1})] and r.streams == {f"aaausdt@{depth}"}
    full = WsRoute(frozenset(f"x{i}@depth" for i in range(MAX_STREAMS)), True)
    r, replies = core.subscribe(full, json.dumps({"method": "SUBSCRIBE", "params": [f"bbbusdt@{depth}"], "id": 2}))
    assert r == full and "at most 1024" in json.loads(replies[0])["error"]["msg"]


def test_ws_path_is_bare_when_the_url_would_be_too_long(tmp_path: Path, monkeypatch) -> None:
    path, _ = write_binance_capture(tmp_path, 3, "spot", symbols=SYMS[:3], n=60)
    core = load_replay(path)
    assert core.ws_path().startswith("/stream?streams=")
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    assert core.ws_path() == "/stream"


@pytest.mark.parametrize("value", ["", "a", ",".join(f"S{i:05d}USDT" for i in range(3000)), "x" * 9000 + ",y"])
def test_long_header_values_go_as_several_lines(value: str) -> None:
    lines = _header_lines(value, 4000)
    assert ",".join(lines) == value
    assert all(len(x) <= 4000 or "," not in x for x in lines)


def test_session_subscribes_in_batches_depth_first() -> None:
    syms = [f"S{i:04d}USDT" for i in range(1000)]
    s = VenueSession("binance", syms, "ws://127.0.0.1:1/stream", market="spot",
                     stream_kinds=["depth@100ms", "bookTicker", "aggTrade"], subscribe_interval=0.25)
    acts = s.on_connect(1)
    assert all(type(a) is SendText for a in acts)
    assert [a.delay for a in acts] == [0.25 * i for i in range(len(acts))]
    msgs = [json.loads(a.text) for a in acts]
    params = [p for m in msgs for p in m["params"]]
    assert all(m["method"] == "SUBSCRIBE" and len(m["params"]) <= venue_session.SUBSCRIBE_BATCH for m in msgs)
    assert len({m["id"] for m in msgs}) == len(msgs)
    assert params[:1000] == [f"{x.lower()}@depth@100ms" for x in syms]      # every depth stream first
    assert params[1000:] == [f"{x.lower()}@bookTicker" for x in syms[:MAX_STREAMS - 1000]]
    assert len(params) == MAX_STREAMS
    # a URL that names its streams: nothing to send
    named = VenueSession("binance", syms[:2], "wss://stream.binance.com:9443/stream?streams=s0000usdt@depth/"
                         "s0001usdt@depth", market="spot")
    assert named.on_connect(1) == []
    with pytest.raises(DdmsError, match="at most 1024 streams"):
        VenueSession("binance", [f"S{i}" for i in range(MAX_STREAMS + 1)], "ws://127.0.0.1:1/stream")


@pytest.mark.parametrize("market", ["spot", "futures"])
def test_monitor_subscribes_over_a_bare_stream_and_replays_clean(tmp_path: Path, monkeypatch, market: str) -> None:
    """The whole path with a stream URL too long to advertise (MAX_URL lowered so that five
    symbols exceed it) and small SUBSCRIBE batches: every symbol synced, 0 gaps, bookTickers
    checked, books equal the truth."""
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    monkeypatch.setattr(venue_session, "SUBSCRIBE_BATCH", 3)
    path, truth = write_binance_capture(tmp_path, random.Random(market).randrange(100), market, symbols=SYMS)
    core, mon, s, lines = run(_session(path))
    assert s["url"].endswith("/stream")
    subs = [json.loads(x["text"]) for x in lines if x.get("event") == "subscription"]
    assert len(subs) >= 3 and all(m["method"] == "SUBSCRIBE" and len(m["params"]) <= 3 for m in subs)
    _clean(s, truth)
    assert s["bookticker_checked"] > 10
    _books_equal_truth(mon, truth, "binance")


@pytest.mark.slow
def test_thousand_symbols_through_serve_feed_and_monitor(tmp_path: Path) -> None:
    """The case of issue 22: 1,000 symbols, whose stream URL (~22 KB) the HTTP server refused
    with 414; now SUBSCRIBE batches.  Every symbol synced, 0 gaps, 0 resyncs."""
    from bench.ingest import binance_feed, write_capture
    snaps, msgs = binance_feed(1000, 3000, 5)
    path = tmp_path / "BINANCE.ws.1.0"
    write_capture(path, snaps, msgs, as_recorded=True)
    core, mon, s, _ = run(_session(path))
    seen = {json.loads(m)["data"]["s"] for m in msgs}        # symbols with a depth message (~95%)
    assert s["url"].endswith("/stream") and set(s["symbols"]) == seen and len(seen) > 900
    assert s["synced"] and s["gaps"] == 0 and s["resyncs"] == 0 and s["crossed"] == 0
    assert all(v["synced"] for v in s["symbols"].values())


def test_recording_of_a_subscribed_session_replays_and_reads_back(tmp_path: Path, monkeypatch) -> None:
    """``--record`` of a session that subscribed with SUBSCRIBE messages: serve-feed replays it
    to the same per-symbol summary, and read_cryptofeed (run/backtest/convert) reads it synced."""
    from test_feeds_venues import _SAME

    from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
    monkeypatch.setattr(venue_server, "MAX_URL", 40)
    path, truth = write_binance_capture(tmp_path, 4, "spot", symbols=SYMS)
    rec = tmp_path / "session.rec"
    _, _, live, _ = run(_session(path, record=str(rec)))
    text = rec.read_text().splitlines()
    assert text[0].split(" ")[0].split("#")[0].endswith("/stream") and any('"SUBSCRIBE"' in x for x in text)
    core, mon, again, _ = run(_session(rec))
    for sym in truth:
        assert {k: again["symbols"][sym][k] for k in _SAME} == {k: live["symbols"][sym][k] for k in _SAME}
    _books_equal_truth(mon, truth, "binance")
    parser = CryptofeedParser(str(rec))
    for _ in read_cryptofeed(rec, parser=parser):
        pass
    s = parser.summary()
    assert s["synced"] and s["gaps"] == 0 and set(s["symbols"]) == set(truth)
    for sym in truth:
        assert s["symbols"][sym]["depth_events"] == live["symbols"][sym]["depth_events"]
