"""Views (and any named columns) as Arrow tables and pandas DataFrames.

Why Arrow first: pyarrow is already a dependency (Parquet), its tables carry typed columns and
SQL NULL as null, and every data-frame library reads them (``pa.table(view)``, polars,
pandas 3's ``pd.DataFrame.from_arrow(view)`` through the Arrow C stream interface).  pandas stays optional:
:func:`to_pandas` names ``pip install pandas`` when it is missing.

Layout of a view's table: its key columns (named and typed as the program declares them) then
one value column named after the view; rows sorted by key; a scalar view is one row with only
the value column.  NaN values (SQL NULL: AVG over nothing, x / 0) become nulls.

A table is a copy taken when it is made: reading a view while the engine applies a batch in
another thread is not supported (take exports between ``apply`` calls, or from a callback).
Cost: O(groups) Python work per grouped view (one hash probe per key), O(1) per scalar view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ddms.errors import DependencyError

if TYPE_CHECKING:   # pragma: no cover
    import pyarrow as pa

__all__ = ["columns_table", "export_views", "require_pandas", "to_pandas", "view_table"]


def require_pandas():
    """The pandas module, or a :class:`DependencyError` that says how to install it."""
    try:
        import pandas
    except ImportError:
        raise DependencyError("pandas is not installed: pip install pandas (ddms works without it; "
                              "to_arrow() gives the same table as a pyarrow Table)") from None
    return pandas


def to_pandas(table: pa.Table):
    """``table`` as a pandas DataFrame (nulls become NaN/None as pandas reads them)."""
    require_pandas()
    return table.to_pandas()


def _arrow_type(typ: str):
    import pyarrow as pa
    return pa.int64() if typ == "int" else pa.string() if typ == "string" else pa.float64()


def _column(values: list | np.ndarray, typ: str):
    """An Arrow column of ``typ`` ("int"/"float"); NaN is null, and an int column holding a
    NaN (SQL NULL of an integer expression) stays an integer column with nulls.  An int column
    holding a number that is not integral (an ``INT`` stream column fed a fraction through
    ``engine.insert``) is a float column: a value is never cut."""
    import pyarrow as pa
    if typ == "string":      # symbol names (the views convert ids to names)
        return pa.array(list(values), pa.string())
    arr = np.asarray(values, dtype=np.float64)
    nulls = np.isnan(arr)
    if typ == "int" and (arr[~nulls] % 1 == 0).all():
        return pa.array(np.where(nulls, 0, arr).astype(np.int64), pa.int64(), mask=nulls)
    return pa.array(arr, pa.float64(), mask=nulls)


def view_table(view) -> pa.Table:
    """One view (a :class:`~ddms.runtime.views.ScalarView` or
    :class:`~ddms.runtime.views.GroupedView`) as an Arrow table: key columns, then the value
    column named after the view; one row for a scalar view."""
    import pyarrow as pa
    if hasattr(view, "parts"):      # a TableView: several value columns
        return _table_view_table(view)
    decl = view.decl
    if not decl.keys:
        return pa.table({view.name: _column([view.value], decl.value_type)})
    rows = view.rows()
    n = len(decl.keys)
    cols: dict[str, Any] = {}
    for i, c in enumerate(decl.keys):
        name = c.name if c.name not in cols and c.name != view.name else f"{c.name}_{i}"
        cols[name] = _column([r[i] for r in rows], c.type)
    cols[view.name] = _column([r[n] for r in rows], decl.value_type)
    return pa.table(cols)


def _table_view_table(view) -> pa.Table:
    """A view with several value columns: key columns (typed as the columns' maps key them),
    then one column per value column; one row without keys."""
    import pyarrow as pa
    parts = list(view.parts.values())
    rows = view.rows()
    n = len(view.key_names)
    key_types = getattr(view, "key_types", None) or ([c.type for c in parts[0].decl.keys] if n else [])
    cols: dict[str, Any] = {}
    for i, (name, typ) in enumerate(zip(view.key_names, key_types, strict=True)):
        cols[name if name not in cols else f"{name}_{i}"] = _column([r[i] for r in rows], typ)
    for j, (name, part) in enumerate(view.parts.items()):
        cols[name if name not in cols else f"{name}_{n + j}"] = _column([r[n + j] for r in rows],
                                                                       part.decl.value_type)
    return pa.table(cols)


def export_views(views: Mapping[str, Any], names: Iterable[str] | None = None) -> dict[str, pa.Table]:
    """``{name: Arrow table}`` for ``names`` (default: every view) of ``views`` (an engine's
    ``views``).  An unknown name is a :class:`~ddms.errors.ViewError` listing the views."""
    from ddms.errors import ViewError
    chosen = list(views) if names is None else list(names)
    missing = [n for n in chosen if n not in views]
    if missing:
        raise ViewError(f"no view named {', '.join(map(repr, missing))} (views: {', '.join(views)})")
    return {n: view_table(views[n]) for n in chosen}


def columns_table(columns: Mapping[str, Any]) -> pa.Table:
    """Named columns (numpy arrays or lists) as an Arrow table, in the mapping's order."""
    import pyarrow as pa
    return pa.table({k: pa.array(v if isinstance(v, np.ndarray) else list(v)) for k, v in columns.items()})
