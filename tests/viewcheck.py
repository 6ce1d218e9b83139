"""One harness for the SQL view tests: replay order-book lines through the reference interpreter
and/or a numba engine and compare every view with DuckDB (:mod:`oracle`) after each line.

Every view shape is compared the same way: a view's value becomes rows ``key tuple -> tuple of
output values`` with all-zero rows left out (the engine drops a group whose values are all 0;
SUM and COUNT over nothing are 0 by the documented convention), NULL is NaN, and values agree up
to ``rel`` (plus an absolute 1e-4, see :func:`oracle.same`)."""

from __future__ import annotations

import math

from oracle import Book, Duck, coalesce_sums, same

from ddms.io.orderbook import OrderBookParser
from ddms.m3.interpreter import Interpreter
from ddms.runtime.driver import split_lines
from ddms.runtime.engine import Engine
from ddms.runtime.views import TableView

STREAMS = {0: "BIDS", 1: "ASKS"}
REAL_RUNS = {"standard": 1, "big": 1000}
"""The real-data runs issue 21 is judged by, file -> compare after every n-th line: every line of
standard, every 1,000th of big (tiny's every line is each family's default test)."""


def stream_lines(stream: list[tuple]) -> list[str]:
    """Order-book lines from hypothesis tuples ``(action, order id, volume, price)``."""
    return [f"{i},{oid},{a},{v},{p}" for i, (a, oid, v, p) in enumerate(stream)]


def key_count(program, name: str) -> int:
    q = next(q for q in program.queries if q.name == name)
    return len(q.keys) if q.columns else len(program.map(q.map).keys)


def view_rows(program, name: str, got) -> dict[tuple, tuple]:
    """A view's value (interpreter or engine) as key -> tuple of values, all-zero rows left out."""
    if not key_count(program, name):
        vals = got if isinstance(got, tuple) else (got,)
        rows = {(): tuple(math.nan if v is None else float(v) for v in vals)}
    else:
        rows = {k: (v if isinstance(v, tuple) else (v,)) for k, v in dict(got).items()}
    return {k: v for k, v in rows.items() if not _zero(v)}


def _zero(vals: tuple) -> bool:
    """All values 0, up to the rounding an incremental sum keeps after its rows are deleted
    (``SUM(price / 3)`` over inserts and deletes reads 1e-15, not 0).  A row without values (a
    view of keys alone: SELECT DISTINCT) is a row."""
    return bool(vals) and all(abs(x) <= 1e-9 for x in vals)


def duck_rows(result: list[tuple], keys: int) -> dict[tuple, tuple]:
    """DuckDB's rows in the form of :func:`view_rows`."""
    out = {}
    for r in result:
        # NULL is NaN, and so is DuckDB's x / 0 (±inf, NaN): NULL by the documented convention
        vals = tuple(math.nan if x is None or math.isinf(x) else float(x) for x in r[keys:])
        if not _zero(vals):
            out[tuple(float(k) for k in r[:keys])] = vals
    return out


def same_rows(got: dict, want: dict, rel: float = 1e-9) -> bool:
    return got.keys() == want.keys() and all(
        all(same(a, b, rel) for a, b in zip(got[k], want[k], strict=True)) for k in want)


def engine_rows(program, name: str, view, rows: bool) -> dict[tuple, tuple]:
    """An engine view in the form of :func:`view_rows`: read as its value (a number or tuple,
    or a dict of groups), or with ``rows`` through the ``rows()`` list a table view gives (the
    form snapshots and exports are built from)."""
    keys = key_count(program, name)
    if not rows:
        return view_rows(program, name, view.value if not keys else dict(view))
    assert isinstance(view, TableView), f"{name}: {type(view).__name__}, not a table view"
    got = {tuple(r[:keys]): tuple(math.nan if x is None else x for x in r[keys:]) for r in view.rows()}
    return {k: v for k, v in got.items() if not _zero(v)}


def check_lines(program, lines: list[str], views: dict[str, str], *, interp: bool = True,
                engine: Engine | None = None, every: int = 1, check_state: bool = False,
                rel: float = 1e-9, table_rows: bool = False, check_every: int = 1) -> int:
    """Apply ``lines`` one input line at a time and compare each view of ``views`` (name -> the
    SQL DuckDB runs) with DuckDB after every ``every``-th line and the last one: the
    interpreter's if ``interp``, the engine's if ``engine`` (``check_state``: its ``_check()``
    at every ``check_every``-th comparison too; ``table_rows``: its views read through ``TableView.rows()``, each
    view having several columns).  Returns how many NULL values DuckDB's rows held over all
    the comparisons, so that a test can show its NULL cases are reached."""
    it = Interpreter(program) if interp else None
    batch = OrderBookParser(brokers=10).feed(("\n".join(lines) + "\n").encode())
    book, duck = Book(), Duck()
    relmap = engine.relmap(("bids", "asks")) if engine is not None else None
    queries = {name: (coalesce_sums(sql), key_count(program, name)) for name, sql in views.items()}
    i = nulls = 0
    for n, text in enumerate(lines, start=1):
        j = i
        while j < len(batch) and batch.line[j] == n:
            j += 1
        if it is not None:
            for k in range(i, j):
                it.apply("+" if batch.sign[k] > 0 else "-", STREAMS[int(batch.rel[k])], tuple(batch.cols[k]))
        if engine is not None:   # a line without events too (an execution of an unknown order)
            head, _ = split_lines(batch, n)
            engine.apply(type(batch)(head.rel[i:], head.sign[i:], head.cols[i:], head.line[i:], n, n), relmap)
        i = j
        book.line(text)
        if n % every and n != len(lines):
            continue
        if check_state and engine is not None and ((n // every) % check_every == 0 or n == len(lines)):
            engine._check()
        for name, (sql, keys) in queries.items():
            want = duck_rows(duck.query(book, sql), keys)
            nulls += sum(math.isnan(x) for row in want.values() for x in row)
            if it is not None:
                got = view_rows(program, name, it.view(name))
                assert same_rows(got, want, rel), f"{name} line {n} ({text}): interpreter {got} != DuckDB {want}"
            if engine is not None:
                got = engine_rows(program, name, engine.views[name], table_rows)
                assert same_rows(got, want, rel), f"{name} line {n} ({text}): engine {got} != DuckDB {want}"
    return nulls


def check_real_data(program, views: dict[str, str], run: str, **kw) -> int:
    """Every view of ``views`` through a fresh engine of ``program`` against DuckDB on the real
    file ``run`` (a key of :data:`REAL_RUNS`), the engine's structures checked at every 25th
    comparison (``_check`` is O(state) in Python).  For the ``-m slow`` test of each family:
    minutes on standard (a DuckDB query per view per line)."""
    from conftest import shared_file
    lines = shared_file("data", "orderbook", run, "finance.csv").read_text().splitlines()
    return check_lines(program, lines, views, interp=False, engine=Engine(program), every=REAL_RUNS[run],
                       check_state=True, check_every=25, **kw)
