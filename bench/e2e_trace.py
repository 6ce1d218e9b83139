"""Per-stage trace of ``ddms run QUERY --data FILE --json``: where its end-to-end time goes.

``python -m bench.e2e_trace QUERY FILE [--reps N] [--batches]`` runs ``ddms run`` in this process
(``ddms.cli.main``, compiled code only: ``--no-first-results``) with the two stages wrapped from
outside (nothing in the product changes): the CPU time (``time.thread_time``) the parse-ahead
thread spends on each batch it hands over (reading, parsing, batching: everything but waiting)
and the CPU time of each ``Engine.apply`` on the applying thread, plus the run's wall time, its
applying thread's CPU time and its page faults.  From the per-batch CPU times it computes the
wall time the run would take with two free cores (:func:`pipeline_model`: the reader at most
``depth`` + 1 batches ahead, each apply starting once its batch is parsed and the previous one
applied), which, unlike the wall time, survives a loaded machine: the ratio ``apply / model`` is
the best end to end / apply only such a run can reach, and a reader total above the apply total
says the run is bound by parsing.  The process's helper thread (``ddms.io.pages.helper``: reading
the next chunk, faulting in memory ahead, ~1-2 ms of CPU a run of big/finance.csv) is in neither
stage; its CPU time in the run is measured (``Helper.cpu_time``), and the model is never below
the CPU work of the run's three threads (reader, applying thread, helper) over two cores: work
moved onto the helper is not free.  CPU times on a loaded machine are inflated (caches shared),
every thread alike.  Each repetition is a fresh process (a run's
page faults and growing tables are part of its cost).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import REPO


@dataclass
class Trace:
    """One run: per-batch CPU seconds of the reader (``reader[i]``: producing batch i) and of the
    applying thread (``apply[i]``), the timed part's wall and applying-thread CPU seconds, page
    faults, and the helper thread's CPU seconds."""

    reader: list[float] = field(default_factory=list)
    apply: list[float] = field(default_factory=list)
    wall: float = 0.0
    main_cpu: float = 0.0
    faults: int = 0
    helper: float = 0.0

    @property
    def model(self) -> float:
        """The two-core model: the pipeline of the two stages, and at least all the CPU work of the
        run's three threads (reader, applier, helper) over two cores."""
        work = sum(self.reader) + self.main_cpu + self.helper
        return max(pipeline_model(self.reader, self.apply), work / 2)


def pipeline_model(reader: list[float], apply: list[float], depth: int = 2) -> float:
    """Seconds a run of these per-batch CPU costs takes with a core for each stage: the reader
    produces batch i after batch i-1 and at most ``depth`` + 1 batches ahead of the applier
    (``driver.prefetch``'s queue plus the one in hand); batch i is applied once it is produced
    and batch i-1 is applied.  O(batches)."""
    produced: list[float] = []
    applied: list[tuple[float, float]] = []
    for i, (r, a) in enumerate(zip(reader, apply, strict=False)):
        start = produced[-1] if produced else 0.0
        if i > depth:
            start = max(start, applied[i - depth - 1][0])   # queue full until that batch was taken
        produced.append(start + r)
        begin = max(applied[-1][1] if applied else 0.0, produced[-1])
        applied.append((begin, begin + a))
    return applied[-1][1] if applied else 0.0


def trace_here(program: str, data: str) -> Trace:
    """Run ``ddms run PROGRAM --data DATA --json --no-first-results`` in this process, traced."""
    from ddms import cli
    from ddms.io.pages import helper
    from ddms.runtime import driver
    from ddms.runtime.engine import Engine

    t = Trace()
    prefetch, replay, apply = driver.prefetch, driver.replay, Engine.apply

    def traced_prefetch(batches, depth: int = 2):
        def timed():
            c = time.thread_time()
            for b in batches:
                now = time.thread_time()
                t.reader.append(now - c)
                yield b
                c = time.thread_time()
        return prefetch(timed(), depth)

    def traced_apply(self, *args, **kw):
        c = time.thread_time()
        try:
            return apply(self, *args, **kw)
        finally:
            t.apply.append(time.thread_time() - c)

    def traced_replay(*args, **kw):
        f0, c0, w0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt, time.thread_time(), time.perf_counter()
        h0 = helper().cpu_time()   # (started by warm, before this)
        t.apply.clear()   # the warm-up before the clock applies nothing; be sure
        try:
            return replay(*args, **kw)
        finally:
            t.wall, t.main_cpu = time.perf_counter() - w0, time.thread_time() - c0
            t.helper = helper().cpu_time() - h0
            t.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

    driver.prefetch, driver.replay, Engine.apply = traced_prefetch, traced_replay, traced_apply
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            code = cli.main(["run", program, "--data", data, "--json", "--no-first-results"])
        if code != 0:
            raise RuntimeError(f"ddms run {program} failed: {err.getvalue()[-300:]}")
    finally:
        driver.prefetch, driver.replay, Engine.apply = prefetch, replay, apply
    return t


def trace(program: Path, data: Path) -> Trace:
    """:func:`trace_here` in a fresh process (this checkout), so every run starts as ``ddms run`` does."""
    code = ("import json, sys; from bench.e2e_trace import trace_here; t = trace_here(sys.argv[1], sys.argv[2]); "
            "print(json.dumps(t.__dict__))")
    out = subprocess.run([sys.executable, "-c", code, str(program), str(data)], cwd=REPO, capture_output=True,
                         text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError(f"trace of {program.name} failed: {out.stderr.strip()[-300:]}")
    return Trace(**json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.e2e_trace", description=__doc__.split("\n")[0])
    ap.add_argument("program")
    ap.add_argument("data")
    ap.add_argument("--reps", type=int, default=3, help="fresh processes (default 3)")
    ap.add_argument("--batches", action="store_true", help="print every batch's CPU times too")
    args = ap.parse_args(argv)
    program, data = Path(args.program).resolve(), Path(args.data).resolve()
    lines = data.read_bytes().count(b"\n")
    for _ in range(args.reps):
        t = trace(program, data)
        r, a = sum(t.reader), sum(t.apply)
        print(f"{program.name}: {len(t.apply)} batches; CPU ms: reader {1e3 * r:.2f}, apply {1e3 * a:.2f}, applying "
              f"thread besides apply {1e3 * (t.main_cpu - a):.2f}, helper {1e3 * t.helper:.2f}; two-core model "
              f"{1e3 * t.model:.2f} ms = "
              f"{lines / t.model / 1e6:.2f}M lines/s, apply / model {a / t.model:.2f} "
              f"({'parse' if r > a else 'apply'}-bound); wall {1e3 * t.wall:.2f} ms; {t.faults} page faults")
        if args.batches:
            print("  reader ms:", " ".join(f"{1e3 * x:.2f}" for x in t.reader))
            print("  apply ms: ", " ".join(f"{1e3 * x:.2f}" for x in t.apply))


if __name__ == "__main__":
    main()
