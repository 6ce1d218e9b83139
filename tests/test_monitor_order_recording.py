"""``ddms monitor URL/orders --record FILE --checkpoint DIR``: our order protocol recorded, its
checkpoints replayed (issue 24, items 2 and 3).

The monitor records the order protocol in its own format (:mod:`ddms.io.orderrec`: the messages
as received plus the decoder's decisions: snapshots applied, resyncs, restarts), which ``ddms
run`` reads back through the same decoder, so:

* the replay of a recording prints, line for line, what ``ddms run`` prints on the order-book
  CSV the server replayed (``--every 1``: the views after every line), and ends with the
  monitor's own final views;
* ``ddms run P --data REC --resume CKPT [--until N]`` from any of the monitor's checkpoints prints
  exactly the uninterrupted replay's lines after CKPT;
* a monitor killed with SIGKILL mid-stream and restarted with the same ``--record`` and
  ``--checkpoint`` against a server replaying from seq 1: it restores, drops the messages up to
  the restored ``seq`` as stale and applies the rest once; the recording (cut back to the
  restored checkpoint, the restart appended) replays to the views after every line of an
  uninterrupted run -- nothing applied twice, nothing skipped;
* a gap (a dropped message) is answered by a snapshot: the recording holds it, the replay equals
  the monitor;
* the reader: a malformed record names the file and line; ``--skip-bad`` skips it; another file
  is refused on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
from pathlib import Path

import pytest
from clitools import serve, small_book
from conftest import REPO
from test_feeds_venues import _session
from test_monitor_recording import _killed
from test_resume import line_of, resume_point

import ddms as _ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.cli import main
from ddms.errors import InputError
from ddms.io.orderrec import OrderRecordingReader
from ddms.io.sources import open_source
from ddms.runtime.resume import checkpoints

PROGRAM = REPO / "examples" / "m3" / "vwap.m3"


def _cli(*args: str) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return rc, out.getvalue().splitlines(), err.getvalue()


def _run(*args: str) -> tuple[list[str], str]:
    rc, out, err = _cli("run", str(PROGRAM), *args)
    assert rc == 0, err
    return out, err


def _monitor(data: Path, rec: Path, folder: Path, every: int = 40, faults=()) -> list[dict]:
    from ddms.feeds.server import parse_fault
    _, mon, _, lines = asyncio.run(_session(data, faults=[parse_fault(f) for f in faults], views=str(PROGRAM),
                                            record=str(rec), checkpoint=str(folder), checkpoint_every=every,
                                            checkpoint_keep=0))
    mon.recorder._check()
    mon.book._check()
    return lines


def _killed_in_a_write(url: str, args: list[str], folder: Path) -> None:
    """Run the monitor with each checkpoint write pausing before its rename; SIGKILL it while it
    holds the temporary file of its second write (a complete checkpoint beside it)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    env = {**os.environ, "PYTHONPATH": str(REPO), "DDMS_CHECKPOINT_PAUSE": "0.5"}
    mon = subprocess.Popen([sys.executable, "-m", "ddms.cli", *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 600
        while not (checkpoints(folder) and any(folder.glob(".*.tmp"))) and time.monotonic() < deadline \
                and mon.poll() is None:
            time.sleep(0.005)
        assert mon.poll() is None, mon.communicate()[1].decode()[-2000:]
        mon.send_signal(signal.SIGKILL)
        mon.wait(timeout=30)
    finally:
        mon.kill()
    assert any(folder.glob(".*.tmp"))          # the write was cut short


def _final(lines: list[dict]) -> dict:
    return [x for x in lines if "views" in x][-1]


def _replays(rec: Path, folder: Path, full: list[str], picks: list[int], rng: random.Random) -> None:
    """From each checkpoint of ``picks`` (indexes) up to a random line, ``ddms run --resume``
    prints exactly ``full``'s lines after it; ``--resume DIR`` writes nothing into the folder."""
    total = line_of(full[-1])
    found = checkpoints(folder)
    assert found[-1][0] == total
    for k in picks:
        line, path = found[k]
        until = rng.randint(line + 1, total) if line < total else total
        got, err = _run("--data", str(rec), "--json", "--every", "1", "--resume", str(path), "--until", str(until))
        assert resume_point(err) == line
        assert got == ([x for x in full if line < line_of(x) <= until] or [full[-1]]), (line, until)
    before = sorted(p.name for p in folder.iterdir())
    got, err = _run("--data", str(rec), "--json", "--every", "1", "--resume", str(folder))
    assert resume_point(err) == total and got == [full[-1]]
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.fixture(scope="module")
def book(tmp_path_factory) -> tuple[Path, list[str]]:
    """An order-book CSV and ``ddms run``'s views after every line of it."""
    data = small_book(tmp_path_factory.mktemp("orec"), 1200)
    full, _ = _run("--data", str(data), "--json", "--every", "1")
    return data, full


def test_recording_replays_the_csv_and_every_checkpoint(book, tmp_path):
    data, csv_full = book
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    lines = _monitor(data, rec, folder)
    assert rec.read_bytes().startswith(b"#ddms-orders 1 brokers=10\n")
    assert open_source(rec).kind == "orders"
    full, _ = _run("--data", str(rec), "--json", "--every", "1")
    assert full == csv_full                          # line for line the order-book CSV's run
    assert json.loads(full[-1]) == _final(lines)      # and the monitor's final views
    found = checkpoints(folder)
    assert len(found) >= 4
    rng = random.Random(5)
    _replays(rec, folder, full, sorted(rng.sample(range(len(found) - 1), 3)), rng)


def test_a_gap_answered_by_a_snapshot_is_replayed(book, tmp_path):
    data, csv_full = book
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    lines = _monitor(data, rec, folder, faults=["drop@300"])
    s = lines[-1]
    assert s["gaps"] == 1 and s["snapshots"] == 1 and s["synced"]
    tags = [x.split(b" ", 2)[1] for x in rec.read_bytes().splitlines()[1:]]
    assert tags.count(b"S") == 1
    full, _ = _run("--data", str(rec), "--json", "--every", "1")
    assert json.loads(full[-1]) == _final(lines)
    assert json.loads(full[-1])["views"] == json.loads(csv_full[-1])["views"]
    rng = random.Random(7)
    found = checkpoints(folder)
    _replays(rec, folder, full, sorted(rng.sample(range(len(found) - 1), 2)), rng)


@pytest.mark.parametrize("during_write", [False, True])
def test_killed_and_restarted_monitor_recording_replays(book, tmp_path, during_write):
    """SIGKILL after a few checkpoints (or in the middle of a checkpoint write), restart with the
    same --record/--checkpoint against a server replaying from seq 1: stale messages dropped,
    the rest applied once; the recording (one file, the restart in it) replays to the views
    after every line of the CSV's run."""
    data, csv_full = book
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    server, url = serve(data, "--rate", "400")
    args = ["monitor", url, "--views", str(PROGRAM), "--json", "--once", "--record", str(rec),
            "--checkpoint", str(folder), "--checkpoint-every", "40", "--checkpoint-keep", "0"]
    try:
        if during_write:
            _killed_in_a_write(url, args, folder)
        else:
            _killed(url, args, folder, 3)
    finally:
        server.kill()
    restored = checkpoints(folder)[-1][0]
    killed_size = rec.stat().st_size
    lines = _monitor(data, rec, folder)         # a new server: the stream from seq 1 again
    assert [x["line"] for x in lines if x.get("event") == "restored"] == [restored]
    s = lines[-1]
    assert s["stale"] == restored and s["gaps"] == 0 and s["snapshots"] == 0
    body = rec.read_bytes()
    assert body.count(b" X restored ") == 1 and body.count(b" C ws://") == 2
    assert rec.stat().st_size != killed_size
    full, _ = _run("--data", str(rec), "--json", "--every", "1")
    assert full == csv_full                      # nothing applied twice, nothing skipped
    assert json.loads(full[-1]) == _final(lines)
    found = checkpoints(folder)
    at = [ln for ln, _ in found].index(restored)
    # a kill that came late on a loaded machine may find the stream at its end: no checkpoint after
    _replays(rec, folder, full, [k for k in (at - 1, at, at + 1) if k < len(found)], random.Random(3))


def test_reader_refuses_bad_records_and_other_files(book, tmp_path):
    data, _ = book
    rec, folder = tmp_path / "session.rec", tmp_path / "ck"
    _monitor(data, rec, folder, every=200)
    lines = rec.read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"".join(lines[:50] + [b"1.0 Z what\n"] + lines[50:]))
    with pytest.raises(InputError, match=r"bad\.rec:51: unknown record tag"):
        list(OrderRecordingReader(str(bad)).batches())
    r = OrderRecordingReader(str(bad), skip_bad=True)
    got = list(r.batches())
    assert r.bad_lines == 1 and got[-1].last_line == 1200
    rc, _, err = _cli("run", str(PROGRAM), "--data", str(bad), "--json")
    assert rc != 0 and "bad.rec:51: unknown record tag" in err
    other = tmp_path / "other.rec"
    other.write_bytes(b"".join(lines[:10] + [lines[10].replace(b'"volume"', b'"volume" ')] + lines[11:]))
    rc, _, err = _cli("run", str(PROGRAM), "--data", str(other), "--resume", str(checkpoints(folder)[0][1]))
    assert rc == 2 and "is not the one checkpointed" in err, err
