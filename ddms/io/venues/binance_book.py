"""Binance diff-depth book builder (sans-I/O): websocket messages in, bids/asks events out.

Why sans-I/O: the same core serves the live transport, the replay server (which rebuilds the book
at its replay position to answer snapshot requests) and the tests.  Nothing here reads a socket,
a file or a clock: :meth:`BinanceBook.feed_message` takes one message (raw bytes/str, a parsed
dict or a decoded record) and returns the *actions* the caller must perform
(:class:`NeedSnapshot`: fetch a REST depth snapshot and hand it to
:meth:`BinanceBook.apply_snapshot`); engine events queue up until :meth:`BinanceBook.take_events`.

Book building follows Binance's documented procedure, with the spot and USD-M futures rules of
``../shared/data/binance/README.md``:

=====================  ==============================  =====================================
rule                   futures                         spot
=====================  ==============================  =====================================
drop buffered event    ``u < lastUpdateId``            ``u <= lastUpdateId``
first applied event    ``U <= lastUpdateId <= u``      ``U <= lastUpdateId + 1 <= u``
continuity             ``pu == previous u``            ``U == previous u + 1``
=====================  ==============================  =====================================

Diff events are buffered until a snapshot is applied.  Any break of continuity (a *gap*) discards
the book and asks for a fresh snapshot (a *resync*): the builder never guesses.  An event that
lies entirely at or before the last applied update (``u <= previous u``: a duplicate or a late,
reordered message) is *stale*: its changes are already in the book, so it is counted, reported
and dropped without a resync.

Prices and quantities stay exact: the decoder turns each decimal string into an integer mantissa
(all values of one message scaled to the message's largest number of decimals, mantissas below
2**53), and the book keeps ``price_id -> qty_units``, where ``price_id = price * 10**px_decimals``
and ``qty_units = qty * 10**qty_decimals`` at the book's scale (fixed by the first snapshot or
message with levels, or by the constructor).  bookTicker checks compare these integers, so
"61800.20" equals "61800.2" and nothing is rounded.

Why the book is not a ``SortedDict``: applying levels one Python ``SortedDict`` operation at a time
was the largest cost of replaying the futures capture (1.9 of 4.3 profiled seconds; the whole
replay ran at 0.2M level updates/s on the development machine), about ten times the numba
kernel that replaced it.  Each side is instead a blocked sorted array in
numpy (blocks of at most 64 levels, best level last) updated by one numba call per depth event;
:meth:`BinanceBook.levels` returns a side as a ``SortedDict`` copy for display and tests.

Engine events (relations ``bids`` = 0 and ``asks`` = 1, schema ``(t, id, broker_id, volume,
price)``, one row per price level): ``id = price_id`` (a stable integer, exact in float64),
``broker_id = 0``, ``volume = qty_units / 10**qty_decimals``, ``price = price_id /
10**px_decimals`` (both correctly rounded, i.e. ``float`` of the decimal string), and ``t`` the
event time ``E`` (ms) of the message that set the level's current quantity (a snapshot's ``E``,
or its receive time in ms when it has none).  A level change is a delete of the old row (if any)
plus an insert of the new one (if qty > 0), in the message's level order.  A snapshot applied
after a resync replaces the whole book: deletes of every row the engine holds, then inserts of
the snapshot's rows.  ``EventBatch.line`` numbers *applied updates*
(snapshots and depth events, counter :attr:`BinanceBook.updates`), so each update is one atomic
line for the engine.

Cost: the decoder is one numba scan over the message bytes (no Python object per level; messages
off its fast path, e.g. with string escapes, take ``json.loads`` and get the same record).
Applying a depth event is one numba call: per level two binary searches and, when the level
appears or disappears, moving at most 64 levels; its rows go straight into preallocated output
arrays, copied out once per :meth:`~BinanceBook.take_events`.  What remains is a fixed Python
cost per message (decode dispatch, record, sequencing: ~5-10 us on the development machine), so
depth events (68 levels on average in the futures capture) run at about 1.3M level updates/s,
while a stream dominated by small bookTicker/trade messages is bound by messages/s.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

import numpy as np
from numba import njit
from sortedcontainers import SortedDict

from ddms.errors import InputError
from ddms.io.actions import NeedSnapshot
from ddms.io.events import EventBatch
from ddms.io.kernels.jsonscan import key as _key
from ddms.io.kernels.jsonscan import leaf, name_index
from ddms.io.kernels.jsonscan import skip_scalar as _skip_scalar
from ddms.io.kernels.jsonscan import str_end as _str_end
from ddms.io.kernels.jsonscan import ws as _ws
from ddms.io.kernels.levelarrays import BLOCK as _BLOCK
from ddms.io.kernels.levelarrays import apply_depth as _apply_depth
from ddms.io.kernels.levelarrays import fill_side as _fill_side
from ddms.io.kernels.levelarrays import queue_rows as _queue
from ddms.io.kernels.levelarrays import sorted_side as _sorted_side
from ddms.io.schema import ASKS, BIDS

__all__ = [
    "MAX_STREAMS",
    "ASKS", "BIDS", "FUTURES", "SPOT", "BinanceBook", "BookTicker", "Decoder", "DepthSnapshot", "DepthUpdate",
    "NeedSnapshot", "Record", "Response", "Trade", "decode_message", "format_units", "parse_units",
]

SPOT = "spot"
FUTURES = "futures"
MAX_STREAMS = 1024
"""Streams one Binance websocket connection may listen to (spot and futures docs)."""
MAX_MANTISSA = 2**53
"""Mantissas (and scaled ids/quantities) stay below this, so float64 carries them exactly."""

# ------------------------------------------------------------------------------------------
# records
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DepthUpdate:
    """A diff-depth event.  ``bids``/``asks`` are ``(n, 2)`` int64 arrays of ``(price mantissa,
    qty mantissa)`` in message order, every price scaled to ``px_dec`` decimals and every
    quantity to ``qty_dec`` (the largest counts in the message); ``monotone`` says each side's
    prices are strictly monotone (so no price repeats within a side).  ``prev_final_id`` (``pu``)
    and ``transact_ms`` (``T``) are futures-only (None on spot)."""

    stream: str | None
    symbol: str
    event_ms: int
    transact_ms: int | None
    first_id: int
    final_id: int
    prev_final_id: int | None
    bids: np.ndarray
    asks: np.ndarray
    px_dec: int
    qty_dec: int
    monotone: bool


@dataclass(frozen=True, slots=True)
class DepthSnapshot:
    """The REST depth snapshot ``{"lastUpdateId": N, "bids": [...], "asks": [...]}`` (futures add
    ``E``, ``T``); levels as in :class:`DepthUpdate`."""

    last_update_id: int
    bids: np.ndarray
    asks: np.ndarray
    px_dec: int
    qty_dec: int
    event_ms: int | None = None
    transact_ms: int | None = None


@dataclass(frozen=True, slots=True)
class BookTicker:
    """The exchange's own best bid/ask after update ``update_id``; prices and quantities are the
    decimal strings as sent (spot omits ``e``, ``E``, ``T``)."""

    stream: str | None
    symbol: str
    update_id: int
    bid_px: str
    bid_qty: str
    ask_px: str
    ask_qty: str
    event_ms: int | None = None
    transact_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Trade:
    """A trade; not used to build the book (counted only)."""

    stream: str | None
    symbol: str
    event_ms: int
    trade_ms: int
    trade_id: int
    price: str
    qty: str
    buyer_is_maker: bool


@dataclass(frozen=True, slots=True)
class Response:
    """A reply to a subscribe/unsubscribe request ``{"result": ..., "id": ...}``."""

    id: Any
    result: Any


Record = DepthUpdate | DepthSnapshot | BookTicker | Trade | Response
_RECORD_TYPES = (DepthUpdate, DepthSnapshot, BookTicker, Trade, Response)


# ------------------------------------------------------------------------------------------
# exact decimals
# ------------------------------------------------------------------------------------------

_DEC = re.compile(r"([0-9]+)(?:\.([0-9]+))?\Z")
_P10 = np.array([10**i for i in range(19)], np.int64)


def parse_units(text: str, decimals: int) -> int | None:
    """``text`` (a plain decimal ``digits[.digits]``) times ``10**decimals`` as an exact int, or
    None when it has non-zero digits beyond ``decimals`` (it cannot be a value at that scale).
    Raises ValueError for anything that is not a plain decimal.  O(len(text))."""
    m = _DEC.match(text)
    if m is None:
        raise ValueError(f"not a plain decimal: {text!r}")
    frac = m.group(2) or ""
    if len(frac) > decimals:
        extra = frac[decimals:]
        if extra.strip("0"):
            return None
        frac = frac[:decimals]
    return int(m.group(1) + frac.ljust(decimals, "0"))


def format_units(units: int, decimals: int) -> str:
    """Inverse of :func:`parse_units`: ``6180020, 2 -> "61800.20"``."""
    if decimals <= 0:
        return str(units)
    s = str(units).rjust(decimals + 1, "0")
    return f"{s[:-decimals]}.{s[-decimals:]}"


# ------------------------------------------------------------------------------------------
# decoder: numba fast path
# ------------------------------------------------------------------------------------------

_KEYS = ("e", "E", "T", "s", "U", "u", "pu", "b", "a", "B", "A", "t", "p", "q", "m", "M", "X",
         "lastUpdateId", "bids", "asks", "stream")
(_K_e, _K_E, _K_T, _K_s, _K_U, _K_u, _K_pu, _K_b, _K_a, _K_B, _K_A, _K_t, _K_p, _K_q, _K_m, _K_M, _K_X,
 _K_last, _K_bids, _K_asks, _K_stream) = range(len(_KEYS))
_NK = len(_KEYS)
_KEYTAB = np.zeros((_NK, 16), np.uint8)
_KEYLEN = np.zeros(_NK, np.int64)
for _i, _k in enumerate(_KEYS):
    _KEYTAB[_i, : len(_k)] = np.frombuffer(_k.encode(), np.uint8)
    _KEYLEN[_i] = len(_k)

_V_STR, _V_INT, _V_BOOL, _V_LEVELS = 1, 2, 3, 4
_SLOW, _GROW = -1, -2


@leaf
def _dec(buf, i, n):  # pragma: no cover - compiled
    """Plain decimal ``digits[.digits]`` string content at ``i`` (after the opening quote).
    Returns ``(mantissa, decimals, j)`` with ``j`` after the closing quote, or ``j = -1``
    (not a plain decimal, more than 18 digits, or a mantissa >= 2**53)."""
    m = np.int64(0)
    nd = 0
    while i < n and buf[i] >= 48 and buf[i] <= 57:
        if nd < 18:
            m = m * 10 + (np.int64(buf[i]) - 48)
        nd += 1
        i += 1
    if nd == 0:
        return m, 0, -1
    d = 0
    if i < n and buf[i] == 46:
        i += 1
        while i < n and buf[i] >= 48 and buf[i] <= 57:
            if nd < 18:
                m = m * 10 + (np.int64(buf[i]) - 48)
            nd += 1
            d += 1
            i += 1
        if d == 0:
            return m, 0, -1
    if nd > 18 or i >= n or buf[i] != 34 or m >= 9007199254740992:
        return m, 0, -1
    return m, d, i + 1


@leaf
def _slot(buf, s, e):  # pragma: no cover - compiled
    return name_index(buf, s, e, _KEYTAB, _KEYLEN)


@leaf
def _value(buf, i, n, slot, slots, lv, nlev):  # pragma: no cover - compiled
    """Parse the value at ``i`` into ``slots[slot]`` = (kind, a, b, flag): a string (span a:b,
    flag 1 when it is a plain decimal), an unsigned int (a), a bool (a), or an array of
    ``[price, qty]`` string pairs (rows a..a+b of ``lv``, flag 1 when prices are strictly
    monotone).  Returns ``(j, nlev)``; ``j`` is ``_SLOW`` or ``_GROW`` on failure."""
    if i >= n or slots[slot, 0] != 0:          # end of input or a duplicate key
        return _SLOW, nlev
    c = buf[i]
    if c == 34:
        e = _str_end(buf, i + 1, n)
        if e < 0:
            return _SLOW, nlev
        _, _, j = _dec(buf, i + 1, n)
        slots[slot, 0] = _V_STR
        slots[slot, 1] = i + 1
        slots[slot, 2] = e
        slots[slot, 3] = 1 if j == e + 1 else 0
        return e + 1, nlev
    if c >= 48 and c <= 57:
        v = np.int64(0)
        nd = 0
        j = i
        while j < n and buf[j] >= 48 and buf[j] <= 57:
            v = v * 10 + (np.int64(buf[j]) - 48)
            nd += 1
            j += 1
            if nd > 18:
                return _SLOW, nlev
        if (c == 48 and nd > 1) or (j < n and (buf[j] == 46 or buf[j] == 101 or buf[j] == 69)):
            return _SLOW, nlev
        slots[slot, 0] = _V_INT
        slots[slot, 1] = v
        return j, nlev
    if c == 116:
        if i + 4 <= n and buf[i + 1] == 114 and buf[i + 2] == 117 and buf[i + 3] == 101:
            slots[slot, 0] = _V_BOOL
            slots[slot, 1] = 1
            return i + 4, nlev
        return _SLOW, nlev
    if c == 102:
        if i + 5 <= n and buf[i + 1] == 97 and buf[i + 2] == 108 and buf[i + 3] == 115 and buf[i + 4] == 101:
            slots[slot, 0] = _V_BOOL
            slots[slot, 1] = 0
            return i + 5, nlev
        return _SLOW, nlev
    if c != 91:
        return _SLOW, nlev
    start = nlev
    i = _ws(buf, i + 1, n)
    if i < n and buf[i] == 93:
        i += 1
    else:
        while True:
            if i >= n or buf[i] != 91:
                return _SLOW, nlev
            pm, pd, i = _qdec(buf, i + 1, n)
            if i < 0 or i >= n or buf[i] != 44:
                return _SLOW, nlev
            qm, qd, i = _qdec(buf, i + 1, n)
            if i < 0 or i >= n or buf[i] != 93:
                return _SLOW, nlev
            i = _ws(buf, i + 1, n)
            if nlev >= lv.shape[0]:
                return _GROW, nlev
            lv[nlev, 0] = pm
            lv[nlev, 1] = qm
            lv[nlev, 2] = pd
            lv[nlev, 3] = qd
            nlev += 1
            if i < n and buf[i] == 44:
                i = _ws(buf, i + 1, n)
                continue
            if i < n and buf[i] == 93:
                i += 1
                break
            return _SLOW, nlev
    slots[slot, 0] = _V_LEVELS
    slots[slot, 1] = start
    slots[slot, 2] = nlev - start
    return i, nlev


@njit(cache=True, nogil=True, inline="always")
def _qdec(buf, i, n):  # pragma: no cover - compiled
    """ws ``"decimal"`` ws at ``i``: ``(mantissa, decimals, j)`` with ``j`` after the trailing
    whitespace, ``j = -1`` if it is not a quoted plain decimal."""
    i = _ws(buf, i, n)
    if i >= n or buf[i] != 34:
        return 0, 0, -1
    m, d, i = _dec(buf, i + 1, n)
    if i < 0:
        return 0, 0, -1
    return m, d, _ws(buf, i, n)


_MAX_UNKNOWN = 4   # unknown members the fast path skips per message (more: the slow path)


@leaf
def _unknown_member(buf, ks, ke, i, n, unk):  # pragma: no cover - compiled
    """Skip the value of an unknown member (key span ``ks:ke``) and note the key in ``unk``
    (row 0: count; rows 1..: spans).  Returns the index after the value or ``_SLOW``."""
    k = unk[0, 0]
    if k >= _MAX_UNKNOWN:
        return _SLOW
    j = _skip_scalar(buf, i, n)
    if j < 0:
        return _SLOW
    unk[k + 1, 0] = ks
    unk[k + 1, 1] = ke
    unk[0, 0] = k + 1
    return j


@leaf
def _inner(buf, i, n, slots, lv, nlev, unk):  # pragma: no cover - compiled
    """The object at ``i`` (the ``data`` of an envelope): its members go to ``slots`` (unknown
    scalar members are skipped and noted in ``unk``)."""
    if i >= n or buf[i] != 123:
        return _SLOW, nlev
    i = _ws(buf, i + 1, n)
    if i < n and buf[i] == 125:
        return i + 1, nlev
    while True:
        ks, ke, i = _key(buf, i, n)
        if i < 0:
            return _SLOW, nlev
        slot = _slot(buf, ks, ke)
        if slot == _K_stream:
            return _SLOW, nlev
        if slot < 0:
            i = _unknown_member(buf, ks, ke, i, n, unk)
        else:
            i, nlev = _value(buf, i, n, slot, slots, lv, nlev)
        if i < 0:
            return i, nlev
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 125:
            return i + 1, nlev
        return _SLOW, nlev


@njit(cache=True, nogil=True)
def _scan(buf, slots, lv, unk):  # pragma: no cover - compiled
    """Scan one message.  Returns ``(status, envelope, px_dec, qty_dec, masks...)`` with bit
    masks of the slots holding a string, an int, a bool, a level array, a decimal string;
    status 0 = ok, ``_SLOW`` = not on the fast path (the caller uses json), ``_GROW`` = ``lv``
    too small.  On success every level's mantissas are rescaled in place to the message's
    largest price / qty decimals (``px_dec``, ``qty_dec``)."""
    n = buf.shape[0]
    for k in range(slots.shape[0]):
        slots[k, 0] = 0
    unk[0, 0] = 0
    nlev = 0
    env = 0
    top = 0      # top-level members other than "stream"/"data" (an envelope allows none)
    i = _ws(buf, 0, n)
    if i >= n or buf[i] != 123:
        return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
    i = _ws(buf, i + 1, n)
    if i < n and buf[i] == 125:
        return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
    while True:
        ks, ke, i = _key(buf, i, n)
        if i < 0:
            return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
        if ke - ks == 4 and buf[ks] == 100 and buf[ks + 1] == 97 and buf[ks + 2] == 116 and buf[ks + 3] == 97:
            if env != 0:
                return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
            env = 1
            i, nlev = _inner(buf, i, n, slots, lv, nlev, unk)
        else:
            slot = _slot(buf, ks, ke)
            if slot < 0:
                i = _unknown_member(buf, ks, ke, i, n, unk)
            else:
                if slot != _K_stream:
                    top += 1
                i, nlev = _value(buf, i, n, slot, slots, lv, nlev)
        if i < 0:
            return i, 0, 0, 0, 0, 0, 0, 0, 0
        i = _ws(buf, i, n)
        if i < n and buf[i] == 44:
            i = _ws(buf, i + 1, n)
            continue
        if i < n and buf[i] == 125:
            i += 1
            break
        return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
    if _ws(buf, i, n) != n or (env and top):
        return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
    # one scale per message: rescale mantissas to the largest decimals seen
    pdm = 0
    qdm = 0
    for k in range(nlev):
        pdm = max(pdm, lv[k, 2])
        qdm = max(qdm, lv[k, 3])
    for k in range(nlev):
        for c in range(2):
            sh = (pdm if c == 0 else qdm) - lv[k, 2 + c]
            if sh > 0:
                if sh > 18 or lv[k, c] > (9007199254740991 // _P10[sh]):
                    return _SLOW, 0, 0, 0, 0, 0, 0, 0, 0
                lv[k, c] *= _P10[sh]
    sm = 0   # present slots by kind: strings, ints, bools, level arrays; decimal strings
    im = 0
    bm = 0
    lm = 0
    dm = 0
    for k in range(slots.shape[0]):
        kind = slots[k, 0]
        if kind == _V_STR:
            sm |= 1 << k
            if slots[k, 3]:
                dm |= 1 << k
        elif kind == _V_INT:
            im |= 1 << k
        elif kind == _V_BOOL:
            bm |= 1 << k
        elif kind == _V_LEVELS:
            lm |= 1 << k
            a = slots[k, 1]
            b = a + slots[k, 2]
            up = True
            down = True
            for r in range(a + 1, b):
                if lv[r, 0] <= lv[r - 1, 0]:
                    up = False
                if lv[r, 0] >= lv[r - 1, 0]:
                    down = False
            slots[k, 3] = 1 if (up or down) else 0
    return 0, env, pdm, qdm, sm, im, bm, lm, dm


# message shapes: (required keys, optional keys) per kind of value
def _mask(*names: str) -> int:
    return sum(1 << _KEYS.index(k) for k in names)


_SHAPES = {
    # kind: (str required, str optional, int required, int optional, bool req, bool opt, levels)
    "depthUpdate": (_mask("e", "s"), 0, _mask("E", "U", "u"), _mask("T", "pu"), 0, 0, _mask("b", "a")),
    "bookTicker": (_mask("s", "b", "B", "a", "A"), _mask("e"), _mask("u"), _mask("E", "T"), 0, 0, 0),
    "trade": (_mask("e", "s", "p", "q"), _mask("X"), _mask("E", "T", "t"), _mask("b", "a"), _mask("m"),
              _mask("M"), 0),
    "snapshot": (0, 0, _mask("lastUpdateId"), _mask("E", "T"), 0, 0, _mask("bids", "asks")),
}
_DECIMAL_STRS = {"bookTicker": _mask("b", "B", "a", "A"), "trade": _mask("p", "q")}
_B_STREAM, _B_e, _B_last, _B_B, _B_T, _B_pu, _B_E = (
    _mask(k) for k in ("stream", "e", "lastUpdateId", "B", "T", "pu", "E"))


class Decoder:
    """Turns one Binance message (bytes/str/dict) into a record; raises :class:`InputError` with
    the reason.  Holds scratch arrays, so it is not thread-safe: one per thread or builder.

    Fast path: one numba scan (:func:`_scan`) accepts exactly the well-formed messages of the
    known shapes (no string escapes, plain unsigned ints, decimal strings below 2**53; up to
    four unknown members with scalar values, skipped and counted, as COIN-M's ``ps``) and reads
    them without creating Python objects per level.  Everything else goes through ``json.loads``
    and :meth:`from_obj`, which either produces the identical record or names what is wrong."""

    def __init__(self) -> None:
        self._slots = np.zeros((_NK, 4), np.int64)
        self._lv = np.zeros((256, 4), np.int64)
        self._unk = np.zeros((_MAX_UNKNOWN + 1, 2), np.int64)   # unknown members the fast scan skipped
        self.unknown_fields: dict[str, int] = {}
        """Fields outside the known shapes, ignored: field name -> messages that carried it.  A
        venue adds fields without notice (COIN-M futures send ``ps``), so an unknown field is
        counted, never fatal."""
        self.new_unknown: list[str] = []
        """Names counted for the first time since the owner last cleared this list (a builder
        reports each name once)."""

    def _unknown(self, names) -> None:
        for n in names:
            n = str(n)
            c = self.unknown_fields.get(n)
            if c is None:
                self.new_unknown.append(n)
                c = 0
            self.unknown_fields[n] = c + 1

    def decode(self, msg: bytes | bytearray | memoryview | str | Mapping, source: str = "<binance>",
               line: int = 0) -> Record:
        """Decode ``msg``; ``source``/``line`` name it in errors.  Cost: O(len(msg)); on the
        fast path about 5 us for a bookTicker and 10 us for a 68-level depth message on the
        (slow, shared) development machine, most of it fixed per-call overhead."""
        t = type(msg)
        if t is bytes:
            data = msg
        elif t is str:
            data = msg.encode("utf-8", "surrogatepass")
        elif isinstance(msg, Mapping):
            return self.from_obj(msg, source, line)
        else:
            data = bytes(msg)
        r = self._scan(data)
        if r[0] == 0:
            try:
                rec = self._fast(data, r)
                if rec is not None and self._unk[0, 0]:
                    names = [data[a:b].decode() for a, b in self._unk[1:self._unk[0, 0] + 1].tolist()]
                    if len(set(names)) < len(names):
                        rec = None           # a repeated key: json keeps the last; the slow path decides
                    else:
                        self._unknown(names)
            except UnicodeDecodeError:   # bytes that are not UTF-8 inside a string: json says where
                rec = None
            if rec is not None:
                return rec
        try:
            obj = json.loads(data)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise InputError(f"malformed JSON: {e}", source, line, _text(data)) from None
        return self.from_obj(obj, source, line, data)

    def _scan(self, data: bytes) -> tuple[int, ...]:
        """The numba scan of ``data``, its level table grown until the levels fit.  O(bytes)."""
        buf = np.frombuffer(data, np.uint8)
        while True:
            r = _scan(buf, self._slots, self._lv, self._unk)
            if r[0] != _GROW:
                return r
            self._lv = np.zeros((max(2 * self._lv.shape[0], len(buf) // 9 + 1), 4), np.int64)

    def clean_snapshot(self, data: bytes) -> DepthSnapshot | None:
        """The REST depth snapshot in ``data`` when the numba scan reads it cleanly (the shape
        exactly, no unknown field), else None (the caller then parses it as JSON, which says
        what is wrong).  O(bytes)."""
        r = self._scan(data)
        if r[0] != 0 or self._unk[0, 0]:
            return None
        try:
            rec = self._fast(data, r)
        except UnicodeDecodeError:
            return None
        return rec if type(rec) is DepthSnapshot else None

    def _fast(self, data: bytes, r: tuple[int, ...]) -> Record | None:
        """Build the record from a successful scan, or None when the shape is not exactly one
        we know (the slow path then says why).  A few integer mask tests, no loops."""
        _, env, pd, qd, sm, im, bm, lm, dm = r
        sl = self._slots.tolist()
        stream: str | None = None
        if env:
            if not sm & _B_STREAM:
                return None
            st = sl[_K_stream]
            stream = data[st[1]:st[2]].decode()
            sm &= ~_B_STREAM
        elif (sm | im | bm | lm) & _B_STREAM:
            return None
        if sm & _B_e:
            e = sl[_K_e]
            kind = data[e[1]:e[2]].decode()
        elif im & _B_last:
            if env:
                return None
            kind = "snapshot"
        elif sm & _B_B:
            kind = "bookTicker"
        else:
            return None
        shape = _SHAPES.get(kind)
        if shape is None:
            return None
        s_req, s_opt, i_req, i_opt, b_req, b_opt, lev = shape
        if (sm & ~(s_req | s_opt) or sm & s_req != s_req or im & ~(i_req | i_opt) or im & i_req != i_req
                or bm & ~(b_req | b_opt) or bm & b_req != b_req or lm != lev):
            return None
        dec = _DECIMAL_STRS.get(kind, 0)
        if dm & dec != dec:
            return None
        if kind == "depthUpdate":
            b, a, sy = sl[_K_b], sl[_K_a], sl[_K_s]
            lv = self._lv
            return DepthUpdate(stream, data[sy[1]:sy[2]].decode(), sl[_K_E][1],
                               sl[_K_T][1] if im & _B_T else None, sl[_K_U][1], sl[_K_u][1],
                               sl[_K_pu][1] if im & _B_pu else None,
                               lv[b[1]:b[1] + b[2], :2].copy(), lv[a[1]:a[1] + a[2], :2].copy(), pd, qd,
                               bool(b[3] and a[3]))
        if kind == "bookTicker":
            sy, b, bq, a, aq = sl[_K_s], sl[_K_b], sl[_K_B], sl[_K_a], sl[_K_A]
            return BookTicker(stream, data[sy[1]:sy[2]].decode(), sl[_K_u][1], data[b[1]:b[2]].decode(),
                              data[bq[1]:bq[2]].decode(), data[a[1]:a[2]].decode(), data[aq[1]:aq[2]].decode(),
                              sl[_K_E][1] if im & _B_E else None, sl[_K_T][1] if im & _B_T else None)
        if kind == "trade":
            sy, p, q = sl[_K_s], sl[_K_p], sl[_K_q]
            return Trade(stream, data[sy[1]:sy[2]].decode(), sl[_K_E][1], sl[_K_T][1], sl[_K_t][1],
                         data[p[1]:p[2]].decode(), data[q[1]:q[2]].decode(), bool(sl[_K_m][1]))
        b, a = sl[_K_bids], sl[_K_asks]
        lv = self._lv
        return DepthSnapshot(sl[_K_last][1], lv[b[1]:b[1] + b[2], :2].copy(), lv[a[1]:a[1] + a[2], :2].copy(),
                             pd, qd, sl[_K_E][1] if im & _B_E else None, sl[_K_T][1] if im & _B_T else None)

    # -- slow path: a parsed JSON object ----------------------------------------------------
    def from_obj(self, obj: Any, source: str = "<binance>", line: int = 0, raw: Any = None) -> Record:
        """The record of an already parsed message; every rule of the fast path is checked here
        with a reason naming the field.  O(size of obj)."""
        text = _text(raw) if raw is not None else _obj_text(obj)

        def bad(reason: str) -> InputError:
            return InputError(reason, source, line, text)

        if not isinstance(obj, Mapping):
            raise bad(f"message is not a JSON object but {type(obj).__name__}")
        stream = None
        if "data" in obj or "stream" in obj:
            extra = set(obj) - {"stream", "data"}
            if extra:
                self._unknown(sorted(extra))
            if not isinstance(obj.get("stream"), str):
                raise bad("envelope without a string 'stream'")
            if not isinstance(obj.get("data"), Mapping):
                raise bad("envelope without an object 'data'")
            stream, obj = obj["stream"], obj["data"]
        if "e" in obj:
            kind = obj["e"]
            if not isinstance(kind, str):
                raise bad("field 'e' is not a string")
        elif "lastUpdateId" in obj:
            kind = "snapshot"
            if stream is not None:
                raise bad("a depth snapshot inside a stream envelope")
        elif "B" in obj:
            kind = "bookTicker"
        elif "result" in obj and "id" in obj and stream is None:
            if set(obj) != {"result", "id"}:
                self._unknown(sorted(set(obj) - {"result", "id"}))
            return Response(obj["id"], obj["result"])
        else:
            raise bad("not a Binance message (no 'e', 'lastUpdateId' or bookTicker fields)")
        shape = _SHAPES.get(kind)
        if shape is None:
            raise bad(f"unknown event type {kind!r}")
        s_req, s_opt, i_req, i_opt, b_req, b_opt, lev = shape
        names = {_KEYS[k]: k for k in range(_NK)}
        allowed = {n for n, k in names.items() if (s_req | s_opt | i_req | i_opt | b_req | b_opt | lev) >> k & 1}
        unknown = [k for k in obj if k not in allowed]
        if unknown:
            self._unknown(unknown)
        for n in allowed:
            k = names[n]
            required = (s_req | i_req | b_req | lev) >> k & 1
            if n not in obj:
                if required:
                    raise bad(f"missing field {n!r} in a {kind} message")
                continue
            v = obj[n]
            if (s_req | s_opt) >> k & 1:
                if not isinstance(v, str):
                    raise bad(f"field {n!r} is not a string")
                if _DECIMAL_STRS.get(kind, 0) >> k & 1 and not _DEC.match(v):
                    raise bad(f"field {n!r} is not a plain decimal string: {v!r}")
            elif (i_req | i_opt) >> k & 1:
                if type(v) is not int or not 0 <= v < 2**63:
                    raise bad(f"field {n!r} is not an unsigned 64-bit integer: {v!r}")
            elif (b_req | b_opt) >> k & 1:
                if type(v) is not bool:
                    raise bad(f"field {n!r} is not a boolean: {v!r}")
        if kind in ("depthUpdate", "snapshot"):
            sides = ("b", "a") if kind == "depthUpdate" else ("bids", "asks")
            rows: list[list[tuple[int, int, int, int]]] = []
            for side in sides:
                lst = obj[side]
                if not isinstance(lst, list):
                    raise bad(f"field {side!r} is not a list of [price, qty] pairs")
                out = []
                for j, level in enumerate(lst):
                    if not (isinstance(level, list) and len(level) == 2 and all(isinstance(x, str) for x in level)):
                        raise bad(f"{side}[{j}] is not a [price, qty] pair of strings: {level!r}")
                    pm, qm = _DEC.match(level[0]), _DEC.match(level[1])
                    if pm is None or qm is None:
                        raise bad(f"{side}[{j}] is not a pair of plain decimal strings: {level!r}")
                    vals = []
                    for mt in (pm, qm):
                        frac = mt.group(2) or ""
                        v = int(mt.group(1) + frac)
                        if v >= MAX_MANTISSA or len(mt.group(1) + frac) > 18:
                            raise bad(f"{side}[{j}] has a value out of range (mantissa >= 2**53 or > 18 digits)")
                        vals.append((v, len(frac)))
                    out.append((vals[0][0], vals[1][0], vals[0][1], vals[1][1]))
                rows.append(out)
            allrows = rows[0] + rows[1]
            pd = max((r[2] for r in allrows), default=0)
            qd = max((r[3] for r in allrows), default=0)
            arrs = []
            for out in rows:
                arr = np.zeros((len(out), 2), np.int64)
                for j, (pmv, qmv, pdv, qdv) in enumerate(out):
                    p, q = pmv * 10 ** (pd - pdv), qmv * 10 ** (qd - qdv)
                    if p >= MAX_MANTISSA or q >= MAX_MANTISSA:
                        raise bad(f"{sides[len(arrs)]}[{j}] out of range once scaled to the message's decimals")
                    arr[j] = p, q
                arrs.append(arr)
            if kind == "snapshot":
                return DepthSnapshot(obj["lastUpdateId"], arrs[0], arrs[1], pd, qd, obj.get("E"), obj.get("T"))
            mono = all(_monotone(a[:, 0]) for a in arrs)
            return DepthUpdate(stream, obj["s"], obj["E"], obj.get("T"), obj["U"], obj["u"], obj.get("pu"),
                               arrs[0], arrs[1], pd, qd, mono)
        if kind == "bookTicker":
            return BookTicker(stream, obj["s"], obj["u"], obj["b"], obj["B"], obj["a"], obj["A"], obj.get("E"),
                              obj.get("T"))
        return Trade(stream, obj["s"], obj["E"], obj["T"], obj["t"], obj["p"], obj["q"], obj["m"])


def _monotone(p: np.ndarray) -> bool:
    if p.shape[0] < 2:
        return True
    d = np.diff(p)
    return bool((d > 0).all() or (d < 0).all())


def _text(data: Any) -> str:
    if isinstance(data, str):
        return data
    return bytes(data).decode("utf-8", errors="replace")


def _obj_text(obj: Any) -> str:
    try:
        return json.dumps(obj, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return repr(obj)


_DEFAULT_DECODER = Decoder()


def decode_message(msg: bytes | str | Mapping, source: str = "<binance>", line: int = 0) -> Record:
    """Decode one message with a module-level :class:`Decoder` (not thread-safe; make your own
    Decoder per thread).  Raises :class:`InputError`."""
    return _DEFAULT_DECODER.decode(msg, source, line)


# ------------------------------------------------------------------------------------------
# the book builder
# ------------------------------------------------------------------------------------------

_WAIT, _FIRST, _SYNCED = 0, 1, 2
_NO_ACTIONS: tuple = ()
_COUNTERS = ("messages", "depth_events", "applied", "level_updates", "gaps", "resyncs", "stale", "malformed", "crossed",
             "snapshots", "snapshots_rejected", "booktickers", "bookticker_checked", "bookticker_mismatch",
             "trades", "buffer_dropped")


_OTHER_STREAM = re.compile(rb'\s*\{\s*"stream"\s*:\s*"[^"\\@]*@([^"\\]*)"')
_BOOK_KINDS = ("depth", "bookticker", "trade")


def _other_stream_kind(msg: Any) -> str | None:
    """The stream kind (after its ``@``, lower case) of a combined-stream message that is not
    one a book reads (depth, bookTicker, trade), else None.  Called only for a message the
    decoder refused, so it costs nothing on good input: a regex at the start of raw bytes, a
    dict look-up on a parsed message."""
    if isinstance(msg, Mapping):
        stream = msg.get("stream")
        kind = stream.split("@", 1)[1].lower() if isinstance(stream, str) and "@" in stream else None
    else:
        raw = msg.encode("utf-8", "surrogatepass") if isinstance(msg, str) else bytes(msg)
        m = _OTHER_STREAM.match(raw)
        kind = m.group(1).decode("ascii", "replace").lower() if m else None
    return None if kind is None or kind.startswith(_BOOK_KINDS) else kind


class BinanceBook:
    """Order book of one symbol built from Binance diff-depth messages; see the module docstring.

    ``market`` is :data:`FUTURES` (USD-M) or :data:`SPOT`: it selects the drop, straddle and
    continuity rules.  ``px_decimals``/``qty_decimals`` fix the book's scale (default: the first
    snapshot or depth message with levels).  ``max_buffer`` bounds the events buffered while
    waiting for a snapshot (the oldest are dropped and counted: they are older than any snapshot
    fetched later); ``history`` is how many applied updates keep their top of book for bookTicker
    messages that arrive after the depth event they describe (and how many tickers may wait for
    theirs); ``max_reports`` bounds :attr:`reports`.

    The book itself lives in numpy arrays (per side: keys sorted with the best level last,
    quantities, row times) updated by a numba kernel, so a level costs no Python object;
    :meth:`levels` returns a ``SortedDict`` copy of a side for display and tests.

    Counters (attributes, and :meth:`counters`): ``messages`` fed, ``depth_events`` decoded,
    ``applied`` depth events applied, ``level_updates`` price-level updates applied, ``gaps`` (continuity
    breaks), ``resyncs`` (books discarded for a fresh snapshot: gaps plus :meth:`resync` calls),
    ``stale`` (duplicate or late events dropped), ``malformed`` (messages that failed to decode or
    validate), ``crossed`` (updates after which best bid >= best ask), ``snapshots`` applied,
    ``snapshots_rejected`` (too old, malformed or unsolicited), ``booktickers``,
    ``bookticker_checked``/``bookticker_mismatch``, ``trades``, ``buffer_dropped``.  Each problem
    is also recorded in :attr:`reports` as an :class:`InputError` naming the message number
    (``line``), the reason and the message."""

    def __init__(self, market: Literal["futures", "spot"], *, symbol: str | None = None,
                 source: str = "<binance>", px_decimals: int | None = None, qty_decimals: int | None = None,
                 max_buffer: int = 100_000, history: int = 4096, max_reports: int = 1000) -> None:
        if market not in (FUTURES, SPOT):
            raise ValueError(f"market must be {FUTURES!r} or {SPOT!r}, got {market!r}")
        for name, v in (("px_decimals", px_decimals), ("qty_decimals", qty_decimals)):
            if v is not None and not (isinstance(v, int) and 0 <= v <= 18):
                raise ValueError(f"{name} must be an int in 0..18, got {v!r}")
        if max_buffer < 1 or history < 1 or max_reports < 1:
            raise ValueError("max_buffer, history and max_reports must be >= 1")
        self.market = market
        self.futures = market == FUTURES
        self.symbol = symbol
        self.source = source
        self.px_decimals = px_decimals
        self.qty_decimals = qty_decimals
        self.max_buffer = max_buffer
        self.history = history
        # small until the first snapshot sizes the book (with 1,000 symbols, 64-block books and
        # 4,096-row queues zeroed per book were ~0.3 ms a book: a quarter of reading a capture)
        self._new_book(2)
        self._pscale = 10.0 ** (px_decimals or 0)
        self._qscale = 10.0 ** (qty_decimals or 0)
        self._stale_rows: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] | None = None
        self._state = _WAIT
        self.last_u: int | None = None
        self._top: tuple[int, int, int, int] = (-1, -1, -1, -1)
        self._buffer: deque[tuple[DepthUpdate, int]] = deque()
        self._need = False
        self._decoder = Decoder()
        self._hist: dict[int, tuple[int, int, int, int]] = {}
        self._hist_order: deque[int] = deque()
        self._pending: deque[tuple[BookTicker, int]] = deque()   # tickers ahead of the book
        self.reports: deque[InputError] = deque(maxlen=max_reports)
        self.updates = 0
        self._taken = 0
        self._oi = np.zeros((64, 3), np.int64)     # queued rows: rel, sign, line (doubled as needed)
        self._oc = np.zeros((64, 5), np.float64)   # queued rows: t, id, broker, volume, price
        self._ok = 0
        self._checked_rows = 0
        self._crossed_now = False
        for c in _COUNTERS:
            setattr(self, c, 0)
        self.ignored: dict[str, int] = {}
        """Messages of combined streams a book does not read (``aggTrade``, ``kline_1m``, ...): the
        stream's kind after its ``@``, lower case -> messages.  Not malformed: a recorder or a
        client may subscribe to anything (the venue cores count them the same way)."""

    def _new_book(self, nblocks: int) -> None:
        """Empty blocked sorted arrays for both sides (see :func:`ddms.io.kernels.levelarrays.apply_side`)."""
        # a block's entries past its count (bn) are never read (the kernel, _extract, _check and
        # _top_of_arrays read [0, bn)): uninitialised, so a new 64-block book costs no 192 kB memset
        # (~0.3 ms a book; a 1,000-symbol capture loads 1,000 snapshots)
        self._bk = np.empty((2, nblocks, _BLOCK), np.int64)    # keys: price_id (bids), -price_id (asks)
        self._bq = np.empty((2, nblocks, _BLOCK), np.int64)    # qty_units
        self._bt = np.empty((2, nblocks, _BLOCK), np.float64)  # t of the level's row
        self._bn = np.zeros((2, nblocks), np.int64)
        self._order = np.zeros((2, nblocks), np.int64)
        self._bmax = np.zeros((2, nblocks), np.int64)
        self._free = np.zeros((2, nblocks), np.int64)
        self._meta = np.zeros((2, 4), np.int64)   # blocks in order, free blocks, levels, blocks allocated
        self._blocks_hint = 0   # blocks allocated on the fuller side (returned by the kernel)

    def _extract(self, side: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keys ascending, qty_units, t)`` of a side (copies, O(levels))."""
        ids = self._order[side, : self._meta[side, 0]]
        ns = self._bn[side, ids]
        mask = np.arange(_BLOCK)[None, :] < ns[:, None]
        return self._bk[side, ids][mask], self._bq[side, ids][mask], self._bt[side, ids][mask]

    def _load(self, side: int, keys: np.ndarray, qty: np.ndarray, t: np.ndarray) -> None:
        """Fill an empty side from ascending ``keys`` in half-full blocks (room to grow)."""
        m = keys.shape[0]
        h = _BLOCK // 2
        nb = -(-m // h)
        if nb + 2 > self._bk.shape[1]:
            self._grow(nb + 2)
        _fill_side(self._bk, self._bq, self._bt, self._bn, self._order, self._bmax, self._meta, side, keys, qty, t)
        self._blocks_hint = max(self._blocks_hint, nb)

    def _grow(self, nblocks: int) -> None:
        """At least ``nblocks`` blocks per side (doubling), keeping the contents."""
        old = self._bk.shape[1]
        new = max(2 * old, nblocks)
        for name in ("_bk", "_bq", "_bt", "_bn", "_order", "_bmax", "_free"):
            a = getattr(self, name)
            b = np.zeros((2, new) + a.shape[2:], a.dtype)
            b[:, :old] = a
            setattr(self, name, b)

    # -- state ------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        """True while the book follows the stream (a snapshot applied, no gap since)."""
        return self._state != _WAIT

    @property
    def needs_snapshot(self) -> bool:
        """True while a snapshot has been asked for and not yet applied."""
        return self._need

    @property
    def buffered(self) -> int:
        """Depth events waiting for a snapshot."""
        return len(self._buffer)

    def counters(self) -> dict[str, int]:
        """Every counter by name (see the class docstring)."""
        return {c: getattr(self, c) for c in _COUNTERS}

    def depth(self, side: int) -> int:
        """Number of levels on ``side`` (:data:`BIDS` or :data:`ASKS`)."""
        return int(self._meta[side, 2])

    def _dec(self, p: int, q: int) -> tuple[Decimal, Decimal]:
        return (Decimal(p).scaleb(-(self.px_decimals or 0)), Decimal(q).scaleb(-(self.qty_decimals or 0)))

    def best_bid(self) -> tuple[Decimal, Decimal] | None:
        """Best bid ``(price, qty)`` as exact decimals; None without bids or book.  O(1)."""
        t = self._top
        return None if t[0] < 0 else self._dec(t[0], t[1])

    def best_ask(self) -> tuple[Decimal, Decimal] | None:
        """Best ask ``(price, qty)`` as exact decimals; None without asks or book.  O(1)."""
        t = self._top
        return None if t[2] < 0 else self._dec(t[2], t[3])

    def top_units(self) -> tuple[int, int, int, int]:
        """``(best bid price_id, qty_units, best ask price_id, qty_units)``, -1 for an empty side."""
        return self._top

    def is_crossed(self) -> bool:
        """Is the book crossed now (best bid >= best ask)?  (The counter ``crossed`` counts the
        updates after which it was.)"""
        t = self._top
        return t[0] >= 0 and t[2] >= 0 and t[0] >= t[2]

    def _side_units(self, side: int) -> tuple[np.ndarray, np.ndarray]:
        """``(price_ids, qty_units)`` of a side, best level first (O(levels))."""
        k, q, _ = self._extract(side)
        return (-k if side == ASKS else k)[::-1], q[::-1]

    def levels(self, side: int) -> SortedDict:
        """A side as ``SortedDict(price_id -> qty_units)`` (a copy: O(levels))."""
        p, q = self._side_units(side)
        return SortedDict(zip(p.tolist(), q.tolist(), strict=True))

    def top_levels(self, side: int, k: int) -> list[tuple[Decimal, Decimal]]:
        """The best ``k`` levels of a side as exact ``(price, qty)`` decimals, best first.  O(k)."""
        p, q = self._side_units(side)
        return [self._dec(a, b) for a, b in zip(p[:k].tolist(), q[:k].tolist(), strict=True)]

    def to_snapshot(self) -> dict[str, Any]:
        """The current book as a REST-style snapshot ``{"lastUpdateId", "bids", "asks"}`` (each
        side best first, decimal strings at the book's scale): what a replay server answers to a
        snapshot request.  O(levels).  Raises RuntimeError while not synchronized."""
        if self._state == _WAIT or self.last_u is None:
            raise RuntimeError(f"{self.source}: no synchronized book to snapshot")
        pd, qd = self.px_decimals or 0, self.qty_decimals or 0
        out: dict[str, Any] = {"lastUpdateId": self.last_u}
        for side, name in ((BIDS, "bids"), (ASKS, "asks")):
            p, q = self._side_units(side)
            out[name] = [[format_units(a, pd), format_units(b, qd)]
                         for a, b in zip(p.tolist(), q.tolist(), strict=True)]
        return out

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Everything :meth:`load_state` needs to continue exactly where this builder is, as JSON
        values and flat numpy arrays (no pickle; a checkpoint stores them): the levels of each
        side (ascending keys, quantities, row times: the canonical form, the block layout is
        rebuilt), the rows the engine holds for a discarded book, the sync state and ``last_u``,
        the events buffered while waiting for a snapshot, the top-of-book history and the
        bookTickers waiting for their update, the row numbering, queued rows and every counter.
        Not saved: :attr:`reports` (messages about the past).  O(levels + buffered levels)."""
        arrays: dict[str, np.ndarray] = {}
        for side in (BIDS, ASKS):
            k, q, t = self._extract(side)
            arrays |= {f"keys{side}": k, f"qty{side}": q, f"t{side}": t}
            if self._stale_rows is not None:
                sk, sq, st = self._stale_rows[side]
                arrays |= {f"stale_keys{side}": np.asarray(sk, np.int64), f"stale_qty{side}": np.asarray(sq, np.int64),
                           f"stale_t{side}": np.asarray(st, np.float64)}
        buffer = []
        levels = []
        for rec, n in self._buffer:
            buffer.append([n, rec.stream, rec.symbol, rec.event_ms, rec.transact_ms, rec.first_id, rec.final_id,
                           rec.prev_final_id, rec.px_dec, rec.qty_dec, rec.monotone, len(rec.bids), len(rec.asks)])
            levels += [rec.bids, rec.asks]
        arrays["buffer_levels"] = (np.concatenate(levels).astype(np.int64) if levels else np.zeros((0, 2), np.int64))
        order = list(self._hist_order)
        arrays["hist"] = np.array([[u, *self._hist[u]] for u in order], np.int64).reshape(-1, 5)
        arrays["rows_i"], arrays["rows_c"] = self._oi[:self._ok].copy(), self._oc[:self._ok].copy()
        meta = {"market": self.market, "symbol": self.symbol, "px_decimals": self.px_decimals,
                "qty_decimals": self.qty_decimals, "state": self._state, "last_u": self.last_u,
                "top": list(self._top), "need": self._need, "updates": self.updates, "taken": self._taken,
                "crossed_now": self._crossed_now, "stale": self._stale_rows is not None,
                "counters": self.counters(), "unknown_fields": dict(self._decoder.unknown_fields),
                "ignored": dict(self.ignored),
                "buffer": buffer,
                "pending": [[n, b.stream, b.symbol, b.update_id, b.bid_px, b.bid_qty, b.ask_px, b.ask_qty,
                             b.event_ms, b.transact_ms] for b, n in self._pending]}
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` (of a builder of the same market; this one's
        limits ``max_buffer``/``history`` stay).  Raises ValueError for a state of another
        market or an inconsistent one.  O(levels)."""
        if meta["market"] != self.market:
            raise ValueError(f"a saved {meta['market']} book cannot continue as a {self.market} one")
        self.symbol = meta["symbol"]
        self.px_decimals, self.qty_decimals = meta["px_decimals"], meta["qty_decimals"]
        self._pscale = 10.0 ** (self.px_decimals or 0)
        self._qscale = 10.0 ** (self.qty_decimals or 0)
        sides = [(np.asarray(arrays[f"keys{s}"], np.int64), np.asarray(arrays[f"qty{s}"], np.int64),
                  np.asarray(arrays[f"t{s}"], np.float64)) for s in (BIDS, ASKS)]
        self._new_book(max(64, 2 * max(len(k) for k, _, _ in sides) // _BLOCK + 8))
        for side, (k, q, t) in enumerate(sides):
            self._load(side, k, q, t)
        self._stale_rows = None
        if meta["stale"]:
            self._stale_rows = tuple((np.array(arrays[f"stale_keys{s}"], np.int64),
                                      np.array(arrays[f"stale_qty{s}"], np.int64),
                                      np.array(arrays[f"stale_t{s}"], np.float64)) for s in (BIDS, ASKS))
        self._state, self.last_u, self._need = int(meta["state"]), meta["last_u"], bool(meta["need"])
        self._top = tuple(int(x) for x in meta["top"])
        if self._top != self._top_of_arrays():
            raise ValueError("inconsistent saved book: its top of book is not its best levels")
        self._crossed_now = bool(meta["crossed_now"])
        self.updates, self._taken = int(meta["updates"]), int(meta["taken"])
        for c in _COUNTERS:
            setattr(self, c, int(meta["counters"].get(c, 0)))
        self._decoder.unknown_fields = dict(meta["unknown_fields"])
        self.ignored = dict(meta.get("ignored", {}))      # (absent from checkpoints of before stop 38)
        lv = np.asarray(arrays["buffer_levels"], np.int64).reshape(-1, 2)
        at = 0
        self._buffer = deque()
        for n, stream, sym, e, tr, first, final, pu, pd, qd, mono, nb, na in meta["buffer"]:
            bids, asks = lv[at:at + nb].copy(), lv[at + nb:at + nb + na].copy()
            at += nb + na
            self._buffer.append((DepthUpdate(stream, sym, e, tr, first, final, pu, bids, asks, pd, qd, mono), n))
        self._pending = deque((BookTicker(st, sym, u, bp, bq, ap, aq, e, tr), n)
                              for n, st, sym, u, bp, bq, ap, aq, e, tr in meta["pending"])
        hist = np.asarray(arrays["hist"], np.int64).reshape(-1, 5).tolist()
        self._hist = {h[0]: (h[1], h[2], h[3], h[4]) for h in hist}
        self._hist_order = deque(h[0] for h in hist)
        ri, rc = np.asarray(arrays["rows_i"], np.int64), np.asarray(arrays["rows_c"], np.float64)
        self._ok = 0
        self._reserve(0, len(ri))
        self._oi[:len(ri)], self._oc[:len(rc)] = ri, rc
        self._ok = len(ri)
        self._checked_rows = 0

    def can_start(self, last_update_id: int) -> bool:
        """Would a snapshot at ``last_update_id`` start this waiting book now: its first buffered
        event not older than the snapshot straddles it (Binance's rule)?  False when synchronized
        or when nothing newer is buffered.  A capture reader uses it to give a snapshot that names
        no symbol to the right book.  O(buffered)."""
        if self._state != _WAIT:
            return False
        for rec, _ in self._buffer:
            if not self._older(rec, last_update_id):
                return self._straddles(rec, last_update_id)
        return False

    def starts_with(self, rec: DepthUpdate, last_update_id: int) -> bool:
        """Could a snapshot at ``last_update_id`` start this book at depth event ``rec`` (which
        it is about to be fed): ``rec`` straddles it.  O(1)."""
        return self._state == _WAIT and self._straddles(rec, last_update_id)

    def restarted(self, reason: str) -> None:
        """The feed continues on a new connection (a process restored from a checkpoint): its
        sequence ids do not carry over, so the book becomes the rows the engine holds (deleted by
        the next snapshot, as after a gap), nothing stays buffered, and the first depth event
        asks for a snapshot.  Counted in ``resyncs``.  O(levels)."""
        self.reports.append(InputError(f"restart: {reason}", self.source, self.messages))
        if self._state != _WAIT:
            self._discard(reason, self.messages)
        else:
            self.resyncs += 1
        self._buffer.clear()
        self._pending.clear()
        self._need = False

    # -- input ------------------------------------------------------------------------------
    def feed_message(self, msg: bytes | bytearray | memoryview | str | Mapping | Record,
                     recv_ts_ns: int = 0) -> tuple[NeedSnapshot, ...]:
        """Process one websocket message (or a capture line's JSON, or a decoded record).
        A depth snapshot fed here is applied like :meth:`apply_snapshot`.  Returns the actions
        the caller must perform (usually none).  Bad input is counted and reported, never raised."""
        self.messages += 1
        n = self.messages
        t = type(msg)
        if t is bytes or t is str or not isinstance(msg, _RECORD_TYPES):
            try:
                msg = self._decoder.decode(msg, self.source, n)
            except InputError as e:
                kind = _other_stream_kind(msg)
                if kind is not None:
                    self.ignored[kind] = self.ignored.get(kind, 0) + 1
                    return _NO_ACTIONS
                self.malformed += 1
                self.reports.append(e)
                return _NO_ACTIONS
            if self._decoder.new_unknown:
                self._report_unknown(self._decoder.new_unknown, n)
            t = type(msg)
        if t is BookTicker:
            self._on_ticker(msg, n)
            return _NO_ACTIONS
        if t is DepthUpdate:
            return self._on_depth(msg, n)
        if t is Trade:
            self.trades += 1
            return _NO_ACTIONS
        if t is DepthSnapshot:
            return self._on_snapshot(msg, n, recv_ts_ns)
        return _NO_ACTIONS   # Response: nothing to do

    @property
    def unknown_fields(self) -> dict[str, int]:
        """Unknown message fields ignored so far: name -> messages carrying it (of the messages
        this builder decoded itself; a capture reader's decoder counts those it decoded)."""
        return dict(self._decoder.unknown_fields)

    def _report_unknown(self, names: list[str], n: int) -> None:
        """One report per new unknown field name (then only counted)."""
        for name in names:
            self.reports.append(InputError(f"unknown field {name!r} ignored (counted in unknown_fields)",
                                           self.source, n))
        names.clear()

    def apply_snapshot(self, snapshot: bytes | str | Mapping | DepthSnapshot, recv_ts_ns: int = 0
                       ) -> tuple[NeedSnapshot, ...]:
        """Apply a REST depth snapshot (raw JSON, dict or record), then the buffered events.
        Returns further actions: a new NeedSnapshot when the snapshot is too old for the
        buffered events or malformed, or when a buffered event breaks continuity.
        ``recv_ts_ns`` gives the rows' ``t`` (in ms) when the snapshot has no ``E``."""
        if isinstance(snapshot, DepthSnapshot):
            rec: Record = snapshot
        else:
            try:
                rec = self._decoder.decode(snapshot, f"{self.source} (snapshot)", 0)
            except InputError as e:
                return self._reject_snapshot(e)
        if not isinstance(rec, DepthSnapshot):
            return self._reject_snapshot(self._err(f"not a depth snapshot but a {type(rec).__name__}", 0, snapshot))
        return self._on_snapshot(rec, 0, recv_ts_ns)

    def resync(self, reason: str) -> tuple[NeedSnapshot, ...]:
        """Discard the book and ask for a fresh snapshot (e.g. the transport dropped messages
        because the consumer could not keep up).  Counted in ``resyncs``, not in ``gaps``."""
        self.reports.append(InputError(f"resync: {reason}", self.source, self.messages))
        return self._discard(reason, self.messages)

    # -- internals: sequencing ----------------------------------------------------------------
    def _err(self, reason: str, n: int, msg: Any) -> InputError:
        if isinstance(msg, DepthUpdate):
            text = f"depthUpdate U={msg.first_id} u={msg.final_id} pu={msg.prev_final_id}"
        elif isinstance(msg, (str, bytes, bytearray, memoryview)):
            text = _text(msg)
        else:
            text = repr(msg) if isinstance(msg, _RECORD_TYPES) else _obj_text(msg)
        return InputError(reason, self.source, n, text)

    def _reject_snapshot(self, err: InputError) -> tuple[NeedSnapshot, ...]:
        self.snapshots_rejected += 1
        self.reports.append(err)
        if self._state == _WAIT:
            self._need = True
            return (NeedSnapshot(f"snapshot rejected: {err.reason}", err.line),)
        return _NO_ACTIONS

    def _discard(self, reason: str, n: int) -> tuple[NeedSnapshot, ...]:
        """Drop the book.  Its rows stay in the engine until the next snapshot replaces them
        (views keep the last good state instead of flashing an empty book)."""
        self.resyncs += 1
        if self._state != _WAIT:
            self._stale_rows = (self._extract(BIDS), self._extract(ASKS))
            self._new_book(self._bk.shape[1])
            self._top = (-1, -1, -1, -1)
            self._crossed_now = False
        self._state = _WAIT
        self._pending.clear()
        self._need = True
        return (NeedSnapshot(reason, n),)

    def _older(self, rec: DepthUpdate, last: int) -> bool:
        return rec.final_id < last if self.futures else rec.final_id <= last

    def _straddles(self, rec: DepthUpdate, last: int) -> bool:
        if self.futures:
            return rec.first_id <= last <= rec.final_id
        return rec.first_id <= last + 1 <= rec.final_id

    def _on_depth(self, rec: DepthUpdate, n: int) -> tuple[NeedSnapshot, ...]:
        if rec.symbol != self.symbol:
            if self.symbol is not None:
                self.malformed += 1
                self.reports.append(self._err(f"depth update for symbol {rec.symbol!r}, book is {self.symbol!r}",
                                              n, rec))
                return _NO_ACTIONS
            self.symbol = rec.symbol
        if self.futures and rec.prev_final_id is None:
            self.malformed += 1
            self.reports.append(self._err("futures depth update without 'pu'", n, rec))
            return _NO_ACTIONS
        if rec.first_id > rec.final_id:
            self.malformed += 1
            self.reports.append(self._err(f"depth update with U={rec.first_id} > u={rec.final_id}", n, rec))
            return _NO_ACTIONS
        self.depth_events += 1
        return self._sequence(rec, n)

    def _sequence(self, rec: DepthUpdate, n: int) -> tuple[NeedSnapshot, ...]:
        state = self._state
        if state == _SYNCED:
            last = self.last_u
            if (rec.prev_final_id == last) if self.futures else (rec.first_id == last + 1):
                return self._apply(rec, n)
            if rec.final_id <= last:
                self.stale += 1
                self.reports.append(self._err(
                    f"stale depth update (duplicate or out of order): u={rec.final_id} <= last applied u={last}",
                    n, rec))
                return _NO_ACTIONS
            if self.futures:
                why = f"gap: pu={rec.prev_final_id} but the last applied u={last}"
            else:
                why = f"gap: U={rec.first_id} but the last applied u={last} (expected U={last + 1})"
            return self._gap(why, rec, n)
        if state == _FIRST:
            last = self.last_u
            if self._older(rec, last):
                return _NO_ACTIONS   # older than the snapshot: expected, dropped
            if self._straddles(rec, last):
                self._state = _SYNCED
                return self._apply(rec, n)
            rule = "U <= lastUpdateId <= u" if self.futures else "U <= lastUpdateId + 1 <= u"
            return self._gap(f"gap after snapshot: first event U={rec.first_id} u={rec.final_id} "
                             f"does not satisfy {rule} for lastUpdateId={last}", rec, n)
        self._buffer.append((rec, n))
        if len(self._buffer) > self.max_buffer:
            self._buffer.popleft()
            self.buffer_dropped += 1
        if not self._need:
            self._need = True
            return (NeedSnapshot("depth events buffered: need a snapshot to start the book", n),)
        return _NO_ACTIONS

    def _gap(self, reason: str, rec: DepthUpdate, n: int) -> tuple[NeedSnapshot, ...]:
        self.gaps += 1
        self.reports.append(self._err(reason, n, rec))
        actions = self._discard(reason, n)
        self._buffer.append((rec, n))
        return actions

    # -- internals: applying --------------------------------------------------------------------
    def _scaled(self, arr: np.ndarray, pd: int, qd: int, nlevels: int) -> np.ndarray:
        """``arr`` rescaled from ``(pd, qd)`` decimals to the book's scale (fixed here on first
        use); raises ValueError when a value has more decimals than the scale or overflows."""
        if self.px_decimals is None or self.qty_decimals is None:
            if nlevels == 0:
                return arr
            if self.px_decimals is None:
                self.px_decimals = pd
            if self.qty_decimals is None:
                self.qty_decimals = qd
        spd, sqd = self.px_decimals, self.qty_decimals
        self._pscale, self._qscale = 10.0 ** spd, 10.0 ** sqd
        if (pd == spd and qd == sqd) or arr.shape[0] == 0:
            return arr
        out = arr.copy()
        for c, d, sd, what in ((0, pd, spd, "price"), (1, qd, sqd, "quantity")):
            if d < sd:
                f = 10 ** (sd - d)
                if int(out[:, c].max()) >= MAX_MANTISSA // f:
                    raise ValueError(f"a {what} is out of range at the book's scale ({sd} decimals)")
                out[:, c] *= f
            elif d > sd:
                f = 10 ** (d - sd)
                if (out[:, c] % f).any():
                    raise ValueError(f"a {what} has more decimals than the book's scale ({sd})")
                out[:, c] //= f
        return out

    def _reserve(self, levels: int, rows: int) -> None:
        """Room for ``levels`` more level changes per side (each may take a new block) and
        ``rows`` more queued rows (doubling)."""
        need = int(self._meta[:, 3].max()) + levels + 1
        if need > self._bk.shape[1]:
            self._grow(need)
        if self._ok + rows > self._oi.shape[0]:
            self._grow_rows(rows)

    def _grow_rows(self, rows: int) -> None:
        new = max(2 * self._oi.shape[0], self._ok + rows)
        for name in ("_oi", "_oc"):
            old = getattr(self, name)
            arr = np.zeros((new, old.shape[1]), old.dtype)
            arr[: self._ok] = old[: self._ok]
            setattr(self, name, arr)

    def _apply(self, rec: DepthUpdate, n: int) -> tuple[NeedSnapshot, ...]:
        bids, asks = rec.bids, rec.asks
        nb, na = bids.shape[0], asks.shape[0]
        if rec.px_dec != self.px_decimals or rec.qty_dec != self.qty_decimals:
            try:
                bids = self._scaled(bids, rec.px_dec, rec.qty_dec, nb + na)
                asks = self._scaled(asks, rec.px_dec, rec.qty_dec, nb + na)
            except ValueError as e:
                # a message we cannot represent is a message lost: the book cannot follow any more
                self.malformed += 1
                return self._gap(f"depth update u={rec.final_id}: {e}", rec, n)
        m = nb if nb > na else na
        if self._blocks_hint + m + 1 > self._bk.shape[1]:
            self._grow(self._blocks_hint + m + 1)
        if self._ok + 2 * (nb + na) > self._oi.shape[0]:
            self._grow_rows(2 * (nb + na))
        self.updates += 1
        k, bp, bq, ap, aq, self._blocks_hint = _apply_depth(
            self._bk, self._bq, self._bt, self._bn, self._order, self._bmax, self._free, self._meta, bids, asks,
            float(rec.event_ms), self.updates, self._oi, self._oc, self._ok, self._pscale, self._qscale)
        self._ok = k
        self._top = (bp, bq, ap, aq)
        self.applied += 1
        self.level_updates += nb + na
        self.last_u = u = rec.final_id
        self._after_update(n, u, True)
        return _NO_ACTIONS

    def _queue_rows(self, side: int, sign: int, t: np.ndarray, px: np.ndarray, qty: np.ndarray) -> None:
        self._reserve(0, px.shape[0])
        self._ok = _queue(self._oi, self._oc, self._ok, side, sign, self.updates, t, px, qty,
                          10.0 ** (self.px_decimals or 0), 10.0 ** (self.qty_decimals or 0))

    def _on_snapshot(self, snap: DepthSnapshot, n: int, recv_ts_ns: int) -> tuple[NeedSnapshot, ...]:
        last = snap.last_update_id
        what = f"DepthSnapshot lastUpdateId={last}"
        if self._state != _WAIT:
            return self._reject_snapshot(self._err(
                f"unsolicited snapshot lastUpdateId={last} while the book is synchronized (last u={self.last_u}): "
                "ignored", n, what))
        buf = self._buffer
        while buf and self._older(buf[0][0], last):
            buf.popleft()
        if buf and not self._straddles(buf[0][0], last):
            return self._reject_snapshot(self._err(
                f"snapshot lastUpdateId={last} is older than the buffered events (first U={buf[0][0].first_id}): "
                "need a newer snapshot", n, what))
        nlev = snap.bids.shape[0] + snap.asks.shape[0]
        try:
            sides = [self._scaled(arr, snap.px_dec, snap.qty_dec, nlev) for arr in (snap.bids, snap.asks)]
        except ValueError as e:
            return self._reject_snapshot(self._err(f"snapshot: {e}", n, what))
        loaded = []
        for side, arr in enumerate(sides):
            keys, qty, repeat = _sorted_side(arr, side == ASKS)     # a zero level is no level
            if repeat:
                return self._reject_snapshot(self._err(f"snapshot {('bids', 'asks')[side]} repeat a price level",
                                                       n, what))
            loaded.append((keys, qty))
        self.snapshots += 1
        t = float(snap.event_ms) if snap.event_ms is not None else float(recv_ts_ns // 1_000_000)
        self.updates += 1
        if self._stale_rows is not None:   # a resync: delete every row the engine still holds
            for side, (keys, qty, tt) in enumerate(self._stale_rows):
                self._queue_rows(side, -1, tt, -keys if side == ASKS else keys, qty)
            self._stale_rows = None
        self._new_book(max(64, 2 * max(len(k) for k, _ in loaded) // _BLOCK + 8))
        self._reserve(0, sum(len(k) for k, _ in loaded))     # (one growth of the row queue, not one per side)
        for side, (keys, qty) in enumerate(loaded):
            times = np.full(keys.shape[0], t)
            self._load(side, keys, qty, times)
            self._queue_rows(side, 1, times, -keys if side == ASKS else keys, qty)
        self._top = self._top_of_arrays()
        self.last_u = last
        pend = self._pending
        while pend and pend[0][0].update_id < last:   # tickers of events older than the snapshot
            pend.popleft()
        self._state = _FIRST
        self._need = False
        self._after_update(n, last, False)
        actions: list[NeedSnapshot] = []
        pending = list(buf)
        buf.clear()
        for i, (rec, m) in enumerate(pending):
            if self._state == _WAIT:  # a buffered event broke continuity: keep the rest buffered
                buf.extend(pending[i:])
                break
            actions.extend(self._sequence(rec, m))
        return tuple(actions)

    def _after_update(self, n: int, u: int, record: bool) -> None:
        """Crossed check, top-of-book history and pending bookTicker checks after an update."""
        top = self._top
        self._crossed_now = top[0] >= 0 and top[2] >= 0 and top[0] >= top[2]
        if self._crossed_now:
            self.crossed += 1
            pd = self.px_decimals or 0
            self.reports.append(InputError(
                f"book crossed after update u={u}: best bid {format_units(top[0], pd)} >= best ask "
                f"{format_units(top[2], pd)}", self.source, n))
        if not record:
            return
        hist = self._hist
        if u not in hist:
            self._hist_order.append(u)
            if len(self._hist_order) > self.history:
                del hist[self._hist_order.popleft()]
        hist[u] = top
        pend = self._pending
        while pend and pend[0][0].update_id <= u:
            bt, m = pend.popleft()
            if bt.update_id == u:
                self._check_ticker(bt, top, m)

    def _on_ticker(self, bt: BookTicker, n: int) -> None:
        self.booktickers += 1
        u = bt.update_id
        if self._state == _WAIT or u > self.last_u:
            # ahead of the book, or the book is waiting for a snapshot: the ticker may describe a
            # buffered event that the snapshot lets us apply (a transport delivers the snapshot
            # after messages that arrived while it was in flight), so it waits for that event
            self._pending.append((bt, n))
            if len(self._pending) > self.history:
                self._pending.popleft()
        elif u in self._hist:
            self._check_ticker(bt, self._hist[u], n)

    def _check_ticker(self, bt: BookTicker, top: tuple[int, int, int, int], n: int) -> None:
        """Compare exactly: the ticker's decimal strings at the book's scale against the top."""
        self.bookticker_checked += 1
        pd, qd = self.px_decimals or 0, self.qty_decimals or 0
        want = (parse_units(bt.bid_px, pd), parse_units(bt.bid_qty, qd),
                parse_units(bt.ask_px, pd), parse_units(bt.ask_qty, qd))
        if top != want:
            self.bookticker_mismatch += 1
            have = " / ".join("empty" if top[i] < 0 else
                              f"{format_units(top[i], pd)} x {format_units(top[i + 1], qd)}" for i in (0, 2))
            self.reports.append(InputError(
                f"bookTicker u={bt.update_id} mismatch: book has {have}, ticker says "
                f"{bt.bid_px} x {bt.bid_qty} / {bt.ask_px} x {bt.ask_qty}", self.source, n))

    # -- output -----------------------------------------------------------------------------
    def take_events(self) -> EventBatch:
        """The engine rows queued since the last call, as one batch (rel 0 = bids, 1 = asks;
        ``line`` = update number, ``first_line..last_line`` the updates it spans).  O(rows):
        one copy out of the builder's buffers."""
        k, self._ok = self._ok, 0
        self._checked_rows = 0
        first, self._taken = self._taken, self.updates
        oi = self._oi[:k]
        return EventBatch(oi[:, 0].astype(np.int8), oi[:, 1].astype(np.int8), self._oc[:k].copy(),
                          oi[:, 2].copy(), first + 1, self.updates)

    def discard_events(self) -> None:
        """Drop the queued engine rows (a consumer without an engine, e.g. a replay server's
        snapshot book): :meth:`take_events` without the copy.  O(1)."""
        self._ok = 0
        self._checked_rows = 0
        self._taken = self.updates

    # -- invariants ---------------------------------------------------------------------------
    def _top_of_arrays(self) -> tuple[int, int, int, int]:
        top = [-1, -1, -1, -1]
        for side in (BIDS, ASKS):
            nblk = int(self._meta[side, 0])
            if nblk:
                b = self._order[side, nblk - 1]
                j = self._bn[side, b] - 1
                key = int(self._bk[side, b, j])
                top[2 * side] = -key if side == ASKS else key
                top[2 * side + 1] = int(self._bq[side, b, j])
        return (top[0], top[1], top[2], top[3])

    def _check(self) -> None:
        """Assert the builder's invariants (tests call it after every operation): each side's
        blocks non-empty and in key order with ``bmax`` their last keys, the free list and the
        order disjoint, keys strictly increasing overall (no repeated level), quantities > 0,
        ids exact in float64, the level count right; the cached top equals the arrays' best
        levels; a waiting builder holds no book and is asking for a snapshot (or has not been
        fed yet); a synchronized one has ``last_u``, no stale rows and no buffer; a crossed book
        was counted; tickers wait only ahead of the book; queued rows are in update order."""
        for side in (BIDS, ASKS):
            nblk, nfree, nlev, nalloc = (int(x) for x in self._meta[side])
            assert 0 <= nblk and 0 <= nfree and nblk + nfree == nalloc <= self._bk.shape[1]
            ids = self._order[side, :nblk]
            used = set(ids.tolist())
            assert len(used) == nblk and not used & set(self._free[side, :nfree].tolist())
            ns = self._bn[side, ids]
            assert ((ns > 0) & (ns <= _BLOCK)).all() and int(ns.sum()) == nlev
            keys, qty, tt = self._extract(side)
            assert nlev < 2 or (np.diff(keys) > 0).all(), f"side {side} not strictly sorted"
            if nblk:
                assert (self._bmax[side, :nblk] == self._bk[side, ids, ns - 1]).all(), "bmax out of step"
            assert (qty > 0).all() and (qty < MAX_MANTISSA).all(), f"side {side} has a zero/huge quantity"
            px = -keys if side == ASKS else keys
            assert ((px >= 0) & (px < MAX_MANTISSA)).all(), f"side {side} has an id out of range"
            assert np.isfinite(tt).all()
        assert self._top == self._top_of_arrays(), (self._top, self._top_of_arrays())
        if self._state == _WAIT:
            assert self._meta[:, 2].sum() == 0, "a waiting builder holds no book"
            assert self._need or (self.depth_events == 0 and self.resyncs == 0), "waiting without asking"
        else:
            assert self.last_u is not None and self._stale_rows is None and not self._buffer
            assert not self.is_crossed() or self._crossed_now, "crossed book not counted"
        if self._pending and self._state != _WAIT:
            assert self._pending[0][0].update_id >= self.last_u, "a ticker waits for an update already passed"
        assert self.updates >= self._taken
        start = self._checked_rows if self._checked_rows <= self._ok else 0   # rows since the last check
        lines = self._oi[max(start - 1, 0): self._ok, 2]
        assert self._ok == 0 or (self._oi[0, 2] > self._taken and lines[-1] <= self.updates
                                 and (np.diff(lines) >= 0).all()), "queued rows out of order"
        self._checked_rows = self._ok
