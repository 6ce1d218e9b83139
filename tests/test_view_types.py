"""Views show their numbers with DuckDB's types (ddms.m3.maptypes): a ``broker_id INT`` key is
``3``, not ``3.0``; ``COUNT(*)`` and ``COUNT(DISTINCT ...)`` are integers; SUM of a FLOAT column,
AVG, MIN/MAX of a price are floats.  Compared with the column types DuckDB gives the same SELECT
over tables typed as the streams declare them, for every cookbook view and every view of the SQL
test families; and the types change nothing but the shown numbers: the generated code of a
program with every type reset to ``float`` is the same code."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pyarrow as pa
import pytest
from test_cookbook import FILES, SYMBOL_FILES
from test_cookbook import VIEWS as BOOK_VIEWS
from test_sql_expressions import VIEWS as EXPRESSION_VIEWS
from test_sql_funcs import VIEWS as FUNC_VIEWS
from test_sql_general import VIEWS as GENERAL_VIEWS
from test_sql_ladder import VIEWS as LADDER_VIEWS
from test_sql_minmax import HEADER
from test_sql_minmax import VIEWS as MINMAX_VIEWS
from test_sql_topn import VIEWS as TOPN_VIEWS

from ddms.backend.codegen import generate
from ddms.compiler import compile_sql
from ddms.m3.ir import Program
from ddms.runtime.engine import Engine
from ddms.runtime.export import view_table

INTEGER = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"}
# SUM over a LIMIT 0 top-N is the constant 0 (SUM over nothing is 0 by the documented convention,
# where DuckDB has a NULL DOUBLE): an integer constant, the one view whose type differs
CONSTANT = {"NONE"}
VIEWS = {**BOOK_VIEWS, **EXPRESSION_VIEWS, **GENERAL_VIEWS, **MINMAX_VIEWS, **TOPN_VIEWS, **FUNC_VIEWS,
         **LADDER_VIEWS}


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect(config={"threads": 1})
    schema = pa.schema([("t", pa.float64()), ("id", pa.int64()), ("broker_id", pa.int64()),
                        ("volume", pa.float64()), ("price", pa.float64())])
    for name in ("bids", "asks"):
        con.register(name, schema.empty_table())
    return con


def shown_types(program: Program, name: str) -> list[str]:
    """The declared type of each column a view shows: keys, then values."""
    q = next(q for q in program.queries if q.name == name)
    maps = [program.map(m) for _, m in q.columns] if q.columns else [program.map(q.map)]
    if q.limit is not None and q.limit.keys_only:   # SELECT DISTINCT: the keys alone
        return [c.type for c in maps[0].keys]
    return [c.type for c in maps[0].keys] + [m.value_type for m in maps]


@pytest.mark.parametrize("name", sorted(set(VIEWS) - CONSTANT))
def test_view_types_are_duckdbs(duck, name: str) -> None:
    sql = VIEWS[name]
    program = compile_sql(HEADER + sql + ";").program
    [query] = program.queries
    want = ["int" if str(t) in INTEGER else "float" for t in duck.sql(sql).types]
    assert shown_types(program, query.name) == want, sql


def test_types_change_only_what_views_show() -> None:
    """Resetting every map's types to float gives the same generated code (the module's
    docstring, the printed program, aside)."""
    program = compile_sql(HEADER + ";\n".join(BOOK_VIEWS.values()) + ";", "<cookbook>").program
    plain = replace(program, maps=tuple(replace(m, value_type="float", keys=tuple(replace(c, type="float")
                                                                                     for c in m.keys))
                                        for m in program.maps))
    assert plain != program

    def code(p: Program) -> str:
        src = generate(p).source
        return src[src.index('"""', src.index('"""') + 3):]

    assert code(program) == code(plain)


def test_json_rows_show_integers(tmp_path) -> None:
    """Through the interpreter-free engine and the Arrow export: an int key and a COUNT are ints,
    the float columns floats."""
    [path] = [p for p in FILES if p.stem == "broker_book" and p not in SYMBOL_FILES]
    engine = Engine(path)
    for i, (oid, price) in enumerate([(1, 100.0), (12, 101.5), (2, 99.0)]):
        engine.insert("BIDS", float(i), float(oid), float(oid % 10), 10.0, price)
    rows = engine.snapshot()["BROKER_BOOK"]
    assert rows == [[1, 10.0, 1, 100.0, 100.0], [2, 20.0, 2, 101.5, 99.0]]
    assert [type(x) for x in rows[1]] == [int, float, int, float, float]
    table = view_table(engine.views["BROKER_BOOK"])
    assert [str(t) for t in table.schema.types] == ["int64", "double", "int64", "double", "double"]
