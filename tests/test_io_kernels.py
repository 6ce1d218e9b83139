"""The shared numba kernels of ddms/io/kernels on their own: the order-id table against a dict,
the decimal parser against Python's float (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ddms.io.kernels import decimal, ordertable
from ddms.io.kernels.ordertable import EMPTY, find, grow, new_table, put, remove, table_check

ops = st.lists(st.tuples(st.sampled_from("pr"), st.integers(-(2**53), 2**53) | st.integers(0, 40)), max_size=300)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_order_table_equals_a_dict(script):
    keys, vals, shift = new_table(5)
    meta = np.array([0, shift], np.int64)          # [resting, shift]: grow() updates meta[1]
    ref: dict[int, float] = {}
    for op, k in script:
        slot = find(keys, meta[1], k)
        assert (slot >= 0) == (k in ref)
        if op == "p" and k not in ref:
            if 2 * (len(ref) + 1) > keys.shape[0]:
                keys, vals = grow(keys, vals, meta, 1)
            put(keys, vals, meta[1], k, 1.0, float(len(ref)), 2.0, 0.0)
            ref[k] = float(len(ref))
        elif op == "r" and k in ref:
            remove(keys, vals, meta[1], slot)
            del ref[k]
        table_check(keys, vals, int(meta[1]))
    assert int((keys != EMPTY).sum()) == len(ref)
    for k, v in ref.items():
        assert vals[find(keys, meta[1], k), 1] == v


def test_new_table_refuses_a_size_home_cannot_address():
    import pytest
    with pytest.raises(ValueError, match="5 <= bits"):
        new_table(4)


def test_grow_keeps_every_key_and_doubles():
    keys, vals, shift = new_table(ordertable.INIT_BITS)
    meta = np.array([0, shift], np.int64)
    for k in range(300):
        put(keys, vals, meta[1], k * 16, float(k), 0.0, 0.0, 0.0)
    keys2, vals2 = grow(keys, vals, meta, 1)
    assert keys2.shape[0] == 2 * keys.shape[0] and meta[1] == shift - 1
    table_check(keys2, vals2, int(meta[1]))
    assert all(vals2[find(keys2, meta[1], k * 16), 0] == k for k in range(300))


def _parse(fn, text: str):
    buf = np.frombuffer(text.encode() + b"\n", np.uint8)
    return fn(buf, 0, len(buf) - 1)


numbers = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr).filter(lambda s: "inf" not in s),
    st.from_regex(r"\A[+-]?([0-9]{1,25}(\.[0-9]{0,25})?|\.[0-9]{1,25})([eE][+-]?[0-9]{1,3})?\Z"),
)


@settings(max_examples=300, deadline=None)
@given(numbers)
def test_parse_number_is_exact_or_defers(text):
    v, j, stt = _parse(decimal.parse_number, text)
    assert stt in (0, 2)
    assert j == len(text)
    if stt == 0:
        assert v == float(text)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="0123456789+-.eE x", max_size=8))
def test_parse_number_rejects_or_matches(text):
    v, j, stt = _parse(decimal.parse_number, text)
    try:
        ref = float(text[:j]) if j else None
    except ValueError:
        ref = None
    if stt == 0:
        assert ref is not None and v == ref


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**60), 2**60))
def test_parse_int(n):
    v, j, stt = _parse(decimal.parse_int, str(n))
    if abs(n) > 2**53:
        assert stt == 3
    else:
        assert stt == 0 and v == n and j == len(str(n))
    assert _parse(decimal.parse_int, "x1")[2] == 1
