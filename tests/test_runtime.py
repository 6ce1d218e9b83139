"""The four client interfaces of the runtime (DBToaster CIDR paper): callbacks, the event loop,
live views and futures, plus the engine's direct insert/delete.

Expected values never come from the engine itself: they come from hand computation or from
the reference interpreter (``ddms.m3.interpreter.Interpreter``) fed the same events line by line.

``BOOK`` is a small program of our own without ORDERED maps (scalar sums, a division that becomes
NaN, a one-key and a two-key grouped map), in tests/programs/book.m3; tests that involve ORDERED
maps use vwap.m3.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import asyncio
import math
import random
import weakref
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from ddms.errors import DdmsError, InputError, ProgramError, ViewError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser, parse_orderbook_text
from ddms.m3 import parse_program
from ddms.m3.interpreter import Interpreter
from ddms.runtime import Engine, EventLoop, GroupedView, ScalarView
from ddms.runtime.engine import ViewEvent

pytestmark = pytest.mark.long(60)   # the example programs compile cold: scheduled first (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]
VWAP_M3 = ROOT / "examples" / "m3" / "vwap.m3"
TINY = Path(__file__).resolve().parents[2] / "shared" / "data" / "orderbook" / "tiny" / "finance.csv"
REL = ("bids", "asks")

BOOK = (Path(__file__).parent / "programs" / "book.m3").read_text()

SCALARS = ("BID_VOL", "ASK_VOL", "BID_N", "BID_AVG")
GROUPED = ("BROKER_VOL", "BP_VOL")


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

@pytest.fixture
def eng() -> Engine:
    return Engine(BOOK)


def batch_of(text: str, **kw) -> EventBatch:
    return parse_orderbook_text(text, **kw)


_PARSERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def feed(engine: Engine, text: str) -> None:
    """Apply order-book lines; one parser per engine, so orders rest across calls."""
    parser = _PARSERS.setdefault(engine, OrderBookParser(brokers=10, source="<test>"))
    batch = parser.feed(text.encode())
    engine.apply(batch, engine.relmap(REL))


def order_flow(n: int, seed: int, *, first_id: int = 1, sides: str = "BS", t0: int = 0) -> str:
    """Deterministic random order-book text: new orders, partial/full executions, cancels,
    replacements of resting ids, lines without effect (T, X, unknown ids)."""
    rng = random.Random(seed)
    resting: list[int] = []
    nid = first_id
    out = []
    for t in range(t0 + 1, t0 + n + 1):
        r = rng.random()
        if r < 0.45 or not resting:
            out.append(f"{t},{nid},{rng.choice(sides)},{rng.randint(1, 50)},{rng.randint(100, 119) * 100}")
            resting.append(nid)
            nid += 1
        elif r < 0.60:
            out.append(f"{t},{rng.choice(resting)},E,{rng.randint(1, 60)},0")
        elif r < 0.78:
            oid = resting.pop(rng.randrange(len(resting)))
            out.append(f"{t},{oid},{rng.choice('FD')},0,0")
        elif r < 0.86:
            out.append(f"{t},{rng.choice(resting)},{rng.choice(sides)},{rng.randint(1, 50)},"
                       f"{rng.randint(100, 119) * 100}")
        elif r < 0.93:
            out.append(f"{t},{rng.choice(resting)},{rng.choice('TX')},1,1")
        else:
            out.append(f"{t},{10**6 + t},{rng.choice('EFD')},1,0")
    return "\n".join(out) + "\n"


def oracle(program_text: str, batch: EventBatch, relations=REL) -> dict[int, dict]:
    """{line: {view: value}} after every input line of ``batch`` (line 0: the empty state),
    computed by the reference interpreter fed the batch's events one line at a time."""
    prog = parse_program(program_text)
    interp = Interpreter(prog)
    stream_of = {}
    for i, name in enumerate(relations):
        stream_of[i] = next((s.name for s in prog.streams if s.name.lower() == name.lower()), None)

    def state() -> dict:
        return {q.name: interp.view(q.name) for q in prog.queries}

    states = {batch.first_line - 1: state()}
    i, n = 0, len(batch)
    for line in range(batch.first_line, batch.last_line + 1):
        while i < n and int(batch.line[i]) == line:
            s = stream_of[int(batch.rel[i])]
            if s is not None:
                interp.apply("+" if batch.sign[i] > 0 else "-", s, tuple(float(x) for x in batch.cols[i]))
            i += 1
        states[line] = state()
    return states


def same(a, b, rel: float = 0.0) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
                and all(same(a[k], b[k], rel) for k in a))
    a, b = (math.nan if x is None else float(x) for x in (a, b))   # NULL: None in Python, NaN in maps
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b if rel == 0.0 else math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def expected_calls(states: dict[int, dict], view: str, grouped: bool) -> list[tuple]:
    """The (view, key, old, new, position) calls a callback on ``view`` must see."""
    calls = []
    lines = sorted(states)
    for prev, line in zip(lines, lines[1:], strict=False):
        a, b = states[prev][view], states[line][view]
        if not grouped:
            if not same(a, b):
                calls.append((view, (), a, b, line))
            continue
        for k in sorted(set(a) | set(b)):
            if not same(a.get(k, 0.0), b.get(k, 0.0)):
                calls.append((view, k, a.get(k, 0.0), b.get(k, 0.0), line))
    return calls


def assert_calls(got: list[tuple], want: list[tuple], rel: float = 0.0) -> None:
    # within one line, calls of one grouped view may come in any key order
    norm = lambda cs: sorted(cs, key=lambda c: (c[4], tuple(float(x) for x in c[1])))  # noqa: E731
    got, want = norm(got), norm(want)
    assert [(c[0], tuple(float(x) for x in c[1]), c[4]) for c in got] == \
           [(c[0], tuple(float(x) for x in c[1]), c[4]) for c in want]
    for g, w in zip(got, want, strict=True):
        assert same(g[2], w[2], rel) and same(g[3], w[3], rel), (g, w)


class RunBatchCounter:
    """Wraps ``engine.module.run_batch`` (shared by every engine of the program) to count calls."""

    def __init__(self, monkeypatch, engine: Engine) -> None:
        self.calls = 0
        inner = engine.module.run_batch

        def counting(*args):
            self.calls += 1
            return inner(*args)
        monkeypatch.setattr(engine.module, "run_batch", counting)


class ExitCounter:
    """Counts the times compiled code leaves for Python (``Engine._line_changed``) mid-batch."""

    def __init__(self, monkeypatch, engine: Engine) -> None:
        self.calls = 0
        inner = engine._line_changed

        def counting(event: int, slot: int, old: float, new: float) -> int:
            self.calls += 1
            return inner(event, slot, old, new)
        monkeypatch.setattr(engine, "_line_changed", counting)
        # compiled code calls the ctypes wrapper made at construction: rebuild it around the counter
        monkeypatch.setattr(engine, "_fire_c", type(engine._fire_c)(counting))


# ------------------------------------------------------------------------------------------
# callbacks
# ------------------------------------------------------------------------------------------

def test_callback_arguments_in_event_order(eng):
    calls = []
    eng.on("BID_VOL", lambda *a: calls.append(a))
    feed(eng, "1,1,B,10,100\n2,2,B,5,101\n3,1,E,3,0\n4,3,S,7,200\n5,2,D,0,0\n6,1,F,0,0\n")
    assert calls == [
        ("BID_VOL", (), 0.0, 10.0, 1),
        ("BID_VOL", (), 10.0, 15.0, 2),
        ("BID_VOL", (), 15.0, 12.0, 3),
        ("BID_VOL", (), 12.0, 7.0, 5),
        ("BID_VOL", (), 7.0, 0.0, 6),
    ]
    assert eng.position == 6


def test_callback_not_called_when_view_unchanged(eng):
    vol, n = [], []
    eng.on("BID_VOL", lambda *a: vol.append(a[4]))
    eng.on("BID_N", lambda *a: n.append(a[4]))
    feed(eng, "1,1,S,10,100\n"      # asks only
              "2,2,B,0,100\n"       # a bid of volume 0: BID_N changes, BID_VOL does not
              "3,3,T,5,100\n"       # trade message: no events
              "4,77,D,0,0\n"        # unknown id: no events
              "5,4,B,5,100\n"
              "6,4,E,0,0\n"         # execution of 0 units: delete + identical re-insert
              "7,1,E,0,0\n"         # the same on an ask
              "8,2,D,0,0\n")        # the bid of volume 0 leaves: BID_N changes only
    assert vol == [5]
    assert n == [2, 5, 8]


def test_scalar_callback_nan_transitions(eng):
    calls = []
    eng.on("BID_AVG", lambda *a: calls.append(a))
    feed(eng, "1,1,B,10,100\n2,2,B,20,100\n3,1,D,0,0\n4,2,D,0,0\n5,3,S,1,1\n6,3,B,4,100\n")
    assert [c[4] for c in calls] == [1, 2, 3, 4, 6]
    assert calls[0][2:4] == (0.0, 10.0)
    assert calls[1][2:4] == (10.0, 15.0)
    assert calls[2][2:4] == (15.0, 20.0)
    assert calls[3][2] == 20.0 and math.isnan(calls[3][3])      # 0 / 0 is NULL
    assert math.isnan(calls[4][2]) and calls[4][3] == 4.0        # NaN -> NaN (line 5) is no change


def test_callbacks_match_interpreter_and_see_state_after_line(eng):
    """Every view watched; each callback reads every view and must see the state after its
    line; the calls are exactly the changes the interpreter computes, line by line."""
    batch = batch_of(order_flow(400, seed=1))
    states = oracle(BOOK, batch)
    calls: list[tuple] = []
    seen: list[tuple[int, dict]] = []

    def cb(view, key, old, new, position):
        calls.append((view, key, old, new, position))
        seen.append((position, {v: eng.value(v) for v in SCALARS + GROUPED}))
    for v in SCALARS + GROUPED:
        eng.on(v, cb)
    eng.apply(batch, eng.relmap(REL))

    positions = [c[4] for c in calls]
    assert positions == sorted(positions), "callbacks out of event order"
    for v in SCALARS + GROUPED:
        assert_calls([c for c in calls if c[0] == v], expected_calls(states, v, v in GROUPED))
    assert len(seen) > 100
    for position, values in seen:
        for v, x in values.items():
            assert same(x, states[position][v]), (position, v, x, states[position][v])
    assert eng.position == batch.last_line
    for v in SCALARS + GROUPED:
        assert same(eng.value(v), states[batch.last_line][v])


@pytest.mark.parametrize("watched", [("BID_VOL",), ("BID_AVG",), ("BID_VOL", "ASK_VOL"), ("BID_VOL", "BID_N")])
def test_scalar_callbacks_alone_or_with_others(eng, watched):
    """One watched scalar map takes the fast path (compiled code passes old and new); lines that
    change two watched maps take the general one.  Both give exactly the interpreter's changes."""
    batch = batch_of(order_flow(300, seed=2))
    states = oracle(BOOK, batch)
    calls: list[tuple] = []
    for v in watched:
        eng.on(v, lambda *a: calls.append(a))
    eng.apply(batch, eng.relmap(REL))
    for v in watched:
        assert_calls([c for c in calls if c[0] == v], expected_calls(states, v, False))
    assert len(calls) > 50


def test_grouped_callback_per_key_old_new_and_disappearing_group(eng):
    calls = []
    eng.on("BROKER_VOL", lambda *a: calls.append(a))
    feed(eng, "1,11,B,10,100\n"     # broker 1
              "2,12,B,5,100\n"      # broker 2
              "3,21,B,4,105\n"      # broker 1 again
              "4,11,E,3,0\n"        # broker 1: 14 -> 11
              "5,12,F,0,0\n"        # broker 2 disappears
              "6,13,S,9,100\n"      # asks: no call
              "7,22,B,6,100\n")     # broker 2 comes back
    assert calls == [
        ("BROKER_VOL", (1.0,), 0.0, 10.0, 1),
        ("BROKER_VOL", (2.0,), 0.0, 5.0, 2),
        ("BROKER_VOL", (1.0,), 10.0, 14.0, 3),
        ("BROKER_VOL", (1.0,), 14.0, 11.0, 4),
        ("BROKER_VOL", (2.0,), 5.0, 0.0, 5),
        ("BROKER_VOL", (2.0,), 0.0, 6.0, 7),
    ]
    assert dict(eng.view("BROKER_VOL")) == {(1,): 11.0, (2,): 6.0}


def test_grouped_callback_two_keys_in_one_line(eng):
    """Replacing a resting order at another price moves its volume between two (broker, price)
    groups in one line: one call per group, same position; BROKER_VOL sees only the net change."""
    bp, bv = [], []
    feed(eng, "1,11,B,10,100\n")
    eng.on("BP_VOL", lambda *a: bp.append(a))
    eng.on("BROKER_VOL", lambda *a: bv.append(a))
    feed(eng, "2,11,B,8,107\n")
    assert sorted(bp) == [("BP_VOL", (1.0, 100.0), 10.0, 0.0, 2), ("BP_VOL", (1.0, 107.0), 0.0, 8.0, 2)]
    assert bv == [("BROKER_VOL", (1.0,), 10.0, 8.0, 2)]
    # a replacement with the same volume and price changes nothing
    feed(eng, "3,11,B,8,107\n")
    assert len(bp) == 2 and len(bv) == 1


def test_unregister_stops_calls(eng):
    a, b = [], []
    cancel_a = eng.on("BID_VOL", lambda *x: a.append(x[4]))
    eng.on("BID_VOL", lambda *x: b.append(x[4]))
    cancel_g = eng.on("BROKER_VOL", lambda *x: a.append(("g", x[4])))
    feed(eng, "1,1,B,10,100\n")
    cancel_a()
    cancel_g()
    cancel_a()  # a second cancel is harmless
    feed(eng, "2,2,B,10,100\n3,3,B,1,100\n")
    assert a == [1, ("g", 1)]
    assert b == [1, 2, 3]


def test_unregister_from_inside_a_callback(eng):
    seen = []

    def once(view, key, old, new, position):
        seen.append(position)
        cancel()
    cancel = eng.on("BID_VOL", once)
    feed(eng, "1,1,B,10,100\n2,2,B,10,100\n3,3,B,1,100\n")
    assert seen == [1]


def test_register_on_unknown_view_raises(eng):
    with pytest.raises(ViewError, match="NOPE"):
        eng.on("NOPE", lambda *a: None)
    with pytest.raises(ViewError):
        eng.on("bid_vol", lambda *a: None)  # view names are case-sensitive
    with pytest.raises(ViewError):
        eng.view("NOPE")
    with pytest.raises(ViewError):
        eng.future("NOPE", lambda v: True)
    assert issubclass(ViewError, DdmsError)


def test_callback_exception_propagates_and_state_is_consistent(eng):
    """A callback that raises stops apply (the error reaches the caller), but the line that
    fired it has been applied completely."""
    def boom(*a):
        raise RuntimeError("boom")
    eng.on("ASK_VOL", boom)
    with pytest.raises(RuntimeError, match="boom"):
        feed(eng, "1,1,B,10,100\n2,2,S,3,200\n3,3,B,1,100\n")
    assert eng.value("ASK_VOL") == 3.0
    assert eng.value("BID_VOL") == 10.0
    assert eng.position == 2              # stopped right after the line whose callback raised


# ------------------------------------------------------------------------------------------
# atomicity of input lines
# ------------------------------------------------------------------------------------------

def test_partial_execution_is_one_update(eng):
    total, groups, inside = [], [], []
    feed(eng, "1,1,B,10,100\n2,2,B,4,100\n")

    def on_total(view, key, old, new, position):
        total.append((old, new, position))
        inside.append((eng.value("BID_N"), dict(eng.view("BROKER_VOL")), eng.value("BID_AVG")))
    eng.on("BID_VOL", on_total)
    eng.on("BROKER_VOL", lambda *a: groups.append(a))
    feed(eng, "3,1,E,3,0\n")                  # 3 of the 10 units: delete + re-insert with 7
    assert total == [(14.0, 11.0, 3)]           # never 14 -> 4 (the delete alone)
    assert groups == [("BROKER_VOL", (1.0,), 10.0, 7.0, 3)]
    assert inside == [(2, {(1,): 7.0, (2,): 4.0}, 5.5)]
    feed(eng, "4,1,E,7,0\n")                  # the rest: a plain delete
    assert total[-1] == (11.0, 4.0, 4)
    feed(eng, "5,2,E,9,0\n")                  # more than remains: deleted
    assert total[-1] == (4.0, 0.0, 5)
    assert len(total) == 3 and eng.value("BID_N") == 0


def test_lines_without_events_do_not_fire(eng):
    fired = []
    for v in SCALARS + GROUPED:
        eng.on(v, lambda *a: fired.append(a))
    feed(eng, "1,5,B,10,100\n")
    fired.clear()
    feed(eng, "2,5,T,3,100\n3,5,X,3,100\n4,99,D,0,0\n5,99,E,3,0\n6,99,F,0,0\n7,5,C,1,1\n")
    assert fired == []
    assert eng.position == 7
    feed(eng, "8,5,D,0,0\n9,5,D,0,0\n")       # the second D finds nothing
    assert {a[4] for a in fired} == {8}


def test_vwap_partial_execution_atomic():
    """The brief's example on vwap.m3: the view moves once per E line (no ORDERED delete of a
    whole level is involved: the level keeps volume)."""
    eng = Engine(VWAP_M3)
    calls = []
    feed(eng, "1,1,B,10,100\n")
    eng.on("VWAP", lambda *a: calls.append(a))
    feed(eng, "2,1,E,3,0\n")
    assert calls == [("VWAP", (), 1000.0, 700.0, 2)]


# ------------------------------------------------------------------------------------------
# returns from compiled code
# ------------------------------------------------------------------------------------------

def test_no_callbacks_one_run_batch_call_per_batch(eng, monkeypatch):
    batch = batch_of(order_flow(500, seed=2))
    counter = RunBatchCounter(monkeypatch, eng)
    eng.apply(batch, eng.relmap(REL))
    assert counter.calls == 1
    # a callback registered and cancelled again leaves no trace
    cancel = eng.on("BID_VOL", lambda *a: None)
    cancel()
    eng.apply(batch_of(order_flow(300, seed=3, first_id=5000), skip_bad=False), eng.relmap(REL))
    assert counter.calls == 2


def test_with_callbacks_leaves_compiled_code_only_after_changing_lines(eng, monkeypatch):
    text = order_flow(400, seed=4)
    batch = batch_of(text)
    states = oracle(BOOK, batch)
    changing = [ln for ln in range(1, batch.last_line + 1)
                if not same(states[ln - 1]["ASK_VOL"], states[ln]["ASK_VOL"])]
    assert 20 < len(changing) < batch.last_line
    fired = []
    eng.on("ASK_VOL", lambda *a: fired.append(a[4]))
    counter = RunBatchCounter(monkeypatch, eng)
    exits = ExitCounter(monkeypatch, eng)
    eng.apply(batch, eng.relmap(REL))
    assert fired == changing
    assert counter.calls == 1
    assert exits.calls == len(changing)


def test_condition_runs_in_compiled_code_and_fires_only_beyond_bounds(eng, monkeypatch):
    """``on(view, cb, above=, below=)``: compiled code returns only for lines whose new value is
    beyond a bound; two conditions on one view each see exactly their own lines; retarget and
    cancel move and drop the compiled band."""
    text = order_flow(400, seed=4)
    batch = batch_of(text)
    states = oracle(BOOK, batch)
    vals = [states[ln]["ASK_VOL"] for ln in range(batch.last_line + 1)]
    changing = [ln for ln in range(1, batch.last_line + 1) if not same(vals[ln - 1], vals[ln])]
    hi = sorted(vals[ln] for ln in changing)[len(changing) * 3 // 4]
    lo = sorted(vals[ln] for ln in changing)[len(changing) // 10]
    want_hi = [ln for ln in changing if vals[ln] > hi]
    want_lo = [ln for ln in changing if vals[ln] < lo]
    assert want_hi and want_lo and len(want_hi) + len(want_lo) < len(changing)
    got_hi, got_lo = [], []
    sub_hi = eng.on("ASK_VOL", lambda *a: got_hi.append(a[4]), above=hi)
    sub_lo = eng.on("ASK_VOL", lambda *a: got_lo.append(a[4]), below=lo)
    exits = ExitCounter(monkeypatch, eng)
    start = eng.position
    eng.apply(batch, eng.relmap(REL))
    assert [p - start for p in got_hi] == want_hi
    assert [p - start for p in got_lo] == want_lo
    assert exits.calls == len(want_hi) + len(want_lo)
    sub_lo.cancel()
    sub_hi.retarget(above=math.inf)          # nothing can exceed it: compiled code never returns
    exits.calls = 0
    eng.apply(batch_of(order_flow(300, seed=3, first_id=5000), skip_bad=False), eng.relmap(REL))
    assert exits.calls == 0
    sub_hi()
    with pytest.raises(ViewError, match="grouped"):
        eng.on("BROKER_VOL", lambda *a: None, above=1.0)
    with pytest.raises(ViewError, match="below <= above"):
        eng.on("ASK_VOL", lambda *a: None, above=1.0, below=2.0)


def test_with_grouped_callback_leaves_compiled_code_only_after_changing_lines(eng, monkeypatch):
    text = "".join(f"{i},{i},{'B' if i % 3 else 'S'},{i},{100 + i}\n" for i in range(1, 31))
    batch = batch_of(text)
    fired = []
    eng.on("BROKER_VOL", lambda *a: fired.append(a[4]))
    counter = ExitCounter(monkeypatch, eng)
    eng.apply(batch, eng.relmap(REL))
    bid_lines = [i for i in range(1, 31) if i % 3]
    assert fired == bid_lines
    assert counter.calls == len(bid_lines)



def test_grouped_callback_no_return_for_net_unchanged_lines(eng, monkeypatch):
    fired = []
    eng.on("BROKER_VOL", lambda *a: fired.append(a[4]))
    counter = ExitCounter(monkeypatch, eng)
    feed(eng, "1,1,B,10,100\n" + "".join(f"{i},1,E,0,0\n" for i in range(2, 7)) + "7,2,S,1,1\n")
    assert fired == [1]
    assert counter.calls == 1          # only line 1 changes the view


# ------------------------------------------------------------------------------------------
# event loop
# ------------------------------------------------------------------------------------------

def chunked_batches(text: str, pieces: int) -> list[EventBatch]:
    """Feed ``text`` to one parser in ``pieces`` chunks cut at line boundaries."""
    lines = text.splitlines(keepends=True)
    step = -(-len(lines) // pieces)
    parser = OrderBookParser(brokers=10)
    out = [parser.feed("".join(lines[i:i + step]).encode()) for i in range(0, len(lines), step)]
    out.append(parser.close())
    return out


def record_all(engine: Engine, views=("BID_VOL", "ASK_VOL", "BROKER_VOL")) -> list[tuple]:
    log: list[tuple] = []
    for v in views:
        engine.on(v, lambda *a: log.append(a))
    return log


def test_event_loop_two_sync_sources_round_robin(eng):
    bids = order_flow(120, seed=5, sides="B")
    asks = order_flow(90, seed=6, sides="S", first_id=100_000)
    a_batches, b_batches = chunked_batches(bids, 3), chunked_batches(asks, 3)
    log = record_all(eng)
    loop = EventLoop(eng)
    loop.add_source(a_batches, name="a")
    loop.add_source(b_batches, name="b")
    loop.run()

    # the same lines in the loop's order (batch by batch, alternating) through a fresh engine
    a_lines, b_lines = bids.splitlines(), asks.splitlines()
    merged, ia, ib = [], 0, 0
    for ba, bb in zip(a_batches, b_batches, strict=True):
        na, nb = ba.last_line - ba.first_line + 1, bb.last_line - bb.first_line + 1
        merged += a_lines[ia:ia + na] + b_lines[ib:ib + nb]
        ia, ib = ia + na, ib + nb
    assert len(merged) == 210
    ref = Engine(BOOK)
    ref_log = record_all(ref)
    feed(ref, "\n".join(merged) + "\n")
    assert log == ref_log
    positions = [c[4] for c in log]
    assert positions == sorted(positions) and positions[-1] <= 210
    assert eng.position == 210
    assert eng.snapshot() == ref.snapshot()


def test_event_loop_relation_names(eng):
    """A source names its relations: rel 0 of this hand-made source is 'asks'."""
    batch = EventBatch(np.zeros(2, np.int8), np.array([1, 1], np.int8),
                       np.array([[1, 1, 1, 5, 100], [2, 2, 2, 7, 100]], np.float64),
                       np.array([1, 2], np.int64), 1, 2)
    loop = EventLoop(eng)
    loop.add_source([batch], relations=("asks",))
    loop.add_source([batch], relations=("BIDS",))
    loop.add_source([batch], relations=("trades",))    # unknown relation: ignored
    loop.run()
    assert eng.value("ASK_VOL") == 12.0 and eng.value("BID_VOL") == 12.0
    assert eng.position == 6


def test_event_loop_run_rejects_async_source(eng):
    async def source():
        yield EventBatch.empty(5)
    loop = EventLoop(eng)
    loop.add_source(source())
    with pytest.raises(TypeError):
        loop.run()


async def trickle(batches, delay=0.0):
    for b in batches:
        await asyncio.sleep(delay)
        yield b


def one_line_batches(text: str, **kw) -> list[EventBatch]:
    parser = OrderBookParser(brokers=10, **kw)
    return [parser.feed(line.encode()) for line in text.splitlines(keepends=True)]


def test_run_async_sync_and_async_sources(eng):
    bids = order_flow(80, seed=7, sides="B")
    asks = order_flow(60, seed=8, sides="S", first_id=100_000)
    log = record_all(eng)
    loop = EventLoop(eng)
    loop.add_source(trickle(one_line_batches(bids)), name="async bids")
    loop.add_source(chunked_batches(asks, 6), name="sync asks")
    asyncio.run(loop.run_async())

    positions = [c[4] for c in log]
    assert positions == sorted(positions)
    assert eng.position == 140
    # each source's own updates arrive in its own order, whatever the interleaving
    ref_b, ref_a = Engine(BOOK), Engine(BOOK)
    lb, la = record_all(ref_b), record_all(ref_a)
    feed(ref_b, bids)
    feed(ref_a, asks)
    strip = lambda cs: [c[:4] for c in cs]  # noqa: E731
    assert strip(c for c in log if c[0] != "ASK_VOL") == strip(lb)
    assert strip(c for c in log if c[0] == "ASK_VOL") == strip(c for c in la if c[0] == "ASK_VOL")
    assert eng.value("BID_VOL") == ref_b.value("BID_VOL")
    assert eng.value("ASK_VOL") == ref_a.value("ASK_VOL")


# ------------------------------------------------------------------------------------------
# live views
# ------------------------------------------------------------------------------------------

def test_scalar_view_is_live(eng):
    v = eng.view("BID_VOL")
    n = eng.views["BID_N"]
    avg = eng.view("BID_AVG")
    assert isinstance(v, ScalarView) and v.name == "BID_VOL"
    assert v.value == 0.0 and n.value == 0
    feed(eng, "1,1,B,10,100\n2,2,B,5,100\n")
    assert v.value == 15.0 and isinstance(v.value, float)
    assert n.value == 2 and isinstance(n.value, int)     # an int map reads as int
    assert avg.value == 7.5
    eng.delete("BIDS", 1, 1, 1, 10, 100)
    eng.delete("BIDS", 2, 2, 2, 5, 100)
    assert v.value == 0.0 and n.value == 0 and avg.value is None   # NULL: None
    assert eng.value("BID_VOL") == 0.0


def test_grouped_view_is_a_live_mapping(eng):
    g = eng.view("BROKER_VOL")
    bp = eng.view("BP_VOL")
    assert isinstance(g, GroupedView) and isinstance(g, Mapping)
    assert len(g) == 0 and list(g) == [] and g.rows() == []
    feed(eng, "1,17,B,10,100\n2,12,B,5,100\n3,27,B,1,101.5\n4,30,S,8,90\n")
    assert len(g) == 2
    assert sorted(g) == [(2,), (7,)]
    assert all(isinstance(k[0], int) for k in g)
    assert g[7] == 11.0 and g[(7,)] == 11.0 and g[7.0] == 11.0
    assert 7 in g and (2,) in g and 3 not in g and (0,) not in g and "x" not in g
    assert (7, 1) not in g                       # wrong arity
    with pytest.raises(KeyError):
        g[3]
    with pytest.raises(KeyError):
        g[(7, 100.0)]
    assert g.get(3) is None and g.get(2) == 5.0
    assert g.rows() == [[2, 5.0], [7, 11.0]]
    assert dict(g.items()) == {(2,): 5.0, (7,): 11.0}
    assert bp[(7, 100.0)] == 10.0 and bp[7, 101.5] == 1.0 and (7, 100) in bp
    assert bp.rows() == [[2, 100.0, 5.0], [7, 100.0, 10.0], [7, 101.5, 1.0]]
    # the same objects follow later updates
    feed(eng, "5,12,D,0,0\n6,17,E,4,0\n")
    assert len(g) == 1 and 2 not in g and g[7] == 7.0
    assert g.rows() == [[7, 7.0]]
    assert bp.rows() == [[7, 100.0, 6.0], [7, 101.5, 1.0]]
    assert eng.snapshot()["BROKER_VOL"] == [[7, 7.0]]
    assert eng.value("BROKER_VOL") == {(7,): 7.0}


def test_views_are_read_only(eng):
    feed(eng, "1,1,B,10,100\n")
    s, g = eng.view("BID_VOL"), eng.view("BROKER_VOL")
    with pytest.raises(ViewError):
        s.value = 3.0
    with pytest.raises(ViewError):
        s._cell = np.zeros(1)
    with pytest.raises(ViewError):
        g[1] = 3.0
    with pytest.raises(ViewError):
        g[(5,)] = 3.0
    with pytest.raises(ViewError):
        del g[1]
    assert s.value == 10.0 and dict(g) == {(1,): 10.0}


def test_views_dict_and_snapshot(eng):
    assert set(eng.views) == set(SCALARS + GROUPED)
    feed(eng, "1,1,B,10,100\n2,2,S,4,100\n")
    snap = eng.snapshot()
    assert snap == {"BID_VOL": 10.0, "ASK_VOL": 4.0, "BID_N": 1, "BID_AVG": 10.0,
                    "BROKER_VOL": [[1, 10.0]], "BP_VOL": [[1, 100.0, 10.0]]}


# ------------------------------------------------------------------------------------------
# futures
# ------------------------------------------------------------------------------------------

def test_future_resolves_when_predicate_first_holds(eng, monkeypatch):
    fut = eng.future("BID_VOL", lambda v: v >= 20)
    assert not fut.done()
    feed(eng, "1,1,B,10,100\n2,2,S,50,100\n3,3,B,15,100\n4,4,B,15,100\n")
    assert fut.done()
    ev = fut.result(timeout=0)
    assert ev == ViewEvent("BID_VOL", 3, 25.0)
    # the future's callback is gone: later batches run in one call again
    counter = RunBatchCounter(monkeypatch, eng)
    feed(eng, "5,5,B,1,100\n6,6,B,1,100\n")
    assert counter.calls == 1
    assert fut.result() == ViewEvent("BID_VOL", 3, 25.0)


def test_future_already_true_resolves_immediately(eng):
    feed(eng, "1,1,B,10,100\n2,2,B,10,100\n")
    fut = eng.future("BID_N", lambda v: v == 2)
    assert fut.done() and fut.result(timeout=0) == ViewEvent("BID_N", 2, 2)
    fut0 = Engine(BOOK).future("BID_VOL", lambda v: v == 0)
    assert fut0.result(timeout=0) == ViewEvent("BID_VOL", 0, 0.0)


def test_future_that_never_holds_stays_pending(eng):
    fut = eng.future("ASK_VOL", lambda v: v > 1e9)
    feed(eng, order_flow(200, seed=9))
    assert not fut.done()
    assert not fut.cancelled()


def test_future_on_grouped_view(eng):
    fut = eng.future("BROKER_VOL", lambda d: len(d) >= 2)
    feed(eng, "1,11,B,10,100\n2,21,B,10,100\n3,12,B,3,100\n4,13,B,3,100\n")
    ev = fut.result(timeout=0)
    assert ev.view == "BROKER_VOL" and ev.position == 3
    assert ev.value == {(1,): 20.0, (2,): 3.0}
    assert isinstance(ev.value, dict) and ev.value is not eng.view("BROKER_VOL")
    now = eng.future("BROKER_VOL", lambda d: (9,) not in d)      # already true
    assert now.result(timeout=0) == ViewEvent("BROKER_VOL", 4, {(1,): 20.0, (2,): 3.0, (3,): 3.0})


def test_future_group_disappears(eng):
    feed(eng, "1,11,B,10,100\n2,12,B,3,100\n")
    fut = eng.future("BROKER_VOL", lambda d: (2,) not in d)
    assert not fut.done()
    feed(eng, "3,11,E,1,0\n4,12,E,3,0\n5,13,B,3,100\n")
    assert fut.result(timeout=0) == ViewEvent("BROKER_VOL", 4, {(1,): 9.0})


def test_until_awaited_while_async_source_is_consumed(eng):
    text = "".join(f"{i},{i},{'B' if i % 2 else 'S'},10,100\n" for i in range(1, 41))
    batches = one_line_batches(text)

    async def main():
        loop = EventLoop(eng)
        loop.add_source(trickle(batches, delay=0.002))
        waiter = eng.until("BID_VOL", lambda v: v >= 50)     # bids at odd lines: 50 after line 9
        task = asyncio.create_task(loop.run_async())
        ev = await asyncio.wait_for(waiter, timeout=30)
        woke_at = eng.position
        await task
        return ev, woke_at

    ev, woke_at = asyncio.run(main())
    assert ev == ViewEvent("BID_VOL", 9, 50.0)
    assert 9 <= woke_at < 40, "until() should resolve while the source is still being consumed"
    assert eng.position == 40 and eng.value("BID_VOL") == 200.0


def test_until_already_true_in_running_loop(eng):
    async def main():
        return await eng.until("BID_VOL", lambda v: v == 0)
    assert asyncio.run(main()) == ViewEvent("BID_VOL", 0, 0.0)


# ------------------------------------------------------------------------------------------
# direct insert / delete, and errors
# ------------------------------------------------------------------------------------------

def test_insert_delete_one_line_each(eng):
    calls = record_all(eng)
    eng.insert("BIDS", 1, 1, 3, 10, 100)
    eng.insert("ASKS", 2, 2, 2, 4, 100)
    eng.delete("BIDS", 1, 1, 3, 10, 100)
    assert eng.position == 3
    assert [(c[0], c[4]) for c in calls] == [("BID_VOL", 1), ("BROKER_VOL", 1), ("ASK_VOL", 2),
                                              ("BID_VOL", 3), ("BROKER_VOL", 3)]
    assert eng.value("BROKER_VOL") == {} and eng.value("ASK_VOL") == 4.0
    feed(eng, "1,1,B,1,100\n")                  # positions keep counting across batches
    assert calls[-1][4] == 4 and eng.position == 4


def test_insert_delete_errors(eng):
    with pytest.raises(ProgramError, match="TRADES"):
        eng.insert("TRADES", 1, 2, 3, 4, 5)
    with pytest.raises(ProgramError):
        eng.delete("bids", 1, 2, 3, 4, 5)           # stream names are case-sensitive
    with pytest.raises(ProgramError, match="5 columns"):
        eng.insert("BIDS", 1, 2, 3)
    with pytest.raises(ProgramError):
        eng.delete("ASKS", 1, 2, 3, 4, 5, 6)
    with pytest.raises(ProgramError):
        eng.insert("BIDS")
    assert eng.position == 0 and eng.value("BID_VOL") == 0.0
    assert issubclass(ProgramError, DdmsError)


def test_apply_batch_with_error_keeps_lines_before_it(eng):
    parser = OrderBookParser(brokers=10, source="feed")
    fired = []
    eng.on("BID_VOL", lambda *a: fired.append(a[4]))
    batch = parser.feed(b"1,1,B,10,100\n2,2,B,5,100\n3,oops,B,1,1\n4,4,B,1,100\n")
    assert batch.error is not None
    with pytest.raises(InputError, match="feed:3"):
        eng.apply(batch, eng.relmap(REL))
    assert fired == [1, 2]
    assert eng.position == 2 and eng.value("BID_VOL") == 15.0


def test_insert_rejects_bad_values_and_signs_before_applying(eng):
    """A NaN, an infinity or a non-number would poison every sum it enters for good (a later
    delete cannot take it back out): rejected, naming the column, with nothing applied."""
    eng.insert("BIDS", 1, 1, 3, 10, 100)
    for bad, col in ((float("nan"), 4), (float("inf"), 5), (None, 4), ("abc", 5)):
        values = [2, 2, 3, 10, 100]
        values[col - 1] = bad
        with pytest.raises(InputError, match=f"column {col} is not a"):
            eng.insert("BIDS", *values)
    with pytest.raises(ProgramError, match="neither '\\+'"):
        eng.event("insert", "BIDS", (2, 2, 3, 10, 100))
    eng._check()
    assert eng.position == 1 and eng.value("BID_VOL") == 10.0


@pytest.mark.parametrize("rel, sign, line, relmap, width, match", [
    ([3], [1], [1], [0, 1], 5, "relation number 3 is not in the relation map"),
    ([0], [1], [1], [5, 1], 5, "relation map .* must be int64 stream numbers"),
    ([0], [2], [1], [0, 1], 5, "sign 2 is neither"),
    ([0], [0], [1], [0, 1], 5, "sign 0 is neither"),
    ([0, 0], [1, 127], [1, 2], [0, 1], 5, "sign 127 is neither"),   # 127 * 127 wraps to 1 in int8
    ([0, 0], [1, 1], [2, 1], [0, 1], 5, "input line 1 is out of order"),
    ([0], [1], [7], [0, 1], 5, "input line 7 is out of order"),
    ([0], [1], [1], [0, 1], 2, "relation 0 has 2 columns, its stream needs 5"),
    ([1], [1], [1], [-1, 0], 2, "relation 1 has 2 columns, its stream needs 5"),
])
def test_apply_rejects_a_malformed_batch_before_applying(eng, rel, sign, line, relmap, width, match):
    """Compiled code indexes the batch without bounds checks: a hand-built batch that would read
    outside it, or apply an event that is neither insert nor delete, is refused whole."""
    eng.insert("BIDS", 1, 1, 3, 10, 100)
    n = len(rel)
    batch = EventBatch(np.array(rel, np.int8), np.array(sign, np.int8), np.full((n, width), 50.0),
                       np.array(line, np.int64), 1, 2)
    with pytest.raises(InputError, match=match):
        eng.apply(batch, np.array(relmap, np.int64))
    eng._check()
    assert eng.position == 1 and eng.value("BID_VOL") == 10.0


def test_applying_again_after_a_callback_raised_resumes_after_its_line(eng):
    """The line whose callback raised is applied; applying the same batch again continues after
    it: nothing is lost and nothing is applied twice."""
    raised = []

    def once(*a):
        if not raised:
            raised.append(a[4])
            raise RuntimeError("boom")
    eng.on("BID_VOL", once)
    batch = batch_of("1,1,B,10,100\n2,2,B,5,100\n3,3,B,1,100\n")
    with pytest.raises(RuntimeError, match="boom"):
        eng.apply(batch, eng.relmap(REL))
    assert eng.position == 1 and eng.value("BID_VOL") == 10.0
    eng.apply(batch, eng.relmap(REL))
    assert eng.position == 3 and eng.value("BID_VOL") == 16.0
    eng._check()


def test_program_files_that_cannot_be_read_are_program_errors(tmp_path):
    (tmp_path / "latin1.m3").write_bytes(b"-- caf\xe9\n")
    (tmp_path / "unknown.m3").write_text(BOOK.replace("BID_VOL[] += VOLUME;", "BID_VOLX[] += VOLUME;", 1))
    for path, match in ((tmp_path / "missing.m3", "missing.m3: no such program file"),
                        (tmp_path, "is a directory, not a program file"),
                        (tmp_path / "latin1.m3", "latin1.m3: not UTF-8 text"),
                        (tmp_path / "unknown.m3", "unknown.m3: .*BID_VOLX")):
        with pytest.raises(ProgramError, match=match):
            Engine(str(path))


# ------------------------------------------------------------------------------------------
# vwap.m3 (ORDERED maps) against the interpreter
# ------------------------------------------------------------------------------------------

def vwap_calls_vs_oracle(text: str) -> None:
    prog_text = VWAP_M3.read_text()
    batch = batch_of(text)
    states = oracle(prog_text, batch)
    eng = Engine(VWAP_M3)
    calls = []
    eng.on("VWAP", lambda *a: calls.append(a))
    eng.apply(batch, eng.relmap(REL))
    assert_calls(calls, expected_calls(states, "VWAP", False), rel=1e-12)
    assert same(eng.value("VWAP"), states[batch.last_line]["VWAP"], rel=1e-12)


def test_vwap_callbacks_match_interpreter_random_flow():
    vwap_calls_vs_oracle(order_flow(300, seed=10))


@pytest.mark.skipif(not TINY.exists(), reason="shared tiny order book not present")
def test_vwap_callbacks_match_interpreter_tiny():
    vwap_calls_vs_oracle(TINY.read_text())
    eng = Engine(VWAP_M3)
    feed(eng, TINY.read_text())
    assert eng.value("VWAP") == 491070000.0


def top_of(levels: dict[int, int], bids: bool) -> tuple[float, float]:
    """(sum of price * volume, sum of volume) over the levels of one side whose volume strictly
    better (bids: higher, asks: lower) is below 0.25 of the side's total (vwap.sql, sobi.m3), from
    scratch with numpy."""
    px = np.array(sorted(levels, reverse=bids), dtype=np.float64)
    vol = np.array([levels[int(p)] for p in px], dtype=np.float64)
    better = np.cumsum(vol) - vol        # prices are distinct
    keep = 0.25 * vol.sum() > better
    return float((px[keep] * vol[keep]).sum()), float(vol[keep].sum())


def big_book(n: int, steady: int, sides: str, seed: int) -> tuple[str, str, dict[int, tuple[dict, dict]]]:
    """(build lines, steady lines, {input line: (bid levels, ask levels)} at sampled lines): ``n``
    orders at distinct prices on ``sides`` ("B" or "BS", bids below 2M, asks above), then
    partial executions and fills or deletes each followed by a new order of the same side at a
    fresh price."""
    rng = random.Random(seed)
    book: dict[str, dict[int, int]] = {"B": {}, "S": {}}
    lo = {"B": 1_000_000, "S": 2_000_000}
    resting: list[tuple[str, int]] = []
    ids: dict[tuple[str, int], int] = {}
    build = []
    for i in range(1, n + 1):
        side = sides[i % len(sides)]
        while (p := rng.randrange(lo[side], lo[side] + 4 * n)) in book[side]:
            pass
        book[side][p] = rng.randint(100, 999)
        ids[side, p] = i
        resting.append((side, p))
        build.append(f"{i},{i},{side},{book[side][p]},{p}")
    lines: list[str] = []
    snaps: dict[int, tuple[dict, dict]] = {}
    nid = n + 1
    while len(lines) < steady:
        j = rng.randrange(len(resting))
        side, p = resting[j]
        t = n + len(lines) + 1
        if rng.random() < 0.4 and book[side][p] > 1:
            q = rng.randint(1, min(book[side][p] - 1, 50))
            book[side][p] -= q
            lines.append(f"{t},{ids[side, p]},E,{q},0")
        else:
            lines.append(f"{t},{ids[side, p]},{rng.choice('FD')},0,0")
            del book[side][p]
            while (p := rng.randrange(lo[side], lo[side] + 4 * n)) in book[side]:
                pass
            resting[j] = (side, p)
            book[side][p], ids[side, p] = rng.randint(100, 999), nid
            lines.append(f"{t},{nid},{side},{book[side][p]},{p}")
            nid += 1
        if len(lines) % 250 < 2 or len(lines) >= steady:
            snaps[n + len(lines)] = (dict(book["B"]), dict(book["S"]))
    return "\n".join(build) + "\n", "\n".join(lines) + "\n", snaps


def sobi_views(bids: dict[int, int], asks: dict[int, int]) -> dict[str, float]:
    """sobi.m3's views from scratch."""
    bpv, bv = top_of(bids, True)
    apv, av = top_of(asks, False)
    bb, ba = float(max(bids)), float(min(asks))
    mid = 0.5 * (bb + ba)
    return {"BID_VWAP": bpv / bv, "ASK_VWAP": apv / av, "BEST_BID": bb, "BEST_ASK": ba,
            "SPREAD": ba - bb, "MID": mid, "SOBI": apv / av - mid - (mid - bpv / bv)}


@pytest.mark.parametrize("prog", ["vwap", "sobi"])
def test_big_book_prefetching_run_batch_matches_numpy(prog):
    """Books past btree.PF_LEAVES leaves, where run_batch prefetches each event's leaf a few
    events ahead (btree_prefetch; SOBI: two trees of three columns): with and without callbacks
    the views equal a from-scratch computation after sampled lines, and the trees pass their
    checks."""
    from ddms.storage.btree import btree_big
    build, steady, snaps = big_book(40_000 if prog == "vwap" else 60_000, 4000, "B" if prog == "vwap" else "BS", 4)
    if prog == "vwap":
        views = {line: {"VWAP": top_of(b, True)[0]} for line, (b, _) in snaps.items()}
    else:
        views = {line: sobi_views(b, a) for line, (b, a) in snaps.items()}
    last = max(views)
    for watched in (False, True):
        eng = Engine(ROOT / "examples" / "m3" / f"{prog}.m3")
        assert "prefetch(st, pfr, relmap" in eng.generated.source
        calls: list[tuple] = []
        feed(eng, build)
        assert all(btree_big(getattr(eng.state, f)) for f in dir(eng.state) if f.startswith("op_"))
        start = {v: eng.value(v) for v in views[last]}   # as of the build: line 0 of the steady part
        if watched:
            for v in views[last]:
                eng.on(v, lambda *a, out=calls: out.append(a))
        feed(eng, steady)
        eng._check()
        for v, want in views[last].items():
            assert same(eng.value(v), want, rel=1e-12), (v, eng.value(v), want)
        if watched:
            for v in views[last]:
                after = {0: start[v]} | {c[4]: c[3] for c in calls if c[0] == v}
                for line, want in views.items():
                    got = after[max(k for k in after if k <= line)]
                    assert same(got, want[v], rel=1e-12), (v, line, got, want[v])


# ------------------------------------------------------------------------------------------
# several queries over one map
# ------------------------------------------------------------------------------------------

SHARED = """
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP TOT(float)[];
DECLARE MAP BV(float)[B: int];
DECLARE QUERY A := TOT;
DECLARE QUERY A2 := TOT;
DECLARE QUERY G := BV;
DECLARE QUERY G2 := BV;
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { TOT[] += VOLUME; BV[BROKER_ID] += VOLUME; }
ON - BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { TOT[] += -VOLUME; BV[BROKER_ID] += -VOLUME; }
"""


def test_two_grouped_queries_on_one_map_both_fire():
    eng = Engine(SHARED)
    g, g2 = [], []
    eng.on("G", lambda *a: g.append(a))
    eng.on("G2", lambda *a: g2.append(a))
    feed(eng, "1,1,B,5,100\n2,2,B,3,100\n")
    assert g == [("G", (1.0,), 0.0, 5.0, 1), ("G", (2.0,), 0.0, 3.0, 2)]
    assert g2 == [("G2", (1.0,), 0.0, 5.0, 1), ("G2", (2.0,), 0.0, 3.0, 2)]


def test_cancel_on_one_query_keeps_other_query_on_same_map_watched():
    eng = Engine(SHARED)
    a = []
    eng.on("A", lambda *x: a.append(x))
    eng.on("A2", lambda *x: None)()            # register and cancel at once
    feed(eng, "1,1,B,5,100\n2,2,B,5,100\n3,3,B,5,100\n")
    assert a == [("A", (), 0.0, 5.0, 1), ("A", (), 5.0, 10.0, 2), ("A", (), 10.0, 15.0, 3)]


def test_division_zero_by_zero_engine_agrees_with_interpreter(eng):
    """0/0 is NaN (SQL NULL) in both the backend and the interpreter (ddms/m3/ir.py)."""
    text = "1,1,B,10,100\n2,1,D,0,0\n"
    batch = batch_of(text)
    states = oracle(BOOK, batch)
    eng.apply(batch, eng.relmap(REL))
    assert eng.value("BID_AVG") is None          # documented in ddms/m3/ir.py: x/0 is NaN (NULL: None)
    assert same(eng.value("BID_AVG"), states[2]["BID_AVG"])


def test_apply_until_line_resumes_the_same_batch():
    """Applying one batch piecewise (until_line, then the same object again) gives, after each
    piece, the state of an engine fed exactly those lines; the batch's error is raised only
    with its last piece, after every good line."""
    lines = [f"{i},{i},{'B' if i % 2 else 'S'},{i % 7 + 1},{100 + i % 5}" for i in range(1, 41)]
    batch = OrderBookParser(source="t.csv").feed(("\n".join(lines) + "\n1,2,X,3\n").encode())
    assert batch.error is not None and batch.last_line == 40
    parts = Engine(VWAP_M3)
    relmap = parts.relmap(("bids", "asks"))
    for cut in (3, 3, 17, 30, 39):
        parts.apply(batch, relmap, until_line=cut)
        ref = Engine(VWAP_M3)
        ref.apply(parse_orderbook_text("\n".join(lines[:cut])), relmap)
        assert parts.position == ref.position == cut
        assert parts.value("VWAP") == ref.value("VWAP")
        parts._check()
    with pytest.raises(InputError, match="t.csv:41"):
        parts.apply(batch, relmap)
    assert parts.position == 40
    ref.apply(parse_orderbook_text("\n".join(lines[39:])), relmap)
    assert parts.value("VWAP") == ref.value("VWAP")
