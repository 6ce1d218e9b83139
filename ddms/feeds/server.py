"""Replay feed server core (sans-I/O): a recorded capture or a finance.csv as a live feed.

``ddms serve-feed`` serves what this module computes; the websocket and HTTP glue lives in
:mod:`ddms.feeds.transport` (the only module that imports websockets).  Nothing here opens a
socket or reads a clock: :class:`ReplayCore` turns the input into a *timeline* of actions
(:class:`Send` a frame, :class:`Close` the connections, :class:`Stall`) and answers requests
(:meth:`ReplayCore.route`, :meth:`ReplayCore.snapshot_response`) from the replay position.

Two sources:

* a Binance capture (``<recv_ts_ns> <json>`` lines, see ``../shared/data/binance/README.md``):
  stream messages are sent as recorded, in the combined-stream envelope on ``/stream?streams=a/b``
  and as the bare payload on ``/ws/a/b`` (Binance's two URL forms; only the requested streams).
  The REST depth snapshot line is not sent: ``GET /fapi/v1/depth`` (futures) or
  ``/api/v3/depth`` (spot) answers it while the replay is before that line, and afterwards the book
  at the replay position, rebuilt from the capture by a :class:`~ddms.io.venues.binance_book.BinanceBook`
  (lazily: only when a snapshot is asked for, O(depth messages since the last request)).  A
  capture without a snapshot line is refused unless ``empty_book`` is set, which starts the book
  empty just before the first depth event (the top of book is then wrong until every level has
  been updated once, and bookTicker checks will say so).
* a finance.csv: each line becomes one message of our order protocol
  (:mod:`ddms.io.orderproto`, ``seq`` = line) on ``/orders``; ``GET /orders/snapshot``
  answers a ``snapshot`` message of the resting orders at the replay position.

Why the futures snapshot says ``lastUpdateId = U`` of the *next* depth event: Binance's rule for
the first applied event is ``U <= lastUpdateId <= u``, so a snapshot stamped with the last sent
event's ``u`` can only be used by a client that still holds that event; a client that just
reconnected does not.  The book after event k is also the book just before event k + 1 (whose
changes are absolute level sizes), so stamping it ``U(k+1)`` is truthful for the client and lets
it synchronize on the next message.  Spot needs no such care (``U <= lastUpdateId + 1 <= u``).

Faults (``kind@n``, n counts depth messages of a capture, messages of a finance.csv, from 1):
``drop`` (not sent), ``dup`` (sent twice), ``reorder`` (sent after the next counted message), ``corrupt``
(sent with its JSON cut in half), ``close`` (every connection closed with code 1012 before it is
sent; it goes to the next connection), ``stall`` (``stall@n:seconds``: nothing sent for that long
before it, connections held open: a client's no-message watchdog must fire).

Timeline semantics: one replay for the whole server (like an exchange), started when the first
client connects; it pauses at the capture's snapshot line until a client has asked for a snapshot
(at most ``hold_seconds``; only when a client subscribes to a depth stream), as the recorder did
there; while no client is connected it waits (so
a client that reconnects after a ``close`` fault misses nothing but its resynchronization); at
``speed`` > 0 frames keep the capture's receive-time spacing divided by ``speed``; at ``speed`` 0
they go as fast as the slowest client reads (the glue awaits each send: backpressure, never a
silent drop).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from ddms.errors import InputError, ReplayError
from ddms.io.capture import iter_lines, split_line
from ddms.io.detect import detect_file
from ddms.io.orderproto import OrderFeed, encode_line, format_message
from ddms.io.venues.binance_book import (
    FUTURES,
    MAX_STREAMS,
    SPOT,
    BinanceBook,
    Decoder,
    DepthSnapshot,
    DepthUpdate,
    Response,
)

if TYPE_CHECKING:
    from ddms.feeds.venue_server import VenueReplay

__all__ = [
    "FAULT_KINDS", "Close", "Fault", "FaultRules", "Frame", "Hold", "HttpAnswer", "ReplayCore", "Send",
    "Stall",
    "WsRoute", "fault_timeline", "load_replay", "parse_fault",
]

FAULT_KINDS = ("drop", "dup", "reorder", "corrupt", "close", "stall", "checksum")
NORMAL_CLOSE = 1000          # end of the replay: a client with --once stops
FAULT_CLOSE = 1012           # "service restart": a client reconnects
ORDERS_PATH = "/orders"
ORDERS_SNAPSHOT_PATH = "/orders/snapshot"
DEPTH_PATHS = {FUTURES: "/fapi/v1/depth", SPOT: "/api/v3/depth"}

_ENVELOPE = re.compile(rb'\{\s*"stream"\s*:\s*"([^"\\]*)"\s*,\s*"data"\s*:\s*(.*)\}\s*\Z', re.S)


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected fault: ``kind`` (see :data:`FAULT_KINDS`) at the ``at``-th counted message
    (depth messages of a capture, messages of a finance.csv; 1-based); ``seconds`` for stall."""

    kind: str
    at: int
    seconds: float = 0.0
    symbol: str | None = None     # count that symbol's book messages only (multi-symbol captures)


def parse_fault(text: str) -> Fault:
    """``"drop@100"``, ``"stall@50:3"``, ``"drop@7#XBT/CHF"`` (the 7th book message of that
    symbol) -> :class:`Fault`; raises ReplayError saying what is wrong."""
    text, hsep, symbol = text.partition("#")
    if hsep and not symbol.strip():
        raise ReplayError(f"fault {text}#: the symbol after # is missing", "--fault")
    kind, sep, rest = text.partition("@")
    kind = kind.strip().lower()
    if not sep or kind not in FAULT_KINDS:
        raise ReplayError(f"fault {text!r}: expected KIND@N with KIND one of {', '.join(FAULT_KINDS)}", "--fault")
    at_s, _, sec_s = rest.partition(":")
    try:
        at = int(at_s)
        seconds = float(sec_s) if sec_s else (2.0 if kind == "stall" else 0.0)
    except ValueError:
        raise ReplayError(f"fault {text!r}: N must be an integer (and stall seconds a number)", "--fault") from None
    if at < 1 or seconds < 0:
        raise ReplayError(f"fault {text!r}: N must be >= 1 and seconds >= 0", "--fault")
    if sec_s and kind != "stall":
        raise ReplayError(f"fault {text!r}: only stall takes :SECONDS", "--fault")
    return Fault(kind, at, seconds, symbol.strip().upper() if hsep else None)


@dataclass(frozen=True, slots=True)
class Frame:
    """One input message: ``index`` its 1-based position in the replay, ``line`` its line in the
    input, ``ts_ns`` its receive time
    (0 for a finance.csv), ``stream`` its stream name (None: not sent, the capture's snapshot
    line), ``data`` the message as sent on combined streams, ``payload_at`` where the bare payload
    starts in ``data`` (it ends before the envelope's last ``}``; -1: ``data`` is the payload),
    ``counted`` whether faults count it (depth messages; every order message)."""

    index: int
    line: int
    ts_ns: int
    stream: str | None
    data: bytes
    payload_at: int
    counted: bool
    symbol: str | None = None     # the symbol the message belongs to (multi-symbol replays)

    def payload(self) -> bytes:
        return self.data if self.payload_at < 0 else self.data[self.payload_at:self.data.rindex(b"}")]


@dataclass(frozen=True, slots=True)
class Send:
    """Send ``frame`` (``data``: possibly corrupted) to every client subscribed to its stream."""

    frame: Frame
    data: bytes
    note: str = ""


@dataclass(frozen=True, slots=True)
class Close:
    """Close every connection with ``code`` and ``reason``."""

    code: int
    reason: str


@dataclass(frozen=True, slots=True)
class Hold:
    """The replay reached the capture's snapshot line: wait (at most ``seconds``) until a client
    has asked for a snapshot, as the recorder did there.  Without it an unthrottled replay runs
    far ahead of a client's first snapshot request, and the client starts from a later book."""

    seconds: float
    symbol: str | None = None     # a multi-symbol replay: wait for a request of this symbol
    subscribed: bool = False      # wait only until no client waits for its SUBSCRIBE (bare /stream)


@dataclass(frozen=True, slots=True)
class Stall:
    """Send nothing for ``seconds`` (connections stay open)."""

    seconds: float
    reason: str


Action = Send | Close | Hold | Stall


@dataclass(frozen=True)
class FaultRules:
    """What differs between the replay servers' timelines (everything else is
    :func:`fault_timeline`, one loop for both): ``fault(frame, k, n)`` the fault at a counted
    frame (the k-th counted overall, the n-th of its symbol), ``rest(frame)`` the actions for a
    frame that is served over HTTP, not sent (a capture's snapshot line), ``after_send(frame)``
    the actions after a frame is sent, ``corrupt(data)`` a corrupted message,
    ``bad_checksum(data)`` the message with a wrong checksum (None: it carries none),
    ``same_stream(held, frame)`` whether a reordered frame is released after ``frame`` (the next
    counted frame of its own stream: the same symbol)."""

    fault: Callable[[Frame, int, int], Fault | None]
    rest: Callable[[Frame], Iterator[Action]]
    after_send: Callable[[Frame], Iterator[Action]] = lambda frame: iter(())
    corrupt: Callable[[bytes], bytes] = lambda data: data[: len(data) // 2]
    bad_checksum: Callable[[bytes], bytes | None] = lambda data: None
    same_stream: Callable[[Frame, Frame], bool] = lambda held, frame: True


def fault_timeline(core, frames: list[Frame], rules: FaultRules, wanted: set[str] | None) -> Iterator[Action]:
    """The actions of a replay of ``frames`` with its faults applied, for either server
    (``core``: a :class:`ReplayCore` or a venue replay; its ``position``, ``sent`` and
    ``faults_done`` advance).  Frames of streams no client wants (``wanted``, read at every frame;
    empty: nothing skipped) are passed over without an action.  Faults: ``drop`` sends nothing,
    ``dup`` sends twice, ``corrupt`` sends :attr:`FaultRules.corrupt`'s message, ``reorder`` holds
    the frame until after the next counted frame of the same stream, ``close`` closes every
    connection then sends the frame to the clients that come back, ``stall`` waits then sends,
    ``checksum`` sends the message with a wrong checksum (nothing happens for a message without
    one).  Cost: a dict lookup per counted frame on top of the send."""
    held: Send | None = None
    k = 0
    per: dict[str, int] = {}
    for f in frames:
        if f.stream is None:                   # served over HTTP (a REST snapshot), not sent
            yield from rules.rest(f)
            core.position = f.index
            continue
        fault = None
        if f.counted:
            k += 1
            per[f.symbol or ""] = n = per.get(f.symbol or "", 0) + 1
            fault = rules.fault(f, k, n)
        if fault is None and wanted and f.stream not in wanted and not (held and f.counted):
            core.position = f.index
            continue
        data = f.data
        label = ""
        if fault is not None:
            label = f"{fault.kind}@{fault.at}{'#' + fault.symbol if fault.symbol else ''} (line {f.line})"
            if fault.kind == "close":
                core.faults_done.append(label)
                yield Close(FAULT_CLOSE, f"fault injection: {label}")
                fault = None
            elif fault.kind == "stall":
                core.faults_done.append(label)
                yield Stall(fault.seconds, f"fault injection: {label}")
                fault = None
            elif fault.kind == "checksum":
                bad = rules.bad_checksum(f.data)
                if bad is not None:
                    core.faults_done.append(label)
                    data = bad
                fault = None
        core.position = f.index
        if fault is None:
            core.sent += 1
            yield Send(f, data, label if data is not f.data else "")
            yield from rules.after_send(f)
        elif fault.kind == "drop":
            core.faults_done.append(label)
        elif fault.kind == "dup":
            core.faults_done.append(label)
            core.sent += 2
            yield Send(f, data)
            yield Send(f, data, label)
        elif fault.kind == "corrupt":
            core.faults_done.append(label)
            core.sent += 1
            yield Send(f, rules.corrupt(data), label)
        elif fault.kind == "reorder":
            core.faults_done.append(label)
            held = Send(f, data, label)
            continue
        if held is not None and f.counted and rules.same_stream(held.frame, f):
            core.sent += 1
            yield held
            held = None
    if held is not None:
        core.sent += 1
        yield held


@dataclass(frozen=True, slots=True)
class WsRoute:
    """A websocket request: the streams it wants (None: all) and whether they are wrapped in the
    combined-stream envelope."""

    streams: frozenset[str] | None
    envelope: bool


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """A plain HTTP answer (snapshot endpoints and errors)."""

    status: int
    body: str
    content_type: str = "application/json"


class ReplayCore:
    """The replay of one input; built by :func:`load_replay`.

    ``protocol`` is ``"binance"`` or ``"orders"``; ``market`` and ``symbol`` describe a capture.
    ``position`` is the index of the last frame the timeline has passed (sent, dropped or held for
    a reorder); snapshots answer the book there.  Counters: ``sent`` frames, ``faults_done``."""

    def __init__(self, source: str, protocol: Literal["binance", "orders"], frames: list[Frame], *,
                 market: str | None = None, symbol: str | None = None, snapshot_at: int | None = None,
                 empty_snapshot: bytes | None = None, faults: tuple[Fault, ...] = ()) -> None:
        self.source = source
        self.protocol = protocol
        self.frames = frames
        self.skipped = 0                        # bad input lines load_replay(skip_bad=True) left out
        self.market = market
        self.symbol = symbol
        self.snapshot_at = snapshot_at          # index of the capture's snapshot line (None: none)
        self.empty_snapshot = empty_snapshot    # synthetic empty snapshot before the first depth event
        for f in faults:
            if f.kind == "checksum":
                raise ReplayError(f"fault checksum@{f.at}: a {protocol} feed carries no checksum", "--fault")
            if f.symbol and f.symbol != (symbol or "").upper():
                raise ReplayError(f"fault {f.kind}@{f.at}#{f.symbol}: no such symbol (this capture: {symbol})",
                                  "--fault")
        self.faults = {f.at: f for f in faults}
        if len(self.faults) != len(faults):
            raise ReplayError("two faults at the same message", "--fault")
        self.position = 0
        self.hold_seconds = 15.0
        self.sent = 0
        self.faults_done: list[str] = []
        self.streams = tuple(dict.fromkeys(f.stream for f in frames if f.stream is not None))
        self._fed = 0                             # frames fed to the snapshot book
        self._book: BinanceBook | OrderFeed | None = None
        self._book_started = False
        self._decoder = Decoder()
        self._first_depth = next((f.index for f in frames if f.counted), 0)
        self._check()

    # -- description -----------------------------------------------------------------------
    def ws_path(self) -> str:
        """The path (and query) a client connects to for every stream of the input."""
        if self.protocol == "orders":
            return ORDERS_PATH
        return "/stream?streams=" + "/".join(self.streams)

    def snapshot_path(self) -> str:
        """The path of the snapshot endpoint (what ``X-DDMS-Snapshot`` advertises)."""
        if self.protocol == "orders":
            return ORDERS_SNAPSHOT_PATH
        return f"{DEPTH_PATHS[self.market or FUTURES]}?symbol={(self.symbol or '').upper()}&limit=1000"

    def headers(self) -> dict[str, str]:
        """Headers added to every websocket handshake response: what a client needs to know to
        follow this feed without options."""
        h = {"X-DDMS-Protocol": self.protocol, "X-DDMS-Snapshot": self.snapshot_path()}
        if self.market:
            h["X-DDMS-Market"] = self.market
        return h

    def is_depth(self, stream: str) -> bool:
        """Is ``stream`` a depth stream (its messages build the book)?"""
        return "@depth" in stream

    def counted_total(self) -> int:
        return sum(1 for f in self.frames if f.counted)

    # -- requests -----------------------------------------------------------------------------
    def route(self, path: str) -> WsRoute | HttpAnswer:
        """What a request for ``path`` gets: a websocket route, or an HTTP answer (a snapshot or
        an error saying which paths exist).  O(len(path)) plus a snapshot's cost."""
        parts = urlsplit(path)
        p = parts.path.rstrip("/") or "/"
        query = parse_qs(parts.query)
        if self.protocol == "orders":
            if p == ORDERS_PATH:
                return WsRoute(None, False)
            if p == ORDERS_SNAPSHOT_PATH:
                return self.snapshot_response()
            return HttpAnswer(404, _err(f"no such path {p!r}: the feed is on {ORDERS_PATH}, its snapshot on "
                                        f"{ORDERS_SNAPSHOT_PATH}"))
        if p in DEPTH_PATHS.values():
            if p != DEPTH_PATHS[self.market or FUTURES]:
                return HttpAnswer(404, _err(f"this capture is {self.market}: its snapshots are on "
                                            f"{DEPTH_PATHS[self.market or FUTURES]}"))
            sym = (query.get("symbol") or [""])[0]
            if sym.upper() != (self.symbol or "").upper():
                return HttpAnswer(400, _err(f"symbol {sym!r}: this capture has only {self.symbol!r}"))
            return self.snapshot_response()
        if p == "/stream":
            names = (query.get("streams") or [""])[0]
            return self._streams_route(names.split("/") if names else [], True)
        if p == "/ws" or p.startswith("/ws/"):
            names = unquote(p[4:]) if p.startswith("/ws/") else ""
            return self._streams_route(names.split("/") if names else [], False)
        return HttpAnswer(404, _err(f"no such path {p!r}: streams are on /stream?streams=a/b or /ws/a/b "
                                    f"(this capture: {'/'.join(self.streams)}), snapshots on "
                                    f"{DEPTH_PATHS[self.market or FUTURES]}"))

    def _streams_route(self, names: list[str], envelope: bool) -> WsRoute | HttpAnswer:
        return streams_route(self.streams, names, envelope)

    def subscribe(self, route: WsRoute, message: bytes | str) -> tuple[WsRoute, str | None]:
        """Handle a client message on a Binance route (``{"method": "SUBSCRIBE"|"UNSUBSCRIBE",
        "params": [...], "id": ..}``): the new route and the reply to send (None: no reply)."""
        try:
            obj = json.loads(message)
            method, params, mid = obj["method"], obj.get("params", []), obj.get("id")
            if method not in ("SUBSCRIBE", "UNSUBSCRIBE", "LIST_SUBSCRIPTIONS") or not isinstance(params, list):
                raise ValueError(method)
        except (ValueError, KeyError, TypeError):
            return route, json.dumps({"error": {"code": 2, "msg": "invalid request: expected "
                                                "{\"method\": \"SUBSCRIBE\", \"params\": [...], \"id\": n}"}})
        current = set(self.streams if route.streams is None else route.streams)
        if method == "LIST_SUBSCRIPTIONS":
            return route, json.dumps({"result": sorted(current), "id": mid})
        names = {self.stream_name(str(n)) for n in params}
        if None in names:
            return route, json.dumps({"error": {"code": 2, "msg": f"unknown stream in {params}"}, "id": mid})
        current = current | names if method == "SUBSCRIBE" else current - names
        if len(current) > MAX_STREAMS:
            return route, json.dumps({"error": {"code": 2, "msg": f"a connection listens to at most {MAX_STREAMS} "
                                                f"streams; this SUBSCRIBE would make {len(current)}"}, "id": mid})
        return WsRoute(frozenset(current), route.envelope), json.dumps({"result": None, "id": mid})

    def stream_name(self, name: str) -> str | None:
        """The capture's stream ``name`` names (case-insensitive), None for an unknown one."""
        index = self.__dict__.get("_stream_index")
        if index is None or len(index) != len(self.streams):
            index = self.__dict__["_stream_index"] = {s.lower(): s for s in self.streams}
        return index.get(name.lower())

    def snapshot_response(self) -> HttpAnswer:
        """The book at the replay position (see the module docstring), as the HTTP answer."""
        try:
            return HttpAnswer(200, self._snapshot_json())
        except RuntimeError as e:
            return HttpAnswer(503, _err(str(e)))

    def _snapshot_json(self) -> str:
        pos = self.position
        if self.protocol == "orders":
            feed = self._catch_up(pos)
            assert isinstance(feed, OrderFeed)
            return format_message(feed.snapshot_message())
        # before the capture's snapshot line (or the first depth event, with an empty book): that snapshot
        if self.snapshot_at is not None and pos < self.snapshot_at:
            return self.frames[self.snapshot_at - 1].data.decode()
        if self.snapshot_at is None and pos < self._first_depth and self.empty_snapshot is not None:
            return self.empty_snapshot.decode()
        book = self._catch_up(pos)
        assert isinstance(book, BinanceBook)
        if not book.synced:
            raise RuntimeError(f"{self.source}: the capture's own book is not synchronized at line {pos} "
                               f"(a gap in the capture and no later snapshot line): no snapshot to serve")
        snap = book.to_snapshot()
        if self.market == FUTURES:
            nxt = self._next_depth(pos)
            if nxt is not None and nxt.prev_final_id == book.last_u:
                snap["lastUpdateId"] = nxt.first_id
        return json.dumps(snap, separators=(",", ":"))

    def _next_depth(self, pos: int) -> DepthUpdate | None:
        for f in self.frames[pos:]:
            if f.counted:
                try:
                    rec = self._decoder.decode(f.data, self.source, f.line)
                except InputError:
                    return None
                return rec if isinstance(rec, DepthUpdate) else None
        return None

    def _catch_up(self, pos: int) -> BinanceBook | OrderFeed:
        """Feed the snapshot book the frames up to ``pos`` (lazily, once each)."""
        if self._book is None:
            if self.protocol == "orders":
                self._book = OrderFeed(source=self.source)
            else:
                self._book = BinanceBook(self.market or FUTURES, source=self.source, max_reports=100)
        book = self._book
        frames = self.frames
        while self._fed < pos:
            f = frames[self._fed]
            self._fed += 1
            if isinstance(book, OrderFeed):
                book.feed_message(f.data)
                book.discard_events()         # no engine here
                continue
            if f.stream is None or f.counted:
                if not self._book_started and self.snapshot_at is None and self.empty_snapshot is not None:
                    book.apply_snapshot(self.empty_snapshot)
                self._book_started = True
                book.feed_message(f.data, f.ts_ns)
                book.discard_events()         # no engine here
        return book

    # -- the timeline ---------------------------------------------------------------------------
    def timeline(self, wanted: set[str] | None = None) -> Iterator[Action]:
        """The actions of the whole replay, faults applied; advances :attr:`position`.
        ``wanted`` (read at every frame, so the caller may change it in place): the streams some
        client subscribes to (empty: no client yet, nothing is skipped); frames of other streams
        are passed over without an action (an unthrottled replay of the depth stream alone skips
        14 other frames per depth frame)."""
        rules = FaultRules(fault=lambda f, k, n: self.faults.get(k) if self.faults else None,
                           rest=self._rest_frame, after_send=self._after_send)
        return fault_timeline(self, self.frames, rules, wanted)

    def _rest_frame(self, f: Frame) -> Iterator[Action]:
        """The capture's snapshot line: wait there for the client's snapshot request."""
        if f.index == self.snapshot_at:
            yield Hold(self.hold_seconds)

    def _after_send(self, f: Frame) -> Iterator[Action]:
        """An empty-book start: after the first depth frame, wait for the client's request."""
        if f.index == self._first_depth and self.snapshot_at is None and self.protocol == "binance":
            yield Hold(self.hold_seconds)

    def _check(self) -> None:
        """Invariants: frames numbered in input order; a capture's counted frames are depth
        messages of one market and symbol; the snapshot line (if any) is a frame without stream."""
        assert all(f.index == k for k, f in enumerate(self.frames, 1)), "frames out of order"
        if self.protocol == "binance":
            assert self.market in (FUTURES, SPOT) and self.symbol
            assert self.snapshot_at is None or self.frames[self.snapshot_at - 1].stream is None
            assert self.snapshot_at is not None or self.empty_snapshot is not None
        assert self.position <= (self.frames[-1].index if self.frames else 0)


def _err(msg: str) -> str:
    return json.dumps({"code": -1, "msg": msg})


# ------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------

def load_replay(path: str | os.PathLike, *, empty_book: bool = False, faults: tuple[Fault, ...] = (),
                skip_bad: bool = False) -> ReplayCore | VenueReplay:
    """Read a capture (``.gz`` or plain ``<recv_ts_ns> <json>`` lines) or a finance.csv (the
    format told by :func:`ddms.io.detect.detect_file`, as for every command).  Raises
    :class:`ReplayError` for an input that cannot be replayed and :class:`InputError` naming the
    line for a bad line; ``skip_bad`` skips and counts bad lines instead (``core.skipped``; an
    order stream's ``seq`` then stays consecutive, one per message sent).  Cost: one pass over
    the input (a finance.csv line is encoded once)."""
    p = Path(path)
    if not p.exists():
        raise ReplayError("no such file", str(p))
    lines = iter_lines(p)
    first = next(lines, None)
    if first is None:
        raise ReplayError("empty input: nothing to replay", str(p))
    kind, _ = detect_file(p)
    if kind == "orderbook":
        return _load_orders(p, first, lines, faults, skip_bad)
    if kind == "binance":
        return _load_capture(p, first, lines, empty_book, faults, skip_bad)
    if kind == "cryptofeed":
        from ddms.feeds.venue_server import load_cryptofeed_replay
        return load_cryptofeed_replay(p, faults=faults, skip_bad=skip_bad)
    raise ReplayError(f"a {kind} file: serve-feed serves Binance captures (hftbacktest or cryptofeed), cryptofeed "
                      "captures of Kraken, OKX and Coinbase, and order-book CSV files (t,order_id,action,volume,price)",
                      str(p))


def _load_orders(p: Path, first: bytes, rest: Iterator[bytes], faults: tuple[Fault, ...],
                 skip_bad: bool = False) -> ReplayCore:
    frames = []
    skipped = 0
    for i, line in enumerate(_chain(first, rest), 1):
        try:
            msg = encode_line(line, i, str(p))
        except InputError:
            if not skip_bad:
                raise
            skipped += 1
            continue
        msg["seq"] = len(frames) + 1
        frames.append(Frame(len(frames) + 1, i, 0, "orders", format_message(msg).encode(), -1, True))
    core = ReplayCore(str(p), "orders", frames, faults=faults)
    core.skipped = skipped
    return core


def _split_lines(lines: Iterator[bytes], src: str, skip_bad: bool) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, recv_ns, json)`` of a capture's non-blank lines (bad ones raise, or are
    skipped with ``skip_bad``)."""
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            ts, js = split_line(line, i, src)
        except InputError:
            if not skip_bad:
                raise
            continue
        yield i, ts, js


def _chain(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _load_capture(p: Path, first: bytes, rest: Iterator[bytes], empty_book: bool,
                  faults: tuple[Fault, ...], skip_bad: bool = False) -> ReplayCore:
    src = str(p)
    decoder = Decoder()
    frames: list[Frame] = []
    snapshot_at = None
    market = symbol = None
    first_depth: DepthUpdate | None = None
    skipped = 0
    multi = False
    for i, line in enumerate(_chain(first, rest), 1):
        if not line.strip():
            continue
        n = len(frames)
        try:
            ts, js = split_line(line, i, src)
            m = _ENVELOPE.match(js)
            if m is not None:
                stream = m.group(1).decode()
                counted = "@depth" in stream
                frames.append(Frame(len(frames) + 1, i, ts, stream, js, m.start(2), counted))
                if counted and first_depth is None:
                    rec = decoder.decode(js, src, i)
                    if not isinstance(rec, DepthUpdate):
                        raise InputError(f"stream {stream!r} carries a {type(rec).__name__}, not a depth update",
                                         src, i)
                    first_depth = rec
                    market = FUTURES if rec.prev_final_id is not None else SPOT
                    symbol = rec.symbol
                    if b'"ps"' in js:     # COIN-M (its snapshots are on /dapi/v1/depth): the venue replay
                        multi = True
                        break
                elif counted and not stream.lower().startswith((symbol or "").lower() + "@"):
                    multi = True      # a second symbol: the multi-symbol replay takes the capture
                    break
                continue
            rec = decoder.decode(js, src, i)      # raises InputError naming the line
            if isinstance(rec, Response):         # a recorded reply to a subscription: nothing to replay
                continue
            if isinstance(rec, DepthSnapshot):
                frames.append(Frame(len(frames) + 1, i, ts, None, js, -1, False))
                if snapshot_at is None:
                    snapshot_at = len(frames)
                continue
            raise InputError("a stream message without the combined-stream envelope {\"stream\":..,\"data\":..}",
                             src, i, js[:120].decode("utf-8", "replace"))
        except InputError:
            if not skip_bad:
                raise
            del frames[n:]
            skipped += 1
    if multi:
        from ddms.feeds.venue_server import load_binance_multi
        return load_binance_multi(p, _split_lines(iter_lines(p), src, skip_bad), faults=faults, skip_bad=skip_bad)
    if first_depth is None:
        raise ReplayError("the capture has no depth messages (@depth streams): no book to replay", src)
    empty = None
    if snapshot_at is None:
        if not empty_book:
            raise ReplayError("the capture has no depth snapshot line ({\"lastUpdateId\": ..}), so a client cannot "
                              "build the book; pass --empty-book to start from an empty book (the top of book is "
                              "then wrong until every level has been updated)", src)
        last = first_depth.first_id if market == FUTURES else first_depth.first_id - 1
        empty = json.dumps({"lastUpdateId": last, "bids": [], "asks": []}).encode()
    core = ReplayCore(src, "binance", frames, market=market, symbol=symbol, snapshot_at=snapshot_at,
                      empty_snapshot=empty, faults=faults)
    core.skipped = skipped
    return core


def streams_route(streams, names: list[str], envelope: bool) -> WsRoute | HttpAnswer:
    """Binance's stream paths (``/stream?streams=a/b``: ``envelope``; ``/ws/a/b``) over the capture's
    ``streams``: the route, or a 404 naming the unknown streams.  Shared by the one-symbol replay
    and the many-symbol venue replay."""
    known = {s.lower(): s for s in streams}
    unknown = [n for n in names if n.lower() not in known]
    if unknown:
        shown = ", ".join(streams[:20]) + (f", ... ({len(streams):,} streams)" if len(streams) > 20 else "")
        return HttpAnswer(404, _err(f"unknown stream(s) {', '.join(unknown[:20])}; this capture has {shown}"))
    if len(names) > MAX_STREAMS:
        return HttpAnswer(400, _err(f"{len(names):,} streams: a connection listens to at most {MAX_STREAMS}; "
                                    "open several connections"))
    if not names:
        # /ws, and /stream of a capture with more streams than one connection may carry: nothing
        # until the client SUBSCRIBEs (as Binance); /stream otherwise: every stream (a replay's
        # convenience, e.g. for a one-symbol capture)
        return WsRoute(None if envelope and len(streams) <= MAX_STREAMS else frozenset(), envelope)
    return WsRoute(frozenset(known[n.lower()] for n in names), envelope)
