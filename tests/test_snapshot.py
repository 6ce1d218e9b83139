"""``Engine.snapshot``: frozen copies of views as of one input line boundary.  A reader thread
takes snapshots while another thread applies a long batch; every snapshot equals the views after
SOME line k (bit for bit the engine's own views after line k applied line by line, and the
reference interpreter's within rounding), and k never goes back."""

from __future__ import annotations

import math
import sys
import threading
import time

import pytest
from conftest import EXAMPLES, applied_line_by_line
from test_checkpoint import BROKER_SQL

import ddms.runtime.engine as engine_mod
from ddms.compiler import compile_sql
from ddms.errors import ViewError
from ddms.io.orderbook import OrderBookParser
from ddms.m3.interpreter import Interpreter
from ddms.runtime.engine import Engine
from replay.synthetic import generate_orderbook

LINES = 3000


def close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def num(x) -> float:
    """A view value as a float: a NULL scalar view (None) is NaN."""
    return math.nan if x is None else float(x)


def bits(snap) -> dict:
    """A snapshot with floats as their exact hex spelling (NaN equal to NaN)."""
    return {n: num(v).hex() if not isinstance(v, list) else [[num(x).hex() for x in r] for r in v]
            for n, v in snap.items()}


def matches_interpreter(snap, interp_views: dict) -> bool:
    for name, v in snap.items():
        ref = interp_views[name]
        if isinstance(ref, dict):
            ref = {k: x for k, x in ref.items() if x != 0}
            got = {tuple(float(x) for x in r[:-1]): float(r[-1]) for r in v}
            if set(got) != set(ref) or not all(close(got[k], ref[k]) for k in ref):
                return False
        elif not close(num(v), float(ref)):
            return False
    return True


def test_snapshots_under_a_concurrent_writer(threaded_program, monkeypatch):
    program = threaded_program
    monkeypatch.setattr(engine_mod, "CHUNK_EVENTS", 8)   # many line boundaries to be caught at
    batch = OrderBookParser().feed(b"".join(generate_orderbook(LINES, seed=5, depth=60)))
    # the views after every line: the engine applied line by line, and the interpreter
    ref = Engine(program)
    relmap = ref.relmap(("bids", "asks"))
    names = {i: s.name for i, s in enumerate(ref.program.streams)}
    interp = Interpreter(ref.program)
    exact, approx, e = [], [], 0
    for k in applied_line_by_line(ref, batch, LINES):
        while e < len(batch) and batch.line[e] <= k:
            r = relmap[batch.rel[e]]
            if r >= 0:
                interp.apply("+" if batch.sign[e] > 0 else "-", names[r], tuple(batch.cols[e]))
            e += 1
        exact.append(ref.snapshot())
        approx.append({q.name: interp.view(q.name) for q in ref.program.queries})

    eng = Engine(program)
    for name in eng.views:   # the writer returns to Python after changed lines and yields the GIL there
        eng.on(name, lambda *_: time.sleep(0))
    snaps, done = [], threading.Event()

    def reader() -> None:
        while not done.is_set():
            snaps.append(eng.snapshot())

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)   # hand the GIL over often, so that the reader asks mid-batch
    try:
        t = threading.Thread(target=reader)
        t.start()
        while not snaps:   # the reader is running before the writer starts (a loaded machine starts it late)
            time.sleep(0.001)
        eng.apply(batch, relmap)
        done.set()
        t.join()
    finally:
        sys.setswitchinterval(old)
    positions = [s.position for s in snaps]
    assert positions == sorted(positions)
    inside = {p for p in positions if 0 < p < LINES}
    assert len(inside) >= 3, f"too few snapshots inside the run: {sorted(inside)}"
    for s in snaps:
        assert bits(s) == bits(exact[s.position]), f"snapshot at line {s.position} is no line boundary's views"
        assert matches_interpreter(s, approx[s.position])
    assert bits(eng.snapshot()) == bits(exact[LINES])


def test_snapshot_is_frozen_and_selective():
    eng = Engine(EXAMPLES / "sobi.m3")
    eng.apply(OrderBookParser().feed(b"1,1,B,10,100\n2,2,S,5,101\n"), eng.relmap(("bids", "asks")))
    snap = eng.snapshot(["BEST_BID", "BEST_ASK"])
    assert dict(snap) == {"BEST_BID": 100.0, "BEST_ASK": 101.0} and snap.position == 2
    assert eng.snapshot("BEST_BID") == {"BEST_BID": 100.0}
    for mutate in (lambda: snap.__setitem__("BEST_BID", 1), lambda: snap.pop("BEST_BID"),
                   lambda: snap.update({}), lambda: setattr(snap, "position", 5)):
        with pytest.raises(ViewError):
            mutate()
    eng.apply(OrderBookParser().feed(b"3,3,B,10,100.5\n"), eng.relmap(("bids", "asks")))
    assert snap["BEST_BID"] == 100.0 and eng.snapshot("BEST_BID")["BEST_BID"] == 100.5
    with pytest.raises(ViewError, match="no view named 'NOPE'"):
        eng.snapshot(["NOPE"])


def test_grouped_snapshot_rows_are_frozen():
    eng = Engine(compile_sql(BROKER_SQL).program)
    parser = OrderBookParser()   # one parser: it knows the resting orders a D line removes
    eng.apply(parser.feed(b"1,1,B,10,100\n2,11,S,5,101\n3,3,B,4,99\n"), eng.relmap(("bids", "asks")))
    name = next(n for n in eng.views if eng.snapshot(n)[n])
    rows = eng.snapshot(name)[name]
    assert rows == eng.view(name).rows()
    with pytest.raises(ViewError):
        rows.append([0, 0])
    with pytest.raises(ViewError):
        rows[0][0] = 5
    eng.apply(parser.feed(b"4,1,D,0,0\n"), eng.relmap(("bids", "asks")))
    assert rows == [[1, 1.0]] and rows != eng.view(name).rows()   # the copy kept the old rows
