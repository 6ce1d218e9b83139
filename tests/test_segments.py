"""One long history split into segments that start from first-pass checkpoints: the segments'
rows, concatenated, equal the sequential run's row for row (bit for bit, as JSON), run one after
the other and as Spark tasks (local[2])."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES

from replay.segments import first_pass, segment_task, segment_tasks, sequential_rows
from replay.synthetic import write_orderbook


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("segments")
    data = str(tmp / "book.csv")
    write_orderbook(data, 60_000, seed=21, depth=500)
    prog = str(EXAMPLES / "sobi.m3")
    lines = first_pass(prog, data, tmp / "ck", every=10_000)
    assert lines[-1] == 60_000 and len(lines) >= 3
    return prog, data, segment_tasks(prog, data, tmp / "ck", every=3_000)


def test_segments_add_up_to_the_sequential_run(split):
    prog, data, tasks = split
    want = sequential_rows(prog, data, every=3_000)
    rows = [segment_task(*t) for t in tasks]
    assert [r["start"] for r in rows[1:]] == [r["until"] for r in rows[:-1]]
    assert [x for r in rows for x in r["rows"]] == want
    assert len(want) == 20


def test_segments_on_spark(split):
    from replay import spark
    prog, data, tasks = split
    rows = spark.run_sweep(tasks, "local[2]", fn=segment_task)
    assert [x for r in rows for x in r["rows"]] == sequential_rows(prog, data, every=3_000)


def _cli(*args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    from conftest import REPO
    p = subprocess.run([sys.executable, "-m", "ddms", "run", *args], cwd=REPO, capture_output=True, text=True,
                       timeout=900)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("spark", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_cli_split_prints_what_the_sequential_run_prints(split, tmp_path, spark):
    """``ddms run --segments N [--spark MASTER]``: the printed views equal the sequential run's,
    the first pass's cost and the speedup are reported; with ``--checkpoint DIR`` a second run
    reuses the first pass's checkpoints."""
    prog, data, _ = split
    common = [prog, "--data", data, "--every", "7000", "--json"]
    rc, want, _ = _cli(*common)
    assert rc == 0 and len(want.splitlines()) == 9   # 8 multiples of 7,000 and the end
    extra = ["--spark", "local[2]"] if spark else []
    rc, got, err = _cli(*common, "--segments", "3", "--checkpoint", str(tmp_path / "ck"), *extra)
    assert rc == 0, err
    assert got == want
    assert "first pass (a sequential replay writing the checkpoints)" in err and "speedup" in err
    rc, again, err = _cli(*common, "--segments", "3", "--checkpoint", str(tmp_path / "ck"), *extra)
    assert rc == 0 and again == want and "reused the checkpoints" in err
    rc, got, _ = _cli(prog, "--data", data, "--json", "--segments", "2")   # no --every: the final views only
    assert rc == 0 and got.splitlines() == [want.splitlines()[-1]]


def test_cli_split_refusals(split):
    prog, data, _ = split
    rc, _, err = _cli(prog, "--data", data, "--spark", "local[2]", "--query", "SELECT 1")
    assert rc == 2 and "--spark runs one replay per partition" in err   # (without --segments: per partition)
    rc, _, err = _cli(prog, "--data", data, "--segments", "2", "--query", "SELECT 1")
    assert rc == 2 and "without --resume, --query" in err
