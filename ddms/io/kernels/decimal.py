"""Exact decimal and integer parsing from a ``uint8`` buffer (numba kernels, no allocation).

Why shared: the order-book CSV and LOBSTER readers parse the same number grammar
``[+-](digits[.digits]|.digits)[(e|E)[+-]digits]`` and must round the same way.  Plain integers
(all of the real data) take a branch-light loop; other decimals the exact Clinger fast path
(<= 18 significant digits, power of ten <= 22); the rare rest return status 2 ("valid, needs
Python's ``float``") so the caller re-parses that one field in Python: every value is the
correctly rounded double.

Status codes: 0 exact value, 1 not a number, 2 valid but needs Python float (``parse_number``),
3 an integer with ``|value| > 2**53`` (``parse_int``).  Cost: O(digits).

``parse_number_wide`` / ``parse_int_wide`` are the same functions for a caller that can let them
read 16 bytes past ``i`` (the buffer is long enough): they take the digits of a plain unsigned
number eight at a time (SWAR: one unaligned 8-byte load, the first non-digit found by a carry
trick and a count of trailing zeros, the digits combined by three multiplies) instead of one
byte at a time, whose loop exit mispredicts whenever the number's length changes.  On the
order-book reader's four numbers a line: 19 -> 13 ns a line for the parsing alone, 33.5 -> 30
ns for the whole kernel (big/finance.csv, pieces replayed; a single pass, whose branches are
not learnt, costs ~50 ns a line and gains less).  Anything else (a sign, a fraction, an
exponent, 16 or more digits) goes to the functions above, so the values are identical.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

__all__ = ["P10", "load_u64", "parse_int", "parse_int_wide", "parse_number", "parse_number_general",
           "parse_number_wide", "parse_uint_swar", "prefetch"]

P10 = np.array([10.0**i for i in range(23)])
"""Exact powers of ten for the Clinger fast path."""
_P10I = np.array([10**i for i in range(9)], np.int64)
_ZEROS = np.uint64(0x3030303030303030)     # eight '0' bytes
_OVER9 = np.uint64(0x7676767676767676)     # + 0x76 sets a byte's top bit iff the byte (minus '0') is > 9
_TOPS = np.uint64(0x8080808080808080)
_M8 = np.uint64(0x00FF00FF00FF00FF)
_M16 = np.uint64(0x0000FFFF0000FFFF)
_M32 = np.uint64(0x00000000FFFFFFFF)


@intrinsic
def load_u64(typingctx, arr, i):
    """``arr[i:i+8]`` (a uint8 array) as a little-endian uint64 in one unaligned load.  The
    caller guarantees ``0 <= i`` and ``i + 8 <= len(arr)`` (nothing is checked; numba's
    element-by-element form kept eight loads, each with its negative-index wrap-around)."""
    sig = types.uint64(arr, i)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)
    return sig, codegen


@intrinsic
def prefetch(typingctx, arr, i):
    """Ask the CPU to start loading the cache line of ``arr[i]`` (a 1-d array) for reading: LLVM's
    ``llvm.prefetch``, one instruction that neither waits nor faults (an address past the array is
    harmless).  Why: a reader's walk through its input is a chain of dependent loads (each line's
    start is the previous one's end), so without it the input's cache misses are taken one at a
    time: a kernel that only steps from line to line over a 24 MB order book cost 19 ns a line,
    6 ns with the bytes 1-2 KiB ahead prefetched (the hardware's prefetchers alone did not keep
    up).  O(1)."""
    sig = types.void(arr, i)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), i8p)
        # the name of typed-pointer LLVM (<= 14); newer LLVM renames it to ".p0" when it reads the IR
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, i32(0), i32(3), i32(1)])   # read, keep in every cache level, data
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, _nrt=False, inline="always")
def _digits8(w):  # pragma: no cover - compiled
    """``(n, x)``: how many of the eight bytes of ``w`` (little-endian: first byte lowest) lead
    as ASCII digits (0..8), and ``w`` minus '0' in every byte.  A byte below '0' borrows (its top
    bit is set, and the borrow only reaches bytes above it), one above '9' sets its top bit when
    0x76 is added (a digit byte never carries), so the lowest flagged byte is the first non-digit."""
    x = w - _ZEROS
    flags = (x | (x + _OVER9)) & _TOPS
    if flags == 0:
        return 8, x
    return np.int64(np.uint64(trailing_zeros(flags)) >> np.uint64(3)), x


@njit(cache=True, _nrt=False, inline="always")
def _value8(x, n):  # pragma: no cover - compiled
    """The value of the first ``n`` (1..8) digits of ``x`` (bytes minus '0'): the digits moved to
    the top (leading zeros below), then pairs, quads and octets combined."""
    x = x << np.uint64(8 * (8 - n))
    x = ((x * np.uint64(10)) + (x >> np.uint64(8))) & _M8
    x = ((x * np.uint64(100)) + (x >> np.uint64(16))) & _M16
    x = ((x * np.uint64(10000)) + (x >> np.uint64(32))) & _M32
    return np.int64(x)


@njit(cache=True, _nrt=False, inline="always")
def parse_uint_swar(buf, i):  # pragma: no cover - compiled
    """A plain unsigned integer of 1..15 digits at ``buf[i:]``: ``(value, j, ok)`` with ``j`` the
    first byte after it; ``ok`` False (value 0, ``j == i``) if it does not start with a digit or
    has 16 digits or more.  Reads ``buf[i:i+16]``: the caller guarantees ``i + 16 <= len(buf)``."""
    n, x = _digits8(load_u64(buf, i))
    if n == 0:
        return np.int64(0), i, False
    if n < 8:
        return _value8(x, n), i + n, True
    if np.uint64(np.int64(buf[np.uint64(i + 8)]) - 48) > 9:
        # exactly eight digits (every timestamp of the order-book data): one byte read, not a
        # second word's digit search
        return _value8(x, 8), i + 8, True
    n2, x2 = _digits8(load_u64(buf, i + 8))
    if n2 == 8:
        return np.int64(0), i, False
    v = _value8(x, 8)
    if n2 == 0:
        return v, i + 8, True
    return v * _P10I[n2] + _value8(x2, n2), i + 8 + n2, True


@njit(cache=True, _nrt=False, inline="always")
def parse_number_wide(buf, i, end):  # pragma: no cover - compiled
    """:func:`parse_number`, for a caller whose ``buf`` holds 16 bytes from ``i`` on (else it is
    :func:`parse_number` itself): the same results."""
    if i + 16 <= buf.shape[0]:
        v, j, ok = parse_uint_swar(buf, i)
        if ok:
            c = buf[np.uint64(j)]
            if c != 46 and c != 101 and c != 69:
                return float(v), j, 0
    return parse_number(buf, i, end)


@njit(cache=True, _nrt=False, inline="always")
def parse_int_wide(buf, i, end):  # pragma: no cover - compiled
    """:func:`parse_int`, reading eight digits at a time where ``buf`` holds 16 bytes from ``i`` on."""
    if i + 16 <= buf.shape[0]:
        v, j, ok = parse_uint_swar(buf, i)
        if ok:
            return v, j, 0
    return parse_int(buf, i, end)


@njit(cache=True, _nrt=False, inline="always")
def parse_number(buf, i, end):  # pragma: no cover - compiled
    """Parse a decimal number at ``buf[i:]``.  Returns ``(value, j, st)`` with ``j`` the first
    byte after it and ``st`` 0 = exact value, 1 = not a number, 2 = valid but needs Python float.

    Callers guarantee a non-digit byte (the line's newline) before ``end``, so the hot loop for
    plain unsigned integers (every field of the real data) runs without bounds checks."""
    s = i
    m = np.int64(0)
    while True:
        d = np.int64(buf[i]) - 48
        if np.uint64(d) > 9:
            break
        m = m * 10 + d
        i += 1
    c = buf[i]
    if 0 < i - s <= 15 and c != 46 and c != 101 and c != 69:
        return float(m), i, 0
    return parse_number_general(buf, s, end)


@njit(cache=True, _nrt=False)
def parse_number_general(buf, i, end):  # pragma: no cover - compiled
    """The full grammar ``[+-](digits[.digits]|.digits)[(e|E)[+-]digits]`` (see ``parse_number``)."""
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    m = np.int64(0)
    nd = 0        # significant digits kept in m (<= 18 keeps m < 2**63)
    ndig = 0      # digits seen in the mantissa
    exp = 0
    inexact = False
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        ndig += 1
        if nd < 18:
            m = m * 10 + d
            if m != 0:
                nd += 1
        else:
            exp += 1
            if d != 0:
                inexact = True
        i += 1
    if i < end and buf[i] == 46:
        i += 1
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            ndig += 1
            if nd < 18:
                m = m * 10 + d
                exp -= 1
                if m != 0:
                    nd += 1
            elif d != 0:
                inexact = True
            i += 1
    if ndig == 0:
        return 0.0, i, 1
    if i < end and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < end and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        e = 0
        ne = 0
        while i < end:
            d = np.int64(buf[i]) - 48
            if d < 0 or d > 9:
                break
            if e < 100000:
                e = e * 10 + d
            ne += 1
            i += 1
        if ne == 0:
            return 0.0, i, 1
        exp += -e if eneg else e
    if m == 0 and not inexact:
        return (-0.0 if neg else 0.0), i, 0
    if inexact or m > 9007199254740992 or exp > 22 or exp < -22:
        return 0.0, i, 2
    v = m * P10[exp] if exp >= 0 else m / P10[-exp]
    return (-v if neg else v), i, 0


@njit(cache=True, _nrt=False, inline="always")
def parse_int(buf, i, end):  # pragma: no cover - compiled
    """Parse ``[+-]digits`` at ``buf[i:]``: ``(value, j, st)``, st 0 ok, 1 not an integer,
    3 an integer with ``|value| > 2**53``."""
    s = i
    v = np.int64(0)
    while True:
        d = np.int64(buf[i]) - 48
        if np.uint64(d) > 9:
            break
        v = v * 10 + d
        i += 1
    if 0 < i - s <= 15:
        return v, i, 0
    i = s
    neg = False
    if i < end and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    v = np.int64(0)
    nd = 0
    big = False
    while i < end:
        d = np.int64(buf[i]) - 48
        if d < 0 or d > 9:
            break
        nd += 1
        if not big:
            v = v * 10 + d
            if v > 9007199254740992:
                big = True
        i += 1
    if nd == 0:
        return np.int64(0), i, 1
    if big:
        return np.int64(0), i, 3
    return (-v if neg else v), i, 0
