"""``ddms monitor URL --checkpoint DIR`` on multi-symbol venue sessions (Kraken, OKX, Coinbase,
Binance with several symbols), killed with SIGKILL mid-stream and restarted with the same DIR.

The views are per-symbol SQL (``symbol_best_bid.sql``: the streams declare a symbol column, so
every symbol of the session feeds the one engine).  The restarted monitor restores the engine
and every symbol's book, then each symbol resynchronizes from the venue (a fresh subscription's
snapshot, or Binance's REST snapshot), which replaces the restored levels: the final views equal
an uninterrupted monitor's, every symbol ends synchronized, and the engine's lines continue after
the restored one.  Synthetic captures (tests/venue_sim.py via tests/test_feeds_venues.py's
writers) served by ``ddms serve-feed``; the server helpers are tests/test_monitor_checkpoint.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import serve
from conftest import REPO
from test_feeds_venues import write_binance_capture, write_venue_capture
from test_monitor_checkpoint import _monitor, _monitor_killed, _restored

from ddms.runtime.resume import checkpoints

PROGRAM = REPO / "examples" / "sql" / "symbol_best_bid.sql"


def _capture(tmp_path: Path, venue: str) -> tuple[Path, list[str]]:
    if venue == "binance":
        path, truth = write_binance_capture(tmp_path, 4, "futures", n=1500)
    else:
        path, truth, _ = write_venue_capture(tmp_path, venue, 4, n=1500)
    return path, sorted(truth)


def _views(lines: list[dict]) -> dict:
    return [x for x in lines if "views" in x][-1]


@pytest.mark.parametrize("venue,during_write", [("okx", False), ("kraken", True), ("binance", False)])
def test_venue_session_restores_and_resyncs_every_symbol(tmp_path, venue, during_write):
    data, symbols = _capture(tmp_path, venue)
    server, url = serve(data, "--speed", "max")
    try:
        want = _monitor(url, None, program=PROGRAM)
    finally:
        server.kill()
    assert set(want[-1]["symbols"]) == set(symbols) and want[-1]["synced"]
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "300")
    try:
        _monitor_killed(url, folder, 50, during_write=during_write, program=PROGRAM)
    finally:
        server.kill()
    line = checkpoints(folder)[-1][0]
    assert line > 0
    server, url = serve(data, "--speed", "max")    # a new server: the stream from its start again
    try:
        lines = _monitor(url, folder, program=PROGRAM)
    finally:
        server.kill()
    r = _restored(lines)
    assert r["line"] == line and not any(folder.glob(".*.tmp"))
    s = lines[-1]
    assert s["synced"] and s["crossed"] == 0
    for sym in symbols:
        d = s["symbols"][sym]
        assert d["synced"] and d["resyncs"] >= 1, (sym, d)
    got = _views(lines)
    assert got["views"] == _views(want)["views"]       # the same books, so the same views
    assert got["line"] > line                          # the engine's lines went on after the restored one
    assert checkpoints(folder)[-1][0] == got["line"]   # and the session's end was checkpointed


@pytest.mark.slow    # ~30 s: the restart must come back while the same server still streams
@pytest.mark.parametrize("venue", ["okx", "binance"])
def test_venue_session_restarted_while_the_server_goes_on(tmp_path, venue):
    """Killed and restarted against the same server, which went on meanwhile: each symbol's
    restored book is replaced by a fresh snapshot at the server's replay position (messages
    sent while the monitor was down are never seen); the final views equal an uninterrupted
    monitor's."""
    data, symbols = _capture(tmp_path, venue)
    server, url = serve(data, "--speed", "max")
    try:
        want = _monitor(url, None, program=PROGRAM)
    finally:
        server.kill()
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "100")
    try:
        _monitor_killed(url, folder, 30, program=PROGRAM)
        lines = _monitor(url, folder, program=PROGRAM)
    finally:
        server.kill()
    _restored(lines)
    s = lines[-1]
    assert s["synced"] and all(s["symbols"][sym]["synced"] for sym in symbols)
    assert _views(lines)["views"] == _views(want)["views"]


def test_a_checkpoint_of_other_symbols_is_refused(tmp_path):
    data, _ = _capture(tmp_path, "okx")
    folder = tmp_path / "ck"
    server, url = serve(data, "--speed", "max")
    try:
        _monitor(url, folder, program=PROGRAM)
    finally:
        server.kill()
    (tmp_path / "k").mkdir()
    other, _ = _capture(tmp_path / "k", "kraken")
    server, url = serve(other, "--speed", "max")
    try:
        from clitools import cli
        mon = cli("monitor", url, "--views", str(PROGRAM), "--json", "--once", "--checkpoint", str(folder))
        _, err = mon.communicate(timeout=600)
    finally:
        server.kill()
    assert mon.returncode != 0 and "a checkpoint of okx" in err.decode() and "this feed is kraken" in err.decode()
