"""Model-based tests of ddms.storage.btree against a sortedcontainers.SortedDict.

Every test runs twice: on the module as shipped, and on a copy compiled with the smallest fanouts
(8-key leaves, 8-child internal nodes), where a few dozen keys already make trees three levels
deep, so splits, borrows, merges and root changes happen all the time.

Values are small integers and dyadic fractions, so every sum is exact in float64 whatever the
summation order and the tree can be compared with the model by ``==``; one test uses arbitrary
floats and checks the ordering guarantees that hold bitwise even then.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import bisect
import importlib.util
import math
import re
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from sortedcontainers import SortedDict

import ddms.storage.btree as shipped
from ddms.storage.btree import (
    btree_add,
    btree_check,
    btree_first_prefix,
    btree_get,
    btree_new,
    btree_sum_gt,
    btree_sum_le,
)

pytestmark = pytest.mark.long(30)   # the tree module compiles cold (the fanout-8 copy: -m slow only)

NAMES = ["new", "add", "addv", "set", "get", "total", "len", "negatives", "sum_lt", "sum_le", "sum_gt",
         "sum_ge", "first_prefix", "min", "max", "nth", "items", "free", "check", "big", "prefetch", "prefetch_level",
         "flush"]


# -- the model (a SortedDict) ---------------------------------------------------------------

def model_update(model: SortedDict, key: float, value: float, assign: bool) -> None:
    v = value if assign else model.get(key, 0.0) + value
    if v == 0.0:
        model.pop(key, None)
    else:
        model[key] = v


def brute_first_prefix(model: SortedDict, y: float, strict: bool) -> tuple[bool, float]:
    acc = 0.0
    for k, v in model.items():
        acc += v
        if acc > y or (not strict and acc == y):
            return True, k
    return False, math.nan


def crosses(s: float, y: float, strict: bool) -> bool:
    return s > y if strict else s >= y


def same(a: tuple[bool, float], b: tuple[bool, float]) -> bool:
    return a[0] == b[0] and (a[1] == b[1] if a[0] else math.isnan(a[1]) and math.isnan(b[1]))


def small_module():
    """ddms.storage.btree recompiled with FL = FI = 8 (kept at a fixed path under the temp dir, so
    numba's disk cache serves later runs)."""
    src = Path(shipped.__file__).read_text()
    src, n_leaf = re.subn(r"^FL = \d+", "FL = 8", src, flags=re.M)
    src, n_int = re.subn(r"^FI = \d+", "FI = 8", src, flags=re.M)
    assert n_leaf == n_int == 1, "FL / FI definitions not found in btree.py"
    folder = Path(tempfile.gettempdir()) / "ddms_btree_test"
    folder.mkdir(exist_ok=True)
    path = folder / "btree_fanout8.py"
    if not path.exists() or path.read_text() != src:
        path.write_text(src)
    spec = importlib.util.spec_from_file_location("ddms_btree_fanout8", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    assert mod.FL == mod.FI == 8
    return mod


# the fanout-8 build recompiles the whole tree module cold (about two CPU minutes, the costliest
# file of the default suite): it runs with ``-m slow``; the shipped build (32-key leaves, 16-child
# nodes) runs in every suite, and its "fill"/"drain" runs still split, borrow and merge
@pytest.fixture(scope="module", params=["shipped", pytest.param("fanout8", marks=pytest.mark.slow)])
def b(request) -> SimpleNamespace:
    """The btree_* functions of one build, as b.add, b.sum_le...; b.pool is a shared pool."""
    mod = shipped if request.param == "shipped" else small_module()
    ns = SimpleNamespace(mod=mod, **{name: getattr(mod, "btree_" + name) for name in NAMES})
    ns.pool = ns.new(4, 1)
    ns.cpool = ns.new(4, COLS)
    return ns


COLS = 3  # columns of the multi-column tree
N_ROOTS = 3  # root 0 only ever holds positive values, so first_prefix is always checked on it

keys = st.one_of(
    st.sampled_from([-1e12, 1e12, 0.0, -0.0, 0.5, 2.5, math.inf, -math.inf, 5e-324, -1.7976931348623157e308]),
    st.integers(-30, 30).map(float),
    st.integers(-60, 60).map(lambda i: i / 4),
)
values = st.one_of(
    st.integers(-6, 6).map(float),
    st.sampled_from([0.5, -0.25, 0.75, 1e6, -1e6, 0.0]),
)
# (root, kind, key, value, pick): "cancel" adds minus the current value of the pick-th key of the
# root's model (deleting it through an exact zero); "fill" adds value (or 1) to 1 + pick % 24 keys
# spaced by 0.25 from key; "drain" cancels up to 1 + pick % 24 consecutive keys of the model;
# "free" clears the whole root.  The last element says whether to query the tree after the
# operation (< 0: not; else the kind of query to run first, see verify): queries flush the pool's
# pending leaves (btree._update), so runs of unqueried updates, over several roots of one pool,
# exercise the in-place path that skips descents.
ops = st.lists(
    st.tuples(
        st.integers(0, N_ROOTS - 1),
        st.sampled_from(["add", "add", "add", "set", "cancel", "cancel", "fill", "drain", "free"]),
        keys,
        values,
        st.integers(0, 1 << 16),
        st.integers(-4, 11),
    ),
    max_size=40,
)


def verify(b: SimpleNamespace, pool, root: int, model: SortedDict, c: int = 0, first: int = 0) -> None:
    """Every query of column ``c`` of the tree at ``root`` agrees with the model (exactly: values
    are dyadic); then :func:`btree_check`.  The kinds of query run in turn starting with kind
    ``first`` (mod their number): whichever comes first meets the pool's pending leaves, if any, so
    a query that forgot to flush it fails on some ``first``."""
    mk = list(model.keys())
    mv = list(model.values())
    prefix = [0.0]
    for v in mv:
        prefix.append(prefix[-1] + v)
    total = prefix[-1]
    probes = [-math.inf, math.inf, -2e12, 2e12, 0.0]
    probes += [x for x in mk + [(x + y) / 2 for x, y in zip(mk, mk[1:], strict=False)] if not math.isnan(x)]
    lo = [bisect.bisect_left(mk, x) for x in probes]
    hi = [bisect.bisect_right(mk, x) for x in probes]

    def sums(fn, want) -> None:
        for x, i, j in zip(probes, lo, hi, strict=True):
            assert fn(pool, root, x, c) == want(i, j), (fn, x)
        assert fn(pool, root, math.nan, c) == 0.0   # NaN bounds match nothing

    def items() -> None:
        ks, vs = b.items(pool, root, c)
        assert ks.tolist() == mk and vs.tolist() == mv

    def first_prefix() -> None:
        if any(v < 0 for v in mv):
            return
        cums = prefix[1:]  # nondecreasing: no negatives
        thresholds = {-1.0, -0.25, 0.0, total, total + 1.0, math.inf, -math.inf}
        for p in cums:
            thresholds.update((p - 0.25, p, p + 0.25))
        for y in thresholds:
            for strict in (True, False):
                i = bisect.bisect_right(cums, y) if strict else bisect.bisect_left(cums, y)
                expect = (True, mk[i]) if i < len(mk) else (False, math.nan)
                got = b.first_prefix(pool, root, y, strict, c)
                assert same(got, expect), (y, strict, got, expect)

    def nth() -> None:
        # select by rank: the n-th largest / smallest key, clamped to the last one, none for n < 1
        for n in (-1, 0, 1, 2, 3, len(mk) - 1, len(mk), len(mk) + 1, len(mk) + 40):
            for largest in (True, False):
                want = (False, math.nan) if n < 1 or not mk else \
                    (True, (mk[::-1] if largest else mk)[min(n, len(mk)) - 1])
                got = b.nth(pool, root, n, largest, c)
                assert same(got, want), (n, largest, got, want)

    kinds = [
        lambda: sums(b.get, lambda i, j: mv[i] if j > i else 0.0),
        lambda: nth(),
        lambda: sums(b.sum_lt, lambda i, j: prefix[i]),
        lambda: sums(b.sum_le, lambda i, j: prefix[j]),
        lambda: sums(b.sum_gt, lambda i, j: total - prefix[j]),
        lambda: sums(b.sum_ge, lambda i, j: total - prefix[i]),
        lambda: first_prefix(),
        lambda: items(),
        lambda: assert_equal(b.len(pool, root, c), len(mk)),
        lambda: assert_equal(b.total(pool, root, c), total),
        lambda: assert_equal(b.negatives(pool, root, c), sum(v < 0 for v in mv)),
        lambda: assert_equal(b.min(pool, root, c), (True, mk[0]) if mk else (False, math.nan), same),
        lambda: assert_equal(b.max(pool, root, c), (True, mk[-1]) if mk else (False, math.nan), same),
    ]
    first %= len(kinds)
    for kind in kinds[first:] + kinds[:first]:
        kind()
    b.check(pool, root)


def assert_equal(got, want, eq=None) -> None:
    assert (eq(got, want) if eq else got == want), (got, want)


def free_all(b: SimpleNamespace, pool, roots: list[int]) -> None:
    """Clear every root and check that the pool leaked no node."""
    for i, r in enumerate(roots):
        roots[i] = b.free(pool, r)
        assert roots[i] == -1
        b.check(pool, -1)
    assert pool.l_free == pool.l_used and pool.i_free == pool.i_used


def apply(b: SimpleNamespace, pool, root: int, model: SortedDict, kind: str, key: float, value: float,
          pick: int) -> int:
    """Apply one generated operation to the tree and to the model; the new root."""
    if kind == "free":
        model.clear()
        return b.free(pool, root)
    if kind == "cancel":
        if model:
            key = model.keys()[pick % len(model)]
            root = b.add(pool, root, key, -model[key])
            del model[key]
        return root
    if kind == "drain":
        if model:
            start = pick % len(model)
            for key in list(model.keys()[start : start + 1 + pick % 24]):
                root = b.add(pool, root, key, -model[key])
                del model[key]
        return root
    if kind == "fill":
        value = value or 1.0
        for i in range(1 + pick % 24):
            k = key + 0.25 * i
            root = b.add(pool, root, k, value)
            model_update(model, k, value, assign=False)
        return root
    assign = kind == "set"
    root = (b.set if assign else b.add)(pool, root, key, value)
    model_update(model, key, value, assign=assign)
    return root


@settings(max_examples=120, deadline=None)
@given(ops=ops)
def test_against_model(b: SimpleNamespace, ops: list[tuple[int, str, float, float, int, int]]) -> None:
    pool = b.pool
    roots = [-1] * N_ROOTS
    models = [SortedDict() for _ in range(N_ROOTS)]
    for r in range(N_ROOTS):
        verify(b, pool, roots[r], models[r])
    for r, kind, key, value, pick, look in ops:
        if r == 0:
            value = abs(value)  # root 0 stays free of negatives
        roots[r] = apply(b, pool, roots[r], models[r], kind, key, value, pick)
        if look >= 0:
            verify(b, pool, roots[r], models[r], first=look)
    for r in range(N_ROOTS):  # operations on one root left the others intact
        verify(b, pool, roots[r], models[r])
    free_all(b, pool, roots)


# (kind, key, values, column, pick): "addv" adds a delta per column in one update (the fused
# statements of generated code), "add" / "set" touch one column, "cancel" subtracts every column of
# the pick-th key of the union (an exact zero everywhere: the key leaves), "free" clears the tree
col_ops = st.lists(
    st.tuples(
        st.sampled_from(["addv", "addv", "add", "set", "cancel", "free"]),
        keys,
        st.tuples(values, values, values),
        st.integers(0, COLS - 1),
        st.integers(0, 1 << 16),
        st.integers(-4, 11),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(ops=col_ops)
def test_columns_against_models(b: SimpleNamespace, ops: list) -> None:
    """A three-column tree behaves as three maps sharing keys: each column is checked against a
    model of its own, including keys that live only for another column (zeros in this one)."""
    pool = b.cpool
    root = -1
    models = [SortedDict() for _ in range(COLS)]
    for kind, key, vals, c, pick, look in ops:
        vals = (abs(vals[0]), vals[1], vals[2])  # column 0 stays free of negatives (first_prefix)
        if kind == "addv":
            root = b.addv(pool, root, key, vals)
            for col in range(COLS):
                model_update(models[col], key, vals[col], assign=False)
        elif kind in ("add", "set"):
            root = (b.set if kind == "set" else b.add)(pool, root, key, vals[c], c)
            model_update(models[c], key, vals[c], assign=kind == "set")
        elif kind == "cancel":
            union = sorted(set().union(*models))
            if union:
                key = union[pick % len(union)]
                root = b.addv(pool, root, key, tuple(-m.get(key, 0.0) for m in models))
                for m in models:
                    m.pop(key, None)
        else:
            root = b.free(pool, root)
            for m in models:
                m.clear()
        for col in range(COLS if look >= 0 else 0):
            verify(b, pool, root, models[col], col, first=look + col)
    for col in range(COLS):
        verify(b, pool, root, models[col], col)
    if root != -1:  # a bad column or delta count is refused, and the tree is left as it was
        with pytest.raises(IndexError):
            b.add(pool, root, 1.0, 1.0, COLS)
        with pytest.raises(ValueError, match="one delta per column"):
            b.addv(pool, root, 1.0, (1.0, 2.0))
        for col in range(COLS):
            verify(b, pool, root, models[col], col)
    free_all(b, pool, [root])


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.floats(-1e9, 1e9), st.floats(1e-3, 1e6), st.booleans()), min_size=1, max_size=120
    ),
    ys=st.lists(st.floats(-10.0, 1e8), min_size=1, max_size=10),
)
def test_arbitrary_floats(b: SimpleNamespace, items: list[tuple[float, float, bool]], ys: list[float]) -> None:
    """Inexact sums: aggregates stay close to the model, and first_prefix's answer b is where the
    prefix sums *as btree_sum_le computes them* cross y: this part holds bitwise."""
    pool = b.pool
    root = -1
    model = SortedDict()
    for key, value, drop in items:
        root = b.add(pool, root, key, value)
        model_update(model, key, value, assign=False)
        if drop:  # remove a key by assignment
            root = b.set(pool, root, key, 0.0)
            del model[key]
    b.check(pool, root)  # sums bitwise equal to their recomputation from the children
    ks, vs = b.items(pool, root)
    assert ks.tolist() == list(model.keys()) and vs.tolist() == list(model.values())
    total = math.fsum(model.values())
    assert b.total(pool, root) == pytest.approx(total, rel=1e-12, abs=1e-9)
    mk = list(model.keys())
    for y in [*ys, total, total / 2, *(b.sum_le(pool, root, k) for k in mk[:: max(1, len(mk) // 8)])]:
        for strict in (True, False):
            found, at = b.first_prefix(pool, root, y, strict)
            if found:
                assert crosses(b.sum_le(pool, root, at), y, strict)
                i = model.keys().index(at)
                if i > 0:
                    assert not crosses(b.sum_le(pool, root, mk[i - 1]), y, strict)
            elif model:
                assert not crosses(b.sum_le(pool, root, mk[-1]), y, strict)
            x = y / 100.0  # a key-range probe
            assert b.sum_le(pool, root, x) == pytest.approx(
                math.fsum(v for k, v in model.items() if k <= x), rel=1e-9, abs=1e-6
            )
            assert b.sum_gt(pool, root, x) == pytest.approx(
                math.fsum(v for k, v in model.items() if k > x), rel=1e-9, abs=1e-6
            )
    free_all(b, pool, [root])


def test_empty_and_single(b: SimpleNamespace) -> None:
    pool = b.pool
    verify(b, pool, -1, SortedDict())
    assert b.first_prefix(pool, -1, -1.0, False)[0] is False
    assert b.items(pool, -1)[0].shape == (0,)
    used = pool.l_used
    assert b.set(pool, -1, 3.0, 0.0) == -1  # zero into an empty map stores nothing
    assert b.add(pool, -1, 3.0, 0.0) == -1
    assert pool.l_used == used and b.free(pool, -1) == -1

    root = b.add(pool, -1, 3.0, 2.0)
    verify(b, pool, root, SortedDict({3.0: 2.0}))
    assert b.add(pool, root, 4.0, 0.0) == root  # zero delta on an absent key: no change
    verify(b, pool, root, SortedDict({3.0: 2.0}))
    assert b.first_prefix(pool, root, 2.0, True)[0] is False
    assert b.first_prefix(pool, root, 2.0, False) == (True, 3.0)
    assert b.first_prefix(pool, root, -5.0, True) == (True, 3.0)
    root = b.set(pool, root, 3.0, -1.5)
    verify(b, pool, root, SortedDict({3.0: -1.5}))
    root = b.add(pool, root, 3.0, 1.5)
    assert root == -1
    free_all(b, pool, [root])


def test_nan_key_rejected(b: SimpleNamespace) -> None:
    with pytest.raises(ValueError, match="NaN"):
        b.add(b.pool, -1, math.nan, 1.0)
    root = b.add(b.pool, -1, 1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        b.set(b.pool, root, math.nan, 1.0)
    verify(b, b.pool, root, SortedDict({1.0: 1.0}))
    free_all(b, b.pool, [b.free(b.pool, root)])


def test_infinite_keys(b: SimpleNamespace) -> None:
    """+inf is also the padding of unused key slots: it must still work as a real key."""
    pool = b.pool
    model = SortedDict()
    root = -1
    for k in [math.inf, 1.0, -math.inf, *range(2, 40)]:
        root = b.add(pool, root, float(k), 1.0)
        model_update(model, float(k), 1.0, assign=False)
        verify(b, pool, root, model)
    root = b.add(pool, root, math.inf, 2.0)
    model_update(model, math.inf, 2.0, assign=False)
    verify(b, pool, root, model)
    assert b.first_prefix(pool, root, b.total(pool, root) - 0.5, False) == (True, math.inf)
    for k in [math.inf, -math.inf, *range(2, 40)]:
        root = b.set(pool, root, float(k), 0.0)
        del model[float(k)]
        verify(b, pool, root, model)
    free_all(b, pool, [b.free(pool, root)])


def pending(pool) -> list[tuple[int, int]]:
    """The pool's pending leaves, as (tree root, leaf) in slot order (see btree._update)."""
    ps = pool.ps
    return [(int(ps[1 + s, 0]), int(ps[1 + s, 1])) for s in range(int(ps[0, 0]))]


def test_pending_leaf(b: SimpleNamespace) -> None:
    """In-place updates leave their leaves pending (paths' sums stale), one slot per leaf, until
    something reads sums, changes a shape or fills every slot; point lookups do not flush."""
    pool = b.new(4, 1)
    a = c = -1
    for i in range(200):   # several levels at both fanouts
        a = b.add(pool, a, float(i), 1.0)
        c = b.add(pool, c, float(i), 2.0)
    b.check(pool, a)
    assert pending(pool) == []
    a = b.add(pool, a, 100.0, 5.0)            # in place: pending, no descent next time
    [(root, leaf)] = pending(pool)
    assert root == a
    a = b.add(pool, a, 101.0, 0.5)            # the same leaf (keys 100, 101 share one at both fanouts)
    assert pending(pool) == [(a, leaf)]
    assert b.get(pool, a, 100.0) == 6.0 and b.get(pool, a, 101.0) == 1.5
    assert pending(pool) == [(a, leaf)]       # lookups read the leaf only
    a = b.add(pool, a, 0.0, 1.0)              # another leaf of the same tree: a second slot
    c = b.add(pool, c, 50.0, 1.0)             # another tree of the pool: a third
    c = b.add(pool, c, 50.0, 1.0)
    assert [r for r, _ in pending(pool)] == [a, a, c] and len(set(pending(pool))) == 3
    assert pending(pool)[1][1] != leaf
    assert b.get(pool, a, 0.0) == 2.0 and b.get(pool, c, 50.0) == 4.0
    assert b.total(pool, a) == 200 + 5 + 0.5 + 1 and pending(pool) == []
    a = b.add(pool, a, 100.0, 1.0)
    a = b.add(pool, a, 100.0, -7.0)           # the pending key leaves: flush, then a removal
    assert pending(pool) == [] and b.get(pool, a, 100.0) == 0.0
    c = b.set(pool, c, 60.0, 0.25)            # an assignment is in place too
    assert [r for r, _ in pending(pool)] == [c]
    b.check(pool, c)                          # check verifies the recorded paths, then flushes
    assert pending(pool) == []
    b.check(pool, a)
    assert b.len(pool, a) == 199 and b.total(pool, c) == 400 + 2 - 2 + 0.25
    for r in (a, c):
        b.free(pool, r)


def test_pending_slots_overflow(b: SimpleNamespace) -> None:
    """In-place updates spread over more leaves than there are slots, with no query between them:
    the slots fill, are flushed and refill, and every sum and count ends as if eager."""
    pmax = b.mod.PMAX
    pool = b.new(4, COLS)
    n = 40 * b.mod.FL                         # over 20 leaves at either fanout
    r = -1
    models = [SortedDict() for _ in range(COLS)]
    for i in range(n):
        r = b.addv(pool, r, float(i), (1.0, 2.0, 0.0))
        model_update(models[0], float(i), 1.0, assign=False)
        model_update(models[1], float(i), 2.0, assign=False)
    b.check(pool, r)
    rng = np.random.default_rng(3)
    most = 0
    for step, k in enumerate(rng.permutation(n)):
        deltas = (0.5, -3.0 if step % 3 else 0.0, 1.0 if step % 2 else -0.25)  # column 1 goes negative
        r = b.addv(pool, r, float(k), deltas)
        for c in range(COLS):
            model_update(models[c], float(k), deltas[c], assign=False)
        most = max(most, len(pending(pool)))
        assert len(pending(pool)) == len(set(pending(pool))) <= pmax
    assert most == pmax                       # the slots filled (and were flushed to make room)
    for c in range(COLS):
        verify(b, pool, r, models[c], c, first=c * 5)
        r = b.addv(pool, r, float(c), (0.25, 0.25, 0.25))   # pending again before the next column
        for m in models:
            model_update(m, float(c), 0.25, assign=False)
    b.free(pool, r)


def test_every_query_flushes_the_pending_leaf(b: SimpleNamespace) -> None:
    """Each kind of query, asked while an in-place update left stale sums and counts on a
    multi-level tree's path, answers from the updated values."""
    pool = b.new(4, COLS)
    r = -1
    models = [SortedDict() for _ in range(COLS)]
    for i in range(200):
        r = b.addv(pool, r, float(i), (1.0, 0.0, 0.0))
        models[0][float(i)] = 1.0
    m0, m1 = models[0], models[1]

    def below(m, x, incl):
        return sum(v for k, v in m.items() if k < x or (incl and k == x))

    kinds = [   # (column updated in place, query, expected from the models)
        (1, lambda: b.total(pool, r, 1), lambda: sum(m1.values())),
        (1, lambda: b.len(pool, r, 1), lambda: len(m1)),
        (1, lambda: b.negatives(pool, r, 1), lambda: sum(v < 0 for v in m1.values())),
        (1, lambda: b.sum_lt(pool, r, 150.0, 1), lambda: below(m1, 150.0, False)),
        (1, lambda: b.sum_le(pool, r, 150.0, 1), lambda: below(m1, 150.0, True)),
        (1, lambda: b.sum_gt(pool, r, 20.0, 1), lambda: sum(m1.values()) - below(m1, 20.0, True)),
        (1, lambda: b.sum_ge(pool, r, 20.0, 1), lambda: sum(m1.values()) - below(m1, 20.0, False)),
        (1, lambda: b.min(pool, r, 1), lambda: (True, m1.keys()[0])),
        (1, lambda: b.max(pool, r, 1), lambda: (True, m1.keys()[-1])),
        (1, lambda: tuple(a.tolist() for a in b.items(pool, r, 1)), lambda: (list(m1.keys()), list(m1.values()))),
        (0, lambda: b.first_prefix(pool, r, 150.0, True, 0),
         lambda: brute_first_prefix(m0, 150.0, True)),
    ]
    for q, (c, query, want) in enumerate(kinds):
        k = float(10 + 13 * q)
        v = (-2.0 if q % 2 else 3.0) if c else 4.0
        r = b.add(pool, r, k, v, c)
        model_update(models[c], k, v, assign=False)
        assert pending(pool) == [(r, pending(pool)[0][1])], q
        got = query()
        assert (same(got, want()) if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], bool)
                else got == want()), (q, got, want())
        assert pending(pool) == [], q
    b.check(pool, r)
    b.free(pool, r)


def test_growth_and_reuse(b: SimpleNamespace) -> None:
    """Start with room for one key, grow to 100k keys (10k at fanout 8), delete them all, and
    refill from the free lists."""
    pool = b.new(1, 1)
    big = b.mod.FL > 8
    n = 100_000 if big else 10_000
    rng = np.random.default_rng(7)
    ks = rng.permutation(n).astype(np.float64) * 0.5 - 1e3
    vs = rng.integers(1, 100, n).astype(np.float64)
    checks = {n // 3, n - 1}
    root = -1
    for i in range(n):
        root = b.add(pool, root, ks[i], vs[i])
        if i in checks or i < 300:
            b.check(pool, root)
    assert b.len(pool, root) == n and pool.l_free == 0 and pool.i_free == 0
    order = np.argsort(ks)
    got_k, got_v = b.items(pool, root)
    assert np.array_equal(got_k, ks[order]) and np.array_equal(got_v, vs[order])
    assert b.total(pool, root) == vs.sum()
    assert b.first_prefix(pool, root, vs.sum() - 1, True) == (True, ks.max())
    cum = np.cumsum(vs[order])
    for y in rng.uniform(-1.0, vs.sum(), 200):
        i = int(np.searchsorted(cum, y, side="right"))
        assert b.first_prefix(pool, root, y, True) == (True, ks[order][i])

    for i, j in enumerate(rng.permutation(n)):
        root = b.add(pool, root, ks[j], -vs[j])
        if i in checks or i > n - 300:
            b.check(pool, root)
    assert root == -1
    b.check(pool, root)
    assert pool.l_free == pool.l_used and pool.i_free == pool.i_used  # nothing leaked
    leaves, internals = pool.l_used, pool.i_used

    for i in range(n):  # ascending keys: every split at the right edge
        root = b.set(pool, root, float(i), 1.0)
    b.check(pool, root)
    assert b.len(pool, root) == n
    # only fresh nodes were taken once the free lists ran dry (ascending order half-fills nodes)
    assert pool.l_used == max(leaves, pool.l_used - pool.l_free)
    assert pool.i_used == max(internals, pool.i_used - pool.i_free)
    assert b.sum_lt(pool, root, n / 2) == n / 2
    assert b.first_prefix(pool, root, n / 2, False) == (True, n / 2 - 1)
    for i in range(n - 1, -1, -1):  # descending deletions: every merge at the right edge
        root = b.set(pool, root, float(i), 0.0)
        if i % (n // 4) == 0:
            b.check(pool, root)
    assert root == -1
    root = b.free(pool, root)
    assert pool.l_free == pool.l_used and pool.i_free == pool.i_used


def pool_bytes(pool) -> list[bytes]:
    """Every array and counter of a pool, as bytes (padding and scratch included)."""
    return [np.asarray(getattr(pool, name)).tobytes() for name, _ in shipped._FIELDS]


def _leaf_fills(pool) -> np.ndarray:
    ln = np.asarray(pool.ln)[: pool.l_used]
    return ln[ln >= 0]


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_sorted_loads_pack_the_nodes(b: SimpleNamespace, order: str) -> None:
    """Keys loaded in order (a REST snapshot of a book lists its levels sorted) split the tree's
    rightmost (ascending) or leftmost (descending) node unevenly, the new node at the minimum fill,
    so that the leaves end ~3/4 full instead of half (half the nodes again would be mostly
    empty: memory the caches hold for nothing, with a thousand books).  Random updates after the
    load keep every invariant and the model's contents."""
    mod = b.mod
    pool = b.new(1, COLS)
    n = 20 * mod.FL * mod.FI
    ks = np.arange(n, dtype=np.float64) * 0.25
    if order == "descending":
        ks = ks[::-1].copy()
    model = SortedDict()
    root = -1
    for i, k in enumerate(ks):
        root = b.addv(pool, root, k, (1.0, k, -0.5))
        model[k] = (1.0, k, -0.5)
        if i % 997 == 0:
            b.check(pool, root)
    b.check(pool, root)
    fills = _leaf_fills(pool)
    assert fills.sum() == n
    # every leaf but the one still being filled holds FL + 1 - LMIN keys: (FL + 1) // 2 before
    assert fills.mean() >= mod.FL + 1 - mod.LMIN - 1, (fills.mean(), np.bincount(fills))
    in_ = np.asarray(pool.in_)[: pool.i_used]
    assert in_[in_ >= 0].mean() >= 0.7 * mod.FI, np.bincount(in_[in_ >= 0])
    rng = np.random.default_rng(3)
    for t in range(4 * mod.FL * mod.FI):
        if t % 2:
            k = float(model.keys()[int(rng.integers(len(model)))])
            root = b.addv(pool, root, k, tuple(-x for x in model.pop(k)))
        else:
            k = float(rng.integers(0, 4 * n)) * 0.125 + 1e-3
            v = (float(rng.integers(1, 9)), 2.0, 0.0)
            root = b.addv(pool, root, k, v)
            old = model.get(k, (0.0, 0.0, 0.0))
            model[k] = tuple(x + y for x, y in zip(old, v, strict=True))
        if t % 211 == 0:
            b.check(pool, root)
    b.check(pool, root)
    for c in range(COLS):
        got = b.items(pool, root, c)
        want = [(k, v[c]) for k, v in model.items() if v[c] != 0.0]
        assert list(zip(got[0].tolist(), got[1].tolist(), strict=True)) == want
    b.free(pool, root)


def test_prefetch_changes_nothing(b: SimpleNamespace) -> None:
    """btree_prefetch is a hint: on a pool past PF_LEAVES leaves, with leaves pending or not, for
    keys present, absent, beyond both ends, infinite or NaN, and for the empty tree, it leaves
    every byte of the pool as it was; btree_big turns on exactly at PF_LEAVES leaves."""
    pool = b.new(1, 2)
    rng = np.random.default_rng(5)
    n = 40 * b.mod.PF_LEAVES if b.mod.FL > 8 else 12 * b.mod.PF_LEAVES
    ks = rng.permutation(4 * n)[:n].astype(np.float64)
    root = -1
    for i, k in enumerate(ks):
        assert b.big(pool) == (pool.l_used >= b.mod.PF_LEAVES)
        root = b.addv(pool, root, k, (1.0, k))
        if i % 997 == 0:
            b.prefetch(pool, root, k)
    assert b.big(pool)
    probes = [*ks[:50], *(ks[:50] + 0.5), -1.0, 5.0 * n, math.inf, -math.inf, math.nan]
    for pending in (False, True):
        if pending:   # in-place updates in a few leaves: their paths are stale until a flush
            for k in ks[:5]:
                root = b.addv(pool, root, k, (1.0, 0.0))
            assert pool.ps[0, 0] > 0
        before = pool_bytes(pool)
        for k in probes:
            b.prefetch(pool, root, k)
            b.prefetch(pool, -1, k)
            for level in range(8):   # past the leaf too: it stops there
                b.prefetch_level(pool, root, k, level)
                b.prefetch_level(pool, -1, k, level)
        assert pool_bytes(pool) == before
    b.flush(pool)
    b.check(pool, root)
    assert b.total(pool, root, 0) == n + 5 and b.get(pool, root, ks[0], 0) == 2.0
    b.free(pool, root)


def test_prefetch_level_changes_nothing_in_many_small_trees(b: SimpleNamespace) -> None:
    """btree_prefetch_level on a pool of many small trees (the per-symbol layout: a root, an
    internal level or two, leaves), at every level of each tree's path and beyond its depth, for
    keys present and absent, with leaves pending and not, leaves every byte of the pool alone;
    the trees still check and hold what the model says."""
    pool = b.new(1, 2)
    rng = np.random.default_rng(9)
    roots = [-1] * 40
    models = [SortedDict() for _ in roots]
    for _ in range(6000):
        t = int(rng.integers(len(roots)))
        k = float(rng.integers(0, 400))
        roots[t] = b.addv(pool, roots[t], k, (1.0, k))
        model_update(models[t], k, 1.0, False)
    assert max(r & 1 for r in roots) == 1   # some trees have internal levels
    for pending in (False, True):
        if pending:
            for t in range(5):
                k = models[t].keys()[0]
                roots[t] = b.addv(pool, roots[t], k, (1.0, 0.0))
                model_update(models[t], k, 1.0, False)
            assert pool.ps[0, 0] > 0
        before = pool_bytes(pool)
        for r in roots:
            for k in (-1.0, 0.0, 17.0, 17.5, 399.0, 1e9, math.nan):
                for level in range(6):
                    b.prefetch_level(pool, r, k, level)
        assert pool_bytes(pool) == before
    for r, m in zip(roots, models, strict=True):
        b.check(pool, r)
        assert [b.get(pool, r, k, 0) for k in m] == list(m.values())


def _path_refs(mod, pool, root: int, k: float) -> list[int]:
    """The refs of the nodes an update of k passes, root first, leaf last (as _descend: the child
    holding the first key >= k, else the last), read from the raw arrays of a pool of ``mod``."""
    fi, iw = mod.FI, pool.iw
    refs = [root]
    while refs[-1] & 1:
        i = refs[-1] >> 1
        keys = np.asarray(pool.ik)[i, :fi]
        j = min(int(np.searchsorted(keys, k, side="left")), int(pool.in_[i]) - 1)
        refs.append(int(np.asarray(pool.ik)[i, fi * (iw - 1) + j]))
    return refs


def test_prefetch_level_carries_the_path(b: SimpleNamespace) -> None:
    """btree_prefetch_level returns the node it loaded, so that run_batch's next stage starts there
    (codegen.PF_RING): from a tree's root, ``level`` levels down its key's path (the leaf when the
    path is shorter), and from the node one call returned, the levels below it; a stale ref to a
    node freed since (the tree emptied, its nodes reused by another) ends the descent (-1) or loads
    the wrong node, and never changes a byte of the pool or reads outside it."""
    pool = b.new(1, 3)
    rng = np.random.default_rng(13)
    roots = [-1] * 30
    for _ in range(20000):
        t = int(rng.integers(len(roots)))
        k = float(rng.integers(0, 2000))
        roots[t] = b.addv(pool, roots[t], k, (1.0, k, 1.0))
    probes = [-1.0, 0.0, 17.0, 17.5, 999.0, 1999.0, 1e9]
    deep = [r for r in roots if len(_path_refs(b.mod, pool, r, 0.0)) >= 3]
    assert deep   # some trees have two internal levels
    for r in roots:
        for k in probes:
            path = _path_refs(b.mod, pool, r, k)
            assert b.prefetch_level(pool, r, k, 0) == r
            for level in range(1, 6):
                assert b.prefetch_level(pool, r, k, level) == path[min(level, len(path) - 1)]
            ref = b.prefetch_level(pool, r, k, 0)
            for d in range(1, len(path)):   # stage by stage, as run_batch calls it
                ref = b.prefetch_level(pool, ref, k, 1)
                assert ref == path[d]
            assert b.prefetch_level(pool, path[1 if len(path) > 1 else 0], k, 64) == path[-1]
        assert b.prefetch_level(pool, r, math.nan, 1) == -1
    assert b.prefetch_level(pool, -1, 5.0, 1) == -1
    stale = [ref for r in deep[:3] for k in probes for ref in _path_refs(b.mod, pool, r, k)]
    for t in range(3):
        roots[roots.index(deep[t])] = b.free(pool, deep[t])
    before = pool_bytes(pool)
    for ref in stale:   # freed: an internal node ends the descent, a leaf is loaded (harmless)
        for k in probes:
            got = b.prefetch_level(pool, ref, k, 2)
            assert got == (-1 if ref & 1 else ref)
    assert pool_bytes(pool) == before
    for k in range(3000):   # the free nodes reused by another tree: stale refs now point into it
        roots[0] = b.addv(pool, roots[0], 5000.0 + k, (1.0, 1.0, 1.0))
    before = pool_bytes(pool)
    for ref in stale:
        for k in probes:
            for level in range(4):
                b.prefetch_level(pool, ref, k, level)
    assert pool_bytes(pool) == before
    for r in roots:
        b.check(pool, r)


def test_many_roots(b: SimpleNamespace) -> None:
    """Fifty maps of very different sizes in one small pool, updated in interleaved order, share
    and recycle its nodes."""
    pool = b.new(1, 1)
    rng = np.random.default_rng(11)
    n_roots = 50
    roots = [-1] * n_roots
    models = [SortedDict() for _ in range(n_roots)]
    for step in range(6000):
        r = int(rng.integers(0, n_roots) ** 2 // n_roots)  # skewed: low roots get most updates
        model = models[r]
        if model and rng.random() < 0.35:
            key = model.keys()[int(rng.integers(0, len(model)))]
            roots[r] = b.add(pool, roots[r], key, -model[key])
            del model[key]
        else:
            key = float(rng.integers(-200, 200)) / 2
            value = float(rng.integers(-3, 6))
            roots[r] = b.add(pool, roots[r], key, value)
            model_update(model, key, value, assign=False)
        if step % 1500 == 0:
            roots[n_roots - 1] = b.free(pool, roots[n_roots - 1])
            models[n_roots - 1].clear()
    seen = 0
    for r in range(n_roots):
        verify(b, pool, roots[r], models[r])
        seen += len(models[r])
    assert seen > 1000
    free_all(b, pool, roots)


def assert_free_leaves_padded(b: SimpleNamespace, pool) -> None:
    """Every leaf on the free list is a padded row (+inf keys, 0.0 values): ``_alloc_leaf`` hands
    such a leaf out without writing it."""
    fl = b.mod.FL
    ln = np.asarray(pool.ln)[: pool.l_used]
    rows = np.asarray(pool.lf)[: pool.l_used][ln == -1]
    assert (rows[:, :fl] == np.inf).all() and (rows[:, fl:] == 0.0).all(), "a free leaf is not padded"


# per step: (slice, kind, key, values): "add" adds the values at the key, "cancel" removes the
# slice's key nearest below it (an exact zero in every column), "free" clears the slice
slice_steps = st.lists(
    st.tuples(st.integers(0, 11), st.sampled_from(["add", "add", "add", "cancel", "cancel", "free"]),
              st.integers(0, 90), st.tuples(st.integers(-3, 4), st.integers(1, 5))),
    min_size=1, max_size=400)


@settings(max_examples=40, deadline=None)
@given(steps=slice_steps)
def test_small_slices_reuse_padded_leaves(b: SimpleNamespace, steps) -> None:
    """Many trees of a few keys in one pool (the per-slice trees of a top-N over orders: a tree of
    order ids per price level, most of one order at distinct prices): leaves freed by deletions,
    merges and whole-tree frees are padded when freed, so reusing one writes only what the
    update touches (``_live``), and every tree still agrees with its model and passes the check."""
    pool = b.new(1, 2)
    roots = [-1] * 12
    models = [SortedDict() for _ in roots]
    for r, kind, key, (v0, v1) in steps:
        model = models[r]
        if kind == "free":
            roots[r] = b.free(pool, roots[r])
            model.clear()
        elif kind == "cancel" and model:
            k = model.keys()[max(0, model.bisect_right(float(key)) - 1)]
            a, c = model.pop(k)
            roots[r] = b.addv(pool, roots[r], k, (-a, -c))
        else:
            k = float(key)
            a, c = model.get(k, (0.0, 0.0))
            roots[r] = b.addv(pool, roots[r], k, (float(v0), float(v1)))
            a, c = a + v0, c + v1
            if a == 0.0 and c == 0.0:
                model.pop(k, None)
            else:
                model[k] = (a, c)
        assert_free_leaves_padded(b, pool)
    for root, m in zip(roots, models, strict=True):
        b.check(pool, root)
        assert [(b.get(pool, root, k, 0), b.get(pool, root, k, 1)) for k in m] == list(m.values())
    free_all(b, pool, roots)
    assert_free_leaves_padded(b, pool)


@njit  # not cache=True: numba's disk cache would not notice changes to the btree_* it calls
def _fill_and_query(pool, keys, deltas, probes):
    """Build one map from inside compiled code and answer queries there."""
    root = -1
    for i in range(keys.size):
        root = btree_add(pool, root, keys[i], deltas[i])
    out = np.empty((probes.size, 4))
    for i in range(probes.size):
        out[i, 0] = btree_sum_gt(pool, root, probes[i])
        found, at = btree_first_prefix(pool, root, probes[i], True)
        out[i, 1] = at if found else -1.0
        out[i, 2] = btree_get(pool, root, probes[i])
        out[i, 3] = btree_sum_le(pool, root, at) if found else -1.0
    return root, out


def test_callable_from_njit() -> None:
    pool = btree_new(8, 1)
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 2000, 20000).astype(np.float64)
    deltas = rng.integers(1, 5, 20000).astype(np.float64)
    probes = np.arange(-1.0, 60000.0, 7.0)
    root, out = _fill_and_query(pool, keys, deltas, probes)
    btree_check(pool, root)
    model = SortedDict()
    for k, d in zip(keys.tolist(), deltas.tolist(), strict=True):
        model_update(model, k, d, assign=False)
    mk = list(model.keys())
    cums = np.cumsum(list(model.values())).tolist()
    for i, y in enumerate(probes.tolist()):
        j = bisect.bisect_right(mk, y)
        assert out[i, 0] == cums[-1] - (cums[j - 1] if j else 0.0)
        found, at = brute_first_prefix(model, y, True) if i < 50 else (None, None)
        k = bisect.bisect_right(cums, y)
        assert out[i, 1] == (mk[k] if k < len(mk) else -1.0)
        if found is not None:
            assert out[i, 1] == (at if found else -1.0)
        assert out[i, 2] == model.get(y, 0.0)
        assert out[i, 3] == (cums[k] if k < len(mk) else -1.0)


def test_codegen_emits_the_btree_comparison_codes():
    from ddms.backend.codegen import _OPCODE
    from ddms.storage.btree import OP_CODES
    assert _OPCODE == OP_CODES


def test_deep_counts_leaves_per_tree() -> None:
    """``btree_deep``: a pool of one-key trees (a tree per price level of one order) is not deep;
    one whose trees average two leaves or more is."""
    pool = btree_new(8, 2)
    roots = [shipped.btree_addv(pool, -1, float(k), (1.0, 2.0)) for k in range(40)]
    assert not shipped.btree_deep(pool, float(len(roots)))
    big = -1
    for k in range(4 * shipped.FL):
        big = shipped.btree_addv(pool, big, float(k), (1.0, 2.0))
    assert not shipped.btree_deep(pool, float(len(roots) + 1))   # 40 + ~6 leaves for 41 trees
    assert shipped.btree_deep(pool, 1.0)                          # as if that tree were the only one
    for r in [*roots, big]:
        shipped.btree_free(pool, r)
    btree_check(pool, -1)


def test_node_rows_start_on_cache_lines_in_new_grown_and_copied_pools():
    # numba aligns arrays to 32 bytes only: an internal row half a line in spreads each 16-entry
    # segment over 3 lines (btree._rows_f); every row must start on a line, as the pool grows too
    # (and in a restored state: statecopy.pool_load copies through _grow2f / _grow2i)
    from ddms.storage.btree import LINE, _grow2f, _grow2i

    def lined(p):
        return all(a.ctypes.data % LINE == 0 and a.strides[0] % LINE == 0 for a in (p.lf, p.ik, p.ii))

    for columns in (1, 2, 3):
        p = btree_new(16, columns)
        assert lined(p)
        root = -1
        for k in np.random.default_rng(columns).permutation(3000):
            root = btree_add(p, root, float(k), 1.0, columns - 1)   # the arrays double several times
            assert lined(p)
        assert lined(p) and p.lcap > 16 and p.icap > 1
        btree_check(p, root)
        assert btree_sum_le(p, root, 1499.0, columns - 1) == 1500.0
    for grow, dt in ((_grow2f, np.float64), (_grow2i, np.int64)):
        for width in (96, 80, 40):
            a = np.arange(3 * width, dtype=dt).reshape(3, width)
            b = grow(a, 7)
            assert b.ctypes.data % LINE == 0 and b.flags.c_contiguous and (b[:3] == a).all()
