"""Read-only live views over a running program's maps.

A view object never copies: reading it reads the engine's maps as they are now, so a callback
reading any view sees exactly the state after the event that fired it.  Writes raise ViewError.

Reads from another thread while one applies: the compiled apply loop runs without the GIL (so
that a reader thread parses the next chunk meanwhile, :func:`ddms.runtime.driver.prefetch`), so a
read from a thread other than the applying one goes through the engine's ``read`` hook
(``Engine._at_boundary``): it waits for the end of the applying thread's current chunk (a line
boundary, at most ~1-4 ms) and is taken there, never from a half-updated map.  On the applying
thread (a callback) or with no thread applying it is taken at once (cost: a thread id test, and
a lock when no thread applies).

Tables: ``view.to_arrow()`` / ``view.to_pandas()`` copy a view out (key columns, then a value
column named after the view; :mod:`ddms.runtime.export`), and a view speaks the Arrow C stream
interface, so ``pa.table(view)`` (and pandas 3's ``pd.DataFrame.from_arrow(view)``) work too.  A grouped
view is a ``Mapping`` from keys to values, so ``pd.DataFrame(view)`` sees its keys only: use
``view.to_pandas()``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import numpy as np

from ddms.errors import ViewError
from ddms.io.symbols import symbol_name, symbol_value
from ddms.m3.ir import MapDecl
from ddms.runtime.typedio import table_dump, table_get, table_len

T = TypeVar("T")
Read = Callable[[Callable[[], T]], T]
"""How a view reads its map: ``read(take)`` runs ``take()`` at an input line boundary (the engine's
``_at_boundary``)."""


def _now(take: Callable[[], T]) -> T:
    """The read hook of a view without an engine (nothing applies concurrently): at once."""
    return take()


def _py(x: float, typ: str) -> float | int | str:
    """A map's number as its declared type shows it: a symbol's name, an ``int`` (only where the
    number is integral: NaN, SQL NULL, and anything else stay floats, so no value is ever cut),
    else a float."""
    if typ == "string":        # a symbol column: its name (ddms.io.symbols)
        return symbol_name(x)
    x = float(x)
    return int(x) if typ == "int" and x.is_integer() else x


def _null(x: float, typ: str) -> float | int | None:
    """A scalar view's value: SQL NULL (NaN in the maps) is ``None``."""
    return None if x != x else _py(x, typ)


class _Exported:
    """What every view class shares: copies out as Arrow and pandas tables
    (:mod:`ddms.runtime.export`: key columns, then the value column(s); a scalar view is one
    row).  Cost: O(rows) per copy."""

    __slots__ = ()

    def to_arrow(self):
        """The view now, as a pyarrow Table."""
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


class ScalarView(_Exported):
    """A view without GROUP BY keys: ``.value`` is its current value, ``None`` for SQL NULL
    (``MAX`` over an empty book; NaN in the maps).  ``columns`` names its one value column.
    Cost: O(1) per read."""

    __slots__ = ("name", "decl", "_read", "_cell", "columns")

    def __init__(self, name: str, decl: MapDecl, cell: np.ndarray, read: Read = _now) -> None:
        self.columns: tuple[str, ...] = (name,)   # (before _cell: the view is read-only after)
        self.name, self.decl, self._read, self._cell = name, decl, read, cell

    @property
    def value(self) -> float | int | None:
        return _null(self._read(self._cell.item), self.decl.value_type)

    def __setattr__(self, key: str, value: Any) -> None:
        if hasattr(self, "_cell"):
            raise ViewError(f"view {self.name} is read-only")
        object.__setattr__(self, key, value)

    def __repr__(self) -> str:
        return f"ScalarView({self.name}={self.value!r})"


class GroupedView(_Exported, Mapping):
    """A grouped view as a read-only ``Mapping`` from key tuples to values (only nonzero groups
    are present).  Lookups cost one hash probe; iteration copies the live map's keys first
    (O(groups)).  Every read goes through :mod:`ddms.runtime.typedio` (cached compiled code)."""

    def __init__(self, name: str, decl: MapDecl, table, read: Read = _now) -> None:
        self.name, self.decl, self._table, self._read = name, decl, table, read
        self._types = [c.type for c in decl.keys]
        self._strings = "string" in self._types
        self.columns: tuple[str, ...] = (*(c.name for c in decl.keys), name)
        """The names of the key columns, then of the value column."""

    def _key(self, key: Any) -> tuple[float, ...]:
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) != len(self._types):
            raise KeyError(key)
        return tuple(symbol_value(k) if t == "string" else float(k) for k, t in zip(key, self._types, strict=True))

    def show_key(self, key: tuple[float, ...]) -> tuple:
        """A key as the maps hold it, as callbacks receive it: symbol ids become names (other
        keys stay floats, as they always were).  O(1) without a symbol key."""
        if not self._strings:
            return key
        return tuple(symbol_name(x) if t == "string" else x for x, t in zip(key, self._types, strict=True))

    def __getitem__(self, key: Any) -> float | int:
        k = self._key(key)
        found, value = self._read(lambda: table_get(self._table, k))
        if not found:
            raise KeyError(key)
        return _py(value, self.decl.value_type)

    def __contains__(self, key: Any) -> bool:
        try:
            k = self._key(key)
        except (KeyError, TypeError, ValueError):
            return False
        return self._read(lambda: table_get(self._table, k))[0]

    def _items(self) -> list[tuple[tuple, float | int]]:
        """(key tuple, value) of every group, converted to the declared types."""
        keys, vals = self._read(lambda: table_dump(self._table, len(self._types)))
        vt = self.decl.value_type
        return [(tuple(_py(x, t) for x, t in zip(k, self._types, strict=True)), _py(v, vt))
                for k, v in zip(keys.tolist(), vals.tolist(), strict=True)]

    def __iter__(self) -> Iterator[tuple]:
        for k, _ in self._items():
            yield k

    def __len__(self) -> int:
        return self._read(lambda: table_len(self._table))

    def rows(self) -> list[list[float | int]]:
        """``[key1, ..., value]`` rows sorted by key (the CLI's JSON form)."""
        return sorted([*k, v] for k, v in self._items())

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __delitem__(self, key: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __repr__(self) -> str:
        return f"GroupedView({self.name}, {len(self)} groups)"

class TableView(_Exported, Mapping):
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


class TopView(_Exported, Mapping):
    """A view whose rows are cut and ordered when read (:class:`ddms.m3.ir.Limit`: a price ladder,
    the n best orders, ``SELECT DISTINCT``): a read-only ``Mapping`` from key tuples to values (a
    number with one value column, a tuple with several, ``()`` for a view of keys alone) holding
    exactly the rows shown, iterated in the ORDER BY's order; ``rows()`` are ``[key..., value...]``
    in that order.  The maps behind it keep every group; each read takes the groups present (the
    nonzero keys of the map of row counts), orders them and keeps the ranks asked for.
    Cost per read: O(g log g) for g groups (a copy of the row counts and of each value map, in
    compiled code, then a sort); for a ladder whose row counts are a range tree (ordered by its
    last key, partitioned by the others), O(n log g): n selects by rank and a probe per value.
    The updates are the grouped view's, O(1) or O(log n)."""

    def __init__(self, name: str, limit, keys: tuple[str, ...], rows_decl: MapDecl, rows_table,
                 parts: dict[str, GroupedView], read: Read = _now,
                 ranked: Callable[[], list[tuple[float, ...]]] | None = None) -> None:
        self.name, self.limit, self.key_names, self._read = name, limit, keys, read
        self._ranked = ranked
        self.decl, self._rows_table, self.parts = rows_decl, rows_table, parts
        self.key_types = [c.type for c in rows_decl.keys]
        self._types = self.key_types
        self.columns: tuple[str, ...] = (*keys, *parts)

    def _take(self) -> list[tuple[tuple, tuple]]:
        """(key, raw values) of the rows shown, in order (at a line boundary)."""
        if self._ranked is not None:   # the keys by rank from a range tree, then a probe per value
            ranked = self._ranked

            def by_rank() -> list[tuple[tuple, tuple]]:
                return [(k, tuple(float(table_get(p._table, k)[1]) for p in self.parts.values())) for k in ranked()]
            return self._read(by_rank)

        def take():
            width = len(self.key_types)
            keys, counts = table_dump(self._rows_table, width)
            dumps = [table_dump(p._table, width) for p in self.parts.values()]
            return keys, counts, dumps
        keys, counts, dumps = self._read(take)
        values = [dict(zip(map(tuple, k.tolist()), v.tolist(), strict=True)) for k, v in dumps]
        present = [tuple(k) for k, c in zip(keys.tolist(), counts.tolist(), strict=True) if c != 0.0]
        return self.limit.cut([(k, tuple(m.get(k, 0.0) for m in values)) for k in present])

    def _shown(self) -> list[tuple[tuple, tuple]]:
        """The rows shown, keys and values converted to their declared types, in order."""
        types = [p.decl.value_type for p in self.parts.values()]
        return [(tuple(_py(x, t) for x, t in zip(k, self.key_types, strict=True)),
                 tuple(_py(x, t) for x, t in zip(v, types, strict=True))) for k, v in self._take()]

    def _one(self, vals: tuple) -> Any:
        return vals[0] if len(self.parts) == 1 else vals

    @property
    def value(self) -> None:
        """None: a view of rows has no single value (read its rows)."""
        return None

    def __getitem__(self, key: Any) -> Any:
        k = key if isinstance(key, tuple) else (key,)
        for got, vals in self._shown():
            if got == k or tuple(float(x) if not isinstance(x, str) else x for x in got) == \
                    tuple(float(x) if not isinstance(x, str) else x for x in k):
                return self._one(vals)
        raise KeyError(key)

    def __iter__(self) -> Iterator[tuple]:
        for k, _ in self._shown():
            yield k

    def __len__(self) -> int:
        return len(self._take())

    def items_now(self) -> list[tuple[tuple, Any]]:
        """(key, value) of every row shown, in order, from one read."""
        return [(k, self._one(v)) for k, v in self._shown()]

    def raw(self) -> dict[tuple, tuple]:
        """Key -> raw values (floats, as the maps hold them) of the rows shown: what change
        detection compares between lines."""
        return dict(self._take())

    def rows(self) -> list[list]:
        """``[key..., value...]`` rows in the view's order (the CLI's JSON form)."""
        return [[*k, *v] for k, v in self._shown()]

    def __setitem__(self, key: Any, value: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __delitem__(self, key: Any) -> None:
        raise ViewError(f"view {self.name} is read-only")

    def __repr__(self) -> str:
        return f"TopView({self.name}, columns {list(self.columns)}, {len(self)} rows)"
