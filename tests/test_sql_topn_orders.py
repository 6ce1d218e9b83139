"""Top-N over single orders (issue 21, item 4): the n best orders of a side, ordered by price and
then by the order id, which every reader keeps unique among the resting orders (``ORDER BY price
DESC, id LIMIT n``, or ``ROW_NUMBER() OVER ([PARTITION BY g] ORDER BY price DESC, id) <= n``),
then aggregated: volume, VWAP, count, imbalance of the top orders, per broker with PARTITION BY.
Every view is checked against DuckDB running the same SQL after every line of hypothesis streams
(empty books, fewer than n orders, several orders at the cut price, deletes and partial
executions of the cut order, repeated ids that replace an order), through the reference
interpreter and the numba engine (one program for all views: one compile), and on the tiny and
standard data.

Without the tie-break (``ORDER BY price DESC LIMIT n`` over orders) SQL keeps an arbitrary
subset of the orders tying at the n-th price: rejected with its location and the hint."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, check_stream, line
from viewcheck import REAL_RUNS, check_real_data

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.m3.printer import print_program
from ddms.runtime.engine import Engine

# The engine's program of these views costs minutes of cold compile, more than the default suite can
# spend on one file: its engine runs are ``-m slow``; the default suite runs every view through the
# interpreter, and the order top-N on the engine through the cookbook's top5_bid_order_volume.sql
# (tests/test_cookbook.py).


def _top(side: str, cols: str, order: str, n: int, where: str = "") -> str:
    return f"(SELECT {cols} FROM {side} {where} ORDER BY {order} LIMIT {n})"


BID5 = f"(SELECT SUM(b.volume) FROM {_top('bids', 'price, volume', 'price DESC, id', 5)} b)"
ASK5 = f"(SELECT SUM(a.volume) FROM {_top('asks', 'price, volume', 'price, id', 5)} a)"

VIEWS = {
    "BID5_VOL": f"SELECT SUM(t.volume) AS bid5_vol FROM {_top('bids', 'price, volume', 'price DESC, id', 5)} t",
    "ASK4_VWAP": "SELECT SUM(t.price * t.volume) / SUM(t.volume) AS ask4_vwap FROM "
                 f"{_top('asks', 'price, volume', 'price ASC, id ASC', 4)} t",
    "BID3_N": f"SELECT COUNT(*) AS bid3_n FROM {_top('bids', 'id', 'price DESC, id DESC', 3)} t",
    # ORDER BY names the select list's aliases
    "BID2_IDS": f"SELECT SUM(t.oid) AS bid2_ids FROM {_top('bids', 'id AS oid, price AS px', 'px DESC, oid', 2)} t",
    "IMBALANCE5": f"SELECT ({BID5} - {ASK5}) / ({BID5} + {ASK5}) AS imbalance5",
    # Feldera's shape, per broker and not
    "RN_BROKER": "SELECT t.broker_id, SUM(t.volume) AS rn_broker FROM (SELECT broker_id, volume, ROW_NUMBER() "
                 "OVER (PARTITION BY broker_id ORDER BY price DESC, id) AS rn FROM bids) t WHERE rn <= 2 "
                 "GROUP BY t.broker_id",
    "RN_ASK3": "SELECT COUNT(*) AS rn_ask3 FROM (SELECT price, ROW_NUMBER() OVER (ORDER BY price, id DESC) AS rn "
               "FROM asks) t WHERE 4 > t.rn",
    # a WHERE inside the cut and one outside it
    "BIG3": "SELECT SUM(t.volume) AS big3 FROM "
            f"{_top('bids', 'price, volume', 'price DESC, id', 3, 'WHERE volume > 10')} t WHERE t.volume < 35",
    # a WITH query read twice, each reference cut by its own filter
    "CTE_RN": "WITH o AS (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC, id) AS rn FROM bids) "
              "SELECT (SELECT SUM(a.volume) FROM o a WHERE a.rn <= 3) - (SELECT SUM(b.volume) FROM o b "
              "WHERE b.rn <= 1) AS cte_rn",
    # RANK() keeps every row tying at the cut: exact whatever the tie-break (none, or not unique)
    "RANK3": "SELECT SUM(t.volume) AS rank3 FROM (SELECT volume, RANK() OVER (ORDER BY price DESC) AS r FROM bids) t "
             "WHERE r <= 3",
    "RANK_VOL": "SELECT t.broker_id, COUNT(*) AS rank_vol FROM (SELECT broker_id, RANK() OVER (PARTITION BY broker_id "
                "ORDER BY price, volume DESC) AS r FROM asks) t WHERE r <= 2 GROUP BY t.broker_id",
    # ordered by the unique id alone: no tie-break needed
    "LAST3": f"SELECT SUM(t.volume) AS last3 FROM {_top('bids', 'volume', 'id DESC', 3)} t",
    "TOP1": f"SELECT SUM(t.volume) AS top1 FROM {_top('asks', 'volume', 'price, id', 1)} t",
    "NONE": f"SELECT SUM(t.volume) AS none FROM {_top('bids', 'volume', 'price DESC, id', 0)} t",
}
SCRIPT = HEADER + ";\n".join(VIEWS.values()) + ";"
# the engine runs the shapes that differ in generated code (directions, partition, unique key
# alone); the other views differ in translation only, which the interpreter checks.  Fewer views
# compile faster: the whole set took minutes of numba compile on a loaded machine
ENGINE_VIEWS = {k: VIEWS[k] for k in ("BID5_VOL", "ASK4_VWAP", "BID3_N", "RN_BROKER", "LAST3", "RANK_VOL")}


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<topn-orders>").program


@pytest.fixture(scope="module")
def engine_program():
    program = compile_sql(HEADER + ";\n".join(ENGINE_VIEWS.values()) + ";", "<topn-orders-engine>").program
    Engine(program)   # compile once (numba caches it for the engines of each example)
    return program


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(program, stream: list[tuple]) -> None:
    check_stream(program, stream, views=VIEWS)


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_stream(engine_program, stream, Engine(engine_program), views=ENGINE_VIEWS)


@pytest.mark.slow
def test_cut_order_changes(engine_program) -> None:
    """Four orders at the cut price with the 5th best among them, the cut order deleted (the next
    by id moves in), executed in part, replaced by a repeated id at another price, orders above
    the cut deleted (the cut moves down a level), fewer than 5 orders, then an empty book."""
    stream = [("B", 1, 10, 200), ("B", 2, 5, 150), ("B", 6, 7, 101), ("B", 3, 3, 101), ("B", 5, 4, 101),
              ("B", 4, 2, 101), ("B", 7, 9, 99), ("S", 8, 1, 102), ("D", 5, 0, 0), ("E", 6, 3, 0),
              ("B", 4, 8, 150), ("D", 1, 0, 0), ("D", 2, 0, 0), ("F", 3, 0, 0), ("D", 6, 0, 0),
              ("D", 4, 0, 0), ("D", 7, 0, 0), ("F", 8, 0, 0), ("B", 1, 1, 1)]
    check_stream(engine_program, stream, Engine(engine_program), views=ENGINE_VIEWS)


def test_tiny(program) -> None:
    """Every line of tiny: every view through the interpreter."""
    from conftest import data_file
    from viewcheck import check_lines
    check_lines(program, data_file("tiny").read_text().splitlines(), VIEWS)


@pytest.mark.slow
def test_tiny_engine(engine_program) -> None:
    """Every line of tiny: the engine's views."""
    from conftest import data_file
    from viewcheck import check_lines
    lines = data_file("tiny").read_text().splitlines()
    check_lines(engine_program, lines, ENGINE_VIEWS, interp=False, engine=Engine(engine_program), check_state=True)




def test_duplicate_keys_keep_the_rows_ranked_n_or_better() -> None:
    """Rows inserted directly (no reader: the id need not be unique) with equal (price, id): the
    view keeps the rows ranked n or better, all of those tying at the cut, which DuckDB computes
    as ``RANK() OVER (ORDER BY price DESC, id) <= n`` (``LIMIT n`` when the keys are unique)."""
    import pyarrow as pa
    from oracle import Duck
    from viewcheck import view_rows

    from ddms.m3.interpreter import Interpreter
    prog = compile_sql(HEADER + VIEWS["BID5_VOL"] + ";").program
    rows = [(0.0, 1.0, 1.0, 10.0, 100.0), (0.0, 2.0, 2.0, 4.0, 101.0), (0.0, 2.0, 2.0, 4.0, 101.0),
            (0.0, 3.0, 3.0, 6.0, 100.0), (0.0, 3.0, 3.0, 6.0, 100.0), (0.0, 1.0, 1.0, 7.0, 100.0),
            (0.0, 9.0, 9.0, 1.0, 99.0)]
    it, duck = Interpreter(prog), Duck()
    for i, r in enumerate(rows):
        it.apply("+", "BIDS", r)
        table = pa.table({c: [x[j] for x in rows[:i + 1]] for j, c in enumerate(("t", "id", "broker_id", "volume",
                                                                                  "price"))})

        class Book:
            version = i

            def tables(self, table=table):
                return table, table
        want = duck.query(Book(), "SELECT COALESCE(SUM(volume), 0) FROM (SELECT volume, RANK() OVER (ORDER BY "
                                  "price DESC, id) AS r FROM bids) WHERE r <= 5")[0][0]
        got = view_rows(prog, "BID5_VOL", it.view("BID5_VOL")).get((), (0.0,))[0]
        assert math.isclose(got, want), (i, got, want)


def test_cut_is_a_select_by_weighted_rank() -> None:
    """The decision travels as IR: the cut is the price of the 5th order, ``Max(v, counts[v], 5
    rows)`` over the ORDERED map of orders per price, the orders above it a range sum, and those
    at it a threshold search in the tree of orders per id at that price: O(log n), stated by
    ``ddms compile``."""
    from ddms.backend.codegen import generate
    from ddms.backend.cost import view_costs
    prog = compile_sql(HEADER + VIEWS["BID5_VOL"] + ";\n" + VIEWS["RN_BROKER"] + ";").program
    text = print_program(prog)
    assert "5 rows)}" in text and "2 rows)}" in text, text
    g = generate(prog)
    plan = "\n".join(g.plan)
    assert "row 5) via range map: O(log n)" in plan and "threshold sum" in plan and "loop over" not in plan, plan
    assert "btree_nth_row(" in g.source
    assert [c for _, c, *_ in view_costs(prog, g.plan)] == ["O(log n)", "O(log n)"]


def test_rank_by_rows_in_m3_text() -> None:
    """``Max(x, m[x], n rows)`` prints and parses back; the interpreter reads the n-th row."""
    from ddms.m3.parser import parse_program
    prog = compile_sql(HEADER + VIEWS["RN_BROKER"] + ";").program
    text = print_program(prog)
    assert print_program(parse_program(text)) == text


def test_btree_nth_row_against_a_sorted_list() -> None:
    """The select by weighted rank against the rows written out and sorted, from both ends, past
    the end (the last key of the order), on an empty tree and after deletes."""
    from ddms.storage.btree import btree_add, btree_check, btree_new, btree_nth_row
    rng = np.random.default_rng(5)
    pool = btree_new(8, 1)
    root = -1
    found, _ = btree_nth_row(pool, root, 1, True)
    assert not found
    counts: dict[float, int] = {}
    for step in range(400):
        k = float(rng.integers(0, 60))
        d = 1 if counts.get(k, 0) == 0 or rng.random() < 0.6 else -1
        root = btree_add(pool, root, k, float(d))
        counts[k] = counts.get(k, 0) + d
        if step % 20:
            continue
        btree_check(pool, root)
        rows = sorted(x for x, c in counts.items() for _ in range(c))
        for n in (1, 2, 3, 7, len(rows), len(rows) + 3):
            for largest in (True, False):
                found, key = btree_nth_row(pool, root, n, largest)
                if not rows:
                    assert not found
                    continue
                order = rows[::-1] if largest else rows
                assert found and key == order[min(n, len(order)) - 1], (n, largest, key)


@pytest.mark.parametrize("sql, reason", [
    ("SELECT SUM(t.volume) AS v FROM (SELECT price, volume FROM bids ORDER BY price DESC LIMIT 5) t",
     "needs a unique tie-break"),
    ("SELECT SUM(t.volume) AS v FROM (SELECT volume, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM bids) t "
     "WHERE rn <= 5", "ORDER BY price DESC, id LIMIT n"),
    ("SELECT SUM(t.volume) AS v FROM (SELECT price, volume FROM bids ORDER BY price DESC, volume LIMIT 5) t",
     "ends its tie-break with a column the stream keeps unique (id"),
    ("SELECT SUM(t.volume) AS v FROM (SELECT price, volume FROM bids ORDER BY price DESC, id, t LIMIT 5) t",
     "ends its tie-break with a column the stream keeps unique"),
    ("SELECT SUM(t.v) AS v FROM (SELECT b.volume AS v FROM bids b, asks a WHERE a.id = b.id ORDER BY b.price DESC, "
     "b.id LIMIT 5) t", "reads one stream"),
    ("SELECT SUM(t.v) AS v FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC, "
     "price LIMIT 5) t", "ordered by one column"),
])
def test_rejected_with_location(sql: str, reason: str) -> None:
    with pytest.raises(SqlError) as e:
        compile_sql(HEADER + sql + ";", "v.sql")
    msg = str(e.value)
    assert reason in msg and "v.sql:6:" in msg and "^" in msg, msg


def test_ids_are_unique_per_symbol_only() -> None:
    """In a stream of several instruments the order id is unique per symbol: a top-N over its
    orders must be partitioned by symbol (then it compiles, O(log n))."""
    header = HEADER.replace("price FLOAT)", "price FLOAT, symbol VARCHAR)")
    with pytest.raises(SqlError, match="PARTITION BY symbol"):
        compile_sql(header + f"SELECT SUM(t.volume) AS v FROM {_top('bids', 'volume', 'price DESC, id', 5)} t;")
    prog = compile_sql(header + "SELECT t.symbol, SUM(t.volume) AS v FROM (SELECT symbol, volume, ROW_NUMBER() OVER "
                       "(PARTITION BY symbol ORDER BY price DESC, id) AS rn FROM bids) t WHERE rn <= 5 "
                       "GROUP BY t.symbol;").program
    from ddms.backend.codegen import generate
    from ddms.backend.cost import view_costs
    assert view_costs(prog, generate(prog).plan)[0][1] == "O(log n)"


def test_no_unique_column_without_an_order_book_reader() -> None:
    """A stream read by the csv adaptor declares no unique column: the tie-break is refused."""
    header = ("CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)\n"
              "  FROM FILE 'x.csv' LINE DELIMITED csv;\n")
    with pytest.raises(SqlError, match="none here"):
        compile_sql(header + "SELECT SUM(t.volume) AS v FROM (SELECT volume FROM bids ORDER BY price DESC, id "
                    "LIMIT 5) t;", "v.sql")


def test_an_adhoc_query_matches_a_view_of_its_own_rank_only() -> None:
    """``Engine.query`` answers from a view whose program is the query's up to names: a top 3
    is not a top 5 (the rank is part of the match; it was dropped for levels before)."""
    from ddms.runtime.viewmatch import matching_view
    levels = "SELECT SUM(t.v) AS x FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC " \
             "LIMIT {n}) t"
    orders = f"SELECT SUM(t.volume) AS x FROM {_top('bids', 'volume', 'price DESC, id', '{n}')} t"
    for sql in (levels, orders):
        five = compile_sql(HEADER + sql.format(n=5) + ";").program
        assert matching_view(five, compile_sql(HEADER + sql.format(n=5) + ";").program) is not None
        assert matching_view(five, compile_sql(HEADER + sql.format(n=3) + ";").program) is None


FALLBACK_M3 = """
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP C(float)[P: float];
DECLARE MAP ROW3(float)[];
DECLARE MAP MIN_ROW2(float)[];
DECLARE MAP LEVEL3(float)[];
DECLARE QUERY ROW3 := ROW3;
DECLARE QUERY MIN_ROW2 := MIN_ROW2;
DECLARE QUERY LEVEL3 := LEVEL3;
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  C[PRICE] += 1.0;
  ROW3[] := Max(X, C[X], 3 rows);
  MIN_ROW2[] := Min(X, C[X], 2 rows);
  LEVEL3[] := Max(X, C[X], 3);
}
ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  C[PRICE] += -1.0;
  ROW3[] := Max(X, C[X], 3 rows);
  MIN_ROW2[] := Min(X, C[X], 2 rows);
  LEVEL3[] := Max(X, C[X], 3);
}
"""


def test_rank_without_a_range_tree_matches_the_interpreter() -> None:
    """A map not ORDERED (here declared so; in SQL, one wanted ordered on two keys) is read by
    sorting its slice: the n-th row and the n-th key agree with the interpreter after every
    insert and delete, with several rows per key, fewer rows than the rank, an empty map."""
    from ddms.m3.interpreter import Interpreter
    from ddms.m3.parser import parse_program
    from ddms.runtime.engine import Engine as _Engine
    prog = parse_program(FALLBACK_M3)
    engine, it = _Engine(prog), Interpreter(prog)
    assert "by sorting its keys" in "\n".join(engine.generated.plan)
    rng = np.random.default_rng(11)
    live: list[float] = []
    for _ in range(300):
        if live and rng.random() < 0.4:
            p = live.pop(int(rng.integers(len(live))))
            sign = "-"
        else:
            p = float(rng.integers(1, 9))
            live.append(p)
            sign = "+"
        row = (0.0, 1.0, 1.0, 1.0, p)
        (engine.insert if sign == "+" else engine.delete)("BIDS", *row)
        it.apply(sign, "BIDS", row)
        for name in ("ROW3", "MIN_ROW2", "LEVEL3"):
            want = it.view(name)
            got = engine.views[name].value
            assert (got is None and math.isnan(want)) or got == want, (name, sorted(live), got, want)


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, ENGINE_VIEWS, run)


def test_slice_path_prefetch_runs_only_for_deep_pools() -> None:
    """The tree of order ids per price level is one leaf at distinct prices: run_batch prefetches
    its leaf, and the path stages (a root-table probe each) run only while ``btree_deep`` says the
    pool's trees average two leaves (codegen ``PF_PATH``)."""
    from ddms.backend.codegen import PF_HASH_AHEAD, PF_LEAF, PF_PATH, PF_ROOT_AHEAD, PF_ROOT_LEAF, generate

    program = compile_sql((REPO / "examples" / "sql" / "top5_bid_order_volume.sql").read_text()).program
    src = generate(program).source
    run = src[src.index("def run_batch"):]
    assert "deep = big and (btree_deep(" in run

    def stage(flag: str, level: str) -> str:
        return (rf"if {flag} and i \+ \d+ < end:\n\s+"
                rf"prefetch\(bst, bpfr, brelmap, brel, bsign, bcols, i \+ \d+, {level}, i \+ \d+\)")

    def path_stage(level: str) -> str:   # counted in events that update a per-slice tree (PF_EVENTS)
        return (r"if k \+ \d+ < m:\n\s+"
                rf"prefetch\(bst, bpfr, brelmap, brel, bsign, bcols, btev\[k \+ \d+\], {level}, k \+ \d+\)")
    assert "if deep and k < m and btev[k] == i:" in run and "tev = pf_events(" in run
    for lv in range(PF_PATH):   # the root, then one level below the ring's ref per stage
        assert re.search(path_stage(str(min(lv, 1))), run)
    # the leaf: from the ring after the path stages, from the root (PF_ROOT_AHEAD events ahead)
    # when they did not run, the root table's row loaded before that (PF_HASH_AHEAD)
    assert re.search(path_stage(str(PF_LEAF)), run)
    assert re.search(stage("big and not deep", str(PF_ROOT_LEAF)).replace(r"i \+ \d+", f"i \\+ {PF_ROOT_AHEAD}"), run)
    assert f"if lvl == {PF_ROOT_LEAF}:" in src
    assert f"if bigh and i + {PF_HASH_AHEAD} < end:" in run and "bigh = ht_big(st.or_" in run
    assert "ht_prefetch(borrow(st.or_TOP5_BID_ORDER_VOLUME_m3)" in src


@pytest.mark.slow
def test_top_orders_on_a_big_book_of_one_order_levels() -> None:
    """A book of 4,000 resting orders at distinct prices: the per-level trees (one leaf of one order
    each) outgrow ``btree.PF_LEAVES``, so run_batch prefetches their leaves, but they are not deep;
    the top-5 order volume equals the resting orders' after a steady stream, and the state checks."""
    from bench.common import parse_continue
    from bench.synth import book_stream
    from ddms.io.orderbook import OrderBookParser
    from ddms.storage.btree import btree_big, btree_deep

    program = compile_sql((REPO / "examples" / "sql" / "top5_bid_order_volume.sql").read_text()).program
    build, steady = book_stream(4000, 3000, both_sides=True, seed=5)
    parser = OrderBookParser(brokers=10)
    batches = parse_continue(parser, build) + parse_continue(parser, steady)
    engine = Engine(program)
    relmap = engine.relmap(("bids", "asks"))
    live: dict[float, tuple[float, float]] = {}
    for b in batches:
        engine.apply(b, relmap)
        for rel, sign, row in zip(b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), strict=True):
            if relmap[rel] == 0:   # bids: id -> (price, volume)
                if sign > 0:
                    live[row[1]] = (row[4], row[3])
                else:
                    del live[row[1]]
    st_ = engine.state
    pool, roots = st_.op_TOP5_BID_ORDER_VOLUME_m3, st_.or_TOP5_BID_ORDER_VOLUME_m3
    assert btree_big(pool) and not btree_deep(pool, roots[-1, 0])
    engine._check()
    best = sorted(live.items(), key=lambda kv: (-kv[1][0], kv[0]))[:5]
    want = sum(v for _, (_, v) in best)
    assert math.isclose(engine.views["TOP5_BID_ORDER_VOLUME"].value, want, rel_tol=1e-12)
