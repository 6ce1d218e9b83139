"""Nothing lost on Ctrl-C (issue 23): an interrupted sweep keeps every finished run (its folder
and the summary of the finished runs) and says how many; an interrupted ``ddms run`` prints the
views as of the last line it applied, equal to a run over exactly that many lines.  Both run the
real command in a subprocess and send SIGINT at a controlled point."""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import EXAMPLES

from replay.synthetic import write_orderbook

REPO = Path(__file__).resolve().parents[1]


def _default_sigint() -> None:
    """In the child before it runs ``ddms`` (a ``preexec_fn``): SIGINT delivered and handled by
    default, whatever the worker running the test had.  A process inherits an ignored or
    blocked SIGINT through exec, and Python then installs no KeyboardInterrupt handler: twice a
    sweep ran all its runs to exit 0 after the test's SIGINT (cause not found in the suite; this
    makes the test about ddms, not about the worker it ran in)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_state() -> str:
    """The test process's own SIGINT disposition and mask, for a failure message."""
    return f"(test process: SIGINT handler {signal.getsignal(signal.SIGINT)!r}, " \
           f"blocked {signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])})"


def _wait_for(proc: subprocess.Popen, ready, what: str, limit: float = 300.0) -> None:
    deadline = time.monotonic() + limit
    while not ready():
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"ended (exit {proc.returncode}) before {what}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_interrupted_sweep_keeps_finished_runs(tmp_path):
    out = tmp_path / "sweep"
    thresholds = [0.0005, 0.001, 0.002, 0.003, 0.004, 0.005]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ddms", "backtest", "synthetic:1500000:1", "--no-plot", "--out", str(out),
         "--param", "threshold=" + ",".join(map(str, thresholds))],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        _wait_for(proc, lambda: (out / "runs" / "001").exists(), "the second run was written")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr + _sigint_state()
    runs = sorted(p.name for p in (out / "runs").iterdir())
    k = len(runs)
    assert 2 <= k < len(thresholds), stderr                       # finished ones kept, the rest not run
    assert runs == [f"{i:03d}" for i in range(k)]                 # no half-written run folder
    assert sorted(p.name for p in out.iterdir()) == ["runs", "summary.csv", "summary.parquet"]
    with open(out / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["threshold"]) for r in rows] == thresholds[:k]
    for i, r in enumerate(rows):
        meta = json.loads((out / "runs" / f"{i:03d}" / "run.json").read_text())
        assert meta["params"]["threshold"] == thresholds[i] and meta["metrics"]["n_trades"] == int(r["n_trades"])
    assert f"ddms: interrupted after {k} of {len(thresholds)} run(s); kept {k} finished run(s) in {out}" in stderr
    assert f"sobi: {k} run(s)" in stdout and "Traceback" not in stderr


def test_interrupted_run_prints_the_views_of_the_last_applied_line(tmp_path):
    data = tmp_path / "book.csv"
    write_orderbook(data, 1_500_000, seed=9)
    shown = tmp_path / "views.jsonl"
    vwap = str(EXAMPLES / "vwap.m3")
    with open(shown, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "ddms", "run", vwap, "--data", str(data), "--json",
                                 "--every", "3"], cwd=REPO, stdout=sink, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_default_sigint)
        try:
            _wait_for(proc, lambda: shown.stat().st_size > 20_000, "views were printed")
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == 130, stderr + _sigint_state()
    rows = [json.loads(x) for x in shown.read_text().splitlines()]
    last = rows[-1]["line"]
    assert 0 < last < 1_500_000, "interrupted mid-run"
    assert [r["line"] for r in rows[:-1]] == list(range(3, 3 * len(rows) - 2, 3))   # checkpoints, none lost
    assert f"interrupted: the views printed last are as of line {last:,}" in stderr and "Traceback" not in stderr
    head = tmp_path / "head.csv"
    with open(data, "rb") as f, open(head, "wb") as g:
        for _ in range(last):
            g.write(f.readline())
    r = subprocess.run([sys.executable, "-m", "ddms", "run", vwap, "--data", str(head), "--json"], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == rows[-1]
