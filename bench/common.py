"""Shared pieces: result rows, paths, parsing bytes into batches, timing an engine.

Throughput is always counted in INPUT LINES (an E line that deletes and re-inserts is one line).
"End to end" = bytes already in memory -> OrderBookParser.feed (4 MiB chunks, as ``ddms run``
reads a file) -> Engine.apply.  "Apply only" = the same batches parsed beforehand.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.runtime.engine import Engine

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FINANCE_BIG = SHARED / "data" / "orderbook" / "big" / "finance.csv"
VWAP_SQL = SHARED / "queries" / "finance" / "vwap.sql"
VWAP_M3 = REPO / "examples" / "m3" / "vwap.m3"
SOBI_M3 = REPO / "examples" / "m3" / "sobi.m3"
PROGRAMS = {"VWAP": VWAP_M3, "SOBI": SOBI_M3}
CHUNK = 1 << 22


@dataclass
class Row:
    section: str
    case: str
    value: float | None
    unit: str
    target: str = ""
    verdict: str = ""


class Skip(Exception):
    """A section (or case) cannot run here; the message says why."""


def finance_bytes() -> bytes:
    if not FINANCE_BIG.exists():
        raise Skip(f"{FINANCE_BIG} not found")
    return FINANCE_BIG.read_bytes()


def parse(data: bytes, parser: OrderBookParser | None = None) -> list[EventBatch]:
    """All batches of ``data`` (fed in CHUNK pieces, then closed), compacted to own memory."""
    parser = parser or OrderBookParser(brokers=10)
    out = []
    for i in range(0, len(data), CHUNK):
        b = parser.feed(data[i:i + CHUNK])
        if b.error is not None:
            raise b.error
        out.append(_compact(b))
    out.append(_compact(parser.close()))
    return out


def parse_continue(parser: OrderBookParser, data: bytes) -> list[EventBatch]:
    """Batches of ``data`` fed to an existing parser (not closed; ``data`` ends with a newline)."""
    out = []
    for i in range(0, len(data), CHUNK):
        b = parser.feed(data[i:i + CHUNK])
        if b.error is not None:
            raise b.error
        out.append(_compact(b))
    return out


def _compact(b: EventBatch) -> EventBatch:
    return EventBatch(b.rel.copy(), b.sign.copy(), np.ascontiguousarray(b.cols), b.line.copy(),
                      b.first_line, b.last_line, b.skipped, b.error)


def merge(batches: list[EventBatch]) -> EventBatch:
    """One batch holding every event of ``batches`` (consecutive spans of lines)."""
    batches = [b for b in batches if b.last_line >= b.first_line]
    return EventBatch(np.concatenate([b.rel for b in batches]), np.concatenate([b.sign for b in batches]),
                      np.concatenate([b.cols for b in batches]), np.concatenate([b.line for b in batches]),
                      batches[0].first_line, batches[-1].last_line)


def n_lines(batches: list[EventBatch]) -> int:
    return sum(b.last_line - b.first_line + 1 for b in batches)


def warm_parser() -> None:
    """Load the parser's compiled kernels (numba cache) outside any timing."""
    p = OrderBookParser(brokers=10)
    p.feed(b"1,1,B,10,100\n1,2,S,10,200\n2,1,E,5,0\n2,2,D,0,0\n1,3,B,1.5,100.25\n")
    p.close()


def engine(name: str) -> Engine:
    return Engine(PROGRAMS[name])


def time_parse(data: bytes) -> tuple[float, int]:
    """(seconds, lines) to parse ``data`` alone."""
    parser = OrderBookParser(brokers=10)
    t0 = time.perf_counter()
    for i in range(0, len(data), CHUNK):
        parser.feed(data[i:i + CHUNK])
    parser.close()
    return time.perf_counter() - t0, parser.lines_consumed


def time_end_to_end(eng: Engine, data: bytes) -> tuple[float, int]:
    """(seconds, lines): parse + apply from bytes in memory into a fresh engine."""
    parser = OrderBookParser(brokers=10)
    relmap = eng.relmap(("bids", "asks"))
    apply = eng.apply
    t0 = time.perf_counter()
    for i in range(0, len(data), CHUNK):
        apply(parser.feed(data[i:i + CHUNK]), relmap)
    apply(parser.close(), relmap)
    return time.perf_counter() - t0, eng.position


def time_apply(eng: Engine, batches: list[EventBatch], clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds to apply pre-parsed ``batches`` (``clock``: wall time, or ``time.thread_time`` for
    CPU seconds of this thread)."""
    relmap = eng.relmap(("bids", "asks"))
    apply = eng.apply
    t0 = clock()
    for b in batches:
        apply(b, relmap)
    return clock() - t0


class Timing(NamedTuple):
    """One function's timings from :func:`interleaved`: the best (smallest) time, the result of
    its last run and every timed run, in seconds of the clock used."""

    best: float
    result: Any
    times: list[float]


def interleaved(fns: Sequence[Callable[..., Any]], reps: int, *, clock: Callable[[], float] = time.perf_counter,
                setup: Sequence[Callable[[], Any] | None] | None = None, warm_up: bool = True) -> list[Timing]:
    """Time ``fns`` taking turns (A, B, A, B, ...; a busy spell of a shared machine then hits
    every one), ``reps`` times each, after one untimed warm-up run of each (numba compile or
    cache load, page cache) unless ``warm_up`` is false; the best time counts (interference
    only ever slows a run down).  ``clock``: ``time.perf_counter`` (wall) or
    ``time.process_time`` (CPU seconds of this process: other processes' load does not count,
    their contention for caches still does).  ``setup[j]``, when given, runs untimed before every
    run of ``fns[j]`` and its result is ``fns[j]``'s argument (e.g. a fresh engine).
    Cost: (reps + 1) runs of each function."""
    if setup is not None and len(setup) != len(fns):
        raise ValueError(f"{len(setup)} setups for {len(fns)} functions")
    steps = [(fn, setup[j] if setup is not None else None) for j, fn in enumerate(fns)]

    def once(fn: Callable[..., Any], prepare: Callable[[], Any] | None) -> tuple[float, Any]:
        args = () if prepare is None else (prepare(),)
        t = clock()
        result = fn(*args)
        return clock() - t, result

    if warm_up:
        for fn, prepare in steps:
            once(fn, prepare)
    times: list[list[float]] = [[] for _ in steps]
    results: list[Any] = [None] * len(steps)
    for _ in range(reps):
        for j, (fn, prepare) in enumerate(steps):
            seconds, results[j] = once(fn, prepare)
            times[j].append(seconds)
    return [Timing(min(ts), r, ts) for ts, r in zip(times, results, strict=True)]


def rate(lines: int, seconds: float) -> float:
    return lines / seconds if seconds > 0 else float("inf")


@dataclass(frozen=True)
class Sizes:
    """Problem sizes: full by default, small with ``--quick`` (a smoke run)."""

    quick: bool
    synth_lines: int           # section 1/2 synthetic stream
    depths: tuple[int, ...]    # section 4 resting orders
    steady_lines: int          # section 4 steady-state lines per depth
    duck_depths: tuple[int, ...]
    duck_seconds: float        # section 3 time box per depth
    callback_lines: int        # section 5 steady-state lines
    cold_sobi: bool            # section 6: compile SOBI cold (slow: a minute or more)

    @staticmethod
    def make(quick: bool) -> Sizes:
        if quick:
            return Sizes(True, 1_000_000, (1_000, 10_000, 100_000), 50_000,
                         (1_000, 10_000, 100_000), 1.0, 200_000, False)
        return Sizes(False, 10_000_000, (1_000, 10_000, 100_000, 1_000_000), 1_000_000,
                     (1_000, 10_000, 100_000), 4.0, 2_000_000, True)


class Shared:
    """Data and measurements reused across sections of one run (so ``--only`` still works:
    whatever is missing is made on first use)."""

    def __init__(self, sizes: Sizes) -> None:
        self.sizes = sizes
        self._data: dict[str, bytes] = {}
        self._batches: dict[str, list[EventBatch]] = {}
        self.gen_seconds = 0.0
        self.gen_name = ""
        self.apply_rate: dict[tuple[str, str], float] = {}   # (dataset, program) -> lines/s

    def datasets(self) -> list[str]:
        return ["finance", "synthetic"]

    def label(self, name: str) -> str:
        if name == "finance":
            return "big/finance.csv"
        return f"synthetic {self.sizes.synth_lines / 1e6:g}M"

    def data(self, name: str) -> bytes:
        if name not in self._data:
            if name == "finance":
                self._data[name] = finance_bytes()
            else:
                from bench.synth import synthetic_stream
                self._data[name], self.gen_seconds, self.gen_name = synthetic_stream(self.sizes.synth_lines)
        return self._data[name]

    def batches(self, name: str) -> list[EventBatch]:
        if name not in self._batches:
            self._batches[name] = parse(self.data(name))
        return self._batches[name]
