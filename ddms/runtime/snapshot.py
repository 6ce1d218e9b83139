"""Frozen copies of views as of one input line boundary (what ``Engine.snapshot`` returns).

A :class:`Snapshot` maps view names to values in the CLI's JSON form -- a number for a scalar
view (NaN for NULL), ``[key..., value]`` rows sorted by key for a grouped view -- and is
immutable all the way down: the mapping, the row lists and each row refuse every mutation
(``ViewError``), so a snapshot handed to another thread or kept for later cannot change and
cannot be changed.  ``position`` is the input line after which the views had these values.

The engine copies what was asked in compiled code at a line boundary (a scalar: one load; a
grouped view: its keys and values, O(groups) at ~10 ns a group); the rows are built from that
copy afterwards, by the thread that asked (O(g log g) Python), so the writer is held up only by
the compiled copy.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from ddms.errors import ViewError
from ddms.runtime.views import _py


def _frozen(*_a: Any, **_k: Any) -> NoReturn:
    raise ViewError("a snapshot is read-only")


class FrozenRow(list):
    """One ``[key..., value]`` row of a snapshot; compares equal to the same list."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen   # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _frozen   # type: ignore[assignment]

    def __hash__(self) -> int:   # immutable: hashable like a tuple
        return hash(tuple(self))


class FrozenRows(FrozenRow):
    """A grouped view's rows, sorted by key."""

    __slots__ = ()


class Snapshot(dict):
    """View name -> value (number or :class:`FrozenRows`) as of input line ``position``."""

    __slots__ = ("position",)
    __setitem__ = __delitem__ = __ior__ = _frozen   # type: ignore[assignment]
    pop = popitem = clear = update = setdefault = _frozen   # type: ignore[assignment]

    def __init__(self, position: int, values: dict[str, Any]) -> None:
        dict.__init__(self, values)
        object.__setattr__(self, "position", position)

    def __setattr__(self, key: str, value: Any) -> None:
        _frozen()

    def __repr__(self) -> str:
        return f"Snapshot(line {self.position}, {dict.__repr__(self)})"


def grouped_rows(keys: np.ndarray, vals: np.ndarray, key_types: list[str], value_type: str) -> FrozenRows:
    """The sorted frozen rows of a grouped view from copies of its keys (n x k) and values."""
    rows = [FrozenRow([*(_py(x, t) for x, t in zip(k, key_types, strict=True)), _py(v, value_type)])
            for k, v in zip(keys.tolist(), vals.tolist(), strict=True)]
    rows.sort()
    return FrozenRows(rows)
