"""The ``ddms`` command line.

    ddms run [PROGRAM.m3|QUERY.sql] [--data FILE] [--every N] [--json] [--skip-bad]
    ddms compile PROGRAM.m3|QUERY.sql [--print-after-all] [--time-passes]
                                       M3 text, per-map storage and the access plan of every statement

``ddms run`` with no program runs the SOBI demo on built-in synthetic order flow.  The feed
commands (``serve-feed``, ``monitor``) live in :mod:`ddms.feeds.cli`, the replay commands
(``backtest``, ``convert``) in :mod:`replay.cli`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ddms.errors import DdmsError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "m3"


def _jsonable(x):
    """``x`` as JSON can carry it: NaN and the infinities have no JSON spelling (``json.dumps``
    would print ``NaN``/``Infinity``, which JSON parsers reject), so they print as ``null``."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def _print_views(position: int, snapshot: dict, as_json: bool) -> None:
    views = {k: _jsonable(v) for k, v in snapshot.items()}
    if as_json:
        print(json.dumps({"line": position, "views": views}), flush=True)
    else:
        parts = ", ".join(f"{k}={v if not isinstance(v, list) else f'<{len(v)} rows>'}" for k, v in views.items())
        print(f"line {position}: {parts}", flush=True)


BAR_DELAY = 0.5
"""Seconds a run lasts before :func:`_progress_chunks` draws its bar (the bar is transient)."""


def _progress_chunks(chunks: Iterator[bytes], total: int | None, label: str) -> Iterator[bytes]:
    """Pass chunks through, drawing a progress bar on stderr (rich) when stderr is a terminal,
    else a line every few seconds.  Nothing is drawn before the run has lasted :data:`BAR_DELAY`
    seconds (the transient bar would only flash), so that short runs do not import rich (~0.1 s
    of start time)."""
    chunks = iter(chunks)
    done, start = 0, time.monotonic()
    last = start
    for c in chunks:
        yield c
        done += len(c)
        if time.monotonic() - start > BAR_DELAY:
            break
    else:
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
    console = Console(stderr=True)
    if console.is_terminal:
        with Progress(TextColumn(label), BarColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task(label, total=total, completed=done)
            for c in chunks:
                yield c
                bar.advance(task, len(c))
        return
    while True:
        if time.monotonic() - last > 5:
            last = time.monotonic()
            pct = f" ({100 * done / total:.0f}%)" if total else ""
            print(f"{label}: {done / 1e6:.0f} MB{pct}", file=sys.stderr, flush=True)
        c = next(chunks, None)
        if c is None:
            return
        yield c
        done += len(c)


def _at_least(minimum: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``minimum``, so that a negative ``--every`` or an
    empty demo is a usage error instead of a run that silently does something else."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {v}")
        return v
    return parse


def _file_chunks(path: Path, size: int = 1 << 22) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def build_engine(program, name: str):
    """The Engine of ``program`` (a Program or a path), saying on stderr before the wait whether
    it compiles (a minute or more) or loads from numba's cache (well under a second), and after
    it how long it took."""
    from ddms.runtime.engine import Engine

    cached = []

    def announce(hit: bool) -> None:
        cached.append(hit)
        if hit:
            print(f"loading {name}, compiled before, from the cache ...", file=sys.stderr, flush=True)
        else:
            print(f"compiling {name} with numba (the first time takes a minute or two; cached afterwards) ...",
                  file=sys.stderr, flush=True)

    engine = Engine(program, on_build=announce)
    print(f"{'loaded' if cached[0] else 'compiled'} {name} in {engine.compile_seconds:.2f} s", file=sys.stderr)
    return engine


def cmd_run(args: argparse.Namespace) -> int:
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import load_program

    # read_source (behind both readers) names a missing, directory or non-UTF-8 program file
    program = Path(args.program) if args.program else EXAMPLES / "sobi.m3"
    if program.suffix == ".sql":
        from ddms.compiler import compile_sql_file
        sql = compile_sql_file(program)
        print(f"SQL -> M3 in {sql.compile_seconds:.3f} s ({len(sql.program.maps)} maps)", file=sys.stderr)
        target = sql.program
    else:
        target = load_program(program)
    demo = args.program is None and args.data is None
    inputs = None
    if not demo:
        # the data files are checked (present, a file, text) here, before the numba compile
        from ddms.streams.inputs import open_program_input
        data = Path(args.data) if args.data else None
        inputs = open_program_input(target, program.parent, data=data, skip_bad=args.skip_bad)
    engine = build_engine(target, program.name)
    if inputs is None:
        from ddms.streams.orderbook import OrderBookParser, parse_chunks
        from replay.synthetic import generate_orderbook
        label = f"demo ({args.demo_lines:,} synthetic lines)"
        parser = OrderBookParser(source="<synthetic>")
        names, parsers = ("bids", "asks"), [parser]
        batches = parse_chunks(parser, _progress_chunks(generate_orderbook(args.demo_lines, seed=args.seed),
                                                        None, label))
        every = args.every or max(args.demo_lines // 10, 1)
    else:
        names, parsers = inputs.names, inputs.parsers
        label = ", ".join(s.path.name for s in inputs.sources)
        batches = inputs.batches(lambda p: _progress_chunks(_file_chunks(p), p.stat().st_size, p.name))
        every = args.every
    t0 = time.perf_counter()
    try:
        replay(engine, batches, engine.relmap(names),
               every=every, checkpoint=lambda pos: _print_views(pos, engine.snapshot(), args.json))
    except DdmsError:
        # a bad line stops the run: the views as of the line before it (unless just printed)
        # still go out, so nothing accepted is lost, then the error
        if engine.position and (not every or engine.position % every):
            _print_views(engine.position, engine.snapshot(), args.json)
        raise
    seconds = time.perf_counter() - t0
    if not every or engine.position % every:
        _print_views(engine.position, engine.snapshot(), args.json)
    rate = engine.position / seconds if seconds > 0 else float("inf")
    bad = sum(p.bad_lines for p in parsers)
    skipped = f", {bad} bad lines skipped" if bad else ""
    print(f"{label}: {engine.position:,} lines in {seconds:.2f} s ({rate:,.0f} lines/s){skipped}", file=sys.stderr)
    for err in [e for p in parsers for e in getattr(p, "bad_samples", [])][:5]:
        print(f"  skipped {err}", file=sys.stderr)
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from ddms.backend.codegen import generate
    from ddms.m3.printer import print_program
    from ddms.runtime.engine import load_program

    path = Path(args.program)
    if path.suffix == ".sql":
        from ddms.compiler import compile_sql_file
        sql = compile_sql_file(path)
        if args.print_after_all:
            for name, text in sql.stages:
                print(f"-- *** after {name} ***")
                print("\n".join("-- " + line for line in text.splitlines()))
        if args.time_passes:
            for name, sec in sql.timings:
                print(f"-- pass {name:<12} {sec * 1e3:9.2f} ms", file=sys.stderr)
            print(f"-- total        {sql.compile_seconds * 1e3:9.2f} ms", file=sys.stderr)
        program = sql.program
    else:
        program = load_program(path)
        sql = None
    print(print_program(program), end="")
    if sql is not None:
        print("\n-- storage")
        for m in sql.maps:
            decl = program.map(m.name)
            kind = "scalar" if not decl.keys else ("range tree (ORDERED on last key)" if decl.ordered else "hash map")
            how = "re-evaluated after each relevant event" if m.kind == "reeval" else "maintained by deltas"
            print(f"-- {m.name}: {kind}; {how}" + (f" ({m.note})" if m.note else ""))
        for note in sql.notes:
            print(f"-- {note}")
    plan = generate(program).plan
    print("\n-- access plan")
    for line in plan:
        print("-- " + line)
    from ddms.backend.cost import view_costs
    print("-- cost per input event")
    for view, cls, cause in view_costs(program, plan):
        flag = "  <-- re-evaluated by a pass over a whole map every event" if cls == "O(n)" else ""
        print(f"-- {view}: {cls}{flag}" + (f" ({cause})" if cause and cls != "O(log n)" else ""))
    return 0


def build_parser(*, all_commands: bool = True) -> argparse.ArgumentParser:
    """The ``ddms`` parser; ``all_commands=False`` registers only ``run`` and ``compile``."""
    ap = argparse.ArgumentParser(prog="ddms", description="Agile views over order books.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="replay an order-book file through a program (no arguments: demo)")
    run.add_argument("program", nargs="?", help="an M3 program (.m3) or SQL views (.sql); default: the SOBI demo")
    run.add_argument("--data", help="order-book file (t,order_id,action,volume,price); replaces the streams' files")
    run.add_argument("--every", type=_at_least(0), default=0,
                     help="print the views after every N input lines (0: at the end only)")
    run.add_argument("--json", action="store_true", help="print JSON lines")
    run.add_argument("--skip-bad", action="store_true", help="skip and count bad input lines instead of stopping")
    run.add_argument("--demo-lines", type=_at_least(1), default=1_000_000, help="size of the synthetic demo stream")
    run.add_argument("--seed", type=int, default=0, help="seed of the synthetic demo stream")
    run.set_defaults(func=cmd_run)
    comp = sub.add_parser("compile", help="print a program's canonical M3 text and access plan")
    comp.add_argument("program", help="an M3 program (.m3) or a SQL script (.sql)")
    comp.add_argument("--print-after-all", action="store_true", help="show the output of every compiler pass")
    comp.add_argument("--time-passes", action="store_true", help="time every compiler pass (on stderr)")
    comp.set_defaults(func=cmd_compile)
    if all_commands:
        # Feed and backtest commands live beside their code; imported here, and skipped by
        # parse_args for `run` and `compile`, so that these do not pay for asyncio, numpy and
        # replay.sources (start time).
        from ddms.feeds.cli import add_commands as add_feed_commands
        from replay.cli import add_commands as add_backtest_commands

        add_feed_commands(sub)
        add_backtest_commands(sub)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``build_parser().parse_args(argv)``, without importing the feed and backtest commands for
    a well-formed ``run`` or ``compile`` command line (start time).  The top-level parser has no
    option but -h, so a first word naming one of these is the command; any problem left to the
    top-level parser (unrecognized arguments) is reported by the full parser, whose usage line
    lists every command."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("run", "compile"):
        args, extra = build_parser(all_commands=False).parse_known_args(argv)
        if not extra:
            return args
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one command.  Every error a user can cause ends as one ``ddms: error: ...`` line on
    stderr and exit code 2, never a traceback: ddms's own errors (which locate the problem), and
    any ``OSError`` from reading or writing a file (``<file>: <reason>``).  A closed stdout
    (``ddms compile X | head -1``) ends the command quietly, as it ends other Unix tools."""
    try:
        args = parse_args(argv)
        return args.func(args)
    except DdmsError as e:
        print(f"ddms: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ddms: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _stdout_closed()
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"ddms: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


def _stdout_closed() -> int:
    """The reader of stdout went away.  Point stdout at /dev/null so that the interpreter's
    final flush does not fail again (and print a traceback), and exit with 128 + SIGPIPE, the
    status of a Unix tool killed by the signal."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):   # stdout is not a file (captured in tests): nothing to flush
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
