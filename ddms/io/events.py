"""Columnar batches of insert/delete events: the one currency between stream adaptors and engine.

A batch holds ``n`` events in arrival order.  Every field value is stored as float64 (integers
up to 2**53 are exact), so one compiled kernel handles every stream schema.  ``line`` gives the
1-based input line each event came from: all events of one line form one atomic update (an
order-book E line is a delete plus an insert), and the engine fires callbacks only between lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from ddms.errors import InputError


@dataclass(frozen=True)
class EventBatch:
    """``rel[i]`` stream index, ``sign[i]`` +1 insert / -1 delete, ``cols[i, :]`` the tuple,
    ``line[i]`` its input line.  ``first_line``..``last_line`` is the span of input lines the
    batch consumed (lines without events included); ``skipped`` counts bad lines skipped in it;
    ``error`` is set when a bad line stopped the batch (its events are those before the line);
    ``recv[i]``, when the format records one, is the receive timestamp (ns since the epoch, int64)
    of event i's line: what :mod:`ddms.io.merge` orders several inputs by (None: the format has
    none, e.g. order-book CSV, whose ``t`` is not a receive time)."""

    rel: np.ndarray
    sign: np.ndarray
    cols: np.ndarray
    line: np.ndarray
    first_line: int
    last_line: int
    skipped: int = 0
    error: InputError | None = field(default=None)
    recv: np.ndarray | None = field(default=None)

    def __len__(self) -> int:
        return int(self.rel.shape[0])

    @staticmethod
    def empty(arity: int, at_line: int = 0) -> EventBatch:
        return EventBatch(np.zeros(0, np.int8), np.zeros(0, np.int8), np.zeros((0, arity)),
                          np.zeros(0, np.int64), at_line + 1, at_line)


@njit(cache=True, nogil=True)   # as the apply loop: a reader thread parses meanwhile
def _first_fault(rel, sign, line, need, width: int, first: int, last: int) -> tuple[int, int]:
    """(index, kind) of the first malformed event, or (-1, 0): kind 1 a relation number outside
    0..len(need)-1, 2 a sign other than +1/-1, 3 a line outside first..last or below its
    predecessor, 4 a relation whose stream needs more than ``width`` columns (``need[r]``).  A
    branch-free pass that vectorizes (~0.7 ns an event, against ~40 ns an event to apply), then
    the search for the culprit only when there is one."""
    n = rel.shape[0]
    nrel = need.shape[0]
    if n == 0:
        return -1, 0
    narrow = False   # a relation too wide for the batch: only then look up need per event
    for r in range(nrel):
        narrow |= need[r] > width
    bad = narrow | (line[0] < first) | (line[n - 1] > last)
    for i in range(n):
        bad |= (rel[i] < 0) | (rel[i] >= nrel) | ((sign[i] != 1) & (sign[i] != -1))
    for i in range(1, n):
        bad |= line[i] < line[i - 1]
    if not bad:
        return -1, 0
    prev = first
    for i in range(n):
        if rel[i] < 0 or rel[i] >= nrel:
            return i, 1
        if sign[i] != 1 and sign[i] != -1:
            return i, 2
        if line[i] < prev or line[i] > last:
            return i, 3
        if need[rel[i]] > width:
            return i, 4
        prev = line[i]
    return -1, 0


_FAULTS = {1: "relation number {} is not in the relation map (0..{})",
           2: "sign {} is neither +1 (insert) nor -1 (delete)",
           3: "input line {} is out of order (batch spans lines {}..{})",
           4: "relation {} has {} columns, its stream needs {}"}


def check_batch(batch: EventBatch, need: np.ndarray) -> None:
    """Raise :class:`InputError` naming the first malformed event of ``batch``: lengths that
    differ, a relation outside ``0..len(need)-1``, a sign other than +-1, lines out of order, an
    event of relation r in a batch narrower than ``need[r]`` (the columns of r's stream; 0 for an
    ignored relation).  Compiled code indexes the arrays without bounds checks, so a batch built
    by hand is checked before any of it is applied.  O(n), one compiled pass."""
    n = len(batch)
    if not (batch.sign.shape == batch.line.shape == (n,) and batch.cols.ndim == 2 and batch.cols.shape[0] == n):
        raise InputError(f"rel, sign, line and cols disagree in length ({n}, {batch.sign.shape}, "
                         f"{batch.line.shape}, {batch.cols.shape})", "<batch>")
    width = batch.cols.shape[1]
    i, kind = _first_fault(batch.rel, batch.sign, batch.line, need, width, batch.first_line, batch.last_line)
    if not kind:
        return
    r = int(batch.rel[i])
    args = {1: (r, len(need) - 1), 2: (int(batch.sign[i]),),
            3: (int(batch.line[i]), batch.first_line, batch.last_line), 4: (r, width, int(need[r]) if kind == 4 else 0)}
    raise InputError(f"event {i}: " + _FAULTS[kind].format(*args[kind]), "<batch>",
                     int(batch.line[i]) if kind != 3 else 0)


def concat(batches: list[EventBatch]) -> EventBatch:
    """Consecutive batches as one (lines ``batches[0].first_line`` .. ``batches[-1].last_line``;
    ``recv`` kept when every batch has it).  O(events): one copy."""
    return EventBatch(np.concatenate([b.rel for b in batches]), np.concatenate([b.sign for b in batches]),
                      np.concatenate([b.cols for b in batches]), np.concatenate([b.line for b in batches]),
                      batches[0].first_line, batches[-1].last_line, sum(b.skipped for b in batches),
                      recv=None if any(b.recv is None for b in batches)
                      else np.concatenate([b.recv for b in batches]))


def split_lines(batch: EventBatch, line: int) -> tuple[EventBatch, EventBatch]:
    """``batch`` cut after input line ``line``: (lines up to it, the rest).  O(log n) to find the
    cut; the pieces are views, not copies.  The error (if any) stays with the tail."""
    cut = int(np.searchsorted(batch.line, line, side="right"))
    recv = batch.recv
    head = EventBatch(batch.rel[:cut], batch.sign[:cut], batch.cols[:cut], batch.line[:cut],
                      batch.first_line, line, 0, None, None if recv is None else recv[:cut])
    tail = EventBatch(batch.rel[cut:], batch.sign[cut:], batch.cols[cut:], batch.line[cut:],
                      line + 1, batch.last_line, batch.skipped, batch.error, None if recv is None else recv[cut:])
    return head, tail


class EventBuffer:
    """Output columns a reader's kernel writes events into (``rel``, ``sign``, ``cols``,
    ``line``; subclasses add columns and list them in ``COLUMNS``); :meth:`grow` doubles them
    (copy) when a chunk has more events than the initial guess.  Shared by the order-book and
    LOBSTER readers."""

    __slots__ = ("rel", "sign", "cols", "line")
    COLUMNS: tuple[str, ...] = __slots__   # every output column, subclasses included

    def __init__(self, n: int) -> None:
        self.rel = np.empty(n, np.int8)
        self.sign = np.empty(n, np.int8)
        self.cols = np.empty((n, 5), np.float64)
        self.line = np.empty(n, np.int64)

    def grow(self, k: int, need: int) -> None:
        n = max(2 * self.rel.shape[0], k + need)
        for name in self.COLUMNS:
            old = getattr(self, name)
            new = np.empty((n,) + old.shape[1:], old.dtype)
            new[:k] = old[:k]
            setattr(self, name, new)
