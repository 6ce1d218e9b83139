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

import numpy as np

from ddms.errors import ReplayError
from ddms.io.events import EventBatch
from ddms.io.levels import SymbolEvents
from ddms.io.symbols import symbol_id, with_symbol

__all__ = ["FORMATS", "Format", "all_symbol_batches", "detect", "symbol_batches"]

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


def _read_dbn(path: str, skip_bad: bool) -> Iterator[SymbolEvents]:
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


FORMATS: tuple[Format, ...] = (
    Format("cryptofeed", _is_cryptofeed, _read_cryptofeed, True,
           "cryptofeed capture '<url> <-> <ts>' / '<ts>: <json>' (Kraken, OKX, Coinbase, Binance)"),
    Format("dbn", _is_dbn, _read_dbn, False, "Databento DBN market-by-order file (.dbn, .dbn.zst)"),
    Format("tardis", _is_tardis, _read_tardis, True, "tardis.dev incremental_book_L2 CSV"),
)


def detect(name: str, head: bytes) -> Format | None:
    """The ddms/io format of a file, or None."""
    for f in FORMATS:
        if f.detect(name, head):
            return f
    return None


def symbol_batches(fmt: Format, path: str, *, symbol: str | None = None, skip_bad: bool = False
                   ) -> Iterator[EventBatch]:
    """One book's events from a ddms/io reader: the rows of ``symbol`` (upper case as the venue
    spells it), or of the only symbol in the file.  Raises :class:`ReplayError` when the file
    holds several symbols and none was chosen, or when the chosen one never appears."""
    want = symbol.upper() if symbol is not None else None
    seen: list[str] = []
    line = 0          # renumbered: one line per message of the chosen symbol
    last_src = None
    for ev in fmt.read(path, skip_bad):
        if ev.symbol not in seen:
            seen.append(ev.symbol)
        if symbol is None:
            if len(seen) > 1:
                raise ReplayError(f"holds several symbols ({', '.join(seen)}, ...): choose one as "
                                  f"{path}#{seen[0]} (or --symbol, symbol=)", path)
            want = ev.symbol
        if ev.symbol != want:
            continue
        b = ev.batch
        new, line, last_src = _renumber(b.line, line, last_src)
        yield EventBatch(b.rel, b.sign, b.cols, new, int(new[0]) if len(new) else line + 1, line, recv=b.recv)
    if symbol is not None and want not in seen:
        shown = ", ".join(seen[:20]) or "none"
        raise ReplayError(f"no events for symbol {symbol!r} (symbols in the file: {shown})", path)


def all_symbol_batches(fmt: Format, path: str, *, symbol: str | None = None, skip_bad: bool = False
                       ) -> Iterator[EventBatch]:
    """Every symbol's events in the reader's order, as six-column rows ``(t, id, broker_id,
    volume, price, symbol)`` whose last column is the :func:`~ddms.io.symbols.symbol_id` of the
    symbol (streams that declare a ``symbol VARCHAR`` column).  ``symbol`` keeps one symbol only
    (``FILE#SYMBOL``; a :class:`ReplayError` when it never appears).  Lines are renumbered 1, 2,
    ... over the messages kept (each message one atomic update, whatever its symbol).  Cost:
    the reader's, plus one copy of the rows to add the column."""
    want = symbol.upper() if symbol is not None else None
    ids: dict[str, int] = {}
    line = 0
    last_src = None
    for ev in fmt.read(path, skip_bad):
        sid = ids.get(ev.symbol)
        if sid is None:
            sid = ids[ev.symbol] = symbol_id(ev.symbol)
        if want is not None and ev.symbol != want:
            continue
        b = ev.batch
        new, line, last_src = _renumber(b.line, line, last_src)
        yield EventBatch(b.rel, b.sign, with_symbol(b.cols, sid), new, int(new[0]) if len(new) else line + 1, line,
                         b.skipped, recv=b.recv)
    if want is not None and want not in ids:
        shown = ", ".join(list(ids)[:20]) or "none"
        raise ReplayError(f"no events for symbol {symbol!r} (symbols in the file: {shown})", path)


def _renumber(src: np.ndarray, line: int, last_src) -> tuple[np.ndarray, int, object]:
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
