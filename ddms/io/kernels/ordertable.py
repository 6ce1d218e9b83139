"""The order-id table: an open-addressing hash table of plain numpy arrays (numba kernels).

Why shared: the order-book CSV reader, the LOBSTER reader and the fill simulator all map an
order id to its resting row with this table (each with its own ``meta`` layout: ``meta[at]`` is
the table's hash shift).  Layout: ``keys`` int64 (``EMPTY`` marks a free slot; ids are limited
to ``|id| <= 2**53``), ``vals`` float64 ``(capacity, 4)`` (the caller's four fields).  Linear
probing, backward-shift deletion (no tombstones); capacity a power of two, grown by :func:`grow`
(amortized O(1) per insert) before the load factor passes the caller's limit: quadrupled while
below :data:`FAST_GROWTH` slots, then doubled (:func:`grow_bits`).

The probing kernels are compiled with ``_nrt=False``: they never allocate (only ``grow`` does),
so they can be inlined into the callers' per-line loops without reference counting.  They index
the arrays through unsigned integers: a slot is never negative, and numba adds a negative-index
wrap-around (three instructions) to every access through a signed one.
Cost: O(1) expected per find/put/remove.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["EMPTY", "FAST_GROWTH", "HMUL", "INIT_BITS", "clear", "find", "grow", "grow_bits", "grow_into", "home",
           "new_table", "put", "remove", "table_check"]

EMPTY = np.int64(-(2**63))
"""Key of a free slot."""
HMUL = np.uint64(0x9E3779B97F4A7C15)
"""Fibonacci hashing multiplier."""
INIT_BITS = 10
"""log2 of a new table's capacity."""
FAST_GROWTH = 1 << 16
"""Below this capacity a full table quadruples instead of doubling (:func:`grow_bits`)."""


def grow_bits(capacity: int) -> int:
    """log2 of the factor :func:`grow` should grow a table of ``capacity`` slots by: 2 (x4) below
    :data:`FAST_GROWTH`, else 1 (x2).  Why: a replay of a 100k-line order book (18k resting
    orders) doubled its table six times from 1,024 slots, re-inserting 32k keys into 5.2 MB of
    fresh memory (page faults, ~1 ms of a ~6 ms parse); quadrupling gets there in three steps
    (11k keys, 3.4 MB), and a table that small stays well under a few MB.  Large tables keep
    doubling (memory at most 4x the live keys)."""
    return 2 if capacity < FAST_GROWTH else 1


def new_table(bits: int = INIT_BITS) -> tuple[np.ndarray, np.ndarray, int]:
    """An empty table of ``2**bits`` slots: ``(keys, vals, shift)`` (``shift`` = 64 - bits).
    ``bits >= 5``: :func:`home` shifts by ``shift + 4``, which must stay below 64."""
    if not 5 <= bits <= 62:
        raise ValueError(f"an order table needs 5 <= bits <= 62, not {bits}")
    return np.full(1 << bits, EMPTY, np.int64), np.zeros((1 << bits, 4), np.float64), 64 - bits


def table_check(keys: np.ndarray, vals: np.ndarray, shift: int) -> None:
    """Invariants (tests call it): capacity a power of two matching ``shift``, and every key
    reachable from its home slot by probing (no hole between home and slot)."""
    cap = keys.shape[0]
    assert cap & (cap - 1) == 0 and cap == 1 << (64 - shift), "capacity does not match the shift"
    assert vals.shape == (cap, 4)
    for slot in np.flatnonzero(keys != EMPTY):
        assert find(keys, shift, keys[slot]) == slot, f"key {keys[slot]} not reachable by probing"


@njit(cache=True, _nrt=False)
def home(key, shift):  # pragma: no cover - compiled
    """Home slot: blocks of 16 consecutive ids share a run of 16 slots (ids arrive nearly in
    order, so recent orders share cache lines); blocks are scattered by Fibonacci hashing, so
    strided or clustered ids still spread evenly."""
    u = np.uint64(key)
    return np.int64((((u >> np.uint64(4)) * HMUL) >> np.uint64(shift + 4)) << np.uint64(4)
                    | (u & np.uint64(15)))


@njit(cache=True, _nrt=False)
def find(keys, shift, key):  # pragma: no cover - compiled
    mask = keys.shape[0] - 1
    i = home(key, shift)
    while True:
        k = keys[np.uint64(i)]
        if k == key:
            return i
        if k == EMPTY:
            return -1
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def put(keys, vals, shift, key, t, vol, px, book):  # pragma: no cover - compiled
    """Insert a key known to be absent."""
    mask = keys.shape[0] - 1
    i = home(key, shift)
    while keys[np.uint64(i)] != EMPTY:
        i = (i + 1) & mask
    u = np.uint64(i)
    keys[u] = key
    vals[u, 0] = t
    vals[u, 1] = vol
    vals[u, 2] = px
    vals[u, 3] = book


@njit(cache=True, _nrt=False, inline="always")
def remove(keys, vals, shift, slot):  # pragma: no cover - compiled
    """Backward-shift deletion: keeps probe chains intact without tombstones."""
    mask = keys.shape[0] - 1
    i = slot
    j = slot
    while True:
        j = (j + 1) & mask
        kj = keys[np.uint64(j)]
        if kj == EMPTY:
            break
        h = home(kj, shift)
        # kj may move to the hole i unless its home lies cyclically in (i, j]
        if i <= j:
            stays = i < h <= j
        else:
            stays = h > i or h <= j
        if not stays:
            ui, uj = np.uint64(i), np.uint64(j)
            keys[ui] = kj
            vals[ui, 0] = vals[uj, 0]
            vals[ui, 1] = vals[uj, 1]
            vals[ui, 2] = vals[uj, 2]
            vals[ui, 3] = vals[uj, 3]
            i = j
    keys[np.uint64(i)] = EMPTY


@njit(cache=True, nogil=True)   # nogil: the order-book parser grows its table on ddms run's parse-ahead thread
def grow(keys, vals, meta, at, bits=1):  # pragma: no cover - compiled
    """Grow the table ``2**bits``-fold (amortized O(1) per insert); returns the new arrays.
    ``meta[at]`` is the table's hash shift (the order tables of the fill simulator and the
    LOBSTER reader are this same table with their own meta layouts)."""
    cap = keys.shape[0] << bits
    shift = meta[at] - bits
    nkeys = np.full(cap, EMPTY, np.int64)
    nvals = np.zeros((cap, 4), np.float64)
    for i in range(keys.shape[0]):
        if keys[i] != EMPTY:
            put(nkeys, nvals, shift, keys[i], vals[i, 0], vals[i, 1], vals[i, 2], vals[i, 3])
    meta[at] = shift
    return nkeys, nvals


@njit(cache=True, nogil=True)
def clear(keys, vals):  # pragma: no cover - compiled
    """Empty the table ``keys``/``vals`` (every key ``EMPTY``), writing every page, so faulting it
    in on the calling thread: :class:`~ddms.io.orderbook.OrderBookParser` allocates the next table
    (``np.empty``: no page touched) and has a helper thread clear it before it is needed
    (:func:`grow_into`), off the parsing thread.  O(capacity)."""
    keys[:] = EMPTY
    vals[:] = 0.0


@njit(cache=True, nogil=True)
def grow_into(keys, vals, nkeys, nvals, meta, at, bits):  # pragma: no cover - compiled
    """:func:`grow` into the empty arrays ``nkeys``/``nvals`` (from :func:`clear`, of ``2**bits``
    times the capacity) instead of new ones; returns them.  O(capacity)."""
    shift = meta[at] - bits
    for i in range(keys.shape[0]):
        if keys[i] != EMPTY:
            put(nkeys, nvals, shift, keys[i], vals[i, 0], vals[i, 1], vals[i, 2], vals[i, 3])
    meta[at] = shift
    return nkeys, nvals
