"""Strategies per symbol (issue 22 items 2 and 8): a backtest over a multi-symbol file runs one
partition per (file, symbol) -- its own engine, fill simulator, position and metrics -- and the
strategy sees the symbol it trades (``ctx.symbol``); on Spark each (file, symbol) partition is
one task, and the rows equal the sequential run's row for row, bit for bit."""

from __future__ import annotations

import json
import math

import pytest
from conftest import EXAMPLES, shared_file

from ddms.cli import main
from ddms.io.sources import file_symbols
from replay import spark
from replay.backtest import identical, partition_symbol, run_backtest, run_task, symbol_partitions
from replay.viewtask import view_task
from strategies.sobi import Sobi

PARAMS = {"threshold": 0.0005, "k": 0.25}


@pytest.fixture(scope="module")
def kraken():
    return str(shared_file("data", "venues", "KRAKEN.ws.50.0"))


def test_symbol_partitions(kraken, tmp_path) -> None:
    syms = file_symbols(kraken)
    assert len(syms) > 1 and "XBT/CHF" in syms
    parts = symbol_partitions([kraken, "synthetic:100", f"{kraken}#XBT/CHF"])
    assert parts == [f"{kraken}#{s}" for s in syms] + ["synthetic:100", f"{kraken}#XBT/CHF"]
    one = tmp_path / "book.csv"
    one.write_text("1,1,B,10,100\n")
    assert symbol_partitions([str(one)]) == [str(one)] and file_symbols(one) == []
    assert partition_symbol(f"{kraken}#XBT/CHF") == "XBT/CHF" and partition_symbol(kraken) is None


class Recording(Sobi):
    """SOBI that records the symbol its context names and every order's symbol."""

    seen: list = []

    def start(self, ctx) -> None:
        Recording.seen.append(ctx.symbol)
        super().start(ctx)


def test_strategy_sees_its_symbol_and_keeps_its_own_position(kraken) -> None:
    parts = symbol_partitions([kraken])[:4]
    Recording.seen = []
    results = [run_backtest(p, Recording(PARAMS)) for p in parts]
    assert Recording.seen == [partition_symbol(p) for p in parts]
    for p, r in zip(parts, results, strict=True):
        assert r.partition == p and r.lines > 0
    assert sum(r.metrics.n_trades for r in results) > 0     # the threshold is low enough to trade


def test_cli_backtest_over_a_multi_symbol_file_gives_a_row_per_symbol(kraken, capsys) -> None:
    code = main(["backtest", kraken, "--strategy", "sobi", "--param", "threshold=0.0005", "--json", "--no-plot"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    syms = file_symbols(kraken)
    assert [r["partition"] for r in rows] == [f"{kraken}#{s}" for s in syms]
    for r in rows[:3]:
        want = run_task(r["partition"], "sobi", {"threshold": 0.0005})
        nulls = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in want.items()}
        assert {k: r[k] for k in want} == nulls


@pytest.fixture(scope="module")
def session():
    return spark.get_session("local[2]")


def test_spark_one_task_per_file_and_symbol(session, kraken) -> None:
    okx = str(shared_file("data", "venues", "OKX.ws.1.0"))
    parts = symbol_partitions([kraken, okx])
    assert len(parts) > 2
    tasks = [(p, "sobi", PARAMS) for p in parts]
    want = [run_task(*t) for t in tasks]
    got = spark.run_sweep(tasks, master="local[2]")
    assert identical(got, want)
    # a view replay per (file, symbol) partition on Spark
    vtasks = [(p, str(EXAMPLES / "sobi.m3"), {"every": 100}) for p in parts]
    assert identical(spark.run_sweep(vtasks, master="local[2]", fn=view_task), [view_task(*t) for t in vtasks])
