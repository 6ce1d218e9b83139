"""JSON scanning primitives of the venues' chunk kernels: whitespace, strings, keys, scalars and
whole values over a ``uint8`` buffer, in JSON's strict grammar, with ``-1`` for anything a fast
path must leave to Python's ``json`` (escapes, bytes outside printable ASCII, malformed input).

Why one module: the Binance, Kraken, OKX and Coinbase lanes scan the same grammar; each helper
here is called several times a value, so it is a :data:`leaf`: compiled without numba's
reference counting (``_nrt=False``).  numba increfs a function's array arguments on entry and
decrefs them on exit; its pruning pass removes the pair only when the exits are simple, and in
about half of these helpers they were not (a loop left by ``break``, returns merged by LLVM):
each call then paid two atomic operations, ~30 ns, which was 30% of the Coinbase lane's time.
A leaf borrows its arguments (the caller holds them) and allocates nothing: numba refuses to
compile an allocation in it, so the flag cannot hide a leak.

Cost: O(bytes scanned), no allocation.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["eq", "key", "leaf", "member", "name_index", "skip_json", "skip_scalar", "str_end", "string", "ws"]

leaf = njit(cache=True, nogil=True, _nrt=False)
"""The decorator of a hot helper that allocates nothing (see the module docstring)."""


@leaf
def ws(buf, i, n):  # pragma: no cover - compiled
    """Index of the first byte at or after ``i`` that is not JSON whitespace (``n`` if none).
    Written with the ``return`` inside the loop: the same loop left by ``break`` compiled to
    ~30 ns a call where this costs ~1 (the kernels call it several times a value)."""
    while i < n:
        c = buf[i]
        if c != 32 and c != 9 and c != 10 and c != 13:
            return i
        i += 1
    return i


@leaf
def str_end(buf, i, n):  # pragma: no cover - compiled
    """Index of the closing quote of a string whose content starts at ``i``; -1 if it has an
    escape, a control character or no end (the slow path decides those)."""
    while i < n:
        c = buf[i]
        if c == 34:
            return i
        if c == 92 or c < 32:
            return -1
        i += 1
    return -1


@leaf
def key(buf, i, n):  # pragma: no cover - compiled
    """A member key at ``i`` (``"key"`` ws ``:`` ws): ``(ks, ke, j)`` with ``j`` at the value,
    ``j = -1`` if malformed or escaped."""
    if i >= n or buf[i] != 34:
        return 0, 0, -1
    e = str_end(buf, i + 1, n)
    if e < 0:
        return 0, 0, -1
    j = ws(buf, e + 1, n)
    if j >= n or buf[j] != 58:
        return 0, 0, -1
    return i + 1, e, ws(buf, j + 1, n)


@leaf
def string(buf, i, n):  # pragma: no cover - compiled
    """A string value at ``i``: ``(a, b, j)`` its content span and the index after it, ``j = -1``
    if it is not a printable-ASCII string without escapes (anything else, invalid UTF-8
    included, is the Python path's to judge)."""
    if i >= n or buf[i] != 34:
        return 0, 0, -1
    for e in range(i + 1, n):
        c = buf[e]
        if c == 34:
            return i + 1, e, e + 1
        if c == 92 or c < 32 or c > 126:
            return 0, 0, -1
    return 0, 0, -1


@leaf
def eq(buf, a, b, word):  # pragma: no cover - compiled
    if b - a != word.shape[0]:
        return False
    for j in range(b - a):
        if buf[a + j] != word[j]:
            return False
    return True


@leaf
def member(buf, i, n):  # pragma: no cover - compiled
    """A member's key at ``i`` as :func:`string` reads it (printable ASCII, no escapes), then
    ``:``: ``(ks, ke, j)`` with ``j`` at the value (whitespace skipped), ``j = -1`` otherwise --
    the strict counterpart of :func:`key`."""
    a, b, i = string(buf, i, n)
    if i < 0:
        return 0, 0, -1
    i = ws(buf, i, n)
    if i >= n or buf[i] != 58:
        return 0, 0, -1
    return a, b, ws(buf, i + 1, n)


@leaf
def name_index(buf, s, e, tab, lens):  # pragma: no cover - compiled
    """The row of ``tab`` (names padded into rows, ``lens`` their lengths) equal to the bytes
    ``buf[s:e]``, -1 if none: the JSON key and name lookups of the venues' chunk kernels.
    Cost: O(rows * length), tables of a few short names."""
    ln = e - s
    for k in range(tab.shape[0]):
        if lens[k] == ln:
            ok = True
            for j in range(ln):
                if buf[s + j] != tab[k, j]:
                    ok = False
                    break
            if ok:
                return k
    return -1


@leaf
def skip_scalar(buf, i, n):  # pragma: no cover - compiled
    """Index after the JSON scalar at ``i`` -- an ASCII string without escapes, a number in
    JSON's grammar, ``true``/``false``/``null`` -- or -1 (anything else, nested values included:
    the slow path validates those)."""
    if i >= n:
        return -1
    c = buf[i]
    if c == 34:
        j = i + 1
        while j < n:
            d = buf[j]
            if d == 34:
                return j + 1
            if d == 92 or d < 32 or d > 126:
                return -1
            j += 1
        return -1
    if c == 116 or c == 102 or c == 110:
        if c == 116 and i + 4 <= n and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101:
            return i + 4
        if (c == 102 and i + 5 <= n and buf[i + 1] == 97 and buf[i + 2] == 108 and buf[i + 3] == 115
                and buf[i + 4] == 101):
            return i + 5
        if c == 110 and i + 4 <= n and buf[i + 1] == 117 and buf[i + 2] == 108 and buf[i + 3] == 108:
            return i + 4
        return -1
    j = i
    if j < n and buf[j] == 45:
        j += 1
    if j >= n or not (48 <= buf[j] <= 57):
        return -1
    if buf[j] == 48:
        j += 1
    else:
        while j < n and 48 <= buf[j] <= 57:
            j += 1
    if j < n and buf[j] == 46:
        j += 1
        if j >= n or not (48 <= buf[j] <= 57):
            return -1
        while j < n and 48 <= buf[j] <= 57:
            j += 1
    if j < n and (buf[j] == 101 or buf[j] == 69):
        j += 1
        if j < n and (buf[j] == 43 or buf[j] == 45):
            j += 1
        if j >= n or not (48 <= buf[j] <= 57):
            return -1
        while j < n and 48 <= buf[j] <= 57:
            j += 1
    return j


@leaf
def skip_json(buf, i, n):  # pragma: no cover - compiled
    """Index after the JSON value at ``i`` in JSON's strict grammar, -1 for anything else or
    anything the Python path might judge otherwise: strings with escapes or bytes outside
    printable ASCII, numbers longer than 30 bytes (Python refuses integers of more than 4,300
    digits), nesting deeper than 60.  What it accepts, ``json.loads`` reads (the kernels use it
    to pass over messages the Python path would only count).  O(bytes), no allocation."""
    depth = 0
    kinds = np.int64(0)        # bit d: the container at depth d is an object
    i = ws(buf, i, n)
    while True:
        # a value at i
        if i >= n:
            return -1
        c = buf[i]
        if c == 123 or c == 91:
            if depth >= 60:
                return -1
            obj = c == 123
            kinds = (kinds << 1) | (1 if obj else 0)
            depth += 1
            i = ws(buf, i + 1, n)
            if i < n and buf[i] == (125 if obj else 93):
                i += 1
                depth -= 1
                kinds >>= 1
            else:
                if obj:
                    a, b, i = member(buf, i, n)
                    if i < 0:
                        return -1
                continue
        else:
            j = skip_scalar(buf, i, n)
            if j < 0 or (c != 34 and j - i > 30):
                return -1
            i = j
        # after a value
        while True:
            if depth == 0:
                return i
            i = ws(buf, i, n)
            if i >= n:
                return -1
            c = buf[i]
            if c == 44:
                i = ws(buf, i + 1, n)
                if kinds & 1:
                    a, b, i = member(buf, i, n)
                    if i < 0:
                        return -1
                break
            if c == (125 if kinds & 1 else 93):
                i += 1
                depth -= 1
                kinds >>= 1
                continue
            return -1
