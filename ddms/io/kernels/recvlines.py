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
exact path); a time that path cannot round exactly is marked for Python's ``float``.
Cost: O(bytes of the block).
"""

from __future__ import annotations

from numba import njit

from ddms.io.kernels.decimal import parse_number_general

__all__ = ["RECV", "RECV_PY", "scan_received"]

RECV, RECV_PY = 1, 2
"""``kind`` codes: a received message with its exact time; one whose time needs Python's
``float`` (the head bytes ``buf[offs[i]:ps[i] - 2]``).  0: any other line."""


@njit(cache=True, nogil=True)
def _blank(c):  # pragma: no cover - compiled
    return c == 32 or 9 <= c <= 13      # bytes.strip()'s whitespace: space, \t \n \v \f \r


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
        while e > s and (buf[e - 1] == 10 or buf[e - 1] == 13):
            e -= 1
        j = s
        while j < e and 48 <= buf[j] <= 57:
            j += 1
        ok = j > s
        if ok and j < e and buf[j] == 46:
            j += 1
            while j < e and 48 <= buf[j] <= 57:
                j += 1
        # the first ": " ends the head: right after digits[.digits] (no ": " can come before)
        ok = ok and j - s <= 30 and j + 1 < e and buf[j] == 58 and buf[j + 1] == 32
        if ok:
            ok = False
            for q in range(j + 2, e):
                if not _blank(buf[q]):
                    ok = True
                    break
        if not ok:
            other += 1
            continue
        ps[i] = j + 2
        pe[i] = e
        v, end, st = parse_number_general(buf, s, j)
        if st == 0 and end == j:
            kind[i] = RECV
            ts[i] = v
        else:
            kind[i] = RECV_PY
            other += 1
    return other
