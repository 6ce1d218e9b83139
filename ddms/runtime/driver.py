"""Replaying batches into an engine with checkpoints every N input lines.

Used by ``ddms run``, the tests and the benchmarks, so that they all cut input the same way.
"""

from __future__ import annotations

import queue
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ddms.io.events import EventBatch, split_lines
from ddms.runtime.engine import Engine

__all__ = ["prefetch", "replay", "split_lines", "warm"]


def replay(engine: Engine, batches: Iterable[EventBatch], relmap: np.ndarray, *, every: int = 0,
           checkpoint: Callable[[int], None] | None = None) -> None:
    """Apply every batch; with ``every`` > 0 call ``checkpoint(position)`` each time the engine's
    position reaches a multiple of ``every`` input lines (exactly at that line)."""
    for batch in batches:
        if every <= 0 or checkpoint is None:
            engine.apply(batch, relmap)
            continue
        while True:
            start = engine.position
            next_cp = (start // every + 1) * every
            cut_line = batch.first_line + (next_cp - start) - 1
            if cut_line >= batch.last_line:
                error = batch.error
                engine.apply(replace(batch, error=None), relmap)
                if engine.position == next_cp:
                    checkpoint(engine.position)
                if error is not None:
                    raise error
                break
            head, batch = split_lines(batch, cut_line)
            engine.apply(head, relmap)
            checkpoint(engine.position)


WARM_ORDERBOOK = (b"1,1,B,10,100\n1,2,S,10,200\n2,1,E,5,0\n2,2,F,0,0\n3,3,B,1.5,100.25\n3,3,D,0,0\n"
                  + b"".join(b"4,%d,B,1,100\n" % i for i in range(10, 2400)))
"""Order-book lines of every action, and enough resting orders to make the order table grow twice
(1,024 -> 4,096 -> 16,384 slots), to make a throw-away parser load all its kernels (~60 kB,
parsed in well under a millisecond)."""


def warm(engine: Any, parsers: Sequence[Any]) -> None:
    """Load, before a timed run, the compiled code that numba otherwise loads lazily on its first
    call inside it: the order-book parser's kernels (fed a few throw-away lines by a parser of
    the same kind; numba specialises on argument types, never on values) and the engine's view
    readers (one snapshot of every view at line 0).  Without it, ~0.1-0.15 s of LLVM loading
    fell into the first timed batch of ``ddms run`` (two thirds of a 0.22 s run of
    big/finance.csv).  Cost: that loading, once per process; nothing is applied to ``engine``."""
    from ddms.io.orderbook import OrderBookParser

    for kind in {type(p) for p in parsers}:
        if kind is OrderBookParser:
            throwaway = OrderBookParser(brokers=10, source="<warm-up>")
            throwaway.fault_ahead = any(p.fault_ahead for p in parsers if type(p) is kind)
            # two feeds: the first grows its table in place (grow), the second into arrays made
            # ahead on a helper thread (blank, grow_into) when ddms run's parsers do that
            # (the second as a memoryview with a partial line before it, as ddms run's chunks come:
            # the newline searches for buffers without rfind)
            half = WARM_ORDERBOOK.index(b"4,1200,") + 3
            throwaway.feed(WARM_ORDERBOOK[:half])
            throwaway.feed(memoryview(WARM_ORDERBOOK)[half:])
            throwaway.close()
            throwaway.wait_helpers()   # (their kernels load on them: not inside the timed run)
    engine.snapshot()


def prefetch(batches: Iterable[EventBatch], depth: int = 2) -> Iterator[EventBatch]:
    """``batches``, read (parsed) by a background thread up to ``depth`` batches ahead, so that
    parsing the next chunk of a file overlaps applying this one: the order-book parser's kernel
    and the engine's compiled apply loop (and its input check) both run without the GIL, so with
    a second core end to end approaches the slower of parsing and applying instead of their sum.
    (While the apply loop held the GIL the two strictly took turns: the reader thread needs the
    GIL for the few Python steps around its kernel, and got it only once the consumer waited.)

    The thread starts here but reads nothing until the first batch is asked for: ``ddms run``
    calls this before its clock, so the thread's start (~0.1 ms, and on a busy machine as long as
    the new thread waits for a core) is not on the run's critical path; what is timed starts
    with the first read.

    Order, errors and the end of input are as without it: a batch carrying an error is yielded
    in its place, and an exception of the reader is raised here at the point it happened.
    Closing the generator early (an error or Ctrl-C while applying) stops the thread after the
    batch it is reading; a generator dropped unstarted lets its thread end.  Not for runs that
    save the reader's state with the engine's (checkpoints): the reader is ahead of the engine by
    up to ``depth`` batches.  Cost: one thread and a queue hand-off per batch (~10 us)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    go = threading.Event()
    done = object()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        go.wait()
        if stop.is_set():
            return
        try:
            for b in batches:
                if not put((b, None)):
                    return
        except BaseException as e:  # noqa: BLE001 - re-raised in the consuming thread
            put((None, e))
            return
        put((done, None))

    thread = threading.Thread(target=read, name="ddms-prefetch", daemon=True)
    thread.start()
    out = _consume(q, stop, go, thread, done)
    weakref.finalize(out, _release, stop, go)   # dropped without being started: let the thread end
    return out


def _release(stop: threading.Event, go: threading.Event) -> None:
    stop.set()
    go.set()


def _consume(q: queue.Queue, stop: threading.Event, go: threading.Event, thread: threading.Thread,
             done: object) -> Iterator[EventBatch]:
    """The consuming side of :func:`prefetch`: starts the reading at the first ``next``."""
    go.set()
    try:
        while True:
            item, error = q.get()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        _release(stop, go)
        thread.join()
