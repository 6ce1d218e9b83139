"""Received-message lines of a capture, found in a whole buffer of lines (numba, no allocation).

Why: a cryptofeed capture (:mod:`ddms.io.cryptofeed`) is almost all ``<unix seconds>: <raw
message>`` lines; telling them apart, reading their time and cutting out the message in Python
cost a few microseconds a line -- as much as the Binance chunk lane spends applying one.
:func:`scan_received` does it for a block of lines in one call, so the reader hands the lane
message spans of the block's buffer (:class:`~ddms.io.venues.binance_chunk.Spans`) instead of
Python-split lines.

The test is exactly :meth:`CryptofeedParser.feed_into <ddms.io.cryptofeed.CryptofeedParser.feed_into>`'s
fast test: after the trailing CR/LF bytes are stripped, the line is ``head: payload`` where
``head`` (before the first ``": "``) is ``digits[.digits]`` of at most 30 bytes and ``payload``
is not blank.  Times are the correctly rounded double (:func:`~ddms.io.kernels.decimal.parse_number_general`'s
exact path, else :func:`_exact_seconds`: 17-18 digit times, a quarter of the Kraken and
Coinbase captures' and most of OKX's); a time neither can round exactly is marked for Python's
``float``.  Cost: O(bytes of the block).

:func:`scan_recorded` is the same for the other framing, hftbacktest's recorder
(``<recv ns> <json>``, :mod:`ddms.io.capture`): :func:`~ddms.io.capture.split_line`'s test, the
time an integer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ddms.io.kernels.decimal import parse_number_general

__all__ = ["RECV", "RECV_PY", "scan_recorded", "scan_received"]

_I64_MAX = np.int64(2**63 - 1)

RECV, RECV_PY = 1, 2
"""``kind`` codes: a received message with its exact time; one whose time needs Python's
``float`` (the head bytes ``buf[offs[i]:ps[i] - 2]``).  0: any other line."""


@njit(cache=True, nogil=True)
def _blank(c):  # pragma: no cover - compiled
    return c == 32 or 9 <= c <= 13      # bytes.strip()'s whitespace: space, \t \n \v \f \r


@njit(cache=True, nogil=True, inline="always")
def _line_end(buf, s, e):  # pragma: no cover - compiled
    """The end of line ``buf[s:e]`` without its trailing CR/LF bytes."""
    while e > s and (buf[e - 1] == 10 or buf[e - 1] == 13):
        e -= 1
    return e


@njit(cache=True, nogil=True, inline="always")
def _any_text(buf, a, e):  # pragma: no cover - compiled
    """Whether ``buf[a:e]`` holds a byte that is not whitespace (a payload, not a blank one)."""
    for q in range(a, e):
        if not _blank(buf[q]):
            return True
    return False


@njit(cache=True, nogil=True)
def _exact_seconds(buf, s, e):  # pragma: no cover - compiled
    """``float(bytes(buf[s:e]))`` of ``digits[.digits]`` (``e`` after the last digit) correctly
    rounded (ties to even), or ``(False, 0.0)`` when this path cannot say: an integer part of 0 or
    of 2**53 and more, more than 18 integer or fraction digits after leading / trailing zeros.
    Why: :func:`parse_number_general`'s exact path stops at 2**53 significant units (~16
    digits), and Python's ``float`` for the rest cost ~6% of reading a Kraken capture.  How:
    the value is ``I + F / 10**k``; the 53 bits of the double are ``I``'s bits followed by the
    binary fraction of ``F / 10**k``, made by exact long division (``F < 10**k <= 10**18``, so
    ``2F`` fits in int64), and the remainder rounds the last bit.  Cost: O(digits + 53)."""
    j = s
    while j < e and buf[j] == 48:
        j += 1
    ip = np.int64(0)
    nd = 0
    while j < e and buf[j] != 46:
        nd += 1
        if nd > 18:
            return False, 0.0
        ip = ip * 10 + (np.int64(buf[j]) - 48)
        j += 1
    if ip == 0 or ip >= np.int64(1) << 53:
        return False, 0.0
    f = np.int64(0)
    den = np.int64(1)
    if j < e:           # the fraction, its trailing zeros dropped
        z = e
        while z > j + 1 and buf[z - 1] == 48:
            z -= 1
        if z - (j + 1) > 18:
            return False, 0.0
        for q in range(j + 1, z):
            f = f * 10 + (np.int64(buf[q]) - 48)
            den *= 10
    bits = 0
    t = ip
    while t > 0:
        bits += 1
        t >>= 1
    q = ip
    for _ in range(53 - bits):      # the fraction's bits after the integer's: 53 bits in all
        f <<= 1
        q <<= 1
        if f >= den:
            q |= 1
            f -= den
    twice = 2 * f
    if twice > den or (twice == den and (q & 1) == 1):
        q += 1                      # 2**53 at most: still exact
    return True, np.float64(q) / np.float64(np.int64(1) << (53 - bits))


@njit(cache=True, nogil=True)
def scan_received(buf, offs, kind, ps, pe, ts):  # pragma: no cover - compiled
    """Per line ``i`` (``buf[offs[i]:offs[i + 1]]``): ``kind[i]`` (see :data:`RECV`), and for a
    received message its payload ``buf[ps[i]:pe[i]]`` (trailing CR/LF stripped) and time
    ``ts[i]`` (unix seconds; 0.0 when ``kind`` is not :data:`RECV`).  Returns the number of
    lines that are not :data:`RECV`."""
    n = offs.shape[0] - 1
    other = 0
    for i in range(n):
        s = offs[i]
        e = offs[i + 1]
        kind[i] = 0
        ts[i] = 0.0
        e = _line_end(buf, s, e)
        j = s
        while j < e and 48 <= buf[j] <= 57:
            j += 1
        ok = j > s
        if ok and j < e and buf[j] == 46:
            j += 1
            while j < e and 48 <= buf[j] <= 57:
                j += 1
        # the first ": " ends the head: right after digits[.digits] (no ": " can come before)
        ok = ok and j - s <= 30 and j + 1 < e and buf[j] == 58 and buf[j + 1] == 32 and _any_text(buf, j + 2, e)
        if not ok:
            other += 1
            continue
        ps[i] = j + 2
        pe[i] = e
        v, end, st = parse_number_general(buf, s, j)
        if st == 0 and end == j:
            kind[i] = RECV
            ts[i] = v
            continue
        exact, v = _exact_seconds(buf, s, j)
        if exact:
            kind[i] = RECV
            ts[i] = v
        else:
            kind[i] = RECV_PY
            other += 1
    return other


@njit(cache=True, nogil=True)
def scan_recorded(buf, offs, kind, ps, pe, ts):  # pragma: no cover - compiled
    """:func:`scan_received` for recorder lines ``<recv_ts_ns> <payload>``: per line ``i``
    ``kind[i]`` is :data:`RECV` when, after the trailing CR/LF bytes are stripped, the bytes
    before the first space are ASCII digits of an int64 (1 or more; a larger time is 0:
    Python's ``int`` reads it) and the payload after it is not blank -- exactly the
    lines :func:`~ddms.io.capture.split_line` accepts, but for such long times; then the
    payload is ``buf[ps[i]:pe[i]]`` and ``ts[i]`` its time (int64 ns).  Any other line (blank,
    bad) is 0.  Returns the number of 0 lines.  O(bytes)."""
    n = offs.shape[0] - 1
    other = 0
    for i in range(n):
        s = offs[i]
        e = offs[i + 1]
        kind[i] = 0
        ts[i] = 0
        e = _line_end(buf, s, e)
        j = s
        v = np.int64(0)
        big = False
        while j < e and 48 <= buf[j] <= 57:
            d = np.int64(buf[j]) - 48
            if v > (_I64_MAX - d) // 10:
                big = True          # past int64: Python's int reads it
                break
            v = v * 10 + d
            j += 1
        ok = not big and j > s and j < e and buf[j] == 32 and _any_text(buf, j + 1, e)
        if not ok:
            other += 1
            continue
        kind[i] = RECV
        ps[i] = j + 1
        pe[i] = e
        ts[i] = v
    return other
