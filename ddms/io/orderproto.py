"""Our order-level JSON protocol: the live form of the finance.csv stream (sans-I/O).

Messages (one JSON object each; ``seq`` numbers are consecutive, starting at 1 for a stream that
starts from an empty book; the encoder uses the finance.csv line number):

``{"seq": n, "type": "add", "side": "bid"|"ask", "id": i, "volume": v, "price": p, "t": t}``
    finance.csv ``B`` (bid) / ``S`` (ask).  An add for an id that is still resting replaces it.
``{"seq": n, "type": "execute", "id": i, "volume": v[, "t": t]}``
    ``E``: partial execution of ``v`` units of order ``i``.
``{"seq": n, "type": "delete", "id": i[, "t": t]}``
    ``F`` / ``D``: remove order ``i``.
``{"seq": n, "type": "other", "action": "T"[, "id", "volume", "price", "t"]}``
    any other finance.csv action: no change to the book (kept so that ``seq`` stays the line).
``{"seq": n, "type": "snapshot", "orders": [{"side", "id", "volume", "price", "t"}, ...]}``
    the resting orders after message ``n`` (the next message is ``n + 1``): sent by a server when
    a client (re)joins; applying it replaces the whole book.

The semantics are exactly :mod:`ddms.io.orderbook`'s (``/shared/data/orderbook/README.md``):
relations ``bids`` (0) and ``asks`` (1) with schema ``(t, id, broker_id, volume, price)``,
``broker_id = id mod brokers``; add = insert (after a delete of the id's old row, if resting);
execute = delete the old row and, if ``old volume - v > 0``, insert it again with the rest (same
t, price, broker); delete = delete the row; an id that is not resting changes nothing.  Each
message is one atomic line: ``EventBatch.line`` numbers the applied updates (messages and
snapshots), which is the message's ``seq`` on a stream that starts at 1 and never resyncs, so
:class:`OrderFeed` on :func:`encode_orderbook`'s output produces the same events, line for line,
as :class:`~ddms.io.orderbook.OrderBookParser` on the file.

Sequencing: a message with ``seq == last + 1`` is applied; ``seq <= last`` is stale (a duplicate
or late message, already applied): counted, reported, dropped; ``seq > last + 1`` is a gap: the
book is discarded (its rows stay in the engine until a snapshot replaces them), later messages
are buffered and the decoder returns :class:`~ddms.io.actions.NeedSnapshot`.  A snapshot at ``n`` is
accepted when the buffered messages (those with ``seq > n``) continue at ``n + 1``; older
buffered messages are dropped.  A stream whose first message is not ``seq`` 1 or a snapshot also
waits for a snapshot.

Cost: ``json.loads`` plus a dict lookup per message (a few microseconds); events are kept in
per-column lists and turned into arrays once per :meth:`OrderFeed.take_events`.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from ddms.errors import InputError
from ddms.io.actions import NeedSnapshot
from ddms.io.events import EventBatch
from ddms.io.schema import ASKS, BIDS

__all__ = ["ASKS", "BIDS", "OrderEncoder", "OrderFeed", "encode_line", "encode_orderbook", "format_message"]

_SIDES = {"bid": BIDS, "ask": ASKS}
_SIDE_NAMES = ("bid", "ask")
_MAX_ID = 2**53
_NO_ACTIONS: tuple = ()

# field -> kind ("int", "num", "side", "action", "orders"); required and optional per type
_FIELDS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "add": ({"seq": "int", "type": "str", "side": "side", "id": "int", "volume": "num", "price": "num", "t": "num"},
            {}),
    "execute": ({"seq": "int", "type": "str", "id": "int", "volume": "num"}, {"t": "num", "price": "num"}),
    "delete": ({"seq": "int", "type": "str", "id": "int"}, {"t": "num", "volume": "num", "price": "num"}),
    "other": ({"seq": "int", "type": "str", "action": "action"},
              {"id": "int", "volume": "num", "price": "num", "t": "num"}),
    "snapshot": ({"seq": "int", "type": "str", "orders": "orders"}, {}),
}
_ORDER_FIELDS = {"side": "side", "id": "int", "volume": "num", "price": "num", "t": "num"}


def _check_value(kind: str, v: Any) -> str | None:
    """Why ``v`` is not a valid value of ``kind`` (None if it is)."""
    if kind == "int":
        if type(v) is not int:
            return "is not an integer"
        if abs(v) > _MAX_ID:
            return "is out of range (|x| > 2**53)"
    elif kind == "num":
        if type(v) not in (int, float):
            return "is not a number"
        if not math.isfinite(float(v)):
            return "is not finite"
    elif kind == "side":
        if v not in _SIDES:
            return "is not 'bid' or 'ask'"
    elif kind == "action":
        if not (isinstance(v, str) and len(v) == 1 and "A" <= v <= "Z" and v not in "BSEFD"):
            return "is not one uppercase letter other than B, S, E, F, D"
    elif kind == "str":
        if not isinstance(v, str):
            return "is not a string"
    elif kind == "orders" and not isinstance(v, list):
        return "is not a list"
    return None


def validate(obj: Any) -> str | None:
    """Why ``obj`` is not a valid protocol message, or None.  O(size of obj)."""
    if not isinstance(obj, Mapping):
        return f"message is not a JSON object but {type(obj).__name__}"
    kind = obj.get("type")
    if kind not in _FIELDS:
        return f"unknown message type {kind!r}" if "type" in obj else "missing field 'type'"
    req, opt = _FIELDS[kind]
    for name in obj:
        if name not in req and name not in opt:
            return f"unknown field {name!r} in a {kind} message"
    for name in req:
        if name not in obj:
            return f"missing field {name!r} in a {kind} message"
    for name, v in obj.items():
        why = _check_value((req.get(name) or opt[name]), v)
        if why:
            return f"field {name!r} {why}: {v!r}"
    if obj["seq"] < 0:
        return f"field 'seq' is negative: {obj['seq']}"
    if kind == "snapshot":
        seen: set[int] = set()
        for j, o in enumerate(obj["orders"]):
            if not isinstance(o, Mapping) or set(o) != set(_ORDER_FIELDS):
                return f"orders[{j}] is not an object with exactly the fields {sorted(_ORDER_FIELDS)}"
            for name, k in _ORDER_FIELDS.items():
                why = _check_value(k, o[name])
                if why:
                    return f"orders[{j}].{name} {why}: {o[name]!r}"
            if o["id"] in seen:
                return f"orders[{j}] repeats order id {o['id']}"
            seen.add(o["id"])
    return None


class OrderFeed:
    """Decoder of the order protocol: messages in, bids/asks events and actions out.

    ``brokers`` gives ``broker_id = id mod brokers`` (the finance suite uses 10).  Counters:
    ``messages`` fed, ``applied`` messages applied, ``gaps``, ``resyncs`` (gaps plus
    :meth:`resync` calls), ``stale`` (duplicates / late messages dropped), ``malformed``,
    ``snapshots`` applied, ``snapshots_rejected``, ``buffer_dropped``.  Problems are recorded in
    :attr:`reports` as :class:`InputError` (line = message number)."""

    def __init__(self, *, brokers: int = 10, source: str = "<orderproto>", max_buffer: int = 100_000,
                 max_reports: int = 1000) -> None:
        if isinstance(brokers, bool) or not isinstance(brokers, int) or brokers < 1:
            raise ValueError(f"brokers must be an integer >= 1, got {brokers!r}")
        if max_buffer < 1 or max_reports < 1:
            raise ValueError("max_buffer and max_reports must be >= 1")
        self.brokers = brokers
        self.source = source
        self.max_buffer = max_buffer
        self.orders: dict[int, tuple[int, float, float, float]] = {}   # id -> (book, t, volume, price)
        self._stale_orders: dict[int, tuple[int, float, float, float]] | None = None
        self.last_seq = 0
        self._synced = True          # a fresh stream starts from an empty book at seq 1
        self._started = False
        self._need = False
        self._buffer: deque[tuple[dict, int]] = deque()
        self.reports: deque[InputError] = deque(maxlen=max_reports)
        self._rows: list[tuple[int, int, float, float, float, float, float, int]] = []
        self.updates = 0            # applied messages and snapshots: the events' line numbers
        self._taken = 0
        self._dirty: set[int] = set()   # ids changed since the last _check
        self.messages = self.applied = self.gaps = self.resyncs = self.stale = self.malformed = 0
        self.snapshots = self.snapshots_rejected = self.buffer_dropped = 0

    # -- state ------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return self._synced

    @property
    def needs_snapshot(self) -> bool:
        return self._need

    def counters(self) -> dict[str, int]:
        names = ("messages", "applied", "gaps", "resyncs", "stale", "malformed", "snapshots", "snapshots_rejected",
                 "buffer_dropped")
        return {n: getattr(self, n) for n in names}

    def snapshot_message(self) -> dict[str, Any]:
        """The resting orders as a ``snapshot`` message at ``last_seq`` (what a server sends a
        client that (re)joins).  O(orders).  Raises RuntimeError while not synchronized."""
        if not self._synced:
            raise RuntimeError(f"{self.source}: no synchronized book to snapshot")
        return {"seq": self.last_seq, "type": "snapshot",
                "orders": [{"side": _SIDE_NAMES[b], "id": i, "volume": v, "price": p, "t": t}
                           for i, (b, t, v, p) in self.orders.items()]}

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything :meth:`load_state` needs to continue exactly here, as JSON values and numpy
        arrays (no pickle): the resting orders (and, while waiting for a snapshot, the orders
        the engine still holds), the last applied ``seq``, the sync state, the buffered
        messages, the row numbering, queued rows and the counters.  :attr:`reports` are not
        saved.  O(orders)."""
        arrays: dict[str, np.ndarray] = {}
        for name, held in (("orders", self.orders), ("stale", self._stale_orders or {})):
            rows = np.array(list(held.values()), np.float64).reshape(-1, 4)
            arrays |= {f"{name}.ids": np.fromiter(held.keys(), np.int64, len(held)),
                       f"{name}.book": rows[:, 0].astype(np.int8), f"{name}.t": rows[:, 1].copy(),
                       f"{name}.volume": rows[:, 2].copy(), f"{name}.price": rows[:, 3].copy()}
        arrays["rows"] = np.array(self._rows, np.float64).reshape(-1, 8)
        meta = {"brokers": self.brokers, "last_seq": self.last_seq, "synced": self._synced, "started": self._started,
                "need": self._need, "stale": self._stale_orders is not None, "updates": self.updates,
                "taken": self._taken, "counters": self.counters(), "buffer": [[m, n] for m, n in self._buffer]}
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of a decoder of the same ``brokers`` (ValueError
        otherwise).  Counters missing from ``meta`` start at 0.  O(orders)."""
        if meta["brokers"] != self.brokers:
            raise ValueError(f"a decoder of {meta['brokers']} brokers cannot continue as one of {self.brokers}")

        def orders(name: str) -> dict[int, tuple[int, float, float, float]]:
            a = {k: np.asarray(arrays[f"{name}.{k}"]).tolist() for k in ("ids", "book", "t", "volume", "price")}
            return {int(i): (int(b), float(t), float(v), float(p))
                    for i, b, t, v, p in zip(a["ids"], a["book"], a["t"], a["volume"], a["price"], strict=True)}
        self.orders = orders("orders")
        self._stale_orders = orders("stale") if meta["stale"] else None
        self.last_seq, self._synced, self._started = int(meta["last_seq"]), bool(meta["synced"]), bool(meta["started"])
        self._need = bool(meta["need"])
        self.updates, self._taken = int(meta["updates"]), int(meta["taken"])
        for k in self.counters():
            setattr(self, k, int(meta["counters"].get(k, 0)))
        self._buffer = deque((m, int(n)) for m, n in meta["buffer"])
        self._rows = [(int(r[0]), int(r[1]), *r[2:7], int(r[7])) for r in np.asarray(arrays["rows"]).tolist()]
        self._dirty = set(self.orders)

    def restarted(self) -> None:
        """The feed continues on a new connection (a process restored from a checkpoint): the
        sequence carries over (messages up to :attr:`last_seq` will be dropped as stale, a gap
        takes the snapshot path), but nothing buffered from the old connection stays, and a
        decoder that was waiting for a snapshot asks for one again."""
        self._buffer.clear()
        if not self._synced:
            self._need = True

    # -- input ------------------------------------------------------------------------------
    def feed_message(self, msg: bytes | str | Mapping, recv_ts_ns: int = 0) -> tuple[NeedSnapshot, ...]:
        """Process one message (raw JSON or parsed).  Returns actions (usually none); bad input
        is counted and reported in :attr:`reports`, never raised."""
        self.messages += 1
        n = self.messages
        obj = self._decode(msg, n)
        if obj is None:
            return _NO_ACTIONS
        if obj["type"] == "snapshot":
            return self._on_snapshot(obj, n)
        seq = obj["seq"]
        if not self._started:
            self._started = True
            if seq != 1:
                self._synced = False
                self._need = True
                self._buffer.append((obj, n))
                return (NeedSnapshot(f"stream starts at seq {seq}: need a snapshot", n),)
        if not self._synced:
            self._buffer.append((obj, n))
            if len(self._buffer) > self.max_buffer:
                self._buffer.popleft()
                self.buffer_dropped += 1
            return _NO_ACTIONS
        return self._sequence(obj, n)

    def apply_snapshot(self, snapshot: bytes | str | Mapping) -> tuple[NeedSnapshot, ...]:
        """Apply a ``snapshot`` message (not counted as a stream message), then the buffered
        messages that follow it."""
        obj = self._decode(snapshot, 0, count=False)
        if obj is not None and obj["type"] != "snapshot":
            self.snapshots_rejected += 1
            self.reports.append(InputError(f"not a snapshot but a {obj['type']} message", self.source, 0,
                                           _text(snapshot)))
            obj = None
        if obj is None:
            return self._ask("snapshot rejected", 0)
        return self._on_snapshot(obj, 0)

    def resync(self, reason: str) -> tuple[NeedSnapshot, ...]:
        """Discard the book and ask for a snapshot (counted in ``resyncs``)."""
        self.reports.append(InputError(f"resync: {reason}", self.source, self.messages))
        return self._discard(reason, self.messages)

    # -- internals --------------------------------------------------------------------------
    def _decode(self, msg: Any, n: int, count: bool = True) -> dict | None:
        if isinstance(msg, Mapping):
            obj = msg
            text = None
        else:
            try:
                obj = json.loads(msg)
            except (ValueError, UnicodeDecodeError) as e:
                self._bad(f"malformed JSON: {e}", n, _text(msg), count)
                return None
            text = msg
        why = validate(obj)
        if why:
            self._bad(why, n, _text(text) if text is not None else _obj_text(obj), count)
            return None
        return obj  # type: ignore[return-value]

    def _bad(self, reason: str, n: int, text: str, count: bool) -> None:
        if count:
            self.malformed += 1
        else:
            self.snapshots_rejected += 1
        self.reports.append(InputError(reason, self.source, n, text))

    def _ask(self, reason: str, n: int) -> tuple[NeedSnapshot, ...]:
        if self._synced:
            return _NO_ACTIONS
        self._need = True
        return (NeedSnapshot(reason, n),)

    def _discard(self, reason: str, n: int) -> tuple[NeedSnapshot, ...]:
        self.resyncs += 1
        if self._synced:
            self._stale_orders = self.orders
            self.orders = {}
            self._synced = False
        self._need = True
        return (NeedSnapshot(reason, n),)

    def _sequence(self, obj: dict, n: int) -> tuple[NeedSnapshot, ...]:
        seq = obj["seq"]
        last = self.last_seq
        if seq == last + 1:
            self._apply(obj)
            return _NO_ACTIONS
        if seq <= last:
            self.stale += 1
            self.reports.append(InputError(f"stale message (duplicate or out of order): seq {seq} <= last "
                                           f"applied seq {last}", self.source, n, _obj_text(obj)))
            return _NO_ACTIONS
        self.gaps += 1
        reason = f"gap: seq {seq} after seq {last} (expected {last + 1})"
        self.reports.append(InputError(reason, self.source, n, _obj_text(obj)))
        actions = self._discard(reason, n)
        self._buffer.append((obj, n))
        return actions

    def _on_snapshot(self, obj: dict, n: int) -> tuple[NeedSnapshot, ...]:
        seq = obj["seq"]
        if self._synced and self._started:
            self.snapshots_rejected += 1
            self.reports.append(InputError(f"unsolicited snapshot at seq {seq} while synchronized (last seq "
                                           f"{self.last_seq}): ignored", self.source, n, f"snapshot seq={seq}"))
            return _NO_ACTIONS
        buf = self._buffer
        while buf and buf[0][0]["seq"] <= seq:
            buf.popleft()
        if buf and buf[0][0]["seq"] != seq + 1:
            self.snapshots_rejected += 1
            self.reports.append(InputError(f"snapshot at seq {seq} is older than the buffered messages (first seq "
                                           f"{buf[0][0]['seq']}): need a newer snapshot", self.source, n,
                                           f"snapshot seq={seq}"))
            self._synced = False
            self._started = True
            self._need = True
            return (NeedSnapshot(f"snapshot at seq {seq} too old", n),)
        self.snapshots += 1
        self._started = True
        rows = self._rows
        old = self._stale_orders if self._stale_orders is not None else self.orders
        self._stale_orders = None
        brokers = self.brokers
        self.updates += 1
        line = self.updates
        for oid, (book, t, v, p) in old.items():
            rows.append((book, -1, t, float(oid), float(oid % brokers), v, p, line))
        self.orders = {}
        for o in obj["orders"]:
            oid, book = o["id"], _SIDES[o["side"]]
            row = (book, float(o["t"]), float(o["volume"]), float(o["price"]))
            self.orders[oid] = row
            rows.append((book, 1, row[1], float(oid), float(oid % brokers), row[2], row[3], line))
        self._dirty.update(self.orders)
        self.last_seq = seq
        self._synced = True
        self._need = False
        pending = list(buf)
        buf.clear()
        actions: list[NeedSnapshot] = []
        for i, (m, k) in enumerate(pending):
            if not self._synced:
                buf.extend(pending[i:])
                break
            actions.extend(self._sequence(m, k))
        return tuple(actions)

    def _apply(self, obj: dict) -> None:
        """One message = one line: the orderbook adaptor's semantics."""
        self.last_seq = obj["seq"]
        self.applied += 1
        self.updates += 1
        seq = self.updates
        kind = obj["type"]
        if kind == "other":
            return
        oid = obj["id"]
        self._dirty.add(oid)
        rows = self._rows
        brk = float(oid % self.brokers)
        old = self.orders.get(oid)
        if old is not None:
            book, ot, ov, op = old
            rows.append((book, -1, ot, float(oid), brk, ov, op, seq))
            rest = ov - float(obj["volume"]) if kind == "execute" else 0.0
            if kind == "execute" and rest > 0:
                self.orders[oid] = (book, ot, rest, op)
                rows.append((book, 1, ot, float(oid), brk, rest, op, seq))
            else:
                del self.orders[oid]
        if kind == "add":
            book = _SIDES[obj["side"]]
            row = (book, float(obj["t"]), float(obj["volume"]), float(obj["price"]))
            self.orders[oid] = row
            rows.append((book, 1, row[1], float(oid), brk, row[2], row[3], seq))

    # -- output -----------------------------------------------------------------------------
    def take_events(self) -> EventBatch:
        """Events queued since the last call; ``line`` = update number (see the module
        docstring), ``first_line..last_line`` = the updates since the last call.  O(rows)."""
        rows, self._rows = self._rows, []
        first, self._taken = self._taken + 1, self.updates
        arr = np.array(rows, np.float64).reshape(-1, 8)
        return EventBatch(arr[:, 0].astype(np.int8), arr[:, 1].astype(np.int8), np.ascontiguousarray(arr[:, 2:7]),
                          arr[:, 7].astype(np.int64), first, self.updates)

    def discard_events(self) -> None:
        """Drop the queued engine rows (a consumer without an engine): :meth:`take_events`
        without building arrays.  O(1)."""
        self._rows = []
        self._taken = self.updates

    # -- invariants ---------------------------------------------------------------------------
    def _check(self) -> None:
        """Assert invariants: the orders changed since the last check are well-formed rows (the
        others were checked before: O(changes), so tests can call it after every message); a
        waiting decoder holds no orders and asks for a snapshot, a synchronized one has no
        buffer or stale orders; queued rows are in line order within the updates not yet taken."""
        for oid in self._dirty:
            row = self.orders.get(oid)
            if row is None:
                continue
            book, t, v, p = row
            assert type(oid) is int and abs(oid) <= _MAX_ID
            assert book in (BIDS, ASKS)
            assert all(type(x) is float and math.isfinite(x) for x in (t, v, p))
        self._dirty.clear()
        if not self._synced:
            assert not self.orders and self._need
        else:
            assert self._stale_orders is None and not self._buffer
        lines = [r[7] for r in self._rows]
        assert lines == sorted(lines) and (not lines or (lines[0] > self._taken and lines[-1] <= self.updates))


def _text(msg: Any) -> str:
    if isinstance(msg, (bytes, bytearray, memoryview)):
        return bytes(msg).decode("utf-8", "replace")
    return msg if isinstance(msg, str) else _obj_text(msg)


def _obj_text(obj: Any) -> str:
    try:
        return json.dumps(obj, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(obj)


# ------------------------------------------------------------------------------------------
# encoder: finance.csv lines -> messages
# ------------------------------------------------------------------------------------------

_NUM = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?\Z")
_INT = re.compile(r"[+-]?[0-9]+\Z")


def _json_num(v: float) -> int | float:
    """The JSON number for ``v``: an int when integral and exact, else the float (its repr is
    the shortest text that reads back as the same double)."""
    if v.is_integer() and abs(v) < _MAX_ID and not (v == 0 and math.copysign(1.0, v) < 0):
        return int(v)
    return v


def encode_line(line: bytes | str, seq: int, source: str = "<finance.csv>") -> dict[str, Any]:
    """One finance.csv line ``t,order_id,action,volume,price`` -> its protocol message with
    ``seq``.  Bad lines raise :class:`InputError` with the orderbook adaptor's rules (field count,
    numbers, ids up to 2**53, one uppercase action letter, blank lines).  O(len(line))."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.rstrip("\n")
    if line.endswith("\r"):
        line = line[:-1]
    if not line.strip(" \t\r"):
        raise InputError("empty line", source, seq, line)
    f = line.split(",")
    if len(f) != 5:
        raise InputError(f"wrong field count: expected 5 (t,order_id,action,volume,price), got {len(f)}",
                         source, seq, line)
    t_s, id_s, act, vol_s, px_s = f
    vals = []
    for text, name in ((t_s, "t"), (vol_s, "volume"), (px_s, "price")):
        if not _NUM.match(text):
            raise InputError(f"{name} is not a number", source, seq, line)
        v = float(text)
        if not math.isfinite(v):
            raise InputError(f"{name} out of range", source, seq, line)
        vals.append(v)
    if not _INT.match(id_s):
        raise InputError("order id is not an integer", source, seq, line)
    oid = int(id_s)
    if abs(oid) > _MAX_ID:
        raise InputError("order id out of range (|id| > 2**53)", source, seq, line)
    if not (len(act) == 1 and "A" <= act <= "Z"):
        raise InputError(f"unknown action {act!r} (expected one uppercase letter A-Z)", source, seq, line)
    t, vol, px = (_json_num(v) for v in vals)
    if act in "BS":
        return {"seq": seq, "type": "add", "side": "bid" if act == "B" else "ask", "id": oid, "volume": vol,
                "price": px, "t": t}
    if act == "E":
        return {"seq": seq, "type": "execute", "id": oid, "volume": vol, "t": t}
    if act in "FD":
        return {"seq": seq, "type": "delete", "id": oid, "t": t}
    return {"seq": seq, "type": "other", "action": act, "id": oid, "volume": vol, "price": px, "t": t}


def format_message(msg: Mapping[str, Any]) -> str:
    """Compact JSON text of a message (what a server sends)."""
    return json.dumps(msg, separators=(",", ":"))


class OrderEncoder:
    """finance.csv lines -> protocol messages, ``seq`` = line number.  Keeps the resting orders
    (the same :class:`OrderFeed` semantics) so a replay server can answer a snapshot request at
    any position with :meth:`snapshot_message`."""

    def __init__(self, source: str = "<finance.csv>", *, brokers: int = 10) -> None:
        self.source = source
        self.line = 0
        self._book = OrderFeed(brokers=brokers, source=source)

    def encode(self, line: bytes | str) -> dict[str, Any]:
        """The message of the next line (raises :class:`InputError` for a bad line).  O(1)."""
        self.line += 1
        msg = encode_line(line, self.line, self.source)
        self._book._apply(msg)      # valid by construction: skip validation and sequencing
        self._book._rows.clear()
        return msg

    def snapshot_message(self) -> dict[str, Any]:
        """The resting orders after the last encoded line, as a ``snapshot`` message."""
        return self._book.snapshot_message()


def encode_orderbook(lines: Iterable[bytes | str] | str | os.PathLike, *, source: str | None = None
                     ) -> Iterator[dict[str, Any]]:
    """Encode a whole finance.csv (path or lines) as protocol messages, one per line.  A final
    newline does not start a line (as in the adaptor)."""
    if isinstance(lines, (str, os.PathLike)):
        path = os.fspath(lines)
        with open(path, "rb") as f:
            yield from encode_orderbook(f, source=source or path)
        return
    enc = OrderEncoder(source or "<finance.csv>")
    for line in lines:
        yield enc.encode(line)
