"""Price-level books kept on the exact decimal strings a venue sends, in numba arrays.

Why: :class:`~ddms.io.levels.LevelBook` (Python ints, a ``SortedList`` and a dict of level
objects) costs ~1 us of Python per level update; the chunk lanes of the Kraken/OKX/Coinbase cores
(e.g. :mod:`ddms.io.venues.coinbase_chunk`) apply level updates of many messages in one numba
call on these arrays instead, and hand a book back to its ``LevelBook`` (:meth:`pull`-style, by
the lane) only when Python code needs it.  The arrays keep exactly what ``LevelBook`` keeps, so
the two convert into each other without loss:

one side of one book is three arrays with ``n`` live rows sorted by price id towards the best
(bids ascending, asks descending: the best level of either side is row ``n - 1``, so that the
busy levels near the touch move few rows when a level appears or goes):

- ``Iv[r] = (pid, ord, plen, qlen)``: the price as an integer at the book's scale (what
  ``LevelBook`` emits as the row id), the level's insertion number (a ``LevelBook`` level dict's
  order: a level set again keeps its place, one removed and set again goes last), the lengths of
  its price and size strings;
- ``F[r] = (t, volume, price)``: the floats of the level's engine row;
- ``S[r, :W]`` the price string's bytes, ``S[r, W:2W]`` the size string's (at most :data:`W`
  bytes each: a longer string keeps the book in Python).

Decimal strings are read by :func:`decimal_of` with ``LevelBook``'s grammar (``digits[.digits]``,
at most 18 decimals and 30 integer digits); values whose significant digits do not fit the fast
path (more than 18) are left to Python.  Floats are exact quotients of exact integers
(``m / 10**d`` with ``m < 2**53``): IEEE division rounds correctly, as Python's ``float(text)``
does.  Cost: a level update is a binary search plus, when a level appears or disappears, a shift
of the rows after it (:func:`move_rows`: one memmove per array, O(n) bytes; books of a few
thousand levels).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ddms.io.kernels.jsonscan import leaf, string, ws

__all__ = ["MAX_ID", "P10I", "W", "apply_changes", "crc32", "crc32_update", "decimal_of", "emit_side", "find",
           "kraken_crc_text", "kraken_level_text", "load_side", "load_snapshot", "move_row", "move_rows",
           "read_changes", "set_changes", "set_level", "string_entries", "top_crc_text"]

W = 32
"""Bytes kept per price and per size string."""
MAX_ID = 2**53
P10I = np.array([10**i for i in range(19)], np.int64)
"""Exact integer powers of ten."""
P10F = np.array([10.0**i for i in range(23)])
"""Exact float powers of ten."""



def _crc_tables() -> np.ndarray:
    """CRC-32 (``zlib.crc32``'s reflected polynomial 0xEDB88320) lookup tables for slicing by 8:
    row 0 the byte table, row j the table of a byte followed by j zero bytes."""
    t = np.zeros((8, 256), np.int64)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        t[0, i] = c
    for j in range(1, 8):
        for i in range(256):
            p = int(t[j - 1, i])
            t[j, i] = (p >> 8) ^ int(t[0, p & 0xFF])
    return t


_CRC8 = _crc_tables()

# decimal_of status
OK, BAD, BIG = 0, 1, 2


@leaf
def put_row(oi, oc, k, side, sign, t, pid, qty, px):  # pragma: no cover - compiled
    """Output row ``k`` of a level's engine event: ``oi[k] = (side, sign)``, ``oc[k] = (t, pid,
    broker 0, volume, price)``.  Returns ``k + 1``."""
    oi[k, 0] = side
    oi[k, 1] = sign
    oc[k, 0] = t
    oc[k, 1] = pid
    oc[k, 2] = 0.0
    oc[k, 3] = qty
    oc[k, 4] = px
    return k + 1


@njit(cache=True, nogil=True, inline="always")
def decimal_of(buf, a, b):  # pragma: no cover - compiled
    """The decimal string ``buf[a:b]`` (its content, without quotes).  Returns ``(status, m, d)``:
    status :data:`OK` with the value ``m / 10**d`` (``d`` the decimals after dropping trailing
    zeros, ``m < 2**53``); :data:`BAD` if ``LevelBook`` refuses the text (not ``digits[.digits]``,
    more than 18 decimals or 30 integer digits); :data:`BIG` if valid but beyond ``2**53``
    significant (the caller leaves it to Python)."""
    i = a
    ni = 0
    m = np.int64(0)
    sig = 0          # significant digits in m
    while i < b and 48 <= buf[i] <= 57:
        dgt = np.int64(buf[i]) - 48
        if sig > 0 or dgt != 0:
            if sig < 18:
                m = m * 10 + dgt
            sig += 1
        ni += 1
        i += 1
    if ni == 0:
        return BAD, m, 0
    nf = 0
    d = 0
    if i < b:
        if buf[i] != 46:
            return BAD, m, 0
        i += 1
        zeros = 0    # trailing zeros not yet folded into m
        while i < b and 48 <= buf[i] <= 57:
            dgt = np.int64(buf[i]) - 48
            nf += 1
            i += 1
            if dgt == 0:
                zeros += 1
                continue
            for _ in range(zeros):
                if sig > 0:
                    if sig < 18:
                        m = m * 10
                    sig += 1
            d += zeros + 1
            zeros = 0
            if sig < 18:
                m = m * 10 + dgt
            sig += 1
        if i < b:
            return BAD, m, 0
    if nf > 18 or ni > 30:
        return BAD, m, 0
    if sig > 18:
        return BIG, m, 0
    if m >= MAX_ID:
        return BIG, m, 0
    return OK, m, d


@njit(cache=True, nogil=True, inline="always")
def find(Iv, n, pid, sgn):  # pragma: no cover - compiled
    """Row of ``pid`` among the ``n`` rows sorted by ``sgn * pid`` (bids ``sgn`` 1, asks -1), or
    ``-(insertion point) - 1``."""
    lo, hi = 0, n
    pid = pid * sgn
    while lo < hi:
        mid = (lo + hi) >> 1
        v = Iv[mid, 0] * sgn
        if v < pid:
            lo = mid + 1
        elif v > pid:
            hi = mid
        else:
            return mid
    return -lo - 1


@leaf
def move_row(Iv, F, S, dst, src):  # pragma: no cover - compiled
    """Row ``src`` of a side's three arrays copied over row ``dst``, element by element (a row
    assignment ``Iv[dst] = Iv[src]`` may copy through a temporary array: an allocation)."""
    for x in range(Iv.shape[1]):
        Iv[dst, x] = Iv[src, x]
    for x in range(F.shape[1]):
        F[dst, x] = F[src, x]
    for x in range(S.shape[1]):
        S[dst, x] = S[src, x]


@intrinsic
def _memmove_rows(typingctx, a, dst, src, count):
    """``a[dst:dst + count] = a[src:src + count]`` for a C-contiguous 2-D array, as one
    ``llvm.memmove`` (overlap allowed; no temporary, no reference counting).  The caller keeps
    both ranges inside the array."""
    if not (isinstance(a, types.Array) and a.ndim == 2 and a.layout == "C"):
        return None
    sig = types.void(a, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ary = context.make_array(aty)(context, builder, args[0])
        ncol = builder.extract_value(ary.shape, 1)
        row = builder.mul(ncol, context.get_constant(types.intp, context.get_abi_sizeof(
            context.get_data_type(aty.dtype))))
        base = builder.bitcast(ary.data, cgutils.voidptr_t)
        d = builder.gep(base, [builder.mul(args[1], row)])
        s = builder.gep(base, [builder.mul(args[2], row)])
        cgutils.raw_memmove(builder, d, s, builder.mul(args[3], row), 1)
        return context.get_dummy_value()
    return sig, codegen


@leaf
def move_rows(Iv, F, S, dst, src, count):  # pragma: no cover - compiled
    """Rows ``src..src + count`` of a side's three arrays moved to ``dst..dst + count`` (the
    ranges may overlap), one ``memmove`` per array.  Why: the row shift of a level that appears
    or goes deep in a book (OKX ``books`` updates reach the 400th level: ~60 rows a change on
    the real capture, Kraken's truncation moves the whole side) cost 71 element copies a row
    through :func:`move_row`; a memmove moves the ~120 bytes a row at memory speed."""
    if count > 0:
        _memmove_rows(Iv, dst, src, count)
        _memmove_rows(F, dst, src, count)
        _memmove_rows(S, dst, src, count)


@leaf
def set_level(Iv, F, S, n, side, pid, fpx, qzero, fqty, t, buf, ps, pl, qs, ql, nord, oi, oc, k):  # pragma: no cover
    """``LevelBook.set`` on one side (``n`` live rows): the level at ``pid`` gets the size string
    ``buf[qs:qs+ql]`` (its float ``fqty``; ``qzero``: it is zero, the level goes) and the price
    string ``buf[ps:ps+pl]``; the engine rows (a delete of the old row, an insert of the new one)
    go to ``oi[k:]`` (rel, sign) and ``oc[k:]`` (t, id, broker, volume, price).  The caller has
    made room (``n < Iv.shape[0]``, two output rows).  Returns ``(n, k, nord)``."""
    r = find(Iv, n, pid, 1 - 2 * side)
    if r >= 0:
        k = put_row(oi, oc, k, side, -1, F[r, 0], float(pid), F[r, 1], F[r, 2])
        if qzero:
            move_rows(Iv, F, S, r, r + 1, n - 1 - r)
            return n - 1, k, nord
    elif qzero:
        return n, k, nord
    else:
        r = -r - 1
        move_rows(Iv, F, S, r + 1, r, n - r)
        Iv[r, 0] = pid
        Iv[r, 1] = nord
        nord += 1
        n += 1
    Iv[r, 2] = pl
    Iv[r, 3] = ql
    w = S.shape[1] // 2
    for j in range(pl):
        S[r, j] = buf[ps + j]
    for j in range(ql):
        S[r, w + j] = buf[qs + j]
    F[r, 0] = t
    F[r, 1] = fqty
    F[r, 2] = fpx
    return n, put_row(oi, oc, k, side, 1, t, float(pid), fqty, fpx), nord


@leaf
def crc32(buf, n):  # pragma: no cover - compiled
    """``zlib.crc32(bytes(buf[:n]))`` (unsigned, as an int64), eight bytes a step (slicing by 8,
    int64 arithmetic: ~0.3 ns a byte where a byte at a time on uint32 scalars cost ~7)."""
    return crc32_update(np.int64(0xFFFFFFFF), buf, 0, n) ^ np.int64(0xFFFFFFFF)


@leaf
def crc32_update(c, buf, i, n):  # pragma: no cover - compiled
    """The CRC-32 register ``c`` (before the final inversion; ``0xFFFFFFFF`` to start) after
    the bytes ``buf[i:n]``: ``crc32_update(crc32_update(0xFFFFFFFF, b, 0, m), b, m, n) ^
    0xFFFFFFFF == zlib.crc32(b[:n])``, so a text's CRC can resume after a prefix it shares with
    an earlier text.  Slicing by 8 as :func:`crc32`."""
    T = _CRC8
    while i + 8 <= n:
        one = c ^ (np.int64(buf[i]) | (np.int64(buf[i + 1]) << 8) | (np.int64(buf[i + 2]) << 16)
                   | (np.int64(buf[i + 3]) << 24))
        c = (T[7, one & 0xFF] ^ T[6, (one >> 8) & 0xFF] ^ T[5, (one >> 16) & 0xFF] ^ T[4, (one >> 24) & 0xFF]
             ^ T[3, np.int64(buf[i + 4])] ^ T[2, np.int64(buf[i + 5])] ^ T[1, np.int64(buf[i + 6])]
             ^ T[0, np.int64(buf[i + 7])])
        i += 8
    while i < n:
        c = T[0, (c ^ np.int64(buf[i])) & 0xFF] ^ (c >> 8)
        i += 1
    return c


@leaf
def kraken_crc_text(Sb, Ib, nb, Sa, Ia, na, depth, out):  # pragma: no cover - compiled
    """Kraken's checksum text into ``out`` (returns its length): the ``depth`` best asks then the
    ``depth`` best bids, each price string then size string without its ``.`` and leading zeros
    (``s.replace(".", "").lstrip("0")``).  What :func:`top_crc_text` gives in Kraken's mode,
    with the strip done per string (a plain decimal has one ``.`` at most, the leading zeros
    skipped first).  O(bytes)."""
    k = 0
    for side in range(2):
        S, Iv, n = (Sa, Ia, na) if side == 0 else (Sb, Ib, nb)
        for i in range(min(depth, n)):
            k = kraken_level_text(S, Iv, n - 1 - i, out, k)
    return k


@leaf
def kraken_level_text(S, Iv, r, out, k):  # pragma: no cover - compiled
    """Row ``r``'s part of Kraken's checksum text (its price then size string, each without its
    ``.`` and leading zeros) written at ``out[k:]``; returns the end.  O(bytes)."""
    w = S.shape[1] // 2
    for part in range(2):
        off = part * w
        end = off + Iv[r, 2 + part]
        j = off
        while j < end and (S[r, j] == 48 or S[r, j] == 46):
            j += 1
        while j < end:
            c = S[r, j]
            if c != 46:
                out[k] = c
                k += 1
            j += 1
    return k


@leaf
def top_crc_text(Sb, Ib, nb, Sa, Ia, na, depth, sep, strip, out):  # pragma: no cover - compiled
    """The checksum text of the ``depth`` best levels of each side into ``out``; returns its
    length.  OKX (``strip`` False, ``sep`` ``:``): ``bid1px:bid1sz:ask1px:ask1sz:...``, the two
    sides interleaved (a shorter side contributes what it has).  Kraken (``strip`` True, ``sep``
    -1): the asks then the bids, each string without its ``.`` and leading zeros."""
    w = Sb.shape[1] // 2
    k = 0
    first = True
    for x in range(2 * depth):
        if strip:                 # Kraken: the asks, then the bids
            side, i = (1, x) if x < depth else (0, x - depth)
        else:                     # OKX: bid i, ask i, bid i + 1, ...
            side, i = x % 2, x // 2
        if side == 0:
            if i >= nb:
                continue
            r = nb - 1 - i
            S, Iv = Sb, Ib
        else:
            if i >= na:
                continue
            r = na - 1 - i
            S, Iv = Sa, Ia
        for part in range(2):
            if sep >= 0:
                if not first:
                    out[k] = sep
                    k += 1
                first = False
            off = part * w
            ln = Iv[r, 2 + part]
            lead = strip
            for j in range(ln):
                c = S[r, off + j]
                if strip and c == 46:
                    continue
                if lead and c == 48:
                    continue
                lead = False
                out[k] = c
                k += 1
    return k


@njit(cache=True, nogil=True)
def emit_side(Iv, F, n, side, sign, mul, oi, oc, k):  # pragma: no cover - compiled
    """Rows of every level of a side in insertion order (a ``LevelBook`` dict's order), with
    ``sign``; ``mul`` (1, or a power of ten: a re-base) multiplies each level's id after its row
    is written, and a second row with the new id (sign +1) follows when ``mul > 1``.  Returns
    ``k``.  O(n log n)."""
    order = np.argsort(Iv[:n, 1], kind="mergesort")
    for j in range(n):
        r = order[j]
        k = put_row(oi, oc, k, side, sign, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
        if mul > 1:
            Iv[r, 0] *= mul
            k = put_row(oi, oc, k, side, 1, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
    return k


@njit(cache=True, nogil=True)
def load_side(Iv, F, S, side, Io, Fo, no, ch, chv, c0, c1, scale, t, own_t, buf, nord, oi, oc,
              k):  # pragma: no cover - compiled
    """A snapshot side into an EMPTY side: ``LevelBook.set`` of the entries ``c0..c1`` of ``ch``
    (``ch[c] = (side (+2 when the size is zero), ps, pe, qs, qe, m, d)``: the price is ``m /
    10**d``, as :func:`read_changes` leaves it; ``chv[c] = (price, size)`` floats; ``own_t``:
    each entry's time in ``chv[c, 2]``, Kraken's, else every level gets ``t``), in order, rows
    and all, in O(m log m) instead of a sorted insert each (a snapshot arrives best first: the
    far end of the arrays).  A price finer than the book's ``scale`` re-bases the book as
    ``LevelBook._rebase`` does: every level held, bids then asks, each side in insertion order,
    re-emitted at the finer scale -- this side's rows loaded so far and the other side's ``no``
    rows in ``Io``/``Fo`` (loaded before, sorted).  The caller made room for ``c1 - c0`` rows and
    the output rows.  Returns ``(n, k, nord, scale)``."""
    m = c1 - c0
    final = scale
    for j in range(m):
        final = max(final, ch[c0 + j, 6])
    keys = np.empty(m, np.int64)     # the prices at the final scale: equal prices, equal keys
    for j in range(m):
        keys[j] = ch[c0 + j, 5] * P10I[final - ch[c0 + j, 6]]
    order = np.argsort(keys, kind="mergesort")
    grp = np.empty(m, np.int64)      # entry -> its first entry of the same price
    for j in range(m):
        e = order[j]
        if j > 0 and keys[order[j - 1]] == keys[e]:
            grp[e] = grp[order[j - 1]]
        else:
            grp[e] = e
    cur = np.full(m, -1, np.int64)   # first entry of a price -> the row holding that level
    dead = np.zeros(m, np.bool_)
    n = 0
    w = S.shape[1] // 2
    for j in range(m):
        c = c0 + j
        d = ch[c, 6]
        if d > scale:                # LevelBook._rebase: bids, then asks, in insertion order
            mul = P10I[d - scale]
            if side == 1:
                k = emit_side(Io, Fo, no, 0, -1, mul, oi, oc, k)
            for r in range(n):       # this side's rows are in insertion order
                if not dead[r]:
                    k = put_row(oi, oc, k, side, -1, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
                    Iv[r, 0] *= mul
                    k = put_row(oi, oc, k, side, 1, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
            if side == 0:
                k = emit_side(Io, Fo, no, 1, -1, mul, oi, oc, k)
            scale = d
        g = grp[j]
        r = cur[g]
        qzero = ch[c, 0] >= 2
        if r >= 0:
            k = put_row(oi, oc, k, side, -1, F[r, 0], float(Iv[r, 0]), F[r, 1], F[r, 2])
            if qzero:
                dead[r] = True
                cur[g] = -1
                continue
        elif qzero:
            continue
        else:
            r = n
            n += 1
            cur[g] = r
            Iv[r, 0] = ch[c, 5] * P10I[scale - d]
            Iv[r, 1] = nord
            nord += 1
        tc = chv[c, 2] if own_t else t
        pl, ql = ch[c, 2] - ch[c, 1], ch[c, 4] - ch[c, 3]
        Iv[r, 2] = pl
        Iv[r, 3] = ql
        for x in range(pl):
            S[r, x] = buf[ch[c, 1] + x]
        for x in range(ql):
            S[r, w + x] = buf[ch[c, 3] + x]
        F[r, 0] = tc
        F[r, 1] = chv[c, 1]
        F[r, 2] = chv[c, 0]
        k = put_row(oi, oc, k, side, 1, tc, float(Iv[r, 0]), chv[c, 1], chv[c, 0])
    # the live rows, sorted towards the best
    live = 0
    for r in range(n):
        if not dead[r]:
            live += 1
    srtk = np.empty(live, np.int64)
    rows = np.empty(live, np.int64)
    q = 0
    for r in range(n):
        if not dead[r]:
            srtk[q] = Iv[r, 0] if side == 0 else -Iv[r, 0]
            rows[q] = r
            q += 1
    srt = rows[np.argsort(srtk)]
    I2, F2, S2 = Iv[srt], F[srt], S[srt]
    Iv[:live] = I2
    F[:live] = F2
    S[:live] = S2
    return live, k, nord, scale


@njit(cache=True, nogil=True)
def load_snapshot(LI, LF, LS, s, ch, chv, c0, cmid, c1, scale, t, own_t, buf, nord, oi, oc,
                  k):  # pragma: no cover - compiled
    """A snapshot into the EMPTY book ``s`` (the caller emitted ``LevelBook.clear``'s deletes):
    the entries ``c0..cmid`` of one side, then ``cmid..c1`` of the other (each entry's side is
    ``ch[c, 0] % 2``), by :func:`load_side` -- what ``LevelBook.set`` of each entry in order
    gives, re-bases included.  Shared by the Kraken, OKX and Coinbase lanes.  The caller made
    room (rows of each side, ``2 * (c1 - c0) * (1 + re-bases)`` output rows).  Returns ``(nb, na,
    scale, nord, k)``.  O(m log m) plus O(levels) a re-base."""
    nb = na = 0
    for part in range(2):
        a, b = (c0, cmid) if part == 0 else (cmid, c1)
        if b <= a:
            continue
        side = ch[a, 0] % 2
        o = 1 - side
        no = nb if o == 0 else na
        n, k, nord, scale = load_side(LI[2 * s + side], LF[2 * s + side], LS[2 * s + side], side,
                                      LI[2 * s + o], LF[2 * s + o], no, ch, chv, a, b, scale, t, own_t, buf,
                                      nord, oi, oc, k)
        if side == 0:
            nb = n
        else:
            na = n
    return nb, na, scale, nord, k


@leaf
def string_entries(buf, i, n, ch, chv, c, side, lo, hi, timed):  # pragma: no cover - compiled
    """A level list ``[[s0, s1, ...], ...]`` at ``i``, each entry ``lo..hi`` escape-free strings,
    into ``ch[c:]`` as ``(side, ps, pe, qs, qe)`` (the spans of ``s0``, the price, and ``s1``, the
    size): OKX's ``[px, sz(, s3(, s4))]`` and, ``timed``, Kraken's ``[price, volume, ts(,
    "r")]`` -- ``ts`` (seconds) read exactly into ``chv[c, 2]`` in ms (``float(ts) * 1e3``), a
    fourth string only ``"r"`` (republish).  Returns ``(j, c)``: ``j`` after the list, -1 for
    anything else (the venue's Python path judges it), -2 if ``ch`` is too small.  O(bytes)."""
    if i >= n or buf[i] != 91:
        return -1, c
    i = ws(buf, i + 1, n)
    if i < n and buf[i] == 93:
        return i + 1, c
    while True:
        if c >= ch.shape[0]:
            return -2, c
        if i >= n or buf[i] != 91:
            return -1, c
        i = ws(buf, i + 1, n)
        ch[c, 0] = side
        cnt = 0
        while True:
            a, b, i = string(buf, i, n)
            if i < 0:
                return -1, c
            if cnt < 2:
                ch[c, 1 + 2 * cnt] = a
                ch[c, 2 + 2 * cnt] = b
            elif timed and cnt == 2:
                st, m, d = decimal_of(buf, a, b)
                if st != OK or d > 22:
                    return -1, c
                t = np.float64(m) / P10F[d] * 1e3
                if not (0.0 <= t < 1e16):
                    return -1, c
                chv[c, 2] = t
            elif timed and cnt == 3:
                if b - a != 1 or buf[a] != 114:       # only "r" (republish)
                    return -1, c
            cnt += 1
            i = ws(buf, i, n)
            if i >= n or buf[i] != 44:
                break
            i = ws(buf, i + 1, n)
        if cnt < lo or cnt > hi or i >= n or buf[i] != 93:
            return -1, c
        c += 1
        i = ws(buf, i + 1, n)
        if i < n and buf[i] == 44:
            i = ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 93:
            return i + 1, c
        return -1, c


@leaf
def read_changes(buf, ch, chv, nch, scale):  # pragma: no cover - compiled
    """Read the ``nch`` level changes of one message (``ch[c] = (side, ps, pe, qs, qe, ., .)``:
    the spans of the price and size strings in ``buf``) exactly: ``ch[c, 5:7]`` = the price's
    mantissa and decimals, ``chv[c]`` = (price, size) floats, side + 2 where the size is zero (the
    level goes).  Returns ``(ok, final, steps, need_b, need_a)``: the scale the book ends at (a
    finer price re-bases it, ``steps`` times) and the changes per side; ``ok`` False when a value
    is not a plain decimal, is longer than :data:`W` bytes or would not fit an id below 2**53 at
    the final scale (the venue's Python path then takes the message).  Shared by the Coinbase and
    OKX lanes.  Cost: O(nch)."""
    final = scale
    steps = 0
    need_b = need_a = 0
    for c in range(nch):
        st1, m1, d1 = decimal_of(buf, ch[c, 1], ch[c, 2])
        st2, m2, d2 = decimal_of(buf, ch[c, 3], ch[c, 4])
        if st1 != OK or st2 != OK or ch[c, 2] - ch[c, 1] > W or ch[c, 4] - ch[c, 3] > W:
            return False, final, steps, need_b, need_a
        if d1 > final:
            final = d1
            steps += 1
        ch[c, 5] = m1
        ch[c, 6] = d1
        chv[c, 0] = np.float64(m1) / P10F[d1]
        chv[c, 1] = np.float64(m2) / P10F[d2]
        if m2 == 0:
            ch[c, 0] += 2
        if ch[c, 0] % 2 == 0:
            need_b += 1
        else:
            need_a += 1
    for c in range(nch):
        if ch[c, 5] > (MAX_ID - 1) // P10I[final - ch[c, 6]]:
            return False, final, steps, need_b, need_a
    return True, final, steps, need_b, need_a


@leaf
def set_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, c0, nch, nb, na, scale, t, own_t, buf, nord, oi, oc,
                k):  # pragma: no cover - compiled
    """:func:`apply_changes` when no change is finer than the book's scale (:func:`read_changes`
    returned ``final`` equal to it: no re-base), as a :data:`~ddms.io.kernels.jsonscan.leaf`.
    Why: ``apply_changes`` may re-base, which allocates, so it is compiled with reference
    counting, and numba left an atomic incref and decref of each of its 11 array arguments in
    every call (22 atomic operations a message, called once per update by the Kraken, OKX and
    Coinbase lanes); this one borrows them.  Returns ``(nb, na, nord, k)``.  Cost: a binary
    search a change plus a row shift when a level appears or goes."""
    for c in range(c0, nch):
        tc = chv[c, 2] if own_t else t
        pid = ch[c, 5] * P10I[scale - ch[c, 6]]
        if ch[c, 0] % 2 == 0:
            nb, k, nord = set_level(Ib, Fb, Sb, nb, 0, pid, chv[c, 0], ch[c, 0] >= 2, chv[c, 1], tc, buf, ch[c, 1],
                                    ch[c, 2] - ch[c, 1], ch[c, 3], ch[c, 4] - ch[c, 3], nord, oi, oc, k)
        else:
            na, k, nord = set_level(Ia, Fa, Sa, na, 1, pid, chv[c, 0], ch[c, 0] >= 2, chv[c, 1], tc, buf, ch[c, 1],
                                    ch[c, 2] - ch[c, 1], ch[c, 3], ch[c, 4] - ch[c, 3], nord, oi, oc, k)
    return nb, na, nord, k


@njit(cache=True, nogil=True)
def apply_changes(Ib, Fb, Sb, Ia, Fa, Sa, ch, chv, c0, nch, nb, na, scale, t, own_t, buf, nord, oi, oc,
                  k):  # pragma: no cover - compiled
    """``LevelBook.set`` of changes ``c0..nch`` (read by :func:`read_changes`) on one book (its
    bid side ``Ib``/``Fb``/``Sb`` with ``nb`` live rows, its ask side ``Ia``/``Fa``/``Sa`` with
    ``na``, ids at ``scale``), in order, each row at time ``t`` (``own_t``: the change's own
    time ``chv[c, 2]``, Kraken's); a finer price first re-emits every level at the finer scale
    (``LevelBook._rebase``).  The caller made room for the rows and the output.  Returns ``(nb,
    na, scale, nord, k)``.  Shared by the Kraken, OKX and Coinbase lanes; the side arrays come
    as arrays, not through the typed lists (each list item read is an atomic incref and
    decref).  Cost: a binary search a change, plus a row shift when a level appears or goes,
    plus O(levels) a re-base."""
    for c in range(c0, nch):
        side = ch[c, 0] % 2
        d1 = ch[c, 6]
        if d1 > scale:
            mul = P10I[d1 - scale]
            k = emit_side(Ib, Fb, nb, 0, -1, mul, oi, oc, k)
            k = emit_side(Ia, Fa, na, 1, -1, mul, oi, oc, k)
            scale = d1
        pid = ch[c, 5] * P10I[scale - d1]
        tc = chv[c, 2] if own_t else t
        if side == 0:
            nb, k, nord = set_level(Ib, Fb, Sb, nb, 0, pid, chv[c, 0], ch[c, 0] >= 2, chv[c, 1], tc, buf, ch[c, 1],
                                    ch[c, 2] - ch[c, 1], ch[c, 3], ch[c, 4] - ch[c, 3], nord, oi, oc, k)
        else:
            na, k, nord = set_level(Ia, Fa, Sa, na, 1, pid, chv[c, 0], ch[c, 0] >= 2, chv[c, 1], tc, buf, ch[c, 1],
                                    ch[c, 2] - ch[c, 1], ch[c, 3], ch[c, 4] - ch[c, 3], nord, oi, oc, k)
    return nb, na, scale, nord, k
