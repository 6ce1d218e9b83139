"""Top-N views (issue 21, item 4): the n best price levels of a side, written ``ORDER BY price
DESC LIMIT n`` in a FROM subquery (Materialize's shape) or ``ROW_NUMBER() OVER ([PARTITION BY
..] ORDER BY price DESC) AS rn`` filtered ``rn <= n`` (Feldera's shape), then aggregated: volume,
VWAP, imbalance of the top levels, per broker with PARTITION BY.  Every view is checked against
DuckDB running the same SQL after every line of hypothesis streams (empty books, books with fewer
than n levels, several orders at the n-th level, deletes and partial executions there), through
the reference interpreter and the numba engine (one program for all views: one compile).

Order-level top-N (``ORDER BY price LIMIT n`` over single orders) is rejected with its location:
orders tying at the n-th price make SQL keep an arbitrary subset of them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, check_stream, line
from viewcheck import REAL_RUNS, check_real_data

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.m3.printer import print_program
from ddms.runtime.engine import Engine

BID_LEVELS = "SELECT price, SUM(volume) AS v FROM bids GROUP BY price"
ASK_LEVELS = "SELECT price, SUM(volume) AS v FROM asks GROUP BY price"
BID3 = f"(SELECT SUM(t.v) FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 3) t)"
ASK3 = f"(SELECT SUM(u.v) FROM ({ASK_LEVELS} ORDER BY price LIMIT 3) u)"

VIEWS = {
    "BID3_VOL": f"SELECT SUM(t.v) AS bid3_vol FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 3) t",
    "ASK3_VOL": f"SELECT SUM(t.v) AS ask3_vol FROM ({ASK_LEVELS} ORDER BY price ASC LIMIT 3) t",
    "BID3_VWAP": f"SELECT SUM(t.price * t.v) / SUM(t.v) AS bid3_vwap FROM ({BID_LEVELS} ORDER BY price DESC "
                 "LIMIT 3) t",
    "IMBALANCE3": f"SELECT ({BID3} - {ASK3}) / ({BID3} + {ASK3}) AS imbalance3",
    "BID3_RN": "SELECT SUM(t.v) AS bid3_rn FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY "
               "price DESC) AS rn FROM bids GROUP BY price) t WHERE t.rn <= 3",
    "ASK2_RN": "SELECT SUM(t.n) AS ask2_rn FROM (SELECT price, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY price) "
               "AS rn FROM asks GROUP BY price) t WHERE 3 > rn",
    "BROKER_TOP2": "SELECT t.broker_id, SUM(t.v) AS broker_top2 FROM (SELECT broker_id, price, SUM(volume) AS v, "
                   "ROW_NUMBER() OVER (PARTITION BY broker_id ORDER BY price DESC) AS rn FROM bids "
                   "GROUP BY broker_id, price) t WHERE rn <= 2 GROUP BY t.broker_id",
    "LEVELS3": f"SELECT COUNT(*) AS levels3 FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 3) t",
    "CUT3": f"SELECT MIN(t.price) AS cut3 FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 3) t",
    "BIG3": "SELECT SUM(t.v) AS big3 FROM (SELECT price, SUM(volume) AS v FROM bids WHERE volume > 10 "
            "GROUP BY price ORDER BY price DESC LIMIT 3) t WHERE t.v > 15",
    # a level's sum read twice, times its price: the key moves into one of the two sums
    "SQUARES2": f"SELECT SUM(t.price * t.v * t.v) AS squares2 FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 2) t",
    # the cut over a plain selection of a GROUP BY subquery's columns (renamed on the way)
    "NESTED_RN": "SELECT SUM(t.vol) AS nested_rn FROM (SELECT l.price AS px, l.v AS vol, ROW_NUMBER() OVER "
                 f"(ORDER BY l.price DESC) AS rn FROM ({BID_LEVELS}) l) t WHERE t.rn <= 2",
    "NESTED_LIMIT": f"SELECT SUM(t.px * t.v) AS nested_limit FROM (SELECT l.price AS px, l.v FROM ({ASK_LEVELS}) l "
                    "ORDER BY l.price LIMIT 2) t",
    # a WITH query read twice, each reference cut by its own filter
    "CTE_RN": "WITH lv AS (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM bids "
              "GROUP BY price) SELECT (SELECT SUM(a.v) FROM lv a WHERE a.rn <= 3) - (SELECT SUM(b.v) FROM lv b "
              "WHERE b.rn <= 1) AS cte_rn",
    "TOP1": f"SELECT SUM(t.v) AS top1 FROM ({ASK_LEVELS} ORDER BY price LIMIT 1) t",
    "NONE": f"SELECT SUM(t.v) AS none FROM ({BID_LEVELS} ORDER BY price DESC LIMIT 0) t",
}
SCRIPT = HEADER + ";\n".join(VIEWS.values()) + ";"


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<topn>").program


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # compile once (numba caches it for the engines of each example)
    return program


SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream, views=VIEWS)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_stream(engine_program, stream, Engine(engine_program), views=VIEWS)


def test_cut_level_changes(engine_program) -> None:
    """Several orders at the 3rd level, that level deleted (the 4th moves up), executed in part,
    fewer than 3 levels left, then the book emptied."""
    stream = [("B", 1, 10, 200), ("B", 2, 5, 150), ("B", 3, 7, 101), ("B", 4, 3, 101), ("B", 5, 4, 100),
              ("B", 6, 2, 99), ("S", 7, 1, 102), ("S", 8, 2, 150), ("D", 3, 0, 0), ("E", 4, 1, 0),
              ("D", 4, 0, 0), ("D", 1, 0, 0), ("D", 5, 0, 0), ("D", 6, 0, 0), ("D", 2, 0, 0),
              ("F", 7, 0, 0), ("F", 8, 0, 0), ("B", 1, 1, 1)]
    check_stream(engine_program, stream, Engine(engine_program), views=VIEWS)


def test_tiny(program) -> None:
    from conftest import data_file
    rows = []
    for text in data_file("tiny").read_text().splitlines():
        t, oid, a, v, p = text.split(",")
        rows.append((a, int(oid), int(float(v)), int(float(p))))
    check_stream(program, rows, views=VIEWS)


def test_cut_is_a_select_by_rank() -> None:
    """The decision travels as IR: the cut is ``Max(v, counts[v], n)`` over the ORDERED map of
    order counts per level, and the volume of the top levels a range sum up to it: O(log n)."""
    prog = compile_sql(HEADER + VIEWS["BID3_VOL"] + ";").program
    text = print_program(prog)
    assert "ORDERED" in text and ", 3)}" in text, text
    from ddms.backend.codegen import generate
    from ddms.backend.cost import view_costs
    g = generate(prog)
    plan = "\n".join(g.plan)
    assert "rank 3) via range map: O(log n)" in plan and "loop over" not in plan, plan
    assert "btree_nth(" in g.source
    assert view_costs(prog, g.plan)[0][1] == "O(log n)"
    # programs without a top-N are generated as before (the rank search is imported only when used)
    plain = generate(compile_sql(HEADER + "SELECT MAX(price) AS best FROM bids;").program).source
    assert "btree_nth" not in plain


@pytest.mark.parametrize("sql, reason", [
    ("SELECT SUM(t.volume) AS v FROM (SELECT price, volume FROM bids ORDER BY price DESC LIMIT 5) t",
     "rows that tie at the cut"),
    ("SELECT SUM(t.volume) AS v FROM (SELECT price, volume, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn "
     "FROM bids) t WHERE rn <= 5", "rows that tie at the cut"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY v DESC "
     "LIMIT 5) t", "ordered and partitioned by its GROUP BY columns"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price) t",
     "ORDER BY without LIMIT"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price LIMIT 5) t",
     "LIMIT without ORDER BY"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price "
     "ORDER BY price DESC, v LIMIT 5) t", "ordered by one column"),
    ("SELECT SUM(volume) AS v FROM bids ORDER BY price LIMIT 5", "a view without GROUP BY is one row"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn "
     "FROM bids GROUP BY price) t", "keeps the first rows of a top-N"),
    ("SELECT SUM(t.v * t.rn) AS v FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price DESC) "
     "AS rn FROM bids GROUP BY price) t WHERE rn <= 3", "can only be filtered"),
    ("SELECT SUM(t.volume) AS v FROM (SELECT volume, DENSE_RANK() OVER (ORDER BY price DESC, id) AS rn FROM bids) t "
     "WHERE rn <= 3", "DENSE_RANK() is supported ordered by one column"),
    ("SELECT SUM(t.v) AS v FROM (SELECT broker_id, price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price "
     "DESC) AS rn FROM bids GROUP BY broker_id, price) t WHERE rn <= 3", "partitions by the others"),
])
def test_rejected_with_location(sql: str, reason: str) -> None:
    with pytest.raises(SqlError) as e:
        compile_sql(HEADER + sql + ";", "v.sql")
    msg = str(e.value)
    assert reason in msg and "v.sql:6:" in msg and "^" in msg, msg


def test_standard_every_25th_line(engine_program) -> None:
    """Every top-N view against DuckDB after every 25th line of the standard data, and the last."""
    from conftest import shared_file
    from viewcheck import check_lines
    lines = shared_file("data", "orderbook", "standard", "finance.csv").read_text().splitlines()
    engine = Engine(engine_program)
    check_lines(engine_program, lines, VIEWS, interp=False, engine=engine, every=25)
    engine._check()


def test_rank_in_m3_text() -> None:
    """``Max(x, m[x], n)`` prints and parses back; a rank must be a positive integer."""
    from ddms.errors import M3SyntaxError
    from ddms.m3.parser import parse_program
    prog = compile_sql(HEADER + VIEWS["BROKER_TOP2"] + ";").program
    text = print_program(prog)
    assert print_program(parse_program(text)) == text
    with pytest.raises(M3SyntaxError, match="rank"):
        parse_program(text.replace(", 2)}", ", 0)}", 1))


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, VIEWS, run)
