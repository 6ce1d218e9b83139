"""Parallel backtest sweeps on PySpark: one Spark task per (partition, parameter set).

This is the only module that imports pyspark (ruff's banned-api rule), and it imports it lazily,
so the sequential path and the rest of ddms never pay for it.

A sweep is a list of tasks ``(partition, strategy, params)``; :func:`run_sweep` runs
``fn(partition, strategy, params) -> row`` for each on a SparkSession and returns the rows in task
order.  ``fn`` defaults to ``replay.backtest.run_task``, imported inside the worker.  The task
function is the same pure function the sequential path calls, rows travel back pickled, so a
Spark run returns exactly ``[fn(*t) for t in tasks]`` (same floats bit for bit, same types).

How it runs, and why:

* **One task per sweep cell.**  ``sc.parallelize(cells, numSlices=len(cells))`` puts each cell in
  its own Spark partition; cells are ordered most expensive first (file size times a per-format
  factor) so the last task to start is a short one (longest-processing-time-first: two cores
  are not left with one long straggler).  The payload is a few hundred bytes per task; the task
  reads its data file itself, so nothing large crosses the JVM.  (``mapInArrow``/``applyInPandas``
  would need pandas, which PySpark 4.3 requires at >= 2.2 and not 3; the RDD path measured about
  50 ms of overhead per task, negligible against backtests of seconds.)  With ``on_row`` (the
  CLI's ``--out``, so that Ctrl-C keeps finished rows) each cell is its own single-task job,
  submitted by ``defaultParallelism`` threads from one queue in the same order (about 20 ms more
  per task on local[2]).
* **Compiled once per worker process.**  Python workers are reused across tasks
  (``spark.python.worker.reuse``), the generated program module stays imported, and
  ``NUMBA_CACHE_DIR``/``DDMS_CACHE_DIR`` are passed to the workers, so even a fresh worker
  loads machine code from the disk cache instead of compiling.  The workers import the installed
  package (the repository root is put on their ``PYTHONPATH``), never code shipped with
  ``addPyFile``, which would defeat numba's cache (its keys include the file path).
* **The right Python.**  ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` are set to
  ``sys.executable``; otherwise workers may start another interpreter without ddms.
* **Fast start.**  The JVM runs with ``-XX:+UseSerialGC -XX:TieredStopAtLevel=1`` (measured:
  a local[2] session in ~10 s instead of 17-30 s), UI and console progress bars off.  The session
  is kept in this module and reused by later sweeps (tests share one); :func:`stop_session` ends it.
* **Errors.**  A task that raises is reported as a :class:`~ddms.errors.ReplayError` naming the
  partition, the strategy, the parameters and the original error type and message (Spark's own
  multi-page Java trace is not shown).  Ctrl-C cancels the Spark job.
"""

from __future__ import annotations

import os
import pickle
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ddms.errors import ReplayError

__all__ = ["JVM_OPTIONS", "get_session", "run_sweep", "session_start_seconds", "stop_session"]

Task = tuple[str, str, dict]
JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
_REPO = str(Path(__file__).resolve().parents[1])
_COST = {".gz": 12.0, ".parquet": 0.5, ".csv": 1.0}   # relative replay cost per byte of file

_lock = threading.Lock()
_session: Any = None
_master: str | None = None


def _worker_env() -> dict[str, str]:
    """Variables the Python workers need: this interpreter, the caches, this package."""
    import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR in os.environ)

    env = {"PYSPARK_PYTHON": sys.executable, "NUMBA_CACHE_DIR": os.environ["NUMBA_CACHE_DIR"]}
    if os.environ.get("DDMS_CACHE_DIR"):
        env["DDMS_CACHE_DIR"] = os.environ["DDMS_CACHE_DIR"]
    path = [_REPO] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != _REPO]
    env["PYTHONPATH"] = os.pathsep.join(path)
    return env


def get_session(master: str = "local[*]", *, app_name: str = "ddms-sweep", conf: dict[str, str] | None = None):
    """The module's SparkSession on ``master`` (any Spark master URL), created on first use and
    reused afterwards; asking for another master stops the old session first (one SparkContext
    per process).  Cost: ~10 s to start a local JVM, nothing when reused."""
    global _session, _master
    with _lock:
        if _session is not None and _master == master and not _stopped(_session):
            return _session
        if _session is not None:
            _session.stop()
            _session = None
        env = _worker_env()
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession

        b = (SparkSession.builder.master(master).appName(app_name)
             .config("spark.driver.extraJavaOptions", JVM_OPTIONS)
             .config("spark.executor.extraJavaOptions", JVM_OPTIONS)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.python.worker.reuse", "true")
             .config("spark.task.maxFailures", "1")
             .config("spark.pyspark.python", sys.executable))
        for k, v in env.items():
            b = b.config(f"spark.executorEnv.{k}", v)
        for k, v in (conf or {}).items():
            b = b.config(k, v)
        try:
            s = b.getOrCreate()
        except Exception as e:  # noqa: BLE001 - Java/py4j start-up failures come in many types
            raise ReplayError(f"cannot start a Spark session: {type(e).__name__}: {str(e).splitlines()[0]}",
                              master) from e
        s.sparkContext.setLogLevel("ERROR")
        _session, _master = s, master
        return s


def _stopped(session) -> bool:
    sc = session.sparkContext
    return sc._jsc is None or sc._jsc.sc().isStopped()


def stop_session() -> None:
    """Stop the module's session (if any); the next sweep starts a new one."""
    global _session, _master
    with _lock:
        if _session is not None:
            _session.stop()
        _session, _master = None, None


def _cost(partition: str) -> float:
    try:
        size = os.path.getsize(partition)
    except OSError:
        return 0.0
    return size * _COST.get(os.path.splitext(partition)[1].lower(), 1.0)


def _check_tasks(tasks: Sequence) -> list[Task]:
    out = []
    for i, t in enumerate(tasks):
        if not (isinstance(t, tuple) and len(t) == 3 and isinstance(t[0], str) and isinstance(t[1], str)
                and isinstance(t[2], dict)):
            raise ReplayError(f"task {i} is not a (partition: str, strategy: str, params: dict) tuple: {t!r}",
                              "<sweep>")
        out.append(t)
    return out


def _run_cells(fn: Callable | None, cells, paths: Sequence[str] = ()) -> Any:
    """The worker side: put ``paths`` on ``sys.path`` (where the driver found the strategies'
    modules), run each ``(index, task)``; yield ``(index, pickled outcome)``."""
    import ddms  # noqa: F401  (NUMBA_CACHE_DIR before numba, if the environment did not set it)

    for p in reversed(paths):
        if p not in sys.path:
            sys.path.insert(0, p)
    if fn is None:
        from replay.backtest import run_task as fn
    for idx, (partition, strategy, params) in cells:
        try:
            row = fn(partition, strategy, params)
            out = ("ok", row)
        except Exception as e:  # noqa: BLE001 - every failure goes back to the driver with its task
            out = ("error", type(e).__name__, str(e), traceback.format_exc(limit=20))
        try:
            blob = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001
            blob = pickle.dumps(("error", "PicklingError", f"the task's row cannot be pickled: {e}", ""))
        yield idx, blob


def _portable(cells: list[Task]) -> tuple[list[Task], tuple[str, ...]]:
    """The tasks with each strategy reference made resolvable on a worker
    (:func:`strategies.portable`: a strategy file's absolute path, a module's or plugin's
    ``module:Class``) and the ``sys.path`` folders the workers need for them.  A name that is
    no strategy is left alone (a custom task function may mean something else by it)."""
    import strategies
    from strategies.api import StrategyError

    refs: dict[str, str] = {}
    paths: list[str] = []
    for _, strategy, _ in cells:
        if strategy in refs:
            continue
        try:
            refs[strategy], need = strategies.portable(strategy)
        except StrategyError:
            refs[strategy], need = strategy, ()
        paths += [p for p in need if p not in paths]
    return [(part, refs[strategy], params) for part, strategy, params in cells], tuple(paths)


def run_sweep(tasks: Sequence[Task], master: str = "local[*]", fn: Callable | None = None,
              progress: Callable[[int, int], None] | None = None,
              on_row: Callable[[int, dict], None] | None = None) -> list[dict]:
    """Run every task ``(partition, strategy, params)`` as its own Spark task and return the rows
    in task order, equal to ``[fn(*t) for t in tasks]``.  ``fn`` must be importable on the workers
    (a module of this package, or defined in ``__main__``); default ``replay.backtest.run_task``.
    A strategy may be any reference :func:`strategies.spec` takes: the workers get the file's
    absolute path or the module and the folder it was imported from.  ``progress(done, total)``
    is called from this thread about twice a second while tasks finish.  ``on_row(index, row)``,
    when given, receives each row in this thread as soon as its task finishes (so that a caller
    can keep finished rows when the sweep is interrupted); the tasks then run as one Spark job
    each, ``defaultParallelism`` at a time (about 20 ms more per task than one job for all,
    measured on local[2]).  Raises :class:`ReplayError` for a malformed task list or a failed
    task; Ctrl-C cancels the running jobs and re-raises."""
    cells = _check_tasks(tasks)
    if not cells:
        return []
    cells, paths = _portable(cells)
    spark = get_session(master)
    sc = spark.sparkContext
    order = sorted(range(len(cells)), key=lambda i: (-_cost(cells[i][0]), i))
    payload = [(i, cells[i]) for i in order]
    group = f"ddms-sweep-{uuid.uuid4().hex[:12]}"
    if on_row is not None:
        return _run_each(sc, payload, fn, paths, group, master, progress, on_row)
    rdd = sc.parallelize(payload, numSlices=len(payload)).mapPartitions(lambda it: _run_cells(fn, it, paths))
    box: dict[str, Any] = {}

    def job() -> None:
        sc.setJobGroup(group, f"ddms sweep of {len(cells)} tasks", interruptOnCancel=True)
        try:
            box["rows"] = rdd.collect()
        except BaseException as e:  # noqa: BLE001 - handed to the calling thread
            box["error"] = e

    worker = threading.Thread(target=job, name=group, daemon=True)
    worker.start()
    total, last = len(cells), -1
    try:
        while worker.is_alive():
            worker.join(0.5)
            if progress is not None:
                done = _completed(sc, group)
                if done != last:
                    last = done
                    progress(done, total)
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        worker.join(30)
        raise
    if "error" in box:
        _job_failed(box["error"], master)
    if progress is not None and last != total:
        progress(total, total)
    rows: list[Any] = [None] * total
    for idx, blob in box["rows"]:
        rows[idx] = _outcome(idx, blob, cells)
    missing = [i for i, r in enumerate(rows) if r is None]
    if missing:
        raise ReplayError(f"no result for tasks {missing[:10]}", master)
    return rows


def _job_failed(e: BaseException, master: str) -> None:
    raise ReplayError(f"Spark job failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                      master) from e


def _outcome(idx: int, blob: bytes, cells: list[Task]) -> dict:
    """The row a worker sent for task ``idx``, or the ReplayError of its failure."""
    out = pickle.loads(blob)
    if out[0] != "ok":
        partition, strategy, params = cells[idx]
        raise ReplayError(f"task {idx} (strategy {strategy}, params {params}) failed on a Spark worker: "
                          f"{out[1]}: {out[2]}", partition)
    return out[1]


def _run_each(sc, payload: list, fn: Callable | None, paths: tuple[str, ...], group: str, master: str,
              progress: Callable[[int, int], None] | None, on_row: Callable[[int, dict], None]) -> list[dict]:
    """:func:`run_sweep` with a row handed to ``on_row`` as each task finishes: one single-task
    Spark job per cell, submitted by ``defaultParallelism`` threads taking cells in ``payload``
    order (most expensive first) from a shared queue.  A failure or Ctrl-C cancels the group."""
    import queue

    cells = [c for _, c in sorted(payload)]
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for item in payload:
        todo.put(item)
    done_q: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()

    def submit() -> None:
        sc.setJobGroup(group, "ddms sweep, one task per job", interruptOnCancel=True)
        while not stop.is_set():
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                res = sc.parallelize([item], 1).mapPartitions(lambda it: _run_cells(fn, it, paths)).collect()
                done_q.put(("ok", res))
            except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                done_q.put(("error", e))
                return

    threads = [threading.Thread(target=submit, name=f"{group}-{k}", daemon=True)
               for k in range(max(1, min(sc.defaultParallelism, len(payload))))]
    for t in threads:
        t.start()
    total = len(payload)
    rows: list[Any] = [None] * total
    finished = 0
    try:
        while finished < total:
            try:
                kind, res = done_q.get(timeout=0.5)
            except queue.Empty:
                if not any(t.is_alive() for t in threads) and done_q.empty():
                    raise ReplayError(f"no result for {total - finished} task(s)", master) from None
                continue
            if kind == "error":
                _job_failed(res, master)
            for idx, blob in res:
                rows[idx] = _outcome(idx, blob, cells)
                finished += 1
                on_row(idx, rows[idx])
            if progress is not None:
                progress(finished, total)
    except BaseException:
        stop.set()
        sc.cancelJobGroup(group)
        for t in threads:
            t.join(30)
        raise
    return rows


def _completed(sc, group: str) -> int:
    """Tasks of ``group``'s jobs finished so far (Spark's status tracker; 0 before it knows)."""
    tracker = sc.statusTracker()
    done = 0
    for jid in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(jid)
        for sid in job.stageIds if job else ():
            st = tracker.getStageInfo(sid)
            if st is not None:
                done += st.numCompletedTasks
    return done


def session_start_seconds(master: str = "local[2]") -> float:
    """Seconds to start a fresh session on ``master`` (stops the current one; for the bench)."""
    stop_session()
    t0 = time.perf_counter()
    get_session(master)
    return time.perf_counter() - t0
