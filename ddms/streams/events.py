"""Columnar batches of insert/delete events: the one currency between stream adaptors and engine.

A batch holds ``n`` events in arrival order.  Every field value is stored as float64 (integers
up to 2**53 are exact), so one compiled kernel handles every stream schema.  ``line`` gives the
1-based input line each event came from: all events of one line form one atomic update (an
order-book E line is a delete plus an insert), and the engine fires callbacks only between lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ddms.errors import InputError


@dataclass(frozen=True)
class EventBatch:
    """``rel[i]`` stream index, ``sign[i]`` +1 insert / -1 delete, ``cols[i, :]`` the tuple,
    ``line[i]`` its input line.  ``first_line``..``last_line`` is the span of input lines the
    batch consumed (lines without events included); ``skipped`` counts bad lines skipped in it;
    ``error`` is set when a bad line stopped the batch (its events are those before the line)."""

    rel: np.ndarray
    sign: np.ndarray
    cols: np.ndarray
    line: np.ndarray
    first_line: int
    last_line: int
    skipped: int = 0
    error: InputError | None = field(default=None)

    def __len__(self) -> int:
        return int(self.rel.shape[0])

    @staticmethod
    def empty(arity: int, at_line: int = 0) -> EventBatch:
        return EventBatch(np.zeros(0, np.int8), np.zeros(0, np.int8), np.zeros((0, arity)),
                          np.zeros(0, np.int64), at_line + 1, at_line)


def split_lines(batch: EventBatch, line: int) -> tuple[EventBatch, EventBatch]:
    """``batch`` cut after input line ``line``: (lines up to it, the rest).  O(log n) to find the
    cut; the pieces are views, not copies.  The error (if any) stays with the tail."""
    cut = int(np.searchsorted(batch.line, line, side="right"))
    head = EventBatch(batch.rel[:cut], batch.sign[:cut], batch.cols[:cut], batch.line[:cut],
                      batch.first_line, line, 0, None)
    tail = EventBatch(batch.rel[cut:], batch.sign[cut:], batch.cols[cut:], batch.line[cut:],
                      line + 1, batch.last_line, batch.skipped, batch.error)
    return head, tail
