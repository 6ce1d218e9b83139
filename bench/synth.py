"""Synthetic order-book streams for the benchmarks (``t,order_id,action,volume,price`` bytes).

``book_stream`` builds a book of ``depth`` resting orders (B/S lines) and then runs a
steady-state stream of mixed updates that keeps the depth constant:

* 40 %: a partial execution (E) of a random resting order (never its whole volume);
* 60 %: a replacement, two lines: a full execution (F) or a delete (D) of a random resting
  order, then a new order (B or S, same side) at a fresh random price.

Two price models (integer ticks):

* **distinct prices** (``tick_band=0``, the default): uniform over a band of
  ``4 * depth_per_side`` ticks below (bids) or above (asks) a fixed mid, so most orders have a
  price level of their own and the number of levels grows with the depth;
* **tick levels** (``tick_band=W > 0``): like a real book (big/finance.csv has 3,788 resting bids
  on a few hundred levels), orders sit 1..W ticks below (bids) or above (asks) a mid that drifts
  (a +-1 tick random-walk step on 5 % of the updates), denser near the mid (the offset is the
  smaller of two uniform draws), so the number of levels stays bounded by about 2 * W plus the
  drift however deep the book is, and deep books pile hundreds of orders on each level.

Generation and formatting run in numba (a few ns per line).

``synthetic_stream`` is the section-1 "10M-line synthetic stream": ``replay.synthetic``'s
``generate_orderbook`` when that module exists, else ``book_stream`` at a 20k-order depth.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import numpy as np
from numba import njit

from replay.synthetic import put_line

MID = 100_000_000


@njit(cache=True)
def _price(side, span):  # pragma: no cover - compiled
    off = 1 + np.random.randint(0, span)
    return MID - off if side == 0 else MID + off


@njit(cache=True)
def _tick_price(side, mid, band):  # pragma: no cover - compiled
    off = 1 + min(np.random.randint(0, band), np.random.randint(0, band))
    return mid - off if side == 0 else mid + off


@njit(cache=True)
def _drift(mid):  # pragma: no cover - compiled
    r = np.random.random()
    if r < 0.025:
        return mid + 1
    if r < 0.05:
        return mid - 1
    return mid


@njit(cache=True)
def _book_stream(depth, n_steady, both_sides, seed, band):  # pragma: no cover - compiled
    np.random.seed(seed)
    mid = MID
    per_side = depth // 2 if both_sides else depth
    span = max(4 * per_side, 8)
    cap = (depth + n_steady + 2) * 40
    buf = np.empty(cap, np.uint8)
    live_id = np.empty(depth, np.int64)
    live_vol = np.empty(depth, np.int64)
    live_side = np.empty(depth, np.int64)
    pos = 0
    t = 1_000_000
    next_id = 1
    for j in range(depth):
        side = (j & 1) if both_sides else 0
        vol = np.random.randint(100, 1000)
        if band > 0:
            mid = _drift(mid)
            px = _tick_price(side, mid, band)
        else:
            px = _price(side, span)
        live_id[j] = next_id
        live_vol[j] = vol
        live_side[j] = side
        pos = put_line(buf, pos, t, next_id, 66 if side == 0 else 83, vol, px)
        next_id += 1
        t += 1
    build_end = pos
    lines = 0
    while lines < n_steady:
        if band > 0:
            mid = _drift(mid)
        j = np.random.randint(0, depth)
        r = np.random.random()
        if r < 0.4 and live_vol[j] > 1:
            q = np.random.randint(1, min(live_vol[j], 50))
            live_vol[j] -= q
            pos = put_line(buf, pos, t, live_id[j], 69, q, 0)
            lines += 1
        else:
            pos = put_line(buf, pos, t, live_id[j], 70 if r < 0.7 else 68, 0, 0)
            lines += 1
            side = live_side[j]
            vol = np.random.randint(100, 1000)
            px = _tick_price(side, mid, band) if band > 0 else _price(side, span)
            live_id[j] = next_id
            live_vol[j] = vol
            pos = put_line(buf, pos, t, next_id, 66 if side == 0 else 83, vol, px)
            next_id += 1
            lines += 1
        t += 1
    return buf[:pos], build_end


def book_stream(depth: int, n_steady: int, *, both_sides: bool, seed: int = 0,
                tick_band: int = 0) -> tuple[bytes, bytes]:
    """(build lines, steady-state lines) as CSV bytes; ``tick_band`` 0 = distinct prices, W > 0 =
    tick levels within W ticks of a drifting mid (see the module docstring)."""
    buf, build_end = _book_stream(depth, n_steady, both_sides, seed, tick_band)
    data = buf.tobytes()
    return data[:build_end], data[build_end:]


def synthetic_stream(n_lines: int, seed: int = 0) -> tuple[bytes, float, str]:
    """(the bytes of an ``n_lines`` synthetic stream, generation seconds, generator name)."""
    try:
        from replay.synthetic import generate_orderbook
    except ImportError:
        generate_orderbook = None
    if generate_orderbook is not None:
        for _ in generate_orderbook(1000, seed=seed + 1):   # compile / load outside the timing
            pass
        t0 = time.perf_counter()
        out = generate_orderbook(n_lines, seed=seed)
        if isinstance(out, str):
            data = out.encode()
        elif isinstance(out, (bytes, bytearray, memoryview)):
            data = bytes(out)
        elif isinstance(out, Iterable):
            data = b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in out)
        else:
            raise TypeError(f"replay.synthetic.generate_orderbook returned {type(out).__name__}")
        return data, time.perf_counter() - t0, "replay.synthetic"
    depth = 20_000
    _book_stream(8, 8, True, seed, 0)  # compile (or load from cache) outside the timing
    t0 = time.perf_counter()
    build, steady = book_stream(depth, n_lines - depth, both_sides=True, seed=seed)
    data = build + steady
    return data, time.perf_counter() - t0, "bench.synth (replay.synthetic absent)"
