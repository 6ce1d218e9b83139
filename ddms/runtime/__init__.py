"""The DDMS runtime: the engine that applies event batches to a compiled program, live read-only
views, callbacks, futures and the event loop that multiplexes input sources.

:class:`EventLoop` is imported on first use (module ``__getattr__``): it needs asyncio, which
``ddms run`` and the other batch paths never use (asyncio and the ssl and socket modules it
imports cost ~15 ms of every start)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ddms.runtime.engine import Engine
from ddms.runtime.views import GroupedView, ScalarView

if TYPE_CHECKING:
    from ddms.runtime.loop import EventLoop

__all__ = ["Engine", "EventLoop", "GroupedView", "ScalarView"]


def __getattr__(name: str) -> Any:
    if name == "EventLoop":
        from ddms.runtime.loop import EventLoop

        return EventLoop
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
