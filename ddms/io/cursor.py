"""Resumable line reading of a data file (plain or gzip): the lines after a saved position.

Why: a checkpoint of a capture reader (:mod:`ddms.io.capture`, :mod:`ddms.io.cryptofeed`) must
say where in each file the reader stopped, and a resumed run must continue there and nowhere
else.  A :class:`LineCursor` counts the lines and (decompressed) bytes it has handed out;
:meth:`LineCursor.position` is that position as JSON values plus a hash of the last line handed
out, and :meth:`LineCursor.seek` continues from such a position after checking that the file
has the same line there (a checkpoint of another file is refused, never continued).

Cost: reading is a buffered file's (or gzip's) line iteration; :meth:`seek` is an ``lseek`` for
a plain file and a decompression of everything before the position for a gzip file (gzip has no
random access: a resumed gzip capture pays that once).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any, overload

import numpy as np

from ddms.errors import ReplayError

__all__ = ["LineCursor", "Lines", "is_gzip", "position"]

_READ = 1 << 22     # bytes per read of LineCursor.spans (4 MiB: the lines of a step or more, any file size)


class Lines:
    """The lines ``data[offs[i]:offs[i + 1]]`` of a buffer as a read-only sequence of bytes, each
    cut out only when asked for (:meth:`LineCursor.spans`: a consumer that hands most lines to a
    numba kernel as spans reads few of them).  O(1) to build; an item costs its length."""

    __slots__ = ("data", "offs")

    def __init__(self, data: bytes, offs: np.ndarray) -> None:
        self.data = data
        self.offs = offs

    def __len__(self) -> int:
        return len(self.offs) - 1

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        n = len(self.offs) - 1
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.data[int(self.offs[i]):int(self.offs[i + 1])]

    def __iter__(self) -> Iterator[bytes]:
        data, offs = self.data, self.offs.tolist()
        return (data[a:b] for a, b in zip(offs, offs[1:], strict=False))


def is_gzip(path: str | os.PathLike) -> bool:
    """Whether the file starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()[:20]


def position(path: str, line: int, offset: int, last: bytes) -> dict[str, Any]:
    """A position in ``path`` as :meth:`LineCursor.position` gives it: after ``line`` lines and
    ``offset`` bytes, ``last`` the last line's bytes (its newline included).  A writer of the
    file (a recorder) states its own position with it.  O(len(last))."""
    return {"file": path, "line": line, "offset": offset, "last": _digest(last), "last_len": len(last)}


class LineCursor:
    """The raw lines of ``path`` (gzip by its magic bytes, else plain), from the start or from
    :meth:`seek`'s position.  :attr:`line` counts the lines handed out (1-based number of the
    last one), :attr:`offset` the bytes they took.  A directory, and gzip data that is corrupt
    or ends early, are a :class:`ReplayError` naming the file (the latter after the lines
    before the damage)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            raise ReplayError("is a directory, not a data file", self.path)
        self.gz = is_gzip(self.path)
        self.line = 0
        self.offset = 0
        self._last = b""

    def mark(self) -> tuple[int, int, bytes]:
        """The current position, cheaply (no hashing): for :meth:`position` later.  O(1)."""
        return self.line, self.offset, self._last

    def position(self, mark: tuple[int, int, bytes] | None = None) -> dict[str, Any]:
        """Where the next line starts (or where it started at ``mark``), as JSON values (line
        count, byte offset, hash of the last line handed out).  O(length of that line)."""
        line, offset, last = mark if mark is not None else self.mark()
        return position(self.path, line, offset, last)

    def seek(self, pos: dict[str, Any]) -> None:
        """Continue after a :meth:`position` of the same file: the line before it must hash to
        the saved value (ValueError naming the file otherwise)."""
        offset, n = int(pos["offset"]), int(pos["last_len"])
        if offset < n or n < 0:
            raise ValueError(f"{self.path}: corrupt saved position")
        with self._open() as f:
            f.seek(offset - n)
            last = f.read(n)
        if len(last) != n or _digest(last) != pos["last"]:
            raise ValueError(f"the input {self.path} is not the one checkpointed: its line {pos['line']:,} "
                             f"(before byte {offset:,}) differs")
        self.line, self.offset, self._last = int(pos["line"]), offset, last

    def _open(self):
        return gzip.open(self.path, "rb") if self.gz else open(self.path, "rb")

    def blocks(self, size: Callable[[], int]) -> Iterator[list[bytes]]:
        """The lines after the current position in lists of ``size()`` lines (asked before each
        list: a consumer may change it between lists), counted a list at a time -- the lines of
        :meth:`__iter__` without a generator step and three attribute updates per line.  Plain
        files only (ValueError for gzip: its damage must be met line by line, by :meth:`__iter__`)."""
        if self.gz:
            raise ValueError(f"{self.path}: blocks() reads plain files, this one is gzip")
        with open(self.path, "rb") as f:
            if self.offset:
                f.seek(self.offset)
            while True:
                block = list(islice(f, max(1, size())))
                if not block:
                    return
                self.line += len(block)
                self.offset += sum(map(len, block))
                self._last = block[-1]
                yield block

    def spans(self, size: Callable[[], int]) -> Iterator[tuple[np.ndarray, np.ndarray, Lines]]:
        """:meth:`blocks` as buffers: per list of ``size()`` lines ``(buf, offs, lines)``, line
        ``i`` being ``buf[offs[i]:offs[i + 1]]`` (``buf`` a uint8 view of the bytes read, shared
        by consecutive blocks; ``lines`` the same lines as bytes, cut out on demand).  Why: a
        reader that scans the lines in numba (:mod:`ddms.io.cryptofeed`) needs no bytes object per
        line: reading lines one by one, joining them back and measuring them was ~20% of
        reading a Coinbase capture.  The lines are :meth:`__iter__`'s (split after each
        ``\n``; the last one may lack it) and the position after each block the same.  Cost:
        O(bytes) in 4 MiB reads (a line longer than that: reads until it ends), plus a copy of
        the partial line at the end of each read.  A gzip file is decompressed a read at a time;
        its damage (corrupt or truncated data) is the :class:`ReplayError` of :meth:`__iter__`,
        raised after the whole lines before it were handed out."""
        with self._open() as f:
            if self.offset:
                f.seek(self.offset)
            read = f.read1 if self.gz else f.read
            damage: Exception | None = None
            data = b""
            ends = np.zeros(0, np.int64)     # the end of each whole line in data not handed out yet
            at = 0                           # where those lines start in data
            k = 0                            # ends[k:] are not handed out yet
            eof = False
            while True:
                want = max(1, size())
                while len(ends) - k < want and not eof:
                    try:
                        more = read(_READ)
                    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
                        damage, more = e, b""     # (the partial line before the damage is not a line)
                    if not more:
                        eof = True
                        if damage is None and (int(ends[-1]) if len(ends) else at) < len(data):
                            ends = np.append(ends, len(data))      # a last line without a newline
                        break
                    data = data[at:] + more
                    shift = at
                    at = 0
                    rest = ends[k:] - shift
                    start = int(rest[-1]) if len(rest) else 0
                    nl = np.flatnonzero(np.frombuffer(data, np.uint8, offset=start) == 10) + (start + 1)
                    ends = np.concatenate([rest, nl])
                    k = 0
                m = min(want, len(ends) - k)
                if m == 0:
                    if damage is not None:
                        raise ReplayError(f"corrupt or truncated gzip data after line {self.line:,} ({damage})",
                                          self.path) from None
                    return
                offs = np.empty(m + 1, np.int64)
                offs[0] = at
                offs[1:] = ends[k:k + m]
                k += m
                at = int(offs[-1])
                self.line += m
                self.offset += at - int(offs[0])
                self._last = data[int(offs[-2]):at]
                yield np.frombuffer(data, np.uint8), offs, Lines(data, offs)

    def __iter__(self) -> Iterator[bytes]:
        """The lines after the current position (each counted as it is handed out)."""
        try:
            with self._open() as f:
                if self.offset:
                    f.seek(self.offset)
                for raw in f:
                    self.line += 1
                    self.offset += len(raw)
                    self._last = raw
                    yield raw
        except (EOFError, gzip.BadGzipFile, zlib.error) as e:
            raise ReplayError(f"corrupt or truncated gzip data after line {self.line:,} ({e})", self.path) from None
