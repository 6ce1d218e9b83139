"""The end-to-end bench (bench/e2e.py) times compiled code only: a program numba's cache lacks is
compiled before any clock starts, and a timed ``ddms run`` that did not load compiled code (the
interpreter serving first results, or a compile) is refused instead of reported.  Nothing here
is timed or compared with a speed target."""

from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from bench import e2e

LOADED = "loaded vwap.m3 in 0.31 s\n"
COMPILED = "compiling vwap.m3 with numba ...\ncompiled vwap.m3 in 11.2 s\n"
INTERPRETED = "compiling vwap.m3 with numba in the background (pid 1); the interpreter serves the views meanwhile ...\n"


def rate_line(how: str) -> str:
    return f"finance.csv: 100,000 lines in 2.50 s (40,000 lines/s, {how})\n"


class FakeDdms:
    """Stands in for ``bench.e2e._ddms``: records the arguments, answers the next stderr."""

    def __init__(self, *stderrs: str) -> None:
        self.stderrs = list(stderrs)
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str, **kw) -> subprocess.CompletedProcess:
        self.calls.append(args)
        return subprocess.CompletedProcess(["ddms", *args], 0, "", self.stderrs.pop(0))


@pytest.fixture
def vwap(tmp_path):
    return tmp_path / "vwap.m3"


def test_rate_of_compiled_code(monkeypatch, vwap) -> None:
    fake = FakeDdms(LOADED + rate_line("compile time excluded"))
    monkeypatch.setattr(e2e, "_ddms", fake)
    assert e2e.ddms_rate(vwap, vwap) == (40_000.0, 100_000)
    assert "--no-first-results" in fake.calls[0]   # never the interpreter's first-results path


@pytest.mark.parametrize("stderr", [
    INTERPRETED + rate_line("all interpreted: numba was still compiling"),
    INTERPRETED + rate_line("the first 20,000 interpreted while numba compiled"),
    COMPILED + rate_line("compile time excluded"),
])
def test_rate_refused_unless_loaded_from_the_cache(monkeypatch, vwap, stderr) -> None:
    monkeypatch.setattr(e2e, "_ddms", FakeDdms(stderr))
    with pytest.raises(RuntimeError, match="vwap.m3"):
        e2e.ddms_rate(vwap, vwap)


def test_compile_before_clock_compiles_in_the_foreground(monkeypatch, vwap) -> None:
    fake = FakeDdms(COMPILED + rate_line("compile time excluded"), LOADED + rate_line("compile time excluded"))
    monkeypatch.setattr(e2e, "_ddms", fake)
    e2e.compile_before_clock(vwap, vwap)
    assert len(fake.calls) == 2 and all("--no-first-results" in c for c in fake.calls)
    # a cache that does not keep the program: refused, not timed
    monkeypatch.setattr(e2e, "_ddms", FakeDdms(*[COMPILED + rate_line("compile time excluded")] * 2))
    with pytest.raises(RuntimeError, match="refusing"):
        e2e.compile_before_clock(vwap, vwap)


def test_real_run_after_compile_before_clock() -> None:
    if not e2e.TINY.exists():
        pytest.skip(f"{e2e.TINY} not found")
    program = e2e.M3[0]
    e2e.compile_before_clock(program, e2e.TINY)
    lines_per_s, lines = e2e.ddms_rate(program, e2e.TINY)
    assert lines == e2e.TINY.read_bytes().count(b"\n") and lines_per_s > 0


def test_pipeline_model() -> None:
    """The two-core model of bench.e2e_trace: the slower stage bounds the run, plus the other
    stage's first (or last) batch; the reader runs at most depth + 1 batches ahead."""
    from bench.e2e_trace import pipeline_model
    assert pipeline_model([1, 1, 1], [2, 2, 2]) == 1 + 2 + 2 + 2          # apply-bound
    assert pipeline_model([3, 3, 3], [1, 1, 1]) == 3 + 3 + 3 + 1          # parse-bound
    assert pipeline_model([], []) == 0
    # depth 0: batch i+1 is read only once batch i-... was taken: reads wait for the slow applier
    assert pipeline_model([1] * 4, [10] * 4, depth=0) == 1 + 4 * 10
    # a slow last read: a deep queue read it early, while the applier was busy; depth 0 could not
    assert pipeline_model([1, 1, 1, 1, 20], [10, 10, 10, 10, 1], depth=5) == 42
    assert pipeline_model([1, 1, 1, 1, 20], [10, 10, 10, 10, 1], depth=0) == 52


def test_trace_model_counts_the_helper_threads_work() -> None:
    """A trace's model is the pipeline of its two stages, but never below the CPU work of its three
    threads (reader, applying thread, helper) over two cores: work moved onto the helper thread
    (reads, faults ahead) is not free."""
    from bench.e2e_trace import Trace
    t = Trace(reader=[3, 3, 3], apply=[1, 1, 1], main_cpu=3.5)
    assert t.model == 3 + 3 + 3 + 1                                       # parse-bound, a core idles
    assert replace(t, helper=5).model == 3 + 3 + 3 + 1                    # the helper's work fits the idle core
    assert replace(t, helper=12).model == (9 + 3.5 + 12) / 2              # it does not: two cores' worth


def test_start_times_count_the_child_process_cpu(tmp_path) -> None:
    """The start rows' CPU time is the child's own user + sys time (a child that burns CPU shows
    some; ours is not counted), best of N taken per column; a run whose stderr lacks the
    expected text is refused."""
    import sys
    burn = [sys.executable, "-c", "import sys; sum(range(2_000_000)); print('done', file=sys.stderr)"]
    wall, cpu = e2e._best(burn, 2, cwd=tmp_path, expect="done")
    assert wall > 0 and cpu > 0
    with pytest.raises(RuntimeError, match="refusing to time it"):
        e2e._timed(burn, cwd=tmp_path, expect="loaded")
