"""The monitor's multi-symbol venue session (sans-I/O) and its recorder.

:class:`VenueSession` sits between the transport's messages and a venue core of
:mod:`ddms.io.venues` (Kraken, OKX, Coinbase, Binance with many symbols): it says which messages
to send to subscribe (:meth:`VenueSession.subscribe_messages`), feeds every received message to
the core, and turns the core's :class:`~ddms.io.levels.Resync` actions into what the venue needs
(:class:`Send` an unsubscribe + subscribe of that symbol -- Kraken, OKX and Coinbase answer with
a fresh snapshot; or :class:`FetchSnapshot` of that symbol's REST depth -- Binance).  One resync
per symbol is in flight at a time; the other symbols keep running.  It also keeps per-symbol
receive counts and latencies for the display.

How the venue and symbols are known (no option needed against ``ddms serve-feed``): the
handshake's ``X-DDMS-Protocol`` / ``X-DDMS-Symbols`` / ``X-DDMS-Market`` / ``X-DDMS-Snapshot``
headers; otherwise the URL's host (``ws.kraken.com``, ``ws.okx.com``, ``ws-feed...coinbase.com``,
Binance hosts with ``streams=`` naming depth streams of several symbols) and ``--symbols``.

:class:`Recorder` writes a session as a cryptofeed capture (:mod:`ddms.io.cryptofeed`): the
connection line ``<url> <-> <ts>`` (with ``#venue=<venue>`` appended when the URL does not say
the venue, e.g. a loopback replay), the messages sent ``<url> <- <ts>: <json>``, every message
received as received ``<ts>: <raw>``, and every REST snapshot fetched ``<url> -> <ts>: <body>``,
inline (one file).  ``serve-feed``, ``run``, ``backtest`` and ``convert`` read it back.

Numbering: the engine rows of a session are numbered as a capture reader numbers the
session's recording (:class:`~ddms.io.formats.SymbolBatches` over
:class:`~ddms.io.cryptofeed.CryptofeedReader`): messages count when their JSON parses, REST
snapshots count as messages, and each message that made rows is one engine line; the rows go to
the engine message by message, in the order fed.  So a monitor's views at line N are ``ddms
run``'s over its recording at line N, and a monitor checkpoint is a checkpoint of that replay
too (:mod:`ddms.feeds.checkpoints`).

Cost per message: one JSON decode (:func:`~ddms.io.venues.base.loads_json`: orjson with the
standard library's outcome) plus the venue core's work; per symbol a few counters.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import parse_qs, urljoin, urlsplit, urlunsplit

import numpy as np

from ddms.errors import DdmsError
from ddms.io.cryptofeed import resync_all
from ddms.io.events import EventBatch, concat
from ddms.io.formats import renumber
from ddms.io.levels import ASKS, BIDS, Resync, SymbolEvents
from ddms.io.symbols import symbol_id, with_symbol
from ddms.io.venues.base import loads_json
from ddms.io.venues.binance_book import MAX_STREAMS

__all__ = ["IN_STREAM_VENUES", "FetchSnapshot", "Recorder", "SendText", "VenueSession", "binance_streams",
           "binance_symbols", "venue_from_url"]

IN_STREAM_VENUES = ("kraken", "okx", "coinbase")
SUBSCRIBE_BATCH = 200
"""Streams per Binance SUBSCRIBE message (client libraries batch by 200-250; the venue allows 5
incoming messages a second on spot, 10 on futures: the session spaces its messages by
``subscribe_interval``, 0.25 s unless the server is a ddms replay, which has no such limit)."""
_REST = {"spot": ("https://api.binance.com", "/api/v3/depth", 5000),
         "usdm": ("https://fapi.binance.com", "/fapi/v1/depth", 1000),
         "coinm": ("https://dapi.binance.com", "/dapi/v1/depth", 1000)}


@dataclass(frozen=True, slots=True)
class SendText:
    """Send ``text`` on the websocket (a subscription change)."""

    text: str
    reason: str
    delay: float = 0.0      # seconds to wait before sending (a venue's limit on messages per second)


@dataclass(frozen=True, slots=True)
class FetchSnapshot:
    """Fetch ``url`` (the REST depth snapshot of ``symbol``) and hand it to
    :meth:`VenueSession.apply_snapshot`."""

    symbol: str
    url: str
    reason: str


def binance_streams(url: str) -> list[str]:
    """The Binance stream names a URL carries (``/stream?streams=a/b``, ``/ws/a``); empty for
    a bare ``/stream``, which carries what the client SUBSCRIBEs.  O(len(url))."""
    parts = urlsplit(url)
    names = []
    for v in parse_qs(parts.query).get("streams", []):
        names += v.split("/")
    if parts.path.startswith("/ws/"):
        names += parts.path[4:].split("/")
    return [n for n in names if n]


def venue_from_url(url: str) -> tuple[str | None, list[str]]:
    """``(venue, symbols)`` told by a URL alone: the venue from the host (``binance`` only when
    ``streams=`` names depth streams of several symbols: one symbol keeps the single-book
    monitor), the symbols from Binance stream names."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    for key, venue in (("kraken", "kraken"), ("okx.com", "okx"), ("okex.com", "okx"), ("coinbase", "coinbase")):
        if key in host:
            return venue, []
    if "binance" in host:
        syms = list(dict.fromkeys(n.split("@", 1)[0].upper() for n in binance_streams(url) if "@depth" in n.lower()))
        if len(syms) > 1:
            return "binance", syms
    return None, []


def binance_symbols(url: str, snapshot: str | None = None) -> list[str]:
    """The symbols a Binance feed follows when its server names none (``X-DDMS-Symbols``
    missing: ``ddms serve-feed`` of an hftbacktest capture of one symbol): the symbols of the
    URL's depth streams (``btcusdt@depth@0ms`` -> ``BTCUSDT``), else the ``symbol=`` of the
    advertised snapshot path (``/fapi/v1/depth?symbol=BTCUSDT&limit=1000``); empty when neither
    says.  O(len(url))."""
    syms = list(dict.fromkeys(n.split("@", 1)[0].upper() for n in binance_streams(url) if "@depth" in n.lower()))
    if not syms and snapshot:
        syms = [s.upper() for s in parse_qs(urlsplit(snapshot).query).get("symbol", []) if s]
    return syms


class _SymStats:
    __slots__ = ("lat", "last_lat_us", "received")

    def __init__(self) -> None:
        self.received = 0
        self.lat: deque[int] = deque(maxlen=1024)
        self.last_lat_us: float | None = None


class VenueSession:
    """One venue connection's symbols.  ``venue``: ``kraken``, ``okx``, ``coinbase`` or
    ``binance``; ``symbols`` as the venue spells them (upper case); ``market`` (Binance):
    ``futures``/``spot`` (+ ``rest``: ``spot``/``usdm``/``coinm`` for the snapshot path);
    ``snapshot`` a REST path template with ``{symbol}`` (advertised by the server)."""

    def __init__(self, venue: str, symbols: list[str], url: str, *, market: str | None = None,
                 snapshot: str | None = None, depth: int = 1000, stream_kinds: Sequence[str] = (),
                 subscribe_interval: float = 0.25, max_streams: int = MAX_STREAMS) -> None:
        if venue not in (*IN_STREAM_VENUES, "binance"):
            raise DdmsError(f"{url}: unknown venue {venue!r}")
        if not symbols:
            raise DdmsError(f"{url}: which symbols? The server did not say; give --symbols A,B,...")
        self.venue = venue
        self.symbols = [s.upper() for s in symbols]
        self.url = url
        self.stream_kinds = list(stream_kinds)
        self.subscribe_interval = subscribe_interval
        self.max_streams = max_streams
        self._sub_id = 0
        if venue == "binance" and not binance_streams(url) and len(self.symbols) > max_streams:
            raise DdmsError(f"{url}: {len(self.symbols):,} symbols: a Binance connection listens to at most "
                            f"{max_streams} streams; the monitor opens one connection per {max_streams} symbols "
                            "(without --checkpoint)")
        self.depth = depth
        self.snapshot_template = snapshot
        self.messages = 0
        # numbering as a capture reader numbers the recording (CryptofeedParser, SymbolBatches), so
        # that a recording and the monitor's checkpoints join up (see take_events)
        self.numbered = 0         # messages numbered: received messages whose JSON parses, REST snapshots
        self.line_base = 0        # messages numbered before this process (a restored checkpoint)
        self.line = 0             # engine lines handed out (take_events); a restored checkpoint's line
        self.last_src: int | None = None   # the message number of the last line handed out
        self.seen: dict[str, None] = {}    # symbols whose rows were handed out, in order of first appearance
        self.restored = False     # restored from a checkpoint: the first connection resyncs every symbol
        self.want: str | None = None   # the symbol a replay of the recording keeps (None: every symbol)
        self._queue: list = []    # rows of each message in order (_take_now), numbered by message
        self.malformed_json = 0
        self.stats = {s: _SymStats() for s in self.symbols}
        self._inflight: set[str] = set()      # symbols with a resync under way
        self.rest = None
        if venue == "kraken":
            from ddms.io.venues.kraken import KrakenBooks
            self.core: Any = KrakenBooks(url)
        elif venue == "okx":
            from ddms.io.venues.okx import OkxBooks
            self.core = OkxBooks(url)
        elif venue == "coinbase":
            from ddms.io.venues.coinbase import CoinbaseBooks
            self.core = CoinbaseBooks(url)
        else:
            from ddms.io.venues.binance import BinanceBooks
            host = (urlsplit(url).hostname or "").lower()
            self.rest = "coinm" if "dstream" in host else (
                "spot" if market == "spot" or (market is None and "fstream" not in host) else "usdm")
            if snapshot and "/dapi/" in snapshot:
                self.rest = "coinm"
            self.core = BinanceBooks("spot" if self.rest == "spot" else "futures", url)

    # -- subscriptions ---------------------------------------------------------------------------
    def subscribe_messages(self, symbols: list[str] | None = None, op: str = "subscribe") -> list[str]:
        """The messages that (un)subscribe ``symbols`` (default: all) on this venue."""
        syms = symbols if symbols is not None else self.symbols
        if self.venue == "kraken":
            return [json.dumps({"event": op, "pair": syms, "subscription": {"name": "book", "depth": self.depth}})]
        if self.venue == "okx":
            return [json.dumps({"op": op, "args": [{"channel": "books", "instId": s} for s in syms]})]
        if self.venue == "coinbase":
            return [json.dumps({"type": op, "product_ids": syms, "channels": ["level2", "ticker"]})]
        if binance_streams(self.url):
            return []        # Binance: the URL names the streams
        return self._binance_subscribe(syms, op)

    def _binance_subscribe(self, syms: list[str], op: str) -> list[str]:
        """Binance on a URL that names no stream (``/stream``: a capture whose streams do not fit
        in one URL, or a real feed with ``--symbols``): ``SUBSCRIBE`` messages of at most
        :data:`SUBSCRIBE_BATCH` streams each -- every symbol's depth stream, then bookTicker
        streams (the top-of-book cross-check) for as many symbols as the connection's
        ``max_streams`` (:data:`MAX_STREAMS`) leaves room for.  The kinds are the server's (``X-DDMS-Streams``),
        else ``depth@100ms`` and ``bookTicker``."""
        kinds = self.stream_kinds or ["depth@100ms", "bookTicker"]
        depth = next((k for k in kinds if k.split("@", 1)[0] == "depth"), "depth@100ms")
        names = [f"{s.lower()}@{depth}" for s in syms]
        if "bookTicker" in kinds:
            names += [f"{s.lower()}@bookTicker" for s in syms[:max(0, self.max_streams - len(names))]]
        out = []
        for i in range(0, len(names), SUBSCRIBE_BATCH):
            self._sub_id += 1
            out.append(json.dumps({"method": op.upper(), "params": names[i:i + SUBSCRIBE_BATCH], "id": self._sub_id}))
        return out

    def on_connect(self, number: int) -> list[SendText | FetchSnapshot]:
        """What to do on connection ``number``: subscribe; after a reconnect (or on the first
        connection of a process restored from a checkpoint) every symbol may have missed
        messages, so each one resyncs (:func:`ddms.io.cryptofeed.resync_all`, as a capture's
        reader does at a connection line after the first)."""
        acts: list[SendText | FetchSnapshot] = []
        if number > 1 or self.restored:
            self._inflight.clear()
            why = f"reconnected (connection {number})" if number > 1 else "restored from a checkpoint"
            self.restored = False
            acts += self._perform(tuple(resync_all(self.core, self.symbols, why, self.line_base + self.numbered)),
                                  resub=False)
        acts += [SendText(t, "subscribe", i * self.subscribe_interval) for i, t in enumerate(self.subscribe_messages())]
        return acts

    def resync_all(self, reason: str) -> list[SendText | FetchSnapshot]:
        """Every symbol resyncs (the consumer fell behind and messages were dropped)."""
        self._inflight.clear()
        acts: list[SendText | FetchSnapshot] = []
        for s in self.symbols:
            acts += self._perform(self._resync_all(s, reason))
        return acts

    def _resync_all(self, sym: str, reason: str) -> tuple[Resync, ...]:
        return tuple(resync_all(self.core, [sym], reason, self.line_base + self.numbered))

    def _perform(self, acts: tuple[Resync, ...], resub: bool = True) -> list[SendText | FetchSnapshot]:
        out: list[SendText | FetchSnapshot] = []
        for a in acts:
            if a.symbol in self._inflight or a.symbol not in self.stats:
                continue
            self._inflight.add(a.symbol)
            if self.venue == "binance":
                out.append(FetchSnapshot(a.symbol, self.snapshot_url(a.symbol), a.reason))
            elif resub:
                texts = self.subscribe_messages([a.symbol], "unsubscribe") + self.subscribe_messages([a.symbol])
                out += [SendText(t, f"resubscribe {a.symbol}: {a.reason}") for t in texts]
        return out

    def snapshot_url(self, symbol: str) -> str:
        """The REST depth snapshot URL of ``symbol`` (Binance)."""
        parts = urlsplit(self.url)
        host = (parts.hostname or "").lower()
        if self.snapshot_template:
            http = urlunsplit(("https" if parts.scheme == "wss" else "http", parts.netloc, "/", "", ""))
            return urljoin(http, self.snapshot_template.replace("{symbol}", symbol))
        base, path, limit = _REST[self.rest or "usdm"]
        if "binance" not in host:
            base = urlunsplit(("https" if parts.scheme == "wss" else "http", parts.netloc, "", "", ""))
        return f"{base}{path}?symbol={symbol}&limit={limit}"

    # -- input ------------------------------------------------------------------------------------
    def feed(self, data: bytes) -> tuple[list[SendText | FetchSnapshot], str | None]:
        """One received message: the actions, and the symbol it touched (None: none)."""
        return self._feed(data, True)

    def _feed(self, data: bytes, take: bool) -> tuple[list[SendText | FetchSnapshot], str | None]:
        """:meth:`feed`; ``take``: queue the message's rows now (else the chunk lane takes them)."""
        self.messages += 1
        core = self.core
        try:
            msg = loads_json(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            self.malformed_json += 1      # not numbered (a capture's reader skips it too, under --skip-bad)
            core.malformed += 1
            core.bad_messages += 1
            from ddms.errors import InputError
            core.reports.append(InputError(f"malformed JSON: {e}", self.url, self.line_base + self.numbered + 1,
                                           bytes(data[:200]).decode("utf-8", "replace")))
            return [], None
        self.numbered += 1
        n = self.line_base + self.numbered     # the message's number (its rows' source line)
        sym = self._symbol_of(msg)
        if sym is not None and sym not in self.stats:     # a symbol not chosen (--symbols): not followed
            core.ignored["other_symbol"] = core.ignored.get("other_symbol", 0) + 1
            return [], None
        acts = core.feed(msg, n)
        if take:
            self._take_now()
        if sym is not None:
            self.stats[sym].received += 1
            if self._synced(sym):
                self._inflight.discard(sym)
            acts = acts + self._lost_snapshot((sym,), n)
        return self._perform(acts), sym

    def _lost_snapshot(self, syms, line: int) -> tuple[Resync, ...]:
        """Kraken, OKX, Coinbase: a symbol whose book updates arrive while it has never had a
        snapshot and never resynced lost its snapshot (the venue sends the snapshot first on the
        subscription): resync it once (resubscribe), reported with the reason, instead of dropping
        its updates silently for the rest of the session.  After a resync its updates are dropped
        until the snapshot, as for any resync.  Cost: a dict look-up per touched symbol."""
        if self.venue == "binance":
            return ()
        out: tuple[Resync, ...] = ()
        for sym in syms:
            st = self.core.status.get(sym) if sym is not None else None
            if (st is not None and not st.synced and st.depth_events and not st.snapshots and not st.resyncs
                    and sym not in self._inflight):
                out += self.core._resync(sym, f"{st.depth_events} book update(s) and no snapshot (lost)", line,
                                         gap=True)
        return out

    def feed_many(self, datas: Sequence[bytes]) -> tuple[list[SendText | FetchSnapshot], list[str | None]]:
        """Many received messages in order: the actions of all of them, and the symbol each
        touched -- exactly what :meth:`feed` per message gives (counters, resyncs, reports,
        events), but on a Binance connection the in-sequence depth updates of synchronized
        symbols are applied many at a time by the numba chunk lane (:meth:`BinanceBooks.feed_chunk
        <ddms.io.venues.binance.BinanceBooks.feed_chunk>`); every other message takes
        :meth:`feed`'s path, in order.  Cost: the lane's O(bytes + levels) plus a few us of
        Python per fast message, against a ``json.loads`` and the per-message path each."""
        if len(datas) >= 2 and self.venue != "binance":
            return self._feed_lane(datas)
        if len(datas) < 2:
            acts: list[SendText | FetchSnapshot] = []
            syms: list[str | None] = []
            for d in datas:
                a, sym = self.feed(d)
                acts += a
                syms.append(sym)
            return acts, syms
        out: list[SendText | FetchSnapshot] = []
        touched: list[str | None] = [None] * len(datas)
        base, m0 = self.line_base, self.messages
        numbers = np.arange(base + self.numbered + 1, base + self.numbered + 1 + len(datas), dtype=np.int64)
        core = self.core
        if core._lane is None:
            from ddms.io.venues.binance_chunk import ChunkLane
            # others: the kernel also takes bookTickers (of followed symbols: the others have no
            # slot) and trades/klines, which on_ignored counts as feed does (other_symbol)
            core._lane = ChunkLane(core, follow=self.stats.__contains__, others=True)
        lane = core._lane
        self._take_now()    # rows queued before this call (none: apply_snapshot takes its own)
        fallback = self._fallback(datas, numbers, touched, out, base, m0)
        books, stats = core.books, self.stats

        def on_fast(i0: int, slots: np.ndarray) -> None:
            names = lane.symbols
            for j, s in enumerate(slots.tolist(), i0):
                if s < 0:
                    continue            # a trade/kline: on_ignored counted it
                sym = names[s]
                touched[j] = sym
                stats[sym].received += 1
                # the kernel applies updates of synchronized books only, and takes tickers of any;
                # no snapshot or resync happens inside a kernel run: synced at its end is enough
                if books[sym].synced:
                    self._inflight.discard(sym)
            self.messages += len(slots)
            self.numbered += len(slots)

        def on_ignored(i: int) -> bool:
            sym = self._lane_ignored(datas[i])
            touched[i] = sym
            if sym is None:
                return True
            if sym not in stats:
                core.ignored["other_symbol"] = core.ignored.get("other_symbol", 0) + 1
                touched[i] = None
                return False
            stats[sym].received += 1
            if self._synced(sym):
                self._inflight.discard(sym)
            return True

        lane.on_ignored = on_ignored
        try:
            _, events = core.feed_chunk(list(datas), numbers, fallback=fallback, on_fast=on_fast)
        finally:
            lane.on_ignored = None
        self._queue += events
        self.messages = m0 + len(datas)
        return out, touched

    def _feed_lane(self, datas: Sequence[bytes]) -> tuple[list[SendText | FetchSnapshot], list[str | None]]:
        """:meth:`feed_many` on a Kraken, OKX or Coinbase connection: the messages through the
        core's numba chunk lane (:class:`~ddms.io.venues.coinbase_chunk.CoinbaseLane` and its
        subclasses: snapshots, updates of synced books, checksums, continuity, tickers and the
        messages only counted as ignored), the rest through :meth:`feed`'s path in order.  What
        :meth:`feed` does per message besides the core is done here for the lane's messages: the
        message numbers (a malformed JSON message takes none), ``received`` per symbol, the end
        of a resync under way when the book is synced, symbols not followed (the lane makes no
        book for them: their messages take the Python path, which counts them ``other_symbol``;
        a message the kernel only counts as ignored is checked by :meth:`_lane_ignored`), and the
        actions in message order (a checksum mismatch's at once).  Cost: the lane's O(bytes +
        levels) in numba, O(1) Python per applied message, a ``json.loads`` per ignored one."""
        from ddms.io.venues.coinbase_chunk import _M_SYNCED
        out: list[SendText | FetchSnapshot] = []
        touched: list[str | None] = [None] * len(datas)
        base, m0 = self.line_base, self.messages
        numbers = np.arange(base + self.numbered + 1, base + self.numbered + 1 + len(datas), dtype=np.int64)
        core = self.core
        self._take_now()    # rows queued before this call
        if core._lane is None:
            core.feed_chunk([], [])          # makes the lane
        lane = core._lane
        fallback = self._fallback(datas, numbers, touched, out, base, m0)

        def on_fast(i0: int, slots: np.ndarray) -> None:
            names, meta, stats = lane._sym, lane._meta, self.stats
            for j, s in enumerate(slots.tolist(), i0):
                if s < 0:
                    continue            # ignored (see on_ignored) or a message of no symbol (a heartbeat)
                sym = names[s]
                touched[j] = sym
                stats[sym].received += 1
                if meta[s, _M_SYNCED]:  # no resync starts inside a kernel run: synced at its end is enough
                    self._inflight.discard(sym)
            self.messages += len(slots)
            self.numbered += len(slots)

        def on_ignored(i: int) -> bool:
            sym = self._lane_ignored(datas[i])
            touched[i] = sym
            if sym is None:
                return True
            if sym not in self.stats:
                core.ignored["other_symbol"] = core.ignored.get("other_symbol", 0) + 1
                touched[i] = None
                return False
            self.stats[sym].received += 1
            if self._synced(sym):
                self._inflight.discard(sym)
            return True

        lane.follow = self.stats.__contains__
        lane.on_ignored = on_ignored
        lane.on_actions = lambda acts: out.extend(self._perform(tuple(acts)))
        try:
            acts, events = core.feed_chunk(list(datas), numbers, fallback=fallback, on_fast=on_fast)
        finally:
            lane.follow = lane.on_ignored = lane.on_actions = None
        out += self._perform(tuple(acts))
        out += self._perform(self._lost_snapshot(dict.fromkeys(touched), self.line_base + self.numbered))
        self._queue += events
        self.messages = m0 + len(datas)
        return out, touched

    def _fallback(self, datas: Sequence[bytes], numbers: np.ndarray, touched: list[str | None],
                  out: list[SendText | FetchSnapshot], base: int, m0: int):
        """The chunk lanes' ``fallback(t)``: message ``t`` of ``datas`` through :meth:`feed`'s
        path (its rows queued in order by the lane), numbered as :meth:`feed` numbers it (a
        malformed JSON message takes no number: the later ones move down by one), its actions
        appended to ``out``.  O(1) Python plus the message's own path."""
        def fallback(t: int) -> tuple:
            self.messages, self.numbered = m0 + t, int(numbers[t]) - base - 1
            before = self.numbered
            a, touched[t] = self._feed(datas[t], False)   # its rows: the lane takes them, in order
            if self.numbered == before:        # malformed JSON: not numbered, the later ones keep theirs
                numbers[t + 1:] -= 1
            out.extend(a)
            return ()
        return fallback

    def _lane_ignored(self, data: bytes) -> str | None:
        """The symbol :meth:`feed` finds in a message the lane only counts as ignored (OKX
        tickers and trades, Coinbase matches, ...)."""
        return self._symbol_of(loads_json(data))

    def _take_now(self) -> None:
        """Queue the rows the core made since the last take, now: called after every message, so
        the queue holds them message by message (the order a capture's reader hands them out).
        Binance: the core's events; the in-stream venues: the books' row tuples (their arrays
        are built once per :meth:`take_batch`, not per message).  O(rows)."""
        core = self.core
        if self.venue == "binance":
            self._queue += core.take_events()
            return
        dirty = core._dirty
        if dirty:
            books = core.books
            for sym in dict.fromkeys(dirty):     # as VenueBooks.take_events orders them
                rows = books[sym].take_rows()
                if rows:
                    self._queue.append((sym, rows))
            dirty.clear()

    def _build(self) -> tuple[EventBatch, list[str], list[int]] | None:
        """The queued rows as one batch (five columns) renumbered as a capture reader numbers
        the recording of this session (:class:`ddms.io.formats.SymbolBatches`: one line per
        message that made rows, consecutive after :attr:`line`), with the symbol of each run of
        rows and the runs' lengths; None when nothing is queued.  O(rows)."""
        self._take_now()
        q, self._queue = self._queue, []
        if self.venue == "binance":
            if any(type(ev) is not SymbolEvents for ev in q):   # the chunk lane's ChunkEvents among them
                return self._build_mixed(q)
            q = [ev for ev in q if len(ev.batch)]
            if not q:
                return None
            syms, counts = [ev.symbol for ev in q], [len(ev.batch) for ev in q]
            b = q[0].batch if len(q) == 1 else concat([ev.batch for ev in q])
            rel, sign, cols, src = b.rel, b.sign, b.cols, b.line
        else:
            if not q:
                return None
            if any(type(x) is not tuple for x in q):     # the chunk lane's events among the rows
                return self._build_mixed(q)
            syms, counts = [sym for sym, _ in q], [len(rows) for _, rows in q]
            a = np.array([r for _, rows in q for r in rows], np.float64)
            rel, sign = a[:, 0].astype(np.int8), a[:, 1].astype(np.int8)
            cols, src = np.ascontiguousarray(a[:, 2:7]), a[:, 7].astype(np.int64)
        for sym in syms:
            self.seen.setdefault(sym)
        new, self.line, self.last_src = renumber(src, self.line, self.last_src)
        return EventBatch(rel, sign, cols, new, int(new[0]), self.line), syms, counts

    def _build_mixed(self, q: list) -> tuple[EventBatch, list[str], list[int]] | None:
        """:meth:`_build` of a queue holding the chunk lane's :class:`SymbolEvents` and
        :class:`~ddms.io.levels.ChunkEvents` besides row tuples: the same batch, and a run per
        symbol and message as the per-message queue has.  O(rows)."""
        from ddms.io.levels import ChunkEvents
        parts: list[EventBatch] = []
        syms: list[str] = []
        counts: list[int] = []
        for x in q:
            if type(x) is tuple:
                sym, rows = x
                if not rows:
                    continue
                a = np.array(rows, np.float64)
                line = a[:, 7].astype(np.int64)
                parts.append(EventBatch(a[:, 0].astype(np.int8), a[:, 1].astype(np.int8),
                                        np.ascontiguousarray(a[:, 2:7]), line, int(line[0]), int(line[-1])))
                syms.append(sym)
                counts.append(len(rows))
                continue
            b = x.batch
            n = len(b)
            if not n:
                continue
            parts.append(b)
            if type(x) is ChunkEvents:
                sym = x.sym
                cut = np.flatnonzero((sym[1:] != sym[:-1]) | (b.line[1:] != b.line[:-1])) + 1
                starts = np.concatenate([[0], cut])
                counts += np.diff(np.append(starts, n)).tolist()
                syms += [x.symbols[i] for i in sym[starts].tolist()]
            else:
                syms.append(x.symbol)
                counts.append(n)
        if not parts:
            return None
        for sym in syms:
            self.seen.setdefault(sym)
        b = parts[0] if len(parts) == 1 else concat(parts)
        new, self.line, self.last_src = renumber(b.line, self.line, self.last_src)
        return EventBatch(b.rel, b.sign, b.cols, new, int(new[0]), self.line), syms, counts

    @property
    def label(self) -> str:
        """The venue as a cryptofeed capture names it (``binance`` spot, ``binance_futures``
        USD-M, ``binance_delivery`` COIN-M, ``kraken``, ``okx``, ``coinbase``): what tells two
        venues' books apart when a monitor watches several."""
        if self.venue != "binance":
            return self.venue
        return {"spot": "binance", "coinm": "binance_delivery"}.get(self.rest or "usdm", "binance_futures")

    def take_batch(self, symbol_column: bool = False, names: dict[str, str] | None = None) -> EventBatch | None:
        """The engine rows made since the last call, message by message in the order fed (each
        message's rows as the core's ``take_events`` gives them), as one batch renumbered as
        ``ddms run`` numbers this session's recording, so the monitor's engine applies the very
        rows, in the very order and on the very lines, of ``ddms run`` over the recording, and
        its checkpoints are checkpoints of that run too.  ``symbol_column``: each row's
        :func:`~ddms.io.symbols.symbol_id` as a sixth column, of ``names[symbol]`` when ``names``
        has it (a monitor of several venues keys a symbol two venues spell alike ``VENUE:SYMBOL``).
        None: no rows.  O(rows)."""
        built = self._build()
        if built is None:
            return None
        b, syms, counts = built
        if symbol_column:
            nm = names or {}
            ids = np.repeat(np.array([symbol_id(nm.get(s, s)) for s in syms], np.float64), counts)
            b = EventBatch(b.rel, b.sign, with_symbol(b.cols, ids), b.line, b.first_line, b.last_line)
        return b

    def take_events(self) -> list[SymbolEvents]:
        """:meth:`take_batch` cut into one :class:`SymbolEvents` per run of rows of one symbol
        (in order).  O(rows)."""
        built = self._build()
        if built is None:
            return []
        b, syms, counts = built
        out, lo = [], 0
        for sym, n in zip(syms, counts, strict=True):
            line = b.line[lo:lo + n]
            out.append(SymbolEvents(self.core.venue, sym, EventBatch(b.rel[lo:lo + n], b.sign[lo:lo + n],
                                                                     b.cols[lo:lo + n], line, int(line[0]),
                                                                     int(line[-1]))))
            lo += n
        return out

    def apply_snapshot(self, symbol: str, body: bytes, recv_ns: int = 0) -> list[SendText | FetchSnapshot]:
        """A fetched REST snapshot of ``symbol`` (Binance), received at ``recv_ns`` (unix ns: the
        rows' ``t`` when the snapshot carries no event time; the monitor passes the time it
        records, so a replay of the recording makes the same rows).  Numbered as a message."""
        self._inflight.discard(symbol)
        self.numbered += 1
        acts = self.core.apply_snapshot(symbol, body, self.line_base + self.numbered, recv_ns)
        self._take_now()
        return self._perform(acts)

    def snapshot_failed(self, symbol: str) -> None:
        self._inflight.discard(symbol)

    def _synced(self, sym: str) -> bool:
        if self.venue == "binance":
            bk = self.core.books.get(sym)
            return bk is not None and bk.synced
        st = self.core.status.get(sym)
        return st is not None and st.synced

    def _symbol_of(self, msg: Any) -> str | None:
        v = self.venue
        if v == "kraken":
            return msg[-1].upper() if isinstance(msg, list) and msg and isinstance(msg[-1], str) else None
        if not isinstance(msg, dict):
            return None
        if v == "okx":
            arg = msg.get("arg")
            inst = arg.get("instId") if isinstance(arg, dict) and "event" not in msg else None
            return inst.upper() if isinstance(inst, str) else None
        if v == "coinbase":
            p = msg.get("product_id")
            return p.upper() if isinstance(p, str) else None
        d = msg.get("data", msg)
        s = d.get("s") if isinstance(d, dict) else None
        return s.upper() if isinstance(s, str) else None

    def record_latency(self, sym: str, ns: int) -> None:
        st = self.stats.get(sym)
        if st is not None:
            st.lat.append(ns)
            st.last_lat_us = round(ns / 1e3, 1)

    # -- output -----------------------------------------------------------------------------------
    def best(self, sym: str) -> tuple[list[str] | None, list[str] | None]:
        """Best bid and ask of ``sym`` as ``[price, qty]`` strings (None: empty side)."""
        if self.venue == "binance":
            bk = self.core.books.get(sym)
            if bk is None or not bk.synced:
                return None, None
            bb, ba = bk.best_bid(), bk.best_ask()
            return ([str(x) for x in bb] if bb else None), ([str(x) for x in ba] if ba else None)
        book = self.core.books.get(sym)
        if book is None:
            return None, None
        b, a = book.top(BIDS, 1), book.top(ASKS, 1)
        return (list(b[0]) if b else None), (list(a[0]) if a else None)

    def summary(self, active_seconds: float = 0.0) -> dict[str, Any]:
        """Counters summed over symbols, ``symbols`` (each symbol's counters, best bid/ask, rate,
        latency), ``unknown_fields``, ``checksum_*``."""
        s = self.core.summary()
        for k in ("checksum_checked", "checksum_mismatch", "bookticker_checked", "bookticker_mismatch", "crossed"):
            s.setdefault(k, 0)
        s["malformed"] = s.get("malformed", 0)
        s["messages"] = self.messages
        syms = s["symbols"]
        for sym in self.symbols:
            d = syms.setdefault(sym, {"synced": False, "messages": 0, "depth_events": 0, "snapshots": 0,
                                      "gaps": 0, "resyncs": 0, "stale": 0, "malformed": 0, "crossed": 0})
            for k in ("bookticker_checked", "bookticker_mismatch", "checksum_checked", "checksum_mismatch"):
                d.setdefault(k, 0)
            st = self.stats[sym]
            bb, ba = self.best(sym)
            d["best_bid"], d["best_ask"] = bb, ba
            d["received"] = st.received
            d["messages_per_s"] = round(st.received / active_seconds, 1) if active_seconds > 0 else None
            d["latency_us"] = st.last_lat_us
        s["venue"] = self.venue
        return s

    def _check(self) -> None:
        self.core._check()
        assert self._inflight <= set(self.symbols)
        top = self.line_base + self.numbered
        assert self.last_src is None or self.last_src <= top, "a line handed out of a message not fed yet"
        assert self.line >= 0 and (self.last_src is None or self.line > 0), "a source without a line"


class Recorder:
    """Writes a session as a one-file cryptofeed capture (see the module docstring).  ``venue``
    (a :data:`ddms.io.cryptofeed.VENUES` name: ``binance_futures`` for USD-M and COIN-M) is
    appended to the connection URL as ``#venue=`` when the URL does not tell it.  Each line is
    flushed at once (a recording cut by a crash keeps every line before).

    It knows its position in the file as a capture's reader states it (:meth:`position`: lines,
    bytes, the last line; the running receive time; the Binance depth streams subscribed; the
    connections opened), so that a monitor checkpoint can say where in the recording it was
    taken.  ``out`` is a binary file positioned at its end; ``resume`` continues the counts of a
    recording written up to there (:meth:`state` of the process before)."""

    def __init__(self, out: IO[bytes], venue: str, path: str = "", resume: dict[str, Any] | None = None) -> None:
        self.out = out
        self.venue = venue
        self.path = path
        r = resume or {}
        self.lines, self.offset = int(r.get("line", 0)), int(r.get("offset", 0))
        self.last = r.get("last_bytes", b"")
        self.time = float(r.get("time", 0.0))
        self.subscribed: set[str] = set(r.get("subscribed", ()))
        self.connections = int(r.get("connections", 0))

    def _url(self, url: str) -> str:
        from ddms.io.cryptofeed import venue_of
        if venue_of(url) == self.venue:
            return url
        return url.split("#", 1)[0] + f"#venue={self.venue}"

    def _write(self, text: str, ts: str) -> None:
        raw = (text + "\n").encode("utf-8", "surrogateescape")
        self.out.write(raw)
        self.out.flush()
        self.lines += 1
        self.offset += len(raw)
        self.last = raw
        self.time = max(self.time, float(ts))

    @staticmethod
    def stamp(t: float) -> str:
        """A receive time (unix seconds) as written: what a reader of the recording reads back."""
        return f"{t:.6f}"

    def opened(self, url: str, t: float) -> None:
        u = self._url(url)
        self.connections += 1
        if self.venue.startswith("binance"):
            from ddms.io.cryptofeed import depth_symbols
            self.subscribed |= depth_symbols("open", u, b"")
        ts = self.stamp(t)
        self._write(f"{u} <-> {ts}", ts)

    def sent(self, url: str, t: float, text: str) -> None:
        if self.venue.startswith("binance"):
            from ddms.io.cryptofeed import depth_symbols
            self.subscribed |= depth_symbols("sent", None, text.encode())
        ts = self.stamp(t)
        self._write(f"{self._url(url)} <- {ts}: {text}", ts)

    def received(self, t: float, data: bytes) -> None:
        text = bytes(data).decode("utf-8", "surrogateescape").replace("\r", " ").replace("\n", " ")
        ts = self.stamp(t)
        self._write(f"{ts}: {text}", ts)

    def rest(self, url: str, t: float | str, body: bytes) -> None:
        text = bytes(body).decode("utf-8", "surrogateescape").replace("\r", " ").replace("\n", " ")
        ts = t if isinstance(t, str) else self.stamp(t)
        self._write(f"{url} -> {ts}: {text}", ts)

    def _check(self) -> None:
        """The counts agree with the file: its size is the bytes counted, its last line the one
        kept (what a checkpoint's position claims)."""
        import os
        self.out.flush()
        assert os.fstat(self.out.fileno()).st_size == self.offset, "bytes counted != the file's size"
        assert self.last.endswith(b"\n") or not self.lines

    def position(self) -> dict[str, Any]:
        """Where the recording ends now, as :meth:`ddms.io.cursor.LineCursor.position`."""
        from ddms.io.cursor import position
        return position(self.path, self.lines, self.offset, self.last)

    def state(self) -> dict[str, Any]:
        """What a restarted process needs to continue this recording (JSON values): its
        position, running receive time, subscribed depth streams and connections."""
        return {"file": self.path, "position": self.position(), "time": self.time,
                "subscribed": sorted(self.subscribed), "connections": self.connections}
