"""Python's reads of the program's typed containers, through cached compiled functions.

Why: every method of a ``numba.typed.Dict``/``List`` called from Python (``len``, ``in``,
``get``, iteration, ``clear``) runs a helper that numba compiles on first use in each process,
without a disk cache: reading the views of a grouped SQL program once cost about 2 s of
compilation at every start.  These functions do the same reads with ``cache=True``, so a
program loaded from the cache compiles nothing; numba caches one specialization per key width.

Cost: :func:`dict_get` one hash probe; :func:`dict_dump` and :func:`log_drain` O(entries) with
one copy into numpy arrays.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from numba import njit


@njit(cache=True)
def dict_len(d) -> int:
    """Number of entries."""
    return len(d)


@njit(cache=True)
def dict_get(d, k):
    """``(found, value)`` for key tuple ``k`` (value 0.0 when absent)."""
    if k in d:
        return True, d[k]
    return False, 0.0


@njit(cache=True)
def dict_dump(d, width):
    """Every entry as a ``(len, width)`` key array and a value array, in the dict's order."""
    n = len(d)
    keys = np.empty((n, width))
    vals = np.empty(n)
    i = 0
    for k, v in d.items():
        for j in range(width):
            keys[i, j] = k[j]
        vals[i] = v
        i += 1
    return keys, vals


@njit(cache=True)
def log_drain(keys, olds, width):
    """A write log (key list, old-value list) as arrays, emptied: what grouped callbacks read."""
    n = len(keys)
    out_k = np.empty((n, width))
    out_o = np.empty(n)
    for i in range(n):
        k = keys[i]
        for j in range(width):
            out_k[i, j] = k[j]
        out_o[i] = olds[i]
    keys.clear()
    olds.clear()
    return out_k, out_o
