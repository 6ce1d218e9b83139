"""tardis.dev ``incremental_book_L2`` CSV -> per-symbol price-level events (sans-I/O core + file transport).

Format (tardis.dev's downloadable CSV, plain or gzip): the header
``exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount`` then one row per level
change; timestamps in microseconds; ``side`` ``bid``/``ask``; ``amount`` the level's new absolute
size (0 removes it).  Rows of one symbol with the same ``local_timestamp`` form one message (one
atomic update for the engine).  When ``is_snapshot`` turns true after false (or at the start),
the symbol's book starts again from the snapshot rows that follow (the old levels are deleted in
the same update).  One file may hold several symbols (and exchanges): each has its own book,
keyed by the symbol (upper case); the venue is the ``exchange`` column.

Rows are :class:`~ddms.io.levels.LevelBook` rows (``id`` = price at the symbol's decimal scale,
broker 0, ``t`` the exchange ``timestamp`` in ms); numbers are kept exact (``1e-05`` is read as
``0.00001``).  ``EventBatch.line`` is the CSV line of the message's first row, so the rows of a
message share it.  A symbol's status (:class:`~ddms.io.levels.SymbolStatus`) counts messages,
snapshots, level updates and crossed books (best bid >= best ask after a message).

Bad input: a wrong header, a row with the wrong number of fields, a bad timestamp, flag, side
or number is an :class:`~ddms.errors.InputError` (``file:line: reason``), or with ``skip_bad``
a counted skip (``bad_lines``; the row changes nothing).

Cost: a ``split(",")`` and the level update per row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal, InvalidOperation

import numpy as np

from ddms.errors import InputError, ReplayError
from ddms.io.capture import iter_lines
from ddms.io.levels import ASKS, BIDS, LevelBook, SymbolEvents, SymbolStatus, price_key

__all__ = ["HEADER", "TardisParser", "read_tardis"]

HEADER = ("exchange", "symbol", "timestamp", "local_timestamp", "is_snapshot", "side", "price", "amount")
_SIDES = {"bid": BIDS, "ask": ASKS, "buy": BIDS, "sell": ASKS}
_FLAGS = {"true": True, "false": False}


def _plain(text: str, what: str) -> str:
    """A decimal as a plain string (``1e-05`` -> ``0.00001``); ValueError otherwise."""
    if "e" in text or "E" in text:
        try:
            d = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"{what} is not a number: {text!r}") from None
        if not d.is_finite():
            raise ValueError(f"{what} is not finite: {text!r}")
        text = format(d, "f")
    try:
        price_key(text)   # plain, non-negative, in range
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    return text


class TardisParser:
    """Sans-I/O core: CSV lines in (:meth:`feed`), :class:`SymbolEvents` out, one per message
    once it is complete (the next row belongs to another message) and at :meth:`flush`."""

    def __init__(self, source: str = "<tardis>", *, skip_bad: bool = False, max_samples: int = 10) -> None:
        self.source = source
        self.skip_bad = skip_bad
        self.max_samples = max_samples
        self.books: dict[str, LevelBook] = {}
        self.status: dict[str, SymbolStatus] = {}
        self.venue: dict[str, str] = {}
        self.lines = 0
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self._header = False
        self._snap: dict[str, bool] = {}     # the symbol's previous row was a snapshot row
        self._msg: tuple[str, str] | None = None   # (symbol, local_timestamp) of the open message
        self._msg_line = 0

    def _fail(self, reason: str, line: int, text: str) -> None:
        err = InputError(reason, self.source, line, text)
        if not self.skip_bad:
            raise err
        self.bad_lines += 1
        if len(self.bad_samples) < self.max_samples:
            self.bad_samples.append(err)

    def feed(self, raw: bytes | str, line: int | None = None) -> list[SymbolEvents]:
        """One CSV line (``line`` defaults to the running count).  Raises :class:`InputError`
        for a bad line unless ``skip_bad``."""
        self.lines += 1
        n = self.lines if line is None else line
        try:
            text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
        except UnicodeDecodeError as e:
            self._fail(f"not UTF-8 text: {e.reason} at byte {e.start}", n, raw.decode("utf-8", "replace"))
            return []
        text = text.rstrip("\r\n")
        if not text.strip():
            return []
        fields = text.split(",")
        if not self._header:
            if tuple(f.strip() for f in fields) != HEADER:
                raise InputError(f"not a tardis.dev incremental_book_L2 CSV: the header is not {','.join(HEADER)}",
                                 self.source, n, text)
            self._header = True
            return []
        if len(fields) != len(HEADER):
            self._fail(f"{len(fields)} fields, expected {len(HEADER)}", n, text)
            return []
        exch, sym, ts, local, snap, side, px, amt = fields
        try:
            if not (ts.isdigit() and local.isdigit() and len(ts) < 20 and len(local) < 20):
                raise ValueError("timestamp or local_timestamp is not a microsecond count")
            if snap not in _FLAGS:
                raise ValueError(f"is_snapshot is not true/false: {snap!r}")
            if side not in _SIDES:
                raise ValueError(f"side is not bid/ask: {side!r}")
            if not sym or not exch:
                raise ValueError("empty exchange or symbol")
            px, amt = _plain(px, "price"), _plain(amt, "amount")
        except ValueError as e:
            self._fail(str(e), n, text)
            return []
        symbol = sym.upper()
        out: list[SymbolEvents] = []
        if self._msg != (symbol, local):
            out = self._end_message()
            self._msg, self._msg_line = (symbol, local), n
        book = self.books.get(symbol)
        if book is None:
            book = self.books[symbol] = LevelBook(symbol)
            self.status[symbol] = SymbolStatus()
            self.venue[symbol] = exch
        st = self.status[symbol]
        is_snap = _FLAGS[snap]
        if is_snap and not self._snap.get(symbol, False):
            book.clear(self._msg_line)
            st.snapshots += 1
            st.synced = True
        self._snap[symbol] = is_snap
        try:
            book.set(_SIDES[side], px, amt, int(ts) / 1e3, self._msg_line)
        except ValueError as e:
            self._fail(str(e), n, text)
            return out
        st.level_updates += 1
        return out

    def _end_message(self) -> list[SymbolEvents]:
        if self._msg is None:
            return []
        symbol, local = self._msg
        self._msg = None
        book, st = self.books.get(symbol), self.status.get(symbol)
        if book is None:
            return []
        st.messages += 1
        if book.is_crossed():
            st.crossed += 1
        batch = book.take()
        if batch is None:
            return []
        # every row of a message was received at its local_timestamp (us): the receive time in ns
        recv = np.full(len(batch), min(int(local) * 1000, 2**63 - 1), np.int64)   # (clamped to int64 ns)
        return [SymbolEvents(self.venue[symbol], symbol, replace(batch, recv=recv))]

    def flush(self) -> list[SymbolEvents]:
        """The events of the last message (call at the end of the input)."""
        return self._end_message()

    def summary(self) -> dict:
        syms = {s: st.as_dict() for s, st in sorted(self.status.items())}
        return {"lines": self.lines, "bad_lines": self.bad_lines,
                "crossed": sum(s["crossed"] for s in syms.values()), "symbols": syms}

    def _check(self) -> None:
        for book in self.books.values():
            book._check()


def read_tardis(path: str | os.PathLike, *, skip_bad: bool = False,
                parser: TardisParser | None = None) -> Iterator[SymbolEvents]:
    """Read a tardis.dev ``incremental_book_L2`` CSV file (plain or gzip) into per-symbol events.
    Pass ``parser`` to read its summary afterwards."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ReplayError("no such file", p)
    tp = parser if parser is not None else TardisParser(p, skip_bad=skip_bad)
    for n, raw in enumerate(iter_lines(p), 1):
        yield from tp.feed(raw, n)
    if not tp._header:
        raise ReplayError("empty file: no tardis.dev CSV header", p)
    yield from tp.flush()
