"""Exact decimal and integer parsing from a ``uint8`` buffer (numba kernels, no allocation).

Why shared: the order-book CSV and LOBSTER readers parse the same number grammar
``[+-](digits[.digits]|.digits)[(e|E)[+-]digits]`` and must round the same way.  Plain integers
(all of the real data) take a branch-light loop; other decimals the exact Clinger fast path
(<= 18 significant digits, power of ten <= 22); the rare rest return status 2 ("valid, needs
Python's ``float``") so the caller re-parses that one field in Python: every value is the
correctly rounded double.

Status codes: 0 exact value, 1 not a number, 2 valid but needs Python float (``parse_number``),
3 an integer with ``|value| > 2**53`` (``parse_int``).  Cost: O(digits).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["P10", "parse_int", "parse_number", "parse_number_general"]

P10 = np.array([10.0**i for i in range(23)])
"""Exact powers of ten for the Clinger fast path."""


@njit(cache=True, _nrt=False, inline="always")
def parse_number(buf, i, end):  # pragma: no cover - compiled
    """Parse a decimal number at ``buf[i:]``.  Returns ``(value, j, st)`` with ``j`` the first
    byte after it and ``st`` 0 = exact value, 1 = not a number, 2 = valid but needs Python float.

    Callers guarantee a non-digit byte (the line's newline) before ``end``, so the hot loop for
    plain unsigned integers (every field of the real data) runs without bounds checks."""
    s = i
    m = np.int64(0)
    while True:
        d = np.int64(buf[i]) - 48
        if np.uint64(d) > 9:
            break
        m = m * 10 + d
        i += 1
    c = buf[i]
    if 0 < i - s <= 15 and c != 46 and c != 101 and c != 69:
        return float(m), i, 0
    return parse_number_general(buf, s, end)


@njit(cache=True, _nrt=False)
def parse_number_general(buf, i, end):  # pragma: no cover - compiled
    """The full grammar ``[+-](digits[.digits]|.digits)[(e|E)[+-]digits]`` (see ``parse_number``)."""
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    m = np.int64(0)
    nd = 0        # significant digits kept in m (<= 18 keeps m < 2**63)
    ndig = 0      # digits seen in the mantissa
    exp = 0
    inexact = False
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        ndig += 1
        if nd < 18:
            m = m * 10 + d
            if m != 0:
                nd += 1
        else:
            exp += 1
            if d != 0:
                inexact = True
        i += 1
    if i < end and buf[i] == 46:
        i += 1
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            ndig += 1
            if nd < 18:
                m = m * 10 + d
                exp -= 1
                if m != 0:
                    nd += 1
            elif d != 0:
                inexact = True
            i += 1
    if ndig == 0:
        return 0.0, i, 1
    if i < end and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        ne = 0
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            if e < 100000:
                e = e * 10 + d
            ne += 1
            i += 1
        if ne == 0:
            return 0.0, i, 1
        exp += -e if eneg else e
    if m == 0 and not inexact:
        return (-0.0 if neg else 0.0), i, 0
    if inexact or m > 9007199254740992 or exp > 22 or exp < -22:
        return 0.0, i, 2
    v = m * P10[exp] if exp >= 0 else m / P10[-exp]
    return (-v if neg else v), i, 0


@njit(cache=True, _nrt=False, inline="always")
def parse_int(buf, i, end):  # pragma: no cover - compiled
    """Parse ``[+-]digits`` at ``buf[i:]``: ``(value, j, st)``, st 0 ok, 1 not an integer,
    3 an integer with ``|value| > 2**53``."""
    s = i
    v = np.int64(0)
    while True:
        d = np.int64(buf[i]) - 48
        if np.uint64(d) > 9:
            break
        v = v * 10 + d
        i += 1
    if 0 < i - s <= 15:
        return v, i, 0
    i = s
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    v = np.int64(0)
    nd = 0
    big = False
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        nd += 1
        if not big:
            v = v * 10 + d
            if v > 9007199254740992:
                big = True
        i += 1
    if nd == 0:
        return np.int64(0), i, 1
    if big:
        return np.int64(0), i, 3
    return (-v if neg else v), i, 0
