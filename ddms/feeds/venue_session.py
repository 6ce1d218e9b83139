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

from ddms.errors import DdmsError
from ddms.io.levels import ASKS, BIDS, Resync, SymbolEvents
from ddms.io.venues.base import loads_json
from ddms.io.venues.binance_book import MAX_STREAMS

__all__ = ["IN_STREAM_VENUES", "FetchSnapshot", "Recorder", "SendText", "VenueSession", "venue_from_url"]

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


def _binance_streams(url: str) -> list[str]:
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
        syms = list(dict.fromkeys(n.split("@", 1)[0].upper() for n in _binance_streams(url) if "@depth" in n.lower()))
        if len(syms) > 1:
            return "binance", syms
    return None, []


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
                 subscribe_interval: float = 0.25) -> None:
        if venue not in (*IN_STREAM_VENUES, "binance"):
            raise DdmsError(f"{url}: unknown venue {venue!r}")
        if not symbols:
            raise DdmsError(f"{url}: which symbols? The server did not say; give --symbols A,B,...")
        self.venue = venue
        self.symbols = [s.upper() for s in symbols]
        self.url = url
        self.stream_kinds = list(stream_kinds)
        self.subscribe_interval = subscribe_interval
        self._sub_id = 0
        if venue == "binance" and not _binance_streams(url) and len(self.symbols) > MAX_STREAMS:
            raise DdmsError(f"{url}: {len(self.symbols):,} symbols: a Binance connection listens to at most "
                            f"{MAX_STREAMS} streams; run one monitor per {MAX_STREAMS} symbols (--symbols)")
        self.depth = depth
        self.snapshot_template = snapshot
        self.messages = 0
        self.line_base = 0        # engine lines before this process's first message (a restored checkpoint)
        self.malformed_json = 0
        self.stats = {s: _SymStats() for s in self.symbols}
        self._inflight: set[str] = set()      # symbols with a resync under way
        self._order: dict[str, None] = {}     # feed_many: symbols in the order first touched since take_events
        self._rows: dict[str, list] = {}      # feed_many: the lane's rows by symbol, not yet taken
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
        if _binance_streams(self.url):
            return []        # Binance: the URL names the streams
        return self._binance_subscribe(syms, op)

    def _binance_subscribe(self, syms: list[str], op: str) -> list[str]:
        """Binance on a URL that names no stream (``/stream``: a capture whose streams do not fit
        in one URL, or a real feed with ``--symbols``): ``SUBSCRIBE`` messages of at most
        :data:`SUBSCRIBE_BATCH` streams each -- every symbol's depth stream, then bookTicker
        streams (the top-of-book cross-check) for as many symbols as the connection's
        :data:`MAX_STREAMS` leaves room for.  The kinds are the server's (``X-DDMS-Streams``),
        else ``depth@100ms`` and ``bookTicker``."""
        kinds = self.stream_kinds or ["depth@100ms", "bookTicker"]
        depth = next((k for k in kinds if k.split("@", 1)[0] == "depth"), "depth@100ms")
        names = [f"{s.lower()}@{depth}" for s in syms]
        if "bookTicker" in kinds:
            names += [f"{s.lower()}@bookTicker" for s in syms[:max(0, MAX_STREAMS - len(names))]]
        out = []
        for i in range(0, len(names), SUBSCRIBE_BATCH):
            self._sub_id += 1
            out.append(json.dumps({"method": op.upper(), "params": names[i:i + SUBSCRIBE_BATCH], "id": self._sub_id}))
        return out

    def on_connect(self, number: int) -> list[SendText | FetchSnapshot]:
        """What to do on connection ``number``: subscribe; after a reconnect every symbol may
        have missed messages, so each one resyncs."""
        acts: list[SendText | FetchSnapshot] = []
        if number > 1:
            self._inflight.clear()
            for s in self.symbols:
                acts += self._perform(self._resync_all(s, f"reconnected (connection {number})"), resub=False)
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
        if self.venue == "binance":
            bk = self.core.book(sym)
            return tuple(Resync(sym, a.reason, a.message) for a in bk.resync(reason))
        return self.core._resync(sym, reason, self.line_base + self.messages)

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
        self.messages += 1
        n = self.line_base + self.messages     # the message's line (its rows' line in the engine)
        core = self.core
        try:
            msg = loads_json(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            self.malformed_json += 1
            core.malformed += 1
            core.bad_messages += 1
            from ddms.errors import InputError
            core.reports.append(InputError(f"malformed JSON: {e}", self.url, n,
                                           bytes(data[:200]).decode("utf-8", "replace")))
            return [], None
        sym = self._symbol_of(msg)
        if sym is not None and sym not in self.stats:     # a symbol not chosen (--symbols): not followed
            core.ignored["other_symbol"] = core.ignored.get("other_symbol", 0) + 1
            return [], None
        acts = core.feed(msg, n)
        if sym is not None:
            self.stats[sym].received += 1
            if self._synced(sym):
                self._inflight.discard(sym)
        return self._perform(acts), sym

    def feed_many(self, datas: Sequence[bytes]) -> tuple[list[SendText | FetchSnapshot], list[str | None]]:
        """Many received messages in order: the actions of all of them, and the symbol each
        touched -- exactly what :meth:`feed` per message gives (counters, resyncs, reports,
        events), but on a Binance connection the in-sequence depth updates of synchronized
        symbols are applied many at a time by the numba chunk lane (:meth:`BinanceBooks.feed_chunk
        <ddms.io.venues.binance.BinanceBooks.feed_chunk>`); every other message takes
        :meth:`feed`'s path, in order.  Cost: the lane's O(bytes + levels) plus a few us of
        Python per fast message, against a ``json.loads`` and the per-message path each."""
        if self.venue != "binance" or len(datas) < 2:
            acts: list[SendText | FetchSnapshot] = []
            syms: list[str | None] = []
            for d in datas:
                a, sym = self.feed(d)
                acts += a
                syms.append(sym)
            return acts, syms
        import numpy as np
        out: list[SendText | FetchSnapshot] = []
        touched: list[str | None] = [None] * len(datas)
        numbers = np.arange(self.messages + 1, self.messages + 1 + len(datas), dtype=np.int64)
        core = self.core
        if core._lane is None:
            from ddms.io.venues.binance_chunk import ChunkLane
            core._lane = ChunkLane(core, follow=self.stats.__contains__)   # others: feed's "other_symbol"
        order = self._order
        for sym in core._dirty:      # touched before this call (a snapshot, a resync)
            order.setdefault(sym)

        def fallback(t: int) -> tuple:
            self.messages = int(numbers[t]) - 1
            a, touched[t] = self.feed(datas[t])
            for sym in core._dirty:   # this message's touches (the lane takes them after it)
                order.setdefault(sym)
            out.extend(a)
            return ()

        def on_fast(i0: int, slots: np.ndarray) -> None:
            names = core._lane.symbols
            for j, s in enumerate(slots.tolist(), i0):
                sym = names[s]
                touched[j] = sym
                order.setdefault(sym)
                self.stats[sym].received += 1
                self._inflight.discard(sym)     # the kernel applies updates of synchronized books only
            self.messages += len(slots)

        _, events = core.feed_chunk(list(datas), numbers, fallback=fallback, on_fast=on_fast)
        for ev in events:
            self._rows.setdefault(ev.symbol, []).append(ev.batch)
        self.messages = int(numbers[-1])
        return out, touched

    def take_events(self) -> list[SymbolEvents]:
        """The engine rows queued since the last call, as the core's ``take_events`` after
        per-message feeding gives them: one batch per symbol in the order the symbols were first
        touched, every row numbered with the line of the message fed last (so
        :meth:`feed_many` changes nothing downstream).  O(rows)."""
        core = self.core
        if not self._order and not self._rows:
            return core.take_events()
        import numpy as np

        from ddms.io.events import EventBatch
        for sym in core._dirty:
            self._order.setdefault(sym)
        for ev in core.take_events():
            self._rows.setdefault(ev.symbol, []).append(ev.batch)
        line = core._line
        out = []
        for sym in self._order:
            parts = self._rows.pop(sym, None)
            if not parts:
                continue
            rel = np.concatenate([b.rel for b in parts])
            if len(rel):
                out.append(SymbolEvents(core.venue, sym, EventBatch(
                    rel, np.concatenate([b.sign for b in parts]), np.concatenate([b.cols for b in parts]),
                    np.full(len(rel), line, np.int64), line, line)))
        assert not self._rows, f"rows of untouched symbols {list(self._rows)}"
        self._order.clear()
        return out

    def apply_snapshot(self, symbol: str, body: bytes) -> list[SendText | FetchSnapshot]:
        """A fetched REST snapshot of ``symbol`` (Binance)."""
        self._inflight.discard(symbol)
        return self._perform(self.core.apply_snapshot(symbol, body, self.line_base + self.messages))

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


class Recorder:
    """Writes a session as a one-file cryptofeed capture (see the module docstring).  ``venue``
    (a :data:`ddms.io.cryptofeed.VENUES` name: ``binance_futures`` for USD-M and COIN-M) is
    appended to the connection URL as ``#venue=`` when the URL does not tell it.  Each line is
    flushed at once (a recording cut by a crash keeps every line before)."""

    def __init__(self, out: IO[str], venue: str) -> None:
        self.out = out
        self.venue = venue

    def _url(self, url: str) -> str:
        from ddms.io.cryptofeed import venue_of
        if venue_of(url) == self.venue:
            return url
        return url.split("#", 1)[0] + f"#venue={self.venue}"

    def _write(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def opened(self, url: str, t: float) -> None:
        self._write(f"{self._url(url)} <-> {t:.6f}")

    def sent(self, url: str, t: float, text: str) -> None:
        self._write(f"{self._url(url)} <- {t:.6f}: {text}")

    def received(self, t: float, data: bytes) -> None:
        text = bytes(data).decode("utf-8", "surrogateescape").replace("\r", " ").replace("\n", " ")
        self._write(f"{t:.6f}: {text}")

    def rest(self, url: str, t: float, body: bytes) -> None:
        text = bytes(body).decode("utf-8", "surrogateescape").replace("\r", " ").replace("\n", " ")
        self._write(f"{url} -> {t:.6f}: {text}")
