"""The strategy API: declared parameters, the views a strategy needs, and the context it trades
through.

Why this shape: a strategy is written once against a :class:`Context` and runs unchanged in a
backtest (:class:`SimContext`: the engine and a :class:`~replay.fills.FillSimulator` advanced in
lockstep, no look-ahead) and live (:class:`LiveContext`: orders are recorded and printed; a
broker adapter may report fills back).  The strategy never sees which one it has.

Life cycle::

    strategy = strategies.get("sobi", {"threshold": 0.05})   # validated parameters
    engine = strategy.make_engine()                          # its program (numba disk cache)
    ctx = SimContext(engine, FillSimulator())                # or LiveContext(engine)
    strategy.attach(engine, ctx)                             # checks views, sets up, subscribes
    for batch in source: ctx.apply(batch, relmap)            # live: engine.apply(batch, relmap)

Callbacks registered with :meth:`Context.on` have the engine's signature
``fn(view, key, old, new, position)`` (position = 1-based input line).  With ``above``/``below``
the condition is tested in compiled code, so a strategy waiting for a rare condition costs
nothing between firings; :meth:`~ddms.runtime.engine.Subscription.retarget` moves the bounds.

Cost: a callback costs one return from compiled code (~1 us) plus, in a backtest, advancing the
fill simulator to that line (O(lines since the last callback) in compiled code).

Checkpoints (issue 24).  An engine checkpoint (``engine.checkpoint(path)``, ``ddms monitor
--strategy --checkpoint``) holds an attached strategy's state when the strategy says what it
is -- the protocol:

* ``state(self) -> dict``: the strategy's own fields as JSON values (numbers, strings, lists,
  dicts; no objects, no pickle), at a line boundary;
* ``restore(self, state: dict) -> None``: set them back; it runs after :meth:`Strategy.start`
  subscribed again on the restored engine and after the context got its state back.

Everything else is saved for it (:meth:`Context.save_state`): the order log, the subscriptions'
``above``/``below`` bounds (restored on the subscriptions ``start`` makes again, in the same
order), and the context's own state -- :class:`LiveContext`'s open orders, fills, position and
cash; :class:`SimContext`'s fill simulator whole (:meth:`replay.fills.FillSimulator.save_state`).
A strategy without the two methods is refused at the checkpoint, naming what to add.
Restoring: ``Engine(program, restore=path)`` (or ``engine.restore(path)``), then
``strategy.attach(engine, ctx)`` with a new context of the same kind: attach sees the saved
state (:attr:`Engine.restored <ddms.runtime.engine.Engine.restored>`), skips :meth:`Strategy.setup`
(its program-level rows are in the restored maps), refuses another strategy or other parameters,
and continues exactly where the checkpointed run was.  Cost: O(orders ever placed + the
simulator's tables) per checkpoint.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar, TextIO

import numpy as np

from ddms.errors import DdmsError
from ddms.io.events import EventBatch

CHECKPOINT_NAME = "strategy"
"""The name of an attached strategy's state in an engine checkpoint (:attr:`Engine.savers`)."""

PROGRAMS = Path(str(files("strategies") / "programs"))
"""The M3 programs strategies run on (compiled once, then loaded from numba's disk cache):
package data (``pyproject.toml``), found through :mod:`importlib.resources`, so an installed
wheel has them too."""

StrategyCallback = Callable[[str, tuple, float, float, int], Any]


class StrategyError(DdmsError):
    """Unknown strategy, unknown or out-of-range parameter, or a program lacking a view."""


# ------------------------------------------------------------------------------------------
# parameters
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Param:
    """One declared parameter: its default, its valid range and what it means.  ``lo``/``hi``
    are inclusive unless ``lo_open``/``hi_open``; ``integer`` requires a whole number."""

    name: str
    default: float
    doc: str
    lo: float = -math.inf
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False

    def check(self, value: Any, where: str) -> float:
        """``value`` as a float if valid, else a StrategyError naming ``where`` and the range."""
        try:
            v = float(value)
        except (TypeError, ValueError):
            raise StrategyError(f"{where}: parameter {self.name}={value!r} is not a number") from None
        ok = math.isfinite(v) and (v > self.lo if self.lo_open else v >= self.lo) and \
            (v < self.hi if self.hi_open else v <= self.hi)
        if not ok:
            raise StrategyError(f"{where}: parameter {self.name}={value!r} is outside {self.range()}")
        if self.integer and v != int(v):
            raise StrategyError(f"{where}: parameter {self.name}={value!r} must be a whole number")
        return v

    def range(self) -> str:
        left = "(" if self.lo_open else "["
        right = ")" if self.hi_open else "]"
        return f"{left}{self.lo:g}, {self.hi:g}{right}"


RUN_PARAMS: tuple[Param, ...] = (
    Param("latency", 0.0, "order/cancel latency in the data's time units (fill simulator)", lo=0.0),
    Param("maker_fee", 0.0, "fee rate on resting (maker) fills; negative = rebate"),
    Param("taker_fee", 0.0, "fee rate on aggressive (taker) fills"),
    Param("sample_lines", 1000.0, "sample the equity every this many input lines", lo=1.0, integer=True),
)
"""Parameters of the backtest itself, accepted by every strategy (so a sweep can vary them)."""


# ------------------------------------------------------------------------------------------
# orders as the strategy sees them
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OrderRecord:
    """One action a strategy took: ``action`` is ``"market"``, ``"limit"`` or ``"cancel"``;
    ``line`` the input position it was taken at, ``time`` the data clock then; ``price`` is nan
    for market orders and cancels, ``qty`` 0 for cancels."""

    line: int
    time: float
    action: str
    order_id: int
    side: str
    price: float
    qty: float


@dataclass(frozen=True, slots=True)
class OpenOrder:
    """An own order not finished yet (pending or resting): what :attr:`Context.open_orders`
    lists, in the same shape live and in a backtest."""

    id: int
    side: str
    kind: str
    price: float
    qty: float
    filled: float


def _side(side: str) -> str:
    if side not in ("buy", "sell"):
        raise StrategyError(f"side must be 'buy' or 'sell', got {side!r}")
    return side


def _qty(qty: float) -> float:
    q = float(qty)
    if not (math.isfinite(q) and q > 0):
        raise StrategyError(f"order quantity must be a finite number > 0, got {qty!r}")
    return q


# ------------------------------------------------------------------------------------------
# contexts
# ------------------------------------------------------------------------------------------

class Context:
    """What a strategy may do and read.  Subclasses implement the order primitives; this class
    owns callback registration and the order log (``orders``: every action, in order)."""

    def __init__(self, engine) -> None:
        self.engine = engine
        self.orders: list[OrderRecord] = []
        self.origin = 0          # engine position before the first data line (set by Strategy.attach)
        self.line = 0            # data line of the current callback: engine position - origin
        self.symbol: str | None = None   # the instrument traded (a FILE#SYMBOL partition's), None if unnamed
        self.subscriptions: list = []    # what on() registered, in order (their bounds are checkpointed)

    # -- views and callbacks
    def on(self, view: str, fn: StrategyCallback, *, above: float | None = None, below: float | None = None):
        """Register ``fn`` on ``view`` (see :meth:`ddms.runtime.engine.Engine.on`); before it
        runs, the context catches up with the input line that fired it.  Returns the engine's
        Subscription (``retarget`` / ``cancel``)."""
        def wrapped(v: str, key: tuple, old: float, new: float, position: int) -> None:
            self._catch_up(position)
            self.line = position - self.origin
            fn(v, key, old, new, position)
        sub = self.engine.on(view, wrapped, above=above, below=below)
        self.subscriptions.append(sub)
        return sub

    def value(self, view: str) -> float:
        """A scalar view's current value (nan = NULL)."""
        v = self.engine.view(view).value
        return math.nan if v is None else float(v)

    def _catch_up(self, position: int) -> None:
        """Bring the trading state to input ``position`` (a backtest advances its simulator)."""

    # -- orders
    def submit_market(self, side: str, qty: float) -> int:
        oid = self._market(_side(side), _qty(qty))
        self.orders.append(OrderRecord(self.line, self.now, "market", oid, side, math.nan, float(qty)))
        return oid

    def submit_limit(self, side: str, price: float, qty: float) -> int:
        p = float(price)
        if not math.isfinite(p):
            raise StrategyError(f"limit price must be finite, got {price!r}")
        oid = self._limit(_side(side), p, _qty(qty))
        self.orders.append(OrderRecord(self.line, self.now, "limit", oid, side, p, float(qty)))
        return oid

    def cancel(self, order_id: int) -> bool:
        """Request a cancel; False if the order already finished."""
        side = self._open_side(order_id)
        if side is None or not self._cancel(order_id):
            return False
        self.orders.append(OrderRecord(self.line, self.now, "cancel", order_id, side, math.nan, 0.0))
        return True

    def _open_side(self, order_id: int) -> str | None:
        """The side of an own order that is still open, else None."""
        return next((o.side for o in self.open_orders if o.id == order_id), None)

    def cancel_all(self, side: str | None = None) -> int:
        """Cancel every open order (of one side); returns how many cancels were sent."""
        return sum(self.cancel(o.id) for o in self.open_orders if side is None or o.side == side)

    # -- durable state (checkpoints)
    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The context's state as JSON values and numpy arrays (no pickle): the order log, the
        position of the first data line, the subscriptions' views and bounds, and what a
        subclass adds (:meth:`_save_own`).  O(orders ever placed)."""
        o = self.orders
        arrays = {"orders.line": np.array([r.line for r in o], np.int64),
                  "orders.time": np.array([r.time for r in o], np.float64),
                  "orders.order_id": np.array([r.order_id for r in o], np.int64),
                  "orders.price": np.array([r.price for r in o], np.float64),
                  "orders.qty": np.array([r.qty for r in o], np.float64)}
        meta = {"kind": type(self).__name__, "origin": self.origin, "line": self.line, "symbol": self.symbol,
                "actions": [r.action for r in o], "sides": [r.side for r in o],
                "subscriptions": [[s.view, s.lo, s.hi, s.live] for s in self.subscriptions]}
        own, own_arrays = self._save_own()
        meta["own"] = own
        arrays |= {f"own.{k}": a for k, a in own_arrays.items()}
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of a context of the same kind, after the strategy
        subscribed again (``start``): its subscriptions get the saved bounds, in order.  Raises
        :class:`StrategyError` when the kind or the subscriptions differ."""
        if meta["kind"] != type(self).__name__:
            raise StrategyError(f"a checkpoint of a strategy trading through a {meta['kind']}, this one trades "
                                f"through a {type(self).__name__}")
        saved = meta["subscriptions"]
        if [s[0] for s in saved] != [s.view for s in self.subscriptions]:
            raise StrategyError(f"the strategy subscribed to {[s.view for s in self.subscriptions]} on start, the "
                                f"checkpointed one to {[s[0] for s in saved]}: not the same strategy code")
        for sub, (_, lo, hi, live) in zip(self.subscriptions, saved, strict=True):
            if not live:
                sub.cancel()
            elif lo > hi:                  # the empty band: every change fires
                sub.retarget()
            else:
                sub.retarget(above=hi, below=lo)
        a = {k: np.asarray(arrays[f"orders.{k}"]).tolist() for k in ("line", "time", "order_id", "price", "qty")}
        self.orders = [OrderRecord(int(ln), t, act, int(oid), side, px, q) for ln, t, act, oid, side, px, q in
                       zip(a["line"], a["time"], meta["actions"], a["order_id"], meta["sides"], a["price"], a["qty"],
                           strict=True)]
        self.origin, self.line, self.symbol = int(meta["origin"]), int(meta["line"]), meta["symbol"]
        self._load_own(meta["own"], {k[4:]: v for k, v in arrays.items() if k.startswith("own.")})

    def _save_own(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        raise StrategyError(f"a {type(self).__name__} cannot be checkpointed (no _save_own/_load_own)")

    def _load_own(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        raise StrategyError(f"a {type(self).__name__} cannot be restored (no _save_own/_load_own)")

    # -- state (subclasses)
    @property
    def now(self) -> float:
        raise NotImplementedError

    @property
    def position(self) -> float:
        raise NotImplementedError

    @property
    def cash(self) -> float:
        raise NotImplementedError

    @property
    def open_orders(self) -> tuple[OpenOrder, ...]:
        raise NotImplementedError

    @property
    def fills(self) -> list:
        raise NotImplementedError

    def _market(self, side: str, qty: float) -> int:
        raise NotImplementedError

    def _limit(self, side: str, price: float, qty: float) -> int:
        raise NotImplementedError

    def _cancel(self, order_id: int) -> bool:
        raise NotImplementedError


class SimContext(Context):
    """Engine and fill simulator in lockstep: :meth:`apply` feeds a batch to the engine; when a
    strategy callback fires at input line L the simulator is first advanced through line L (it
    has seen exactly what the views have: no look-ahead), and orders then take effect after the
    simulator's latency.  After the batch the simulator catches up with its end.  Used by the
    backtest and usable live for paper trading.  Cost per batch: the engine's, plus the
    simulator's O(events) kernel, plus a Python round trip per callback."""

    def __init__(self, engine, sim) -> None:
        super().__init__(engine)
        self.sim = sim
        self._batch: EventBatch | None = None
        self._live: list[int] = []      # ids placed here and not yet seen finished, increasing

    def apply(self, batch: EventBatch, relmap: np.ndarray, *, until_line: int | None = None) -> None:
        """Apply ``batch`` (rel 0 = bids, 1 = asks) to the engine and the simulator, up to and
        including its input line ``until_line`` if given; calling again with the same batch
        resumes (see :meth:`ddms.runtime.engine.Engine.apply`)."""
        self._batch = batch
        try:
            self.engine.apply(batch, relmap, until_line=until_line)
        finally:
            self.sim.on_events(batch, until_line=until_line)
            self.line = self.engine.position - self.origin

    def _catch_up(self, position: int) -> None:
        if self._batch is not None:
            self.sim.on_events(self._batch, until_line=self.engine.batch_line(position))

    def _save_own(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The fill simulator whole (:meth:`replay.fills.FillSimulator.save_state`) and the ids
        of the orders this context watches."""
        meta, arrays = self.sim.save_state()
        return {"sim": meta}, arrays | {"live": np.array(self._live, np.int64)}

    def _load_own(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        self.sim.load_state(meta["sim"], {k: a for k, a in arrays.items() if k != "live"})
        self._live = [int(x) for x in np.asarray(arrays["live"]).tolist()]
        self._batch = None

    @property
    def now(self) -> float:
        return self.sim.clock

    @property
    def position(self) -> float:
        return self.sim.position

    @property
    def cash(self) -> float:
        return self.sim.cash

    @property
    def open_orders(self) -> tuple[OpenOrder, ...]:
        """Own orders not finished, by id.  O(orders that were open at the last call): the ids
        this context placed are kept until the simulator reports them finished (the simulator's
        own ``open_orders`` walks every order ever placed)."""
        out = []
        for oid in self._live:
            o = self.sim.order(oid)
            if o.status in ("pending", "open"):
                out.append(OpenOrder(o.id, o.side, o.kind, o.price, o.qty, o.filled))
        self._live = [o.id for o in out]
        return tuple(out)

    @property
    def fills(self) -> list:
        return self.sim.fills

    def _market(self, side: str, qty: float) -> int:
        oid = self.sim.submit_market(side, qty)
        self._live.append(oid)
        return oid

    def _limit(self, side: str, price: float, qty: float) -> int:
        oid = self.sim.submit_limit(side, price, qty)
        self._live.append(oid)
        return oid

    def _cancel(self, order_id: int) -> bool:
        return self.sim.cancel(order_id)

    def _open_side(self, order_id: int) -> str | None:
        try:
            o = self.sim.order(order_id)
        except KeyError:
            return None
        return o.side if o.status in ("pending", "open") else None

    def _check(self) -> None:
        """The simulator's invariants, and the order log agrees with the simulator's orders."""
        self.sim._check()
        assert [o.id for o in self.open_orders] == [o.id for o in self.sim.open_orders], "open orders differ"
        placed = [r for r in self.orders if r.action != "cancel"]
        assert [r.order_id for r in placed] == sorted({r.order_id for r in placed}), "order ids not increasing"
        for r in placed:
            o = self.sim.order(r.order_id)
            assert (o.side, o.kind, o.qty) == (r.side, r.action, r.qty), f"order {r.order_id} differs from the log"


_STDERR = object()   # LiveContext's default output: whatever sys.stderr is when it prints


class LiveContext(Context):
    """Live trading without an exchange connection: every order and cancel is recorded in
    ``orders`` and written to ``out`` (one line each); nothing fills unless a broker adapter
    calls :meth:`report_fill`, which updates position and cash.  ``now`` is the wall clock unless
    ``clock`` is given; ``out`` defaults to stderr (stdout may carry a display or JSON lines),
    None is silent.
    Cost: O(1) per action (plus the print)."""

    def __init__(self, engine, out: TextIO | None | object = _STDERR, clock: Callable[[], float] | None = None) -> None:
        super().__init__(engine)
        self.out = out
        self._clock = clock
        self._open: dict[int, OpenOrder] = {}
        self._fills: list[tuple[int, str, float, float, float]] = []
        self._position = 0.0
        self._cash = 0.0
        self._next = 1

    @property
    def now(self) -> float:
        if self._clock is not None:
            return float(self._clock())
        import time
        return time.time()

    @property
    def position(self) -> float:
        return self._position

    @property
    def cash(self) -> float:
        return self._cash

    @property
    def open_orders(self) -> tuple[OpenOrder, ...]:
        return tuple(self._open[k] for k in sorted(self._open))

    @property
    def fills(self) -> list:
        """``(order_id, side, price, qty, fee)`` per reported fill."""
        return list(self._fills)

    def _say(self, text: str) -> None:
        out = sys.stderr if self.out is _STDERR else self.out
        if out is not None:
            print(f"[line {self.line}] {text}", file=out, flush=True)

    def _new(self, side: str, kind: str, price: float, qty: float) -> int:
        oid, self._next = self._next, self._next + 1
        self._open[oid] = OpenOrder(oid, side, kind, price, qty, 0.0)
        return oid

    def _market(self, side: str, qty: float) -> int:
        oid = self._new(side, "market", math.nan, qty)
        self._say(f"order {oid}: market {side} {qty:g}")
        return oid

    def _limit(self, side: str, price: float, qty: float) -> int:
        oid = self._new(side, "limit", price, qty)
        self._say(f"order {oid}: limit {side} {qty:g} @ {price:g}")
        return oid

    def _cancel(self, order_id: int) -> bool:
        if self._open.pop(order_id, None) is None:
            return False
        self._say(f"cancel {order_id}")
        return True

    def _save_own(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Open orders, fills, position, cash and the next order id."""
        op = list(self._open.values())
        arrays = {"open.id": np.array([o.id for o in op], np.int64),
                  "open.num": np.array([[o.price, o.qty, o.filled] for o in op], np.float64).reshape(-1, 3),
                  "fills.id": np.array([f[0] for f in self._fills], np.int64),
                  "fills.num": np.array([f[2:] for f in self._fills], np.float64).reshape(-1, 3),
                  "cash": np.array([self._position, self._cash], np.float64)}
        meta = {"open": [[o.side, o.kind] for o in op], "fills": [f[1] for f in self._fills], "next": self._next}
        return meta, arrays

    def _load_own(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        ids, num = np.asarray(arrays["open.id"]).tolist(), np.asarray(arrays["open.num"]).tolist()
        self._open = {int(i): OpenOrder(int(i), side, kind, p, q, f)
                      for i, (side, kind), (p, q, f) in zip(ids, meta["open"], num, strict=True)}
        ids, num = np.asarray(arrays["fills.id"]).tolist(), np.asarray(arrays["fills.num"]).tolist()
        self._fills = [(int(i), side, p, q, fee) for i, side, (p, q, fee) in zip(ids, meta["fills"], num, strict=True)]
        self._position, self._cash = (float(x) for x in np.asarray(arrays["cash"]).tolist())
        self._next = int(meta["next"])

    def report_fill(self, order_id: int, price: float, qty: float, fee: float = 0.0) -> None:
        """A fill of an own order reported by whatever executes orders live."""
        o = self._open.get(order_id)
        if o is None:
            raise StrategyError(f"fill for unknown or finished order {order_id}")
        q = _qty(qty)
        if o.filled + q > o.qty * (1 + 1e-12):
            raise StrategyError(f"order {order_id}: fill of {q:g} exceeds the {o.qty - o.filled:g} left")
        sign = 1.0 if o.side == "buy" else -1.0
        self._position += sign * q
        self._cash -= sign * price * q + fee
        self._fills.append((order_id, o.side, float(price), q, float(fee)))
        if o.filled + q >= o.qty * (1 - 1e-12):
            del self._open[order_id]
        else:
            self._open[order_id] = OpenOrder(o.id, o.side, o.kind, o.price, o.qty, o.filled + q)
        self._say(f"fill {order_id}: {o.side} {q:g} @ {price:g}")

    def _check(self) -> None:
        """Open orders are a subset of the placed ones; position and cash are the fills' sums."""
        placed = {r.order_id for r in self.orders if r.action != "cancel"}
        assert set(self._open) <= placed, "open order never placed"
        pos = sum((1 if s == "buy" else -1) * q for _, s, _, q, _ in self._fills)
        assert abs(pos - self._position) <= 1e-9 * max(1.0, abs(pos)), "position != fills"


# ------------------------------------------------------------------------------------------
# strategies
# ------------------------------------------------------------------------------------------

class Strategy:
    """Base class.  A subclass declares ``name``, ``params`` (its own; :data:`RUN_PARAMS` are
    added), ``program`` (an M3/SQL file) and ``views`` (what it reads), and implements
    :meth:`start`.  ``self.p`` holds every parameter, validated, defaults filled in."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    params: ClassVar[tuple[Param, ...]] = ()
    program: ClassVar[Path]
    views: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        self.p: dict[str, float] = resolve(type(self), params or {})

    @classmethod
    def all_params(cls) -> tuple[Param, ...]:
        return cls.params + RUN_PARAMS

    def make_engine(self):
        """A fresh Engine on this strategy's program (compiled once per machine, then cached;
        ~20 ms per further engine in the same process)."""
        from ddms.runtime.engine import Engine
        return Engine(self.program)

    def attach(self, engine, ctx: Context | None = None) -> Context:
        """Check that ``engine`` has the views, set the program up (:meth:`setup`), then let the
        strategy subscribe (:meth:`start`) through ``ctx`` (default: a :class:`LiveContext` that
        prints its orders on stderr, as ``ddms monitor --strategy`` uses it).  Returns the
        context."""
        if ctx is None:
            ctx = LiveContext(engine)
        missing = [v for v in self.views if v not in engine.views]
        if missing:
            raise StrategyError(f"strategy {self.name}: the program has no view {', '.join(missing)} "
                                f"(views: {', '.join(engine.views)})")
        saved = getattr(engine, "restored", {}).pop(CHECKPOINT_NAME, None)
        if saved is not None:           # the engine was restored from a checkpoint holding our state
            meta, arrays = saved
            if meta["name"] != self.name or meta["params"] != self.p:
                raise StrategyError(f"the checkpoint holds strategy {meta['name']} with {meta['params']}; "
                                    f"attaching {self.name} with {self.p}: attach the checkpointed strategy")
        else:
            self.setup(engine)
        ctx.origin = engine.position
        self.start(ctx)
        if saved is not None:
            ctx.load_state(meta["context"], {k[4:]: a for k, a in arrays.items() if k.startswith("ctx.")})
            self.restore(meta["state"])                     # type: ignore[attr-defined]
        if not isinstance(getattr(engine, "savers", None), dict):
            return ctx
        if self.checkpointable:
            engine.savers[CHECKPOINT_NAME] = lambda: self._checkpoint(ctx)
        else:                           # engine checkpoints would lose our state: they refuse, saying why
            engine.unsaved.append(f"strategy {self.name} is attached and defines no state() -> dict and "
                                  "restore(state) (its own fields as JSON values: see strategies.api), so its "
                                  "state cannot be saved; add them to checkpoint it")
        return ctx

    @property
    def checkpointable(self) -> bool:
        """Whether the strategy follows the checkpoint protocol (``state()`` and ``restore()``)."""
        return callable(getattr(self, "state", None)) and callable(getattr(self, "restore", None))

    def _checkpoint(self, ctx: Context) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """What an engine checkpoint holds of this strategy (:attr:`Engine.savers
        <ddms.runtime.engine.Engine.savers>`): name, parameters, its ``state()`` (checked to be
        JSON values) and the context's state."""
        import json
        state = self.state()                                # type: ignore[attr-defined]
        try:
            json.dumps(state, allow_nan=True)
        except (TypeError, ValueError) as e:
            raise StrategyError(f"strategy {self.name}: state() must return JSON values (numbers, strings, "
                                f"lists, dicts): {e}") from None
        if not isinstance(state, dict):
            raise StrategyError(f"strategy {self.name}: state() must return a dict, got {type(state).__name__}")
        cmeta, carrays = ctx.save_state()
        meta = {"name": self.name, "params": self.p, "state": state, "context": cmeta}
        return meta, {f"ctx.{k}": a for k, a in carrays.items()}

    @classmethod
    def validate(cls, p: dict[str, float]) -> None:
        """Checks across parameters (raise StrategyError); the default accepts everything."""

    def setup(self, engine) -> None:
        """Program-level set-up before any data (e.g. insert parameters the program reads)."""

    def start(self, ctx: Context) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v:g}' for k, v in self.p.items())})"


def resolve(cls: type[Strategy], given: Mapping[str, Any]) -> dict[str, float]:
    """Every parameter of ``cls`` (declared order, then the run parameters) from ``given`` or its
    default, validated; an unknown name is an error that lists the known ones."""
    declared = {p.name: p for p in cls.all_params()}
    unknown = [k for k in given if k not in declared]
    if unknown:
        raise StrategyError(f"strategy {cls.name}: unknown parameter {', '.join(map(repr, unknown))} "
                            f"(parameters: {', '.join(declared)})")
    out = {name: p.check(given.get(name, p.default), f"strategy {cls.name}") for name, p in declared.items()}
    cls.validate(out)
    return out
