"""The B+-tree's rare paths stay small in compiled programs: node rebalances call their moves
(``btree._lmove_out`` etc.) instead of inlining ~20 vectorised copies.  Why it matters: numba
parses a cached function's whole optimised module back at every start, so code size is start
time (missedtrades' run_batch: 121k -> 48k LLVM instructions, its load 0.1 -> 0.04 s)."""

from __future__ import annotations

import pytest

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.runtime.engine import Engine, load_program
from tests.conftest import EXAMPLES


def _instructions(fn) -> int:
    return sum(1 for block in fn.blocks for _ in block.instructions)


def test_rebalance_is_not_a_wall_of_inlined_moves():
    engine = Engine(load_program(EXAMPLES / "vwap.m3"))
    (overload,) = engine.module.run_batch.overloads.values()
    module = getattr(overload.library, "_shared_module", None)   # (numba's module of a loaded library)
    if module is None:
        pytest.skip("this numba keeps no module of a cached library")
    sizes = {fn.name: _instructions(fn) for fn in module.functions if not fn.is_declaration}
    rebalance = [n for name, n in sizes.items() if "_rebalance" in name]
    assert rebalance, "vwap.m3's run_batch holds btree._rebalance"
    # 22,393 instructions with the moves inlined, 780 calling them
    assert max(rebalance) < 5_000, rebalance
    assert any("_imove_out" in name for name in sizes)
