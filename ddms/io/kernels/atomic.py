"""Atomic compare-and-swap on an ``int64`` array element, for numba kernels that share work
between threads without the GIL (the order-book reader's pieces: :mod:`ddms.io.orderbook`).

Why an intrinsic: numba has no atomics; an LLVM ``cmpxchg`` (sequentially consistent) both claims
an element and, used as ``cas(a, i, x, x)``, reads it with acquire ordering, so a thread that sees
another's "done" also sees what it wrote before, and a spinning read is never hoisted out of its
loop.  Cost: one locked instruction (~20 ns when the line is shared between cores).
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic

__all__ = ["cas"]


@intrinsic
def cas(typingctx, arr, i, old, new):
    """Atomically: if ``arr[i] == old`` then ``arr[i] = new``; returns the value ``arr[i]`` had.
    ``arr`` a C-contiguous int64 array, ``0 <= i < len(arr)`` (not checked), ``old``/``new`` int64."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.int64):
        return None
    sig = types.int64(arr, types.int64, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        res = builder.cmpxchg(ptr, args[2], args[3], "seq_cst", "seq_cst")
        return builder.extract_value(res, 0)
    return sig, codegen
