"""Run-time helpers that generated programs call: SQL-style comparisons and division, and the
check of a grouped view's write log.  All ``@njit(cache=True)``.

Range sums and the threshold search over range-cumulative maps live in
:mod:`ddms.storage.btree` beside the trees they read: numba caches a caller together with the
machine code of its callees and does not notice when a callee's file changes, so nothing cached
outside btree.py may call into it (generated programs are named by a hash of btree.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)


@njit(cache=True, inline="always")
def div(a: float, b: float) -> float:
    """a / b, NaN (SQL NULL) when b is 0."""
    if b == 0.0:
        return np.nan
    return a / b


@njit(cache=True, inline="always")
def mod(a: float, b: float) -> float:
    """SQL ``a % b`` on values: C's fmod (the sign of a, as DuckDB), NaN (NULL) when b is 0."""
    if b == 0.0 or b != b or a - a != 0.0:
        return np.nan
    return np.fmod(a, b)


@njit(cache=True, inline="always")
def ne(a: float, b: float) -> bool:
    """SQL ``<>``: false when either side is NaN (NULL), like every other comparison."""
    return a == a and b == b and a != b


@njit(cache=True)
def log_changed(table, keys, olds) -> bool:
    """True if any logged key's current value differs from its first logged (pre-line) value,
    NaN equal to NaN.  O(m^2) in the m writes of one line, which are few."""
    for j in range(len(keys)):
        seen = False
        for i in range(j):
            if keys[i] == keys[j]:
                seen = True
                break
        if seen:
            continue
        cur = table[keys[j]] if keys[j] in table else 0.0
        old = olds[j]
        if not (cur == old or (cur != cur and old != old)):
            return True
    return False
