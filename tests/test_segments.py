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
