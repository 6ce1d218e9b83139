"""The shared numba kernels of ddms/io/kernels on their own: the order-id table against a dict,
the decimal parser against Python's float (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
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


def test_grow_into_cleared_arrays_equals_grow():
    """grow_into (arrays allocated ahead, cleared by ``clear`` on another thread) gives the table
    grow gives: same keys at the same slots, same values, same shift."""
    from ddms.io.kernels.ordertable import clear, grow_into
    rng = np.random.default_rng(3)
    keys, vals, shift = new_table(6)
    for k in rng.choice(10**6, 30, replace=False):
        put(keys, vals, shift, int(k), 1.0, float(k), 2.0, 1.0)
    for bits in (1, 2):
        m1, m2 = np.array([shift], np.int64), np.array([shift], np.int64)
        k1, v1 = grow(keys, vals, m1, 0, bits)
        nk, nv = np.ones(keys.shape[0] << bits, np.int64), np.ones((keys.shape[0] << bits, 4))   # junk
        clear(nk, nv)
        k2, v2 = grow_into(keys, vals, nk, nv, m2, 0, bits)
        assert k2 is nk and np.array_equal(k1, k2) and np.array_equal(v1, v2) and m1[0] == m2[0]
        table_check(k2, v2, int(m2[0]))


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


def test_grow_quadruples_small_tables_and_doubles_large_ones():
    """grow(bits=2) keeps every key; grow_bits asks for x4 below FAST_GROWTH slots, x2 above, and an
    order-book parser's table so reaches 2**16 slots in three steps from 2**10 (six doublings before)."""
    from ddms.io.orderbook import OrderBookParser
    keys, vals, shift = new_table(ordertable.INIT_BITS)
    meta = np.array([0, shift], np.int64)
    for k in range(500):
        put(keys, vals, meta[1], k * 7 - 900, float(k), 0.0, 0.0, 0.0)
    keys4, vals4 = grow(keys, vals, meta, 1, 2)
    assert keys4.shape[0] == 4 * keys.shape[0] and meta[1] == shift - 2
    table_check(keys4, vals4, int(meta[1]))
    assert all(vals4[find(keys4, meta[1], k * 7 - 900), 0] == k for k in range(500))
    assert ordertable.grow_bits(ordertable.FAST_GROWTH // 4) == 2 and ordertable.grow_bits(ordertable.FAST_GROWTH) == 1
    parser = OrderBookParser()
    sizes = {parser._keys.shape[0]}
    for i in range(0, 20_000, 500):   # 20k resting orders: the table must pass 2**15 slots
        parser.feed(b"".join(b"1,%d,B,1,100\n" % j for j in range(i, i + 500)))
        sizes.add(parser._keys.shape[0])
    assert sorted(sizes) == [1 << 10, 1 << 12, 1 << 14, 1 << 16]
    assert parser.resting == 20_000
    table_check(parser._keys, parser._vals, int(parser._meta[3]))


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


tails = st.binary(max_size=20)   # what follows a field: the rest of the line and beyond (any bytes)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789+-.eE,x\n", max_size=20), tails)
def test_wide_parsers_equal_the_byte_by_byte_ones(text, tail):
    """parse_number_wide / parse_int_wide (eight digits at a time when 16 bytes are readable) return
    exactly what parse_number / parse_int return, for fields of any content followed by any bytes,
    at every distance from the buffer's end (the wide form falls back near it)."""
    data = text.encode() + b"\n" + tail
    buf = np.frombuffer(data, np.uint8)
    for cut in range(len(text) + 1, len(data) + 1):      # buffers ending right after the newline .. later
        b = buf[:cut]
        for i in range(min(len(text), 3) + 1):
            assert decimal.parse_number_wide(b, i, cut) == decimal.parse_number(b, i, cut)
            assert decimal.parse_int_wide(b, i, cut) == decimal.parse_int(b, i, cut)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10**17), st.binary(min_size=16, max_size=16))
def test_parse_uint_swar(n, after):
    """Eight digits at a time: the value of 1..15 leading digits, a refusal (ok False, j == i) for
    16 or more or none, whatever non-digit byte ends the number and whatever follows it."""
    text = str(n).encode()
    stop = next((c for c in after if not 48 <= c <= 57), 44)
    buf = np.frombuffer(text + bytes([stop]) + after, np.uint8)
    v, j, ok = decimal.parse_uint_swar(buf, 0)
    if len(text) <= 15:
        assert ok and v == n and j == len(text)
    else:
        assert not ok and j == 0
    assert decimal.parse_uint_swar(np.frombuffer(b"," + bytes(16), np.uint8), 0) == (0, 0, False)


# -- blocked sorted level arrays ------------------------------------------------------------------

levels = st.lists(st.tuples(st.integers(0, 1), st.integers(1, 400), st.integers(0, 5)), max_size=400)


@settings(max_examples=40, deadline=None)
@given(levels, st.integers(1, 40))
def test_level_arrays_equal_a_dict_and_emit_the_changes(script, per_msg):
    """Random level updates (qty 0 removes) in messages of ``per_msg``: the arrays equal a dict
    per side after every message, the rows are a delete of the old row and/or an insert of the
    new one per change, and the returned best levels are right (blocks split and empty: 400
    prices > BLOCK)."""
    from ddms.io.kernels.levelarrays import apply_depth, level_arrays_check, levels_of, new_level_arrays

    arrays = new_level_arrays(4)
    ref: list[dict[int, int]] = [{}, {}]
    oi = np.zeros((2 * len(script) + 2, 3), np.int64)
    oc = np.zeros((2 * len(script) + 2, 5), np.float64)
    k = 0
    for m in range(0, len(script), per_msg):
        msg = script[m:m + per_msg]
        sides = [np.array([[px, q] for s, px, q in msg if s == side], np.int64).reshape(-1, 2) for side in (0, 1)]
        need = max(len(sides[0]), len(sides[1])) + 1 + int(arrays[7][:, 3].max())
        if need > arrays[0].shape[1]:                      # grow as BinanceBook does
            new = max(2 * arrays[0].shape[1], need)
            arrays = tuple(np.concatenate([a, np.zeros((2, new - a.shape[1]) + a.shape[2:], a.dtype)], axis=1)
                           if a.ndim >= 2 and a.shape[0] == 2 and i < 7 else a for i, a in enumerate(arrays))
        k0 = k
        k, bp, bq, ap, aq, _ = apply_depth(*arrays, sides[0], sides[1], float(m), m + 1, oi, oc, k, 1.0, 1.0)
        expect = []
        for side in (0, 1):
            for px, q in sides[side]:
                old = ref[side].get(int(px))
                if old is not None:
                    expect.append((side, -1, float(px), float(old)))
                if q > 0:
                    ref[side][int(px)] = int(q)
                    expect.append((side, 1, float(px), float(q)))
                elif old is not None:
                    del ref[side][int(px)]
        got = [(int(oi[r, 0]), int(oi[r, 1]), oc[r, 1], oc[r, 3]) for r in range(k0, k)]
        assert got == expect
        level_arrays_check(arrays)
        for side in (0, 1):
            keys, qty, _ = levels_of(arrays, side)
            px = sorted(ref[side])
            assert (np.abs(keys) if side else keys).tolist() == (px[::-1] if side else px)
            assert qty.tolist() == [ref[side][p] for p in (px[::-1] if side else px)]
        assert (bp, bq) == ((max(ref[0]), ref[0][max(ref[0])]) if ref[0] else (-1, -1))
        assert (ap, aq) == ((min(ref[1]), ref[1][min(ref[1])]) if ref[1] else (-1, -1))


@pytest.mark.parametrize("digits", range(1, 18))
@pytest.mark.parametrize("stop", [b",", b"\n", b".", b"e", b"9", b"\xff", b"/", b":"])
def test_parse_uint_swar_every_length(digits, stop):
    """Every length around the eight-byte word (eight digits end with a one-byte check, more read the
    next word), followed by a delimiter, a byte just outside '0'-'9', a non-ASCII byte or more digits."""
    text = ("31415926535897932"[:digits]).encode() + stop + b"1234567890123456"
    buf = np.frombuffer(text, np.uint8)
    v, j, ok = decimal.parse_uint_swar(buf, 0)
    n = digits + 1 + 16 if stop == b"9" else digits   # a digit stop continues the number
    if n <= 15:
        assert ok and j == n and v == int(text[:n])
    else:
        assert not ok and j == 0 and v == 0


_side_levels = st.lists(st.tuples(st.integers(0, 60), st.sampled_from([0, 0, 1, 7, 123, 2**40])), max_size=150)


@settings(max_examples=80, deadline=None)
@given(_side_levels, st.booleans(), st.floats(0, 2e12), st.integers(0, 9))
def test_snapshot_side_kernels_equal_numpy(levels, neg, t, line):
    """A REST snapshot side loaded by the compiled steps (``sorted_side``, ``fill_side``,
    ``queue_rows``) as the NumPy formulation they replaced did it: stable key order, a repeated
    price refused (zero levels included), zero levels dropped, half-full blocks with zeros after
    the last level, one insert row per level with the same floats."""
    from ddms.io.kernels.levelarrays import BLOCK, fill_side, level_arrays_check, levels_of, queue_rows, sorted_side
    lv = np.array(levels, np.int64).reshape(-1, 2)
    keys, qty, repeat = sorted_side(lv, neg)
    k0 = -lv[:, 0] if neg else lv[:, 0]
    order = np.argsort(k0, kind="stable")
    k0, q0 = k0[order], lv[order, 1]
    assert repeat == (k0.shape[0] > 1 and not (np.diff(k0) > 0).all())
    if repeat:
        assert keys.shape == qty.shape == (0,)
        return
    assert np.array_equal(keys, k0[q0 > 0]) and np.array_equal(qty, q0[q0 > 0])
    m, h = keys.shape[0], BLOCK // 2
    nb = -(-m // h)
    side = int(neg)
    arrays = (np.full((2, nb + 2, BLOCK), 7, np.int64), np.full((2, nb + 2, BLOCK), 7, np.int64),
              np.full((2, nb + 2, BLOCK), 7.0), np.zeros((2, nb + 2), np.int64), np.zeros((2, nb + 2), np.int64),
              np.zeros((2, nb + 2), np.int64), np.zeros((2, nb + 2), np.int64), np.zeros((2, 4), np.int64))
    bk, bq, bt, bn, order_, bmax, _free, meta = arrays
    times = np.full(m, t)
    assert fill_side(bk, bq, bt, bn, order_, bmax, meta, side, keys, qty, times) == nb
    for arr, src in ((bk, keys), (bq, qty), (bt, times)):   # the replaced _load: a zero-padded copy
        pad = np.zeros(nb * h, arr.dtype)
        pad[:m] = src
        assert np.array_equal(arr[side, :nb, :h], pad.reshape(nb, h))
    assert tuple(meta[side]) == (nb, 0, m, nb) and np.array_equal(order_[side, :nb], np.arange(nb))
    level_arrays_check(arrays)
    got_k, got_q, got_t = levels_of(arrays, side)
    assert np.array_equal(got_k, keys) and np.array_equal(got_q, qty) and np.array_equal(got_t, times)
    oi, oc = np.zeros((m + 3, 3), np.int64), np.zeros((m + 3, 5))
    px = -keys if neg else keys
    assert queue_rows(oi, oc, 3, side, 1, line, times, px, qty, 100.0, 1000.0) == m + 3
    assert (oi[3:, 0] == side).all() and (oi[3:, 1] == 1).all() and (oi[3:, 2] == line).all()
    ref = np.column_stack([times, px, np.zeros(m), qty / 1000.0, px / 100.0])    # the replaced _queue_rows
    assert np.array_equal(oc[3:], ref) and not oi[:3].any() and not oc[:3].any()
