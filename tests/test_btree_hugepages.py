"""Node arrays of big range-tree pools are backed by transparent huge pages (ddms.storage.btree._huge).

A pool of a thousand per-instrument trees is tens of MB read at random; with 4 KiB pages nearly
every node visit is also a TLB miss.  numba allocates with malloc, which never asks for huge pages,
so a pool asks for them itself when its arrays double.  Checked through the kernel's own record
(``VmFlags: hg`` on the mapping in /proc/self/smaps: the advice was taken), not through timing.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import sys
from pathlib import Path

import numpy as np
import pytest

from ddms.storage.btree import HUGE, _grow2f, _grow2i, btree_add, btree_check, btree_new, btree_sum_lt

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not THP.exists() or "[never]" in THP.read_text(),
    reason="transparent huge pages: Linux with THP enabled (always or madvise) only")


def vm_flags(addr: int) -> set[str]:
    """The VmFlags of the mapping of this process that holds address ``addr``."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and line.startswith("VmFlags:"):
            return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {addr:#x}")


@pytest.mark.parametrize("grow", [_grow2f, _grow2i])
def test_a_grown_big_array_is_advised_huge_and_keeps_its_rows(grow):
    small = np.arange(16 * 40, dtype=np.float64 if grow is _grow2f else np.int64).reshape(16, 40)
    big = grow(small, 4 * HUGE // (40 * 8))           # 4 huge pages' worth
    assert big.shape == (4 * HUGE // (40 * 8), 40)
    assert (big[:16] == small).all()
    middle = big.ctypes.data + big.nbytes // 2        # inside an aligned huge page of the buffer
    assert "hg" in vm_flags(middle)


def test_a_pool_grown_past_huge_pages_works_as_before():
    # one pool of 200 trees (one per instrument) of 500 keys: the leaf array passes 4 MiB
    rng = np.random.default_rng(3)
    pool = btree_new(16, 3)
    roots = np.full(200, -1, np.int64)
    keys = rng.permutation(100_000)[:100_000].astype(np.float64)
    for t in range(200):
        for k in keys[t * 500:(t + 1) * 500]:
            roots[t] = btree_add(pool, roots[t], k, 1.0, 1)
    assert pool.lf.nbytes >= 2 * HUGE and "hg" in vm_flags(pool.lf.ctypes.data + pool.lf.nbytes // 2)
    for t in (0, 77, 199):
        btree_check(pool, roots[t])
        mine = np.sort(keys[t * 500:(t + 1) * 500])
        assert btree_sum_lt(pool, roots[t], mine[250], 1) == 250.0
