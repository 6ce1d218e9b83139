"""Chunked fast lane for Coinbase ``level2`` + ``ticker``: many raw messages per numba call.

Why: :meth:`CoinbaseBooks.feed <ddms.io.venues.coinbase.CoinbaseBooks.feed>` costs ~10 us of
Python per message (JSON decode, validation, ``LevelBook.set``) for ~2 level updates: ~100k level
updates per CPU second.  :func:`_run` scans the raw messages of a chunk one after another inside
one numba call, looks the product up in a hash table of book slots, applies an ``l2update``'s
changes to that product's :mod:`~ddms.io.kernels.strlevels` arrays (the exact strings kept, the
engine rows written to one chunk output) and checks a ``ticker`` against the book's best levels.

It stops at the first message it cannot handle *exactly* as the Python path would: any other
message type (snapshots, matches, subscriptions, errors), unknown or repeated fields, a field of an
unexpected JSON type, escapes or non-ASCII text, anything malformed (the Python path reports it),
a product without a slot or whose book the lane does not hold (not synced, strings longer than
:data:`~ddms.io.kernels.strlevels.W`), a price finer than the book's scale (a re-base), a time
not in the form ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``.  :meth:`CoinbaseLane.feed_chunk` then feeds
that one message through the Python path and resumes after it.  A book after an update that
crossed it makes the kernel stop after that message, so the lane reports it as the Python path
does.  The output -- events, actions, counters, reports, errors -- is the one of feeding the
messages one by one (tests/test_venue_chunk.py checks it on the real capture, mutated copies of
it and generated streams with faults).

Book ownership: a product's book lives either in its :class:`~ddms.io.levels.LevelBook` or in
the lane's arrays.  The lane takes a synced book over before a kernel run (O(levels), once per
book and snapshot) and marks the ``LevelBook`` (``_ext``): any Python code that touches that
book -- the per-message path, a summary's crossed check, ``save_state``, a monitor's display --
first hands it back (:meth:`CoinbaseLane.pull`, O(levels)).  Counters stay in
:class:`~ddms.io.levels.SymbolStatus` (updated after each kernel run).

Cost: O(bytes + levels) in numba per chunk; per stretch of kernel runs O(messages + rows) in
numpy, one :class:`~ddms.io.levels.ChunkEvents` (no Python object per message), O(touched
products) -- a stretch ends where a message takes the Python path, the output rows run out or a
venue stop (crossed, checksum) needs the events (:meth:`CoinbaseLane._loop`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit
from numba.typed import List

from ddms.io.events import EventBatch
from ddms.io.kernels.jsonscan import eq as _eq
from ddms.io.kernels.jsonscan import leaf, skip_json
from ddms.io.kernels.jsonscan import member as _member
from ddms.io.kernels.jsonscan import string as _string
from ddms.io.kernels.strlevels import (
    MAX_ID,
    OK,
    P10I,
    W,
    apply_changes,
    decimal_of,
    emit_side,
    load_snapshot,
    read_changes,
    set_changes,
)
from ddms.io.levels import _DIV, KEY_DECIMALS, ChunkEvents, Resync, SymbolEvents, _Level
from ddms.io.venues.binance_book import _key, _skip_scalar, _ws, name_index
from ddms.io.venues.binance_chunk import Spans, StopChunk, _find, _hash

if TYPE_CHECKING:
    from ddms.io.levels import LevelBook
    from ddms.io.venues.coinbase import CoinbaseBooks

__all__ = ["CoinbaseLane"]

_KEYS = ("type", "product_id", "changes", "time", "bids", "asks", "best_bid", "best_ask", "sequence", "price",
         "open_24h", "volume_24h", "low_24h", "high_24h", "volume_30d", "side", "trade_id", "last_size",
         "best_bid_size", "best_ask_size")
_KEYTAB = np.zeros((len(_KEYS), 16), np.uint8)
_KEYLEN = np.zeros(len(_KEYS), np.int64)
for _i, _k in enumerate(_KEYS):
    _KEYTAB[_i, :len(_k)] = np.frombuffer(_k.encode(), np.uint8)
    _KEYLEN[_i] = len(_k)
_K_TYPE, _K_PRODUCT, _K_CHANGES, _K_TIME, _K_BIDS, _K_ASKS, _K_BB, _K_BA = range(8)
_L2_KEYS = (1 << _K_TYPE) | (1 << _K_PRODUCT) | (1 << _K_CHANGES) | (1 << _K_TIME)
_SNAP_KEYS = (1 << _K_TYPE) | (1 << _K_PRODUCT) | (1 << _K_BIDS) | (1 << _K_ASKS) | (1 << _K_TIME)
_TICKER_KEYS = ((1 << len(_KEYS)) - 1) & ~((1 << _K_CHANGES) | (1 << _K_BIDS) | (1 << _K_ASKS))
_L2UPDATE = np.frombuffer(b"l2update", np.uint8).copy()
_TICKER = np.frombuffer(b"ticker", np.uint8).copy()
_SNAPSHOT = np.frombuffer(b"snapshot", np.uint8).copy()
_SYMW = 32           # symbol bytes kept per slot (longer symbols take the Python path)
_MAX_SKIP = 1024     # most messages a book whose messages all fall back waits before a retake
_CAP0 = 64           # rows per side of a new slot's arrays

# stop codes of _run
_STOP_SLOW, _STOP_GROW, _STOP_ROWS, _STOP_CROSSED, _STOP_CH, _STOP_NEW = 0, 1, 2, 3, 4, 5
_STOP_VENUE = 8      # a venue lane's own stop codes from here (message stop - 1 applied)
# meta columns
_M_NB, _M_NA, _M_SCALE, _M_ORD, _M_OWNED, _M_SYNCED = 0, 1, 2, 3, 4, 5   # 6, 7: the venue's
_M_FRESH = 8
"""meta column: the book has had no snapshot and no resync yet.  An update of such a book stops
the kernel (the per-message path), so a monitor's session tells a lost snapshot from a late one at
that very message (``VenueSession._lost_snapshot``) whatever the chunking; its snapshot, taken in the
kernel, clears it."""
# kinds of applied messages (res[:, 3])
_K_UPDATE, _K_TICK_OK, _K_TICK_DIS, _K_UNSYNCED, _K_SNAPSHOT = 0, 1, 2, 3, 4
_K_IGNORED = 9       # a message the Python path only counts in ``ignored`` (res[:, 4:6]: the name's span)
_TYPE = np.frombuffer(b"type", np.uint8).copy()
_ERROR = np.frombuffer(b"error", np.uint8).copy()


@leaf
def _keyid(buf, s, e):  # pragma: no cover - compiled
    return name_index(buf, s, e, _KEYTAB, _KEYLEN)


@leaf
def _digits(buf, a, k):  # pragma: no cover - compiled
    v = 0
    for j in range(a, a + k):
        c = buf[j]
        if c < 48 or c > 57:
            return -1
        v = v * 10 + (c - 48)
    return v


@leaf
def _time_ms(buf, a, b):  # pragma: no cover - compiled
    """``YYYY-MM-DDTHH:MM:SS[.f{1,6}]Z`` -> ``(ok, ms)``: ``datetime.fromisoformat(...).timestamp()
    * 1e3`` exactly (integer microseconds since the epoch / 1e6, correctly rounded, times 1e3)."""
    if b - a < 20 or buf[b - 1] != 90:
        return False, 0.0
    if buf[a + 4] != 45 or buf[a + 7] != 45 or buf[a + 10] != 84 or buf[a + 13] != 58 or buf[a + 16] != 58:
        return False, 0.0
    y, mo, d = _digits(buf, a, 4), _digits(buf, a + 5, 2), _digits(buf, a + 8, 2)
    hh, mi, ss = _digits(buf, a + 11, 2), _digits(buf, a + 14, 2), _digits(buf, a + 17, 2)
    if y < 1 or mo < 1 or mo > 12 or d < 1 or hh < 0 or hh > 23 or mi < 0 or mi > 59 or ss < 0 or ss > 59:
        return False, 0.0
    leap = (y % 4 == 0 and y % 100 != 0) or y % 400 == 0
    dim = 31
    if mo == 2:
        dim = 29 if leap else 28
    elif mo == 4 or mo == 6 or mo == 9 or mo == 11:
        dim = 30
    if d > dim:
        return False, 0.0
    us = 0
    p = a + 19
    if p < b - 1:
        if buf[p] != 46:
            return False, 0.0
        nf = b - 1 - (p + 1)
        if nf < 1 or nf > 6:
            return False, 0.0
        f = _digits(buf, p + 1, nf)
        if f < 0:
            return False, 0.0
        us = f * 10 ** (6 - nf)
    # days from the civil date (H. Hinnant's algorithm)
    yy = y - 1 if mo <= 2 else y
    era = yy // 400
    yoe = yy - era * 400
    mp = (mo + 9) % 12
    doy = (153 * mp + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    total = ((days * 86400 + hh * 3600 + mi * 60 + ss) * 1000000) + us
    return True, (np.float64(total) / 1e6) * 1e3


@leaf
def _side_of(buf, sa, sb):  # pragma: no cover - compiled
    """0 for ``buy``/``bid``, 1 for ``sell``/``ask``, -1 otherwise."""
    ln = sb - sa
    if ln == 3 and buf[sa] == 98 and buf[sa + 1] == 117 and buf[sa + 2] == 121:
        return 0
    if ln == 3 and buf[sa] == 98 and buf[sa + 1] == 105 and buf[sa + 2] == 100:
        return 0
    if ln == 4 and buf[sa] == 115 and buf[sa + 1] == 101 and buf[sa + 2] == 108 and buf[sa + 3] == 108:
        return 1
    if ln == 3 and buf[sa] == 97 and buf[sa + 1] == 115 and buf[sa + 2] == 107:
        return 1
    return -1


@leaf
def _levels(buf, i, n, ch, c, side):  # pragma: no cover - compiled
    """A level list at ``i``: ``[[..], ...]``, each entry ``[side, price, size]`` (``side`` -1:
    ``changes``, non-empty, side strings buy/sell/bid/ask) or ``[price, size, scalars...]``
    (``side`` 0/1: a snapshot's ``bids``/``asks``), escape-free strings.  Entries go to ``ch[c:]``
    as (side, ps, pe, qs, qe).  Returns ``(j, c)``: ``j`` after the list, -1 for anything else,
    -2 if ``ch`` is too small."""
    if i >= n or buf[i] != 91:
        return -1, c
    i = _ws(buf, i + 1, n)
    if i < n and buf[i] == 93:
        return (-1 if side < 0 else i + 1), c      # an empty changes list: the Python path reports it
    while True:
        if c >= ch.shape[0]:
            return -2, c
        if i >= n or buf[i] != 91:
            return -1, c
        i = _ws(buf, i + 1, n)
        if side < 0:
            sa, sb, i = _string(buf, i, n)
            if i < 0:
                return -1, c
            sd = _side_of(buf, sa, sb)
            if sd < 0:
                return -1, c
            ch[c, 0] = sd
            i = _ws(buf, i, n)
            if i >= n or buf[i] != 44:
                return -1, c
            i = _ws(buf, i + 1, n)
        else:
            ch[c, 0] = side
        a, b, i = _string(buf, i, n)
        if i < 0:
            return -1, c
        ch[c, 1] = a
        ch[c, 2] = b
        i = _ws(buf, i, n)
        if i >= n or buf[i] != 44:
            return -1, c
        i = _ws(buf, i + 1, n)
        a, b, i = _string(buf, i, n)
        if i < 0:
            return -1, c
        ch[c, 3] = a
        ch[c, 4] = b
        i = _ws(buf, i, n)
        while side >= 0 and i < n and buf[i] == 44:      # a snapshot entry's further fields
            i = _skip_scalar(buf, _ws(buf, i + 1, n), n)
            if i < 0:
                return -1, c
            i = _ws(buf, i, n)
        if i >= n or buf[i] != 93:
            return -1, c
        c += 1
        i = _ws(buf, i + 1, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 93:
            return i + 1, c
        return -1, c


@leaf
def _best_is(Iv, n, best_row, scale, m, d):  # pragma: no cover - compiled
    """Whether the value ``m / 10**d`` equals the price of row ``best_row`` (a side of ``n`` rows;
    an empty side equals nothing)."""
    if n == 0 or d > scale:
        return False
    mul = P10I[scale - d]
    if m > (MAX_ID - 1) // mul:
        return False
    return m * mul == Iv[best_row, 0]


@njit(cache=True, nogil=True, inline="always")
def _message(buf, a, n, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, k):  # pragma: no cover
    """One message ``buf[a:n]``.  Returns ``(code, arg, k, nlev, kind)``: code -1 applied (``arg``
    the slot, ``kind`` one of ``_K_*``), else a stop code (``arg``: the side array to grow, the
    new symbol's length in ``up``)."""
    i = _ws(buf, a, n)
    if i >= n or buf[i] != 123:
        return _STOP_SLOW, -1, k, 0, 0
    i = _ws(buf, i + 1, n)
    seen = 0
    ta = tb = pa = pb = ma = mb = ba0 = bb0 = aa0 = ab0 = 0
    tkind = 0         # time: 0 absent, 1 null, 2 a string, 3 another scalar
    bbs = bas = False
    nch = 0           # entries in ch: the changes, or the snapshot's bids then asks
    nbids = 0
    bids_at = asks_at = -1
    while True:
        ks, ke, i = _key(buf, i, n)
        if i < 0:
            return _STOP_SLOW, -1, k, 0, 0
        kid = _keyid(buf, ks, ke)
        if kid < 0 or (seen >> kid) & 1:
            return _STOP_SLOW, -1, k, 0, 0
        seen |= 1 << kid
        if kid == _K_TYPE:
            ta, tb, i = _string(buf, i, n)
        elif kid == _K_PRODUCT:
            pa, pb, i = _string(buf, i, n)
        elif kid == _K_CHANGES:
            i, nch = _levels(buf, i, n, ch, 0, -1)
        elif kid == _K_BIDS:
            bids_at = i            # parsed below, in the Python path's order (bids, then asks)
            i = _skip_levels(buf, i, n)
        elif kid == _K_ASKS:
            asks_at = i
            i = _skip_levels(buf, i, n)
        elif kid == _K_TIME:
            if i < n and buf[i] == 34:
                tkind = 2
                ma, mb, i = _string(buf, i, n)
            else:
                tkind = 3
                if i < n and buf[i] == 110:
                    tkind = 1
                i = _skip_scalar(buf, i, n)
        elif kid == _K_BB or kid == _K_BA:
            if i < n and buf[i] == 34:
                x, y, i = _string(buf, i, n)
                if kid == _K_BB:
                    ba0, bb0, bbs = x, y, True
                else:
                    aa0, ab0, bas = x, y, True
            else:
                i = _skip_scalar(buf, i, n)
        else:
            i = _skip_scalar(buf, i, n)
        if i == -2:
            return _STOP_CH, -1, k, 0, 0
        if i < 0:
            return _STOP_SLOW, -1, k, 0, 0
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 125:
            break
        return _STOP_SLOW, -1, k, 0, 0
    if _ws(buf, i + 1, n) != n or (seen & 3) != 3:
        return _STOP_SLOW, -1, k, 0, 0
    if _eq(buf, ta, tb, _L2UPDATE):
        kind = _K_UPDATE
        if seen & ~_L2_KEYS or not (seen >> _K_CHANGES) & 1 or tkind == 3:
            return _STOP_SLOW, -1, k, 0, 0
    elif _eq(buf, ta, tb, _SNAPSHOT):
        kind = _K_SNAPSHOT
        if seen & ~_SNAP_KEYS or bids_at < 0 or asks_at < 0 or tkind == 3:
            return _STOP_SLOW, -1, k, 0, 0
        j, nch = _levels(buf, bids_at, n, ch, 0, 0)
        if j == -2:
            return _STOP_CH, -1, k, 0, 0
        if j < 0:
            return _STOP_SLOW, -1, k, 0, 0
        nbids = nch
        j, nch = _levels(buf, asks_at, n, ch, nch, 1)
        if j == -2:
            return _STOP_CH, -1, k, 0, 0
        if j < 0:
            return _STOP_SLOW, -1, k, 0, 0
    elif _eq(buf, ta, tb, _TICKER):
        kind = _K_TICK_OK
        if seen & ~_TICKER_KEYS or not (bbs and bas):
            return _STOP_SLOW, -1, k, 0, 0
    else:
        return _STOP_SLOW, -1, k, 0, 0
    ln = pb - pa
    if ln > up.shape[0]:
        return _STOP_SLOW, -1, k, 0, 0
    for j in range(ln):
        c = buf[pa + j]
        if c > 126:
            return _STOP_SLOW, -1, k, 0, 0
        up[j] = c - 32 if 97 <= c <= 122 else c
    s = _find(up, 0, ln, table, symtab, symlen)
    if s < 0:
        return (_STOP_NEW if kind != _K_TICK_OK else _STOP_SLOW), ln, k, 0, 0
    if meta[s, _M_OWNED] == 0:
        return _STOP_SLOW, -1, k, 0, 0
    synced = meta[s, _M_SYNCED] != 0
    nb, na, scale = meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_SCALE]
    Ib, Ia = LI[2 * s], LI[2 * s + 1]
    if kind == _K_TICK_OK:
        if not synced:
            return _STOP_SLOW, -1, k, 0, 0
        st1, m1, d1 = decimal_of(buf, ba0, bb0)
        st2, m2, d2 = decimal_of(buf, aa0, ab0)
        if st1 != OK or st2 != OK:
            return _STOP_SLOW, -1, k, 0, 0
        agree = _best_is(Ib, nb, nb - 1, scale, m1, d1) and _best_is(Ia, na, na - 1, scale, m2, d2)
        return -1, s, k, 0, _K_TICK_OK if agree else _K_TICK_DIS
    t = 0.0
    if tkind == 2:
        ok, t = _time_ms(buf, ma, mb)
        if not ok:
            return _STOP_SLOW, -1, k, 0, 0
    if kind == _K_UPDATE and not synced:      # validated as the Python path does, then counted
        if meta[s, _M_FRESH] != 0:
            return _STOP_SLOW, -1, k, 0, 0
        for c in range(nch):
            if decimal_of(buf, ch[c, 1], ch[c, 2])[0] == 1 or decimal_of(buf, ch[c, 3], ch[c, 4])[0] == 1:
                return _STOP_SLOW, -1, k, 0, 0
        return -1, s, k, 0, _K_UNSYNCED
    # every value read exactly, the scale the update ends at, room for everything
    ok, final, steps, need_b, need_a = read_changes(buf, ch, chv, nch, scale)
    if not ok:
        return _STOP_SLOW, -1, k, 0, 0
    held = 0
    if kind == _K_UPDATE:
        held = nb + na
        if final > scale:
            mul = P10I[final - scale]
            if (nb > 0 and Ib[nb - 1, 0] > (MAX_ID - 1) // mul) or (na > 0 and Ia[0, 0] > (MAX_ID - 1) // mul):
                return _STOP_SLOW, -1, k, 0, 0
    if kind != _K_SNAPSHOT:
        need_b += nb
        need_a += na
    if need_b > Ib.shape[0]:
        return _STOP_GROW, ((2 * s) << 32) | need_b, k, 0, 0
    if need_a > Ia.shape[0]:
        return _STOP_GROW, ((2 * s + 1) << 32) | need_a, k, 0, 0
    if k + (nb + na) + 2 * nch + 2 * steps * (held + nch) > oi.shape[0]:
        return _STOP_ROWS, -1, k, 0, 0
    Fb, Fa = LF[2 * s], LF[2 * s + 1]
    if kind == _K_SNAPSHOT:           # LevelBook.clear: deletes of every level, bids then asks
        k = emit_side(Ib, Fb, nb, 0, -1, 1, oi, oc, k)
        k = emit_side(Ia, Fa, na, 1, -1, 1, oi, oc, k)
        nb = na = 0
        meta[s, _M_SYNCED] = 1
        meta[s, _M_FRESH] = 0
    nord = meta[s, _M_ORD]
    if kind == _K_SNAPSHOT:           # bids, then asks (re-bases as LevelBook.set makes them)
        nb, na, scale, nord, k = load_snapshot(LI, LF, LS, s, ch, chv, 0, nbids, nch, scale, t, False, buf, nord,
                                               oi, oc, k)
    elif final == scale:      # no re-base: the leaf (no reference counting a call)
        nb, na, nord, k = set_changes(Ib, Fb, LS[2 * s], Ia, Fa, LS[2 * s + 1], ch, chv, 0, nch, nb, na, scale,
                                      t, False, buf, nord, oi, oc, k)
    else:
        nb, na, scale, nord, k = apply_changes(Ib, Fb, LS[2 * s], Ia, Fa, LS[2 * s + 1], ch, chv, 0, nch, nb, na,
                                               scale, t, False, buf, nord, oi, oc, k)
    meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_ORD], meta[s, _M_SCALE] = nb, na, nord, scale
    if nb > 0 and na > 0 and Ib[nb - 1, 0] >= Ia[na - 1, 0]:
        return _STOP_CROSSED, s, k, nch, kind
    return -1, s, k, nch, kind


@leaf
def _skip_levels(buf, i, n):  # pragma: no cover - compiled
    """Index after an array of arrays of scalars at ``i`` (a snapshot side, read later), -1 for
    anything else."""
    if i >= n or buf[i] != 91:
        return -1
    i = _ws(buf, i + 1, n)
    if i < n and buf[i] == 93:
        return i + 1
    while True:
        if i >= n or buf[i] != 91:
            return -1
        i = _ws(buf, i + 1, n)
        if i < n and buf[i] == 93:
            i += 1
        else:
            while True:
                i = _skip_scalar(buf, i, n)
                if i < 0:
                    return -1
                i = _ws(buf, i, n)
                if i < n and buf[i] == 44:
                    i = _ws(buf, i + 1, n)
                    continue
                if i < n and buf[i] == 93:
                    i += 1
                    break
                return -1
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 93:
            return i + 1
        return -1


@leaf
def _ignored(buf, a, n):  # pragma: no cover - compiled
    """The span of the ``type`` of a message the Python path only counts in ``ignored`` (valid
    JSON, an object with one string ``type`` other than ``snapshot``/``l2update``/``ticker``/
    ``error``), else ``(-1, -1)``."""
    i = _ws(buf, a, n)
    if i >= n or buf[i] != 123:
        return -1, -1
    i = _ws(buf, i + 1, n)
    ta = tb = -1
    while True:
        ks, ke, i = _member(buf, i, n)
        if i < 0:
            return -1, -1
        if _eq(buf, ks, ke, _TYPE):
            if ta >= 0:
                return -1, -1
            ta, tb, i = _string(buf, i, n)
        else:
            i = skip_json(buf, i, n)
        if i < 0:
            return -1, -1
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 125:
            break
        return -1, -1
    if _ws(buf, i + 1, n) != n or ta < 0:
        return -1, -1
    if _eq(buf, ta, tb, _L2UPDATE) or _eq(buf, ta, tb, _SNAPSHOT) or _eq(buf, ta, tb, _TICKER) or \
            _eq(buf, ta, tb, _ERROR):
        return -1, -1
    return ta, tb


@njit(cache=True, nogil=True)
def _run(buf, starts, ends, i0, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, res):  # pragma: no cover
    """Messages ``i0..`` until one needs Python: ``res[i] = (slot, rows end, levels, kind)`` per
    applied message.  Returns ``(stop, code, rows, arg)``: messages ``i0..stop`` were applied
    (``_STOP_CROSSED``: ``stop - 1`` crossed its book); ``arg`` see :func:`_message`."""
    k = 0
    n = starts.shape[0]
    for i in range(i0, n):
        code, s, k, nlev, kind = _message(buf, starts[i], ends[i], table, symtab, symlen, meta, LI, LF, LS, ch, chv,
                                          up, oi, oc, k)
        if code == _STOP_SLOW:
            ta, tb = _ignored(buf, starts[i], ends[i])
            if ta >= 0:
                code, s, nlev, kind = -1, -1, 0, _K_IGNORED
                res[i, 4] = ta
                res[i, 5] = tb
        if code >= 0 and code != _STOP_CROSSED:
            return i, code, k, s
        res[i, 0] = s
        res[i, 1] = k
        res[i, 2] = nlev
        res[i, 3] = kind
        if code == _STOP_CROSSED:
            return i + 1, code, k, s
    return n, _STOP_SLOW, k, -1


@njit(cache=True)
def _new_lists(W2):  # pragma: no cover - compiled
    """Empty typed lists of the side arrays (built in numba: a typed List built from Python
    compiles its methods at run time, ~2 s a process)."""
    LI = List()
    LF = List()
    LS = List()
    LI.append(np.zeros((1, 4), np.int64))
    LF.append(np.zeros((1, 3), np.float64))
    LS.append(np.zeros((1, W2), np.uint8))
    LI.pop()
    LF.pop()
    LS.pop()
    return LI, LF, LS


@njit(cache=True)
def _append(LI, LF, LS, cap, W2):  # pragma: no cover - compiled
    """A new slot's two sides, ``cap`` rows each, in one call.  Uninitialised (``np.empty``):
    only a side's first ``n`` rows are ever read (the kernels, :meth:`CoinbaseLane.pull`,
    ``_check``), every row is written before it counts, and a string's bytes past its length
    are never read (``set_level`` leaves them as they were).  Why: zeroing a snapshot-sized
    slot, and growing it from :data:`_CAP0` rows in two more calls, was ~10% of reading the
    10-pair Kraken capture (1,000-level books).  Cost: the allocations; pages are touched only
    as rows are used."""
    for _ in range(2):
        LI.append(np.empty((cap, 4), np.int64))
        LF.append(np.empty((cap, 3), np.float64))
        LS.append(np.empty((cap, W2), np.uint8))


@njit(cache=True)
def _side_arrays(LI, LF, LS, x):  # pragma: no cover - compiled
    """The three arrays of side ``x`` of the typed lists.  Python must read the lists through a
    cached function: a typed ``List`` indexed from Python compiles its ``getitem`` in every
    process (~0.3 s, never cached), which was most of a small capture's read."""
    return LI[x], LF[x], LS[x]


@njit(cache=True)
def _grow_side(LI, LF, LS, x, need):  # pragma: no cover - compiled
    """Grow the arrays of side ``x`` to ``max(2 * rows, need)`` rows, rows kept."""
    a, b, c = LI[x], LF[x], LS[x]
    n = a.shape[0]
    m = max(2 * n, need)
    g = np.empty((m, 4), np.int64)      # uninitialised past the rows kept: see _append
    g[:n] = a
    LI[x] = g
    h = np.empty((m, 3), np.float64)
    h[:n] = b
    LF[x] = h
    u = np.empty((m, c.shape[1]), np.uint8)
    u[:n] = c
    LS[x] = u


class CoinbaseLane:
    """The fast lane of one :class:`~ddms.io.venues.coinbase.CoinbaseBooks` (see the module
    docstring); built by its ``feed_chunk``.  Unlike Binance's lane it never rests on the
    per-message path: a message that falls back costs a kernel call of a few us more, while
    resting would hand every book the Python path touches back and forth (O(levels) each way)."""

    _RES = 6
    """Columns of the kernel's per-message results (slot, rows end, levels, kind, the span of an
    ignored message's kind in the chunk's buffer; a venue adds)."""

    def __init__(self, core: CoinbaseBooks, *, rows: int = 1 << 14) -> None:
        self.core = core
        self._sym: list[str] = []
        self._books: list[LevelBook | None] = []      # the LevelBook a slot holds (None: not held)
        self._slot_of: dict[str, int] = {}
        self._table = np.full(64, -1, np.int64)
        self._symtab = np.zeros((16, _SYMW), np.uint8)
        self._symlen = np.full(16, -1, np.int64)
        self._meta = np.zeros((16, 9), np.int64)
        self._LI, self._LF, self._LS = _new_lists(2 * W)
        self._ch = np.zeros((1024, 7), np.int64)
        self._chv = np.zeros((1024, 2), np.float64)
        self._up = np.zeros(_SYMW, np.uint8)
        self._oi = np.zeros((rows, 2), np.int64)
        self._oc = np.zeros((rows, 5), np.float64)
        self._k0 = 0        # the kernel's rows go after this many (see _loop)
        self._want: set[int] = set()      # slots to take over before the next kernel run
        # A book pulled back before the kernel applied any message of it (every message of the
        # product falls back: e.g. a field the venue added) is left to the Python path for its
        # next ``_skip[s]`` messages, doubling up to _MAX_SKIP: without this each message cost
        # a take and a pull, O(levels) each (a 9.7k-message Coinbase capture: 417 s, not 1 s)
        self._used: dict[int, bool] = {}    # slot -> the kernel applied a message since its take
        self._skip: dict[int, int] = {}     # slot -> Python-path messages left before a retake
        self._backoff: dict[int, int] = {}  # slot -> the last hold-off (doubles while unused)
        self._refused: dict[int, int] = {}   # slot -> the snapshot count at which taking over failed
        self.fast_messages = 0
        self.consumed = 0
        self._recv: np.ndarray | None = None
        self._buf: np.ndarray | None = None      # the chunk's bytes during feed_chunk (ignored kinds' names)
        # A consumer that filters symbols and acts per message (ddms.feeds.venue_session's feed_many):
        # ``follow(symbol)`` False keeps a product out of the lane (no slot: its messages take the
        # Python path, which the consumer filters); ``on_ignored(i)`` is called in message order
        # for each message ``i`` the kernel only counts as ignored (False: the consumer counted it
        # itself); ``on_actions(acts)`` gets a venue stop's actions at once, in message order,
        # instead of at the end of the chunk.  None: the capture reader's behaviour.
        self.follow: Callable[[str], bool] | None = None
        self.on_ignored: Callable[[int], bool] | None = None
        self.on_actions: Callable[[list[Resync]], None] | None = None

    # -- slots --------------------------------------------------------------------------------
    def _add(self, sym: str, cap: int = _CAP0) -> int:
        """A slot for ``sym``, its sides ``cap`` rows each."""
        s = len(self._sym)
        self._sym.append(sym)
        self._books.append(None)
        self._slot_of[sym] = s
        if s >= self._meta.shape[0]:
            m = 2 * self._meta.shape[0]
            self._meta = np.vstack([self._meta, np.zeros_like(self._meta)])
            self._symtab = np.vstack([self._symtab, np.zeros_like(self._symtab)])
            self._symlen = np.concatenate([self._symlen, np.full(m - len(self._symlen), -1, np.int64)])
        _append(self._LI, self._LF, self._LS, cap, 2 * W)
        b = sym.encode("utf-8", "surrogatepass")
        if len(b) <= _SYMW and sym.isascii():
            self._symtab[s, :len(b)] = np.frombuffer(b, np.uint8)
            self._symlen[s] = len(b)
            if 2 * len(self._sym) > len(self._table):
                self._rehash()
            else:
                self._insert(s)
        return s

    def _insert(self, s: int) -> None:
        n = int(self._symlen[s])
        mask = len(self._table) - 1
        i = int(_hash(self._symtab[s, :n].copy(), 0, n) & np.uint64(mask))
        while self._table[i] >= 0:
            i = (i + 1) & mask
        self._table[i] = s

    def _rehash(self) -> None:
        self._table = np.full(2 * len(self._table), -1, np.int64)
        for s in range(len(self._sym)):
            if self._symlen[s] >= 0:
                self._insert(s)

    def _grow(self, x: int, need: int = 0) -> None:
        """Grow the arrays of side ``x`` (``2 * slot + side``) to at least ``need`` rows (at least
        double), and the other side of the slot to ``need`` rows if it has fewer: a snapshot
        needs both, and each stop re-reads the message."""
        _grow_side(self._LI, self._LF, self._LS, x, need)
        if _side_arrays(self._LI, self._LF, self._LS, x ^ 1)[0].shape[0] < need:
            _grow_side(self._LI, self._LF, self._LS, x ^ 1, need)

    # -- ownership ----------------------------------------------------------------------------
    def _take(self, s: int) -> None:
        """Take the book of slot ``s`` over from its ``LevelBook`` when it can be held exactly:
        synced (or new: no levels, nothing discarded), nothing pending, every string at most
        ``W`` ASCII bytes.  O(levels)."""
        core, sym = self.core, self._sym[s]
        book, st = core.books.get(sym), core.status.get(sym)
        if book is None or st is None or book._stale is not None or book._rows or book._ext is not None or \
                self._symlen[s] < 0 or self._refused.get(s) == st.snapshots:
            return
        if not st.synced and (book.levels[0] or book.levels[1]):
            return
        div = _DIV[book.scale]
        packed = []
        for side in (0, 1):
            lv = book.levels[side]
            keys = list(book.keys[side])         # the arrays' order: towards the best
            if side:
                keys.reverse()
            vals = [lv[key] for key in keys]
            px = "".join([v.px.ljust(W, "\0") for v in vals])
            qty = "".join([v.qty.ljust(W, "\0") for v in vals])
            if len(px) != W * len(vals) or len(qty) != W * len(vals) or not (px.isascii() and qty.isascii()):
                self._refused[s] = st.snapshots
                return
            packed.append((keys, vals, px, qty))
        for side, (keys, vals, px, qty) in enumerate(packed):
            x = 2 * s + side
            n = len(keys)
            if n > _side_arrays(self._LI, self._LF, self._LS, x)[0].shape[0]:
                self._grow(x, n)
            if not n:
                continue
            order = {key: j for j, key in enumerate(book.levels[side])}
            Iv, F, S = _side_arrays(self._LI, self._LF, self._LS, x)
            Iv[:n, 0] = [key // div for key in keys]
            Iv[:n, 1] = [order[key] for key in keys]
            Iv[:n, 2] = [len(v.px) for v in vals]
            Iv[:n, 3] = [len(v.qty) for v in vals]
            F[:n] = [(v.row[0], v.row[3], v.row[4]) for v in vals]
            S[:n, :W] = np.frombuffer(px.encode(), np.uint8).reshape(n, W)
            S[:n, W:] = np.frombuffer(qty.encode(), np.uint8).reshape(n, W)
        m = self._meta[s]
        m[_M_NB], m[_M_NA] = len(book.levels[0]), len(book.levels[1])
        m[_M_SCALE], m[_M_ORD] = book.scale, max(len(book.levels[0]), len(book.levels[1]))
        m[_M_OWNED], m[_M_SYNCED] = 1, int(st.synced)
        m[_M_FRESH] = int(not st.synced and not st.snapshots and not st.resyncs)
        book._ext = self
        self._books[s] = book
        self._used[s] = False
        self._refresh(s)

    def pull(self, book: LevelBook) -> None:
        """Hand ``book``'s levels back from the arrays (called by the ``LevelBook`` itself before
        any use).  O(levels)."""
        s = self._slot_of[book.symbol]
        book._ext = None
        if self._books[s] is not book:
            return
        self._books[s] = None
        m = self._meta[s]
        m[_M_OWNED] = 0
        self._want.add(s)
        b = 0 if self._used.get(s) else min(max(2 * self._backoff.get(s, 0), 1), _MAX_SKIP)
        self._backoff[s] = self._skip[s] = b
        book.scale = int(m[_M_SCALE])
        mul = 10 ** (KEY_DECIMALS - book.scale)
        for side, n in ((0, int(m[_M_NB])), (1, int(m[_M_NA]))):
            x = 2 * s + side
            Iv, F, S = (a[:n] for a in _side_arrays(self._LI, self._LF, self._LS, x))
            keys = [p * mul for p in Iv[:, 0].tolist()]
            book.keys[side].clear()
            book.keys[side].update(keys[::-1] if side else keys)
            lv = book.levels[side]
            lv.clear()
            il, fl = Iv.tolist(), F.tolist()
            for r in np.argsort(Iv[:, 1], kind="stable").tolist():
                pid, _, pl, ql = il[r]
                t, fq, fp = fl[r]
                row = S[r]
                lv[keys[r]] = _Level(row[:pl].tobytes().decode(), row[W:W + ql].tobytes().decode(),
                                     (t, float(pid), 0.0, fq, fp))

    def _release_all(self) -> None:
        for bk in list(self._books):
            if bk is not None:
                self.pull(bk)

    def _check(self) -> None:
        """Every held book: rows sorted by price id, ids below 2**53, insertion numbers unique,
        its ``LevelBook`` marked, synced as its status says (an unsynced one empty); the hash
        table finds every slot."""
        for s, sym in enumerate(self._sym):
            n = int(self._symlen[s])
            if n >= 0:
                assert _find(self._symtab[s, :n].copy(), 0, n, self._table, self._symtab, self._symlen) == s
            bk = self._books[s]
            assert (bk is not None) == bool(self._meta[s, _M_OWNED]), sym
            if bk is None:
                continue
            synced = self.core.status[sym].synced
            assert bk._ext is self and self.core.books.get(sym) is bk and synced == bool(self._meta[s, _M_SYNCED])
            assert synced or self._meta[s, _M_NB] == self._meta[s, _M_NA] == 0, sym
            for side in (0, 1):
                n = int(self._meta[s, side])
                held = _side_arrays(self._LI, self._LF, self._LS, 2 * s + side)[0][:n]
                ids = held[:, 0]
                assert np.all(np.diff(ids) * (1 - 2 * side) > 0) and (n == 0 or ids.max() < MAX_ID), sym
                assert len(set(held[:, 1].tolist())) == n, sym

    # -- the chunk ------------------------------------------------------------------------------
    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int], *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, np.ndarray], None] | None = None,
                   recv: np.ndarray | None = None) -> tuple[list[Resync], list[SymbolEvents | ChunkEvents]]:
        """As :meth:`ChunkLane.feed_chunk <ddms.io.venues.binance_chunk.ChunkLane.feed_chunk>`:
        ``msgs`` raw messages (bytes or :class:`~ddms.io.venues.binance_chunk.Spans`; anything
        else takes the Python path), ``lines`` their message numbers; ``fallback(t)`` handles
        message ``t`` instead of ``core.feed(json, lines[t])`` and may raise
        :class:`~ddms.io.venues.binance_chunk.StopChunk`; ``on_fast(i, slots)`` after each kernel
        run; ``recv`` the messages' receive times for the rows the kernel applies.  The events:
        the rows of each kernel run as one :class:`~ddms.io.levels.ChunkEvents`, those of a
        message through the Python path as its :class:`~ddms.io.levels.SymbolEvents`, in message
        order (:func:`~ddms.io.levels.per_symbol` splits them as the per-message path gives them)."""
        core = self.core
        events = core.take_events()
        actions: list[Resync] = []
        self.consumed = 0
        for s, bk in enumerate(self._books):     # a core restored from a saved state holds new books
            if bk is not None and core.books.get(self._sym[s]) is not bk:
                self.pull(bk)
        n = len(msgs)
        if not n:
            return actions, events
        if isinstance(msgs, Spans):
            buf, starts, ends = msgs.buf, msgs.starts, msgs.ends
        else:
            raw = [m if type(m) is bytes else b"" for m in msgs]
            buf = np.frombuffer(b"".join(raw), np.uint8)
            offs = np.zeros(n + 1, np.int64)
            np.cumsum([len(m) for m in raw], out=offs[1:])
            starts, ends = offs[:-1], offs[1:]
        longest = int((ends - starts).max())
        if longest // 8 > self._ch.shape[0]:      # room for every level of any message: no stop to grow
            self._ch = np.zeros((longest // 8 + 64, 7), np.int64)
            self._chv = np.zeros((longest // 8 + 64, self._chv.shape[1]), np.float64)
        res = np.zeros((n, self._RES), np.int64)
        self._recv = None if recv is None else np.asarray(recv, np.int64)
        self._buf = buf
        try:
            self._loop(msgs, lines, fallback, on_fast, actions, events, buf, starts, ends, res, n)
        except StopChunk:
            pass
        finally:
            self._recv = None
            self._buf = None
        return actions, events

    def _loop(self, msgs, lines, fallback, on_fast, actions, events, buf, starts, ends, res, n) -> None:
        """The kernel runs over messages ``0..n``, the Python path for those it leaves.  The rows
        of consecutive kernel runs stay in ``_oi``/``_oc`` (each run writes after the last one's:
        :meth:`_call` passes the arrays from row :attr:`_k0`) and become one
        :class:`~ddms.io.levels.ChunkEvents` when a message takes the Python path, the rows run
        out or a venue stop needs the events: a run stopped only to make a new product's slot,
        or room, costs no events of its own (a capture's first snapshots: one each before)."""
        i = 0
        pend = 0        # the first message whose rows are not handed out yet
        k = 0           # their rows in _oi/_oc
        while i < n:
            if self._want:
                later = set()
                for s in sorted(self._want):
                    if self._skip.get(s, 0) > 0:
                        later.add(s)     # held off (see __init__): the Python path keeps it
                    else:
                        self._take(s)
                self._want = later
            self._k0 = k
            stop, code, kr, arg = self._call(buf, starts, ends, i, res)
            if stop > i:
                if k:
                    res[i:stop, 1] += k
                self.consumed = stop
                if on_fast is not None:
                    on_fast(i, res[i:stop, 0])
            k += kr
            i = stop
            if code == _STOP_CROSSED or code >= _STOP_VENUE or i >= n:
                self._emit(pend, i, k, res, lines, events)
                pend, k = i, 0
                if code == _STOP_CROSSED:
                    self._crossed(arg, int(lines[i - 1]))
                elif code >= _STOP_VENUE:
                    n0 = len(actions)
                    self._stopped(code, arg, msgs, lines, i, actions)
                    if self.on_actions is not None and len(actions) > n0:
                        self.on_actions(actions[n0:])
                        del actions[n0:]
                    events.extend(self.core.take_events())   # as the per-message path after it
                continue
            if code == _STOP_NEW and self._new(arg, int(ends[i] - starts[i])):
                continue
            if code == _STOP_GROW:
                self._grow(arg >> 32, arg & 0xFFFFFFFF)
            elif code == _STOP_CH:
                self._ch = np.zeros((4 * self._ch.shape[0], 7), np.int64)
                self._chv = np.zeros((4 * self._chv.shape[0], self._chv.shape[1]), np.float64)
            elif code == _STOP_ROWS:
                if k == 0:
                    self._oi = np.zeros((2 * self._oi.shape[0], 2), np.int64)
                    self._oc = np.zeros((2 * self._oc.shape[0], 5), np.float64)
                else:
                    self._emit(pend, i, k, res, lines, events)
                    pend, k = i, 0
            else:           # the Python path (a new product the lane cannot hold included)
                self._emit(pend, i, k, res, lines, events)
                self._fallback(msgs, lines, i, actions, events, fallback)
                i += 1
                pend, k = i, 0

    def _new(self, ln: int, size: int = 0) -> bool:
        """A well-formed snapshot or update of a product without a slot (its name, ``ln`` bytes,
        in ``_up``): its book and status are created, as the Python path would at this message,
        and handed to the lane, which retries the message (True); False: the Python path takes
        it (a product the lane cannot hold).  ``size``: the message's bytes (its book's arrays
        get room for a snapshot of that size)."""
        sym = self._up[:ln].tobytes().decode()
        s = self._slot_of.get(sym)
        if s is None:
            if self.follow is not None and not self.follow(sym):
                return False
            self.core._sym(sym)
            # room now for a snapshot's levels (16-50 bytes each), not a stop to grow and re-read
            # it later: untouched rows cost no memory (see _append)
            s = self._add(sym, max(_CAP0, size // 16))
            self._take(s)
        return self._books[s] is not None and self._symlen[s] >= 0 and s == _find(
            self._up[:ln].copy(), 0, ln, self._table, self._symtab, self._symlen)

    def _call(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, i: int, res: np.ndarray
              ) -> tuple[int, int, int, int]:
        """The venue's kernel from message ``i`` (see :func:`_run`)."""
        return _run(buf, starts, ends, i, self._table, self._symtab, self._symlen, self._meta, self._LI, self._LF,
                    self._LS, self._ch, self._chv, self._up, self._oi[self._k0:], self._oc[self._k0:], res)

    def _stopped(self, code: int, arg: int, msgs, lines, stop: int, actions: list[Resync]) -> None:
        """A venue's own stop code (>= ``_STOP_VENUE``) after message ``stop - 1``, applied."""
        raise AssertionError(code)

    def _refresh(self, s: int) -> None:
        """After the Python path touched slot ``s``'s symbol: a venue's state beside the book."""

    def _fallback(self, msgs, lines, t: int, actions: list[Resync], events: list[SymbolEvents],
                  fallback: Callable[[int], Sequence[Resync]] | None) -> None:
        """Message ``t`` through the Python path (books it touches are handed back by their
        ``LevelBook``s; every synced book is offered to the lane again before the next run)."""
        core = self.core
        stop = False
        try:
            if fallback is None:
                from ddms.io.venues.base import loads_json
                try:
                    msg = loads_json(msgs[t])
                except (ValueError, UnicodeDecodeError, RecursionError) as e:
                    core._bad(f"malformed JSON: {e}", lines[t], None)
                else:
                    actions.extend(core.feed(msg, lines[t]))
            else:
                actions.extend(fallback(t))
        except StopChunk:
            stop = True
        self.consumed = t + 1
        for sym in core._dirty:
            s = self._slot_of.get(sym)
            if s is None:
                s = self._add(sym)
            if self._books[s] is None:
                if self._skip.get(s, 0) > 0:
                    self._skip[s] -= 1
                self._want.add(s)
            else:
                self._refresh(s)
        events.extend(core.take_events())
        if stop:
            raise StopChunk

    def _crossed(self, s: int, line: int) -> None:
        """The Python path's report of a book an update crossed (the counter is in ``_emit``)."""
        from ddms.io.levels import ASKS, BIDS
        core, sym = self.core, self._sym[s]
        book = core.books[sym]
        core.status[sym].crossed += 1
        core._report(f"{sym}: book crossed: best bid {book.top(BIDS, 1)[0][0]} >= best ask "
                     f"{book.top(ASKS, 1)[0][0]}", line)

    def _count(self, r: np.ndarray, nslot: int) -> None:
        """The status counters of applied messages ``r`` (rows of ``res``)."""
        kinds, slots = r[:, 3], r[:, 0]
        upd = (kinds == _K_UPDATE) | (kinds == _K_UNSYNCED)
        snap = kinds == _K_SNAPSHOT
        lev = (kinds == _K_UPDATE) | snap
        tick = (kinds == _K_TICK_OK) | (kinds == _K_TICK_DIS)
        n_upd = np.bincount(slots[upd], minlength=nslot)
        n_snap = np.bincount(slots[snap], minlength=nslot)
        n_lev = np.bincount(slots[lev], weights=r[lev, 2], minlength=nslot)
        n_tick = np.bincount(slots[tick], minlength=nslot)
        n_dis = np.bincount(slots[kinds == _K_TICK_DIS], minlength=nslot)
        status, syms = self.core.status, self._sym
        for s in np.flatnonzero(n_upd + n_tick + n_snap).tolist():
            st = status[syms[s]]
            c, c2 = int(n_upd[s]), int(n_snap[s])
            st.messages += c + c2
            st.depth_events += c
            st.level_updates += int(n_lev[s])
            st.ticker_checked += int(n_tick[s])
            st.ticker_disagree += int(n_dis[s])
            if c2:
                st.snapshots += c2
                st.synced = True

    def _emit(self, i0: int, i1: int, k: int, res: np.ndarray, lines: Sequence[int],
              events: list[SymbolEvents | ChunkEvents]) -> None:
        """Counters and events of the kernel's messages ``i0..i1`` (rows ``0..k``): one
        :class:`~ddms.io.levels.ChunkEvents` for all of them (columns: each row's symbol slot,
        message number and receive time).  O(rows + messages) in numpy, O(1) objects."""
        if i1 <= i0:
            return
        r = res[i0:i1]
        ign = r[:, 3] == _K_IGNORED
        if ign.any():           # counted by kind, as the Python path does
            core, buf, hook = self.core, self._buf, self.on_ignored
            for j, (a, b) in zip(np.flatnonzero(ign).tolist(), r[ign, 4:6].tolist(), strict=True):
                if hook is not None and not hook(i0 + j):
                    continue
                name = buf[a:b].tobytes().decode()
                core.ignored[name] = core.ignored.get(name, 0) + 1
        applied = r[~ign] if ign.any() else r
        self._count(applied, len(self._sym))
        for s in np.unique(applied[:, 0]).tolist():     # the kernel applied messages of these books
            if s >= 0:
                self._used[s] = True
        self.fast_messages += i1 - i0
        if k == 0:
            return
        per = np.diff(r[:, 1], prepend=0)
        line_col = np.repeat(np.asarray(lines[i0:i1], np.int64), per)
        recv = None if self._recv is None else np.repeat(self._recv[i0:i1], per)
        events.append(ChunkEvents(self.core.venue, self._sym, np.repeat(r[:, 0].astype(np.int32), per), EventBatch(
            self._oi[:k, 0].astype(np.int8), self._oi[:k, 1].astype(np.int8), self._oc[:k].copy(), line_col,
            int(line_col[0]), int(line_col[-1]), recv=recv)))
