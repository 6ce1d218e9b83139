"""Chunked fast lane for OKX v5 ``books`` messages: many raw messages per numba call.

Why: :meth:`OkxBooks.feed <ddms.io.venues.okx.OkxBooks.feed>` costs tens of us of Python per
message (JSON decode, validation, a ``LevelBook.set`` per level, the checksum text).  :func:`_run`
applies ``snapshot`` messages and the ``update`` messages of synced books in numba on the exact-string arrays of
:mod:`~ddms.io.kernels.strlevels`, checks ``prevSeqId`` against the last ``seqId`` and verifies
the signed CRC32 checksum of every message that carries one, computed in the kernel over the
same text the Python path builds (:func:`~ddms.io.kernels.strlevels.top_crc_text`, then
:func:`crc32`: ``zlib.crc32``'s polynomial and bit order).

Everything else takes the Python path, one message at a time, exactly as before: other
channels and ``event`` messages, a ``data`` list of more than one entry, unknown or repeated
fields, a value of an unexpected JSON type, escapes or non-ASCII text, malformed values, a
continuity break (gap or stale message), a book the lane does not hold.  A checksum mismatch
stops the kernel after the message (its levels applied, as the Python path applies them before
the check) and the lane reports it through the core's own ``_checksum`` (resync and report).
The lane itself (book ownership, events, counters) is
:class:`~ddms.io.venues.coinbase_chunk.CoinbaseLane`'s; the last ``seqId`` of a held book lives
in the lane's slot state and is copied to ``OkxBooks.last_seq`` after every kernel run.

Cost: O(bytes + levels + 50 checksum strings) in numba per message; the events of a kernel run
are one :class:`~ddms.io.levels.ChunkEvents` (no Python object per message).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from ddms.io.kernels.jsonscan import leaf
from ddms.io.kernels.jsonscan import member as _member
from ddms.io.kernels.strlevels import (
    MAX_ID,
    P10I,
    W,
    apply_changes,
    crc32,
    emit_side,
    load_snapshot,
    read_changes,
    set_changes,
    string_entries,
    top_crc_text,
)
from ddms.io.venues.binance_book import _key, _skip_scalar, _ws, name_index
from ddms.io.venues.binance_chunk import _find
from ddms.io.venues.coinbase_chunk import (
    _K_IGNORED,
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
    _string,
    skip_json,
)

if TYPE_CHECKING:
    from ddms.io.venues.okx import OkxBooks

__all__ = ["OkxLane", "crc32"]

_M_LAST, _M_HASLAST = 6, 7
_STOP_MISMATCH = _STOP_VENUE
# kinds of applied messages: an update / a snapshot, without or with a verified checksum
_K_PLAIN, _K_CHECKED, _K_SNAP, _K_SNAP_CHECKED = 0, 1, 2, 3


def _names(*names: str) -> tuple[np.ndarray, np.ndarray]:
    tab = np.zeros((len(names), 16), np.uint8)
    ln = np.zeros(len(names), np.int64)
    for i, k in enumerate(names):
        tab[i, :len(k)] = np.frombuffer(k.encode(), np.uint8)
        ln[i] = len(k)
    return tab, ln


_TOP, _TOPLEN = _names("arg", "action", "data")
_ARG, _ARGLEN = _names("channel", "instId")
_DATA, _DATALEN = _names("asks", "bids", "ts", "checksum", "seqId", "prevSeqId")
_CHANNELS, _CHANLEN = _names("books", "books-l2-tbt", "books50-l2-tbt")
_UPDATE = np.frombuffer(b"update", np.uint8).copy()
_SNAPSHOT = np.frombuffer(b"snapshot", np.uint8).copy()


@leaf
def _int(buf, i, n):  # pragma: no cover - compiled
    """A JSON integer at ``i`` (``-?(0|[1-9][0-9]*)``, at most 18 digits, not followed by a
    fraction or exponent): ``(value, j)``, ``j = -1`` otherwise."""
    neg = i < n and buf[i] == 45
    if neg:
        i += 1
    s = i
    v = np.int64(0)
    while i < n and 48 <= buf[i] <= 57:
        v = v * 10 + (np.int64(buf[i]) - 48)
        i += 1
    nd = i - s
    if nd == 0 or nd > 18 or (nd > 1 and buf[s] == 48):
        return 0, -1
    if i < n and (buf[i] == 46 or buf[i] == 101 or buf[i] == 69):
        return 0, -1
    return (-v if neg else v), i


@njit(cache=True, nogil=True, inline="always")
def _message(buf, a, n, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, k, text, crc):  # pragma: no cover
    """One message ``buf[a:n]``: ``(code, slot, k, nlev, kind)`` as the Coinbase kernel's;
    ``crc[0], crc[1]`` the computed and the sent checksum of a mismatch."""
    i = _ws(buf, a, n)
    if i >= n or buf[i] != 123:
        return _STOP_SLOW, -1, k, 0, 0
    i = _ws(buf, i + 1, n)
    seen = 0
    ca = cb = pa = pb = xa = xb = 0
    data_at = -1
    while True:
        ks, ke, i = _key(buf, i, n)
        if i < 0:
            return _STOP_SLOW, -1, k, 0, 0
        kid = name_index(buf, ks, ke, _TOP, _TOPLEN)
        if kid < 0 or (seen >> kid) & 1:
            return _STOP_SLOW, -1, k, 0, 0
        seen |= 1 << kid
        if kid == 0:                      # arg: channel, instId and any other scalar members
            if i >= n or buf[i] != 123:
                return _STOP_SLOW, -1, k, 0, 0
            i = _ws(buf, i + 1, n)
            aseen = 0
            while True:
                ks, ke, i = _key(buf, i, n)
                if i < 0:
                    return _STOP_SLOW, -1, k, 0, 0
                aid = name_index(buf, ks, ke, _ARG, _ARGLEN)
                if aid >= 0:
                    if (aseen >> aid) & 1:
                        return _STOP_SLOW, -1, k, 0, 0
                    aseen |= 1 << aid
                    x, y, i = _string(buf, i, n)
                    if aid == 0:
                        ca, cb = x, y
                    else:
                        pa, pb = x, y
                else:
                    i = _skip_scalar(buf, i, n)
                if i < 0:
                    return _STOP_SLOW, -1, k, 0, 0
                i = _ws(buf, i, n)
                if i < n and buf[i] == 44:
                    i = _ws(buf, i + 1, n)
                    continue
                if i < n and buf[i] == 125:
                    i += 1
                    break
                return _STOP_SLOW, -1, k, 0, 0
            if aseen != 3:
                return _STOP_SLOW, -1, k, 0, 0
        elif kid == 1:
            xa, xb, i = _string(buf, i, n)
        else:
            data_at = i
            i = _skip_data(buf, i, n)
        if i < 0:
            return _STOP_SLOW, -1, k, 0, 0
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 125:
            break
        return _STOP_SLOW, -1, k, 0, 0
    snap = _eq(buf, xa, xb, _SNAPSHOT)
    if _ws(buf, i + 1, n) != n or seen != 7 or not (snap or _eq(buf, xa, xb, _UPDATE)):
        return _STOP_SLOW, -1, k, 0, 0
    if name_index(buf, ca, cb, _CHANNELS, _CHANLEN) < 0:
        return _STOP_SLOW, -1, k, 0, 0
    # data: exactly one object
    i = _ws(buf, data_at + 1, n)
    if i >= n or buf[i] != 123:
        return _STOP_SLOW, -1, k, 0, 0
    i = _ws(buf, i + 1, n)
    dseen = 0
    asks_at = bids_at = -1
    ts = np.int64(0)
    seq = prev = cs = np.int64(0)
    if i < n and buf[i] == 125:
        i += 1
    else:
        while True:
            ks, ke, i = _key(buf, i, n)
            if i < 0:
                return _STOP_SLOW, -1, k, 0, 0
            did = name_index(buf, ks, ke, _DATA, _DATALEN)
            if did < 0 or (dseen >> did) & 1:
                return _STOP_SLOW, -1, k, 0, 0
            dseen |= 1 << did
            if did == 0:
                asks_at = i
                i = _skip_data(buf, i, n)
            elif did == 1:
                bids_at = i
                i = _skip_data(buf, i, n)
            elif did == 2:
                x, y, i = _string(buf, i, n)
                if i < 0 or y - x < 1 or y - x > 16:
                    return _STOP_SLOW, -1, k, 0, 0
                for j in range(x, y):
                    if buf[j] < 48 or buf[j] > 57:
                        return _STOP_SLOW, -1, k, 0, 0
                    ts = ts * 10 + (np.int64(buf[j]) - 48)
            else:
                v, i = _int(buf, i, n)
                if did == 3:
                    cs = v
                elif did == 4:
                    seq = v
                else:
                    prev = v
            if i < 0:
                return _STOP_SLOW, -1, k, 0, 0
            i = _ws(buf, i, n)
            if i < n and buf[i] == 44:
                i = _ws(buf, i + 1, n)
                continue
            if i < n and buf[i] == 125:
                i += 1
                break
            return _STOP_SLOW, -1, k, 0, 0
    i = _ws(buf, i, n)
    if i >= n or buf[i] != 93:           # more than one data entry: the Python path
        return _STOP_SLOW, -1, k, 0, 0
    has_crc = (dseen >> 3) & 1 == 1
    if has_crc and not (-(2**31) <= cs < 2**31):
        return _STOP_SLOW, -1, k, 0, 0
    nch = 0
    if bids_at >= 0:
        j, nch = string_entries(buf, bids_at, n, ch, chv, 0, 0, 2, 4, False)
        if j == -2:
            return _STOP_CH, -1, k, 0, 0
        if j < 0:
            return _STOP_SLOW, -1, k, 0, 0
    if asks_at >= 0:
        j, nch = string_entries(buf, asks_at, n, ch, chv, nch, 1, 2, 4, False)
        if j == -2:
            return _STOP_CH, -1, k, 0, 0
        if j < 0:
            return _STOP_SLOW, -1, k, 0, 0
    # the instrument
    ln = pb - pa
    if ln > up.shape[0]:
        return _STOP_SLOW, -1, k, 0, 0
    for j in range(ln):
        c = buf[pa + j]
        up[j] = c - 32 if 97 <= c <= 122 else c
    s = _find(up, 0, ln, table, symtab, symlen)
    if s < 0:
        return (_STOP_NEW if snap else _STOP_SLOW), ln, k, 0, 0
    if meta[s, _M_OWNED] == 0 or (meta[s, _M_SYNCED] == 0 and not snap):
        return _STOP_SLOW, -1, k, 0, 0
    if not snap and (dseen >> 5) & 1 and meta[s, _M_HASLAST] != 0 and prev != meta[s, _M_LAST]:
        return _STOP_SLOW, -1, k, 0, 0         # a gap or a stale message: the Python path
    nb, na, scale = meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_SCALE]
    held = 0 if snap else nb + na
    Ib, Ia = LI[2 * s], LI[2 * s + 1]
    ok, final, steps, need_b, need_a = read_changes(buf, ch, chv, nch, scale)
    if not ok:
        return _STOP_SLOW, -1, k, 0, 0
    if final > scale and not snap:
        mul = P10I[final - scale]
        if (nb > 0 and Ib[nb - 1, 0] > (MAX_ID - 1) // mul) or (na > 0 and Ia[0, 0] > (MAX_ID - 1) // mul):
            return _STOP_SLOW, -1, k, 0, 0
    if not snap:
        need_b += nb
        need_a += na
    if need_b > Ib.shape[0]:
        return _STOP_GROW, ((2 * s) << 32) | need_b, k, 0, 0
    if need_a > Ia.shape[0]:
        return _STOP_GROW, ((2 * s + 1) << 32) | need_a, k, 0, 0
    if k + (nb + na) + 2 * nch + 2 * steps * (held + nch) > oi.shape[0]:
        return _STOP_ROWS, -1, k, 0, 0
    Fb, Fa = LF[2 * s], LF[2 * s + 1]
    Sb, Sa = LS[2 * s], LS[2 * s + 1]      # once: each typed-list read is an atomic incref and decref
    t = np.float64(ts)
    nord = meta[s, _M_ORD]
    if snap:                  # LevelBook.clear, then the levels (bids, then asks)
        k = emit_side(Ib, Fb, nb, 0, -1, 1, oi, oc, k)
        k = emit_side(Ia, Fa, na, 1, -1, 1, oi, oc, k)
        meta[s, _M_SYNCED] = 1
        meta[s, _M_HASLAST] = 0
        nbids = 0
        for c in range(nch):
            if ch[c, 0] % 2 == 0:
                nbids += 1
        nb, na, scale, nord, k = load_snapshot(LI, LF, LS, s, ch, chv, 0, nbids, nch, scale, t, False, buf, nord,
                                               oi, oc, k)
    elif final == scale:      # no re-base: the leaf (no reference counting a call)
        nb, na, nord, k = set_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, 0, nch, nb, na, scale,
                                      t, False, buf, nord, oi, oc, k)
    else:
        nb, na, scale, nord, k = apply_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, 0, nch, nb, na,
                                               scale, t, False, buf, nord, oi, oc, k)
    meta[s, _M_NB], meta[s, _M_NA], meta[s, _M_ORD], meta[s, _M_SCALE] = nb, na, nord, scale
    if (dseen >> 4) & 1:
        meta[s, _M_LAST] = seq
        meta[s, _M_HASLAST] = 1
    kind = _K_SNAP if snap else _K_PLAIN
    if has_crc:
        m = top_crc_text(Sb, Ib, nb, Sa, Ia, na, 25, 58, False, text)
        c32 = np.int64(crc32(text, m))
        have = c32 - (np.int64(1) << 32) if c32 >= (np.int64(1) << 31) else c32
        if have != cs:
            crc[0] = have
            crc[1] = cs
            return _STOP_MISMATCH, s, k, nch, kind
        kind += 1
    if nb > 0 and na > 0 and Ib[nb - 1, 0] >= Ia[na - 1, 0]:
        return _STOP_CROSSED, s, k, nch, kind
    return -1, s, k, nch, kind


@leaf
def _skip_data(buf, i, n):  # pragma: no cover - compiled
    """Index after a JSON array or object at ``i`` whose leaves are scalars (read later), -1 for
    anything else (strings with escapes or non-ASCII bytes included)."""
    if i >= n or (buf[i] != 91 and buf[i] != 123):
        return -1
    depth = 0
    while i < n:
        c = buf[i]
        if c == 91 or c == 123:
            depth += 1
            i += 1
        elif c == 93 or c == 125:
            depth -= 1
            i += 1
            if depth == 0:
                return i
        elif c == 34:
            x, y, i = _string(buf, i, n)
            if i < 0:
                return -1
        elif c == 44 or c == 58 or c == 32 or c == 9 or c == 10 or c == 13:
            i += 1
        else:
            i = _skip_scalar(buf, i, n)
            if i < 0:
                return -1
    return -1


_EVENT = np.frombuffer(b"event", np.uint8).copy()
_ARGW = np.frombuffer(b"arg", np.uint8).copy()
_CHANNEL = np.frombuffer(b"channel", np.uint8).copy()
_INSTID = np.frombuffer(b"instId", np.uint8).copy()


@leaf
def _ignored(buf, a, n):  # pragma: no cover - compiled
    """The span of the channel of a message the Python path only counts in ``ignored`` (valid
    JSON, an object without ``event`` whose one ``arg`` is an object with one string ``channel``
    -- not a book channel -- and one string ``instId``: tickers, trades, ...), else
    ``(-1, -1)``."""
    i = _ws(buf, a, n)
    if i >= n or buf[i] != 123:
        return -1, -1
    i = _ws(buf, i + 1, n)
    ca = cb = -1
    seen_arg = False
    while True:
        ks, ke, i = _member(buf, i, n)
        if i < 0 or _eq(buf, ks, ke, _EVENT):
            return -1, -1
        if _eq(buf, ks, ke, _ARGW):
            if seen_arg or i >= n or buf[i] != 123:
                return -1, -1
            seen_arg = True
            i = _ws(buf, i + 1, n)
            pa = -1
            while True:
                xs, xe, i = _member(buf, i, n)
                if i < 0:
                    return -1, -1
                if _eq(buf, xs, xe, _CHANNEL):
                    if ca >= 0:
                        return -1, -1
                    ca, cb, i = _string(buf, i, n)
                elif _eq(buf, xs, xe, _INSTID):
                    if pa >= 0:
                        return -1, -1
                    pa, pb, i = _string(buf, i, n)
                else:
                    i = skip_json(buf, i, n)
                if i < 0:
                    return -1, -1
                i = _ws(buf, i, n)
                if i < n and buf[i] == 44:
                    i = _ws(buf, i + 1, n)
                    continue
                if i < n and buf[i] == 125:
                    i += 1
                    break
                return -1, -1
            if ca < 0 or pa < 0:
                return -1, -1
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
    if _ws(buf, i + 1, n) != n or not seen_arg or name_index(buf, ca, cb, _CHANNELS, _CHANLEN) >= 0:
        return -1, -1
    return ca, cb


@njit(cache=True, nogil=True)
def _run(buf, starts, ends, i0, table, symtab, symlen, meta, LI, LF, LS, ch, chv, up, oi, oc, res, text,
         crc):  # pragma: no cover - compiled
    """As the Coinbase lane's ``_run``; ``_STOP_MISMATCH`` (message ``stop - 1`` applied, its
    checksum wrong: ``crc``) besides."""
    k = 0
    n = starts.shape[0]
    for i in range(i0, n):
        code, s, k, nlev, kind = _message(buf, starts[i], ends[i], table, symtab, symlen, meta, LI, LF, LS, ch, chv,
                                          up, oi, oc, k, text, crc)
        if code == _STOP_SLOW:
            ca, cb = _ignored(buf, starts[i], ends[i])
            if ca >= 0:
                code, s, nlev, kind = -1, -1, 0, _K_IGNORED
                res[i, 4] = ca
                res[i, 5] = cb
        if code >= 0 and code != _STOP_CROSSED and code != _STOP_MISMATCH:
            return i, code, k, s
        res[i, 0] = s
        res[i, 1] = k
        res[i, 2] = nlev
        res[i, 3] = kind
        if code >= 0:
            return i + 1, code, k, s
    return n, _STOP_SLOW, k, -1


class OkxLane(CoinbaseLane):
    """The fast lane of one :class:`~ddms.io.venues.okx.OkxBooks` (see the module docstring)."""

    def __init__(self, core: OkxBooks, *, rows: int = 1 << 14) -> None:
        super().__init__(core, rows=rows)     # type: ignore[arg-type]
        self._text = np.zeros(50 * 2 * W + 100, np.uint8)
        self._crc = np.zeros(2, np.int64)

    def _call(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, i: int, res: np.ndarray
              ) -> tuple[int, int, int, int]:
        return _run(buf, starts, ends, i, self._table, self._symtab, self._symlen, self._meta, self._LI, self._LF,
                    self._LS, self._ch, self._chv, self._up, self._oi[self._k0:], self._oc[self._k0:], res, self._text,
                    self._crc)

    def _refresh(self, s: int) -> None:
        last = self.core.last_seq.get(self._sym[s])
        self._meta[s, _M_LAST] = 0 if last is None else last
        self._meta[s, _M_HASLAST] = last is not None

    def _count(self, r: np.ndarray, nslot: int) -> None:
        kinds, slots = r[:, 3], r[:, 0]
        n_msg = np.bincount(slots, minlength=nslot)
        n_snap = np.bincount(slots[kinds >= _K_SNAP], minlength=nslot)
        n_lev = np.bincount(slots, weights=r[:, 2], minlength=nslot)
        n_chk = np.bincount(slots[(kinds == _K_CHECKED) | (kinds == _K_SNAP_CHECKED)], minlength=nslot)
        core, syms, meta = self.core, self._sym, self._meta
        for s in np.flatnonzero(n_msg).tolist():
            sym = syms[s]
            st = core.status[sym]
            c, c2 = int(n_msg[s]), int(n_snap[s])
            st.messages += c
            st.depth_events += c - c2
            st.level_updates += int(n_lev[s])
            st.checksum_checked += int(n_chk[s])
            if c2:
                st.snapshots += c2
                st.synced = True
            core.last_seq[sym] = int(meta[s, _M_LAST]) if meta[s, _M_HASLAST] else None

    def _stopped(self, code: int, arg: int, msgs, lines, stop: int, actions: list) -> None:
        """A checksum mismatch of message ``stop - 1`` (applied): the core's own check, which
        counts it, discards the book and reports it with the message."""
        from ddms.io.venues.base import loads_json
        core = self.core
        line = int(lines[stop - 1])
        actions.extend(core._checksum(self._sym[arg], int(self._crc[0]), int(self._crc[1]), line,
                                      loads_json(msgs[stop - 1])) or ())
