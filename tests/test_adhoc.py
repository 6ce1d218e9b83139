"""``Engine.query``: one-time SQL over the base relations the engine keeps, equal to DuckDB run
directly on relations replayed independently (tests/oracle.py's Book) at the same line, on
hypothesis streams (deletes, partial executions, duplicate ids, ties, empty books); the kept
relations survive a checkpoint; ``ddms run --query`` prints the answer."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import EXAMPLES, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import Book, Duck, top_fraction

from ddms.errors import ViewError
from ddms.io.events import split_lines
from ddms.io.orderbook import OrderBookParser
from ddms.runtime.adhoc import table_rows
from ddms.runtime.engine import Engine

PRICES = [1, 99, 100, 100.5, 101, 150, 1999999900]
IDS = st.integers(1, 15)
line = st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
    st.tuples(st.just("T"), IDS, st.integers(0, 5), st.just(0)),
)
QUERIES = [
    "SELECT COUNT(*) AS n, SUM(volume) AS v, SUM(price * volume) AS pv FROM bids",
    "SELECT broker_id, COUNT(*) AS n, SUM(volume) AS v FROM asks GROUP BY broker_id ORDER BY broker_id",
    "SELECT b.price, a.price FROM bids b, asks a WHERE a.price <= b.price ORDER BY 1, 2",
    f"SELECT SUM(price * volume) AS vwap FROM ({top_fraction('bids', 0.25, '>')})",
    "SELECT MAX(price) AS best_bid, MIN(t) AS first FROM bids",
]


def same_rows(got: list[tuple], want: list[tuple]) -> bool:
    def eq(a, b) -> bool:
        if a is None or b is None:
            return a is None and b is None
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    if len(got) != len(want):
        return False
    return all(len(r) == len(w) and all(map(eq, r, w)) for r, w in zip(got, want, strict=True))


@pytest.fixture(scope="module")
def sobi():
    return Engine(EXAMPLES / "sobi.m3").program


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=60), cuts=st.lists(st.floats(0, 1), min_size=1, max_size=4))
def test_query_equals_duckdb_on_replayed_relations(sobi, stream, cuts):
    lines = [f"{i},{oid},{a},{v},{p}" for i, (a, oid, v, p) in enumerate(stream)]
    batch = OrderBookParser().feed("".join(x + "\n" for x in lines).encode())
    eng = Engine(sobi)
    eng.keep_relations()
    relmap = eng.relmap(("bids", "asks"))
    book, duck, done = Book(), Duck(), 0
    for k in sorted({int(c * len(lines)) for c in cuts} | {len(lines)}):
        head, batch = split_lines(batch, k)
        eng.apply(head, relmap)
        eng._check()
        while done < k:
            book.line(lines[done])
            done += 1
        for sql in QUERIES:
            got = table_rows(eng.query(sql))
            assert same_rows(got, duck.query(book, sql)), (k, sql)


def test_relations_survive_a_checkpoint_and_need_keeping(sobi, tmp_path):
    eng = Engine(sobi)
    with pytest.raises(ViewError, match="keep_relations"):
        eng.query("SELECT 1")
    eng.keep_relations()
    parser = OrderBookParser()
    relmap = eng.relmap(("bids", "asks"))
    eng.apply(parser.feed(b"1,1,B,10,100\n2,2,S,5,101\n3,1,E,4,0\n"), relmap)
    eng.checkpoint(tmp_path / "c.arrow")
    got = Engine(sobi, restore=tmp_path / "c.arrow")
    sql = "SELECT id, volume, price FROM bids UNION ALL SELECT id, volume, price FROM asks ORDER BY 1"
    assert eng.query(sql).to_pylist() == got.query(sql).to_pylist() == [
        {"id": 1.0, "volume": 6.0, "price": 100.0}, {"id": 2.0, "volume": 5.0, "price": 101.0}]
    late = Engine(sobi)
    late.apply(OrderBookParser().feed(b"1,1,B,10,100\n"), relmap)
    with pytest.raises(ViewError, match="after 1 lines"):
        late.keep_relations()
    with pytest.raises(ViewError, match="no_such_table"):
        got.query("SELECT * FROM no_such_table")


def test_cli_query(tmp_path):
    from replay.synthetic import write_orderbook
    data = tmp_path / "book.csv"
    write_orderbook(data, 20_000, seed=9, depth=300)
    sql = "SELECT COUNT(*) AS n, SUM(volume) AS v FROM asks"
    out = subprocess.run([sys.executable, "-m", "ddms", "run", str(EXAMPLES / "sobi.m3"), "--data", str(data),
                          "--every", "8000", "--json", "--query", sql], cwd=REPO, capture_output=True, check=True)
    printed = [json.loads(x) for x in out.stdout.decode().splitlines()]
    queries = [p for p in printed if "query" in p]
    assert [p["line"] for p in queries] == [8000, 16000, 20000]
    lines = data.read_text().splitlines()
    book, duck, done = Book(), Duck(), 0
    for p in queries:
        while done < p["line"]:
            book.line(lines[done])
            done += 1
        assert p["query"]["columns"] == ["n", "v"]
        assert same_rows([tuple(r) for r in p["query"]["rows"]], duck.query(book, sql))


VIEWS_SQL = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
SELECT broker_id, SUM(volume) AS vol FROM bids GROUP BY broker_id;
SELECT SUM(b1.price * b1.volume) AS vwap FROM bids b1
  WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3) > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price);
SELECT MAX(price) AS best FROM bids;
SELECT broker_id, SUM(volume) AS avol, COUNT(*) AS n FROM asks GROUP BY broker_id;
"""
# (ad-hoc query, the view that answers it, the query DuckDB answers the same: views read a SUM
# over no rows as 0, DuckDB as NULL, so DuckDB's form spells every SUM as COALESCE(SUM(..), 0))
VWAP_Q = ("SELECT {s}(x.price * x.volume){e} AS w FROM bids x WHERE 0.25 * (SELECT {s}(y.volume){e} FROM bids y) "
          "> (SELECT {s}(z.volume){e} FROM bids z WHERE z.price > x.price)")
VIEW_QUERIES = [
    ("select broker_id, sum(volume) as v from bids group by broker_id", "VOL", None),
    (VWAP_Q.format(s="SUM", e=""), "VWAP", VWAP_Q.format(s="COALESCE(SUM", e=", 0)")),
    ("SELECT MAX(price) AS m FROM bids", "BEST", None),
    ("SELECT broker_id, SUM(volume) AS a, COUNT(*) AS b FROM asks GROUP BY broker_id", "AVOL", None),
]


@pytest.fixture(scope="module")
def views_program():
    from ddms.compiler import compile_sql
    return compile_sql(VIEWS_SQL).program


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=50), cut=st.floats(0, 1))
def test_query_of_a_view_is_answered_from_it(views_program, stream, cut):
    """A query that compiles to a maintained view (other aliases, case, names) is answered from
    that view, without DuckDB, and equals DuckDB's answer over the relations; a query of another
    shape goes to DuckDB."""
    import ddms.runtime.adhoc as adhoc
    lines = [f"{i},{oid},{a},{v},{p}" for i, (a, oid, v, p) in enumerate(stream)]
    eng = Engine(views_program)
    eng.keep_relations()
    head, _ = split_lines(OrderBookParser().feed(("\n".join(lines) + "\n").encode()), int(cut * len(lines)))
    eng.apply(head, eng.relmap(("bids", "asks")))
    real = adhoc.run_query
    for sql, view, duck in VIEW_QUERIES:
        want = sorted(table_rows(eng.query(duck or sql, from_views=False)))
        adhoc.run_query = None   # DuckDB must not be asked
        try:
            got = eng.query(sql)
        finally:
            adhoc.run_query = real
        assert got.schema.metadata == {b"ddms.view": view.encode()}, sql
        assert same_rows(table_rows(got), want), (sql, table_rows(got), want)
    other = eng.query("SELECT MAX(price) AS m FROM asks")   # no such view: DuckDB
    assert not other.schema.metadata


def test_view_answer_needs_no_kept_relations(views_program):
    eng = Engine(views_program)
    eng.apply(OrderBookParser().feed(b"1,1,B,10,100\n2,2,B,5,101\n"), eng.relmap(("bids", "asks")))
    assert table_rows(eng.query("SELECT MAX(price) AS m FROM bids")) == [(101.0,)]
    with pytest.raises(ViewError, match="keep_relations"):
        eng.query("SELECT MAX(price) AS m FROM asks")
