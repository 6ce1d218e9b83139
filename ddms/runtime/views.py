"""Read-only live views over a running program's maps.

A view object never copies: reading it reads the engine's maps as they are now, so a callback
reading any view sees exactly the state after the event that fired it.  Writes raise ViewError.

Tables: ``view.to_arrow()`` / ``view.to_pandas()`` copy a view out (key columns, then a value
column named after the view; :mod:`ddms.runtime.export`), and a view speaks the Arrow C stream
interface, so ``pa.table(view)`` (and pandas 3's ``pd.DataFrame.from_arrow(view)``) work too.  A grouped
view is a ``Mapping`` from keys to values, so ``pd.DataFrame(view)`` sees its keys only: use
``view.to_pandas()``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from ddms.errors import ViewError
from ddms.m3.ir import MapDecl
from ddms.runtime.typedio import dict_dump, dict_get, dict_len


def _py(x: float, typ: str) -> float | int:
    return int(x) if typ == "int" and not math.isnan(x) else float(x)


class ScalarView:
    """A view without GROUP BY keys: ``.value`` is its current value (NaN means SQL NULL).
    Cost: O(1) per read."""

    __slots__ = ("name", "decl", "_cell")

    def __init__(self, name: str, decl: MapDecl, cell: np.ndarray) -> None:
        self.name, self.decl, self._cell = name, decl, cell

    @property
    def value(self) -> float | int:
        return _py(self._cell[0], self.decl.value_type)

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_cell"):
            raise ViewError(f"view {self.name} is read-only")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ScalarView({self.name}={self.value!r})"

    def to_arrow(self):
        """The view now, as a pyarrow Table (see :mod:`ddms.runtime.export`)."""
        from ddms.runtime.export import view_table
        return view_table(self)

    def to_pandas(self):
        """The view now, as a pandas DataFrame (pandas is optional: a DependencyError says how
        to install it)."""
        from ddms.runtime.export import to_pandas
        return to_pandas(self.to_arrow())

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow C stream interface (``pa.table(view)``, polars, ``DataFrame.from_arrow``)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)


class GroupedView(Mapping):
    """A grouped view as a read-only ``Mapping`` from key tuples to values (only nonzero groups
    are present).  Lookups cost one hash probe; iteration copies the live map's keys first
    (O(groups)).  Every read goes through :mod:`ddms.runtime.typedio` (cached compiled code)."""

    def __init__(self, name: str, decl: MapDecl, table) -> None:
        self.name, self.decl, self._table = name, decl, table
        self._types = [c.type for c in decl.keys]

    def _key(self, key: Any) -> tuple[float, ...]:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self._types):
            raise KeyError(key)
        return tuple(float(k) for k in key)

    def __getitem__(self, key: Any) -> float | int:
        found, value = dict_get(self._table, self._key(key))
        if not found:
            raise KeyError(key)
        return _py(value, self.decl.value_type)

    def __contains__(self, key: Any) -> bool:
        try:
            return dict_get(self._table, self._key(key))[0]
        except (KeyError, TypeError, ValueError):
            return False

    def _items(self) -> list[tuple[tuple, float | int]]:
        """(key tuple, value) of every group, converted to the declared types."""
        keys, vals = dict_dump(self._table, len(self._types))
        vt = self.decl.value_type
        return [(tuple(_py(x, t) for x, t in zip(k, self._types, strict=True)), _py(v, vt))
                for k, v in zip(keys.tolist(), vals.tolist(), strict=True)]

    def __iter__(self) -> Iterator[tuple]:
        for k, _ in self._items():
            yield k

    def __len__(self) -> int:
        return dict_len(self._table)

    def rows(self) -> list[list[float | int]]:
        """``[key1, ..., value]`` rows sorted by key (the CLI's JSON form)."""
        return sorted([*k, v] for k, v in self._items())

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __delitem__(self, key: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __repr__(self) -> str:
        return f"GroupedView({self.name}, {len(self)} groups)"

    def to_arrow(self):
        """The view now, as a pyarrow Table (see :mod:`ddms.runtime.export`)."""
        from ddms.runtime.export import view_table
        return view_table(self)

    def to_pandas(self):
        """The view now, as a pandas DataFrame (pandas is optional: a DependencyError says how
        to install it)."""
        from ddms.runtime.export import to_pandas
        return to_pandas(self.to_arrow())

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow C stream interface (``pa.table(view)``, polars, ``DataFrame.from_arrow``)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)
