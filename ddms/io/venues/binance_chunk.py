"""Chunked fast lane for multi-symbol Binance depth streams: many messages per numba call.

Why: :meth:`BinanceBooks.feed <ddms.io.venues.binance.BinanceBooks.feed>` pays, per message, a
decoder call, a record object, a book-kernel call with 17 array arguments and Python sequencing:
with 1,000 symbols and 20 levels a message that fixed cost (~20-60 us) dominated ingestion.
:func:`_run` instead scans the raw messages of a chunk one after another inside one numba call
(the decoder's own :func:`~ddms.io.venues.binance_book._scan`), looks the symbol up in a hash
table of book slots, checks continuity against per-slot state arrays and applies the levels with
the book's own :func:`~ddms.io.kernels.levelarrays.apply_depth` on that symbol's arrays (held in
numba typed lists), writing all rows into one chunk output.

It stops at the first message it cannot handle *exactly* as the Python path would: anything but
a well-formed ``depthUpdate`` of a known symbol (bookTickers, trades, snapshots, unknown fields,
an unknown or lower-case symbol, non-ASCII stream names), a book that waits for a snapshot, a
continuity break (gap or stale; after a snapshot: an event that does not straddle it), a scale
change, a book that needs more blocks.  The caller
(:meth:`ChunkLane.feed_chunk`) then feeds that one message through the Python path, refreshes
that symbol's slot, and resumes the kernel after it: the output -- events, actions, counters,
reports, bookTicker checks -- is the one of feeding the messages one by one (tests/
test_binance_chunk.py checks it on generated streams and the real captures).

BookTickers (``others``) are checked in the kernel as :meth:`BinanceBook._on_ticker` and
:meth:`BinanceBook._after_update` decide: each slot keeps the book's pending tickers as a ring
(``_pq``: queued ahead of the book, popped and compared when an update reaches their ``u``) and
the last entries of its top-of-book history (``_hq``: a late ticker is compared against the entry
of its update); :meth:`ChunkLane._write_back` brings the book's ``_pending`` in step after each
run, and only a mismatch (its report), a crossed book or a history entry older than the ring
costs Python per message.  Why: an hftbacktest capture holds ~10 bookTickers per depth update;
handing each back to Python capped the real captures at ~0.3-0.5M level updates/s.
What stays in Python: the book's counters, its top-of-book history (the dict), the reports, and
the events (one :class:`SymbolEvents` per message, or with ``others`` one
:class:`~ddms.io.levels.ChunkEvents` per kernel run).  With ``others`` a book
whose messages of a run can make no report takes them in bulk, once per run (:meth:`ChunkLane._bulk`);
the others' messages are walked one by one.  Cost: O(bytes + levels) in numba per chunk, plus
~3-5 us of Python per walked message and ~2-3 us per bulk book and run; O(symbols) attribute reads
per chunk to find the books fed elsewhere (only those slots are refreshed).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit
from numba.typed import List

from ddms.io.events import EventBatch
from ddms.io.kernels.jsonscan import eq, leaf, member, skip_json, string, ws
from ddms.io.kernels.levelarrays import apply_depth
from ddms.io.levels import ChunkEvents, Resync, SymbolEvents
from ddms.io.venues.binance_book import (
    _FIRST,
    _GROW,
    _K_A,
    _K_B,
    _K_E,
    _K_T,
    _K_U,
    _MAX_UNKNOWN,
    _NK,
    _SYNCED,
    BookTicker,
    _K_a,
    _K_b,
    _K_e,
    _K_pu,
    _K_s,
    _K_stream,
    _K_u,
    _mask,
    _scan,
    parse_units,
)

if TYPE_CHECKING:
    from ddms.io.venues.binance import BinanceBooks
    from ddms.io.venues.binance_book import BinanceBook

__all__ = ["ChunkLane", "Spans", "StopChunk", "stream_kind"]


class Spans(Sequence[bytes]):
    """Messages as spans of one buffer: message ``i`` is ``buf[starts[i]:ends[i]]`` (``buf`` a
    ``uint8`` array).  :meth:`ChunkLane.feed_chunk` hands them to the kernel in place (no
    per-message ``bytes``, no join); indexing gives the message's bytes (a copy), for the
    per-message path.  The reader of a capture builds them from a block of lines
    (:func:`~ddms.io.kernels.recvlines.scan_received`)."""

    __slots__ = ("buf", "ends", "starts")

    def __init__(self, buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        if starts.shape != ends.shape:
            raise ValueError("Spans: starts and ends differ in length")
        self.buf, self.starts, self.ends = buf, np.ascontiguousarray(starts, np.int64), \
            np.ascontiguousarray(ends, np.int64)

    def __len__(self) -> int:
        return int(self.starts.shape[0])

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        return self.buf[self.starts[i]:self.ends[i]].tobytes()


class StopChunk(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by a ``fallback`` of :meth:`ChunkLane.feed_chunk` after it handled its message, to
    end the chunk there: ``feed_chunk`` returns what the messages up to it produced and sets
    :attr:`ChunkLane.consumed` (a reader stops at a bad line in strict mode without losing the
    events of the lines before it)."""

_DEPTH = np.frombuffer(b"depthUpdate", np.uint8).copy()
_TICKER = np.frombuffer(b"bookTicker", np.uint8).copy()
_STREAM = np.frombuffer(b"stream", np.uint8).copy()
_T_STR = _mask("s", "b", "B", "a", "A")        # a bookTicker's shape (binance_book._SHAPES)
_B_e = _mask("e")
_T_INT = _mask("u")
_T_IOPT = _mask("E", "T")
_B_E = _mask("E")
_B_T = _mask("T")
_B_last = _mask("lastUpdateId")
_K_Bbit = _mask("B")
_T_DEC = _mask("b", "B", "a", "A")
_MAX_KNOWN = 63     # unknown field names the kernel counts (bits of a mask); more: the Python path
_KNOWNW = 32        # bytes of such a name
# message kinds of the kernel's output (res[:, _R_KIND])
_DEPTH_MSG, _IGNORED_MSG, _TICKER_OK, _TICKER_COUNTED, _TRADE_MSG = 0, 2, 3, 4, 5
_TRADE = np.frombuffer(b"trade", np.uint8).copy()
_TR_STR = _mask("e", "s", "p", "q")            # a trade's shape (binance_book._SHAPES["trade"])
_TR_SOPT = _mask("X")
_TR_INT = _mask("E", "T", "t")
_TR_IOPT = _mask("b", "a")
_B_m = _mask("m")
_TR_BOOL = _mask("m", "M")
_TR_DEC = _mask("p", "q")
_C_PH, _C_PN, _C_POP, _C_NEW, _C_CAP, _C_MSG, _C_HH, _C_HN, _C_LO, _C_HCAP, _C_HIST, _C_HMAX = range(11, 23)
_ST_W = 23
"""Columns of a slot's state (``ChunkLane._st``): code, last u, px/qty decimals, blocks hint,
blocks, updates, top (4); then the book's pending bookTickers as the kernel's ring
(``ChunkLane._pq``): head, count, how many of those that are also in the book's ``_pending``
it popped this run (``_C_POP``), how many it queued this run (``_C_NEW``: the ring's last ones,
not in ``_pending`` yet), its capacity (-1: ``_pending`` holds more than the ring can, the
Python path serves the book's tickers); the book's ``messages`` (a ticker's number); the last
entries of the book's top-of-book history as a ring (``ChunkLane._hq``): head, count, the
largest ``u`` of the history's other entries (``_C_LO``: a ``u`` above it that the ring lacks is
in no entry), capacity; the book's ``history``; a bound on the ring's ``u`` (``_C_HMAX``: a
larger one is not there, no need to look)."""
_PQ, _MAX_PQ = 16, 1024
"""Pending bookTickers the kernel keeps per book at first and at most (``ChunkLane._pq[slot]``:
u, message number, the chunk message it came from (-1: it is in the book's ``_pending`` too),
bid px/qty, ask px/qty in units (-1 / -2: no exact value / too many digits: the Python path
compares)).  The rings double when one is full below the book's ``history`` (a real capture
holds ~10 tickers between two depth updates, sometimes dozens)."""
_HQ = 16
"""Top-of-book history entries the kernel keeps per book (``ChunkLane._hq[slot]``: u, top)."""
_I64_MIN = np.iinfo(np.int64).min
_R_KIND, _R_UNK, _R_X = 9, 10, 11   # res columns: kind, unknown-name mask, then kind-specific values
_RES_W = _R_X + 12
_R_NOK, _R_BAD, _R_SRC = _R_X, _R_X + 1, _R_X + 2
_MAX_BAD = 5
"""A depth row's pending checks: tickers checked equal, tickers checked unequal (at most
``_MAX_BAD``: a depth update that would pop more tickers of its ``u`` takes the Python path),
and per unequal one, in the order they were popped, where it is (``k >= 0``: the chunk message
``k``; ``-1 - k``: the ``k``-th of the book's ``_pending`` popped in the run) and its message
number (columns ``_R_SRC + 2 * t``, ``+ 1``)."""
_S_REQ = _mask("e", "s")
_I_REQ = _mask("E", "U", "u")
_I_ALL = _mask("E", "U", "u", "T", "pu")
_L_REQ = _mask("b", "a")
_B_STREAM = _mask("stream")
_B_PU = _mask("pu")
_SYMW = 32          # symbol bytes kept per slot (longer symbols take the Python path)

_MIN_RUN, _REST, _MAX_REST = 8, 64, 4096
"""A kernel call that applies fewer than ``_MIN_RUN`` messages (a stream where depth updates
alternate with bookTickers and trades, as in single-symbol captures) costs more than feeding
them one by one: the lane then rests for ``_REST`` messages, doubling up to ``_MAX_REST`` while
the runs stay short (those messages take the per-message path; the output is the same either
way)."""

_BULK_MIN = 256
"""Kernel runs of fewer messages are walked message by message: :meth:`ChunkLane._bulk`'s NumPy
costs ~0.1 ms a run (a real capture of a few symbols has runs of tens of messages)."""

# stop codes of _run (besides "message i needs the Python path")
_STOP_SLOW, _STOP_LV, _STOP_ROWS, _STOP_PQ = 0, 1, 2, 3


@leaf
def _hash(buf, a, b):  # pragma: no cover - compiled
    h = np.uint64(14695981039346656037)
    for j in range(a, b):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    return h


_AT_DEPTH = np.frombuffer(b"depth", np.uint8).copy()
_AT_TICKER = np.frombuffer(b"bookticker", np.uint8).copy()


@leaf
def _follows(m, j, b, word):  # pragma: no cover - compiled
    """Whether ``m[j:b]`` starts with ``word`` (lower case), ASCII letters compared lower-cased."""
    if b - j < word.shape[0]:
        return False
    for t in range(word.shape[0]):
        c = m[j + t]
        if 65 <= c <= 90:
            c += 32
        if c != word[t]:
            return False
    return True


@leaf
def _book_stream(m, a, b):  # pragma: no cover - compiled
    """Whether the stream name ``m[a:b]`` (ASCII) names a book stream: it contains ``@depth`` or
    ``@bookticker`` in any case -- the test :meth:`BinanceBooks.feed` applies to a parsed
    message (other streams are counted in ``ignored`` without decoding)."""
    for j in range(a, b):
        if m[j] == 64 and (_follows(m, j + 1, b, _AT_DEPTH) or _follows(m, j + 1, b, _AT_TICKER)):
            return True
    return False


@leaf
def _find(buf, a, b, table, symtab, symlen):  # pragma: no cover - compiled
    """Slot of the symbol ``buf[a:b]`` (open addressing on its FNV-1a hash), -1 if unknown."""
    ln = b - a
    if ln > symtab.shape[1]:
        return -1
    mask = table.shape[0] - 1
    i = np.int64(_hash(buf, a, b) & np.uint64(mask))
    while True:
        s = table[i]
        if s < 0:
            return -1
        if symlen[s] == ln and _row_is(symtab, s, buf, a, ln):
            return s
        i = (i + 1) & mask


@leaf
def _ignored_stream(m):  # pragma: no cover - compiled
    """The message ``m`` when :meth:`BinanceBooks.feed` only counts it in ``ignored``: a JSON
    object (strict grammar, as :func:`~ddms.io.kernels.jsonscan.skip_json` reads it: what it
    accepts ``json.loads`` reads the same) with one ``"stream"`` member, a printable-ASCII
    string without escapes that names no book stream.  Returns the span of the counted name
    (the stream after its first ``@``, the whole stream without one; the caller lower-cases
    it); ``(-2, -2)`` for a message read the same way that has no ``"stream"`` or a book
    stream (the decoder takes it); ``(-1, -1)`` otherwise (the Python path decides); then the
    stream's span (-1 without one).  O(bytes)."""
    n = m.shape[0]
    i = ws(m, 0, n)
    if i >= n or m[i] != 123:
        return -1, -1, -1, -1
    i = ws(m, i + 1, n)
    if i < n and m[i] == 125:
        return -1, -1, -1, -1
    sa = -1
    sb = -1
    while True:
        ks, ke, i = member(m, i, n)
        if i < 0:
            return -1, -1, -1, -1
        if eq(m, ks, ke, _STREAM):
            if sa >= 0:
                return -1, -1, -1, -1          # a repeated "stream": json keeps the last, the Python path decides
            sa, sb, i = string(m, i, n)
            if i < 0:
                return -1, -1, -1, -1
        else:
            i = skip_json(m, i, n)
            if i < 0:
                return -1, -1, -1, -1
        i = ws(m, i, n)
        if i < n and m[i] == 44:
            i = ws(m, i + 1, n)
            continue
        if i < n and m[i] == 125:
            i += 1
            break
        return -1, -1, -1, -1
    if ws(m, i, n) != n:
        return -1, -1, -1, -1
    if sa < 0 or _book_stream(m, sa, sb):
        return -2, -2, sa, sb
    for j in range(sa, sb):
        if m[j] == 64:
            return j + 1, sb, sa, sb
    return sa, sb, sa, sb


@njit(cache=True, nogil=True)
def stream_kind(m):  # pragma: no cover - compiled
    """:func:`_ignored_stream` callable from Python (:meth:`BinanceBooks.feed` on raw bytes)."""
    return _ignored_stream(m)


@leaf
def _units(m, a, b, dec):  # pragma: no cover - compiled
    """:func:`~ddms.io.venues.binance_book.parse_units` of the plain decimal ``m[a:b]`` at
    ``dec`` decimals: the units, -1 when it has non-zero digits beyond ``dec`` (None there),
    -2 when the value needs more than 18 digits (the Python path compares it).  O(b - a)."""
    v = np.int64(0)
    nd = 0
    j = a
    while j < b and m[j] != 46:
        v = v * 10 + (np.int64(m[j]) - 48)
        nd += 1
        if nd + dec > 18:
            return -2
        j += 1
    f = 0
    j += 1
    while j < b:
        d = np.int64(m[j]) - 48
        if f < dec:
            v = v * 10 + d
            f += 1
        elif d != 0:
            return -1
        j += 1
    while f < dec:
        v = v * 10
        f += 1
    return v


@leaf
def _known_mask(m, unk, known, knownlen):  # pragma: no cover - compiled
    """Bit mask (rows of ``known``) of the unknown members the scan noted in ``unk`` when every
    one is a name the decoder has already counted (so counting it again adds no report and no
    new key), each at most once; -1 otherwise (the Python path counts and reports it)."""
    mask = np.int64(0)
    for t in range(1, unk[0, 0] + 1):
        r = _name_row(m, unk[t, 0], unk[t, 1], known, knownlen)
        if r < 0 or (mask >> r) & 1:
            return -1
        mask |= np.int64(1) << r
    return mask


@leaf
def _row_is(tab, r, buf, a, ln):  # pragma: no cover - compiled
    """Whether row ``r`` of ``tab`` starts with the ``ln`` bytes ``buf[a:a + ln]``.  O(ln)."""
    for j in range(ln):
        if tab[r, j] != buf[a + j]:
            return False
    return True


@leaf
def _name_row(m, a, b, known, knownlen):  # pragma: no cover - compiled
    ln = b - a
    for r in range(knownlen.shape[0]):
        if knownlen[r] == ln and _row_is(known, r, m, a, ln):
            return r
    return -1


@leaf
def _is_trade(m, sm, slots):  # pragma: no cover - compiled
    """Whether the scanned message ``m`` has ``"e": "trade"``.  O(1)."""
    if not sm & _B_e:
        return False
    return eq(m, slots[_K_e, 1], slots[_K_e, 2], _TRADE)


@leaf
def _same_top(v0, v1, v2, v3, bp, bq, ap, aq):  # pragma: no cover - compiled
    """:meth:`BinanceBook._check_ticker`'s test, for a ticker's units ``v0..v3`` with exact
    values (a negative one: no value at the book's scale or too many digits, never equal here:
    the Python path decides) against a top (-1: an empty side)."""
    return v0 >= 0 and v1 >= 0 and v2 >= 0 and v3 >= 0 and v0 == bp and v1 == bq and v2 == ap and v3 == aq


@leaf
def _hist_find(hq, st, s, u):  # pragma: no cover - compiled
    """Position in ``hq[s]`` of the history entry of update ``u``, -1 when the ring has none (the
    book's history may still hold one when ``u <= st[s, _C_LO]``).  The newest first (a ticker
    names a recent update).  O(_HQ), O(1) for a ``u`` above the ring's."""
    if u > st[s, _C_HMAX]:
        return -1
    h, n, w = st[s, _C_HH], st[s, _C_HN], hq.shape[1]
    for t in range(n - 1, -1, -1):
        j = (h + t) % w
        if hq[s, j, 0] == u:
            return j
    return -1


@leaf
def _record(hq, st, s, u, bp, bq, ap, aq):  # pragma: no cover - compiled
    """:meth:`BinanceBook._after_update`'s history step (``hist[u] = top``, a new ``u`` after
    the others, the oldest dropped past the capacity) on the ring; a ``u`` the ring lacks is
    above ``_C_LO`` (the caller checked), so it is new to the book's history too.  O(_HQ)."""
    j = _hist_find(hq, st, s, u)
    if j < 0:
        n, w = st[s, _C_HN], hq.shape[1]
        if n == st[s, _C_HCAP]:
            h = st[s, _C_HH]
            if hq[s, h, 0] > st[s, _C_LO]:
                st[s, _C_LO] = hq[s, h, 0]
            st[s, _C_HH] = (h + 1) % w
            n -= 1
        j = (st[s, _C_HH] + n) % w
        st[s, _C_HN] = n + 1
        hq[s, j, 0] = u
        if u > st[s, _C_HMAX]:
            st[s, _C_HMAX] = u
    hq[s, j, 1] = bp
    hq[s, j, 2] = bq
    hq[s, j, 3] = ap
    hq[s, j, 4] = aq


@leaf
def _pops_ok(pq, st, s, u):  # pragma: no cover - compiled
    """Whether the kernel can take the pending tickers an update ``u`` pops (before applying
    it): the ring holds the book's whole ``_pending``, and at most ``_MAX_BAD`` popped tickers
    name ``u``, with exact values.  O(popped)."""
    if st[s, _C_CAP] < 0:
        return False
    h, w = st[s, _C_PH], pq.shape[1]
    same = 0
    for t in range(st[s, _C_PN]):
        j = (h + t) % w
        if pq[s, j, 0] > u:
            break
        if pq[s, j, 0] == u:
            same += 1
            if same > _MAX_BAD or pq[s, j, 3] < 0 or pq[s, j, 4] < 0 or pq[s, j, 5] < 0 or pq[s, j, 6] < 0:
                return False
    return True


@leaf
def _drop(pq, st, s):  # pragma: no cover - compiled
    """Take the ring's first ticker off; returns where it is (see :data:`_R_SRC`)."""
    j = st[s, _C_PH]
    ref = pq[s, j, 2]
    if ref < 0:
        src = -1 - st[s, _C_POP]
        st[s, _C_POP] += 1
    else:
        src = ref
        st[s, _C_NEW] -= 1
    st[s, _C_PH] = (j + 1) % pq.shape[1]
    st[s, _C_PN] -= 1
    return src


@leaf
def _pop(pq, st, s, u, bp, bq, ap, aq, o):  # pragma: no cover - compiled
    """:meth:`BinanceBook._after_update`'s pending step after update ``u`` (top ``bp..aq``):
    the tickers up to ``u`` leave the ring, the one naming ``u`` is compared; the outcome in
    ``o`` (see :data:`_R_NOK`).  O(popped)."""
    o[_R_NOK] = 0
    o[_R_BAD] = 0
    while st[s, _C_PN] > 0:
        j = st[s, _C_PH]
        if pq[s, j, 0] > u:
            break
        same, n = pq[s, j, 0] == u, pq[s, j, 1]
        ok = _same_top(pq[s, j, 3], pq[s, j, 4], pq[s, j, 5], pq[s, j, 6], bp, bq, ap, aq)
        src = _drop(pq, st, s)
        if same and ok:
            o[_R_NOK] += 1
        elif same:
            c = _R_SRC + 2 * o[_R_BAD]
            o[c] = src
            o[c + 1] = n
            o[_R_BAD] += 1


@leaf
def _push(pq, st, s, u, n, i, v0, v1, v2, v3):  # pragma: no cover - compiled
    """:meth:`BinanceBook._on_ticker`'s queueing of a ticker ahead of the book (message number
    ``n``, chunk message ``i``): False when the ring cannot (it holds less than ``_pending``, or
    is full below the book's ``history``); at ``history`` the first one is dropped, as
    ``_pending`` drops it.  O(1)."""
    cap = st[s, _C_CAP]
    if cap < 0 or (st[s, _C_PN] == cap and cap < st[s, _C_HIST]):
        return False      # the caller stops (the rings grow, or the Python path queues it)
    if st[s, _C_PN] == cap:
        _drop(pq, st, s)
    j = (st[s, _C_PH] + st[s, _C_PN]) % pq.shape[1]
    pq[s, j, 0] = u
    pq[s, j, 1] = n
    pq[s, j, 2] = i
    pq[s, j, 3] = v0
    pq[s, j, 4] = v1
    pq[s, j, 5] = v2
    pq[s, j, 6] = v3
    st[s, _C_PN] += 1
    st[s, _C_NEW] += 1
    return True


@njit(cache=True, nogil=True)
def _run(buf, starts, ends, i0, futures, others, capture, known, knownlen, slots, lv, unk, table, symtab, symlen,
         st, stf, pq, hq, L_bk, L_bq, L_bt, L_bn, L_order, L_bmax, L_free, L_meta, oi, oc,
         res):  # pragma: no cover - compiled
    """Apply messages ``i0..`` (``buf[starts[i]:ends[i]]``) while each is a plain in-sequence
    depth update of a synchronized book (or the first one straddling its snapshot).  ``st[slot]``
    = (0 waiting / 1 synchronized / 2 after the snapshot, last u, px_dec, qty_dec,
    blocks hint, blocks allocated, updates); ``stf[slot]`` = (pscale, qscale).  Per applied
    message ``res[i - i0]`` = (slot, end row, u, best bid, qty, best ask, qty, levels, 1 if it
    synchronized the book, kind, unknown-name mask, then the pending checks it made (see
    :data:`_R_NOK`)).  Each depth update applied records its top in the history ring ``hq`` and
    pops the pending tickers it reaches from the ring ``pq`` (:meth:`BinanceBook._after_update`'s
    steps; a ticker compared unequal is reported by :meth:`ChunkLane._emit`).
    With ``others`` the kernel also takes (for :meth:`ChunkLane._emit` to count in message
    order) a well-formed bookTicker of a synchronized book as :meth:`BinanceBook._on_ticker`
    does (kind ``_TICKER_COUNTED``: queued in ``pq`` when ahead of the book, else of no update
    in the history; ``_TICKER_OK``: checked equal against the history entry of its update; a
    mismatch, an inexact value or a history entry beyond the ring takes the Python path) with
    slot, u and from column ``_R_X`` the spans of b, B, a, A and of the stream (-1 without an
    envelope), E and T (-1 when absent), a message of a stream that is not a book stream (kind ``_IGNORED_MSG``,
    slot -1, the span of its counted name), and depth updates and tickers carrying unknown
    fields already counted (``known``/``knownlen``: their names; the mask in ``_R_UNK``).
    ``capture`` (with ``others``; a recorder capture's reader, :class:`~ddms.io.sources.BinanceCaptureReader`,
    which decodes every message whatever its stream): a well-formed trade (the decoder's shape,
    of any stream) is kind ``_TRADE_MSG`` (the slot of its symbol or -1: the reader feeds a
    known symbol's book, counted in its ``trades``), and a message of a stream that is not a
    book stream is left to the Python path (the reader decodes it before it calls it ignored).
    Returns ``(stop message, stop code, rows)``."""
    k = 0
    nmsg = starts.shape[0]
    for i in range(i0, nmsg):
        a0 = starts[i]
        b0 = ends[i]
        m = buf[a0:b0]
        o = res[i - i0]
        r = _scan(m, slots, lv, unk)
        if r[0] == _GROW:
            return i, _STOP_LV, k
        um = np.int64(0)
        ok = r[0] == 0
        if ok and unk[0, 0] != 0:
            um = _known_mask(m, unk, known, knownlen) if others else -1
            ok = um >= 0
        env, pd, qd, sm, im, bm, lm, dm = r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8]
        if ok:
            if env:
                if not sm & _B_STREAM:
                    ok = False
                else:
                    for j in range(slots[_K_stream, 1], slots[_K_stream, 2]):
                        if m[j] > 127:
                            ok = False
                    if ok and not _book_stream(m, slots[_K_stream, 1], slots[_K_stream, 2]):
                        ok = capture and _is_trade(m, sm, slots)
                    sm &= ~_B_STREAM
            elif (sm | im | bm | lm) & _B_STREAM:
                ok = False
        depth = False
        if ok and sm & _B_e:
            ea, eb = slots[_K_e, 1], slots[_K_e, 2]
            depth = eb - ea == _DEPTH.shape[0]
            if depth:
                for j in range(eb - ea):
                    if m[ea + j] != _DEPTH[j]:
                        depth = False
                        break
        if ok and not depth:
            if not others:
                return i, _STOP_SLOW, k
            if capture and _is_trade(m, sm, slots):
                if (sm & ~(_TR_STR | _TR_SOPT) or sm & _TR_STR != _TR_STR or im & ~(_TR_INT | _TR_IOPT)
                        or im & _TR_INT != _TR_INT or bm & ~_TR_BOOL != 0 or bm & _B_m == 0 or lm != 0
                        or dm & _TR_DEC != _TR_DEC):
                    return i, _STOP_SLOW, k
                sa, sb = slots[_K_s, 1], slots[_K_s, 2]
                s = _find(m, sa, sb, table, symtab, symlen)
                if s < 0:
                    for j in range(sa, sb):
                        if m[j] > 127:
                            return i, _STOP_SLOW, k    # the decoder's str(): the Python path says what it makes of it
                if s >= 0:
                    st[s, _C_MSG] += 1
                o[0] = s
                o[1] = k
                o[_R_KIND] = _TRADE_MSG
                o[_R_UNK] = um
                continue
            # a bookTicker of a known symbol (binance_book.Decoder's rules for its shape)?
            if sm & _B_e:
                ea, eb = slots[_K_e, 1], slots[_K_e, 2]
                if eb - ea != _TICKER.shape[0]:
                    return i, _STOP_SLOW, k
                for j in range(eb - ea):
                    if m[ea + j] != _TICKER[j]:
                        return i, _STOP_SLOW, k
            elif im & _B_last or not sm & _K_Bbit:
                return i, _STOP_SLOW, k
            if (sm & ~(_T_STR | _B_e) or sm & _T_STR != _T_STR or im & ~(_T_INT | _T_IOPT) or im & _T_INT != _T_INT
                    or bm != 0 or lm != 0 or dm & _T_DEC != _T_DEC):
                return i, _STOP_SLOW, k
            s = _find(m, slots[_K_s, 1], slots[_K_s, 2], table, symtab, symlen)
            if s < 0 or st[s, 0] == 0:
                return i, _STOP_SLOW, k     # unknown, or a book waiting for its snapshot (its _pending takes it)
            tu = slots[_K_u, 1]
            v0 = _units(m, slots[_K_b, 1], slots[_K_b, 2], st[s, 2])
            v1 = _units(m, slots[_K_B, 1], slots[_K_B, 2], st[s, 3])
            v2 = _units(m, slots[_K_a, 1], slots[_K_a, 2], st[s, 2])
            v3 = _units(m, slots[_K_A, 1], slots[_K_A, 2], st[s, 3])
            # BinanceBook._on_ticker: ahead of the book it waits (the ring is the book's _pending);
            # else the history entry of its update, if any, is checked
            if tu > st[s, 1]:
                if not _push(pq, st, s, tu, st[s, _C_MSG] + 1, i, v0, v1, v2, v3):
                    return i, _STOP_PQ if st[s, _C_CAP] >= 0 and pq.shape[1] < _MAX_PQ else _STOP_SLOW, k
                kind = _TICKER_COUNTED
            else:
                j = _hist_find(hq, st, s, tu)
                if j >= 0:
                    if not _same_top(v0, v1, v2, v3, hq[s, j, 1], hq[s, j, 2], hq[s, j, 3], hq[s, j, 4]):
                        return i, _STOP_SLOW, k     # a mismatch (or no exact value): the Python path reports it
                    kind = _TICKER_OK
                elif tu > st[s, _C_LO]:
                    kind = _TICKER_COUNTED          # of no update in the history: only counted
                else:
                    return i, _STOP_SLOW, k         # the history may hold it beyond the ring
            st[s, _C_MSG] += 1
            o[0] = s
            o[1] = k
            o[2] = tu
            o[_R_KIND] = kind
            o[_R_UNK] = um
            for t, kk in enumerate((_K_b, _K_B, _K_a, _K_A)):
                o[_R_X + 2 * t] = a0 + slots[kk, 1]
                o[_R_X + 2 * t + 1] = a0 + slots[kk, 2]
            o[_R_X + 8] = a0 + slots[_K_stream, 1] if env else -1
            o[_R_X + 9] = a0 + slots[_K_stream, 2] if env else -1
            o[_R_X + 10] = slots[_K_E, 1] if im & _B_E else -1
            o[_R_X + 11] = slots[_K_T, 1] if im & _B_T else -1
            continue
        if not ok:
            if others and not capture:
                sa, sb, _, _ = _ignored_stream(m)
                if sa >= 0:
                    o[0] = -1
                    o[1] = k
                    o[_R_KIND] = _IGNORED_MSG
                    o[_R_UNK] = 0
                    o[_R_X] = a0 + sa
                    o[_R_X + 1] = a0 + sb
                    continue
            return i, _STOP_SLOW, k
        if sm != _S_REQ or im & _I_REQ != _I_REQ or im & ~_I_ALL or bm != 0 or lm != _L_REQ:
            return i, _STOP_SLOW, k
        s = _find(m, slots[_K_s, 1], slots[_K_s, 2], table, symtab, symlen)
        if s < 0 or st[s, 0] == 0:
            return i, _STOP_SLOW, k
        first = slots[_K_U, 1]
        final = slots[_K_u, 1]
        last = st[s, 1]
        if first > final or (futures and not im & _B_PU):
            return i, _STOP_SLOW, k
        if st[s, 0] == 2:     # the first event after the snapshot: it must straddle it
            if futures:
                if not (first <= last <= final):
                    return i, _STOP_SLOW, k
            elif not (first <= last + 1 <= final):
                return i, _STOP_SLOW, k
        elif futures:
            if slots[_K_pu, 1] != last:
                return i, _STOP_SLOW, k
        elif first != last + 1:
            return i, _STOP_SLOW, k
        b1, nb = slots[_K_b, 1], slots[_K_b, 2]
        a1, na = slots[_K_a, 1], slots[_K_a, 2]
        if nb + na > 0 and (pd != st[s, 2] or qd != st[s, 3]):
            return i, _STOP_SLOW, k     # a message at another scale: BinanceBook._scaled decides
        mx = nb if nb > na else na
        if st[s, 4] + mx + 1 > st[s, 5]:
            return i, _STOP_SLOW, k
        if k + 2 * (nb + na) > oi.shape[0]:
            return i, _STOP_ROWS, k
        if not _pops_ok(pq, st, s, final) or (final <= st[s, _C_LO] and _hist_find(hq, st, s, final) < 0):
            return i, _STOP_SLOW, k     # a check the kernel cannot decide exactly, or history beyond its ring
        bl = lv[b1:b1 + nb, :2]
        al = lv[a1:a1 + na, :2]
        st[s, 6] += 1
        k, bp, bq, ap, aq, hint = apply_depth(
            L_bk[s], L_bq[s], L_bt[s], L_bn[s], L_order[s], L_bmax[s], L_free[s], L_meta[s], bl, al,
            float(slots[_K_E, 1]), st[s, 6], oi, oc, k, stf[s, 0], stf[s, 1])
        st[s, 4] = hint
        st[s, 1] = final
        st[s, 7] = bp
        st[s, 8] = bq
        st[s, 9] = ap
        st[s, 10] = aq
        o[8] = 1 if st[s, 0] == 2 else 0
        st[s, 0] = 1
        o[0] = s
        o[1] = k
        o[2] = final
        o[3] = bp
        o[4] = bq
        o[5] = ap
        o[6] = aq
        o[7] = nb + na
        o[_R_KIND] = _DEPTH_MSG
        o[_R_UNK] = um
        st[s, _C_MSG] += 1
        _record(hq, st, s, final, bp, bq, ap, aq)
        _pop(pq, st, s, final, bp, bq, ap, aq, o)
    return nmsg, _STOP_SLOW, k


@njit(cache=True)
def _new_lists(bk, bq, bt, bn, order, bmax, free, meta):  # pragma: no cover - compiled
    """Typed lists of the eight level arrays holding one book's (slot 0).  Built and updated in
    compiled, disk-cached code: typed-list methods called from Python compile on first use in
    every process (about a second)."""
    a = List()
    a.append(bk)
    b = List()
    b.append(bq)
    c = List()
    c.append(bt)
    d = List()
    d.append(bn)
    e = List()
    e.append(order)
    f = List()
    f.append(bmax)
    g = List()
    g.append(free)
    h = List()
    h.append(meta)
    return a, b, c, d, e, f, g, h


@njit(cache=True)
def _put(a, b, c, d, e, f, g, h, s, bk, bq, bt, bn, order, bmax, free, meta):  # pragma: no cover - compiled
    """Slot ``s`` of the lists ``a..h`` := the arrays (appended when ``s`` is the next slot).  The
    lists are separate arguments, not a tuple: numba's dispatcher types a tuple of typed lists
    element by element on every call (~0.7 ms), a typed list alone from its cached type."""
    if s == len(a):
        a.append(bk)
        b.append(bq)
        c.append(bt)
        d.append(bn)
        e.append(order)
        f.append(bmax)
        g.append(free)
        h.append(meta)
    else:
        a[s] = bk
        b[s] = bq
        c[s] = bt
        d[s] = bn
        e[s] = order
        f[s] = bmax
        g[s] = free
        h[s] = meta


class ChunkLane:
    """The fast lane's state for one :class:`~ddms.io.venues.binance.BinanceBooks`: a slot per
    book (symbol bytes, hash table, state arrays, typed lists of the book's level arrays).  Slots
    are refreshed from the books at the start of every chunk and after every message that took
    the Python path, so the books stay the single source of truth between calls."""

    def __init__(self, books: BinanceBooks, *, rows: int = 1 << 17, adaptive: bool | None = None,
                 follow: Callable[[str], bool] | None = None, others: bool = False, capture: bool = False) -> None:
        """``rows``: the initial capacity of the chunk output (doubled when a message does not
        fit; a full output is handed out and reused).  ``adaptive``: rest after short kernel
        runs (see :data:`_MIN_RUN`; tests turn it off to drive every message at the kernel;
        default: on unless ``others``).
        ``follow``: which symbols' messages the kernel may apply (default all); the others'
        always take the per-message path (a monitor session filters symbols it does not follow
        before the core sees them).  ``others``: the kernel also takes bookTickers of known
        symbols, messages of streams that are not book streams (trades, klines: counted in
        ``ignored``) and messages whose unknown fields the decoder has counted before (COIN-M's
        ``ps``): a real capture interleaves those with the depth updates, and each one ended a
        kernel run.  ``on_fast`` then gets every message the kernel took, slot -1 for an
        ignored one (see :attr:`on_ignored`).  ``capture`` (implies ``others``): a recorder
        capture's reader feeds the lane (see :func:`_run`): trades are fed to their books, other
        streams take the per-message path."""
        self.core = books
        self.others = others or capture
        self.capture = capture
        self.run_kinds = np.zeros(0, np.int64)
        """During ``on_fast``: the kind of each message of the kernel run (0: a depth update applied)."""
        if adaptive is None:   # with others the kernel takes nearly every message: no need to rest
            adaptive = not (others or capture)
        self._known_names: list[str] = []        # unknown field names the kernel may count (rows of _known)
        self._known_from = 0                     # len(decoder.unknown_fields) they were taken from
        self._known = np.zeros((0, _KNOWNW), np.uint8)
        self._knownlen = np.zeros(0, np.int64)
        self._buf: np.ndarray | None = None      # the current chunk's bytes (for _emit's strings)
        self._names: dict[bytes, str] = {}        # ignored streams' counted names, by their bytes
        self.adaptive = adaptive
        self.follow = follow
        self.on_ignored: Callable[[int], bool] | None = None
        """Called in message order with the chunk index of each message the kernel only counts
        in ``ignored`` (``others``); False: the consumer counted it itself (a monitor session
        counts a trade of a symbol it does not follow as ``other_symbol``).  None: count it."""
        self.fast_messages = 0
        """Messages applied by the kernel (the rest took the Python path)."""
        self.bulk_messages = 0
        """Of those, messages :meth:`_emit` took in bulk per book (:meth:`_bulk`)."""
        self._slots = np.zeros((_NK, 4), np.int64)
        self._lv = np.zeros((256, 4), np.int64)
        self._unk = np.zeros((_MAX_UNKNOWN + 1, 2), np.int64)
        self._oi = np.zeros((max(rows, 1), 3), np.int64)
        self._oc = np.zeros((max(rows, 1), 5), np.float64)
        self._sym: list[str] = []
        self._slot_of: dict[str, int] = {}
        self._books: list[BinanceBook] = []
        self._symtab = np.zeros((0, _SYMW), np.uint8)
        self._symlen = np.zeros(0, np.int64)
        self._table = np.full(8, -1, np.int64)
        self._st = np.zeros((0, _ST_W), np.int64)
        self._stf = np.zeros((0, 2), np.float64)
        self._pq = np.zeros((0, _PQ, 7), np.int64)   # per slot, the book's pending bookTickers (see _PQ)
        self._hq = np.zeros((0, _HQ, 5), np.int64)   # per slot, the last entries of its history (see _HQ)
        self._res: np.ndarray | None = None          # the current chunk's kernel output (tickers' spans)
        self._held: list[tuple[np.ndarray, ...]] = []
        self._cool = 0                # messages left to feed one by one (see _MIN_RUN)
        self._rest = _REST // 2       # the next rest (doubles after each short run)
        self._lists: Any = None      # typed lists of every book's level arrays, by slot
        self._marks: dict[str, tuple[int, int, int, int]] = {}   # per book, when a chunk last touched it
        self._touched: set[int] = set()                             # slots the current chunk touched
        self._recv: np.ndarray | None = None   # the receive times of the current chunk's messages
        self.consumed = 0
        """Messages the last :meth:`feed_chunk` consumed (all of them unless a fallback raised
        :class:`StopChunk`)."""

    # -- slots ---------------------------------------------------------------------------------
    def _add(self, sym: str, bk: BinanceBook) -> None:
        s = len(self._sym)
        self._sym.append(sym)
        self._slot_of[sym] = s
        self._books.append(bk)
        raw = sym.encode()
        if s >= self._symtab.shape[0]:
            cap = max(8, 2 * self._symtab.shape[0])
            self._symtab = np.resize(self._symtab, (cap, _SYMW))
            self._symlen = np.resize(self._symlen, cap)
            self._st = np.resize(self._st, (cap, _ST_W))
            self._stf = np.resize(self._stf, (cap, 2))
            self._pq = np.resize(self._pq, (cap, self._pq.shape[1], 7))
            self._hq = np.resize(self._hq, (cap, _HQ, 5))
        ok = len(raw) <= _SYMW and raw.isascii() and (self.follow is None or self.follow(sym))
        self._symlen[s] = len(raw) if ok else -1     # -1: never matches, the Python path serves it
        if ok:
            self._symtab[s, :len(raw)] = np.frombuffer(raw, np.uint8)
        held = tuple(getattr(bk, name) for name in _ARRAYS)
        self._held.append(held)
        if self._lists is None:
            self._lists = _new_lists(*held)
        else:
            _put(*self._lists, s, *held)
        if 2 * len(self._sym) > self._table.shape[0]:
            self._rehash()
        elif ok:
            self._insert(s)
        self._refresh(s)

    def _insert(self, s: int) -> None:
        n = int(self._symlen[s])
        if n < 0:
            return
        mask = self._table.shape[0] - 1
        i = int(_hash(self._symtab[s], 0, n)) & mask
        while self._table[i] >= 0:
            i = (i + 1) & mask
        self._table[i] = s

    def _rehash(self) -> None:
        cap = 8
        while cap < 4 * len(self._sym):
            cap *= 2
        self._table = np.full(cap, -1, np.int64)
        for s in range(len(self._sym)):
            self._insert(s)

    @staticmethod
    def _ticker_units(bt: BookTicker, pd: int, qd: int) -> tuple[int, ...]:
        """:meth:`BinanceBook._check_ticker`'s values of a ticker, as the kernel's ring keeps them
        (-1: no exact value at the scale, -2: beyond what the kernel compares)."""
        out = []
        for text, d in ((bt.bid_px, pd), (bt.bid_qty, qd), (bt.ask_px, pd), (bt.ask_qty, qd)):
            v = parse_units(text, d)
            out.append(-1 if v is None else v if 0 <= v < 1 << 62 else -2)
        return tuple(out)

    def _slot_state(self, bk: BinanceBook) -> tuple[np.ndarray, list[tuple[int, ...]], list[tuple[int, ...]]]:
        """Book ``bk``'s slot as :meth:`_refresh` sets it: the state row (rings from position 0),
        its pending bookTickers' ring entries (none when they do not fit: capacity -1) and its
        history ring entries.  O(pending + history)."""
        scaled = bk.px_decimals is not None and bk.qty_decimals is not None
        code = (1 if bk._state == _SYNCED else 2 if bk._state == _FIRST else 0) if scaled else 0
        st = np.zeros(_ST_W, np.int64)
        st[:11] = (code, bk.last_u if bk.last_u is not None else -1,
                   bk.px_decimals if bk.px_decimals is not None else -1,
                   bk.qty_decimals if bk.qty_decimals is not None else -1,
                   bk._blocks_hint, bk._bk.shape[1], bk.updates, *bk._top)
        pend = bk._pending
        cap = min(self._pq.shape[1], bk.history)
        st[_C_CAP] = cap if len(pend) <= cap else -1
        pq: list[tuple[int, ...]] = []
        if st[_C_CAP] >= 0 and pend:
            pd, qd = bk.px_decimals or 0, bk.qty_decimals or 0
            pq = [(bt.update_id, n, -1, *self._ticker_units(bt, pd, qd)) for bt, n in pend]
        st[_C_PN] = len(pq)
        st[_C_MSG] = bk.messages
        order, hist = bk._hist_order, bk._hist
        hcap = min(_HQ, bk.history)
        r = min(len(order), hcap)
        hq = [(u, *hist[u]) for u in itertools.islice(order, len(order) - r, None)]
        st[_C_HN], st[_C_HCAP], st[_C_HIST] = r, hcap, bk.history
        st[_C_LO] = max(itertools.islice(order, 0, len(order) - r)) if len(order) > r else _I64_MIN
        st[_C_HMAX] = max(h[0] for h in hq) if hq else _I64_MIN
        return st, pq, hq

    def _refresh(self, s: int) -> None:
        """Copy book ``s``'s sequencing state into the slot arrays: its pending bookTickers into
        the ring ``_pq`` (capacity -1 when they do not fit), the last entries of its top-of-book
        history into ``_hq`` and the largest ``u`` of the others (and its level arrays into the
        typed lists when the book replaced them).  O(pending + history): a slot is refreshed
        when the Python path fed its book, not per kernel run."""
        bk = self._books[s]
        width = self._pq.shape[1]
        if len(bk._pending) > width and width < _MAX_PQ:
            self._grow_pq(min(_MAX_PQ, 1 << (len(bk._pending) - 1).bit_length()))
        self._st[s], pq, hq = self._slot_state(bk)
        self._stf[s] = (bk._pscale, bk._qscale)
        if pq:
            self._pq[s, :len(pq)] = pq
        if hq:
            self._hq[s, :len(hq)] = hq
        if bk._bk is not self._held[s][0] or bk._meta is not self._held[s][7]:
            held = self._held[s] = tuple(getattr(bk, name) for name in _ARRAYS)
            _put(*self._lists, s, *held)

    def _grow_pq(self, width: int) -> None:
        """Pending rings of ``width`` entries (more than now): each slot's entries in order from
        position 0, its capacity the new ``min(width, history)`` (-1 stays: the slot's next
        refresh decides).  O(slots * width)."""
        old, st = self._pq, self._st
        self._pq = np.zeros((old.shape[0], width, 7), np.int64)
        for s in range(len(self._books)):
            n = int(st[s, _C_PN])
            if n:
                self._pq[s, :n] = old[s, (int(st[s, _C_PH]) + np.arange(n)) % old.shape[1]]
            st[s, _C_PH] = 0
            if st[s, _C_CAP] >= 0:
                st[s, _C_CAP] = min(width, int(st[s, _C_HIST]))

    @staticmethod
    def _ring(a: np.ndarray, head: int, n: int) -> list[tuple[int, ...]]:
        """The ``n`` entries of ring ``a`` from ``head``, in order."""
        return [tuple(a[(head + t) % a.shape[0]].tolist()) for t in range(n)]

    def _sync_known(self) -> None:
        """The unknown field names the decoder has counted (at most :data:`_MAX_KNOWN`, printable
        ASCII, no quote or backslash: the bytes of a key without escapes) as the kernel's table.
        O(1) unless the decoder counted a new name."""
        uf = self.core._decoder.unknown_fields
        if len(uf) == self._known_from:
            return
        self._known_from = len(uf)
        names = [n for n in uf if n.isascii() and n.isprintable() and '"' not in n and "\\" not in n
                 and 0 < len(n) <= _KNOWNW][:_MAX_KNOWN]
        self._known_names = names
        self._known = np.zeros((len(names), _KNOWNW), np.uint8)
        self._knownlen = np.array([len(n) for n in names], np.int64)
        for r, n in enumerate(names):
            self._known[r, :len(n)] = np.frombuffer(n.encode(), np.uint8)

    def _sync_books(self) -> None:
        """Register new books; refresh the slots of the books fed since the last chunk saw them
        (their :meth:`_mark` changed: a message, a snapshot, a resync) or whose level arrays
        were replaced.  The others' slots still hold their book's state: the kernel and
        :meth:`_emit` keep a slot in step with its book (:meth:`_check` asserts it).  Why not
        refresh every slot: with 1,000 books that was ~6 us a book per 4,096-line step.
        O(symbols) of attribute reads, O(1) per unchanged book."""
        books = self.core.books
        if len(books) != len(self._sym):
            for sym, bk in books.items():
                if sym not in self._slot_of:
                    self._add(sym, bk)
        marks, held, syms = self._marks, self._held, self._sym
        for s, bk in enumerate(self._books):
            h = held[s]
            if (bk.messages, bk.updates, bk.resyncs, bk.snapshots_rejected) != marks.get(syms[s]) \
                    or bk._bk is not h[0] or bk._meta is not h[7]:
                self._refresh(s)
                marks[syms[s]] = self._mark(bk)

    def _check(self) -> None:
        """Every slot names a book of the core and the hash table finds it; each slot whose book
        nothing fed since the last :meth:`feed_chunk` has its book's state (the kernel and
        :meth:`_emit` keep them in step) and the typed lists hold the book's current arrays
        (a book fed elsewhere since, e.g. a snapshot, is refreshed at the next chunk).
        O(symbols)."""
        assert len(self._sym) == len(self._books) == len(self._held) == len(self._slot_of)
        uf = self.core._decoder.unknown_fields
        assert all(n in uf for n in self._known_names) and len(self._known_names) == len(self._knownlen)
        for s, (sym, bk) in enumerate(zip(self._sym, self._books, strict=True)):
            assert self.core.books[sym] is bk and self._slot_of[sym] == s
            n = int(self._symlen[s])
            if n >= 0:
                assert _find(self._symtab[s, :n].copy(), 0, n, self._table, self._symtab, self._symlen) == s
            if self._marks.get(sym) != self._mark(bk):
                continue     # fed elsewhere since the last chunk (a snapshot, a resync): refreshed at the next
            want, pq, hq = self._slot_state(bk)
            have = self._st[s]
            # the rings hold the book's pending tickers and last history entries (in Python too:
            # nothing popped or queued since); the history bound may be above the fresh one
            same = [c for c in range(_ST_W) if c not in (_C_PH, _C_HH, _C_LO, _C_HMAX)]
            assert (have[same] == want[same]).all(), (sym, have, want)
            assert have[_C_LO] >= want[_C_LO] and have[_C_HMAX] >= want[_C_HMAX], (sym, have, want)
            assert self._ring(self._pq[s], int(have[_C_PH]), int(have[_C_PN])) == pq, sym
            assert self._ring(self._hq[s], int(have[_C_HH]), int(have[_C_HN])) == hq, sym
            assert tuple(self._stf[s].tolist()) == (bk._pscale, bk._qscale), sym
            assert all(getattr(bk, name) is a for name, a in zip(_ARRAYS, self._held[s], strict=True))

    # -- the chunk -------------------------------------------------------------------------------
    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int], recv_ns: int = 0, *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, np.ndarray], None] | None = None,
                   recv: np.ndarray | None = None, events: list | None = None
                   ) -> tuple[list[Resync], list[SymbolEvents]]:
        """See :meth:`BinanceBooks.feed_chunk`.  ``events``: the list the events go to (and
        that is returned), so that ``on_fast`` can take a kernel run's events as they come.
        ``fallback(t)``, when given, handles message
        ``t`` instead of ``core.feed(msgs[t], lines[t], recv_ns)`` (a caller that feeds parsed
        messages, counts its own errors, ...) and returns its actions; it may raise
        :class:`StopChunk` to end the chunk after message ``t``.  ``on_fast(i, slots)`` is called
        after each kernel run with its first message ``i`` and the slot (index into
        :attr:`symbols`) of every message the kernel applied from there, in order, before any
        later message is handled.  ``lines`` is read lazily: a fallback may renumber the
        messages after its own.  ``recv``, when given, is each message's receive time (ns,
        int64, one per message): the rows the kernel applies carry it as ``EventBatch.recv``
        (the rows of the per-message path do not: the caller times those)."""
        core = self.core
        if events is None:
            events = core.take_events()
        else:
            events.extend(core.take_events())
        actions: list[Resync] = []
        self._sync_books()
        self.consumed = 0
        if not msgs:
            self._marks = {sym: self._mark(bk) for sym, bk in zip(self._sym, self._books, strict=True)}
            return actions, events
        self._touched.clear()
        self._recv = None if recv is None else np.asarray(recv, np.int64)
        try:
            self._chunk(msgs, lines, recv_ns, fallback, on_fast, actions, events)
        except StopChunk:
            self._sync_books()     # whatever the fallback did to the core (e.g. took its events)
            self._touched.update(range(len(self._sym)))
        finally:
            self._recv = None
        marks, books, syms = self._marks, self._books, self._sym
        for s in self._touched:   # the others keep theirs: a book fed elsewhere since no longer matches
            marks[syms[s]] = self._mark(books[s])
        return actions, events

    @staticmethod
    def _mark(bk: BinanceBook) -> tuple[int, int, int, int]:
        """Changes whenever anything feeds ``bk`` (a message, a snapshot, a resync)."""
        return (bk.messages, bk.updates, bk.resyncs, bk.snapshots_rejected)

    @property
    def symbols(self) -> list[str]:
        """The symbol of each slot."""
        return self._sym

    def _chunk(self, msgs: Sequence[Any], lines: Sequence[int], recv_ns: int,
               fallback: Callable[[int], Sequence[Resync]] | None, on_fast: Callable[[int, np.ndarray], None] | None,
               actions: list[Resync], events: list[SymbolEvents]) -> None:
        if isinstance(msgs, Spans):     # spans of one buffer: the kernel reads them in place
            buf, starts, ends = msgs.buf, msgs.starts, msgs.ends
        else:
            # only bytes go through the kernel; anything else (str, a parsed dict) is an empty
            # message there, which the scan refuses: it takes BinanceBooks.feed as it is
            raw = [m if type(m) is bytes else b"" for m in msgs]
            buf = np.frombuffer(b"".join(raw), np.uint8)
            offs = np.zeros(len(msgs) + 1, np.int64)
            np.cumsum([len(m) for m in raw], out=offs[1:])
            starts, ends = offs[:-1], offs[1:]
        res = np.zeros((len(msgs), _RES_W), np.int64)
        self._buf, self._res = buf, res
        futures = self.core.market == "futures"
        n = len(msgs)
        stale: set[int] = set()
        try:
            self._loop(msgs, lines, recv_ns, fallback, on_fast, actions, events, buf, starts, ends, res, futures, n,
                       stale)
        finally:
            self._buf = self._res = None
            for s in stale:
                self._refresh(s)

    def _loop(self, msgs, lines, recv_ns, fallback, on_fast, actions, events, buf, starts, ends, res, futures, n,
              stale) -> None:
        """The chunk's messages in order: kernel runs, rests and fallbacks (see :meth:`feed_chunk`)."""
        i = 0
        while i < n:
            if self._cool > 0:    # the lane rests: a run of messages through the per-message path
                j = min(n, i + self._cool)
                self._cool -= j - i
                self._fallback(msgs, lines, recv_ns, i, j, actions, events, stale, fallback)
                i = j
                continue
            if self._lists is None:   # no book yet: nothing the kernel could apply
                stop, code, k = i, _STOP_SLOW, 0
            else:
                if stale:
                    for s in stale:
                        self._refresh(s)
                    stale.clear()
                if self.others:
                    self._sync_known()
                stop, code, k = _run(buf, starts, ends, i, futures, self.others, self.capture, self._known,
                                     self._knownlen,
                                     self._slots, self._lv, self._unk, self._table,
                                     self._symtab, self._symlen, self._st, self._stf, self._pq, self._hq, *self._lists,
                                     self._oi, self._oc, res[i:])
                if not self.adaptive:
                    pass
                elif stop - i < _MIN_RUN and code == _STOP_SLOW:
                    # short runs cost more than the per-message path: rest, longer each time
                    self._rest = min(2 * self._rest, _MAX_REST)
                    self._cool = self._rest
                elif stop - i >= _MIN_RUN:
                    self._rest = _REST // 2
            if stop > i:
                self._emit(i, stop, k, res[i:], lines, events)
                self.consumed = stop
                if on_fast is not None:
                    self.run_kinds = res[i:stop, _R_KIND]
                    on_fast(i, res[i:stop, 0])
            i = stop
            if i >= n:
                break
            if code == _STOP_LV:
                self._lv = np.zeros((2 * self._lv.shape[0], 4), np.int64)
                continue
            if code == _STOP_PQ:
                self._grow_pq(2 * self._pq.shape[1])
                continue
            if code == _STOP_ROWS and k > 0:
                continue   # the output was flushed by _emit: retry the message with an empty output
            if code == _STOP_ROWS:
                self._oi = np.zeros((2 * self._oi.shape[0], 3), np.int64)
                self._oc = np.zeros((2 * self._oc.shape[0], 5), np.float64)
                continue
            self._fallback(msgs, lines, recv_ns, i, i + 1, actions, events, stale, fallback)
            i += 1

    def _fallback(self, msgs: Sequence[Any], lines: Sequence[int], recv_ns: int, i: int, j: int,
                  actions: list[Resync], events: list[SymbolEvents], stale: set[int],
                  fallback: Callable[[int], Sequence[Resync]] | None) -> None:
        """Messages ``i..j`` through :meth:`BinanceBooks.feed` (or ``fallback``); the slots of
        the books they touched go to ``stale`` (refreshed before the next kernel call), new books
        get a slot."""
        core = self.core
        feed, take, dirty, slot_of = core.feed, core.take_events, core._dirty, self._slot_of
        for t in range(i, j):
            stop = False
            try:
                actions.extend(feed(msgs[t], lines[t], recv_ns) if fallback is None else fallback(t))
            except StopChunk:
                stop = True
            self.consumed = t + 1
            for sym in dirty:
                s = slot_of.get(sym)
                if s is None:
                    self._add(sym, core.books[sym])
                    self._touched.add(slot_of[sym])
                else:
                    stale.add(s)
                    self._touched.add(s)
            events.extend(take())
            if stop:
                raise StopChunk

    def _emit(self, i0: int, i1: int, k: int, res: np.ndarray, lines: Sequence[int],
              events: list[SymbolEvents | ChunkEvents]) -> None:
        """Counters, top-of-book history, bookTicker checks and events of the kernel's messages
        ``i0..i1`` (rows ``0..k`` of the chunk output), as the Python path does them: a depth
        update's counters and history, a bookTicker through :meth:`BinanceBook._on_ticker
        <ddms.io.venues.binance_book.BinanceBook._on_ticker>` (pending, checked or only counted:
        the book's state at that message decides), an ignored stream counted by name, unknown
        fields counted by the decoder.  The rows go out as one :class:`SymbolEvents` per
        message, or with ``others`` as one :class:`~ddms.io.levels.ChunkEvents` for the run
        (each row's slot, message line and receive time as columns), as the other venues'
        lanes hand them out.

        With ``others``, a book whose messages of the run can make no report and queue no
        ticker (no ticker left to Python, no mismatch, never crossed, nothing waiting in its
        ``_pending``) takes them in bulk (:meth:`_bulk`: its counters, last update, top and
        history once per run); only the other books' messages are walked one by one, in
        message order (their reports interleave in that order).  Why: with 1,000 symbols the
        per-message walk was ~4 us a message, the bulk ~2-3 us a book per run.  Cost:
        O(messages) in NumPy plus O(books touched + messages of the walked books) in Python."""
        core = self.core
        m = i1 - i0
        r = res[:m]
        ends = r[:, 1]
        rel = self._oi[:k, 0].astype(np.int8)
        sign = self._oi[:k, 1].astype(np.int8)
        cols = self._oc[:k].copy()
        lines_in = np.asarray(lines[i0:i1], np.int64)
        per = ends.copy()     # rows per message (np.diff with prepend costs ~10x more on a short run)
        per[1:] -= ends[:-1]
        line_col = np.repeat(lines_in, per)
        recv_col = None if self._recv is None else np.repeat(self._recv[i0:i1], per)
        books, syms = self._books, self._sym
        start = 0
        venue = core.venue
        kinds = r[:, _R_KIND]
        chunked = self.others
        plain = not self.others or not kinds.any()
        slot = r[:, 0]
        dep = kinds == _DEPTH_MSG
        # rows with more to do than a plain depth update's: other kinds, unknown names, pending checks
        special = np.flatnonzero(kinds | r[:, _R_UNK] | np.where(dep, r[:, _R_NOK] | r[:, _R_BAD], 0))
        if self.others:
            um = r[:, _R_UNK]
            if um.any():
                masks, times = np.unique(um[um != 0], return_counts=True)
                for mask, c in zip(masks.tolist(), times.tolist(), strict=True):   # names counted before: order-free
                    self._count_unknown(mask, c)
            ign = np.flatnonzero(kinds == _IGNORED_MSG)
            hook = self.on_ignored
            for j, (a, b) in zip(ign.tolist(), r[ign, _R_X:_R_X + 2].tolist(), strict=True):   # in message order
                if hook is None or hook(i0 + j):
                    self._count_ignored(a, b)
        else:
            for mask in r[special, _R_UNK].tolist():
                if mask:
                    self._count_unknown(mask)
        bulk = None
        if chunked and m:
            if m >= _BULK_MIN:
                nb = len(books)
                crossed = dep & (r[:, 3] >= 0) & (r[:, 5] >= 0) & (r[:, 3] >= r[:, 5])
                walk = np.zeros(nb + 1, bool)      # books walked message by message (index -1: none)
                walk[slot[crossed | (dep & (r[:, _R_BAD] != 0))]] = True     # they make reports
                walk[-1] = False
                bulk = ~walk[slot] & (slot >= 0)
            else:     # a short run (a few symbols' interleaved streams): the bulk's NumPy would cost more
                bulk = np.zeros(m, bool)
            rows = np.flatnonzero(~bulk & (slot >= 0))
        else:
            rows = np.arange(m)
        if bulk is not None:
            special = special[~bulk[special] & (slot[special] >= 0)]    # the walked rows' only
        extra = dict(zip(special.tolist(), r[special, _R_UNK:].tolist(), strict=True)) if len(special) else None
        sub = r[rows]
        for j, (s, end, u, bp, bq, ap, aq, nlev, first, kind), line in zip(
                rows.tolist(), sub[:, :_R_UNK].tolist(), lines_in[rows].tolist(), strict=True):
            x = None
            if extra is not None and j in extra:
                x = extra[j]
                if kind == _IGNORED_MSG:
                    continue
                if kind == _TRADE_MSG:     # BinanceBook.feed_message of a Trade record
                    bk = books[s]
                    bk.messages += 1
                    bk.trades += 1
                    continue
                if kind == _TICKER_OK or kind == _TICKER_COUNTED:   # BinanceBook._on_ticker's counters
                    bk = books[s]
                    bk.messages += 1
                    bk.booktickers += 1
                    if kind == _TICKER_OK:     # checked equal in the kernel
                        bk.bookticker_checked += 1
                    bk._checked_rows = 0
                    bk._taken = bk.updates
                    continue
            bk = books[s]
            if first:
                bk._state = _SYNCED
            bk.messages += 1
            bk.updates += 1
            bk.level_updates += nlev
            bk.last_u = u
            top = bk._top = (bp, bq, ap, aq)
            if bp >= 0 and ap >= 0 and bp >= ap:
                core._line = line
                bk._after_update(bk.messages, u, False)     # its crossed report (the kernel did the rest)
                if bk.reports:
                    core._copy_reports(bk)
            else:
                bk._crossed_now = False
            hist = bk._hist       # BinanceBook._after_update's history step
            if u not in hist:
                order = bk._hist_order
                order.append(u)
                if len(order) > bk.history:
                    del hist[order.popleft()]
            hist[u] = top
            if x is not None:     # the pending tickers it popped: checked equal, or unequal (in order)
                if x[1]:
                    bk.bookticker_checked += x[1]
                if x[2]:
                    core._line = line
                    for t in range(x[2]):
                        bk._check_ticker(self._popped(s, x[3 + 2 * t]), top, x[4 + 2 * t])
                    core._copy_reports(bk)
            if end > start and not chunked:
                events.append(SymbolEvents(venue, syms[s], EventBatch(
                    rel[start:end], sign[start:end], cols[start:end], line_col[start:end], line, line,
                    recv=None if recv_col is None else recv_col[start:end])))
            start = end
        if chunked and k:
            events.append(ChunkEvents(venue, syms, np.repeat(slot.astype(np.int32), per), EventBatch(
                rel, sign, cols, line_col, int(line_col[0]), int(line_col[-1]), recv=recv_col)))
        if m:
            core._line = int(lines_in[-1])
        walked = None
        if bulk is not None:
            walked = rows
            if bulk.any():
                self._bulk(r, bulk)
        if walked is not None:
            sel = r[walked[kinds[walked] == _DEPTH_MSG], 0]
        else:
            sel = r[:, 0] if plain else r[kinds == _DEPTH_MSG, 0]
        counts = np.bincount(sel, minlength=len(books))
        hit = np.flatnonzero(counts).tolist()
        self._touched.update(hit)
        if not plain:
            fed = r[(kinds != _DEPTH_MSG) & (kinds != _IGNORED_MSG), 0]     # tickers, trades of a book
            self._touched.update(fed[fed >= 0].tolist())     # (a set: no np.unique sort)
        for s in hit:
            bk = books[s]
            c = int(counts[s])
            bk.depth_events += c
            bk.applied += c
            bk._taken = bk.updates
            bk._blocks_hint = int(self._st[s, 4])
        self._write_back()
        self.fast_messages += i1 - i0

    def _bulk(self, r: np.ndarray, bulk: np.ndarray) -> None:
        """:meth:`_emit`'s rows ``r[bulk]``: every message of their books in this run, none of
        which can make a report (depth updates, trades, tickers the kernel queued or checked
        equal).  Per book, once: the counters, the last update's u and top, the top-of-book
        history (:meth:`BinanceBook._after_update`'s, entry per update in order; the pending
        tickers are :meth:`_write_back`'s).  O(rows) in NumPy plus
        O(books) in Python (O(rows) for a book whose history already holds one of the u)."""
        idx = np.flatnonzero(bulk)
        self.bulk_messages += len(idx)
        sl = r[idx, 0]
        order = np.argsort(sl, kind="stable")
        idx, sl = idx[order], sl[order]
        kinds = r[idx, _R_KIND]
        dep = kinds == _DEPTH_MSG
        n = len(idx)
        bounds = np.flatnonzero(np.diff(sl)) + 1
        starts = np.concatenate(([0], bounds))
        stops = np.concatenate((bounds, [n]))
        nmsg = stops - starts
        cdep = np.add.reduceat(dep.astype(np.int64), starts)
        clev = np.add.reduceat(np.where(dep, r[idx, 7], 0), starts)
        trade = kinds == _TRADE_MSG
        ctk = np.add.reduceat((~dep & ~trade).astype(np.int64), starts)
        ctr = np.add.reduceat(trade.astype(np.int64), starts)
        chk = (kinds == _TICKER_OK).astype(np.int64) + np.where(dep, r[idx, _R_NOK], 0)
        cchk = np.add.reduceat(chk, starts)
        cfirst = np.add.reduceat(np.where(dep, r[idx, 8], 0), starts)
        # the depth rows (grouped by book, in message order): their u and tops for the history
        didx = idx[dep]
        du = r[didx, 2]
        dcount = np.concatenate(([0], np.cumsum(cdep))).tolist()
        dsl = sl[dep]
        # a book whose u do not strictly increase in the run (futures' pu rule allows it): its
        # history entries one by one
        back = set(dsl[1:][(du[1:] <= du[:-1]) & (dsl[1:] == dsl[:-1])].tolist())
        us = du.tolist()
        tops = list(zip(*r[didx, 3:7].T.tolist(), strict=True))     # no list per row (GC)
        st = self._st
        books = self._books
        first = sl[starts]
        hints = st[first, 4].tolist()
        self._touched.update(first.tolist())
        for b, (s, nm, nd, nl, nt, ntr, nc, nf, hint) in enumerate(zip(
                first.tolist(), nmsg.tolist(), cdep.tolist(), clev.tolist(), ctk.tolist(), ctr.tolist(), cchk.tolist(),
                cfirst.tolist(), hints, strict=True)):
            bk = books[s]
            before = bk.messages
            bk.messages = before + nm
            if ntr:
                bk.trades += ntr
            if nt:
                bk.booktickers += nt
                bk._checked_rows = 0
            if nc:
                bk.bookticker_checked += nc
            if nd:
                if nf:
                    bk._state = _SYNCED
                bk.updates += nd
                bk.level_updates += nl
                bk.depth_events += nd
                bk.applied += nd
                a, z = dcount[b], dcount[b + 1]
                bu, bt = us[a:z], tops[a:z]
                bk.last_u = bu[-1]
                bk._top = bt[-1]
                bk._crossed_now = False
                hist, horder = bk._hist, bk._hist_order
                if s not in back and hist.keys().isdisjoint(bu):
                    horder.extend(bu)
                    hist.update(zip(bu, bt, strict=True))
                    if len(horder) > bk.history:
                        for _ in range(len(horder) - bk.history):
                            del hist[horder.popleft()]
                else:     # a u seen before: BinanceBook._after_update's steps one by one
                    for u, top in zip(bu, bt, strict=True):
                        if u not in hist:
                            horder.append(u)
                            if len(horder) > bk.history:
                                del hist[horder.popleft()]
                        hist[u] = top
                bk._blocks_hint = hint
            bk._taken = bk.updates

    def _count_unknown(self, mask: int, times: int = 1) -> None:
        """The decoder's count of each unknown field ``times`` kernel messages carried (names it
        had counted before: no report, no new key).  O(names)."""
        uf = self.core._decoder.unknown_fields
        names = self._known_names
        b = 0
        while mask:
            if mask & 1:
                uf[names[b]] += times
            mask >>= 1
            b += 1

    def _count_ignored(self, a: int, b: int) -> None:
        """:meth:`BinanceBooks.feed`'s count of a message of a stream that is not a book stream:
        ``ignored[<stream after its first @, lower case>]``."""
        assert self._buf is not None
        raw = self._buf[a:b].tobytes()
        name = self._names.get(raw)
        if name is None:
            name = self._names[raw] = raw.decode("ascii").lower()
        ign = self.core.ignored
        ign[name] = ign.get(name, 0) + 1

    def _ticker_of(self, sym: str, u: int, x: list[int]) -> BookTicker:
        """The :class:`BookTicker` of a kernel ticker row (``x``: its spans of b, B, a, A and the
        stream, E, T)."""
        assert self._buf is not None
        buf = self._buf
        texts = [buf[x[t]:x[t + 1]].tobytes().decode("ascii") for t in range(0, 10, 2) if x[t] >= 0]
        stream = texts.pop() if x[8] >= 0 else None
        return BookTicker(stream, sym, u, texts[0], texts[1], texts[2], texts[3],
                          x[10] if x[10] >= 0 else None, x[11] if x[11] >= 0 else None)

    def _popped(self, s: int, src: int) -> BookTicker:
        """The pending ticker a depth row of slot ``s`` popped (see :data:`_R_SRC`): the chunk
        message ``src``, or the ``-1 - src``-th of the book's ``_pending`` (as at the run's start:
        :meth:`_write_back` pops it after the walk)."""
        if src >= 0:
            assert self._res is not None
            return self._ticker_of(self._sym[s], int(self._res[src, 2]), self._res[src, _R_X:].tolist())
        return self._books[s]._pending[-1 - src][0]

    def _write_back(self) -> None:
        """Each book whose ring the run changed gets its ``_pending`` back in step: the tickers
        the kernel popped off (those that were in ``_pending``) leave it, the ones it queued and
        still holds join it (as :meth:`BinanceBook._on_ticker` queues them: the ticker and its
        message number).  Why here: the Python path (a fallback, the next chunk's consumer)
        sees the book as the truth.  O(slots) in NumPy plus O(tickers still waiting that the
        run queued): a ticker popped in the run it came in is never built."""
        st = self._st[:len(self._books)]
        changed = np.flatnonzero(st[:, _C_POP] | st[:, _C_NEW]).tolist()
        if not changed:
            return
        assert self._res is not None
        res, pq = self._res, self._pq
        for s in changed:
            pend = self._books[s]._pending
            for _ in range(int(st[s, _C_POP])):
                pend.popleft()
            head, n, new = int(st[s, _C_PH]), int(st[s, _C_PN]), int(st[s, _C_NEW])
            for t in range(n - new, n):
                j = (head + t) % pq.shape[1]
                u, num, ref = pq[s, j, :3].tolist()
                pend.append((self._ticker_of(self._sym[s], u, res[ref, _R_X:].tolist()), num))
                pq[s, j, 2] = -1
            st[s, _C_POP] = st[s, _C_NEW] = 0


_ARRAYS = ("_bk", "_bq", "_bt", "_bn", "_order", "_bmax", "_free", "_meta")
