"""``python -m bench.suite_compile DIR [--log FILE]``: where a test run's numba compile time goes.

``DIR`` holds the records ``DDMS_COMPILE_PROFILE=DIR python3 -m pytest`` writes (tests/conftest.py: one
JSON file per worker, a row per numba compile: module, function, seconds with the compiles nested
in it, seconds net of them, the test running).  Printed: the total net compile time, the test
programs by function kind next to the runtime library and the other kernels, the costliest
programs, and per test file its compile seconds; with ``--log`` (a pytest log run with
``--durations=0``), each file's test seconds too and what is left once compile is taken away.
Only compiles inside the test processes are recorded: a ``ddms`` subprocess a test starts compiles
unseen (compare a cold and a warm run of that file).  Why: stop 42 found this way that 45% of a
cold suite was numba compiling, and which part of it.  Cost: reading the files (seconds)."""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

_PROGRAM = "ddms_prog_"


def load(folder: Path) -> list[tuple[str, str, float, float, str]]:
    """Every compile row of every worker's file in ``folder``."""
    rows: list[tuple[str, str, float, float, str]] = []
    for f in sorted(folder.glob("*.json")):
        rows += [tuple(r) for r in json.loads(f.read_text())]
    if not rows:
        raise SystemExit(f"{folder}: no compile records (run pytest with DDMS_COMPILE_PROFILE={folder})")
    return rows


def durations(log: Path) -> dict[str, float]:
    """Seconds per test file from pytest's ``--durations=0`` lines (setup, call and teardown)."""
    out: dict[str, float] = defaultdict(float)
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"^([0-9.]+)s (?:call|setup|teardown)\s+(\S+)", line)
        if m:
            out[m.group(2).split("::")[0]] += float(m.group(1))
    return out


def _kind(module: str, name: str) -> str:
    """A test program's function by kind (``on_insert_BIDS_c0`` -> ``on_insert``), else its module."""
    if module.rsplit(".", 1)[-1].startswith(_PROGRAM):
        return "program: " + re.sub(r"_(BIDS|ASKS|[A-Z0-9_]+)(_[cs]\d+)*$", "", name)
    return module


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--log", type=Path, help="a pytest log with --durations=0")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args(argv)
    rows = load(args.folder)
    console = Console()
    total = sum(r[3] for r in rows)
    by_kind: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    programs: dict[str, float] = defaultdict(float)
    first_test: dict[str, str] = {}
    by_file: dict[str, float] = defaultdict(float)
    for module, name, _, net, test in rows:
        by_kind[_kind(module, name)] += net
        count[_kind(module, name)] += 1
        if _PROGRAM in module:
            programs[module] += net
            first_test.setdefault(module, test)
        by_file[test.split("::")[0]] += net
    t = Table(title=f"numba compile, net of nested compiles: {total:,.0f} s over {len(rows):,} compiles, "
                    f"{len(programs)} test programs")
    for c in ("s", "share", "compiles", "what"):
        t.add_column(c, justify="right" if c != "what" else "left")
    for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])[:args.top]:
        t.add_row(f"{v:,.1f}", f"{v / total:.0%}", str(count[k]), k)
    console.print(t)
    t = Table(title="costliest test programs (first test that compiled each)")
    for c in ("s", "test"):
        t.add_column(c, justify="right" if c == "s" else "left")
    for m, v in sorted(programs.items(), key=lambda kv: -kv[1])[:args.top]:
        t.add_row(f"{v:,.1f}", first_test[m])
    console.print(t)
    spent = durations(args.log) if args.log else {}
    t = Table(title="per test file" + (" (test seconds from the log)" if spent else ""))
    for c in ("compile s", *(("test s", "rest s") if spent else ()), "file"):
        t.add_column(c, justify="right" if c != "file" else "left")
    files = spent if spent else by_file
    for f in sorted(files, key=lambda f: -files[f])[:args.top]:
        cells = [f"{by_file.get(f, 0.0):,.1f}"]
        if spent:
            cells += [f"{spent[f]:,.1f}", f"{spent[f] - by_file.get(f, 0.0):,.1f}"]
        t.add_row(*cells, f)
    console.print(t)


if __name__ == "__main__":
    main()
