"""``ddms backtest``: replay data through a strategy with simulated fills, and sweep its parameters.

The sweep is the cartesian product of the ``--param`` value lists times the data files
(partition-major).  Everything is checked before the first run (strategy, parameters, ranges,
data files, the output folder); the strategy's program is compiled (or loaded from the cache)
once, saying which.  Runs are sequential in this process or one Spark task each
(:func:`replay.spark.run_sweep`); both call :func:`replay.backtest.run_task` and give identical
rows.  With ``--out`` each finished run is written as it finishes (:class:`_Saver`), so Ctrl-C
keeps them.  The console table keeps the columns that fit the terminal (:mod:`replay.table`);
``--json``/``--csv`` print every column.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

DEMO_LINES = 1_000_000
DEMO_GRID = {"sobi": ["threshold=0.0001,0.0002,0.0003"], "mm": ["half_spread=0.0005,0.001,0.002", "tick=100"]}
"""``--demo`` without ``--param``: a small sweep that suits the generated data (prices in 1/10000)."""
DESCRIPTION = """\
Replay market data through a trading strategy with simulated fills, and sweep
its parameters.

examples:
  ddms backtest --demo             generated data, a 3-point threshold sweep
  ddms backtest --list             strategies, parameters, defaults, ranges
  ddms backtest DATA... --param k=0.1,0.25 --param threshold=0.001,0.002 \\
      --out DIR
  ddms backtest DATA --strategy examples/strategies/imbalance.py:Imbalance
  ddms backtest DATA --strategy mypackage.module:MyStrategy --spark 'local[2]'

DATA: order-book CSV, LOBSTER, Binance captures (.gz), cryptofeed captures,
Databento DBN (MBO), tardis CSV (FILE#SYMBOL picks one symbol of a file that
holds several), Parquet files from ddms convert, or synthetic:LINES[:SEED].
The sweep is every combination of the --param values, on every file.
--strategy takes a name from --list (built in or installed under the
ddms.strategies entry point group), package.module:Class, or
path/to/file.py:Class.  Ctrl-C stops the sweep; with --out, the runs finished
so far are kept.
"""


def parse_grid(specs: list[str], strategy: str, shown: str | None = None) -> list[dict[str, float]]:
    """The parameter sets of ``--param NAME=V1,V2,...`` options (cartesian product, first option
    varying slowest), each validated against the strategy's declared parameters.  ``shown``:
    how errors name the strategy (default ``strategy``)."""
    import strategies
    from strategies.api import StrategyError
    cls = strategies.spec(strategy)
    strategy = shown or strategy
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
        cls(g)                              # range checks now, not in the middle of a sweep
    return grid


def _check_data(paths: list[str], skip_bad: bool = False) -> None:
    """Open every data file's source (format detection reads <= 64 KiB) before any run."""
    from replay.backtest import SYNTHETIC, open_partition
    for p in paths:
        if not p.startswith(SYNTHETIC):
            open_partition(p, skip_bad=skip_bad)


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
    """Every strategy by name (built in, then installed entry points; one that fails to load is
    listed with its error), its parameters with defaults and ranges, then the run parameters."""
    import strategies
    from strategies.api import RUN_PARAMS, StrategyError
    for name in strategies.names():
        try:
            cls = strategies.spec(name)
        except StrategyError as e:
            print(f"{name}: cannot be loaded: {e}")
            continue
        where = "" if name in strategies.BUILTIN else f" [{strategies.origin(name)}]"
        print(f"{name}: {cls.summary}{where}")
        for p in cls.params:
            print(f"    {p.name:<15} {p.default:<10g} {p.range():<14} {p.doc}")
    print("every strategy also takes:")
    for p in RUN_PARAMS:
        print(f"    {p.name:<15} {p.default:<10g} {p.range():<14} {p.doc}")
    return 0


def summary_table(rows: list[dict[str, object]], varied: list[str], title: str, width: int | None = None):
    """A rich Table of the runs: the run number, the partition, the varied parameters, then the
    metrics of :data:`replay.table.METRIC_PRIORITY` that fit in ``width`` characters (None: all);
    the best total PnL in bold.  A caption names the columns left out and where to find them."""
    from rich.table import Table

    from ddms.io.sources import partition_name
    from replay.table import METRIC_PRIORITY, fit_columns, fmt

    header = ["#", "partition", *varied, *METRIC_PRIORITY]
    cells = []
    for i, r in enumerate(rows):
        part = str(r["partition"])
        label = part if part.startswith("synthetic:") else partition_name(part)
        cells.append([str(i), label, *(fmt(r[n]) for n in varied), *(fmt(r[m]) for m in METRIC_PRIORITY)])
    shown = fit_columns(header, cells, width, 2 + len(varied)) if width else list(range(len(header)))
    left = [header[j] for j in range(len(header)) if j not in shown]
    caption = (f"not shown at this width: {', '.join(left)} (--json or --csv print every column)" if left else None)
    t = Table(title=title, title_style="bold", caption=caption, caption_justify="left")
    for j in shown:
        name = header[j]
        if name == "#":
            t.add_column(name, justify="right", style="dim")
        elif name == "partition":
            t.add_column(name, overflow="fold")
        else:
            t.add_column(name, justify="right", style="cyan" if name in varied else None)
    pnl = [r["total_pnl"] for r in rows]
    best = max(range(len(rows)), key=lambda i: -math.inf if math.isnan(pnl[i]) else pnl[i]) if rows else -1
    for i, row in enumerate(cells):
        t.add_row(*(row[j] for j in shown), style="bold" if i == best else None)
    return t


def print_rows(rows: list[dict[str, object]], how: str) -> None:
    """Every column of every summary row on stdout: ``json`` (one object per line) or ``csv``."""
    if how == "json":
        for r in rows:
            print(json.dumps({k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                              for k, v in r.items()}))
        return
    import csv
    w = csv.writer(sys.stdout, lineterminator="\n")
    if rows:
        w.writerow(list(rows[0]))
    for r in rows:
        w.writerow(["" if isinstance(v, float) and math.isnan(v) else v for v in r.values()])


class _Saver:
    """Writes a sweep's results under ``--out`` as each run finishes, so that an interrupted
    sweep keeps every finished run: the run's files go to ``runs/.NNN.partial`` and are renamed
    to ``runs/NNN`` when complete, then ``summary.csv``/``.parquet`` are rewritten (through
    temporary files renamed over them) with the rows of the finished runs.  A run interrupted
    while being written leaves nothing.  Cost per run: its files plus the summary (O(runs))."""

    def __init__(self, out: Path, plot: bool) -> None:
        self.out, self.plot = out, plot
        self._rows: dict[int, dict[str, object]] = {}
        self.runs: list[int] = []
        self.written: list[Path] = []
        self._summary_rows = 0

    @property
    def rows(self) -> list[dict[str, object]]:
        """The summary rows of the finished runs, in task order."""
        return [self._rows[i] for i in sorted(self._rows)]

    def save(self, i: int, result, *, row: bool = True) -> None:
        """Write run ``i``'s files; with ``row``, add its summary row and rewrite the summary."""
        import shutil

        from replay.backtest import summary_row
        from replay.results import write_run
        runs = self.out / "runs"
        tmp, final = runs / f".{i:03d}.partial", runs / f"{i:03d}"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            files = write_run(result, tmp, plot=self.plot)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.written += [final / f.relative_to(tmp) for f in files]
        self.runs.append(i)
        if row:
            self.add_row(i, summary_row(result))

    def add_row(self, i: int, row: dict[str, object]) -> None:
        """Task ``i``'s row (a Spark worker's come without run files), then the summary."""
        self._rows[i] = row
        self.write_summary()

    def write_summary(self) -> None:
        """The summary of the finished runs, each file replaced whole (never half written)."""
        import shutil

        from replay.results import write_summary
        if not self._rows or self._summary_rows == len(self._rows):
            return
        tmp = self.out / ".summary.partial"
        try:
            for f in write_summary(self.rows, tmp):
                os.replace(f, self.out / f.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._summary_rows = len(self._rows)


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
    import strategies
    strategy = strategies.portable(args.strategy)[0]   # a file's path made absolute (Spark workers)
    specs = args.param or (DEMO_GRID.get(args.strategy, []) if args.demo else [])
    grid = parse_grid(specs, strategy, shown=args.strategy)
    from replay.backtest import symbol_partitions
    data = symbol_partitions(data, args.skip_bad)  # a multi-symbol file: one partition (position, metrics) per symbol
    _check_data(data, args.skip_bad)
    tasks = [(p, strategy, g) for p in data for g in grid]
    varied = [k for k in (grid[0] if grid else {}) if len({g[k] for g in grid}) > 1] or list(grid[0] if grid else [])
    err = Console(stderr=True)
    out = Path(args.out) if args.out else None
    if out is not None:
        _check_out_dir(out)
    if args.demo:
        _demo_intro(args, grid, data, len(tasks))
    compile_seconds = _build(strategy, grid[0] if grid else {})
    t0 = time.perf_counter()
    saver = _Saver(out, plot=not args.no_plot) if out is not None else None
    rows: list[dict[str, object]] = []
    interrupted = False
    run_seconds = 0.0
    try:
        if args.spark:
            try:
                from replay.spark import run_sweep
            except ImportError as e:
                raise DdmsError(f"--spark needs replay/spark.py and pyspark ({e})") from None
            err.print(f"[bold]backtest:[/bold] {len(tasks)} run(s) on Spark {args.spark} ...")
            rows = _spark(run_sweep, tasks, args.spark, err, args.skip_bad,
                          on_row=saver.add_row if saver is not None else None)
        else:
            for r in _sequential(tasks, err, run_backtest, args.skip_bad):
                if saver is not None:
                    saver.save(len(rows), r)
                rows.append(summary_row(r))
                run_seconds += r.seconds
    except KeyboardInterrupt:
        interrupted = True
        if saver is not None:
            saver.write_summary()       # the runs whose folders (or Spark rows) are complete, and only those
            rows = saver.rows
    seconds = run_seconds if not args.spark else time.perf_counter() - t0
    lines = sum(int(r["lines"]) for r in rows)
    rate = lines / seconds if seconds > 0 else math.inf
    how = "replay" if not args.spark else f"on Spark {args.spark} (session start included)"
    title = (f"{strategies.spec(strategy).name}: {len(rows)} run(s), {lines:,} lines in {seconds:.2f} s {how} "
             f"({rate:,.0f} lines/s; compile time excluded: {compile_seconds:.2f} s to compile or load)")
    if args.json or args.csv:
        print_rows(rows, "json" if args.json else "csv")
        print(f"backtest: {title}", file=sys.stderr)
    elif rows:
        width = _table_width()
        console = Console(width=width or 100_000)
        console.print(summary_table(rows, varied, title, width))
    if saver is not None and not args.spark:
        plots = [p for p in saver.written if p.suffix == ".png"]
        if saver.rows:
            err.print(f"[bold]backtest:[/bold] wrote {out / 'summary.csv'}, {out / 'summary.parquet'} and "
                      f"{len(saver.runs)} run director{'y' if len(saver.runs) == 1 else 'ies'} under {out / 'runs'}"
                      + (f" ({len(plots)} plot(s), e.g. {plots[0]})" if plots else
                         (" (no plots: pip install matplotlib)" if not args.no_plot else "")))
    elif saver is not None and rows and not interrupted:
        # the workers return rows only: re-run the best locally for its files
        best = max(range(len(rows)), key=lambda i: _key(rows[i]))
        saver.save(best, run_backtest(*tasks[best], skip_bad=args.skip_bad), row=False)
        err.print(f"[bold]backtest:[/bold] wrote {out / 'summary.csv'}, {out / 'summary.parquet'} and the best "
                  f"run's files under {out / 'runs' / f'{best:03d}'}")
    if interrupted:
        kept = (f"; kept {len(rows)} finished run(s) in {out}" if out is not None else
                "; nothing kept (with --out DIR the finished runs are kept)" if args.spark else
                "; the table above shows the finished ones (--out DIR would have kept their files)")
        print(f"ddms: interrupted after {len(rows)} of {len(tasks)} run(s){kept}", file=sys.stderr)
        return 130
    return 0


def _table_width() -> int | None:
    """The width the console table must fit: the terminal's, or ``$COLUMNS`` when set; None
    (every column) for a pipe or a file."""
    import shutil
    if os.environ.get("COLUMNS", "").isdigit():
        return int(os.environ["COLUMNS"])
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


def _build(strategy: str, params: dict) -> float:
    """Compile (or load from the cache) the strategy's program once, before the runs, saying
    which on stderr (``ddms run``'s notice), then warm up the fill simulator and the parser on a
    few generated lines: the runs then build their engines in ~20 ms, and the throughput
    reported leaves all of this out.  Returns the seconds it took."""
    import strategies
    from ddms.cli import build_engine
    from replay.backtest import SYNTHETIC, run_backtest
    strat = strategies.get(strategy, params)
    t0 = time.perf_counter()
    program = getattr(strat, "program", None)
    if program is not None:
        build_engine(program, f"{Path(program).name} (strategy {strat.name})")
    run_backtest(f"{SYNTHETIC}2000", strat)
    return time.perf_counter() - t0


DEMO_NEXT = """\
  Next: ddms sample-data data
        ddms backtest data/finance.csv data/binance/usdm_btcusdt.gz \\
            --strategy sobi --param threshold=0.00001,0.0001 \\
            --param order_size=1 --out sweep/
            (files instead of generated data; --out keeps fills and plots)
        ddms backtest --list     (strategies, parameters, defaults, ranges)"""


def _demo_intro(args: argparse.Namespace, grid: list[dict[str, float]], data: list[str], runs: int) -> None:
    """``--demo``: say on stderr what the demo runs and what to try next (:func:`_build` then
    announces the compile or the load from the cache)."""
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


def _key(row: dict) -> float:
    v = row["total_pnl"]
    return -math.inf if isinstance(v, float) and math.isnan(v) else float(v)


def _sequential(tasks, err, run_backtest, skip_bad: bool) -> Iterator:
    """Run the tasks in this process, yielding each result as it finishes, with a progress bar
    (tasks done, lines of the current run) on a terminal, else a line per run on stderr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from replay.backtest import SYNTHETIC
    if not err.is_terminal:
        for i, (part, strat, params) in enumerate(tasks):
            t = time.perf_counter()
            r = run_backtest(part, strat, params, skip_bad=skip_bad)
            shown = " ".join(f"{k}={v:g}" for k, v in params.items())
            print(f"backtest: run {i + 1}/{len(tasks)} {part} {shown}: {r.lines:,} lines in "
                  f"{time.perf_counter() - t:.1f} s" + (f", {r.skipped:,} bad lines skipped" if r.skipped else ""),
                  file=sys.stderr, flush=True)
            yield r
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[lines]}"), TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("backtest", total=len(tasks), lines="")
        for i, (part, strat, params) in enumerate(tasks):
            name = part if part.startswith(SYNTHETIC) else Path(part).name
            desc = f"run {i + 1}: {name} " + " ".join(f"{k}={v:g}" for k, v in params.items())
            bar.update(task, description=desc[:60])

            def progress(lines: int, _task=task) -> None:
                bar.update(_task, lines=f"{lines:,} lines")
            r = run_backtest(part, strat, params, progress=progress, skip_bad=skip_bad)
            bar.advance(task)
            yield r


def _spark(run_sweep, tasks, master: str, err, skip_bad: bool, on_row=None) -> list[dict]:
    """The rows of a Spark sweep, with a progress bar; ``on_row(i, row)`` (with ``--out``) gets
    each row as its task finishes, so that Ctrl-C keeps the finished ones."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("spark"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task("spark", total=len(tasks))

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
        fn = None
        if skip_bad:
            from functools import partial

            from replay.backtest import run_task
            fn = partial(run_task, skip_bad=True)
        return run_sweep(tasks, master=master, fn=fn, progress=progress, on_row=on_row)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``backtest`` (and ``convert``, from :mod:`replay.convert_cli`) on the `ddms`
    parser."""
    p = sub.add_parser("backtest", help="replay data through a strategy with simulated fills; sweep parameters",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="*", metavar="DATA",
                   help="data files (any format ddms convert reads) or synthetic:LINES[:SEED]")
    p.add_argument("--strategy", default="sobi",
                   help="a strategy name (--list shows them), package.module:Class or path/to/file.py:Class; "
                        "default sobi")
    p.add_argument("--param", action="append", default=[], metavar="NAME=V1,V2",
                   help="parameter values to sweep (repeat for more parameters; the sweep is their product)")
    p.add_argument("--spark", metavar="MASTER", help="run each (data, parameter set) as a Spark task, e.g. local[2]")
    p.add_argument("--out", metavar="DIR", help="write summary.csv/.parquet and per-run fills, equity and plots")
    p.add_argument("--no-plot", action="store_true", help="with --out: skip the plots")
    p.add_argument("--demo", action="store_true", help="run on generated order flow (no DATA needed)")
    p.add_argument("--demo-lines", type=int, default=DEMO_LINES, help="lines of generated data for --demo")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated data for --demo")
    p.add_argument("--list", action="store_true", help="list the strategies and their parameters")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad input lines instead of stopping")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print every column of the summary as JSON lines")
    fmt.add_argument("--csv", action="store_true", help="print every column of the summary as CSV")
    p.set_defaults(func=cmd_backtest)
    if "convert" not in sub.choices:
        from replay.convert_cli import add_commands as add_convert
        add_convert(sub)
