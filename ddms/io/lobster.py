"""Sans-I/O LOBSTER message-file reader: ``time,type,order_id,size,price,direction`` lines ->
bids/asks events with the schema every reader shares, ``(t, id, broker_id, volume, price)``.

Why sans-I/O: like :mod:`ddms.io.orderbook`, the same parser serves files, sockets and
tests.  :class:`LobsterParser` takes bytes in arbitrary chunks (``feed``) and returns a
:class:`LobsterBatch` for the complete lines seen so far (a trailing partial line waits for the
next chunk, so the events never depend on where the chunks were cut); :func:`read_lobster` is
the thin file transport and :func:`parse_lobster_text` the convenience for strings.

Fields (LOBSTER's message file, no header): ``time`` seconds after midnight (decimal),
``type`` 1..7, ``order_id`` an integer, ``size`` shares, ``price`` in 1/10000 dollars (kept in
those units, like finance.csv), ``direction`` 1 buy / -1 sell.  Events go to ``bids`` (stream 0)
for direction 1 and ``asks`` (stream 1) for -1, with ``broker_id`` 0.

Semantics per line (one line is one atomic update; all its events carry its line number):

* ``1`` submit: insert ``(time, id, 0, size, price)``.  A submit for an id that is still
  resting replaces it (delete of the old row, then the insert), as in the order-book adaptor.
* ``2`` partial cancel / ``4`` visible execution of ``size`` units: delete the resting row and,
  if volume remains, insert it again with the remaining volume (its original time, price and
  book, so the fill simulator sees an in-place change that keeps queue priority).  A ``size``
  above the resting volume removes the whole order.
* ``3`` delete: delete the resting row.
* ``5`` hidden execution and ``6`` cross (auction) trade: no book change; counted in
  ``hidden_executions`` / ``crosses`` (and their volumes).
* ``7`` trading halt indicator: no book change; ``price`` -1 halts, 0 means quoting, 1 resumes;
  ``trading_status`` holds the latest ("halted", "quoting", "trading") and ``halts`` every
  change as ``(line, time, status)``.
* A cancel, delete or execution of an order that is not resting (LOBSTER files start
  mid-session, so early orders are unknown) changes nothing; counted in ``unknown_orders``.
  The resting row's price and book are authoritative for 2/3/4 (the message repeats them).

``LobsterBatch.traded`` gives, per event, the volume its delete traded: the executed size on the
delete of a type-4 line, 0 elsewhere.  :class:`replay.fills.FillSimulator` reads it to tell
executions from cancels.

Bad lines: a wrong field count, a blank line ("empty line"; a final newline does not start a
line), a time/size/price that is not a plain decimal number (``[+-]digits[.digits][e[+-]digits]``,
no nan/inf/spaces), a negative size, an order id or type or direction that is not an integer,
an id with ``|id| > 2**53``, a type outside 1..7, a direction other than 1/-1, a submission with
size <= 0, a halt price other than -1/0/1.  ``\\r\\n`` endings are tolerated.  Strict mode
(default): the first bad line stops the parser; the batch with the good lines before it carries
the :class:`~ddms.errors.InputError` (``source:line: reason: 'text'``) and every later call
raises it.  ``skip_bad=True`` skips and counts bad lines and keeps the first
:data:`MAX_BAD_SAMPLES` as errors in ``bad_samples``.

Cost: one numba kernel per ``feed`` parses and applies the lines (about 0.3 us a line, ~3 M
lines/s on one core); the order table is an open-addressing hash table in numpy arrays (the fill
simulator's), O(1) per line.  Lines off the fast path -- halts, numbers written with an exponent
or more than 15 digits (they need Python's ``float`` to be correctly rounded), and bad lines --
are handled one at a time in Python by the same validation code, so every value is the
correctly rounded double and every error message is the same.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR: it must come before the first numba import)

# isort: split
import math
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
from numba import njit

from ddms.errors import DdmsError, InputError
from ddms.io.events import EventBatch
from ddms.io.events import EventBuffer as _OrderBookOut
from ddms.io.kernels.decimal import parse_int as _ob_int
from ddms.io.kernels.decimal import parse_number as _num
from ddms.io.kernels.ordertable import EMPTY as _EMPTY
from ddms.io.kernels.ordertable import INIT_BITS as _INIT_BITS
from ddms.io.kernels.ordertable import find as _find
from ddms.io.kernels.ordertable import grow as _grow
from ddms.io.kernels.ordertable import grow_bits as _grow_bits
from ddms.io.kernels.ordertable import put as _put
from ddms.io.kernels.ordertable import remove as _remove
from ddms.io.orderbook import parse_chunks
from ddms.io.schema import ASKS, BIDS

__all__ = [
    "MAX_BAD_SAMPLES", "LobsterBatch", "LobsterParser", "parse_lobster_chunks", "parse_lobster_text", "read_lobster",
]

MAX_BAD_SAMPLES = 10
_MAX_ID = 2**53
_NUM = re.compile(rb"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INT = re.compile(rb"[+-]?\d+")
_HALT = {-1.0: "halted", 0.0: "quoting", 1.0: "trading"}
# order table columns (the fill simulator's table: book, price, size, time)
_C_BOOK, _C_PX, _C_SIZE, _C_T = range(4)
# counters
_UNKNOWN, _HIDDEN, _HIDDEN_VOL, _CROSS, _CROSS_VOL = range(5)
# kernel status
_DONE, _SLOW, _GROW, _FULL = range(4)


@dataclass(frozen=True)
class LobsterBatch(EventBatch):
    """An :class:`EventBatch` plus ``traded[i]``: the volume event i's delete traded (type-4
    executions; 0 for inserts and cancels)."""

    traded: np.ndarray | None = None


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _number(raw: bytes, what: str) -> float:
    if _NUM.fullmatch(raw) is None:
        raise _Bad(f"{what} is not a number")
    v = float(raw)
    if not math.isfinite(v):
        raise _Bad(f"{what} out of range")
    return v


def _integer(raw: bytes, what: str) -> int:
    if _INT.fullmatch(raw) is None:
        raise _Bad(f"{what} is not an integer")
    return int(raw)



# ------------------------------------------------------------------------------------------
# numba kernels
# ------------------------------------------------------------------------------------------

@njit(cache=True, _nrt=False, inline="always")
def _dec(buf, i, end):  # pragma: no cover - compiled
    """A decimal at ``buf[i:]`` by the order-book adaptor's parser: ``(value, j, ok)``; not ok
    sends the line to the Python path (which decides between valid-but-inexact and bad)."""
    v, j, st = _num(buf, i, end)
    return v, j, st == 0


@njit(cache=True, _nrt=False, inline="always")
def _int(buf, i, end):  # pragma: no cover - compiled
    v, j, st = _ob_int(buf, i, end)
    return v, j, st == 0


@njit(cache=True, _nrt=False, inline="always")
def _emit(o_rel, o_sign, o_cols, o_line, o_tr, k, book, sign, t, oid, vol, px, line, tr):  # pragma: no cover
    o_rel[k] = book
    o_sign[k] = sign
    o_cols[k, 0] = t
    o_cols[k, 1] = oid
    o_cols[k, 2] = 0.0
    o_cols[k, 3] = vol
    o_cols[k, 4] = px
    o_line[k] = line
    o_tr[k] = tr
    return k + 1


@njit(cache=True, _nrt=False)
def _apply(typ, t, oid, size, px, direction, line, okeys, ovals, ometa, cnt, o_rel, o_sign, o_cols, o_line,
           o_tr, k):  # pragma: no cover - compiled
    """Apply one valid message of type 1..6 and append its 0..2 events at ``k``; returns the
    new ``k``.  The caller guarantees room for two events and one more order."""
    shift = ometa[1]
    if typ == 1:
        book = 0 if direction == 1 else 1
        slot = _find(okeys, shift, oid)
        if slot >= 0:
            k = _emit(o_rel, o_sign, o_cols, o_line, o_tr, k, np.int64(ovals[slot, _C_BOOK]), -1,
                      ovals[slot, _C_T], oid, ovals[slot, _C_SIZE], ovals[slot, _C_PX], line, 0.0)
            _remove(okeys, ovals, shift, slot)
            ometa[0] -= 1
        _put(okeys, ovals, shift, oid, book, px, size, t)
        ometa[0] += 1
        return _emit(o_rel, o_sign, o_cols, o_line, o_tr, k, book, 1, t, oid, size, px, line, 0.0)
    if typ <= 4:
        slot = _find(okeys, shift, oid)
        if slot < 0:
            cnt[_UNKNOWN] += 1.0
            return k
        book = np.int64(ovals[slot, _C_BOOK])
        opx = ovals[slot, _C_PX]
        vol = ovals[slot, _C_SIZE]
        t0 = ovals[slot, _C_T]
        gone = vol if typ == 3 else min(size, vol)
        left = vol - gone
        k = _emit(o_rel, o_sign, o_cols, o_line, o_tr, k, book, -1, t0, oid, vol, opx, line,
                  gone if typ == 4 else 0.0)
        if left > 0.0:
            ovals[slot, _C_SIZE] = left
            return _emit(o_rel, o_sign, o_cols, o_line, o_tr, k, book, 1, t0, oid, left, opx, line, 0.0)
        _remove(okeys, ovals, shift, slot)
        ometa[0] -= 1
        return k
    if typ == 5:
        cnt[_HIDDEN] += 1.0
        cnt[_HIDDEN_VOL] += size
    else:
        cnt[_CROSS] += 1.0
        cnt[_CROSS_VOL] += size
    return k


@njit(cache=True, _nrt=False)
def _run(buf, pos, end, line_no, okeys, ovals, ometa, cnt, o_rel, o_sign, o_cols, o_line, o_tr,
         k):  # pragma: no cover - compiled
    """Parse and apply the newline-terminated lines of ``buf[pos:end]``.  Returns ``(pos,
    line_no, k, status)``: ``_DONE``; ``_SLOW`` when the line at ``pos`` needs the Python path;
    ``_GROW`` / ``_FULL`` when the order table / the output needs room first."""
    while pos < end:
        if k + 2 > o_rel.shape[0]:
            return pos, line_no, k, _FULL
        if 2 * (ometa[0] + 1) > okeys.shape[0]:
            return pos, line_no, k, _GROW
        t, i, ok = _dec(buf, pos, end)
        if ok and buf[i] == 44:
            typ, i, ok = _int(buf, i + 1, end)
            if ok and buf[i] == 44 and 1 <= typ <= 6:
                oid, i, ok = _int(buf, i + 1, end)
                if ok and buf[i] == 44:
                    size, i, ok = _dec(buf, i + 1, end)
                    if ok and buf[i] == 44 and size >= 0.0 and (size > 0.0 or typ != 1):
                        px, i, ok = _dec(buf, i + 1, end)
                        if ok and buf[i] == 44:
                            direction, i, ok = _int(buf, i + 1, end)
                            if ok and (direction == 1 or direction == -1):
                                if buf[i] == 13:
                                    i += 1
                                if buf[i] == 10:
                                    k = _apply(typ, t, oid, size, px, direction, line_no + 1, okeys, ovals, ometa,
                                               cnt, o_rel, o_sign, o_cols, o_line, o_tr, k)
                                    line_no += 1
                                    pos = i + 1
                                    continue
        return pos, line_no, k, _SLOW
    return pos, line_no, k, _DONE


class LobsterParser:
    """Incremental LOBSTER message parser: ``feed(bytes) -> LobsterBatch``; see the module
    docstring.  State kept across calls: the resting orders (hash table: id -> book, price,
    size, time), the trailing partial line, counters.  ``feed`` costs O(len(data))."""

    def __init__(self, *, source: str = "<input>", skip_bad: bool = False) -> None:
        self.source = source
        self.skip_bad = bool(skip_bad)
        self.lines_consumed = 0
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self.trading_status = "trading"
        self.halts: list[tuple[int, float, str]] = []
        self._keys = np.full(1 << _INIT_BITS, _EMPTY, np.int64)
        self._vals = np.zeros((1 << _INIT_BITS, 4), np.float64)
        self._meta = np.array([0, 64 - _INIT_BITS], np.int64)
        self._cnt = np.zeros(5, np.float64)
        self._partial = b""
        self._error: InputError | None = None
        self._closed = False

    # -- state --------------------------------------------------------------------------------
    @property
    def resting(self) -> int:
        """Number of resting orders (bids + asks)."""
        return int(self._meta[0])

    @property
    def unknown_orders(self) -> int:
        """Cancels, deletes and executions of orders that were not resting."""
        return int(self._cnt[_UNKNOWN])

    @property
    def hidden_executions(self) -> int:
        return int(self._cnt[_HIDDEN])

    @property
    def hidden_volume(self) -> float:
        return float(self._cnt[_HIDDEN_VOL])

    @property
    def crosses(self) -> int:
        return int(self._cnt[_CROSS])

    @property
    def cross_volume(self) -> float:
        return float(self._cnt[_CROSS_VOL])

    @property
    def error(self) -> InputError | None:
        """The error that stopped a strict parser, else None."""
        return self._error

    def rows(self) -> dict[str, np.ndarray]:
        """The resting rows ``{"bids": (n, 5), "asks": (m, 5)}`` sorted by id (tests/oracles)."""
        used = self._keys != _EMPTY
        ids = self._keys[used]
        v = self._vals[used]
        out = {}
        for book, name in ((BIDS, "bids"), (ASKS, "asks")):
            sel = v[:, _C_BOOK] == book
            order = np.argsort(ids[sel], kind="stable")
            w = v[sel][order]
            out[name] = np.column_stack([w[:, _C_T], ids[sel][order].astype(np.float64), np.zeros(w.shape[0]),
                                         w[:, _C_SIZE], w[:, _C_PX]]).reshape(-1, 5)
        return out

    # -- input --------------------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> LobsterBatch:
        """Parse the complete lines of the pending bytes plus ``data``; the rest waits."""
        self._check_usable()
        if isinstance(data, str):
            raise TypeError(f"{self.source}: LOBSTER input must be bytes (open files with 'rb')")
        buf = self._partial + bytes(data)
        cut = buf.rfind(b"\n")
        self._partial = buf[cut + 1:]
        return self._parse(buf[:cut + 1])

    def close(self) -> LobsterBatch:
        """Parse a final line without newline; later ``feed`` calls are errors."""
        self._check_usable(closing=True)
        self._closed = True
        rest, self._partial = self._partial, b""
        return self._parse(rest + b"\n" if rest else b"")

    def _check_usable(self, closing: bool = False) -> None:
        if self._error is not None:
            raise self._error
        if self._closed and not closing:
            raise DdmsError(f"{self.source}: feed() after close()")

    def _parse(self, data: bytes) -> LobsterBatch:
        """Run the kernel over ``data`` (complete lines), resolving its stops."""
        first = self.lines_consumed
        arr = np.frombuffer(data, np.uint8)
        n = max(16, 2 * data.count(b"\n") + 2) if len(data) < (1 << 16) else max(16, len(data) // 8)
        out = _Out(n)
        k = 0
        pos = 0
        skipped = 0
        err = None
        end = arr.shape[0]
        while True:
            pos, self.lines_consumed, k, status = _run(arr, pos, end, self.lines_consumed, self._keys, self._vals,
                                                       self._meta, self._cnt, out.rel, out.sign, out.cols,
                                                       out.line, out.tr, k)
            if status == _DONE:
                break
            if status == _GROW:
                self._keys, self._vals = _grow(self._keys, self._vals, self._meta, 1, _grow_bits(self._keys.shape[0]))
                continue
            if status == _FULL:
                out.grow(k, 2)
                continue
            nl = data.index(b"\n", pos)
            raw = data[pos:nl]
            text = raw[:-1] if raw.endswith(b"\r") else raw
            line = self.lines_consumed + 1
            try:
                k = self._slow_line(text, line, out, k)
            except _Bad as bad:
                e = InputError(bad.reason, self.source, line, text.decode("utf-8", "replace"))
                if not self.skip_bad:
                    self._error = err = e
                    break
                skipped += 1
                self.bad_lines += 1
                if len(self.bad_samples) < MAX_BAD_SAMPLES:
                    self.bad_samples.append(e)
            self.lines_consumed = line
            pos = nl + 1
        return LobsterBatch(out.rel[:k], out.sign[:k], out.cols[:k], out.line[:k], first + 1, self.lines_consumed,
                            skipped, err, traded=out.tr[:k])

    def _slow_line(self, text: bytes, line: int, out: _Out, k: int) -> int:
        """Validate one line in Python (raises :class:`_Bad` with the reason) and apply it."""
        t, typ, oid, size, px, direction = _validate(text)
        if typ == 7:
            status = _HALT[px]
            self.trading_status = status
            self.halts.append((line, t, status))
            return k
        if 2 * (self._meta[0] + 1) > self._keys.shape[0]:
            self._keys, self._vals = _grow(self._keys, self._vals, self._meta, 1, _grow_bits(self._keys.shape[0]))
        if k + 2 > out.rel.shape[0]:
            out.grow(k, 2)
        return _apply(typ, t, oid, size, px, direction, line, self._keys, self._vals, self._meta, self._cnt,
                      out.rel, out.sign, out.cols, out.line, out.tr, k)


class _Out(_OrderBookOut):
    """The order-book adaptor's output columns plus ``tr`` (1.0 where a reduction is a trade)."""

    __slots__ = ("tr",)
    COLUMNS = _OrderBookOut.COLUMNS + __slots__

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.tr = np.empty(n, np.float64)


def _validate(text: bytes) -> tuple[float, int, int, float, float, int]:
    """The values of one message line, or :class:`_Bad` with the reason it is bad."""
    f = text.split(b",")
    if len(f) != 6:
        if not text.strip(b" \t"):
            raise _Bad("empty line")
        raise _Bad(f"wrong field count: expected 6 (time,type,order_id,size,price,direction), got {len(f)}")
    t = _number(f[0], "time")
    typ = _integer(f[1], "type")
    oid = _integer(f[2], "order id")
    size = _number(f[3], "size")
    px = _number(f[4], "price")
    direction = _integer(f[5], "direction")
    if not 1 <= typ <= 7:
        raise _Bad(f"unknown message type {typ} (expected 1..7)")
    if abs(oid) > _MAX_ID:
        raise _Bad("order id out of range (|id| > 2**53)")
    if size < 0:
        raise _Bad("size is negative")
    if direction not in (1, -1):
        raise _Bad(f"direction must be 1 (buy) or -1 (sell), got {direction}")
    if typ == 1 and size <= 0:
        raise _Bad("submission with size <= 0")
    if typ == 7 and px not in _HALT:
        raise _Bad(f"halt indicator price must be -1 (halt), 0 (quoting) or 1 (resume), got {f[4].decode()}")
    return t, typ, oid, size, px, direction


def parse_lobster_chunks(parser: LobsterParser, chunks: Iterable[bytes]) -> Iterator[LobsterBatch]:
    """Feed ``chunks`` to ``parser`` and close it (:func:`ddms.io.orderbook.parse_chunks`:
    in strict mode the batch carrying a bad line's ``error`` is yielded, then the error is raised;
    batches that consumed no line are not yielded)."""
    return parse_chunks(parser, chunks)  # type: ignore[arg-type]


def read_lobster(path_or_file: str | os.PathLike | BinaryIO, *, chunk_bytes: int = 1 << 22,
                 skip_bad: bool = False) -> Iterator[LobsterBatch]:
    """Stream a LOBSTER message file (path or binary file object) as batches, one per chunk.
    In strict mode a bad line ends the iteration: the batch with the events before it is yielded
    (its ``error`` set), then the :class:`InputError` naming the file is raised."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be >= 1")
    if isinstance(path_or_file, (str, os.PathLike)):
        source = os.fspath(path_or_file)
        with open(path_or_file, "rb") as f:
            yield from parse_lobster_chunks(LobsterParser(source=source, skip_bad=skip_bad),
                                            iter(lambda: f.read(chunk_bytes), b""))
    else:
        source = str(getattr(path_or_file, "name", "<stream>"))
        f = path_or_file
        yield from parse_lobster_chunks(LobsterParser(source=source, skip_bad=skip_bad),
                                        iter(lambda: f.read(chunk_bytes), b""))


def parse_lobster_text(text: str, **kw) -> LobsterBatch:
    """Parse a whole string (a final line needs no newline) into one batch; keyword arguments go
    to :class:`LobsterParser` (``source`` defaults to ``"<string>"``).  Strict mode raises the
    first bad line's :class:`InputError`."""
    kw.setdefault("source", "<string>")
    parser = LobsterParser(**kw)
    a = parser.feed(text.encode("utf-8"))
    if a.error is not None:
        raise a.error
    b = parser.close()
    if b.error is not None:
        raise b.error
    return _concat(a, b)


def _concat(a: LobsterBatch, b: LobsterBatch) -> LobsterBatch:
    if len(b) == 0 and b.last_line < b.first_line:
        return a
    return LobsterBatch(np.concatenate([a.rel, b.rel]), np.concatenate([a.sign, b.sign]),
                        np.concatenate([a.cols, b.cols]), np.concatenate([a.line, b.line]), a.first_line,
                        b.last_line, a.skipped + b.skipped, b.error,
                        traded=np.concatenate([a.traded, b.traded]))
