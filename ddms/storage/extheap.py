"""A map read only by its largest (or smallest) nonzero key and at single keys: a hash table of the
values plus a lazy binary heap of the keys, in numba.

Why: the best bid is ``Max(P, COUNT[P])`` over a count of orders per price.  Kept in a counted range
tree (``ddms.storage.btree``), every order event descends the tree and rewrites the sums along its
path (60-180 ns a line), although the maximum only changes when a price level appears or empties
and nothing reads the sums.  Here an event that leaves its key's value nonzero on both sides (most
events on a real book: orders join and leave levels that stay) is one hash probe and one add; a key
that becomes nonzero is pushed on the heap (O(1) expected for a key that is not a new extreme, the
heap's bottom rows being the recently touched ones), and a key that becomes zero stays on the heap,
*stale*, until it reaches the top (then popped: O(log n)) or until the stale keys outnumber the
live ones ``STALE`` (``STALE_BIG``) times over (then all are removed at once, in sequential passes
over the table and the heap: O(table + heap), amortised O(1) per stale key; 25 ns per stale key at
500k live and 1.9M stale keys, against 112 when it probed the table once per heap key).  The top of the heap is
kept live, so reading the extreme is O(1).

Layout (two plain float64 arrays, each one state-field load for a generated program):

* ``tab``: a float-valued ``ddms.storage.hashtab`` table of arity 1, key -> value.  A row exists
  exactly for the keys on the heap, so a stale key's row holds 0.0 (a read there gives the map's
  0.0, as for an absent key);
* ``heap``: ``heap[0]`` the number of keys on the heap, ``heap[1]`` the number of them whose value
  is nonzero, then the heap itself from ``heap[HDR]``: ``sign * key``, a max-heap (``sign`` is 1.0
  for a map read by its maximum, -1.0 by its minimum).  It doubles when full (a new array).

Keys must not be NaN (:func:`xh_add` raises ValueError, as the range trees do); -0.0 is 0.0.
Cost: :func:`xh_add` O(1) expected (+ O(log n) when the top empties, + the amortised compaction);
:func:`xh_top` O(1); :func:`xh_get` O(1) expected.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ddms.storage.hashtab import PF_ROWS, _home, _same_row, ht_fdict, ht_getf, ht_new, ht_pop, ht_set, ht_slot

__all__ = ["HDR", "xh_add", "xh_check", "xh_dict", "xh_get", "xh_new", "xh_new_heap", "xh_top"]

HDR = 2
"""Header cells before the heap: its size and its count of live (nonzero-valued) keys."""
STALE = 4.0
STALE_BIG = 1.0
SLACK = 64
"""Compaction runs once the stale keys number more than ``STALE`` times the live ones plus
``SLACK`` (a small map is not compacted back and forth), ``STALE_BIG`` times once the table has
outgrown the caches (``hashtab.PF_ROWS`` rows).  Why 4 for a small table: at 1k distinct prices the
best bid costs 27 ns a line compacting at 1x, 19 at 4x (a compaction is a pass over the table, and
a small table's passes are what it costs).  Why 1 for a big one: there the stale rows cost table
space, that is cache and memory traffic on every probe (a table holds up to ``1 + STALE`` rows per
live key, at least twice as many slots): at 100k resting orders (distinct prices) the best bid
measured 46-52 ns a line at 1x against 53-57 at 4x, and 48-51 against 52-54 over a 2.5M-line run
at 1M (the table 2M slots instead of 4M), machine loaded."""


@njit(cache=True)
def xh_new() -> np.ndarray:
    """An empty value table (``ddms.storage.hashtab``, one key)."""
    return ht_new(1)


@njit(cache=True)
def xh_new_heap() -> np.ndarray:
    """An empty heap (room for 16 keys)."""
    return np.zeros(HDR + 16)


@njit(cache=True, inline="always")
def xh_get(tab: np.ndarray, key: float) -> float:
    """The value at ``key`` (0.0 if absent or stale).  O(1) expected."""
    return ht_getf(tab, (key,), 0.0)


@njit(cache=True, inline="always")
def xh_top(heap: np.ndarray, sign: float):
    """(found, the largest key if ``sign`` is 1.0 / the smallest if -1.0); (False, NaN) when every
    value is zero.  O(1): the top of the heap is always live."""
    if heap[0] > 0.0:
        return True, sign * heap[HDR]
    return False, np.nan


@njit(cache=True)
def _sift_up(heap, i: int) -> None:
    x = heap[HDR + i]
    while i > 0:
        p = (i - 1) >> 1
        if heap[HDR + p] >= x:
            break
        heap[HDR + i] = heap[HDR + p]
        i = p
    heap[HDR + i] = x


@njit(cache=True)
def _sift_down(heap, i: int, n: int) -> None:
    x = heap[HDR + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and heap[HDR + c + 1] > heap[HDR + c]:
            c += 1
        if heap[HDR + c] <= x:
            break
        heap[HDR + i] = heap[HDR + c]
        i = c
    heap[HDR + i] = x


@njit(cache=True)
def _push(heap, x: float) -> np.ndarray:
    """Push ``x`` (= sign * key); returns the heap (a new one when it had to grow)."""
    n = int(heap[0])
    if HDR + n >= heap.shape[0]:
        bigger = np.zeros(HDR + 2 * (heap.shape[0] - HDR))
        bigger[:HDR + n] = heap[:HDR + n]
        heap = bigger
    heap[HDR + n] = x
    heap[0] = n + 1
    _sift_up(heap, n)
    return heap


@njit(cache=True)
def _settle(tab, heap, sign: float) -> None:
    """Pop stale keys off the top (and their rows off the table) until the top is live or the heap
    is empty.  O(log n) per key popped."""
    n = int(heap[0])
    while n > 0:
        key = sign * heap[HDR]
        s = ht_slot(tab, (key,))
        if tab[s, 1] != 0.0:
            break
        ht_pop(tab, (key,))
        n -= 1
        heap[HDR] = heap[HDR + n]
        heap[HDR + n] = 0.0
        heap[0] = n
        if n > 0:
            _sift_down(heap, 0, n)


@njit(cache=True)
def _compact(tab, heap, sign: float) -> None:
    """Remove every stale key, from the table and the heap, in place: free the stale rows, move
    each live row that follows a freed one back toward its home slot (the rows of a run are
    re-placed in order from a row that was free, so each probe stays within its run), then refill the heap
    with the live keys and heapify it.  O(table rows + heap size), in sequential passes: no probe
    per heap key (at a million keys each would wait on memory)."""
    cap = tab.shape[0] - 1
    mask = cap - 1
    start = 0
    while tab[start, 2] != 0.0:   # a row free before the pass (one exists: the table is at most
        start += 1                # half full): no run crosses it
    live = 0
    for s in range(cap):
        if tab[s, 2] != 0.0:
            if tab[s, 1] == 0.0:
                tab[s, 0] = 0.0
                tab[s, 2] = 0.0
            else:
                live += 1
    for d in range(1, cap + 1):
        r = (start + d) & mask
        if tab[r, 2] == 0.0:
            continue
        key = tab[r, 0]
        val = tab[r, 1]
        tab[r, 0] = 0.0
        tab[r, 1] = 0.0
        tab[r, 2] = 0.0
        h = _home((key,), mask)
        while tab[h, 2] != 0.0:
            h = (h + 1) & mask
        tab[h, 0] = key
        tab[h, 1] = val
        tab[h, 2] = 1.0
    tab[cap, 0] = live
    j = 0
    for s in range(cap):
        if tab[s, 2] != 0.0:
            heap[HDR + j] = sign * tab[s, 0]
            j += 1
    n = int(heap[0])
    heap[HDR + live:HDR + n] = 0.0
    heap[0] = live
    heap[1] = live
    for i in range(live // 2 - 1, -1, -1):
        _sift_down(heap, i, live)


@njit(cache=True)
def _insert(tab, heap, s: int, key: float, delta: float, sign: float):
    """A key absent from the table becomes ``delta`` (nonzero): a row (at free row ``s``, where
    the probe for ``key`` ended, unless the table must grow first) and a push."""
    if key != key:
        raise ValueError("extreme heap key is NaN")
    if 2 * (tab[-1, 0] + 1) > tab.shape[0] - 1:
        tab = ht_set(tab, (key,), delta)
    else:
        tab[s, 0] = key + 0.0
        tab[s, 1] = delta
        tab[s, 2] = 1.0
        tab[-1, 0] += 1.0
    heap = _push(heap, sign * (key + 0.0))
    heap[1] += 1.0
    return tab, heap


@njit(cache=True)
def _emptied(tab, heap, key: float, sign: float) -> None:
    """``key``'s value just became zero: settle the top if it was the top, compact if the stale
    keys now outnumber the live ones."""
    heap[1] -= 1.0
    if heap[HDR] == sign * key:
        _settle(tab, heap, sign)
    if heap[0] - heap[1] > (STALE if tab.shape[0] <= PF_ROWS else STALE_BIG) * heap[1] + SLACK:
        _compact(tab, heap, sign)


@njit(cache=True, inline="always")
def xh_add(tab: np.ndarray, heap: np.ndarray, key: float, delta: float, sign: float):
    """Add ``delta`` to the value at ``key``; returns (table, heap), either of which may be a new,
    bigger array the caller must store in place of its old one.  The common case -- the key
    already has a row and its value does not cross zero -- is one probe and one add (inlined);
    the others call out, an insertion at the row where the probe ended (one probe in all).  O(1)
    expected, amortised (see the module docstring)."""
    mask = tab.shape[0] - 2
    s = _home((key,), mask)
    while tab[s, 2] != 0.0 and not _same_row(tab, s, (key,)):
        s = (s + 1) & mask
    if tab[s, 2] != 0.0:
        old = tab[s, 1]
        new = old + delta
        tab[s, 1] = new
        if old == 0.0:
            if new != 0.0:     # a stale key comes back: it is still on the heap
                heap[1] += 1.0
        elif new == 0.0:
            _emptied(tab, heap, key, sign)
        return tab, heap
    if delta == 0.0:
        return tab, heap
    return _insert(tab, heap, s, key, delta, sign)


def xh_dict(tab: np.ndarray) -> dict[float, float]:
    """The map as a Python dict key -> value, nonzero values only.  O(table)."""
    return {k[0]: v for k, v in ht_fdict(tab).items() if v != 0.0}


def xh_check(tab: np.ndarray, heap: np.ndarray, sign: float) -> None:
    """Assert the invariants: the table passes ``ht_check``; the heap holds each key of the table
    exactly once and nothing else; it is a max-heap of ``sign * key``; the live count is the number
    of nonzero values; the top is live; the header is consistent and unused cells are zero.
    O(heap + table)."""
    from ddms.storage.hashtab import ht_check
    ht_check(tab)
    assert sign in (1.0, -1.0), f"sign {sign}"
    n = int(heap[0])
    assert heap[0] == n and 0 <= n <= heap.shape[0] - HDR, f"heap size {heap[0]} in {heap.shape[0] - HDR} cells"
    items = heap[HDR:HDR + n]
    assert not heap[HDR + n:].any(), "an unused heap cell holds data"
    for i in range(1, n):
        assert items[(i - 1) // 2] >= items[i], f"heap order broken at {i}"
    values = ht_fdict(tab)
    keys = sorted(k[0] for k in values)
    assert sorted((sign * items + 0.0).tolist()) == keys, "the heap and the table hold different keys"
    live = sum(1 for v in values.values() if v != 0.0)
    assert heap[1] == live, f"live count {heap[1]}, {live} nonzero values"
    if n:
        assert values[(sign * items[0] + 0.0,)] != 0.0, "the top of the heap is stale"
        want = max(k for k, v in values.items() if v != 0.0)[0] if sign > 0 else \
            min(k for k, v in values.items() if v != 0.0)[0]
        assert sign * items[0] == want, "the top is not the extreme"
    assert heap[0] - heap[1] <= STALE * heap[1] + SLACK, "stale keys outnumber the live ones past the slack"
