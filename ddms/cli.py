"""The ``ddms`` command line.

    ddms run [PROGRAM.m3|QUERY.sql] [--data FILE] [--every N] [--json] [--skip-bad] [--first-results]
    ddms compile PROGRAM.m3|QUERY.sql [--print-after-all] [--time-passes]
                                       M3 text, per-map storage and the access plan of every statement
    ddms sample-data DIR [--seed S]    generated sample data in every format (replay/sample_data.py)

``ddms run`` with no program runs the SOBI demo on built-in synthetic order flow.  The feed
commands (``serve-feed``, ``monitor``) live in :mod:`ddms.feeds.cli`, the replay commands
(``backtest``, ``convert``) in :mod:`replay.cli`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ddms.errors import DdmsError


def _jsonable(x):
    """``x`` as JSON can carry it: NaN and the infinities have no JSON spelling (``json.dumps``
    would print ``NaN``/``Infinity``, which JSON parsers reject), so they print as ``null``."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return x


def _print_views(position: int, snapshot: dict, as_json: bool, partition: str | None = None) -> None:
    """One printed row of ``ddms run``; ``partition`` tags the rows of ``--spark`` replays."""
    views = {k: _jsonable(v) for k, v in snapshot.items()}
    if as_json:
        tag = {} if partition is None else {"partition": partition}
        print(json.dumps({**tag, "line": position, "views": views}), flush=True)
    else:
        parts = ", ".join(f"{k}={v if not isinstance(v, list) else f'<{len(v)} rows>'}" for k, v in views.items())
        print(f"{'' if partition is None else partition + ' '}line {position}: {parts}", flush=True)


BAR_DELAY = 0.5
"""Seconds a run lasts before :func:`_progress_chunks` draws its bar (the bar is transient)."""


def _stderr_is_terminal() -> bool:
    """Whether a progress bar can be drawn.  Asked before importing rich: its import (0.1-0.3 s)
    fell inside the timed part of every run longer than :data:`BAR_DELAY` seconds, also when
    stderr is a file or a pipe and no bar is drawn (a tenth of a 1M-line run of a fast view)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):   # replaced or closed stderr
        return False


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
    if _stderr_is_terminal():
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
        console = Console(stderr=True)
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


RUN_CHUNK = 1 << 19
"""Bytes ``ddms run`` reads (and parses ahead, :func:`~ddms.runtime.driver.prefetch`) at a time at most:
512 KiB, about 19k order-book lines, while at least 16 times that is left to read (a file of more
than ~8 MB), then :data:`MID_CHUNK` (:func:`_run_chunks`).  Why larger chunks for large files: each
chunk costs a fixed ~60-100 us on the parsing thread (a feed's Python steps, two kernel calls, a
batch, a queue hand-off) and on the applying thread (an apply call), which is what bounds the fast
views; measured on the generated 1M-line book (stop 39, ``bench.e2e_trace``'s two-core model, the
seven finance queries, median of 3 fresh processes on a loaded machine): end to end / apply only
0.68 -> 0.71 (vwap), 0.76 -> 0.89 (missedtrades), the others +0.03 to +0.10.  Why not for small
files: a file of a few MB is then fewer chunks, whose parsing overlaps less of the applying (the
pipeline fills and drains with larger pieces): big/finance.csv (2.7 MB) measured no better."""
MID_CHUNK = 1 << 18
"""The largest read of ``ddms run`` once less than 16 :data:`RUN_CHUNK` s are left (and of any file
under ~4 MB): 256 KiB, about 10k order-book lines, so that even a file of a few MB is several chunks
whose parsing overlaps the applying of the one before (a call per chunk costs microseconds), and
the parser's output buffers alive at a time (up to four chunks': two queued, one parsed, one
applied) stay small: with 1 MiB chunks their fresh pages cost ~4,000 page faults per run (2-4
ms of a 1M-line run's ~40 ms of parsing; now ~1,400)."""
FIRST_CHUNK = 1 << 16
"""The first read of ``ddms run`` (64 KiB, ~2,500 order-book lines) and the smallest."""


def _file_chunks(path: Path, size: int = 1 << 22) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def _run_chunks(path: Path) -> Iterator[bytes]:
    """The bytes of ``path`` as ``ddms run`` reads them, for the parse-ahead thread: a small
    first chunk (:data:`FIRST_CHUNK`), so that applying starts after ~0.1 ms of parsing instead
    of a whole chunk's ~2-3 ms; then reads that double up to :data:`RUN_CHUNK` (:data:`MID_CHUNK`
    once less than 16 times RUN_CHUNK is left), tapering to a quarter of what is left near the
    end (never below FIRST_CHUNK), so that the last chunk,
    applied after everything is parsed, is small too.  Why the doubling: a chunk is parsed
    while the one before it is applied, so the applying thread waits whenever a chunk takes
    longer to parse than the one before it takes to apply; jumping from 64 KiB straight to a
    quarter of a 2.7 MB file (660 KiB, parsed in 2.4-3.6 ms by a fresh process: fresh output
    arrays, a growing order table) left the applying thread idle for ~3 ms of a 10 ms run of
    big/finance.csv.  End to end is then about the slower of parsing and applying plus the
    parsing of 64 KiB and the applying of a last small chunk.  Cost: ~20 more chunks per file
    at ~30 us each (a feed, an apply call and a queue hand-off).

    Every chunk is a ``memoryview`` of one of two buffers, read into again (``readinto``) for a
    later chunk: **a chunk is valid until the next one is asked for** (every reader's ``feed``
    parses or copies its input before returning; ``parse_chunks`` asks for the next chunk after
    that).  Why: ``f.read`` returned fresh ``bytes`` each time, ~300 page faults on
    big/finance.csv's 2.7 MB (~0.5 ms on the parsing thread of a ~8 ms run).  While a chunk is
    parsed, the process's helper thread (:func:`ddms.io.pages.helper`) reads the next one into
    the other buffer: reading (a copy out of the page cache, ~0.5 ms of big/finance.csv) leaves
    the parsing thread, which bounds the faster views' end to end.  If the helper has not begun
    that read when the chunk is asked for (it waits for a core on a loaded machine), this thread
    reads it instead of waiting.  An error reading is raised where the chunk is asked for, as a
    plain read's would be."""
    import numpy as np  # (loaded already: the engine's)

    from ddms.io.pages import helper

    with open(path, "rb") as f:
        left = os.fstat(f.fileno()).st_size
        # np.empty, not bytearray(n), which writes zeros into all of it: 64 page faults (~0.1 ms)
        # before the first read, on the pipeline's critical path; unwritten pages fault as read into
        bufs = [memoryview(np.empty(RUN_CHUNK, np.uint8)) for _ in range(2)]
        got = [0, 0]

        def read(i: int, size: int) -> None:   # on the helper thread
            got[i] = f.readinto(bufs[i][:size])

        size = FIRST_CHUNK
        read(0, size)   # (the first on this thread: nothing to overlap it with)
        i = 0
        while n := got[i]:
            left -= n
            size = min(RUN_CHUNK, max(MID_CHUNK, left // 16), 2 * size, max(FIRST_CHUNK, left // 4))
            ahead = helper().submit(read, 1 - i, size)
            asked = False
            try:
                yield bufs[i][:n]
                asked = True
            finally:   # (also when closed early: the file stays open until a read begun is done)
                if ahead.cancel_or_join() and asked:   # the helper had not got to it (a loaded machine)
                    read(1 - i, size)
            i = 1 - i


def build_engine(program, name: str, generated=None):
    """The Engine of ``program`` (a Program or a path), saying on stderr before the wait whether
    it compiles (a minute or more) or loads from numba's cache (well under a second), and after
    it how long it took.  ``generated``: the program's generated code, if made already."""
    from ddms.runtime.engine import Engine

    cached = []

    def announce(hit: bool) -> None:
        cached.append(hit)
        if hit:
            print(f"loading {name}, compiled before, from the cache ...", file=sys.stderr, flush=True)
        else:
            print(f"compiling {name} with numba (the first time takes a minute or two; cached afterwards) ...",
                  file=sys.stderr, flush=True)

    engine = Engine(program, on_build=announce, generated=generated)
    print(f"{'loaded' if cached[0] else 'compiled'} {name} in {engine.compile_seconds:.2f} s", file=sys.stderr)
    return engine


def build_warm_engine(program, name: str, generated):
    """For ``ddms run --first-results``: a :class:`~ddms.runtime.warm.WarmEngine` (the
    interpreter serves the views from the first line while numba compiles in a child process)
    when numba's cache lacks ``program`` (``generated``: its generated code), else ``None`` (the
    cached Engine loads in well under a second: nothing to gain)."""
    from ddms.backend.cache import compiled_before

    if compiled_before(generated):
        return None
    from ddms.runtime.warm import WarmEngine

    def ready(engine, seconds: float) -> None:
        print(f"compiled {name} in {seconds:.2f} s: compiled code continues from line {engine.position:,}",
              file=sys.stderr, flush=True)

    warm = WarmEngine(program, on_ready=ready)
    print(f"compiling {name} with numba in the background (pid {warm.job.pid}); the interpreter serves the views "
          "meanwhile ...", file=sys.stderr, flush=True)
    return warm


def _is_warm(engine) -> bool:
    """Whether ``engine`` is a :class:`~ddms.runtime.warm.WarmEngine`, without importing that
    module when nothing made one (a cached start never does)."""
    warm = sys.modules.get("ddms.runtime.warm")
    return warm is not None and isinstance(engine, warm.WarmEngine)


def _how_applied(engine) -> str:
    """What the rate of ``ddms run`` measured: compiled code only, or (``--first-results``) the
    interpreter until the compile finished."""
    if not _is_warm(engine):
        return "compile time excluded"
    if engine.compiled:
        return f"the first {engine.handover_line:,} interpreted while numba compiled"
    return "all interpreted: numba was still compiling"


def _note_background_compile(engine, name: str) -> None:
    """Say so when a ``--first-results`` run ended before its compile: the child goes on and
    fills numba's cache, so the next run loads the program."""
    if _is_warm(engine) and engine.job is not None:
        print(f"note: the input ended before numba finished compiling {name}: it goes on in the background "
              f"(pid {engine.job.pid}) and the next run loads {name} from the cache", file=sys.stderr)


def _first_results(args: argparse.Namespace, demo: bool) -> bool:
    """Whether ``ddms run`` serves an uncompiled program's views with the interpreter while numba
    compiles it: asked for (``--first-results``), refused (``--no-first-results``), or by default
    (neither) whenever it can: not for the demo, checkpoints, resumes or ``--query`` (the
    interpreter keeps no checkpoints and no relations), and not where ``DDMS_FIRST_RESULTS=0``
    (the test suite sets it, so that its runs compile in the foreground, one compile per program)."""
    if args.first_results is not None:
        return args.first_results
    if demo or args.checkpoint or args.resume or args.query:
        return False
    return os.environ.get("DDMS_FIRST_RESULTS", "1") != "0"


def cmd_run(args: argparse.Namespace) -> int:
    from ddms.runtime.driver import prefetch, replay, warm
    from ddms.runtime.engine import load_program

    # read_source (behind both readers) names a missing, directory or non-UTF-8 program file
    if args.program:
        program = Path(args.program)
    else:
        from ddms.programs import program_path
        program = program_path("sobi.m3")         # package data: also in a wheel
    if program.suffix == ".sql":   # compiled before: from the cache, without importing the SQL compiler
        from ddms.backend.sqlcache import sql_program
        target, sql_seconds, hit = sql_program(program)
        print(f"SQL -> M3 {'from the cache ' if hit else ''}in {sql_seconds:.3f} s ({len(target.maps)} maps)",
              file=sys.stderr)
    else:
        target = load_program(program)
    demo = args.program is None and args.data is None
    if args.spark and not args.segments:   # one replay per partition: the files are not merged
        return _run_partitions(args, program)
    inputs = None
    notes: list[str] = []      # losses a --skip-bad replay let pass (gaps in a capture)
    if not demo:
        # the data files are checked (present, a file, text) here, before the numba compile
        from ddms.io.inputs import open_program_input
        data = [Path(d) for d in args.data] if args.data else None
        inputs = open_program_input(target, program.parent, data=data, skip_bad=args.skip_bad,
                                    book_reader=lambda path, skip_bad, symbols=False: _read_book(path, skip_bad, notes,
                                                                                                 symbols))
    if demo:
        every = args.every or max(args.demo_lines // 10, 1)
        print(DEMO_INTRO.format(lines=args.demo_lines, seed=args.seed, every=every), file=sys.stderr, flush=True)
    if args.segments or args.spark:
        return _run_split(args, program, inputs)
    if args.first_results and (args.checkpoint or args.resume or args.query):
        raise DdmsError("--first-results serves views from the interpreter, which keeps no checkpoints and no "
                        "relations: run --checkpoint/--resume/--query without it")
    from ddms.backend.gencache import generated_code
    generated = generated_code(target)   # once: whether numba's cache holds it, then the Engine's code
    engine = build_warm_engine(target, program.name, generated) if _first_results(args, demo) else None
    engine = engine or build_engine(target, program.name, generated)
    spreads: list[float] = []
    if inputs is None:
        from ddms.io.orderbook import OrderBookParser, parse_chunks
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
        batches = inputs.batches(lambda p: _progress_chunks(_run_chunks(p), p.stat().st_size, p.name))
        every = args.every
    ckpt = _checkpointed(args, engine, inputs)   # --checkpoint / --resume (None without them)
    if getattr(args, "query", None):
        engine.keep_relations()   # after a resume: only if the checkpoint kept them (else a clear error)
    if ckpt is not None:
        batches = ckpt.batches(lambda chunks, size: _progress_chunks(chunks, size, label))
    elif not demo:   # parse the next chunk on another core while this one is applied
        inputs.project(engine.relmap(names) >= 0)   # a book no stream reads is not tracked (no checkpoint here)
        batches = prefetch(batches)
        for p in parsers:   # and fault in the memory it needs next on a helper thread (ddms.io.pages)
            if hasattr(p, "fault_ahead"):
                p.fault_ahead = True
    if args.until:
        batches = _until(batches, args.until)

    def checkpoint(pos: int) -> None:
        snap = _report(engine, pos, args)
        if demo:
            spreads.append(snap.get("SPREAD", math.nan))

    if getattr(engine, "compiled", True):   # (a WarmEngine interpreting: first results come first)
        warm(engine, parsers)   # kernels numba loads lazily: loaded before the clock starts
    t0 = time.perf_counter()
    stop = _StopOnInterrupt()
    try:
        with stop:
            replay(engine, stop.batches(batches), engine.relmap(names),
                   every=every, checkpoint=checkpoint)
    except DdmsError:
        # a bad line stops the run: the views as of the line before it (unless just printed)
        # still go out, so nothing accepted is lost, then the error
        if engine.position and (not every or engine.position % every):
            _report(engine, engine.position, args)
        raise
    seconds = time.perf_counter() - t0
    if (not every or engine.position % every or (stop.requested and not engine.position)
            or (ckpt is not None and ckpt.resumed_from == engine.position)):
        checkpoint(engine.position)
    done = engine.position - (ckpt.resumed_from or 0 if ckpt is not None else 0)
    rate = done / seconds if seconds > 0 else float("inf")
    bad = sum(p.bad_lines for p in parsers)
    skipped = f", {bad} bad lines skipped" if bad else ""
    how = _how_applied(engine)
    print(f"{label}: {done:,} lines in {seconds:.2f} s ({rate:,.0f} lines/s, {how}){skipped}", file=sys.stderr)
    if not engine.position and not bad and not stop.requested:
        # an empty file (or one of blank lines) is not an error, but rarely what was meant
        notes.append(f"{label} holds no input lines: the views are those of empty books")
    for err in [e for p in parsers for e in getattr(p, "bad_samples", [])][:5]:
        print(f"  skipped {err}", file=sys.stderr)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    if demo:
        print(_demo_outro(spreads), file=sys.stderr)
    _note_background_compile(engine, program.name)
    if stop.requested:
        print(f"ddms: interrupted: the views printed last are as of line {engine.position:,}, the last line "
              "applied", file=sys.stderr)
        return 130
    return 0


DEMO_INTRO = """\
demo: the SOBI program (examples/m3/sobi.m3) over {lines:,} lines of generated
  order flow (seed {seed}): limit orders rest at or behind the touch and
  marketable orders execute against the other side, so the book is never
  crossed (replay/synthetic.py).  Views, printed every {every:,} lines:
  BEST_BID, BEST_ASK, SPREAD, MID (top of book, prices in 1/10000), BID_VWAP
  and ASK_VWAP (VWAP of the best quarter of each side's volume) and SOBI
  (their imbalance around MID: > 0 means buy pressure).
  Next: ddms sample-data data
        ddms run examples/m3/vwap.m3 --data data/finance.csv
        ddms backtest --demo   (a strategy on such data, with simulated fills)"""


def _demo_outro(spreads: list[float]) -> str:
    """The demo's last stderr line: whether the book was uncrossed at every checkpoint."""
    seen = [s for s in spreads if isinstance(s, int | float) and math.isfinite(s)]
    if not seen:
        return "demo: no checkpoint had both sides of the book"
    ok = "uncrossed" if min(seen) > 0 else "CROSSED"
    return (f"demo: book {ok} at every checkpoint with both sides ({len(seen)} of {len(spreads)}): "
            f"SPREAD {min(seen):g} to {max(seen):g}")


def cmd_sample_data(args: argparse.Namespace) -> int:
    """Write the sample files of :mod:`replay.sample_data` (progress on stderr, one line a file)."""
    from replay.sample_data import SampleSizes, write_sample_data

    folder = Path(args.dir)
    if folder.exists() and not folder.is_dir():
        raise DdmsError(f"{folder}: is a file, not a folder")
    sizes = SampleSizes(lines=args.lines, big_lines=args.big_lines)
    print(f"sample-data: writing generated data (seed {args.seed}) under {folder}/ ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    paths = write_sample_data(folder, seed=args.seed, sizes=sizes,
                              progress=lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
    print(f"sample-data: {len(paths)} files in {time.perf_counter() - t0:.1f} s; try:\n"
          f"  ddms run examples/m3/vwap.m3 --data {folder / 'finance.csv'}\n"
          f"  ddms backtest {folder / 'finance.csv'} {folder / 'binance' / 'usdm_btcusdt.gz'} \\\n"
          "      --strategy sobi --param threshold=0.00001,0.0001 --param order_size=1",
          file=sys.stderr)
    return 0


class _NotedSource:
    """A replay source whose iteration reports its losses (gaps a ``--skip-bad`` replay of a
    capture went through) into ``notes``."""

    def __init__(self, source, notes: list[str]) -> None:
        self.source, self.notes = source, notes

    def __iter__(self):
        return _progress_batches(self.source.batches(self.notes), os.path.basename(self.source.path))

    def reader(self):
        """The source's resumable reader (:meth:`ddms.io.sources.Source.reader`), or None."""
        return self.source.reader(self.notes)


def _progress_batches(batches: Iterator, label: str) -> Iterator:
    """Pass batches through, showing the input lines read so far on stderr once the run has
    lasted :data:`BAR_DELAY` seconds (a transient line on a terminal, else a line every few
    seconds): the readers of captures and Parquet files have no byte count to show."""
    batches = iter(batches)
    start = time.monotonic()
    for b in batches:
        yield b
        if time.monotonic() - start > BAR_DELAY:
            break
    else:
        return
    if _stderr_is_terminal():
        from rich.console import Console
        from rich.progress import Progress, TextColumn, TimeElapsedColumn
        console = Console(stderr=True)
        with Progress(TextColumn(label), TextColumn("{task.fields[lines]} lines"), TimeElapsedColumn(),
                      console=console, transient=True) as bar:
            task = bar.add_task(label, total=None, lines=f"{b.last_line:,}")
            for b in batches:
                yield b
                bar.update(task, lines=f"{b.last_line:,}")
        return
    last = time.monotonic()
    for b in batches:
        yield b
        if time.monotonic() - last > 5:
            last = time.monotonic()
            print(f"{label}: {b.last_line:,} lines", file=sys.stderr, flush=True)


def _read_book(path: Path, skip_bad: bool, notes: list[str], symbols: bool = False) -> _NotedSource:
    """An order-book source that is not CSV text (LOBSTER, a Binance capture, Parquet), opened
    now (a Parquet footer that is not ours is an error before the compile) through the readers
    ``ddms backtest`` and ``ddms convert`` use; ``symbols``: with the symbol column (every
    symbol of a multi-symbol file)."""
    from ddms.io.sources import open_source
    return _NotedSource(open_source(path, skip_bad=skip_bad, symbols=symbols), notes)


class _StopOnInterrupt:
    """Ctrl-C during a replay stops it between two batches, so that what is printed afterwards
    is the views as of the last line applied (``engine.position``), never a half-applied batch.
    The first SIGINT only asks (:attr:`requested`; :meth:`batches` then ends the input); a second
    one raises KeyboardInterrupt at once (the previous handler is back).  Installed only in the
    main thread (the only one Python delivers signals to).  Cost: one flag test per batch."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> _StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum, frame) -> None:
        self.requested = True
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def batches(self, batches):
        """``batches`` until an interrupt is requested (a batch read meanwhile is not applied)."""
        for b in batches:
            if self.requested:
                return
            yield b


# -- durable runs: --checkpoint DIR [--checkpoint-every N], --resume DIR ----------------------------
def _checkpointed(args: argparse.Namespace, engine, inputs):
    """The :class:`~ddms.runtime.resume.CheckpointedRun` of a ``run`` with ``--checkpoint`` or
    ``--resume`` (which restores the newest complete checkpoint first and keeps checkpointing into
    the same folder), else None."""
    folder = args.resume or args.checkpoint
    if folder is None:
        return None
    if inputs is None:
        raise DdmsError("--checkpoint/--resume need a program and its input (--data FILE), not the demo")
    if args.resume and Path(args.resume).is_file():   # one chosen checkpoint: replay from it, writing none
        if args.checkpoint:
            raise DdmsError("--resume FILE replays from one checkpoint and writes none: omit --checkpoint")
        from ddms.runtime.resume import CheckpointedRun, describe_resume
        run = CheckpointedRun(engine, inputs, Path(args.resume).parent, every=1, start=args.resume)
        describe_resume(run)
        return run
    if args.resume and args.checkpoint and Path(args.resume) != Path(args.checkpoint):
        raise DdmsError("--resume DIR continues checkpointing into DIR: give --checkpoint the same folder or omit it")
    if inputs is None:
        raise DdmsError("--checkpoint/--resume need a program and its input (--data FILE), not the demo")
    from ddms.runtime.resume import CheckpointedRun, describe_resume
    run = CheckpointedRun(engine, inputs, folder, every=args.checkpoint_every, resume=bool(args.resume),
                          keep=args.checkpoint_keep or None)
    if args.resume:
        describe_resume(run)
    return run


def _until(batches: Iterator, line: int) -> Iterator:
    """``batches`` up to and including input line ``line`` (``ddms run --until``)."""
    from ddms.io.events import split_lines
    for b in batches:
        if b.first_line > line:
            return
        if b.last_line > line:
            yield split_lines(b, line)[0]
            return
        yield b


def _run_partitions(args: argparse.Namespace, program: Path) -> int:
    """``ddms run PROGRAM --data FILE... --spark MASTER`` (without ``--segments``): one Spark task
    per (file, symbol) partition (a multi-symbol file is one ``FILE#SYMBOL`` partition per symbol),
    each a replay of that partition alone (:func:`replay.viewtask.partition_views`); prints, in
    partition order, exactly what ``ddms run PROGRAM --data PARTITION`` prints, each row tagged
    with its partition.  The files are not merged (each partition has its own engine)."""
    if not args.program or not args.data:
        raise DdmsError("--spark replays the --data files' partitions: give a program and --data FILE...")
    if args.resume or args.checkpoint or args.query or args.first_results or args.until:
        raise DdmsError("--spark runs one replay per partition: run it without --checkpoint, --resume, --query, "
                        "--until and --first-results")
    from replay.backtest import symbol_partitions
    from replay.spark import run_sweep
    from replay.viewtask import partition_views
    parts = symbol_partitions(args.data, args.skip_bad)
    tasks = [(p, str(program.resolve()), {"every": args.every, "skip_bad": int(args.skip_bad)}) for p in parts]
    t0 = time.perf_counter()
    out = run_sweep(tasks, master=args.spark, fn=partition_views,
                    progress=lambda done, n: print(f"spark: {done}/{n} partitions done", file=sys.stderr, flush=True))
    for row in out:
        for text in row["rows"]:
            d = json.loads(text)
            _print_views(d["line"], d["views"], args.json, partition=row["partition"])
    lines = sum(r["lines"] for r in out)
    print(f"{len(parts)} partitions ({lines:,} lines) on Spark {args.spark} in {time.perf_counter() - t0:.2f} s",
          file=sys.stderr)
    return 0


def _run_split(args: argparse.Namespace, program: Path, inputs) -> int:
    """``ddms run PROGRAM --data FILE --segments N [--spark MASTER] [--checkpoint DIR]``: one
    history split into N segments that start from the checkpoints of a first pass
    (:func:`replay.segments.run_split`), printed as the sequential run prints them; the first
    pass's cost and the segments' time on stderr."""
    if inputs is None or not args.program:
        raise DdmsError("--segments needs a program and its input (--data FILE), not the demo")
    if args.resume or args.query or args.first_results:
        raise DdmsError("--segments replays from a first pass's checkpoints: run it without --resume, --query "
                        "and --first-results")
    import tempfile

    from ddms.runtime.resume import stream_sources
    from replay.segments import run_split
    if len(inputs.sources) != 1:
        raise DdmsError("--segments splits one input file; this program reads "
                        f"{', '.join(str(s.path) for s in inputs.sources)}")
    stream_sources(inputs)   # a CSV file (a checkpoint holds its reader's position), else a clear error
    data = str(inputs.sources[0].path)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(prefix="ddms-split-") as tmp:
        folder = Path(args.checkpoint) if args.checkpoint else Path(tmp)
        run = run_split(str(program.resolve()), data, folder, segments=args.segments, every=args.every,
                        master=args.spark, progress=say)
    for row in run.rows:
        d = json.loads(row)
        _print_views(d["line"], d["views"], args.json)
    where = f"Spark {run.master}" if run.master else "this process, one after the other"
    first = ("reused the checkpoints in " + str(args.checkpoint) if run.reused else
             f"first pass (a sequential replay writing the checkpoints) {run.first_pass_seconds:.2f} s")
    ratio = (f" (speedup {run.first_pass_seconds / run.segments_seconds:.2f}x over the sequential first pass)"
             if run.first_pass_seconds and run.segments_seconds else "")
    say(f"split replay: {first}; {run.segments} segments on {where} {run.segments_seconds:.2f} s{ratio}")
    return 0


def _report(engine, position: int, args: argparse.Namespace):
    """Print the views at ``position`` and, with ``--query``, the query's answer over the base
    relations then: ``{"line": N, "query": {"columns": [...], "rows": [[...], ...]}}`` with
    ``--json``, else a header line and one line per row.  Returns the views' snapshot."""
    snap = engine.snapshot()
    _print_views(position, snap, args.json)
    sql = getattr(args, "query", None)
    if not sql:
        return snap
    from ddms.runtime.adhoc import table_rows
    table = engine.query(sql)
    rows = [[_jsonable(v) for v in r] for r in table_rows(table)]
    if args.json:
        print(json.dumps({"line": position, "query": {"columns": table.column_names, "rows": rows}}), flush=True)
    else:
        print(f"line {position}: query: {len(rows)} rows ({', '.join(table.column_names)})", flush=True)
        for r in rows:
            print("  " + ", ".join(str(v) for v in r), flush=True)
    return snap


def add_durable_options(run: argparse.ArgumentParser) -> None:
    """``ddms run``'s checkpoint options (kept apart from the others)."""
    run.add_argument("--checkpoint", metavar="DIR",
                     help="write checkpoints (state + input position) into DIR every --checkpoint-every lines and at "
                          "the end")
    run.add_argument("--checkpoint-every", type=_at_least(1), default=1_000_000, metavar="N",
                     help="a checkpoint at the first chunk boundary after every N input lines (default 1,000,000)")
    run.add_argument("--checkpoint-keep", type=_at_least(0), default=2, metavar="N",
                     help="keep the N newest checkpoints in DIR (default 2; 0 keeps every one, for --resume FILE)")
    run.add_argument("--until", type=_at_least(1), default=0, metavar="LINE",
                     help="stop after input line LINE (the views printed there), e.g. to replay a recorded session "
                          "from a checkpoint (--resume FILE) to a chosen point")
    run.add_argument("--resume", metavar="DIR",
                     help="continue from the newest complete checkpoint in DIR (from the start if none), printing "
                          "what the uninterrupted run prints after it, and keep checkpointing into DIR; or from one "
                          "checkpoint FILE (any of DIR's), writing none")
    run.add_argument("--segments", type=_at_least(1), default=0, metavar="N",
                     help="split the input into N segments: a first pass keeps a checkpoint at each boundary (in "
                          "--checkpoint DIR if given, reused by the next run), then the segments replay from them "
                          "(on --spark MASTER, else one after the other); prints what the sequential run prints")
    run.add_argument("--spark", metavar="MASTER",
                     help="run the --segments as Spark tasks on MASTER (e.g. local[2]); without --segments, one Spark "
                          "task per (--data file, symbol) partition, each printing what a run of it alone prints")
    run.add_argument("--query", metavar="SQL",
                     help="also answer this SQL over the base relations (tables named after the streams: bids, asks) "
                          "with the views, by DuckDB; the engine keeps the relations (one hash probe an event)")


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
            kind = "scalar" if not decl.keys else ("range tree (ORDERED on last key)" if decl.ordered else
                                                   "direct-indexed window of integer keys + hash table and lazy "
                                                   f"{'/'.join(decl.extremes)}-heap for the other keys (EXTREME "
                                                   f"{' '.join(k.upper() for k in decl.extremes)}: read only by its "
                                                   f"{' and '.join(decl.extremes)} key and at bound keys; the "
                                                   "extreme moves only when a value leaves or reaches 0)"
                                                   if decl.extreme else "hash map")
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
    from ddms.backend.cost import read_costs
    reads = read_costs(program)
    if reads:
        print("-- cost per read (views of rows, cut when read)")
        for view, text in reads:
            print(f"-- {view}: {text}")
    return 0


def version() -> str:
    """The installed package's version (its metadata), or "unknown" when ddms runs from a
    source tree that was never installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try:
        return dist_version("ddms")
    except PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``, reading the package metadata only when asked: ``importlib.metadata`` costs
    15-40 ms, which every command paid at start when argparse's own version action needed the
    string while the parser was built."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show the version and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ddms {version()}")              # on stdout, as argparse's own version action
        parser.exit()


def build_parser(*, all_commands: bool = True) -> argparse.ArgumentParser:
    """The ``ddms`` parser; ``all_commands=False`` registers only ``run`` and ``compile``."""
    ap = argparse.ArgumentParser(prog="ddms", description="Agile views over order books.")
    ap.add_argument("--version", action=_VersionAction)
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="replay an order-book file through a program (no arguments: demo)")
    run.add_argument("program", nargs="?", help="an M3 program (.m3) or SQL views (.sql); default: the SOBI demo")
    run.add_argument("--data", metavar="FILE", action="append",
                     help="data for the order-book streams, replacing the files the program names: order-book CSV "
                          "(t,order_id,action,volume,price), LOBSTER, a Binance capture (.gz), a cryptofeed capture, "
                          "DBN, tardis CSV or ddms Parquet; repeat it for several captures (streams with a symbol "
                          "column), merged by receive timestamp")
    run.add_argument("--every", type=_at_least(0), default=0,
                     help="print the views after every N input lines (0: at the end only)")
    run.add_argument("--json", action="store_true", help="print JSON lines")
    run.add_argument("--skip-bad", action="store_true", help="skip and count bad input lines instead of stopping")
    run.add_argument("--first-results", action=argparse.BooleanOptionalAction, default=None,
                     help="a program numba has not compiled yet: serve its views with the M3 interpreter from the "
                          "first line while numba compiles it in the background, then continue compiled (same "
                          "results; first results in a second or two instead of 10 s to a minute or more). The "
                          "default except with --checkpoint, --resume, --query and the demo; "
                          "--no-first-results compiles first")
    run.add_argument("--demo-lines", type=_at_least(1), default=1_000_000, help="size of the synthetic demo stream")
    run.add_argument("--seed", type=int, default=0, help="seed of the synthetic demo stream")
    add_durable_options(run)
    run.set_defaults(func=cmd_run)
    comp = sub.add_parser("compile", help="print a program's canonical M3 text and access plan")
    comp.add_argument("program", help="an M3 program (.m3) or a SQL script (.sql)")
    comp.add_argument("--print-after-all", action="store_true", help="show the output of every compiler pass")
    comp.add_argument("--time-passes", action="store_true", help="time every compiler pass (on stderr)")
    comp.set_defaults(func=cmd_compile)
    sample = sub.add_parser(
        "sample-data", help="write generated sample data in every supported format to a folder",
        description="Write generated, uncrossed order-book data under DIR: finance.csv and big/finance.csv "
                    "(order-book CSV), finance.parquet (ddms Parquet), binance/usdm_btcusdt.gz and "
                    "binance/spot_btcusdt.gz (Binance captures in hftbacktest's recorder format), and a LOBSTER "
                    "message/orderbook pair under lobster/.  The same seed writes the same bytes; existing sample "
                    "files are replaced.")
    sample.add_argument("dir", metavar="DIR", help="the folder to write (created if missing)")
    sample.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    sample.add_argument("--lines", type=_at_least(1), default=100_000,
                        help="lines of DIR/finance.csv (default 100,000)")
    sample.add_argument("--big-lines", type=_at_least(1), default=1_000_000,
                        help="lines of DIR/big/finance.csv (default 1,000,000)")
    sample.set_defaults(func=cmd_sample_data)
    if all_commands:
        # Feed and backtest commands live beside their code; imported here, and skipped by
        # parse_args for `run` and `compile`, so that these do not pay for asyncio, numpy and
        # ddms.io.sources (start time).
        from ddms.feeds.cli import add_commands as add_feed_commands
        from replay.cli import add_commands as add_backtest_commands

        add_feed_commands(sub)
        add_backtest_commands(sub)
    return ap


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """``build_parser().parse_args(argv)``, without importing the feed and backtest commands for
    a well-formed ``run`` or ``compile`` command line (start time).  The top-level parser has no
    option but -h and --version, so a first word naming one of these is the command; any problem left to the
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
