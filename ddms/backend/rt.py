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
from ddms.storage.hashtab import ht_slot


@njit(cache=True, inline="always")
def div(a: float, b: float) -> float:
    """a / b, NaN (SQL NULL) when b is 0."""
    if b == 0.0:
        return np.nan
    return a / b


@njit(cache=True, inline="always")
def mul0(a: float, b: float) -> float:
    """a * b with M3's product semantics: 0 when either factor is 0, even if the other is NaN
    (SQL NULL), as the reference interpreter (a zero factor drops the term).  Generated code
    calls it only in products with a factor that can be NaN (the MAX of an empty slice, a quotient
    by 0, ...): one compare more than ``*`` there, none elsewhere."""
    if a == 0.0 or b == 0.0:
        return 0.0
    return a * b


@njit(cache=True, inline="always")
def mod(a: float, b: float) -> float:
    """SQL ``a % b`` on values: C's fmod (the sign of a, as DuckDB), NaN (NULL) when b is 0."""
    if b == 0.0 or b != b or a - a != 0.0:
        return np.nan
    return np.fmod(a, b)


@njit(cache=True, inline="always")
def _away(p: float) -> float:
    """``p`` rounded to an integer, halves away from zero (C's ``round``)."""
    t = np.trunc(p)
    if abs(p - t) >= 0.5:
        t += 1.0 if p > 0.0 else -1.0
    return t


@njit(cache=True, inline="always")
def _product_error(a: float, b: float, p: float) -> float:
    """``a * b - p`` exactly, ``p`` the rounded product (Dekker's two-product, Veltkamp's split:
    no FMA needed); valid while nothing overflows, which holds where it is called (|p| < 2^52)."""
    c = 134217729.0 * a
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@njit(cache=True)
def f_round(x: float, d: float) -> float:
    """DuckDB's ROUND(x, d) on DOUBLE (``d`` NaN: ROUND(x)): ``round(x * 10^d) / 10^d`` halves
    away from zero, a product that rounded onto a half decided by the exact product (ROUND(16.15,
    1) is 16.1: 16.15 is 16.1499.. in binary); for ``d < 0`` ``round(x / 10^-d) * 10^-d`` (0 on
    overflow).  NULL (NaN) in, NULL out.  O(1)."""
    if x != x or x - x != 0.0:
        return x
    if d != d:
        return _away(x)
    if d < 0.0:
        m = 10.0 ** (-d)
        r = _away(x / m) * m
        return 0.0 if r != r or r - r != 0.0 else r
    m = 10.0 ** d
    p = x * m
    if p != p or p - p != 0.0:
        return x
    t = np.trunc(p)
    if abs(p - t) == 0.5:
        e = _product_error(x, m, p)
        r = _away(p) if e == 0.0 else (np.floor(p) if e < 0.0 else np.ceil(p))
    else:
        r = _away(p)
    r = r / m
    return x if r != r or r - r != 0.0 else r


@njit(cache=True)
def f_trunc(x: float, d: float) -> float:
    """DuckDB's TRUNC(x, d) on DOUBLE (``d`` NaN: TRUNC(x)): toward zero, ``trunc(x * 10^d) /
    10^d`` (for ``d < 0`` ``trunc(x / 10^-d) * 10^-d``).  O(1)."""
    if x != x or x - x != 0.0:
        return x
    if d != d:
        return np.trunc(x)
    if d < 0.0:
        m = 10.0 ** (-d)
        r = np.trunc(x / m) * m
        return 0.0 if r != r or r - r != 0.0 else r
    m = 10.0 ** d
    p = x * m
    r = np.trunc(p) / m if p - p == 0.0 else np.nan
    return x if r != r or r - r != 0.0 else r


@njit(cache=True, inline="always")
def f_floor(x: float) -> float:
    return np.floor(x)


@njit(cache=True, inline="always")
def f_ceil(x: float) -> float:
    return np.ceil(x)


@njit(cache=True, inline="always")
def f_sign(x: float) -> float:
    """-1, 0 or 1; NULL (NaN) for NULL."""
    if x != x:
        return np.nan
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


@njit(cache=True, inline="always")
def f_int(x: float, lo: float, hi: float) -> float:
    """DuckDB's CAST of a DOUBLE to an integer type of range [lo, hi]: the nearest integer, halves
    to even; NULL (NaN) out of range, where DuckDB raises a conversion error."""
    r = np.rint(x)
    if r != r or r < lo or r > hi:
        return np.nan
    return r


@njit(cache=True, inline="always")
def f_mul(x: float, y: float) -> float:
    """SQL's ``x * y`` (of rows' values or of aggregates): NULL (NaN) where either is, ``0 * NULL`` included
    (IEEE's product; M3's products use :func:`mul0`, where 0 * NULL is 0)."""
    return x * y


@njit(cache=True, inline="always")
def f_abs(x: float) -> float:
    return abs(x)


@njit(cache=True, inline="always")
def f_nullif(x: float, y: float) -> float:
    """SQL NULLIF: NULL (NaN) where ``x = y``, else ``x``."""
    return np.nan if x == y else x


@njit(cache=True, inline="always")
def f_coalesce(x: float, y: float) -> float:
    """SQL COALESCE of two: ``y`` where ``x`` is NULL (NaN)."""
    return y if x != x else x


@njit(cache=True, inline="always")
def f_greatest(x: float, y: float) -> float:
    """DuckDB's GREATEST of two: a NULL (NaN) argument is skipped; NULL when both are."""
    if x != x:
        return y
    return x if y != y or x >= y else y


@njit(cache=True, inline="always")
def f_least(x: float, y: float) -> float:
    """DuckDB's LEAST of two: a NULL (NaN) argument is skipped; NULL when both are."""
    if x != x:
        return y
    return x if y != y or x <= y else y


@njit(cache=True, inline="always")
def f_if(t: float, x: float, y: float) -> float:
    """``x`` where the 0/1 test ``t`` is nonzero, else ``y`` (a CASE whose condition holds a CASE)."""
    return x if t != 0.0 else y


@njit(cache=True, inline="always")
def ne(a: float, b: float) -> bool:
    """SQL ``<>``: false when either side is NaN (NULL), like every other comparison."""
    return a == a and b == b and a != b


@njit(cache=True, inline="always")
def _logged_before(keys, j) -> bool:
    """Whether ``keys[j]`` was logged earlier in the line (its first entry holds the pre-line value)."""
    for i in range(j):
        if keys[i] == keys[j]:
            return True
    return False


@njit(cache=True, inline="always")
def _differs(cur: float, old: float) -> bool:
    """A logged value changed: NaN (NULL) equals NaN here."""
    return not (cur == old or (cur != cur and old != old))


@njit(cache=True)
def log_changed(table, keys, olds) -> bool:
    """True if any logged key's current value differs from its first logged (pre-line) value,
    NaN equal to NaN.  O(m^2) in the m writes of one line, which are few."""
    for j in range(len(keys)):
        if _logged_before(keys, j):
            continue
        if _differs(table[keys[j]] if keys[j] in table else 0.0, olds[j]):
            return True
    return False


@njit(cache=True)
def log_changed_ht(tab, keys, olds, col) -> bool:
    """:func:`log_changed` of a map kept in a ``ddms.storage.hashtab`` table, its values in column
    ``col`` (a view of rows' map: codegen's point maps; with several value columns, ``ht_newv``, a
    hash group's).  O(m^2) in the m writes of one line."""
    for j in range(len(keys)):
        if _logged_before(keys, j):
            continue
        s = ht_slot(tab, keys[j])
        if _differs(tab[s, col] if s >= 0 else 0.0, olds[j]):
            return True
    return False
