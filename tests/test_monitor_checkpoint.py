"""``ddms monitor --checkpoint DIR``: killed with SIGKILL mid-stream, restarted with the same DIR.

* order protocol, restarted against a server that replays from the start: the messages up to
  the checkpoint's ``seq`` are dropped as stale, the rest applied once: the final views *and*
  the engine's line equal ``ddms run`` on the same file (nothing applied twice, nothing skipped);
* order protocol, restarted while the same server goes on: a gap, a snapshot replaces the
  restored orders (one engine line), the final views equal ``ddms run``'s;
* Binance price levels (a capture slice; skipped without the reference data): the restored book
  resynchronizes from a fresh snapshot; the final book equals the capture's own book and the
  final views equal an uninterrupted monitor's;
* misuse is refused with a clear message (no --views, --strategy, a ``ddms run`` checkpoint).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from clitools import cli, serve, small_book
from conftest import REPO, SHARED

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import CheckpointError
from ddms.feeds.checkpoints import MonitorCheckpoints
from ddms.io.orderproto import OrderFeed
from ddms.runtime.resume import checkpoints

PROGRAM = REPO / "examples" / "m3" / "vwap.m3"
BINANCE = SHARED / "data" / "binance"


def _ddms_run(data: Path) -> dict:
    p = cli("run", str(PROGRAM), "--data", str(data), "--json")
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    return json.loads(out.decode().splitlines()[-1])


def _monitor_killed(url: str, folder: Path, every: int, *, during_write: bool = False,
                    program: Path = PROGRAM) -> None:
    """Run the monitor with checkpoints until one exists and more messages followed, then SIGKILL
    it; ``during_write``: each write pauses before its rename, and the kill lands in a write (a
    temporary file exists beside a complete checkpoint)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if during_write:
        env["DDMS_CHECKPOINT_PAUSE"] = "0.5"
    mon = subprocess.Popen([sys.executable, "-m", "ddms.cli", "monitor", url, "--views", str(program), "--json",
                            "--once", "--checkpoint", str(folder), "--checkpoint-every", str(every)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO)

    def ready() -> bool:
        return bool(checkpoints(folder)) and (not during_write or any(folder.glob(".*.tmp")))
    try:
        deadline = time.monotonic() + 600
        while not ready() and time.monotonic() < deadline and mon.poll() is None:
            time.sleep(0.01)
        assert ready(), mon.communicate()[1].decode()[-2000:]
        if not during_write:
            time.sleep(0.3)
        assert mon.poll() is None, "the monitor ended before it was killed"
        mon.send_signal(signal.SIGKILL)
        mon.wait(timeout=30)
    finally:
        mon.kill()
    if during_write:
        assert any(folder.glob(".*.tmp"))     # the write was cut short


def _monitor(url: str, folder: Path | None, every: int = 100, program: Path = PROGRAM) -> list[dict]:
    args = ["monitor", url, "--views", str(program), "--json", "--once"]
    if folder is not None:
        args += ["--checkpoint", str(folder), "--checkpoint-every", str(every)]
    mon = cli(*args)
    out, err = mon.communicate(timeout=600)
    assert mon.returncode == 0, err.decode()[-3000:]
    return [json.loads(x) for x in out.decode().splitlines()]


def _restored(lines: list[dict]) -> dict:
    ev = [x for x in lines if x.get("event") == "restored"]
    assert len(ev) == 1, lines[:5]
    return ev[0]


@pytest.mark.parametrize("during_write", [False, True])
def test_order_protocol_resumes_from_its_sequence(tmp_path, during_write):
    data = small_book(tmp_path, 3000)
    want = _ddms_run(data)
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "1500")
    try:
        _monitor_killed(url, folder, 200, during_write=during_write)
    finally:
        server.kill()
    line = checkpoints(folder)[-1][0]
    server, url = serve(data, "--speed", "max")    # a new server: the stream from seq 1 again
    try:
        lines = _monitor(url, folder)
    finally:
        server.kill()
    r = _restored(lines)
    assert r["line"] == line and not any(folder.glob(".*.tmp"))
    s = lines[-1]
    views = [x for x in lines if "views" in x][-1]
    assert views == want                            # same views at the same engine line
    assert s["gaps"] == s["snapshots"] == 0 and s["synced"]
    assert s["stale"] == line and s["applied"] == 3000 - line   # dropped exactly what was applied before
    final = checkpoints(folder)[-1]
    assert final[0] == 3000


@pytest.mark.slow      # ~20 s, and it needs the restart to come back while the server still runs
def test_order_protocol_resyncs_by_snapshot_after_a_gap(tmp_path):
    data = small_book(tmp_path, 3000)
    want = _ddms_run(data)
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "200")     # ~15 s: still running when the monitor comes back
    try:
        _monitor_killed(url, folder, 100)
        lines = _monitor(url, folder)
    finally:
        server.kill()
    r = _restored(lines)
    s = lines[-1]
    views = [x for x in lines if "views" in x][-1]
    assert views["views"] == want["views"]
    assert s["gaps"] == 1 and s["snapshots"] == 1 and s["synced"]
    assert views["line"] == r["line"] + 1 + s["applied"]   # the snapshot is one engine line
    assert s["resting_orders"] == len(_orders(data))


def _orders(path: Path) -> dict:
    from ddms.io.orderproto import OrderEncoder
    enc = OrderEncoder()
    with open(path, "rb") as f:
        for line in f:
            enc.encode(line)
    return enc._book.orders


def test_binance_book_resyncs_from_a_fresh_snapshot(tmp_path):
    src = BINANCE / "spot_btcusdt_20240808.gz"
    if not src.exists():
        pytest.skip(f"{src} not available")
    from ddms.io.capture import iter_lines
    data = tmp_path / "slice.txt"
    with open(data, "wb") as f:
        for i, line in enumerate(iter_lines(src)):
            if i >= 8000:
                break
            f.write(line)
    server, url = serve(data, "--speed", "max")
    try:
        want = _monitor(url, None)
    finally:
        server.kill()
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "100")
    try:
        _monitor_killed(url, folder, 20)
    finally:
        server.kill()
    server, url = serve(data, "--speed", "max")
    try:
        lines = _monitor(url, folder)
    finally:
        server.kill()
    _restored(lines)
    s, w = lines[-1], want[-1]
    assert s["synced"] and s["snapshots"] == 1 and s["resyncs"] == 1
    assert (s["best_bid"], s["best_ask"]) == (w["best_bid"], w["best_ask"])
    assert [x for x in lines if "views" in x][-1]["views"] == [x for x in want if "views" in x][-1]["views"]


def test_misuse_is_refused(tmp_path):
    with pytest.raises(CheckpointError, match="needs --views"):
        MonitorCheckpoints(tmp_path / "a", None)
    with pytest.raises(CheckpointError, match=">= 1"):
        MonitorCheckpoints(tmp_path / "a", object(), every=0)


def test_restore_core_refuses_another_feed_kind(tmp_path):
    ck = MonitorCheckpoints.__new__(MonitorCheckpoints)
    ck.feed, ck._arrays, ck.restored_from = {"kind": "binance"}, {}, tmp_path / "x"
    ck.engine = type("E", (), {"position": 5})()
    with pytest.raises(CheckpointError, match="binance feed, this feed is orders"):
        ck.restore_core(OrderFeed())


# ------------------------------------------------------------------------------------------
# in process: a checkpoint at random message boundaries, restored into a new engine and
# decoder, continued on a stream that repeats messages before the checkpoint or skips ahead
# ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def engines():
    from ddms.runtime.engine import Engine
    return Engine(PROGRAM), Engine(PROGRAM)


def _drive(engine, feed: OrderFeed, msgs, on_snapshot=None) -> list[tuple[int, dict]]:
    """Feed ``msgs`` one at a time, applying each message's events: [(engine line, views)]."""
    rel = engine.relmap(("bids", "asks"))
    out = []
    for m in msgs:
        acts = feed.feed_message(json.dumps(m))
        if acts and on_snapshot is not None:
            feed.apply_snapshot(on_snapshot(m["seq"]))
        b = feed.take_events()
        if len(b) or b.last_line >= b.first_line:
            engine.apply(b, rel)
        feed._check()
        out.append((engine.position, dict(engine.snapshot())))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_order_feed_checkpoint_restores_exactly(tmp_path, engines, seed):
    """Uninterrupted A vs B: B checkpointed at a random message (a synchronized feed), restored
    into a fresh engine and decoder, then fed a stream that restarts ``back`` messages before the
    checkpoint (those are dropped as stale): after every later message B's engine line and views
    equal A's, and the engine's whole state is equal at the end (nothing applied twice or skipped)."""
    import random

    from ddms.io.orderproto import encode_orderbook
    from ddms.runtime.checkpoint import dump_state
    rng = random.Random(seed)
    msgs = list(encode_orderbook(small_book(tmp_path, 600)))
    a, b = engines
    ref = _drive(_fresh(a), OrderFeed(), msgs)
    cut = rng.randrange(1, len(msgs))
    eng = _fresh(a)
    fa = OrderFeed()
    _drive(eng, fa, msgs[:cut])
    MonitorCheckpoints(tmp_path / "ck", eng).write(fa)
    eng2 = _fresh(b)
    ck = MonitorCheckpoints(tmp_path / "ck", eng2)
    assert ck.restored_from is not None and eng2.position == ref[cut - 1][0]
    fb = OrderFeed()
    assert "continuing from seq" in ck.restore_core(fb)
    back = rng.randrange(0, cut + 1)
    got = _drive(eng2, fb, msgs[cut - back:])
    assert fb.stale == back and fb.gaps == 0
    assert got[back:] == ref[cut:]
    sa, sb = dump_state(_replayed(a, msgs)), dump_state(eng2)
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)


def _fresh(engine):
    """``engine`` reset to an empty state (a restore of an empty checkpoint would do too)."""
    from ddms.runtime.checkpoint import dump_state, load_state
    if not hasattr(_fresh, "empty"):
        _fresh.empty = {}
    key = id(engine)
    if key not in _fresh.empty:
        assert engine.position == 0
        _fresh.empty[key] = dump_state(engine)
    load_state(engine, _fresh.empty[key])
    engine.position = 0
    return engine


def _replayed(engine, msgs):
    _drive(_fresh(engine), OrderFeed(), msgs)
    return engine


@pytest.mark.parametrize("seed", range(4))
def test_checkpoint_while_waiting_for_a_snapshot(tmp_path, engines, seed):
    """A checkpoint taken after a gap (the decoder waits for a snapshot, the engine still holds
    the old orders): restored, the decoder asks for a snapshot, which replaces the restored rows
    (deletes, then inserts, one engine line); the views then follow the uninterrupted run's."""
    import random

    from ddms.io.orderproto import encode_orderbook
    rng = random.Random(seed)
    msgs = list(encode_orderbook(small_book(tmp_path, 600)))
    a, b = engines
    ref = _drive(_fresh(a), OrderFeed(), msgs)
    cut, gap = rng.randrange(1, 400), rng.randrange(2, 50)
    eng = _fresh(a)
    fa = OrderFeed()
    _drive(eng, fa, msgs[:cut] + msgs[cut + gap:cut + gap + 3])    # a gap after the cut: waiting
    assert not fa.synced and fa.needs_snapshot
    MonitorCheckpoints(tmp_path / "ck", eng).write(fa)
    eng2 = _fresh(b)
    ck = MonitorCheckpoints(tmp_path / "ck", eng2)
    fb = OrderFeed()
    ck.restore_core(fb)
    assert fb.needs_snapshot and not fb.synced and eng2.position == cut
    at = cut + gap + 10                                             # the server's position by now
    server = OrderFeed()
    for m in msgs[:at]:
        server.feed_message(m)
    fb.apply_snapshot(json.dumps(server.snapshot_message()))
    got = _drive(eng2, fb, msgs[at:])
    assert fb.synced and fb.snapshots == 1 and fb.stale == 0
    assert eng2.position == cut + 1 + len(msgs) - at
    assert got[-1][1] == ref[-1][1]
    whole = OrderFeed()
    for m in msgs:
        whole.feed_message(m)
    assert fb.orders == whole.orders


def test_a_ddms_run_checkpoint_is_refused(tmp_path, engines):
    from ddms.runtime.checkpoint import save
    folder = tmp_path / "ck"
    folder.mkdir()
    eng = _fresh(engines[0])
    save(eng, folder / "ckpt-000000000000000.arrow", extra={"readers": []})
    with pytest.raises(CheckpointError, match="not a ddms monitor checkpoint"):
        MonitorCheckpoints(folder, eng)


def _depth_stream(rng, n: int) -> list[bytes]:
    """A futures depth stream: a snapshot (lastUpdateId 10), then ``n`` consecutive depth
    updates (``pu`` = the previous ``u``) setting and removing levels on both sides."""
    snap = {"lastUpdateId": 10, "bids": [[f"{100 - i}.5", "1.0"] for i in range(5)],
            "asks": [[f"{101 + i}.5", "2.0"] for i in range(5)]}
    out, u = [json.dumps(snap).encode()], 10
    for k in range(n):
        bids = [[f"{95 + rng.randrange(6)}.5", f"{rng.choice([0, 1, 2.5, 3])}"] for _ in range(rng.randrange(1, 4))]
        asks = [[f"{101 + rng.randrange(6)}.5", f"{rng.choice([0, 1, 2, 4.5])}"] for _ in range(rng.randrange(1, 4))]
        msg = {"stream": "x@depth", "data": {"e": "depthUpdate", "E": 1000 + k, "T": 1000 + k, "s": "X", "U": u,
                                             "u": u + 2, "pu": u, "b": bids, "a": asks}}
        out.append(json.dumps(msg).encode())
        u += 2
    return out


def _drive_levels(engine, book, msgs, snapshots=None) -> None:
    from ddms.io.actions import NeedSnapshot
    rel = engine.relmap(("bids", "asks"))
    for m in msgs:
        acts = book.feed_message(m)
        for a in acts:
            if isinstance(a, NeedSnapshot):
                book.apply_snapshot(json.dumps(snapshots(json.loads(m)["data"]["u"])))
        b = book.take_events()
        if len(b) or b.last_line >= b.first_line:
            engine.apply(b, rel)


@pytest.mark.parametrize("seed", range(4))
def test_binance_book_restore_resyncs_and_views_follow(tmp_path, engines, seed):
    """A price-level book checkpointed at a random message, restored, resynchronized by a fresh
    snapshot (taken later than the checkpoint: messages in between were never seen): the
    restored levels are deleted and the snapshot's inserted, so the final book and views equal
    the uninterrupted run's."""
    import random

    from ddms.io.venues.binance_book import ASKS, BIDS, FUTURES, BinanceBook
    rng = random.Random(seed)
    msgs = _depth_stream(rng, 200)
    a, b = engines
    ref_book = BinanceBook(FUTURES)
    ref_eng = _fresh(a)
    ref_book.apply_snapshot(msgs[0])
    hist = {10: ref_book.to_snapshot()}
    for m in msgs[1:]:
        ref_book.feed_message(m)
        hist[ref_book.last_u] = ref_book.to_snapshot()
    ref_book.discard_events()
    _drive_levels(_fresh(a), BinanceBook(FUTURES), msgs[1:], snapshots=lambda u: hist[10])
    want = dict(ref_eng.snapshot())
    cut, skip = rng.randrange(2, 150), rng.randrange(0, 30)
    eng = _fresh(a)
    bk = BinanceBook(FUTURES)
    _drive_levels(eng, bk, msgs[1:cut], snapshots=lambda u: hist[10])
    MonitorCheckpoints(tmp_path / "ck", eng).write(bk)
    eng2 = _fresh(b)
    ck = MonitorCheckpoints(tmp_path / "ck", eng2)
    bk2 = BinanceBook(FUTURES)
    assert "resynchronizing" in ck.restore_core(bk2)
    assert not bk2.synced
    # the venue goes on meanwhile; the restarted monitor sees the stream from cut + skip on and
    # gets a snapshot at the message before its first (Binance's U <= lastUpdateId <= u)
    _drive_levels(eng2, bk2, msgs[cut + skip:], snapshots=lambda u: hist[u - 2])
    bk2._check()
    assert bk2.synced and bk2.snapshots == 1
    assert bk2.levels(BIDS) == ref_book.levels(BIDS) and bk2.levels(ASKS) == ref_book.levels(ASKS)
    assert dict(eng2.snapshot()) == want
