"""Section 8: replay sources and Spark sweeps.

Readers: events/s of every source format (order-book CSV big/finance.csv, a LOBSTER message file
made from the same lines, both Binance captures) and of their Parquet copies (``ddms convert``),
each through :class:`ddms.io.sources.Source` (best of 3).

Sweep: the backtest sweep of issue 4 -- big/finance.csv and both Binance captures x 20 parameter
sets x two strategies (SOBI, market maker), 120 tasks of ``replay.backtest.run_task``, sized so
that the sequential run takes over a minute (48 tasks took 69 s on an earlier machine, 29 s on a
faster one) -- run
sequentially in this process (compiled code warm) and on a fresh Spark ``local[2]`` session
(workers start cold and load the compiled code from the disk cache); the rows must be identical.
Reported: session start, both wall times, the speedup (target >= 1.6x), and how many cores the
machine actually gave (two busy processes against one, before and after): on a machine shared
with other work the speedup cannot exceed that.  ``--quick`` runs a
12-task sweep instead.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from bench.common import FINANCE_BIG, SHARED, Row, Shared, Skip

SECTION = "8 spark"
BINANCE = SHARED / "data" / "binance"
CAPTURES = (BINANCE / "spot_btcusdt_20240808.gz", BINANCE / "usdm_btcusdt_20240808.gz")
_LOBSTER_TYPE = {b"B": (b"1", b"1"), b"S": (b"1", b"-1"), b"E": (b"4", b"1"), b"F": (b"3", b"1"), b"D": (b"3", b"1")}


def lobster_from_orderbook(src: Path, dst: Path) -> int:
    """Write the order-book lines of ``src`` as LOBSTER messages (B/S submit, E execution, F/D
    delete; the reader takes book and price of 2/3/4 from the resting order).  Returns lines."""
    n = 0
    with open(src, "rb") as f, open(dst, "wb") as out:
        for line in f:
            t, oid, act, vol, px = line.rstrip(b"\r\n").split(b",")
            typ = _LOBSTER_TYPE.get(act)
            if typ is None:
                continue
            out.write(b",".join((t, typ[0], oid, vol, px, typ[1])) + b"\n")
            n += 1
    return n


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x ^= i * i
    return x


def available_parallelism(n: int = 6_000_000) -> float:
    """How many cores this machine gives us right now: 2 x (time of one busy process) / (wall
    time of two at once).  2.0 on two idle cores; less when other work shares them."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        pool.apply(_spin, (1000,))
        t0 = time.perf_counter()
        pool.apply(_spin, (n,))
        one = time.perf_counter() - t0
    with ctx.Pool(2) as pool:
        pool.map(_spin, [1000, 1000])
        t0 = time.perf_counter()
        pool.map(_spin, [n, n], chunksize=1)
        two = time.perf_counter() - t0
    return 2 * one / two


def _read_rate(path: str, reps: int) -> tuple[float, int]:
    """Best events/s of ``reps`` reads (at least 1 s of reading when ``reps`` > 1: reads of a
    few ms on a shared machine need many tries)."""
    from ddms.io.sources import open_source
    src = open_source(path)
    best, events, spent, n = float("inf"), 0, 0.0, 0
    while n < reps or (reps > 1 and spent < 1.0 and n < 50):
        n += 1
        t0 = time.perf_counter()
        events = sum(len(b) for b in src)
        took = time.perf_counter() - t0
        best, spent = min(best, took), spent + took
    return events / best, events


def _readers(tmp: Path, reps: int) -> list[Row]:
    from ddms.io.columnar import convert
    from ddms.io.sources import open_source

    rows: list[Row] = []
    lob = tmp / "big_message.csv"
    lobster_from_orderbook(FINANCE_BIG, lob)
    files = [("order book CSV big", str(FINANCE_BIG)), ("LOBSTER (from big)", str(lob))]
    files += [(f"Binance {p.name.split('_')[0]}", str(p)) for p in CAPTURES if p.exists()]
    for label, path in files:
        _read_rate(path, 1)   # warm: compiled kernels loaded, file in the page cache
        r_src, events = _read_rate(path, reps)
        pq = tmp / (Path(path).name.split(".")[0] + ".parquet")
        t0 = time.perf_counter()
        convert(open_source(path), pq)
        conv = time.perf_counter() - t0
        _read_rate(str(pq), 1)
        r_pq, ev_pq = _read_rate(str(pq), reps)
        assert ev_pq == events
        rows.append(Row(SECTION, f"read {label} ({events:,} events)", r_src, "events/s"))
        rows.append(Row(SECTION, f"read its Parquet copy ({os.path.getsize(pq) / 1e6:.1f} MB)", r_pq, "events/s",
                        verdict=f"{r_pq / r_src:.1f}x the original; convert {conv:.2f} s"))
    return rows


def sweep_tasks(quick: bool) -> list[tuple[str, str, dict]]:
    """The benchmark sweep: partitions x 20 parameter sets x strategies (quick: 2 x 3 x 2)."""
    parts = [str(FINANCE_BIG)] + [str(p) for p in CAPTURES if p.exists()]
    # position limit and mm size as the README's row was measured (the defaults before 1 lot, 5 max)
    sobi = [{"k": k, "threshold": th, "order_size": q, "position_limit": 1000.0} for k in (0.05, 0.1, 0.25, 0.5, 0.75)
            for th in (0.0005, 0.001)
            for q in (50.0, 100.0)]
    mm = [{"half_spread": h, "requote": rq, "skew": s, "order_size": 100.0, "position_limit": 1000.0}
          for h in (0.0005, 0.001) for rq in (0.0002, 0.0005) for s in (0.0, 0.25, 0.5, 0.75, 1.0)]
    if quick:
        parts, sobi, mm = parts[:2], sobi[:3], mm[:3]
    return [(p, name, g) for name, grid in (("sobi", sobi), ("mm", mm)) for p in parts for g in grid]


def schedule_makespan(tasks, seconds: list[float], workers: int) -> float:
    """Wall time of running tasks of the given durations on ``workers`` workers in the order
    :func:`replay.spark.run_sweep` submits them (most expensive file first), each task going to
    the first free worker -- what Spark's scheduler does with one task per partition."""
    from replay.spark import _cost
    order = sorted(range(len(tasks)), key=lambda i: (-_cost(tasks[i][0]), i))
    free = [0.0] * workers
    for i in order:
        w = free.index(min(free))
        free[w] += seconds[i]
    return max(free)


def _sweep(quick: bool) -> list[Row]:
    from replay import spark
    from replay.backtest import identical, run_task

    tasks = sweep_tasks(quick)
    if not CAPTURES[0].exists():
        raise Skip("the Binance captures are not available")
    cores_before = available_parallelism()
    for strat in ("sobi", "mm"):   # compiled code warm for the sequential run
        run_task(str(SHARED / "data" / "orderbook" / "tiny" / "finance.csv"), strat, {})
    print(f"bench: sequential sweep of {len(tasks)} tasks ...", file=sys.stderr, flush=True)
    want, took = [], []
    for t in tasks:
        t1 = time.perf_counter()
        want.append(run_task(*t))
        took.append(time.perf_counter() - t1)
    seq = sum(took)
    bound = seq / schedule_makespan(tasks, took, 2)
    start = spark.session_start_seconds("local[2]")
    print(f"bench: Spark local[2] sweep of {len(tasks)} tasks ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    got = spark.run_sweep(tasks, master="local[2]")
    par = time.perf_counter() - t0
    same = identical(got, want)
    speedup = seq / par
    cores = (cores_before + available_parallelism()) / 2
    rows = [
        Row(SECTION, "cores available (2 busy processes vs 1)", cores, "x", "2 on an idle machine",
            "other work shares the cores" if cores < 1.8 else ""),
        Row(SECTION, "Spark local[2] session start", start, "s", "~10 s"),
        Row(SECTION, f"sweep of {len(tasks)} tasks, sequential", seq, "s", ">= 60 s" if not quick else ""),
        Row(SECTION, f"sweep of {len(tasks)} tasks, Spark local[2]", par, "s", "",
            "PASS rows identical" if same else "FAIL rows differ"),
        Row(SECTION, "2-worker schedule of the sequential task times", bound, "x", "",
            "the speedup two idle cores would allow (Spark overhead not included)"),
        Row(SECTION, "Spark speedup over sequential", speedup, "x", ">= 1.6x",
            ("PASS" if speedup >= 1.6 else "FAIL") + f" ({os.cpu_count()} cores; {speedup / cores:.0%} of "
            f"the {cores:.2f}x available)"),
    ]
    spark.stop_session()
    return rows


def run(sh: Shared) -> list[Row]:
    if not FINANCE_BIG.exists():
        raise Skip(f"{FINANCE_BIG} not found")
    with tempfile.TemporaryDirectory(prefix="ddms-bench-") as tmp:
        rows = _readers(Path(tmp), 1 if sh.sizes.quick else 3)
    return rows + _sweep(sh.sizes.quick)
