"""Run-time helpers that generated programs call: SQL-style comparisons and division, and the
threshold search over range-cumulative maps.  All ``@njit(cache=True)``.

Operator codes shared with ``codegen``: 0 ``<``, 1 ``<=``, 2 ``>``, 3 ``>=``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.storage.btree import (
    btree_first_prefix,
    btree_items,
    btree_negatives,
    btree_sum_ge,
    btree_sum_gt,
    btree_sum_le,
    btree_sum_lt,
    btree_total,
)

LT, LE, GT, GE = 0, 1, 2, 3
OP_CODES = {"<": LT, "<=": LE, ">": GT, ">=": GE}
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@njit(cache=True, inline="always")
def div(a: float, b: float) -> float:
    """a / b, NaN (SQL NULL) when b is 0."""
    if b == 0.0:
        return np.nan
    return a / b


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


@njit(cache=True)
def range_sum(pool, root, op: int, x: float) -> float:
    """Sum of values with key ``op`` x; O(log n)."""
    if op == LT:
        return btree_sum_lt(pool, root, x)
    if op == LE:
        return btree_sum_le(pool, root, x)
    if op == GT:
        return btree_sum_gt(pool, root, x)
    return btree_sum_ge(pool, root, x)


@njit(cache=True)
def _holds(op: int, a: float, b: float) -> bool:
    if op == LT:
        return a < b
    if op == LE:
        return a <= b
    if op == GT:
        return a > b
    return a >= b


@njit(cache=True)
def threshold_sum(pa, ra, pb, rb, rop: int, cop: int, x: float) -> float:
    """Sum of A[p] over the keys p of A with R(p) ``cop`` x, where R(p) is the sum of B[q] over
    keys q ``rop`` p.  This is VWAP's "volume above my price below k * total".

    When B has no negative values R is monotone in p, so the qualifying p form an up-set or a
    down-set of the reals, bounded at a key of B: one O(log n) descent of B finds the boundary
    (:func:`threshold_cut`) and one O(log n) range sum of A adds up the side that qualifies
    (:func:`threshold_apply`).  With negative values the answer falls back to a scan of A's keys
    (O(n log n)), still exact.  Several sums over one B with one condition share the cut.
    """
    code, b = threshold_cut(pb, rb, rop, cop, x)
    return threshold_apply(pa, ra, pb, rb, rop, cop, x, code, b)


@njit(cache=True)
def threshold_cut(pb, rb, rop: int, cop: int, x: float):
    """Where the condition of :func:`threshold_sum` holds, as ``(code, b)``: 0 nowhere, 1
    everywhere, 2..5 for keys >= b, > b, < b, <= b, 6 unknown (B has negative values: scan).
    One O(log n) descent of B; depends on B and x only."""
    if x != x:
        return 0, 0.0
    if btree_negatives(pb, rb) > 0:
        return 6, 0.0
    # R(p) = F(p) for rop in (<, <=), T - F(p) for (>, >=); F = inclusive (<=, >) or
    # exclusive (<, >=) prefix sum, non-decreasing in p.  Rewrite the condition as F(p) c y.
    inclusive = rop == LE or rop == GT
    c, y = cop, x
    if rop == GT or rop == GE:
        y = btree_total(pb, rb) - x
        c = (GT, GE, LT, LE)[cop]
    # U = {p : F(p) > y} (strict) or {F(p) >= y}; S is U for c in (>, >=), its complement else.
    strict = c == GT or c == LE
    upset = c == GT or c == GE
    if (0.0 > y) if strict else (0.0 >= y):
        return (1 if upset else 0), 0.0          # U is every real
    found, b = btree_first_prefix(pb, rb, y, strict)
    if not found:                                # U is empty
        return (0 if upset else 1), 0.0
    if upset:
        return (2 if inclusive else 3), b
    return (4 if inclusive else 5), b


@njit(cache=True)
def threshold_apply(pa, ra, pb, rb, rop: int, cop: int, x: float, code: int, b: float) -> float:
    """The sum of A over the keys :func:`threshold_cut` selected; O(log n) (O(n log n) for code 6)."""
    if code == 0:
        return 0.0
    if code == 1:
        return btree_total(pa, ra)
    if code == 2:
        return btree_sum_ge(pa, ra, b)
    if code == 3:
        return btree_sum_gt(pa, ra, b)
    if code == 4:
        return btree_sum_lt(pa, ra, b)
    if code == 5:
        return btree_sum_le(pa, ra, b)
    keys, vals = btree_items(pa, ra)
    acc = 0.0
    for i in range(keys.shape[0]):
        if _holds(cop, range_sum(pb, rb, rop, keys[i]), x):
            acc += vals[i]
    return acc
