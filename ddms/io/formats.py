"""The formats of ddms/io as replay sources: detection from a file's name and first bytes, and a
single-book event stream (``bids``/``asks`` :class:`EventBatch` objects) for one symbol.

Why here: ``ddms.io.sources`` (format detection for ``ddms convert``/``backtest``) registers
these through :data:`FORMATS` without knowing the readers, and nothing in ddms imports replay.

Until the relations carry a ``symbol`` column, a source is ONE book: :func:`symbol_batches`
yields the events of the symbol asked for, or of the file's only symbol; a file with several
symbols and no choice is a :class:`~ddms.errors.ReplayError` naming them when the second one
appears (a merged book of several instruments would be meaningless).  Lines are renumbered
1, 2, ... over the chosen symbol's messages (each message one atomic update).

Cost: detection is a few byte comparisons on the first 64 KiB; reading is the reader's.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ddms.errors import ReplayError
from ddms.io.events import EventBatch, concat
from ddms.io.symbols import symbol_id, with_symbol

if TYPE_CHECKING:
    # imported where used: a run of a file of no ddms/io format (the finance order books) never
    # needs the level readers (~10 ms of module compiling where bytecode is not written)
    from ddms.io.levels import ChunkEvents, SymbolEvents

__all__ = ["FORMATS", "Format", "SymbolBatches", "all_symbol_batches", "detect", "renumber", "symbol_batches"]

_CRYPTOFEED_FIRST = re.compile(rb"^(?:wss?|https?)://\S+ (?:<->|<-|->) [0-9]+(?:\.[0-9]*)?(?::|\s*$)")
_CRYPTOFEED_RECV = re.compile(rb"^[0-9]+\.[0-9]*: [\[{]")
_ZSTD = b"\x28\xb5\x2f\xfd"
_TARDIS_HEADER = b"exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount"


def _first_line(head: bytes) -> bytes:
    for line in head.split(b"\n"):
        if line.strip():
            return line.rstrip(b"\r")
    return b""


def _is_cryptofeed(name: str, head: bytes) -> bool:
    line = _first_line(head)
    return bool(_CRYPTOFEED_FIRST.match(line) or (".ws." in os.path.basename(name) and _CRYPTOFEED_RECV.match(line)))


def _is_dbn(name: str, head: bytes) -> bool:
    return head.startswith(b"DBN") or (head.startswith(_ZSTD) and ".dbn" in os.path.basename(name).lower())


def _is_tardis(name: str, head: bytes) -> bool:
    return _first_line(head).strip() == _TARDIS_HEADER


def _read_cryptofeed(path: str, skip_bad: bool) -> Iterator[SymbolEvents]:
    from ddms.io.cryptofeed import read_cryptofeed
    return read_cryptofeed(path, skip_bad=skip_bad)


def _open_cryptofeed(path: str, skip_bad: bool) -> Any:
    from ddms.io.cryptofeed import CryptofeedReader
    return CryptofeedReader(path, skip_bad=skip_bad)


def _read_dbn(path: str, skip_bad: bool) -> Iterator[SymbolEvents | ChunkEvents]:
    from ddms.io.dbn import read_dbn
    return read_dbn(path, skip_bad=skip_bad)


def _read_tardis(path: str, skip_bad: bool) -> Iterator[SymbolEvents]:
    from ddms.io.tardis import read_tardis
    return read_tardis(path, skip_bad=skip_bad)


@dataclass(frozen=True)
class Format:
    """A format of ddms/io: ``kind`` (its name in ``--kind``), ``detect(name, head)`` (head: the
    first bytes, decompressed for gzip), ``read(path, skip_bad)`` -> :class:`SymbolEvents`,
    ``gzip_ok`` (the reader decompresses gzip itself), ``description`` for error messages."""

    kind: str
    detect: Callable[[str, bytes], bool]
    read: Callable[[str, bool], Iterator[SymbolEvents]]
    gzip_ok: bool
    description: str
    open: Callable[[str, bool], Any] | None = None
    """``open(path, skip_bad)``: the reader as an object whose position can be saved (``events()``
    yielding a list of :class:`SymbolEvents` per input line, ``save_state``/``load_state``), or
    None when the format has none (a checkpoint of such a file is refused)."""


FORMATS: tuple[Format, ...] = (
    Format("cryptofeed", _is_cryptofeed, _read_cryptofeed, True,
           "cryptofeed capture '<url> <-> <ts>' / '<ts>: <json>' (Kraken, OKX, Coinbase, Binance)",
           _open_cryptofeed),
    Format("dbn", _is_dbn, _read_dbn, False, "Databento DBN market-by-order file (.dbn, .dbn.zst)"),
    Format("tardis", _is_tardis, _read_tardis, True, "tardis.dev incremental_book_L2 CSV"),
)


def detect(name: str, head: bytes) -> Format | None:
    """The ddms/io format of a file, or None."""
    for f in FORMATS:
        if f.detect(name, head):
            return f
    return None


def symbol_batches(fmt: Format, path: str, *, symbol: str | None = None, skip_bad: bool = False,
                   notes: list[str] | None = None) -> Iterator[EventBatch]:
    """One book's events from a ddms/io reader: the rows of ``symbol`` (upper case as the venue
    spells it), or of the only symbol in the file.  Raises :class:`ReplayError` when the file
    holds several symbols and none was chosen, or when the chosen one never appears."""
    r = SymbolBatches(fmt, path, symbol=symbol, skip_bad=skip_bad, keep=False)
    r.notes = notes
    return r.batches()


def all_symbol_batches(fmt: Format, path: str, *, symbol: str | None = None, skip_bad: bool = False,
                       notes: list[str] | None = None) -> Iterator[EventBatch]:
    """Every symbol's events in the reader's order, as six-column rows ``(t, id, broker_id,
    volume, price, symbol)`` whose last column is the :func:`~ddms.io.symbols.symbol_id` of the
    symbol (streams that declare a ``symbol VARCHAR`` column).  ``symbol`` keeps one symbol only
    (``FILE#SYMBOL``; a :class:`ReplayError` when it never appears).  Lines are renumbered 1, 2,
    ... over the messages kept (each message one atomic update, whatever its symbol).  Cost:
    the reader's, plus one copy of the rows to add the column."""
    r = SymbolBatches(fmt, path, symbol=symbol, skip_bad=skip_bad, keep=True)
    r.notes = notes
    return r.batches()


class SymbolBatches:
    """The batches of :func:`symbol_batches` (``keep=False``: one symbol's book, five columns)
    or :func:`all_symbol_batches` (``keep=True``: the symbol column), one batch per input line
    that changed a kept book, as an object whose position can be saved when the format's reader
    can (:attr:`Format.open`, the cryptofeed captures): :meth:`save_state` /
    :meth:`load_state` hold the reader's state, the line numbering and the symbols seen, so a
    resumed iteration of :meth:`batches` continues the uninterrupted one exactly."""

    def __init__(self, fmt: Format, path: str, *, symbol: str | None = None, skip_bad: bool = False,
                 keep: bool = True) -> None:
        self.fmt, self.path, self.symbol, self.keep, self.skip_bad = fmt, path, symbol, keep, skip_bad
        self.want = symbol.upper() if symbol is not None else None
        self.reader = fmt.open(path, skip_bad) if fmt.open is not None else None
        self.line = 0           # renumbered: one line per message kept
        self.last_src: int | None = None
        self.seen: list[str] = []
        self._seen: set[str] = set()       # the names of seen, for O(1) membership
        self._sids: dict[str, int] = {}    # symbol_id of each symbol met (a hash per name, once)
        self.notes: list[str] | None = None  # losses to report (books that never started), when given

    @property
    def batch_updates(self) -> int | None:
        """Input lines per step of the reader (its checkpoint boundaries), when it has steps."""
        return getattr(self.reader, "batch_updates", None)

    @batch_updates.setter
    def batch_updates(self, n: int) -> None:
        self.reader.batch_updates = n

    @property
    def resumable(self) -> bool:
        return self.reader is not None

    def _steps(self) -> Iterator[list[SymbolEvents]]:
        if self.reader is not None:
            return self.reader.events()
        return ([ev] for ev in self.fmt.read(self.path, self.skip_bad))

    def batches(self) -> Iterator[EventBatch]:
        """The batches after the current position."""
        from ddms.io.levels import ChunkEvents

        for evs in self._steps():
            parts: list[tuple[EventBatch, Any]] = []     # (rows kept, their symbol ids or one id)
            for ev in evs:
                if type(ev) is ChunkEvents:
                    part = self._chunk_part(ev)
                    if part is not None:
                        parts.append(part)
                    continue
                self._meet(ev.symbol)
                if self.want is not None and ev.symbol != self.want:
                    continue
                parts.append((ev.batch, self._sid(ev.symbol) if self.keep else None))
            if not parts:
                continue
            b = parts[0][0] if len(parts) == 1 else concat([p[0] for p in parts])
            cols = b.cols
            if self.keep:       # one symbol column for the step: ids by part, repeated over its rows
                if len(parts) == 1:
                    ids = parts[0][1]
                else:
                    ids = np.concatenate([np.full(len(p[0]), p[1], np.int64) if np.ndim(p[1]) == 0 else p[1]
                                          for p in parts])
                cols = with_symbol(cols, ids)
            new, self.line, self.last_src = renumber(b.line, self.line, self.last_src)
            yield EventBatch(b.rel, b.sign, cols, new, int(new[0]) if len(new) else self.line + 1, self.line,
                             b.skipped, recv=b.recv)
        self._check_started()
        if self.want is not None and self.symbol is not None and self.want not in self.seen:
            shown = ", ".join(self.seen[:20]) or "none"
            raise ReplayError(f"no events for symbol {self.symbol!r} (symbols in the file: {shown})", self.path)

    def _check_started(self) -> None:
        """At the end of the input: a capture whose depth messages never met a snapshot (a
        cryptofeed Binance capture without its ``.http.`` REST file beside it) gave no rows;
        say so, as the hftbacktest reader does, instead of printing empty views.  Every book
        never started: a :class:`ReplayError`; some: a line in :attr:`notes`.  O(symbols)."""
        core = getattr(getattr(self.reader, "parser", None), "core", None)
        if core is None or not hasattr(core, "summary"):
            return
        syms = core.summary().get("symbols", {})
        never = [s for s, d in syms.items() if not d.get("snapshots") and d.get("depth_events")
                 and (self.want is None or s == self.want)]
        if not never:
            return
        files = getattr(self.reader, "files", [self.path])
        if getattr(core, "venue", "binance") != "binance":    # Kraken, OKX, Coinbase: snapshots come in the stream
            rest = f"the capture holds no {core.venue} snapshot message for them: the venue sends one after a subscribe"
        elif len(files) > 1:
            rest = f"the REST files read: {', '.join(os.path.basename(f) for f in files[1:])}"
        else:
            rest = "no <EXCHANGE>.http.* REST file beside it"
        depth = sum(syms[s]["depth_events"] for s in never)
        msg = (f"{depth:,} depth messages of {', '.join(never[:20])} met no snapshot, so their books never "
               f"started ({rest})")
        if len(never) == len([s for s in syms if self.want is None or s == self.want]):
            raise ReplayError(msg, self.path)
        if self.notes is not None:
            self.notes.append(f"{self.path}: {msg}")

    def _meet(self, sym: str) -> None:
        """Note a symbol met (in order); one book's iteration (no symbol chosen) refuses a second."""
        if sym not in self._seen:
            self._seen.add(sym)
            self.seen.append(sym)
        if self.symbol is None and not self.keep:
            if len(self.seen) > 1:
                raise ReplayError(f"holds several symbols ({', '.join(self.seen)}, ...): choose one as "
                                  f"{self.path}#{self.seen[0]} (or --symbol, symbol=)", self.path)
            self.want = sym

    def _sid(self, sym: str) -> int:
        sid = self._sids.get(sym)
        if sid is None:
            sid = self._sids[sym] = symbol_id(sym)
        return sid

    def _chunk_part(self, ev: ChunkEvents) -> tuple[EventBatch, Any] | None:
        """The rows of a :class:`ChunkEvents` kept (the chosen symbol's, or all) and their
        symbol ids: the same rows and ids its :meth:`ChunkEvents.split` events would give,
        without an object per message.  O(rows) in numpy, O(symbols met) in Python."""
        for sym in ev.names():
            self._meet(sym)
        b = ev.batch
        if self.want is not None:
            try:
                mine = ev.symbols.index(self.want)
            except ValueError:
                return None
            keep = ev.sym == mine
            if not keep.any():
                return None
            if not keep.all():
                b = EventBatch(b.rel[keep], b.sign[keep], b.cols[keep], b.line[keep], b.first_line, b.last_line,
                               b.skipped, recv=None if b.recv is None else b.recv[keep])
            return b, self._sid(self.want) if self.keep else None
        if not self.keep:
            return b, None
        names = ev.symbols
        table = np.array([self._sid(names[i]) for i in range(int(ev.sym.max()) + 1)], np.int64)
        return b, table[ev.sym]

    @property
    def position(self) -> int:
        """Lines handed out so far."""
        return self.line

    def save_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """The reader's state plus the numbering: JSON values and numpy arrays."""
        if self.reader is None:
            raise ValueError(f"{self.path}: the {self.fmt.kind} reader's position cannot be saved")
        meta, arrays = self.reader.save_state()
        return self.state_of(meta, self.line, self.last_src, self.seen, self.want), arrays

    @staticmethod
    def state_of(reader: dict, line: int, last_src: int | None, seen: list[str], want: str | None) -> dict:
        """The :meth:`save_state` of an iteration whose reader is at ``reader`` (its
        ``save_state``), after ``line`` lines (the last made of source line ``last_src``),
        having met the symbols ``seen`` (in order), keeping ``want`` (None: every symbol)."""
        return {"reader": reader, "line": int(line), "last_src": last_src, "seen": list(seen), "want": want}

    def load_state(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of the same file and symbol choice."""
        if self.reader is None:
            raise ValueError(f"{self.path}: the {self.fmt.kind} reader's position cannot be restored")
        if self.symbol is not None and meta["want"] != self.want:
            raise ValueError(f"a checkpoint of symbol {meta['want']}, this run reads {self.want}")
        self.reader.load_state(meta["reader"], arrays)
        self.line, self.last_src = int(meta["line"]), meta["last_src"]
        self.seen, self.want = list(meta["seen"]), meta["want"]
        self._seen = set(self.seen)


def renumber(src: np.ndarray, line: int, last_src) -> tuple[np.ndarray, int, object]:
    """Consecutive line numbers after ``line``, one per distinct consecutive source line.
    O(rows) in numpy."""
    n = len(src)
    if n == 0:
        return np.empty(0, np.int64), line, last_src
    src = np.asarray(src)
    step = np.empty(n, np.int64)
    step[0] = last_src is None or int(src[0]) != last_src
    np.not_equal(src[1:], src[:-1], out=step[1:])   # bool -> int64: 1 where the source line changes
    new = np.cumsum(step) + line
    return new, int(new[-1]), int(src[-1])

