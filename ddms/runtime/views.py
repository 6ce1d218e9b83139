"""Read-only live views over a running program's maps.

A view object never copies: reading it reads the engine's maps as they are now, so a callback
reading any view sees exactly the state after the event that fired it.  Writes raise ViewError.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ddms.errors import ViewError
from ddms.m3.ir import MapDecl


def _py(x: float, typ: str) -> float | int:
    return int(x) if typ == "int" and not math.isnan(x) else float(x)


def _null(x: float, typ: str) -> float | int | None:
    """A scalar view's value: SQL NULL (NaN in the maps) is ``None``."""
    return None if x != x else _py(x, typ)


class ScalarView:
    """A view without GROUP BY keys: ``.value`` is its current value, ``None`` for SQL NULL
    (``MAX`` over an empty book; NaN in the maps).  ``columns`` names its one value column.
    Cost: O(1) per read."""

    __slots__ = ("name", "decl", "_cell", "columns")

    def __init__(self, name: str, decl: MapDecl, cell: np.ndarray) -> None:
        self.columns: tuple[str, ...] = (name,)   # (before _cell: the view is read-only after)
        self.name, self.decl, self._cell = name, decl, cell

    @property
    def value(self) -> float | int | None:
        return _null(self._cell[0], self.decl.value_type)

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_cell"):
            raise ViewError(f"view {self.name} is read-only")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ScalarView({self.name}={self.value!r})"


class GroupedView(Mapping):
    """A grouped view as a read-only ``Mapping`` from key tuples to values (only nonzero groups
    are present).  Lookups cost one hash probe; iteration walks the live map."""

    def __init__(self, name: str, decl: MapDecl, table) -> None:
        self.name, self.decl, self._table = name, decl, table
        self._types = [c.type for c in decl.keys]
        self.columns: tuple[str, ...] = (*(c.name for c in decl.keys), name)
        """The names of the key columns, then of the value column."""

    def _key(self, key: Any) -> tuple[float, ...]:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self._types):
            raise KeyError(key)
        return tuple(float(k) for k in key)

    def __getitem__(self, key: Any) -> float | int:
        k = self._key(key)
        if k not in self._table:
            raise KeyError(key)
        return _py(self._table[k], self.decl.value_type)

    def __contains__(self, key: Any) -> bool:
        try:
            return self._key(key) in self._table
        except (KeyError, TypeError, ValueError):
            return False

    def __iter__(self) -> Iterator[tuple]:
        for k in list(self._table.keys()):
            yield tuple(_py(x, t) for x, t in zip(k, self._types, strict=True))

    def __len__(self) -> int:
        return len(self._table)

    def rows(self) -> list[list[float | int]]:
        """``[key1, ..., value]`` rows sorted by key (the CLI's JSON form)."""
        return sorted([*k, self[k]] for k in self)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __delitem__(self, key: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __repr__(self) -> str:
        return f"GroupedView({self.name}, {len(self)} groups)"


class TableView(Mapping):
    """A view with several value columns (a SELECT with several aggregates): a read-only
    ``Mapping`` from key tuples (``()`` without GROUP BY) to tuples of column values, one entry per
    key present in any column (maps hold nonzero values: a row whose every column is 0 is
    absent; a NULL column reads ``None`` without keys and NaN in rows).  ``columns`` names the
    key columns, then the value columns; ``column(name)`` is one column as its own live view
    (what callbacks and conditions watch: ``engine.on("VIEW.COLUMN", ...)``).  Cost: one read
    per column per lookup; iteration walks every column's map."""

    def __init__(self, name: str, keys: tuple[str, ...], parts: dict[str, ScalarView | GroupedView]) -> None:
        self.name, self.key_names, self.parts = name, keys, parts
        self.columns: tuple[str, ...] = (*keys, *parts)

    def column(self, name: str) -> ScalarView | GroupedView:
        return self.parts[name]

    @property
    def value(self) -> tuple | None:
        """Without keys, the one row's values (``None`` for a NULL column); else None."""
        if self.key_names:
            return None
        return tuple(v.value for v in self.parts.values())  # type: ignore[union-attr]

    def __getitem__(self, key: Any) -> tuple:
        if not self.key_names:
            if key != ():
                raise KeyError(key)
            return tuple(float("nan") if x is None else x for x in self.value or ())
        if not any(key in v for v in self.parts.values()):
            raise KeyError(key)
        return tuple(v.get(key, 0.0) for v in self.parts.values())  # type: ignore[union-attr]

    def __iter__(self) -> Iterator[tuple]:
        if not self.key_names:
            yield ()
            return
        seen: dict[tuple, None] = {}
        for v in self.parts.values():
            for k in v:
                seen.setdefault(k, None)
        yield from seen

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def rows(self) -> list[list]:
        """``[key..., v1, v2, ...]`` rows sorted by key (the CLI's JSON form); one row without keys."""
        return sorted([*k, *self[k]] for k in self)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __delitem__(self, key: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __repr__(self) -> str:
        return f"TableView({self.name}, columns {list(self.columns)}, {len(self)} rows)"
