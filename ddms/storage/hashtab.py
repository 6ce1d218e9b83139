"""Open-addressing hash tables from float64 key tuples to int64 values, in numba.

Generated programs keep one range tree per value of an ordered map's prefix keys (one per broker,
say) and find a slice's tree by its prefix on every update and every range query.  numba's typed
``Dict`` costs ~30 ns a probe (Python-compatible float hashing, a generic entry layout behind a C
API, reference counts).  This table is one plain 2-D float64 array, so a generated program reads
it with one state-field load (each structref field or numba object read costs a reference-count
pair, which is what made a first, structref-based version no faster than ``Dict``): the key's
float bits mixed by a multiply, linear probing over the rows.

Layout of ``tab[cap + 1, arity + 2]``: row s < cap is a slot, ``tab[s, :arity]`` its key,
``tab[s, arity]`` its value (an int64 stored as a float: exact below 2**53), ``tab[s, arity + 1]``
1.0 when live; the last row holds the count in column 0.  ``cap`` is a power of two at least twice
the count (probe sequences stay short); an insertion that would pass that rehashes into twice the
rows and returns the new array, which the caller stores in place of the old one.  Removal shifts
the following entries of the run back (no tombstones), so a lookup stops at the first free slot.

Generated programs also keep maps that are only probed and updated at one key (a count per
broker) and the keys a deferred statement group has seen in tables like this one, the value
column then holding a float (:func:`ht_getf`, :func:`ht_slot`, :func:`ht_fdict`).

A table may hold several value columns (:func:`ht_newv`, row ``[key, values..., live]``): the maps
of a view of rows that every event updates together at one key (a ladder's volume, order count and
row count per price), found and written by one probe; a key whose columns all end 0.0 is removed
(:func:`ht_setv`, :func:`ht_getc`, :func:`ht_cdict`; :func:`ht_slot` and :func:`ht_pop` serve both).

Keys compare bitwise after normalising -0.0 to 0.0, so NaN is an ordinary key (typed ``Dict``
never finds a NaN key again).  Cost: O(1) expected per get/set/pop; O(cap) to grow or list.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ddms.storage.btree import _huge, _prefetch  # llvm.prefetch, madvise (hashtab's rows as btree's nodes)

_MIX = np.uint64(0x9E3779B97F4A7C15)   # 2**64 / golden ratio: Fibonacci hashing


@intrinsic
def _bits(typingctx, x):
    """The IEEE-754 bits of a float64 as an int64 (a bitcast: no conversion)."""
    sig = types.int64(types.float64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return sig, codegen


@njit(cache=True)
def ht_new(arity: int) -> np.ndarray:
    """An empty table for keys of ``arity`` floats (8 slots)."""
    return np.zeros((9, arity + 2))


@njit(cache=True, inline="always")
def _norm(x: float) -> float:
    return x + 0.0   # -0.0 + 0.0 == +0.0: equal keys get equal bits


@njit(cache=True, inline="always")
def _home(key, mask: int) -> int:
    # a product's bit k depends only on the factor's bits <= k, and small integral floats have
    # zero low bits: fold the high half down after each multiply, take the final product's top
    h = np.uint64(0)
    for j in range(len(key)):
        h = (h ^ np.uint64(_bits(_norm(key[j])))) * _MIX
        h ^= h >> np.uint64(32)
    return np.int64((h * _MIX) >> np.uint64(32)) & mask


@njit(cache=True, inline="always")
def _same_row(tab, s: int, key) -> bool:
    for j in range(len(key)):
        if _bits(tab[s, j]) != _bits(_norm(key[j])):
            return False
    return True


@njit(cache=True, inline="always")
def _find(tab, key) -> int:
    """The slot holding ``key``, or -1."""
    mask = tab.shape[0] - 2
    live = tab.shape[1] - 1
    s = _home(key, mask)
    while tab[s, live] != 0.0:
        if _same_row(tab, s, key):
            return s
        s = (s + 1) & mask
    return -1


@njit(cache=True, inline="always")
def ht_get(tab: np.ndarray, key, default: int) -> int:
    """The value at ``key``, ``default`` if absent.  O(1) expected."""
    s = _find(tab, key)
    return default if s < 0 else np.int64(tab[s, tab.shape[1] - 2])


@njit(cache=True, inline="always")
def ht_slot(tab: np.ndarray, key) -> int:
    """The row of ``key`` (its value is ``tab[row, arity]``), -1 if absent.  O(1) expected."""
    return _find(tab, key)


@njit(cache=True, inline="always")
def ht_getf(tab: np.ndarray, key, default: float) -> float:
    """The value at ``key`` as a float (a table used as a float-valued map), ``default`` if
    absent.  O(1) expected."""
    s = _find(tab, key)
    return default if s < 0 else tab[s, tab.shape[1] - 2]


@njit(cache=True)
def _grow(tab, arity: int) -> np.ndarray:
    """The same entries in twice the slots (keys of ``arity`` floats).  O(cap)."""
    cap = 2 * (tab.shape[0] - 1)
    out = np.empty((cap + 1, tab.shape[1]))
    _huge(out)   # (a big table is probed at random: huge pages spare a page walk a probe)
    out[:] = 0.0
    live = tab.shape[1] - 1
    for s in range(tab.shape[0] - 1):
        if tab[s, live] != 0.0:
            r = _home(tab[s, :arity], cap - 1)
            while out[r, live] != 0.0:
                r = (r + 1) & (cap - 1)
            out[r] = tab[s]
    out[cap, 0] = tab[-1, 0]
    return out


@njit(cache=True)
def ht_set(tab: np.ndarray, key, value: float) -> np.ndarray:
    """``tab[key] = value`` (an int64 below 2**53, or a float in a float-valued table); returns
    the table (a new, bigger one when it had to grow: store it).  O(1) expected (amortised over
    growth)."""
    s = _find(tab, key)
    arity = tab.shape[1] - 2
    if s >= 0:
        tab[s, arity] = value
        return tab
    if 2 * (tab[-1, 0] + 1) > tab.shape[0] - 1:
        tab = _grow(tab, arity)
    mask = tab.shape[0] - 2
    s = _home(key, mask)
    while tab[s, arity + 1] != 0.0:
        s = (s + 1) & mask
    for j in range(arity):
        tab[s, j] = _norm(key[j])
    tab[s, arity] = value
    tab[s, arity + 1] = 1.0
    tab[-1, 0] += 1.0
    return tab


@njit(cache=True)
def ht_pop(tab: np.ndarray, key) -> None:
    """Remove ``key`` if present: the entries after it in its run move back into the gap when
    their home slot allows, so every lookup still ends at the first free slot.  O(run length)."""
    s = _find(tab, key)
    if s < 0:
        return
    mask = tab.shape[0] - 2
    arity = len(key)   # (a table of several value columns too: :func:`ht_newv`)
    live = tab.shape[1] - 1
    gap = s
    r = (s + 1) & mask
    while tab[r, live] != 0.0:
        h = _home(tab[r, :arity], mask)
        # r may fill the gap unless its home lies cyclically in (gap, r]
        if (r > gap and (h <= gap or h > r)) or (r < gap and h <= gap and h > r):
            tab[gap] = tab[r]
            gap = r
        r = (r + 1) & mask
    tab[gap] = 0.0
    tab[-1, 0] -= 1.0


@njit(cache=True)
def ht_newv(arity: int, values: int) -> np.ndarray:
    """An empty table for keys of ``arity`` floats holding ``values`` float columns a key (8
    slots): the maps of a view of rows updated together at one key (codegen's hash groups), one
    probe for all.  Row layout ``[key, value_0 .. value_{values-1}, live]``; a key whose columns
    are all 0.0 is removed.  Read with :func:`ht_slot` (a column at ``arity + c``), written with
    :func:`ht_setv` and :func:`ht_pop`."""
    return np.zeros((9, arity + values + 1))


@njit(cache=True, inline="always")
def ht_getc(tab: np.ndarray, key, c: int, default: float) -> float:
    """Column ``c`` of ``key``'s row in a table of :func:`ht_newv`, ``default`` if absent.  O(1)
    expected."""
    s = _find(tab, key)
    return default if s < 0 else tab[s, len(key) + c]


@njit(cache=True)
def ht_setv(tab: np.ndarray, key, values) -> np.ndarray:
    """Insert ``key``, absent from ``tab`` (a table of :func:`ht_newv`), with the tuple
    ``values``; returns the table (a new, bigger one when it had to grow: store it).  O(1)
    expected (amortised over growth)."""
    arity = len(key)
    if 2 * (tab[-1, 0] + 1) > tab.shape[0] - 1:
        tab = _grow(tab, arity)
    mask = tab.shape[0] - 2
    s = _home(key, mask)
    live = tab.shape[1] - 1
    while tab[s, live] != 0.0:
        s = (s + 1) & mask
    for j in range(arity):
        tab[s, j] = _norm(key[j])
    for j in range(len(values)):
        tab[s, arity + j] = values[j]
    tab[s, live] = 1.0
    tab[-1, 0] += 1.0
    return tab


def ht_dict(tab: np.ndarray) -> dict[tuple[float, ...], int]:
    """A Python dict copy of the table.  O(cap)."""
    arity = tab.shape[1] - 2
    return {tuple(tab[s, :arity].tolist()): int(tab[s, arity]) for s in np.flatnonzero(tab[:-1, arity + 1])}


def ht_fdict(tab: np.ndarray) -> dict[tuple[float, ...], float]:
    """A Python dict copy of a float-valued table.  O(cap)."""
    arity = tab.shape[1] - 2
    return {tuple(tab[s, :arity].tolist()): float(tab[s, arity]) for s in np.flatnonzero(tab[:-1, arity + 1])}


def ht_cdict(tab: np.ndarray, arity: int, c: int) -> dict[tuple[float, ...], float]:
    """A Python dict copy of column ``c`` of a table of :func:`ht_newv`: the keys whose value
    there is not 0.0 (the map the column stores).  O(cap)."""
    rows = np.flatnonzero(tab[:-1, -1])
    return {tuple(tab[s, :arity].tolist()): float(tab[s, arity + c]) for s in rows if tab[s, arity + c] != 0.0}


def ht_check(tab: np.ndarray, arity: int | None = None) -> None:
    """Assert the table's invariants: the capacity is a power of two at least twice the count, the
    count matches the live slots, live flags are 0/1, keys are distinct and normalised, and every
    key is found from its home slot without crossing a free slot.  ``arity``: the key's width
    (default: one value column, :func:`ht_new`).  O(cap * probe length)."""
    cap = tab.shape[0] - 1
    arity = tab.shape[1] - 2 if arity is None else arity
    live = tab[:-1, -1]
    assert cap >= 8 and cap & (cap - 1) == 0, f"capacity {cap} is not a power of two"
    assert set(np.unique(live).tolist()) <= {0.0, 1.0}, "a live flag is neither 0 nor 1"
    n = int(live.sum())
    assert tab[-1, 0] == n and 2 * n <= cap and not tab[-1, 1:].any(), f"count {tab[-1, 0]}, {n} live"
    seen = set()
    for s in np.flatnonzero(live):
        key = tab[s, :arity]
        assert key.tobytes() not in seen, f"key {key.tolist()} stored twice"
        seen.add(key.tobytes())
        assert not (key == 0.0).any() or not np.signbit(key[key == 0.0]).any(), "an unnormalised -0.0"
        assert _find_py(tab, tuple(key.tolist())) == s, f"key {key.tolist()} unreachable from its home"
    assert not tab[:-1][live == 0.0].any(), "a free slot holds data"
    if tab.shape[1] - arity > 2:   # several value columns (ht_newv): none of its keys all 0.0
        vals = tab[:-1][live == 1.0][:, arity:-1]
        assert (vals != 0.0).any(axis=1).all(), "a key whose value columns are all 0.0 is kept"


@njit(cache=True)
def _find_py(tab, key) -> int:
    return _find(tab, key)


PF_ROWS = 1 << 15
"""Tables with fewer rows than this are not worth prefetching for (:func:`ht_big`): at 3 floats a
row (one key), 768 KiB, about what stays in the caches beside the rest of a program's state."""


@njit(cache=True)
def ht_big(tab: np.ndarray) -> bool:
    """Whether ``tab`` has outgrown the caches enough for :func:`ht_prefetch` to pay.  O(1)."""
    return tab.shape[0] > PF_ROWS


@njit(cache=True, inline="always")
def ht_prefetch(tab: np.ndarray, key) -> None:
    """Start loading the row where a probe of ``key`` starts (its home slot): a hint to the CPU that
    changes nothing.  Why: at a million distinct prices a volume-per-price table is tens of MB and
    every probe at a fresh price waits on memory; ``run_batch`` calls this a few events ahead
    (``codegen.PF_AHEAD``), as it prefetches the range trees' leaves.  O(1)."""
    s = _home(key, tab.shape[0] - 2)
    _prefetch(tab, (s, 0))
    _prefetch(tab, (s, tab.shape[1] - 1))
