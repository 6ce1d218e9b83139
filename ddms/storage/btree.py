"""Range-cumulative ordered maps as counted B+-trees in one numba node pool.

Built for cache efficiency: a balanced binary tree (our first version was a treap) visits
~2.5 log2(n) nodes scattered over memory per operation, a B+-tree ~log_F(n) nodes of a few adjacent
cache lines each (at 1M keys: ~1.6 us per order-book event instead of ~17 us).

Node sizes (``FL``/``FI``) were chosen by measurement: every update scans and re-sums whole
rows, so a row costs in proportion to its width even when the book is small.  Leaves of 32 keys
and internal nodes of 16 children (512 and 384 bytes) made SOBI on a ~60-level synthetic book
1.4-1.5x faster than 64/32, and per-event cost at 1M distinct prices lower too (one more level,
but each row half as long): ``python -m bench --only depth`` and the README's table.

Editing this file: numba caches every caller together with a copy of its callees' machine
code, so njit code in *other* files that called into this one would keep stale copies; the
range sums and the threshold search generated programs use therefore live here, and generated
programs are named by a hash of this file.

An ordered map sends a float64 key to a nonzero float64 value and answers point lookups and
*range-cumulative* queries: the sum of the values whose key is below / above a bound, and the
smallest key at which the running (prefix) sum crosses a threshold.  Like DBToaster maps, a map
holds only nonzero values: an update that leaves exactly 0.0 removes the key.  Keys must not be NaN
(updates raise ValueError); values should be finite.  Query bounds may be NaN: they match no key.

Structure
---------
Leaves hold up to ``FL`` (key, value) pairs in increasing key order; internal nodes hold up to
``FI`` entries, one per child, in key order: the child's largest key, the sum of its values, its
number of keys and its number of negative values, and the child itself.  All leaves lie at the same
depth.  Every node but the root is at least a quarter full (``LMIN`` / ``IMIN`` entries); an
internal root has at least two children.  A node that falls below that after a deletion takes
entries from a neighbour, or merges with it if the two fit in three quarters of a node, so that a
node just split (half full) or just merged (at most 3/4 full) is not split or merged again by the
next few updates at the same place.

Every node is one row of a 2-D array, entries interleaved so that the lines a search reads also
hold what the search needs next:

    leaf      ``lf[l]`` = key, value, key, value, ...                 (2 FL float64)
    internal  ``ik[i]`` = max key, sum, child, max key, sum, child, ... (3 FI float64; the child
                          ref is stored as a float, exact below 2**53)
              ``ii[i]`` = counts[FI] | negative counts[FI]            (2 FI int64, read only by
                          insertions, deletions and sign changes)

A node search compares the bound with every key of the row (a fixed-length loop, no unpredictable
branches); that touches all the row's cache lines at once, so a node costs about one memory
latency.  Unused slots are padded (keys +inf, values and sums 0.0, children -1), so sums and
searches run over whole rows.  Fill counts live beside the rows (``ln``, ``in_``), -1 marking a
free node.

A *ref* names a node: ``2 * leaf`` or ``2 * internal + 1``.  A map is its root ref, -1 for the
empty map; every update returns the new root.  Nodes of *all* maps live in one :class:`BTreePool`
(a numba structref), whose arrays double when full; freed nodes go on per-kind free lists (linked
through ``llink`` / ``ilink``) and are reused first, so deleting every key leaks nothing.  The root
of each tree also keeps the tree's totals (``lsum``/``lneg`` for a leaf root, ``isum``/``icnt``/
``ineg`` for an internal one), so :func:`btree_total`, :func:`btree_len` and
:func:`btree_negatives` are O(1).

Sums and exactness
------------------
Sums are never adjusted by deltas: a parent's sum entry for a child is recomputed from the child's
entries (:func:`_rowsum`, a fixed-order four-lane sum over the padded row) whenever the child
changes, so floating-point error does not accumulate over a stream of updates, and the stored sums
are a deterministic function of the tree's shape and values (:func:`btree_check` verifies them
bitwise).  Counts are integers, kept exact by deltas.

Prefix sums P(b) = sum(value[k] for k <= b) are formed, by :func:`btree_sum_lt` /
:func:`btree_sum_le` and by :func:`btree_first_prefix` alike, along one root-to-leaf path: at each
internal node the sum entries of the children lying wholly at or below b are added left to right,
then the descent enters the child holding the next key above b; at the leaf the values of keys
<= b are added left to right.  So :func:`btree_first_prefix` returns a key b such that
``btree_sum_le(b)`` is bitwise the value it found to cross the threshold, and ``btree_sum_le`` of
the key before b bitwise a value it found not to cross.
:func:`btree_sum_gt` / :func:`btree_sum_ge` promise no order (they use masked vectorisable sums);
with values whose sums are exact (integers, dyadic fractions) every query is exact.

All ``btree_*`` functions except :func:`btree_check` are ``@njit(cache=True)``, callable from
Python and from compiled (generated) code alike.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from numba import njit, types
from numba.experimental import structref

FL = 32  # leaf capacity (keys); a multiple of 4, at least 8 (see the module docstring)
FI = 16  # internal node capacity (children); a multiple of 4, at least 8
LMIN = FL // 4  # fewest keys in a non-root leaf
IMIN = FI // 4  # fewest children of a non-root internal node
LMERGE = 3 * FL // 4  # two leaves merge when they fit in this many keys, else they share evenly
IMERGE = 3 * FI // 4
MAXD = 64  # bound on the number of internal levels (a quarter-full tree of depth 64 is absurd)
_INF = np.inf


@structref.register
class BTreePoolType(types.StructRef):
    """numba type of :class:`BTreePool`."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class BTreePool(structref.StructRefProxy):
    """Python handle on a node pool; every field is readable as an attribute (``pool.lf``...).

    Create pools with :func:`btree_new`.  Field arrays are shared with the pool, not copied, but
    are replaced by bigger ones when the pool grows: read them again after updates.
    """


_FIELDS = [
    ("lf", types.float64[:, ::1]),  # leaf rows: (key, value) pairs; padding (+inf, 0.0)
    ("ln", types.int64[::1]),  # keys in the leaf; -1 for a free leaf
    ("llink", types.int64[::1]),  # next free leaf, -1 = none
    ("lsum", types.float64[::1]),  # a root leaf's sum of values (_rowsum)
    ("lneg", types.int64[::1]),  # a root leaf's number of negative values
    ("ik", types.float64[:, ::1]),  # internal rows: (max key, sum, child) triples; pad (+inf, 0, -1)
    ("ii", types.int64[:, ::1]),  # internal rows: child key counts[FI] | child negatives[FI]
    ("in_", types.int64[::1]),  # children of the internal node; -1 for a free node
    ("ilink", types.int64[::1]),  # next free internal node, -1 = none
    ("isum", types.float64[::1]),  # a root's sum of values (_rowsum of its child sums)
    ("icnt", types.int64[::1]),  # a root's number of keys
    ("ineg", types.int64[::1]),  # a root's number of negative values
    ("lcap", types.int64),  # rows of the leaf arrays
    ("l_used", types.int64),  # leaves ever handed out; leaves l_used.. are untouched
    ("l_head", types.int64),  # first free leaf, -1 = none
    ("l_free", types.int64),  # length of the leaf free list
    ("icap", types.int64),  # the same four for internal nodes
    ("i_used", types.int64),
    ("i_head", types.int64),
    ("i_free", types.int64),
    ("pn", types.int64[::1]),  # scratch, MAXD: internal nodes of an update path or a traversal
    ("pj", types.int64[::1]),  # scratch, MAXD: child index taken at each of them
]
structref.define_proxy(BTreePool, BTreePoolType, [name for name, _ in _FIELDS])
_POOL_TYPE = BTreePoolType(_FIELDS)


@njit(cache=True)
def _fields(p):
    return (p.lf, p.ln, p.llink, p.lsum, p.lneg, p.ik, p.ii, p.in_, p.ilink, p.isum, p.icnt, p.ineg,
            p.lcap, p.l_used, p.l_head, p.l_free, p.icap, p.i_used, p.i_head, p.i_free, p.pn, p.pj)


# Python-side read access to the fields (structref proxies have none by default).
for _i, (_name, _) in enumerate(_FIELDS):
    setattr(BTreePool, _name, property(lambda self, i=_i: _fields(self)[i]))
del _i, _name


# --------------------------------------------------------------------------------------------
# pool management


@njit(cache=True)
def btree_new(capacity: int) -> BTreePool:
    """A new empty pool with room for about ``capacity`` keys (in half-full leaves) before it first
    grows; the arrays double as needed."""
    nl = max(1, -(-2 * max(capacity, 1) // FL))
    ni = max(1, -(-2 * nl // FI))
    p = structref.new(_POOL_TYPE)
    p.lf = np.empty((nl, 2 * FL), np.float64)
    p.ln = np.full(nl, -1, np.int64)
    p.llink = np.full(nl, -1, np.int64)
    p.lsum = np.zeros(nl, np.float64)
    p.lneg = np.zeros(nl, np.int64)
    p.ik = np.empty((ni, 3 * FI), np.float64)
    p.ii = np.empty((ni, 2 * FI), np.int64)
    p.in_ = np.full(ni, -1, np.int64)
    p.ilink = np.full(ni, -1, np.int64)
    p.isum = np.zeros(ni, np.float64)
    p.icnt = np.zeros(ni, np.int64)
    p.ineg = np.zeros(ni, np.int64)
    p.lcap = nl
    p.l_used = 0
    p.l_head = -1
    p.l_free = 0
    p.icap = ni
    p.i_used = 0
    p.i_head = -1
    p.i_free = 0
    p.pn = np.empty(MAXD, np.int64)
    p.pj = np.empty(MAXD, np.int64)
    return p


@njit(cache=True)
def _grow1f(a, cap):
    out = np.zeros(cap, np.float64)
    out[: a.size] = a
    return out


@njit(cache=True)
def _grow1i(a, cap):
    out = np.full(cap, -1, np.int64)
    out[: a.size] = a
    return out


@njit(cache=True)
def _grow2f(a, cap):
    out = np.empty((cap, a.shape[1]), np.float64)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _grow2i(a, cap):
    out = np.empty((cap, a.shape[1]), np.int64)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _reserve(p, leaves, internals):
    """Make sure ``leaves`` leaves and ``internals`` internal nodes can be allocated without
    growing: double the arrays of a kind that lacks room (amortised O(1) per node).  Callers rebind
    their array locals afterwards."""
    if p.lcap - p.l_used + p.l_free < leaves:
        cap = p.lcap
        while cap - p.l_used + p.l_free < leaves:
            cap *= 2
        p.lf = _grow2f(p.lf, cap)
        p.ln = _grow1i(p.ln, cap)
        p.llink = _grow1i(p.llink, cap)
        p.lsum = _grow1f(p.lsum, cap)
        p.lneg = _grow1i(p.lneg, cap)
        p.lcap = cap
    if p.icap - p.i_used + p.i_free < internals:
        cap = p.icap
        while cap - p.i_used + p.i_free < internals:
            cap *= 2
        p.ik = _grow2f(p.ik, cap)
        p.ii = _grow2i(p.ii, cap)
        p.in_ = _grow1i(p.in_, cap)
        p.ilink = _grow1i(p.ilink, cap)
        p.isum = _grow1f(p.isum, cap)
        p.icnt = _grow1i(p.icnt, cap)
        p.ineg = _grow1i(p.ineg, cap)
        p.icap = cap


@njit(cache=True)
def _alloc_leaf(p):
    """An empty, padded leaf off the free list, else a fresh one (room reserved by the caller)."""
    n = p.l_head
    if n != -1:
        p.l_head = p.llink[n]
        p.l_free -= 1
    else:
        n = p.l_used
        p.l_used = n + 1
    _lpad(p.lf, n, 0, FL)
    p.ln[n] = 0
    p.llink[n] = -1
    return n


@njit(cache=True)
def _alloc_int(p):
    """An empty, padded internal node off the free list, else a fresh one (room reserved)."""
    n = p.i_head
    if n != -1:
        p.i_head = p.ilink[n]
        p.i_free -= 1
    else:
        n = p.i_used
        p.i_used = n + 1
    _ipad(p.ik, p.ii, n, 0, FI)
    p.in_[n] = 0
    p.ilink[n] = -1
    return n


@njit(cache=True)
def _free_leaf(p, n):
    p.ln[n] = -1
    p.llink[n] = p.l_head
    p.l_head = n
    p.l_free += 1


@njit(cache=True)
def _free_int(p, n):
    p.in_[n] = -1
    p.ilink[n] = p.i_head
    p.i_head = n
    p.i_free += 1


# --------------------------------------------------------------------------------------------
# row kernels: fixed-length loops over padded rows.  Entry t of a row with entries of width w
# has its key at w * t; a leaf's value is at 2 t + 1, an internal node's sum at 3 t + 1 and its
# child at 3 t + 2.


@njit(cache=True, inline="always")
def _rowsum(a, r, off, w, f):
    """Sum of a[r, off + w t] for t < f in a fixed order (four interleaved lanes, then
    (0 + 1) + (2 + 3)); padding zeros leave it exact.  f is a multiple of 4."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for t in range(0, f, 4):
        s0 += a[r, off + w * t]
        s1 += a[r, off + w * (t + 1)]
        s2 += a[r, off + w * (t + 2)]
        s3 += a[r, off + w * (t + 3)]
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, inline="always")
def _isum(a, r, off, f):
    s = 0
    for t in range(f):
        s += a[r, off + t]
    return s


@njit(cache=True, inline="always")
def _count_lt(a, r, w, f, x):
    """Entries t < f whose key a[r, w t] is below x (a sorted row padded with +inf)."""
    c = 0
    for t in range(f):
        c += a[r, w * t] < x
    return c


@njit(cache=True, inline="always")
def _count_le(a, r, w, f, x):
    """Entries whose key is at most x (padding counts when x is +inf: callers clamp to the fill)."""
    c = 0
    for t in range(f):
        c += a[r, w * t] <= x
    return c


@njit(cache=True, inline="always")
def _leaf_negatives(lf, n):
    c = 0
    for t in range(FL):
        c += lf[n, 2 * t + 1] < 0.0
    return c


@njit(cache=True, inline="always")
def _child(ik, i, j):
    return np.int64(ik[i, 3 * j + 2])


@njit(cache=True)
def _summary(p, ref):
    """(max key, sum, count, negatives) of the node ``ref``, recomputed from its row: O(F)."""
    n = ref >> 1
    if ref & 1:
        m = p.in_[n]
        return p.ik[n, 3 * m - 3], _rowsum(p.ik, n, 1, 3, FI), _isum(p.ii, n, 0, FI), _isum(p.ii, n, FI, FI)
    m = p.ln[n]
    return p.lf[n, 2 * m - 2], _rowsum(p.lf, n, 1, 2, FL), m, _leaf_negatives(p.lf, n)


@njit(cache=True)
def _refresh(p, i, j):
    """Recompute entry j of internal node i from its child."""
    mk, s, c, g = _summary(p, _child(p.ik, i, j))
    p.ik[i, 3 * j] = mk
    p.ik[i, 3 * j + 1] = s
    p.ii[i, j] = c
    p.ii[i, FI + j] = g


@njit(cache=True)
def _set_root_totals(p, ref):
    """Recompute the totals kept at a (new) root from its row."""
    n = ref >> 1
    _, s, c, g = _summary(p, ref)
    if ref & 1:
        p.isum[n] = s
        p.icnt[n] = c
        p.ineg[n] = g
    else:
        p.lsum[n] = s
        p.lneg[n] = g


@njit(cache=True, inline="always")
def _lmove(lf, a, sa, b, sb, m):
    """Copy m leaf entries a[sa:sa+m] -> b[sb:sb+m] (overlap-safe within one row)."""
    if a == b and sb > sa:
        for t in range(2 * m - 1, -1, -1):
            lf[b, 2 * sb + t] = lf[a, 2 * sa + t]
    else:
        for t in range(2 * m):
            lf[b, 2 * sb + t] = lf[a, 2 * sa + t]


@njit(cache=True, inline="always")
def _lpad(lf, a, lo, hi):
    for t in range(lo, hi):
        lf[a, 2 * t] = _INF
        lf[a, 2 * t + 1] = 0.0


@njit(cache=True, inline="always")
def _imove(ik, ii, a, sa, b, sb, m):
    """Copy m internal entries a[sa:sa+m] -> b[sb:sb+m] (overlap-safe within one row)."""
    if a == b and sb > sa:
        for t in range(3 * m - 1, -1, -1):
            ik[b, 3 * sb + t] = ik[a, 3 * sa + t]
        for t in range(m - 1, -1, -1):
            ii[b, sb + t] = ii[a, sa + t]
            ii[b, FI + sb + t] = ii[a, FI + sa + t]
    else:
        for t in range(3 * m):
            ik[b, 3 * sb + t] = ik[a, 3 * sa + t]
        for t in range(m):
            ii[b, sb + t] = ii[a, sa + t]
            ii[b, FI + sb + t] = ii[a, FI + sa + t]


@njit(cache=True, inline="always")
def _ipad(ik, ii, a, lo, hi):
    for t in range(lo, hi):
        ik[a, 3 * t] = _INF
        ik[a, 3 * t + 1] = 0.0
        ik[a, 3 * t + 2] = -1.0
        ii[a, t] = 0
        ii[a, FI + t] = 0


# --------------------------------------------------------------------------------------------
# updates


@njit(cache=True)
def _update(p, root, k, x, assign):
    """value[k] = x (``assign``) or value[k] += x; remove k if the result is 0.0.  New root.

    One descent records the path (internal nodes and child indexes) in ``p.pn``/``p.pj``.  A found
    key whose value stays nonzero is updated in place and the sums along the path recomputed; an
    insertion or a removal goes to :func:`_insert` / :func:`_delete`.
    """
    if k != k:
        raise ValueError("btree map key is NaN")
    if root == -1:
        if x == 0.0:
            return -1
        _reserve(p, 1, 0)
        n = _alloc_leaf(p)
        p.lf[n, 0] = k
        p.lf[n, 1] = x
        p.ln[n] = 1
        p.lsum[n] = x
        p.lneg[n] = 1 if x < 0.0 else 0
        return 2 * n
    ik = p.ik
    in_ = p.in_
    lf = p.lf
    pn = p.pn
    pj = p.pj
    d = 0
    r = root
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, 3, FI, k)
        m = in_[i] - 1
        if j > m:  # k above every key: the last child
            j = m
        pn[d] = i
        pj[d] = j
        d += 1
        r = _child(ik, i, j)
    n = r >> 1
    pos = _count_lt(lf, n, 2, FL, k)
    # a live slot holds a nonzero value, padding 0.0 (this also tells a key +inf from padding)
    if pos < FL and lf[n, 2 * pos] == k and lf[n, 2 * pos + 1] != 0.0:
        old = lf[n, 2 * pos + 1]
        v = x if assign else old + x
        if v == 0.0:
            return _delete(p, root, d, n, pos)
        lf[n, 2 * pos + 1] = v
        dn = (1 if v < 0.0 else 0) - (1 if old < 0.0 else 0)
        s = _rowsum(lf, n, 1, 2, FL)
        if d == 0:
            p.lsum[n] = s
            p.lneg[n] += dn
            return root
        if dn != 0:
            ii = p.ii
            for e in range(d):
                ii[pn[e], FI + pj[e]] += dn
        for e in range(d - 1, -1, -1):
            i = pn[e]
            ik[i, 3 * pj[e] + 1] = s
            s = _rowsum(ik, i, 1, 3, FI)
        i = root >> 1
        p.isum[i] = s
        p.ineg[i] += dn
        return root
    if x == 0.0:  # absent key set to / incremented by zero: nothing to store
        return root
    return _insert(p, root, d, n, pos, k, x)


@njit(cache=True)
def _insert(p, root, d, n, pos, k, x):
    """Insert (k, x) at ``pos`` of leaf n, at the end of the recorded path of d internal nodes.

    A full node splits into two halves; the parent gets an entry for the new right half, which
    may split the parent in turn, up to a new root.
    """
    if p.ln[n] == FL:
        _reserve(p, 1, d + 1)  # a split may climb to a new root
    lf = p.lf
    ln = p.ln
    ik = p.ik
    ii = p.ii
    in_ = p.in_
    pn = p.pn
    pj = p.pj
    m = ln[n]
    split = -1  # ref of a new right sibling of the current node, to enter in the parent
    if m < FL:
        _lmove(lf, n, pos, n, pos + 1, m - pos)
        lf[n, 2 * pos] = k
        lf[n, 2 * pos + 1] = x
        ln[n] = m + 1
    else:
        b = _alloc_leaf(p)
        h = (FL + 1) // 2  # keys left in n
        if pos < h:
            _lmove(lf, n, h - 1, b, 0, FL - h + 1)
            _lmove(lf, n, pos, n, pos + 1, h - 1 - pos)
            lf[n, 2 * pos] = k
            lf[n, 2 * pos + 1] = x
        else:
            _lmove(lf, n, h, b, 0, pos - h)
            lf[b, 2 * (pos - h)] = k
            lf[b, 2 * (pos - h) + 1] = x
            _lmove(lf, n, pos, b, pos - h + 1, FL - pos)
        _lpad(lf, n, h, FL)
        ln[n] = h
        ln[b] = FL + 1 - h
        split = 2 * b
    dn = 1 if x < 0.0 else 0
    cm = lf[n, 2 * ln[n] - 2]  # the child's max key and sum, when it did not split
    s = _rowsum(lf, n, 1, 2, FL)
    for e in range(d - 1, -1, -1):
        i = pn[e]
        j = pj[e]
        if split == -1:
            ik[i, 3 * j] = cm
            ik[i, 3 * j + 1] = s
            ii[i, j] += 1
            ii[i, FI + j] += dn
            cm = ik[i, 3 * in_[i] - 3]
            s = _rowsum(ik, i, 1, 3, FI)
            continue
        _refresh(p, i, j)
        m = in_[i]
        if m < FI:
            _imove(ik, ii, i, j + 1, i, j + 2, m - j - 1)
            ik[i, 3 * j + 5] = split
            in_[i] = m + 1
            _refresh(p, i, j + 1)
            split = -1
            cm = ik[i, 3 * m]
            s = _rowsum(ik, i, 1, 3, FI)
        else:
            b = _alloc_int(p)
            h = (FI + 1) // 2
            if j + 1 < h:
                _imove(ik, ii, i, h - 1, b, 0, FI - h + 1)
                _imove(ik, ii, i, j + 1, i, j + 2, h - 2 - j)
                ik[i, 3 * j + 5] = split
                in_[i] = h
                _refresh(p, i, j + 1)
            else:
                q = j + 1 - h
                _imove(ik, ii, i, h, b, 0, q)
                ik[b, 3 * q + 2] = split
                _imove(ik, ii, i, j + 1, b, q + 1, FI - j - 1)
                _refresh(p, b, q)
            _ipad(ik, ii, i, h, FI)
            in_[i] = h
            in_[b] = FI + 1 - h
            split = 2 * b + 1
    if split != -1:  # the root split: a new root above the two halves
        t = _alloc_int(p)
        ik[t, 2] = root
        ik[t, 5] = split
        in_[t] = 2
        _refresh(p, t, 0)
        _refresh(p, t, 1)
        root = 2 * t + 1
        _set_root_totals(p, root)
    elif d == 0:
        p.lsum[n] = s
        p.lneg[n] += dn
    else:
        t = root >> 1
        p.isum[t] = s
        p.icnt[t] += 1
        p.ineg[t] += dn
    return root


@njit(cache=True)
def _rebalance(p, i, j):
    """Child j of internal node i is below its minimum fill: merge it with a neighbour if the two
    fit in 3/4 of a node, else share their entries evenly.  Recomputes the entries involved."""
    lf = p.lf
    ln = p.ln
    ik = p.ik
    ii = p.ii
    in_ = p.in_
    m = in_[i]
    ja = j if j + 1 < m else j - 1
    a = _child(ik, i, ja)
    b = _child(ik, i, ja + 1)
    an = a >> 1
    bn = b >> 1
    if a & 1:
        na = in_[an]
        nb = in_[bn]
        if na + nb <= IMERGE:
            _imove(ik, ii, bn, 0, an, na, nb)
            in_[an] = na + nb
            _free_int(p, bn)
            merged = True
        else:
            h = (na + nb) // 2
            if na < h:  # move b's first h - na entries to a's end
                q = h - na
                _imove(ik, ii, bn, 0, an, na, q)
                _imove(ik, ii, bn, q, bn, 0, nb - q)
                _ipad(ik, ii, bn, nb - q, nb)
            else:  # move a's last na - h entries to b's front
                q = na - h
                _imove(ik, ii, bn, 0, bn, q, nb)
                _imove(ik, ii, an, h, bn, 0, q)
                _ipad(ik, ii, an, h, na)
            in_[an] = h
            in_[bn] = na + nb - h
            merged = False
    else:
        na = ln[an]
        nb = ln[bn]
        if na + nb <= LMERGE:
            _lmove(lf, bn, 0, an, na, nb)
            ln[an] = na + nb
            _free_leaf(p, bn)
            merged = True
        else:
            h = (na + nb) // 2
            if na < h:
                q = h - na
                _lmove(lf, bn, 0, an, na, q)
                _lmove(lf, bn, q, bn, 0, nb - q)
                _lpad(lf, bn, nb - q, nb)
            else:
                q = na - h
                _lmove(lf, bn, 0, bn, q, nb)
                _lmove(lf, an, h, bn, 0, q)
                _lpad(lf, an, h, na)
            ln[an] = h
            ln[bn] = na + nb - h
            merged = False
    _refresh(p, i, ja)
    if merged:  # drop entry ja + 1
        _imove(ik, ii, i, ja + 2, i, ja + 1, m - ja - 2)
        _ipad(ik, ii, i, m - 1, m)
        in_[i] = m - 1
    else:
        _refresh(p, i, ja + 1)


@njit(cache=True)
def _delete(p, root, d, n, pos):
    """Remove entry ``pos`` of leaf n, at the end of the recorded path of d internal nodes.

    Underfull nodes are rebalanced by their parent on the way up; an internal root left with one
    child is replaced by it; an emptied root leaf is freed.
    """
    lf = p.lf
    ln = p.ln
    ik = p.ik
    ii = p.ii
    in_ = p.in_
    pn = p.pn
    pj = p.pj
    m = ln[n]
    dn = -1 if lf[n, 2 * pos + 1] < 0.0 else 0
    _lmove(lf, n, pos + 1, n, pos, m - pos - 1)
    _lpad(lf, n, m - 1, m)
    m -= 1
    ln[n] = m
    s = _rowsum(lf, n, 1, 2, FL)
    if d == 0:
        if m == 0:
            _free_leaf(p, n)
            return -1
        p.lsum[n] = s
        p.lneg[n] += dn
        return root
    cm = lf[n, 2 * m - 2] if m > 0 else _INF
    under = m < LMIN
    for e in range(d - 1, -1, -1):
        i = pn[e]
        j = pj[e]
        if under:
            _rebalance(p, i, j)
        else:
            ik[i, 3 * j] = cm
            ik[i, 3 * j + 1] = s
            ii[i, j] -= 1
            ii[i, FI + j] += dn
        m = in_[i]
        under = m < IMIN
        cm = ik[i, 3 * m - 3]
        s = _rowsum(ik, i, 1, 3, FI)
    t = root >> 1
    if in_[t] == 1:  # the root has a single child left: it becomes the root
        root = _child(ik, t, 0)
        _free_int(p, t)
        _set_root_totals(p, root)
        return root
    p.isum[t] = s
    p.icnt[t] -= 1
    p.ineg[t] += dn
    return root


@njit(cache=True)
def btree_add(pool: BTreePool, root: int, key: float, delta: float) -> int:
    """value[key] += delta, creating the key if absent and removing it if the result is exactly 0.0.

    Returns the new root.  O(F log_F n): one descent, then the path's sums recomputed bottom-up
    (plus splits or merges of the path's nodes on insertion or removal).
    """
    return _update(pool, root, key, delta, False)


@njit(cache=True)
def btree_set(pool: BTreePool, root: int, key: float, value: float) -> int:
    """value[key] = value (0.0 removes the key).  Returns the new root.  O(F log_F n)."""
    return _update(pool, root, key, value, True)


@njit(cache=True)
def btree_free(pool: BTreePool, root: int) -> int:
    """Release every node of the tree to the free lists; returns -1, the empty tree.  O(n / F)."""
    if root == -1:
        return -1
    if not root & 1:
        _free_leaf(pool, root >> 1)
        return -1
    ik = pool.ik
    in_ = pool.in_
    sn = pool.pn  # a root-to-node path: fits in MAXD
    sj = pool.pj
    sn[0] = root >> 1
    sj[0] = 0
    top = 0
    while top >= 0:
        i = sn[top]
        j = sj[top]
        if j == in_[i]:
            _free_int(pool, i)
            top -= 1
            continue
        sj[top] = j + 1
        c = _child(ik, i, j)
        if c & 1:
            top += 1
            sn[top] = c >> 1
            sj[top] = 0
        else:
            _free_leaf(pool, c >> 1)
    return -1


# --------------------------------------------------------------------------------------------
# point and whole-map queries


@njit(cache=True)
def btree_get(pool: BTreePool, root: int, key: float) -> float:
    """value[key], 0.0 if absent (or if key is NaN).  O(F log_F n): one descent."""
    if root == -1:
        return 0.0
    ik = pool.ik
    in_ = pool.in_
    lf = pool.lf
    r = root
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, 3, FI, key)
        m = in_[i] - 1
        r = _child(ik, i, j if j < m else m)
    n = r >> 1
    pos = _count_lt(lf, n, 2, FL, key)
    if pos < FL and lf[n, 2 * pos] == key:
        return lf[n, 2 * pos + 1]  # 0.0 in a padding slot (key +inf absent)
    return 0.0


@njit(cache=True)
def btree_total(pool: BTreePool, root: int) -> float:
    """Sum of all values.  O(1): kept at the root."""
    if root == -1:
        return 0.0
    return pool.isum[root >> 1] if root & 1 else pool.lsum[root >> 1]


@njit(cache=True)
def btree_len(pool: BTreePool, root: int) -> int:
    """Number of keys.  O(1): kept at the root."""
    if root == -1:
        return 0
    return pool.icnt[root >> 1] if root & 1 else pool.ln[root >> 1]


@njit(cache=True)
def btree_negatives(pool: BTreePool, root: int) -> int:
    """Number of keys with a negative value.  O(1): kept at the root.

    When it is 0, prefix sums are nondecreasing in the key and :func:`btree_first_prefix` applies.
    """
    if root == -1:
        return 0
    return pool.ineg[root >> 1] if root & 1 else pool.lneg[root >> 1]


@njit(cache=True)
def btree_min(pool: BTreePool, root: int) -> tuple[bool, float]:
    """(True, smallest key), or (False, nan) for the empty map.  O(log_F n): the left spine."""
    if root == -1:
        return False, np.nan
    ik = pool.ik
    r = root
    while r & 1:
        r = _child(ik, r >> 1, 0)
    return True, pool.lf[r >> 1, 0]


@njit(cache=True)
def btree_max(pool: BTreePool, root: int) -> tuple[bool, float]:
    """(True, largest key), or (False, nan) for the empty map.  O(1): the root's last max key."""
    if root == -1:
        return False, np.nan
    n = root >> 1
    if root & 1:
        return True, pool.ik[n, 3 * pool.in_[n] - 3]
    return True, pool.lf[n, 2 * pool.ln[n] - 2]


@njit(cache=True)
def btree_items(pool: BTreePool, root: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) as new float64 arrays in increasing key order.  O(n), iterative walk."""
    total = btree_len(pool, root)
    keys = np.empty(total, np.float64)
    vals = np.empty(total, np.float64)
    if root == -1:
        return keys, vals
    lf = pool.lf
    ln = pool.ln
    if not root & 1:
        n = root >> 1
        for t in range(ln[n]):
            keys[t] = lf[n, 2 * t]
            vals[t] = lf[n, 2 * t + 1]
        return keys, vals
    ik = pool.ik
    in_ = pool.in_
    sn = pool.pn
    sj = pool.pj
    sn[0] = root >> 1
    sj[0] = 0
    top = 0
    w = 0
    while top >= 0:
        i = sn[top]
        j = sj[top]
        if j == in_[i]:
            top -= 1
            continue
        sj[top] = j + 1
        c = _child(ik, i, j)
        if c & 1:
            top += 1
            sn[top] = c >> 1
            sj[top] = 0
        else:
            n = c >> 1
            for t in range(ln[n]):
                keys[w] = lf[n, 2 * t]
                vals[w] = lf[n, 2 * t + 1]
                w += 1
    return keys, vals


# --------------------------------------------------------------------------------------------
# range-cumulative queries: one root-to-leaf descent each.  At an internal node the children
# wholly inside the range are added from their sum entries and the descent enters the one child
# that straddles the bound.


@njit(cache=True)
def _sum_below(pool, root, x, inclusive):
    # Left to right, in the order btree_first_prefix forms prefix sums (see the module docstring).
    if root == -1:
        return 0.0
    ik = pool.ik
    in_ = pool.in_
    lf = pool.lf
    acc = 0.0
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        # children with max key below x (or at most x) lie wholly in the range
        j = _count_le(ik, i, 3, FI, x) if inclusive else _count_lt(ik, i, 3, FI, x)
        if j > m:
            j = m
        for t in range(j):
            acc = acc + ik[i, 3 * t + 1]
        if j == m:
            return acc
        r = _child(ik, i, j)
    n = r >> 1
    j = _count_le(lf, n, 2, FL, x) if inclusive else _count_lt(lf, n, 2, FL, x)
    for t in range(j):  # a padding slot past the fill (x = +inf) adds 0.0: harmless
        acc = acc + lf[n, 2 * t + 1]
    return acc


@njit(cache=True, inline="always")
def _tail_sum(ik, i, j):
    """Sum of the sums of entries j < t < FI of internal node i: a masked four-lane sum over the
    whole row (loads outside the conditionals, so they compile to selects, not branches)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for t in range(0, FI, 4):
        v0 = ik[i, 3 * t + 1]
        v1 = ik[i, 3 * t + 4]
        v2 = ik[i, 3 * t + 7]
        v3 = ik[i, 3 * t + 10]
        s0 += v0 if t > j else 0.0
        s1 += v1 if t + 1 > j else 0.0
        s2 += v2 if t + 2 > j else 0.0
        s3 += v3 if t + 3 > j else 0.0
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, inline="always")
def _leaf_sum_above(lf, n, x, inclusive):
    """Sum of a leaf's values with key > x (>= x if ``inclusive``): a masked four-lane sum over the
    whole row (padding values are 0.0)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    if inclusive:
        for t in range(0, 2 * FL, 8):
            v0 = lf[n, t + 1]
            v1 = lf[n, t + 3]
            v2 = lf[n, t + 5]
            v3 = lf[n, t + 7]
            s0 += v0 if lf[n, t] >= x else 0.0
            s1 += v1 if lf[n, t + 2] >= x else 0.0
            s2 += v2 if lf[n, t + 4] >= x else 0.0
            s3 += v3 if lf[n, t + 6] >= x else 0.0
    else:
        for t in range(0, 2 * FL, 8):
            v0 = lf[n, t + 1]
            v1 = lf[n, t + 3]
            v2 = lf[n, t + 5]
            v3 = lf[n, t + 7]
            s0 += v0 if lf[n, t] > x else 0.0
            s1 += v1 if lf[n, t + 2] > x else 0.0
            s2 += v2 if lf[n, t + 4] > x else 0.0
            s3 += v3 if lf[n, t + 6] > x else 0.0
    return (s0 + s1) + (s2 + s3)


@njit(cache=True)
def _sum_above(pool, root, x, inclusive):
    if root == -1 or x != x:  # a NaN bound matches no key
        return 0.0
    ik = pool.ik
    in_ = pool.in_
    acc = 0.0
    r = root
    while r & 1:
        i = r >> 1
        # the first child whose max key is above x (at least x) straddles x; those after it lie
        # wholly in the range
        j = _count_lt(ik, i, 3, FI, x) if inclusive else _count_le(ik, i, 3, FI, x)
        if j >= in_[i]:
            return acc
        acc = acc + _tail_sum(ik, i, j)
        r = _child(ik, i, j)
    return acc + _leaf_sum_above(pool.lf, r >> 1, x, inclusive)


@njit(cache=True)
def btree_sum_lt(pool: BTreePool, root: int, x: float) -> float:
    """Sum of the values with key < x.  O(F log_F n)."""
    return _sum_below(pool, root, x, False)


@njit(cache=True)
def btree_sum_le(pool: BTreePool, root: int, x: float) -> float:
    """Sum of the values with key <= x.  O(F log_F n)."""
    return _sum_below(pool, root, x, True)


@njit(cache=True)
def btree_sum_gt(pool: BTreePool, root: int, x: float) -> float:
    """Sum of the values with key > x.  O(F log_F n)."""
    return _sum_above(pool, root, x, False)


@njit(cache=True)
def btree_sum_ge(pool: BTreePool, root: int, x: float) -> float:
    """Sum of the values with key >= x.  O(F log_F n)."""
    return _sum_above(pool, root, x, True)


@njit(cache=True)
def btree_first_prefix(pool: BTreePool, root: int, y: float, strict: bool) -> tuple[bool, float]:
    """Smallest key b whose inclusive prefix sum P(b) = sum(value[k] for k <= b) is > y (``strict``)
    or >= y; (True, b), or (False, nan) if no key qualifies.

    Requires ``btree_negatives(pool, root) == 0``: P is then nondecreasing in b, so one descent
    finds b: at each node, the first child whose running sum crosses y holds it.  O(F log_F n).
    With negative values the answer is some key where P crosses y, not necessarily the first.

    P(b) is formed exactly as :func:`btree_sum_le` forms it: the running sum through a child's last
    key is the parent's running sum plus the child's sum entry.  So below the root the last entry
    of a node is never tested (its running sum is the one that crossed in the parent), and
    ``btree_sum_le(b)`` is bitwise the crossing value found.
    """
    if root == -1:
        return False, np.nan
    ik = pool.ik
    in_ = pool.in_
    lf = pool.lf
    acc = 0.0  # sum of the values left of the current node
    known = False  # whether the running sum through the current node's last key is known to cross
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        last = m - 1 if known else m
        j = last
        for t in range(last):
            s = acc + ik[i, 3 * t + 1]
            if s > y or (not strict and s == y):
                j = t
                break
            acc = s
        if j == m:  # at the root, no running sum crossed
            return False, np.nan
        known = True  # the child holds b; if j == m - 1 was not tested, the parent's sum crossed
        r = _child(ik, i, j)
    n = r >> 1
    m = pool.ln[n]
    last = m - 1 if known else m
    for t in range(last):
        s = acc + lf[n, 2 * t + 1]
        if s > y or (not strict and s == y):
            return True, lf[n, 2 * t]
        acc = s
    if not known:
        return False, np.nan
    return True, lf[n, 2 * m - 2]


# --------------------------------------------------------------------------------------------
# invariant checker (tests)


def _py_rowsum(vals: list[float]) -> float:
    """_rowsum in Python floats: the same operations in the same order, so bitwise equal."""
    s = [0.0, 0.0, 0.0, 0.0]
    for t in range(0, len(vals), 4):
        for lane in range(4):
            s[lane] += vals[t + lane]
    return (s[0] + s[1]) + (s[2] + s[3])


# --------------------------------------------------------------------------------------------
# range sums and threshold search (called by generated programs)

LT, LE, GT, GE = 0, 1, 2, 3
"""Comparison codes of :func:`range_sum` and the threshold functions (``codegen`` emits them)."""
OP_CODES = {"<": LT, "<=": LE, ">": GT, ">=": GE}


@njit(cache=True)
def range_sum(pool, root, op: int, x: float) -> float:
    """Sum of values with key ``op`` x; O(log n)."""
    if op == LT:
        return btree_sum_lt(pool, root, x)
    if op == LE:
        return btree_sum_le(pool, root, x)
    if op == GT:
        return btree_sum_gt(pool, root, x)
    return btree_sum_ge(pool, root, x)


@njit(cache=True)
def _holds(op: int, a: float, b: float) -> bool:
    if op == LT:
        return a < b
    if op == LE:
        return a <= b
    if op == GT:
        return a > b
    return a >= b


@njit(cache=True)
def threshold_sum(pa, ra, pb, rb, rop: int, cop: int, x: float) -> float:
    """Sum of A[p] over the keys p of A with R(p) ``cop`` x, where R(p) is the sum of B[q] over
    keys q ``rop`` p.  This is VWAP's "volume above my price below k * total".

    When B has no negative values R is monotone in p, so the qualifying p form an up-set or a
    down-set of the reals, bounded at a key of B: one O(log n) descent of B finds the boundary
    (:func:`threshold_cut`) and one O(log n) range sum of A adds up the side that qualifies
    (:func:`threshold_apply`).  With negative values the answer falls back to a scan of A's keys
    (O(n log n)), still exact.  Several sums over one B with one condition share the cut.
    """
    code, b = threshold_cut(pb, rb, rop, cop, x)
    return threshold_apply(pa, ra, pb, rb, rop, cop, x, code, b)


@njit(cache=True)
def threshold_cut(pb, rb, rop: int, cop: int, x: float):
    """Where the condition of :func:`threshold_sum` holds, as ``(code, b)``: 0 nowhere, 1
    everywhere, 2..5 for keys >= b, > b, < b, <= b, 6 unknown (B has negative values: scan).
    One O(log n) descent of B; depends on B and x only."""
    if x != x:
        return 0, 0.0
    if btree_negatives(pb, rb) > 0:
        return 6, 0.0
    # R(p) = F(p) for rop in (<, <=), T - F(p) for (>, >=); F = inclusive (<=, >) or
    # exclusive (<, >=) prefix sum, non-decreasing in p.  Rewrite the condition as F(p) c y.
    inclusive = rop == LE or rop == GT
    c, y = cop, x
    if rop == GT or rop == GE:
        y = btree_total(pb, rb) - x
        c = (GT, GE, LT, LE)[cop]
    # U = {p : F(p) > y} (strict) or {F(p) >= y}; S is U for c in (>, >=), its complement else.
    strict = c == GT or c == LE
    upset = c == GT or c == GE
    if (0.0 > y) if strict else (0.0 >= y):
        return (1 if upset else 0), 0.0          # U is every real
    found, b = btree_first_prefix(pb, rb, y, strict)
    if not found:                                # U is empty
        return (0 if upset else 1), 0.0
    if upset:
        return (2 if inclusive else 3), b
    return (4 if inclusive else 5), b


@njit(cache=True)
def threshold_apply(pa, ra, pb, rb, rop: int, cop: int, x: float, code: int, b: float) -> float:
    """The sum of A over the keys :func:`threshold_cut` selected; O(log n) (O(n log n) for code 6)."""
    if code == 0:
        return 0.0
    if code == 1:
        return btree_total(pa, ra)
    if code == 2:
        return btree_sum_ge(pa, ra, b)
    if code == 3:
        return btree_sum_gt(pa, ra, b)
    if code == 4:
        return btree_sum_lt(pa, ra, b)
    if code == 5:
        return btree_sum_le(pa, ra, b)
    keys, vals = btree_items(pa, ra)
    acc = 0.0
    for i in range(keys.shape[0]):
        if _holds(cop, range_sum(pb, rb, rop, keys[i]), x):
            acc += vals[i]
    return acc


def btree_check(pool: BTreePool, root: int) -> None:
    """Assert every invariant of the pool's free lists and of the tree at ``root``.

    Keys strictly increasing within and across nodes, all leaves at one depth, fill bounds (root
    leaf >= 1 key, internal root >= 2 children, other nodes >= LMIN / IMIN, all <= FL / FI),
    padding of unused slots, no zero or NaN value stored, every entry's max key, count and
    negatives equal to its child's recomputed ones and its sum bitwise equal to the child's
    :func:`_rowsum`, the root's totals likewise, no node reachable twice or both reachable and free,
    free lists without loops, of the recorded lengths and marked free, reachable + free nodes within
    the capacity.  Pure Python, O(n + free nodes): for tests.
    """
    lf, ln, ik, ii, in_ = pool.lf, pool.ln, pool.ik, pool.ii, pool.in_
    lcap, icap = pool.lcap, pool.icap
    assert lf.shape == (lcap, 2 * FL) and ik.shape == (icap, 3 * FI) and ii.shape == (icap, 2 * FI)
    for arr in (ln, pool.llink, pool.lsum, pool.lneg):
        assert len(arr) == lcap, "leaf array length differs from lcap"
    for arr in (in_, pool.ilink, pool.isum, pool.icnt, pool.ineg):
        assert len(arr) == icap, "internal array length differs from icap"
    assert 0 <= pool.l_used <= lcap and 0 <= pool.i_used <= icap
    assert len(pool.pn) == MAXD and len(pool.pj) == MAXD

    def free_list(head: int, link: np.ndarray, fill: np.ndarray, used: int, n_free: int) -> set[int]:
        free: set[int] = set()
        f = head
        while f != -1:
            assert 0 <= f < used, f"free node {f} outside [0, {used})"
            assert f not in free, f"free list loops at node {f}"
            assert fill[f] == -1, f"free node {f} has fill {fill[f]}"
            free.add(f)
            f = int(link[f])
        assert len(free) == n_free, f"free list has {len(free)} nodes, recorded {n_free}"
        return free

    lfree = free_list(pool.l_head, pool.llink, ln, pool.l_used, pool.l_free)
    ifree = free_list(pool.i_head, pool.ilink, in_, pool.i_used, pool.i_free)
    if root == -1:
        return
    assert root >= 0, f"bad root ref {root}"

    seen_l: set[int] = set()
    seen_i: set[int] = set()
    leaf_depths: set[int] = set()
    last_key: list[float] = []  # the last key seen in order, if any

    def visit(ref: int, depth: int, is_root: bool) -> tuple[float, float, int, int]:
        """Check the subtree at ref; return its (max key, sum, count, negatives)."""
        n = ref >> 1
        if not ref & 1:
            assert 0 <= n < pool.l_used, f"leaf {n} outside [0, {pool.l_used})"
            assert n not in seen_l, f"leaf {n} reachable twice"
            assert n not in lfree, f"leaf {n} both reachable and free"
            seen_l.add(n)
            leaf_depths.add(depth)
            m = int(ln[n])
            assert (1 if is_root else LMIN) <= m <= FL, f"leaf {n} holds {m} keys"
            row = lf[n].tolist()
            keys, vals = row[0::2], row[1::2]
            for k, v in zip(keys[:m], vals[:m], strict=True):
                assert k == k, f"leaf {n} stores a NaN key"
                assert v != 0.0 and v == v, f"leaf {n} stores value {v}"
                assert not last_key or last_key[0] < k, f"key {k} out of order after {last_key}"
                last_key[:] = [k]
            assert all(k == np.inf for k in keys[m:]) and all(v == 0.0 for v in vals[m:]), (
                f"leaf {n} padding broken"
            )
            return keys[m - 1], _py_rowsum(vals), m, sum(v < 0.0 for v in vals[:m])
        assert 0 <= n < pool.i_used, f"internal node {n} outside [0, {pool.i_used})"
        assert n not in seen_i, f"internal node {n} reachable twice"
        assert n not in ifree, f"internal node {n} both reachable and free"
        seen_i.add(n)
        m = int(in_[n])
        assert (2 if is_root else IMIN) <= m <= FI, f"internal node {n} has {m} children"
        assert depth < MAXD, "tree deeper than MAXD"
        row = ik[n].tolist()
        maxk, sums, kids = row[0::3], row[1::3], row[2::3]
        cnts, negs = ii[n, :FI].tolist(), ii[n, FI:].tolist()
        cnt = neg = 0
        for j in range(m):
            assert kids[j] == int(kids[j]) >= 0, f"node {n} entry {j}: child {kids[j]}"
            mk, s, c, g = visit(int(kids[j]), depth + 1, False)
            assert maxk[j] == mk, f"node {n} entry {j}: max key {maxk[j]}, expected {mk}"
            assert sums[j] == s, f"node {n} entry {j}: sum {sums[j]}, expected {s}"
            assert cnts[j] == c, f"node {n} entry {j}: count {cnts[j]}, expected {c}"
            assert negs[j] == g, f"node {n} entry {j}: negatives {negs[j]}, expected {g}"
            cnt += c
            neg += g
        for j in range(m, FI):
            assert (maxk[j], sums[j], kids[j], cnts[j], negs[j]) == (np.inf, 0.0, -1.0, 0, 0), (
                f"node {n} padding broken"
            )
        return maxk[m - 1], _py_rowsum(sums), cnt, neg

    _, s, c, g = visit(int(root), 0, True)
    assert len(leaf_depths) == 1, f"leaves at depths {sorted(leaf_depths)}"
    n = root >> 1
    if root & 1:
        assert (pool.isum[n], pool.icnt[n], pool.ineg[n]) == (s, c, g), "root totals stale"
    else:
        assert (pool.lsum[n], pool.lneg[n]) == (s, g), "root totals stale"
    assert len(seen_l) + len(lfree) <= lcap and len(seen_i) + len(ifree) <= icap
