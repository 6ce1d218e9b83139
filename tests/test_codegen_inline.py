"""Which trigger functions the generated module compiles into their caller (``INLINE_BUDGET``):
source-level checks, no numba compile.  That the inlined code runs as before is the business of
every engine test (all of them run it)."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

from ddms.backend.codegen import CHUNK_BLOCKS, INLINE_BUDGET, STATEMENTS_PER_FUNCTION, _chunks, _inlined, generate
from ddms.backend.inlinesize import InlineSizes
from ddms.m3.parser import parse_program
from ddms.runtime.engine import load_program

DECORATED = re.compile(r"@njit\(cache=True(, inline='always')?\)\ndef ((?:on_insert|on_delete)_\w+?|lazy_\d+)\(")


def _events(count: int):
    """``(n, sign, row)`` for ``count`` events of R: inserts, and every third a delete of a row
    inserted before."""
    rows: list[tuple[float, float, float]] = []
    for n in range(count):
        if rows and n % 3 == 2:
            yield n, "-", rows.pop((n * 7) % len(rows))
        else:
            row = (float(1 + n % 5), float(n % 4), float(n % 7) / 2)
            rows.append(row)
            yield n, "+", row


def _same(e, it, n: int) -> None:
    """The engine's TOT, HIGH and BYK views equal the interpreter's after event ``n``; its maps check."""
    for view in ("TOT", "HIGH"):
        assert e.value(view) == pytest.approx(it.view(view)), (n, view)
    assert {k: v for k, v in e.value("BYK").items() if v} == pytest.approx(
        {k: v for k, v in it.view("BYK").items() if v}), n
    e._check()


def decorated(source: str) -> dict[str, bool]:
    """Trigger and deferred-group function name -> inlined into its caller."""
    return {name: bool(inline) for inline, name in DECORATED.findall(source)
            if not re.search(r"_[sc]\d+$", name)}   # not the statement and chunk functions


@pytest.mark.parametrize("sizes,chosen", [
    ([], set()),
    ([3, 3, 20, 5], {0, 1, 3}),                     # smallest first; 20 does not fit
    ([INLINE_BUDGET], {0}),                          # exactly the budget
    ([INLINE_BUDGET + 1, 1], {1}),
    ([6, 6, 6], {0, 1}),                             # ties: program order
    ([0, 0], {0, 1}),                                # a trigger with no statements left
])
def test_inlined_takes_the_smallest_within_the_budget(sizes, chosen):
    assert _inlined(sizes) == chosen


@pytest.mark.parametrize("program", ["vwap.m3", "sobi.m3"])
def test_short_programs_compile_their_triggers_into_run_batch(program):
    g = generate(load_program(EXAMPLES / program))
    fns = decorated(g.source)
    assert fns and all(fns.values()), fns
    for name in fns:
        assert any(line.startswith(f"{name}: compiled into its caller") for line in g.plan), name


def _long_program(statements: int) -> str:
    body = "\n".join(f"  M{i}[] += X * {i + 1};" for i in range(statements))
    maps = "\n".join(f"DECLARE MAP M{i}(float)[];" for i in range(statements))
    queries = "\n".join(f"DECLARE QUERY M{i} := M{i};" for i in range(statements))
    return (f"CREATE STREAM R(X float);\n{maps}\n{queries}\n"
            f"ON + R(X) {{\n{body}\n}}\nON - R(X) {{\n  M0[] += -X;\n}}\n")


def test_a_long_trigger_keeps_functions_of_its_own_its_caller_calls():
    """Past STATEMENTS_PER_FUNCTION statements a trigger's chunks are functions of their own,
    called by run_batch itself: the wrapper calling them inlines (a wrapper function would be one
    more numba library linking and re-optimising every chunk's code)."""
    g = generate(parse_program(_long_program(INLINE_BUDGET + 1)))
    assert decorated(g.source) == {"on_insert_R": True, "on_delete_R": True}
    assert "@njit(cache=True)\ndef on_insert_R_c0(" in g.source
    assert "@njit(cache=True)\ndef on_insert_R_c1(" in g.source
    assert any(line.startswith("on_insert_R: 2 functions of at most") for line in g.plan)


def test_the_budget_is_shared_by_the_triggers():
    g = generate(parse_program(_long_program(INLINE_BUDGET)))   # 16 + 1 statements
    assert decorated(g.source) == {"on_insert_R": False, "on_delete_R": True}
    g = generate(parse_program(_long_program(INLINE_BUDGET - 1)))   # 15 + 1
    assert decorated(g.source) == {"on_insert_R": True, "on_delete_R": True}


WATCHED = """CREATE STREAM R(X float, K float, P float);
DECLARE MAP TOT(float)[];
DECLARE MAP BYK(float)[K: float];
DECLARE MAP CNT(float)[K: float];
DECLARE MAP LV(float)[P: float] ORDERED;
DECLARE MAP HIGH(float)[];
DECLARE QUERY TOT := TOT;
DECLARE QUERY BYK := BYK;
DECLARE QUERY HIGH := HIGH;
ON + R(X, K, P) {
  TOT[] += X;
  BYK[K] += X * CNT[K];
  CNT[K] += 1;
  LV[P] += X;
  HIGH[] := AggSum([], LV[P2] * {P2 > 2});
}
ON - R(X, K, P) {
  TOT[] += -X;
  CNT[K] += -1;
  BYK[K] += -X * CNT[K];
  LV[P] += -X;
  HIGH[] := AggSum([], LV[P2] * {P2 > 2});
}
"""


def test_past_the_budgets_run_batch_calls_its_parts_and_still_equals_the_interpreter(monkeypatch):
    """Past WATCH_INLINE_BUDGET / PREFETCH_INLINE_BUDGET (a program of ~100 views, which numba
    could not compile in 24 GB with them inlined) the watched-view checks and the prefetches are
    functions run_batch calls; the budgets forced to 0 here on a small program.  Both forms fire
    the same callbacks and end with the interpreter's views, line after line."""
    from ddms.backend import codegen
    from ddms.m3.interpreter import Interpreter
    from ddms.runtime.engine import Engine

    program = parse_program(WATCHED)
    inline = generate(program)
    assert "def watch_changes(" not in inline.source
    assert "@njit(cache=True, inline='always')\ndef prefetch(" in inline.source
    monkeypatch.setattr(codegen, "WATCH_INLINE_BUDGET", 0)
    monkeypatch.setattr(codegen, "PREFETCH_INLINE_BUDGET", 0)
    called = generate(program)
    assert "@njit(cache=True)\ndef watch_changes(" in called.source
    assert "@njit(cache=True)\ndef watch_snap(" in called.source
    assert "@njit(cache=True)\ndef prefetch(" in called.source
    assert "@njit(cache=True)\ndef prefetch_hash(" in called.source
    assert "changed, nch, cs, co, cn = watch_changes(bst, prev)" in called.source
    # a stage's level as a run-time int64: a literal would compile the function once per stage
    assert re.search(r"prefetch\(bst, .*, np\.int64\(-1\), i \+ \d+\)", called.source)
    assert any("WATCH_INLINE_BUDGET" in line for line in called.plan)
    assert any("PREFETCH_INLINE_BUDGET" in line for line in called.plan)
    engines = [Engine(program, generated=g) for g in (inline, called)]
    fired: list[list[tuple]] = [[], []]
    for e, log in zip(engines, fired, strict=True):
        for view in ("TOT", "BYK", "HIGH"):
            e.on(view, lambda v, k, old, new, pos, log=log: log.append((v, k, old, new, pos)))
    it = Interpreter(program)
    for n, sign, row in _events(300):
        it.apply(sign, "R", row)
        for e in engines:
            e.event(sign, "R", row)
            _same(e, it, n)
    assert fired[0] == fired[1] and len(fired[0]) > 300


def test_inline_sizes_follow_the_calls_numba_inlines():
    """Estimated blocks: a branch 2, a loop 3, an inlined call 2 plus the callee's expansion (the
    run-time library's inline="always" functions too); an ordinary call adds nothing."""
    z = InlineSizes()
    z.add("@njit(cache=True, inline='always')\ndef w(st, k):\n    if k:\n        st[0] = 1\n"
          "\n\n@njit(cache=True)\ndef s(st):\n    for i in range(3):\n        st[i] = 0\n"
          "\n\n@njit(cache=True, inline='always')\ndef f(st, k):\n    w(st, k)\n    w(st, k)\n    s(st)\n")
    assert z.size("w") == 1 + 2
    assert z.size("s") == 1 + 3
    assert z.size("f") == 1 + 2 * (2 + 3)   # s() is a call, not inlined
    assert z.lines(["    f(st, 1)", "    s(st)"]) == 1 + 2 + z.size("f")
    assert z.size("xh_wadd") > 10   # (ddms.storage.extheap: a window add, inlined where called)


@pytest.mark.parametrize("blocks,expected", [
    ([10, 10, 10], [[0, 1, 2]]),
    ([CHUNK_BLOCKS - 5, 10, 3], [[0], [1, 2]]),           # the budget passed: a new chunk
    ([3, CHUNK_BLOCKS + 50, 3], [[0], [1], [2]]),          # past it alone: a chunk of its own
    ([1] * (STATEMENTS_PER_FUNCTION + 1), [list(range(STATEMENTS_PER_FUNCTION)), [STATEMENTS_PER_FUNCTION]]),
])
def test_chunks_keep_to_both_budgets(blocks, expected):
    units = [[f"    s{i}()"] for i in range(len(blocks))]
    assert _chunks(units, blocks) == [[f"    s{i}()" for i in c] for c in expected]


def test_a_trigger_whose_inlined_code_passes_the_budget_is_cut_where_no_boundary_is_live(monkeypatch):
    """Cut by estimated size (CHUNK_BLOCKS forced to 1: a chunk per statement), a trigger keeps a
    threshold boundary it shares (SOBI's deferred top-k sums) in the chunk of its users."""
    from ddms.backend import codegen

    monkeypatch.setattr(codegen, "CHUNK_BLOCKS", 1)
    g = generate(load_program(EXAMPLES / "sobi.m3"))
    assert "@njit(cache=True)\ndef on_insert_BIDS_c1(" in g.source
    chunks = dict(re.findall(r"def (lazy_0_c\d+)\([^)]*\):\n((?:    .*\n)+)", g.source))
    cut = [body for body in chunks.values() if "threshold_cut(" in body]
    assert len(chunks) > 1 and len(cut) == 1, chunks
    assert "lazy_0_s0(" in cut[0] and "lazy_0_s1(" in cut[0], chunks


def test_a_trigger_cut_by_size_still_equals_the_interpreter(monkeypatch):
    """Every statement a function of its own (CHUNK_BLOCKS forced to 1), the engine's views equal
    the interpreter's after every event (inserts and deletes)."""
    from ddms.backend import codegen
    from ddms.m3.interpreter import Interpreter
    from ddms.runtime.engine import Engine

    program = parse_program(WATCHED)
    monkeypatch.setattr(codegen, "CHUNK_BLOCKS", 1)
    g = generate(program)
    fns = decorated(g.source)
    assert fns["on_insert_R"] and fns["on_delete_R"], fns   # (their chunks: functions run_batch calls)
    assert all(f"@njit(cache=True)\ndef on_{s}_R_c3(" in g.source for s in ("insert", "delete"))
    e, it = Engine(program, generated=g), Interpreter(program)
    for n, sign, row in _events(200):
        it.apply(sign, "R", row)
        e.event(sign, "R", row)
        _same(e, it, n)
