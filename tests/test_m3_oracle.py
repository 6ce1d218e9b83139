"""The hand-written M3 programs against DuckDB on real data, after every line (tiny, standard)
and every 1,000 lines (big), and against the reference interpreter on every event."""

from __future__ import annotations

import json

import pytest
from conftest import EXAMPLES, SHARED, data_file
from oracle import SOBI_SQL, SOBI_VIEWS, VWAP_SQL, Book, Duck, same

from ddms.m3.interpreter import Interpreter
from ddms.runtime.driver import replay
from ddms.runtime.engine import Engine
from ddms.streams.orderbook import OrderBookParser

FINAL_VWAP = {"tiny": 491070000.0, "standard": 28916017900.0, "big": 82399928200.0}


def run_checked(program: str, size: str, every: int, check) -> Engine:
    """Replay ``size`` through ``program``, calling ``check(engine, book)`` every ``every`` lines
    with an independently replayed book at the same line."""
    path = data_file(size)
    lines = path.read_text().splitlines()
    engine = Engine(EXAMPLES / program)
    parser = OrderBookParser(brokers=10, source=str(path))
    book = Book()
    done = [0]

    def checkpoint(position: int) -> None:
        for text in lines[done[0]:position]:
            book.line(text)
        done[0] = position
        check(engine, book, position)
    batch = parser.feed(path.read_bytes())
    replay(engine, [batch, parser.close()], engine.relmap(("bids", "asks")), every=every, checkpoint=checkpoint)
    assert engine.position == len(lines)
    return engine


@pytest.mark.parametrize("size,every", [("tiny", 1), ("standard", 1), ("big", 1000)])
def test_vwap_matches_duckdb(size: str, every: int) -> None:
    duck = Duck()

    def check(engine: Engine, book: Book, position: int) -> None:
        (want,), = duck.query(book, VWAP_SQL)
        assert engine.value("VWAP") == want, f"{size} line {position}"
    engine = run_checked("vwap.m3", size, every, check)
    assert engine.value("VWAP") == FINAL_VWAP[size]


def test_vwap_final_matches_expected_json() -> None:
    expected = json.loads((SHARED / "queries" / "finance" / "expected.json").read_text())["vwap"]
    for size in ("tiny", "standard"):
        engine = run_checked("vwap.m3", size, 0, lambda *a: None)
        assert engine.value("VWAP") == expected[size]


@pytest.mark.parametrize("size,every", [("tiny", 1), ("standard", 1), ("big", 1000)])
def test_sobi_matches_duckdb(size: str, every: int) -> None:
    duck = Duck()

    def check(engine: Engine, book: Book, position: int) -> None:
        row = duck.query(book, SOBI_SQL)[0]
        for name, want in zip(SOBI_VIEWS, row, strict=True):
            assert same(engine.value(name), want), f"{size} line {position}: {name} {engine.value(name)} != {want}"
    run_checked("sobi.m3", size, every, check)


@pytest.mark.parametrize("program", ["vwap.m3", "sobi.m3"])
def test_interpreter_agrees_on_every_event(program: str) -> None:
    """The numba engine and the pure-Python interpreter, event by event on tiny."""
    path = data_file("tiny")
    engine = Engine(EXAMPLES / program)
    interp = Interpreter(engine.program)
    batch = OrderBookParser(brokers=10).feed(path.read_bytes())
    relmap = engine.relmap(("bids", "asks"))
    names = {i: s.name for i, s in enumerate(engine.program.streams)}
    for i in range(len(batch)):
        one = batch.__class__(batch.rel[i:i + 1], batch.sign[i:i + 1], batch.cols[i:i + 1], batch.line[i:i + 1],
                              engine.position + 1, engine.position + 1)
        engine.apply(one, relmap)
        stream = relmap[batch.rel[i]]
        if stream >= 0:
            interp.apply("+" if batch.sign[i] > 0 else "-", names[stream], tuple(batch.cols[i]))
        for q in engine.program.queries:
            assert same(engine.value(q.name), interp.view(q.name)), f"event {i}: {q.name}"
