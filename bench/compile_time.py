"""Section 6: compile time of vwap.m3 and sobi.m3.

Each program is constructed in a subprocess with fresh, empty NUMBA_CACHE_DIR and DDMS_CACHE_DIR
(cold: generate, write and compile everything, the runtime's numba functions included), then in a
second subprocess with the same directories (cached).  Reported: Engine.compile_seconds (the
construction) and the whole process's wall time (interpreter start and imports included).

Then the time to the first result of a view never compiled: ``ddms run PROGRAM --data
standard/finance.csv --every 100`` with a fresh DDMS_CACHE_DIR (the program's module is new, so
numba compiles its triggers; the runtime library stays cached in the usual NUMBA_CACHE_DIR), from
process start to the first line on stdout, with and without ``--first-results``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from bench.common import PROGRAMS, REPO, SHARED, Row, Shared

SECTION = "6 compile"

CHILD = """
import json, sys, time
t0 = time.perf_counter()
from ddms.runtime.engine import Engine
t1 = time.perf_counter()
e = Engine(sys.argv[1])
print(json.dumps({"import": t1 - t0, "compile": e.compile_seconds}))
"""


def _child(path: str, env: dict[str, str]) -> tuple[dict, float]:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, path], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"compile subprocess failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]), wall


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    for prog, path in PROGRAMS.items():
        if prog == "SOBI" and not sh.sizes.cold_sobi:
            rows.append(Row(SECTION, f"{path.name}: cold and cached", None, "",
                            verdict="skipped with --quick (a cold SOBI compile takes a minute or more)"))
            continue
        with tempfile.TemporaryDirectory(prefix="ddms-bench-") as tmp:
            env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                       DDMS_CACHE_DIR=os.path.join(tmp, "ddms"))
            for kind in ("cold", "cached"):
                info, wall = _child(str(path), env)
                rows.append(Row(SECTION, f"{path.name}: {kind}, Engine()", info["compile"], "s"))
                rows.append(Row(SECTION, f"{path.name}: {kind}, whole process", wall, "s",
                                verdict=f"imports {info['import']:.2f} s"))
    return rows + run_first_results(sh)


FIRST_RESULT = {"vwap.m3": REPO / "examples" / "m3" / "vwap.m3",
                "axfinder.sql": SHARED / "queries" / "finance" / "axfinder.sql"}
STANDARD = SHARED / "data" / "orderbook" / "standard" / "finance.csv"


def first_result(path, *flags: str, fresh_machine: bool = False) -> tuple[float, float]:
    """(seconds to the first stdout line, seconds to exit) of ``ddms run path`` on standard
    data in a fresh DDMS_CACHE_DIR (and with ``fresh_machine`` an empty NUMBA_CACHE_DIR: the
    runtime library is compiled too).  A background compile left running by ``--first-results``
    (the input ended first) is waited for before the folders go."""
    with tempfile.TemporaryDirectory(prefix="ddms-bench-") as tmp:
        env = dict(os.environ, DDMS_CACHE_DIR=os.path.join(tmp, "ddms"))
        if fresh_machine:
            env["NUMBA_CACHE_DIR"] = os.path.join(tmp, "numba")
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ddms", "run", str(path), "--data", str(STANDARD),
                                 "--every", "100", *flags], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        proc.stdout.readline()
        first = time.perf_counter() - t0
        _, err = proc.communicate(timeout=1800)
        done = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"ddms run failed: {err.strip().splitlines()[-1:]}")
        for line in err.splitlines():   # "... goes on in the background (pid N) ..."
            if "(pid " in line and "goes on" in line:
                _wait_pid(int(line.split("(pid ")[1].split(")")[0]))
    return first, done


def _wait_pid(pid: int, limit: float = 1800) -> None:
    """Wait until process ``pid`` (not our child) has exited."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGTERM)


def run_first_results(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    if not STANDARD.exists():
        return [Row(SECTION, "first result of a new view", None, "", verdict=f"skipped: {STANDARD} absent")]
    for name, path in FIRST_RESULT.items():
        if not path.exists():
            continue
        plain, _ = first_result(path)
        warm, done = first_result(path, "--first-results")
        rows.append(Row(SECTION, f"{name}: first result of a new view, --first-results (whole process)", warm, "s",
                        target="<= 3 s", verdict=f"{'met' if warm <= 3 else 'MISSED'}; without it {plain:.2f} s; "
                                                 f"run ends at {done:.2f} s"))
    if sh.sizes.cold_sobi:   # a full run: one cold library compile more (about a minute)
        path = FIRST_RESULT["vwap.m3"]
        warm, done = first_result(path, "--first-results", fresh_machine=True)
        rows.append(Row(SECTION, "vwap.m3: first result of a new view on a fresh machine (empty numba cache), "
                        "--first-results", warm, "s", target="<= 20 s",
                        verdict=f"{'met' if warm <= 20 else 'MISSED'}; run ends at {done:.2f} s"))
    return rows
