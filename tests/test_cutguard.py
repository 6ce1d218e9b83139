"""Events beyond the cut of a top-N skip the view's re-evaluation (ddms.backend.cutguard): the
analysis guards only what it can prove, and the engine stays exact around the cut.

The engine checks use a book of few price levels and many orders per level, so that events land
at, just below and just above the n-th level, orders tie at the cut price straddling n, top levels
are deleted (the cut moves down to a level the guard skipped events at), the book falls below n
levels (the cut is then no cut: nothing may be skipped) and empties.  DuckDB after every line, the
engine's ``_check()`` (which recomputes the stored cuts from the maps) too; and a watched engine
fed the whole stream as one batch (the per-line re-evaluation inside a batch, where the skipping
pays) fires exactly the changes the line-by-line engine shows."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, check_stream
from viewcheck import stream_lines

from ddms.backend.codegen import generate
from ddms.backend.cutguard import Cut, group_guards
from ddms.backend.deferral import deferred_maps
from ddms.compiler import compile_sql
from ddms.io.orderbook import OrderBookParser
from ddms.runtime.engine import Engine

VIEWS = {
    "T3_ORD": "SELECT SUM(t.volume) AS t3_ord FROM (SELECT price, volume FROM bids ORDER BY price DESC, id LIMIT 3) t",
    "A2_LVL": "SELECT SUM(l.v) AS a2_lvl FROM (SELECT price, SUM(volume) AS v FROM asks GROUP BY price "
              "ORDER BY price LIMIT 2) l",
}
SCRIPT = HEADER + ";\n".join(VIEWS.values()) + ";"

PRICES = [98, 99, 100, 101]   # few levels, many orders a level: ties at the cut
IDS = st.integers(1, 9)
line = st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
)


def _guards(sql: str):
    """(group statements' targets, GroupGuards or None) per deferred group of ``sql``'s program."""
    p = compile_sql(HEADER + sql + ";").program
    d = deferred_maps(p)
    groups: dict[tuple, list] = {}
    for n, t in enumerate(p.triggers):
        later = tuple(s for s in t.statements if s.target.name in d)
        if later:
            groups.setdefault(later, []).append((n, t))
    return p, [(later, group_guards(later, ts, p.triggers, p.maps, d)) for later, ts in groups.items()]


def test_order_top_n_is_guarded_by_its_row_cut() -> None:
    p, [(_, gg)] = _guards(VIEWS["T3_ORD"])
    assert gg is not None and len(gg.cuts) == 1
    assert gg.cuts[0].kind == "max" and gg.cuts[0].rows and gg.cuts[0].n == 3
    assert {(p.triggers[g.trigger].sign, g.tests) for g in gg.guards} == {
        ("+", (("BIDS_PRICE", 0),)), ("-", (("BIDS_PRICE", 0),))}


def test_ascending_levels_are_guarded_by_a_min_cut() -> None:
    _, [(_, gg)] = _guards(VIEWS["A2_LVL"])
    assert gg is not None and gg.cuts == (Cut("min", gg.cuts[0].map, 2, False),)


@pytest.mark.parametrize("sql", [
    # every level read: no cut bounds the read
    "SELECT SUM(volume) AS all_vol FROM bids",
    # the levels beyond the top 3: read on the far side of the cut
    "SELECT SUM(t.v) AS rest FROM (SELECT price, SUM(volume) AS v, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn "
    "FROM bids GROUP BY price) t WHERE t.rn > 3",
    # the top 3 levels plus the whole book's volume: one read unbounded
    "SELECT (SELECT SUM(t.v) FROM (SELECT price, SUM(volume) AS v FROM bids GROUP BY price ORDER BY price DESC "
    "LIMIT 3) t) + (SELECT SUM(b.volume) FROM bids b) AS top_plus_all",
])
def test_unbounded_reads_are_not_guarded(sql: str) -> None:
    _, groups = _guards(sql)
    assert all(gg is None for _, gg in groups)


def test_a_cut_moved_by_another_group_is_not_compared_with() -> None:
    """The bid and the ask imbalance of two views: the ask triggers' group also reads the bid cut,
    which only the bid triggers' group stores again; the ask events compare with the ask cut only."""
    levels = "SELECT price, SUM(volume) AS v FROM {} GROUP BY price ORDER BY price {} LIMIT 2"
    bid = f"(SELECT SUM(b.v) FROM ({levels.format('bids', 'DESC')}) b)"
    ask = f"(SELECT SUM(a.v) FROM ({levels.format('asks', 'ASC')}) a)"
    p, groups = _guards(f"SELECT {bid} AS bid2; SELECT {bid} - {ask} AS imb2")
    guarded = [gg for _, gg in groups if gg is not None]
    assert guarded
    for gg in guarded:
        for g in gg.guards:
            stream = p.triggers[g.trigger].stream
            for _, c in g.tests:
                assert gg.cuts[c].kind == ("max" if stream == "BIDS" else "min")


def test_plan_says_which_events_are_skipped() -> None:
    plan = "\n".join(generate(compile_sql(SCRIPT).program).plan)
    assert "marks group 0 dirty only when BIDS_PRICE is not below max(" in plan
    assert "ASKS_PRICE is not above min(" in plan


@pytest.fixture(scope="module")
def engine_program():
    program = compile_sql(SCRIPT, "<cutguard>").program
    Engine(program)   # compile once
    return program


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=40))
def test_engine_matches_duckdb_around_the_cut(engine_program, stream: list[tuple]) -> None:
    check_stream(engine_program, stream, Engine(engine_program), views=VIEWS)


def test_cut_moves_to_a_level_whose_events_were_skipped(engine_program) -> None:
    """Four levels; orders added below the cut (skipped), then the top levels deleted so that the
    cut falls to them; ties at the cut straddling n = 3; fewer than 3 orders; an empty book."""
    stream = [("B", 1, 10, 101), ("B", 2, 5, 100), ("B", 3, 7, 100), ("B", 4, 3, 100),   # cut 100, tie 2 of 3
              ("B", 5, 4, 99), ("B", 6, 2, 98), ("E", 5, 1, 0), ("B", 7, 9, 99),          # below the cut
              ("D", 1, 0, 0), ("E", 4, 1, 0), ("D", 2, 0, 0), ("D", 3, 0, 0),              # cut moves to 99
              ("E", 7, 4, 0), ("D", 4, 0, 0), ("D", 5, 0, 0), ("D", 7, 0, 0),              # fewer than 3
              ("B", 8, 1, 98), ("D", 6, 0, 0), ("D", 8, 0, 0),                             # empty
              ("S", 1, 3, 101), ("S", 2, 4, 100), ("S", 3, 5, 101), ("S", 4, 6, 99),       # asks: cut 100
              ("S", 5, 7, 101), ("E", 3, 2, 0), ("F", 4, 0, 0), ("F", 2, 0, 0), ("E", 5, 1, 0)]
    check_stream(engine_program, stream, Engine(engine_program), views=VIEWS)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=60))
def test_watched_batch_fires_what_line_by_line_shows(engine_program, stream: list[tuple]) -> None:
    """One batch, views watched: each line's re-evaluation runs (or is skipped) inside the batch."""
    lines = stream_lines(stream)
    data = ("\n".join(lines) + "\n").encode()

    def norm(x):   # NULL: None or NaN alike
        return None if x is None or x != x else x

    ref = Engine(engine_program)
    relmap = ref.relmap(("bids", "asks"))
    expected: dict[str, list] = {v: [] for v in VIEWS}
    batch = OrderBookParser(brokers=10).feed(data)
    prev = {v: norm(ref.views[v].value) for v in VIEWS}
    for n in range(1, len(lines) + 1):
        sel = batch.line == n
        ref.apply(type(batch)(batch.rel[sel], batch.sign[sel], batch.cols[sel], batch.line[sel], n, n), relmap)
        for v in VIEWS:
            now = norm(ref.views[v].value)
            if now != prev[v]:
                expected[v].append(now)
            prev[v] = now
    eng = Engine(engine_program)
    got: dict[str, list] = {v: [] for v in VIEWS}
    for v in VIEWS:
        eng.on(v, lambda view, _key, _old, new, _pos: got[view].append(norm(new)))
    eng.apply(OrderBookParser(brokers=10).feed(data), eng.relmap(("bids", "asks")))
    eng._check()
    assert got == expected
