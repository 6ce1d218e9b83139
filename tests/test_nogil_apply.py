"""The compiled apply loop runs without the GIL, so that ``ddms run`` parses the next chunk in a
thread meanwhile (:func:`ddms.runtime.driver.prefetch`; while the loop held the GIL the two took
strict turns).  Without the GIL a read of a view from another thread could land in the middle of
a line, or of a map's update: every view read from a thread other than the applying one is
therefore taken at a line boundary by the applying thread (``Engine._at_boundary``).  Checked
here: the compiled entry points release the GIL, and a thread reading live views (scalar values,
grouped lookups, lengths and rows) while another applies only ever sees the views after some
line, never a half-applied one."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from conftest import applied_line_by_line

import ddms.runtime.engine as engine_mod
from ddms.io.events import _first_fault
from ddms.io.orderbook import OrderBookParser
from ddms.io.orderbook import _run as parse_kernel
from ddms.runtime.driver import prefetch, replay
from ddms.runtime.engine import Engine
from ddms.runtime.views import GroupedView, ScalarView
from replay.synthetic import generate_orderbook

LINES = 10_000


@pytest.fixture
def program(threaded_program):
    return threaded_program


def test_compiled_entry_points_release_the_gil(program):
    """The apply loop, the batch check before it and the parser's kernel release the GIL (numba's
    ``nogil``): the two threads of ``ddms run`` can then run at the same time."""
    eng = Engine(program)
    assert eng.module.run_batch.targetoptions.get("nogil") is True
    assert _first_fault.targetoptions.get("nogil") is True
    assert parse_kernel.targetoptions.get("nogil") is True


def _reads(view) -> list[tuple]:
    """Live reads of ``view``, each a hashable (kind, value) with floats as their exact hex
    spelling: a scalar's value; a grouped view's rows, its length, and the value of one key
    looked up (each read on its own, so lines may pass between them)."""
    hx = float.hex
    if isinstance(view, ScalarView):
        v = view.value
        return [("value", None if v is None else hx(float(v)))]
    assert isinstance(view, GroupedView)
    rows = view.rows()
    out = [("rows", tuple(tuple(hx(float(x)) for x in r) for r in rows)), ("len", len(view))]
    if rows:
        key = tuple(rows[len(rows) // 2][:-1])
        got = view.get(key)   # one read (the key may be gone by now: None)
        out.append(("get", tuple(map(hx, map(float, key))), None if got is None else hx(float(got))))
        out.append(("in", tuple(map(hx, map(float, key))), key in view))
    return out


def test_view_reads_from_another_thread_see_line_boundaries(program, monkeypatch):
    monkeypatch.setattr(engine_mod, "CHUNK_EVENTS", 64)   # many line boundaries to be read at
    batch = OrderBookParser().feed(b"".join(generate_orderbook(LINES, seed=11, depth=60)))
    ref = Engine(program)
    single = [n for n, v in ref._single.items() if isinstance(v, ScalarView | GroupedView)]
    relmap = ref.relmap(("bids", "asks"))
    # what each read gives after every line (the engine applied line by line); a lookup of a
    # key after every line, for every key ever present (NaN-free: absent is None)
    boundary: dict[str, set] = {n: set() for n in single}
    present: dict[str, set] = {n: set() for n in single}
    states = []
    for _ in applied_line_by_line(ref, batch, LINES):
        snap = {}
        for n in single:
            view = ref._single[n]
            for r in _reads(view):
                boundary[n].add(r)
            if isinstance(view, GroupedView):
                snap[n] = {tuple(map(float.hex, map(float, r[:-1]))): float.hex(float(r[-1])) for r in view.rows()}
                present[n] |= set(snap[n])
        states.append(snap)
    for snap in states:   # the lookup of every key ever present, after every line
        for n, rows in snap.items():
            boundary[n] |= {("get", key, rows.get(key)) for key in present[n]}
            boundary[n] |= {("in", key, key in rows) for key in present[n]}

    busy_reads = 0
    for _attempt in range(60):   # a loaded machine may not run the reader during a short apply: again
        eng = Engine(program)   # no callbacks: the writer spends its time in compiled code, GIL released
        reads: list[tuple[str, tuple, bool]] = []
        done = threading.Event()
        errors: list[BaseException] = []

        def reader(eng=eng, reads=reads, done=done, errors=errors) -> None:
            try:
                while not done.is_set():
                    for n in single:
                        busy = eng._busy
                        reads.extend((n, r, busy) for r in _reads(eng._single[n]))
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-5)
        try:
            t = threading.Thread(target=reader)
            t.start()
            while not reads and not errors:   # the reader runs before the writer starts
                time.sleep(0.001)
            eng.apply(batch, relmap)
            done.set()
            t.join()
        finally:
            sys.setswitchinterval(old)
        assert not errors, errors
        for n, r, _ in reads:
            assert r in boundary[n], f"{n}: a read from another thread saw {r[:2]}, no line boundary's"
        busy_reads += sum(busy for _, _, busy in reads)
        if busy_reads >= 100:
            break
    assert busy_reads >= 100, "too few reads while the writer applied"


def test_snapshot_inside_a_request_does_not_deadlock(program):
    """A snapshot taken with no writer running holds the engine's lock while it reads views,
    which ask for it again (a reentrant lock)."""
    eng = Engine(program)
    eng.apply(OrderBookParser().feed(b"1,1,B,10,100\n2,2,S,5,101\n"), eng.relmap(("bids", "asks")))
    box: list = []
    t = threading.Thread(target=lambda: box.append(eng.snapshot()))
    t.start()
    t.join(timeout=60)
    assert not t.is_alive() and box and box[0].position == 2


def test_prefetched_run_equals_the_serial_run(program):
    """Parsing ahead in a thread while the GIL-free apply loop runs gives bit for bit the views
    of parsing and applying one chunk after the other."""
    data = b"".join(generate_orderbook(20_000, seed=3, depth=80))
    chunks = [data[i:i + 4096] for i in range(0, len(data), 4096)]

    def batches(parser):
        for c in chunks:
            yield parser.feed(c)
        yield parser.close()

    serial, ahead = Engine(program), Engine(program)
    relmap = serial.relmap(("bids", "asks"))
    replay(serial, batches(OrderBookParser()), relmap)
    replay(ahead, prefetch(batches(OrderBookParser())), relmap)
    assert ahead.position == serial.position == 20_000
    a, b = ahead.snapshot(), serial.snapshot()
    assert {n: repr(v) for n, v in a.items()} == {n: repr(v) for n, v in b.items()}
