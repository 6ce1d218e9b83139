"""Range-cumulative ordered maps as counted B+-trees in one numba node pool.

Same maps, same semantics and the same API as :mod:`ddms.storage.ordered` (prefix ``btree_``
instead of ``ordered_``), built for cache efficiency: a treap visits ~2 log2(n) nodes scattered
over memory per operation, a B+-tree ~log_F(n) nodes, each a few adjacent cache lines.

An ordered map sends a float64 key to a nonzero float64 value and answers point lookups and
*range-cumulative* queries: the sum of the values whose key is below / above a bound, and the
smallest key at which the running (prefix) sum crosses a threshold.  Like DBToaster maps, a map
holds only nonzero values: an update that leaves exactly 0.0 removes the key.  Keys must not be NaN
(updates raise ValueError); values should be finite.

Structure
---------
Leaves hold up to ``FL`` (key, value) pairs in increasing key order; internal nodes hold up to
``FI`` entries, one per child, in key order: the child's largest key, the sum of its values, its
number of keys and its number of negative values, and the child itself.  All leaves lie at the same
depth.  Every node but the root is at least a quarter full (``LMIN`` / ``IMIN`` entries); an
internal root has at least two children.  A node that falls below that after a deletion takes
entries from a neighbour, or merges with it if the two fit in three quarters of a node, so that a
node just split (half full) or just merged (at most 3/4 full) is never split or merged again by the
next few updates.

Every node is stored contiguously, one row per node of a 2-D array:

    leaves    ``lf[l]``  = keys[FL] | values[FL]                       (float64)
    internal  ``ik[i]``  = child max keys[FI] | child sums[FI]          (float64)
              ``ii[i]``  = child refs[FI] | child counts[FI] | child negative counts[FI]   (int64)

so a descent reads 2-3 cache lines of keys per node plus the few lines it needs of the rest.
Unused slots are padded (keys +inf, sums and counts 0), so searches and sums run over whole rows in
fixed-length loops that the compiler unrolls and vectorises.  Fill counts live beside the rows
(``ln``, ``in_``), -1 marking a free node.

A *ref* names a node: ``2 * leaf`` or ``2 * internal + 1``.  A map is its root ref, -1 for the
empty map; every update returns the new root.  Nodes of *all* maps live in one :class:`BTreePool`
(a numba structref), whose arrays double when full; freed nodes go on per-kind free lists (linked
through ``llink`` / ``ilink``) and are reused first.  The root of each tree also keeps the tree's
totals (sum, count, negatives) in ``lsum``/``lneg`` or ``isum``/``icnt``/``ineg``, so
:func:`btree_total`, :func:`btree_len` and :func:`btree_negatives` are O(1).

Sums and exactness
------------------
Sums are never adjusted by deltas: a parent's sum entry for a child is recomputed from the child's
entries (:func:`_rowsum`, a fixed-order four-lane sum over the padded row) whenever the child
changes, so floating-point error does not accumulate over a stream of updates, and the stored sums
are a deterministic function of the tree's shape and values (:func:`btree_check` verifies them
bitwise).  Counts are integers, kept exact by deltas.

Prefix sums P(b) = sum(value[k] for k <= b) are formed, by :func:`btree_sum_le` and by
:func:`btree_first_prefix` alike, along one root-to-leaf path: at each internal node the sums of
the children lying wholly at or below b are added left to right, then the descent enters the child
holding the next key above b; at the leaf the values of keys <= b are added left to right.  So
:func:`btree_first_prefix` returns a key b such that ``btree_sum_le(b)`` is bitwise the value it
found to cross the threshold, and ``btree_sum_le`` of the key before b bitwise a value it found not
to cross: the same guarantee as :mod:`ddms.storage.ordered`.

All ``btree_*`` functions except :func:`btree_check` are ``@njit(cache=True)``, callable from
Python and from compiled (generated) code alike.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from numba import njit, types
from numba.experimental import structref

FL = 32  # leaf capacity (keys)
FI = 16  # internal node capacity (children)
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
    ("lf", types.float64[:, ::1]),  # leaf rows: keys[0:FL] (pad +inf) | values[FL:2FL] (pad 0.0)
    ("ln", types.int64[::1]),  # keys in the leaf; -1 for a free leaf
    ("llink", types.int64[::1]),  # next free leaf, -1 = none
    ("lsum", types.float64[::1]),  # a root leaf's sum of values (_rowsum)
    ("lneg", types.int64[::1]),  # a root leaf's number of negative values
    ("ik", types.float64[:, ::1]),  # internal rows: child max keys[0:FI] (pad +inf) | sums[FI:2FI]
    ("ii", types.int64[:, ::1]),  # internal rows: child refs[0:FI] | counts[FI:2FI] | negc[2FI:3FI]
    ("in_", types.int64[::1]),  # children of the internal node; -1 for a free node
    ("ilink", types.int64[::1]),  # next free internal node, -1 = none
    ("isum", types.float64[::1]),  # a root's sum of values (_rowsum of its child sums)
    ("icnt", types.int64[::1]),  # a root's number of keys
    ("ineg", types.int64[::1]),  # a root's number of negative values
    ("lcap", types.int64),  # rows of the leaf arrays
    ("l_used", types.int64),  # leaves ever handed out; leaves l_used.. are untouched
    ("l_head", types.int64),  # first free leaf, -1 = none
    ("l_free", types.int64),  # length of the leaf free list
    ("icap", types.int64),
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
    p.ik = np.empty((ni, 2 * FI), np.float64)
    p.ii = np.empty((ni, 3 * FI), np.int64)
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
    lf = p.lf
    for t in range(FL):
        lf[n, t] = _INF
        lf[n, FL + t] = 0.0
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
    ik = p.ik
    ii = p.ii
    for t in range(FI):
        ik[n, t] = _INF
        ik[n, FI + t] = 0.0
        ii[n, t] = -1
        ii[n, FI + t] = 0
        ii[n, 2 * FI + t] = 0
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
# row kernels: fixed-length loops over padded rows


@njit(cache=True, inline="always")
def _rowsum(a, r, off, f):
    """Sum of a[r, off:off+f] in a fixed order (four interleaved lanes, then (0+1)+(2+3)); padding
    zeros leave it exact.  f is a multiple of 4."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for t in range(0, f, 4):
        s0 += a[r, off + t]
        s1 += a[r, off + t + 1]
        s2 += a[r, off + t + 2]
        s3 += a[r, off + t + 3]
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, inline="always")
def _isum(a, r, off, f):
    s = 0
    for t in range(f):
        s += a[r, off + t]
    return s


@njit(cache=True, inline="always")
def _count_lt(a, r, f, x):
    """Entries of a[r, 0:f] below x (a sorted row padded with +inf)."""
    c = 0
    for t in range(f):
        c += a[r, t] < x
    return c


@njit(cache=True, inline="always")
def _count_le(a, r, f, x):
    """Entries of a[r, 0:f] at most x (padding counts when x is +inf: clamp to the fill)."""
    c = 0
    for t in range(f):
        c += a[r, t] <= x
    return c


@njit(cache=True, inline="always")
def _count_neg(a, r, off, f):
    c = 0
    for t in range(f):
        c += a[r, off + t] < 0.0
    return c


@njit(cache=True)
def _summary(p, ref):
    """(max key, sum, count, negatives) of the node ``ref``, recomputed from its row: O(F)."""
    n = ref >> 1
    if ref & 1:
        m = p.in_[n]
        return (p.ik[n, m - 1], _rowsum(p.ik, n, FI, FI), _isum(p.ii, n, FI, FI),
                _isum(p.ii, n, 2 * FI, FI))
    m = p.ln[n]
    return p.lf[n, m - 1], _rowsum(p.lf, n, FL, FL), m, _count_neg(p.lf, n, FL, FL)


@njit(cache=True)
def _refresh(p, i, j):
    """Recompute entry j of internal node i from its child."""
    mk, s, c, g = _summary(p, p.ii[i, j])
    p.ik[i, j] = mk
    p.ik[i, FI + j] = s
    p.ii[i, FI + j] = c
    p.ii[i, 2 * FI + j] = g


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


# moving entries: a leaf entry is (key, value); an internal one (max key, sum, ref, count, negc)


@njit(cache=True, inline="always")
def _lmove(lf, a, sa, b, sb, m):
    """Copy m leaf entries a[sa:sa+m] -> b[sb:sb+m] (overlap-safe within one row)."""
    if a == b and sb > sa:
        for t in range(m - 1, -1, -1):
            lf[b, sb + t] = lf[a, sa + t]
            lf[b, FL + sb + t] = lf[a, FL + sa + t]
    else:
        for t in range(m):
            lf[b, sb + t] = lf[a, sa + t]
            lf[b, FL + sb + t] = lf[a, FL + sa + t]


@njit(cache=True, inline="always")
def _lpad(lf, a, lo, hi):
    for t in range(lo, hi):
        lf[a, t] = _INF
        lf[a, FL + t] = 0.0


@njit(cache=True, inline="always")
def _imove(ik, ii, a, sa, b, sb, m):
    """Copy m internal entries a[sa:sa+m] -> b[sb:sb+m] (overlap-safe within one row)."""
    if a == b and sb > sa:
        for t in range(m - 1, -1, -1):
            ik[b, sb + t] = ik[a, sa + t]
            ik[b, FI + sb + t] = ik[a, FI + sa + t]
            ii[b, sb + t] = ii[a, sa + t]
            ii[b, FI + sb + t] = ii[a, FI + sa + t]
            ii[b, 2 * FI + sb + t] = ii[a, 2 * FI + sa + t]
    else:
        for t in range(m):
            ik[b, sb + t] = ik[a, sa + t]
            ik[b, FI + sb + t] = ik[a, FI + sa + t]
            ii[b, sb + t] = ii[a, sa + t]
            ii[b, FI + sb + t] = ii[a, FI + sa + t]
            ii[b, 2 * FI + sb + t] = ii[a, 2 * FI + sa + t]


@njit(cache=True, inline="always")
def _ipad(ik, ii, a, lo, hi):
    for t in range(lo, hi):
        ik[a, t] = _INF
        ik[a, FI + t] = 0.0
        ii[a, t] = -1
        ii[a, FI + t] = 0
        ii[a, 2 * FI + t] = 0


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
        p.lf[n, FL] = x
        p.ln[n] = 1
        p.lsum[n] = x
        p.lneg[n] = 1 if x < 0.0 else 0
        return 2 * n
    ik = p.ik
    ii = p.ii
    in_ = p.in_
    lf = p.lf
    pn = p.pn
    pj = p.pj
    d = 0
    r = root
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, FI, k)
        m = in_[i] - 1
        if j > m:
            j = m
        pn[d] = i
        pj[d] = j
        d += 1
        r = ii[i, j]
    n = r >> 1
    pos = _count_lt(lf, n, FL, k)
    if pos < FL and lf[n, pos] == k:  # found (padding is +inf: a match is a live key unless k is inf)
        if pos < p.ln[n]:
            old = lf[n, FL + pos]
            v = x if assign else old + x
            if v == 0.0:
                return _delete(p, root, d, n, pos)
            lf[n, FL + pos] = v
            dn = (1 if v < 0.0 else 0) - (1 if old < 0.0 else 0)
            s = _rowsum(lf, n, FL, FL)
            if d == 0:
                p.lsum[n] = s
                p.lneg[n] += dn
                return root
            for e in range(d - 1, -1, -1):
                i = pn[e]
                ik[i, FI + pj[e]] = s
                if dn != 0:
                    ii[i, 2 * FI + pj[e]] += dn
                s = _rowsum(ik, i, FI, FI)
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
        lf[n, pos] = k
        lf[n, FL + pos] = x
        ln[n] = m + 1
    else:
        b = _alloc_leaf(p)
        h = (FL + 1) // 2  # keys left in n
        if pos < h:
            _lmove(lf, n, h - 1, b, 0, FL - h + 1)
            _lmove(lf, n, pos, n, pos + 1, h - 1 - pos)
            lf[n, pos] = k
            lf[n, FL + pos] = x
        else:
            _lmove(lf, n, h, b, 0, pos - h)
            lf[b, pos - h] = k
            lf[b, FL + pos - h] = x
            _lmove(lf, n, pos, b, pos - h + 1, FL - pos)
        _lpad(lf, n, h, FL)
        ln[n] = h
        ln[b] = FL + 1 - h
        split = 2 * b
    dn = 1 if x < 0.0 else 0
    cm = lf[n, ln[n] - 1]  # the child's max key and sum, when it did not split
    s = _rowsum(lf, n, FL, FL)
    for e in range(d - 1, -1, -1):
        i = pn[e]
        j = pj[e]
        if split == -1:
            ik[i, j] = cm
            ik[i, FI + j] = s
            ii[i, FI + j] += 1
            ii[i, 2 * FI + j] += dn
            m = in_[i]
            cm = ik[i, m - 1]
            s = _rowsum(ik, i, FI, FI)
            continue
        _refresh(p, i, j)
        m = in_[i]
        if m < FI:
            _imove(ik, ii, i, j + 1, i, j + 2, m - j - 1)
            ii[i, j + 1] = split
            in_[i] = m + 1
            _refresh(p, i, j + 1)
            split = -1
            cm = ik[i, m]
            s = _rowsum(ik, i, FI, FI)
        else:
            b = _alloc_int(p)
            h = (FI + 1) // 2
            if j + 1 < h:
                _imove(ik, ii, i, h - 1, b, 0, FI - h + 1)
                _imove(ik, ii, i, j + 1, i, j + 2, h - 2 - j)
                ii[i, j + 1] = split
                in_[i] = h
                _refresh(p, i, j + 1)
            else:
                q = j + 1 - h
                _imove(ik, ii, i, h, b, 0, q)
                ii[b, q] = split
                _imove(ik, ii, i, j + 1, b, q + 1, FI - j - 1)
                in_[b] = FI + 1 - h
                _refresh(p, b, q)
            _ipad(ik, ii, i, h, FI)
            in_[i] = h
            in_[b] = FI + 1 - h
            split = 2 * b + 1
    if split != -1:  # the root split: a new root above the two halves
        t = _alloc_int(p)
        ii[t, 0] = root
        ii[t, 1] = split
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
    if j + 1 < m:
        ja = j
    else:
        ja = j - 1
    a = ii[i, ja]
    b = ii[i, ja + 1]
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
    dn = -1 if lf[n, FL + pos] < 0.0 else 0
    _lmove(lf, n, pos + 1, n, pos, m - pos - 1)
    _lpad(lf, n, m - 1, m)
    m -= 1
    ln[n] = m
    s = _rowsum(lf, n, FL, FL)
    if d == 0:
        if m == 0:
            _free_leaf(p, n)
            return -1
        p.lsum[n] = s
        p.lneg[n] += dn
        return root
    cm = lf[n, m - 1] if m > 0 else _INF
    under = m < LMIN
    for e in range(d - 1, -1, -1):
        i = pn[e]
        j = pj[e]
        if under:
            _rebalance(p, i, j)
        else:
            ik[i, j] = cm
            ik[i, FI + j] = s
            ii[i, FI + j] -= 1
            ii[i, 2 * FI + j] += dn
        m = in_[i]
        under = m < IMIN
        cm = ik[i, m - 1]
        s = _rowsum(ik, i, FI, FI)
    t = root >> 1
    if in_[t] == 1:  # the root has a single child left: it becomes the root
        root = ii[t, 0]
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
    ii = pool.ii
    in_ = pool.in_
    sn = pool.pn
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
        c = ii[i, j]
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
    """value[key], 0.0 if absent.  O(F log_F n): one descent."""
    if root == -1:
        return 0.0
    ik = pool.ik
    ii = pool.ii
    in_ = pool.in_
    lf = pool.lf
    r = root
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, FI, key)
        m = in_[i] - 1
        r = ii[i, j if j < m else m]
    n = r >> 1
    pos = _count_lt(lf, n, FL, key)
    if pos < pool.ln[n] and lf[n, pos] == key:
        return lf[n, FL + pos]
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
    ii = pool.ii
    r = root
    while r & 1:
        r = ii[r >> 1, 0]
    return True, pool.lf[r >> 1, 0]


@njit(cache=True)
def btree_max(pool: BTreePool, root: int) -> tuple[bool, float]:
    """(True, largest key), or (False, nan) for the empty map.  O(1): the root's last max key."""
    if root == -1:
        return False, np.nan
    n = root >> 1
    if root & 1:
        return True, pool.ik[n, pool.in_[n] - 1]
    return True, pool.lf[n, pool.ln[n] - 1]


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
            keys[t] = lf[n, t]
            vals[t] = lf[n, FL + t]
        return keys, vals
    ii = pool.ii
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
        c = ii[i, j]
        if c & 1:
            top += 1
            sn[top] = c >> 1
            sj[top] = 0
        else:
            n = c >> 1
            for t in range(ln[n]):
                keys[w] = lf[n, t]
                vals[w] = lf[n, FL + t]
                w += 1
    return keys, vals


# --------------------------------------------------------------------------------------------
# range-cumulative queries
#
# Each is one root-to-leaf descent.  At an internal node the children wholly inside the range
# are added from their sum entries, in key order for the "below" queries (left to right) and in
# reverse for the "above" ones, and the descent enters the one child that straddles the bound.


@njit(cache=True)
def _sum_below(pool, root, x, inclusive):
    if root == -1:
        return 0.0
    ik = pool.ik
    ii = pool.ii
    in_ = pool.in_
    lf = pool.lf
    acc = 0.0
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        # children with max key below x (or at most x) lie wholly in the range
        j = _count_le(ik, i, FI, x) if inclusive else _count_lt(ik, i, FI, x)
        if j > m:
            j = m
        for t in range(j):
            acc = acc + ik[i, FI + t]
        if j == m:
            return acc
        r = ii[i, j]
    n = r >> 1
    j = _count_le(lf, n, FL, x) if inclusive else _count_lt(lf, n, FL, x)
    m = pool.ln[n]
    if j > m:
        j = m
    for t in range(j):
        acc = acc + lf[n, FL + t]
    return acc


@njit(cache=True)
def _sum_above(pool, root, x, inclusive):
    if root == -1:
        return 0.0
    ik = pool.ik
    ii = pool.ii
    in_ = pool.in_
    lf = pool.lf
    acc = 0.0
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        # children after the first one whose max key is above x (at least x) lie wholly in range
        j = _count_lt(ik, i, FI, x) if inclusive else _count_le(ik, i, FI, x)
        if j >= m:
            return acc
        for t in range(m - 1, j, -1):
            acc = acc + ik[i, FI + t]
        r = ii[i, j]
    n = r >> 1
    j = _count_lt(lf, n, FL, x) if inclusive else _count_le(lf, n, FL, x)
    for t in range(pool.ln[n] - 1, j - 1, -1):
        acc = acc + lf[n, FL + t]
    return acc


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
    ii = pool.ii
    in_ = pool.in_
    lf = pool.lf
    acc = 0.0  # sum of the values left of the current node
    known = False  # whether the current node's running sum through its last key is known to cross
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        last = m - 1 if known else m
        j = last
        for t in range(last):
            s = acc + ik[i, FI + t]
            if s > y or (not strict and s == y):
                j = t
                break
            acc = s
        if j == m:  # at the root, no running sum crossed
            return False, np.nan
        known = True  # the child holds b; if j == m - 1 was not tested, the parent's sum crossed
        r = ii[i, j]
    n = r >> 1
    m = pool.ln[n]
    last = m - 1 if known else m
    for t in range(last):
        s = acc + lf[n, FL + t]
        if s > y or (not strict and s == y):
            return True, lf[n, t]
        acc = s
    if not known:
        return False, np.nan
    return True, lf[n, m - 1]


# --------------------------------------------------------------------------------------------
# invariant checker (tests)


def _py_rowsum(row: np.ndarray) -> float:
    """_rowsum in Python floats: the same operations in the same order, so bitwise equal."""
    s = [0.0, 0.0, 0.0, 0.0]
    for t in range(0, len(row), 4):
        for lane in range(4):
            s[lane] += float(row[t + lane])
    return (s[0] + s[1]) + (s[2] + s[3])


def btree_check(pool: BTreePool, root: int) -> None:
    """Assert every invariant of the pool's free lists and of the tree at ``root``.

    Keys strictly increasing within and across nodes, all leaves at one depth, fill bounds (root
    leaf >= 1 key, internal root >= 2 children, other nodes >= LMIN / IMIN, all <= FL / FI),
    padding of unused slots, no zero or NaN value stored, every entry's max key, count and
    negatives equal to its child's recomputed ones and its sum bitwise equal to the child's
    :func:`_rowsum`, the root's totals likewise, no node reachable twice or both reachable and free,
    free lists without loops and of the recorded lengths, reachable + free within the capacity.
    Pure Python, O(n + free nodes): for tests.
    """
    lf, ln, ik, ii, in_ = pool.lf, pool.ln, pool.ik, pool.ii, pool.in_
    lcap, icap = pool.lcap, pool.icap
    assert lf.shape == (lcap, 2 * FL) and ik.shape == (icap, 2 * FI) and ii.shape == (icap, 3 * FI)
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
    prev_key = [-np.inf, False]  # last key seen in order, whether any

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
            keys = [float(v) for v in lf[n, :FL]]
            vals = [float(v) for v in lf[n, FL:]]
            for t in range(m):
                k, v = keys[t], vals[t]
                assert k == k, f"leaf {n} stores a NaN key"
                assert v != 0.0 and v == v, f"leaf {n} stores value {v}"
                assert not prev_key[1] or prev_key[0] < k, f"key {k} out of order after {prev_key[0]}"
                prev_key[0], prev_key[1] = k, True
            assert all(k == np.inf for k in keys[m:]) and all(v == 0.0 for v in vals[m:]), (
                f"leaf {n} padding broken"
            )
            return keys[m - 1], _py_rowsum(lf[n, FL:]), m, sum(v < 0.0 for v in vals[:m])
        assert 0 <= n < pool.i_used, f"internal node {n} outside [0, {pool.i_used})"
        assert n not in seen_i, f"internal node {n} reachable twice"
        assert n not in ifree, f"internal node {n} both reachable and free"
        seen_i.add(n)
        m = int(in_[n])
        assert (2 if is_root else IMIN) <= m <= FI, f"internal node {n} has {m} children"
        assert depth < MAXD, "tree deeper than MAXD"
        cnt = neg = 0
        for j in range(m):
            mk, s, c, g = visit(int(ii[n, j]), depth + 1, False)
            assert ik[n, j] == mk, f"node {n} entry {j}: max key {ik[n, j]}, expected {mk}"
            assert ik[n, FI + j] == s, f"node {n} entry {j}: sum {ik[n, FI + j]}, expected {s}"
            assert ii[n, FI + j] == c, f"node {n} entry {j}: count {ii[n, FI + j]}, expected {c}"
            assert ii[n, 2 * FI + j] == g, f"node {n} entry {j}: negatives {ii[n, 2 * FI + j]}, expected {g}"
            cnt += c
            neg += g
        for j in range(m, FI):
            assert ik[n, j] == np.inf and ik[n, FI + j] == 0.0, f"node {n} padding broken"
            assert ii[n, FI + j] == 0 and ii[n, 2 * FI + j] == 0, f"node {n} padding broken"
        return float(ik[n, m - 1]), _py_rowsum(ik[n, FI:]), cnt, neg

    _, s, c, g = visit(int(root), 0, True)
    assert len(leaf_depths) == 1, f"leaves at depths {sorted(leaf_depths)}"
    n = root >> 1
    if root & 1:
        assert pool.isum[n] == s and pool.icnt[n] == c and pool.ineg[n] == g, "root totals stale"
    else:
        assert pool.lsum[n] == s and pool.lneg[n] == g, "root totals stale"
    assert len(seen_l) + len(lfree) <= lcap and len(seen_i) + len(ifree) <= icap
