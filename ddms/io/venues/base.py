"""What every multi-symbol venue core shares: per-symbol books, counters, reports, actions.

A venue core (one module per venue beside this one) takes *parsed* messages (JSON values) one at
a time with the input line they came from and their receive time, keeps one
:class:`~ddms.io.levels.LevelBook` and one :class:`~ddms.io.levels.SymbolStatus` per symbol, and
returns the actions the caller must perform (:class:`~ddms.io.levels.Resync`).  A problem in one
symbol's messages (a continuity break, a checksum mismatch, a malformed book message) discards
that symbol's book only; the other symbols keep running.  Messages the core does not use
(trades, heartbeats, tickers of other channels) are counted by kind in :attr:`VenueBooks.ignored`;
fields a venue adds to a documented message are ignored and counted by name in
:attr:`VenueBooks.unknown_fields` (a new field must not become an outage).

Cost: bookkeeping per message is a few dict operations; the book work is :class:`LevelBook`'s.
"""

from __future__ import annotations

import json
import re
from collections import deque
from typing import Any

import orjson

from ddms.errors import InputError
from ddms.io.levels import ASKS, BIDS, LevelBook, Resync, SymbolEvents, SymbolStatus

__all__ = ["VenueBooks", "loads_json"]


def loads_json(payload: bytes) -> Any:
    """``json.loads(payload)``, the same value or the same exception, at orjson's speed (a venue
    message of a few hundred bytes decodes 3-5x faster).  What orjson refuses and the standard
    library reads (``NaN``, infinite numbers, lone surrogate escapes, a byte-order mark, UTF-16
    text), every real error, any text with a run of 19 digits or more (orjson reads an integer
    beyond 64 bits as a float, not as the exact int) and any text with more than 500 brackets
    (orjson reads nesting deeper than the standard library's recursion limit; a book snapshot
    takes this path, an update does not) go to ``json.loads``, as does anything but ``bytes``,
    so the outcome -- value or error message -- is the standard library's.  O(len(payload))."""
    if type(payload) is not bytes or _LONG_DIGITS.search(payload) or payload.count(b"[") + payload.count(b"{") > 500:
        return json.loads(payload)
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload)


_LONG_DIGITS = re.compile(rb"[0-9]{19}")


def _shown(msg: Any) -> str:
    try:
        return json.dumps(msg, separators=(",", ":"))[:300]
    except (TypeError, ValueError):
        return repr(msg)[:300]


class VenueBooks:
    """Base of the venue cores: per-symbol books and status, reports, the event hand-out.
    ``source`` names the input in reports (a file or URL); ``max_reports`` bounds
    :attr:`reports` (problems as :class:`InputError`: source, line, reason, message)."""

    venue = "?"
    _lane: Any = None
    """A numba chunk lane holding some of the books in arrays (the Coinbase and OKX cores build one
    in ``feed_chunk``, :mod:`ddms.io.venues.coinbase_chunk`); a book goes back to its
    :class:`LevelBook` whenever Python code touches it."""

    def __init__(self, source: str = "<feed>", *, max_reports: int = 1000) -> None:
        self.source = source
        self.books: dict[str, LevelBook] = {}
        self.status: dict[str, SymbolStatus] = {}
        self.reports: deque[InputError] = deque(maxlen=max_reports)
        self.ignored: dict[str, int] = {}
        self.unknown_fields: dict[str, int] = {}   # fields a venue added: name -> messages carrying it
        self.malformed = 0          # messages that belong to no symbol and could not be read
        self.bad_messages = 0       # every malformed message, of a symbol or not (O(1) to read)
        self._dirty: list[str] = []

    # -- per-symbol state -----------------------------------------------------------------------
    def _sym(self, symbol: str) -> tuple[LevelBook, SymbolStatus]:
        book = self.books.get(symbol)
        if book is None:
            book = self.books[symbol] = LevelBook(symbol)
            self.status[symbol] = SymbolStatus()
        return book, self.status[symbol]

    def _touch(self, symbol: str) -> None:
        if not self._dirty or self._dirty[-1] != symbol:
            self._dirty.append(symbol)

    def _ignore(self, kind: str) -> None:
        self.ignored[kind] = self.ignored.get(kind, 0) + 1

    def _unknown(self, names, line: int) -> None:
        """Count fields outside the documented message (ignored: venues add fields without
        notice); the first sighting of a name is reported once."""
        for n in names:
            n = str(n)
            if n not in self.unknown_fields:
                self.unknown_fields[n] = 0
                self._report(f"unknown field {n!r} ignored (counted in unknown_fields)", line)
            self.unknown_fields[n] += 1

    def _report(self, reason: str, line: int, msg: Any = None) -> None:
        self.reports.append(InputError(reason, self.source, line, "" if msg is None else _shown(msg)))

    def _bad(self, reason: str, line: int, msg: Any) -> tuple[Resync, ...]:
        """A message no symbol can be blamed for: counted and reported."""
        self.malformed += 1
        self.bad_messages += 1
        self._report(reason, line, msg)
        return ()

    def _resync(self, symbol: str, reason: str, line: int, msg: Any = None, *, gap: bool = False,
                malformed: bool = False) -> tuple[Resync, ...]:
        """Discard ``symbol``'s book (it waits for a snapshot) and ask for one."""
        book, st = self._sym(symbol)
        st.resyncs += 1
        st.gaps += gap
        st.malformed += malformed
        self.bad_messages += malformed
        st.synced = False
        book.discard()
        self._touch(symbol)
        self._report(f"{symbol}: {reason}; book discarded until a fresh snapshot (resync)", line, msg)
        return (Resync(symbol, reason, line),)

    def _checksum(self, symbol: str, have: int, crc: int, line: int, msg: Any) -> tuple[Resync, ...] | None:
        """Count a checksum check of ``symbol``'s book (``have``, computed) against the venue's
        ``crc``: None when they agree, else the resync a mismatch calls for (never a guess)."""
        st = self.status[symbol]
        st.checksum_checked += 1
        if have == crc:
            return None
        st.checksum_mismatch += 1
        return self._resync(symbol, f"checksum mismatch: the book gives {have}, the message says {crc}", line, msg)

    def _after_update(self, symbol: str, line: int) -> None:
        book, st = self.books[symbol], self.status[symbol]
        if book.is_crossed():
            st.crossed += 1
            self._report(f"{symbol}: book crossed: best bid {book.top(BIDS, 1)[0][0]} >= best ask "
                         f"{book.top(ASKS, 1)[0][0]}", line)
        self._touch(symbol)

    # -- output -----------------------------------------------------------------------------------
    def take_events(self) -> list[SymbolEvents]:
        """The engine rows queued since the last call, one :class:`SymbolEvents` per symbol in the
        order the symbols were updated.  O(rows)."""
        out = []
        for sym in dict.fromkeys(self._dirty):
            batch = self.books[sym].take()
            if batch is not None:
                out.append(SymbolEvents(self.venue, sym, batch))
        self._dirty.clear()
        return out

    def take_rows(self, rows: list, spans: list[tuple[str, int, int]]) -> None:
        """:meth:`take_events` without the arrays: the queued rows go to the end of ``rows``
        (tuples ``(rel, sign, t, id, broker, volume, price, line)``, as :class:`LevelBook`
        queues them) and each symbol's part to ``spans`` as ``(symbol, start, end)``, in the
        order :meth:`take_events` gives them.  A caller feeding many messages turns the rows of
        all of them into arrays once (:meth:`ddms.io.cryptofeed.CryptofeedParser.feed_lines`):
        building arrays per message cost more than the book work.  O(rows)."""
        dirty = self._dirty
        for sym in (dirty if len(dirty) == 1 else dict.fromkeys(dirty)):
            book = self.books[sym]
            r = book._rows
            if r:
                spans.append((sym, len(rows), len(rows) + len(r)))
                rows.extend(r)
                book._rows = []
        dirty.clear()

    def summary(self) -> dict[str, Any]:
        """Counters summed over symbols (as the monitor's top-level fields) plus ``symbols``:
        ``{SYMBOL: status}``, and ``ignored`` message kinds."""
        tot: dict[str, Any] = {}
        for st in self.status.values():
            for k, v in st.as_dict().items():
                if k != "synced":
                    tot[k] = tot.get(k, 0) + v
        tot["malformed"] = tot.get("malformed", 0) + self.malformed
        tot["synced"] = bool(self.status) and all(st.synced for st in self.status.values())
        tot["symbols"] = {s: st.as_dict() for s, st in sorted(self.status.items())}
        tot["ignored"] = dict(self.ignored)
        tot["unknown_fields"] = dict(self.unknown_fields)
        return tot

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> dict[str, Any]:
        """Every symbol's book (:meth:`LevelBook.save_state`) and counters, the core's counts and
        the venue's own sequencing state (:meth:`_save_extra`), as JSON values (no pickle):
        :meth:`load_state` continues from it exactly.  :attr:`reports` are not saved.
        O(levels of every symbol)."""
        return {"venue": self.venue, "books": [[sym, b.save_state(), self.status[sym].as_dict()]
                                               for sym, b in self.books.items()],
                "ignored": dict(self.ignored), "unknown_fields": dict(self.unknown_fields),
                "malformed": self.malformed, "bad_messages": self.bad_messages, "dirty": list(self._dirty),
                "extra": self._save_extra()}

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from a :meth:`save_state` of a core of the same venue (ValueError otherwise)."""
        if state.get("venue") != self.venue:
            raise ValueError(f"a saved {state.get('venue')} session cannot continue as a {self.venue} one")
        self.books, self.status = {}, {}
        for sym, book, status in state["books"]:
            self.books[sym] = LevelBook.from_state(book)
            self.status[sym] = SymbolStatus(**status)
        self.ignored, self.unknown_fields = dict(state["ignored"]), dict(state["unknown_fields"])
        self.malformed, self.bad_messages = int(state["malformed"]), int(state["bad_messages"])
        self._dirty = list(state["dirty"])
        self._load_extra(state["extra"])
        self._lane = None      # its slots held the books replaced here

    def _save_extra(self) -> dict[str, Any]:
        """A venue's own state beside the books (sequence ids, subscribed depth)."""
        return {}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        pass

    def restarted(self, reason: str, line: int = 0) -> None:
        """The feed continues on a new connection (a process restored from a checkpoint):
        sequence ids do not carry over, so every symbol's book is discarded (its rows stay in the
        engine until the snapshot that answers the new connection's subscription deletes them),
        counted in ``resyncs``.  O(levels)."""
        for sym in list(self.books):
            self._resync(sym, f"restart: {reason}", line)

    def _check(self) -> None:
        """Every book's invariants (the chunk lane's first); an unsynced symbol holds no levels."""
        if self._lane is not None:
            self._lane._check()
        for sym, book in self.books.items():
            book._check()
            if not self.status[sym].synced:
                assert book.depth(BIDS) == book.depth(ASKS) == 0, f"{sym}: unsynced book holds levels"
