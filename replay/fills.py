"""Fill simulator: the strategy's own orders against a replayed order book, deterministic and
without look-ahead.

Why: a backtest must say what a strategy's orders *would* have done, from nothing but the
``bids``/``asks`` insert/delete events every reader produces (:class:`~ddms.io.events.EventBatch`:
rel 0 = bids, 1 = asks, sign +1 insert / -1 delete, cols ``(t, id, broker_id, volume, price)``).
The simulator keeps its own reconstruction of the book (per-order rows with a FIFO sequence
number, per-price-level volume) and the strategy's orders, position, cash and fills.

The replayed book is never changed by the strategy (no market impact): own orders are not
inserted into it, and own orders never trade with each other.  What the strategy took is
remembered instead (see *consumed liquidity* below), so two own orders cannot take the same
resting volume.

Time and latency
----------------
The simulator's clock is the largest ``t`` of the events applied so far (an insert carries its
line's timestamp; a delete carries the deleted row's original ``t``, so it never moves the clock
forward: with the order-book format, ``D``/``E``/``F`` lines leave the clock at the last
``B``/``S`` line's time).  An order or cancel submitted at ``now`` (default: the clock) with latency ``L``
becomes *active* at ``now + L``: at once if the clock has reached that time, otherwise just
before the first input line whose time (the largest of the clock and its events' ``t``) is
``>= now + L``.  It acts on the book as it is at that moment, never on later lines, and the
clock moves to ``now + L`` (so a maker fill that a later delete line causes is never dated
before the activation).  Actions becoming due together act in submission order.  Latency 0
with the default ``now`` therefore acts immediately on the current book.

Fill rules (the same for both sides; stated for an own BUY at price ``p``)
--------------------------------------------------------------------------
*Taker, at activation.*  A market buy walks the asks from the lowest price up, a limit buy the
asks with price ``<= p``; it takes ``min(left, available)`` at each level's price, where a
level's available volume is its resting volume minus what own orders already consumed there.
A market order's unfilled rest expires (reported as ``Order.unfilled``); a limit order's rest
*rests* with a queue position ``ahead`` = the bids volume at ``p`` at that moment (FIFO: every
resting order at ``p`` is ahead of it; every later one behind it).

*Maker, while resting* (each input line is processed event by event; fills are at ``p``):

- **M1 queue / trade-through.** When a trade removes ``X`` units from a resting bid at price
  ``x`` (an *execution*, see below), own buys are served in priority order (higher price, then
  earlier arrival) from the aggressor volume ``Xl`` still left (starting at ``X``): an own buy
  with ``p > x`` (the aggressor traded through it) gets ``min(left, Xl)``; one with ``p == x``
  gets ``min(left, max(0, Xl - ahead))`` -- the aggressor first consumed the volume ahead.
  With exact order-by-order data, an execution of an order ahead of us is at most ``ahead``,
  so it only advances the queue; an execution at our price once ``ahead`` is 0 (of an order
  behind us) fills us.
- **M2 cross.** When volume is added to the asks at a price ``a <= p`` (a new ask, or an ask whose
  volume grew in place), own buys with ``p >= a`` are served in priority order from that ask
  level's available volume, which they consume.  So after every line: *no ask at or below a
  resting own buy's price has available volume* (``_check`` asserts it).

*Queue position.*  ``ahead`` starts at the level volume on arrival.  Any reduction (cancel,
execution, partial cancel or execution) of an order ahead of us (earlier sequence number) at
our price lowers it by the reduced volume, floored at 0; growth of an order in place never
raises it (the growth queues behind us), so ``0 <= ahead <= volume of the orders ahead``, with
equality for order-by-order data where orders only shrink in place.

*In-place change.*  A delete immediately followed, within the same input line, by an insert of
the same id, book and price (the order-book ``E`` line, LOBSTER partial cancels and executions,
price-level updates) is one in-place volume change: the order keeps its FIFO sequence number
and what was consumed from its level (clamped to the level volume).  Anything else (a new id,
another price) is a fresh order at the back of its queue.

*Executions.*  The events say which rows disappear, not always why.  ``on_events(traded=...)``
(or a batch with a ``traded`` array, such as :class:`ddms.io.lobster.LobsterBatch`) gives, per
event, the volume its delete traded.  Without it, ``trades=`` decides: ``"reductions"`` (the
default: an in-place volume reduction is an execution of the difference -- right for the
order-book format, whose in-place reductions are ``E`` lines (and the rare repeated ``B``/``S``
at the same price with less volume); whole-order deletes count as cancels, because ``D`` and a
full ``E``/``F`` look alike), ``"all"`` (every removed unit traded:
optimistic) or ``"none"`` (only M2 fills resting orders).

*Consumed liquidity.*  Per price level, ``consumed`` counts what own orders took; ``available``
= volume - consumed.  Inserts add fresh available volume; any reduction at the level clamps
``consumed`` to the new volume, i.e. removed volume is taken from the *unconsumed* part first
(conservative: liquidity we took only comes back when the level shrinks below it); a level that
empties forgets it.

Money: ``notional = price * qty`` in the data's price units (1/10000 dollars for finance.csv
and LOBSTER); ``fee = rate * notional`` (a negative maker rate is a rebate); a buy does
``position += qty, cash -= notional + fee``, a sell the opposite with ``cash += notional - fee``.

Cost: the book is two open-addressing hash tables in numpy arrays (orders by (book, id),
levels by price) updated by one numba kernel per batch: O(1) per event, about 50-65 ns a line
(16-20 M lines/s on one core for big/finance.csv and the synthetic stream) when the strategy
has no orders.  With open orders an event costs one comparison with the best own price of each
side, plus a pass over the own orders of one side when it can concern them (10 resting orders
all along: ~5 M lines/s).  Submitting or cancelling an order costs a Python round trip (a few
us) plus O(levels of the opposite side) for the walk.  The FIFO order of a price level is the
orders' arrival sequence numbers (:meth:`FillSimulator.queue` lists it), so no per-level list
has to be kept in the hot path.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR: it must come before the first numba import)

# isort: split
import heapq
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numba import njit

from ddms.io.events import EventBatch

# own orders live in the order-book adaptor's id table (same keys, 4 value columns)
from ddms.io.kernels.ordertable import EMPTY as _EMPTY
from ddms.io.kernels.ordertable import HMUL as _HMUL
from ddms.io.kernels.ordertable import INIT_BITS as _INIT_BITS
from ddms.io.kernels.ordertable import find as _find
from ddms.io.kernels.ordertable import grow as _grow
from ddms.io.kernels.ordertable import put as _put
from ddms.io.kernels.ordertable import remove as _remove

__all__ = ["BUY", "SELL", "Fill", "FillSimulator", "Order"]

BUY = "buy"
SELL = "sell"
Side = Literal["buy", "sell"]
_SIDES = {BUY: 0, SELL: 1}
_SIDE_NAMES = (BUY, SELL)
_TRADE_MODES = {"none": 0, "reductions": 1, "all": 2}


# st (float64 state vector)
(_CLOCK, _SEQ, _POS, _CASH, _FEES, _NOWN, _NBUY, _MAXBUY, _MINSELL, _NFILLS, _MAKER, _TAKER,
 _TURNOVER, _MAXPOS, _MODE, _NST) = range(16)
# own rows: own[k, :] (buys first: price desc, seq asc; then sells: price asc, seq asc)
_O_ID, _O_SIDE, _O_PX, _O_REM, _O_AHEAD, _O_SEQ, _O_FILLED, _NO = range(8)
# fill rows
_F_T, _F_OID, _F_SIDE, _F_PX, _F_QTY, _F_FEE, _F_LIQ, _NF = range(8)
# market order rows: ovals[slot, :]
_V_SIDE, _V_PX, _V_VOL, _V_SEQ = range(4)
# level rows: lvals[side, slot, :]
_L_VOL, _L_CNT, _L_CONS = range(3)
# kernel status
_DONE, _DUE, _GROW, _NAN = 0, 1, 2, 3


# ------------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Fill:
    """One execution of an own order.  ``fee`` is in cash units (``rate * price * qty``);
    ``liquidity`` is ``"maker"`` (a resting order was hit) or ``"taker"`` (it took the book)."""

    time: float
    order_id: int
    side: str
    price: float
    qty: float
    fee: float
    liquidity: str


@dataclass(frozen=True, slots=True)
class Order:
    """Snapshot of an own order.  ``status``: ``pending`` (not active yet), ``open`` (resting),
    ``filled``, ``cancelled`` (limit order cancelled with ``qty - filled`` left) or ``expired``
    (a market order whose ``unfilled`` rest found no liquidity).  ``active_at`` is nan while
    pending; ``queue_ahead`` is the FIFO volume ahead of an open limit order (else 0)."""

    id: int
    side: str
    kind: str
    price: float
    qty: float
    filled: float
    status: str
    submitted: float
    active_at: float
    queue_ahead: float

    @property
    def unfilled(self) -> float:
        """Quantity not filled (what a finished market order could not get)."""
        return self.qty - self.filled


class _OrderState:
    """Mutable bookkeeping behind :class:`Order` (the kernel's ``own`` row holds the live
    filled/ahead values of open orders)."""

    __slots__ = ("id", "side", "kind", "price", "qty", "filled", "status", "submitted", "active_at",
                 "ahead", "seq")

    def __init__(self, oid: int, side: int, kind: str, price: float, qty: float, submitted: float) -> None:
        self.id, self.side, self.kind, self.price, self.qty = oid, side, kind, price, qty
        self.filled = 0.0
        self.status = "pending"
        self.submitted = submitted
        self.active_at = math.nan
        self.ahead = 0.0
        self.seq = -1.0


# ------------------------------------------------------------------------------------------
# numba: hash tables
# ------------------------------------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def _lhome(px, shift):  # pragma: no cover - compiled
    """Home slot of a price: its value in 1/1024 units, Fibonacci-hashed (prices beyond 2**52
    all share one home; linear probing still finds them)."""
    if abs(px) < 4.0e15:
        u = np.uint64(np.int64(px * 1024.0))
    else:
        u = np.uint64(12345)
    return np.int64((u * _HMUL) >> np.uint64(shift))


@njit(cache=True, _nrt=False)
def _lfind(lkeys, s, shift, px):  # pragma: no cover - compiled
    mask = lkeys.shape[1] - 1
    i = _lhome(px, shift)
    while True:
        k = lkeys[s, i]
        if k == px:
            return i
        if k != k:
            return -1
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def _lslot(lkeys, lvals, lmeta, s, px):  # pragma: no cover - compiled
    """Slot of level ``px`` on side ``s``, created empty if absent."""
    shift = lmeta[2]
    mask = lkeys.shape[1] - 1
    i = _lhome(px, shift)
    while True:
        k = lkeys[s, i]
        if k == px:
            return i
        if k != k:
            lkeys[s, i] = px
            lvals[s, i, _L_VOL] = 0.0
            lvals[s, i, _L_CNT] = 0.0
            lvals[s, i, _L_CONS] = 0.0
            lmeta[s] += 1
            return i
        i = (i + 1) & mask


@njit(cache=True, _nrt=False)
def _lremove(lkeys, lvals, lmeta, s, slot):  # pragma: no cover - compiled
    shift = lmeta[2]
    mask = lkeys.shape[1] - 1
    i = slot
    j = slot
    while True:
        j = (j + 1) & mask
        kj = lkeys[s, j]
        if kj != kj:
            break
        h = _lhome(kj, shift)
        if i <= j:
            stays = i < h <= j
        else:
            stays = h > i or h <= j
        if not stays:
            lkeys[s, i] = kj
            for c in range(3):
                lvals[s, i, c] = lvals[s, j, c]
            i = j
    lkeys[s, i] = np.nan
    lmeta[s] -= 1


@njit(cache=True)
def _lgrow(lkeys, lvals, lmeta):  # pragma: no cover - compiled
    """Double both level tables; returns the new arrays."""
    cap = lkeys.shape[1] * 2
    nk = np.full((2, cap), np.nan)
    nv = np.zeros((2, cap, 3), np.float64)
    counts = lmeta[0], lmeta[1]
    lmeta[2] -= 1
    lmeta[0] = 0
    lmeta[1] = 0
    for s in range(2):
        for i in range(lkeys.shape[1]):
            px = lkeys[s, i]
            if px == px:
                j = _lslot(nk, nv, lmeta, s, px)
                for c in range(3):
                    nv[s, j, c] = lvals[s, i, c]
    assert lmeta[0] == counts[0] and lmeta[1] == counts[1]
    return nk, nv


# ------------------------------------------------------------------------------------------
# numba: fills and the event kernel
# ------------------------------------------------------------------------------------------

@njit(cache=True, _nrt=False)
def _record(st, fills, t, oid, side, px, q, liq):  # pragma: no cover - compiled
    """Append one fill and book it: position, cash, fees, turnover, max |position|."""
    nf = np.int64(st[_NFILLS])
    rate = st[_TAKER] if liq == 1 else st[_MAKER]
    notional = px * q
    fee = rate * notional
    fills[nf, _F_T] = t
    fills[nf, _F_OID] = oid
    fills[nf, _F_SIDE] = side
    fills[nf, _F_PX] = px
    fills[nf, _F_QTY] = q
    fills[nf, _F_FEE] = fee
    fills[nf, _F_LIQ] = liq
    st[_NFILLS] = nf + 1
    if side == 0:
        st[_POS] = st[_POS] + q
        st[_CASH] = st[_CASH] - notional - fee
    else:
        st[_POS] = st[_POS] - q
        st[_CASH] = st[_CASH] + notional - fee
    st[_FEES] = st[_FEES] + fee
    st[_TURNOVER] = st[_TURNOVER] + abs(notional)
    if abs(st[_POS]) > st[_MAXPOS]:
        st[_MAXPOS] = abs(st[_POS])


@njit(cache=True, _nrt=False)
def _on_reduce(st, own, fills, s, x, oseq, red, traded):  # pragma: no cover - compiled
    """A resting order of side ``s`` at price ``x`` (sequence ``oseq``) lost ``red`` units, of
    which ``traded`` were executions: rule M1 for the own orders resting on side ``s``, then the
    queue advance of those behind it at ``x``."""
    if s == 0:
        lo, hi = 0, np.int64(st[_NBUY])
    else:
        lo, hi = np.int64(st[_NBUY]), np.int64(st[_NOWN])
    xl = traded
    for k in range(lo, hi):
        p = own[k, _O_PX]
        if p == x:
            rem = own[k, _O_REM]
            a = own[k, _O_AHEAD]
            if rem > 0.0 and xl > a:
                f = min(rem, xl - a)
                _record(st, fills, st[_CLOCK], own[k, _O_ID], s, p, f, 0)
                own[k, _O_REM] = rem - f
                own[k, _O_FILLED] += f
                xl -= f
            if own[k, _O_SEQ] > oseq and red > 0.0:
                own[k, _O_AHEAD] = max(0.0, a - red)
        elif (p > x) if s == 0 else (p < x):
            rem = own[k, _O_REM]
            if rem > 0.0 and xl > 0.0:
                f = min(rem, xl)
                _record(st, fills, st[_CLOCK], own[k, _O_ID], s, p, f, 0)
                own[k, _O_REM] = rem - f
                own[k, _O_FILLED] += f
                xl -= f
        else:
            break


@njit(cache=True, _nrt=False)
def _on_add(st, own, fills, lvals, s, li, x):  # pragma: no cover - compiled
    """Volume was added to side ``s`` at price ``x`` (level slot ``li``): rule M2 for the own
    orders of the other side that it crosses, served from the level's available volume."""
    avail = lvals[s, li, _L_VOL] - lvals[s, li, _L_CONS]
    if s == 1:
        lo, hi = 0, np.int64(st[_NBUY])
    else:
        lo, hi = np.int64(st[_NBUY]), np.int64(st[_NOWN])
    for k in range(lo, hi):
        if avail <= 0.0:
            break
        p = own[k, _O_PX]
        if (p < x) if s == 1 else (p > x):
            break
        rem = own[k, _O_REM]
        if rem > 0.0:
            f = min(rem, avail)
            _record(st, fills, st[_CLOCK], own[k, _O_ID], 1 - s, p, f, 0)
            own[k, _O_REM] = rem - f
            own[k, _O_FILLED] += f
            avail -= f
            lvals[s, li, _L_CONS] += f


@njit(cache=True, _nrt=False)
def _crosses(st, s, x):  # pragma: no cover - compiled
    """Can a change on side ``s`` at price ``x`` concern the own orders resting on side ``s``
    (M1, queue) -- ``own``= True -- or cross those of the other side (M2)?"""
    if s == 0:
        return st[_MAXBUY] >= x, st[_MINSELL] <= x
    return st[_MINSELL] <= x, st[_MAXBUY] >= x


@njit(cache=True, _nrt=False)
def _delete(okeys, ovals, ometa, lkeys, lvals, lmeta, st, own, fills, slot, traded):  # pragma: no cover
    """Remove the resting order in ``slot`` (``traded`` of its volume were executions)."""
    s = np.int64(ovals[slot, _V_SIDE])
    px = ovals[slot, _V_PX]
    vol = ovals[slot, _V_VOL]
    seq = ovals[slot, _V_SEQ]
    _remove(okeys, ovals, ometa[1], slot)
    ometa[0] -= 1
    li = _lfind(lkeys, s, lmeta[2], px)
    cnt = lvals[s, li, _L_CNT] - 1.0
    if cnt <= 0.0:
        _lremove(lkeys, lvals, lmeta, s, li)
    else:
        lvals[s, li, _L_CNT] = cnt
        v = lvals[s, li, _L_VOL] - vol
        lvals[s, li, _L_VOL] = v
        if lvals[s, li, _L_CONS] > v:
            lvals[s, li, _L_CONS] = v
    if st[_NOWN] > 0:
        mine, _ = _crosses(st, s, px)
        if mine:
            _on_reduce(st, own, fills, s, px, seq, vol, min(traded, vol))


@njit(cache=True, _nrt=False)
def _run(rel, sign, cols, line, tr, has_tr, start, stop, t_stop, okeys, ovals, ometa, lkeys, lvals,
         lmeta, st, own, fills):  # pragma: no cover - compiled
    """Apply events ``start..stop-1``.  Returns ``(pos, status, line_time)``: ``_DONE``;
    ``_DUE`` when the line starting at ``pos`` has time ``line_time >= t_stop`` (own actions
    must act first); ``_GROW`` when a table or the fill buffer needs room before event ``pos``;
    ``_NAN`` when the insert at ``pos`` has a nan price or volume (nothing of it applied).
    Never allocates."""
    mode = np.int64(st[_MODE])
    i = start
    while i < stop:
        ln = line[i]
        if t_stop < np.inf and (i == 0 or line[i - 1] != ln):
            lt = st[_CLOCK]
            j = i
            while j < stop and line[j] == ln:
                if cols[j, 0] > lt:
                    lt = cols[j, 0]
                j += 1
            if lt >= t_stop:
                return i, _DUE, lt
        if (2 * (ometa[0] + 2) > okeys.shape[0] or 2 * (max(lmeta[0], lmeta[1]) + 2) > lkeys.shape[1]
                or np.int64(st[_NFILLS]) + 2 * np.int64(st[_NOWN]) + 1 > fills.shape[0]):
            return i, _GROW, 0.0
        s = np.int64(rel[i])
        if s != 0 and s != 1:
            i += 1
            continue
        t = cols[i, 0]
        if t > st[_CLOCK]:
            st[_CLOCK] = t
        oid = np.int64(cols[i, 1])
        key = 2 * oid + s                      # ids are per book, as in the engine's relations
        if sign[i] < 0:
            slot = _find(okeys, ometa[1], key)
            if slot < 0:                       # not resting: nothing to delete
                i += 1
                continue
            px = ovals[slot, _V_PX]
            vol = ovals[slot, _V_VOL]
            j = i + 1
            if (j < stop and line[j] == ln and sign[j] > 0 and np.int64(rel[j]) == s
                    and np.int64(cols[j, 1]) == oid and cols[j, 4] == px):
                # in-place change: keeps the FIFO sequence number
                if cols[j, 0] > st[_CLOCK]:
                    st[_CLOCK] = cols[j, 0]
                nv = cols[j, 3]
                dv = nv - vol
                ovals[slot, _V_VOL] = nv
                li = _lfind(lkeys, s, lmeta[2], px)
                v = lvals[s, li, _L_VOL] + dv
                lvals[s, li, _L_VOL] = v
                if lvals[s, li, _L_CONS] > v:
                    lvals[s, li, _L_CONS] = v
                if st[_NOWN] > 0:
                    mine, other = _crosses(st, s, px)
                    if dv < 0.0 and mine:
                        if has_tr:
                            traded = min(max(tr[i], 0.0), -dv)
                        elif mode >= 1:
                            traded = -dv
                        else:
                            traded = 0.0
                        _on_reduce(st, own, fills, s, px, ovals[slot, _V_SEQ], -dv, traded)
                    elif dv > 0.0 and other:
                        _on_add(st, own, fills, lvals, s, li, px)
                i += 2
                continue
            if has_tr:
                traded = max(tr[i], 0.0)
            elif mode == 2:
                traded = vol
            else:
                traded = 0.0
            _delete(okeys, ovals, ometa, lkeys, lvals, lmeta, st, own, fills, slot, traded)
            i += 1
            continue
        # insert
        slot = _find(okeys, ometa[1], key)
        if slot >= 0:                          # a resting id inserted again: replaces the row
            _delete(okeys, ovals, ometa, lkeys, lvals, lmeta, st, own, fills, slot, 0.0)
        px = cols[i, 4]
        vol = cols[i, 3]
        if px != px or vol != vol:
            return i, _NAN, 0.0
        seq = st[_SEQ]
        st[_SEQ] = seq + 1.0
        _put(okeys, ovals, ometa[1], key, s, px, vol, seq)
        ometa[0] += 1
        li = _lslot(lkeys, lvals, lmeta, s, px)
        lvals[s, li, _L_VOL] += vol
        lvals[s, li, _L_CNT] += 1.0
        if st[_NOWN] > 0:
            _, other = _crosses(st, s, px)
            if other:
                _on_add(st, own, fills, lvals, s, li, px)
        i += 1
    return i, _DONE, 0.0


@njit(cache=True, _nrt=False)
def _take(lkeys, lvals, st, fills, t, oid, side, limit, qty):  # pragma: no cover - compiled
    """Own order ``oid`` of ``side`` (0 buy) takes up to ``qty`` from the other side at prices
    no worse than ``limit`` (+-inf for a market order), best price first, at the levels' prices;
    returns the quantity taken.  No allocation: each level taken is found by one scan of the
    level table (past the previous one), O(table) per level; an order rarely walks many."""
    s = 1 - side
    left = qty
    prev = -np.inf if side == 0 else np.inf
    while left > 0.0:
        best = -1
        bpx = 0.0
        for i in range(lkeys.shape[1]):
            px = lkeys[s, i]
            if px != px or lvals[s, i, _L_VOL] - lvals[s, i, _L_CONS] <= 0.0:
                continue
            if side == 0:
                if px > prev and px <= limit and (best < 0 or px < bpx):
                    best, bpx = i, px
            elif px < prev and px >= limit and (best < 0 or px > bpx):
                best, bpx = i, px
        if best < 0:
            break
        f = min(left, lvals[s, best, _L_VOL] - lvals[s, best, _L_CONS])
        lvals[s, best, _L_CONS] += f
        _record(st, fills, t, oid, side, bpx, f, 1)
        left -= f
        prev = bpx
    return qty - left


# ------------------------------------------------------------------------------------------
# Python side
# ------------------------------------------------------------------------------------------

def _side(side: str | int) -> int:
    """0 for ``"buy"`` / +1, 1 for ``"sell"`` / -1."""
    if isinstance(side, str) and side in _SIDES:
        return _SIDES[side]
    if not isinstance(side, bool) and side in (1, -1):
        return 0 if side == 1 else 1
    raise ValueError(f"side must be 'buy'/'sell' (or +1/-1), got {side!r}")


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0.0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


class FillSimulator:
    """Own orders against a replayed book; see the module docstring for the rules.

    ``latency`` is in the events' time units; ``maker_fee``/``taker_fee`` are rates applied to
    notional; ``trades`` says which deletes count as executions when the events do not say
    (``"reductions"``, ``"all"``, ``"none"``); ``capacity`` is the initial number of resting
    orders the tables hold before they first double.
    """

    def __init__(self, *, latency: float = 0.0, maker_fee: float = 0.0, taker_fee: float = 0.0,
                 trades: Literal["reductions", "all", "none"] = "reductions", capacity: int = 1024) -> None:
        latency = float(latency)
        if not math.isfinite(latency) or latency < 0.0:
            raise ValueError(f"latency must be a finite number >= 0, got {latency!r}")
        for name, rate in (("maker_fee", maker_fee), ("taker_fee", taker_fee)):
            if not math.isfinite(float(rate)):
                raise ValueError(f"{name} must be a finite rate, got {rate!r}")
        if trades not in _TRADE_MODES:
            raise ValueError(f"trades must be one of {sorted(_TRADE_MODES)}, got {trades!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be an integer >= 1, got {capacity!r}")
        self.latency = latency
        self.maker_fee = float(maker_fee)
        self.taker_fee = float(taker_fee)
        self.trades = trades
        bits = max(_INIT_BITS, int(4 * capacity - 1).bit_length())
        self._okeys = np.full(1 << bits, _EMPTY, np.int64)
        self._ovals = np.zeros((1 << bits, 4), np.float64)
        self._ometa = np.array([0, 64 - bits], np.int64)
        self._lkeys = np.full((2, 1 << _INIT_BITS), np.nan)
        self._lvals = np.zeros((2, 1 << _INIT_BITS, 3), np.float64)
        self._lmeta = np.array([0, 0, 64 - _INIT_BITS], np.int64)
        st = np.zeros(_NST, np.float64)
        st[_CLOCK] = -np.inf
        st[_MAXBUY] = -np.inf
        st[_MINSELL] = np.inf
        st[_MAKER] = self.maker_fee
        st[_TAKER] = self.taker_fee
        st[_MODE] = _TRADE_MODES[trades]
        self._st = st
        self._own = np.zeros((8, _NO), np.float64)
        self._fills = np.zeros((256, _NF), np.float64)
        self._orders: dict[int, _OrderState] = {}
        self._open: list[_OrderState] = []       # resting orders, in the kernel's row order
        self._pending: list[tuple[float, int, str, int]] = []   # heap of (t_act, n, kind, id)
        self._next_id = 1
        self._n_actions = 0
        self._fill_cache: list[Fill] = []
        self._batch: EventBatch | None = None
        self._batch_pos = 0
        self._no_traded = np.zeros(0, np.float64)

    # -- state --------------------------------------------------------------------------------
    @property
    def clock(self) -> float:
        """Largest event time applied so far (-inf before the first event)."""
        return float(self._st[_CLOCK])

    @property
    def position(self) -> float:
        return float(self._st[_POS])

    @property
    def cash(self) -> float:
        """Cash after every fill and fee (starts at 0)."""
        return float(self._st[_CASH])

    @property
    def fees(self) -> float:
        return float(self._st[_FEES])

    @property
    def turnover(self) -> float:
        """Sum of |price * qty| over all fills."""
        return float(self._st[_TURNOVER])

    @property
    def max_position(self) -> float:
        """Largest |position| reached."""
        return float(self._st[_MAXPOS])

    def equity(self, mark: float) -> float:
        """Cash plus the position valued at ``mark``."""
        return self.cash + self.position * float(mark)

    @property
    def open_orders(self) -> tuple[Order, ...]:
        """Orders not finished: pending (submitted, not active yet) and open (resting), by id.
        O(k log k) in the unfinished orders, however many were ever placed."""
        live = {o.id for o in self._open if o.status == "open"}
        live.update(oid for _, _, _, oid in self._pending if self._orders[oid].status == "pending")
        return tuple(self.order(i) for i in sorted(live))

    @property
    def n_fills(self) -> int:
        return int(self._st[_NFILLS])

    @property
    def fills(self) -> list[Fill]:
        """Every fill so far, in time order (a new list, O(fills); records are built once and
        cached).  A strategy polling for new fills should use :meth:`fills_since`."""
        return self.fills_since(0)

    def fills_since(self, start: int) -> list[Fill]:
        """The fills ``start, start + 1, ...`` (``start`` = a previous :attr:`n_fills`)."""
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        n = int(self._st[_NFILLS])
        cache = self._fill_cache
        if len(cache) < n:
            rows = self._fills[len(cache):n].tolist()
            cache.extend(Fill(r[_F_T], int(r[_F_OID]), _SIDE_NAMES[int(r[_F_SIDE])], r[_F_PX], r[_F_QTY],
                              r[_F_FEE], "taker" if r[_F_LIQ] else "maker") for r in rows)
        return cache[start:n]

    def fill_columns(self) -> dict[str, np.ndarray]:
        """The fills as columns (copies): ``time, order_id, side (+1 buy / -1 sell), price, qty,
        fee, taker (bool)``: the input of :mod:`replay.metrics`, without per-fill objects."""
        f = self._fills[:int(self._st[_NFILLS])]
        return {"time": f[:, _F_T].copy(), "order_id": f[:, _F_OID].astype(np.int64),
                "side": np.where(f[:, _F_SIDE] == 0, 1.0, -1.0), "price": f[:, _F_PX].copy(),
                "qty": f[:, _F_QTY].copy(), "fee": f[:, _F_FEE].copy(), "taker": f[:, _F_LIQ] == 1}

    def order(self, order_id: int) -> Order:
        """Snapshot of one own order (KeyError if never submitted)."""
        o = self._orders.get(order_id)
        if o is None:
            raise KeyError(f"unknown order id {order_id!r}")
        filled, ahead = o.filled, 0.0
        if o.status == "open":
            k = self._open.index(o)
            filled, ahead = float(self._own[k, _O_FILLED]), float(self._own[k, _O_AHEAD])
        return Order(o.id, _SIDE_NAMES[o.side], o.kind, o.price, o.qty, filled, o.status, o.submitted,
                     o.active_at, ahead)

    def level_volume(self, side: str, price: float) -> float:
        """Resting volume of the replayed book at ``price`` on the bids (``"buy"``) or asks."""
        return self._level_volume(_side(side), float(price))

    def levels(self, side: str) -> np.ndarray:
        """The replayed book's side as rows ``(price, volume, orders, consumed)``, best price
        first.  O(L log L)."""
        s = _side(side)
        used = ~np.isnan(self._lkeys[s])
        rows = np.column_stack([self._lkeys[s, used], self._lvals[s, used]])
        order = np.argsort(-rows[:, 0] if s == 0 else rows[:, 0], kind="stable")
        return rows[order]

    def best(self, side: str) -> float:
        """Best bid (``"buy"``) or ask (``"sell"``) price of the replayed book, nan if empty.  O(L)."""
        s = _side(side)
        keys = self._lkeys[s]
        used = ~np.isnan(keys)
        if not used.any():
            return math.nan
        return float(keys[used].max() if s == 0 else keys[used].min())

    def queue(self, side: str, price: float) -> list[tuple[int, float]]:
        """The replayed orders resting at ``price`` as ``(id, volume)`` in FIFO order.  O(orders)."""
        s = _side(side)
        used = self._okeys != _EMPTY
        v = self._ovals[used]
        sel = (v[:, _V_SIDE] == s) & (v[:, _V_PX] == float(price))
        ids = (self._okeys[used][sel] - s) // 2      # table keys are 2 * id + book
        order = np.argsort(v[sel, _V_SEQ], kind="stable")
        return [(int(ids[i]), float(v[sel, _V_VOL][i])) for i in order]

    # -- events -------------------------------------------------------------------------------
    def on_events(self, batch: EventBatch, *, until_line: int | None = None,
                  traded: np.ndarray | None = None) -> None:
        """Apply ``batch`` (bids/asks events) up to and including input line ``until_line``
        (default: all of it).  Calling again with the *same* batch object resumes where the last
        call stopped, so a driver can advance the simulator to the line an engine callback fired
        on.  ``traded`` (or the batch's own ``traded`` attribute) gives per event the volume its
        delete traded (see the module docstring).  O(events) in one kernel call, plus a Python
        round trip per due own action, per table doubling and per completed own order."""
        if batch is self._batch:
            start = self._batch_pos
        else:
            start = 0
        n = len(batch)
        stop = n if until_line is None else int(np.searchsorted(batch.line, until_line, side="right"))
        self._batch = batch
        if stop <= start:
            return
        if traded is None:
            traded = getattr(batch, "traded", None)
        if traded is None:
            tr, has_tr = self._no_traded, False
        else:
            tr = np.ascontiguousarray(traded, dtype=np.float64)
            if tr.shape != (n,):
                raise ValueError(f"traded must have one value per event ({n}), got shape {tr.shape}")
            has_tr = True
        cols = batch.cols
        if cols.dtype != np.float64 or not cols.flags.c_contiguous:
            cols = np.ascontiguousarray(cols, dtype=np.float64)
        pos = start
        while True:
            t_stop = self._pending[0][0] if self._pending else np.inf
            nf = self._st[_NFILLS]
            pos, status, line_time = _run(batch.rel, batch.sign, cols, batch.line, tr, has_tr, pos, stop,
                                          t_stop, self._okeys, self._ovals, self._ometa, self._lkeys,
                                          self._lvals, self._lmeta, self._st, self._own, self._fills)
            self._batch_pos = pos
            if self._st[_NFILLS] != nf:
                self._sync_open()
            if status == _DONE:
                return
            if status == _GROW:
                self._grow()
            elif status == _DUE:
                self._act_due(line_time)
            else:
                raise ValueError(f"event {pos} (input line {int(batch.line[pos])}): an insert with a nan "
                                 f"price or volume: {batch.cols[pos].tolist()}")

    # -- durable state (checkpoints) -----------------------------------------------------------
    _ARRAYS = ("_okeys", "_ovals", "_ometa", "_lkeys", "_lvals", "_lmeta", "_st", "_own", "_fills")
    _KINDS = ("market", "limit")
    _STATUS = ("pending", "open", "filled", "cancelled", "expired")

    def save_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """Everything :meth:`load_state` needs to continue exactly here, as JSON values and numpy
        arrays (no pickle): the kernel's tables (book, levels, own orders, fills, counters) as
        they are, every own order's bookkeeping, the resting orders' priority order and the
        pending actions.  Between batches (or at a line an engine callback caught up to).
        O(tables + orders ever placed)."""
        orders = list(self._orders.values())
        arrays = {name[1:]: getattr(self, name).copy() for name in self._ARRAYS}
        arrays["orders.num"] = np.array([[o.id, o.side, self._KINDS.index(o.kind), o.price, o.qty, o.filled,
                                          self._STATUS.index(o.status), o.submitted, o.active_at, o.ahead, o.seq]
                                         for o in orders], np.float64).reshape(-1, 11)
        arrays["open"] = np.array([o.id for o in self._open], np.int64)
        arrays["pending.t"] = np.array([p[0] for p in self._pending], np.float64)
        arrays["pending.n"] = np.array([[p[1], p[3]] for p in self._pending], np.int64).reshape(-1, 2)
        meta = {"latency": self.latency, "maker_fee": self.maker_fee, "taker_fee": self.taker_fee,
                "trades": self.trades, "next_id": self._next_id, "n_actions": self._n_actions,
                "pending_kinds": [p[2] for p in self._pending]}
        return meta, arrays

    def load_state(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of a simulator with the same latency, fees and
        trade rule (ValueError otherwise).  O(state)."""
        mine = (self.latency, self.maker_fee, self.taker_fee, self.trades)
        theirs = (meta["latency"], meta["maker_fee"], meta["taker_fee"], meta["trades"])
        if mine != theirs:
            raise ValueError(f"a checkpoint of a simulator with latency, fees and trades {theirs}, this one {mine}")
        for name in self._ARRAYS:
            setattr(self, name, np.array(arrays[name[1:]], copy=True))
        self._orders = {}
        for row in np.asarray(arrays["orders.num"]).tolist():
            o = _OrderState(int(row[0]), int(row[1]), self._KINDS[int(row[2])], row[3], row[4], row[7])
            o.filled, o.status, o.active_at, o.ahead, o.seq = row[5], self._STATUS[int(row[6])], row[8], row[9], row[10]
            self._orders[o.id] = o
        self._open = [self._orders[int(i)] for i in np.asarray(arrays["open"]).tolist()]
        self._pending = [(t, int(n), kind, int(oid)) for t, (n, oid), kind in
                         zip(np.asarray(arrays["pending.t"]).tolist(), np.asarray(arrays["pending.n"]).tolist(),
                             meta["pending_kinds"], strict=True)]
        heapq.heapify(self._pending)
        self._next_id, self._n_actions = int(meta["next_id"]), int(meta["n_actions"])
        self._fill_cache, self._batch, self._batch_pos = [], None, 0

    def _grow(self) -> None:
        if 2 * (self._ometa[0] + 2) > self._okeys.shape[0]:
            self._okeys, self._ovals = _grow(self._okeys, self._ovals, self._ometa, 1)
        if 2 * (max(self._lmeta[0], self._lmeta[1]) + 2) > self._lkeys.shape[1]:
            self._lkeys, self._lvals = _lgrow(self._lkeys, self._lvals, self._lmeta)
        self._reserve_fills(2 * int(self._st[_NOWN]) + 1)

    def _reserve_fills(self, extra: int) -> None:
        need = int(self._st[_NFILLS]) + extra
        if need > self._fills.shape[0]:
            new = np.zeros((max(need, 2 * self._fills.shape[0]), _NF), np.float64)
            new[:self._fills.shape[0]] = self._fills
            self._fills = new

    # -- own orders -----------------------------------------------------------------------------
    def submit_market(self, side: Side | int, qty: float, now: float | None = None) -> int:
        """Submit a market order; returns its id.  It walks the book when it becomes active
        (at once with zero latency); what it cannot get expires (``order(id).unfilled``)."""
        return self._submit(_side(side), "market", math.nan, _positive("qty", qty), now)

    def submit_limit(self, side: Side | int, price: float, qty: float, now: float | None = None) -> int:
        """Submit a limit order; returns its id.  When active it takes what crosses its price
        (taker), and the rest rests in the FIFO queue at ``price`` (maker)."""
        price = float(price)
        if not math.isfinite(price):
            raise ValueError(f"price must be a finite number, got {price!r}")
        return self._submit(_side(side), "limit", price, _positive("qty", qty), now)

    def cancel(self, order_id: int, now: float | None = None) -> bool:
        """Request a cancel, effective after the latency.  Returns False if the order is already
        finished (nothing to do); a cancel that arrives after the order finished does nothing."""
        o = self._orders.get(order_id)
        if o is None:
            raise KeyError(f"unknown order id {order_id!r}")
        if o.status not in ("pending", "open"):
            return False
        self._schedule("cancel", order_id, self._now(now))
        return True

    def _now(self, now: float | None) -> float:
        if now is None:
            return self.clock
        now = float(now)
        if math.isnan(now):
            raise ValueError("now must be a time, got nan")
        return now

    def _submit(self, side: int, kind: str, price: float, qty: float, now: float | None) -> int:
        t = self._now(now)
        oid = self._next_id
        self._next_id += 1
        self._orders[oid] = _OrderState(oid, side, kind, price, qty, t)
        self._schedule("order", oid, t)
        return oid

    def _schedule(self, kind: str, oid: int, now: float) -> None:
        t_act = now + self.latency
        if t_act <= self.clock:
            self._act(kind, oid, max(t_act, self.clock))
            return
        self._n_actions += 1
        heapq.heappush(self._pending, (t_act, self._n_actions, kind, oid))

    def _act_due(self, line_time: float) -> None:
        while self._pending and self._pending[0][0] <= line_time:
            t_act, _, kind, oid = heapq.heappop(self._pending)
            self._act(kind, oid, t_act)

    def _act(self, kind: str, oid: int, t: float) -> None:
        o = self._orders[oid]
        self._st[_CLOCK] = max(self._st[_CLOCK], t)   # time has reached the action
        if kind == "cancel":
            self._sync_open()
            if o.status == "pending":
                o.status = "cancelled"
                o.active_at = t
            elif o.status == "open":
                o.status = "cancelled"
                self._open.remove(o)
                self._rebuild()
            return
        if o.status != "pending":
            return                      # cancelled before it became active
        o.active_at = t
        self._reserve_fills(int(max(self._lmeta[0], self._lmeta[1])) + 1)
        limit = o.price if o.kind == "limit" else (math.inf if o.side == 0 else -math.inf)
        o.filled = float(_take(self._lkeys, self._lvals, self._st, self._fills, t, float(oid), o.side, limit,
                               o.qty))
        if o.filled >= o.qty:
            o.status = "filled"
        elif o.kind == "market":
            o.status = "expired"
        else:
            o.status = "open"
            o.ahead = self._level_volume(o.side, o.price)
            o.seq = float(self._st[_SEQ])
            self._st[_SEQ] += 1.0
            self._sync_open()
            self._open.append(o)
            self._rebuild()

    def _level_volume(self, s: int, px: float) -> float:
        hit = np.flatnonzero(self._lkeys[s] == px)
        return float(self._lvals[s, hit[0], _L_VOL]) if hit.shape[0] else 0.0

    def _sync_open(self) -> None:
        """Copy the kernel's filled/ahead values into the open orders; drop the filled ones."""
        done = False
        for k, o in enumerate(self._open):
            o.filled = float(self._own[k, _O_FILLED])
            o.ahead = float(self._own[k, _O_AHEAD])
            if self._own[k, _O_REM] <= 0.0:
                o.status = "filled"
                done = True
        if done:
            self._open = [o for o in self._open if o.status == "open"]
            self._rebuild()

    def _rebuild(self) -> None:
        """Lay the open orders out as kernel rows in priority order; O(k log k)."""
        buys = sorted((o for o in self._open if o.side == 0), key=lambda o: (-o.price, o.seq))
        sells = sorted((o for o in self._open if o.side == 1), key=lambda o: (o.price, o.seq))
        self._open = buys + sells
        n = len(self._open)
        if n > self._own.shape[0]:
            self._own = np.zeros((2 * n, _NO), np.float64)
        own = self._own
        for k, o in enumerate(self._open):
            own[k] = (o.id, o.side, o.price, o.qty - o.filled, o.ahead, o.seq, o.filled)
        st = self._st
        st[_NOWN] = n
        st[_NBUY] = len(buys)
        st[_MAXBUY] = buys[0].price if buys else -np.inf
        st[_MINSELL] = sells[0].price if sells else np.inf

    # -- invariants ---------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert every invariant (O(table size + fills)); for tests."""
        okeys, ovals, lkeys, lvals = self._okeys, self._ovals, self._lkeys, self._lvals
        used = okeys != _EMPTY
        assert int(used.sum()) == self._ometa[0], "order count"
        assert len(set(okeys[used].tolist())) == int(used.sum()), "duplicate order ids"
        for slot in np.flatnonzero(used):
            assert _find(okeys, self._ometa[1], okeys[slot]) == slot, "order not reachable by probing"
        v = ovals[used]
        assert (v[:, _V_SEQ] < self._st[_SEQ]).all(), "sequence numbers"
        for s in range(2):
            mine = v[v[:, _V_SIDE] == s]
            lev = ~np.isnan(lkeys[s])
            assert int(lev.sum()) == self._lmeta[s], "level count"
            prices = lkeys[s, lev]
            assert set(prices.tolist()) == set(mine[:, _V_PX].tolist()), "levels != order prices"
            for li in np.flatnonzero(lev):
                px = lkeys[s, li]
                assert _lfind(lkeys, s, self._lmeta[2], px) == li, "level not reachable by probing"
                at = mine[mine[:, _V_PX] == px]
                vol, cnt, cons = lvals[s, li]
                assert cnt == at.shape[0], f"level {px} count {cnt} != {at.shape[0]} orders"
                total = float(at[:, _V_VOL].sum())
                assert abs(vol - total) <= 1e-9 * max(1.0, abs(total)), f"level {px} volume {vol} != {total}"
                assert 0.0 <= cons <= vol + 1e-9 * max(1.0, abs(vol)), f"level {px} consumed {cons} of {vol}"
        # own orders
        st = self._st
        assert int(st[_NOWN]) == len(self._open)
        assert int(st[_NBUY]) == sum(1 for o in self._open if o.side == 0)
        for k, o in enumerate(self._open):
            row = self._own[k]
            assert o.status == "open" and row[_O_ID] == o.id and row[_O_SIDE] == o.side
            assert row[_O_REM] > 0.0 and row[_O_AHEAD] >= 0.0, f"order {o.id}: remaining/ahead"
            assert abs(row[_O_REM] + row[_O_FILLED] - o.qty) <= 1e-9 * o.qty, f"order {o.id}: qty"
            same = v[(v[:, _V_SIDE] == o.side) & (v[:, _V_PX] == o.price) & (v[:, _V_SEQ] < o.seq)]
            ahead_vol = float(same[:, _V_VOL].sum())
            assert row[_O_AHEAD] <= ahead_vol + 1e-9 * max(1.0, ahead_vol), \
                f"order {o.id}: ahead {row[_O_AHEAD]} > volume ahead {ahead_vol}"
            # M2 invariant: nothing available crosses a resting own order
            opp = 1 - o.side
            lev = ~np.isnan(lkeys[opp])
            cross = lkeys[opp, lev] <= o.price if o.side == 0 else lkeys[opp, lev] >= o.price
            avail = lvals[opp, lev][cross]
            assert (avail[:, _L_VOL] - avail[:, _L_CONS] <= 1e-9 * np.maximum(1.0, avail[:, _L_VOL])).all(), \
                f"order {o.id} rests at {o.price} against available crossing volume"
        keys = [(o.side, -o.price if o.side == 0 else o.price, o.seq) for o in self._open]
        assert keys == sorted(keys), "own rows out of priority order"
        seen = {o.id for o in self._open}
        # fills vs position / cash
        f = self._fills[:int(st[_NFILLS])]
        pos = cash = fees = turnover = maxpos = 0.0
        per_order: dict[int, float] = {}
        for r in f:
            q, px, fee = r[_F_QTY], r[_F_PX], r[_F_FEE]
            assert q > 0.0 and r[_F_LIQ] in (0.0, 1.0) and r[_F_SIDE] in (0.0, 1.0), "fill row"
            notional = px * q
            if r[_F_SIDE] == 0:
                pos = pos + q
                cash = cash - notional - fee
            else:
                pos = pos - q
                cash = cash + notional - fee
            fees = fees + fee
            turnover = turnover + abs(notional)
            maxpos = max(maxpos, abs(pos))
            oid = int(r[_F_OID])
            per_order[oid] = per_order.get(oid, 0.0) + q
            o = self._orders[oid]
            assert _SIDES[_SIDE_NAMES[o.side]] == r[_F_SIDE], "fill side != order side"
            if o.kind == "limit":
                assert (px <= o.price) if o.side == 0 else (px >= o.price), "fill beyond the limit price"
        assert pos == st[_POS] and cash == st[_CASH] and fees == st[_FEES], "position/cash/fees != fills"
        assert turnover == st[_TURNOVER] and maxpos == st[_MAXPOS]
        assert (np.diff(f[:, _F_T]) >= 0).all(), "fills out of time order"
        for oid, o in self._orders.items():
            filled = self.order(oid).filled
            assert abs(per_order.get(oid, 0.0) - filled) <= 1e-9 * o.qty, f"order {oid}: fills != filled"
            assert filled <= o.qty * (1 + 1e-12), f"order {oid} overfilled"
            if o.status == "filled":
                assert abs(filled - o.qty) <= 1e-9 * o.qty
        pend = {oid for _, _, kind, oid in self._pending if kind == "order"}
        for oid, o in self._orders.items():
            assert (o.status == "pending") == (oid in pend), f"order {oid}: pending state"
            assert (o.status == "open") == (oid in seen), f"order {oid}: open state"
