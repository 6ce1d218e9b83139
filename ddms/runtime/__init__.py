"""The DDMS runtime: the engine that applies event batches to a compiled program, live read-only
views, callbacks, futures and the event loop that multiplexes input sources."""

from ddms.runtime.engine import Engine
from ddms.runtime.loop import EventLoop
from ddms.runtime.views import GroupedView, ScalarView

__all__ = ["Engine", "EventLoop", "GroupedView", "ScalarView"]
