"""Replaying batches into an engine with checkpoints every N input lines.

Used by ``ddms run``, the tests and the benchmarks, so that they all cut input the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import numpy as np

from ddms.io.events import EventBatch, split_lines
from ddms.runtime.engine import Engine

__all__ = ["replay", "split_lines"]


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
