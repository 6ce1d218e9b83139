"""A non-editable install (a wheel, as ``pip install .`` builds) runs the demo and the backtest
demo: the programs they need (``ddms/programs/*.m3``, ``strategies/programs/*.m3``) are package
data, found through importlib.resources, not in a source tree.

The wheel is built from a copy of the sources the build reads (pyproject.toml, README.md and the
three packages, not the tests or examples) with ``pip wheel`` and installed with ``pip install
--target`` into a directory of its own; the commands then run with that directory as the only
place ddms can come from (``PYTHONPATH``, cwd outside the repository) and the test checks that
they did.  numba's cache is keyed by the sources' contents, not where they are installed
(:mod:`ddms.numbacache`), so the wheel's kernels and demo programs load the machine code the
checkout's runs compiled; the install directory is kept (under the ddms cache, one per wheel
content) so a later run with the same wheel contents skips the install too.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from conftest import REPO

from ddms.backend.cache import cache_dir

pytestmark = pytest.mark.long(60)   # minutes in CI: scheduled first (tests/conftest.py)

BUILD_INPUTS = ("pyproject.toml", "README.md", "ddms", "strategies", "replay")


def _pip(*args: str, cwd: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"pip {' '.join(args)} failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


def _wheel_key(wheel: Path) -> str:
    """A hash of the wheel's members (names and bytes; not the zip's timestamps)."""
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            h.update(name.encode() + b"\0" + z.read(name))
    return h.hexdigest()[:16]


def _build_and_install(tmp_path: Path) -> tuple[Path, list[str]]:
    src = tmp_path / "src"
    src.mkdir()
    for name in BUILD_INPUTS:
        p = REPO / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(p, src / name)
    dist = tmp_path / "dist"
    _pip("wheel", "--no-deps", "-q", "-w", str(dist), str(src), cwd=tmp_path)
    (wheel,) = dist.glob("ddms-*.whl")
    with zipfile.ZipFile(wheel) as z:
        members = z.namelist()
    key = _wheel_key(wheel)
    base = cache_dir() / "wheel-test"
    site = base / key
    if not (site / ".installed").exists():
        if base.exists():       # earlier wheels' installs, unless another test run may be using one
            for old in base.iterdir():
                if time.time() - old.stat().st_mtime > 3600:
                    shutil.rmtree(old, ignore_errors=True)
        _pip("install", "--no-deps", "-q", "--target", str(site), str(wheel), cwd=tmp_path)
        (site / ".installed").write_text(wheel.name)
    return site, members


def _run(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_wheel_carries_the_programs_and_runs_both_demos(tmp_path):
    site, members = _build_and_install(tmp_path)
    assert {"ddms/programs/sobi.m3", "ddms/programs/vwap.m3", "strategies/programs/sobi.m3",
            "strategies/programs/top.m3"} <= set(members)
    assert not any(m.startswith(("tests/", "examples/")) for m in members)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    where = _run(site, cwd, "-c", "import ddms, strategies, replay; print(ddms.__file__, strategies.__file__, "
                                  "replay.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(Path(f).is_relative_to(site) for f in where.stdout.split()), where.stdout

    run = _run(site, cwd, "-m", "ddms", "run", "--demo-lines", "20000", "--json")
    assert run.returncode == 0, run.stderr[-3000:]
    last = json.loads(run.stdout.splitlines()[-1])
    assert last["line"] == 20000 and {"SOBI", "BEST_BID", "BEST_ASK"} <= set(last["views"])

    bt = _run(site, cwd, "-m", "ddms", "backtest", "--demo", "--demo-lines", "20000", "--no-plot")
    assert bt.returncode == 0, bt.stderr[-3000:]
    assert "sobi: 3 run(s), 60,000 lines" in bt.stdout and "total_pnl" in bt.stdout
    assert not list(cwd.iterdir())            # nothing written where it ran
