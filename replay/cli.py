"""`ddms backtest`: the command-line face of the replay and backtest code (issue 4).

    ddms backtest DATA... --strategy sobi --param k=0.1,0.25 --param threshold=0.2,0.22
                  [--spark MASTER] [--out DIR] [--no-plot]
    ddms backtest --demo [--demo-lines N] [--seed S]      generated data, no other input
    ddms backtest --list                                  strategies and their parameters

The sweep is the cartesian product of the ``--param`` value lists (each NAME=V1,V2,...) times
the data files, in the order given (partition-major).  Everything is validated before the first
run: unknown strategies or parameters, values out of range, missing or unreadable files.  Runs
are sequential in this process (one compile, then ~20 ms per engine) or, with ``--spark
MASTER``, one Spark task each through ``replay.spark.run_sweep``; both call
:func:`replay.backtest.run_task` and give identical summary rows.  Output: a progress bar on
stderr, a summary table on stdout, and with ``--out DIR`` the files of :mod:`replay.results`.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
from pathlib import Path

DEMO_LINES = 1_000_000
DEMO_GRID = {"sobi": ["threshold=0.0001,0.0002,0.0003"], "mm": ["half_spread=0.0005,0.001,0.002", "tick=100"]}
"""``--demo`` without ``--param``: a small sweep that suits the generated data (prices in 1/10000)."""
SHOWN = ("total_pnl", "realized_pnl", "n_trades", "win_rate", "sharpe", "sortino", "max_drawdown", "turnover",
         "fees", "max_position")


def parse_grid(specs: list[str], strategy: str) -> list[dict[str, float]]:
    """The parameter sets of ``--param NAME=V1,V2,...`` options (cartesian product, first option
    varying slowest), each validated against the strategy's declared parameters."""
    import strategies
    from strategies.api import StrategyError
    cls = strategies.spec(strategy)
    known = {p.name for p in cls.all_params()}
    axes: dict[str, list[float]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise StrategyError(f"--param {spec!r}: expected NAME=VALUE[,VALUE...]")
        if name not in known:
            raise StrategyError(f"--param {spec!r}: strategy {strategy} has no parameter {name!r} "
                                f"(parameters: {', '.join(p.name for p in cls.all_params())})")
        if name in axes:
            raise StrategyError(f"--param {spec!r}: {name} is given twice")
        vals = []
        for raw in values.split(","):
            try:
                vals.append(float(raw))
            except ValueError:
                raise StrategyError(f"--param {spec!r}: {raw.strip()!r} is not a number") from None
        axes[name] = vals
    grid = [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
    for g in grid:
        strategies.get(strategy, g)         # range checks now, not in the middle of a sweep
    return grid


def _check_data(paths: list[str]) -> None:
    """Open every data file's source (format detection reads <= 64 KiB) before any run."""
    from replay.backtest import SYNTHETIC, open_partition
    for p in paths:
        if not p.startswith(SYNTHETIC):
            open_partition(p)


def _check_out_dir(out: Path) -> None:
    """Fail before the sweep, not after it, when ``--out`` cannot hold the results: it is a
    file, or it (or the folder it would be created in) cannot be written.  Nothing is created
    here, so a sweep that fails later leaves no empty folder behind."""
    from ddms.errors import ReplayError
    from replay.convert_cli import check_writable

    if out.exists() and not out.is_dir():
        raise ReplayError("is a file, not a folder (--out names the folder that receives the results)", str(out))
    existing = Path(os.path.abspath(out))
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ReplayError(f"cannot create the folder: {existing} is a file", str(out))
    try:
        check_writable(str(existing / "summary.csv"))
    except ReplayError as e:
        raise ReplayError(e.reason, str(out)) from None


def _list_strategies() -> int:
    import strategies
    from strategies.api import RUN_PARAMS
    for name in strategies.names():
        cls = strategies.spec(name)
        print(f"{name}: {cls.summary}")
        for p in cls.params:
            print(f"    {p.name:<15} {p.default:<10g} {p.range():<14} {p.doc}")
    print("every strategy also takes:")
    for p in RUN_PARAMS:
        print(f"    {p.name:<15} {p.default:<10g} {p.range():<14} {p.doc}")
    return 0


def _fmt(v: object) -> str:
    """Numbers for the table: thousands separators, 4 significant digits below 1,000."""
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def summary_table(rows: list[dict[str, object]], varied: list[str], title: str):
    """A rich Table: the partition, the varied parameters, the main metrics; the best total PnL
    in bold."""
    from rich.table import Table

    from replay.sources import partition_name
    t = Table(title=title, title_style="bold")
    t.add_column("#", justify="right", style="dim")
    t.add_column("partition")
    for name in varied:
        t.add_column(name, justify="right", style="cyan")
    for m in SHOWN:
        t.add_column(m, justify="right")
    pnl = [r["total_pnl"] for r in rows]
    best = max(range(len(rows)), key=lambda i: -math.inf if math.isnan(pnl[i]) else pnl[i]) if rows else -1
    for i, r in enumerate(rows):
        part = str(r["partition"])
        label = part if part.startswith("synthetic:") else partition_name(part)
        t.add_row(str(i), label, *(_fmt(r[n]) for n in varied), *(_fmt(r[m]) for m in SHOWN),
                  style="bold" if i == best else None)
    return t


def cmd_backtest(args: argparse.Namespace) -> int:
    from rich.console import Console

    from ddms.errors import DdmsError
    from replay.backtest import run_backtest, summary_row

    if args.list:
        return _list_strategies()
    data = list(args.data)
    if args.demo:
        data = data or [f"synthetic:{args.demo_lines}:{args.seed}"]
    if not data:
        raise DdmsError("give DATA files to replay, or --demo for generated data (ddms backtest --help)")
    specs = args.param or (DEMO_GRID.get(args.strategy, []) if args.demo else [])
    grid = parse_grid(specs, args.strategy)
    _check_data(data)
    tasks = [(p, args.strategy, g) for p in data for g in grid]
    varied = [k for k in (grid[0] if grid else {}) if len({g[k] for g in grid}) > 1] or list(grid[0] if grid else [])
    err = Console(stderr=True)
    out = Path(args.out) if args.out else None
    if out is not None:
        _check_out_dir(out)
    if args.demo:
        _demo_intro(args, grid, data, len(tasks))
    t0 = time.perf_counter()
    results = []
    if args.spark:
        try:
            from replay.spark import run_sweep
        except ImportError as e:
            raise DdmsError(f"--spark needs replay/spark.py and pyspark ({e})") from None
        err.print(f"[bold]backtest:[/bold] {len(tasks)} run(s) on Spark {args.spark} ...")
        rows = _spark(run_sweep, tasks, args.spark, err)
    else:
        rows = []
        results = _sequential(tasks, err, run_backtest, keep=out is not None)
        rows = [summary_row(r) for r in results]
    seconds = time.perf_counter() - t0
    lines = sum(int(r["lines"]) for r in rows)
    title = (f"{args.strategy}: {len(rows)} run(s), {lines:,} lines in {seconds:.1f} s "
             f"({lines / seconds if seconds > 0 else math.inf:,.0f} lines/s"
             + (", compile time excluded)" if args.demo and not args.spark else ")"))
    console = Console()
    if not console.is_terminal:
        console = Console(width=240)      # a pipe or file gets every column unabridged
    console.print(summary_table(rows, varied, title))
    if out is not None:
        from replay.results import write_run, write_summary
        written = write_summary(rows, out)
        if args.spark:   # the workers return rows only: re-run the best locally for its files
            best = max(range(len(rows)), key=lambda i: _key(rows[i]))
            results = [(best, run_backtest(*tasks[best]))]
        else:
            results = list(enumerate(results))
        for i, r in results:
            written += write_run(r, out / "runs" / f"{i:03d}", plot=not args.no_plot)
        plots = [p for p in written if p.suffix == ".png"]
        err.print(f"[bold]backtest:[/bold] wrote {out / 'summary.csv'}, {out / 'summary.parquet'} and "
                  f"{len(results)} run director{'y' if len(results) == 1 else 'ies'} under {out / 'runs'}"
                  + (f" ({len(plots)} plot(s), e.g. {plots[0]})" if plots else
                     (" (no plots: pip install matplotlib)" if not args.no_plot else "")))
    return 0


DEMO_NEXT = """\
  Next: ddms sample-data data
        ddms backtest data/finance.csv data/binance/usdm_btcusdt.gz \\
            --strategy sobi --param threshold=0.00001,0.0001 \\
            --param order_size=1 --out sweep/
            (files instead of generated data; --out keeps fills and plots)
        ddms backtest --list     (strategies, parameters, defaults, ranges)"""


def _demo_intro(args: argparse.Namespace, grid: list[dict[str, float]], data: list[str], runs: int) -> None:
    """``--demo``: say on stderr what the demo runs and what to try next, then build the
    strategy's engine once, announcing a compile (a minute or two the first time) or a load from
    the cache, so the sweep's own timing (and its lines/s) leaves the compile out."""
    import strategies
    from replay.backtest import SYNTHETIC

    swept = {k: sorted({g[k] for g in grid}) for k in (grid[0] if grid else {})}
    sweep = ", ".join(f"{k}={','.join(f'{v:g}' for v in vs)}" for k, vs in swept.items() if len(vs) > 1)
    generated = all(p.startswith(SYNTHETIC) for p in data)
    what = (f"{args.demo_lines:,} lines of generated order flow (seed {args.seed}; an uncrossed book: limit orders "
            "rest at or behind the touch and marketable orders execute against the other side)"
            if generated else ", ".join(data))
    import textwrap
    intro = (f"demo: strategy {args.strategy} with simulated fills over {what}; {runs} run(s)"
             + (f" sweeping {sweep}" if sweep else "") + ".  Random executions fill resting quotes, so win rates "
             "here say nothing about an edge.")
    print(textwrap.fill(intro, 79, subsequent_indent="  ") + "\n" + DEMO_NEXT, file=sys.stderr, flush=True)
    if args.spark:
        return                            # the workers compile (once per worker process)
    from ddms.cli import build_engine  # the CLI's compile notice (imported here: no import cycle)
    strat = strategies.get(args.strategy, grid[0] if grid else {})
    build_engine(strat.program, Path(strat.program).name)


def _key(row: dict) -> float:
    v = row["total_pnl"]
    return -math.inf if isinstance(v, float) and math.isnan(v) else float(v)


def _sequential(tasks, err, run_backtest, keep: bool) -> list:
    """Run the tasks in this process with a progress bar (tasks done, lines of the current run)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from replay.backtest import SYNTHETIC
    out = []
    if not err.is_terminal:
        for i, (part, strat, params) in enumerate(tasks):
            t = time.perf_counter()
            r = run_backtest(part, strat, params)
            out.append(r if keep else _light(r))
            shown = " ".join(f"{k}={v:g}" for k, v in params.items())
            print(f"backtest: run {i + 1}/{len(tasks)} {part} {shown}: {r.lines:,} lines in "
                  f"{time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        return out
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[lines]}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("backtest", total=len(tasks), lines="")
        for i, (part, strat, params) in enumerate(tasks):
            name = part if part.startswith(SYNTHETIC) else Path(part).name
            desc = f"run {i + 1}: {name} " + " ".join(f"{k}={v:g}" for k, v in params.items())
            bar.update(task, description=desc[:60])

            def progress(lines: int, _task=task) -> None:
                bar.update(_task, lines=f"{lines:,} lines")
            r = run_backtest(part, strat, params, progress=progress)
            out.append(r if keep else _light(r))
            bar.advance(task)
    return out


def _light(r):
    """A result without its arrays (only its summary row is needed)."""
    from dataclasses import replace
    return replace(r, fills={}, equity={}, orders=())


def _spark(run_sweep, tasks, master: str, err) -> list[dict]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("spark"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task("spark", total=len(tasks))

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        try:
            return run_sweep(tasks, master=master, progress=progress)
        except TypeError:        # a run_sweep without the progress hook
            return run_sweep(tasks, master=master)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``backtest`` (and ``convert``, from :mod:`replay.convert_cli`) on the `ddms`
    parser."""
    p = sub.add_parser("backtest", help="replay data through a strategy with simulated fills; sweep parameters",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="*", metavar="DATA",
                   help="data files (order-book CSV, LOBSTER, Binance capture, Parquet) or synthetic:LINES[:SEED]")
    p.add_argument("--strategy", default="sobi", help="strategy name (--list shows them); default sobi")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="parameter values to sweep (repeat for more parameters; the sweep is their product)")
    p.add_argument("--spark", metavar="MASTER", help="run each (data, parameter set) as a Spark task, e.g. local[2]")
    p.add_argument("--out", metavar="DIR", help="write summary.csv/.parquet and per-run fills, equity and plots")
    p.add_argument("--no-plot", action="store_true", help="with --out: skip the plots")
    p.add_argument("--demo", action="store_true", help="run on generated order flow (no DATA needed)")
    p.add_argument("--demo-lines", type=int, default=DEMO_LINES, help="lines of generated data for --demo")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data for --demo")
    p.add_argument("--list", action="store_true", help="list the strategies and their parameters")
    p.set_defaults(func=cmd_backtest)
    if "convert" not in sub.choices:
        from replay.convert_cli import add_commands as add_convert
        add_convert(sub)
