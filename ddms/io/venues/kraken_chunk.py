"""Chunked fast lane for Kraken websocket v1 ``book`` messages: many raw messages per numba call.

Why: :meth:`KrakenBooks.feed <ddms.io.venues.kraken.KrakenBooks.feed>` costs ~15-20 us of Python
per message (JSON decode, validation, a ``LevelBook.set`` per level, the truncation, the checksum
text) for ~1 level update: ~110k level updates per CPU second.  :func:`_run` applies snapshots
and the updates of synced books in numba on the exact-string arrays of
:mod:`~ddms.io.kernels.strlevels`: the levels in the message's order (each with its own
timestamp as the row's ``t``), a finer price re-basing the book as ``LevelBook`` does, the
truncation to the subscribed depth of the channel name (``book-<depth>``: the worst bids, then
the worst asks, deleted), then the CRC32 of the 10 best asks and bids over the exact strings
(:func:`~ddms.io.kernels.strlevels.kraken_crc_text`, :func:`~ddms.io.kernels.strlevels.crc32`)
against the message's ``c``.

Heartbeats (``{"event": "heartbeat"}`` exactly) are counted in ``ignored`` by the lane.
Everything else takes the Python path, one message at a time, exactly as before: other dict
messages (statuses, errors), other channels, a channel name that is not ``book-<digits>``, unknown or
repeated fields, a snapshot mixed with update fields or with a side given twice, an entry that
is not ``[price, volume, timestamp(, "r")]`` escape-free ASCII strings, a value the exact
readers refuse (the Python path reports it), a book the lane does not hold.  An update of an
unsynced book is counted in the kernel (the Python path drops it after counting, unvalidated).
A checksum mismatch stops the kernel after the message (applied and truncated, as the Python
path does before its check); the lane reports it through the core's own ``_checksum``.  A book
left crossed stops it after the message too (the core's report).  The lane itself (book
ownership, events, counters) is :class:`~ddms.io.venues.coinbase_chunk.CoinbaseLane`'s.

Cost: O(bytes + levels + 20 checksum strings) in numba per message plus a row shift when a level
appears or goes -- the checksum text and its CRC only from the first of the 20 levels the
message may have changed (:func:`_first_changed`: the CRC register after each level of the
pair's last text is kept, and so is its CRC for an update below the 10 best of both sides,
~20% of the real capture's); O(levels log levels) per snapshot, read
once (:func:`_parse`'s reading of a new pair's message is resumed, not redone).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from ddms.io.kernels.jsonscan import leaf
from ddms.io.kernels.strlevels import (
    MAX_ID,
    P10I,
    W,
    apply_changes,
    crc32_update,
    emit_side,
    kraken_level_text,
    load_snapshot,
    move_rows,
    put_row,
    read_changes,
    set_changes,
    string_entries,
)
from ddms.io.venues.binance_book import _key, _ws, name_index
from ddms.io.venues.binance_chunk import _find
from ddms.io.venues.coinbase_chunk import (
    _CAP0,
    _M_FRESH,
    _M_NA,
    _M_NB,
    _M_ORD,
    _M_OWNED,
    _M_SCALE,
    _M_SYNCED,
    _STOP_CH,
    _STOP_CROSSED,
    _STOP_GROW,
    _STOP_NEW,
    _STOP_ROWS,
    _STOP_SLOW,
    _STOP_VENUE,
    CoinbaseLane,
    _eq,
    _side_arrays,
    _string,
)
from ddms.io.venues.okx_chunk import _int

if TYPE_CHECKING:
    from ddms.io.venues.kraken import KrakenBooks

__all__ = ["KrakenLane"]

_STOP_MISMATCH = _STOP_VENUE
# the venue's columns of the lane's ``meta``: the CRC of the book's last checksum text, and
# whether it is still the CRC of the book's 10 best levels (0 after any change to them the
# kernel did not check, and whenever the lane takes the book over from Python)
_M_CRC, _M_CRCOK = 6, 7
# kinds of applied messages (res[:, 3]): an update without / with a verified checksum, a
# snapshot, an update of an unsynced book (counted only)
_K_PLAIN, _K_CHECKED, _K_SNAP, _K_UNSYNCED, _K_HEARTBEAT = 0, 1, 2, 3, 4
_HB = -2    # _parse: a heartbeat
_KEYS = np.zeros((5, 4), np.uint8)
_KEYLEN = np.zeros(5, np.int64)
for _i, _k in enumerate(("a", "b", "as", "bs", "c")):
    _KEYS[_i, :len(_k)] = np.frombuffer(_k.encode(), np.uint8)
    _KEYLEN[_i] = len(_k)
_BOOK = np.frombuffer(b"book-", np.uint8).copy()
_EVENT = np.frombuffer(b"event", np.uint8).copy()
_HEARTBEAT = np.frombuffer(b"heartbeat", np.uint8).copy()


@leaf
def _heartbeat(buf, i, n):  # pragma: no cover - compiled
    """Whether ``buf[i:n]`` is exactly ``{"event": "heartbeat"}`` (whitespace allowed): the
    Python path counts it in ``ignored`` and does nothing else."""
    i = _ws(buf, i + 1, n)
    ks, ke, i = _key(buf, i, n)
    if i < 0 or not _eq(buf, ks, ke, _EVENT):
        return False
    a, b, i = _string(buf, i, n)
    if i < 0 or not _eq(buf, a, b, _HEARTBEAT):
        return False
    i = _ws(buf, i, n)
    return i < n and buf[i] == 125 and _ws(buf, i + 1, n) == n


@leaf
def _truncate(Iv, F, S, n, side, depth, oi, oc, k):  # pragma: no cover - compiled
    """``LevelBook.truncate`` of one side: the rows beyond the best ``depth`` (the array's first
    ones: the worst) deleted worst first.  Returns ``(n, k, dropped)``.  O(n) row moves."""
    drop = n - depth
    if drop <= 0:
        return n, k, 0
    for r in range(drop):
        k = put_row(oi, oc, k, side, -1, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
    keep = n - drop
    move_rows(Iv, F, S, 0, drop, keep)
    return keep, k, drop


@leaf
def _first_changed(Ib, nb, Ia, na, ch, nch, scale):  # pragma: no cover - compiled
    """The first level of the checksum text (the 10 best asks, then the 10 best bids: level ``q``
    is ask ``q`` for ``q < min(10, na)``, then the bids) that the changes ``ch[:nch]`` (read by
    :func:`~ddms.io.kernels.strlevels.read_changes`, no re-base, applied: ``nb``/``na`` the
    book's rows now) may have altered; 20 when they left the 10 best of both sides as they were.
    Why it holds: with ``j`` the fewest levels of a side strictly better than a changed price
    (at most 10), the ``j`` best levels now are better than every changed price, so none was
    set, added or removed, and no level better than them existed before (it would still be
    there): the text's levels before the first changed one are the last text's, and so is the
    CRC register after them (the caller's cache).  A truncation to a depth of at least 10 only
    drops the worst levels.  O(changes x 10)."""
    ja = 10
    jb = 10
    for c in range(nch):
        pid = ch[c, 5] * P10I[scale - ch[c, 6]]
        r = 0
        if ch[c, 0] % 2 == 0:
            while r < jb and r < nb and Ib[nb - 1 - r, 0] > pid:
                r += 1
            jb = r
        else:
            while r < ja and r < na and Ia[na - 1 - r, 0] < pid:
                r += 1
            ja = r
    if ja < 10:
        return ja
    if jb < 10:
        return min(10, na) + jb
    return 20


@njit(cache=True, nogil=True, inline="always")
def _parse(buf, a, n, ch, chv):  # pragma: no cover - compiled
    """The JSON of one message ``buf[a:n]``, its level entries into ``ch``/``chv`` (their spans,
    each entry's time): ``(code, snap, nch, nfirst, has_crc, cs, depth, pa, pb)``, ``code`` -1
    for a book message read whole (a snapshot or not, its ``nch`` entries, those of the first
    side given ``nfirst``, the checksum ``cs`` if ``has_crc``, the channel's depth, the pair's
    span ``buf[pa:pb]``), :data:`_HB` for a heartbeat, else the stop code."""
    i = _ws(buf, a, n)
    if i < n and buf[i] == 123 and _heartbeat(buf, i, n):
        return _HB, False, 0, 0, False, np.int64(0), 0, 0, 0
    if i >= n or buf[i] != 91:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    i = _ws(buf, i + 1, n)
    _, i = _int(buf, i, n)                 # channelID
    if i < 0:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    i = _ws(buf, i, n)
    nch = 0
    seen = 0            # keys over all dicts: 1 a, 2 b, 4 as, 8 bs, 16 c
    ndict = 0
    has_crc = False
    cs = np.int64(0)
    nfirst = -1         # snapshot: entries of the first side given
    first_side = -1
    while True:
        if i >= n or buf[i] != 44:
            return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
        i = _ws(buf, i + 1, n)
        if i >= n or buf[i] != 123:
            break
        ndict += 1
        i = _ws(buf, i + 1, n)
        here = 0
        while True:
            ks, ke, i = _key(buf, i, n)
            if i < 0:
                return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
            kid = name_index(buf, ks, ke, _KEYS, _KEYLEN)
            if kid < 0 or (here >> kid) & 1:
                return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
            here |= 1 << kid
            if kid == 4:
                x, y, i = _string(buf, i, n)
                if i < 0 or y - x < 1 or y - x > 18:
                    return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
                v = np.int64(0)
                for j in range(x, y):
                    if buf[j] < 48 or buf[j] > 57:
                        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
                    v = v * 10 + (np.int64(buf[j]) - 48)
                if v >= np.int64(1) << 32:
                    return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
                cs = v
                has_crc = True
            else:
                if kid >= 2 and (seen >> kid) & 1:     # a snapshot side given twice
                    return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
                side = 1 - (kid % 2)                   # a/as: asks (1); b/bs: bids (0)
                c0 = nch
                i, nch = string_entries(buf, i, n, ch, chv, nch, side, 3, 4, True)
                if i == -2:
                    return _STOP_CH, False, 0, 0, False, np.int64(0), 0, 0, 0
                if kid >= 2 and first_side < 0:
                    first_side = side
                    nfirst = nch - c0
            if i < 0:
                return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
            i = _ws(buf, i, n)
            if i < n and buf[i] == 44:
                i = _ws(buf, i + 1, n)
                continue
            if i < n and buf[i] == 125:
                i = _ws(buf, i + 1, n)
                break
            return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
        seen |= here
    snap = (seen & 12) != 0
    if ndict == 0 or (snap and (seen & 19) != 0) or (not snap and (seen & 3) == 0):
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    # channel name: book-<depth>
    ca, cb, i = _string(buf, i, n)
    if i < 0 or cb - ca < 6 or cb - ca > 14:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    for j in range(5):
        if buf[ca + j] != _BOOK[j]:
            return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    depth = np.int64(0)
    for j in range(ca + 5, cb):
        if buf[j] < 48 or buf[j] > 57:
            return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
        depth = depth * 10 + (np.int64(buf[j]) - 48)
    if depth < 1:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    i = _ws(buf, i, n)
    if i >= n or buf[i] != 44:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    pa, pb, i = _string(buf, _ws(buf, i + 1, n), n)
    if i < 0:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    i = _ws(buf, i, n)
    if i >= n or buf[i] != 93 or _ws(buf, i + 1, n) != n:
        return _STOP_SLOW, False, 0, 0, False, np.int64(0), 0, 0, 0
    return -1, snap, nch, nfirst, has_crc, cs, depth, pa, pb


@njit(cache=True, nogil=True, inline="always")
def _message(buf, a, n, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, k, text,
             crc, saved, resume, st):  # pragma: no cover - compiled
    """One message ``buf[a:n]``: ``(code, slot, k, nlev, kind, truncated)`` as the Coinbase
    kernel's (plus the levels truncated); ``crc[0], crc[1]`` the computed and the sent checksum
    of a mismatch.  A pair without a slot stops the kernel (:data:`_STOP_NEW`) after the message
    was read whole; what :func:`_parse` read is left in ``saved`` (and ``ch``/``chv``), and the
    call that retries the message once the lane made the slot passes ``resume``: a snapshot is
    read once, not twice (it was ~40% of a new pair's snapshot in the kernel).  ``st[s, q]``: the
    CRC register after the first ``q`` levels of pair ``s``'s last checksum text, valid while
    ``meta[s, _M_CRCOK]``: a check recomputes from the first level the message may have changed
    (:func:`_first_changed`), not the whole text (~25% of reading the real capture)."""
    if resume:
        snap, nch, nfirst, has_crc = saved[0] != 0, saved[1], saved[2], saved[3] != 0
        cs, depth, pa, pb = saved[4], saved[5], saved[6], saved[7]
    else:
        code, snap, nch, nfirst, has_crc, cs, depth, pa, pb = _parse(buf, a, n, ch, chv)
        if code == _HB:
            return -1, -1, k, 0, _K_HEARTBEAT, 0
        if code >= 0:
            return code, -1, k, 0, 0, 0
    # the pair
    ln = pb - pa
    if ln > up.shape[0]:
        return _STOP_SLOW, -1, k, 0, 0, 0
    for j in range(ln):
        c = buf[pa + j]
        up[j] = c - 32 if 97 <= c <= 122 else c
    s = _find(up, 0, ln, table, symtab, symlen)
    if s < 0:
        saved[0], saved[1], saved[2], saved[3] = 1 if snap else 0, nch, nfirst, 1 if has_crc else 0
        saved[4], saved[5], saved[6], saved[7] = cs, depth, pa, pb
        return _STOP_NEW, ln, k, 0, 0, 0
    if meta[s, _M_OWNED] == 0:
        return _STOP_SLOW, -1, k, 0, 0, 0
    if not snap and meta[s, _M_SYNCED] == 0:
        if meta[s, _M_FRESH] != 0:     # (see coinbase_chunk._M_FRESH)
            return _STOP_SLOW, -1, k, 0, 0, 0
        return -1, s, k, 0, _K_UNSYNCED, 0
    nb, na, scale = meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_SCALE]
    Ib, Ia = LI[2 * s], LI[2 * s + 1]
    ok, final, steps, need_b, need_a = read_changes(buf, ch, chv, nch, scale)
    if not ok:
        return _STOP_SLOW, -1, k, 0, 0, 0
    held = 0 if snap else nb + na
    if final > scale and not snap:
        mul = P10I[final - scale]
        if (nb > 0 and Ib[nb - 1, 0] > (MAX_ID - 1) // mul) or (na > 0 and Ia[0, 0] > (MAX_ID - 1) // mul):
            return _STOP_SLOW, -1, k, 0, 0, 0
    if not snap:
        need_b += nb
        need_a += na
    if need_b > Ib.shape[0]:
        return _STOP_GROW, ((2 * s) << 32) | need_b, k, 0, 0, 0
    if need_a > Ia.shape[0]:
        return _STOP_GROW, ((2 * s + 1) << 32) | need_a, k, 0, 0, 0
    if k + 2 * (nb + na) + 3 * nch + 2 * steps * (held + nch) > oi.shape[0]:
        return _STOP_ROWS, -1, k, 0, 0, 0
    Fb, Fa = LF[2 * s], LF[2 * s + 1]
    Sb, Sa = LS[2 * s], LS[2 * s + 1]      # once: each typed-list read is an atomic incref and decref
    nord = meta[s, _M_ORD]
    keep = not snap and depth >= 10 and meta[s, _M_CRCOK] != 0 and final == scale     # the cache may be resumed
    if snap:                  # LevelBook.clear, then the levels in the message's order
        k = emit_side(Ib, Fb, nb, 0, -1, 1, oi, oc, k)
        k = emit_side(Ia, Fa, na, 1, -1, 1, oi, oc, k)
        meta[s, _M_SYNCED] = 1
        meta[s, _M_FRESH] = 0
        nb, na, scale, nord, k = load_snapshot(LI, LF, LS, s, ch, chv, 0, nfirst, nch, scale, 0.0, True, buf, nord,
                                               oi, oc, k)
    elif final == scale:      # no re-base: the leaf (no reference counting a call)
        nb, na, nord, k = set_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, 0, nch, nb, na, scale,
                                      0.0, True, buf, nord, oi, oc, k)
    else:
        nb, na, scale, nord, k = apply_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, 0, nch, nb, na,
                                               scale, 0.0, True, buf, nord, oi, oc, k)
    nb, k, tb = _truncate(Ib, Fb, Sb, nb, 0, depth, oi, oc, k)
    na, k, ta = _truncate(Ia, Fa, Sa, na, 1, depth, oi, oc, k)
    meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_ORD], meta[s, _M_SCALE] = nb, na, nord, scale
    kind = _K_SNAP if snap else _K_PLAIN
    t0 = _first_changed(Ib, nb, Ia, na, ch, nch, scale) if keep else 0
    if has_crc:
        if t0 >= 20:             # the 10 best of each side as at the last checksum: its CRC
            have = meta[s, _M_CRC]
        else:                    # the text from level t0 on, the register resumed after the levels before
            na10 = min(10, na)
            c = st[s, t0] if t0 > 0 else np.int64(0xFFFFFFFF)
            for q in range(t0, na10 + min(10, nb)):
                if q < na10:
                    m = kraken_level_text(Sa, Ia, na - 1 - q, text, 0)
                else:
                    m = kraken_level_text(Sb, Ib, nb - 1 - (q - na10), text, 0)
                c = crc32_update(c, text, 0, m)
                st[s, q + 1] = c
            have = c ^ np.int64(0xFFFFFFFF)
            meta[s, _M_CRC] = have
            meta[s, _M_CRCOK] = 1
        if have != cs:
            meta[s, _M_CRCOK] = 0
            crc[0] = have
            crc[1] = cs
            return _STOP_MISMATCH, s, k, nch, kind, tb + ta
        kind = _K_CHECKED
    elif t0 < 20:
        meta[s, _M_CRCOK] = 0
    if nb > 0 and na > 0 and Ib[nb - 1, 0] >= Ia[na - 1, 0]:
        return _STOP_CROSSED, s, k, nch, kind, tb + ta
    return -1, s, k, nch, kind, tb + ta


@njit(cache=True, nogil=True)
def _run(buf, starts, ends, i0, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, res, text,
         crc, saved, resume, st):  # pragma: no cover - compiled
    """As the OKX lane's ``_run``; ``res[i, 6]`` the levels truncated; ``resume``: message
    ``i0`` stopped the last run as a new pair, and ``saved`` holds what was read of it."""
    k = 0
    n = starts.shape[0]
    for i in range(i0, n):
        code, s, k, nlev, kind, trunc = _message(buf, starts[i], ends[i], table, symtab, symlen, meta, LI, LF, LS,
                                                 ch, chv, up, oi, oc, k, text, crc, saved, resume and i == i0, st)
        if code >= 0 and code != _STOP_CROSSED and code != _STOP_MISMATCH:
            return i, code, k, s
        res[i, 0] = s
        res[i, 1] = k
        res[i, 2] = nlev
        res[i, 3] = kind
        res[i, 6] = trunc
        if code >= 0:
            return i + 1, code, k, s
    return n, _STOP_SLOW, k, -1


class KrakenLane(CoinbaseLane):
    """The fast lane of one :class:`~ddms.io.venues.kraken.KrakenBooks` (see the module
    docstring)."""

    _RES = 7

    def __init__(self, core: KrakenBooks, *, rows: int = 1 << 14) -> None:
        super().__init__(core, rows=rows)     # type: ignore[arg-type]
        self._chv = np.zeros((self._chv.shape[0], 3), np.float64)    # price, size, time
        self._text = np.zeros(2 * 10 * 2 * W + 100, np.uint8)
        self._crc = np.zeros(2, np.int64)
        self._saved = np.zeros(8, np.int64)     # what _parse read of the message that stopped as a new pair
        self._read: tuple[np.ndarray, int] | None = None     # (chunk buffer, message) of that message
        self._st = np.zeros((self._meta.shape[0], 21), np.int64)     # CRC registers per text level (_message)

    def _add(self, sym: str, cap: int = _CAP0) -> int:
        s = super()._add(sym, cap)
        if self._meta.shape[0] > self._st.shape[0]:
            self._st = np.vstack([self._st, np.zeros((self._meta.shape[0] - self._st.shape[0], 21), np.int64)])
        return s

    def _call(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, i: int, res: np.ndarray
              ) -> tuple[int, int, int, int]:
        out = _run(buf, starts, ends, i, self._table, self._symtab, self._symlen, self._meta, self._LI, self._LF,
                   self._LS, self._ch, self._chv, self._up, self._oi[self._k0:], self._oc[self._k0:], res, self._text,
                   self._crc,
                   self._saved, self._read is not None and self._read[0] is buf and self._read[1] == i, self._st)
        # a new pair's message, read whole: the retry (after the lane made its slot) resumes it
        self._read = (buf, out[0]) if out[1] == _STOP_NEW else None
        return out

    def feed_chunk(self, msgs, lines, **kw):  # type: ignore[no-untyped-def]
        """:meth:`CoinbaseLane.feed_chunk`; no message of an earlier chunk is resumed."""
        self._read = None
        try:
            return super().feed_chunk(msgs, lines, **kw)
        finally:
            self._read = None

    def _refresh(self, s: int) -> None:
        """The book of slot ``s`` was (re)taken from Python: its cached checksum CRC is void."""
        self._meta[s, _M_CRCOK] = 0

    def _check(self) -> None:
        """:meth:`CoinbaseLane._check`, and every held book's cached checksum state: while
        ``_M_CRCOK``, the CRC register after each level of its checksum text (``_st``) and the
        CRC itself are zlib's of the text the book gives now."""
        import zlib
        super()._check()
        for s, bk in enumerate(self._books):
            if bk is None or not self._meta[s, _M_CRCOK]:
                continue
            texts = []
            for side in (1, 0):           # the asks, then the bids, best first
                n = int(self._meta[s, side])
                Iv, _, S = _side_arrays(self._LI, self._LF, self._LS, 2 * s + side)
                for r in range(n - 1, max(n - 10, 0) - 1, -1):
                    w = S.shape[1] // 2
                    parts = (S[r, :Iv[r, 2]].tobytes(), S[r, w:w + Iv[r, 3]].tobytes())
                    texts.append(b"".join(p.lstrip(b"0.").replace(b".", b"") for p in parts))
            crc = 0
            for q, t in enumerate(texts):
                crc = zlib.crc32(t, crc)
                assert int(self._st[s, q + 1]) ^ 0xFFFFFFFF == crc, (self._sym[s], q)
            assert int(self._meta[s, _M_CRC]) == crc, self._sym[s]

    def _count(self, r: np.ndarray, nslot: int) -> None:
        beats = r[:, 3] == _K_HEARTBEAT
        if beats.any():
            core = self.core
            core.ignored["event:heartbeat"] = core.ignored.get("event:heartbeat", 0) + int(beats.sum())
            r = r[~beats]
        kinds, slots = r[:, 3], r[:, 0]
        n_msg = np.bincount(slots, minlength=nslot)
        n_snap = np.bincount(slots[kinds == _K_SNAP], minlength=nslot)
        n_lev = np.bincount(slots, weights=r[:, 2], minlength=nslot)
        n_chk = np.bincount(slots[kinds == _K_CHECKED], minlength=nslot)
        n_trunc = np.bincount(slots, weights=r[:, 6], minlength=nslot)
        status, syms = self.core.status, self._sym
        for s in np.flatnonzero(n_msg).tolist():
            st = status[syms[s]]
            c, c2 = int(n_msg[s]), int(n_snap[s])
            st.messages += c
            st.depth_events += c - c2
            st.level_updates += int(n_lev[s])
            st.checksum_checked += int(n_chk[s])
            st.truncated += int(n_trunc[s])
            if c2:
                st.snapshots += c2
                st.synced = True

    def _stopped(self, code: int, arg: int, msgs, lines, stop: int, actions: list) -> None:
        """A checksum mismatch of message ``stop - 1`` (applied and truncated): the core's own
        check, which counts it, discards the book and reports it with the message."""
        from ddms.io.venues.base import loads_json
        line = int(lines[stop - 1])
        actions.extend(self.core._checksum(self._sym[arg], int(self._crc[0]), int(self._crc[1]), line,
                                           loads_json(msgs[stop - 1])) or ())
