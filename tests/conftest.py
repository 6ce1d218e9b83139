"""Shared fixtures: where ../shared is, and per-session compiled programs (numba's disk cache
makes every later Engine of the same program cheap)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ORDERBOOK = SHARED / "data" / "orderbook"
EXAMPLES = REPO / "examples" / "m3"


def shared_file(*parts: str) -> Path:
    """A file under ../shared, or a skip where it is absent (the real-data tests run where the
    reference material is, and are skipped elsewhere)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def data_file(size: str) -> Path:
    return shared_file("data", "orderbook", size, "finance.csv")


@pytest.fixture(scope="module", params=["sobi", "broker_sql"])
def threaded_program(request):
    """The programs the tests of reads from other threads run (test_snapshot, test_nogil_apply):
    sobi.m3 (scalar views over range trees) and test_checkpoint's broker SQL (grouped views, a
    correlated AVG).  Each compiles once per session (numba's cache)."""
    from test_checkpoint import BROKER_SQL

    from ddms.compiler import compile_sql
    from ddms.runtime.engine import load_program
    if request.param == "broker_sql":
        return compile_sql(BROKER_SQL).program
    return load_program(EXAMPLES / f"{request.param}.m3")


def applied_line_by_line(engine, batch, lines: int):
    """Apply ``batch`` (input lines 1..``lines``) to ``engine`` one line at a time, yielding the
    number of lines applied: 0 first, before any, then after each line; the reference states
    that reads taken while another thread applies the whole batch are compared with."""
    from ddms.io.events import split_lines
    relmap = engine.relmap(("bids", "asks"))
    yield 0
    rest = batch
    for k in range(1, lines + 1):
        head, rest = split_lines(rest, k)
        engine.apply(head, relmap)
        yield k


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the files marked ``long`` first, the longest (``long(seconds)``: its cold cost) first.
    With ``--dist loadfile`` xdist hands out files in collection order (pyproject.toml turns off
    its default reordering by number of tests, which put the long files, few tests each, last),
    so a minutes-long file started last would run while the other worker sat idle."""
    def cost(item: pytest.Item) -> float:
        mark = item.get_closest_marker("long")
        return 0.0 if mark is None else float(mark.args[0]) if mark.args else 60.0
    items.sort(key=lambda item: -cost(item))


_COMPILES: list[tuple] = []   # (module, function, seconds with nested compiles, seconds net of them, test)


def _record_compiles() -> None:
    """With ``DDMS_COMPILE_PROFILE=DIR``: record every numba compile of this process (numba's
    ``numba:compile`` events: the function, its time with and without the compiles nested in it,
    the test running), written to ``DIR/<worker>.<pid>.json`` at the end of the session;
    ``python -m bench.suite_compile DIR`` summarises them.  How stop 42 found where a cold
    suite's time goes.  Cost when unset: none (no listener)."""
    import time

    from numba.core import event

    stack: list[list[float]] = []

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append([time.perf_counter(), 0.0])

        def on_end(self, ev):
            t0, nested = stack.pop()
            dt = time.perf_counter() - t0
            if stack:
                stack[-1][1] += dt
            f = ev.data["dispatcher"].py_func
            _COMPILES.append((str(f.__module__), f.__qualname__, dt, dt - nested,
                              os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]))

    event.register("numba:compile", Listener())


if os.environ.get("DDMS_COMPILE_PROFILE"):
    _record_compiles()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker whose tests have all run ignores SIGINT from now on.  Once the controller
    has its results it closes the worker's execnet channel, and execnet sends SIGINT to a worker
    still busy 5 s later (execnet.gateway_base.WorkerGateway._terminate_execution); on a loaded
    machine the worker's own end of session can take that long (pytest's cleanup alone runs
    gc.collect() five times over a heap holding numba's and Spark's objects), and the
    KeyboardInterrupt then surfaced wherever Python code ran, e.g. as an unraisable exception in
    hypothesis's gc callback printed into the suite's log.  A Ctrl-C at the terminal stops a
    run before this point (the tests are over), and the controller still kills a worker that
    does not end."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.environ.get("DDMS_COMPILE_PROFILE")
    if out:
        import json
        Path(out).mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(out) / f"{worker}.{os.getpid()}.json").write_text(json.dumps(_COMPILES))


# ``ddms run`` serves an uncompiled program with the interpreter while numba compiles it in the
# background by default; the suite's runs (in process and in subprocesses, README blocks included)
# compile in the foreground instead, so that each program is compiled once, not once per run that
# starts before the background compile has filled the cache.  tests/test_warm.py checks the default.
os.environ.setdefault("DDMS_FIRST_RESULTS", "0")
