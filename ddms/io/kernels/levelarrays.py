"""Blocked sorted price-level arrays, both sides of one book (numba kernels).

Why shared and public: a price-level book (Binance's diff depth today; any venue core whose
levels are integer price ids) needs the same structure: per side, blocks of at most
:data:`BLOCK` levels, each sorted, chained in key order, so a level update costs two binary
searches and a move of at most ``BLOCK`` entries, and the best level is the last key of the
last block.  Keys are ``price_id`` for bids and ``-price_id`` for asks.  Arrays (``side`` is the
first axis): ``bk`` keys, ``bq`` quantities (integer units), ``bt`` the time of each level's
row, ``bn`` per-block counts, ``order`` the blocks in key order, ``bmax`` their largest keys,
``free`` a stack of emptied blocks, ``meta[side]`` = (blocks in order, free blocks, levels,
blocks ever allocated).  :func:`new_level_arrays` makes them, :func:`levels_of` reads a side,
:func:`level_arrays_check` asserts the invariants (tests call it).

Every change emits engine rows (``oi``: rel, sign, line; ``oc``: t, id, broker 0, volume,
price): a delete of the old row and/or an insert of the new one.  Cost per level update:
O(log levels + BLOCK).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["BLOCK", "alloc", "apply_depth", "apply_side", "fill_side", "level_arrays_check", "levels_of",
           "new_level_arrays", "queue_rows", "sorted_side"]

BLOCK = 64
"""Levels per block of the book's blocked sorted arrays (a split leaves two half-full blocks)."""


@njit(cache=True, nogil=True)
def alloc(meta, free, side):  # pragma: no cover - compiled
    if meta[side, 1] > 0:
        meta[side, 1] -= 1
        return free[side, meta[side, 1]]
    b = meta[side, 3]
    meta[side, 3] += 1
    return b


@njit(cache=True, nogil=True)
def apply_side(bk, bq, bt, bn, order, bmax, free, meta, side, lv, neg, t, line, oi, oc, k,
                pscale, qscale):  # pragma: no cover - compiled
    """Apply the levels ``lv`` (rows ``(price_id, qty_units)``, in message order) to ``side`` of
    the book and append each change's delete/insert rows at ``k``; returns the new ``k``.

    A side is a blocked sorted array: blocks of at most ``BLOCK`` levels (``bk`` keys, ``bq``
    quantities, ``bt`` row times, ``bn`` counts), ``order[:nblk]`` the blocks in key order and
    ``bmax`` their largest keys; keys are ``price_id`` (bids) or ``-price_id`` (asks), so the best
    level is the last key of the last block.  ``meta[side]`` = (blocks in order, free blocks,
    levels, blocks ever allocated); ``free`` the stack of emptied blocks.  A level costs two
    binary searches plus moving at most ``BLOCK`` levels (a split or an emptied block also
    shifts ``order``: one entry per block).  The caller guarantees ``len(lv) + 1`` allocatable
    blocks and room for ``2 * len(lv)`` rows."""
    B = bk.shape[2]
    for r in range(lv.shape[0]):
        px = lv[r, 0]
        q = lv[r, 1]
        key = -px if neg else px
        nblk = meta[side, 0]
        lo = 0
        hi = nblk
        while lo < hi:
            mid = (lo + hi) >> 1
            if bmax[side, mid] < key:
                lo = mid + 1
            else:
                hi = mid
        p = lo
        found = False
        b = -1
        i = 0
        n = 0
        if nblk > 0:
            if p == nblk:
                p = nblk - 1
            b = order[side, p]
            n = bn[side, b]
            lo = 0
            hi = n
            while lo < hi:
                mid = (lo + hi) >> 1
                if bk[side, b, mid] < key:
                    lo = mid + 1
                else:
                    hi = mid
            i = lo
            found = i < n and bk[side, b, i] == key
        if found:
            oi[k, 0] = side
            oi[k, 1] = -1
            oi[k, 2] = line
            oc[k, 0] = bt[side, b, i]
            oc[k, 1] = px
            oc[k, 2] = 0.0
            oc[k, 3] = bq[side, b, i] / qscale
            oc[k, 4] = px / pscale
            k += 1
            if q > 0:
                bq[side, b, i] = q
                bt[side, b, i] = t
            else:
                for j in range(i, n - 1):
                    bk[side, b, j] = bk[side, b, j + 1]
                    bq[side, b, j] = bq[side, b, j + 1]
                    bt[side, b, j] = bt[side, b, j + 1]
                n -= 1
                bn[side, b] = n
                meta[side, 2] -= 1
                if n == 0:                       # drop the emptied block from the order
                    for j in range(p, nblk - 1):
                        order[side, j] = order[side, j + 1]
                        bmax[side, j] = bmax[side, j + 1]
                    meta[side, 0] = nblk - 1
                    free[side, meta[side, 1]] = b
                    meta[side, 1] += 1
                elif i == n:
                    bmax[side, p] = bk[side, b, n - 1]
                continue
        elif q > 0:
            if nblk == 0:
                b = alloc(meta, free, side)
                bn[side, b] = 0
                order[side, 0] = b
                bmax[side, 0] = key
                meta[side, 0] = 1
                p = 0
                n = 0
                i = 0
            elif n == B:                          # split the full block into two halves
                h = B // 2
                b2 = alloc(meta, free, side)
                for j in range(h, B):
                    bk[side, b2, j - h] = bk[side, b, j]
                    bq[side, b2, j - h] = bq[side, b, j]
                    bt[side, b2, j - h] = bt[side, b, j]
                bn[side, b] = h
                bn[side, b2] = B - h
                for j in range(nblk, p + 1, -1):
                    order[side, j] = order[side, j - 1]
                    bmax[side, j] = bmax[side, j - 1]
                order[side, p + 1] = b2
                bmax[side, p + 1] = bmax[side, p]
                bmax[side, p] = bk[side, b, h - 1]
                meta[side, 0] = nblk + 1
                if i > h:
                    b = b2
                    i -= h
                    p += 1
                n = bn[side, b]
            for j in range(n, i, -1):
                bk[side, b, j] = bk[side, b, j - 1]
                bq[side, b, j] = bq[side, b, j - 1]
                bt[side, b, j] = bt[side, b, j - 1]
            bk[side, b, i] = key
            bq[side, b, i] = q
            bt[side, b, i] = t
            bn[side, b] = n + 1
            if i == n:
                bmax[side, p] = key
            meta[side, 2] += 1
        else:
            continue
        oi[k, 0] = side
        oi[k, 1] = 1
        oi[k, 2] = line
        oc[k, 0] = t
        oc[k, 1] = px
        oc[k, 2] = 0.0
        oc[k, 3] = q / qscale
        oc[k, 4] = px / pscale
        k += 1
    return k


@njit(cache=True, nogil=True)
def apply_depth(bk, bq, bt, bn, order, bmax, free, meta, bl, al, t, line, oi, oc, k,
                 pscale, qscale):  # pragma: no cover - compiled
    """Apply one depth event (both sides); returns ``(k, best bid id, its qty, best ask id, its
    qty, blocks allocated on the fuller side)`` (-1 for an empty side)."""
    k = apply_side(bk, bq, bt, bn, order, bmax, free, meta, 0, bl, False, t, line, oi, oc, k, pscale, qscale)
    k = apply_side(bk, bq, bt, bn, order, bmax, free, meta, 1, al, True, t, line, oi, oc, k, pscale, qscale)
    bp, bqty, ap, aqty = np.int64(-1), np.int64(-1), np.int64(-1), np.int64(-1)
    if meta[0, 0] > 0:
        b = order[0, meta[0, 0] - 1]
        bp = bk[0, b, bn[0, b] - 1]
        bqty = bq[0, b, bn[0, b] - 1]
    if meta[1, 0] > 0:
        b = order[1, meta[1, 0] - 1]
        ap = -bk[1, b, bn[1, b] - 1]
        aqty = bq[1, b, bn[1, b] - 1]
    return k, bp, bqty, ap, aqty, max(meta[0, 3], meta[1, 3])


@njit(cache=True, nogil=True)
def sorted_side(lv, neg):  # pragma: no cover - compiled
    """A snapshot side ``lv`` (rows ``(price_id, qty_units)``) as ``(keys ascending, quantities,
    repeat)``: the keys (``-price_id`` when ``neg``: asks) of the levels with a quantity > 0, in
    key order; ``repeat`` is True (and the arrays empty) when a price appears twice, zero levels
    included.  Why compiled: the NumPy steps (negate, argsort, diff, two masks) cost ~40 us a
    side, a capture of 1,000 symbols loads 1,000 snapshots.  O(m log m)."""
    m = lv.shape[0]
    keys = np.empty(m, np.int64)
    for i in range(m):
        keys[i] = -lv[i, 0] if neg else lv[i, 0]
    order = np.argsort(keys, kind="mergesort")
    ok = np.empty(m, np.int64)
    oq = np.empty(m, np.int64)
    n = 0
    for j in range(m):
        i = order[j]
        if j > 0 and keys[i] <= keys[order[j - 1]]:
            return ok[:0], oq[:0], True
        if lv[i, 1] > 0:
            ok[n] = keys[i]
            oq[n] = lv[i, 1]
            n += 1
    return ok[:n], oq[:n], False


@njit(cache=True, nogil=True)
def fill_side(bk, bq, bt, bn, order, bmax, meta, side, keys, qty, t):  # pragma: no cover - compiled
    """Fill the empty ``side`` from ascending ``keys`` (quantities ``qty``, row times ``t``) in
    half-full blocks (room to grow: a block splits only after ``BLOCK // 2`` inserts); the rest
    of each block's used half is zero.  The caller guarantees the blocks.  Returns the blocks
    used.  O(levels)."""
    m = keys.shape[0]
    h = bk.shape[2] // 2
    nb = -(-m // h)
    for b in range(nb):
        for j in range(h):
            i = b * h + j
            if i < m:
                bk[side, b, j] = keys[i]
                bq[side, b, j] = qty[i]
                bt[side, b, j] = t[i]
            else:
                bk[side, b, j] = 0
                bq[side, b, j] = 0
                bt[side, b, j] = 0.0
        bn[side, b] = h if b < nb - 1 else m - (nb - 1) * h
        bmax[side, b] = keys[min((b + 1) * h, m) - 1]
        order[side, b] = b
    meta[side, 0] = nb
    meta[side, 1] = 0
    meta[side, 2] = m
    meta[side, 3] = nb
    return nb


@njit(cache=True, nogil=True)
def queue_rows(oi, oc, k, side, sign, line, t, px, qty, pscale, qscale):  # pragma: no cover - compiled
    """Rows at ``k`` for levels ``(px, qty)`` of ``side`` (``sign`` 1 insert, -1 delete), all of
    message ``line``, row times ``t`` (the row layout of :func:`apply_side`; the caller
    guarantees the room).  Returns the new ``k``.  O(levels)."""
    for i in range(px.shape[0]):
        oi[k, 0] = side
        oi[k, 1] = sign
        oi[k, 2] = line
        oc[k, 0] = t[i]
        oc[k, 1] = px[i]
        oc[k, 2] = 0.0
        oc[k, 3] = qty[i] / qscale
        oc[k, 4] = px[i] / pscale
        k += 1
    return k


def new_level_arrays(nblocks: int) -> tuple[np.ndarray, ...]:
    """Empty arrays for both sides: ``(bk, bq, bt, bn, order, bmax, free, meta)``."""
    return (np.zeros((2, nblocks, BLOCK), np.int64), np.zeros((2, nblocks, BLOCK), np.int64),
            np.zeros((2, nblocks, BLOCK), np.float64), np.zeros((2, nblocks), np.int64),
            np.zeros((2, nblocks), np.int64), np.zeros((2, nblocks), np.int64), np.zeros((2, nblocks), np.int64),
            np.zeros((2, 4), np.int64))


def levels_of(arrays: tuple[np.ndarray, ...], side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(keys ascending, quantities, t)`` of a side (copies, O(levels))."""
    bk, bq, bt, bn, order, _bmax, _free, meta = arrays
    ids = order[side, : meta[side, 0]]
    ns = bn[side, ids]
    mask = np.arange(BLOCK)[None, :] < ns[:, None]
    return bk[side, ids][mask], bq[side, ids][mask], bt[side, ids][mask]


def level_arrays_check(arrays: tuple[np.ndarray, ...]) -> None:
    """Invariants: blocks non-empty, in key order, ``bmax`` their last keys, order and free list
    disjoint, keys strictly increasing per side, the level count right."""
    bk, bq, bt, bn, order, bmax, free, meta = arrays
    for side in (0, 1):
        nblk, nfree, nlev, nalloc = (int(x) for x in meta[side])
        assert 0 <= nblk and 0 <= nfree and nblk + nfree == nalloc <= bk.shape[1]
        ids = order[side, :nblk]
        used = set(ids.tolist())
        assert len(used) == nblk and not used & set(free[side, :nfree].tolist())
        ns = bn[side, ids]
        assert ((ns > 0) & (ns <= BLOCK)).all() and int(ns.sum()) == nlev
        keys, _, _ = levels_of(arrays, side)
        assert nlev < 2 or (np.diff(keys) > 0).all(), f"side {side} not strictly sorted"
        if nblk:
            assert (bmax[side, :nblk] == bk[side, ids, ns - 1]).all(), "bmax out of step"
