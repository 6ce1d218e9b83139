"""Range-cumulative ordered maps as counted B+-trees in one numba node pool.

Built for cache efficiency: a balanced binary tree (our first version was a treap) visits
~2.5 log2(n) nodes scattered over memory per operation, a B+-tree ~log_F(n) nodes of a few adjacent
cache lines each (at 1M keys: ~1.6 us per order-book event instead of ~17 us).

Node sizes (``FL``/``FI``) were chosen by measurement: every update scans and re-sums whole
rows, so a row costs in proportion to its width even when the book is small.  Leaves of 32 keys
and internal nodes of 16 children (512 and 384 bytes with one column) made SOBI on a ~60-level
synthetic book 1.4-1.5x faster than 64/32, and per-event cost at 1M distinct prices lower too (one
more level, but each row half as long): ``python -m bench --only depth`` and the README's table.

Editing this file: numba caches every caller together with a copy of its callees' machine
code, so njit code in *other* files that called into this one would keep stale copies; the
range sums and the threshold search generated programs use therefore live here, and generated
programs are named by a hash of this file.

An ordered map sends a float64 key to nonzero float64 values in ``C`` *columns* (``C`` fixed per
pool, 1 by default) and answers, per column, point lookups and *range-cumulative* queries: the sum
of the values whose key is below / above a bound, and the smallest key at which the running
(prefix) sum crosses a threshold.  Several maps updated together at the same keys (VWAP's volume
and price * volume per price level) share one tree as its columns, so that an update is one
descent instead of one per map.  Each column behaves as a map of its own: like DBToaster maps it
holds only nonzero values, and every query of column ``c`` sees only the keys whose value in
``c`` is nonzero.  A key stays in the tree while any of its columns is nonzero: an update that
leaves all of them exactly 0.0 removes it.  Keys must not be NaN (updates raise ValueError); values
should be finite.  Query bounds may be NaN: they match no key.

Structure
---------
Leaves hold up to ``FL`` entries (a key and its ``C`` values) in increasing key order; internal
nodes hold up to ``FI`` entries, one per child, in key order: the child's largest key, the sums of
its values per column, and the child itself, plus per column the number of nonzero and of negative
values below the child.  All leaves lie at the same depth.  Every node but the root is at least a
quarter full (``LMIN`` / ``IMIN`` entries); an internal root has at least two children.  A node
that falls below that after a deletion takes entries from a neighbour, or merges with it if the
two fit in three quarters of a node, so that a node just split (half full) or just merged (at
most 3/4 full) is not split or merged again by the next few updates at the same place.

Every node is one row of a 2-D array, in segments of ``FL`` (``FI``) slots, keys first, so that a
search reads the keys alone, packed into the fewest cache lines (``lw = C + 1``, ``iw = C + 2``):

    leaf      ``lf[l]`` = keys[FL] | v_0[FL] | .. | v_C-1[FL]                  (lw FL float64)
    internal  ``ik[i]`` = max keys[FI] | sum_0[FI] | .. | sum_C-1[FI] | children[FI]
                          (iw FI float64; a child ref is stored as a float, exact below 2**53)
              ``ii[i]`` = per column c: nonzero counts[FI] | negative counts[FI]
                          (2 C FI int64, read only by insertions, deletions, sign changes and the
                          per-column count, min and max queries)

Measured against entries interleaved (key, values, child per slot): a descent at 1M distinct
keys 524 -> 367 ns per lookup, at 1k keys 81 -> 57 ns; the keys of the bottom internal level
then fit in the L2 cache, and row sums and moves run over contiguous memory.

The number of columns is part of a pool's numba type (:func:`_pool_type`), so code compiled for a
pool sees the widths as constants.

A node search compares the bound with the last key of every block of four keys, then with the
keys of the one block that holds it (:func:`_count_lt`: fixed-length loops, no unpredictable
branches); a row's keys lie in 4 (leaf) or 2 (internal) cache lines, fetched together, so a node
costs about one memory latency.  Unused slots are padded (keys +inf, values and sums 0.0,
children -1), so sums and searches run over whole rows.  Fill counts live beside the rows
(``ln``, ``in_``), -1 marking a free node.

A *ref* names a node: ``2 * leaf`` or ``2 * internal + 1``.  A map is its root ref, -1 for the
empty map; every update returns the new root.  Nodes of *all* maps of a pool live in one
:class:`BTreePool` (a numba structref), whose arrays double when full; freed nodes go on per-kind
free lists (linked through ``llink`` / ``ilink``) and are reused first, so deleting every key leaks
nothing.  A tree's totals (:func:`btree_total`, :func:`btree_len`, :func:`btree_negatives`) are
recomputed from its root row: O(F).

Sums and exactness
------------------
Sums are never adjusted by deltas: a parent's sum entry for a child is recomputed from the child's
entries (:func:`_rowsum`, a fixed-order four-lane sum over the padded row) after the child
changes, so floating-point error does not accumulate over a stream of updates, and the stored sums
are a deterministic function of the tree's shape and values (:func:`btree_check` verifies them
bitwise).  Counts are integers, kept exact by deltas.

"After" is lazy for up to ``PMAX`` leaves per pool: an in-place update (the key exists and stays)
leaves its leaf *pending*, its path's sums and counts stale.  The next in-place update in any
pending leaf skips the descent and the path (order-book updates cluster near the touch: on the
finance data 97% of consecutive updates of a side are within 16 price levels of each other); one
in another leaf descends by key (in-place updates change no key) but walks no path.  Every
operation that reads sums or counts, or changes shapes, first flushes the pending paths
(:func:`_flush`); point lookups read leaves only and need not.  Between two queries, a run of
updates spread over a few leaves (a shallow book updated at random levels: the synthetic stream's
54 levels in 3-4 leaves) thus walks each leaf's path once instead of once per update.

A caller that knows the keys of coming updates can have their leaves loaded ahead
(:func:`btree_prefetch`: generated ``run_batch`` does it four events ahead once a pool is
:func:`btree_big`), so that at a million keys, when the leaves no longer fit in the last-level
cache, an update waits on memory less often.

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
Python and from compiled (generated) code alike.  Queries take the column last, default 0.
"""

from __future__ import annotations

# Importing this submodule runs ddms/__init__.py first, which fixes NUMBA_CACHE_DIR before numba
# is imported here.
import hashlib
import sys
from types import SimpleNamespace

import numpy as np
from llvmlite import ir
from numba import literally, njit, types
from numba.core import cgutils
from numba.core.datamodel import default_manager, models
from numba.core.extending import intrinsic, overload
from numba.experimental import structref

FL = 32  # leaf capacity (keys); a multiple of 4, at least 8 (see the module docstring)
FI = 16  # internal node capacity (children); a multiple of 4, at least 8
LMIN = FL // 4  # fewest keys in a non-root leaf
IMIN = FI // 4  # fewest children of a non-root internal node
LMERGE = 3 * FL // 4  # two leaves merge when they fit in this many keys, else they share evenly
IMERGE = 3 * FI // 4
MAXD = 64  # bound on the number of internal levels (a quarter-full tree of depth 64 is absurd)
MAXC = 64  # bound on the number of columns of a pool
PMAX = 16  # pending leaves per pool (see _flush)
PS_COLS = 4  # where a pending slot's per-column entries start (root, leaf, depth, fill first)
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
    ("nc", types.int64),  # value columns C (for Python: compiled code takes C from the type, _widths)
    ("lw", types.int64),  # leaf entry width, C + 1
    ("iw", types.int64),  # internal entry width, C + 2
    ("lf", types.float64[:, ::1]),  # leaf rows: keys | C value segments; padding +inf, 0.0
    ("ln", types.int64[::1]),  # keys in the leaf; -1 for a free leaf
    ("llink", types.int64[::1]),  # next free leaf, -1 = none
    ("ik", types.float64[:, ::1]),  # internal rows: max keys | C sum segments | children; pad +inf, 0.0, -1
    ("ii", types.int64[:, ::1]),  # internal rows: per column, nonzero counts[FI] | negatives[FI]
    ("in_", types.int64[::1]),  # children of the internal node; -1 for a free node
    ("ilink", types.int64[::1]),  # next free internal node, -1 = none
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
    ("xv", types.float64[::1]),  # scratch, C: the deltas (or the value) of the update in progress
    ("dc", types.int64[::1]),  # scratch, C: per column change of the nonzero count it makes
    ("dn", types.int64[::1]),  # scratch, C: per column change of the negative count
    # pending leaves (see _update), one int64 array so that the in-place path touches few arrays
    # (each array a compiled function reads costs two atomic reference-count updates):
    # row 0 = [slots in use, last slot used, 0 ...]; row 1 + s = slot s: [tree root ref, leaf,
    # depth, leaf fill, changed flags[C], nonzero-count changes[C], negative-count changes[C]]
    ("ps", types.int64[:, ::1]),
    ("ppn", types.int64[:, ::1]),  # PMAX x MAXD: per slot the recorded path (as pn / pj)
    ("ppj", types.int64[:, ::1]),
    ("qf", types.float64[::1]),  # scratch, C: a slot's changed flags, for _walk_up
    ("qc", types.int64[::1]),  # scratch, C: its count changes
    ("qn", types.int64[::1]),
]
structref.define_proxy(BTreePool, BTreePoolType, [name for name, _ in _FIELDS])


def _pool_type(columns: int) -> BTreePoolType:
    """The numba type of a pool with ``columns`` columns.  The type itself carries C (as the
    length of the tuple field ``cols``), so every function compiled for a pool knows its entry
    widths as constants: row strides fold, column loops unroll (a run-time C cost VWAP on a small
    book ~10-30%)."""
    return BTreePoolType([*_FIELDS, ("cols", types.UniTuple(types.int64, columns))])


@structref.register
class BorrowedPoolType(types.StructRef):
    """numba type of a pool handle that keeps no reference count (:func:`_bp`): the same
    payload and fields as :class:`BTreePoolType`, reached through a plain pointer."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


class _BorrowedPoolModel(models.StructModel):
    """A borrowed pool is the owned one's meminfo pointer typed as a plain ``void*``: field
    reads and writes go through the same payload, but numba sees no reference to count."""

    def __init__(self, dmm, fe_typ):
        super().__init__(dmm, fe_typ, [("meminfo", types.voidptr)])


default_manager.register(BorrowedPoolType, _BorrowedPoolModel)


def _borrow_codegen(context, builder, signature, args):
    """The body of a borrowing intrinsic (:func:`_bp`, :func:`borrow_state`): the owned
    handle's meminfo pointer, typed as the borrowed handle's ``void*``."""
    src = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
    dst = cgutils.create_struct_proxy(signature.return_type)(context, builder)
    dst.meminfo = builder.bitcast(src.meminfo, dst.meminfo.type)
    return dst._getvalue()


@intrinsic
def _bp(typingctx, pool):
    """``pool`` as a *borrowed* handle (:class:`BorrowedPoolType`), which numba does not
    reference-count.

    Why: numba increments an argument's reference count when a function starts and decrements
    it when the function returns, with atomic instructions, for every non-inlined call that
    passes the pool: an insertion passed it to six helpers (``_update``, ``_flush``,
    ``_insert``, ``_walk_up``, ...), and those pairs were a good part of an update's cost (the
    best bid per broker, a grouped MAX: 84 -> ~70 ns a line without them).  Every public
    ``btree_*`` function converts its pool first, so the helpers see only borrowed handles
    (compiled once, for that type); generated programs pass borrowed handles
    (:data:`borrow_pool`) so that the public functions count nothing either.

    Rule that keeps it safe, as for :func:`_b`: a borrowed handle lives no longer than the call
    that made it, and its owner (the program state or the Python caller) holds the pool
    meanwhile; it is never stored or returned.  Cost: none at run time."""
    if isinstance(pool, BorrowedPoolType):
        return pool(pool), lambda context, builder, signature, args: args[0]
    if not isinstance(pool, BTreePoolType):
        return None
    out = BorrowedPoolType(list(pool.field_dict.items()))
    sig = out(pool)

    return sig, _borrow_codegen


borrow_pool = _bp
"""Public name of :func:`_bp`, for generated programs: ``btree_add(borrow_pool(st.op_M), ...)``."""


@intrinsic
def _b(typingctx, a):
    """``a`` as a *borrowed* array: the same data, shape and strides, with no owner (a NULL
    meminfo), so that numba keeps no reference count for it.

    Why: every array a compiled function reads from the pool (``p.lf``) is a new reference, and
    numba counts references with atomic instructions (an increment at the read, a decrement when
    the local dies, again for every argument of every call that is not inlined).  Profiling the
    grouped MAX view (best bid per broker) found ~65% of its samples on those two instructions.
    Written ``_b(p.lf)``, the field's increment and its temporary's decrement meet in one basic
    block and LLVM's reference-count pruning removes both; the borrowed array costs none.

    Rule that keeps it safe: a borrowed array is valid while the pool holds that array, that is
    until :func:`_reserve` replaces it (callers re-read after ``_reserve``, as they did anyway)
    and at most until the function returns; it is never returned, stored, or given to Python.
    The owner must be a state or pool field or an argument (the caller holds it), or a local
    kept alive by :func:`keep_alive` to the end: numba releases a local after its *last use*, not
    when the function returns, so a borrowed copy of a local array read later reads freed memory.
    Cost: none at run time (a struct copy with two fields zeroed)."""
    if not isinstance(a, types.Array):
        return None
    sig = a(a)

    def codegen(context, builder, signature, args):
        ary = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    return sig, codegen


borrow = _b
"""Public name of :func:`_b`, for generated programs: ``borrow(st.or_M)`` reads a state array
without a reference count (generated code never keeps it past a store to that field)."""


@intrinsic
def keep_alive(typingctx, a):
    """A use of ``a`` that does nothing: numba releases a local (an array's memory, when its last
    reference goes) right after the local's last use, so a function that works through a
    :func:`borrow` of a local array it made must keep the owner alive up to every return with
    this call.

    Why: generated ``run_batch`` made its prefetch ring and its list of tree events (``pfr``,
    ``tev``), borrowed them and never named them again, so numba freed both before the event
    loop: the loop wrote the ring into freed heap memory and read event numbers from it, then
    indexed the event arrays with whatever the allocator had put there (a crash of
    ``bench.symbols`` once in a few runs, a general protection fault).  Cost: none at run time
    (no instruction; the release moves to after the call)."""
    sig = types.void(a)
    return sig, lambda context, builder, signature, args: context.get_dummy_value()


class DigestNamedStructRef(types.StructRef):
    """A ``StructRef`` type named by its class, its field count and a digest of its fields, not by
    the fields themselves (numba's default name, ``numba.StateType(('watch', array(...)), ...)``).

    Why: numba mangles every compiled function's symbol from its argument types' names, and
    compares and hashes types by name.  A generated program's state has a field per map, index,
    tree and log (~900 for a program of 90 views), so its default name is ~100 KB; every function
    taking the state carries it in its symbol, in each call and declaration of the LLVM text numba
    writes, parses, normalises and links per function, and in its cache index.  That cost is the
    number of functions times the number of fields: quadratic in the number of views.  The digest
    (SHA-256 of the fields' names and types) keeps distinct layouts distinct types.  Cost: one
    hash of the field list per type construction (microseconds)."""

    def __init__(self, fields):
        super().__init__(fields)
        digest = hashlib.sha256(str(self._fields).encode()).hexdigest()[:24]
        self.name = f"numba.{self._typename}[{len(self._fields)}#{digest}]"


@structref.register
class BorrowedStateType(DigestNamedStructRef):
    """numba type of a generated program's state handle that keeps no reference count
    (:func:`borrow_state`): the same payload and fields as the program's ``StateType``, reached
    through a plain pointer (the model of :class:`BorrowedPoolType`)."""

    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(typ)) for name, typ in fields)


default_manager.register(BorrowedStateType, _BorrowedPoolModel)


@intrinsic
def borrow_state(typingctx, st):
    """A generated program's state ``st`` as a *borrowed* handle (:class:`BorrowedStateType`),
    which numba does not reference-count.

    Why: ``run_batch`` passes the state to the trigger functions inlined into its loop, and
    numba's inliner assigns each argument to a local of the callee, which takes a reference
    (an atomic increment) and drops it when the callee's code ends (an atomic decrement); its
    pruning pass removes the pair only within simple control flow, and a trigger's branches
    (a map that may grow, a key that crosses zero) defeat it: two ``lock``-prefixed
    instructions per event.  A locked instruction is a full memory barrier on x86: the event's
    loads that miss the caches (an EXTREME window's cell at a fresh price, a hash row) cannot
    overlap the next event's work.  Measured on best_bid at 100k / 1M distinct prices (the
    window's cells past L2): 30 / 31 -> ~23 / ~25 ns per line with the state borrowed and the
    prefetch's ``cols`` borrowed too (see ``codegen.run_batch``).

    Rule that keeps it safe, as for :func:`_b`: the borrowed handle lives no longer than the
    call that made it (``run_batch``, whose argument holds the state), and is never stored or
    returned.  Field stores through it count the *field's* references as usual (the old array
    released, the new one held by the state).  Cost: none at run time."""
    if isinstance(st, BorrowedStateType):
        return st(st), lambda context, builder, signature, args: args[0]
    if not isinstance(st, types.StructRef) or isinstance(st, BorrowedPoolType):
        return None
    out = BorrowedStateType(list(st.field_dict.items()))
    sig = out(st)

    return sig, _borrow_codegen


@njit(cache=True, inline="always")
def _widths(p):
    """(C, leaf entry width, internal entry width): compile-time constants of the pool's type."""
    nc = len(p.cols)
    return nc, nc + 1, nc + 2


def _new_pool(columns):  # pragma: no cover - typed and compiled by the overload below
    raise NotImplementedError


@overload(_new_pool)
def _new_pool_typed(columns):
    """An uninitialised pool of the type for ``columns`` (a compile-time literal)."""
    if not isinstance(columns, types.IntegerLiteral):
        return None
    c = columns.literal_value
    typ = _pool_type(c)
    tag = (0,) * c

    def impl(columns):
        p = structref.new(typ)
        p.cols = tag
        return p
    return impl


@njit(cache=True)
def _fields(p):
    return (p.nc, p.lw, p.iw, p.lf, p.ln, p.llink, p.ik, p.ii, p.in_, p.ilink, p.lcap, p.l_used,
            p.l_head, p.l_free, p.icap, p.i_used, p.i_head, p.i_free, p.pn, p.pj, p.xv, p.dc, p.dn, p.ps,
            p.ppn, p.ppj, p.qf, p.qc, p.qn)


def _field_view(pool: BTreePool) -> SimpleNamespace:
    """Every field of ``pool`` read at once, for Python code that reads many (the checks): each
    attribute read of the proxy boxes the whole field tuple, ~30 arrays.  The arrays are shared,
    not copied, so the view goes stale only when the pool reallocates."""
    return SimpleNamespace(**dict(zip((name for name, _ in _FIELDS), _fields(pool), strict=True)))


# Python-side read access to the fields (structref proxies have none by default).
for _i, (_name, _) in enumerate(_FIELDS):
    setattr(BTreePool, _name, property(lambda self, i=_i: _fields(self)[i]))
del _i, _name


# --------------------------------------------------------------------------------------------
# pool management


@njit(cache=True)
def btree_new(capacity: int, columns: int) -> BTreePool:
    """A new empty pool of trees with ``columns`` value columns (1 .. MAXC), with room for about
    ``capacity`` keys (in half-full leaves) before it first grows; the arrays double as needed.
    Each number of columns is a type of its own (compiled once per C used)."""
    if columns < 1 or columns > MAXC:
        raise ValueError("btree_new: columns must be 1 .. 64")
    nl = max(1, -(-2 * max(capacity, 1) // FL))
    ni = max(1, -(-2 * nl // FI))
    p = _new_pool(literally(columns))
    p.nc = columns
    p.lw = columns + 1
    p.iw = columns + 2
    p.lf = _rows_f(nl, (columns + 1) * FL)
    p.ln = np.full(nl, -1, np.int64)
    p.llink = np.full(nl, -1, np.int64)
    p.ik = _rows_f(ni, (columns + 2) * FI)
    p.ii = _rows_i(ni, 2 * columns * FI)
    p.in_ = np.full(ni, -1, np.int64)
    p.ilink = np.full(ni, -1, np.int64)
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
    p.xv = np.zeros(columns, np.float64)
    p.dc = np.zeros(columns, np.int64)
    p.dn = np.zeros(columns, np.int64)
    p.ps = np.zeros((PMAX + 1, PS_COLS + 3 * columns), np.int64)
    p.ppn = np.empty((PMAX, MAXD), np.int64)
    p.ppj = np.empty((PMAX, MAXD), np.int64)
    p.qf = np.zeros(columns, np.float64)
    p.qc = np.zeros(columns, np.int64)
    p.qn = np.zeros(columns, np.int64)
    return p


_LINUX = sys.platform.startswith("linux")
HUGE = 1 << 21
"""Bytes of a transparent huge page (x86-64, aarch64 with 4 KiB pages): node arrays past two of them
are asked to be backed by huge pages (:func:`_huge`)."""


@intrinsic
def _madvise_huge(typingctx, addr, length):
    """``madvise(addr, length, MADV_HUGEPAGE)`` (Linux; nothing elsewhere): a hint, its result
    ignored (a kernel without transparent huge pages, or with them off, says no and nothing
    changes)."""
    if not (isinstance(addr, types.Integer) and isinstance(length, types.Integer)):
        return None
    sig = types.void(addr, length)

    def codegen(context, builder, signature, args):
        if _LINUX:
            i64 = ir.IntType(64)
            i32 = ir.IntType(32)
            i8p = ir.IntType(8).as_pointer()
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i8p, i64, i32]), "madvise")
            a = context.cast(builder, args[0], signature.args[0], types.int64)
            n = context.cast(builder, args[1], signature.args[1], types.int64)
            builder.call(fn, [builder.inttoptr(a, i8p), n, i32(14)])   # MADV_HUGEPAGE
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True)
def _huge(a):
    """Ask for the whole huge pages inside ``a``'s buffer to be backed by transparent huge pages,
    before anything touches them.  Why: a pool of a thousand small trees (one per instrument) is
    tens of MB read at random, one node per tree per update; with 4 KiB pages nearly every node is
    also a TLB miss (a page walk before the load can even start, prefetches included).  numba
    allocates arrays with malloc, which never asks (numpy's own allocator does, from 4 MiB).
    O(1): a system call per doubling of a big array."""
    if a.nbytes >= 2 * HUGE:
        lo = (a.ctypes.data + HUGE - 1) // HUGE * HUGE
        hi = (a.ctypes.data + a.nbytes) // HUGE * HUGE
        _madvise_huge(lo, hi - lo)


@njit(cache=True)
def _grow1i(a, cap):
    out = np.empty(cap, np.int64)
    _huge(out)   # (fills and links are read at random too: one per update, beside the row)
    out[: a.size] = a
    out[a.size:] = -1
    return out


LINE = 64
"""Bytes of a cache line (x86-64, most aarch64): node arrays start on one (:func:`_rows_f`)."""


@njit(cache=True)
def _rows_f(rows, width):
    """An uninitialised C-contiguous float64 array (rows, width) whose first row starts on a cache
    line, so that every node row does (a row is a whole number of lines: ``FL * 8`` and ``FI * 8``
    bytes are multiples of 64) and each segment of a row (keys, a column's values or sums,
    children) occupies the fewest lines.  Why: numba's allocator aligns arrays to 32 bytes only; an
    internal row starting half a line in spreads each 16-entry segment over 3 lines instead of 2
    (a search then reads 3 lines of keys; the walk back up re-sums 3 lines per column; a path
    prefetch of two lines per segment misses the third).  Costs 64 bytes per array; O(1) beyond
    the allocation."""
    buf = np.empty(rows * width + LINE // 8, np.float64)
    off = (-buf.ctypes.data) % LINE // 8
    return buf[off: off + rows * width].reshape((rows, width))


@njit(cache=True)
def _rows_i(rows, width):
    """:func:`_rows_f` for int64 rows (the internal nodes' counts)."""
    buf = np.empty(rows * width + LINE // 8, np.int64)
    off = (-buf.ctypes.data) % LINE // 8
    return buf[off: off + rows * width].reshape((rows, width))


@njit(cache=True)
def _grow2f(a, cap):
    out = _rows_f(cap, a.shape[1])
    _huge(out)
    out[: a.shape[0]] = a
    return out


@njit(cache=True)
def _grow2i(a, cap):
    out = _rows_i(cap, a.shape[1])
    _huge(out)
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
        p.lcap = cap
    if p.icap - p.i_used + p.i_free < internals:
        cap = p.icap
        while cap - p.i_used + p.i_free < internals:
            cap *= 2
        p.ik = _grow2f(p.ik, cap)
        p.ii = _grow2i(p.ii, cap)
        p.in_ = _grow1i(p.in_, cap)
        p.ilink = _grow1i(p.ilink, cap)
        p.icap = cap


@njit(cache=True)
def _alloc_leaf(p):
    """An empty, padded leaf off the free list (padded when freed: :func:`_free_leaf`), else a
    fresh one, padded here (room reserved by the caller).  Why not pad on every allocation: a
    per-slice tree of one key frees its leaf when the key goes and takes one back for the next new
    key, and padding the whole row would write every cache line of it (12 with two columns)
    where the update touched one per segment (:func:`_leaf_lt`)."""
    n = p.l_head
    if n != -1:
        p.l_head = _b(p.llink)[n]
        p.l_free -= 1
    else:
        n = p.l_used
        p.l_used = n + 1
        _lpad(_b(p.lf), _widths(p)[1], n, 0, FL)
    _b(p.ln)[n] = 0
    _b(p.llink)[n] = -1
    return n


@njit(cache=True)
def _alloc_int(p):
    """An empty, padded internal node off the free list, else a fresh one (room reserved)."""
    n = p.i_head
    if n != -1:
        p.i_head = _b(p.ilink)[n]
        p.i_free -= 1
    else:
        n = p.i_used
        p.i_used = n + 1
    _ipad(_b(p.ik), _b(p.ii), _widths(p)[2], _widths(p)[0], n, 0, FI)
    _b(p.in_)[n] = 0
    _b(p.ilink)[n] = -1
    return n


@njit(cache=True)
def _free_leaf(p, n):
    """Put leaf n on the free list, its ``ln[n]`` slots padded first (the others are padding
    already): a free leaf is a padded row, so :func:`_alloc_leaf` hands it out untouched."""
    ln = _b(p.ln)
    _lpad(_b(p.lf), _widths(p)[1], n, 0, ln[n])
    ln[n] = -1
    _b(p.llink)[n] = p.l_head
    p.l_head = n
    p.l_free += 1


@njit(cache=True)
def _free_int(p, n):
    _b(p.in_)[n] = -1
    _b(p.ilink)[n] = p.i_head
    p.i_head = n
    p.i_free += 1


# --------------------------------------------------------------------------------------------
# row kernels: fixed-length loops over padded rows.  A row is segments of F slots: keys at t, a
# leaf's value in column c at FL (1 + c) + t, an internal node's sum at FI (1 + c) + t and its
# child at FI (iw - 1) + t.


@njit(cache=True, inline="always")
def _rowsum(a, r, off, f):
    """Sum of a[r, off + t] for t < f in a fixed order (four interleaved lanes, then
    (0 + 1) + (2 + 3)); padding zeros leave it exact.  f is a multiple of 4."""
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
    """Entries t < f whose key a[r, t] is below x (a sorted row padded with +inf).

    The predicate is monotone along the sorted row, so the count is found in blocks of 4: one
    compare with the last key of each block counts the blocks wholly below x, then the one block
    that straddles x is counted key by key.  f / 4 + 4 compares instead of f, all branch-free
    (measured: 6.3 instead of 13.2 ns for a 32-key row).  f is a multiple of 4; O(f)."""
    b = np.int64(0)   # not a literal 0: a call typed before the loop widens it compiles twice
    for t in range(3, f, 4):
        b += a[r, t] < x
    if b * 4 == f:
        return b * 4
    c = b * 4
    for t in range(4):
        c += a[r, b * 4 + t] < x
    return c


@njit(cache=True, inline="always")
def _count_le(a, r, f, x):
    """Entries whose key is at most x (padding counts when x is +inf: callers clamp to the fill).
    In blocks, as :func:`_count_lt`.  O(f)."""
    b = np.int64(0)
    for t in range(3, f, 4):
        b += a[r, t] <= x
    if b * 4 == f:
        return b * 4
    c = b * 4
    for t in range(4):
        c += a[r, b * 4 + t] <= x
    return c


FS = 8
"""Keys of a *short* leaf: one whose fill is at most this is searched and summed over its first
``FS`` slots only (:func:`_leaf_lt`, :func:`_leaf_sum`)."""


@njit(cache=True, inline="always")
def _leaf_lt(lf, n, fill, x):
    """:func:`_count_lt` over leaf n of ``fill`` keys: over its first ``FS`` slots if it holds no
    more, else over all ``FL``.  The slots past the fill are padding (+inf) either way, so the
    count is the same.  Why: a leaf row is ``lw FL`` floats (768 bytes with two columns), and a
    search of a short leaf (a per-slice tree of one order: a price level of one order at distinct
    prices) would otherwise read all four lines of its keys where one or two hold them.  Two
    fixed-length searches, not one of the fill's length: a loop of variable length is not
    unrolled (measured slower at 1k resting orders).  O(FL)."""
    if fill <= FS:
        return _count_lt(lf, n, FS, x)
    return _count_lt(lf, n, FL, x)


@njit(cache=True, inline="always")
def _leaf_sum(lf, n, off, fill):
    """:func:`_rowsum` of the segment at ``off`` of leaf n of ``fill`` keys, over its first ``FS``
    slots if it holds no more (as :func:`_leaf_lt`).  The same bits: adding the padding's 0.0 to a
    lane changes nothing (lanes start at +0.0, so none is ever -0.0).  O(FL)."""
    if fill <= FS:
        return _rowsum(lf, n, off, FS)
    return _rowsum(lf, n, off, FL)


@njit(cache=True, inline="always")
def _leaf_nonzero(lf, lw, n, c):
    """Entries of leaf n whose value in column c is nonzero (padding is 0.0)."""
    k = 0
    for t in range(FL):
        k += lf[n, FL * (1 + c) + t] != 0.0
    return k


@njit(cache=True, inline="always")
def _leaf_negatives(lf, lw, n, c):
    k = 0
    for t in range(FL):
        k += lf[n, FL * (1 + c) + t] < 0.0
    return k


@njit(cache=True, inline="always")
def _child(ik, iw, i, j):
    return np.int64(ik[i, FI * (iw - 1) + j])


@njit(cache=True)
def _refresh(p, i, j):
    """Recompute entry j of internal node i (max key, sums, counts) from its child's row: O(C F)."""
    nc, lw, iw = _widths(p)
    ik = _b(p.ik)
    ii = _b(p.ii)
    ch = _child(ik, iw, i, j)
    n = ch >> 1
    if ch & 1:
        ik[i, j] = ik[n, _b(p.in_)[n] - 1]
        for c in range(nc):
            ik[i, FI * (1 + c) + j] = _rowsum(ik, n, FI * (1 + c), FI)
            ii[i, 2 * c * FI + j] = _isum(ii, n, 2 * c * FI, FI)
            ii[i, (2 * c + 1) * FI + j] = _isum(ii, n, (2 * c + 1) * FI, FI)
    else:
        lf = _b(p.lf)
        fill = _b(p.ln)[n]
        ik[i, j] = lf[n, fill - 1]
        for c in range(nc):
            ik[i, FI * (1 + c) + j] = _leaf_sum(lf, n, FL * (1 + c), fill)
            ii[i, 2 * c * FI + j] = _leaf_nonzero(lf, lw, n, c)
            ii[i, (2 * c + 1) * FI + j] = _leaf_negatives(lf, lw, n, c)


ALL = -2
"""``_walk_up``'s ``cols`` when entries shifted: every column's sums are recomputed."""


@njit(cache=True)
def _walk_up(p, pn, pj, d, ref, cols, xv, dc, dn):
    """After a change below the last internal node of the path ``pn``/``pj`` (internal nodes and
    the child index taken at each, root first) that split or merged nothing: bottom-up along it,
    each entry takes its child's max key and sums, and adds ``dc`` / ``dn`` to its counts.
    ``ref``: the changed node at the bottom.  Sums are recomputed for every column if ``cols`` is
    ``ALL``, else only for column ``cols`` (an assignment; -1 for none) and the columns with a
    nonzero ``xv`` (additions): the others' rows did not change.  O(d C F)."""
    nc, lw, iw = _widths(p)
    ik = _b(p.ik)
    ii = _b(p.ii)
    for e in range(d - 1, -1, -1):
        i = pn[e]
        j = pj[e]
        n = ref >> 1
        if ref & 1:
            ik[i, j] = ik[n, _b(p.in_)[n] - 1]
            for c in range(nc):
                if cols == ALL or c == cols or xv[c] != 0.0:
                    ik[i, FI * (1 + c) + j] = _rowsum(ik, n, FI * (1 + c), FI)
        else:
            lf = _b(p.lf)
            fill = _b(p.ln)[n]
            ik[i, j] = lf[n, fill - 1]
            for c in range(nc):
                if cols == ALL or c == cols or xv[c] != 0.0:
                    ik[i, FI * (1 + c) + j] = _leaf_sum(lf, n, FL * (1 + c), fill)
        for c in range(nc):   # (each count row a cache line of its own: untouched unless it changes)
            if dc[c] != 0:
                ii[i, 2 * c * FI + j] += dc[c]
            if dn[c] != 0:
                ii[i, (2 * c + 1) * FI + j] += dn[c]
        ref = 2 * i + 1


@njit(cache=True, inline="always")
def _lmove(lf, lw, a, sa, b, sb, m):
    """Copy m leaf entries a[sa:sa+m] -> b[sb:sb+m], segment by segment (overlap-safe within
    one row)."""
    for g in range(0, lw * FL, FL):
        if a == b and sb > sa:
            for t in range(m - 1, -1, -1):
                lf[b, g + sb + t] = lf[a, g + sa + t]
        else:
            for t in range(m):
                lf[b, g + sb + t] = lf[a, g + sa + t]


@njit(cache=True, inline="always")
def _lpad(lf, lw, a, lo, hi):
    for t in range(lo, hi):
        lf[a, t] = _INF
        for c in range(1, lw):
            lf[a, FL * c + t] = 0.0


@njit(cache=True, inline="always")
def _lput(lf, lw, n, pos, k, xv):
    """Entry ``pos`` of leaf n := key k with the values xv."""
    lf[n, pos] = k
    for c in range(lw - 1):
        lf[n, FL * (1 + c) + pos] = xv[c]


@njit(cache=True, inline="always")
def _imove(ik, ii, iw, nc, a, sa, b, sb, m):
    """Copy m internal entries a[sa:sa+m] -> b[sb:sb+m] (overlap-safe within one row)."""
    if a == b and sb > sa:
        for g in range(0, iw * FI, FI):
            for t in range(m - 1, -1, -1):
                ik[b, g + sb + t] = ik[a, g + sa + t]
        for q in range(2 * nc):
            for t in range(m - 1, -1, -1):
                ii[b, q * FI + sb + t] = ii[a, q * FI + sa + t]
    else:
        for g in range(0, iw * FI, FI):
            for t in range(m):
                ik[b, g + sb + t] = ik[a, g + sa + t]
        for q in range(2 * nc):
            for t in range(m):
                ii[b, q * FI + sb + t] = ii[a, q * FI + sa + t]


@njit(cache=True, inline="always")
def _ipad(ik, ii, iw, nc, a, lo, hi):
    for t in range(lo, hi):
        ik[a, t] = _INF
        for c in range(1, iw - 1):
            ik[a, FI * c + t] = 0.0
        ik[a, FI * (iw - 1) + t] = -1.0
        for q in range(2 * nc):
            ii[a, q * FI + t] = 0


@njit(cache=True)
def _lmove_out(lf, lw, a, sa, b, sb, m):
    """:func:`_lmove` as a call, for the rare paths (a node split, a rebalance).  Why: inlined at
    each of their sites (with :func:`_imove`, :func:`_lpad`, :func:`_ipad`, ~20 in all), each
    copy's loops vectorised, ``_rebalance`` alone was 15-30k LLVM instructions per tree shape:
    over half of a grouped program's code (missedtrades' run_batch: 121k instructions, 2.5 MB of
    bitcode), which every process parses back from numba's cache at start (~0.1 s of
    missedtrades' 0.74 s).  The per-update shifts (an insert or delete inside a leaf or internal
    node) stay inlined.  A call costs nanoseconds against a move of up to a node."""
    _lmove(lf, lw, a, sa, b, sb, m)


@njit(cache=True)
def _imove_out(ik, ii, iw, nc, a, sa, b, sb, m):
    """:func:`_imove` as a call (see :func:`_lmove_out`)."""
    _imove(ik, ii, iw, nc, a, sa, b, sb, m)


@njit(cache=True)
def _lpad_out(lf, lw, a, lo, hi):
    """:func:`_lpad` as a call (see :func:`_lmove_out`)."""
    _lpad(lf, lw, a, lo, hi)


@njit(cache=True)
def _ipad_out(ik, ii, iw, nc, a, lo, hi):
    """:func:`_ipad` as a call (see :func:`_lmove_out`)."""
    _ipad(ik, ii, iw, nc, a, lo, hi)


# --------------------------------------------------------------------------------------------
# updates


@njit(cache=True)
def _flush(p):
    """Bring the paths of the pending leaves up to date (see :func:`_update`): each slot's path
    entries take its leaf's new sums for the changed columns and the slot's accumulated count
    changes.  Slots are walked one after the other, each along its whole path, so an ancestor
    shared by several is recomputed last from children already brought up to date: the sums are
    the eager ones bitwise.  Every operation that reads internal sums or counts, changes the
    tree's shape or uses the path scratch calls this first.  O(s d C F) for s pending leaves,
    O(1) when none is."""
    ps = _b(p.ps)
    ns = ps[0, 0]
    if ns == 0:
        return
    nc = _widths(p)[0]
    qf = _b(p.qf)
    qc = _b(p.qc)
    qn = _b(p.qn)
    for s in range(1, ns + 1):
        for c in range(nc):
            qf[c] = ps[s, PS_COLS + c]
            qc[c] = ps[s, PS_COLS + nc + c]
            qn[c] = ps[s, PS_COLS + 2 * nc + c]
        _walk_up(p, _b(p.ppn)[s - 1], _b(p.ppj)[s - 1], ps[s, 2], 2 * ps[s, 1], -1, qf, qc, qn)
        ps[s, :] = 0
    ps[0, 0] = 0
    ps[0, 1] = 0


@njit(cache=True)
def btree_flush(pool: BTreePool) -> None:
    """Write the pool's pending sums up the tree (queries do it themselves): for tests and
    inspection of the raw arrays.  O(PMAX C F log_F n)."""
    pool = _bp(pool)
    _flush(pool)


@njit(cache=True, inline="always")
def _keeps(lf, xv, nc, lw, n, pos, a):
    """Whether applying ``xv`` to entry ``pos`` of leaf n leaves some column nonzero (else the
    update is a removal).  O(C)."""
    keep = False
    for c in range(nc):
        v = xv[c] if c == a else lf[n, FL * (1 + c) + pos] + xv[c]
        keep = keep or v != 0.0
    return keep


@njit(cache=True, inline="always")
def _update_in_leaf(lf, xv, ps, nc, lw, n, pos, a, s):
    """Apply ``xv`` to entry ``pos`` of leaf n in place (it stays: :func:`_keeps`), adding the
    changed columns and count changes to pending slot ``s`` (leaf n's; row ``1 + s`` of ``ps``).
    Takes the arrays, not the pool: one reference count each for the whole update.  O(C)."""
    r = 1 + s
    for c in range(nc):
        old = lf[n, FL * (1 + c) + pos]
        v = xv[c] if c == a else old + xv[c]
        lf[n, FL * (1 + c) + pos] = v
        ps[r, PS_COLS + nc + c] += (1 if v != 0.0 else 0) - (1 if old != 0.0 else 0)
        ps[r, PS_COLS + 2 * nc + c] += (1 if v < 0.0 else 0) - (1 if old < 0.0 else 0)
        if c == a or xv[c] != 0.0:
            ps[r, PS_COLS + c] = 1


@njit(cache=True, inline="always")
def _pending_hit(lf, ps, nc, root, k, xv, a):
    """Update key k of tree ``root`` in place if a pending leaf of that tree holds it and it
    stays (see :func:`_update`); True if done.  Leaves partition the keys, so the one pending
    leaf whose key range covers k is the only place k can be: the slots are tried from the one
    updated last (order-book updates cluster), each by two compares with its first and last key
    (the fill is cached in the slot: in-place updates change none), then that leaf is searched.
    Reads only ``lf`` and ``ps``: each array a compiled function loads costs two atomic
    reference-count updates, as much as the search.  O(PMAX + C + FL)."""
    ns = ps[0, 0]
    if ns == 0:
        return False
    lw = nc + 1
    last = ps[0, 1]
    for t in range(ns):
        s = last + t
        if s >= ns:
            s -= ns
        r = 1 + s
        if ps[r, 0] != root:
            continue
        n = ps[r, 1]
        if not (lf[n, 0] <= k <= lf[n, ps[r, 3] - 1]):
            continue
        pos = _leaf_lt(lf, n, ps[r, 3], k)
        if lf[n, pos] != k or not _keeps(lf, xv, nc, lw, n, pos, a):
            return False   # absent (an insertion) or leaving (a removal)
        _update_in_leaf(lf, xv, ps, nc, lw, n, pos, a, s)
        ps[0, 1] = s
        return True
    return False


@njit(cache=True)
def _update(p, root, k, a):
    """Apply the row ``p.xv`` at key k: every column += xv (``a`` = -1), or column ``a`` := xv[a]
    and the others += xv (0.0 there).  Removes k when all its columns end exactly 0.0.  New root.

    An update of a key that exists and stays changes its leaf in place and leaves the sums and
    counts on the leaf's path stale: the leaf becomes *pending*, in one of ``PMAX`` slots of the
    pool (``p.ps``: tree, leaf, depth, fill, changed columns, count changes; ``p.ppn``/``p.ppj``:
    its path).  In-place updates change no key and no shape, so descents by key stay valid while
    leaves are pending.  The next update of a key in a pending leaf (order books update a few
    price levels near the touch, in one leaf or a few) is a search of that leaf and O(C) work:
    no descent, no path recomputed (:func:`_pending_hit`); one elsewhere is a descent and O(C)
    work, its leaf taking a new slot (all slots full: they are flushed first).  Pending paths are written
    up only when something reads sums or counts, or changes a shape (:func:`_flush`), so sums are
    bitwise what eager recomputation gives, and a run of updates spread over a few leaves between
    two queries costs one path walk per leaf, not one per update.

    A found key that would end all-zero goes to :func:`_delete`, an absent one to
    :func:`_insert`, after a flush.  Callers try :func:`_pending_hit` first (``btree_addv`` with its
    delta tuple, before it fills ``xv``), so this starts at the descent: a miss scans the slots once.
    """
    if k != k:
        raise ValueError("btree map key is NaN")
    nc = _widths(p)[0]
    lw, iw = nc + 1, nc + 2
    lf = _b(p.lf)
    xv = _b(p.xv)
    ps = _b(p.ps)
    ns = ps[0, 0]
    nonzero = False
    for c in range(nc):
        nonzero = nonzero or xv[c] != 0.0
    if root == -1:
        if not nonzero:
            return -1
        _reserve(p, 1, np.int64(0))   # as _insert's call: one compiled _reserve, not two
        n = _alloc_leaf(p)
        _lput(_b(p.lf), lw, n, 0, k, xv)
        _b(p.ln)[n] = 1
        return 2 * n
    ik = _b(p.ik)
    in_ = _b(p.in_)
    pn = _b(p.pn)
    pj = _b(p.pj)
    d = 0
    r = root
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, FI, k)
        m = in_[i] - 1
        if j > m:  # k above every key: the last child
            j = m
        pn[d] = i
        pj[d] = j
        d += 1
        r = _child(ik, iw, i, j)
    n = r >> 1
    fill = _b(p.ln)[n]
    pos = _leaf_lt(lf, n, fill, k)
    if pos < fill and lf[n, pos] == k:  # (a key +inf is told from padding by the fill)
        if not _keeps(lf, xv, nc, lw, n, pos, a):
            _flush(p)
            return _delete(p, root, d, n, pos)
        # n is not pending (_pending_hit would have found k there): it takes a new slot
        if ns == PMAX:
            _flush(p)
            ns = 0
        s = ns
        ps[0, 0] = ns + 1
        ps[1 + s, 0] = root
        ps[1 + s, 1] = n
        ps[1 + s, 2] = d
        ps[1 + s, 3] = fill
        ppn = _b(p.ppn)
        ppj = _b(p.ppj)
        for e in range(d):
            ppn[s, e] = pn[e]
            ppj[s, e] = pj[e]
        ps[0, 1] = s
        _update_in_leaf(lf, xv, ps, nc, lw, n, pos, a, s)
        return root
    if not nonzero:  # absent key set to / incremented by zero: nothing to store
        return root
    _flush(p)
    return _insert(p, root, d, n, pos, k)


@njit(cache=True, inline="always")
def _edge(in_, pn, pj, d):
    """Where the recorded path of d internal nodes runs: bit 1 set if it takes the last child at
    every level (its leaf is the tree's rightmost), bit 2 if the first (the leftmost).  O(d)."""
    right = True
    left = True
    for e in range(d):
        right = right and pj[e] == in_[pn[e]] - 1
        left = left and pj[e] == 0
    return (1 if right else 0) | (2 if left else 0)


@njit(cache=True)
def _insert(p, root, d, n, pos, k):
    """Insert key k with the values ``p.xv`` at ``pos`` of leaf n, at the end of the recorded path
    of d internal nodes.

    A full node splits into two halves; the parent gets an entry for the new right half, which
    may split the parent in turn, up to a new root.  Except at the tree's edge: a key appended
    past the largest (below the smallest) on the rightmost (leftmost) path leaves the new node at
    the minimum fill, the old one nearly full, so that keys loaded in order (a book snapshot lists
    its levels sorted) pack the nodes ~3/4 full instead of half: 20,000 instead of 29,000 leaves
    (and a third less memory the caches hold for nothing) for 1,000 books of 500 levels a side.
    """
    if _b(p.ln)[n] == FL:
        _reserve(p, 1, d + 1)  # a split may climb to a new root
    nc, lw, iw = _widths(p)
    lf = _b(p.lf)
    ln = _b(p.ln)
    ik = _b(p.ik)
    ii = _b(p.ii)
    in_ = _b(p.in_)
    pn = _b(p.pn)
    pj = _b(p.pj)
    xv = _b(p.xv)
    dc = _b(p.dc)
    dn = _b(p.dn)
    for c in range(nc):
        dc[c] = 1 if xv[c] != 0.0 else 0
        dn[c] = 1 if xv[c] < 0.0 else 0
    m = ln[n]
    if m < FL:
        _lmove(lf, lw, n, pos, n, pos + 1, m - pos)
        _lput(lf, lw, n, pos, k, xv)
        ln[n] = m + 1
        _walk_up(p, pn, pj, d, 2 * n, ALL, xv, dc, dn)
        return root
    b = _alloc_leaf(p)
    edge = _edge(in_, pn, pj, d)
    h = (FL + 1) // 2  # keys left in n
    if edge & 1 and pos == FL:
        h = FL + 1 - LMIN   # appending past the tree's largest key: keep the full half packed
    elif edge & 2 and pos == 0:
        h = LMIN            # prepending below its smallest key: the same, mirrored
    if pos < h:
        _lmove_out(lf, lw, n, h - 1, b, 0, FL - h + 1)
        _lmove_out(lf, lw, n, pos, n, pos + 1, h - 1 - pos)
        _lput(lf, lw, n, pos, k, xv)
    else:
        _lmove_out(lf, lw, n, h, b, 0, pos - h)
        _lput(lf, lw, b, pos - h, k, xv)
        _lmove_out(lf, lw, n, pos, b, pos - h + 1, FL - pos)
    _lpad_out(lf, lw, n, h, FL)
    ln[n] = h
    ln[b] = FL + 1 - h
    split = 2 * b  # ref of a new right sibling of the path's node, to enter in its parent
    e = d - 1
    while e >= 0 and split != -1:
        i = pn[e]
        j = pj[e]
        _refresh(p, i, j)
        m = in_[i]
        if m < FI:
            _imove(ik, ii, iw, nc, i, j + 1, i, j + 2, m - j - 1)
            ik[i, FI * (iw - 1) + j + 1] = split
            in_[i] = m + 1
            _refresh(p, i, j + 1)
            split = -1
        else:
            b = _alloc_int(p)
            h = (FI + 1) // 2
            if edge & 1 and j + 1 == FI:
                h = FI + 1 - IMIN
            elif edge & 2 and j == 0:
                h = IMIN
            if j + 1 < h:
                _imove_out(ik, ii, iw, nc, i, h - 1, b, 0, FI - h + 1)
                _imove_out(ik, ii, iw, nc, i, j + 1, i, j + 2, h - 2 - j)
                ik[i, FI * (iw - 1) + j + 1] = split
                _refresh(p, i, j + 1)
            else:
                q = j + 1 - h
                _imove_out(ik, ii, iw, nc, i, h, b, 0, q)
                ik[b, FI * (iw - 1) + q] = split
                _imove_out(ik, ii, iw, nc, i, j + 1, b, q + 1, FI - j - 1)
                _refresh(p, b, q)
            _ipad_out(ik, ii, iw, nc, i, h, FI)
            in_[i] = h
            in_[b] = FI + 1 - h
            split = 2 * b + 1
        e -= 1
    if split != -1:  # the root split: a new root above the two halves
        t = _alloc_int(p)
        ik[t, FI * (iw - 1)] = root
        ik[t, FI * (iw - 1) + 1] = split
        in_[t] = 2
        for j in range(2):   # a loop, not literal 0 and 1: one compiled _refresh, not three
            _refresh(p, t, j)
        return 2 * t + 1
    # absorbed by node pn[e + 1]: above it only max keys, sums and counts change
    _walk_up(p, pn, pj, e + 1, 2 * pn[e + 1] + 1, ALL, xv, dc, dn)
    return root


@njit(cache=True)
def _rebalance(p, i, j):
    """Child j of internal node i is below its minimum fill: merge it with a neighbour if the two
    fit in 3/4 of a node, else share their entries evenly.  Recomputes the entries involved."""
    nc, lw, iw = _widths(p)
    lf = _b(p.lf)
    ln = _b(p.ln)
    ik = _b(p.ik)
    ii = _b(p.ii)
    in_ = _b(p.in_)
    m = in_[i]
    ja = j if j + 1 < m else j - 1
    a = _child(ik, iw, i, ja)
    b = _child(ik, iw, i, ja + 1)
    an = a >> 1
    bn = b >> 1
    if a & 1:
        na = in_[an]
        nb = in_[bn]
        if na + nb <= IMERGE:
            _imove_out(ik, ii, iw, nc, bn, 0, an, na, nb)
            in_[an] = na + nb
            _free_int(p, bn)
            merged = True
        else:
            h = (na + nb) // 2
            if na < h:  # move b's first h - na entries to a's end
                q = h - na
                _imove_out(ik, ii, iw, nc, bn, 0, an, na, q)
                _imove_out(ik, ii, iw, nc, bn, q, bn, 0, nb - q)
                _ipad_out(ik, ii, iw, nc, bn, nb - q, nb)
            else:  # move a's last na - h entries to b's front
                q = na - h
                _imove_out(ik, ii, iw, nc, bn, 0, bn, q, nb)
                _imove_out(ik, ii, iw, nc, an, h, bn, 0, q)
                _ipad_out(ik, ii, iw, nc, an, h, na)
            in_[an] = h
            in_[bn] = na + nb - h
            merged = False
    else:
        na = ln[an]
        nb = ln[bn]
        if na + nb <= LMERGE:
            _lmove_out(lf, lw, bn, 0, an, na, nb)
            ln[an] = na + nb
            _free_leaf(p, bn)
            merged = True
        else:
            h = (na + nb) // 2
            if na < h:
                q = h - na
                _lmove_out(lf, lw, bn, 0, an, na, q)
                _lmove_out(lf, lw, bn, q, bn, 0, nb - q)
                _lpad_out(lf, lw, bn, nb - q, nb)
            else:
                q = na - h
                _lmove_out(lf, lw, bn, 0, bn, q, nb)
                _lmove_out(lf, lw, an, h, bn, 0, q)
                _lpad_out(lf, lw, an, h, na)
            ln[an] = h
            ln[bn] = na + nb - h
            merged = False
    _refresh(p, i, ja)
    if merged:  # drop entry ja + 1
        _imove_out(ik, ii, iw, nc, i, ja + 2, i, ja + 1, m - ja - 2)
        _ipad_out(ik, ii, iw, nc, i, m - 1, m)
        in_[i] = m - 1
    else:
        _refresh(p, i, ja + 1)


@njit(cache=True)
def _delete(p, root, d, n, pos):
    """Remove entry ``pos`` of leaf n, at the end of the recorded path of d internal nodes.

    Underfull nodes are rebalanced by their parent on the way up; an internal root left with one
    child is replaced by it; an emptied root leaf is freed.
    """
    nc, lw, iw = _widths(p)
    lf = _b(p.lf)
    ln = _b(p.ln)
    in_ = _b(p.in_)
    pn = _b(p.pn)
    dc = _b(p.dc)
    dn = _b(p.dn)
    for c in range(nc):
        v = lf[n, FL * (1 + c) + pos]
        dc[c] = -1 if v != 0.0 else 0
        dn[c] = -1 if v < 0.0 else 0
    m = ln[n]
    _lmove(lf, lw, n, pos + 1, n, pos, m - pos - 1)
    _lpad(lf, lw, n, m - 1, m)
    m -= 1
    ln[n] = m
    if d == 0:
        if m == 0:
            _free_leaf(p, n)
            return -1
        return root
    ref = 2 * n
    under = m < LMIN
    e = d - 1
    while e >= 0 and under:
        i = pn[e]
        _rebalance(p, i, _b(p.pj)[e])
        under = in_[i] < IMIN
        ref = 2 * i + 1
        e -= 1
    # nodes above the last rebalanced one keep their fill: only max keys, sums, counts change
    _walk_up(p, pn, _b(p.pj), e + 1, ref, ALL, _b(p.xv), dc, dn)
    t = root >> 1
    if in_[t] == 1:  # the root has a single child left: it becomes the root
        root = _child(_b(p.ik), iw, t, 0)
        _free_int(p, t)
    return root


@njit(cache=True, inline="always")
def _column(nc, c):
    """Fail unless c is one of the ``nc`` columns.  Takes the count, not the pool: an inlined
    function that can raise keeps its pool argument's reference-count pair (two atomic
    instructions) alive."""
    if c < 0 or c >= nc:
        raise IndexError("btree: no such column")


@njit(cache=True)
def btree_add(pool: BTreePool, root: int, key: float, delta: float, c: int = 0) -> int:
    """value[key] += delta in column c, creating the key if absent and removing it if all its
    columns end exactly 0.0.

    Returns the new root.  O(C F log_F n): one descent, then the path's sums recomputed bottom-up
    (plus splits or merges of the path's nodes on insertion or removal).
    """
    pool = _bp(pool)
    _column(_widths(pool)[0], c)
    xv = _b(pool.xv)
    xv[:] = 0.0
    xv[c] = delta
    if _pending_hit(_b(pool.lf), _b(pool.ps), _widths(pool)[0], root, key, xv, -1):
        return root
    return _update(pool, root, key, -1)


@njit(cache=True)
def btree_addv(pool: BTreePool, root: int, key: float, deltas) -> int:
    """value[key] += deltas, a tuple of one delta per column: the update of several maps that
    share the tree, in one descent.  Returns the new root.  O(C F log_F n)."""
    pool = _bp(pool)
    nc = _widths(pool)[0]
    if len(deltas) != nc:
        raise ValueError("btree_addv: one delta per column")
    if _pending_hit(_b(pool.lf), _b(pool.ps), nc, root, key, deltas, -1):   # (the common case: two loads)
        return root
    xv = _b(pool.xv)
    for c in range(len(deltas)):
        xv[c] = deltas[c]
    return _update(pool, root, key, -1)


@njit(cache=True)
def btree_set(pool: BTreePool, root: int, key: float, value: float, c: int = 0) -> int:
    """value[key] = value in column c (0.0 there, and in every other column, removes the key).
    Returns the new root.  O(C F log_F n)."""
    pool = _bp(pool)
    _column(_widths(pool)[0], c)
    xv = _b(pool.xv)
    xv[:] = 0.0
    xv[c] = value
    if _pending_hit(_b(pool.lf), _b(pool.ps), _widths(pool)[0], root, key, xv, c):
        return root
    return _update(pool, root, key, c)


@njit(cache=True)
def btree_free(pool: BTreePool, root: int) -> int:
    """Release every node of the tree to the free lists (each leaf padded: :func:`_free_leaf`);
    returns -1, the empty tree.  O(n / F) nodes, O(C n) slots padded."""
    pool = _bp(pool)
    _flush(pool)
    if root == -1:
        return -1
    if not root & 1:
        _free_leaf(pool, root >> 1)
        return -1
    ik = _b(pool.ik)
    iw = _widths(pool)[2]
    in_ = _b(pool.in_)
    sn = _b(pool.pn)  # a root-to-node path: fits in MAXD
    sj = _b(pool.pj)
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
        ch = _child(ik, iw, i, j)
        if ch & 1:
            top += 1
            sn[top] = ch >> 1
            sj[top] = 0
        else:
            _free_leaf(pool, ch >> 1)
    return -1


# --------------------------------------------------------------------------------------------
# descent by key and prefetch


@njit(cache=True, inline="always")
def _descend(ik, in_, iw, root, key):
    """(the leaf, its parent or -1) where ``key`` is or would be, below tree ``root`` (not -1):
    at each internal node the child holding the first key >= ``key``, else the last child.
    Reads internal rows only.  O(F log_F n)."""
    r = root
    i = -1
    while r & 1:
        i = r >> 1
        j = _count_lt(ik, i, FI, key)
        m = in_[i] - 1
        r = _child(ik, iw, i, j if j < m else m)
    return r >> 1, i


@intrinsic
def _prefetch(typingctx, a, idx):
    """Ask the CPU to start loading the cache line of ``a[idx]`` (``idx`` a tuple of one index per
    dimension) for reading: LLVM's ``llvm.prefetch``, one instruction that neither waits nor
    faults."""
    if not (isinstance(a, types.Array) and isinstance(idx, types.UniTuple) and idx.count == a.ndim
            and isinstance(idx.dtype, types.Integer)):
        return None
    sig = types.void(a, idx)

    def codegen(context, builder, signature, args):
        aty, ity = signature.args
        ary = context.make_array(aty)(context, builder, args[0])
        ix = [context.cast(builder, v, ity.dtype, types.intp) for v in cgutils.unpack_tuple(builder, args[1])]
        ptr = cgutils.get_item_pointer(context, builder, aty, ary, ix, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        # the name of typed-pointer LLVM (<= 14); newer LLVM renames it to ".p0" when it reads the IR
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])   # read, keep, data
        return context.get_dummy_value()
    return sig, codegen


PF_LEAVES = 1024
"""Pools with fewer leaves than this are not worth prefetching for (:func:`btree_big`): their rows
stay in the caches, and the prefetch's own descent only adds to an update (measured at 1k keys:
a lookup 80 -> 110 ns with it)."""


@njit(cache=True)
def btree_big(pool: BTreePool) -> bool:
    """Whether ``pool`` has outgrown the caches enough for :func:`btree_prefetch` to pay: at
    least ``PF_LEAVES`` leaves (768 KiB with two columns).  O(1)."""
    return pool.l_used >= PF_LEAVES


@njit(cache=True)
def btree_deep(pool: BTreePool, trees: float) -> bool:
    """Whether the ``trees`` trees of ``pool`` (one per slice: a symbol, a price level) hold two
    leaves each on average, so that the path stages of a per-slice prefetch
    (:func:`btree_prefetch_level` at levels above the leaf) have internal nodes to load.  Why:
    a tree per price level of a book at distinct prices is one leaf of one order, and each path
    stage costs a probe of the root table and a call for nothing (measured: top5_bid_order_volume
    at 10k resting orders 326 -> 267 ns/line, 1M 837 -> 642, the leaf stage alone; CPU time, one
    run each, load average 10 on 2 cores).  O(1)."""
    return pool.l_used - pool.l_free >= 2 * trees


@njit(cache=True)
def btree_prefetch(pool: BTreePool, root: int, key: float) -> None:
    """Start loading what an update of ``key`` will touch below the internal levels: the leaf
    that holds (or would hold) it, whole, its fill, and its parent's sum and count entries.
    Changes nothing; a hint to the CPU.  (A short leaf's first slots would do (:func:`_leaf_lt`),
    but reading the fill here waits on it: measured slower, top10_level_imbalance at 1M.)

    Why: at a million distinct keys the leaves are as big as the last-level cache, and an update
    waits on memory several times in a row (the leaf's keys, then the values at the position they
    give, then the rest of the row as the sums are recomputed, then the parent's sums and counts).
    ``run_batch`` calls this a few events ahead (``codegen.PF_AHEAD``) for the trees it updates at
    event keys, once the pool is :func:`btree_big`, so those waits overlap with the updates in
    between: measured at 1M distinct prices, a random delete + insert 1.45 -> 1.0 us, a lookup
    450 -> 300 ns.  The descent reads internal rows only (the bottom level's then stay cached
    for the update).  O(F log_F n)."""
    pool = _bp(pool)
    if root < 0 or key != key:
        return
    nc, lw, iw = _widths(pool)
    ik = _b(pool.ik)
    n, i = _descend(ik, _b(pool.in_), iw, root, key)
    lf = _b(pool.lf)
    for off in range(0, lw * FL, 8):   # 8 float64 to a 64-byte line
        _prefetch(lf, (n, off))
    _prefetch(lf, (n, lw * FL - 1))   # (the row's last line, should the rows not be line-aligned)
    _prefetch(_b(pool.ln), (n,))
    if i >= 0:
        for off in range(FI, (nc + 1) * FI, 8):
            _prefetch(ik, (i, off))
        ii = _b(pool.ii)
        for off in range(0, 2 * nc * FI, 8):
            _prefetch(ii, (i, off))


@njit(cache=True)
def btree_prefetch_level(pool: BTreePool, ref: int, key: float, level: int) -> int:
    """Start loading the node ``level`` levels below node ``ref`` (0: ``ref`` itself) on the path
    an update of ``key`` takes, the leaf if the path is shorter: of an internal node what a
    descent reads (its keys and children: four cache lines) and, below the root, the sum rows the
    walk back up re-sums for its parent (two lines per column), of a leaf its whole row and fill (of
    a leaf reached without a descent, only the blocks of its row a short fill uses: see below);
    and of its parent the lines that the update's walk back up writes (the sums and counts of the
    entry the path takes).  Returns the node reached (a ref), -1 if there is none.  Changes
    nothing; a hint to the CPU.

    ``ref`` is a tree's root, or what an earlier call returned for the same key: the caller
    carries the path down from stage to stage, so each stage searches only the rows the previous
    one loaded (``codegen.PF_PATH``) instead of descending again from the root (and looking the
    root up again in the root table).  The tree may have changed in between (a split, a merge, a
    freed node reused elsewhere): a stale ref then loads the wrong lines, which costs time, not
    results, and a free node (fill -1) ends the descent, so every read stays inside the pool.

    Why: with many small trees in one pool (one per instrument: a thousand books of a thousand
    orders), each update lands in a tree whose *every* row is cold, root included, so
    :func:`btree_prefetch` (which descends to find the leaf) waits on the root and internal rows
    itself.  Generated ``run_batch`` calls this for the root, level 1, .. and then the leaf
    (``level`` >= the depth) a few events apart, so that each call's descent reads rows an
    earlier call started loading, and loads only the lines the update reads (the whole rows of
    every level: twice the memory traffic).

    A leaf reached without a descent (``ref`` is a leaf: the root of a tree that is a single leaf,
    a slice of a few keys -- at distinct prices most price levels hold one order, each its own
    tree) gets only the first ``FS`` slots of each segment and the fill, without reading the fill
    (which would wait on it): what an update of a short leaf reads (:func:`_leaf_lt`), 3-6 cache
    lines instead of 12 with two columns; the rest of a fuller one comes on demand.  (A leaf that
    an earlier stage reached by a descent had its whole row loaded then.)  O(F level)."""
    pool = _bp(pool)
    if ref < 0 or key != key:
        return -1
    nc, lw, iw = _widths(pool)
    ik = _b(pool.ik)
    in_ = _b(pool.in_)
    r = ref
    i = -1
    j = 0
    d = 0
    while r & 1 and d < level:
        i = r >> 1
        m = in_[i] - 1
        if m < 0:   # freed since the ref was taken
            return -1
        j = _count_lt(ik, i, FI, key)
        if j > m:
            j = m
        r = _child(ik, iw, i, j)
        d += 1
    n = r >> 1
    if r & 1:
        for off in (0, 8, FI * (iw - 1), FI * (iw - 1) + 8):   # keys, children
            _prefetch(ik, (n, off))
        _prefetch(in_, (n,))
        if i >= 0:   # below the root: the walk back up re-sums its whole sum rows for its parent
            for c in range(nc):
                _prefetch(ik, (n, FI * (1 + c)))
                _prefetch(ik, (n, FI * (1 + c) + 8))
    elif d == 0:   # a tree of one leaf (a small slice): the first block of each segment, and the fill
        lf = _b(pool.lf)
        for g in range(0, lw * FL, FL):
            _prefetch(lf, (n, g))
            _prefetch(lf, (n, g + FS - 1))   # (rows need not start on a line)
        _prefetch(_b(pool.ln), (n,))
        _prefetch(_b(pool.llink), (n,))   # (written when its last key goes: the leaf is freed)
    else:
        lf = _b(pool.lf)
        for off in range(0, lw * FL, 8):
            _prefetch(lf, (n, off))
        _prefetch(lf, (n, lw * FL - 1))
        _prefetch(_b(pool.ln), (n,))
    if i >= 0:
        ii = _b(pool.ii)
        for c in range(nc):
            _prefetch(ik, (i, FI * (1 + c) + j))
            _prefetch(ii, (i, 2 * c * FI + j))
    return r


# --------------------------------------------------------------------------------------------
# point and whole-map queries (column c of the tree)


@njit(cache=True)
def btree_get(pool: BTreePool, root: int, key: float, c: int = 0) -> float:
    """value[key] in column c, 0.0 if absent (or if key is NaN).  O(F log_F n): one descent."""
    pool = _bp(pool)
    _column(_widths(pool)[0], c)
    if root == -1:
        return 0.0
    lf = _b(pool.lf)
    _, lw, iw = _widths(pool)
    n = _descend(_b(pool.ik), _b(pool.in_), iw, root, key)[0]
    fill = _b(pool.ln)[n]
    pos = _leaf_lt(lf, n, fill, key)
    if pos < fill and lf[n, pos] == key:
        return lf[n, FL * (1 + c) + pos]
    return 0.0


@njit(cache=True)
def btree_total(pool: BTreePool, root: int, c: int = 0) -> float:
    """Sum of all values of column c.  O(F): recomputed from the root row (bitwise what the
    parent of the root would store)."""
    pool = _bp(pool)
    _flush(pool)
    _column(_widths(pool)[0], c)
    if root == -1:
        return 0.0
    n = root >> 1
    if root & 1:
        return _rowsum(_b(pool.ik), n, FI * (1 + c), FI)
    return _rowsum(_b(pool.lf), n, FL * (1 + c), FL)


@njit(cache=True)
def btree_len(pool: BTreePool, root: int, c: int = 0) -> int:
    """Number of keys with a nonzero value in column c.  O(F): from the root row."""
    pool = _bp(pool)
    _flush(pool)
    _column(_widths(pool)[0], c)
    if root == -1:
        return 0
    n = root >> 1
    if root & 1:
        return _isum(_b(pool.ii), n, 2 * c * FI, FI)
    return _leaf_nonzero(_b(pool.lf), _widths(pool)[1], n, c)


@njit(cache=True)
def btree_negatives(pool: BTreePool, root: int, c: int = 0) -> int:
    """Number of keys with a negative value in column c.  O(F): from the root row.

    When it is 0, prefix sums are nondecreasing in the key and :func:`btree_first_prefix` applies.
    """
    pool = _bp(pool)
    _flush(pool)
    _column(_widths(pool)[0], c)
    if root == -1:
        return 0
    n = root >> 1
    if root & 1:
        return _isum(_b(pool.ii), n, (2 * c + 1) * FI, FI)
    return _leaf_negatives(_b(pool.lf), _widths(pool)[1], n, c)


@njit(cache=True, inline="always")
def _query(pool, c):
    """What a query of column c does first: write the pending sums up (:func:`_flush`), check the
    column, and read the node arrays as borrowed views (valid until the query returns: queries
    allocate no node).  Returns (ik, ii, in_, lf, ln, lw, iw).  Inlined: its array loads cost
    nothing where a query does not use them."""
    _flush(pool)
    _column(_widths(pool)[0], c)
    _, lw, iw = _widths(pool)
    return _b(pool.ik), _b(pool.ii), _b(pool.in_), _b(pool.lf), _b(pool.ln), lw, iw


@njit(cache=True)
def _extreme(pool, root, c, largest):
    """(True, smallest / largest key with a nonzero value in column c), or (False, nan).

    One descent into the first / last child whose nonzero count for c is positive: O(F log_F n).
    A one-column tree holds no zero value, so there the answer is the first / last key."""
    ik, ii, in_, lf, ln, lw, iw = _query(pool, c)
    if root == -1:
        return False, np.nan
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        j = -1
        for t in range(m):
            u = m - 1 - t if largest else t
            if ii[i, 2 * c * FI + u] > 0:
                j = u
                break
        if j == -1:  # (only at the root: column c is empty)
            return False, np.nan
        r = _child(ik, iw, i, j)
    n = r >> 1
    m = ln[n]
    for t in range(m):
        u = m - 1 - t if largest else t
        if lf[n, FL * (1 + c) + u] != 0.0:
            return True, lf[n, u]
    return False, np.nan


@njit(cache=True)
def btree_min(pool: BTreePool, root: int, c: int = 0) -> tuple[bool, float]:
    """(True, smallest key of column c), or (False, nan) if it is empty.  O(F log_F n)."""
    pool = _bp(pool)
    return _extreme(pool, root, c, False)


@njit(cache=True)
def btree_max(pool: BTreePool, root: int, c: int = 0) -> tuple[bool, float]:
    """(True, largest key of column c), or (False, nan) if it is empty.  O(F log_F n)."""
    pool = _bp(pool)
    return _extreme(pool, root, c, True)


@njit(cache=True)
def btree_nth(pool: BTreePool, root: int, n: int, largest: bool, c: int = 0) -> tuple[bool, float]:
    """Select by rank: (True, the n-th largest / smallest key with a nonzero value in column c,
    counting from 1), the last key of that order (smallest / largest) when the column holds
    fewer than n keys, or (False, nan) when it is empty or n < 1.  n = 1 is :func:`btree_max` /
    :func:`btree_min`.  This is the cut of a top-N: the N best price levels are the keys >= the
    N-th largest (the whole book when it has fewer than N).

    One descent by the nonzero counts of the internal entries (kept exact by deltas): at each
    node, skip the children (from the right when ``largest``) whose counts sum to less than the
    rank left, and enter the one that holds it.  O(F log_F n)."""
    pool = _bp(pool)
    ik, ii, in_, lf, ln, lw, iw = _query(pool, c)
    if root == -1 or n < 1:
        return False, np.nan
    total = btree_len(pool, root, c)
    if total == 0:
        return False, np.nan
    left = min(n, total)   # rank still to skip, among the keys of the current subtree
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        j = m - 1 if largest else 0
        for t in range(m):
            u = m - 1 - t if largest else t
            k = ii[i, 2 * c * FI + u]
            j = u
            if k >= left:
                break
            left -= k
        r = _child(ik, iw, i, j)
    x = ln[r >> 1]
    for t in range(x):
        u = x - 1 - t if largest else t
        if lf[r >> 1, FL * (1 + c) + u] != 0.0:
            left -= 1
            if left == 0:
                return True, lf[r >> 1, u]
    return False, np.nan   # (unreachable: the counts are exact)


@njit(cache=True)
def btree_nth_row(pool: BTreePool, root: int, n: int, largest: bool, c: int = 0) -> tuple[bool, float]:
    """Select by weighted rank: (True, the key of the n-th row from the largest / smallest key,
    each key counting as many rows as its value in column c), the last key of that order when
    the values add up to fewer than n, or (False, nan) when the column is empty or n < 1.  The
    values are row counts (nonnegative integers, exact in float64): the price of the n-th best
    order of a book whose tree counts orders per price, the cut of a top-N over single orders.

    One :func:`btree_first_prefix` descent: from the smallest key, the n-th smallest row is at
    the first key whose prefix sum reaches n; the n-th largest at the first whose prefix sum
    exceeds total - n (the rows from it on are at least n, from the next key on fewer).
    O(F log_F n)."""
    pool = _bp(pool)
    if root == -1 or n < 1 or btree_len(pool, root, c) == 0:
        return False, np.nan
    if largest:   # total < n: the bound is negative, the smallest key qualifies (the last of the order)
        return btree_first_prefix(pool, root, btree_total(pool, root, c) - n, True, c)
    found, b = btree_first_prefix(pool, root, float(n), False, c)
    if found:
        return True, b
    return _extreme(pool, root, c, True)


@njit(cache=True)
def btree_items(pool: BTreePool, root: int, c: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) of column c (its nonzero values) as new float64 arrays in increasing key
    order.  O(n), iterative walk."""
    pool = _bp(pool)
    _flush(pool)
    total = btree_len(pool, root, c)
    keys = np.empty(total, np.float64)
    vals = np.empty(total, np.float64)
    if root == -1:
        return keys, vals
    lf = _b(pool.lf)
    ln = _b(pool.ln)
    _, lw, iw = _widths(pool)
    ik = _b(pool.ik)
    in_ = _b(pool.in_)
    sn = _b(pool.pn)
    sj = _b(pool.pj)
    w = 0
    if not root & 1:  # a leaf root: one pass, no stack
        sn[0] = -1
        top = -1
        leaf = root >> 1
    else:
        sn[0] = root >> 1
        sj[0] = 0
        top = 0
        leaf = -1
    while True:
        if leaf != -1:
            for t in range(ln[leaf]):
                v = lf[leaf, FL * (1 + c) + t]
                if v != 0.0:
                    keys[w] = lf[leaf, t]
                    vals[w] = v
                    w += 1
            leaf = -1
        if top < 0:
            break
        i = sn[top]
        j = sj[top]
        if j == in_[i]:
            top -= 1
            continue
        sj[top] = j + 1
        ch = _child(ik, iw, i, j)
        if ch & 1:
            top += 1
            sn[top] = ch >> 1
            sj[top] = 0
        else:
            leaf = ch >> 1
    return keys, vals


# --------------------------------------------------------------------------------------------
# range-cumulative queries: one root-to-leaf descent each.  At an internal node the children
# wholly inside the range are added from their sum entries and the descent enters the one child
# that straddles the bound.


@njit(cache=True)
def _sum_below(pool, root, x, inclusive, c):
    # Left to right, in the order btree_first_prefix forms prefix sums (see the module docstring).
    ik, ii, in_, lf, ln, lw, iw = _query(pool, c)
    if root == -1:
        return 0.0
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
            acc = acc + ik[i, FI * (1 + c) + t]
        if j == m:
            return acc
        r = _child(ik, iw, i, j)
    n = r >> 1
    j = _count_le(lf, n, FL, x) if inclusive else _count_lt(lf, n, FL, x)
    for t in range(j):  # a padding slot past the fill (x = +inf) adds 0.0: harmless
        acc = acc + lf[n, FL * (1 + c) + t]
    return acc


@njit(cache=True, inline="always")
def _tail_sum(ik, iw, i, j, c):
    """Sum of column c's sums of entries j < t < FI of internal node i: a masked four-lane sum over
    the whole row (loads outside the conditionals, so they compile to selects, not branches)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    o = FI * (1 + c)
    for t in range(0, FI, 4):
        v0 = ik[i, o + t]
        v1 = ik[i, o + t + 1]
        v2 = ik[i, o + t + 2]
        v3 = ik[i, o + t + 3]
        s0 += v0 if t > j else 0.0
        s1 += v1 if t + 1 > j else 0.0
        s2 += v2 if t + 2 > j else 0.0
        s3 += v3 if t + 3 > j else 0.0
    return (s0 + s1) + (s2 + s3)


@njit(cache=True, inline="always")
def _leaf_sum_above(lf, lw, n, x, inclusive, c):
    """Sum of column c's values of a leaf with key > x (>= x if ``inclusive``): a masked four-lane
    sum over the whole row (padding values are 0.0)."""
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    o = FL * (1 + c)
    if inclusive:
        for t in range(0, FL, 4):
            v0 = lf[n, o + t]
            v1 = lf[n, o + t + 1]
            v2 = lf[n, o + t + 2]
            v3 = lf[n, o + t + 3]
            s0 += v0 if lf[n, t] >= x else 0.0
            s1 += v1 if lf[n, t + 1] >= x else 0.0
            s2 += v2 if lf[n, t + 2] >= x else 0.0
            s3 += v3 if lf[n, t + 3] >= x else 0.0
    else:
        for t in range(0, FL, 4):
            v0 = lf[n, o + t]
            v1 = lf[n, o + t + 1]
            v2 = lf[n, o + t + 2]
            v3 = lf[n, o + t + 3]
            s0 += v0 if lf[n, t] > x else 0.0
            s1 += v1 if lf[n, t + 1] > x else 0.0
            s2 += v2 if lf[n, t + 2] > x else 0.0
            s3 += v3 if lf[n, t + 3] > x else 0.0
    return (s0 + s1) + (s2 + s3)


@njit(cache=True)
def _sum_above(pool, root, x, inclusive, c):
    ik, ii, in_, lf, ln, lw, iw = _query(pool, c)
    if root == -1 or x != x:  # a NaN bound matches no key
        return 0.0
    acc = 0.0
    r = root
    while r & 1:
        i = r >> 1
        # the first child whose max key is above x (at least x) straddles x; those after it lie
        # wholly in the range
        j = _count_lt(ik, i, FI, x) if inclusive else _count_le(ik, i, FI, x)
        if j >= in_[i]:
            return acc
        acc = acc + _tail_sum(ik, iw, i, j, c)
        r = _child(ik, iw, i, j)
    return acc + _leaf_sum_above(lf, lw, r >> 1, x, inclusive, c)


@njit(cache=True)
def btree_sum_lt(pool: BTreePool, root: int, x: float, c: int = 0) -> float:
    """Sum of column c's values with key < x.  O(F log_F n)."""
    pool = _bp(pool)
    return _sum_below(pool, root, x, False, c)


@njit(cache=True)
def btree_sum_le(pool: BTreePool, root: int, x: float, c: int = 0) -> float:
    """Sum of column c's values with key <= x.  O(F log_F n)."""
    pool = _bp(pool)
    return _sum_below(pool, root, x, True, c)


@njit(cache=True)
def btree_sum_gt(pool: BTreePool, root: int, x: float, c: int = 0) -> float:
    """Sum of column c's values with key > x.  O(F log_F n)."""
    pool = _bp(pool)
    return _sum_above(pool, root, x, False, c)


@njit(cache=True)
def btree_sum_ge(pool: BTreePool, root: int, x: float, c: int = 0) -> float:
    """Sum of column c's values with key >= x.  O(F log_F n)."""
    pool = _bp(pool)
    return _sum_above(pool, root, x, True, c)


@njit(cache=True)
def btree_first_prefix(pool: BTreePool, root: int, y: float, strict: bool, c: int = 0) -> tuple[bool, float]:
    """Smallest key b whose inclusive prefix sum in column c, P(b) = sum(value[k] for k <= b), is
    > y (``strict``) or >= y; (True, b), or (False, nan) if no key qualifies.

    Requires ``btree_negatives(pool, root, c) == 0``: P is then nondecreasing in b, so one descent
    finds b: at each node, the first child whose running sum crosses y holds it.  O(F log_F n).
    With negative values the answer is some key where P crosses y, not necessarily the first.
    A key whose value in c is 0.0 (it lives for another column) is never the answer: P does not
    change there, so it crosses first only if the empty sum 0.0 already crosses y, and then the
    answer is the column's smallest key.

    P(b) is formed exactly as :func:`btree_sum_le` forms it: the running sum through a child's last
    key is the parent's running sum plus the child's sum entry.  So below the root the last entry
    of a node is never tested (its running sum is the one that crossed in the parent), and
    ``btree_sum_le(b)`` is bitwise the crossing value found.
    """
    pool = _bp(pool)
    ik, ii, in_, lf, ln, lw, iw = _query(pool, c)
    if root == -1:
        return False, np.nan
    if (0.0 > y) if strict else (0.0 >= y):
        return _extreme(pool, root, c, False)
    acc = 0.0  # sum of the values left of the current node
    known = False  # whether the running sum through the current node's last key is known to cross
    r = root
    while r & 1:
        i = r >> 1
        m = in_[i]
        last = m - 1 if known else m
        j = last
        for t in range(last):
            s = acc + ik[i, FI * (1 + c) + t]
            if s > y or (not strict and s == y):
                j = t
                break
            acc = s
        if j == m:  # at the root, no running sum crossed
            return False, np.nan
        known = True  # the child holds b; if j == m - 1 was not tested, the parent's sum crossed
        r = _child(ik, iw, i, j)
    n = r >> 1
    m = ln[n]
    last = m - 1 if known else m
    for t in range(last):
        s = acc + lf[n, FL * (1 + c) + t]
        if s > y or (not strict and s == y):
            return True, lf[n, t]
        acc = s
    if not known:
        return False, np.nan
    return True, lf[n, m - 1]


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
def range_sum(pool, root, op: int, x: float, c: int = 0) -> float:
    """Sum of column c's values with key ``op`` x; O(log n)."""
    pool = _bp(pool)
    if op == LT:
        return btree_sum_lt(pool, root, x, c)
    if op == LE:
        return btree_sum_le(pool, root, x, c)
    if op == GT:
        return btree_sum_gt(pool, root, x, c)
    return btree_sum_ge(pool, root, x, c)


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
def threshold_sum(pa, ra, pb, rb, rop: int, cop: int, x: float, ca: int = 0, cb: int = 0) -> float:
    """Sum of A[p] over the keys p of A with R(p) ``cop`` x, where R(p) is the sum of B[q] over
    keys q ``rop`` p.  This is VWAP's "volume above my price below k * total".

    When B has no negative values R is monotone in p, so the qualifying p form an up-set or a
    down-set of the reals, bounded at a key of B: one O(log n) descent of B finds the boundary
    (:func:`threshold_cut`) and one O(log n) range sum of A adds up the side that qualifies
    (:func:`threshold_apply`).  With negative values the answer falls back to a scan of A's keys
    (O(n log n)), still exact.  Several sums over one B with one condition share the cut.
    A is column ``ca`` of its tree, B column ``cb`` of its.
    """
    pa = _bp(pa)
    pb = _bp(pb)
    code, b = threshold_cut(pb, rb, rop, cop, x, cb)
    return threshold_apply(pa, ra, pb, rb, rop, cop, x, code, b, ca, cb)


@njit(cache=True)
def threshold_cut(pb, rb, rop: int, cop: int, x: float, cb: int = 0):
    """Where the condition of :func:`threshold_sum` holds, as ``(code, b)``: 0 nowhere, 1
    everywhere, 2..5 for keys >= b, > b, < b, <= b, 6 unknown (B has negative values: scan).
    One O(log n) descent of B (column ``cb`` of its tree); depends on B and x only."""
    pb = _bp(pb)
    if x != x:
        return 0, 0.0
    if btree_negatives(pb, rb, cb) > 0:
        return 6, 0.0
    # R(p) = F(p) for rop in (<, <=), T - F(p) for (>, >=); F = inclusive (<=, >) or
    # exclusive (<, >=) prefix sum, non-decreasing in p.  Rewrite the condition as F(p) c y.
    inclusive = rop == LE or rop == GT
    c, y = cop, x
    if rop == GT or rop == GE:
        y = btree_total(pb, rb, cb) - x
        c = (GT, GE, LT, LE)[cop]
    # U = {p : F(p) > y} (strict) or {F(p) >= y}; S is U for c in (>, >=), its complement else.
    strict = c == GT or c == LE
    upset = c == GT or c == GE
    if (0.0 > y) if strict else (0.0 >= y):
        return (1 if upset else 0), 0.0          # U is every real
    found, b = btree_first_prefix(pb, rb, y, strict, cb)
    if not found:                                # U is empty
        return (0 if upset else 1), 0.0
    if upset:
        return (2 if inclusive else 3), b
    return (4 if inclusive else 5), b


@njit(cache=True)
def threshold_apply(pa, ra, pb, rb, rop: int, cop: int, x: float, code: int, b: float, ca: int = 0,
                    cb: int = 0) -> float:
    """The sum of A over the keys :func:`threshold_cut` selected; O(log n) (O(n log n) for code 6)."""
    pa = _bp(pa)
    pb = _bp(pb)
    if code == 0:
        return 0.0
    if code == 1:
        return btree_total(pa, ra, ca)
    if code == 2:
        return btree_sum_ge(pa, ra, b, ca)
    if code == 3:
        return btree_sum_gt(pa, ra, b, ca)
    if code == 4:
        return btree_sum_lt(pa, ra, b, ca)
    if code == 5:
        return btree_sum_le(pa, ra, b, ca)
    keys, vals = btree_items(pa, ra, ca)
    acc = 0.0
    for i in range(keys.shape[0]):
        if _holds(cop, range_sum(pb, rb, rop, keys[i], cb), x):
            acc += vals[i]
    return acc


def btree_check(pool: BTreePool, root: int) -> None:
    """Assert every invariant of the pool's free lists and of the tree at ``root``.

    Keys strictly increasing within and across nodes, all leaves at one depth, fill bounds (root
    leaf >= 1 key, internal root >= 2 children, other nodes >= LMIN / IMIN, all <= FL / FI),
    padding of unused slots, every stored key nonzero in some column and not NaN, every entry's
    max key and per-column nonzero and negative counts equal to its child's recomputed ones and
    its sums bitwise equal to the child's :func:`_rowsum`, no node reachable twice or both reachable
    and free, free lists without loops, of the recorded lengths and marked free, reachable + free
    nodes within the capacity.  Pure Python, O(C n + free nodes): for tests.
    """
    view = _field_view(pool)   # one boxing of the fields, not one per attribute read
    ps = view.ps
    ns, last = int(ps[0, 0]), int(ps[0, 1])
    assert 0 <= ns <= PMAX and (ns == 0 and last == 0 or 0 <= last < ns), f"pending slots {ns}, last {last}"
    slots = {(int(ps[1 + s, 0]), int(ps[1 + s, 1])) for s in range(ns)}
    assert len(slots) == ns, "a leaf holds two pending slots"
    assert not ps[1 + ns:].any() and not ps[0, 2:].any(), "unused pending slots not cleared"
    for s in range(ns):
        if ps[1 + s, 0] != root:
            continue
        ref = int(root)  # the slot's path leads from the root to its leaf
        for e in range(int(ps[1 + s, 2])):
            assert ref & 1 and view.ppn[s, e] == ref >> 1, f"pending path of slot {s} broken at depth {e}"
            ref = int(view.ik[ref >> 1, FI * (view.iw - 1) + view.ppj[s, e]])
        assert ref == 2 * ps[1 + s, 1], f"pending path of slot {s} ends at {ref}, not at leaf {ps[1 + s, 1]}"
        assert ps[1 + s, 3] == view.ln[ps[1 + s, 1]], f"pending slot {s} records fill {ps[1 + s, 3]}"
    btree_flush(pool)   # then the sums on its path must be the recomputed ones, as everywhere
    view = _field_view(pool)
    assert not view.ps.any(), "pending slots left after a flush"
    nc, lw, iw = view.nc, view.lw, view.iw
    lf, ln, ik, ii, in_ = view.lf, view.ln, view.ik, view.ii, view.in_
    lcap, icap = view.lcap, view.icap
    assert 1 <= nc <= MAXC and lw == nc + 1 and iw == nc + 2, f"bad widths {nc} {lw} {iw}"
    assert lf.shape == (lcap, lw * FL) and ik.shape == (icap, iw * FI) and ii.shape == (icap, 2 * nc * FI)
    for arr in (ln, view.llink):
        assert len(arr) == lcap, "leaf array length differs from lcap"
    for arr in (in_, view.ilink):
        assert len(arr) == icap, "internal array length differs from icap"
    assert 0 <= view.l_used <= lcap and 0 <= view.i_used <= icap
    assert len(view.pn) == MAXD and len(view.pj) == MAXD
    assert all(len(a) == nc for a in (view.xv, view.dc, view.dn))
    assert all(len(a) == nc for a in (view.qf, view.qc, view.qn))
    assert view.ppn.shape == view.ppj.shape == (PMAX, MAXD) and view.ps.shape == (PMAX + 1, PS_COLS + 3 * nc)

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

    lfree = free_list(view.l_head, view.llink, ln, view.l_used, view.l_free)
    if lfree:   # _alloc_leaf hands a free leaf out unpadded: it must be a padded row already
        rows = lf[sorted(lfree)]
        assert (rows[:, :FL] == _INF).all() and (rows[:, FL:] == 0.0).all(), "a free leaf is not padded"
    ifree = free_list(view.i_head, view.ilink, in_, view.i_used, view.i_free)
    if root == -1:
        return
    assert root >= 0, f"bad root ref {root}"

    seen_l: set[int] = set()
    seen_i: set[int] = set()
    leaf_depths: set[int] = set()
    last_key: list[float] = []  # the last key seen in order, if any

    def visit(ref: int, depth: int, is_root: bool) -> tuple[float, list[float], list[int], list[int]]:
        """Check the subtree at ref; return its (max key, sums, nonzero counts, negatives) per
        column."""
        n = ref >> 1
        if not ref & 1:
            assert 0 <= n < view.l_used, f"leaf {n} outside [0, {view.l_used})"
            assert n not in seen_l, f"leaf {n} reachable twice"
            assert n not in lfree, f"leaf {n} both reachable and free"
            seen_l.add(n)
            leaf_depths.add(depth)
            m = int(ln[n])
            assert (1 if is_root else LMIN) <= m <= FL, f"leaf {n} holds {m} keys"
            row = lf[n].tolist()
            keys = row[:FL]
            cols = [row[FL * (1 + c):FL * (2 + c)] for c in range(nc)]
            for t, k in enumerate(keys[:m]):
                vals = [col[t] for col in cols]
                assert k == k, f"leaf {n} stores a NaN key"
                assert any(v != 0.0 for v in vals) and all(v == v for v in vals), f"leaf {n} stores {k}: {vals}"
                assert not last_key or last_key[0] < k, f"key {k} out of order after {last_key}"
                last_key[:] = [k]
            assert all(k == np.inf for k in keys[m:]) and all(v == 0.0 for col in cols for v in col[m:]), (
                f"leaf {n} padding broken"
            )
            return (keys[m - 1], [_py_rowsum(col) for col in cols], [sum(v != 0.0 for v in col) for col in cols],
                    [sum(v < 0.0 for v in col) for col in cols])
        assert 0 <= n < view.i_used, f"internal node {n} outside [0, {view.i_used})"
        assert n not in seen_i, f"internal node {n} reachable twice"
        assert n not in ifree, f"internal node {n} both reachable and free"
        seen_i.add(n)
        m = int(in_[n])
        assert (2 if is_root else IMIN) <= m <= FI, f"internal node {n} has {m} children"
        assert depth < MAXD, "tree deeper than MAXD"
        row = ik[n].tolist()
        maxk, kids = row[:FI], row[FI * (iw - 1):]
        sums = [row[FI * (1 + c):FI * (2 + c)] for c in range(nc)]
        cnts = [ii[n, 2 * c * FI:(2 * c + 1) * FI].tolist() for c in range(nc)]
        negs = [ii[n, (2 * c + 1) * FI:(2 * c + 2) * FI].tolist() for c in range(nc)]
        for j in range(m):
            assert kids[j] == int(kids[j]) >= 0, f"node {n} entry {j}: child {kids[j]}"
            mk, s, k, g = visit(int(kids[j]), depth + 1, False)
            assert maxk[j] == mk, f"node {n} entry {j}: max key {maxk[j]}, expected {mk}"
            for c in range(nc):
                assert sums[c][j] == s[c], f"node {n} entry {j} column {c}: sum {sums[c][j]}, expected {s[c]}"
                assert cnts[c][j] == k[c], f"node {n} entry {j} column {c}: count {cnts[c][j]}, expected {k[c]}"
                assert negs[c][j] == g[c], f"node {n} entry {j} column {c}: negatives {negs[c][j]}, expected {g[c]}"
        for j in range(m, FI):
            pad = (maxk[j], kids[j], *(sums[c][j] for c in range(nc)), *(cnts[c][j] for c in range(nc)),
                   *(negs[c][j] for c in range(nc)))
            assert pad == (np.inf, -1.0, *[0.0] * nc, *[0] * (2 * nc)), f"node {n} padding broken"
        return (maxk[m - 1], [_py_rowsum(sc) for sc in sums], [sum(kc[:m]) for kc in cnts],
                [sum(gc[:m]) for gc in negs])

    visit(int(root), 0, True)
    assert len(leaf_depths) == 1, f"leaves at depths {sorted(leaf_depths)}"
    assert len(seen_l) + len(lfree) <= lcap and len(seen_i) + len(ifree) <= icap

