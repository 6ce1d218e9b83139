"""Section 6: compile time of vwap.m3 and sobi.m3.

Each program is constructed in a subprocess with fresh, empty NUMBA_CACHE_DIR and DDMS_CACHE_DIR
(cold: generate, write and compile everything, the runtime's numba functions included), then in a
second subprocess with the same directories (cached).  Reported: Engine.compile_seconds (the
construction) and the whole process's wall time (interpreter start and imports included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common import PROGRAMS, REPO, Row, Shared

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
    return rows
