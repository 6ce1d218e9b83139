"""Replay of multi-symbol venue captures (sans-I/O): Kraken, OKX, Coinbase and Binance, many symbols.

``ddms serve-feed`` serves a cryptofeed capture (``<url> <-> <ts>`` / ``<ts>: <json>`` lines and
the ``.http.`` REST files beside it, :mod:`ddms.io.cryptofeed`) or an hftbacktest capture holding
several Binance symbols with this core; the websocket and HTTP glue is
:mod:`ddms.feeds.transport` (unchanged contract: :meth:`VenueReplay.route`,
:meth:`VenueReplay.subscribe`, :meth:`VenueReplay.timeline`).  An hftbacktest capture of one
Binance symbol and a finance.csv stay with :class:`ddms.feeds.server.ReplayCore`.

What the server speaks (each venue's public websocket API, as the capture recorded it):

* **Kraken** v1 on ``/``: ``{"event": "subscribe", "pair": [...], "subscription": {"name":
  "book", "depth": N}}`` is answered with one ``subscriptionStatus`` per pair; ``unsubscribe``
  likewise.  **OKX** v5 on ``/ws/v5/public``: ``{"op": "subscribe", "args": [{"channel": ..,
  "instId": ..}]}`` answered by ``{"event": "subscribe", "arg": ..}`` per argument.
  **Coinbase** on ``/``: ``{"type": "subscribe", "product_ids": [...], "channels": [...]}``
  answered by ``{"type": "subscriptions", ...}``.  Every message of a symbol (book, ticker,
  trades) goes to the connections subscribed to that symbol (routing is per symbol, not per
  channel).  A subscription of a symbol whose recorded snapshot the replay has already passed
  is answered with a *fresh snapshot* of the book at the replay position, built from the capture
  by the venue's own core (Kraken: ``as``/``bs`` with the exact strings; OKX: the book, the
  last ``seqId`` and a checksum computed on it; Coinbase: ``snapshot``): that is how a client
  resynchronizes one symbol (unsubscribe + subscribe), and how it recovers after a reconnect.
  The recorded replies to the recorder's own subscriptions are not replayed.
* **Binance** (spot, USD-M, COIN-M): ``/stream?streams=a/b`` (combined envelope) and
  ``/ws/a/b`` (bare payloads), SUBSCRIBE/UNSUBSCRIBE messages (as the venue: at most 1,024
  streams a connection; a bare ``/ws``, and a bare ``/stream`` of a capture with more than 1,024
  streams, carry nothing until the client subscribes; the URL advertised for a capture whose
  streams do not fit in one URL is the bare ``/stream``), and the REST depth endpoint of
  the market (``/api/v3/depth``, ``/fapi/v1/depth``, ``/dapi/v1/depth``) with ``symbol=``: the
  recorded snapshot of that symbol while the replay is before it, afterwards the symbol's book at
  the replay position (futures: stamped ``U`` of its next depth event, see
  :mod:`ddms.feeds.server`).  An hftbacktest snapshot line names no symbol: it belongs to the
  book the capture reader applies it to, as in ``ddms run`` (:func:`load_binance_multi`).

The handshake advertises ``X-DDMS-Protocol`` (the venue: ``kraken``, ``okx``, ``coinbase``,
``binance``), ``X-DDMS-Symbols`` (comma separated, as the venue spells them), ``X-DDMS-Market``
(Binance), ``X-DDMS-Snapshot`` (Binance: the REST path with ``{symbol}`` to fill in) and
``X-DDMS-Streams`` (Binance: the kinds of stream, ``depth@100ms,bookTicker,...``, for a client
that subscribes), so ``ddms monitor URL`` needs no option.  A long header value (the symbols of
a 1,000-symbol capture) is sent as several header lines of the same name (HTTP: a list).

A ``ddms monitor --record`` file replays as the session it recorded: the client replaying it
detects the same faults at the same messages, so its n-th resubscription of a symbol is the
recorded n-th one, whose answer is already in the stream (no fresh snapshot is made for it, and
its unsubscribe does not cut the stream).

Faults (``KIND@N`` counts book messages of every symbol; ``KIND@N#SYMBOL`` the N-th book message
of that symbol): drop, dup, reorder, corrupt (Binance: the JSON cut in half; other venues: the
first price level's first field replaced by ``"corrupt"``, so the message still names its
symbol), ``checksum`` (the message's checksum changed: Kraken and OKX), close, stall.

Cost: loading is one pass over the capture (one ``json.loads`` per line); a fresh snapshot feeds
the venue core the frames since the last one (each frame once over the whole replay).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ddms.errors import DdmsError, InputError, ReplayError
from ddms.feeds.server import (
    Action,
    Fault,
    FaultRules,
    Frame,
    Hold,
    HttpAnswer,
    ReplayCore,
    WsRoute,
    _err,
    fault_timeline,
    streams_route,
)
from ddms.io.levels import ASKS, BIDS
from ddms.io.venues.binance_book import FUTURES, MAX_STREAMS, SPOT, Decoder, DepthSnapshot, DepthUpdate, Response

__all__ = ["BINANCE_DEPTH_PATHS", "VENUE_PATHS", "VenueReplay", "load_cryptofeed_replay", "load_binance_multi"]

VENUE_PATHS = {"kraken": "/", "okx": "/ws/v5/public", "coinbase": "/"}
MAX_URL = 4000       # the longest stream URL advertised (HTTP servers refuse request lines over ~8 KB: 414)
BINANCE_DEPTH_PATHS = {"spot": "/api/v3/depth", "usdm": "/fapi/v1/depth", "coinm": "/dapi/v1/depth"}
_ENVELOPE = re.compile(rb'\{\s*"stream"\s*:\s*"([^"\\]*)"\s*,\s*"data"\s*:\s*(.*)\}\s*\Z', re.S)


def _compact(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _symbol_of(venue: str, msg: Any) -> tuple[str | None, bool]:
    """``(symbol, is a book message)`` of a parsed venue message; symbol None: no symbol (status,
    heartbeats, subscription replies)."""
    if venue == "kraken":
        if isinstance(msg, list) and len(msg) >= 4 and isinstance(msg[-1], str) and isinstance(msg[-2], str):
            return msg[-1].upper(), msg[-2].startswith("book")
        return None, False
    if venue == "okx":
        if isinstance(msg, dict) and "event" not in msg and isinstance(msg.get("arg"), dict):
            inst = msg["arg"].get("instId")
            if isinstance(inst, str):
                return inst.upper(), str(msg["arg"].get("channel", "")).startswith("books")
        return None, False
    if isinstance(msg, dict) and isinstance(msg.get("product_id"), str):      # coinbase
        return msg["product_id"].upper(), msg.get("type") in ("snapshot", "l2update")
    return None, False


def _is_snapshot(venue: str, msg: Any) -> bool:
    if venue == "kraken":
        return any(isinstance(d, dict) and ("as" in d or "bs" in d) for d in msg[1:-2])
    if venue == "okx":
        return msg.get("action") == "snapshot"
    return msg.get("type") == "snapshot"


def _corrupt_levels(obj: Any) -> bool:
    """Replace the first field of the first ``[price, size, ...]`` entry found in ``obj`` by
    ``"corrupt"`` (in place); False when there is none."""
    if isinstance(obj, list):
        if obj and all(isinstance(e, list) and e and isinstance(e[0], str) for e in obj):
            obj[0][0] = "corrupt"
            return True
        return any(_corrupt_levels(x) for x in obj)
    if isinstance(obj, dict):
        return any(_corrupt_levels(v) for v in obj.values())
    return False


def _bad_checksum(venue: str, data: bytes) -> bytes | None:
    """The message with its checksum changed (None: it carries none)."""
    msg = json.loads(data)
    if venue == "kraken":
        for d in msg[1:-2]:
            if isinstance(d, dict) and isinstance(d.get("c"), str) and d["c"].isdigit():
                d["c"] = str((int(d["c"]) + 1) % 2**32)
                return _compact(msg)
    elif venue == "okx":
        for d in msg.get("data") or ():
            if isinstance(d, dict) and isinstance(d.get("checksum"), int):
                d["checksum"] = d["checksum"] + 1 if d["checksum"] < 2**31 - 1 else -(2**31)
                return _compact(msg)
    return None


class VenueReplay:
    """The replay of one multi-symbol venue capture; built by :func:`load_cryptofeed_replay` or
    :func:`load_binance_multi`.  ``frames`` in receive order; ``symbols`` as the venue spells
    them; ``market`` (Binance): ``spot``, ``usdm`` or ``coinm``.  :attr:`position`: frames up to
    it have been handed to every subscribed connection (or skipped): a fresh snapshot describes
    the book there."""

    def __init__(self, source: str, venue: str, frames: list[Frame], symbols: tuple[str, ...], *,
                 market: str | None = None, faults: tuple[Fault, ...] = (),
                 first_snapshot: dict[str, int] | None = None, meta: dict[str, Any] | None = None,
                 answers: dict[str, list[int]] | None = None) -> None:
        self.source = source
        self.protocol = venue
        self.venue = venue
        self.frames = frames
        self.symbols = symbols
        self.symbol = symbols[0] if symbols else None
        self.market = market
        self.skipped = 0
        self.sent = 0
        self.faults_done: list[str] = []
        self.position = 0
        self.hold_seconds = 15.0
        self.asked: set[str] = set()          # symbols a client asked a snapshot of / subscribed to
        self.first_snapshot = first_snapshot or {}     # symbol -> index of its first recorded snapshot
        self.meta = meta or {}                 # Kraken: symbol -> (channelID, channel name)
        self.answers = answers or {}           # symbol -> recorded snapshots answering a recorded resubscription
        self._subs: dict[str, int] = {}
        self.faults: dict[tuple[str | None, int], Fault] = {}
        for f in faults:
            key = (f.symbol.upper() if f.symbol else None, f.at)
            if key in self.faults:
                raise ReplayError("two faults at the same message", "--fault")
            if f.symbol and f.symbol.upper() not in symbols:
                raise ReplayError(f"fault {f.kind}@{f.at}#{f.symbol}: no such symbol (this capture: "
                                  f"{', '.join(symbols)})", "--fault")
            if f.kind == "checksum" and venue not in ("kraken", "okx"):
                raise ReplayError(f"fault checksum@{f.at}: a {venue} feed carries no checksum", "--fault")
            self.faults[key] = f
        self.streams = tuple(dict.fromkeys(f.stream for f in frames if f.stream is not None)) if venue == "binance" \
            else symbols
        self._symbol_set = frozenset(symbols)
        self._core: Any = None
        self._fed = 0
        self._decoder = Decoder()
        self._check()

    # -- description ----------------------------------------------------------------------------
    def ws_path(self) -> str:
        """The path a client connects to: Binance's combined stream naming every stream of the
        capture when that fits in one connection (at most :data:`MAX_STREAMS` streams, a URL of
        at most :data:`MAX_URL` bytes: an HTTP server refuses longer request lines with 414),
        else the bare ``/stream``, where the client SUBSCRIBEs (as Binance asks of clients
        with many streams: :meth:`VenueSession.subscribe_messages
        <ddms.feeds.venue_session.VenueSession.subscribe_messages>`)."""
        if self.venue == "binance":
            path = "/stream?streams=" + "/".join(self.streams)
            return path if len(self.streams) <= MAX_STREAMS and len(path) <= MAX_URL else "/stream"
        return VENUE_PATHS[self.venue]

    def stream_kinds(self) -> list[str]:
        """Binance: the kinds of stream the capture holds (a stream name after its symbol:
        ``depth@100ms``, ``bookTicker``), in first-seen order."""
        return list(dict.fromkeys(s.split("@", 1)[1] for s in self.streams if "@" in s))

    def stream_name(self, name: str) -> str | None:
        """A Binance stream a client may SUBSCRIBE to: one of the capture's, or a stream of one
        of its symbols and of a kind it holds that has no message of that symbol (a quiet stream,
        which the venue accepts too).  None otherwise."""
        known = ReplayCore.stream_name(self, name)
        if known is not None:
            return known
        sym, at, kind = name.partition("@")
        if at and sym.upper() in self._symbol_set and kind in self.stream_kinds():
            return name
        return None

    def snapshot_path(self) -> str:
        if self.venue == "binance":
            return f"{BINANCE_DEPTH_PATHS[self.market or 'usdm']}?symbol={{symbol}}&limit=1000"
        return "(in-stream snapshots: subscribe)"

    def headers(self) -> dict[str, str]:
        h = {"X-DDMS-Protocol": self.venue, "X-DDMS-Symbols": ",".join(self.symbols)}
        if self.venue == "binance":
            h["X-DDMS-Market"] = SPOT if self.market == "spot" else FUTURES
            h["X-DDMS-Snapshot"] = self.snapshot_path()
            h["X-DDMS-Streams"] = ",".join(self.stream_kinds())
        return h

    def is_depth(self, stream: str) -> bool:
        return "@depth" in stream if self.venue == "binance" else True

    def counted_total(self) -> int:
        return sum(1 for f in self.frames if f.counted)

    # -- requests ---------------------------------------------------------------------------------
    def route(self, path: str) -> WsRoute | HttpAnswer:
        parts = urlsplit(path)
        p = parts.path.rstrip("/") or "/"
        if self.venue != "binance":
            want = VENUE_PATHS[self.venue].rstrip("/") or "/"
            if p == want:
                return WsRoute(frozenset(), False)       # nothing until the client subscribes
            return HttpAnswer(404, _err(f"no such path {p!r}: this {self.venue} feed is on {want}"))
        query = parse_qs(parts.query)
        if p in BINANCE_DEPTH_PATHS.values():
            mine = BINANCE_DEPTH_PATHS[self.market or "usdm"]
            if p != mine:
                return HttpAnswer(404, _err(f"this capture is {self.market}: its snapshots are on {mine}"))
            sym = (query.get("symbol") or [""])[0].upper()
            if sym not in self.symbols:
                return HttpAnswer(400, _err(f"symbol {sym!r}: this capture has {', '.join(self.symbols)}"))
            self.asked.add(sym)
            try:
                return HttpAnswer(200, self._binance_snapshot(sym))
            except RuntimeError as e:
                return HttpAnswer(503, _err(str(e)))
        if p == "/stream":
            names = (query.get("streams") or [""])[0]
            return self._streams_route(names.split("/") if names else [], True)
        if p == "/ws" or p.startswith("/ws/"):
            names = unquote(p[4:]) if p.startswith("/ws/") else ""
            return self._streams_route(names.split("/") if names else [], False)
        return HttpAnswer(404, _err(f"no such path {p!r}: streams are on /stream?streams=a/b or /ws/a/b, "
                                    f"snapshots on {BINANCE_DEPTH_PATHS[self.market or 'usdm']}"))

    def _streams_route(self, names: list[str], envelope: bool) -> WsRoute | HttpAnswer:
        return streams_route(self.streams, names, envelope)

    def subscribe(self, route: WsRoute, message: bytes | str) -> tuple[WsRoute, list[str]]:
        """A client message: the new route and the replies (acks, fresh snapshots) in order."""
        try:
            obj = json.loads(message)
        except (ValueError, UnicodeDecodeError):
            return route, [json.dumps(self._error("invalid JSON"))]
        if self.venue == "binance":
            r, reply = ReplayCore.subscribe(self, route, message)   # same SUBSCRIBE protocol
            return r, [reply] if reply is not None else []
        current = set(route.streams or ())
        try:
            op, syms, ack = self._parse_sub(obj)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return route, [json.dumps(self._error(f"invalid request: {e}"))]
        unknown = [s for s in syms if s not in self.symbols]
        if unknown:
            return route, [json.dumps(self._error(f"unknown symbol(s) {', '.join(unknown)}; this capture has "
                                                  f"{', '.join(self.symbols)}"))]
        replies = [json.dumps(a) for a in ack]
        if op == "unsubscribe":     # a recording's own resubscription: its stream already says what followed
            current -= {s for s in syms if not self._recorded_resub(s, op)}
        else:
            for s in syms:
                current.add(s)
                self.asked.add(s)
                snap = None if self._recorded_resub(s, op) else self._fresh_snapshot(s)
                if snap is not None:
                    replies.append(snap)
        return WsRoute(frozenset(current), False), replies

    def _error(self, text: str) -> dict:
        if self.venue == "kraken":
            return {"event": "error", "errorMessage": text}
        if self.venue == "okx":
            return {"event": "error", "code": "60012", "msg": text}
        return {"type": "error", "message": text}

    def _parse_sub(self, obj: dict) -> tuple[str, list[str], list[dict]]:
        """``(op, symbols, acks)`` of a subscription message; raises on a malformed one."""
        if self.venue == "kraken":
            op = obj["event"]
            if op not in ("subscribe", "unsubscribe"):
                raise ValueError(f"event {op!r}")
            pairs = [str(p).upper() for p in obj["pair"]]
            sub = obj.get("subscription") or {"name": "book"}
            acks = []
            for p in pairs:
                chan, name = self.meta.get(p, (0, f"book-{sub.get('depth', 10)}"))
                acks.append({"channelID": chan, "channelName": name, "event": "subscriptionStatus", "pair": p,
                             "status": "subscribed" if op == "subscribe" else "unsubscribed",
                             "subscription": sub})
            return op, pairs, acks
        if self.venue == "okx":
            op = obj["op"]
            if op not in ("subscribe", "unsubscribe"):
                raise ValueError(f"op {op!r}")
            args = obj["args"]
            syms = list(dict.fromkeys(str(a["instId"]).upper() for a in args))
            return op, syms, [{"event": op, "arg": a} for a in args]
        op = obj["type"]
        if op not in ("subscribe", "unsubscribe"):
            raise ValueError(f"type {op!r}")
        syms = [str(p).upper() for p in obj.get("product_ids", [])]
        for ch in obj.get("channels", []):
            if isinstance(ch, dict):
                syms += [str(p).upper() for p in ch.get("product_ids", [])]
        syms = list(dict.fromkeys(syms))
        return op, syms, [{"type": "subscriptions", "channels": [
            {"name": c if isinstance(c, str) else c.get("name"), "product_ids": syms}
            for c in obj.get("channels", [])]}]

    # -- the book at the replay position --------------------------------------------------------------
    def _catch_up(self) -> Any:
        """Feed the venue core the frames up to :attr:`position` (each frame once)."""
        if self._core is None:
            if self.venue == "kraken":
                from ddms.io.venues.kraken import KrakenBooks
                self._core = KrakenBooks(self.source)
            elif self.venue == "okx":
                from ddms.io.venues.okx import OkxBooks
                self._core = OkxBooks(self.source)
            elif self.venue == "coinbase":
                from ddms.io.venues.coinbase import CoinbaseBooks
                self._core = CoinbaseBooks(self.source)
            else:
                from ddms.io.venues.binance import BinanceBooks
                self._core = BinanceBooks(SPOT if self.market == "spot" else FUTURES, self.source, max_reports=10)
        core = self._core
        while self._fed < self.position:
            f = self.frames[self._fed]
            self._fed += 1
            if self.venue == "binance":
                if f.stream is None:
                    core.apply_snapshot(f.symbol, f.data, f.index, f.ts_ns)
                elif f.symbol is not None:
                    core.feed(f.data, f.index, f.ts_ns)
            elif f.symbol is not None:
                core.feed(json.loads(f.data), f.index)
            core.take_events()
            core.reports.clear()
        return core

    def _recorded_resub(self, sym: str, op: str) -> bool:
        """Replaying a ``ddms monitor --record`` file whose client resubscribed ``sym``: the
        client replaying it detects the same faults at the same messages, so its n-th
        resubscription is the recorded n-th one, whose answer (a snapshot) is in the stream:
        no fresh snapshot, and its unsubscribe does not cut the stream (the recording holds what
        followed).  Counts subscriptions per symbol; O(1)."""
        n = self._subs.get(sym, 0)          # subscriptions of sym so far; the first is not a resubscription
        if op == "subscribe":
            self._subs[sym] = n + 1
        return 1 <= n <= len(self.answers.get(sym, ()))

    def _fresh_snapshot(self, sym: str) -> str | None:
        """A snapshot message of ``sym``'s book at :attr:`position`, or None when the replay has
        not passed the symbol's recorded snapshot yet (it will be sent) or the capture's own book
        is not synchronized there."""
        first = self.first_snapshot.get(sym)
        if first is None or self.position < first:
            return None
        core = self._catch_up()
        st = core.status.get(sym)
        if st is None or not st.synced:
            return None
        book = core.books[sym]
        bids, asks = book.top(BIDS, 1 << 30), book.top(ASKS, 1 << 30)
        if self.venue == "kraken":
            chan, name = self.meta.get(sym, (0, "book-10"))
            ts = f"{self.frames[self.position - 1].ts_ns / 1e9:.6f}" if self.position else "0.000000"
            return json.dumps([chan, {"as": [[p, q, ts] for p, q in asks], "bs": [[p, q, ts] for p, q in bids]},
                               name, self.meta.get(sym + "#pair", sym)], separators=(",", ":"))
        if self.venue == "okx":
            from ddms.io.venues.okx import okx_checksum
            d: dict[str, Any] = {"asks": [[p, q, "0", "1"] for p, q in asks],
                                 "bids": [[p, q, "0", "1"] for p, q in bids],
                                 "ts": str(self.frames[self.position - 1].ts_ns // 1_000_000),
                                 "checksum": okx_checksum(bids[:25], asks[:25])}
            last = core.last_seq.get(sym)
            if last is not None:
                d.update(seqId=last, prevSeqId=-1)
            return json.dumps({"arg": {"channel": self.meta.get(sym + "#channel", "books"), "instId": sym},
                               "action": "snapshot", "data": [d]}, separators=(",", ":"))
        return json.dumps({"type": "snapshot", "product_id": sym, "bids": [[p, q] for p, q in bids],
                           "asks": [[p, q] for p, q in asks]}, separators=(",", ":"))

    def _binance_snapshot(self, sym: str) -> str:
        first = self.first_snapshot.get(sym)
        if first is not None and self.position < first:
            return self.frames[first - 1].data.decode()
        if first is None:
            raise RuntimeError(f"{self.source}: no depth snapshot of {sym} in the capture")
        core = self._catch_up()
        bk = core.books.get(sym)
        if bk is None or not bk.synced:
            raise RuntimeError(f"{self.source}: the capture's own book of {sym} is not synchronized at message "
                               f"{self.position}: no snapshot to serve")
        snap = bk.to_snapshot()
        if self.market != "spot":
            for f in self.frames[self.position:]:
                if f.counted and f.symbol == sym:
                    try:
                        rec = self._decoder.decode(f.data, self.source, f.line)
                    except InputError:
                        break
                    if isinstance(rec, DepthUpdate) and rec.prev_final_id == bk.last_u:
                        snap["lastUpdateId"] = rec.first_id
                    break
        return json.dumps(snap, separators=(",", ":"))

    # -- the timeline -------------------------------------------------------------------------------
    def timeline(self, wanted: set[str] | None = None) -> Iterator[Action]:
        """The actions of the whole replay, faults applied; :attr:`position` is the frame being
        sent.  A fresh snapshot asked for while the transport still holds that frame includes it,
        and the new subscriber may then get the frame too: harmless, since applying a book message
        twice is idempotent on these venues (Kraken and Coinbase sizes are absolute; OKX drops
        ``seqId <= last`` as stale)."""
        if self.venue != "binance":
            yield Hold(self.hold_seconds)          # until a client subscribes
        else:       # a bare /stream carries nothing until SUBSCRIBE: frames sent before would be lost
            yield Hold(2.0, subscribed=True)
        faults = self.faults
        rules = FaultRules(
            fault=lambda f, k, n: (faults.get((None, k)) or faults.get((f.symbol, n))) if faults else None,
            rest=self._rest_frame, corrupt=self._corrupt, bad_checksum=lambda data: _bad_checksum(self.venue, data),
            same_stream=lambda held, f: held.symbol == f.symbol)
        yield from fault_timeline(self, self.frames, rules, wanted)

    def _rest_frame(self, f: Frame) -> Iterator[Action]:
        """A Binance REST snapshot (served over HTTP): the first of its symbol waits for a request."""
        if f.index == self.first_snapshot.get(f.symbol or ""):
            yield Hold(self.hold_seconds, f.symbol)

    def _corrupt(self, data: bytes) -> bytes:
        """Binance: a message cut in half (undecodable); other venues: levels with wrong sizes in
        valid JSON (caught by the checksum or by the book's checks)."""
        if self.venue == "binance":
            return data[: len(data) // 2]
        msg = json.loads(data)
        _corrupt_levels(msg)
        return _compact(msg)

    def _check(self) -> None:
        assert all(f.index == k for k, f in enumerate(self.frames, 1)), "frames out of order"
        assert self.venue in ("kraken", "okx", "coinbase", "binance")
        for sym, i in self.first_snapshot.items():
            assert self.frames[i - 1].symbol == sym
        assert self.position <= len(self.frames)


# ------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------

def _subscribed(venue: str, payload: bytes) -> list[str]:
    """The symbols a recorded client message subscribes to (Kraken, OKX, Coinbase)."""
    try:
        obj = json.loads(payload)
        if venue == "kraken" and obj.get("event") == "subscribe":
            return [str(p).upper() for p in obj.get("pair", [])]
        if venue == "okx" and obj.get("op") == "subscribe":
            return [str(a["instId"]).upper() for a in obj.get("args", [])
                    if str(a.get("channel", "")).startswith("books")]
        if venue == "coinbase" and obj.get("type") == "subscribe":
            return [str(p).upper() for p in obj.get("product_ids", [])]
    except (ValueError, UnicodeDecodeError, RecursionError, AttributeError, TypeError, KeyError):
        pass
    return []


def _binance_market(url: str | None, venue: str, first_data: Any) -> str:
    u = (url or "").lower()
    if "dstream" in u or "dapi" in u or (isinstance(first_data, dict) and "ps" in first_data):
        return "coinm"
    if venue == "binance_futures" or "fstream" in u or (isinstance(first_data, dict) and "pu" in first_data):
        return "usdm"
    return "spot"


def load_cryptofeed_replay(path: str | os.PathLike, *, faults: tuple[Fault, ...] = (),
                           skip_bad: bool = False) -> VenueReplay:
    """A cryptofeed capture (its ``.ws.`` file and the ``.http.`` files beside it, merged by
    receive time, or a ``ddms monitor --record`` file with its REST answers inline) as a
    :class:`VenueReplay`.  Raises :class:`InputError` naming the line for a bad line unless
    ``skip_bad``."""
    from ddms.io.cryptofeed import _lines_of, capture_paths, merge_lines, parse_line, venue_of

    files = capture_paths(path, "serve")
    ws = files[0]
    frames: list[Frame] = []
    venue = None
    url = None
    first_snapshot: dict[str, int] = {}
    meta: dict[str, Any] = {}
    symbols: list[str] = []
    skipped = 0
    first_depth: Any = None
    resubscribed: set[str] = set()     # symbols a recorded client (ddms monitor --record) subscribed again
    answers: dict[str, list[int]] = {}
    streams = [_lines_of(f, i) for i, f in enumerate(files)]
    for _, tag, n, raw in merge_lines(streams):
        src = files[tag]
        try:
            parsed = parse_line(raw, n, src)
            if parsed is None:
                continue
            kind, u, ts, payload = parsed
            if venue is None:
                url = u if kind in ("open", "sent") else url
                venue = venue_of(u if kind in ("open", "sent") else None, ws)
                if venue is None:
                    raise ReplayError("cannot tell the venue of this capture from its URL or file name", ws)
            if kind == "sent" and frames and venue in VENUE_PATHS:
                resubscribed.update(_subscribed(venue, payload))
            if kind in ("open", "sent"):
                continue
            try:
                msg = json.loads(payload)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                raise InputError(f"malformed JSON: {e}", src, n, payload[:200].decode("utf-8", "replace")) from None
            ts_ns = int(ts * 1e9)
            if venue.startswith("binance"):
                if kind == "http":
                    sym = (parse_qs(urlsplit(u or "").query).get("symbol") or [None])[0]
                    if not sym or "depth" not in (u or ""):
                        continue
                    sym = sym.upper()
                    frames.append(Frame(len(frames) + 1, n, ts_ns, None, payload, -1, False, sym))
                    first_snapshot.setdefault(sym, len(frames))
                    if sym not in symbols:
                        symbols.append(sym)
                    continue
                m = _ENVELOPE.match(payload)
                if m is None:
                    if isinstance(msg, dict) and ("result" in msg or "id" in msg):
                        continue          # a reply to the recorder's SUBSCRIBE
                    raise InputError("a stream message without the combined-stream envelope", src, n,
                                     payload[:120].decode("utf-8", "replace"))
                stream = m.group(1).decode()
                data = msg.get("data") if isinstance(msg, dict) else None
                sym = data.get("s").upper() if isinstance(data, dict) and isinstance(data.get("s"), str) else \
                    stream.split("@", 1)[0].upper()
                counted = "@depth" in stream
                if counted and first_depth is None:
                    first_depth = data
                if counted and sym not in symbols:
                    symbols.append(sym)
                frames.append(Frame(len(frames) + 1, n, ts_ns, stream, payload, m.start(2), counted, sym))
                continue
            if kind == "http":
                continue
            sym, book = _symbol_of(venue, msg)
            if sym is None:
                continue              # status, heartbeats, replies to the recorder's subscriptions
            if sym not in symbols:
                symbols.append(sym)
            frames.append(Frame(len(frames) + 1, n, ts_ns, sym, payload, -1, book, sym))
            if book and _is_snapshot(venue, msg):
                first_snapshot.setdefault(sym, len(frames))
                if sym in resubscribed:
                    resubscribed.discard(sym)
                    answers.setdefault(sym, []).append(len(frames))
                if venue == "kraken":
                    meta.setdefault(sym, (msg[0], msg[-2]))
                    meta.setdefault(sym + "#pair", msg[-1])
                if venue == "okx":
                    meta.setdefault(sym + "#channel", msg["arg"]["channel"])
        except InputError:
            if not skip_bad:
                raise
            skipped += 1
    if venue is None or not frames:
        raise ReplayError("the capture has no messages to replay", ws)
    market = None
    if venue.startswith("binance"):
        market = _binance_market(url, venue, first_depth)
        venue = "binance"
        symbols = [s for s in symbols if s in first_snapshot] + [s for s in symbols if s not in first_snapshot]
        missing = [s for s in symbols if s not in first_snapshot]
        if missing:
            raise ReplayError(f"no REST depth snapshot for {', '.join(missing)} (the .http. file beside the "
                              "capture): a client cannot build those books", ws)
    core = VenueReplay(ws, venue, frames, tuple(symbols), market=market, faults=faults,
                       first_snapshot=first_snapshot, meta=meta, answers=answers)
    core.skipped = skipped
    return core


def _snapshot_owners(path: Path) -> dict[int, str]:
    """Capture line of each REST snapshot line -> the symbol whose book the capture reader applied
    it to (bad lines skipped, a book that never starts left out: the caller names those).  O(file)."""
    from ddms.io.sources import BinanceCaptureReader, Source
    reader = BinanceCaptureReader(Source(str(path), "binance", path.name, skip_bad=True), [], symbols=True,
                                  lane=True)     # (the chunk lane: ~5x the line-by-line pass, the same owners)
    try:
        for _ in reader.batches():
            pass
    except DdmsError:
        pass   # (a book that never started: the snapshots placed so far still tell)
    return reader.snapshot_owner


def load_binance_multi(path: Path, lines: Iterator[tuple[int, int, bytes]], *, faults: tuple[Fault, ...] = (),
                       skip_bad: bool = False) -> VenueReplay:
    """An hftbacktest capture (``(line, recv_ns, json)``) of several Binance symbols (or of one
    COIN-M symbol).  A snapshot line names no symbol: it goes to the book the capture reader gives
    it (:class:`~ddms.io.sources.BinanceCaptureReader`, its ``snapshot_owner``: a waiting book whose
    buffered events the snapshot can start, else the first later depth event it can start), so
    ``serve-feed`` and ``ddms run`` place every snapshot alike.  Why not the nearest event that fits:
    USD-M update ids come from one sequence shared by the symbols, so one snapshot's id can fit
    another symbol's events too, and only the books' states (which are waiting, since when) tell.
    With one symbol, every snapshot is that symbol's.  Cost: one pass of the capture reader
    (~1M level updates/s) besides the framing."""
    src = str(path)
    decoder = Decoder()
    frames: list[Frame] = []
    pending: list[int] = []     # indices of the snapshot frames: no symbol yet
    symbols: list[str] = []
    first_data: Any = None
    skipped = 0
    market = None
    for i, ts, js in lines:
        try:
            m = _ENVELOPE.match(js)
            if m is not None:
                stream = m.group(1).decode()
                counted = "@depth" in stream
                rec = decoder.decode(js, src, i) if counted else None
                sym = rec.symbol.upper() if isinstance(rec, DepthUpdate) else stream.split("@", 1)[0].upper()
                if isinstance(rec, DepthUpdate):
                    if first_data is None:
                        first_data = json.loads(js).get("data")
                        market = _binance_market(None, "", first_data)
                    if sym not in symbols:
                        symbols.append(sym)
                frames.append(Frame(len(frames) + 1, i, ts, stream, js, m.start(2), counted, sym))
                continue
            rec = decoder.decode(js, src, i)
            if isinstance(rec, Response):
                continue
            if isinstance(rec, DepthSnapshot):
                frames.append(Frame(len(frames) + 1, i, ts, None, js, -1, False, None))
                pending.append(len(frames))
                continue
            raise InputError("a stream message without the combined-stream envelope {\"stream\":..,\"data\":..}",
                             src, i, js[:120].decode("utf-8", "replace"))
        except InputError:
            if not skip_bad:
                raise
            skipped += 1
    owner = _snapshot_owners(path) if len(symbols) > 1 else {}
    for idx in pending:
        old = frames[idx - 1]
        sym = symbols[0] if len(symbols) == 1 else owner.get(old.line)
        if sym is not None:
            frames[idx - 1] = Frame(old.index, old.line, old.ts_ns, None, old.data, -1, False, sym)
    frames = [f for f in frames if not (f.stream is None and f.symbol is None)]    # snapshots of no symbol
    frames = [Frame(k, f.line, f.ts_ns, f.stream, f.data, f.payload_at, f.counted, f.symbol)
              for k, f in enumerate(frames, 1)]
    first_snapshot = {}
    for f in frames:
        if f.stream is None:
            first_snapshot.setdefault(f.symbol or "", f.index)
    missing = [s for s in symbols if s not in first_snapshot]
    if missing:
        raise ReplayError(f"no depth snapshot line fits {', '.join(missing)} (its lastUpdateId must straddle one "
                          "of the symbol's depth events): a client cannot build those books", src)
    core = VenueReplay(src, "binance", frames, tuple(symbols), market=market or "usdm", faults=faults,
                       first_snapshot=first_snapshot)
    core.skipped = skipped
    return core
