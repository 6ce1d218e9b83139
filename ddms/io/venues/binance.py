"""Binance spot, USD-M and COIN-M futures, many symbols on one combined stream (sans-I/O).

One :class:`~ddms.io.venues.binance_book.BinanceBook` per symbol does the whole diff-depth procedure
(buffering, the snapshot straddle, ``U``/``pu`` continuity, stale events, bookTicker checks:
``../shared/data/binance/README.md``); this module only routes: depth updates and bookTickers by
their ``s``, REST snapshots by the ``symbol=`` of the request, and renumbers each symbol's rows
with the input line of the message that caused them (one message, one atomic update).  COIN-M
uses the futures rules (``pu``); its extra fields (``ps``) are counted by the decoder's
``unknown_fields``, not refused.  Streams other than ``@depth`` and ``@bookTicker`` (trades,
klines, ...) are counted in ``ignored``.

A gap is the symbol's :class:`~ddms.io.levels.Resync` (fetch a fresh REST snapshot for it); the
other symbols keep running.

Cost: :class:`BinanceBook`'s per message, plus one small batch copy per message that changed a
book.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ddms.errors import InputError
from ddms.io.events import EventBatch
from ddms.io.levels import Resync, SymbolEvents
from ddms.io.venues.base import loads_json
from ddms.io.venues.binance_book import (
    FUTURES,
    SPOT,
    BinanceBook,
    BookTicker,
    Decoder,
    DepthSnapshot,
    DepthUpdate,
    Trade,
)
from ddms.io.venues.binance_chunk import stream_kind

__all__ = ["BinanceBooks", "market_of"]

_BOOK_STREAMS = ("@depth", "@bookticker")


def market_of(url: str) -> str | None:
    """``futures`` for USD-M/COIN-M hosts (``fstream``, ``dstream``, ``fapi``, ``dapi``), ``spot``
    for ``stream.binance``/``api.binance``, else None."""
    u = url.lower()
    if any(h in u for h in ("fstream.", "dstream.", "fapi.", "dapi.")):
        return FUTURES
    if "binance" in u:
        return SPOT
    return None


class BinanceBooks:
    """Per-symbol Binance books on one connection.  ``market`` selects the rules (``futures``
    covers USD-M and COIN-M).  :meth:`feed` takes a parsed message (or raw JSON),
    :meth:`apply_snapshot` a REST depth snapshot of one symbol."""

    venue = "binance"

    def __init__(self, market: str, source: str = "<binance>", *, max_reports: int = 1000) -> None:
        if market not in (FUTURES, SPOT):
            raise ValueError(f"market must be {FUTURES!r} or {SPOT!r}, got {market!r}")
        self.market = market
        self.source = source
        self.books: dict[str, BinanceBook] = {}
        self.reports: deque[InputError] = deque(maxlen=max_reports)
        self.ignored: dict[str, int] = {}
        self.malformed = 0          # messages that name no symbol and could not be read
        self.bad_messages = 0       # every malformed message, of a symbol or not (O(1) to read)
        self._decoder = Decoder()
        self._dirty: list[str] = []
        self._max_reports = max_reports
        self._line = 0          # input line of the message fed last: the line of its rows
        self._lane: Any = None  # the chunk fast lane (built on the first feed_chunk)

    @property
    def unknown_fields(self) -> dict[str, int]:
        return dict(self._decoder.unknown_fields)

    def book(self, symbol: str) -> BinanceBook:
        bk = self.books.get(symbol)
        if bk is None:
            bk = self.books[symbol] = BinanceBook(self.market, symbol=symbol, source=f"{self.source} [{symbol}]",
                                                  max_reports=self._max_reports)
        return bk

    def _actions(self, symbol: str, acts) -> tuple[Resync, ...]:
        self._dirty.append(symbol)
        return tuple(Resync(symbol, a.reason, a.message) for a in acts)

    def feed(self, msg: Any, line: int = 0, recv_ns: int = 0) -> tuple[Resync, ...]:
        """Process one message (parsed JSON or raw); returns the actions (a symbol needs a REST
        snapshot: at the start, and after a gap).  Never raises on bad input."""
        self._line = line
        stream_sym = None
        if isinstance(msg, (bytes, bytearray, memoryview, str)):
            msg, stream_sym = self._raw(msg)
            if msg is None:
                return ()
        if isinstance(msg, dict) and isinstance(msg.get("stream"), str):
            stream = msg["stream"].lower()
            if not any(s in stream for s in _BOOK_STREAMS):
                self.ignored[stream.split("@", 1)[-1]] = self.ignored.get(stream.split("@", 1)[-1], 0) + 1
                return ()
            stream_sym = stream.split("@", 1)[0].upper() or None
        try:
            rec = self._decoder.decode(msg, self.source, line)
        except InputError as e:
            self._report_unknown(line)      # fields counted before the error: this message's, not the next's
            if stream_sym is None:
                self.malformed += 1
                self.bad_messages += 1
                self.reports.append(e)
                return ()
            bk = self.book(stream_sym)     # the stream names the symbol: its book counts the bad message
            return self._feed_book(bk, msg, recv_ns)
        self._report_unknown(line)
        if isinstance(rec, (DepthUpdate, BookTicker)):
            return self._feed_book(self.book(rec.symbol.upper()), rec, recv_ns)
        if isinstance(rec, DepthSnapshot):
            self.malformed += 1
            self.bad_messages += 1
            self.reports.append(InputError("a depth snapshot on the stream names no symbol: ignored", self.source,
                                           line))
            return ()
        kind = "trade" if isinstance(rec, Trade) else "response"
        self.ignored[kind] = self.ignored.get(kind, 0) + 1
        return ()

    def _report_unknown(self, line: int) -> None:
        """Report each field name the decoder counted for the first time (once per name)."""
        for name in self._decoder.new_unknown:
            self.reports.append(InputError(f"unknown field {name!r} ignored (counted in unknown_fields)",
                                           self.source, line))
        self._decoder.new_unknown.clear()

    def _raw(self, msg: bytes | bytearray | memoryview | str) -> tuple[Any, str | None]:
        """A raw message as :meth:`feed` reads it, so that raw and parsed input count the same:
        ``(None, None)`` for a message of a stream that is not a book stream (counted in
        ``ignored`` here, as for a parsed one); ``(bytes, symbol of the stream or None)`` when
        they are strict JSON with a book stream or none (the decoder reads the bytes; a bad
        message is counted by the stream's book, as a parsed one); else ``(the parsed JSON,
        None)`` (``loads_json``: :meth:`feed` reads it as given parsed), or the bytes when they
        are not JSON (the decoder reports them).
        Cost: one numba scan of the bytes, plus a ``json.loads`` for what it cannot judge."""
        t = type(msg)
        data = msg if t is bytes else msg.encode("utf-8", "surrogatepass") if isinstance(msg, str) else bytes(msg)
        a, b, sa, sb = stream_kind(np.frombuffer(data, np.uint8))
        if a >= 0:
            name = data[a:b].decode("ascii").lower()
            self.ignored[name] = self.ignored.get(name, 0) + 1
            return None, None
        if a == -2:
            return data, (data[sa:sb].decode("ascii").lower().split("@", 1)[0].upper() or None) if sa >= 0 else None
        try:
            return loads_json(data), None
        except (ValueError, UnicodeDecodeError, RecursionError):
            return data, None

    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int] | None = None, recv_ns: int = 0, *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, np.ndarray], None] | None = None, recv: np.ndarray | None = None
                   ) -> tuple[list[Resync], list[SymbolEvents]]:
        """Feed many messages at once (raw bytes take the fast lane; str or parsed messages
        take :meth:`feed`): ``(actions, events)`` exactly as from calling
        :meth:`feed` then :meth:`take_events` per message (``lines[i]`` is message i's line,
        default 1, 2, ...), preceded by the events queued before the call.  In-sequence depth
        updates of synchronized books are applied by one numba call for many messages
        (:mod:`ddms.io.venues.binance_chunk`); every other message takes :meth:`feed`, in order.
        Cost: O(bytes + levels) in numba plus a few us of Python per message and O(symbols) per
        call: pass thousands of messages per call.  ``fallback``/``on_fast``: see
        :meth:`ChunkLane.feed_chunk <ddms.io.venues.binance_chunk.ChunkLane.feed_chunk>` (a
        caller that feeds parsed messages or counts per message; :attr:`consumed` says how many
        messages a chunk ended by ``StopChunk`` consumed); ``recv``: each message's receive
        time, put on the rows the numba lane applies (see :meth:`ChunkLane.feed_chunk`)."""
        if self._lane is None:
            from ddms.io.venues.binance_chunk import ChunkLane
            self._lane = ChunkLane(self, others=True)
        if lines is None:
            lines = range(1, len(msgs) + 1)
        return self._lane.feed_chunk(msgs, lines, recv_ns, fallback=fallback, on_fast=on_fast, recv=recv)

    @property
    def consumed(self) -> int:
        """Messages the last :meth:`feed_chunk` consumed."""
        return self._lane.consumed if self._lane is not None else 0

    def _feed_book(self, bk: BinanceBook, msg: Any, recv_ns: int) -> tuple[Resync, ...]:
        m0 = bk.malformed
        acts = bk.feed_message(msg, recv_ns)
        self.bad_messages += bk.malformed - m0
        self._copy_reports(bk)
        return self._actions(bk.symbol, acts)

    def apply_snapshot(self, symbol: str, body: Any, line: int = 0, recv_ns: int = 0) -> tuple[Resync, ...]:
        """Apply a REST depth snapshot of ``symbol`` (raw JSON, dict or record)."""
        self._line = line
        sym = symbol.upper()
        bk = self.book(sym)
        acts = bk.apply_snapshot(body, recv_ns)
        self._copy_reports(bk)
        return self._actions(sym, acts)

    def _copy_reports(self, bk: BinanceBook) -> None:
        """Move the symbol book's new reports here, numbered with the input line.  O(new)."""
        while bk.reports:
            r = bk.reports.popleft()
            self.reports.append(InputError(f"{bk.symbol}: {r.reason}", self.source, self._line, r.text))

    def take_events(self) -> list[SymbolEvents]:
        """Rows queued since the last call, one :class:`SymbolEvents` per symbol, every row
        numbered with the line of the message fed last (call it after every message)."""
        out = []
        for sym in dict.fromkeys(self._dirty):
            b = self.books[sym].take_events()
            if len(b):
                line = self._line
                out.append(SymbolEvents(self.venue, sym, EventBatch(b.rel, b.sign, b.cols, np.full(len(b), line,
                                                                                             np.int64), line, line)))
        self._dirty.clear()
        return out

    def summary(self) -> dict[str, Any]:
        """Counters summed over symbols, ``symbols``: per-symbol status, ``unknown_fields``."""
        keys = ("messages", "depth_events", "snapshots", "level_updates", "gaps", "resyncs", "stale", "malformed",
                "crossed", "bookticker_checked", "bookticker_mismatch")
        syms = {}
        for sym, bk in sorted(self.books.items()):
            c = bk.counters()
            d: dict[str, Any] = {"synced": bk.synced}
            d.update({k: c[k] for k in keys if k in c})
            d.update(checksum_checked=0, checksum_mismatch=0)
            syms[sym] = d
        tot: dict[str, Any] = {k: sum(s.get(k, 0) for s in syms.values()) for k in keys}
        tot["malformed"] += self.malformed
        tot.update(checksum_checked=0, checksum_mismatch=0)
        tot["synced"] = bool(syms) and all(s["synced"] for s in syms.values())
        tot["symbols"] = syms
        tot["ignored"] = dict(self.ignored)
        tot["unknown_fields"] = self.unknown_fields
        return tot

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Every symbol's :meth:`BinanceBook.save_state` (its arrays under ``<i>.``, i the
        symbol's position) plus this router's counts, as JSON values and numpy arrays (no
        pickle); :meth:`load_state` continues from it exactly (the chunk lane is rebuilt from the
        books, its single source of truth).  O(levels of every symbol)."""
        metas, arrays = [], {}
        for i, (sym, bk) in enumerate(self.books.items()):
            m, a = bk.save_state()
            metas.append([sym, m])
            arrays |= {f"{i}.{k}": v for k, v in a.items()}
        meta = {"venue": self.venue, "market": self.market, "books": metas, "ignored": dict(self.ignored),
                "malformed": self.malformed, "bad_messages": self.bad_messages, "line": self._line,
                "dirty": list(self._dirty), "unknown_fields": dict(self._decoder.unknown_fields)}
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of the same market (ValueError otherwise)."""
        if meta.get("market") != self.market:
            raise ValueError(f"a saved {meta.get('market')} session cannot continue as a {self.market} one")
        self.books = {}
        for i, (sym, m) in enumerate(meta["books"]):
            bk = self.book(sym)
            bk.load_state(m, {k[len(f"{i}."):]: v for k, v in arrays.items() if k.startswith(f"{i}.")})
        self.ignored = dict(meta["ignored"])
        self.malformed, self.bad_messages = int(meta["malformed"]), int(meta["bad_messages"])
        self._line, self._dirty = int(meta["line"]), list(meta["dirty"])
        self._decoder.unknown_fields = dict(meta["unknown_fields"])
        self._lane = None

    def restarted(self, reason: str) -> None:
        """The feed continues on a new connection: every symbol's book waits for a fresh REST
        snapshot, asked for by its first depth event (:meth:`BinanceBook.restarted`)."""
        for bk in self.books.values():
            bk.restarted(reason)
            self._copy_reports(bk)

    def _check(self) -> None:
        for bk in self.books.values():
            bk._check()
        if self._lane is not None:
            self._lane._check()
