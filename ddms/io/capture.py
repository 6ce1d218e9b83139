"""Capture lines ``<recv_ts_ns> <json>`` -> typed Binance records (sans-I/O), plus a .gz reader.

The captures in ``../shared/data/binance`` (hftbacktest's collector) hold one websocket message
per line after its local receive time in ns: stream messages in the combined-stream envelope
``{"stream": ..., "data": {...}}`` and one REST depth snapshot without an envelope.

:func:`split_line` only splits a line (for consumers that forward or decode the JSON themselves,
e.g. a replay server, or :meth:`BinanceBook.feed_message` which counts bad messages instead of
raising); :class:`CaptureParser` also decodes it into a record of :mod:`ddms.io.venues.binance_book`
(:class:`DepthUpdate`, :class:`BookTicker`, :class:`Trade`, :class:`DepthSnapshot`).  Errors are
:class:`InputError` naming the source and the 1-based line.  :func:`read_capture` is the thin file
transport (gzip or plain text, chosen by the file's magic bytes; damaged gzip data is a
:class:`ReplayError`).

Cost: splitting is a ``bytes.partition`` and an ``int``; decoding is
:class:`~ddms.io.venues.binance_book.Decoder`'s (one numba scan per message).
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ddms.errors import InputError, ReplayError
from ddms.io.venues.binance_book import Decoder, Record

__all__ = ["CaptureParser", "Captured", "iter_lines", "read_capture", "split_line"]


@dataclass(frozen=True, slots=True)
class Captured:
    """One capture line: its 1-based ``line`` number, the local receive time, the raw JSON (as
    received; what a replay server sends on) and the decoded ``record``."""

    line: int
    recv_ts_ns: int
    raw: bytes
    record: Record


def split_line(line: bytes | str, line_no: int = 0, source: str = "<capture>") -> tuple[int, bytes]:
    """``b"<recv_ts_ns> <json>"`` -> ``(recv_ts_ns, json_bytes)``; a trailing newline (and CR)
    is stripped.  Raises :class:`InputError` for a line without a space or whose timestamp is not
    a non-negative integer.  O(len(line)) for the copy-free split."""
    if isinstance(line, str):
        line = line.encode("utf-8", "surrogatepass")
    line = line.rstrip(b"\r\n")
    ts, sep, js = line.partition(b" ")
    if not sep or not js.strip():
        raise InputError("capture line is not '<recv_ts_ns> <json>'", source, line_no,
                         line.decode("utf-8", "replace"))
    if not ts.isdigit():
        raise InputError(f"receive timestamp is not a non-negative integer: {ts[:30]!r}", source, line_no,
                         line.decode("utf-8", "replace"))
    return int(ts), js


class CaptureParser:
    """Decodes capture lines into :class:`Captured` records.  ``source`` names the capture in
    errors; ``skip_bad`` makes :meth:`parse_lines` count bad lines (``bad_lines``) and keep the
    first ``max_samples`` errors in ``bad_samples`` instead of raising."""

    def __init__(self, source: str = "<capture>", *, skip_bad: bool = False, max_samples: int = 10,
                 book_streams: bool = False) -> None:
        self.source = source
        self.skip_bad = skip_bad
        self.max_samples = max_samples
        self.book_streams = book_streams
        """Skip (count in :attr:`ignored`) the lines of streams other than depth, bookTicker and
        trade (``aggTrade``, klines, ...: a recorder may subscribe to anything), as a venue core
        does, instead of failing on their unknown event types."""
        self.ignored: dict[str, int] = {}
        self.lines = 0
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self._decoder = Decoder()

    @property
    def unknown_fields(self) -> dict[str, int]:
        """Unknown message fields ignored so far (name -> lines carrying it)."""
        return dict(self._decoder.unknown_fields)

    def parse_line(self, line: bytes | str, line_no: int | None = None) -> Captured:
        """Decode one line (``line_no`` defaults to the parser's running count + 1).  Raises
        :class:`InputError`; does not count the line."""
        n = self.lines + 1 if line_no is None else line_no
        ts, js = split_line(line, n, self.source)
        return Captured(n, ts, js, self._decoder.decode(js, self.source, n))

    def parse_lines(self, lines: Iterable[bytes | str]) -> Iterator[Captured]:
        """Decode lines in order, numbering them from the running count.  Blank lines are
        counted but yield nothing.  In strict mode the first bad line raises."""
        for raw in lines:
            self.lines += 1
            cap = self.parse_next(raw)
            if cap is not None:
                yield cap

    def parse_next(self, raw: bytes | str) -> Captured | None:
        """:meth:`parse_lines`' step for one line, numbered :attr:`lines` (the caller has
        counted it): None for a blank, ignored or (``skip_bad``) bad line."""
        if not raw.strip():
            return None
        try:
            return self.parse_line(raw, self.lines)
        except InputError as e:
            if self.book_streams and (kind := _other_stream(raw)) is not None:   # (only then: no cost)
                self.ignored[kind] = self.ignored.get(kind, 0) + 1
                return None
            if not self.skip_bad:
                raise
            self.bad_lines += 1
            if len(self.bad_samples) < self.max_samples:
                self.bad_samples.append(e)
            return None


_STREAM = re.compile(rb'[0-9]+ \{\s*"stream"\s*:\s*"([^"\\@]*)@([^"\\]*)"')
_BOOK_STREAMS = (b"depth", b"bookticker", b"trade")


def _other_stream(raw: bytes | str) -> str | None:
    """The kind of a combined-stream line's stream when it is not one a book uses (``aggTrade``,
    ``kline_1m``, ...), else None.  O(1): a regex at the start of the line."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    m = _STREAM.match(raw)
    if m is None:
        return None
    kind = m.group(2).lower()
    return None if kind.startswith(_BOOK_STREAMS) else kind.decode("ascii", "replace")


def iter_lines(path: str | os.PathLike) -> Iterator[bytes]:
    """The raw lines of a capture file, gzip-compressed (by magic bytes) or plain.  A directory,
    and gzip data that is corrupt or ends early (a capture cut off while recording), are a
    :class:`ReplayError` naming the file -- the latter after the lines before the damage."""
    src = os.fspath(path)
    if os.path.isdir(src):
        raise ReplayError("is a directory, not a data file", src)
    with open(src, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        with open(src, "rb") as f:
            yield from f
        return
    n = 0
    try:
        with gzip.open(src, "rb") as f:
            for line in f:
                yield line
                n += 1
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ReplayError(f"corrupt or truncated gzip data after line {n:,} ({e})", src) from None


def read_capture(path: str | os.PathLike, *, skip_bad: bool = False) -> Iterator[Captured]:
    """Decode every line of a capture file (see :class:`CaptureParser`).  Raises
    :class:`InputError` naming the file and line on the first bad line unless ``skip_bad``."""
    parser = CaptureParser(os.fspath(path), skip_bad=skip_bad)
    yield from parser.parse_lines(iter_lines(path))
