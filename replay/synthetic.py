"""Seeded synthetic order flow in finance.csv format (``t,order_id,action,volume,price``).

Why: the real files stop at 100,000 lines; benchmarks and soak tests need tens of millions of
realistic lines, reproducible from a seed, without storing them.  The flow is generated in numba
one line at a time from a small state (a splitmix64 random stream, the clock, the mid price and
the list of resting orders), so the bytes depend only on the seed and parameters -- never on
how the output is chunked -- and memory stays O(depth + chunk).

Model, per line (probabilities are the keyword defaults):

* ``T`` -- an ignored action (trade print) about a resting order, probability ``ignored_rate``;
* ``D`` or ``E`` for an order that is no longer resting (the adaptor ignores it),
  probability ``unknown_rate``;
* otherwise an add (``B``/``S`` with equal odds, fresh increasing ids) or a removal-type action
  on a uniformly chosen resting order: ``D`` cancel (60%), ``F`` fill (10%) or ``E`` execution
  (30%; a quarter of them execute the whole remaining volume).  The add probability is a
  proportional controller around its equilibrium value, so the number of resting orders hovers
  around ``depth`` (+- a few sqrt(depth)) once it has been reached after about ``2 * depth`` lines.

Prices are integers in 1/10000 units like the real data: a mid price starting at ``mid``
(default 1,000,000 = 100.0000) random-walks by one ``tick`` with probability ``drift_rate`` per
line (within a few thousand ticks of the start); an add is meant for 1..``levels`` ticks below it
(bids) or above it (asks), near the touch more often.  The book is never crossed: an add whose
price reaches the other side's best price is a *marketable* order and becomes an execution of
the oldest order at that best level (an ``E`` of the add's volume, or an ``F`` when the add takes
all of it; the rest of the add does not rest), so the book follows the mid as a real one follows
buyers and sellers.  ``allow_crossing=True`` keeps the naive model instead (adds wherever the mid
puts them: the book is crossed on almost every line once the mid has moved; for tests that want
crossed books).  A fraction ``outlier_rate`` of orders carry extreme prices (1999999900 asks,
1-tick bids) as the real files do; they never cross.  Timestamps increase by 0..3 per line from
``t0``.  There is no broker parameter: the adaptor derives ``broker_id = id mod brokers``, and
fresh consecutive ids spread orders evenly over any number of brokers.

Cost: about 100 ns per line on one core (~10M lines/s, ~26 bytes a line), one reused buffer of
``chunk_lines * 88`` bytes plus the returned chunk, 49 bytes per resting-order slot
(``2 * depth + 64`` slots) and 32 bytes per price level of the window the mid can reach (about
8,200 levels by default: 260 KB).  Feed the bytes to :class:`ddms.io.orderbook.OrderBookParser`.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR: it must come before the first numba import)

# isort: split
import os
from collections.abc import Iterator

import numpy as np
from numba import njit

__all__ = ["ACTIONS", "SyntheticOrderFlow", "generate_orderbook", "write_orderbook"]

#: action letters in the order of :attr:`SyntheticOrderFlow.counts`
ACTIONS = ("B", "S", "E", "F", "D", "T")
_MAX_LINE = 88        # 4 numbers of <= 20 characters, the action and 5 separators
_OUTLIER_ASK = 1999999900
_P10 = np.array([10**i for i in range(19)], np.int64)

# indices into the int64 state vector
_T, _NEXT_ID, _MID, _NREST, _LAST_GONE, _LINES = range(6)
_NSTATE = 6
# indices into the float64 parameter vector
_P_IGNORED, _P_UNKNOWN, _P_DRIFT, _P_OUTLIER, _P_ADD_EQ, _DEPTH = range(6)
# removal-type mix and the fraction of E lines that execute everything
_FRAC_D, _FRAC_F, _FRAC_E, _E_FULL = 0.6, 0.1, 0.3, 0.25
_REMOVES = _FRAC_D + _FRAC_F + _FRAC_E * _E_FULL   # chance that a removal-type line removes


@njit(cache=True, _nrt=False)
def _mix(x):  # pragma: no cover - compiled
    """splitmix64 output function: the stream is ``_mix(seed + i * golden)``, i = 1, 2, ...
    (full period 2**64, passes BigCrush, ~1 ns a draw)."""
    z = x
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, _nrt=False)
def _unit(z):  # pragma: no cover - compiled
    """The top 53 bits of a draw as a float in [0, 1)."""
    return np.float64(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, _nrt=False)
def _under(z, n):  # pragma: no cover - compiled
    """A draw reduced to [0, n) (n >= 1; modulo bias < n / 2**53)."""
    return np.int64((z >> np.uint64(11)) % np.uint64(n))


@njit(cache=True, _nrt=False)
def _put_uint(out, p, v):  # pragma: no cover - compiled
    """Write the decimal digits of ``v >= 0`` at ``out[p:]``; returns the end position."""
    n = 1
    while n < 19 and v >= _P10[n]:
        n += 1
    q = p + n
    while q > p:
        q -= 1
        out[q] = 48 + v % 10
        v //= 10
    return p + n


@njit(cache=True, _nrt=False)
def put_line(out, p, t, oid, act, vol, px):  # pragma: no cover - compiled
    """Write the order-book line ``t,oid,ACT,vol,px\\n`` (non-negative integers; ``act`` an ASCII
    code) at ``out[p:]``; returns the end position.  Shared with ``bench/synth.py``."""
    p = _put_uint(out, p, t)
    out[p] = 44
    p = _put_uint(out, p + 1, oid)
    out[p] = 44
    out[p + 1] = act
    out[p + 2] = 44
    p = _put_uint(out, p + 3, vol)
    out[p] = 44
    p = _put_uint(out, p + 1, px)
    out[p] = 10
    return p + 1


@njit(cache=True, _nrt=False, inline="always")
def _link(j, s, lv, prv, nxt, head, tail):  # pragma: no cover - compiled
    """Append slot ``j`` (side ``s``) at the tail of level ``lv``'s FIFO (time priority)."""
    last = tail[s, lv]
    prv[j] = last
    nxt[j] = -1
    if last >= 0:
        nxt[last] = j
    else:
        head[s, lv] = j
    tail[s, lv] = j


@njit(cache=True, _nrt=False, inline="always")
def _unlink(j, s, lv, prv, nxt, head, tail):  # pragma: no cover - compiled
    """Take slot ``j`` out of its level's FIFO (``lv`` < 0: an outlier, in no FIFO)."""
    if lv < 0:
        return
    a = prv[j]
    b = nxt[j]
    if a >= 0:
        nxt[a] = b
    else:
        head[s, lv] = b
    if b >= 0:
        prv[b] = a
    else:
        tail[s, lv] = a


@njit(cache=True, _nrt=False, inline="always")
def _remove(j, nrest, ids, side, vol, px, lvl, prv, nxt, head, tail, best):  # pragma: no cover - compiled
    """Remove resting slot ``j``: unlink it, move the last slot into the hole (relinking its
    neighbours), and move the side's best level outward past emptied levels.  Returns the new
    number of resting orders.  O(1) except when the best level empties: then one step per empty
    level up to the next occupied one (the book is dense near the touch)."""
    s = side[j]
    lv = lvl[j]
    _unlink(j, s, lv, prv, nxt, head, tail)
    nrest -= 1
    if j != nrest:
        m = nrest
        lm = lvl[m]
        if lm >= 0:
            sm = side[m]
            a = prv[m]
            b = nxt[m]
            if a >= 0:
                nxt[a] = j
            else:
                head[sm, lm] = j
            if b >= 0:
                prv[b] = j
            else:
                tail[sm, lm] = j
        ids[j] = ids[m]
        side[j] = side[m]
        vol[j] = vol[m]
        px[j] = px[m]
        lvl[j] = lm
        prv[j] = prv[m]
        nxt[j] = nxt[m]
    if lv >= 0 and head[s, lv] < 0:
        nlev = head.shape[1]
        if s == 0 and lv == best[0]:
            b = lv
            while b >= 0 and head[0, b] < 0:
                b -= 1
            best[0] = b
        elif s == 1 and lv == best[1]:
            b = lv
            while b < nlev and head[1, b] < 0:
                b += 1
            best[1] = b
    return nrest


@njit(cache=True, _nrt=False)
def _generate(n, rng, state, prm, ids, side, vol, px, lvl, prv, nxt, head, tail, best, counts, tick, levels,
              grid, out):  # pragma: no cover
    """Append ``n`` lines to ``out`` (room for ``n * _MAX_LINE`` bytes); returns bytes written.

    ``ids/side/vol/px[:nrest]`` are the resting orders (side 0 bid, 1 ask); removal swaps the
    last one into the hole, so picking and removing a random order are O(1).  Orders on the
    price grid are also kept per level in FIFOs (``lvl`` the level index or -1 for an outlier,
    ``prv``/``nxt`` links, ``head``/``tail`` per side and level) with the best occupied level
    per side in ``best`` (bids: -1 when none; asks: the number of levels when none), so that an
    add whose price reaches the other side's best (``grid[3] == 0``: crossing not allowed)
    becomes an execution of the oldest order at that best level (``E``, or ``F`` when it takes
    all of it) instead of a crossing add.  ``grid`` = (price offset, first level index, mid
    floor, mid ceiling, allow crossing).  The scalar state lives in locals for the loop (stores
    to ``out`` could alias arrays, forcing reloads).  Compiled without NRT like its helpers:
    nothing allocates, and no per-call reference counting of the array arguments."""
    gold = np.uint64(0x9E3779B97F4A7C15)
    x = rng[0]
    t = state[_T]
    next_id = state[_NEXT_ID]
    mid = state[_MID]
    nrest = state[_NREST]
    last_gone = state[_LAST_GONE]
    p_ign = prm[_P_IGNORED]
    p_unk = p_ign + prm[_P_UNKNOWN]
    p_drift = prm[_P_DRIFT]
    p_out = prm[_P_OUTLIER]
    p_eq = prm[_P_ADD_EQ]
    depth = prm[_DEPTH]
    cap = ids.shape[0]
    off = grid[0]
    base = grid[1]
    low = grid[2]
    high = grid[3]
    crossing = grid[4] != 0
    p = 0
    for _ in range(n):
        x += gold
        z = _mix(x)                    # clock (2 bits), drift side (1 bit), drift (53 bits)
        t += np.int64(z & np.uint64(3))
        if _unit(z) < p_drift:
            mid += tick if (z & np.uint64(4)) else -tick
            if mid < low:
                mid = low
            elif mid > high:
                mid = high
        x += gold
        u = _unit(_mix(x))
        x += gold
        z = _mix(x)                    # second draw of the line, used by whichever branch runs
        x += gold
        z2 = _mix(x)                   # third draw
        if u < p_ign and nrest > 0:
            j = _under(z, nrest)
            p = put_line(out, p, t, ids[j], 84, 1 + _under(z2, vol[j]), px[j])
            counts[5] += 1
        elif u < p_unk and last_gone >= 0:
            if z & np.uint64(1):
                p = put_line(out, p, t, last_gone, 68, 0, 0)
                counts[4] += 1
            else:
                p = put_line(out, p, t, last_gone, 69, 1 + _under(z2, 100), 0)
                counts[2] += 1
        else:
            p_add = p_eq + 0.5 * (depth - nrest) / depth
            if nrest == 0:
                p_add = 1.0
            elif nrest >= cap:
                p_add = 0.0
            if _unit(z) < p_add:
                s = np.int64(z & np.uint64(1))
                k = min(_under(z2, levels), _under(z2 >> np.uint64(21), levels))
                x += gold
                z3 = _mix(x)
                lv = -1
                if _unit(z3) < p_out:
                    price = _OUTLIER_ASK if s == 1 else tick
                elif s == 0:
                    price = mid - tick * (k + 1)
                    lv = (price - off) // tick - base
                else:
                    price = mid + tick * (k + 1)
                    lv = (price - off) // tick - base
                x += gold
                z4 = _mix(x)                                   # volume: round lots or odd lots
                v = (1 + _under(z4, 20)) * 10 if z4 & np.uint64(1) else 1 + _under(z4, 100)
                # a marketable order: it reaches the other side's best level
                other = best[1 - s]
                if not crossing and lv >= 0 and ((s == 0 and lv >= other) or (s == 1 and lv <= other)):
                    j = head[1 - s, other]
                    if v >= vol[j]:
                        p = put_line(out, p, t, ids[j], 70, 0, 0)
                        counts[3] += 1
                        last_gone = ids[j]
                        nrest = _remove(j, nrest, ids, side, vol, px, lvl, prv, nxt, head, tail, best)
                    else:
                        vol[j] -= v
                        p = put_line(out, p, t, ids[j], 69, v, 0)
                        counts[2] += 1
                    continue
                oid = next_id
                next_id += 1
                ids[nrest] = oid
                side[nrest] = s
                vol[nrest] = v
                px[nrest] = price
                lvl[nrest] = lv
                if lv >= 0:
                    _link(nrest, s, lv, prv, nxt, head, tail)
                    if s == 0 and lv > best[0]:
                        best[0] = lv
                    elif s == 1 and lv < best[1]:
                        best[1] = lv
                nrest += 1
                p = put_line(out, p, t, oid, 66 if s == 0 else 83, v, price)
                counts[s] += 1
            else:
                j = _under(z2, nrest)
                oid = ids[j]
                x += gold
                r = _unit(_mix(x))
                remove = True
                if r < _FRAC_D:
                    p = put_line(out, p, t, oid, 68, 0, 0)
                    counts[4] += 1
                elif r < _FRAC_D + _FRAC_F:
                    p = put_line(out, p, t, oid, 70, 0, 0)
                    counts[3] += 1
                else:
                    v = vol[j]
                    x += gold
                    z3 = _mix(x)
                    if v > 1 and _unit(z3) >= _E_FULL:
                        x += gold
                        e = 1 + _under(_mix(x), v - 1)
                        vol[j] = v - e
                        remove = False
                    else:
                        e = v
                    p = put_line(out, p, t, oid, 69, e, 0)
                    counts[2] += 1
                if remove:
                    nrest = _remove(j, nrest, ids, side, vol, px, lvl, prv, nxt, head, tail, best)
                    last_gone = oid
    rng[0] = x
    state[_T] = t
    state[_NEXT_ID] = next_id
    state[_MID] = mid
    state[_NREST] = nrest
    state[_LAST_GONE] = last_gone
    state[_LINES] += n
    return p


class SyntheticOrderFlow:
    """A stateful generator: each :meth:`lines` call continues the same flow.

    ``resting``/``resting_bids``/``resting_asks`` track what the order-book adaptor will hold
    after the lines emitted so far (the model applies the same semantics), ``best_bid`` and
    ``best_ask`` its best prices on the price grid (outliers aside), and ``counts`` the lines
    emitted per action letter (:data:`ACTIONS`).  ``allow_crossing=True`` restores the naive
    model in which adds follow the mid price wherever the other side rests, so the book crosses
    whenever the mid moves two ticks past resting orders (for tests that want a crossed book)."""

    def __init__(self, *, seed: int = 0, depth: int = 1000, mid: int = 1_000_000, tick: int = 100,
                 levels: int = 50, t0: int = 25_000_000, first_id: int = 1, ignored_rate: float = 0.01,
                 unknown_rate: float = 0.002, drift_rate: float = 0.02, outlier_rate: float = 1e-4,
                 allow_crossing: bool = False) -> None:
        if depth < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        if tick < 1 or levels < 1 or mid < 1:
            raise ValueError("mid, tick and levels must be >= 1")
        if t0 < 0 or first_id < 0:
            raise ValueError("t0 and first_id must be >= 0")
        rates = (ignored_rate, unknown_rate, drift_rate, outlier_rate)
        if any(not 0.0 <= r <= 1.0 for r in rates) or ignored_rate + unknown_rate >= 1.0:
            raise ValueError("rates must lie in [0, 1] and ignored_rate + unknown_rate < 1")
        # the price grid: every non-outlier price is off + tick * i; the mid walks within
        # [low, high], so the levels it can place orders at are a window of indices from base
        off = mid % tick
        mid = max(mid, off + tick * (levels + 10))
        mid_i = (mid - off) // tick
        span = max(4096, 16 * levels)
        low_i = max(levels + 10, mid_i - span)
        high_i = min(mid_i + span, (_OUTLIER_ASK - off) // tick - levels - 2)
        if high_i < mid_i:
            raise ValueError(f"mid {mid} is too close to the outlier ask price {_OUTLIER_ASK}")
        base = low_i - levels - 1
        nlev = high_i + levels + 2 - base
        self.seed, self.depth, self.tick, self.levels = seed, depth, tick, levels
        self.allow_crossing = allow_crossing
        self._rng = np.array([seed & 0xFFFFFFFFFFFFFFFF], np.uint64)
        self._state = np.zeros(_NSTATE, np.int64)
        self._state[[_T, _NEXT_ID, _MID, _LAST_GONE]] = (t0, first_id, mid, -1)
        self._grid = np.array([off, base, off + tick * low_i, off + tick * high_i, int(allow_crossing)], np.int64)
        p_add_eq = _REMOVES / (1.0 + _REMOVES)
        self._prm = np.array([ignored_rate, unknown_rate, drift_rate, outlier_rate, p_add_eq, depth],
                             np.float64)
        cap = 2 * depth + 64
        self._ids = np.zeros(cap, np.int64)
        self._side = np.zeros(cap, np.int8)
        self._vol = np.zeros(cap, np.int64)
        self._px = np.zeros(cap, np.int64)
        self._lvl = np.full(cap, -1, np.int64)
        self._prv = np.full(cap, -1, np.int64)
        self._nxt = np.full(cap, -1, np.int64)
        self._head = np.full((2, nlev), -1, np.int64)
        self._tail = np.full((2, nlev), -1, np.int64)
        self._best = np.array([-1, nlev], np.int64)
        self._counts = np.zeros(len(ACTIONS), np.int64)
        self._buf = np.empty(0, np.uint8)  # reused output buffer: fresh pages cost more than the work

    def lines(self, n: int) -> bytes:
        """The next ``n`` lines (each ending in a newline)."""
        if n <= 0:
            return b""
        if self._buf.shape[0] < n * _MAX_LINE:
            self._buf = np.empty(n * _MAX_LINE, np.uint8)
        size = _generate(n, self._rng, self._state, self._prm, self._ids, self._side, self._vol, self._px,
                         self._lvl, self._prv, self._nxt, self._head, self._tail, self._best, self._counts,
                         self.tick, self.levels, self._grid, self._buf)
        return self._buf[:size].tobytes()

    @property
    def lines_emitted(self) -> int:
        return int(self._state[_LINES])

    @property
    def resting(self) -> int:
        return int(self._state[_NREST])

    @property
    def resting_bids(self) -> int:
        return int(np.count_nonzero(self._side[: self.resting] == 0))

    @property
    def resting_asks(self) -> int:
        return self.resting - self.resting_bids

    def _price(self, level: int) -> int:
        return int(self._grid[0] + self.tick * (level + self._grid[1]))

    @property
    def best_bid(self) -> int | None:
        """The best bid price on the grid (None when no bid rests there)."""
        b = int(self._best[0])
        return None if b < 0 else self._price(b)

    @property
    def best_ask(self) -> int | None:
        """The best ask price on the grid (None when no ask rests there)."""
        a = int(self._best[1])
        return None if a >= self._head.shape[1] else self._price(a)

    @property
    def counts(self) -> dict[str, int]:
        return dict(zip(ACTIONS, self._counts.tolist(), strict=True))

    def _check(self) -> None:
        """Assert the model's invariants (tests): every resting order on the grid is in exactly
        its level's FIFO, the links agree both ways, the best levels are the extreme occupied
        ones, and without ``allow_crossing`` the best bid is below the best ask.  O(resting +
        levels)."""
        n = self.resting
        seen = np.zeros(n, bool)
        for s in (0, 1):
            for lv in np.flatnonzero(self._head[s] >= 0).tolist():
                j, prev = int(self._head[s, lv]), -1
                while j >= 0:
                    assert j < n and not seen[j], (s, lv, j)
                    seen[j] = True
                    assert self._side[j] == s and self._lvl[j] == lv and self._prv[j] == prev
                    assert self._px[j] == self._price(lv)
                    prev, j = j, int(self._nxt[j])
                assert self._tail[s, lv] == prev
            assert (self._tail[s] >= 0).sum() == (self._head[s] >= 0).sum()
        assert np.array_equal(seen, self._lvl[:n] >= 0)
        occupied = [np.flatnonzero(self._head[s] >= 0) for s in (0, 1)]
        assert self._best[0] == (occupied[0][-1] if occupied[0].size else -1)
        assert self._best[1] == (occupied[1][0] if occupied[1].size else self._head.shape[1])
        assert (self._vol[:n] > 0).all()
        if not self.allow_crossing and occupied[0].size and occupied[1].size:
            assert self._best[0] < self._best[1], (self.best_bid, self.best_ask)


def generate_orderbook(n_lines: int, *, seed: int = 0, depth: int = 1000, chunk_lines: int = 1 << 16,
                       **kw) -> Iterator[bytes]:
    """``n_lines`` synthetic lines as byte chunks of ``chunk_lines`` lines (the last may be
    shorter); other keywords go to :class:`SyntheticOrderFlow`.  The concatenated bytes depend
    only on the seed and parameters, not on ``chunk_lines``."""
    if chunk_lines < 1:
        raise ValueError("chunk_lines must be >= 1")
    flow = SyntheticOrderFlow(seed=seed, depth=depth, **kw)
    left = n_lines
    while left > 0:
        n = min(chunk_lines, left)
        yield flow.lines(n)
        left -= n


def write_orderbook(path: str | os.PathLike, n_lines: int, **kw) -> int:
    """Write ``n_lines`` synthetic lines to ``path``; returns the number of bytes written.
    Keywords as for :func:`generate_orderbook`."""
    size = 0
    with open(path, "wb") as f:
        for chunk in generate_orderbook(n_lines, **kw):
            f.write(chunk)
            size += len(chunk)
    return size
