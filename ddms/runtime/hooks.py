"""The door from compiled code back to Python.

Generated ``run_batch`` loops call :func:`fire_hook` (inside ``numba.objmode``) after an input
line that changed a watched view; it finds the engine by a small integer id (numba cannot hold a
reference to a Python object) and lets it run the callbacks.  Cost: about 1.5 us per call plus the
callbacks themselves; lines that change no watched view never get here.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

_ENGINES: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


def register(engine: Any) -> int:
    """A fresh id under which compiled code can reach ``engine`` (held weakly)."""
    key = next(_IDS)
    _ENGINES[key] = engine
    return key


def fire_hook(engine_id: int, event: int) -> None:
    """Called from compiled code: event ``event`` of the current batch ended a line that changed
    a watched view."""
    _ENGINES[engine_id]._line_changed(event)
