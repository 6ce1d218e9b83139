"""The event loop: multiplexes any number of input sources into one engine, so that the
callbacks of all views fire in one order, one input line at a time.

A source is an iterable or an asyncio async iterable of :class:`EventBatch` objects together with
the relation names of its batches (``("bids", "asks")`` for order-book sources).  ``run`` drains
synchronous sources round-robin, one batch at a time; ``run_async`` does the same for a mix of
sync and async sources, applying each batch as it arrives (a batch is never interleaved with
another, so each line stays atomic).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddms.io.events import EventBatch
from ddms.runtime.engine import Engine


@dataclass
class _Source:
    batches: Any
    relmap: np.ndarray
    name: str


class EventLoop:
    """Feeds batches from several sources to one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sources: list[_Source] = []

    def add_source(self, batches: Iterable[EventBatch] | AsyncIterable[EventBatch],
                   relations: tuple[str, ...] = ("bids", "asks"), name: str | None = None) -> None:
        self.sources.append(_Source(batches, self.engine.relmap(relations), name or f"source{len(self.sources)}"))

    def run(self) -> None:
        """Drain every synchronous source, alternating between them batch by batch."""
        if any(isinstance(s.batches, AsyncIterable) for s in self.sources):
            raise TypeError("an async source needs run_async()")
        active = [(iter(s.batches), s.relmap) for s in self.sources]
        while active:
            still = []
            for it, relmap in active:
                batch = next(it, None)
                if batch is None:
                    continue
                self.engine.apply(batch, relmap)
                still.append((it, relmap))
            active = still

    async def run_async(self) -> None:
        """Consume all sources concurrently; each batch is applied as soon as it arrives."""
        lock = asyncio.Lock()

        async def pump(s: _Source) -> None:
            if isinstance(s.batches, AsyncIterable):
                async for batch in s.batches:
                    async with lock:
                        self.engine.apply(batch, s.relmap)
            else:
                for batch in s.batches:
                    async with lock:
                        self.engine.apply(batch, s.relmap)
                    await asyncio.sleep(0)
        await asyncio.gather(*(pump(s) for s in self.sources))
