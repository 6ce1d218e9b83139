"""Spark sweeps on one shared local[2] session: rows equal the sequential rows bit for bit, in task
order; failed tasks and malformed task lists give clear errors."""

from __future__ import annotations

import json
import math

import pytest
from conftest import EXAMPLES, data_file

from ddms.errors import ReplayError
from ddms.io.columnar import convert
from ddms.io.sources import open_source
from replay import spark
from replay.backtest import identical
from replay.viewtask import view_task

VWAP = str(EXAMPLES / "vwap.m3")


@pytest.fixture(scope="module")
def session():
    s = spark.get_session("local[2]")
    yield s
    # left running on purpose: other test modules in this process may reuse it; the JVM ends with pytest


@pytest.fixture(scope="module")
def partitions(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark")
    std = data_file("standard")
    pq = tmp / "standard.parquet"
    convert(open_source(std), pq)
    return [str(data_file("tiny")), str(std), str(pq)]


def test_spark_rows_equal_sequential_rows(session, partitions):
    grid = [{"every": e, "level": lv} for e in (10, 250) for lv in (0.0, 1.5e8)]
    tasks = [(p, VWAP, g) for p in partitions for g in grid]
    want = [view_task(*t) for t in tasks]
    seen = []
    got = spark.run_sweep(tasks, master="local[2]", fn=view_task, progress=lambda d, n: seen.append((d, n)))
    assert spark.get_session("local[2]") is session          # the shared session was reused
    assert identical(got, want)                               # exact: same floats bit for bit, same order
    assert [r["partition"] for r in got] == [r["partition"] for r in want]
    assert got[0]["lines"] == 100 and got[-1]["lines"] == 5000 and not math.isnan(got[-1]["VWAP_mean"])
    pq_label = f"{partitions[2].split('/')[-2]}/standard"
    assert (got[4]["partition"], got[8]["partition"]) == ("standard/finance", pq_label)
    assert got[4]["VWAP"] == got[8]["VWAP"]                   # CSV and its Parquet copy agree
    assert seen and seen[-1] == (len(tasks), len(tasks))


def test_failed_task_names_partition_and_error(session, partitions, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,1,B,10,100\n2,2,B,ten,100\n")
    tasks = [(partitions[0], VWAP, {"every": 10}), (str(bad), VWAP, {"every": 10})]
    with pytest.raises(ReplayError) as ei:
        spark.run_sweep(tasks, master="local[2]", fn=view_task)
    msg = str(ei.value)
    assert str(bad) in msg and "task 1" in msg and "InputError" in msg and "volume is not a number" in msg
    with pytest.raises(ReplayError, match="unknown parameter"):
        spark.run_sweep([(partitions[0], VWAP, {"evry": 1})], master="local[2]", fn=view_task)


def test_malformed_task_lists():
    assert spark.run_sweep([], master="local[2]") == []
    with pytest.raises(ReplayError, match="task 0 is not a"):
        spark.run_sweep([("a.csv", "s")], master="local[2]")


def test_default_task_is_the_backtest_core(session):
    from replay.backtest import run_task
    tiny = str(data_file("tiny"))
    tasks = [(tiny, "sobi", {"k": 0.25}), (tiny, "mm", {"skew": 0.0})]
    assert identical(spark.run_sweep(tasks, master="local[2]"), [run_task(*t) for t in tasks])


def test_strategy_plugins_on_spark_workers(session, tmp_path, monkeypatch, capsys):
    """A plugin found by entry point from a folder only this process has on sys.path, the
    example strategy by file path and by module: the workers import each (the driver sends the
    file's path or the module and its folder) and return the rows the driver computes itself;
    the CLI's --spark takes the entry point name."""
    import json
    import sys

    from strategy_plugin import EXAMPLE, make_plugin

    from ddms.cli import main
    from replay.backtest import run_task
    root = make_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    data = "synthetic:20000:2"
    tasks = [(data, "imb", {"threshold": 0.0002}), (data, f"{EXAMPLE}:Imbalance", {"threshold": 0.0003, "exit": 0}),
             (data, "imbplug:Imbalance", {"exit": 0.00005})]
    want = [run_task(*t) for t in tasks]
    assert any(r["n_trades"] for r in want)
    assert identical(spark.run_sweep(tasks, master="local[2]"), want)
    out = tmp_path / "out"
    assert main(["backtest", data, "--strategy", "imb", "--param", "threshold=0.0002,0.0003", "--spark", "local[2]",
                 "--json", "--out", str(out), "--no-plot"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    want2 = [want[0], run_task(data, "imb", {"threshold": 0.0003})]
    assert rows == [{k: (None if isinstance(v, float) and v != v else v) for k, v in w.items()} for w in want2]
    with open(out / "summary.csv") as f:
        assert len(f.read().splitlines()) == 3                  # header + one row per run, none twice
    best = max(range(2), key=lambda i: want2[i]["total_pnl"])
    assert [p.name for p in (out / "runs").iterdir()] == [f"{best:03d}"]   # the best run replayed for its files
    for m in [m for m in sys.modules if m == "imbplug"]:
        del sys.modules[m]


def test_rows_as_tasks_finish_and_ctrl_c(session, tmp_path, capsys, monkeypatch):
    """``on_row`` gets each row as its task finishes (the rows equal the one-job sweep's); an
    interruption cancels the rest, and the CLI with --out keeps the rows that finished."""
    import csv
    import json

    from ddms.cli import main
    from replay import cli
    from replay.backtest import run_task
    tiny = str(data_file("tiny"))
    tasks = [(tiny, "sobi", {"threshold": t}) for t in (0.001, 0.002, 0.003, 0.004)]
    got: dict[int, dict] = {}
    rows = spark.run_sweep(tasks, master="local[2]", on_row=lambda i, r: got.__setitem__(i, r))
    want = [run_task(*t) for t in tasks]
    assert identical(rows, want) and identical([got[i] for i in range(4)], want)

    def stop_after_two(i, r):
        if len(got2) == 2:
            raise KeyboardInterrupt
        got2[i] = r
    got2: dict[int, dict] = {}
    with pytest.raises(KeyboardInterrupt):
        spark.run_sweep(tasks, master="local[2]", on_row=stop_after_two)
    assert len(got2) == 2
    assert identical(spark.run_sweep(tasks[:1], master="local[2]"), want[:1])   # the session still works

    real = cli._Saver.add_row
    seen = []

    def interrupt_after_two(self, i, row):
        real(self, i, row)
        seen.append(i)
        if len(seen) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(cli._Saver, "add_row", interrupt_after_two)
    out = tmp_path / "out"
    assert main(["backtest", tiny, "--param", "threshold=0.001,0.002,0.003,0.004", "--spark", "local[2]",
                 "--out", str(out), "--json"]) == 130
    captured = capsys.readouterr()
    assert len([json.loads(x) for x in captured.out.splitlines()]) == 2
    assert f"ddms: interrupted after 2 of 4 run(s); kept 2 finished run(s) in {out}" in captured.err
    with open(out / "summary.csv") as f:
        kept = list(csv.DictReader(f))
    assert len(kept) == 2 and sorted(float(r["threshold"]) for r in kept) == sorted(
        tasks[i][2]["threshold"] for i in seen)
    assert not (out / "runs").exists()                       # no best run replayed after an interruption


def _tardis_file(path, rows):
    header = "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n"
    path.write_text(header + "\n".join(rows) + "\n")
    return str(path)


def test_run_spark_one_task_per_file_and_symbol(session, tmp_path, capsys):
    """``ddms run PROG --data FILE... --spark local[2]``: one task per (file, symbol); the rows
    printed equal, partition by partition and row for row, what ``ddms run PROG --data
    FILE#SYMBOL`` prints alone (tagged with the partition)."""
    from ddms.cli import main
    prog = str(EXAMPLES.parent / "sql" / "symbol_best_bid.sql")
    rows_a = []
    for i in range(12):
        sym = ("AAA", "BBB")[i % 2]
        snap = "true" if i < 2 else "false"
        rows_a += [f"ex,{sym},{1000 + i},{1000 + i},{snap},bid,{10 + i % 5},{1 + i % 3}",
                   f"ex,{sym},{1000 + i},{1000 + i},{snap},ask,{30 + i % 4},1"]
    a = _tardis_file(tmp_path / "a.csv", rows_a)
    b = _tardis_file(tmp_path / "b.csv", [f"ex,CCC,{2000 + i},{2000 + i},{'true' if i == 0 else 'false'},bid,{5 + i},2"
                                          for i in range(7)])
    assert main(["run", prog, "--data", a, "--data", b, "--spark", "local[2]", "--every", "2", "--json"]) == 0
    got = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["partition"] for r in got if r["line"] == 2] == [f"{a}#AAA", f"{a}#BBB", b]
    for part in (f"{a}#AAA", f"{a}#BBB", b):
        assert main(["run", prog, "--data", part, "--every", "2", "--json"]) == 0
        want = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        assert len(want) >= 3
        assert [{k: v for k, v in r.items() if k != "partition"} for r in got if r["partition"] == part] == want
    assert any(r["views"]["SYMBOL_BEST_BID"] == [["CCC", 11.0]] for r in got)
