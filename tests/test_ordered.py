"""Model-based tests of ddms.storage.ordered against a sortedcontainers.SortedDict.

Values are small integers and dyadic fractions, so every sum is exact in float64 whatever the
summation order and the tree can be compared with the model by ``==``; one test uses arbitrary
floats and checks the ordering guarantees that hold bitwise even then.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit
from sortedcontainers import SortedDict

from ddms.storage.ordered import (
    OrderedPool,
    ordered_add,
    ordered_check,
    ordered_first_prefix,
    ordered_free,
    ordered_get,
    ordered_items,
    ordered_len,
    ordered_max,
    ordered_min,
    ordered_negatives,
    ordered_new,
    ordered_set,
    ordered_sum_ge,
    ordered_sum_gt,
    ordered_sum_le,
    ordered_sum_lt,
    ordered_total,
)

N_ROOTS = 3  # root 0 only ever holds positive values, so first_prefix is always checked on it

keys = st.one_of(
    st.sampled_from([-1e12, 1e12, 0.0, -0.0, 0.5, 2.5]),
    st.integers(-12, 12).map(float),
    st.integers(-24, 24).map(lambda i: i / 4),
)
values = st.one_of(
    st.integers(-6, 6).map(float),
    st.sampled_from([0.5, -0.25, 0.75, 1e6, -1e6, 0.0]),
)
# (root, kind, key, value, pick): "cancel" adds minus the current value of the pick-th key of the
# root's model (deleting it through an exact zero); "free" clears the whole root.
ops = st.lists(
    st.tuples(
        st.integers(0, N_ROOTS - 1),
        st.sampled_from(["add", "add", "add", "set", "cancel", "cancel", "free"]),
        keys,
        values,
        st.integers(0, 1 << 16),
    ),
    max_size=40,
)


@pytest.fixture(scope="module")
def pool() -> OrderedPool:
    return ordered_new(4)


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


def verify(pool: OrderedPool, root: int, model: SortedDict) -> None:
    """Every query of the tree at ``root`` agrees with the model (exactly: values are dyadic)."""
    ordered_check(pool, root)
    mk = list(model.keys())
    mv = list(model.values())
    assert ordered_len(pool, root) == len(mk)
    assert ordered_total(pool, root) == sum(mv)
    assert ordered_negatives(pool, root) == sum(v < 0 for v in mv)
    ks, vs = ordered_items(pool, root)
    assert ks.tolist() == mk and vs.tolist() == mv
    assert same(ordered_min(pool, root), (True, mk[0]) if mk else (False, math.nan))
    assert same(ordered_max(pool, root), (True, mk[-1]) if mk else (False, math.nan))

    probes = [-math.inf, math.inf, -2e12, 2e12, 0.0]
    probes += mk + [(a + b) / 2 for a, b in zip(mk, mk[1:], strict=False)]
    for x in probes:
        assert ordered_get(pool, root, x) == model.get(x, 0.0)
        assert ordered_sum_lt(pool, root, x) == sum(v for k, v in model.items() if k < x)
        assert ordered_sum_le(pool, root, x) == sum(v for k, v in model.items() if k <= x)
        assert ordered_sum_gt(pool, root, x) == sum(v for k, v in model.items() if k > x)
        assert ordered_sum_ge(pool, root, x) == sum(v for k, v in model.items() if k >= x)

    if any(v < 0 for v in mv):
        return
    prefix = np.cumsum(mv).tolist()
    thresholds = {-1.0, -0.25, 0.0, sum(mv), sum(mv) + 1.0}
    for p in prefix:
        thresholds.update((p - 0.25, p, p + 0.25))
    for y in thresholds:
        for strict in (True, False):
            got = ordered_first_prefix(pool, root, y, strict)
            assert same(got, brute_first_prefix(model, y, strict)), (y, strict, got)


def free_all(pool: OrderedPool, roots: list[int]) -> None:
    """Clear every root and check that the pool leaked no node."""
    for i, r in enumerate(roots):
        roots[i] = ordered_free(pool, r)
        assert roots[i] == -1
        ordered_check(pool, -1)
    assert pool.n_free == pool.n_used


@settings(max_examples=300, deadline=None)
@given(ops=ops)
def test_against_model(pool: OrderedPool, ops: list[tuple[int, str, float, float, int]]) -> None:
    roots = [-1] * N_ROOTS
    models = [SortedDict() for _ in range(N_ROOTS)]
    for r in range(N_ROOTS):
        verify(pool, roots[r], models[r])
    for r, kind, key, value, pick in ops:
        model = models[r]
        if r == 0:
            value = abs(value)  # root 0 stays free of negatives
        if kind == "free":
            roots[r] = ordered_free(pool, roots[r])
            model.clear()
        elif kind == "cancel":
            if not model:
                continue
            key = model.keys()[pick % len(model)]
            roots[r] = ordered_add(pool, roots[r], key, -model[key])
            del model[key]
        elif kind == "set":
            roots[r] = ordered_set(pool, roots[r], key, value)
            model_update(model, key, value, assign=True)
        else:
            roots[r] = ordered_add(pool, roots[r], key, value)
            model_update(model, key, value, assign=False)
        verify(pool, roots[r], model)
    for r in range(N_ROOTS):  # operations on one root left the others intact
        verify(pool, roots[r], models[r])
    free_all(pool, roots)


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.floats(-1e9, 1e9), st.floats(1e-3, 1e6), st.booleans()), min_size=1, max_size=60
    ),
    ys=st.lists(st.floats(-10.0, 1e8), min_size=1, max_size=10),
)
def test_arbitrary_floats(pool: OrderedPool, items: list[tuple[float, float, bool]], ys: list[float]) -> None:
    """Inexact sums: aggregates stay close to the model, and first_prefix's answer b is where the
    prefix sums *as ordered_sum_le computes them* cross y: this part holds bitwise."""
    root = -1
    model = SortedDict()
    for key, value, drop in items:
        root = ordered_add(pool, root, key, value)
        model_update(model, key, value, assign=False)
        if drop:  # remove a key by assignment
            root = ordered_set(pool, root, key, 0.0)
            del model[key]
        ordered_check(pool, root)
    ks, vs = ordered_items(pool, root)
    assert ks.tolist() == list(model.keys()) and vs.tolist() == list(model.values())
    total = math.fsum(model.values())
    assert ordered_total(pool, root) == pytest.approx(total, rel=1e-12, abs=1e-9)
    for y in [*ys, total, total / 2]:
        for strict in (True, False):
            found, b = ordered_first_prefix(pool, root, y, strict)
            if found:
                assert crosses(ordered_sum_le(pool, root, b), y, strict)
                i = model.keys().index(b)
                if i > 0:
                    assert not crosses(ordered_sum_le(pool, root, model.keys()[i - 1]), y, strict)
            elif model:
                assert not crosses(ordered_sum_le(pool, root, model.keys()[-1]), y, strict)
            x = y / 100.0  # a key-range probe
            assert ordered_sum_le(pool, root, x) == pytest.approx(
                math.fsum(v for k, v in model.items() if k <= x), rel=1e-9, abs=1e-6
            )
    free_all(pool, [root])


def test_empty_and_single(pool: OrderedPool) -> None:
    verify(pool, -1, SortedDict())
    assert ordered_first_prefix(pool, -1, -1.0, False)[0] is False
    assert ordered_items(pool, -1)[0].shape == (0,)
    used = pool.n_used
    assert ordered_set(pool, -1, 3.0, 0.0) == -1  # zero into an empty map stores nothing
    assert ordered_add(pool, -1, 3.0, 0.0) == -1
    assert pool.n_used == used and ordered_free(pool, -1) == -1

    root = ordered_add(pool, -1, 3.0, 2.0)
    verify(pool, root, SortedDict({3.0: 2.0}))
    assert ordered_first_prefix(pool, root, 2.0, True)[0] is False
    assert ordered_first_prefix(pool, root, 2.0, False) == (True, 3.0)
    assert ordered_first_prefix(pool, root, -5.0, True) == (True, 3.0)
    root = ordered_set(pool, root, 3.0, -1.5)
    verify(pool, root, SortedDict({3.0: -1.5}))
    root = ordered_add(pool, root, 3.0, 1.5)
    assert root == -1
    free_all(pool, [root])


def test_nan_key_rejected(pool: OrderedPool) -> None:
    with pytest.raises(ValueError, match="NaN"):
        ordered_add(pool, -1, math.nan, 1.0)


def test_growth_and_reuse() -> None:
    """Start with room for one node, grow to 10k keys, delete them all, and refill from the free list."""
    pool = ordered_new(1)
    rng = np.random.default_rng(7)
    n = 10_000
    ks = rng.permutation(n).astype(np.float64) * 0.5 - 1e3
    vs = rng.integers(1, 100, n).astype(np.float64)
    root = -1
    for i in range(n):
        root = ordered_add(pool, root, ks[i], vs[i])
        if i % 2500 == 0:
            ordered_check(pool, root)
    ordered_check(pool, root)
    assert pool.capacity == 16384 and pool.n_used == n and pool.n_free == 0
    order = np.argsort(ks)
    got_k, got_v = ordered_items(pool, root)
    assert np.array_equal(got_k, ks[order]) and np.array_equal(got_v, vs[order])
    assert ordered_total(pool, root) == vs.sum()
    assert ordered_first_prefix(pool, root, vs.sum() - 1, True) == (True, ks.max())

    for i, j in enumerate(rng.permutation(n)):
        root = ordered_add(pool, root, ks[j], -vs[j])
        if i % 2500 == 0:
            ordered_check(pool, root)
    assert root == -1
    ordered_check(pool, root)
    assert pool.n_free == pool.n_used == n

    for i in range(n):  # ascending keys: the worst order for an unbalanced tree
        root = ordered_set(pool, root, float(i), 1.0)
    ordered_check(pool, root)
    assert pool.n_used == n and pool.n_free == 0 and pool.capacity == 16384
    assert ordered_sum_lt(pool, root, 5000.0) == 5000.0
    assert ordered_first_prefix(pool, root, 5000.0, False) == (True, 4999.0)
    root = ordered_free(pool, root)
    ordered_check(pool, root)
    assert pool.n_free == n


@njit(cache=True)
def _fill_and_query(pool, keys, deltas, probes):
    """Build one map from inside compiled code and answer queries there."""
    root = -1
    for i in range(keys.size):
        root = ordered_add(pool, root, keys[i], deltas[i])
    out = np.empty((probes.size, 3))
    for i in range(probes.size):
        out[i, 0] = ordered_sum_gt(pool, root, probes[i])
        found, b = ordered_first_prefix(pool, root, probes[i], True)
        out[i, 1] = b if found else -1.0
        out[i, 2] = ordered_get(pool, root, probes[i])
    return root, out


def test_callable_from_njit() -> None:
    pool = ordered_new(8)
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 200, 2000).astype(np.float64)
    deltas = rng.integers(1, 5, 2000).astype(np.float64)
    probes = np.arange(-1.0, 6000.0, 7.0)
    root, out = _fill_and_query(pool, keys, deltas, probes)
    ordered_check(pool, root)
    model = SortedDict()
    for k, d in zip(keys.tolist(), deltas.tolist(), strict=True):
        model_update(model, k, d, assign=False)
    for i, y in enumerate(probes.tolist()):
        assert out[i, 0] == sum(v for k, v in model.items() if k > y)
        found, b = brute_first_prefix(model, y, True)
        assert out[i, 1] == (b if found else -1.0)
        assert out[i, 2] == model.get(y, 0.0)
