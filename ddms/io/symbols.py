"""Instrument symbols as numbers: the ``symbol`` column of the ``bids``/``asks`` relations.

Why numbers: every event column is a float64 (:class:`~ddms.io.events.EventBatch`) and the
compiled maps are keyed by floats, so a symbol travels as an integer id.  Why a hash and not a
counter: the id of a name must not depend on which file, process, Spark worker or checkpoint saw
it first, so :func:`symbol_id` is a pure function of the name (52 bits of BLAKE2b of its UTF-8
bytes: an integer exact in float64, the same everywhere).  The names are remembered per process
(:func:`symbol_name` maps an id back; every reader registers the names it emits), so views print
``"BTCUSDT"``, never a number; two names with the same id (odds about n^2 / 2^53) are refused
rather than confused.

Cost: one hash of the name per distinct symbol a reader meets (readers cache the id), a dict
lookup per id shown.
"""

from __future__ import annotations

import hashlib
import math
import threading

import numpy as np

__all__ = ["SYMBOL_TYPE", "known_symbols", "symbol_id", "symbol_name", "symbol_value", "with_symbol"]

SYMBOL_TYPE = "string"
"""The M3 column type of a symbol column (SQL ``VARCHAR``): values are :func:`symbol_id` ids."""

_NAMES: dict[int, str] = {}
_LOCK = threading.Lock()


def symbol_id(name: str) -> int:
    """The id of symbol ``name`` (as the venue spells it; case matters), registered so that
    :func:`symbol_name` finds it.  Raises ValueError for an empty name or a hash collision."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"a symbol is a non-empty string, got {name!r}")
    sid = int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big") >> 12
    old = _NAMES.get(sid)
    if old is None:
        with _LOCK:
            old = _NAMES.setdefault(sid, name)
    if old != name:
        raise ValueError(f"symbols {old!r} and {name!r} have the same id {sid}")
    return sid


def symbol_name(sid: float) -> str:
    """The name of id ``sid``; an id never registered in this process reads ``"#<id>"`` (a
    symbol column filled by hand with numbers)."""
    if isinstance(sid, float) and (math.isnan(sid) or sid != int(sid)):
        return f"#{sid}"
    return _NAMES.get(int(sid), f"#{int(sid)}")


def symbol_value(x: str | float) -> float:
    """A key as a map holds it: a name becomes its id, a number stays (lookups in views)."""
    return float(symbol_id(x)) if isinstance(x, str) else float(x)


def known_symbols() -> dict[int, str]:
    """A copy of this process's id -> name table."""
    return dict(_NAMES)


def with_symbol(cols: np.ndarray, sid: int | np.ndarray) -> np.ndarray:
    """``cols`` (n x 5 book rows) with the symbol id(s) as a sixth column (a copy)."""
    out = np.empty((cols.shape[0], cols.shape[1] + 1))
    out[:, :-1] = cols
    out[:, -1] = sid
    return out
