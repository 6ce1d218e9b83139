"""Ad-hoc SQL over a program's base relations, evaluated once by DuckDB (the only product module
that imports duckdb).

``Engine.query(sql)`` takes a copy of the kept relations at a line boundary
(:mod:`ddms.runtime.relations`), hands them to DuckDB as Arrow tables named after the streams
(``bids``, ``asks``; every column float64, as the engine holds them) and runs the query there.
Cost: the copy, O(rows), plus DuckDB's evaluation; the engine is held up only by the compiled
copy (see ``Engine.snapshot`` for how a copy is taken while another thread applies).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from ddms.errors import ViewError
from ddms.m3.ir import Program


def table_rows(table: pa.Table) -> list[tuple]:
    """The rows of a query result as tuples (columns may share a name: ``SELECT b.price, a.price``)."""
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


def run_query(program: Program, rows: dict[str, np.ndarray], sql: str) -> pa.Table:
    """``sql`` over ``rows`` (stream name -> n x columns array) as DuckDB tables; the result as an
    Arrow table.  A query DuckDB rejects raises :class:`ViewError` with DuckDB's message."""
    con = duckdb.connect()
    try:
        for s in program.streams:
            arr = rows[s.name]
            table = pa.table({c.name.lower(): arr[:, i] for i, c in enumerate(s.columns)})
            con.register(s.name.lower(), table)
        rel = con.sql(sql)
        if rel is None:   # a statement without a result (SET ..., CREATE ...)
            return pa.table({})
        fetch = getattr(rel, "to_arrow_table", None) or rel.arrow   # duckdb 2.x / 1.x
        return fetch()
    except duckdb.Error as e:
        raise ViewError(f"query {sql!r}: {e}") from None
    finally:
        con.close()
