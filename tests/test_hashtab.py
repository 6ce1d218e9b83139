"""Model-based tests of ddms.storage.hashtab (the slice-root tables of generated programs) against
a Python dict, with ``ht_check`` after every operation.

Keys are drawn from a small pool so that sets overwrite, pops hit, runs of colliding slots form
and wrap around the end of the array, and removals have to shift entries back; -0.0 and NaN are in
the pool (-0.0 must find 0.0; NaN must be found again)."""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddms.storage.hashtab import (
    ht_cdict,
    ht_check,
    ht_dict,
    ht_get,
    ht_getc,
    ht_new,
    ht_newv,
    ht_pop,
    ht_set,
    ht_setv,
    ht_slot,
)

COMPONENTS = [0.0, -0.0, 1.0, 2.0, 3.0, 1.5, -7.25, 1e300, math.nan, math.inf]


def _model_key(key: tuple[float, ...]) -> tuple:
    """What identifies a key: -0.0 is 0.0, NaN equals NaN."""
    return tuple("nan" if x != x else (0.0 if x == 0.0 else x) for x in key)


def _ops(arity: int):
    key = st.tuples(*[st.sampled_from(COMPONENTS) for _ in range(arity)])
    op = st.one_of(st.tuples(st.just("set"), key, st.integers(-1, 10**12)),
                   st.tuples(st.just("pop"), key, st.just(0)),
                   st.tuples(st.just("get"), key, st.just(0)))
    return st.lists(op, max_size=300)


@pytest.mark.parametrize("arity", [1, 2, 3])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_table_matches_dict(arity, data):
    ops = data.draw(_ops(arity))
    tab, model = ht_new(arity), {}
    for op, key, value in ops:
        mk = _model_key(key)
        if op == "set":
            tab = ht_set(tab, key, value)
            model[mk] = value
        elif op == "pop":
            ht_pop(tab, key)
            model.pop(mk, None)
        assert ht_get(tab, key, -2) == model.get(mk, -2), (op, key)
        ht_check(tab)
    assert {_model_key(k): v for k, v in ht_dict(tab).items()} == model


def test_growth_and_emptying_many_keys():
    tab = ht_new(2)
    keys = [(float(b), float(p)) for b in range(10) for p in range(0, 5000, 7)]
    for i, k in enumerate(keys):
        tab = ht_set(tab, k, i)
    ht_check(tab)
    assert tab.shape[0] - 1 >= 2 * len(keys)
    assert all(ht_get(tab, k, -1) == i for i, k in enumerate(keys))
    for k in keys[::2]:
        ht_pop(tab, k)
    ht_check(tab)
    assert all(ht_get(tab, k, -1) == (-1 if i % 2 == 0 else i) for i, k in enumerate(keys))
    for k in keys:
        ht_pop(tab, k)
    ht_check(tab)
    assert ht_dict(tab) == {}


def test_check_catches_a_corrupted_table():
    tab = ht_new(1)
    for i in range(5):
        tab = ht_set(tab, (float(i),), i)
    bad = tab.copy()
    bad[-1, 0] += 1                    # count off by one
    with pytest.raises(AssertionError):
        ht_check(bad)
    bad = tab.copy()
    live = [s for s in range(bad.shape[0] - 1) if bad[s, 2] == 1.0]
    bad[live[0], 0] = 1e9              # a key moved away from where its home slot leads
    with pytest.raises(AssertionError):
        ht_check(bad)


@pytest.mark.parametrize("arity,values", [(1, 3), (2, 2)])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_value_columns_match_dicts(arity, values, data):
    """A table of several value columns (``ht_newv``: the maps of a view of rows updated together)
    against one dict per column, written as a generated ``av_`` writer does: one probe, every
    column updated in place, the row removed when all end 0.0, inserted by ``ht_setv``."""
    key = st.tuples(*[st.sampled_from(COMPONENTS) for _ in range(arity)])
    delta = st.sampled_from([0.0, 1.0, -1.0, 2.5, -2.5])
    ops = data.draw(st.lists(st.tuples(key, st.tuples(*[delta] * values)), max_size=300))
    tab, models = ht_newv(arity, values), [{} for _ in range(values)]
    for k, deltas in ops:
        mk = _model_key(k)
        s = ht_slot(tab, k)
        new = [(tab[s, arity + c] if s >= 0 else 0.0) + d for c, d in enumerate(deltas)]
        if s >= 0:
            if all(v == 0.0 for v in new):
                ht_pop(tab, k)
            else:
                tab[s, arity:arity + values] = new
        elif any(v != 0.0 for v in new):
            tab = ht_setv(tab, k, tuple(new))
        for c, v in enumerate(new):
            if v == 0.0:
                models[c].pop(mk, None)
            else:
                models[c][mk] = v
        ht_check(tab, arity)
        for c in range(values):
            assert ht_getc(tab, k, c, 0.0) == models[c].get(mk, 0.0)
    for c in range(values):
        assert {_model_key(k): v for k, v in ht_cdict(tab, arity, c).items()} == models[c]


def test_check_catches_a_row_of_zeros():
    tab = ht_newv(1, 2)
    tab = ht_setv(tab, (1.0,), (1.0, 0.0))
    ht_check(tab, 1)
    tab[ht_slot(tab, (1.0,)), 1] = 0.0   # every value column 0.0: the key should have gone
    with pytest.raises(AssertionError, match="all 0.0"):
        ht_check(tab, 1)
