"""Deferred ``:=`` statements (ddms/backend/deferral.py): which ones are deferred, and that running
them once per line (views watched) or per batch (not watched) gives the interpreter's values
after every line, including the statements that must stay per event."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, REPO
from hypothesis import given
from test_m3_properties import SETTINGS, agree_with_interpreter, drive, render, streams
from test_runtime import REL, batch_of, oracle, same

from ddms.backend.deferral import deferred_maps, keyed_deferred
from ddms.compiler import compile_sql
from ddms.m3.interpreter import Interpreter
from ddms.m3.parser import parse_program
from ddms.runtime.engine import Engine, load_program

PROGRAM = REPO / "tests" / "programs" / "deferred.m3"
HEADER = """CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP A(float)[];
DECLARE MAP B(float)[];
DECLARE MAP X(float)[];
DECLARE MAP Y(float)[];
DECLARE QUERY X := X;
DECLARE QUERY Y := Y;
"""


def test_deferred_maps_of_the_test_program():
    # V is assigned before A changes (stale by one event, on purpose); Y reads B, which the ASKS
    # trigger writes without re-evaluating Y; S reads itself; W is read by a += statement
    assert deferred_maps(load_program(PROGRAM)) == {"X", "Z", "G"}


def test_deferred_maps_of_the_examples():
    assert deferred_maps(load_program(EXAMPLES / "vwap.m3")) == {"VWAP"}
    assert deferred_maps(load_program(EXAMPLES / "sobi.m3")) == {
        "BID_TOP_PV", "BID_TOP_VOL", "BID_VWAP", "BEST_BID", "ASK_TOP_PV", "ASK_TOP_VOL", "ASK_VWAP",
        "BEST_ASK", "SPREAD", "MID", "SOBI"}


@pytest.mark.parametrize(("body", "deferred"), [
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[] * 2; }", {"X"}),
    # an event variable in the expression: the value depends on the event, not on the maps alone
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[] * VOLUME; }", set()),
    # two statements writing X with different expressions
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[]; }\n"
     "ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += -VOLUME; X[] := 2 * A[]; }", set()),
    # X += ... elsewhere: not a pure re-evaluation
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[]; }\n"
     "ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) { X[] += VOLUME; }", set()),
    # Y reads X: deferred together; Y placed before X's write in one trigger sees the old X, so
    # it stays per event, and then so does X (a statement run per event reads it)
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[]; Y[] := X[] + 1; }",
     {"X", "Y"}),
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; Y[] := X[] + 1; X[] := A[]; }", set()),
    # A's writer ASKS contains X, but before its write of A
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { A[] += VOLUME; X[] := A[]; }\n"
     "ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) { X[] := A[]; A[] += VOLUME; }", set()),
])
def test_deferral_conditions(body, deferred):
    assert deferred_maps(parse_program(HEADER + body)) == deferred


@pytest.fixture(scope="module")
def program():
    return load_program(PROGRAM)


def test_plan_names_the_deferred_statements(program):
    plan = [p for p in Engine(program).generated.plan if "deferred" in p]
    assert len(plan) == 2 and all(p.endswith("X, Z, G") for p in plan)


@SETTINGS
@given(streams)
def test_unwatched_views_after_every_line(program, stream):
    drive(program, render(stream), agree_with_interpreter)


@SETTINGS
@given(streams)
def test_callbacks_see_deferred_views_of_their_line(program, stream):
    """The whole stream in one batch, Z watched: deferred statements then run after every line,
    and a callback reading every view sees the interpreter's values after its line."""
    batch = batch_of("".join(x + "\n" for x in render(stream)))
    states = oracle(PROGRAM.read_text(), batch)
    engine = Engine(program)
    names = [q.name for q in engine.program.queries]
    seen = []

    def snapshot(_view, _key, _old, _new, position):
        seen.append((position, {v: _plain(engine.value(v)) for v in names}))
    engine.on("Z", snapshot)
    engine.apply(batch, engine.relmap(REL))
    engine._check()
    lines = range(batch.first_line, batch.last_line + 1)
    assert [p for p, _ in seen] == [n for n in lines if not same(states[n]["Z"], states[n - 1]["Z"])]
    seen.append((batch.last_line, {v: _plain(engine.value(v)) for v in names}))
    for position, values in seen:
        for v, x in values.items():
            assert same(x, states[position][v]), (position, v, x, states[position][v])


def _plain(value):
    return {tuple(k): v for k, v in value.items()} if hasattr(value, "items") else value


def test_first_bid_evaluates_deferred_statements_not_before(program):
    # X = 1 + A: 0 until a BIDS trigger first runs (an ask alone leaves it 0), then 1 + A
    engine = Engine(program)
    engine.insert("ASKS", 1, 1, 1, 5, 100)
    assert engine.value("X") == 0.0 and engine.value("Y") == 0.0
    engine.insert("BIDS", 2, 2, 1, 7, 100)
    assert engine.value("X") == 8.0 and engine.value("Z") == 16.0 and engine.value("Y") == 12.0
    engine._check()


# -- statements deferred per key (deferral.keyed_deferred) ----------------------------------------
KEYED_HEADER = """CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP C(float)[K: float];
DECLARE MAP G(float)[K: float];
DECLARE MAP H(float)[K: float];
DECLARE QUERY G := G;
DECLARE QUERY H := H;
"""


@pytest.mark.parametrize(("body", "keyed"), [
    # a grouped view re-evaluated at the event's group from maps alone
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; G[BROKER_ID] := C[BROKER_ID] * 2; }",
     {"G"}),
    # another event variable in the value: it depends on the event, not on the maps and the key
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; G[BROKER_ID] := C[BROKER_ID] * PRICE; }",
     set()),
    # the statement runs before the write it depends on (stale by one event, on purpose)
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { G[BROKER_ID] := C[BROKER_ID]; C[BROKER_ID] += VOLUME; }",
     set()),
    # H reads G: G is not a view only, so it stays per event (and H, reading it, is deferred per key)
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; G[BROKER_ID] := C[BROKER_ID]; "
     "H[BROKER_ID] := G[BROKER_ID] + 1; }", {"H"}),
    # a += elsewhere: not a re-evaluation
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; G[BROKER_ID] := C[BROKER_ID]; }\n"
     "ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) { G[BROKER_ID] += VOLUME; }", set()),
    # a trigger writing C without re-evaluating G
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; G[BROKER_ID] := C[BROKER_ID]; }\n"
     "ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; }", set()),
])
def test_keyed_deferral_conditions(body, keyed):
    program = parse_program(KEYED_HEADER + body)
    assert keyed_deferred(program, deferred_maps(program)) == keyed


GROUPED_MINMAX = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
SELECT broker_id, MAX(price) AS best FROM bids GROUP BY broker_id;
SELECT broker_id, MIN(price) AS worst FROM bids GROUP BY broker_id;
SELECT broker_id, MAX(price) AS broker_best FROM bids WHERE volume > 2 GROUP BY broker_id;
"""


@pytest.fixture(scope="module")
def grouped():
    return compile_sql(GROUPED_MINMAX).program


def test_grouped_extremes_are_deferred_per_key(grouped):
    plan = [p for p in Engine(grouped).generated.plan if "deferred per key" in p]
    assert plan and all("(BIDS_BROKER_ID)" in p for p in plan)
    assert plan[0].endswith("BEST, WORST, BROKER_BEST")


@SETTINGS
@given(streams)
def test_grouped_extremes_unwatched_after_every_line(grouped, stream):
    drive(grouped, render(stream), agree_with_interpreter)


@SETTINGS
@given(streams)
def test_grouped_extremes_watched_in_one_batch(grouped, stream):
    """The whole stream in one batch with a grouped extreme watched: its keys are re-evaluated
    after every line, and a callback sees the interpreter's values of its line."""
    batch = batch_of("".join(x + "\n" for x in render(stream)))
    engine = Engine(grouped)
    interp = Interpreter(engine.program)
    names = {i: s.name for i, s in enumerate(engine.program.streams)}
    relmap = engine.relmap(REL)
    seen = []
    engine.on("BROKER_BEST", lambda *_a: seen.append((_a[-1], dict(engine.value("BROKER_BEST")))))
    engine.apply(batch, relmap)
    engine._check()
    want, e = {}, 0
    for n in range(batch.first_line, batch.last_line + 1):
        while e < len(batch) and batch.line[e] <= n:
            if relmap[batch.rel[e]] >= 0:
                interp.apply("+" if batch.sign[e] > 0 else "-", names[relmap[batch.rel[e]]], tuple(batch.cols[e]))
            e += 1
        want[n] = {tuple(k): v for k, v in interp.view("BROKER_BEST").items()}
    changed = [n for n in want if want[n] != want.get(n - 1, {})]
    assert list(dict.fromkeys(p for p, _ in seen)) == changed   # (a callback per changed key)
    for position, got in seen:
        assert {tuple(float(x) for x in k): v for k, v in got.items()} == want[position]


TWO_ARITIES = KEYED_HEADER + """DECLARE MAP C2(float)[K: float, P: float];
DECLARE MAP G2(float)[K: float, P: float];
DECLARE QUERY G2 := G2;
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += VOLUME; C2[BROKER_ID, PRICE] += 1;
  G[BROKER_ID] := C[BROKER_ID] * 2; G2[BROKER_ID, PRICE] := C2[BROKER_ID, PRICE] * 3; }
ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { C[BROKER_ID] += -VOLUME; C2[BROKER_ID, PRICE] += -1;
  G[BROKER_ID] := C[BROKER_ID] * 2; G2[BROKER_ID, PRICE] := C2[BROKER_ID, PRICE] * 3; }
"""


@SETTINGS
@given(streams)
def test_keyed_groups_of_two_arities(stream):
    """Two groups deferred per key, keyed by one and by two event values, in one program."""
    program = parse_program(TWO_ARITIES)
    assert keyed_deferred(program, deferred_maps(program)) == {"G", "G2"}
    drive(program, render(stream), agree_with_interpreter)
