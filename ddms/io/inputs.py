"""A program's input: the files its ``CREATE STREAM|TABLE ... FROM FILE`` clauses declare, read by
their adaptors and merged into one sequence of event batches.

Order of events (deterministic, so ``--every N`` checkpoints are reproducible):

1. every TABLE source, completely, in declaration order (DBToaster loads static tables first);
2. the STREAM sources: when every one of them records receive timestamps (captures, DBN, tardis:
   :data:`ddms.io.sources.RECEIVE_TIMED`), merged by receive time (:mod:`ddms.io.merge`: sorted by
   receive time, then by source, then by position, each source's atomic updates kept whole);
   else interleaved line by line in declaration order (first line of each file, then the second
   line of each, ...), a chunk of each file at a time.

Several ``--data`` files (``data=[A, B, ...]``) each feed every order-book stream: they must be
formats with receive timestamps (an order-book CSV is refused naming it: its ``t`` is not a
receive time, so no merge order would be right) and the streams must declare the ``symbol``
column (one book per instrument; an instrument in two files is refused when it shows up).

One ``orderbook`` file feeds every stream that names it (``book := 'bids'|'asks'``); a ``csv``
file feeds one stream.  An ``orderbook`` file may be in any format :mod:`ddms.io.detect`
knows (order-book CSV, LOBSTER, a Binance capture, ddms Parquet): CSV text is parsed here, the
others by :func:`ddms.io.sources.open_source` (or the ``book_reader`` the application passes, to
collect notes).  The merged batches number relations by :attr:`ProgramInput.names` and
lines globally (position = lines consumed over all files).  With a single source (the common case)
its batches pass through untouched: merging costs nothing then, and O(events) numpy work per
round otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ddms.errors import DdmsError, ProgramError, ReplayError
from ddms.io.detect import GZIP_READERS, detect_kind, read_head
from ddms.io.events import EventBatch, split_lines
from ddms.io.merge import TimedInput, merge_by_receive_time
from ddms.io.orderbook import OrderBookParser, parse_chunks
from ddms.io.schema import COLUMNS
from ddms.io.schema import RELATIONS as BOOKS
from ddms.io.sources import RECEIVE_TIMED, Source, file_symbol, open_source
from ddms.io.symbols import symbol_id, with_symbol
from ddms.m3.ir import Program, Stream

if TYPE_CHECKING:
    # imported where a csv stream is opened: the csv adaptor loads pyarrow (start time)
    from ddms.io.csv import CsvParser

ADAPTORS = ("orderbook", "csv")

BookReader = Callable[[Path, bool], Iterable[EventBatch]]
"""``reader(path, skip_bad)``: an order-book source that is not CSV text (LOBSTER, a Binance
capture, Parquet), checked when called (before any compile) and iterated later for its batches
(rel 0 = bids, 1 = asks; ``skipped`` counting bad lines)."""


@dataclass
class _Counted:
    """The bad-line count of a source read by a :data:`BookReader` (the sum of its batches'
    ``skipped``), in the shape of a parser's."""

    bad_lines: int = 0
    bad_samples: list = field(default_factory=list)


@dataclass
class _Source:
    """One file and the parser that reads it; ``names[i]`` is the stream of its relation i."""

    path: Path
    names: tuple[str, ...]
    parser: OrderBookParser | CsvParser | _Counted
    table: bool
    batches: Iterator[EventBatch] | None = None
    read: Callable[[], Iterable[EventBatch]] | None = None   # the batches of a BookReader's source
    symbol: int | None = None   # CSV text of one instrument whose streams declare a symbol column: its id
    width: int = 5              # columns of its batches (6 with the symbol column)
    timed: bool = False         # its batches carry receive timestamps (EventBatch.recv)
    opened: Any = None          # a BookReader's source (its ``reader()``: a position a checkpoint can hold)


@dataclass
class ProgramInput:
    """The merged input of a program: iterate :meth:`batches`; ``names`` for ``Engine.relmap``.
    ``parsers`` expose ``bad_lines``/``bad_samples`` after a ``skip_bad`` run."""

    names: tuple[str, ...]
    sources: list[_Source] = field(default_factory=list)

    @property
    def parsers(self) -> list[OrderBookParser | CsvParser | _Counted]:
        return [s.parser for s in self.sources]

    def project(self, read: Sequence[bool]) -> None:
        """Projection pushdown: ``read[j]`` says whether the program reads relation ``j`` (of
        :attr:`names`: ``Engine.relmap(names) >= 0``); the order-book CSV parsers drop a book no
        stream reads (:attr:`OrderBookParser.books`: its orders are neither tracked nor emitted,
        the rest of their events unchanged).  Before :meth:`batches`; not for runs that save the
        parsers' state (checkpoints).  O(sources)."""
        for s in self.sources:
            if isinstance(s.parser, OrderBookParser):
                base = self.names.index(s.names[0])   # (numbered as _renumber does; kept if unsure)
                s.parser.books = tuple(bool(read[base + i]) if base + i < len(read) else True for i in range(2))

    @property
    def width(self) -> int:
        """Columns of a merged batch: the widest source's, so that one batch shape serves every
        relation."""
        return max((_width(s) for s in self.sources), default=0)

    def batches(self, chunks: Callable[[Path], Iterable[bytes]]) -> Iterator[EventBatch]:
        """The events of every source in the order of the module docstring; ``chunks(path)``
        reads a file (the CLI passes one that draws progress).  A bad line stops everything
        after the events before it (strict parsers) with the :class:`InputError` naming it."""
        for s in self.sources:
            s.batches = parse_chunks(s.parser, chunks(s.path)) if s.read is None else _counted(s.parser, s.read())
            if s.symbol is not None:
                s.batches = _with_symbol(s.batches, s.symbol)
        offset = 0
        for s in (s for s in self.sources if s.table):
            last = offset
            for b in s.batches:
                b = self._renumber(s, b, offset)
                last = b.last_line
                yield b
            offset = last
        streams = [s for s in self.sources if not s.table]
        if len(streams) == 1:
            for b in streams[0].batches:
                yield self._renumber(streams[0], b, offset)
            return
        if self.merged:
            yield from merge_by_receive_time(
                [TimedInput(s.batches, str(s.path), self.names.index(s.names[0])) for s in streams],
                width=self.width, offset=offset)
            return
        yield from _interleave(self, streams, offset)

    @property
    def merged(self) -> bool:
        """Whether the stream sources merge by receive time (several, every one timed)."""
        streams = [s for s in self.sources if not s.table]
        return len(streams) > 1 and all(s.timed for s in streams)

    def _renumber(self, s: _Source, b: EventBatch, offset: int) -> EventBatch:
        """Relations to global numbers (identity for the first source), lines shifted by ``offset``."""
        base = self.names.index(s.names[0])
        if base:
            b = replace(b, rel=(b.rel + base).astype(np.int8))
        if offset:
            b = replace(b, line=b.line + offset, first_line=b.first_line + offset, last_line=b.last_line + offset)
        return b


def _interleave(pi: ProgramInput, streams: list[_Source], offset: int,
                pending: dict[int, EventBatch] | None = None) -> Iterator[EventBatch]:
    """Round-robin by line.  Each round tops up every unfinished source's pending lines to at
    least one line, takes the same number ``m`` (the smallest pending count) of lines from each and
    orders them (local line j, source s); the rest waits for the next round.  A source whose
    pending lines stop at a bad line ends the merge right before that line's merged position.
    ``pending`` (source number -> its lines read but not merged yet) is the merge's whole state
    between two yields: a caller passing its own dict can save it there (a checkpoint) and
    continue a merge from a saved one (:mod:`ddms.runtime.resume`)."""
    width = pi.width
    pending = {} if pending is None else pending
    active = list(range(len(streams)))
    while active:
        for k in list(active):
            while k not in pending or _lines(pending[k]) == 0 and pending[k].error is None:
                b = next(streams[k].batches, None)
                if b is None:
                    break
                pending[k] = b
            if k not in pending or (_lines(pending[k]) == 0 and pending[k].error is None):
                active.remove(k)
                pending.pop(k, None)
        if not active:
            return
        m = min(_lines(pending[k]) for k in active)
        takes = []
        for k in active:
            b = pending[k]
            head, pending[k] = split_lines(b, b.first_line + m - 1)
            takes.append((k, head, b.error if m == _lines(b) else None))
        counts = np.full(len(takes), m, np.int64)
        n_lines = len(takes) * m
        # a bad line right after this round's lines stops the merge once they are applied
        stop = next(((n_lines, err) for _, _, err in takes if err is not None), None)
        rel, sign, cols, line = [], [], [], []
        for idx, (k, head, _) in enumerate(takes):
            rel.append(head.rel + pi.names.index(streams[k].names[0]))
            sign.append(head.sign)
            c = np.zeros((len(head), width))
            c[:, :head.cols.shape[1]] = head.cols
            cols.append(c)
            line.append(_global(head.line - head.first_line, idx, counts))
        g_all = np.concatenate(line)
        order = np.argsort(g_all, kind="stable")
        batch = EventBatch(np.concatenate(rel).astype(np.int8)[order], np.concatenate(sign)[order],
                           np.concatenate(cols)[order], g_all[order] + offset + 1, offset + 1, offset + n_lines,
                           sum(h.skipped for _, h, _ in takes), None)
        offset += n_lines
        if stop is not None:
            yield replace(batch, error=stop[1])
            raise stop[1]
        yield batch


def _counted(counter: _Counted, batches: Iterable[EventBatch]) -> Iterator[EventBatch]:
    for b in batches:
        counter.bad_lines += b.skipped
        yield b


def _with_symbol(batches: Iterator[EventBatch], sid: int) -> Iterator[EventBatch]:
    for b in batches:
        yield replace(b, cols=with_symbol(b.cols, sid))


def _width(s: _Source) -> int:
    if hasattr(s.parser, "stream"):
        return len(s.parser.stream.columns)
    return s.width


def _lines(b: EventBatch) -> int:
    return b.last_line - b.first_line + 1


def _global(j: np.ndarray, k: int, counts: np.ndarray) -> np.ndarray:
    """0-based merged position of local line ``j`` of source ``k`` when lines are ordered (j, k):
    the lines of every source with a smaller local index, plus those of earlier sources with the
    same index."""
    before = np.zeros(len(j), np.int64)
    for t, c in enumerate(counts):
        before += np.minimum(c, j + (1 if t < k else 0))
    return before


def open_program_input(program: Program, base: Path, *, data: str | os.PathLike | Sequence[Path] | None = None,
                       skip_bad: bool = False, book_reader: BookReader | None = None) -> ProgramInput:
    """The sources ``program`` declares (paths relative to ``base``, the program's folder).
    ``data`` replaces the file of every orderbook stream (``ddms run --data``), or of the only
    stream when there is one source; several ``data`` files each feed every orderbook stream,
    merged by receive time (module docstring).  Streams without a FROM clause get no input.
    Orderbook files that are not CSV text are read by ``book_reader`` (default
    :func:`ddms.io.sources.open_source`).  Cost: the first 64 KiB of every file, read to detect its format."""
    datas = [Path(data)] if isinstance(data, str | os.PathLike) else [Path(d) for d in data or []]
    if len(datas) > 1:
        return _several(program, base, datas, skip_bad, book_reader)
    data = datas[0] if datas else None
    declared = [s for s in program.streams if s.source is not None]
    for s in declared:
        if s.source.adaptor.lower() not in ADAPTORS:
            raise ProgramError(f"stream {s.name}: unknown adaptor {s.source.adaptor!r} (known: {', '.join(ADAPTORS)})")
    if not declared:
        if data is None:
            raise DdmsError("the program's streams declare no FROM FILE: give --data FILE (an order-book file)")
        declared = []
    single = len({(s.source.path, s.source.adaptor.lower()) for s in declared}) == 1
    groups: dict[tuple, list[Stream]] = {}
    for s in declared:
        adaptor = s.source.adaptor.lower()
        path = data if data is not None and (adaptor == "orderbook" or single) else base / s.source.path
        key = (str(path), adaptor, s.kind) if adaptor == "orderbook" else (str(path), adaptor, s.name)
        groups.setdefault(key, []).append(s)
    sources: list[_Source] = []
    if data is not None and not declared:
        kind = _data_kind(data)
        sources.append(_orderbook_source(program, list(program.streams), data, skip_bad, kind, book_reader))
    for (path, adaptor, _), streams in groups.items():
        given = Path(path)
        path = given.resolve()
        # named on the command line: named as given there
        kind = (_data_kind(data, adaptor) if given == data else
                _data_kind(path, adaptor, f" (declared by stream {streams[0].name})"))
        if adaptor == "orderbook":
            sources.append(_orderbook_source(program, streams, path, skip_bad, kind, book_reader))
        else:
            from ddms.io.csv import CsvParser  # here, not at the top: pyarrow (start time)
            s = streams[0]
            sources.append(_Source(path, (s.name,), CsvParser.for_stream(s, source=str(path), skip_bad=skip_bad),
                                   s.kind == "TABLE"))
    # tables first, then streams, each in declaration order; relation numbers follow that order
    sources.sort(key=lambda s: not s.table)
    names = tuple(dict.fromkeys(n for s in sources for n in s.names))   # (files feeding the same streams)
    return ProgramInput(names, sources)


def _several(program: Program, base: Path, datas: list[Path], skip_bad: bool,
             book_reader: BookReader | None) -> ProgramInput:
    """Several ``--data`` files: each one feeds every orderbook stream (the others keep their
    declared files), merged by receive time.  Refused, naming the culprit, before any compile: a
    program whose orderbook streams lack the symbol column, a file without receive timestamps."""
    books = [s for s in program.streams if s.source is None or s.source.adaptor.lower() == "orderbook"]
    if not books:
        raise DdmsError("several --data files replace the files of order-book streams, and this program declares "
                        "none")
    if not any(len(s.columns) > len(COLUMNS) for s in books):
        names = ", ".join(s.name for s in books)
        raise ProgramError(f"several --data files are several books: the order-book streams ({names}) need the "
                           "symbol column, e.g. bids(t, id, broker_id, volume, price, symbol VARCHAR)")
    seen: set[Path] = set()
    for d in datas:
        if d.exists() and d.resolve() in seen:
            raise DdmsError(f"{d}: given twice as --data (each file's books would be merged with themselves)")
        seen.add(d.resolve() if d.exists() else d)
    kinds = [_data_kind(d) for d in datas]
    for d, kind in zip(datas, kinds, strict=True):
        if kind not in RECEIVE_TIMED:
            what = _WHAT.get(kind, "an order-book CSV file" if kind == "orderbook" else f"a {kind} file")
            raise ReplayError(f"{what} has no receive timestamps, and several --data files are merged by receive time "
                              f"(files that record one: {', '.join(RECEIVE_TIMED)}); give it alone, or declare it "
                              "with FROM FILE in the program (stream files without receive times are interleaved "
                              "line by line)", str(d))
    others = [s for s in program.streams if s.source is not None and s.source.adaptor.lower() != "orderbook"]
    sources = [_orderbook_source(program, books, d.resolve() if d.exists() else d, skip_bad, kind, book_reader)
               for d, kind in zip(datas, kinds, strict=True)]
    if others:
        rest = open_program_input(replace(program, streams=tuple(others)), base, skip_bad=skip_bad)
        sources = rest.sources + sources
    sources.sort(key=lambda s: not s.table)
    names = tuple(dict.fromkeys(n for s in sources for n in s.names))
    return ProgramInput(names, sources)


_WHAT = {"parquet": "a Parquet file", "binance": "a Binance capture ('<recv_ts_ns> <json>' lines)",
         "lobster": "a LOBSTER message file"}


def _data_kind(path: Path, adaptor: str = "orderbook", by: str = "") -> str:
    """The format of a data file, from :func:`ddms.io.detect.detect_kind` (the one place
    formats are recognised): ``"orderbook"`` for CSV text an order-book stream parses (or text of
    no known shape: the parser then names its first bad line), ``"csv"`` for a CSV stream's
    text, else the detected kind (``lobster``, ``binance``, ``parquet``: order-book streams only).
    Refuses, before any compile, a missing file, a directory, a gzip file that is not a capture,
    and a Parquet file or capture named for a CSV stream.  ``by`` says who named the file."""
    if not path.exists() and "#" in str(path):   # FILE#SYMBOL: one symbol of a multi-symbol capture
        path = Path(str(path).rsplit("#", 1)[0])
    if not path.exists():
        raise DdmsError(f"{path}: no such data file{by}")
    if path.is_dir():
        raise ReplayError(f"is a directory, not a data file{by}", str(path))
    try:
        head, gz = read_head(str(path))
    except OSError as e:
        raise ReplayError(f"cannot read: {e.strerror or e}", str(path)) from None
    try:
        kind: str | None = detect_kind(str(path), head)
    except ReplayError:
        kind = None          # text of another shape: the stream's parser judges it line by line
    if gz and kind not in ("binance", *GZIP_READERS):
        raise ReplayError(f"a gzip-compressed file{by} that is not a Binance capture: decompress it first (gunzip)",
                          str(path))
    if adaptor == "orderbook":
        return "orderbook" if kind is None else kind
    if kind in ("parquet", "binance"):
        raise ReplayError(f"{_WHAT[kind]}{by}, but a CSV stream reads CSV text (order-book streams, "
                          "LINE DELIMITED orderbook, read any format)", str(path))
    return "csv"


def orderbook_problem(stream: Stream) -> tuple[str | None, str] | None:
    """What makes an orderbook stream's options unusable, or None: the option at fault (None
    when ``book`` is missing and the name is not bids/asks) and the reason.  The one rule behind
    SQL declarations (whose error points at the option) and M3 programs (whose error names the
    stream): a book other than bids/asks would feed the stream nothing (silently empty views),
    and brokers must be an integer >= 1 (broker_id = order id mod brokers)."""
    book = stream.source.option("book") if stream.source is not None else None
    if book is None and stream.name.lower() not in BOOKS:
        return None, f"stream {stream.name} needs book := 'bids' or 'asks' (or the name bids or asks)"
    if book is not None and book.lower() not in BOOKS:
        return "book", f"book := {book!r} must be 'bids' or 'asks'"
    cols = stream.columns
    if len(cols) > len(COLUMNS) and (len(cols) > len(COLUMNS) + 1 or cols[-1].type != "string"):
        return None, (f"stream {stream.name} has columns {', '.join(c.name for c in cols)}: an order-book stream has "
                      "t, id, broker_id, volume, price and optionally a sixth column of symbols (symbol VARCHAR)")
    raw = stream.source.option("brokers", "10") if stream.source is not None else "10"
    try:
        brokers = int(raw)
    except ValueError:
        brokers = 0
    if brokers < 1:
        return "brokers", f"brokers := {raw!r} must be an integer >= 1 (broker_id = order id mod brokers)"
    return None


def orderbook_options(stream: Stream) -> tuple[str, int]:
    """The ``book`` (``bids``/``asks``; default: the stream's name) and ``brokers`` (default 10)
    of an orderbook stream; :class:`ProgramError` naming the stream when
    :func:`orderbook_problem` finds one."""
    problem = orderbook_problem(stream)
    if problem is not None:
        raise ProgramError(f"stream {stream.name}: orderbook {problem[1]}")
    book = stream.source.option("book") if stream.source is not None else None
    brokers = stream.source.option("brokers", "10") if stream.source is not None else "10"
    return (book or stream.name).lower(), int(brokers)


def _open_book(path: Path, skip_bad: bool, symbols: bool = False) -> Source:
    """The default reader of an order-book file that is not CSV text: :func:`ddms.io.sources.open_source`
    (``symbols``: rows carry the symbol column)."""
    return open_source(path, skip_bad=skip_bad, symbols=symbols)


def _orderbook_source(program: Program, streams: list[Stream], path: Path, skip_bad: bool,
                      kind: str = "orderbook", book_reader: BookReader | None = None) -> _Source:
    """One order-book file feeds its bids and asks streams (by ``book :=``, else by name): CSV
    text through an :class:`OrderBookParser`, any other ``kind`` through ``book_reader``."""
    options = {s.name: orderbook_options(s) for s in streams if s.source is not None}
    brokers = {b for _, b in options.values()} or {10}
    if len(brokers) > 1:
        raise ProgramError(f"{path}: order-book streams disagree on brokers := ...")
    by_book = {"bids": "bids", "asks": "asks"}
    for s in streams:
        by_book[options[s.name][0] if s.name in options else s.name.lower()] = s.name
    names = (by_book["bids"], by_book["asks"])
    table = any(s.kind == "TABLE" for s in streams)
    symbols = any(len(s.columns) > len(COLUMNS) for s in streams)
    width = len(COLUMNS) + symbols
    if kind != "orderbook":
        reader = book_reader or _open_book
        # (only a program with a symbol column asks for one: readers of single-book programs stay as they were)
        source = reader(path, skip_bad, symbols=True) if symbols else reader(path, skip_bad)
        return _Source(path, names, _Counted(), table, read=lambda: iter(source), width=width,
                       timed=kind in RECEIVE_TIMED, opened=source)
    sid = None
    if symbols:
        declared = {s.source.option("symbol") for s in streams if s.source is not None} - {None}
        if len(declared) > 1:
            raise ProgramError(f"{path}: order-book streams disagree on symbol := ...")
        if not path.exists() and "#" in path.name:        # FILE#SYMBOL
            path, named = Path(str(path).rsplit("#", 1)[0]), str(path).rsplit("#", 1)[1]
            if named.endswith("*"):       # FILE#PREFIX*: the file's one symbol with a prefix
                named = named[:-1] + (declared.pop() if declared else file_symbol(str(path)))
            declared = declared or {named}
        sid = symbol_id(declared.pop() if declared else path.name.split(".", 1)[0].upper())
    parser = OrderBookParser(brokers=brokers.pop(), source=str(path), skip_bad=skip_bad)
    return _Source(path, names, parser, table, symbol=sid, width=width)
