"""A map read only by its largest (or smallest) nonzero key and at single keys: a direct-indexed
*window* for integer keys in a dense range, and a hash table of values plus a lazy binary heap of
keys for the others (the *overflow*), in numba.

Why: the best bid is ``Max(P, COUNT[P])`` over a count of orders per price.  Kept in a counted range
tree (``ddms.storage.btree``), every order event descends the tree and rewrites the sums along its
path (60-180 ns a line), although the maximum only changes when a price level appears or empties
and nothing reads the sums.  Prices are nearly always integers on a tick grid within a band (the
order-book files, LOBSTER, the generated books: integer ticks), so the window holds the value of
key ``base + j`` in cell ``j``: an event is a subtraction, a load and a store; a cell that becomes
nonzero sets the bit of its *block* (64 cells) in a two-level bitmap (a bit a block, 64 blocks a
word; a bit a word above that), and the extreme's cell is kept, so the extreme is read in O(1) and
found again in O(1) when it empties (one word per level, each searched with one instruction, then
the 64 cells of the block found).  A block's bit is cleared lazily (*stale*): only the search for
the next extreme clears the bits of the empty blocks it meets, so an order whose level empties and
refills within a line (a partial execution is a delete and an insert) changes no bit.  Why a bit a
block and not a bit a cell: the bit words are then one per 4,096 cells (8 KiB at 4M cells) and stay
in the nearest caches, while a word per 64 cells (500 KiB at 4M cells) was a second cache line, often
missed, for every cell that becomes nonzero; the price is a scan of at most 64 cells (8
consecutive lines) when an end empties, which is rare (1 bid event in 125k of the bench's stream).
Measured against the table and heap alone (best bid, distinct
prices, ns/line at 1k / 10k / 100k / 1M resting orders, interleaved A/B): 20.6 / 36.4 / 42.4 /
37.4 -> 14.9 / 14.9 / 26.2 / 26.7; the heap's stale keys, its compaction and the table's probes
are gone.

The window spans the live keys twice over (re-centred when a key falls outside: O(cells / 64 +
live keys), amortised over the drift that made it), and exists only while it is dense enough
(``DENSE``, ``W_FREE``, ``W_MAX``: about the memory the table and heap would take); a key it cannot
take -- a fraction, a far outlier while few keys are live, NaN -- goes to the overflow, which is
the earlier structure unchanged: an event that leaves its key's value nonzero on both sides is one
hash probe and one add; a key that becomes nonzero is pushed on the heap (O(1) expected for a key
that is not a new extreme), and a key that becomes zero stays on the heap, *stale*, until it
reaches the top (then popped: O(log n)) or until the stale keys outnumber the live ones ``STALE``
(``STALE_BIG``) times over (then all are removed at once, in sequential passes over the table and
the heap: O(table + heap), amortised O(1) per stale key).  When the window grows over overflow keys
they move into it.  The extreme is the better of the window's and the heap's tops.

Layout (three plain float64 arrays, each one state-field load for a generated program):

* ``tab``: a float-valued ``ddms.storage.hashtab`` table of arity 1, key -> value.  A row exists
  exactly for the keys on the heap, so a stale key's row holds 0.0 (a read there gives the map's
  0.0, as for an absent key);
* ``heap``: ``heap[0]`` the number of keys on the heap, ``heap[1]`` the number of them whose value
  is nonzero, then the heap itself from ``heap[HDR]``: ``sign * key``, a max-heap (``sign`` is 1.0
  for a map read by its maximum, -1.0 by its minimum).  It doubles when full (a new array);
* ``win``: the header (``W_BASE`` the key of cell 0, ``W_CELLS``, ``W_LIVE`` the nonzero cells,
  ``W_TOP`` / ``W_BOT`` the extremes' cells or -1, ``W_LG`` the cell width, the escape table's size),
  the cells as codes of 1 to 32 bits packed in int64 words (a code is the value itself, an integer
  count; its largest value, the *escape*, says the value is in the escape table: a fraction, a
  negative value, a count past the code), the two bit levels, then the escape table (open
  addressing: cell + 1, value).  All int64 words are kept in float64 cells by bit casts.  Why
  codes and not float64 values: a window of 100k distinct prices (356k cells) takes 89 KB in 2-bit
  cells instead of 2.8 MB and stays in L2; the width is the narrowest that leaves few escapes
  (``ESC_SHARE``, ``ESC_MAX``), a small window keeps wide cells (``W_SMALL``).  Regrown or rebuilt
  (a full escape table, a wider width) as a new array.

Keys must not be NaN (:func:`xh_add` raises ValueError, as the range trees do); -0.0 is 0.0.
Cost: :func:`xh_add` O(1) expected (window: O(1); overflow: + O(log n) when the top empties, + the
amortised compaction); :func:`xh_top` O(1); :func:`xh_get` O(1) expected.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ddms.storage.btree import _prefetch
from ddms.storage.hashtab import (
    PF_ROWS,
    _bits,
    _home,
    _same_row,
    ht_fdict,
    ht_getf,
    ht_new,
    ht_pop,
    ht_prefetch,
    ht_set,
    ht_slot,
)

__all__ = ["HDR", "xh_add", "xh_add_also", "xh_big", "xh_check", "xh_dict", "xh_get", "xh_new", "xh_new_heap",
           "xh_new_win", "xh_prefetch", "xh_retire", "xh_retired", "xh_top", "xh_wadd"]

HDR = 2
"""Header cells before the heap: its size and its count of live (nonzero-valued) keys."""
STALE = 4.0
STALE_BIG = 1.0
SLACK = 64
"""Compaction runs once the stale keys number more than ``STALE`` times the live ones plus
``SLACK`` (a small map is not compacted back and forth), ``STALE_BIG`` times once the table has
outgrown the caches (``hashtab.PF_ROWS`` rows).  Why 4 for a small table: at 1k distinct prices the
best bid costs 27 ns a line compacting at 1x, 19 at 4x (a compaction is a pass over the table, and
a small table's passes are what it costs).  Why 1 for a big one: there the stale rows cost table
space, that is cache and memory traffic on every probe (a table holds up to ``1 + STALE`` rows per
live key, at least twice as many slots): at 100k resting orders (distinct prices) the best bid
measured 46-52 ns a line at 1x against 53-57 at 4x, and 48-51 against 52-54 over a 2.5M-line run
at 1M (the table 2M slots instead of 4M), machine loaded."""


@njit(cache=True)
def xh_new() -> np.ndarray:
    """An empty value table (``ddms.storage.hashtab``, one key)."""
    return ht_new(1)


@njit(cache=True)
def xh_new_heap() -> np.ndarray:
    """An empty heap (room for 16 keys)."""
    return np.zeros(HDR + 16)


@njit(cache=True)
def _sift_up(heap, i: int) -> None:
    x = heap[HDR + i]
    while i > 0:
        p = (i - 1) >> 1
        if heap[HDR + p] >= x:
            break
        heap[HDR + i] = heap[HDR + p]
        i = p
    heap[HDR + i] = x


@njit(cache=True)
def _sift_down(heap, i: int, n: int) -> None:
    x = heap[HDR + i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and heap[HDR + c + 1] > heap[HDR + c]:
            c += 1
        if heap[HDR + c] <= x:
            break
        heap[HDR + i] = heap[HDR + c]
        i = c
    heap[HDR + i] = x


@njit(cache=True)
def _push(heap, x: float) -> np.ndarray:
    """Push ``x`` (= sign * key); returns the heap (a new one when it had to grow)."""
    n = int(heap[0])
    if HDR + n >= heap.shape[0]:
        bigger = np.zeros(HDR + 2 * (heap.shape[0] - HDR))
        bigger[:HDR + n] = heap[:HDR + n]
        heap = bigger
    heap[HDR + n] = x
    heap[0] = n + 1
    _sift_up(heap, n)
    return heap


@njit(cache=True)
def _settle(tab, heap, sign: float) -> None:
    """Pop stale keys off the top (and their rows off the table) until the top is live or the heap
    is empty.  O(log n) per key popped."""
    n = int(heap[0])
    while n > 0:
        key = sign * heap[HDR]
        s = ht_slot(tab, (key,))
        if tab[s, 1] != 0.0:
            break
        ht_pop(tab, (key,))
        n -= 1
        heap[HDR] = heap[HDR + n]
        heap[HDR + n] = 0.0
        heap[0] = n
        if n > 0:
            _sift_down(heap, 0, n)


@njit(cache=True)
def _compact(tab, heap, sign: float) -> None:
    """Remove every stale key, from the table and the heap, in place: free the stale rows, move
    each live row that follows a freed one back toward its home slot (the rows of a run are
    re-placed in order from a row that was free, so each probe stays within its run), then refill the heap
    with the live keys and heapify it.  O(table rows + heap size), in sequential passes: no probe
    per heap key (at a million keys each would wait on memory)."""
    cap = tab.shape[0] - 1
    mask = cap - 1
    start = 0
    while tab[start, 2] != 0.0:   # a row free before the pass (one exists: the table is at most
        start += 1                # half full): no run crosses it
    live = 0
    for s in range(cap):
        if tab[s, 2] != 0.0:
            if tab[s, 1] == 0.0:
                tab[s, 0] = 0.0
                tab[s, 2] = 0.0
            else:
                live += 1
    for d in range(1, cap + 1):
        r = (start + d) & mask
        if tab[r, 2] == 0.0:
            continue
        key = tab[r, 0]
        val = tab[r, 1]
        tab[r, 0] = 0.0
        tab[r, 1] = 0.0
        tab[r, 2] = 0.0
        h = _home((key,), mask)
        while tab[h, 2] != 0.0:
            h = (h + 1) & mask
        tab[h, 0] = key
        tab[h, 1] = val
        tab[h, 2] = 1.0
    tab[cap, 0] = live
    j = 0
    for s in range(cap):
        if tab[s, 2] != 0.0:
            heap[HDR + j] = sign * tab[s, 0]
            j += 1
    n = int(heap[0])
    heap[HDR + live:HDR + n] = 0.0
    heap[0] = live
    heap[1] = live
    for i in range(live // 2 - 1, -1, -1):
        _sift_down(heap, i, live)


@njit(cache=True)
def _insert(tab, heap, s: int, key: float, delta: float, sign: float):
    """A key absent from the table becomes ``delta`` (nonzero): a row (at free row ``s``, where
    the probe for ``key`` ended, unless the table must grow first) and a push."""
    if key != key:
        raise ValueError("extreme heap key is NaN")
    if 2 * (tab[-1, 0] + 1) > tab.shape[0] - 1:
        tab = ht_set(tab, (key,), delta)
    else:
        tab[s, 0] = key + 0.0
        tab[s, 1] = delta
        tab[s, 2] = 1.0
        tab[-1, 0] += 1.0
    heap = _push(heap, sign * (key + 0.0))
    heap[1] += 1.0
    return tab, heap


@njit(cache=True)
def _emptied(tab, heap, key: float, sign: float) -> None:
    """``key``'s value just became zero: settle the top if it was the top, compact if the stale
    keys now outnumber the live ones."""
    heap[1] -= 1.0
    if heap[HDR] == sign * key:
        _settle(tab, heap, sign)
    if heap[0] - heap[1] > (STALE if tab.shape[0] <= PF_ROWS else STALE_BIG) * heap[1] + SLACK:
        _compact(tab, heap, sign)


@njit(cache=True, inline="always")
def _oprobe_add(tab: np.ndarray, heap: np.ndarray, key: float, delta: float, sign: float) -> int:
    """Add ``delta`` to the value at ``key`` if the key has a row (live or stale) and return -1;
    else return the free row where its probe ended, where the caller inserts it (unless ``delta``
    is 0.0).  The common case -- a row whose value does not cross zero -- is one probe and one add
    (inlined); a crossing calls out (:func:`_emptied`).  O(1) expected."""
    mask = tab.shape[0] - 2
    s = _home((key,), mask)
    while tab[s, 2] != 0.0 and not _same_row(tab, s, (key,)):
        s = (s + 1) & mask
    if tab[s, 2] == 0.0:
        return s
    old = tab[s, 1]
    new = old + delta
    tab[s, 1] = new
    if old == 0.0:
        if new != 0.0:     # a stale key comes back: it is still on the heap
            heap[1] += 1.0
    elif new == 0.0:
        _emptied(tab, heap, key, sign)
    return -1


@njit(cache=True, inline="always")
def _oadd(tab: np.ndarray, heap: np.ndarray, key: float, delta: float, sign: float):
    """Add ``delta`` to the value at ``key``; returns (table, heap), either of which may be a new,
    bigger array the caller must store in place of its old one: :func:`_oprobe_add`, then an
    insertion at the row where the probe ended (one probe in all).  O(1) expected, amortised (see
    the module docstring)."""
    s = _oprobe_add(tab, heap, key, delta, sign)
    if s < 0 or delta == 0.0:
        return tab, heap
    return _insert(tab, heap, s, key, delta, sign)


# -- the window: integral keys in a bounded range, direct-indexed --------------------------------
@intrinsic
def _from_bits(typingctx, x):
    """The float64 whose IEEE-754 bits are the int64 ``x`` (a bitcast: the window keeps its bit
    words in float64 cells, so that the whole window is one array; nothing does arithmetic on them)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return sig, codegen


@intrinsic
def _clz(typingctx, x):
    """Leading zero bits of a nonzero int64 (LLVM's ctlz: one instruction)."""
    sig = types.int64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 1))
    return sig, codegen


@intrinsic
def _ctz(typingctx, x):
    """Trailing zero bits of a nonzero int64 (LLVM's cttz: one instruction)."""
    sig = types.int64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))
    return sig, codegen


W_BASE, W_CELLS, W_LIVE, W_TOP, W_BOT, W_LG, W_ECAP, W_NESC = 0, 1, 2, 3, 4, 5, 6, 7
WH = 8
"""Window header cells: the key of cell 0, the number of cells, how many hold a nonzero value, the
highest and the lowest live cell (-1 when none: a window keeps both ends, so the two instances of a
map read by its max and its min share one), log2 of a cell's width in bits (0..5: 1..32 bits), the
escape table's capacity (entries, a power of two) and its number of entries; then the cells' codes
packed in int64 words, the two bit levels (a bit per block of 64 cells; a bit per word of those),
the escape table (pairs: cell + 1, value; 0.0 = a free entry)."""
W_MIN = 4096
"""Cells of a first window (a multiple of 4096: each level-1 bit word covers 4096 cells)."""
W_FREE = 1 << 16
DENSE = 16
W_MAX = 1 << 24
"""A window of ``c`` cells is made only if ``c <= max(W_FREE, DENSE * live keys)`` and ``c <= W_MAX``:
its memory (at most 4 bytes a cell plus the escapes, 64 MiB at most) stays within that of a hash table
and heap holding the same keys (which hold up to ``1 + STALE`` rows per live key, at least twice as
many slots, 24 bytes each: about 100 bytes a live key), so a sparse or spread-out key set costs no
more than before.  Keys it cannot take go to the table and heap (the *overflow*)."""
LG_MIN = 0
W_SMALL = 1 << 16
ESC_SHARE = 32
ESC_MAX = 1024
E_MIN = 16
"""Cell width: from the widest (up to 32 bits) at which the cells take at most ``W_SMALL`` bytes
(a small window stays cached whatever its width: no escape is worth it) or ``2 ** LG_MIN`` bits,
the narrowest whose codes hold the values of all but
``1 / ESC_SHARE`` of the live cells and all but ``ESC_MAX`` of them, chosen when the window is made
or rebuilt.  Why: the escapes of a book's few crowded levels cost a probe each, in a table that
stays cached while it is small; a wider cell for every level costs cache misses on every event.
Measured (best bid, distinct prices, same process, 3 rounds, ns/line at 100k / 1M resting orders;
float64 cells 22.3 / 25.2): 2-bit cells (89 KB / 740 KB, ~1% of the cells escaped) 20.0 / 24.8,
4-bit 23.0 / 23.3, 8-bit 22.9 / 22.9.  The escape table holds at least ``E_MIN`` entries and is
at most half full.
Why ``ESC_MAX`` and not the smallest array (stop 40 tried: at 1M distinct prices 2-bit cells and a
256 KB escape table for the 4.3k escapes, 1 MB in all, against 1.48 MB of 4-bit cells): the same
built book, the window re-laid out at each width, timed through the generated ``run_batch`` in one
process (medians of 5-7 alternating runs, CPU time, load 11-14): best bid 29.4 (2-bit) / 30.6
(4-bit) ns/line, spread 43.6 / 37.4 (SUM twin 24.9): the ~5% of events whose count crosses the
widest code (a call out, a probe, an entry made or removed) cost more than the bytes save."""


@njit(cache=True)
def xh_new_win() -> np.ndarray:
    """An empty window (no cells: the first integral key makes one)."""
    w = np.zeros(WH)
    w[W_TOP] = w[W_BOT] = -1.0
    return w


@njit(cache=True, inline="always")
def _levels(win):
    """(offset of the block bit words (level 1: a bit per block of 64 cells), of level 2 (a bit per
    level-1 word), number of level-2 words)."""
    cells = int(win[W_CELLS])
    l1 = WH + (cells >> (6 - int(win[W_LG])))
    l2 = l1 + (cells >> 12)
    return l1, l2, ((cells >> 12) + 63) >> 6


@njit(cache=True, inline="always")
def _wsize(cells: int, lg: int, ecap: int) -> int:
    """Array size of a window of ``cells`` cells of ``2 ** lg`` bits and ``ecap`` escape entries."""
    n1 = cells >> 12
    return WH + (cells >> (6 - lg)) + n1 + ((n1 + 63) >> 6) + 2 * ecap


@njit(cache=True)
def _wnew(base: float, cells: int, lg: int, ecap: int) -> np.ndarray:
    """An empty window of ``cells`` cells (a multiple of 4096) of ``2 ** lg`` bits from key
    ``base``, room for ``ecap`` escape entries (a power of two)."""
    w = np.zeros(_wsize(cells, lg, ecap))
    w[W_BASE] = base
    w[W_CELLS] = cells
    w[W_LG] = lg
    w[W_ECAP] = ecap
    w[W_TOP] = w[W_BOT] = -1.0
    return w


@njit(cache=True, inline="always")
def _slot(win, j: int):
    """(index of the word holding cell ``j``'s code, the code's bit offset in it, the code mask =
    the escape code)."""
    lg = int(win[W_LG])
    p = j << lg
    return WH + (p >> 6), p & 63, (np.int64(1) << (np.int64(1) << lg)) - 1


@njit(cache=True, inline="always")
def _code(win, j: int) -> int:
    """Cell ``j``'s code: 0 for the value 0.0, the mask for an escaped value, else the value."""
    wi, sh, m = _slot(win, j)
    return (_bits(win[wi]) >> sh) & m


@njit(cache=True, inline="always")
def _setcode(win, j: int, c: int) -> None:
    wi, sh, m = _slot(win, j)
    y = _bits(win[wi])
    win[wi] = _from_bits(y ^ ((((y >> sh) & m) ^ c) << sh))


# -- the escape table: the values a cell's code cannot hold (open addressing, linear probes) ------
@njit(cache=True, inline="always")
def _ehome(j: int, cap: int) -> int:
    return ((j * 2654435761) >> 16) & (cap - 1)


@njit(cache=True)
def _efind(win, j: int):
    """(offset of the escape table, entry of cell ``j``, or the free entry where its probe ended)."""
    _, l2, n2 = _levels(win)
    e = l2 + n2
    cap = int(win[W_ECAP])
    kj = j + 1.0
    i = _ehome(j, cap)
    while win[e + 2 * i] != 0.0 and win[e + 2 * i] != kj:
        i = (i + 1) & (cap - 1)
    return e, i


@njit(cache=True)
def _eget(win, j: int) -> float:
    e, i = _efind(win, j)
    return win[e + 2 * i + 1]


@njit(cache=True)
def _eput(win, j: int, v: float) -> None:
    """Escape cell ``j`` with value ``v`` (nonzero), a new entry if it had none (room assumed)."""
    e, i = _efind(win, j)
    if win[e + 2 * i] == 0.0:
        win[e + 2 * i] = j + 1.0
        win[W_NESC] += 1.0
    win[e + 2 * i + 1] = v


@njit(cache=True)
def _edel(win, j: int) -> None:
    """Remove cell ``j``'s entry, moving back the entries after it whose probes crossed it (no
    tombstones).  O(1) expected."""
    e, i = _efind(win, j)
    cap = int(win[W_ECAP])
    win[W_NESC] -= 1.0
    while True:
        win[e + 2 * i] = 0.0
        win[e + 2 * i + 1] = 0.0
        k = i
        while True:
            k = (k + 1) & (cap - 1)
            if win[e + 2 * k] == 0.0:
                return
            h = _ehome(int(win[e + 2 * k]) - 1, cap)
            if (h - i - 1) & (cap - 1) >= (k - i) & (cap - 1):   # its home is not in (i, k]: it moves to i
                break
        win[e + 2 * i] = win[e + 2 * k]
        win[e + 2 * i + 1] = win[e + 2 * k + 1]
        i = k


@njit(cache=True, inline="always")
def _wval(win, j: int) -> float:
    """Cell ``j``'s value."""
    c = _code(win, j)
    wi, sh, m = _slot(win, j)
    if c == m:
        return _eget(win, j)
    return float(c)


@njit(cache=True)
def _need(v: float) -> int:
    """log2 of the narrowest cell width (bits) whose codes hold ``v``; 6 for none (a fraction, a
    negative value, 2 ** 32 - 1 or more: always escaped)."""
    if v > 0.0 and v == np.floor(v):
        for lg in range(6):
            if v < (np.int64(1) << (np.int64(1) << lg)) - 1:
                return lg
    return 6


@njit(cache=True)
def _wput(win, j: int, v: float) -> None:
    """Zero cell ``j`` takes the nonzero value ``v`` (escaped if its code cannot hold it: room
    assumed), its block bit, the live count and the ends with it."""
    wi, sh, m = _slot(win, j)
    if _need(v) <= int(win[W_LG]):
        _setcode(win, j, int(v))
    else:
        _setcode(win, j, m)
        _eput(win, j, v)
    _won(win, j)


@njit(cache=True, inline="always")
def _le_mask(b: int) -> int:
    """Bits 0..b of a word (b in 0..63)."""
    return (np.int64(2) << b) - 1


@njit(cache=True, inline="always")
def _ge_mask(b: int) -> int:
    """Bits b..63 of a word (b in 0..63)."""
    return -(np.int64(1) << b)


@njit(cache=True)
def _ble(win, q: int) -> int:
    """The highest block <= ``q`` (q < cells / 64) whose bit is set, -1 if none: a word per level,
    each one instruction to find its highest bit.  O(1) (+ a scan of the <= 64 level-2 words)."""
    if q < 0:
        return -1
    l1, l2, _ = _levels(win)
    w1 = q >> 6
    y = _bits(win[l1 + w1]) & _le_mask(q & 63)
    if y == 0:
        q2 = w1 - 1
        if q2 < 0:
            return -1
        w2 = q2 >> 6
        z = _bits(win[l2 + w2]) & _le_mask(q2 & 63)
        while z == 0:
            w2 -= 1
            if w2 < 0:
                return -1
            z = _bits(win[l2 + w2])
        w1 = (w2 << 6) + 63 - _clz(z)
        y = _bits(win[l1 + w1])
    return (w1 << 6) + 63 - _clz(y)


@njit(cache=True)
def _bge(win, q: int) -> int:
    """The lowest block >= ``q`` (q >= 0) whose bit is set, -1 if none.  O(1), as :func:`_ble`."""
    cells = int(win[W_CELLS])
    if q >= cells >> 6:
        return -1
    l1, l2, n2 = _levels(win)
    w1 = q >> 6
    y = _bits(win[l1 + w1]) & _ge_mask(q & 63)
    if y == 0:
        q2 = w1 + 1
        if q2 >= cells >> 12:
            return -1
        w2 = q2 >> 6
        z = _bits(win[l2 + w2]) & _ge_mask(q2 & 63)
        while z == 0:
            w2 += 1
            if w2 >= n2:
                return -1
            z = _bits(win[l2 + w2])
        w1 = (w2 << 6) + _ctz(z)
        y = _bits(win[l1 + w1])
    return (w1 << 6) + _ctz(y)


@njit(cache=True)
def _bup(win, l1: int, w1: int) -> None:
    """Level-1 word ``w1`` just got its first bit: mark it in level 2."""
    l2 = l1 + (int(win[W_CELLS]) >> 12)
    win[l2 + (w1 >> 6)] = _from_bits(_bits(win[l2 + (w1 >> 6)]) | (np.int64(1) << (w1 & 63)))


@njit(cache=True, inline="always")
def _won(win, j: int) -> None:
    """Cell ``j``'s value just became nonzero: its block's bit (and level 2's if that bit's word was
    empty), the live count, the ends.  The block bit words (one per 4,096 cells: 8 KiB at 4M cells)
    stay in the nearest caches, so a cell that becomes nonzero costs its own line and no other.
    O(1), inlined but for level 2."""
    l1, _, _ = _levels(win)
    b = j >> 6
    w1 = b >> 6
    y = _bits(win[l1 + w1])
    win[l1 + w1] = _from_bits(y | (np.int64(1) << (b & 63)))
    if y == 0:
        _bup(win, l1, w1)
    win[W_LIVE] += 1.0
    if j > win[W_TOP]:
        win[W_TOP] = j
    if j < win[W_BOT] or win[W_BOT] < 0.0:
        win[W_BOT] = j


@njit(cache=True)
def _bclear(win, b: int) -> None:
    """Clear block ``b``'s bit, and level 2's where its word empties."""
    l1, l2, _ = _levels(win)
    w1 = b >> 6
    y = _bits(win[l1 + w1]) & ~(np.int64(1) << (b & 63))
    win[l1 + w1] = _from_bits(y)
    if y == 0:
        win[l2 + (w1 >> 6)] = _from_bits(_bits(win[l2 + (w1 >> 6)]) & ~(np.int64(1) << (w1 & 63)))


@njit(cache=True)
def _bscan(win, lo: int, hi: int, up: bool) -> int:
    """The first live cell of ``lo..hi`` (within one block) going up from ``lo`` (``up``) or down
    from ``hi``, -1 if none.  O(hi - lo): at most 64 cells, 64 * width bits (one line at 8 bits)."""
    if up:
        for c in range(lo, hi + 1):
            if _code(win, c) != 0:
                return c
    else:
        for c in range(hi, lo - 1, -1):
            if _code(win, c) != 0:
                return c
    return -1


@njit(cache=True)
def _wend_emptied(win, j: int) -> None:
    """End cell ``j`` (the highest or lowest live one) just became zero: the next end, from the
    rest of ``j``'s block, then from the block bits, each block met searched cell by cell; a block
    met with no live cell (*stale*: a block's bit is cleared lazily, here, not when its cells
    empty) has its bit cleared.  No block bit lies beyond the ends' blocks, so when ``j`` was the
    last live cell its block's bit was the only one.  O(64) per block searched, amortised over the
    emptyings that left the stale bits."""
    b = j >> 6
    if win[W_TOP] == j and win[W_BOT] == j:
        _bclear(win, b)
        win[W_TOP] = win[W_BOT] = -1.0
        return
    up = win[W_BOT] == j
    c = _bscan(win, j + 1, (b << 6) + 63, True) if up else _bscan(win, b << 6, j - 1, False)
    while c < 0:      # (a live cell remains beyond: the other end at the farthest)
        _bclear(win, b)
        b = _bge(win, b + 1) if up else _ble(win, b - 1)
        c = _bscan(win, b << 6, (b << 6) + 63, up)
    if up:
        win[W_BOT] = c
    else:
        win[W_TOP] = c


@njit(cache=True, inline="always")
def _wcell(win, key: float) -> int:
    """The cell of ``key`` in the window, -1 if the window cannot hold it (outside its range, or
    not an integer: ``base + j == key`` also refuses a fraction that the subtraction rounded away)."""
    x = key - win[W_BASE]
    if 0.0 <= x < win[W_CELLS]:
        j = int(x)
        if win[W_BASE] + j == key:
            return j
    return -1


@njit(cache=True)
def _rebuild(tab, heap, win, base: float, cells: int, extra: float, sign: float) -> np.ndarray:
    """A window of ``cells`` cells from key ``base`` holding the live cells of ``win`` and every live
    integral key of the overflow in its range (moved out of the overflow, left there as stale rows),
    its cell width chosen for those values and ``extra`` (a value about to be written, 0.0 for
    none; see ``ESC_SHARE``), its escape table at most a quarter full with as many escapes as that
    share allows.  Its array size differs from
    ``win``'s, so that a generated writer sees that it changed.  O(cells / 64 + live keys +
    overflow rows)."""
    live = int(win[W_LIVE])
    js = np.empty(live, np.int64)
    vs = np.empty(live)
    need = np.zeros(7, np.int64)
    n = 0
    l1, _, _ = _levels(win)
    for w1 in range(int(win[W_CELLS]) >> 12):
        y = _bits(win[l1 + w1])
        while y != 0:
            b = (w1 << 6) + _ctz(y)
            y &= y - 1
            for j in range(b << 6, (b << 6) + 64):
                if _code(win, j) != 0:   # (a block's bit may be stale, and most of its cells zero)
                    js[n] = j
                    vs[n] = _wval(win, j)
                    need[_need(vs[n])] += 1
                    n += 1
    total = n
    if extra != 0.0:
        need[_need(extra)] += 1
        total += 1
    if heap[1] > 0.0:
        for s in range(tab.shape[0] - 1):
            if tab[s, 2] != 0.0 and tab[s, 1] != 0.0:
                x = tab[s, 0] - base
                if 0.0 <= x < cells and base + int(x) == tab[s, 0]:
                    need[_need(tab[s, 1])] += 1
                    total += 1
    lg = LG_MIN
    while lg < 5 and (cells << (lg + 1)) <= 8 * W_SMALL:
        lg += 1
    esc = 0
    for k in range(lg + 1, need.shape[0]):   # (a loop, not .sum(): numba's array sum keeps an environment
        esc += need[k]                       # that makes a cached start import numba.np.linalg, ~0.1 s)
    while lg < 5 and (esc * ESC_SHARE > total or esc > ESC_MAX):
        lg += 1
        esc -= need[lg]
    ecap = E_MIN   # (room up to the share that would widen the cells: a rebuild is a pass over the window)
    while ecap < 4 * (max(esc, min(total // ESC_SHARE, ESC_MAX)) + 4):
        ecap *= 2
    if _wsize(cells, lg, ecap) == win.shape[0]:
        ecap *= 2
    out = _wnew(base, cells, lg, ecap)
    shift = int(win[W_BASE] - base)
    for i in range(n):
        _wput(out, js[i] + shift, vs[i])
    _wtake(tab, heap, out, sign, True)
    return out


@njit(cache=True)
def _regrow(tab, heap, win, key: float, delta: float, sign: float):
    """(True, a window holding ``key`` (value ``delta`` about to be written), the live cells of
    ``win`` and the overflow keys in its range: :func:`_rebuild`), or (False, ``win``) when no window
    may (``DENSE``, ``W_MAX``).  It spans the live cells and ``key`` twice over, centred, so a
    drifting key range re-centres it every span / 2 of drift.  O(cells / 64 + live keys + overflow
    rows)."""
    if not (key == np.floor(key) and abs(key) < 2.0 ** 52):
        return False, win
    lo = hi = key
    if win[W_LIVE] > 0.0:
        lo = min(lo, win[W_BASE] + win[W_BOT])
        hi = max(hi, win[W_BASE] + win[W_TOP])
    span = int(hi - lo) + 1
    cells = max(W_MIN, ((2 * span + 4095) >> 12) << 12)
    if cells > W_MAX or cells > max(W_FREE, DENSE * (win[W_LIVE] + heap[1] + 1.0)):
        return False, win
    return True, _rebuild(tab, heap, win, lo - ((cells - span) >> 1), cells, delta, sign)


@njit(cache=True)
def _wtake(tab, heap, win, sign: float, copy: bool) -> None:
    """Overflow keys that ``win`` (just regrown) covers leave the overflow (stale rows there),
    their values written into the window if ``copy`` (the second instance of a map read by both
    extremes finds them written by the first; :func:`_rebuild` made room for their escapes).  Two
    passes: the stale marks may compact the table.  O(table rows)."""
    if heap[1] == 0.0:
        return
    moved = np.empty(int(heap[1]))
    n = 0
    for s in range(tab.shape[0] - 1):
        if tab[s, 2] != 0.0 and tab[s, 1] != 0.0:
            j = _wcell(win, tab[s, 0])
            if j >= 0:
                if copy:
                    _wput(win, j, tab[s, 1])
                moved[n] = tab[s, 0]
                n += 1
    for i in range(n):
        tab[ht_slot(tab, (moved[i],)), 1] = 0.0
        _emptied(tab, heap, moved[i], sign)


@njit(cache=True)
def _slow(tab, heap, win, s: int, key: float, delta: float, sign: float):
    """:func:`xh_add` of a key outside the window with no row in the table (``s``: the free row
    where its probe ended): into a window regrown to hold it, else a new row of the overflow."""
    ok, grown = _regrow(tab, heap, win, key, delta, sign)
    if ok:
        _wput(grown, _wcell(grown, key), delta)
        return tab, heap, grown
    tab, heap = _insert(tab, heap, s, key, delta, sign)
    return tab, heap, win


@njit(cache=True)
def _esc_add(win, j: int, delta: float) -> None:
    """Add ``delta`` to escaped cell ``j``: its entry goes when a code holds the new value (0.0
    included: the cell empties), so that the escapes are the cells that need them now and a long
    run does not fill the table with values that left the widest code long ago."""
    e, i = _efind(win, j)
    v = win[e + 2 * i + 1] + delta
    if v != 0.0 and _need(v) > int(win[W_LG]):
        win[e + 2 * i + 1] = v
        return
    _edel(win, j)
    _setcode(win, j, int(v))
    if v != 0.0:
        return
    win[W_LIVE] -= 1.0
    if win[W_TOP] == j or win[W_BOT] == j:
        _wend_emptied(win, j)


@njit(cache=True)
def _esc_new(win, j: int, code: int, new: float) -> int:
    """Cell ``j`` (code ``code``, not escaped) takes the value ``new`` that no code holds: escaped
    (1), or -1, nothing changed, when the escape table is full (:func:`_rebuild` makes room)."""
    if 2.0 * win[W_NESC] + 2.0 > win[W_ECAP]:
        return -1
    wi, sh, m = _slot(win, j)
    _setcode(win, j, m)
    _eput(win, j, new)
    if code == 0:
        _won(win, j)
    return 1


@njit(cache=True)
def _wadd_slow(win, j: int, code: int, delta: float) -> int:
    """:func:`_wadd` of a value no code holds, before or after: 1, or -1 (nothing changed) when
    it needs an escape entry and the escape table is full."""
    wi, sh, m = _slot(win, j)
    if code == m:
        _esc_add(win, j, delta)
        return 1
    new = code + delta
    if _need(new) > int(win[W_LG]):
        return _esc_new(win, j, code, new)
    c = int(new)      # (a fraction added to a fraction: the code holds the sum)
    _setcode(win, j, c)
    if code == 0:
        if c != 0:
            _won(win, j)
    elif c == 0:
        win[W_LIVE] -= 1.0
        if win[W_TOP] == j or win[W_BOT] == j:
            _wend_emptied(win, j)
    return 1


@njit(cache=True, inline="always")
def _wadd(win: np.ndarray, key: float, delta: float) -> int:
    """Add ``delta`` to the value at ``key`` if the window holds the key: 1, done; 0, not a window
    key; -1, its value needs an escape entry and the escape table is full (nothing changed).  The
    common case -- an integral ``delta`` (the generated code's constant 1.0 or -1.0: its tests and
    conversion fold away) and a code holding both values -- is integer arithmetic: a subtraction,
    a load, a shift, an add and a store, plus the cached block bit word and the header when the
    value crosses zero (inlined but for the crossing of an end and for escapes).  Why no float
    arithmetic on the code: each conversion lengthens the chain after the cell's (often missed)
    load, and fewer events' misses then overlap.  O(1)."""
    j = _wcell(win, key)
    if j < 0:
        return 0
    wi, sh, m = _slot(win, j)
    y = _bits(win[wi])
    code = (y >> sh) & m
    if code != m and -1e9 <= delta <= 1e9:
        d = int(delta)
        c = code + d
        if d == delta and 0 <= c < m:
            win[wi] = _from_bits(y ^ ((code ^ c) << sh))
            if code == 0:
                if c != 0:
                    _won(win, j)
            elif c == 0:      # (its block's bit stays, maybe stale, even at an end: see _wend_emptied)
                win[W_LIVE] -= 1.0
                if win[W_TOP] == j or win[W_BOT] == j:
                    _wend_emptied(win, j)
            return 1
    return _wadd_slow(win, j, code, delta)


@njit(cache=True, inline="always")
def xh_wadd(win: np.ndarray, key: float, delta: float) -> bool:
    """Add ``delta`` to the value at ``key`` if the window holds the key and can take the value
    (True), else change nothing (False: :func:`xh_add` then goes to the overflow or makes the
    window room).  The common case of :func:`xh_add`, apart so that a caller can try it first and
    reach the table and heap (and the arrays a growth returns, with their reference counts) only
    when it fails (:func:`_wadd`).  O(1)."""
    return _wadd(win, key, delta) > 0


@njit(cache=True)
def _room(tab, heap, win, key: float, delta: float, sign: float) -> np.ndarray:
    """The window rebuilt over the same keys with room for another escape (wider cells if too
    many values escape), ``delta`` added at ``key`` there."""
    out = _rebuild(tab, heap, win, win[W_BASE], int(win[W_CELLS]), 0.0, sign)
    _wadd(out, key, delta)
    return out


@njit(cache=True, inline="always")
def xh_add(tab: np.ndarray, heap: np.ndarray, win: np.ndarray, key: float, delta: float, sign: float):
    """Add ``delta`` to the value at ``key``; returns (table, heap, window), any of which may be a
    new array the caller must store in place of its old one.  A key in the window (the common case
    on a price grid) is a subtraction, a load, a shift and a store, plus a bit word when its value
    crosses zero (inlined but for the crossing); a key with a row in the table (live or stale) is
    one probe and one add there, as before the window (inlined: a book whose prices are too
    spread out for a window pays one comparison more); a new key calls out (:func:`_slow`).
    O(1) expected, amortised (see the module docstring)."""
    r = _wadd(win, key, delta)
    if r > 0:
        return tab, heap, win
    if r < 0:
        return tab, heap, _room(tab, heap, win, key, delta, sign)
    s = _oprobe_add(tab, heap, key, delta, sign)
    if s < 0 or delta == 0.0:
        return tab, heap, win
    return _slow(tab, heap, win, s, key, delta, sign)


@njit(cache=True)
def _also_slow(tab, heap, win, key: float, delta: float, sign: float, grew: bool):
    if grew:
        _wtake(tab, heap, win, sign, False)
    if _wcell(win, key) >= 0:
        return tab, heap
    return _oadd(tab, heap, key, delta, sign)


@njit(cache=True, inline="always")
def xh_add_also(tab: np.ndarray, heap: np.ndarray, win: np.ndarray, key: float, delta: float, sign: float,
                grew: bool):
    """:func:`xh_add` for the second instance of a map read by both its max and its min: it shares
    the first one's window, which that :func:`xh_add` (called first, with the same key and delta)
    has updated (``grew``: regrown, so keys this instance's overflow holds may have moved into
    it); this one keeps only its own overflow (a heap the other way).  Returns (table, heap).
    O(1) for a window key; as :func:`xh_add` otherwise."""
    if not grew and _wcell(win, key) >= 0:
        return tab, heap
    return _also_slow(tab, heap, win, key, delta, sign, grew)


@njit(cache=True, inline="always")
def xh_get(tab: np.ndarray, win: np.ndarray, key: float) -> float:
    """The value at ``key`` (0.0 if absent or stale).  O(1) expected."""
    j = _wcell(win, key)
    if j >= 0:
        return _wval(win, j)
    return ht_getf(tab, (key,), 0.0)


@njit(cache=True, inline="always")
def xh_top(heap: np.ndarray, win: np.ndarray, sign: float):
    """(found, the largest key if ``sign`` is 1.0 / the smallest if -1.0); (False, NaN) when every
    value is zero.  O(1): the window keeps its extreme's cell, the heap's top is always live."""
    t = win[W_TOP] if sign > 0.0 else win[W_BOT]
    if t >= 0.0:
        k = win[W_BASE] + t
        if heap[0] > 0.0 and heap[HDR] > sign * k:
            return True, sign * heap[HDR]
        return True, k
    if heap[0] > 0.0:
        return True, sign * heap[HDR]
    return False, np.nan


W_PF_BYTES = 1 << 17
"""Windows whose cells take more bytes than this are worth prefetching for (:func:`xh_big`)."""


@njit(cache=True)
def xh_big(tab: np.ndarray, win: np.ndarray) -> bool:
    """Whether the table or the window has outgrown the caches enough for :func:`xh_prefetch`
    to pay.  O(1)."""
    return tab.shape[0] > PF_ROWS or (int(win[W_CELLS]) << int(win[W_LG])) > 8 * W_PF_BYTES


@njit(cache=True, inline="always")
def xh_prefetch(tab: np.ndarray, win: np.ndarray, key: float) -> None:
    """Start loading what an add at ``key`` touches: the word of its window cell (its block's bit
    word, one per 4,096 cells, stays cached), or its home row in the table (a hint to the CPU that
    changes nothing).  The window's range test only, not :func:`_wcell`'s integrality test: a
    fraction inside the range (it goes to the table) loads a line for nothing, a missed hint, and
    every event saves a conversion and a compare.  O(1)."""
    x = key - win[W_BASE]
    if 0.0 <= x < win[W_CELLS]:
        _prefetch(win, (WH + ((int(x) << int(win[W_LG])) >> 6),))
    else:
        ht_prefetch(tab, (key,))


@njit(cache=True, inline="always")
def xh_retire(win: np.ndarray) -> None:
    """Make a window that a regrown one replaced hold no key: every later :func:`xh_wadd` on it
    fails (and :func:`xh_prefetch` loads the table row).  Why: a generated ``run_batch`` hoists the
    windows into locals (``codegen._Codegen._hx_tuple``); the writer that regrows one keeps the old
    array allocated in the state (``xg_M``), retired, so that the stale local sends its adds to the
    state's current window instead of into freed memory.  O(1)."""
    win[W_CELLS] = 0.0


@njit(cache=True, inline="always")
def xh_retired(win: np.ndarray) -> bool:
    """Whether ``win`` (a state's ``xg_M``) holds a window retired by :func:`xh_retire`, bigger than
    an empty one (``run_batch`` then lets it go).  O(1)."""
    return win.shape[0] > WH


def _window_values(win: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """(every cell's code, every cell's value, the escape table as cell -> value), decoded in
    numpy.  O(cells + escape entries)."""
    cells = int(win[W_CELLS])
    if cells == 0:
        return np.zeros(0, np.int64), np.zeros(0), {}
    lg = int(win[W_LG])
    bits = 1 << lg
    l1, l2, n2 = (int(x) for x in _levels(win))
    words = win[WH:l1].view(np.uint64)
    shifts = np.arange(64 // bits, dtype=np.uint64) * np.uint64(bits)
    mask = np.uint64((1 << bits) - 1)
    codes = ((words[:, None] >> shifts[None, :]) & mask).reshape(-1).astype(np.int64)
    esc = win[l2 + n2:].reshape(-1, 2)
    table = {int(k) - 1: float(v) for k, v in esc if k != 0.0}
    vals = codes.astype(np.float64)
    for j, v in table.items():
        if 0 <= j < cells:
            vals[j] = v
    return codes, vals, table


def xh_dict(tab: np.ndarray, win: np.ndarray) -> dict[float, float]:
    """The map as a Python dict key -> value, nonzero values only.  O(table + cells)."""
    out = {k[0]: v for k, v in ht_fdict(tab).items() if v != 0.0}
    _, vals, _ = _window_values(win)
    for j in np.flatnonzero(vals):
        out[float(win[W_BASE] + j)] = float(vals[j])
    return out


def _check_escapes(win: np.ndarray) -> None:
    """Assert that every escape entry is reached by its probe (no free entry between its home and
    it) and that free entries hold nothing.  O(escape table)."""
    ecap = int(win[W_ECAP])
    l1, l2, n2 = (int(x) for x in _levels(win))
    e = l2 + n2
    for s in range(ecap):
        k = win[e + 2 * s]
        if k != 0.0:
            h = int(_ehome(int(k) - 1, ecap))
            while h != s:
                assert win[e + 2 * h] != 0.0, f"escape entry of cell {int(k) - 1} past a free entry"
                h = (h + 1) & (ecap - 1)
        else:
            assert win[e + 2 * s + 1] == 0.0, "a free escape entry holds a value"


def _check_window(win: np.ndarray) -> set[float]:
    """Assert the window's invariants; return its live keys."""
    cells = int(win[W_CELLS])
    assert win[W_CELLS] == cells and cells % 4096 == 0 and 0 <= cells <= W_MAX, f"window of {win[W_CELLS]} cells"
    if cells == 0:
        assert win.shape[0] == WH and win[W_LIVE] == 0.0, "a window of no cells holds data"
        assert win[W_TOP] == win[W_BOT] == -1.0, f"window ends {win[W_BOT]}, {win[W_TOP]} with no cell"
        return set()
    lg, ecap = int(win[W_LG]), int(win[W_ECAP])
    assert win[W_LG] == lg and LG_MIN <= lg <= 5, f"cell width 2 ** {win[W_LG]} bits"
    assert win[W_ECAP] == ecap and ecap >= E_MIN and ecap & (ecap - 1) == 0, f"escape capacity {win[W_ECAP]}"
    n1 = cells >> 12
    n2 = (n1 + 63) >> 6
    assert win.shape[0] == _wsize(cells, lg, ecap), "window array size"
    assert win[W_BASE] == np.floor(win[W_BASE]) and abs(win[W_BASE]) <= 2.0 ** 52 + W_MAX, "window base"
    codes, vals, table = _window_values(win)
    m = (1 << (1 << lg)) - 1
    assert win[W_NESC] == len(table) and 2 * len(table) <= ecap, f"{win[W_NESC]} escapes, {len(table)} entries"
    esc = set(np.flatnonzero(codes == m).tolist())
    assert set(table) == esc, "escaped cells and escape entries differ"
    assert all(v != 0.0 for v in table.values()), "an escape entry holds 0.0"
    _check_escapes(win)
    live = np.flatnonzero(vals)
    assert np.array_equal(np.flatnonzero(codes), live), "a cell's code is zero and its value not, or the reverse"
    assert win[W_LIVE] == len(live), f"live count {win[W_LIVE]}, {len(live)} nonzero cells"
    l1 = WH + (cells >> (6 - lg))
    words = win[l1:].view(np.int64)
    blocks = live >> 6
    want1 = np.zeros(n1, np.uint64)
    np.bitwise_or.at(want1, blocks >> 6, np.left_shift(np.uint64(1), (blocks & 63).astype(np.uint64)))
    got1 = words[:n1].view(np.uint64)
    assert (got1 & want1 == want1).all(), "a nonzero cell's block has no bit"   # (bits of empty blocks: stale)
    nz = np.flatnonzero(words[:n1])
    want2 = np.zeros(n2, np.uint64)
    np.bitwise_or.at(want2, nz >> 6, np.left_shift(np.uint64(1), (nz & 63).astype(np.uint64)))
    assert (words[n1:n1 + n2].view(np.uint64) == want2).all(), "level 2 differs from the words of level 1"
    bits = np.flatnonzero(np.unpackbits(got1.view(np.uint8), bitorder="little"))
    if len(live):
        assert (win[W_BOT], win[W_TOP]) == (live[0], live[-1]), f"window ends {win[W_BOT]}, {win[W_TOP]}"
        assert not ((bits > live[-1] >> 6) | (bits < live[0] >> 6)).any(), "a (stale) block bit beyond an end's block"
    else:
        assert win[W_TOP] == win[W_BOT] == -1.0, f"window ends {win[W_BOT]}, {win[W_TOP]} with no live cell"
        assert not len(bits), "a (stale) block bit with no live cell"
    return {float(win[W_BASE] + j) for j in live}


def xh_check(tab: np.ndarray, heap: np.ndarray, win: np.ndarray, sign: float) -> None:
    """Assert the invariants: the window's (every block holding a nonzero cell has its bit, none
    beyond the ends' blocks does, level 2 marks exactly the nonzero words of level 1,
    its live count and extreme cell are right); the table passes ``ht_check``; the heap holds each
    key of the table exactly once and nothing else; it is a max-heap of ``sign * key``; the live
    count is the number of nonzero values; the top is live; the header is consistent and unused
    cells are zero; no key the window could hold has a nonzero value in the table.
    O(heap + table + cells)."""
    from ddms.storage.hashtab import ht_check
    ht_check(tab)
    assert sign in (1.0, -1.0), f"sign {sign}"
    _check_window(win)
    n = int(heap[0])
    assert heap[0] == n and 0 <= n <= heap.shape[0] - HDR, f"heap size {heap[0]} in {heap.shape[0] - HDR} cells"
    items = heap[HDR:HDR + n]
    assert not heap[HDR + n:].any(), "an unused heap cell holds data"
    for i in range(1, n):
        assert items[(i - 1) // 2] >= items[i], f"heap order broken at {i}"
    values = ht_fdict(tab)
    keys = sorted(k[0] for k in values)
    assert sorted((sign * items + 0.0).tolist()) == keys, "the heap and the table hold different keys"
    live = sum(1 for v in values.values() if v != 0.0)
    assert heap[1] == live, f"live count {heap[1]}, {live} nonzero values"
    for (k,), v in values.items():
        assert v == 0.0 or _wcell(win, k) < 0, f"key {k} is live in the table and inside the window"
    if n:
        assert values[(sign * items[0] + 0.0,)] != 0.0, "the top of the heap is stale"
        want = max(k for k, v in values.items() if v != 0.0)[0] if sign > 0 else \
            min(k for k, v in values.items() if v != 0.0)[0]
        assert sign * items[0] == want, "the top is not the extreme"
    assert heap[0] - heap[1] <= STALE * heap[1] + SLACK, "stale keys outnumber the live ones past the slack"
