"""The hand-written M3 programs against DuckDB on real data, after every line of tiny, every 7th
of standard (every line under ``-m slow``) and every 1,000th of big, and against the reference
interpreter on every event."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import EXAMPLES, data_file, shared_file
from oracle import SOBI_SQL, SOBI_VIEWS, VWAP_SQL, Book, Duck, same

from ddms.io.orderbook import OrderBookParser
from ddms.m3.interpreter import Interpreter
from ddms.runtime.driver import split_lines
from ddms.runtime.engine import Engine

pytestmark = pytest.mark.long(60)   # minutes of cold numba compile in CI: scheduled first (tests/conftest.py)

COMBINED_SQL = f"SELECT ({VWAP_SQL}), * FROM ({SOBI_SQL})"
FINAL_VWAP = {"tiny": 491070000.0, "standard": 28916017900.0, "big": 82399928200.0}


def run_checked(programs: list[str], size: str, every: int, check) -> list[Engine]:
    """Replay ``size`` through each program side by side, calling ``check(engines, book,
    position)`` every ``every`` lines (0: only at the end) with an independently replayed book."""
    path = data_file(size)
    lines = path.read_text().splitlines()
    engines = [Engine(EXAMPLES / p) for p in programs]
    relmaps = [e.relmap(("bids", "asks")) for e in engines]
    parser = OrderBookParser(brokers=10, source=str(path))
    rest = parser.feed(path.read_bytes())
    assert rest.error is None and len(parser.close()) == 0
    book = Book()
    cuts = list(range(every, len(lines) + 1, every)) if every else []
    if not cuts or cuts[-1] != len(lines):
        cuts.append(len(lines))
    done = 0
    for cut in cuts:
        head, rest = split_lines(rest, cut)
        for engine, relmap in zip(engines, relmaps, strict=True):
            engine.apply(head, relmap)
            assert engine.position == cut
        for text in lines[done:cut]:
            book.line(text)
        done = cut
        check(engines, book, cut)
    return engines


def check_views(duck: Duck, size: str):
    def check(engines: list[Engine], book: Book, position: int) -> None:
        vwap, sobi = engines
        row = duck.query(book, COMBINED_SQL)[0]
        assert vwap.value("VWAP") == row[0], f"{size} line {position}: VWAP {vwap.value('VWAP')} != {row[0]}"
        for name, want in zip(SOBI_VIEWS, row[1:], strict=True):
            assert same(sobi.value(name), want), f"{size} line {position}: {name} {sobi.value(name)} != {want}"
    return check


@pytest.mark.parametrize("size,every", [
    ("tiny", 1), ("standard", 7), ("big", 1000),
    pytest.param("standard", 1, marks=pytest.mark.slow),   # every line: a minute of DuckDB queries
])
def test_examples_match_duckdb(size: str, every: int) -> None:
    """vwap.m3 and sobi.m3 equal DuckDB on the current bids/asks after every checked line."""
    vwap, _ = run_checked(["vwap.m3", "sobi.m3"], size, every, check_views(Duck(), size))
    assert vwap.value("VWAP") == FINAL_VWAP[size]


def test_vwap_final_matches_expected_json() -> None:
    expected = json.loads(shared_file("queries", "finance", "expected.json").read_text())["vwap"]
    for size in ("tiny", "standard"):
        (engine,) = run_checked(["vwap.m3"], size, 0, lambda *a: None)
        assert engine.value("VWAP") == expected[size]


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
        at = engine.position + 1   # each event its own line (an E line's delete and insert too)
        one = batch.__class__(batch.rel[i:i + 1], batch.sign[i:i + 1], batch.cols[i:i + 1], np.array([at]), at, at)
        engine.apply(one, relmap)
        stream = relmap[batch.rel[i]]
        if stream >= 0:
            interp.apply("+" if batch.sign[i] > 0 else "-", names[stream], tuple(batch.cols[i]))
        for q in engine.program.queries:
            assert same(engine.value(q.name), interp.view(q.name)), f"event {i}: {q.name}"
