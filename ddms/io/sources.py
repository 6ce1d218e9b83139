"""One entry point for every replay data format: ``open_source(path)`` -> a :class:`Source`.

Why: a backtest partition is just a file name, and any view or strategy must run on any data.
Every source yields the same relations ``bids`` (rel 0) and ``asks`` (rel 1) with the schema
``(t, id, broker_id, volume, price)`` as :class:`~ddms.io.events.EventBatch` objects, so the
engine, the fill simulator and the Spark sweep never look at the format.  The readers themselves
live beside their protocols and are only dispatched to here:

=============  ==========================================  =======================================
kind           files                                       reader
=============  ==========================================  =======================================
``orderbook``  DBToaster ``t,order_id,action,volume,price``  :func:`ddms.io.orderbook.read_orderbook`
``lobster``    LOBSTER ``*message*.csv`` (6 fields)        :func:`ddms.io.lobster.read_lobster`
               (batches are :class:`~ddms.io.lobster.LobsterBatch`, with ``traded``)
``binance``    ``<recv_ts_ns> <json>`` captures (.gz or    :class:`ddms.io.venues.binance_book.BinanceBook`
               plain): one row per price level, id = price
               * 10**px_decimals, broker 0
``parquet``    our columnar event files (``ddms convert``)  :func:`ddms.io.columnar.read_parquet`
``orders``     ``ddms monitor --record`` of our order         :class:`ddms.io.orderrec.OrderRecordingReader`
               protocol (``#ddms-orders`` header)
``cryptofeed`` cryptofeed ``<EXCH>.ws.*`` captures (+ the   :func:`ddms.io.cryptofeed.read_cryptofeed`
               ``.http.`` files beside them)
``dbn``        Databento DBN market-by-order (.dbn[.zst])  :func:`ddms.io.dbn.read_dbn` (order level)
``tardis``     tardis.dev ``incremental_book_L2`` CSV      :func:`ddms.io.tardis.read_tardis`
=============  ==========================================  =======================================

The last three are registered by :mod:`ddms.io.formats` (detection and reading live there); a
file of them is one symbol's book: ``symbol=`` chooses it (needed when the file holds several).

Detection is :mod:`ddms.io.detect` (the one place every command asks: Parquet magic, a
``<digits> {`` capture line, else the first line's field count); ``kind=`` overrides it.  A bad
record later in a file is the reader's :class:`~ddms.errors.InputError` (``file:line: reason``).

A :class:`Source` is a frozen, picklable description (it is shipped to Spark workers); each
iteration opens the file anew, so it can be replayed many times.  Cost of ``open_source``: one
read of at most 64 KiB to detect the format.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before the first numba import)

# isort: split
import gzip
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ddms.errors import InputError, ReplayError
from ddms.io import formats as io_formats
from ddms.io.detect import KINDS, detect_file, detect_kind
from ddms.io.events import EventBatch
from ddms.io.schema import COLUMNS, RELATIONS
from ddms.io.symbols import symbol_id, symbol_name, with_symbol

__all__ = ["KINDS", "RECEIVE_TIMED", "RELATIONS", "PrefixedReader", "Source", "detect_kind", "file_symbol",
           "file_symbols", "open_source", "partition_name", "prefixed"]

RECEIVE_TIMED = ("binance", "cryptofeed", "dbn", "tardis")
"""The kinds whose batches carry receive timestamps (``EventBatch.recv``), so that several files
of them merge by receive time (:mod:`ddms.io.merge`).  Not order-book CSV (its ``t`` is a
sequence or event time), LOBSTER (exchange time after midnight) or Parquet (not stored)."""

_IO_FORMATS = {f.kind: f for f in io_formats.FORMATS}   # cryptofeed, dbn, tardis (ddms/io)
_MAX_PENDING = 100_000   # capture messages held while the market (spot/futures) is still unknown


def partition_name(path: str | os.PathLike) -> str:
    """The label of a file in sweep results: ``<parent dir>/<stem>`` (``big/finance``), because
    the data sets reuse file names (every size is a ``finance.csv``)."""
    p = Path(path)
    stem = p.name
    for suffix in (".gz", ".parquet", ".csv", ".txt"):
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    return f"{p.parent.name}/{stem}" if p.parent.name else stem


@dataclass(frozen=True)
class Source:
    """A replayable data file: iterate it for :class:`EventBatch` objects on ``relations``
    (``bids`` = 0, ``asks`` = 1).  ``name`` labels the partition in results; ``kind`` is one of
    :data:`KINDS`.  Options: ``brokers`` (order book: broker_id = id mod brokers), ``skip_bad``
    (count and skip bad records instead of stopping at the first), ``market`` (Binance:
    ``"futures"``/``"spot"``, default from the file name, else from the first depth message),
    ``allow_empty_start`` (Binance: start from an empty book at the first depth event instead of
    waiting for the capture's REST snapshot -- a capture without one then replays instead of
    failing; a snapshot later in the capture is ignored as unsolicited), ``batch_updates`` (Binance: book updates
    per batch), ``symbol`` (ddms/io formats: the instrument whose book to read; default the
    file's only one), ``symbols`` (rows of six columns, the last the
    :func:`~ddms.io.symbols.symbol_id` of the instrument: every symbol of a multi-symbol file,
    else the file's one symbol -- a Binance capture's, or ``symbol``, or the file name's stem in
    upper case).  Each iteration re-reads the file."""

    path: str
    kind: str
    name: str
    relations: tuple[str, ...] = RELATIONS
    brokers: int = 10
    skip_bad: bool = False
    market: str | None = None
    allow_empty_start: bool = False
    batch_updates: int = 4096
    symbol: str | None = None
    symbols: bool = False
    prefix: str = ""

    def __iter__(self) -> Iterator[EventBatch]:
        return self.batches()

    def batches(self, notes: list[str] | None = None) -> Iterator[EventBatch]:
        """The events, batch by batch.  Strict mode: the batch before a bad record is yielded
        (its ``error`` set), then the error is raised.  ``notes``, when given, receives a line
        for each loss that ``skip_bad`` let pass silently beyond the skipped lines themselves: a
        gap in a Binance capture's depth updates and how many updates it cost."""
        if self.prefix:
            return prefixed(self._check_prefix()._batches(notes), self.prefix)
        return self._batches(notes)

    def _check_prefix(self) -> Source:
        if not self.symbols:
            raise ReplayError(f"FILE#{self.prefix}* names every symbol of a file read with the symbol column "
                              f"(views over several inputs: ddms run/compile); this reads one book: choose one "
                              f"symbol with FILE#SYMBOL", self.path)
        return self

    def _batches(self, notes: list[str] | None = None) -> Iterator[EventBatch]:
        if self.symbols:
            return _symbol_batches(self, notes)
        if self.kind == "orderbook":
            from ddms.io.orderbook import read_orderbook
            return read_orderbook(self.path, brokers=self.brokers, skip_bad=self.skip_bad)
        if self.kind == "lobster":
            from ddms.io.lobster import read_lobster
            return read_lobster(self.path, skip_bad=self.skip_bad)
        if self.kind == "binance":
            return _binance_batches(self, notes)
        if self.kind == "orders":
            return self.reader(notes).batches()
        if self.kind == "parquet":
            from ddms.io.columnar import parquet_info, read_parquet
            if self.symbol is not None and parquet_info(self.path).symbols is not None:
                return _one_symbol(read_parquet(self.path, symbols=True), self.symbol, keep=False)
            return read_parquet(self.path)
        if self.kind in _IO_FORMATS:
            return io_formats.symbol_batches(_IO_FORMATS[self.kind], self.path, symbol=self.symbol,
                                             skip_bad=self.skip_bad, notes=notes)
        raise ReplayError(f"unknown source kind {self.kind!r} (kinds: {', '.join(KINDS)})", self.path)

    def reader(self, notes: list[str] | None = None):
        """The batches of :meth:`batches` as a reader whose position a checkpoint can hold
        (``batches()``, ``save_state()``, ``load_state()``, ``position``: lines handed out), or
        None for a format whose reader has none (LOBSTER, Parquet, DBN, tardis, order-book CSV
        read here rather than by :mod:`ddms.io.orderbook`'s parser)."""
        if self.prefix:
            inner = replace(self._check_prefix(), prefix="").reader(notes)
            return None if inner is None else PrefixedReader(inner, self.prefix)
        if self.kind == "binance":
            return BinanceCaptureReader(self, notes, symbols=self.symbols)
        if self.kind == "orders" and not self.symbols:
            from ddms.io.orderrec import OrderRecordingReader
            return OrderRecordingReader(self.path, skip_bad=self.skip_bad, batch_updates=self.batch_updates)
        fmt = _IO_FORMATS.get(self.kind)
        if fmt is not None and fmt.open is not None:
            r = io_formats.SymbolBatches(fmt, self.path, symbol=self.symbol, skip_bad=self.skip_bad,
                                         keep=self.symbols)
            if r.batch_updates is not None:     # input lines per step, as the Binance reader's updates
                r.batch_updates = self.batch_updates
            return r
        return None


def open_source(path: str | os.PathLike, *, kind: str | None = None, name: str | None = None,
                brokers: int = 10, skip_bad: bool = False, market: str | None = None,
                allow_empty_start: bool = False, symbol: str | None = None, symbols: bool = False) -> Source:
    """Detect the format of ``path`` (or take ``kind``) and return its :class:`Source`.  Raises
    :class:`ReplayError` for a missing file, an unknown or mismatching format, a Parquet file that
    is not ours; reading nothing but the first 64 KiB (Parquet: the footer).  ``FILE#SYMBOL``
    (a file that does not exist under that whole name) chooses the symbol of a multi-symbol
    capture, so every command and a Spark partition name can say it without an option.
    ``symbols``: batches carry the symbol column (:class:`Source`)."""
    p = os.fspath(path)
    prefix = ""
    if symbol is None and "#" in p and not os.path.exists(p):
        p, symbol = p.rsplit("#", 1)
        name = name or f"{partition_name(p)}#{symbol}"
        if symbol.endswith("*"):            # FILE#PREFIX*: every symbol, named PREFIX + its name
            prefix, symbol = symbol[:-1], None
            if not prefix or "*" in prefix:
                raise ReplayError(f"#{prefix}*: a symbol prefix is non-empty text without '*' "
                                  "(FILE#USDM:* reads BTCUSDT as USDM:BTCUSDT)", p)
    found, _ = detect_file(p, kind)
    if market is not None and market not in ("futures", "spot"):
        raise ReplayError(f"market must be 'futures' or 'spot', got {market!r}", p)
    if brokers < 1:
        raise ReplayError(f"brokers must be >= 1, got {brokers}", p)
    if found == "parquet":
        from ddms.io.columnar import parquet_info
        parquet_info(p)  # validates the footer and our metadata now, not in a Spark worker
    return Source(p, found, name or partition_name(p), RELATIONS, brokers, skip_bad,
                  market or (_market_from_name(p) if found == "binance" else None), allow_empty_start,
                  symbol=symbol, symbols=symbols, prefix=prefix)


def prefixed(batches: Iterable[EventBatch], prefix: str) -> Iterator[EventBatch]:
    """``batches`` with every symbol id of their symbol column replaced by the id of ``prefix`` +
    its name (``FILE#PREFIX*``).  Why: the same instrument name on two venues or markets (Binance
    spot and USD-M ``BTCUSDT``) would be one book in a merged run, so it is refused; a prefix per
    file keeps them apart and lets one view compare them.  Cost: a sort of each batch's symbol
    column (``np.unique``) and one copy of its columns; names hashed once per symbol."""
    ids: dict[float, float] = {}
    for b in batches:
        if len(b) and b.cols.shape[1] > len(COLUMNS):
            u, inv = np.unique(b.cols[:, -1], return_inverse=True)
            for x in u.tolist():
                if x not in ids:
                    ids[x] = float(symbol_id(prefix + symbol_name(x)))
            cols = b.cols.copy()
            cols[:, -1] = np.array([ids[x] for x in u.tolist()])[inv]
            b = replace(b, cols=cols)
        yield b


class PrefixedReader:
    """A checkpointable reader (``Source.reader()``) whose batches' symbols get a prefix
    (:func:`prefixed`); position and state are the inner reader's."""

    def __init__(self, inner: Any, prefix: str) -> None:
        self._inner, self._prefix = inner, prefix

    def batches(self, *args: Any, **kw: Any) -> Iterator[EventBatch]:
        return prefixed(self._inner.batches(*args, **kw), self._prefix)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def file_symbols(path: str | os.PathLike, skip_bad: bool = False) -> list[str]:
    """The symbols a multi-symbol file holds (ddms/io formats: cryptofeed captures, DBN,
    tardis; hftbacktest Binance captures: their depth updates' symbols), in order of first
    appearance; ``[]`` for the one-book formats and for a ``FILE#SYMBOL`` (already one symbol).
    Why: a backtest or a Spark sweep over such a file runs one partition per symbol
    (``FILE#SYMBOL``), each with its own positions.  Cost: one pass of the reader over the file
    (a Binance capture: a byte scan, :func:`_capture_symbols`).  ``skip_bad``: bad lines are
    skipped here as the replay that follows skips them (else the first one is its InputError)."""
    src = open_source(path, skip_bad=skip_bad)
    if src.prefix:
        return []               # FILE#PREFIX*: read whole, with its symbol column, or refused
    if src.kind == "binance" and src.symbol is None:
        return _capture_symbols(src.path)
    if src.kind not in _IO_FORMATS or src.symbol is not None:
        return []
    from ddms.io.levels import event_symbols  # only files of a ddms/io format need the level readers

    seen: dict[str, None] = {}
    for ev in _IO_FORMATS[src.kind].read(src.path, src.skip_bad):
        for sym in event_symbols(ev):
            seen.setdefault(sym, None)
    return list(seen)


_DEPTH_SYMBOL = re.compile(rb'"e":"depthUpdate"[^\n]*?"s":"([^"\n]+)"')


def _capture_symbols(path: str | os.PathLike) -> list[str]:
    """The symbols of an hftbacktest Binance capture's depth updates, in order of first
    appearance: a scan of its (decompressed) bytes for each depth update's ``"s"``, without
    decoding or replaying (the reader checks every message when a symbol is replayed).  Why: a
    capture of several symbols is backtested one ``FILE#SYMBOL`` partition each, as the venue
    captures are.  Cost: O(bytes), 16 MiB at a time (~0.1 s for a 94k-message capture)."""
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    seen: dict[str, None] = {}
    tail = b""
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        while True:
            chunk = f.read(1 << 24)
            data = tail + chunk
            cut = data.rfind(b"\n") + 1 if chunk else len(data)
            for m in _DEPTH_SYMBOL.finditer(data, 0, cut):
                seen.setdefault(m.group(1).decode("utf-8", "replace"), None)
            tail = data[cut:]
            if not chunk:
                return list(seen)


def names_symbols(src: Source) -> bool:
    """Whether ``src``'s format names the instrument of each record (venue captures, DBN,
    tardis, a Parquet file written with its symbol column): read with ``symbols=True`` it keeps
    them; the one-book formats (order-book CSV, LOBSTER) only get a symbol from the file name."""
    if src.kind == "parquet":
        from ddms.io.columnar import parquet_info
        return parquet_info(src.path).symbols is not None
    return src.kind in _IO_FORMATS or src.kind == "binance"


def file_symbol(path: str, kind: str | None = None) -> str:
    """The symbol of a one-instrument file that does not name its instrument inside: its file
    name without the extensions, in upper case (``data/aapl.csv`` -> ``AAPL``); a LOBSTER file
    (``kind="lobster"``) by its convention ``TICKER_date_start_end_message_N.csv`` -> ``TICKER``."""
    stem = Path(path).name.split(".", 1)[0]
    if kind == "lobster":
        stem = stem.split("_", 1)[0]
    return stem.upper() or "BOOK"


def _symbol_batches(src: Source, notes: list[str] | None) -> Iterator[EventBatch]:
    """The batches of ``src`` with the symbol column (see :class:`Source`)."""
    if src.kind in _IO_FORMATS:
        yield from io_formats.all_symbol_batches(_IO_FORMATS[src.kind], src.path, symbol=src.symbol,
                                                 skip_bad=src.skip_bad, notes=notes)
        return
    if src.kind == "binance":
        yield from _binance_batches(src, notes, symbols=True)
        return
    if src.kind == "parquet":
        from ddms.io.columnar import parquet_info, read_parquet
        if parquet_info(src.path).symbols is not None:   # a file converted with its symbol column
            batches = read_parquet(src.path, symbols=True)
            yield from batches if src.symbol is None else _one_symbol(batches, src.symbol, keep=True)
            return
    sid = symbol_id(src.symbol or file_symbol(src.path, src.kind))
    for b in replace(src, symbols=False).batches(notes):
        yield replace(b, cols=with_symbol(b.cols, sid))


def _one_symbol(batches: Iterable[EventBatch], symbol: str, *, keep: bool) -> Iterator[EventBatch]:
    """The rows of ``symbol`` in batches with a symbol column (kept as the sixth column if
    ``keep``), every batch kept (its line span advances the position).  O(events)."""
    sid = float(symbol_id(symbol))
    for b in batches:
        m = b.cols[:, 5] == sid
        extra = {"traded": b.traded[m]} if getattr(b, "traded", None) is not None else {}
        if b.recv is not None:
            extra["recv"] = b.recv[m]
        yield replace(b, rel=b.rel[m], sign=b.sign[m], cols=np.ascontiguousarray(b.cols[m] if keep else b.cols[m, :5]),
                      line=b.line[m], **extra)


# ------------------------------------------------------------------------------------------
# Binance captures
# ------------------------------------------------------------------------------------------

def _market_from_name(path: str) -> str | None:
    lower = os.path.basename(path).lower()
    if any(w in lower for w in ("usdm", "futures", "fapi", "perp")):
        return "futures"
    if "spot" in lower:
        return "spot"
    return None


_bb = None   # ddms.io.venues.binance_book, imported by the first capture reader (numba: start time)


def _binance_batches(src: Source, notes: list[str] | None = None, symbols: bool = False) -> Iterator[EventBatch]:
    """Replay a capture through :class:`BinanceBook` (see :class:`BinanceCaptureReader`), in
    blocks through the numba chunk lane (a checkpointed run reads line by line:
    :meth:`Source.reader`)."""
    return BinanceCaptureReader(src, notes, symbols=symbols, lane=True).batches()


_LANE_LINES = 8192   # lines per block of the lane reader (a few MB of a 1,000-symbol capture)


class BinanceCaptureReader:
    """Replays an hftbacktest capture (one Binance symbol, or several) through one
    :class:`BinanceBook` per symbol: every message in file order, routed by its symbol; a REST
    snapshot line names no symbol, so it goes to the waiting book whose buffered events it can
    start (:meth:`BinanceBook.can_start`), or, when none can yet, waits for the first depth event
    it can start (:meth:`BinanceBook.starts_with`) -- the recorder fetches a snapshot while the
    stream runs, so it lies near that symbol's events.  A "line" is one book update of any
    symbol (a depth event applied, or a snapshot), numbered in input order; batches of at most
    ``batch_updates`` lines.  Strict mode raises :class:`InputError` (file:line) on the first
    undecodable line and on a gap in a symbol's depth updates (a capture holds no later snapshot
    to resync from, so the rest could not be replayed faithfully); ``skip_bad`` skips bad lines
    and lets that book wait for a snapshot after a gap, losing its depth updates until one
    arrives (often the rest of the capture): :func:`_gap_notes` tells ``notes``.  A capture
    where a symbol's book never started (no usable snapshot) raises :class:`ReplayError` unless
    ``allow_empty_start``.  Cost: the capture parser's decode plus one numba call per depth event
    (about 1M level updates/s); one batch copy each time consecutive updates change symbol.
    ``symbols``: rows carry their symbol as a sixth column (else a capture of several symbols is
    refused unless one is chosen, ``FILE#SYMBOL``: only its updates are lines then).

    Resumable: :meth:`save_state` (between two batches of :meth:`batches`) holds every book's
    state (:meth:`BinanceBook.save_state`), the file position after the last line read, the
    snapshots not placed yet, the lines held while the market was unknown and the counts behind
    the gap notes; :meth:`load_state` continues from it exactly.

    ``lane``: read the file in blocks of lines (:meth:`LineCursor.spans
    <ddms.io.cursor.LineCursor.spans>`) whose messages go through the Binance chunk lane
    (:class:`~ddms.io.venues.binance_chunk.ChunkLane` in ``capture`` mode: in-sequence depth
    updates of started books, bookTickers and trades in one numba call for many messages); every
    other line (snapshots, gaps, books waiting, new symbols, bad or blank lines, other streams)
    takes the per-line path above, in order.  The same batches (rows, lines, receive times,
    boundaries), notes, ``snapshot_owner`` and errors; why: the per-line path costs ~15 us of
    Python a message (decode into a record, routing, the book call), ~300k level updates/s on
    the real captures.  Not resumable (:meth:`save_state` refuses: the lane reads ahead)."""

    def __init__(self, src: Source, notes: list[str] | None = None, *, symbols: bool = False,
                 lane: bool = False) -> None:
        global _bb
        from ddms.io.capture import CaptureParser
        from ddms.io.cursor import LineCursor
        from ddms.io.venues import binance_book as _bb
        self.src, self.notes, self.symbols = src, notes, symbols
        self.parser = CaptureParser(src.path, skip_bad=src.skip_bad, book_streams=True)
        self.cursor = LineCursor(src.path)
        self.market = src.market
        self.want = src.symbol.upper() if src.symbol else None
        self.pending: list = []      # captured lines held while the market is unknown
        self.held: list = []         # snapshot lines no book could take yet
        self.snapshot_owner: dict[int, str] = {}   # capture line of each snapshot applied -> its book's symbol
        self.books: dict = {}        # symbol -> BinanceBook, in order of appearance
        # symbols whose book may wait for a snapshot -> the book's position in books (a superset:
        # pruned when a snapshot line looks; why: a scan of every book per snapshot line was
        # O(books^2) over a capture, ~0.1 s of 1,000 symbols' start)
        self._waiting: dict[str, int] = {}
        # per symbol: the book's update count after each message that applied updates, and that
        # message's receive time -- the receive timestamps (EventBatch.recv) of the rows numbered
        # next (emptied when they are; so empty between batches, where a checkpoint is taken)
        self._marks: dict[str, tuple[list[int], list[int]]] = {}
        self.current: str | None = None   # the symbol whose updates are not numbered yet
        self.updates = 0        # lines numbered so far (book updates of the kept symbols)
        self.taken = 0          # lines handed out in batches
        self.depth_seen = 0
        self.gap_marks: list[tuple] = []   # per gap (skip_bad): line, reason, depth updates seen, applied, snapshots
        self.batch_updates = src.batch_updates   # a checkpointed run asks for smaller batches (its boundaries)
        self._parts: list[EventBatch] = []
        # per part of _parts: None, or (symbols) the symbol id(s) of its rows, its cols then holding
        # the five book columns only (the sixth is written once, when the parts are joined)
        self._sids: list[float | np.ndarray | None] = []
        self.lane = lane
        self._lane = None              # the ChunkLane (lane: built once the market is known)
        self._ready: list[EventBatch] = []          # lane: whole batches not handed out yet
        self._sink: list = []                       # lane: the events of the current kernel run
        self._slot_kept = np.zeros(0, bool)         # lane: per lane slot, whether its rows are kept
        self._slot_sid = np.zeros(0, np.float64)    # lane: per lane slot, its symbol id

    @property
    def position(self) -> int:
        """Lines handed out so far."""
        return self.taken

    def _book(self, symbol: str):
        from ddms.io.venues.binance_book import BinanceBook
        bk = self.books.get(symbol)
        if bk is None:
            if self.books and not self.symbols and self.want is None:
                raise ReplayError(f"holds several symbols ({', '.join(self.books)}, {symbol}, ...): choose one as "
                                  f"{self.src.path}#{next(iter(self.books))} (or declare a symbol column)",
                                  self.src.path)
            self._waiting[symbol] = len(self.books)
            bk = self.books[symbol] = BinanceBook(self.market, symbol=symbol, source=self.src.path)
        return bk

    def _kept(self, symbol: str) -> bool:
        return self.want is None or symbol == self.want

    def _number(self) -> None:
        """Hand the current book's new updates their line numbers (rows into :attr:`_parts`)."""
        sym = self.current
        if sym is None:
            return
        bk = self.books[sym]
        marks_u, marks_t = self._marks.pop(sym, ([], []))
        if not self._kept(sym):
            bk.discard_events()
            return
        base, n = bk._taken, bk.updates - bk._taken
        if n == 0 and bk._ok == 0:
            return
        b = bk.take_events()
        line = b.line - base + self.updates
        if marks_t:    # (an update applied by a message that then failed: the last time known)
            at = np.searchsorted(np.asarray(marks_u, np.int64), b.line)
            recv = np.asarray(marks_t, np.int64)[np.minimum(at, len(marks_t) - 1)]
        else:
            recv = np.zeros(len(line), np.int64)
        self._parts.append(EventBatch(b.rel, b.sign, b.cols, line, self.updates + 1, self.updates + n, recv=recv))
        self._sids.append(float(symbol_id(sym)) if self.symbols else None)
        self.updates += n

    def _mark(self, bk, updates: int, cap) -> None:
        """Note ``cap``'s receive time for the updates it applied to ``bk`` (beyond ``updates``):
        an update is received when the message that applied it was (int64 ns; any digits are a
        valid capture time, so clamp)."""
        if bk.updates > updates:
            u, t = self._marks.setdefault(bk.symbol, ([], []))
            u.append(bk.updates)
            t.append(min(cap.recv_ts_ns, 2**63 - 1))

    def _switch(self, symbol: str) -> None:
        if symbol != self.current:
            self._number()
            self.current = symbol

    def _take(self) -> EventBatch:
        """The numbered rows not handed out yet, as one batch (lines taken+1 .. updates)."""
        self._number()
        first, self.taken = self.taken + 1, self.updates
        return replace(self._joined(), first_line=first, last_line=self.updates)

    def _joined(self) -> EventBatch:
        """The numbered rows of :attr:`_parts` as one batch (taken from there; its first and last
        line are the caller's to set), the symbol column written as the rows are copied (one copy
        a row: no :func:`with_symbol` copy per part before).  O(rows)."""
        parts, sids, self._parts, self._sids = self._parts, self._sids, [], []
        width = 5 + self.symbols
        if not parts:
            return EventBatch(np.zeros(0, np.int8), np.zeros(0, np.int8), np.zeros((0, width)), np.zeros(0, np.int64),
                              0, 0, recv=np.zeros(0, np.int64))
        cols = np.empty((sum(len(p.line) for p in parts), width))
        a = 0
        for p, sid in zip(parts, sids, strict=True):
            z = a + len(p.line)
            if sid is None:
                cols[a:z] = p.cols
            else:
                cols[a:z, :5] = p.cols
                cols[a:z, 5] = sid
            a = z
        return EventBatch(np.concatenate([p.rel for p in parts]), np.concatenate([p.sign for p in parts]), cols,
                          np.concatenate([p.line for p in parts]), 0, 0, recv=np.concatenate([p.recv for p in parts]))

    def _check_fed(self, bk, cap, gaps: int, malformed: int) -> None:
        src = self.src
        if bk.malformed > malformed and not src.skip_bad:
            raise InputError(bk.reports[-1].reason, src.path, cap.line, cap.raw.decode("utf-8", "replace"))
        if bk.gaps > gaps:
            reason = bk.reports[-1].reason if bk.reports else "gap"
            if not src.skip_bad:
                raise InputError(f"{reason}; the capture holds no later snapshot to resync from (skip_bad=True "
                                 "waits for one)", src.path, cap.line, cap.raw.decode("utf-8", "replace"))
            self.gap_marks.append((cap.line, reason, self.depth_seen - 1, self._sum("applied"), self._sum("snapshots")))

    def _sum(self, counter: str) -> int:
        return sum(getattr(bk, counter) for bk in self.books.values())

    def _snapshot(self, bk, cap) -> None:
        self.snapshot_owner[cap.line] = bk.symbol
        self._switch(bk.symbol)
        gaps, malformed, updates = bk.gaps, bk.malformed, bk.updates
        bk.apply_snapshot(cap.record, cap.recv_ts_ns)
        self._may_wait(bk)
        self._mark(bk, updates, cap)
        self._check_fed(bk, cap, gaps, malformed)

    def _may_wait(self, bk) -> None:
        """Note ``bk`` in :attr:`_waiting` when it waits for a snapshot (only the per-line path
        makes a book wait: a new book, a gap, a buffered event that breaks a snapshot)."""
        if bk._state == _bb._WAIT and bk.symbol not in self._waiting:
            self._waiting[bk.symbol] = list(self.books).index(bk.symbol)

    def _waiting_for(self, last: int) -> list:
        """The books a snapshot at ``last`` can start now (:meth:`BinanceBook.can_start`), in
        :attr:`books` order; drops the ones no longer waiting from :attr:`_waiting`.  O(books
        noted there)."""
        wait, books, noted = _bb._WAIT, self.books, self._waiting
        found = []
        for sym in list(noted):
            bk = books[sym]
            if bk._state != wait:
                del noted[sym]
            elif bk.can_start(last):
                found.append((noted[sym], bk))
        found.sort(key=lambda x: x[0])
        return [bk for _, bk in found]

    def _feed(self, cap) -> None:
        src, rec = self.src, cap.record
        t = type(rec)
        if t is _bb.DepthSnapshot:
            waiting = self._waiting_for(rec.last_update_id)
            if waiting:       # the book whose buffered events lie nearest before this line
                self._snapshot(max(waiting, key=lambda bk: bk._buffer[-1][1]), cap)
            else:
                self.held.append(cap)
            return
        depth = t is _bb.DepthUpdate
        if not depth and t is not _bb.BookTicker and t is not _bb.Trade:
            return      # a response to a request: nothing to do
        sym = rec.symbol.upper()
        bk = self.books.get(sym)
        if bk is None:
            if not depth:
                return  # a ticker or trade of a symbol without a book (yet): nothing to check it against
            bk = self._book(sym)
        if sym != self.current:
            self._switch(sym)
        if depth:
            self.depth_seen += 1
            for held in self.held:
                if bk.starts_with(rec, held.record.last_update_id):
                    self.held.remove(held)
                    self._snapshot(bk, held)
                    break
            if src.allow_empty_start and bk.snapshots == 0:
                # an empty snapshot that this event straddles (futures U <= last <= u, spot U <= last+1 <= u)
                last = rec.first_id if bk.futures else rec.first_id - 1
                empty = np.zeros((0, 2), np.int64)
                before = bk.updates
                bk.apply_snapshot(_bb.DepthSnapshot(last, empty, empty, rec.px_dec, rec.qty_dec, rec.event_ms),
                                  cap.recv_ts_ns)
                self._mark(bk, before, cap)
        gaps, malformed, updates = bk.gaps, bk.malformed, bk.updates
        bk.feed_message(rec, cap.recv_ts_ns)
        self._may_wait(bk)
        self._mark(bk, updates, cap)
        self._check_fed(bk, cap, gaps, malformed)

    def _admit(self, cap) -> None:
        """One decoded line: held while the market is unknown, else fed (with the held ones
        first).  Raises :class:`InputError` (strict mode) and :class:`ReplayError`."""
        if self.market is None:
            if type(cap.record) is _bb.DepthUpdate:
                self.market = "futures" if cap.record.prev_final_id is not None else "spot"
            else:
                self.pending.append(cap)
                if len(self.pending) > _MAX_PENDING:
                    raise ReplayError(f"no depth update in the first {_MAX_PENDING:,} messages: cannot "
                                      "tell a spot from a futures capture (pass market=)", self.src.path)
                return
        for c in self.pending:
            self._feed(c)
        self.pending.clear()
        self._feed(cap)

    def _due(self) -> bool:
        """Whether the lines not handed out fill a batch (checked after every message; the
        updates of a symbol not kept are no lines)."""
        bk = self.books.get(self.current)
        if bk is None:
            return False
        held = bk.updates - bk._taken if self._kept(bk.symbol) else 0
        return self.updates + held - self.taken >= self.batch_updates

    def batches(self) -> Iterator[EventBatch]:
        """The batches after the current position."""
        if self.lane:
            yield from self._lane_batches()
            return
        caps = self.parser.parse_lines(self.cursor)
        try:
            while True:
                try:
                    cap = next(caps)
                except StopIteration:
                    break
                except InputError as e:
                    batch = self._take()
                    if len(batch):
                        yield replace(batch, error=e)
                    raise
                try:
                    self._admit(cap)
                except InputError as e:
                    batch = self._take()
                    if len(batch):
                        yield replace(batch, error=e)
                    raise
                if self._due():
                    yield self._take()
        finally:
            caps.close()
        yield from self._finish()

    def _finish(self) -> Iterator[EventBatch]:
        """After the last line: the checks of books that never started, the notes, the last batch."""
        src, parser = self.src, self.parser
        if self.want is not None and self.want not in self.books:
            shown = ", ".join(list(self.books)[:20]) or "none"
            raise ReplayError(f"no events for symbol {self.want!r} (symbols in the file: {shown})", src.path)
        idle = [s for s, bk in self.books.items() if bk.snapshots == 0 and self._kept(s)]
        if idle and src.skip_bad and len(idle) < len(self.books) and self.notes is not None:
            self.notes.append(f"{src.path}: no usable REST depth snapshot of {', '.join(idle)}: "
                              "their depth updates were not applied")
        if not self.books or (idle and not (src.skip_bad and len(idle) < len(self.books))):
            what = (f"{self.depth_seen:,} depth updates" if self.books else "no depth update")
            who = f" of {', '.join(idle)}" if idle and len(self.books) > 1 else ""
            raise ReplayError(f"the book{who} never started: {what} but no usable REST depth snapshot in the capture "
                              "(open it with allow_empty_start=True to start from an empty book)", src.path)
        if self.notes is not None:
            self.notes.extend(_gap_notes(src.path, self.gap_marks, self.depth_seen, self._sum("applied"),
                                         self._sum("snapshots")))
            if parser.unknown_fields:   # a venue's new fields: ignored, but say so once per file
                shown = ", ".join(f"{k} ({v:,} lines)" for k, v in sorted(parser.unknown_fields.items()))
                self.notes.append(f"{src.path}: unknown message fields ignored: {shown}")
        batch = self._take()
        if len(batch) or batch.last_line >= batch.first_line:
            yield replace(batch, skipped=parser.bad_lines)

    # -- the lane (see the class docstring) ------------------------------------------------------
    def _lane_batches(self) -> Iterator[EventBatch]:
        """:meth:`batches` through the chunk lane: per block of lines, the recorder framing is
        read by :func:`~ddms.io.kernels.recvlines.scan_recorded`, runs of well-framed lines go to
        :meth:`_lane_run`, the other lines to the per-line path.  Whole batches are handed out
        after each block (and before an error, as the per-line path does)."""
        from ddms.io.kernels.recvlines import RECV, scan_recorded
        parser = self.parser
        try:
            for buf, offs, block in self.cursor.spans(lambda: _LANE_LINES):
                n = len(block)
                kind = np.empty(n, np.int8)
                ps, pe, ts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
                scan_recorded(buf, offs, kind, ps, pe, ts)
                base = parser.lines
                stops = [*np.flatnonzero(kind != RECV).tolist(), n]
                i = 0
                for z in stops:
                    while i < z and self._lane is None:     # the market is still unknown: line by line
                        self._line_py(block[i], base + i + 1)
                        i += 1
                    if i < z:
                        self._lane_run(buf, ps[i:z], pe[i:z], ts[i:z], block, base, i)
                    if z < n:
                        self._line_py(block[z], base + z + 1)
                    i = z + 1
                parser.lines = base + n
                yield from self._ready
                self._ready.clear()
        except (InputError, ReplayError) as e:
            yield from self._ready
            self._ready.clear()
            if isinstance(e, InputError):
                batch = self._take()
                if len(batch):
                    yield replace(batch, error=e)
            raise
        yield from self._finish()

    def _line_py(self, raw: bytes, line: int) -> str | None:
        """One line through the per-line path (numbered ``line``); then its rows are numbered and
        a full batch goes to :attr:`_ready`.  Returns the symbol of the book it fed, or None."""
        self.parser.lines = line
        cap = self.parser.parse_next(raw)
        if cap is not None:
            self._admit(cap)
        sym = self.current
        if self._due():
            self._ready.append(self._take())
        else:
            self._number()
        self.current = None
        if self._lane is None and self.market is not None:
            self._start_lane()
        return sym

    def _start_lane(self) -> None:
        from ddms.io.venues.binance import BinanceBooks
        from ddms.io.venues.binance_chunk import ChunkLane
        core = BinanceBooks(self.market, self.src.path)
        core.books = self.books                  # one set of books: the lane applies to the reader's
        core._decoder = self.parser._decoder     # one count of unknown fields
        self._lane = ChunkLane(core, capture=True)

    def _lane_run(self, buf: np.ndarray, ps: np.ndarray, pe: np.ndarray, ts: np.ndarray, block, base: int,
                  i: int) -> None:
        """Well-framed lines ``i..`` of the block (payloads ``buf[ps:pe]``, receive times ``ts``)
        through the lane; a message it cannot apply exactly takes :meth:`_line_py` (its book's
        slot is refreshed after it)."""
        from ddms.io.venues.binance_chunk import Spans
        lane = self._lane
        core = lane.core

        def fallback(t: int) -> tuple:
            sym = self._line_py(block[i + t], base + i + t + 1)
            if sym is not None:
                core._dirty.append(sym)     # the lane refreshes its slot before its next run
            return ()

        def on_fast(i0: int, slots: np.ndarray) -> None:
            self._lane_rows(i0, slots)

        lane.feed_chunk(Spans(buf, ps, pe), np.arange(len(ps), dtype=np.int64), fallback=fallback, on_fast=on_fast,
                        recv=ts, events=self._sink)
        self._sink.clear()
        core._dirty.clear()

    def _lane_rows(self, i0: int, slots: np.ndarray) -> None:
        """Number the rows of one kernel run (messages ``i0..`` of the run's chunk, ``slots``
        their books): each depth update of a kept symbol is the next line, as :meth:`_number`
        numbers them; then full batches go to :attr:`_ready`.  O(rows) in numpy."""
        lane = self._lane
        kinds = lane.run_kinds
        syms = lane.symbols
        if len(self._slot_kept) < len(syms):       # new slots (append-only)
            new = syms[len(self._slot_kept):]
            self._slot_kept = np.concatenate([self._slot_kept, np.array([self._kept(x) for x in new], bool)])
            if self.symbols:
                self._slot_sid = np.concatenate([self._slot_sid, np.array([symbol_id(x) for x in new], np.float64)])
        dep = kinds == 0
        self.depth_seen += int(np.count_nonzero(dep))
        numbered = dep & self._slot_kept[slots]
        number = np.cumsum(numbered) + self.updates
        events, self._sink[:] = list(self._sink), []
        every = self.want is None     # every symbol kept: the run's arrays as they are (no masked copies)
        for ev in events:
            b = ev.batch
            if not len(b):
                continue
            if every:
                rel, sign, cols, recv, line, sym = b.rel, b.sign, b.cols, b.recv, number[b.line - i0], ev.sym
            else:
                keep = self._slot_kept[ev.sym]
                rel, sign, cols, recv, line, sym = (b.rel[keep], b.sign[keep], b.cols[keep], b.recv[keep],
                                                    number[b.line[keep] - i0], ev.sym[keep])
            if len(line):
                self._parts.append(EventBatch(rel, sign, cols, line, int(line[0]), int(line[-1]), recv=recv))
                self._sids.append(self._slot_sid[sym] if self.symbols else None)
        if len(number):
            self.updates = int(number[-1])
        self._cut()

    def _cut(self) -> None:
        """Hand the numbered lines out in whole batches of :attr:`batch_updates` lines (to
        :attr:`_ready`), as the per-line path cuts them after each message that adds one line."""
        size = self.batch_updates
        if self.updates - self.taken < size:
            return
        cat = self._joined()
        bounds = np.arange(self.taken + size, self.updates + 1, size, dtype=np.int64)
        cuts = np.searchsorted(cat.line, bounds, side="right").tolist()
        a = 0
        for last, z in zip(bounds.tolist(), cuts, strict=True):
            self._ready.append(EventBatch(cat.rel[a:z], cat.sign[a:z], cat.cols[a:z], cat.line[a:z], self.taken + 1,
                                          last, recv=cat.recv[a:z]))
            self.taken = last
            a = z
        if a < len(cat.line):
            self._parts.append(EventBatch(cat.rel[a:], cat.sign[a:], cat.cols[a:], cat.line[a:], int(cat.line[a]),
                                          int(cat.line[-1]), recv=cat.recv[a:]))
            self._sids.append(None)


    def _check(self) -> None:
        """The books' and the lane's invariants; the numbered rows not handed out lie after the
        lines handed out, in order.  O(books' levels + rows held)."""
        for bk in self.books.values():
            bk._check()
        if self._lane is not None:
            self._lane._check()
            assert self._lane.core.books is self.books
        assert self.taken <= self.updates and not self._sink
        lines = [p.line for p in self._parts if len(p.line)]
        if lines:
            cat = np.concatenate(lines)
            assert cat[0] > self.taken and cat[-1] <= self.updates and (np.diff(cat) >= 0).all()

    def save_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The reader's state between two batches: JSON values and numpy arrays (no pickle).
        O(the books' levels).  Not for a ``lane`` reader (it reads ahead of its batches)."""
        if self.lane:
            raise ValueError("save_state() of a lane reader: it reads ahead of the batches it hands out "
                             "(use Source.reader(), which reads line by line)")
        self._number()
        if self._parts:
            raise ValueError("save_state() between two batches only (rows not handed out)")
        books, arrays = [], {}
        for i, (sym, bk) in enumerate(self.books.items()):
            m, a = bk.save_state()
            books.append([sym, m])
            arrays |= {f"{i}.{k}": v for k, v in a.items()}
        p = self.parser

        def lines(caps: list) -> list:
            return [[c.line, f"{c.recv_ts_ns} " + c.raw.decode("latin-1")] for c in caps]
        return {"file": self.cursor.position(), "market": self.market, "want": self.want, "updates": self.updates,
                "taken": self.taken, "current": self.current, "depth_seen": self.depth_seen,
                "gap_marks": [list(m) for m in self.gap_marks],
                "parser": {"lines": p.lines, "bad_lines": p.bad_lines, "unknown_fields": p.unknown_fields,
                           "ignored": dict(p.ignored)},
                "pending": lines(self.pending), "held": lines(self.held), "books": books}, arrays

    def load_state(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of the same capture (ValueError when the file
        differs before the saved position, or another symbol was chosen)."""
        from ddms.io.venues.binance_book import BinanceBook
        if meta["want"] != self.want:
            raise ValueError(f"a checkpoint of symbol {meta['want']}, this run reads {self.want}")
        self.cursor.seek(meta["file"])
        self.market, self.updates, self.taken = meta["market"], int(meta["updates"]), int(meta["taken"])
        self.current, self.depth_seen = meta["current"], int(meta["depth_seen"])
        self.gap_marks = [tuple(m) for m in meta["gap_marks"]]
        p = self.parser
        p.lines, p.bad_lines = int(meta["parser"]["lines"]), int(meta["parser"]["bad_lines"])
        p._decoder.unknown_fields = dict(meta["parser"]["unknown_fields"])
        p.ignored = dict(meta["parser"]["ignored"])
        self.pending = [p.parse_line(raw.encode("latin-1"), ln) for ln, raw in meta["pending"]]
        self.held = [p.parse_line(raw.encode("latin-1"), ln) for ln, raw in meta["held"]]
        self.books, self._parts, self._sids = {}, [], []
        for i, (sym, m) in enumerate(meta["books"]):
            bk = self.books[sym] = BinanceBook(m["market"], symbol=sym, source=self.src.path)
            bk.load_state(m, {k[len(f"{i}."):]: v for k, v in arrays.items() if k.startswith(f"{i}.")})
        self._waiting = {sym: i for i, sym in enumerate(self.books)}


def _gap_notes(path: str, marks: list[tuple], depth_seen: int, applied: int, snapshots: int) -> list[str]:
    """One line per gap that ``skip_bad`` replayed through: where, why, and how many depth
    updates from it on were not applied (the book waits for a snapshot; a capture rarely holds
    another, so a single skipped line can silently cost the rest of the file)."""
    if not marks:
        return []
    out = []
    # a gap's losses run until the next gap (or the end of the capture)
    ends = [m[2:] for m in marks[1:]] + [(depth_seen, applied, snapshots)]
    for (line, reason, d0, a0, s0), (d1, a1, s1) in zip(marks, ends, strict=True):
        dropped = (d1 - d0) - (a1 - a0)
        share = f" ({100 * dropped / depth_seen:.0f}% of the capture's {depth_seen:,})" if depth_seen else ""
        why = ("until a later snapshot restarted the book" if s1 > s0
               else "for lack of a later snapshot in the capture to resync from")
        out.append(f"{path}:{line}: {reason}: {dropped:,} depth updates{share} were dropped {why}")
    return out
