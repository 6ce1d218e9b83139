"""Property-based random order-book streams (adds, partial executions, fills, deletes, unknown
ids, price ties, empty and single-level books, extreme prices) through the compiled programs,
checked after every line against the reference interpreter and, for VWAP and SOBI, DuckDB."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import SOBI_SQL, SOBI_VIEWS, VWAP_SQL, Book, Duck, same

from ddms.io.orderbook import OrderBookParser
from ddms.m3.interpreter import Interpreter
from ddms.runtime.driver import replay
from ddms.runtime.engine import Engine

PRICES = [1, 99, 100, 101, 102, 150, 200, 1999999900]
IDS = st.integers(1, 12)

line = st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
    st.tuples(st.sampled_from("TX"), IDS, st.integers(0, 5), st.just(0)),
)
streams = st.lists(line, min_size=1, max_size=60)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def render(stream: list[tuple]) -> list[str]:
    return [f"{i},{oid},{a},{v},{p}" for i, (a, oid, v, p) in enumerate(stream)]


def drive(program, lines: list[str], check, setup=None) -> None:
    """Run ``lines`` through a fresh engine (passed to ``setup`` first, e.g. to register
    callbacks), calling ``check(engine, interp, book, position)`` after every line; ``interp`` and
    ``book`` are the independent oracles at that line."""
    engine = Engine(program)
    if setup is not None:
        setup(engine)
    interp = Interpreter(engine.program)
    names = {i: s.name for i, s in enumerate(engine.program.streams)}
    relmap = engine.relmap(("bids", "asks"))
    batch = OrderBookParser(brokers=10).feed("".join(x + "\n" for x in lines).encode())
    assert batch.error is None
    book, state = Book(), {"line": 0, "event": 0}

    def checkpoint(position: int) -> None:
        while state["line"] < position:
            book.line(lines[state["line"]])
            state["line"] += 1
        while state["event"] < len(batch) and batch.line[state["event"]] <= position:
            i = state["event"]
            if relmap[batch.rel[i]] >= 0:
                interp.apply("+" if batch.sign[i] > 0 else "-", names[relmap[batch.rel[i]]], tuple(batch.cols[i]))
            state["event"] += 1
        engine._check()
        check(engine, interp, book, position)
    replay(engine, [batch], relmap, every=1, checkpoint=checkpoint)


def agree_with_interpreter(engine: Engine, interp: Interpreter, _book: Book, position: int) -> None:
    """Every view equals the interpreter's (a ``check`` for :func:`drive`)."""
    for q in engine.program.queries:
        got, want = engine.value(q.name), interp.view(q.name)
        if isinstance(want, dict):
            got = {tuple(float(x) for x in k): v for k, v in got.items()}
            assert set(got) == set(want), f"line {position}: {q.name} groups {got} != {want}"
            for k, v in want.items():
                assert same(got[k], v), f"line {position}: {q.name}[{k}] {got[k]} != {v}"
        else:
            assert same(got, want), f"line {position}: {q.name} {got} != {want}"


@SETTINGS
@given(streams)
def test_vwap_random_streams(stream) -> None:
    duck = Duck()

    def check(engine, interp, book, position):
        agree_with_interpreter(engine, interp, book, position)
        (want,), = duck.query(book, VWAP_SQL)
        assert engine.value("VWAP") == want, f"line {position}"
    drive(EXAMPLES / "vwap.m3", render(stream), check)


@SETTINGS
@given(streams)
def test_sobi_random_streams(stream) -> None:
    duck = Duck()

    def check(engine, interp, book, position):
        agree_with_interpreter(engine, interp, book, position)
        row = duck.query(book, SOBI_SQL)[0]
        for name, want in zip(SOBI_VIEWS, row, strict=True):
            assert same(engine.value(name), want), f"line {position}: {name}"
    drive(EXAMPLES / "sobi.m3", render(stream), check)


@SETTINGS
@given(streams)
def test_statement_shapes_random_streams(stream) -> None:
    drive(REPO / "tests" / "programs" / "shapes.m3", render(stream), agree_with_interpreter)


@SETTINGS
@given(streams)
def test_two_key_range_trees_random_streams(stream) -> None:
    """Maps kept in per-broker range trees alone (no hash map) answer every read they get."""
    drive(REPO / "tests" / "programs" / "slices.m3", render(stream), agree_with_interpreter)


def test_two_key_maps_drop_their_hash_map_only_when_every_read_fixes_the_prefix() -> None:
    tree_only = Engine(REPO / "tests" / "programs" / "slices.m3").module.TREE_ONLY
    assert tree_only == ["BOOK", "BOOK_PV"]   # BOOK_ALL is walked whole: it keeps its hash map


@pytest.mark.parametrize("lines", [
    [],                                              # empty book
    ["1,1,B,10,100"],                                # single level
    ["1,1,B,10,100", "2,2,B,10,100", "3,3,B,10,100"],  # ties
    ["1,1,B,10,100", "2,1,E,10,0"],                   # execution to zero
    ["1,1,B,10,1999999900", "2,2,S,5,1", "3,2,D,0,0"],  # extreme prices, crossed book
])
def test_edge_books(lines: list[str]) -> None:
    for program in ("vwap.m3", "sobi.m3"):
        drive(EXAMPLES / program, lines, agree_with_interpreter)
