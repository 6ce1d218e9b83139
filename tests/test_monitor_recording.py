"""A ``ddms monitor``'s recording plus its own checkpoints replay the session (issue 24, item 3).

``ddms monitor URL --views P --record REC --checkpoint DIR`` numbers its engine lines as a
capture reader numbers REC (one line per message that made rows), applies the rows message by
message as ``ddms run P --data REC`` does, and puts in every checkpoint the reader's state at the
recording's position; so ``ddms run P --data REC --resume CKPT [--until N]`` prints exactly what
the uninterrupted ``ddms run P --data REC`` prints after CKPT's line, and the monitor's own
final views are the replay's.  A monitor killed and restarted with the same ``--record`` cuts the
recording back to the restored checkpoint and appends the new connection, at which the reader
resyncs every book as the monitor did: a recording spanning a restart replays too.

* round trips through ``ddms serve-feed`` + ``ddms monitor --record --checkpoint`` over loopback
  (synthetic captures of tests/venue_sim.py; Kraken, OKX, Coinbase, Binance), with a program
  whose floating-point sum over symbols depends on the order the rows are applied in;
* the same across a kill -9 and a restart of the monitor;
* unit level: a venue session's engine rows equal the capture reader's rows of its recording
  (the old numbering -- one line per received message, rows grouped per symbol per drained run
  -- fails it), and the reader state a checkpoint derives from the session equals the reader's
  own; the order a restored price-level book deletes its levels in;
* refusals: a monitor checkpoint taken without ``--record``, another recording, a restart
  recording into another file.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from clitools import serve
from conftest import REPO
from test_feeds_venues import _session, write_binance_capture, write_venue_capture
from test_resume import line_of, resume_point
from venue_sim import binance, kraken, okx

import ddms as _ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.cli import main
from ddms.feeds.checkpoints import _replay_state
from ddms.feeds.venue_session import Recorder, VenueSession
from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
from ddms.io.levels import ASKS, BIDS, LevelBook
from ddms.io.sources import open_source
from ddms.io.symbols import symbol_id, with_symbol
from ddms.runtime.resume import checkpoints

PROGRAM = REPO / "tests" / "programs" / "symbol_notional.sql"
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _capture(tmp: Path, venue: str, n: int) -> Path:
    if venue == "binance_one":      # an hftbacktest capture of one symbol: its server names no symbol
        from replay.sample_data import binance_capture_lines
        path = tmp / "capture.txt"
        path.write_text("".join(x + "\n" for x in binance_capture_lines("futures", n, seed=n)))
        return path
    if venue == "binance":
        return write_binance_capture(tmp, 4, "futures", n=n)[0]
    return write_venue_capture(tmp, venue, 4, n=n)[0]


def _monitor_args(url: str, rec: Path, folder: Path, every: int) -> list[str]:
    return ["monitor", url, "--views", str(PROGRAM), "--json", "--once", "--record", str(rec), "--checkpoint",
            str(folder), "--checkpoint-every", str(every), "--checkpoint-keep", "0"]


def _cli(*args: str) -> tuple[int, list[str], str]:
    """``ddms ARGS`` in this process (the compiled programs stay loaded: no process start-up):
    exit status, stdout lines, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue().splitlines(), err.getvalue()


def _run(*args: str) -> tuple[list[str], str]:
    rc, out, err = _cli("run", *args)
    assert rc == 0, err
    return out, err


def _monitor(data: Path, rec: Path | None, folder: Path, every: int = 40, rate: float = 0.0) -> list[dict]:
    """``ddms serve-feed DATA --rate RATE`` + ``ddms monitor URL --views PROGRAM --record REC
    --checkpoint FOLDER`` over loopback, both in this process (tests/test_feeds_venues.py's
    session)."""
    kw = {"record": str(rec)} if rec is not None else {}
    _, _, _, lines = asyncio.run(_session(data, rate=rate, views=str(PROGRAM), checkpoint=str(folder),
                                          checkpoint_every=every, checkpoint_keep=0, **kw))
    return lines


def _final(lines: list[dict]) -> dict:
    return [x for x in lines if "views" in x][-1]


def _replays(rec: Path, folder: Path, monitor_final: dict, rng: random.Random, picks: list[int]) -> None:
    """The uninterrupted replay ends where the monitor ended (same line, same views); from each
    checkpoint of ``picks`` (indexes into the folder's checkpoints) up to a random line, a new
    process prints exactly the uninterrupted replay's lines; ``--resume DIR`` continues from the
    newest and writes nothing into the monitor's folder."""
    common = [str(PROGRAM), "--data", str(rec), "--json", "--every", "1"]
    full, _ = _run(*common)
    assert json.loads(full[-1]) == monitor_final
    total = line_of(full[-1])
    found = checkpoints(folder)
    assert found[-1][0] == total
    for k in picks:
        line, path = found[k]
        until = rng.randint(line + 1, total) if line < total else total
        got, err = _run(*common, "--resume", str(path), "--until", str(until))
        assert resume_point(err) == line
        assert got == ([x for x in full if line < line_of(x) <= until] or [full[-1]]), (line, until)
    before = sorted(p.name for p in folder.iterdir())
    got, err = _run(*common, "--resume", str(folder))
    assert resume_point(err) == total and got == [full[-1]]
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize("venue", ["okx", "binance", "kraken", "coinbase", "binance_one"])
def test_monitor_checkpoints_replay_its_recording(tmp_path, venue):
    data = _capture(tmp_path, venue, 600)
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    lines = _monitor(data, rec, folder, rate=1500)
    found = checkpoints(folder)
    assert len(found) >= 2
    rng = random.Random(venue)
    _replays(rec, folder, _final(lines), rng, sorted(rng.sample(range(len(found) - 1), min(2, len(found) - 1))))


def _killed(url: str, args: list[str], folder: Path, after: int) -> None:
    """Run the monitor until ``after`` checkpoints exist and more messages followed, then SIGKILL."""
    mon = subprocess.Popen([sys.executable, "-m", "ddms.cli", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=ENV, cwd=REPO)
    try:
        deadline = time.monotonic() + 600
        while len(checkpoints(folder)) < after and time.monotonic() < deadline and mon.poll() is None:
            time.sleep(0.01)
        time.sleep(0.2)
        assert mon.poll() is None, mon.communicate()[1].decode()[-2000:]
        mon.send_signal(signal.SIGKILL)
        mon.wait(timeout=30)
    finally:
        mon.kill()


@pytest.mark.parametrize("venue", ["okx", "binance_one", pytest.param("binance", marks=pytest.mark.slow),
                                   pytest.param("kraken", marks=pytest.mark.slow)])
def test_a_recording_spanning_a_restart_replays(tmp_path, venue):
    """Killed (SIGKILL) after a few checkpoints, restarted with the same --record and
    --checkpoint against a server replaying from the start: the recording is cut back to the
    restored checkpoint (the killed process's lines after it are gone) and the new connection
    appended; its replay ends with the restarted monitor's views at its line, and replays from
    checkpoints before, at and after the restart equal the uninterrupted replay."""
    data = _capture(tmp_path, venue, 1200)
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    server, url = serve(data, "--rate", "300")
    try:
        _killed(url, _monitor_args(url, rec, folder, 40), folder, 3)
    finally:
        server.kill()
    restored_line = checkpoints(folder)[-1][0]
    lines = _monitor(data, rec, folder)       # a new server: the stream from its start again
    assert [x["line"] for x in lines if x.get("event") == "restored"] == [restored_line]
    assert sum(b" <-> " in x for x in rec.read_bytes().splitlines()) == 2     # two connections, one file
    found = checkpoints(folder)
    at = [ln for ln, _ in found].index(restored_line)
    assert at + 1 < len(found)
    _replays(rec, folder, _final(lines), random.Random(venue), [at - 1, at, at + 1])


def test_refusals(tmp_path):
    data = _capture(tmp_path, "okx", 150)
    rec, folder, plain = tmp_path / "session.rec", tmp_path / "ck", tmp_path / "plain"
    _monitor(data, rec, folder)
    _monitor(data, None, plain)                  # a monitor that did not record
    other = tmp_path / "b" / "session.rec"       # the same name, other lines
    other.parent.mkdir()
    other.write_bytes(rec.read_bytes().replace(b'"bids"', b'"bidz"'))
    for record, ck, why in ((other, folder, "not the recording"),
                            (tmp_path / "x.rec", plain, "taken without --record")):
        rc, _, err = _cli("monitor", "ws://127.0.0.1:9/", "--views", str(PROGRAM), "--once", "--record", str(record),
                          "--checkpoint", str(ck))
        assert rc == 2 and why in err, err      # refused before connecting, with the reason
    rc, _, err = _cli("run", str(PROGRAM), "--data", str(other), "--resume", str(checkpoints(folder)[0][1]))
    assert rc == 2 and "is not the one checkpointed" in err, err
    rc, _, err = _cli("run", str(PROGRAM), "--data", str(rec), "--resume", str(checkpoints(plain)[-1][1]))
    assert rc == 2 and "taken without --record" in err, err


# ------------------------------------------------------------------------------------------
# unit level: the session's rows and reader state against the capture reader's
# ------------------------------------------------------------------------------------------

def _drive(venue: str, seed: int, path: Path) -> tuple[VenueSession, Recorder, list]:
    """Feed a synthetic stream to a venue session, recording it as the monitor does (drained runs
    of random sizes, then take_events); returns the session, its recorder and the rows taken
    (with the symbol column, as the monitor applies them)."""
    rng = random.Random(seed)
    url = "ws://127.0.0.1:1/ws/v5/public"
    snaps: dict = {}
    if venue == "binance":
        msgs, _, snaps = binance(rng, n=300)
        syms = sorted({m["data"]["s"] for _, m in msgs if "data" in m})
        url = "ws://127.0.0.1:1/stream"
    else:
        msgs, truth = (okx if venue == "okx" else kraken)(rng, n=300)
        syms = sorted(truth)
    at: dict[int, list] = {}
    for sym, (pos, snap) in snaps.items():
        at.setdefault(pos, []).append((sym, snap))
    out = open(path, "wb")
    rec = Recorder(out, "binance_futures" if venue == "binance" else venue, str(path))
    sess = VenueSession(venue, syms, url, market="futures")
    rec.opened(url, 1600000000.0)
    rows: list = []

    i, t = 0, 1600000001.0
    datas = [json.dumps(m, separators=(",", ":")).encode() for _, m in msgs]
    while i < len(datas):
        for sym, snap in at.pop(i, ()):        # Binance: the REST snapshots fetched before message i
            stamp = Recorder.stamp(t)
            rec.rest(f"http://127.0.0.1:1/fapi/v1/depth?symbol={sym}&limit=1000", stamp, json.dumps(snap).encode())
            sess.apply_snapshot(sym, json.dumps(snap).encode(), int(float(stamp) * 1e9))
        j = min(len(datas), i + rng.randint(1, 40), *(k for k in at if k > i))
        for d in datas[i:j]:
            t += 0.01
            rec.received(t, d)
        sess.feed_many(datas[i:j])
        rows.extend((ev.batch, symbol_id(ev.symbol)) for ev in sess.take_events())
        sess._check()
        rec._check()
        i = j
    out.close()
    return sess, rec, rows


def _flat(rows: list) -> tuple:
    rel = np.concatenate([b.rel for b, _ in rows])
    cols = np.concatenate([with_symbol(b.cols, s) for b, s in rows])
    return rel.tolist(), np.concatenate([b.sign for b, _ in rows]).tolist(), cols.tolist(), \
        np.concatenate([b.line for b, _ in rows]).tolist()


@pytest.mark.parametrize("venue,seed", [("okx", 1), ("kraken", 2), ("binance", 3), ("binance", 4)])
def test_session_rows_and_state_are_the_readers(tmp_path, venue, seed):
    """The rows a venue session hands the engine (symbol column added) are the rows ``ddms run``
    reads from its recording, on the same lines and in the same order; the reader state the
    monitor's checkpoint derives from the session is the reader's own after the whole file."""
    path = tmp_path / "session.rec"
    sess, rec, rows = _drive(venue, seed, path)
    reader = open_source(str(path), symbols=True).reader()
    got = list(reader.batches())
    assert got and _flat(rows) == (np.concatenate([b.rel for b in got]).tolist(),
                                   np.concatenate([b.sign for b in got]).tolist(),
                                   np.concatenate([b.cols for b in got]).tolist(),
                                   np.concatenate([b.line for b in got]).tolist())
    assert sess.line == reader.position == got[-1].last_line
    state = sess.core.save_state()
    derived = _replay_state(sess, rec, state if isinstance(state, tuple) else (state, {}))
    want, want_arrays = reader.save_state()
    mine = derived["readers"][0]["state"]
    for s in (mine, want):
        s["reader"]["parser"]["actions"] = []     # the Resyncs a capture cannot perform: informational
        s["reader"]["parser"]["bad_lines"] = 0
    assert json.loads(json.dumps(mine)) == json.loads(json.dumps(want))
    arrays = {k[len("reader0."):]: a for k, a in derived["arrays"].items()}
    assert sorted(arrays) == sorted(want_arrays)
    assert all(np.array_equal(arrays[k], want_arrays[k]) for k in arrays)


def test_a_new_connection_line_resyncs_every_book(tmp_path):
    """The reader's side of a reconnect or restart: at a connection line after the first every
    book is discarded and waits for its next snapshot (counted as a resync), as the monitor does;
    the count of connections survives a saved state."""
    path, truth, _ = write_venue_capture(tmp_path, "okx", 5, n=200)
    lines = path.read_text().splitlines()
    cut = len(lines) // 2
    lines.insert(cut, lines[0].replace("1600000000.0", "1600000050.0"))
    path.write_text("\n".join(lines) + "\n")
    parser = CryptofeedParser(str(path))
    for _ in read_cryptofeed(path, parser=parser):
        pass
    s = parser.summary()
    assert parser.connections == 2 and all(s["symbols"][sym]["resyncs"] == 1 for sym in truth)
    meta, arrays = parser.save_state()
    again = CryptofeedParser(str(path))
    again.load_state(json.loads(json.dumps(meta)), arrays)
    assert again.connections == 2


def test_a_restored_level_book_deletes_in_the_same_order():
    """LevelBook state keeps the levels in the order they were set: a restored book discarded by
    a resync emits its deletes in the uninterrupted book's order (a SUM view continues bit for
    bit; the old state, in price order, changed the order)."""
    book = LevelBook("X")
    for k, px in enumerate(["10.5", "9.25", "11", "10.75", "9.5"]):
        book.set(BIDS, px, f"{k + 1}.5", 1000.0 + k, 1)
        book.set(ASKS, str(20 - k), "2", 1000.0, 1)
    book.take()
    again = LevelBook.from_state(json.loads(json.dumps(book.save_state())))
    again._check()
    book.clear(2)
    again.clear(2)
    a, b = book.take(), again.take()
    assert a.cols.tolist() == b.cols.tolist() and a.rel.tolist() == b.rel.tolist()


# ------------------------------------------------------------------------------------------
# strategies: a strategy without the checkpoint protocol is refused (tests/test_strategy_checkpoint.py)
# ------------------------------------------------------------------------------------------

def test_a_strategy_without_state_is_refused_by_the_monitor(tmp_path):
    """``ddms monitor --strategy S --checkpoint`` of a strategy that defines no ``state()`` /
    ``restore()`` is refused before connecting, naming what to add; so is ``--strategy`` on a
    checkpoint taken without one."""
    from ddms.errors import DdmsError
    from ddms.feeds.monitor import Monitor, MonitorConfig
    ref = f"{REPO / 'examples' / 'strategies' / 'imbalance.py'}:Imbalance"
    with pytest.raises(DdmsError, match=r"defines no state\(\) -> dict and restore\(state\)"):
        Monitor(MonitorConfig("ws://127.0.0.1:9/orders", strategy=ref, checkpoint=str(tmp_path / "ck")),
                out=io.StringIO())
    data = _capture(tmp_path, "okx", 150)
    _monitor(data, None, tmp_path / "plain")        # a checkpoint without a strategy
    with pytest.raises(DdmsError, match="holds no strategy state"):
        Monitor(MonitorConfig("ws://127.0.0.1:9/ws/v5/public", views=str(PROGRAM), strategy="sobi",
                              checkpoint=str(tmp_path / "plain")), out=io.StringIO())
