"""Sans-I/O order-book adaptor: ``t,order_id,action,volume,price`` lines -> bids/asks events.

Why sans-I/O: the same parser serves files, sockets and tests.  :class:`OrderBookParser` takes
bytes in arbitrary chunks (``feed``) and returns an :class:`~ddms.io.events.EventBatch` of
the complete lines seen so far; a trailing partial line is remembered for the next call, so the
events never depend on where the chunks were cut.  :func:`read_orderbook` is the thin file
transport and :func:`parse_orderbook_text` the convenience for strings.

Relations (both with schema ``(t, id, broker_id, volume, price)``, float64 columns):
``bids`` is stream index :data:`BIDS` (0), ``asks`` is :data:`ASKS` (1);
``broker_id = id mod brokers`` (Python floor modulo).

Semantics per line (``/shared/data/orderbook/README.md``):

* ``B`` / ``S``: insert ``(t, id, id mod brokers, volume, price)`` into bids / asks.
  **A repeated B/S for an id that is still resting replaces the old row**: the line emits a
  delete of the old row (from whichever book holds it) followed by the insert of the new one;
  both carry the same line number, so views see the replacement atomically.
* ``E``: partial execution of ``volume`` units of order ``id``: delete the old row and, if the
  remaining volume is > 0, insert it again with the remaining volume (same t, price, broker).
* ``F`` / ``D``: delete the row of order ``id``.
* any other single uppercase letter (T, X, C, ...), or an id that is not resting: no change;
  the line is consumed and produces no events.

Because a repeated id replaces, an id rests in at most one book at a time, so the README's
"bids first, then asks" lookup order for E/F/D is implied by a single id -> row table.

Bad lines: wrong field count, an action that is not one ASCII uppercase letter ("unknown
action"), a t/volume/price that is not a decimal number (``[+-]digits[.digits][e[+-]digits]``,
no ``nan``/``inf``/spaces) or whose value overflows float64 ("out of range"), an id that is
not an integer (or has ``|id| > 2**53``, which float64 could not carry exactly), and blank
lines (``"empty line"``; only whitespace and CR count as blank) -- except that a final newline
does not start a line.  ``\\r\\n`` endings are tolerated.
In strict mode (default) the first bad line stops the parser: the batch holding the events of
the good lines before it carries ``error``; every later ``feed``/``close`` raises that error.
With ``skip_bad=True`` bad lines are skipped, counted and the first :data:`MAX_BAD_SAMPLES`
are kept as :class:`~ddms.errors.InputError` objects in ``parser.bad_samples``.

Cost: parsing and applying are one numba kernel over a ``uint8`` view of the chunk (no copy);
the order table is an open-addressing hash table (linear probing, backward-shift deletion) of
plain numpy arrays kept across calls, so a line costs one or two O(1) probes.  About 30 ns a
line on big/finance.csv replayed (33 ns before the numbers were read eight digits at a time);
a single pass in a fresh process of ``ddms run`` ~31-35 ns in the kernel and ~46-50 ns all in
(reading, the Python around each chunk), once its page faults are gone: order tables of 1 MiB
or more sit on huge pages (:func:`_new_table_arrays`) and :attr:`OrderBookParser.fault_ahead`
has the process's helper thread fault in the next table and output buffers (~35 faults left on
the parsing thread of big/finance.csv, from ~1,350 two stops earlier).  The kernel prefetches
the chunk :data:`_AHEAD` bytes ahead of the line it parses, indexes through unsigned integers and
divides for the broker id only for a line that emits (stop 41: the reader thread of ``ddms run
vwap.sql`` on the generated 1M-line book, vwap reading the bids only, 39.6 -> 32.8 ns a line of
CPU time, load ~10; the kernel alone, warm, ~29 -> ~26).  Plain
integer fields (all of the real data) are read eight digits at a time
(:func:`~ddms.io.kernels.decimal.parse_number_wide`) away from the end of the chunk, byte by
byte near it; other decimals take the exact Clinger fast path (<= 18 significant digits, power
of ten <= 22), and the rare rest fall back to Python's ``float`` for that one line, so every
value is the correctly rounded double.

The per-line kernels are compiled with ``_nrt=False`` (and the hot ones ``inline="always"``):
they never allocate, and with NRT every inlined call would incref/decref each array argument
(atomic operations) per line, which measured as half of the run time.  Allocation (table
doubling, output growth) happens between kernel calls, signalled by a status code.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import numpy as np
from numba import njit

from ddms.errors import DdmsError, InputError
from ddms.io.events import EventBatch
from ddms.io.events import EventBuffer as _Out
from ddms.io.kernels.decimal import parse_int as _int
from ddms.io.kernels.decimal import parse_int_wide as _int_w
from ddms.io.kernels.decimal import parse_number as _num
from ddms.io.kernels.decimal import parse_number_wide as _num_w
from ddms.io.kernels.decimal import prefetch as _prefetch
from ddms.io.kernels.ordertable import EMPTY as _EMPTY
from ddms.io.kernels.ordertable import FAST_GROWTH as _FAST_GROWTH
from ddms.io.kernels.ordertable import INIT_BITS as _INIT_BITS
from ddms.io.kernels.ordertable import clear as _clear
from ddms.io.kernels.ordertable import find as _find
from ddms.io.kernels.ordertable import grow_bits as _grow_bits
from ddms.io.kernels.ordertable import grow_into as _grow_into
from ddms.io.kernels.ordertable import put as _put
from ddms.io.kernels.ordertable import remove as _remove
from ddms.io.pages import Job, helper, huge_empty
from ddms.io.schema import ASKS, BIDS, COLUMNS, RELATIONS

__all__ = [
    "ASKS", "BIDS", "COLUMNS", "MAX_BAD_SAMPLES", "RELATIONS", "OrderBookParser", "orderbook_rows",
    "parse_orderbook_text", "read_orderbook",
]

MAX_BAD_SAMPLES = 10
_SPARE = 6
"""Output buffers a parser keeps for reuse (:meth:`OrderBookParser._output`): ``ddms run`` has up
to four batches alive (two queued, one parsed, one applied)."""


_MIN_OUT = (1 << 18) // 16 + 64
"""Events a new output buffer has room for at least (what a 256 KiB chunk asks for, ``ddms run``'s
largest for a file under ~4 MB, ``cli.MID_CHUNK``): the buffers made for its first, smaller chunks
are then reused for the later ones instead of lying idle while new ones fault their pages (~100
faults on big/finance.csv).
Capacity never written costs no page."""


_AHEAD_MAX = 1 << 22
"""The largest order table (slots: 168 MB) whose arrays :attr:`OrderBookParser.fault_ahead` makes
ahead of its growth."""


_u = np.uint64
"""Index type of :func:`_run`'s byte reads: numba adds a negative-index wrap-around (three instructions)
to every read through a signed index; the fast path's indices are never negative."""
_AHEAD = 1536
"""Bytes ahead of a line's start whose cache line :func:`_run` asks the CPU to load (~55 lines of
the real data; :func:`~ddms.io.kernels.decimal.prefetch`): otherwise the chunk's cache misses (it was
just copied in by the helper thread, or comes from memory) are taken one at a time, each line's
start waiting on the previous one's end."""

# kernel status / reason codes (shared with the Python side that turns them into messages)
_DONE, _BAD, _SLOW, _GROW, _FULL = 0, 1, 2, 3, 4
_OK, _R_EMPTY, _R_FIELDS, _R_T, _R_ID, _R_ID_RANGE, _R_ACTION, _R_VOL, _R_PRICE, _R_NEEDS_PY = range(10)
_R_T_RANGE, _R_VOL_RANGE, _R_PRICE_RANGE = 10, 11, 12
_REASONS = {
    _R_EMPTY: "empty line",
    _R_T: "t is not a number",
    _R_ID: "order id is not an integer",
    _R_ID_RANGE: "order id out of range (|id| > 2**53)",
    _R_VOL: "volume is not a number",
    _R_PRICE: "price is not a number",
    _R_T_RANGE: "t out of range",
    _R_VOL_RANGE: "volume out of range",
    _R_PRICE_RANGE: "price out of range",
}


# ------------------------------------------------------------------------------------------
# numba kernels
# ------------------------------------------------------------------------------------------

@njit(cache=True, _nrt=False)
def _classify(buf, s, e):  # pragma: no cover - compiled
    """Why is line ``buf[s:e]`` (terminator stripped) not on the fast path?  Returns
    ``(reason, extra)``: a ``_R_*`` code (``_R_NEEDS_PY`` if it is valid but has a number that
    needs Python's float) and, for ``_R_FIELDS``, the number of fields."""
    blank = True
    nf = 1
    for i in range(s, e):
        c = buf[i]
        if c != 32 and c != 9 and c != 13:
            blank = False
        if c == 44:
            nf += 1
    if blank:
        return _R_EMPTY, 0
    if nf != 5:
        return _R_FIELDS, nf
    slow = False
    # t
    _, j, st = _num(buf, s, e)
    if st == 1 or j >= e or buf[j] != 44:
        return _R_T, 0
    slow = slow or st == 2
    # id
    _, j2, st = _int(buf, j + 1, e)
    if st == 1 or j2 >= e or buf[j2] != 44:
        return _R_ID, 0
    if st == 3:
        return _R_ID_RANGE, 0
    # action
    a = j2 + 1
    if a + 1 >= e or buf[a] < 65 or buf[a] > 90 or buf[a + 1] != 44:
        return _R_ACTION, 0
    _, j3, st = _num(buf, a + 2, e)
    if st == 1 or j3 >= e or buf[j3] != 44:
        return _R_VOL, 0
    slow = slow or st == 2
    _, j4, st = _num(buf, j3 + 1, e)
    if st == 1 or j4 != e:
        return _R_PRICE, 0
    slow = slow or st == 2
    if slow:
        return _R_NEEDS_PY, 0
    return _OK, 0


@njit(cache=True, _nrt=False, nogil=True)
def _touch(o_rel, o_sign, o_cols, o_line, lo, hi):  # pragma: no cover - compiled
    """Write rows ``lo:hi`` of an output buffer (zeros), faulting their pages in on the calling
    thread (the helper: :attr:`OrderBookParser.fault_ahead`).  O(hi - lo)."""
    o_rel[lo:hi] = 0
    o_sign[lo:hi] = 0
    o_cols[lo:hi] = 0.0
    o_line[lo:hi] = 0


@njit(cache=True, _nrt=False)
def _emit(o_rel, o_sign, o_cols, o_line, k, book, sign, t, oid, brk, vol, px, line):  # pragma: no cover
    r = _u(k)   # (k >= 0: no wrap-around, see _u)
    o_rel[r] = book
    o_sign[r] = sign
    o_cols[r, 0] = t
    o_cols[r, 1] = oid
    o_cols[r, 2] = brk
    o_cols[r, 3] = vol
    o_cols[r, 4] = px
    o_line[r] = line
    return k + 1


@njit(cache=True, _nrt=False, inline="always")
def _apply(act, t, oid, vol, px, line, brokers, keep, keys, vals, meta,
           o_rel, o_sign, o_cols, o_line, k):  # pragma: no cover - compiled
    """Apply one valid line to the table and append its 0..2 events at ``k``; returns the new
    ``k``.  ``meta`` = [resting, bids, asks, hash shift].  ``keep``: bit b set if book b is read
    (:attr:`OrderBookParser.books`): a B/S into a book not read still replaces a resting order
    of the same id (a delete) but is not inserted, so nothing of that book is kept or emitted.
    The caller has made room for one more key and two events (this function cannot allocate: it
    is compiled without NRT)."""
    if act == 66 or act == 83 or act == 69 or act == 70 or act == 68:   # B S E F D
        shift = meta[3]
        slot = _find(keys, shift, oid)
        brk = -1.0   # oid mod brokers once an event needs it: a division, and many lines emit nothing
        if slot >= 0:
            brk = float(oid % brokers)
            us = _u(slot)
            ob = np.int64(vals[us, 3])
            ot = vals[us, 0]
            ov = vals[us, 1]
            op = vals[us, 2]
            k = _emit(o_rel, o_sign, o_cols, o_line, k, ob, -1, ot, float(oid), brk, ov, op, line)
            if act == 69 and ov - vol > 0:
                vals[us, 1] = ov - vol
                k = _emit(o_rel, o_sign, o_cols, o_line, k, ob, 1, ot, float(oid), brk, ov - vol, op, line)
            else:
                _remove(keys, vals, shift, slot)
                meta[0] -= 1
                meta[1 + ob] -= 1
        book = 0 if act == 66 else 1
        if (act == 66 or act == 83) and (keep >> book) & 1:
            _put(keys, vals, meta[3], oid, t, vol, px, float(book))
            meta[0] += 1
            meta[1 + book] += 1
            if brk < 0:
                brk = float(oid % brokers)
            k = _emit(o_rel, o_sign, o_cols, o_line, k, book, 1, t, float(oid), brk, vol, px, line)
    return k


@njit(cache=True, _nrt=False, nogil=True)   # nogil: ddms run parses ahead in a thread (driver.prefetch)
def _run(buf, pos, end, line_no, brokers, keep, skip_bad, keys, vals, meta,
         o_rel, o_sign, o_cols, o_line, k, bad, nbad):  # pragma: no cover - compiled
    """Parse and apply the lines of ``buf[pos:end]`` (which ends with a newline).

    Stops early, without consuming the line, at a bad line in strict mode (status ``_BAD``), at
    a valid line that needs Python's float (``_SLOW``; ``(reason, extra, s, e, nl)`` locate the
    line: ``s:e`` its text, ``nl`` its newline), at an insert into a half-full table (``_GROW``)
    or when the output has no room for two more events (``_FULL``).  The caller fixes the
    condition and resumes, so this loop never allocates or rebinds an array.  In skip mode bad
    lines are counted and the first ``len(bad) - nbad`` recorded as ``(line, s, e, reason,
    extra)`` rows."""
    skipped = 0
    while pos < end:
        line_no += 1
        _prefetch(buf, pos + _AHEAD)
        ok = False
        nxt = pos
        t, i, st = _num_w(buf, pos, end)
        if st == 0 and buf[_u(i)] == 44:
            oid, i, st = _int_w(buf, i + 1, end)
            if st == 0 and buf[_u(i)] == 44:
                a = buf[_u(i + 1)]
                if a >= 65 and a <= 90 and buf[_u(i + 2)] == 44:
                    vol, i, st = _num_w(buf, i + 3, end)
                    if st == 0 and buf[_u(i)] == 44:
                        px, i, st = _num_w(buf, i + 1, end)
                        if st == 0:
                            if buf[_u(i)] == 10:
                                ok = True
                                nxt = i + 1
                            elif buf[_u(i)] == 13 and buf[_u(i + 1)] == 10:
                                ok = True
                                nxt = i + 2
                        if ok:
                            if k + 2 > o_rel.shape[0]:
                                return pos, line_no - 1, k, _FULL, 0, 0, 0, 0, 0, skipped, nbad
                            if 2 * (meta[0] + 1) > keys.shape[0] and (a == 66 or a == 83):
                                return pos, line_no - 1, k, _GROW, 0, 0, 0, 0, 0, skipped, nbad
                            k = _apply(a, t, oid, vol, px, line_no, brokers, keep, keys, vals, meta,
                                       o_rel, o_sign, o_cols, o_line, k)
                            pos = nxt
                            continue
        # off the fast path: find the line, say why
        nl = pos
        while buf[nl] != 10:
            nl += 1
        e = nl
        if e > pos and buf[e - 1] == 13:
            e -= 1
        reason, extra = _classify(buf, pos, e)
        if reason == _R_NEEDS_PY or reason == _OK:
            return pos, line_no - 1, k, _SLOW, reason, extra, pos, e, nl, skipped, nbad
        if not skip_bad:
            return pos, line_no - 1, k, _BAD, reason, extra, pos, e, nl, skipped, nbad
        skipped += 1
        if nbad < bad.shape[0]:
            bad[nbad, 0] = line_no
            bad[nbad, 1] = pos
            bad[nbad, 2] = e
            bad[nbad, 3] = reason
            bad[nbad, 4] = extra
            nbad += 1
        pos = nl + 1
    return pos, line_no, k, _DONE, 0, 0, 0, 0, 0, skipped, nbad


# ------------------------------------------------------------------------------------------
# Python side
# ------------------------------------------------------------------------------------------

def _reason(code: int, extra: int, text: str) -> str:
    if code == _R_FIELDS:
        return f"wrong field count: expected 5 (t,order_id,action,volume,price), got {extra}"
    if code == _R_ACTION:
        parts = text.split(",")
        act = parts[2] if len(parts) > 2 else ""
        return f"unknown action {act!r} (expected one uppercase letter A-Z)"
    return _REASONS.get(code, "malformed line")


@njit(cache=True, _nrt=False, nogil=True)
def _last_newline(arr):  # pragma: no cover - compiled
    """Index of the last newline byte of ``arr``, -1 if none, searched from the end (a chunk's last
    line ends near its end): for buffers that have no ``rfind`` (a memoryview: ``ddms run``'s
    chunks).  A compiled loop: numpy's ``flatnonzero`` over 4 KiB pieces cost ~25 us a call, a
    fixed cost per chunk on the parsing thread.  O(length of the last partial line)."""
    i = arr.shape[0] - 1
    while i >= 0 and arr[i] != 10:
        i -= 1
    return i


@njit(cache=True, _nrt=False, nogil=True)
def _first_newline(arr):  # pragma: no cover - compiled
    """Index of the first newline byte of ``arr``, -1 if none.  O(length of the first line)."""
    for i in range(arr.shape[0]):
        if arr[i] == 10:
            return i
    return -1


def _as_readonly_u8(data: bytes | bytearray | memoryview) -> np.ndarray:
    arr = np.frombuffer(data, np.uint8)
    if arr.flags.writeable:  # one array type for the kernel -> one compiled specialization
        arr = arr.view()
        arr.flags.writeable = False
    return arr


class OrderBookParser:
    """Incremental order-book parser: ``feed(bytes) -> EventBatch``; see the module docstring.

    State kept across calls: the order table (open-addressing hash table in numpy arrays,
    40 bytes per slot, at most half full), the trailing partial line, line and bad-line
    counters.  ``feed`` costs O(len(data)) in one or two kernel calls (plus a Python round trip
    per table doubling, per number needing Python's float, and per bad line in strict mode);
    the returned batch holds views of arrays the parser writes again only once no batch (no view)
    refers to them (:meth:`_output`): a batch kept stays as it was.
    """

    def __init__(self, *, brokers: int = 10, source: str = "<input>", skip_bad: bool = False) -> None:
        if isinstance(brokers, bool) or not isinstance(brokers, (int, np.integer)) or brokers < 1:
            raise ValueError(f"brokers must be an integer >= 1, got {brokers!r}")
        self.brokers = int(brokers)
        self.source = source
        self.skip_bad = bool(skip_bad)
        self.lines_consumed = 0
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self._keys = np.full(1 << _INIT_BITS, _EMPTY, np.int64)
        self._vals = np.zeros((1 << _INIT_BITS, 4), np.float64)
        self._meta = np.array([0, 0, 0, 64 - _INIT_BITS], np.int64)
        self._partial = bytearray()
        self._error: InputError | None = None
        self._closed = False
        self._bad = np.zeros((MAX_BAD_SAMPLES, 5), np.int64)
        self._spare: list[_Out] = []   # output buffers of recent batches, reused once unreferenced
        self.fault_ahead = False
        """Have the helper thread (:func:`~ddms.io.pages.helper`, one per process, started once)
        write (so fault in) the memory the parser will need next: the order table's next arrays
        once it is a quarter full (3/8 once large; it grows at half; the 65,536 slots of
        big/finance.csv: one huge page and ~130 small ones, see :func:`_new_table_arrays`) and,
        while the pipeline fills, the next output buffer (~115 faults a 256 KiB chunk), so that
        those faults fall off the parsing thread.  ``ddms run`` sets it (it parses on a thread of
        its own while another applies, so a core idles).  Values never depend on it."""
        self._keep = (1 << BIDS) | (1 << ASKS)   # bit b: book b is read (:attr:`books`)
        self.tables_made_ahead = 0   # growths that used the helper's arrays (tests)
        self.outputs_made_ahead = 0  # output buffers the helper faulted in (tests)
        self._ahead: tuple[Job, tuple[np.ndarray, np.ndarray], int] | None = None
        self._out_ahead: tuple[Job, _Out] | None = None
        self._fresh: _Out | None = None   # the output buffer made by this feed, on this thread
        self._touching: dict[int, Job] = {}   # id(spare buffer) -> the helper's job writing its upper rows

    # -- state ------------------------------------------------------------------------------
    @property
    def resting(self) -> int:
        """Number of resting orders (bids + asks)."""
        return int(self._meta[0])

    @property
    def resting_bids(self) -> int:
        return int(self._meta[1])

    @property
    def resting_asks(self) -> int:
        return int(self._meta[2])

    @property
    def books(self) -> tuple[bool, bool]:
        """Whether the parser keeps and emits each book, ``(bids, asks)``; both by default.

        Projection pushdown: a program that reads one book only (vwap.sql declares ``bids``
        alone) has ``ddms run`` drop the other (``ProgramInput.project``), whose events the
        engine would ignore (relation map -1).  An order of a book not read is never put in the
        order table and emits nothing; a B/S of it still replaces a resting order of the same id
        of the kept book (that order's delete is emitted, as without projection), and its E/F/D
        find nothing.  So the kept book's events are exactly those of a parser keeping both,
        every line is still parsed and checked (a bad line is the same error), and the line's
        table work (an insert, a probe that hits and a backward-shift delete) and its events are
        saved: about half of them on the finance data.  Set it before the first feed; a
        projected parser saves no checkpoint state (its order table is not the whole book).  O(1)."""
        return bool(self._keep >> BIDS & 1), bool(self._keep >> ASKS & 1)

    @books.setter
    def books(self, keep: tuple[bool, bool]) -> None:
        if self.lines_consumed or self._partial or self.resting:
            raise DdmsError(f"{self.source}: the books a parser keeps are set before its first feed")
        self._keep = (int(bool(keep[0])) << BIDS) | (int(bool(keep[1])) << ASKS)

    @property
    def error(self) -> InputError | None:
        """The error that stopped a strict parser, else None."""
        return self._error

    @property
    def pending(self) -> int:
        """Bytes of the remembered partial line."""
        return len(self._partial)

    # -- checkpoints ------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """Counters and copies of the order table after the last complete line: what
        :meth:`load_state` needs to continue parsing after it.  A pending partial line is not
        part of it (:attr:`pending` bytes: the caller reads them again).  O(table capacity)."""
        if self._error is not None:
            raise DdmsError(f"{self.source}: parser state saved after an error")
        if self.books != (True, True):
            raise DdmsError(f"{self.source}: a parser keeping one book only (books = {self.books}) has no "
                            "state to save: its order table lacks the other book's orders")
        counters = {"lines_consumed": self.lines_consumed, "bad_lines": self.bad_lines, "brokers": self.brokers}
        return counters, {"keys": self._keys.copy(), "vals": self._vals.copy(), "meta": self._meta.copy()}

    def load_state(self, counters: dict[str, int], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of a parser of the same ``brokers``."""
        if int(counters["brokers"]) != self.brokers:
            raise DdmsError(f"{self.source}: saved parser state has brokers={counters['brokers']}, not {self.brokers}")
        self.lines_consumed, self.bad_lines = int(counters["lines_consumed"]), int(counters["bad_lines"])
        self._keys = np.array(arrays["keys"], np.int64)
        self._vals = np.array(arrays["vals"], np.float64)
        self._meta = np.array(arrays["meta"], np.int64)
        self._ahead = None   # (made for the table replaced; the size check in _grow_table would refuse it too)

    # -- feeding ----------------------------------------------------------------------------
    def feed(self, data: bytes | bytearray | memoryview) -> EventBatch:
        """Parse the complete lines of the remembered partial line + ``data``; keep the rest."""
        self._check_usable()
        if isinstance(data, str):
            raise TypeError(f"{self.source}: order-book input must be bytes (open files with 'rb')")
        if isinstance(data, memoryview) and (data.ndim != 1 or data.itemsize != 1):
            data = data.cast("B")
        arr = _as_readonly_u8(data)   # no copy: a caller may hand the same buffer again once this returns
        first = self.lines_consumed
        flat = isinstance(data, (bytes, bytearray))
        last_nl = data.rfind(b"\n") if flat else _last_newline(arr)
        if last_nl < 0:
            self._partial += data
            return EventBatch.empty(5, first)
        end = last_nl + 1
        # Room for one event per 16 bytes: 1.7 per line of the real data (28 bytes a line, 1.005
        # events).  Untouched capacity costs no page faults; denser output grows by copying.
        out = self._output(end // 16 + 64)
        k, skipped, err = 0, 0, None
        start = 0
        if self._partial:
            # finish the remembered line on its own (a small copy) rather than copying all of data
            head_nl = data.index(b"\n") if flat else _first_newline(arr)
            head = bytes(self._partial) + bytes(data[: head_nl + 1])
            self._partial = bytearray()
            k, skipped, err = self._process(_as_readonly_u8(head), 0, len(head), out, k)
            start = head_nl + 1
        if err is None and start < end:
            k, sk, err = self._process(arr, start, end, out, k)
            skipped += sk
        if err is None:
            self._partial += data[end:]
            self._prepare_growth()
        self._touch_rest(out, k)
        return self._batch(out, k, first, skipped, err)

    def close(self) -> EventBatch:
        """Flush a final line that has no newline; later calls return empty batches."""
        self._check_usable(closing=True)
        first = self.lines_consumed
        if self._closed or not self._partial:
            self._closed = True
            return EventBatch.empty(5, first)
        self._closed = True
        buf = bytes(self._partial) + b"\n"
        self._partial = bytearray()
        out = _Out(2)
        k, skipped, err = self._process(_as_readonly_u8(buf), 0, len(buf), out, 0)
        return self._batch(out, k, first, skipped, err)

    # -- internals --------------------------------------------------------------------------
    def _check_usable(self, closing: bool = False) -> None:
        if self._error is not None:
            raise self._error
        if self._closed and not closing:
            raise DdmsError(f"{self.source}: feed() after close()")

    def _output(self, n: int) -> _Out:
        """Output columns for ``n`` events: the buffer of an earlier batch that nothing refers to
        any more (every view of it dropped: the engine applied the batch and let it go), else
        new arrays.  Why: fresh arrays cost a page fault per 4 KiB written (a 1 MiB chunk's
        events fill ~550 pages, ~0.3-0.5 ms), and freed ones often went back to the system
        between two chunks, so ``ddms run`` paid them again and again on its parsing thread
        (~5,000 faults per 1M lines).  A batch still referenced is never written to: its
        arrays' reference counts show the views (``sys.getrefcount``).  Cost: O(_SPARE) per feed."""
        for i in range(len(self._spare) - 1, -1, -1):   # the most recently used free one: its pages are warm
            buf = self._spare[i]
            if buf.rel.shape[0] >= n and all(sys.getrefcount(getattr(buf, c)) <= 2 for c in buf.COLUMNS):
                self._settle(buf)
                del self._spare[i]
                self._spare.append(buf)
                return buf
        ahead, self._out_ahead = self._out_ahead, None
        if ahead is not None and ahead[1].rel.shape[0] >= n:
            ahead[0].cancel_or_join()   # (done long ago, normally: it started a feed earlier)
            buf = ahead[1]
            self.outputs_made_ahead += 1
        else:
            buf = _Out(max(n, _MIN_OUT))
            self._fresh = buf
        self._spare.append(buf)
        if len(self._spare) > _SPARE:
            self._settle(self._spare.pop(0))
        elif self.fault_ahead:   # the pipeline is still filling: the next feed will want a new buffer too
            nxt = _Out(max(n, _MIN_OUT))
            self._out_ahead = (self._touch_ahead(nxt, 0), nxt)
        return buf

    def _touch_ahead(self, buf: _Out, lo: int) -> Job:
        """Have the helper write rows ``lo:`` of ``buf`` up to what real data fills of the largest
        chunk (~1 event a 28-byte line with both books, about half with one: :attr:`books`;
        capacities are one event per 16 bytes): a buffer first used for a small chunk is reused
        for larger ones.  Nothing else may write those rows until the job is settled (:meth:`_settle`)."""
        hi = buf.rel.shape[0] * 5 * self._keep.bit_count() // 16
        return helper().submit(_touch, buf.rel, buf.sign, buf.cols, buf.line, min(lo, hi), hi)

    def _touch_rest(self, out: _Out, k: int) -> None:
        """After a feed that wrote rows ``:k`` of a buffer made for it on this thread: the helper
        writes the rows above (the larger chunks it is reused for will fill them), and the buffer
        is not reused before that job is settled.  Only after the feed: the kernel may write any
        row below the capacity, so a concurrent write there would race with it."""
        if self._fresh is out and self.fault_ahead:
            self._touching[id(out)] = self._touch_ahead(out, k)
        self._fresh = None

    def _settle(self, buf: _Out) -> None:
        """Before ``buf`` is written again or dropped: its helper job finished, or is taken back unstarted."""
        job = self._touching.pop(id(buf), None)
        if job is not None:
            job.cancel_or_join()

    def _batch(self, out: _Out, k: int, first: int, skipped: int, err: InputError | None) -> EventBatch:
        return EventBatch(out.rel[:k], out.sign[:k], out.cols[:k], out.line[:k], first + 1,
                          self.lines_consumed, skipped, err)

    def _grow_table(self) -> None:
        """Grow the order table (x4 while small, then x2: :func:`~ddms.io.kernels.ordertable.grow_bits`),
        into the arrays the helper thread made if they are of the size needed (:attr:`fault_ahead`)."""
        bits = _grow_bits(self._keys.shape[0])
        cap = self._keys.shape[0] << bits
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            job, box, ahead_cap = ahead
            if job.cancel_or_join() and ahead_cap == cap:   # (the helper had not got to it: clear here)
                _clear(box[0], box[1])
            if ahead_cap == cap:
                self._keys, self._vals = _grow_into(self._keys, self._vals, box[0], box[1], self._meta, 3, bits)
                self.tables_made_ahead += 1
                return
        keys, vals = _new_table_arrays(cap)
        _clear(keys, vals)
        self._keys, self._vals = _grow_into(self._keys, self._vals, keys, vals, self._meta, 3, bits)

    def wait_helpers(self) -> None:
        """Wait for the helper thread's jobs of :attr:`fault_ahead` (their work stays for later use)."""
        for ahead in (self._ahead, self._out_ahead):
            if ahead is not None:
                ahead[0].join()
        for job in self._touching.values():
            job.join()

    def _prepare_growth(self) -> None:
        """With :attr:`fault_ahead`, start making the next table's arrays once a quarter full (3/8 from
        :data:`~ddms.io.kernels.ordertable.FAST_GROWTH` slots on; it grows at half), for tables of up
        to :data:`_AHEAD_MAX` slots: a run that ends before the growth wastes the arrays made, and
        beyond that size a growth is rare against the run's length.  O(1)."""
        cap = self._keys.shape[0]
        start = cap // 4 if cap < _FAST_GROWTH else 3 * cap // 8
        if not self.fault_ahead or self._ahead is not None or int(self._meta[0]) < start:
            return
        if cap << _grow_bits(cap) > _AHEAD_MAX:
            return
        new_cap = cap << _grow_bits(cap)
        # allocated here (no page touched yet: the parsing thread's allocator, whose freed memory
        # comes back; arrays allocated on the helper came from a malloc arena of their own and
        # doubled the run's page faults), cleared (faulted in) there
        box = _new_table_arrays(new_cap)
        self._ahead = (helper().submit(_clear, box[0], box[1]), box, new_cap)

    def _bad_line(self, code: int, extra: int, line: int, text_bytes: bytes) -> InputError:
        text = text_bytes.decode("utf-8", errors="replace")
        return InputError(_reason(code, extra, text), self.source, line, text)

    def _skip(self, err: InputError) -> None:
        self.bad_lines += 1
        if len(self.bad_samples) < MAX_BAD_SAMPLES:
            self.bad_samples.append(err)

    def _process(self, arr: np.ndarray, pos: int, end: int, out: _Out, k: int
                 ) -> tuple[int, int, InputError | None]:
        """Run the kernel over the lines of ``arr[pos:end]``, resolving its stops.
        Returns ``(k, skipped, error)``; ``error`` is set only in strict mode."""
        skipped = 0
        while True:
            (pos, done, k, status, code, extra, s, e, nl, sk, nbad) = _run(
                arr, pos, end, self.lines_consumed, self.brokers, self._keep, self.skip_bad, self._keys,
                self._vals, self._meta, out.rel, out.sign, out.cols, out.line, k, self._bad, 0)
            self.lines_consumed = done
            skipped += sk
            self.bad_lines += sk - nbad
            for b in self._bad[:nbad]:
                self._skip(self._bad_line(int(b[3]), int(b[4]), int(b[0]), arr[b[1]:b[2]].tobytes()))
            if status == _DONE:
                return k, skipped, None
            if status == _GROW:
                self._grow_table()
                continue
            if status == _FULL:
                out.grow(k, 2)
                continue
            text = arr[s:e].tobytes()
            if status == _SLOW:
                code, values = _slow_values(text)
                if code == _OK:
                    if 2 * (self.resting + 1) > self._keys.shape[0]:
                        self._grow_table()
                    if k + 2 > out.rel.shape[0]:
                        out.grow(k, 2)
                    t, oid, act, vol, px = values
                    k = _apply(act, t, oid, vol, px, done + 1, self.brokers, self._keep, self._keys, self._vals,
                               self._meta, out.rel, out.sign, out.cols, out.line, k)
                    self.lines_consumed = done + 1
                    pos = nl + 1
                    continue
                extra = 0
            err = self._bad_line(code, extra, done + 1, text)
            if not self.skip_bad:
                self._error = err
                return k, skipped, err
            self.lines_consumed = done + 1
            skipped += 1
            self._skip(err)
            pos = nl + 1


def _new_table_arrays(cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Uncleared ``keys``/``vals`` arrays for an order table of ``cap`` slots, on huge pages once
    large (:func:`~ddms.io.pages.huge_empty`: the 2 MiB ``vals`` of a 65,536-slot table cost one
    page fault instead of 512).  O(1); clearing (:func:`~ddms.io.kernels.ordertable.clear`) writes them."""
    return huge_empty(cap, np.int64), huge_empty((cap, 4), np.float64)


def _slow_values(text: bytes) -> tuple[int, tuple]:
    """Values of a line the kernel validated but could not convert exactly (Python's float
    is correctly rounded); a non-finite result makes the line bad."""
    f = text.decode("ascii").split(",")
    t, vol, px = float(f[0]), float(f[3]), float(f[4])
    for v, code in ((t, _R_T_RANGE), (vol, _R_VOL_RANGE), (px, _R_PRICE_RANGE)):
        if not math.isfinite(v):
            return code, ()
    return _OK, (t, int(f[1]), ord(f[2]), vol, px)


def orderbook_rows(parser: OrderBookParser) -> dict[str, np.ndarray]:
    """The currently resting rows: ``{"bids": (n, 5), "asks": (m, 5)}`` float64 arrays with
    columns :data:`COLUMNS`, sorted by order id.  O(table capacity); meant for tests/oracles."""
    keys, vals = parser._keys, parser._vals
    used = keys != _EMPTY
    ids = keys[used]
    v = vals[used]
    out: dict[str, np.ndarray] = {}
    for book, name in enumerate(RELATIONS):
        sel = v[:, 3] == book
        bid = ids[sel]
        order = np.argsort(bid, kind="stable")
        bid = bid[order]
        rows = np.empty((bid.shape[0], 5), np.float64)
        rows[:, 0] = v[sel, 0][order]
        rows[:, 1] = bid
        rows[:, 2] = np.mod(bid, parser.brokers)
        rows[:, 3] = v[sel, 1][order]
        rows[:, 4] = v[sel, 2][order]
        out[name] = rows
    return out


def read_orderbook(path_or_file: str | os.PathLike | BinaryIO, *, chunk_bytes: int = 1 << 22,
                   brokers: int = 10, skip_bad: bool = False) -> Iterator[EventBatch]:
    """Stream a finance.csv file (path or binary file object) as event batches, one per chunk.

    In strict mode a bad line ends the iteration: the batch with the events before it is
    yielded (its ``error`` set), then the :class:`InputError` naming the file is raised.
    Batches that consumed no line (a chunk inside one long line) are not yielded."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be >= 1")
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "rb") as f:
            yield from _read(f, os.fspath(path_or_file), chunk_bytes, brokers, skip_bad)
    else:
        name = getattr(path_or_file, "name", "<stream>")
        yield from _read(path_or_file, str(name), chunk_bytes, brokers, skip_bad)


def parse_chunks(parser, chunks: Iterable[bytes]) -> Iterator[EventBatch]:
    """Feed ``chunks`` to ``parser`` and close it: the transport-independent loop behind every
    reader.  In strict mode the batch carrying a bad line's ``error`` is yielded, then the error is
    raised.  Batches that consumed no line are not yielded."""
    for data in chunks:
        if isinstance(data, str):
            raise TypeError(f"{parser.source}: input must be bytes (open files with 'rb')")
        batch = parser.feed(data)
        if batch.error is not None:
            yield batch
            raise batch.error
        if batch.last_line >= batch.first_line:
            yield batch
    batch = parser.close()
    if batch.error is not None:
        yield batch
        raise batch.error
    if batch.last_line >= batch.first_line:
        yield batch


def _read(f: BinaryIO, source: str, chunk_bytes: int, brokers: int, skip_bad: bool) -> Iterator[EventBatch]:
    parser = OrderBookParser(brokers=brokers, source=source, skip_bad=skip_bad)
    yield from parse_chunks(parser, iter(lambda: f.read(chunk_bytes), b""))


def parse_orderbook_text(text: str, **kw) -> EventBatch:
    """Parse a whole string (a final line needs no newline) into one batch.  Keyword arguments
    go to :class:`OrderBookParser` (``source`` defaults to ``"<string>"``).  Strict mode raises
    the :class:`InputError` of the first bad line instead of returning a partial batch."""
    kw.setdefault("source", "<string>")
    parser = OrderBookParser(**kw)
    data = text.encode("utf-8")
    if data and not data.endswith(b"\n"):
        data += b"\n"
    batch = parser.feed(data)
    if batch.error is not None:
        raise batch.error
    return batch
