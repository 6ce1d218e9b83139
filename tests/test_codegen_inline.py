"""Which trigger functions the generated module compiles into their caller (``INLINE_BUDGET``):
source-level checks, no numba compile.  That the inlined code runs as before is the business of
every engine test (all of them run it)."""

from __future__ import annotations

import re

import pytest
from conftest import EXAMPLES

from ddms.backend.codegen import INLINE_BUDGET, _inlined, generate
from ddms.m3.parser import parse_program
from ddms.runtime.engine import load_program

DECORATED = re.compile(r"@njit\(cache=True(, inline='always')?\)\ndef ((?:on_insert|on_delete)_\w+?|lazy_\d+)\(")


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


def test_a_long_trigger_keeps_a_function_of_its_own():
    g = generate(parse_program(_long_program(INLINE_BUDGET + 1)))
    assert decorated(g.source) == {"on_insert_R": False, "on_delete_R": True}


def test_the_budget_is_shared_by_the_triggers():
    g = generate(parse_program(_long_program(INLINE_BUDGET)))   # 16 + 1 statements
    assert decorated(g.source) == {"on_insert_R": False, "on_delete_R": True}
    g = generate(parse_program(_long_program(INLINE_BUDGET - 1)))   # 15 + 1
    assert decorated(g.source) == {"on_insert_R": True, "on_delete_R": True}
