"""Maps stored as the columns of one range tree (ddms/backend/fusion.py): which maps share a
tree, and that every column still answers as the map it stores -- extremes, thresholds, range
sums and loops over a column with zeros where only other columns keep a key alive -- checked
against the interpreter after every line of random streams."""

from __future__ import annotations

import pytest
from conftest import EXAMPLES, REPO
from hypothesis import given
from test_m3_properties import SETTINGS, agree_with_interpreter, drive, render, streams

from ddms.backend.codegen import _tree_only_candidates
from ddms.backend.fusion import tree_groups
from ddms.m3.parser import parse_program
from ddms.runtime.engine import Engine, load_program

PROGRAM = REPO / "tests" / "programs" / "fused.m3"
HEADER = """CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
CREATE STREAM ASKS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP X(float)[];
DECLARE MAP CNT(float)[P: float] ORDERED;
DECLARE MAP VOL(float)[P: float] ORDERED;
DECLARE MAP H(float)[P: float];
DECLARE QUERY X := X;
"""
READ = "X[] := AggSum([], CNT[P] * {P > 1}) + AggSum([], VOL[P] * {P > 1});"


def groups(program) -> tuple[tuple[str, ...], ...]:
    return tree_groups(program, _tree_only_candidates(program))


def test_groups_of_the_programs():
    assert groups(load_program(PROGRAM)) == (("CNT", "VOL", "BIG"), ("BV", "BC"))
    assert groups(load_program(EXAMPLES / "vwap.m3")) == (("BID_VOL", "BID_PV"),)
    assert groups(load_program(EXAMPLES / "sobi.m3")) == (("BID_CNT", "BID_VOL", "BID_PV"),
                                                          ("ASK_CNT", "ASK_VOL", "ASK_PV"))


@pytest.mark.parametrize(("body", "expected"), [
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[PRICE] += VOLUME; {READ} }}",
     (("CNT", "VOL"),)),
    # column order is statement order
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ VOL[PRICE] += VOLUME; CNT[PRICE] += 1; {READ} }}",
     (("VOL", "CNT"),)),
    # CNT is also written alone
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[PRICE] += VOLUME; {READ} }}\n"
     "ON + ASKS(T, ID, BROKER_ID, VOLUME, PRICE) { CNT[PRICE] += 1; }", ()),
    # at different keys
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[T] += VOLUME; {READ} }}", ()),
    # VOL's delta reads a map
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[PRICE] += X[]; {READ} }}", ()),
    # a statement between them reads CNT: it must see CNT updated and VOL not yet
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { CNT[PRICE] += 1; "
     f"H[PRICE] += AggSum([], CNT[P] * {{P > 1}}); VOL[PRICE] += VOLUME; {READ} }}", ()),
    # a statement between them writes an unrelated map and reads none: it commutes, one run
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; H[PRICE] += 1; VOL[PRICE] += VOLUME; {READ} }}",
     (("CNT", "VOL"),)),
    # ... but not one that reads a candidate map (H reads VOL, written after it)
    ("ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { CNT[PRICE] += 1; "
     f"H[PRICE] += AggSum([], VOL[P] * {{P > 1}}); VOL[PRICE] += VOLUME; {READ} }}", ()),
    # ... nor an assignment to a candidate map
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[T] := 1; VOL[PRICE] += VOLUME; {READ} }}",
     ()),
    # an assignment is not an update of a tree at one key
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] := 1; VOL[PRICE] += VOLUME; {READ} }}", ()),
    # written together in both triggers, twice in one
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ CNT[PRICE] += 1; VOL[PRICE] += VOLUME; {READ} }}\n"
     f"ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ VOL[PRICE] += -VOLUME; CNT[PRICE] += -1; "
     f"VOL[T] += 1; CNT[T] += 2; {READ} }}", (("CNT", "VOL"),)),
    # not ORDERED: a hash map is no tree
    (f"ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {{ H[PRICE] += 1; VOL[PRICE] += VOLUME; {READ} }}", ()),
])
def test_fusion_conditions(body, expected):
    assert groups(parse_program(HEADER + body)) == expected


@pytest.fixture(scope="module")
def program():
    return load_program(PROGRAM)


def test_plan_and_state_show_the_shared_trees(program):
    engine = Engine(program)
    plan = engine.generated.plan
    assert "range tree CNT holds CNT, VOL, BIG as its columns (updated together: one descent per event)" in plan
    assert sum("one update of range tree BV, columns BV, BC: one descent" in p for p in plan) == 2
    assert engine.module.TREES == {"CNT": ("CNT", 0), "VOL": ("CNT", 1), "BIG": ("CNT", 2),
                                   "BV": ("BV", 0), "BC": ("BV", 1)}
    assert "op_VOL" not in engine.module.FIELDS and engine.state.op_CNT.nc == 3


@SETTINGS
@given(streams)
def test_columns_answer_as_their_maps(program, stream):
    drive(program, render(stream), agree_with_interpreter)


def test_a_column_empty_while_others_keep_keys(program):
    # small orders only: BIG holds no nonzero value while CNT and VOL keep two levels alive
    engine = Engine(program)
    engine.insert("BIDS", 1, 1, 3, 10, 100)
    engine.insert("BIDS", 2, 2, 3, 30, 101)
    engine.insert("BIDS", 3, 3, 3, 5, 102)
    assert engine.value("BEST") == 101 and engine.value("LOW") == 101 and engine.value("SQ") == 900
    engine.delete("BIDS", 2, 2, 3, 30, 101)
    engine._check()
    assert engine.value("SQ") == 0 and engine.value("NBIG") == 0 and engine.value("ABOVE") == 1
    assert engine.value("BEST") is None   # Max over no key: NULL (nan in the map, None in Python)
    assert engine.value("BHIGH") == {(3.0,): 102.0}
