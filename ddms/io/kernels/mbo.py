"""Market-by-order replay: order books of many instruments as plain arrays (numba kernels).

Why: the per-record Python order book of :class:`ddms.io.dbn.MboBook` (a few dict operations
and a ``SortedList`` per record) held the DBN reader to ~180k records/s while the decoder gives
millions; :func:`replay` applies a whole run of decoded MBO records in one nogil call.  The
semantics are :class:`~ddms.io.dbn.MboBook`'s, step for step (that class stays the reference
replay the tests compare with); the reader module :mod:`ddms.io.dbn` owns the decoding, the
instrument-id -> slot map and the error texts, this module only arrays.

State (the caller allocates and grows it between calls; see :class:`ddms.io.dbn.MboReplay`):

* the order-id table of :mod:`ddms.io.kernels.ordertable` (``keys`` the order id, ``vals[:, 0]``
  the order's row in the store, ``vals[:, 3]`` its instrument slot; the same id may rest in
  several instruments, so lookups match the slot too: :func:`order_find`);
* the order store ``os_`` (int64 columns ``O_*``) with ``ot`` (the time of the order's row): a
  free chain through ``O_NEXT``, and per slot a doubly linked list in insertion order -- the order
  a clear deletes in (the reference's dict order);
* price levels per book (``book = 2 * slot + side``): a sorted run of ``(key, total size)`` in the
  arena ``la`` (``bm[book]`` = offset, capacity, count); keys are the price for bids and minus the
  price for asks, so the best level is the last of either run (the crossed-book check);
* staged rows (``sf`` t/id/broker/volume/price, ``si`` rel/sign/next): the rows of each slot's
  open event, linked per slot (``ss[slot, SS_PHEAD/SS_PTAIL]``); at the slot's F_LAST record they
  are copied to the output with the event's line number, so interleaved instruments keep their
  events whole and rows come out in event order;
* ``ss`` per slot counters (``ST_*``, :data:`STATUS_FIELDS`) and state (``SS_*``), ``g`` globals.

Cost per record: O(1) expected table work plus a binary search and a shift in the book's level
run (a shift of the levels between the touched one and the best: near the top of book, short);
per clear one step per resting order.  No allocation except arena growth (amortized O(1)) and
the pending-row compaction at the end of a call (O(rows of open events)).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ddms.io.kernels.ordertable import EMPTY, FAST_GROWTH, grow, home, put, remove

__all__ = ["E_ACTION", "E_CANCEL_SIZE", "E_CANCEL_UNKNOWN", "E_DUP", "E_ID", "E_PRICE", "E_SIDE", "E_SIZE",
           "G_WIDTH", "O_WIDTH", "SS_WIDTH", "STATUS_FIELDS", "flush", "order_find", "replay"]

F_SNAPSHOT = 0x20
F_LAST = 0x80
UNDEF_PRICE = np.int64(2**63 - 1)
MAX_ID = np.int64(2**53)
PX_LIMIT = np.int64(2**62)
SIZE_LIMIT = np.int64(2**31)

# action and side bytes (Databento's ``Action`` and ``Side`` characters)
_ADD, _CANCEL, _MODIFY, _CLEAR = ord("A"), ord("C"), ord("M"), ord("R")
_TRADE, _FILL, _NONE = ord("T"), ord("F"), ord("N")
_BID, _ASK = ord("B"), ord("A")

# error codes (the reader turns them into its located messages)
E_ACTION, E_SIDE, E_ID, E_DUP, E_PRICE, E_SIZE, E_CANCEL_UNKNOWN, E_CANCEL_SIZE = range(1, 9)

STATUS_FIELDS = ("records", "events", "adds", "cancels", "modifies", "clears", "trades", "fills", "nones",
                 "snapshots", "modify_as_add", "crossed", "bad")
"""The per-slot counters ``ss[:, 0:13]``, in :class:`~ddms.io.dbn.MboStatus` order."""
(ST_RECORDS, ST_EVENTS, ST_ADDS, ST_CANCELS, ST_MODIFIES, ST_CLEARS, ST_TRADES, ST_FILLS, ST_NONES,
 ST_SNAPSHOTS, ST_MODIFY_AS_ADD, ST_CROSSED, ST_BAD) = range(13)
SS_SNAP, SS_RECV, SS_PHEAD, SS_PTAIL, SS_OHEAD, SS_OTAIL, SS_RESTING = range(13, 20)
SS_WIDTH = 20
"""Columns of ``ss``: counters, then in-snapshot flag, last receive time, pending-row list head and
tail, order list head and tail, resting orders.  A new slot's row: zeros, the four lists -1."""

G_RECORDS, G_EVENTS, G_BAD, G_TABLE, G_TOP, G_FREE, G_STAGED, G_ARENA, G_LIVE = range(9)
G_WIDTH = 9
"""``g``: records, events (the last line), bad records, table keys, store high water, store free
chain head (-1: none), staged rows, arena used, resting orders (all slots)."""

O_ID, O_SLOT, O_SIDE, O_PRICE, O_SIZE, O_PREV, O_NEXT = range(7)
O_WIDTH = 7

MAX_TS = np.int64(2**63 - 1)


@njit(cache=True, nogil=True, _nrt=False)
def order_find(keys, vals, shift, oid, slot):  # pragma: no cover - compiled
    """Table slot of order ``oid`` of instrument ``slot``, or -1: the table's probe with the
    instrument compared too (the same id may rest in several instruments)."""
    mask = keys.shape[0] - 1
    i = home(oid, shift)
    fs = np.float64(slot)
    while True:
        k = keys[i]
        if k == EMPTY:
            return -1
        if k == oid and vals[i, 3] == fs:
            return i
        i = (i + 1) & mask


@njit(cache=True, nogil=True, inline="always")
def _level_search(la, off, cnt, key):  # pragma: no cover - compiled
    lo, hi = 0, cnt
    while lo < hi:
        mid = (lo + hi) >> 1
        if la[off + mid, 0] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _level_room(bm, la, g, book):  # pragma: no cover - compiled
    """``la`` with room for one more level of ``book``: a full run moves to twice its capacity at
    the arena's end; a full arena is rebuilt compacted at twice the capacity in use."""
    cap = bm[book, 1]
    cnt = bm[book, 2]
    if cnt < cap:
        return la
    ncap = 8 if cap == 0 else 2 * cap
    old = bm[book, 0]
    if g[G_ARENA] + ncap <= la.shape[0]:
        o = g[G_ARENA]
        la[o:o + cnt] = la[old:old + cnt]
        bm[book, 0] = o
        bm[book, 1] = ncap
        g[G_ARENA] = o + ncap
        return la
    live = ncap
    for b in range(bm.shape[0]):
        if b != book:
            live += bm[b, 1]
    nla = np.zeros((max(2 * live, 1024), 2), np.int64)
    at = 0
    for b in range(bm.shape[0]):
        c = bm[b, 1]
        if c == 0 or b == book:
            continue
        o = bm[b, 0]
        nla[at:at + bm[b, 2]] = la[o:o + bm[b, 2]]
        bm[b, 0] = at
        at += c
    nla[at:at + cnt] = la[old:old + cnt]
    bm[book, 0] = at
    bm[book, 1] = ncap
    g[G_ARENA] = at + ncap
    return nla


@njit(cache=True, nogil=True, inline="always")
def _level_add(bm, la, g, book, key, q):  # pragma: no cover - compiled
    off = bm[book, 0]
    cnt = bm[book, 2]
    j = _level_search(la, off, cnt, key)
    if j < cnt and la[off + j, 0] == key:
        la[off + j, 1] += q
        return la
    if cnt == bm[book, 1]:
        la = _level_room(bm, la, g, book)
        off = bm[book, 0]
    for m in range(cnt, j, -1):
        la[off + m, 0] = la[off + m - 1, 0]
        la[off + m, 1] = la[off + m - 1, 1]
    la[off + j, 0] = key
    la[off + j, 1] = q
    bm[book, 2] = cnt + 1
    return la


@njit(cache=True, nogil=True, inline="always")
def _level_sub(bm, la, book, key, q):  # pragma: no cover - compiled
    off = bm[book, 0]
    cnt = bm[book, 2]
    j = _level_search(la, off, cnt, key)
    left = la[off + j, 1] - q
    if left != 0:
        la[off + j, 1] = left
        return
    for m in range(j, cnt - 1):
        la[off + m, 0] = la[off + m + 1, 0]
        la[off + m, 1] = la[off + m + 1, 1]
    bm[book, 2] = cnt - 1


@njit(cache=True, nogil=True, inline="always")
def _stage(sf, si, ss, g, slot, side, sign, t, oid, size, price):  # pragma: no cover - compiled
    """Append a row to ``slot``'s open event: ``(t, id, broker 0, volume, price * 1e-9)``."""
    r = g[G_STAGED]
    g[G_STAGED] = r + 1
    sf[r, 0] = t
    sf[r, 1] = np.float64(oid)
    sf[r, 2] = 0.0
    sf[r, 3] = np.float64(size)
    sf[r, 4] = np.float64(price) * 1e-9
    si[r, 0] = side
    si[r, 1] = sign
    si[r, 2] = -1
    tail = ss[slot, SS_PTAIL]
    if tail < 0:
        ss[slot, SS_PHEAD] = r
    else:
        si[tail, 2] = r
    ss[slot, SS_PTAIL] = r


@njit(cache=True, nogil=True, inline="always")
def _insert(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot, oid, side, price, size, t):  # pragma: no cover
    s = g[G_FREE]
    if s >= 0:
        g[G_FREE] = os_[s, O_NEXT]
    else:
        s = g[G_TOP]
        g[G_TOP] = s + 1
    tail = ss[slot, SS_OTAIL]
    os_[s, O_ID] = oid
    os_[s, O_SLOT] = slot
    os_[s, O_SIDE] = side
    os_[s, O_PRICE] = price
    os_[s, O_SIZE] = size
    os_[s, O_PREV] = tail
    os_[s, O_NEXT] = -1
    ot[s] = t
    if tail < 0:
        ss[slot, SS_OHEAD] = s
    else:
        os_[tail, O_NEXT] = s
    ss[slot, SS_OTAIL] = s
    put(keys, vals, tmeta[0], oid, np.float64(s), 0.0, 0.0, np.float64(slot))
    g[G_TABLE] += 1
    g[G_LIVE] += 1
    ss[slot, SS_RESTING] += 1
    la = _level_add(bm, la, g, 2 * slot + side, price if side == 0 else -price, size)
    _stage(sf, si, ss, g, slot, side, 1, t, oid, size, price)
    return la


@njit(cache=True, nogil=True, inline="always")
def _remove_at(keys, vals, tmeta, i, os_, ot, ss, g, bm, la, sf, si):  # pragma: no cover - compiled
    """Remove the order at table slot ``i``: unlink, level, delete row of its inserted row."""
    s = np.int64(vals[i, 0])
    remove(keys, vals, tmeta[0], i)
    g[G_TABLE] -= 1
    slot = os_[s, O_SLOT]
    side = os_[s, O_SIDE]
    price = os_[s, O_PRICE]
    size = os_[s, O_SIZE]
    prev = os_[s, O_PREV]
    nxt = os_[s, O_NEXT]
    if prev < 0:
        ss[slot, SS_OHEAD] = nxt
    else:
        os_[prev, O_NEXT] = nxt
    if nxt < 0:
        ss[slot, SS_OTAIL] = prev
    else:
        os_[nxt, O_PREV] = prev
    ss[slot, SS_RESTING] -= 1
    g[G_LIVE] -= 1
    _level_sub(bm, la, 2 * slot + side, price if side == 0 else -price, size)
    _stage(sf, si, ss, g, slot, side, -1, ot[s], os_[s, O_ID], size, price)
    os_[s, O_NEXT] = g[G_FREE]
    g[G_FREE] = s


@njit(cache=True, nogil=True)
def _clear(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot):  # pragma: no cover - compiled
    """Delete every resting order of ``slot``, oldest insertion first (the reference's dict order)."""
    s = ss[slot, SS_OHEAD]
    while s >= 0:
        nxt = os_[s, O_NEXT]
        i = order_find(keys, vals, tmeta[0], os_[s, O_ID], slot)
        _remove_at(keys, vals, tmeta, i, os_, ot, ss, g, bm, la, sf, si)
        s = nxt


@njit(cache=True, nogil=True, inline="always")
def _end_event(ss, g, si, sf, bm, la, slot, of, orel, osign, oline, orecv, osym, no):  # pragma: no cover
    """``slot``'s event is complete: its staged rows go out with the next line; crossed check."""
    g[G_EVENTS] += 1
    line = g[G_EVENTS]
    ss[slot, ST_EVENTS] += 1
    rv = ss[slot, SS_RECV]
    r = ss[slot, SS_PHEAD]
    while r >= 0:
        for c in range(5):
            of[no, c] = sf[r, c]
        orel[no] = si[r, 0]
        osign[no] = si[r, 1]
        oline[no] = line
        orecv[no] = rv
        osym[no] = slot
        no += 1
        r = si[r, 2]
    ss[slot, SS_PHEAD] = -1
    ss[slot, SS_PTAIL] = -1
    b, a = 2 * slot, 2 * slot + 1
    if bm[b, 2] > 0 and bm[a, 2] > 0:
        if la[bm[b, 0] + bm[b, 2] - 1, 0] >= -la[bm[a, 0] + bm[a, 2] - 1, 0]:
            ss[slot, ST_CROSSED] += 1
    return no


@njit(cache=True, nogil=True)
def _compact(sf, si, ss, g, nslots):  # pragma: no cover - compiled
    """Move the staged rows of open events to the front of the staging arrays (list order kept)."""
    n = 0
    for slot in range(nslots):
        r = ss[slot, SS_PHEAD]
        while r >= 0:
            n += 1
            r = si[r, 2]
    tf = np.empty((n, 5), np.float64)
    ti = np.empty((n, 2), np.int64)
    k = 0
    for slot in range(nslots):
        r = ss[slot, SS_PHEAD]
        while r >= 0:
            tf[k] = sf[r]
            ti[k, 0] = si[r, 0]
            ti[k, 1] = si[r, 1]
            k += 1
            r = si[r, 2]
    k = 0
    for slot in range(nslots):
        r = ss[slot, SS_PHEAD]
        if r < 0:
            continue
        ss[slot, SS_PHEAD] = k
        while r >= 0:
            r = si[r, 2]
            k += 1
        ss[slot, SS_PTAIL] = k - 1
    for j in range(n):
        sf[j] = tf[j]
        si[j, 0] = ti[j, 0]
        si[j, 1] = ti[j, 1]
        si[j, 2] = j + 1
    for slot in range(nslots):
        if ss[slot, SS_PTAIL] >= 0:
            si[ss[slot, SS_PTAIL], 2] = -1
    g[G_STAGED] = n


@njit(cache=True, nogil=True)
def replay(slots, ts_event, ts_recv, order_id, price, size, flags, action, side, skip_bad,
           keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si,
           of, orel, osign, oline, orecv, osym, bad, err):  # pragma: no cover - compiled
    """Apply MBO records (columns of one run; ``slots`` the instrument slot of each) in order.

    Returns ``(stop, rows out, keys, vals, la, bad samples)``: ``stop`` is -1, or the index of the bad record
    that stopped the run (``skip_bad`` false; ``err`` = code, detail), after which nothing more
    was applied.  With ``skip_bad`` a bad record is counted and its first ``len(bad)`` instances
    recorded (index, code, detail).  The caller sized the outputs for every row this run can
    emit and the store for one new order per record (see :class:`ddms.io.dbn.MboReplay`); the
    table (load at most 1/2) and the level arena grow here.
    ``ts_recv`` and ``order_id`` are int64 views of the uint64 fields (a negative value is one
    above ``2**63``)."""
    n = slots.shape[0]
    nslots = ss.shape[0]
    no = 0
    nbad = 0
    for k in range(n):
        slot = np.int64(slots[k])
        fl = np.int64(flags[k])
        g[G_RECORDS] += 1
        rv = ts_recv[k]
        ss[slot, SS_RECV] = rv if rv >= 0 else MAX_TS
        ss[slot, ST_RECORDS] += 1
        code = 0
        info = np.int64(0)
        a = action[k]
        if a == _TRADE:
            ss[slot, ST_TRADES] += 1
        elif a == _FILL:
            ss[slot, ST_FILLS] += 1
        elif a == _NONE:
            ss[slot, ST_NONES] += 1
        elif a == _CLEAR:
            ss[slot, ST_CLEARS] += 1
            _clear(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot)
            ss[slot, SS_SNAP] = 1 if fl & F_SNAPSHOT else 0
        elif a != _ADD and a != _CANCEL and a != _MODIFY:
            code = E_ACTION
        else:
            sb = side[k]
            sd = 0 if sb == _BID else (1 if sb == _ASK else -1)
            oid = order_id[k]
            if sd < 0:
                code = E_SIDE
            elif oid < 0 or oid >= MAX_ID:
                code = E_ID
            else:
                if 2 * (g[G_TABLE] + 1) > keys.shape[0]:     # one record adds at most one order
                    keys, vals = grow(keys, vals, tmeta, 0, 2 if keys.shape[0] < FAST_GROWTH else 1)   # grow_bits
                px = price[k]
                q = np.int64(size[k])
                snap = (fl & F_SNAPSHOT) != 0
                if snap and ss[slot, SS_SNAP] == 0:
                    ss[slot, ST_SNAPSHOTS] += 1
                    _clear(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot)
                ss[slot, SS_SNAP] = 1 if snap else 0
                t = np.float64(ts_event[k]) / 1e6
                badval = 0
                if px == UNDEF_PRICE or not (-PX_LIMIT < px < PX_LIMIT):
                    badval = E_PRICE
                elif not (0 < q < SIZE_LIMIT):
                    badval = E_SIZE
                if a == _ADD:
                    if order_find(keys, vals, tmeta[0], oid, slot) >= 0:
                        code = E_DUP
                    elif badval:
                        code = badval
                    else:
                        ss[slot, ST_ADDS] += 1
                        la = _insert(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot, oid, sd, px, q, t)
                elif a == _CANCEL:
                    i = order_find(keys, vals, tmeta[0], oid, slot)
                    if i < 0:
                        code = E_CANCEL_UNKNOWN
                    else:
                        s = np.int64(vals[i, 0])
                        old = os_[s, O_SIZE]
                        if not (0 < q <= old):
                            code = E_CANCEL_SIZE
                            info = old
                        else:
                            ss[slot, ST_CANCELS] += 1
                            oside = os_[s, O_SIDE]
                            oprice = os_[s, O_PRICE]
                            _remove_at(keys, vals, tmeta, i, os_, ot, ss, g, bm, la, sf, si)
                            if q < old:
                                la = _insert(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot, oid, oside,
                                             oprice, old - q, t)
                else:
                    if badval:
                        code = badval
                    else:
                        ss[slot, ST_MODIFIES] += 1
                        i = order_find(keys, vals, tmeta[0], oid, slot)
                        if i >= 0:
                            _remove_at(keys, vals, tmeta, i, os_, ot, ss, g, bm, la, sf, si)
                        else:
                            ss[slot, ST_MODIFY_AS_ADD] += 1
                        la = _insert(keys, vals, tmeta, os_, ot, ss, g, bm, la, sf, si, slot, oid, sd, px, q, t)
        if code != 0:
            if not skip_bad:
                err[0] = code
                err[1] = info
                _compact(sf, si, ss, g, nslots)
                return k, no, keys, vals, la, nbad
            g[G_BAD] += 1
            ss[slot, ST_BAD] += 1
            if nbad < bad.shape[0]:
                bad[nbad, 0] = k
                bad[nbad, 1] = code
                bad[nbad, 2] = info
                nbad += 1
        if fl & F_LAST:
            no = _end_event(ss, g, si, sf, bm, la, slot, of, orel, osign, oline, orecv, osym, no)
    _compact(sf, si, ss, g, nslots)
    return -1, no, keys, vals, la, nbad


@njit(cache=True, nogil=True)
def flush(ss, g, si, sf, bm, la, of, orel, osign, oline, orecv, osym):  # pragma: no cover - compiled
    """End every open event (a stream ended without its F_LAST), slots in order; rows out."""
    no = 0
    for slot in range(ss.shape[0]):
        if ss[slot, SS_PHEAD] >= 0:
            no = _end_event(ss, g, si, sf, bm, la, slot, of, orel, osign, oline, orecv, osym, no)
    g[G_STAGED] = 0
    return no
