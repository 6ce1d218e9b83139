"""The backtest core and the ``ddms backtest`` command: deterministic summary rows, the output
files, sample cutting, and clear errors for unknown strategies/parameters and bad data."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
import strategies
from ddms.cli import main
from ddms.io.orderbook import parse_orderbook_text
from replay.backtest import METRICS, _cuts, open_partition, run_backtest, run_task
from replay.metrics import summarize
from replay.results import write_run
from replay.synthetic import write_orderbook

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "orderbook"


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("data") / "synth.csv"
    write_orderbook(path, 30_000, seed=7)
    return str(path)


def _same(a: dict, b: dict) -> bool:
    return list(a) == list(b) and all(
        (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) or x == y
        for x, y in zip(a.values(), b.values(), strict=True))


def test_run_task_row_is_deterministic_and_complete(synth):
    params = {"k": 0.3, "threshold": 0.0008}
    row = run_task(synth, "sobi", params)
    assert list(row) == ["partition", "k", "threshold", "order_size", "position_limit", "latency", "maker_fee",
                         "taker_fee", "sample_lines", *METRICS]
    assert row["partition"] == synth and row["k"] == 0.3 and row["threshold"] == 0.0008
    assert row["lines"] == 30_000 and row["n_trades"] > 0 and row["orders"] > 0
    assert all(type(v) in (str, float, int) for v in row.values())
    assert _same(row, run_task(synth, "sobi", params))          # same task, same row, bit for bit
    assert _same(row, run_task(synth, "sobi", dict(reversed(params.items()))))


def test_result_metrics_agree_with_fills_and_equity(synth, tmp_path):
    r = run_backtest(synth, "mm", {"tick": 100, "half_spread": 0.0005, "taker_fee": 0.001, "maker_fee": -0.0002},
                     check=True)
    m = summarize(r.fills, r.equity["time"], r.equity["mark"])
    assert m == r.metrics
    assert r.equity["line"].tolist() == list(range(1000, 30_001, 1000))
    # equity = cash + position * mark at every sample; returns are its differences
    e = r.equity
    assert np.allclose(e["equity"], e["cash"] + e["position"] * e["mark"])
    assert np.allclose(e["return"][1:], np.diff(e["equity"]))
    assert r.metrics.fees == pytest.approx(float(r.fills["fee"].sum()))
    assert r.metrics.n_trades == len(r.fills["qty"]) > 0
    # the run's files hold the same numbers
    written = write_run(r, tmp_path)
    assert pq.read_table(tmp_path / "fills.parquet").column("price").to_pylist() == r.fills["price"].tolist()
    with open(tmp_path / "equity.csv") as f:
        assert [float(x["equity"]) for x in csv.DictReader(f)] == pytest.approx(r.equity["equity"].tolist())
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert tmp_path / "plot.png" in written and (tmp_path / "plot.png").stat().st_size > 10_000
    assert "<svg" in (tmp_path / "plot.html").read_text()


def test_cuts_at_sample_lines_and_batch_end():
    batch = parse_orderbook_text("\n".join(f"{i},{i},B,1,{100 + i}" for i in range(1, 11)))
    assert list(_cuts(batch, 4)) == [4, 8, 10]
    assert list(_cuts(batch, 5)) == [5, 10]
    later = replace(batch, first_line=7, last_line=13)
    assert list(_cuts(later, 4)) == [8, 12, 13]


def test_equity_sampled_every_sample_lines_without_changing_fills():
    """Piecewise application (engine and simulator resume the same batch) samples at each
    multiple of sample_lines and gives the same fills and metrics as one piece."""
    batches = list(open_partition("synthetic:5000:3"))
    one = run_backtest(batches, "sobi", {"threshold": 0.0001}, sample_lines=10**9, name="s")
    many = run_backtest(batches, "sobi", {"threshold": 0.0001}, sample_lines=700, name="s", check=True)
    assert many.equity["line"].tolist() == [*range(700, 5000, 700), 5000]
    assert one.equity["line"].tolist() == [5000]
    assert many.metrics.n_trades == one.metrics.n_trades > 0
    for k in one.fills:
        assert np.array_equal(one.fills[k], many.fills[k], equal_nan=True), k


def test_cli_demo_writes_summary_and_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["backtest", "--demo", "--demo-lines", "20000", "--param", "threshold=0.0005,0.001",
                 "--param", "k=0.2,0.3", "--out", str(out), "--no-plot"]) == 0
    shown = capsys.readouterr().out
    assert "sobi: 4 run(s), 80,000 lines" in shown and "total_pnl" in shown
    with open(out / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    table = pq.read_table(out / "summary.parquet").to_pylist()
    assert len(rows) == len(table) == 4
    assert [(float(r["threshold"]), float(r["k"])) for r in rows] == [
        (0.0005, 0.2), (0.0005, 0.3), (0.001, 0.2), (0.001, 0.3)]
    assert table[0]["partition"] == "synthetic:20000:0" and table[0]["lines"] == 20000
    assert set(METRICS) <= set(table[0])
    for i in range(4):
        run = out / "runs" / f"{i:03d}"
        for name in ("fills", "equity", "orders"):
            assert (run / f"{name}.csv").exists() and (run / f"{name}.parquet").exists()
        meta = json.loads((run / "run.json").read_text())
        assert meta["params"]["threshold"] == table[i]["threshold"]
        fills = pq.read_table(run / "fills.parquet")
        assert fills.num_rows == table[i]["n_trades"]
        assert not (run / "plot.png").exists()


@pytest.mark.parametrize("argv, message", [
    (["--strategy", "nope"], "unknown strategy 'nope' (strategies: mm, sobi)"),
    (["--param", "kk=1"], "--param 'kk=1': strategy sobi has no parameter 'kk' (parameters: k, threshold"),
    (["--param", "k=0.1,x"], "--param 'k=0.1,x': 'x' is not a number"),
    (["--param", "k=2"], "parameter k=2.0 is outside (0, 1]"),
    (["--param", "k"], "expected NAME=VALUE"),
])
def test_cli_parameter_errors(argv, message, capsys):
    assert main(["backtest", "--demo", "--demo-lines", "100", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddms: error: ") and message in err


def test_cli_bad_data_files(tmp_path, capsys):
    assert main(["backtest", str(tmp_path / "missing.csv")]) == 2
    assert "missing.csv: no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("1,1,B,10,100\n2,2,S,10,101\n3,3,B,ten,99\n")
    assert main(["backtest", str(bad)]) == 2
    assert "bad.csv:3:" in capsys.readouterr().err
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    assert main(["backtest", str(junk)]) == 2
    assert "junk.txt" in capsys.readouterr().err
    assert main(["backtest"]) == 2
    assert "give DATA files" in capsys.readouterr().err


@pytest.mark.skipif(not (DATA / "tiny" / "finance.csv").exists(), reason="shared data not present")
def test_real_file_partition():
    row = run_task(str(DATA / "tiny" / "finance.csv"), "sobi", {"threshold": 0.2, "sample_lines": 10})
    assert row["lines"] == 100


def test_rare_conditions_stay_in_compiled_code(synth):
    quiet = strategies.get("sobi", {"threshold": 0.5})      # |SIGNAL| never gets near 0.5 here
    r = run_backtest(synth, quiet)
    assert quiet.fired == 0 and r.orders == () and r.metrics.n_trades == 0
    busy = strategies.get("sobi", {"threshold": 0.0008})
    r = run_backtest(synth, busy)
    changes: list[int] = []
    probe = strategies.get("sobi", {"threshold": 0.0008})
    engine = probe.make_engine()
    probe.setup(engine)
    engine.on("SIGNAL", lambda *a: changes.append(1))        # unconditional: every change returns
    for b in open_partition(synth):
        engine.apply(b, engine.relmap(("bids", "asks")))
    # Python ran twice per crossing (out, back): a small fraction of the lines that moved SIGNAL
    assert r.orders and 0 < busy.fired < len(changes) / 20
