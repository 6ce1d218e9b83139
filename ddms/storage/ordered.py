"""Range-cumulative ordered maps: treaps with subtree aggregates in one numba node pool.

An ordered map sends a float64 key (a price, say) to a nonzero float64 value and answers, besides
point lookups, *range-cumulative* queries in O(log n) expected time: the sum of the values whose
key is below / above a bound, and the smallest key at which the running (prefix) sum crosses a
threshold.  Views such as "volume at or better than price p" or "price at which cumulative
volume reaches q" are maintained with these.

Structure
---------
Each map is a *treap*: a binary search tree on the keys that is also a max-heap on random node
priorities, which keeps its expected depth O(log n) whatever the order of updates.  Every node
carries aggregates of its subtree -- ``sum`` (of values), ``size`` (node count) and ``negc``
(count of negative values) -- so a range query adds up whole left or right subtrees while it
walks a single root-to-leaf path.

Nodes of *all* maps live in one :class:`OrderedPool`: parallel numpy arrays (``key``, ``val``,
``sum``, ``size``, ``negc``, ``left``, ``right``, ``prio``) inside a numba structref, so that a
compiled program carries one object however many maps (and map slices) it keeps.  A map is just
its root, an int64 node index, with -1 for the empty map; every update returns the new root.
The arrays double when full; deleted nodes go on a free list, linked through ``left``, and are
reused first.  ``stack`` is scratch space for update paths and traversals: as large as the pool,
so it can hold any tree's depth and no traversal needs recursion or a bounds check.

Aggregates are always recomputed from a node's children (never adjusted by a delta), so floating
point error does not accumulate over a long stream of updates.  Priorities come from a xorshift64
generator kept in the pool, so runs are reproducible.

Like DBToaster maps, a map holds only nonzero values: an update that leaves exactly 0.0 removes
the key.  Keys must not be NaN (updates raise ValueError); values should be finite.

All ``ordered_*`` functions except :func:`ordered_check` are ``@njit(cache=True)``, callable from
Python and from compiled (generated) code alike.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import numpy as np
from numba import njit, types
from numba.experimental import structref


@structref.register
class OrderedPoolType(types.StructRef):
    """numba type of :class:`OrderedPool`."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class OrderedPool(structref.StructRefProxy):
    """Python handle on a node pool; every field is readable as an attribute (``pool.key``...).

    Create pools with :func:`ordered_new`.  Field arrays are shared with the pool, not copied, but
    are replaced by bigger ones when the pool grows: read them again after updates.
    """


_FIELDS = [
    ("key", types.float64[::1]),  # node key
    ("val", types.float64[::1]),  # node value, never 0.0 in a live node
    ("sum", types.float64[::1]),  # sum of val over the subtree
    ("size", types.int64[::1]),  # nodes in the subtree (0 for a freed node)
    ("negc", types.int64[::1]),  # nodes with val < 0 in the subtree
    ("left", types.int64[::1]),  # left child, or next free node for a freed node; -1 = none
    ("right", types.int64[::1]),  # right child; -1 = none
    ("prio", types.int64[::1]),  # heap priority: a parent's is >= its children's
    ("stack", types.int64[::1]),  # scratch: update paths and traversal stacks, length capacity
    ("capacity", types.int64),  # length of the node arrays
    ("n_used", types.int64),  # nodes ever handed out; nodes n_used.. are untouched
    ("free_head", types.int64),  # first node of the free list, -1 = empty
    ("n_free", types.int64),  # length of the free list
    ("rng", types.uint64),  # xorshift64 state for priorities
]
structref.define_proxy(OrderedPool, OrderedPoolType, [name for name, _ in _FIELDS])
_POOL_TYPE = OrderedPoolType(_FIELDS)


@njit(cache=True)
def _fields(p):
    return (p.key, p.val, p.sum, p.size, p.negc, p.left, p.right, p.prio, p.stack,
            p.capacity, p.n_used, p.free_head, p.n_free, p.rng)


# Python-side read access to the fields (structref proxies have none by default).
for _i, (_name, _) in enumerate(_FIELDS):
    setattr(OrderedPool, _name, property(lambda self, i=_i: _fields(self)[i]))
del _i, _name

_SEED = 0x2545F4914F6CDD1D


# --------------------------------------------------------------------------------------------
# pool management


@njit(cache=True)
def ordered_new(capacity: int) -> OrderedPool:
    """A new empty pool with room for ``capacity`` nodes (at least 1) before it first grows."""
    cap = max(capacity, 1)
    p = structref.new(_POOL_TYPE)
    p.key = np.empty(cap, np.float64)
    p.val = np.empty(cap, np.float64)
    p.sum = np.empty(cap, np.float64)
    p.size = np.zeros(cap, np.int64)
    p.negc = np.empty(cap, np.int64)
    p.left = np.empty(cap, np.int64)
    p.right = np.empty(cap, np.int64)
    p.prio = np.empty(cap, np.int64)
    p.stack = np.empty(cap, np.int64)
    p.capacity = cap
    p.n_used = 0
    p.free_head = -1
    p.n_free = 0
    p.rng = np.uint64(_SEED)
    return p


@njit(cache=True)
def _grow_f(a, cap):
    out = np.empty(cap, np.float64)
    out[: a.size] = a
    return out


@njit(cache=True)
def _grow_i(a, cap):
    out = np.zeros(cap, np.int64)
    out[: a.size] = a
    return out


@njit(cache=True)
def _grow(p):
    """Double the node arrays: O(capacity), amortised O(1) per node."""
    cap = 2 * p.capacity
    p.key = _grow_f(p.key, cap)
    p.val = _grow_f(p.val, cap)
    p.sum = _grow_f(p.sum, cap)
    p.size = _grow_i(p.size, cap)
    p.negc = _grow_i(p.negc, cap)
    p.left = _grow_i(p.left, cap)
    p.right = _grow_i(p.right, cap)
    p.prio = _grow_i(p.prio, cap)
    p.stack = np.empty(cap, np.int64)
    p.capacity = cap


@njit(cache=True)
def _alloc(p):
    """A node off the free list, else a fresh one; the caller has made sure one is available."""
    n = p.free_head
    if n != -1:
        p.free_head = p.left[n]
        p.n_free -= 1
        return n
    n = p.n_used
    p.n_used = n + 1
    return n


@njit(cache=True)
def _release(p, n):
    """Put node ``n`` (already unlinked from its tree) on the free list."""
    p.size[n] = 0
    p.left[n] = p.free_head
    p.free_head = n
    p.n_free += 1


@njit(cache=True)
def _next_prio(p):
    """Next xorshift64 draw, as a nonnegative int64 priority."""
    x = p.rng
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    p.rng = x
    return np.int64(x >> np.uint64(1))


@njit(cache=True)
def _pull(val, sm, size, negc, left, right, n):
    """Recompute node ``n``'s aggregates from its value and its children's aggregates."""
    v = val[n]
    s = v
    c = 1
    g = 1 if v < 0.0 else 0
    lc = left[n]
    if lc != -1:
        s = sm[lc] + s
        c += size[lc]
        g += negc[lc]
    rc = right[n]
    if rc != -1:
        s = s + sm[rc]
        c += size[rc]
        g += negc[rc]
    sm[n] = s
    size[n] = c
    negc[n] = g


@njit(cache=True)
def _merge(val, sm, size, negc, left, right, prio, stack, base, a, b):
    """Join treaps ``a`` and ``b`` (every key of ``a`` below every key of ``b``); return the root.

    Walks the right spine of ``a`` and the left spine of ``b``, O(log n) expected, pushing the
    nodes it relinks on ``stack`` from index ``base`` and then recomputing them bottom-up.
    """
    top = base
    root = -1
    parent = -1
    to_right = False
    while True:
        if a == -1:
            x = b
        elif b == -1:
            x = a
        elif prio[a] >= prio[b]:
            x = a
        else:
            x = b
        if parent == -1:
            root = x
        elif to_right:
            right[parent] = x
        else:
            left[parent] = x
        if a == -1 or b == -1:
            break
        stack[top] = x
        top += 1
        parent = x
        if x == a:  # a keeps its left subtree; its right one is merged with b
            to_right = True
            a = right[a]
        else:  # b keeps its right subtree; its left one is merged with a
            to_right = False
            b = left[b]
    for i in range(top - 1, base - 1, -1):
        _pull(val, sm, size, negc, left, right, stack[i])
    return root


@njit(cache=True)
def _update(p, root, k, x, assign):
    """value[k] = x (``assign``) or value[k] += x; remove k if the result is 0.0.  New root.

    One descent records the search path for ``k`` on ``p.stack``.  A found key is updated (or
    removed by merging its two subtrees in its place); a new key gets a random priority and is
    inserted where the path's priorities drop below it, splitting the subtree there by ``k``
    (a split follows the search path, which is already recorded).  Then the aggregates of every
    touched node are recomputed bottom-up.  O(log n) expected: the treap's expected depth.
    """
    if k != k:
        raise ValueError("ordered map key is NaN")
    if p.free_head == -1 and p.n_used == p.capacity:
        _grow(p)  # before binding the arrays below, and before any insertion needs a node
    key = p.key
    val = p.val
    sm = p.sum
    size = p.size
    negc = p.negc
    left = p.left
    right = p.right
    prio = p.prio
    path = p.stack  # path and merge scratch lie in one tree, so they fit in capacity slots

    d = 0
    n = root
    while n != -1:
        path[d] = n
        d += 1
        kn = key[n]
        if k < kn:
            n = left[n]
        elif k > kn:
            n = right[n]
        else:
            break

    if n != -1:  # found: n == path[d - 1]
        v = x if assign else val[n] + x
        if v != 0.0:
            val[n] = v
            for i in range(d - 1, -1, -1):
                _pull(val, sm, size, negc, left, right, path[i])
            return root
        d -= 1
        m = _merge(val, sm, size, negc, left, right, prio, path, d, left[n], right[n])
        _release(p, n)
        if d == 0:
            return m
        par = path[d - 1]
        if left[par] == n:
            left[par] = m
        else:
            right[par] = m
        for i in range(d - 1, -1, -1):
            _pull(val, sm, size, negc, left, right, path[i])
        return root

    if x == 0.0:  # absent key set to / incremented by zero: nothing to store
        return root
    nn = _alloc(p)
    pr = _next_prio(p)
    i = 0
    while i < d and prio[path[i]] >= pr:
        i += 1
    # split the subtree rooted at path[i] by k: nodes path[i:] go to the < k or > k side
    lroot = -1
    rroot = -1
    lt = -1
    rt = -1
    for j in range(i, d):
        y = path[j]
        if key[y] < k:
            if lt == -1:
                lroot = y
            else:
                right[lt] = y
            lt = y
        else:
            if rt == -1:
                rroot = y
            else:
                left[rt] = y
            rt = y
    if lt != -1:
        right[lt] = -1
    if rt != -1:
        left[rt] = -1
    for j in range(d - 1, i - 1, -1):
        _pull(val, sm, size, negc, left, right, path[j])
    key[nn] = k
    val[nn] = x
    prio[nn] = pr
    left[nn] = lroot
    right[nn] = rroot
    _pull(val, sm, size, negc, left, right, nn)
    if i == 0:
        return nn
    par = path[i - 1]
    if k < key[par]:
        left[par] = nn
    else:
        right[par] = nn
    for j in range(i - 1, -1, -1):
        _pull(val, sm, size, negc, left, right, path[j])
    return root


# --------------------------------------------------------------------------------------------
# updates


@njit(cache=True)
def ordered_add(pool: OrderedPool, root: int, key: float, delta: float) -> int:
    """value[key] += delta, creating the key if absent and removing it if the result is exactly 0.0.

    Returns the new root.  O(log n) expected: one search path plus, on insertion or removal, a
    split or merge along paths of the same expected length.
    """
    return _update(pool, root, key, delta, False)


@njit(cache=True)
def ordered_set(pool: OrderedPool, root: int, key: float, value: float) -> int:
    """value[key] = value (0.0 removes the key).  Returns the new root.  O(log n) expected."""
    return _update(pool, root, key, value, True)


@njit(cache=True)
def ordered_free(pool: OrderedPool, root: int) -> int:
    """Release every node of the tree to the free list; returns -1, the empty tree.  O(n)."""
    if root == -1:
        return -1
    stack = pool.stack  # holds only distinct unreleased nodes of the tree: fits in capacity
    left = pool.left
    right = pool.right
    size = pool.size
    head = pool.free_head
    count = 0
    stack[0] = root
    top = 1
    while top > 0:
        top -= 1
        n = stack[top]
        a = left[n]
        b = right[n]
        if a != -1:
            stack[top] = a
            top += 1
        if b != -1:
            stack[top] = b
            top += 1
        size[n] = 0
        left[n] = head
        head = n
        count += 1
    pool.free_head = head
    pool.n_free += count
    return -1


# --------------------------------------------------------------------------------------------
# point and whole-map queries


@njit(cache=True)
def ordered_get(pool: OrderedPool, root: int, key: float) -> float:
    """value[key], 0.0 if absent.  O(log n) expected: one search path."""
    keys = pool.key
    left = pool.left
    right = pool.right
    n = root
    while n != -1:
        kn = keys[n]
        if key < kn:
            n = left[n]
        elif key > kn:
            n = right[n]
        else:
            return pool.val[n]
    return 0.0


@njit(cache=True)
def ordered_total(pool: OrderedPool, root: int) -> float:
    """Sum of all values.  O(1): the root's aggregate."""
    return 0.0 if root == -1 else pool.sum[root]


@njit(cache=True)
def ordered_len(pool: OrderedPool, root: int) -> int:
    """Number of keys.  O(1): the root's aggregate."""
    return 0 if root == -1 else pool.size[root]


@njit(cache=True)
def ordered_negatives(pool: OrderedPool, root: int) -> int:
    """Number of keys with a negative value.  O(1): the root's aggregate.

    When it is 0, prefix sums are nondecreasing in the key and :func:`ordered_first_prefix` applies.
    """
    return 0 if root == -1 else pool.negc[root]


@njit(cache=True)
def ordered_min(pool: OrderedPool, root: int) -> tuple[bool, float]:
    """(True, smallest key), or (False, nan) for the empty map.  O(log n) expected: the left spine."""
    if root == -1:
        return False, np.nan
    left = pool.left
    n = root
    while left[n] != -1:
        n = left[n]
    return True, pool.key[n]


@njit(cache=True)
def ordered_max(pool: OrderedPool, root: int) -> tuple[bool, float]:
    """(True, largest key), or (False, nan) for the empty map.  O(log n) expected: the right spine."""
    if root == -1:
        return False, np.nan
    right = pool.right
    n = root
    while right[n] != -1:
        n = right[n]
    return True, pool.key[n]


@njit(cache=True)
def ordered_items(pool: OrderedPool, root: int) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) as new float64 arrays in increasing key order.  O(n), iterative in-order walk."""
    n_items = 0 if root == -1 else pool.size[root]
    keys = np.empty(n_items, np.float64)
    vals = np.empty(n_items, np.float64)
    key = pool.key
    val = pool.val
    left = pool.left
    right = pool.right
    stack = pool.stack  # holds one root-to-node path: fits in capacity
    top = 0
    i = 0
    n = root
    while top > 0 or n != -1:
        while n != -1:
            stack[top] = n
            top += 1
            n = left[n]
        top -= 1
        n = stack[top]
        keys[i] = key[n]
        vals[i] = val[n]
        i += 1
        n = right[n]
    return keys, vals


# --------------------------------------------------------------------------------------------
# range-cumulative queries
#
# Each walks one root-to-leaf path, O(log n) expected, adding a whole child subtree's ``sum`` and
# the node's own value whenever a node falls in the range.  The running sum is always formed as
# ``(acc + sum[child]) + val[node]``, in the same order by the prefix queries and by
# ordered_first_prefix, so ordered_sum_le(b) at the key b found by ordered_first_prefix is
# bitwise the prefix sum it compared against the threshold.


@njit(cache=True)
def _sum_below(pool, root, x, inclusive):
    key = pool.key
    val = pool.val
    sm = pool.sum
    left = pool.left
    right = pool.right
    acc = 0.0
    n = root
    while n != -1:
        kn = key[n]
        if kn < x or (inclusive and kn == x):
            lc = left[n]
            if lc != -1:
                acc = acc + sm[lc]
            acc = acc + val[n]
            n = right[n]
        else:
            n = left[n]
    return acc


@njit(cache=True)
def _sum_above(pool, root, x, inclusive):
    key = pool.key
    val = pool.val
    sm = pool.sum
    left = pool.left
    right = pool.right
    acc = 0.0
    n = root
    while n != -1:
        kn = key[n]
        if kn > x or (inclusive and kn == x):
            rc = right[n]
            if rc != -1:
                acc = acc + sm[rc]
            acc = acc + val[n]
            n = left[n]
        else:
            n = right[n]
    return acc


@njit(cache=True)
def ordered_sum_lt(pool: OrderedPool, root: int, x: float) -> float:
    """Sum of the values with key < x.  O(log n) expected."""
    return _sum_below(pool, root, x, False)


@njit(cache=True)
def ordered_sum_le(pool: OrderedPool, root: int, x: float) -> float:
    """Sum of the values with key <= x.  O(log n) expected."""
    return _sum_below(pool, root, x, True)


@njit(cache=True)
def ordered_sum_gt(pool: OrderedPool, root: int, x: float) -> float:
    """Sum of the values with key > x.  O(log n) expected."""
    return _sum_above(pool, root, x, False)


@njit(cache=True)
def ordered_sum_ge(pool: OrderedPool, root: int, x: float) -> float:
    """Sum of the values with key >= x.  O(log n) expected."""
    return _sum_above(pool, root, x, True)


@njit(cache=True)
def ordered_first_prefix(pool: OrderedPool, root: int, y: float, strict: bool) -> tuple[bool, float]:
    """Smallest key b whose inclusive prefix sum P(b) = sum(value[k] for k <= b) is > y (``strict``)
    or >= y; (True, b), or (False, nan) if no key qualifies.

    Requires ``ordered_negatives(pool, root) == 0``: P is then nondecreasing in b, so one descent
    decides at each node whether b is that node's key or lies left or right of it.  O(log n)
    expected.  With negative values the answer is some key where P crosses y, not necessarily the
    first.
    """
    key = pool.key
    val = pool.val
    sm = pool.sum
    left = pool.left
    right = pool.right
    acc = 0.0  # sum of the values left of the current subtree
    found = False
    best = np.nan
    n = root
    while n != -1:
        lc = left[n]
        s = acc
        if lc != -1:
            s = s + sm[lc]
        s = s + val[n]  # P(key[n])
        if s > y or (not strict and s == y):
            found = True
            best = key[n]
            n = lc
        else:
            acc = s
            n = right[n]
    return found, best


# --------------------------------------------------------------------------------------------
# invariant checker (tests)


def ordered_check(pool: OrderedPool, root: int) -> None:
    """Assert every invariant of the pool's free list and of the tree at ``root``.

    BST order of keys, heap order of priorities, ``size``/``negc`` equal to recomputed counts and
    ``sum`` to recomputed sums (up to a relative tolerance), no zero or NaN value stored, no node
    reachable twice or both reachable and free, reachable + free nodes within the capacity.
    Pure Python, O(n + free nodes): for tests.
    """
    cap = pool.capacity
    n_used = pool.n_used
    key, val, sm = pool.key, pool.val, pool.sum
    size, negc, left, right, prio = pool.size, pool.negc, pool.left, pool.right, pool.prio
    for arr in (key, val, sm, size, negc, left, right, prio, pool.stack):
        assert len(arr) == cap, "node array length differs from capacity"
    assert 0 <= n_used <= cap, f"n_used {n_used} outside [0, {cap}]"

    free: set[int] = set()
    f = pool.free_head
    while f != -1:
        assert 0 <= f < n_used, f"free node {f} outside [0, {n_used})"
        assert f not in free, f"free list loops at node {f}"
        free.add(f)
        f = int(left[f])
    assert len(free) == pool.n_free, f"free list has {len(free)} nodes, n_free says {pool.n_free}"
    if root == -1:
        return

    # preorder walk with key bounds; children come after their parent in `order`
    order: list[int] = []
    seen: set[int] = set()
    todo: list[tuple[int, float | None, float | None]] = [(int(root), None, None)]
    while todo:
        n, lo, hi = todo.pop()
        assert 0 <= n < n_used, f"node {n} outside [0, {n_used})"
        assert n not in seen, f"node {n} reachable twice"
        assert n not in free, f"node {n} both reachable and free"
        seen.add(n)
        order.append(n)
        k = float(key[n])
        assert (lo is None or lo < k) and (hi is None or k < hi), f"key {k} out of BST order"
        v = float(val[n])
        assert v != 0.0 and v == v, f"node {n} stores value {v}"
        for child, clo, chi in ((int(left[n]), lo, k), (int(right[n]), k, hi)):
            if child != -1:
                assert prio[child] <= prio[n], f"heap order broken at node {n} -> {child}"
                todo.append((child, clo, chi))
    assert len(seen) + len(free) <= cap, "reachable + free nodes exceed capacity"

    expect_size: dict[int, int] = {}
    expect_negc: dict[int, int] = {}
    expect_sum: dict[int, float] = {}
    scale: dict[int, float] = {}  # sum of |val| over the subtree, for the tolerance
    for n in reversed(order):
        v = float(val[n])
        s, c, g, a = v, 1, int(v < 0.0), abs(v)
        for child in (int(left[n]), int(right[n])):
            if child != -1:
                s += expect_sum[child]
                c += expect_size[child]
                g += expect_negc[child]
                a += scale[child]
        expect_sum[n], expect_size[n], expect_negc[n], scale[n] = s, c, g, a
        assert size[n] == c, f"node {n}: size {size[n]}, expected {c}"
        assert negc[n] == g, f"node {n}: negc {negc[n]}, expected {g}"
        assert abs(sm[n] - s) <= 1e-9 * a, f"node {n}: sum {sm[n]}, expected {s}"
