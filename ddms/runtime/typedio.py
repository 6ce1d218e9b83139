"""Python's reads of the program's typed containers, through cached compiled functions.

Why: every method of a ``numba.typed.Dict``/``List`` called from Python (``len``, ``in``,
``get``, iteration, ``clear``) runs a helper that numba compiles on first use in each process,
without a disk cache: reading the views of a grouped SQL program once cost about 2 s of
compilation at every start.  These functions do the same reads with ``cache=True``, so a
program loaded from the cache compiles nothing; numba caches one specialization per key width.

A map codegen keeps in a ``ddms.storage.hashtab`` table (a plain array; a view's map too, since
stop 41) is read through :class:`HashTable` and :func:`table_get` / :func:`table_dump` /
:func:`table_len`, which take either kind.

Cost: :func:`dict_get` one hash probe; :func:`dict_dump` and :func:`log_drain` O(entries) with
one copy into numpy arrays; a table's dump O(capacity).
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from numba import njit

from ddms.storage.hashtab import ht_slot


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


class HashTable:
    """A map the program keeps in a ``ddms.storage.hashtab`` table (float values): the state's
    field, read anew each time (an insertion that grows the table stores a new array there), and
    the map's value column in its rows (``arity`` keys first; a table of several value columns,
    ``ht_newv``, holds several maps: a key whose value is 0.0 there is absent from this one).
    Holds no data of its own."""

    __slots__ = ("_state", "_field", "arity", "col")

    def __init__(self, state, field: str, arity: int, col: int = 0) -> None:
        self._state, self._field, self.arity, self.col = state, field, arity, arity + col

    def array(self) -> np.ndarray:
        """The table now.  O(1): one compiled field read."""
        return getattr(self._state, self._field)


@njit(cache=True)
def _ht_lookup(tab, k, col):
    s = ht_slot(tab, k)
    if s < 0 or tab[s, col] == 0.0:
        return False, 0.0
    return True, tab[s, col]


def table_get(table, k: tuple) -> tuple[bool, float]:
    """:func:`dict_get` of a typed Dict or a :class:`HashTable`.  One probe."""
    if isinstance(table, HashTable):
        return _ht_lookup(table.array(), k, table.col)
    return dict_get(table, k)


def table_dump(table, width: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`dict_dump` of a typed Dict or a :class:`HashTable` (a table's entries in slot
    order).  O(entries), a table's O(capacity)."""
    if isinstance(table, HashTable):
        tab = table.array()
        rows = np.flatnonzero((tab[:-1, -1] != 0.0) & (tab[:-1, table.col] != 0.0))
        return tab[rows, :width].copy(), tab[rows, table.col].copy()
    return dict_dump(table, width)


def table_len(table) -> int:
    """The number of entries of a typed Dict or a :class:`HashTable`.  O(1) (a table of several
    value columns: O(capacity))."""
    if isinstance(table, HashTable):
        tab = table.array()
        if tab.shape[1] == table.arity + 2:   # one value column: every live row is an entry
            return int(tab[-1, 0])
        return int(np.count_nonzero((tab[:-1, -1] != 0.0) & (tab[:-1, table.col] != 0.0)))
    return dict_len(table)
