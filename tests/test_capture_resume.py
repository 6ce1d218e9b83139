"""Checkpoints of capture inputs (issue 24): ``ddms run CAPTURE --checkpoint DIR`` / ``--resume``.

* the readers' state round trip: a capture reader (cryptofeed captures of every venue, hftbacktest
  Binance captures) stopped after a random batch, its :meth:`save_state` passed through JSON,
  loaded into a NEW reader that continues: the remaining batches equal the uninterrupted
  reader's, row for row (hypothesis over venues, seeds, a dropped message that leaves books
  resyncing, the stopping point); the restored cores pass ``_check()``;
* a random checkpoint of a capture run, resumed in a new process (``--resume FILE``) up to a
  random line (``--until``): the output equals the uninterrupted run's after the checkpoint, up
  to that line -- on the real Kraken and OKX captures, and on a ``ddms monitor --record``
  recording of a session with a fault (recording + checkpoints replay a venue session from any
  checkpoint to any point);
* kill -9 at random moments (also during a checkpoint write) of ``ddms run --checkpoint`` on
  multi-symbol captures (Kraken, OKX, a synthetic Binance capture), then ``--resume``: the
  output after the resume point and the final views equal the uninterrupted run's, every time.
  The machinery (processes, kill moments, the comparison) is tests/test_resume.py's.
"""

from __future__ import annotations

import json
import random
import signal
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, SHARED
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_resume import check_resumed, ddms, finish, kill_at, line_of, resume_point

from ddms.errors import ReplayError
from ddms.io.sources import open_source
from ddms.runtime.checkpoint import PAUSE_ENV
from ddms.runtime.resume import checkpoints

VENUES = SHARED / "data" / "venues"
SQL = REPO / "examples" / "sql"
PROGRAMS = {"best": SQL / "symbol_best_bid.sql", "spread": SQL / "symbol_spread.sql"}


def _rows(reader) -> list[tuple]:
    return [(b.first_line, b.last_line, b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), b.line.tolist())
            for b in reader.batches()]


def _core_check(reader) -> None:
    if hasattr(reader, "reader"):          # cryptofeed: SymbolBatches over a CryptofeedReader
        reader.reader.parser._check()
    else:                                  # hftbacktest: BinanceCaptureReader
        for bk in reader.books.values():
            bk._check()


def _write_capture(tmp: Path, kind: str, seed: int, drop: int | None) -> Path:
    """A synthetic multi-symbol capture of ``kind`` (tests/test_feeds_venues.py's writers);
    ``drop``: a message line removed (a gap or a checksum mismatch: a book then waits for a
    snapshot the capture may never bring, which the state must hold too)."""
    from test_feeds_venues import write_binance_capture, write_venue_capture
    if kind in ("kraken", "okx", "coinbase"):
        path = write_venue_capture(tmp, kind, seed, n=120)[0]
    elif kind == "hftbacktest":
        from replay.sample_data import binance_capture_lines
        path = tmp / "capture.txt"
        path.write_text("".join(x + "\n" for x in binance_capture_lines("futures", 400, seed=seed)))
    elif kind.startswith("hftbacktest_"):      # several symbols, bare snapshot lines naming none
        path = write_binance_capture(tmp, seed, kind.split("_")[1], form="hftbacktest", n=120)[0]
    else:
        path = write_binance_capture(tmp, seed, "futures" if kind == "binance_futures" else "spot", n=120)[0]
    if drop is not None:
        lines = path.read_text().splitlines(keepends=True)
        del lines[2 + drop % (len(lines) - 2)]
        path.write_text("".join(lines))
    return path


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["kraken", "okx", "coinbase", "binance", "binance_futures", "hftbacktest",
                             "hftbacktest_spot", "hftbacktest_futures"]),
       seed=st.integers(0, 50), drop=st.none() | st.integers(0, 10_000), cut=st.floats(0, 1))
def test_reader_state_round_trip(tmp_path_factory, kind, seed, drop, cut):
    path = _write_capture(tmp_path_factory.mktemp("cap"), kind, seed, drop)
    src = replace(open_source(path, symbols=True, skip_bad=True), batch_updates=7)
    try:
        full = _rows(src.reader())
    except ReplayError:      # the dropped line was the only snapshot: no book ever started
        assume(False)
    assert full
    k = int(cut * len(full))
    first = src.reader()
    it = first.batches()
    for _ in range(k):
        next(it)
    meta, arrays = first.save_state()
    meta = json.loads(json.dumps(meta))          # plain JSON values, nothing else
    arrays = {n: np.array(a) for n, a in arrays.items()}
    again = src.reader()
    again.load_state(meta, arrays)
    _core_check(again)
    assert again.position == (full[k - 1][1] if k else 0)
    assert _rows(again) == full[k:]
    _core_check(again)


@pytest.mark.parametrize("market", ["spot", "futures"])
def test_multi_symbol_hftbacktest_capture_builds_every_book(tmp_path, market):
    """An hftbacktest capture of three Binance symbols (snapshot lines name no symbol): every
    book ends equal to the generator's true book, rows carry their symbol, lines count the
    updates of all symbols; without a symbol column it is refused unless one is chosen."""
    from decimal import Decimal

    from test_feeds_venues import write_binance_capture

    from ddms.io.levels import ASKS, BIDS
    from ddms.io.symbols import symbol_id
    path, truth = write_binance_capture(tmp_path, 11, market, form="hftbacktest", n=300)
    r = open_source(path, symbols=True).reader()
    batches = list(r.batches())
    assert sorted(r.books) == sorted(truth)
    for sym, (bids, asks) in truth.items():
        bk = r.books[sym]
        bk._check()
        for side, want in ((BIDS, bids), (ASKS, asks)):
            assert dict(bk.top_levels(side, 10**6)) == {Decimal(p): Decimal(q) for p, q in want.items()}, sym
    cols = np.concatenate([b.cols for b in batches])
    assert set(cols[:, 5].tolist()) == {float(symbol_id(s)) for s in truth}
    lines = np.concatenate([b.line for b in batches])
    assert (np.diff(lines) >= 0).all() and batches[-1].last_line == sum(bk.updates for bk in r.books.values())
    with pytest.raises(ReplayError, match="several symbols"):
        list(open_source(path).batches())
    one = sorted(truth)[1]
    only = list(open_source(f"{path}#{one}").batches())
    assert only[-1].last_line == r.books[one].updates


def test_reader_refuses_another_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = _write_capture(tmp_path / "a", "okx", 1, None), _write_capture(tmp_path / "b", "okx", 2, None)
    r = open_source(a, symbols=True).reader()
    r.batch_updates = 1         # one input line per step (a checkpointed run asks for its boundaries)
    it = r.batches()
    for _ in range(20):
        next(it)
    meta, arrays = r.save_state()
    with pytest.raises(ValueError, match="is not the one checkpointed"):
        open_source(b, symbols=True).reader().load_state(meta, arrays)


# ------------------------------------------------------------------------------------------
# new processes: any checkpoint to any line, kill -9
# ------------------------------------------------------------------------------------------

def _real(name: str) -> Path:
    path = VENUES / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """A ``ddms monitor --record`` recording of a synthetic OKX session with a dropped message
    (the recording holds the gap, the resubscription and its snapshot)."""
    from test_feeds_venues import _session, run, write_venue_capture

    from ddms.feeds.server import parse_fault
    tmp = tmp_path_factory.mktemp("rec")
    path, truth, _ = write_venue_capture(tmp, "okx", 6, n=400)
    rec = tmp / "session.rec"
    _, _, live, _ = run(_session(path, record=str(rec), faults=[parse_fault(f"drop@7#{sorted(truth)[0]}")],
                                 rate=400))
    assert live["symbols"][sorted(truth)[0]]["resyncs"] == 1
    return rec


def _capture(name: str, recording: Path) -> Path:
    return recording if name == "recording" else _real(name)


@pytest.mark.parametrize("name,seed", [pytest.param("KRAKEN.ws.50.0", 0, marks=pytest.mark.slow), ("OKX.ws.1.0", 1),
                                       pytest.param("OKX.ws.1.0", 2, marks=pytest.mark.slow), ("recording", 3)])
def test_resume_any_checkpoint_to_any_line_in_a_new_process(name, seed, recording, tmp_path):
    """Checkpoints at random lines (a random interval), every one kept; a new process resumes
    from a random one (``--resume FILE``, writing none) up to a random line (``--until``): its
    output is the uninterrupted run's after the checkpoint, up to that line (views after every
    line on the small captures)."""
    data = _capture(name, recording)
    rng = random.Random(seed)
    common = [str(PROGRAMS["spread"]), "--data", str(data), "--every", "7" if name.startswith("KRAKEN") else "1",
              "--json"]
    full, _ = finish(ddms(*common))
    total = line_of(full[-1])
    every = rng.randint(max(1, total // 40), total // 4)
    folder = tmp_path / "all"
    written, _ = finish(ddms(*common, "--checkpoint", str(folder), "--checkpoint-every", str(every),
                             "--checkpoint-keep", "0"))
    assert written == full                       # checkpointing changes nothing
    found = checkpoints(folder)
    # (a checkpoint falling due while the previous one is written waits: at least one before the end)
    assert len(found) >= 2 and found[-1][0] == total
    for line, path in rng.sample(found[:-1], min(2, len(found) - 1)):
        until = rng.randint(line + 1, total)
        got, err = finish(ddms(*common, "--resume", str(path), "--until", str(until)))
        assert resume_point(err) == line
        want = [x for x in full if line < line_of(x) <= until]
        if not want or line_of(want[-1]) != until:   # --until prints the views at its line
            want.append([x for x in finish(ddms(*common, "--until", str(until)))[0]][-1])
        assert got == want


@pytest.fixture(scope="module", params=[pytest.param("cryptofeed", marks=pytest.mark.slow), "hftbacktest"])
def binance_multi(tmp_path_factory, request) -> Path:
    """A synthetic capture of three Binance USD-M symbols, as cryptofeed files or as one
    hftbacktest capture."""
    from test_feeds_venues import write_binance_capture
    return write_binance_capture(tmp_path_factory.mktemp("bn"), 3, "futures", form=request.param, n=2000)[0]


def _kill_and_resume(data: Path, tmp_path: Path, every: int, trials: list[str], seed: str) -> None:
    """tests/test_resume.py's kill -9 procedure on a capture: SIGKILL during a checkpoint write
    (a test hook holds the temporary file before its rename), after a random delay once a
    checkpoint exists, or early; then --resume must print what the uninterrupted run printed
    after its resume point, and a second --resume only the final views."""
    common = [str(PROGRAMS["best"]), "--data", str(data), "--every", str(max(every // 4, 1)), "--json"]
    full, _ = finish(ddms(*common))
    rng = random.Random(seed)
    for n, kind in enumerate(trials):
        folder = tmp_path / f"ck{n}"
        args = [*common, "--checkpoint-every", str(every)]
        p = ddms(*args, "--checkpoint", str(folder), env={PAUSE_ENV: "0.4" if kind == "during-write" else "0.05"})
        kill_at(p, folder, kind, rng, 0.3)
        if kind == "during-write":      # killed holding a temporary file, before its rename
            assert p.returncode == -signal.SIGKILL
        resumed, err = finish(ddms(*args, "--resume", str(folder)))
        check_resumed(full, resumed, resume_point(err))
        assert not list(folder.glob(".ckpt-*.tmp"))
        again, err = finish(ddms(*args, "--resume", str(folder)))
        assert resume_point(err) == line_of(full[-1]) and again == [full[-1]]


@pytest.mark.parametrize("name,every", [pytest.param("KRAKEN.ws.50.0", 300, marks=pytest.mark.slow),
                                        ("OKX.ws.1.0", 25)])
def test_kill_and_resume_real_multi_symbol_captures(name, every, tmp_path):
    _kill_and_resume(_real(name), tmp_path, every, ["during-write", "running", "early"], name)


def test_kill_and_resume_synthetic_binance_capture(binance_multi, tmp_path):
    _kill_and_resume(binance_multi, tmp_path, 150, ["during-write", "running"], "binance")


@pytest.mark.slow
@pytest.mark.parametrize("name,every", [("KRAKEN.ws.50.0", 100), ("OKX.ws.1.0", 10), ("COINBASE.ws.28.0", 500)])
def test_kill_and_resume_real_captures_exhaustive(name, every, tmp_path):
    _kill_and_resume(_real(name), tmp_path, every, ["during-write", "running", "running", "early", "during-write",
                                                    "running"], name + "x")


def test_segments_of_a_capture_equal_the_sequential_run(binance_multi):
    """``--segments``: a first pass keeps checkpoints of the capture reader, the segments continue
    from them: the printed views equal the sequential run's line for line."""
    common = [str(PROGRAMS["best"]), "--data", str(binance_multi), "--every", "97", "--json"]
    want, _ = finish(ddms(*common))
    got, err = finish(ddms(*common, "--segments", "3"))
    assert "3 segments" in err and got == want
