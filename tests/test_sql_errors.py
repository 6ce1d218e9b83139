"""SQL outside the supported subset is rejected with an error that names the file and line,
quotes the SQL and points at the unsupported part -- never a wrong program."""

from __future__ import annotations

import re

import pytest

from ddms.compiler import compile_sql
from ddms.errors import DdmsError, SqlError

HEADER = ("CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)\n"
          "  FROM FILE 'f.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10');\n")

CASES = [
    ("SELECT DISTINCT price * 2 AS p FROM bids", "SELECT DISTINCT takes columns", "price * 2 AS p"),
    ("SELECT SUM(b.volume) AS v FROM bids b LEFT JOIN bids c ON b.id = c.id", "LEFT JOIN", "LEFT JOIN"),
    ("SELECT SUM(volume) AS v FROM bids ORDER BY v", "a view without GROUP BY is one row", "ORDER BY v"),
    ("SELECT SUM(volume) AS v FROM bids LIMIT 3", "LIMIT/OFFSET without ORDER BY keeps arbitrary rows", "LIMIT 3"),
    ("SELECT SUM(b.qty) AS v FROM bids b", "bids has no column qty" if False else "b has no column qty", "b.qty"),
    ("SELECT SUM(volume) AS v FROM trades", "unknown stream or table TRADES", "trades"),
    ("SELECT price FROM bids", "needs an aggregate output", "SELECT price"),
    ("SELECT SUM(b.volume) AS v FROM bids b WHERE b.volume > (SELECT SUM(x.n) FROM "
     "(SELECT broker_id, COUNT(*) AS n FROM bids c WHERE c.price > b.price GROUP BY broker_id) x)",
     "GROUP BY subquery in FROM cannot refer to columns of an enclosing query", "(SELECT broker_id"),
    ("SELECT SUM(x.n) AS s FROM (SELECT broker_id, COUNT(*) AS n FROM bids GROUP BY broker_id HAVING COUNT(*) > 1) x",
     "HAVING is supported in a view's top-level SELECT only", "(SELECT broker_id"),
    ("SELECT broker_id, SUM(volume) AS v FROM bids", "neither aggregated nor in GROUP BY", "broker_id"),
    ("SELECT price / broker_id AS b, COUNT(*) AS n FROM bids GROUP BY price / broker_id", "a key that can be NULL",
     "price / broker_id"),
    ("SELECT SUM(volume) AS v FROM bids WHERE price > (SELECT price FROM bids)",
     "must select exactly one aggregate", "(SELECT price"),
    ("SELECT SUM(volume) AS v FROM bids WHERE", "not valid SQL", "SELECT"),
    ("SELECT SUM(v) AS s FROM (SELECT volume AS v FROM bids ORDER BY price DESC, id LIMIT 1, 3) x",
     "LIMIT m, n (MySQL's form) is not supported", "LIMIT 1, 3"),
    ("UPDATE bids SET volume = 1", "expected CREATE STREAM/TABLE, CREATE VIEW or SELECT", "UPDATE"),
]


@pytest.mark.parametrize("sql,reason,fragment", CASES)
def test_unsupported_sql_is_rejected_with_location(sql: str, reason: str, fragment: str) -> None:
    with pytest.raises(SqlError) as info:
        compile_sql(HEADER + sql + ";", "views.sql")
    msg = str(info.value)
    assert reason in msg
    assert msg.startswith("views.sql:3:"), msg  # the SELECT is on line 3 of the file
    assert fragment.split()[0] in msg
    assert isinstance(info.value, DdmsError)


def test_bad_stream_declaration_names_the_line() -> None:
    with pytest.raises(DdmsError, match=r"views.sql:2"):
        compile_sql("SELECT SUM(volume) AS v FROM bids;\nCREATE STREAM bids(t FLOAT, id BANANA);", "views.sql")


def test_duplicate_view_names_are_rejected_at_the_second() -> None:
    with pytest.raises(SqlError, match="two views are named V") as info:
        compile_sql(HEADER + "SELECT SUM(volume) AS v FROM bids;\nSELECT COUNT(*) AS v FROM bids;", "views.sql")
    assert str(info.value).startswith("views.sql:4:1:")


@pytest.mark.parametrize("sql,where,reason", [
    ("SELECT SUM(volume) AS v FROM bids WHERE price > ", "3:47", "missing for GT"),
    ("SELECT SUM(volume) AS v\nFROM bids WHERE (price > 3", "4:26", "Expecting )"),
    ("SELECT SUM(volume) AS select FROM bids", "3:23", "Unexpected token"),
])
def test_syntax_errors_point_at_the_token(sql: str, where: str, reason: str) -> None:
    """sqlglot's parse errors point at the token where parsing stopped, and name expression
    classes as SQL does rather than as Python classes."""
    with pytest.raises(SqlError, match=re.escape(reason)) as info:
        compile_sql(HEADER + sql + ";", "views.sql")
    assert str(info.value).startswith(f"views.sql:{where}: not valid SQL") and "<class" not in str(info.value)


@pytest.mark.parametrize("options,reason,fragment", [
    ("book := 'aks', brokers := '10'", "orderbook option book := 'aks' must be 'bids' or 'asks'", "book := 'aks'"),
    ("book := 'bids', brokers := 'ten'", "orderbook option brokers := 'ten' must be an integer >= 1",
     "brokers := 'ten'"),
    ("book := 'bids', brokers := '0'", "orderbook option brokers := '0' must be an integer >= 1", "brokers := '0'"),
    ("brokers := '10'", "orderbook stream sells needs book := 'bids' or 'asks'", "orderbook ("),
])
def test_bad_orderbook_options_name_the_line(options: str, reason: str, fragment: str) -> None:
    """A misspelt book would feed the stream nothing (silently empty views) and a bad brokers
    would fail only at run time: both are SQL errors at the declaration, before any compile."""
    sql = ("CREATE STREAM sells(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)\n"
           f"  FROM FILE 'f.csv' LINE DELIMITED orderbook ({options});\n"
           "SELECT SUM(volume) AS v FROM sells;")
    with pytest.raises(SqlError) as info:
        compile_sql(sql, "views.sql")
    msg = str(info.value)
    assert msg.startswith("views.sql:2:"), msg
    assert reason in msg
    line, caret = msg.splitlines()[1:3]
    assert line.strip().startswith("FROM FILE 'f.csv'")
    assert line[caret.index("^"):].startswith(fragment), msg


def test_a_view_failing_an_internal_check_is_refused_at_that_view(monkeypatch) -> None:
    """A view the translation accepts but whose program fails a check (qa34: a top-N of levels with
    a scalar subquery in its WHERE, "variable X0 is used before it is bound") is refused at that
    view with file:line:column, not as an unlocated internal error.  The check is made to fail for
    the second view's maps here, so that the test does not depend on that bug."""
    import ddms.compiler as compiler
    from ddms.errors import ProgramError

    real = compiler.verify

    def verify(program) -> None:
        if any(m.name.startswith("SECOND") for m in program.maps):
            raise ProgramError("initial value of SECOND: variable X0 is used before it is bound")
        real(program)

    monkeypatch.setattr(compiler, "verify", verify)
    sql = HEADER + "CREATE VIEW first AS SELECT MAX(price) AS p FROM bids;\n" \
                   "CREATE VIEW second AS SELECT SUM(volume) AS v FROM bids;\n"
    with pytest.raises(SqlError, match=r"^v\.sql:\d+:\d+: view SECOND: this combination is not supported "
                                       r"\(an internal check failed: initial value of SECOND") as e:
        compile_sql(sql, "v.sql")
    assert "SELECT SUM(volume) AS v FROM bids" in str(e.value).splitlines()[1]
