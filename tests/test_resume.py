"""``ddms run --checkpoint DIR`` killed with SIGKILL at random moments (also in the middle of a
checkpoint write: a test hook sleeps between writing the temporary file and renaming it), then
``ddms run --resume DIR``: it prints exactly the lines the uninterrupted run printed after the
checkpoint it resumed from, and the same final views.  Synthetic order-book data generated here;
big/finance.csv too when ../shared is present (slow)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, REPO, data_file

from ddms.runtime.checkpoint import PAUSE_ENV
from ddms.runtime.resume import checkpoints
from replay.synthetic import write_orderbook


def ddms(*args: str, env: dict | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ddms", "run", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, **(env or {})}, **kw)


def finish(p: subprocess.Popen) -> tuple[list[str], str]:
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err.decode()
    return out.decode().splitlines(), err.decode()


def line_of(text: str) -> int:
    return json.loads(text)["line"]


def resume_point(stderr: str) -> int:
    m = re.search(r"resuming from the checkpoint at line ([\d,]+)", stderr)
    if m:
        return int(m.group(1).replace(",", ""))
    assert "no checkpoint in" in stderr, stderr
    return 0


def kill_at(p: subprocess.Popen, folder: Path, kind: str, rng: random.Random, late: float) -> None:
    """SIGKILL ``p`` (a run writing checkpoints into ``folder``): ``during-write`` while it holds
    the temporary file of its 1st or 2nd write (a run makes at least two: one due, the last),
    ``running`` up to ``late`` s after its first checkpoint, otherwise within its first second."""
    deadline = time.monotonic() + 300
    if kind == "during-write":
        seen: set[str] = set()
        want = rng.randint(1, 2)
        while p.poll() is None and time.monotonic() < deadline and len(seen) < want:
            if folder.exists():
                seen |= {t.name for t in folder.glob(".ckpt-*.tmp")}
            time.sleep(0.005)
    elif kind == "running":
        while p.poll() is None and time.monotonic() < deadline and not checkpoints(folder):
            time.sleep(0.01)
        time.sleep(rng.uniform(0, late))
    else:
        time.sleep(rng.uniform(0, 1))
    p.send_signal(signal.SIGKILL)
    p.communicate()


def check_resumed(full: list[str], resumed: list[str], start: int) -> None:
    """What a resumed run must print: the uninterrupted run's lines after ``start``; if it
    resumed at the very end, the final views again."""
    want = [x for x in full if line_of(x) > start] or [full[-1]]
    assert resumed == want
    assert resumed[-1] == full[-1]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("resume") / "book.csv"
    write_orderbook(path, 150_000, seed=11, depth=800)
    return path


@pytest.mark.parametrize("program", ["vwap", "sobi"])
def test_kill_and_resume(program, data, tmp_path):
    prog = str(EXAMPLES / f"{program}.m3")
    common = [prog, "--data", str(data), "--every", "7000", "--json"]
    full, _ = finish(ddms(*common))
    assert line_of(full[-1]) == 150_000
    rng = random.Random(program)
    # during-write: killed while the n-th temporary file exists; running: at a random moment
    # after the first checkpoint; early: at a random moment of the first second (start-up)
    trials = ["during-write", "running", "running", "early", "during-write"]
    for n, kind in enumerate(trials):
        folder = tmp_path / f"ck{n}"
        args = [*common, "--checkpoint-every", "20000"]
        env = {PAUSE_ENV: "0.5" if kind == "during-write" else "0.05"}
        p = ddms(*args, "--checkpoint", str(folder), env=env)
        kill_at(p, folder, kind, rng, 0.4)
        if kind == "during-write":
            assert p.returncode == -signal.SIGKILL
        resumed, err = finish(ddms(*args, "--resume", str(folder)))
        start = resume_point(err)
        check_resumed(full, resumed, start)
        assert not list(folder.glob(".ckpt-*.tmp"))
        # resuming a finished run prints its final views and changes nothing
        again, err = finish(ddms(*args, "--resume", str(folder)))
        assert resume_point(err) == 150_000 and again == [full[-1]]


def test_refusals(data, tmp_path):
    prog = str(EXAMPLES / "vwap.m3")
    folder = tmp_path / "ck"
    finish(ddms(prog, "--data", str(data), "--checkpoint", str(folder), "--checkpoint-every", "50000"))
    p = ddms(prog, "--data", str(data), "--checkpoint", str(folder))
    _, err = p.communicate()
    assert p.returncode == 2 and "holds checkpoints" in err.decode() and "--resume" in err.decode()
    other = tmp_path / "other.csv"
    write_orderbook(other, 150_000, seed=12, depth=800)
    p = ddms(prog, "--data", str(other), "--resume", str(folder))
    _, err = p.communicate()
    assert p.returncode == 2 and f"{other} is not the one checkpointed" in err.decode()
    p = ddms(str(EXAMPLES / "sobi.m3"), "--data", str(data), "--resume", str(folder))
    _, err = p.communicate()
    assert p.returncode == 2 and "checkpoint of another program" in err.decode() and "ckpt-" in err.decode()


@pytest.mark.slow
def test_kill_and_resume_big(tmp_path):
    big = data_file("big")
    prog = str(EXAMPLES / "sobi.m3")
    common = [prog, "--data", str(big), "--every", "5000", "--json"]
    full, _ = finish(ddms(*common))
    for n, delay in enumerate((0.2, 0.6, 1.0)):
        folder = tmp_path / f"ck{n}"
        args = [*common, "--checkpoint-every", "10000"]
        p = ddms(*args, "--checkpoint", str(folder), env={PAUSE_ENV: "0.05"})
        time.sleep(1.0 + delay)
        p.send_signal(signal.SIGKILL)
        p.communicate()
        resumed, err = finish(ddms(*args, "--resume", str(folder)))
        check_resumed(full, resumed, resume_point(err))


CSV_SQL = """CREATE STREAM R(a INT, b INT, x FLOAT) FROM FILE 'r.csv'
  LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
SELECT r.a, SUM(r.x * r.b) AS sx FROM R r GROUP BY r.a;
"""


def test_kill_and_resume_csv_stream(tmp_path):
    """A SQL program over one CSV stream with deletions: the CSV adaptor's position resumes too;
    a program reading two files is refused."""
    rng = random.Random(3)
    rows, lines = [], []
    for _ in range(120_000):
        if rows and rng.random() < 0.3:
            row = rows.pop(rng.randrange(len(rows)))
            lines.append("0|" + row)
        else:
            row = f"{rng.randint(0, 50)}|{rng.randint(1, 9)}|{rng.randint(1, 1000) / 8}"
            rows.append(row)
            lines.append("1|" + row)
    (tmp_path / "r.csv").write_text("\n".join(lines) + "\n")
    sql = tmp_path / "views.sql"
    sql.write_text(CSV_SQL)
    common = [str(sql), "--every", "9000", "--json"]
    full, _ = finish(ddms(*common))
    assert line_of(full[-1]) == 120_000
    for n in range(2):
        folder = tmp_path / f"ck{n}"
        args = [*common, "--checkpoint-every", "20000"]
        p = ddms(*args, "--checkpoint", str(folder), env={PAUSE_ENV: "0.05"})
        deadline = time.monotonic() + 300
        while p.poll() is None and time.monotonic() < deadline and not checkpoints(folder):
            time.sleep(0.01)
        time.sleep(0.1 * n)
        p.send_signal(signal.SIGKILL)
        p.communicate()
        resumed, err = finish(ddms(*args, "--resume", str(folder)))
        check_resumed(full, resumed, resume_point(err))


MULTI_SQL = """CREATE STREAM R(a INT, b INT, x FLOAT) FROM FILE 'r.csv'
  LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE STREAM S(b INT, c FLOAT) FROM FILE 's.csv' LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE TABLE T(b INT, w FLOAT) FROM FILE 't.csv' LINE DELIMITED CSV;
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'book.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
SELECT r.a, SUM(r.x * s.c * t.w) AS sx FROM R r, S s, T t WHERE r.b = s.b AND s.b = t.b GROUP BY r.a;
SELECT b.broker_id, SUM(b.volume * r.x) AS bv FROM bids b, R r WHERE b.broker_id = r.b GROUP BY b.broker_id;
SELECT COUNT(*) AS n FROM R r;
"""


def _csv_rows(path: Path, n: int, rng: random.Random, cols) -> None:
    rows, lines = [], []
    for _ in range(n):
        if rows and rng.random() < 0.3:
            lines.append("0|" + rows.pop(rng.randrange(len(rows))))
        else:
            row = "|".join(cols())
            rows.append(row)
            lines.append("1|" + row)
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Path:
    """A program over three interleaved STREAM files of different lengths (two CSV, one order
    book, so one reader with an order table) and a TABLE file."""
    folder = tmp_path_factory.mktemp("multi")
    rng = random.Random(5)
    _csv_rows(folder / "r.csv", 40_000, rng, lambda: [str(rng.randint(0, 50)), str(rng.randint(1, 9)),
                                                       str(rng.randint(1, 1000) / 8)])
    _csv_rows(folder / "s.csv", 27_000, rng, lambda: [str(rng.randint(1, 9)), str(rng.randint(1, 100) / 4)])
    (folder / "t.csv").write_text("".join(f"{b},{b * 1.5}\n" for b in range(1, 10)))
    write_orderbook(folder / "book.csv", 33_000, seed=13, depth=300)
    (folder / "views.sql").write_text(MULTI_SQL)
    return folder / "views.sql"


def test_multi_file_resume_from_every_checkpoint(multi, tmp_path):
    """Checkpoints every 7,000 lines of a merged input, all kept; resuming from each one gives
    the views of the uninterrupted run after every 3,000 lines and at the end, bit for bit."""
    from ddms.compiler import compile_sql_file
    from ddms.io.inputs import open_program_input
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    from ddms.runtime.resume import CheckpointedRun
    prog = compile_sql_file(multi).program

    def run(folder: Path | None, resume: bool = False) -> list[tuple[int, str]]:
        engine = Engine(prog)
        inputs = open_program_input(prog, multi.parent)
        out: list[tuple[int, str]] = []
        if folder is None:
            batches = inputs.batches(lambda p: [p.read_bytes()])
        else:
            batches = CheckpointedRun(engine, inputs, folder, every=7_000, keep=None, resume=resume).batches()
        replay(engine, batches, engine.relmap(inputs.names), every=3_000,
               checkpoint=lambda pos: out.append((pos, json.dumps(dict(engine.snapshot())))))
        engine._check()
        return [*out, (engine.position, json.dumps(dict(engine.snapshot())))]

    full = run(None)
    assert full[-1][0] == 9 + 40_000 + 27_000 + 33_000
    assert run(tmp_path / "all") == full   # checkpointing changes nothing
    found = checkpoints(tmp_path / "all")
    assert len(found) >= 10
    for line, path in found:
        folder = tmp_path / f"from{line}"
        folder.mkdir()
        (folder / path.name).write_bytes(path.read_bytes())
        assert run(folder, resume=True) == [x for x in full if x[0] > line] or [full[-1]], line


def test_multi_file_kill_and_resume(multi, tmp_path):
    common = [str(multi), "--every", "5000", "--json"]
    full, _ = finish(ddms(*common))
    for n, delay in enumerate((0.0, 0.15)):
        folder = tmp_path / f"ck{n}"
        args = [*common, "--checkpoint-every", "8000"]
        p = ddms(*args, "--checkpoint", str(folder), env={PAUSE_ENV: "0.05"})
        deadline = time.monotonic() + 300
        while p.poll() is None and time.monotonic() < deadline and not checkpoints(folder):
            time.sleep(0.01)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.communicate()
        resumed, err = finish(ddms(*args, "--resume", str(folder)))
        check_resumed(full, resumed, resume_point(err))


def test_checkpoint_refuses_a_reader_without_a_position(tmp_path):
    """A reader whose position a checkpoint cannot hold (LOBSTER) is refused by name; captures
    are checkpointed (tests/test_capture_resume.py)."""
    msg = tmp_path / "AAPL_2012-06-21_34200000_57600000_message_1.csv"
    msg.write_text("34200.01,1,11,100,5850000,1\n34200.02,1,12,50,5860000,-1\n34200.03,3,11,100,5850000,1\n")
    p = ddms(str(EXAMPLES / "sobi.m3"), "--data", str(msg), "--checkpoint", str(tmp_path / "ck"))
    _, err = p.communicate()
    assert p.returncode == 2 and f"{msg.name}: checkpoints need order-book CSV, CSV or capture input" in err.decode()


def test_replay_from_any_checkpoint_to_any_line(data, tmp_path):
    """A recorded input plus its kept checkpoints (``--checkpoint-keep 0``) replay from any
    checkpoint (``--resume FILE``, which writes none) to any line (``--until``): the output equals
    the uninterrupted run's after that checkpoint, up to that line."""
    prog = str(EXAMPLES / "sobi.m3")
    common = [prog, "--data", str(data), "--every", "7000", "--json"]
    folder = tmp_path / "all"
    finish(ddms(*common, "--checkpoint", str(folder), "--checkpoint-every", "10000", "--checkpoint-keep", "0"))
    found = checkpoints(folder)   # a due checkpoint waits while the previous one is written: >= 2
    assert [line for line, _ in found][-1] == 150_000 and len(found) >= 2
    before = sorted(p.name for p in folder.iterdir())
    rng = random.Random(4)
    for line, path in {found[0], found[(len(found) - 1) // 2]}:
        until = rng.randint(line + 1, 150_000)
        want, _ = finish(ddms(*common, "--until", str(until)))
        assert line_of(want[-1]) == until
        got, err = finish(ddms(*common, "--resume", str(path), "--until", str(until)))
        assert resume_point(err) == line
        assert got == [x for x in want if line_of(x) > line]
    assert sorted(p.name for p in folder.iterdir()) == before   # --resume FILE wrote nothing
    p = ddms(*common, "--resume", str(found[0][1]), "--checkpoint", str(folder))
    _, err = p.communicate()
    assert p.returncode == 2 and "omit --checkpoint" in err.decode()
