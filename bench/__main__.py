"""``python -m bench [SECTION] [--quick] [--only NAME] [--lines N] [--json FILE]``: measure, then print one table.

Sections (``--only`` takes the name or the number):

1 throughput  VWAP and SOBI lines/s on big/finance.csv and a synthetic stream (bench/throughput.py)
2 kernel      a hand-written numba VWAP, engine/kernel ratio, agreement (bench/kernel.py)
3 duckdb      DuckDB re-running the VWAP SQL after every update (bench/duckdb_vwap.py)
4 depth       ns/line at 1k..1M resting orders, cost(1M)/cost(1k) (bench/depth.py)
5 callbacks   callbacks/s on a view that changes on nearly every line (bench/callbacks.py)
6 compile     Engine construction, cold and cached, in subprocesses (bench/compile_time.py)
7 sql         the finance queries compiled from SQL: lines/s on big and synthetic, x DBToaster,
              cost(1M resting)/cost(1k), compile time (bench/sql_finance.py)
8 spark       source readers and Parquet copies (events/s); a 48-task backtest sweep, Spark local[2]
              against sequential (bench/spark_sweep.py)
9 backtest    SOBI backtest with fills, lines/s per core on the synthetic stream (bench/backtest.py)
10 feeds      live ingestion from a local ddms serve-feed over websockets: level updates/s, messages/s,
              receive-to-callback latency p50/p99 at 100 and 1,000 depth messages/s (bench/feeds.py)
11 checkpoint  checkpoint/restore time and size at 1k..1M resting orders, snapshot cost, overhead of
              --checkpoint-every 100000 on a 10M-line run (bench/checkpoint.py)
12 ingest     every reader of ddms/io end to end: multi-symbol Binance, cryptofeed captures, the
              hftbacktest-style L2 capture, MBO (DBN) records/s (bench/ingest.py)
13 e2e        speed as a user sees it, through ``ddms run``: end to end beside apply only for every
              finance query (1M generated lines and big/finance.csv), x DBToaster from the end-to-end
              rate, a two-core model of each run from its stages' CPU times (bench/e2e_trace.py, robust to
              load), readers' share, cached start of every program against the floor, first result of a
              never-compiled view (bench/e2e.py; ``python -m bench e2e [--quick]``, a few minutes)
14 depth_sql  each cookbook view (examples/sql): cost class, ns/line at 1k..1M resting orders, growth,
              MIN/MAX view / its SUM twin (bench/depth_sql.py; DDMS_BENCH_VIEWS=stem,.. limits the views)
15 mbo        MBO (CME DBN) replay in events/s next to hftbacktest-style L2 (Binance capture): reader,
              apply only, end to end through a per-symbol view, CPU time (bench/mbo.py)

Every number in the table is measured by that run; throughput counts input lines.  Progress
goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
import traceback

from rich.console import Console
from rich.table import Table

from bench import (
    backtest,
    callbacks,
    checkpoint,
    compile_time,
    depth,
    depth_sql,
    duckdb_vwap,
    e2e,
    feeds,
    ingest,
    kernel,
    mbo,
    spark_sweep,
    sql_finance,
    throughput,
)
from bench.common import Row, Shared, Sizes, Skip

SECTIONS = {
    "throughput": throughput.run,
    "kernel": kernel.run,
    "duckdb": duckdb_vwap.run,
    "depth": depth.run,
    "callbacks": callbacks.run,
    "compile": compile_time.run,
    "sql": sql_finance.run,
    "spark": spark_sweep.run,
    "backtest": backtest.run,
    "feeds": feeds.run,
    "checkpoint": checkpoint.run,
    "ingest": ingest.run,
    "e2e": e2e.run,
    "depth_sql": depth_sql.run,
    "mbo": mbo.run,
}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if math.isinf(value) or math.isnan(value):
        return str(value)
    if unit in ("x", "s"):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def table(rows: list[Row], title: str) -> Table:
    t = Table(title=title, show_lines=False)
    for col, kw in (("section", {}), ("case", {}), ("value", {"justify": "right"}), ("unit", {}),
                    ("target", {}), ("ratio / pass / note", {})):
        t.add_column(col, **kw)
    last = None
    for r in rows:
        if last is not None and r.section != last:
            t.add_section()
        last = r.section
        verdict = r.verdict
        if verdict.startswith("PASS"):
            verdict = "[green]" + verdict + "[/green]"
        elif verdict.startswith(("FAIL", "error")):
            verdict = "[red]" + verdict + "[/red]"
        t.add_row(r.section, r.case, _fmt(r.value, r.unit), r.unit, r.target, verdict)
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("section", nargs="?", help="the section to run (as --only)")
    ap.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a minute or two")
    ap.add_argument("--only", metavar="NAME", help="run one section: " + ", ".join(
        f"{i} {n}" for i, n in enumerate(SECTIONS, 1)))
    ap.add_argument("--json", metavar="FILE", help="also save the rows as JSON")
    ap.add_argument("--lines", type=int, metavar="N",
                    help="lines of the synthetic stream (default 10M, 1M with --quick)")
    args = ap.parse_args(argv)
    names = list(SECTIONS)
    if args.section and args.only:
        ap.error("give the section once: as an argument or with --only")
    args.only = args.only or args.section
    if args.only:
        key = args.only.strip().lower()
        if key.isdigit() and 1 <= int(key) <= len(names):
            key = names[int(key) - 1]
        if key not in SECTIONS:
            ap.error(f"--only: no section {args.only!r} (sections: {', '.join(names)})")
        names = [key]
    err = Console(stderr=True)
    sizes = Sizes.make(args.quick)
    if args.lines is not None:
        if args.lines < 1:
            ap.error("--lines must be >= 1")
        sizes = dataclasses.replace(sizes, synth_lines=args.lines)
    sh = Shared(sizes)
    rows: list[Row] = []
    t_all = time.perf_counter()
    for name in names:
        err.print(f"[bold]bench:[/bold] section {name} ...")
        t0 = time.perf_counter()
        try:
            got = SECTIONS[name](sh)
        except Skip as e:
            got = [Row(name, "(whole section)", None, "", verdict=f"skipped: {e}")]
        except Exception as e:  # one broken section must not hide the others' numbers
            traceback.print_exc()
            got = [Row(name, "(whole section)", None, "", verdict=f"error: {type(e).__name__}: {e}")]
        rows.extend(got)
        err.print(f"[bold]bench:[/bold] section {name} done in {time.perf_counter() - t0:.1f} s")
    mode = "quick" if args.quick else "full"
    title = f"ddms bench ({mode}, {time.perf_counter() - t_all:.0f} s)"
    Console(width=200).print(table(rows, title))
    if args.json:
        with open(args.json, "w") as f:
            out = [{**r.__dict__, "value": r.value if r.value is None or math.isfinite(r.value) else None}
                   for r in rows]
            json.dump({"mode": mode, "seconds": time.perf_counter() - t_all, "rows": out}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
