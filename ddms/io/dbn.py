"""Databento DBN market-by-order (MBO) files -> order-level bids/asks events per instrument.

The ONLY module importing ``databento_dbn`` (Databento's own decoder: the DBN layout and its zstd
framing are theirs to get right).  Two sans-I/O cores with one behaviour, MBO records in, events
out: :class:`MboReplay` (the default: the decoder's ``MBOMsg`` objects turned back into their
bytes, ``MBOMsg.__bytes__``, read as a numpy record array of the decoder's own dtype,
``MBOMsg._dtypes``, and applied run by run by the numba kernel of :mod:`ddms.io.kernels.mbo`) and
:class:`MboBook` (a Python book per record, the reference the tests compare the replay with; it
also takes anything with the fields of an ``MBOMsg``).  :func:`read_dbn` is the thin file
transport (plain or zstd-compressed ``.dbn``).

Semantics (Databento's documentation, schemas/mbo and the order-book example):

=========  =====================================================================================
action     book effect (per ``instrument_id``)
=========  =====================================================================================
``A`` Add  insert the order (``order_id``, ``side`` B/A, ``price``, ``size``); an id already
           resting is an error -- except in a snapshot (records flagged ``F_SNAPSHOT``): the first
           snapshot record after live records (or at the start of a stream: :meth:`MboBook.new_stream`,
           called for each file) CLEARS the instrument's book, so a snapshot replaces the book
           instead of adding its orders twice
``C``      remove ``size`` from the order (all of it: the order leaves the book); an unknown
           order or a size above the resting one is an error
``M``      give the order a new price and/or size (a delete plus an insert); an unknown order is
           treated as an Add (Databento's example does the same)
``R``      clear the instrument's book
``T`` ``F``  no book change (the cancel/modify that follows does it), counted
``N``      flags only, counted
=========  =====================================================================================

Atomic updates: one exchange event may span several records; the book is looked at (and the
engine's update ends) only after a record whose ``flags`` carry ``F_LAST`` (0x80).  Every event
gets one ``line`` number (1-based, over the file), so the engine applies it atomically.  After
each event the instrument's book is checked for crossing (best bid >= best ask): counted per
symbol in ``crossed`` (CME's pre-open auction can show a crossed book: reported, not an error).

Rows (relations ``bids`` = 0, ``asks`` = 1, schema ``(t, id, broker_id, volume, price)``): ``id``
the order id (exact in float64: ids >= 2**53 are an error), ``broker_id`` 0, ``volume`` the size,
``price`` ``price * 1e-9`` (DBN prices are int64 units of 1e-9), ``t`` ``ts_event`` in ms; the
batches' ``recv`` is the ``ts_recv`` (ns) of the event's last record (how inputs are merged).

Bad input: a semantic error above, an unknown action or side, a price or size out of range is an
:class:`~ddms.errors.InputError` naming the file and the 1-based record number, or with
``skip_bad`` a counted skip (the record changes nothing); a file the decoder refuses (not DBN,
damaged compression) is a :class:`~ddms.errors.ReplayError` after the records before the damage.

Cost (CME ESH4, 68,792 records, CPU): decoding is the Rust decoder's (~11 ms), the bytes of its
objects ~7 ms, the replay kernel ~9 ms: ``read_dbn`` ~2.5M records/s.  :class:`MboBook`: per
record a few dict operations, per event a ``SortedList`` read per side (~190k records/s).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import databento_dbn as dbn
import numpy as np
from sortedcontainers import SortedList

from ddms.errors import InputError, ReplayError
from ddms.io.events import EventBatch
from ddms.io.kernels import mbo as _k
from ddms.io.kernels.ordertable import EMPTY, new_table
from ddms.io.levels import ASKS, BIDS, ChunkEvents, SymbolEvents

__all__ = ["F_LAST", "F_SNAPSHOT", "MboBook", "MboReplay", "MboStatus", "read_dbn"]

F_LAST = int(dbn.F_LAST)
F_SNAPSHOT = int(dbn.F_SNAPSHOT)
PRICE_SCALE = 1e-9
UNDEF_PRICE = int(dbn.UNDEF_PRICE)
_SIDE = {"B": BIDS, "A": ASKS}
_MAX_ID = 2**53
_MAX_TS = 2**63 - 1       # receive times as int64 (EventBatch.recv)


@dataclass
class MboStatus:
    """Counters of one instrument: records by action, events (F_LAST), crossed events, orders
    resting, snapshots seen, modifies of unknown orders treated as adds, bad records skipped."""

    records: int = 0
    events: int = 0
    adds: int = 0
    cancels: int = 0
    modifies: int = 0
    clears: int = 0
    trades: int = 0
    fills: int = 0
    nones: int = 0
    snapshots: int = 0
    modify_as_add: int = 0
    crossed: int = 0
    bad: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class _Instrument:
    iid: int
    symbol: str
    pending: list = field(default_factory=list)   # rows (rel, sign, t, id, broker, volume, price) of the open event
    orders: dict[int, tuple[int, int, int, tuple]] = field(default_factory=dict)  # id -> side, price, size, row
    levels: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))            # price -> total size
    prices: tuple[SortedList, SortedList] = field(default_factory=lambda: (SortedList(), SortedList()))
    in_snapshot: bool = False
    recv: int = 0            # ts_recv (ns) of the instrument's last record: its event's receive time
    status: MboStatus = field(default_factory=MboStatus)


class MboBook:
    """Order books of every instrument in an MBO stream.  ``symbols`` maps instrument ids to
    names (default: the id as a string); ``source`` names the input in errors.  Feed records with
    :meth:`feed`; :meth:`take_events` hands out the rows of the events completed so far."""

    venue = "databento"

    def __init__(self, source: str = "<dbn>", *, symbols: dict[int, str] | None = None,
                 skip_bad: bool = False, max_samples: int = 10) -> None:
        self.source = source
        self.symbols = dict(symbols or {})
        self.skip_bad = skip_bad
        self.max_samples = max_samples
        self.instruments: dict[int, _Instrument] = {}
        self.records = 0
        self.events = 0                # completed events (F_LAST records)
        self.bad_records = 0
        self.bad_samples: list[InputError] = []
        self.other_records = 0         # records of other schemas (a transport counts them)
        self.schema: str | None = None   # the file's schema, from its metadata
        self._meta_seen = False
        self._rows: list = []   # rows of ended events: (rel, sign, t, id, broker, volume, price, line, iid, recv)

    # -- input ----------------------------------------------------------------------------------
    def _inst(self, iid: int) -> _Instrument:
        inst = self.instruments.get(iid)
        if inst is None:
            inst = self.instruments[iid] = _Instrument(iid, self.symbols.get(iid, str(iid)))
        return inst

    def feed(self, rec: Any) -> None:
        """Apply one MBO record.  Raises :class:`InputError` (source, record number, reason) for a
        bad record unless ``skip_bad``; a rejected record changes nothing."""
        self.records += 1
        n = self.records
        iid, flags = int(rec.instrument_id), int(rec.flags)
        inst = self._inst(iid)
        inst.recv = min(int(getattr(rec, "ts_recv", 0)), _MAX_TS)   # (uint64; UNDEF_TIMESTAMP is 2**64 - 1)
        try:
            try:
                action = str(rec.action.value if hasattr(rec.action, "value") else rec.action)
                side_s = str(rec.side.value if hasattr(rec.side, "value") else rec.side)
            except (ValueError, TypeError) as e:     # a byte that is no action/side the decoder knows
                raise self._err(f"unreadable action or side: {e}", n, rec) from None
            self._apply(inst, action, side_s, rec, flags, n)
        except InputError as e:
            if not self.skip_bad:
                raise
            self.bad_records += 1
            inst.status.bad += 1
            if len(self.bad_samples) < self.max_samples:
                self.bad_samples.append(e)
        if flags & F_LAST:
            self._end_event(inst)

    def feed_decoded(self, recs: Iterable[Any]) -> None:
        """Feed the decoder's records: MBO records one by one (:meth:`feed`), the others as
        :class:`MboReplay` handles them."""
        for r in recs:
            if isinstance(r, dbn.MBOMsg):
                self.feed(r)
            else:
                _other_record(self, r)

    def _known(self, iid: int) -> bool:
        return iid in self.instruments

    def _rename(self, iid: int, name: str) -> None:
        if iid in self.instruments:
            self.instruments[iid].symbol = name

    def new_stream(self) -> None:
        """The next records come from a new stream (another file or session): its snapshot
        replaces each instrument's book even when the previous stream ended in a snapshot.
        Without this call, a snapshot run straight after another is one snapshot, and its
        repeated order ids are refused as duplicates."""
        for inst in self.instruments.values():
            inst.in_snapshot = False

    def _err(self, reason: str, n: int, rec: Any) -> InputError:
        return InputError(reason, self.source, n, repr(rec)[:300])

    def _apply(self, inst: _Instrument, action: str, side_s: str, rec: Any, flags: int, n: int) -> None:
        st = inst.status
        st.records += 1
        if action in ("T", "F", "N"):
            if action == "T":
                st.trades += 1
            elif action == "F":
                st.fills += 1
            else:
                st.nones += 1
            return
        if action == "R":
            st.clears += 1
            self._clear(inst)
            inst.in_snapshot = bool(flags & F_SNAPSHOT)
            return
        if action not in ("A", "C", "M"):
            raise self._err(f"unknown action {action!r}", n, rec)
        side = _SIDE.get(side_s)
        oid = int(rec.order_id)
        if side is None:
            raise self._err(f"{action} record with side {side_s!r} (not B or A)", n, rec)
        if not 0 <= oid < _MAX_ID:
            raise self._err(f"order id {oid} is not exact in float64 (>= 2**53)", n, rec)
        price, size = int(rec.price), int(rec.size)
        snap = bool(flags & F_SNAPSHOT)
        if snap and not inst.in_snapshot:          # a snapshot starts: it replaces the book
            st.snapshots += 1
            self._clear(inst)
        inst.in_snapshot = snap
        t = float(rec.ts_event) / 1e6
        if action == "A":
            if oid in inst.orders:
                raise self._err(f"add of order {oid}, which is already resting", n, rec)
            self._check_values(price, size, n, rec)
            st.adds += 1
            self._insert(inst, oid, side, price, size, t)
        elif action == "C":
            old = inst.orders.get(oid)
            if old is None:
                raise self._err(f"cancel of order {oid}, which is not resting", n, rec)
            if not 0 < size <= old[2]:
                raise self._err(f"cancel of {size} from order {oid}, which rests with {old[2]}", n, rec)
            st.cancels += 1
            self._remove(inst, oid)
            if size < old[2]:
                self._insert(inst, oid, old[0], old[1], old[2] - size, t)
        else:
            self._check_values(price, size, n, rec)
            st.modifies += 1
            if oid in inst.orders:
                self._remove(inst, oid)
            else:
                st.modify_as_add += 1
            self._insert(inst, oid, side, price, size, t)

    def _check_values(self, price: int, size: int, n: int, rec: Any) -> None:
        if price == UNDEF_PRICE or not -(2**62) < price < 2**62:
            raise self._err(f"price {price} is undefined or out of range", n, rec)
        if not 0 < size < 2**31:
            raise self._err(f"size {size} is not a positive 32-bit count", n, rec)

    # -- book -------------------------------------------------------------------------------------
    def _insert(self, inst: _Instrument, oid: int, side: int, price: int, size: int, t: float) -> None:
        row = (t, float(oid), 0.0, float(size), price * PRICE_SCALE)
        inst.orders[oid] = (side, price, size, row)
        lv = inst.levels[side]
        if price in lv:
            lv[price] += size
        else:
            lv[price] = size
            inst.prices[side].add(price)
        inst.pending.append((side, 1, *row))

    def _remove(self, inst: _Instrument, oid: int) -> None:
        side, price, size, row = inst.orders.pop(oid)
        lv = inst.levels[side]
        left = lv[price] - size
        if left:
            lv[price] = left
        else:
            del lv[price]
            inst.prices[side].remove(price)
        inst.pending.append((side, -1, *row))

    def _clear(self, inst: _Instrument) -> None:
        for oid in list(inst.orders):
            self._remove(inst, oid)

    def _end_event(self, inst: _Instrument) -> None:
        """The instrument's event is complete: its rows get the next line number."""
        self.events += 1
        inst.status.events += 1
        if inst.pending:
            line, iid, recv = self.events, inst.iid, inst.recv
            self._rows.extend((*r, line, iid, recv) for r in inst.pending)
            inst.pending.clear()
        b, a = inst.prices
        if b and a and b[-1] >= a[0]:
            inst.status.crossed += 1

    # -- output -----------------------------------------------------------------------------------
    def take_events(self) -> list[SymbolEvents]:
        """Rows of the events completed so far (an instrument's records after its last F_LAST
        stay queued), one :class:`SymbolEvents` per run of consecutive rows of one instrument.
        O(rows)."""
        if not self._rows:
            return []
        rows, self._rows = self._rows, []
        return self._batches(rows)

    def flush(self) -> list[SymbolEvents]:
        """Every queued row, also of events the stream ended in the middle of (no F_LAST: each
        such instrument's open records become one last event)."""
        for inst in self.instruments.values():
            if inst.pending:
                self._end_event(inst)
        return self.take_events()

    def _batches(self, rows: list) -> list[SymbolEvents]:
        out = []
        a = np.array([r[:8] for r in rows], np.float64)
        inst_of = [r[8] for r in rows]
        recv = np.array([r[9] for r in rows], np.int64)
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or inst_of[i] != inst_of[start]:
                seg = a[start:i]
                line = seg[:, 7].astype(np.int64)
                out.append(SymbolEvents(self.venue, self.instruments[inst_of[start]].symbol, EventBatch(
                    seg[:, 0].astype(np.int8), seg[:, 1].astype(np.int8), np.ascontiguousarray(seg[:, 2:7]), line,
                    int(line[0]), int(line[-1]), recv=recv[start:i])))
                start = i
        return out

    def summary(self) -> dict[str, Any]:
        """Totals and ``symbols``: per-instrument counters plus resting orders."""
        syms = {}
        for inst in self.instruments.values():
            d = inst.status.as_dict()
            d["resting_orders"] = len(inst.orders)
            syms[inst.symbol] = d
        return {"records": self.records, "events": self.events, "bad_records": self.bad_records,
                "crossed": sum(s["crossed"] for s in syms.values()), "symbols": syms}

    def _check(self) -> None:
        """Per instrument: level totals and sorted prices agree with the resting orders."""
        for inst in self.instruments.values():
            for side in (BIDS, ASKS):
                tot: dict[int, int] = {}
                for s, p, q, _ in inst.orders.values():
                    assert q > 0
                    if s == side:
                        tot[p] = tot.get(p, 0) + q
                assert tot == inst.levels[side], inst.symbol
                assert list(inst.prices[side]) == sorted(tot), inst.symbol


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _symbols(meta: Any) -> dict[int, str]:
    """instrument_id -> raw symbol from the metadata's symbology mappings (when the file maps
    raw symbols to instrument ids)."""
    out: dict[int, str] = {}
    for raw, intervals in (getattr(meta, "mappings", None) or {}).items():
        for iv in intervals:
            sym = iv.get("symbol") if isinstance(iv, dict) else getattr(iv, "symbol", None)
            if isinstance(sym, str) and sym.isdigit():
                out[int(sym)] = str(raw)
    return out


def _reason(code: int, rec: Any, info: int) -> str:
    """The text of a bad record the replay kernel flagged: :class:`MboBook`'s wording, read from
    the decoded record the same way."""
    action = str(rec.action.value if hasattr(rec.action, "value") else rec.action)
    side_s = str(rec.side.value if hasattr(rec.side, "value") else rec.side)
    oid, price, size = int(rec.order_id), int(rec.price), int(rec.size)
    if code == _k.E_ACTION:
        return f"unknown action {action!r}"
    if code == _k.E_SIDE:
        return f"{action} record with side {side_s!r} (not B or A)"
    if code == _k.E_ID:
        return f"order id {oid} is not exact in float64 (>= 2**53)"
    if code == _k.E_DUP:
        return f"add of order {oid}, which is already resting"
    if code == _k.E_PRICE:
        return f"price {price} is undefined or out of range"
    if code == _k.E_SIZE:
        return f"size {size} is not a positive 32-bit count"
    if code == _k.E_CANCEL_UNKNOWN:
        return f"cancel of order {oid}, which is not resting"
    return f"cancel of {size} from order {oid}, which rests with {info}"


_MBO_DTYPE = np.dtype(dbn.MBOMsg._dtypes)
_ACTION_AT = _MBO_DTYPE.fields["action"][1]
_SIDE_AT = _MBO_DTYPE.fields["side"][1]
assert _MBO_DTYPE.itemsize == dbn.MBOMsg.size_hint, "the decoder's MBO record layout changed"
assert (F_LAST, F_SNAPSHOT, UNDEF_PRICE) == (_k.F_LAST, _k.F_SNAPSHOT, int(_k.UNDEF_PRICE))


def _grown(a: np.ndarray, rows: int, fill: int | None = 0) -> np.ndarray:
    """``a`` with at least ``rows`` rows (doubling; new rows ``fill``, or left unwritten for
    ``None``: no page is touched before the kernel writes it)."""
    if a.shape[0] >= rows:
        return a
    n = max(rows, 2 * a.shape[0], 16)
    out = np.empty((n, *a.shape[1:]), a.dtype) if fill is None else np.full((n, *a.shape[1:]), fill, a.dtype)
    out[:a.shape[0]] = a
    return out


class MboReplay:
    """The order books of every instrument of an MBO stream as arrays, applied by the numba
    kernel :func:`ddms.io.kernels.mbo.replay` one run of records at a time: the same events,
    counters and errors as :class:`MboBook` (the reference the tests compare it with), at a few
    million records/s instead of ~200k.  Feed decoded records with :meth:`feed_decoded` (what
    :func:`read_dbn` does; an :class:`MboBook` takes them too); :meth:`take_events` hands out the
    rows of the events completed so far.

    Output: per run of records, the rows of its completed events in event order, as one
    :class:`SymbolEvents` when they are of one instrument, else one
    :class:`~ddms.io.levels.ChunkEvents` (row ``i`` of ``symbols[sym[i]]``; ``split`` gives
    per-event objects).  Row for row (rel, sign, columns, line, recv, symbol) the events equal
    :class:`MboBook`'s; only the cut into objects differs where instruments interleave.

    Cost: per record O(1) expected (see the kernel module) plus, per run, the decoder's objects
    turned into one byte string (``MBOMsg.__bytes__``, ~0.1 us a record) read as a numpy record
    array, and numpy work over the run (instrument slots, capacity checks)."""

    venue = "databento"

    def __init__(self, source: str = "<dbn>", *, symbols: dict[int, str] | None = None,
                 skip_bad: bool = False, max_samples: int = 10) -> None:
        self.source = source
        self.symbols = dict(symbols or {})
        self.skip_bad = skip_bad
        self.max_samples = max_samples
        self.bad_samples: list[InputError] = []
        self.other_records = 0
        self.schema: str | None = None
        self._meta_seen = False
        self._slot: dict[int, int] = {}      # instrument_id -> slot (first appearance order)
        self._iids: list[int] = []
        self._names: list[str] = []
        self._out: list[tuple] = []          # (of, orel, osign, oline, orecv, osym) of runs not taken
        keys, vals, shift = new_table()
        self._keys, self._vals, self._tmeta = keys, vals, np.array([shift], np.int64)
        self._os = np.zeros((0, _k.O_WIDTH), np.int64)
        self._ot = np.zeros(0, np.float64)
        self._ss = np.zeros((0, _k.SS_WIDTH), np.int64)
        self._g = np.zeros(_k.G_WIDTH, np.int64)
        self._g[_k.G_FREE] = -1
        self._bm = np.zeros((0, 3), np.int64)
        self._la = np.zeros((1024, 2), np.int64)
        self._sf = np.zeros((0, 5), np.float64)
        self._si = np.zeros((0, 3), np.int64)

    # -- counters ---------------------------------------------------------------------------------
    @property
    def records(self) -> int:
        return int(self._g[_k.G_RECORDS])

    @property
    def events(self) -> int:
        return int(self._g[_k.G_EVENTS])

    @property
    def bad_records(self) -> int:
        return int(self._g[_k.G_BAD])

    # -- input ------------------------------------------------------------------------------------
    def _slot_of(self, iid: int) -> int:
        s = self._slot.get(iid)
        if s is None:
            s = self._slot[iid] = len(self._iids)
            self._iids.append(iid)
            self._names.append(self.symbols.get(iid, str(iid)))
        return s

    def _known(self, iid: int) -> bool:
        return iid in self._slot

    def _rename(self, iid: int, name: str) -> None:
        if iid in self._slot:
            self._names[self._slot[iid]] = name

    def feed_decoded(self, recs: list[Any]) -> None:
        """Apply the decoder's records in order: MBO records in runs (one kernel call each),
        metadata and symbol mappings as :class:`MboBook` handles them, other records counted.
        Raises :class:`InputError` for a bad MBO record unless ``skip_bad`` (the events before
        it stay queued)."""
        mbo = dbn.MBOMsg
        start = 0
        while start < len(recs) and type(recs[start]) is not mbo:    # the metadata first
            _other_record(self, recs[start])
            start += 1
        if start == len(recs):
            return
        run = recs[start:] if start else recs
        try:     # the common case: the rest is MBO (a record of another type fails the join)
            data = b"".join(map(_MBO_BYTES, run))
        except TypeError:
            at = start
            for j in [j for j, t in enumerate(map(type, run), start) if t is not mbo]:
                if j > at:
                    part = recs[at:j]
                    self._feed_run(part, b"".join(map(_MBO_BYTES, part)))
                _other_record(self, recs[j])
                at = j + 1
            if at < len(recs):
                part = recs[at:]
                self._feed_run(part, b"".join(map(_MBO_BYTES, part)))
            return
        self._feed_run(run, data)

    def _slots(self, iid: np.ndarray) -> np.ndarray:
        """The slot of each record's instrument (new instruments get slots in order of first
        appearance).  O(n) for one instrument, O(n log n) (``np.unique``) for several."""
        first = int(iid[0])
        if (iid == first).all():
            return np.full(iid.shape[0], self._slot_of(first), np.int32)
        u, at, inv = np.unique(iid, return_index=True, return_inverse=True)
        for j in np.argsort(at, kind="stable").tolist():
            self._slot_of(int(u[j]))
        return np.array([self._slot[x] for x in u.tolist()], np.int32)[inv.reshape(-1)]

    def _reserve(self, n: int, clears: bool) -> int:
        """Grow the state for a run of ``n`` records; returns the rows the run can emit: per
        record at most one delete and one insert, plus every resting order when the run holds a
        clear or a snapshot (each order is deleted once)."""
        nslots = len(self._iids)
        if self._ss.shape[0] < nslots:
            old = self._ss.shape[0]
            self._ss = _grown(self._ss, nslots)
            self._ss[old:, _k.SS_PHEAD:_k.SS_OTAIL + 1] = -1
            self._bm = _grown(self._bm, 2 * self._ss.shape[0])
        g = self._g
        top = int(g[_k.G_TOP]) + n
        self._os = _grown(self._os, top, None)
        self._ot = _grown(self._ot, top, None)
        rows = 2 * n + (int(g[_k.G_LIVE]) if clears else 0)
        staged = int(g[_k.G_STAGED]) + rows
        self._sf = _grown(self._sf, staged, None)
        self._si = _grown(self._si, staged, None)
        return staged

    def _outputs(self, rows: int) -> tuple[np.ndarray, ...]:
        return (np.empty((rows, 5), np.float64), np.empty(rows, np.int8), np.empty(rows, np.int8),
                np.empty(rows, np.int64), np.empty(rows, np.int64), np.empty(rows, np.int32))

    def _feed_run(self, recs: list[Any], data: bytes) -> None:
        size = _MBO_DTYPE.itemsize
        if len(data) != size * len(recs):
            # a record whose header claims more than an MBO record's length: the decoder reads
            # the fields from its first bytes (and so does MboBook), its bytes are all of it
            data = b"".join(bytes(r)[:size] for r in recs)
            if len(data) != size * len(recs):
                raise ReplayError(f"an MBO record shorter than {size} bytes after {self.records:,} records",
                                  self.source)
        arr = np.frombuffer(data, _MBO_DTYPE)
        n = arr.shape[0]
        u8 = np.frombuffer(data, np.uint8).reshape(n, _MBO_DTYPE.itemsize)
        action, flags = u8[:, _ACTION_AT], arr["flags"]
        known = len(self._iids)
        slots = self._slots(arr["instrument_id"])
        clears = bool((action == ord("R")).any() or (flags & F_SNAPSHOT).any())
        out = self._outputs(self._reserve(n, clears))
        base = self.records
        bad = np.zeros((max(self.max_samples - len(self.bad_samples), 0), 3), np.int64)
        err = np.zeros(2, np.int64)
        stop, no, self._keys, self._vals, self._la, nbad = _k.replay(
            slots, arr["ts_event"], arr["ts_recv"].view(np.int64), arr["order_id"].view(np.int64), arr["price"],
            arr["size"], flags, action, u8[:, _SIDE_AT], self.skip_bad,
            self._keys, self._vals, self._tmeta, self._os, self._ot, self._ss, self._g, self._bm, self._la,
            self._sf, self._si, *out, bad, err)
        if no:
            self._out.append(tuple(a[:no] for a in out))
        for k, code, info in bad[:nbad].tolist():
            r = recs[k]
            self.bad_samples.append(InputError(_reason(code, r, info), self.source, base + k + 1, repr(r)[:300]))
        if stop >= 0:       # instruments first met after the bad record were never met
            keep = max(int(slots[:stop + 1].max()) + 1, known)
            for iid in self._iids[keep:]:
                del self._slot[iid]
            del self._iids[keep:], self._names[keep:]
            r = recs[stop]
            raise InputError(_reason(int(err[0]), r, int(err[1])), self.source, base + stop + 1, repr(r)[:300])

    def new_stream(self) -> None:
        """As :meth:`MboBook.new_stream`: the next snapshot of each instrument replaces its book."""
        self._ss[:, _k.SS_SNAP] = 0

    # -- output -----------------------------------------------------------------------------------
    def take_events(self) -> list[SymbolEvents | ChunkEvents]:
        """Rows of the events completed so far, per run of records (see the class)."""
        out: list[SymbolEvents | ChunkEvents] = []
        for of, orel, osign, oline, orecv, osym in self._out:
            b = EventBatch(orel, osign, of, oline, int(oline[0]), int(oline[-1]), recv=orecv)
            s0 = int(osym[0])
            if (osym == s0).all():
                out.append(SymbolEvents(self.venue, self._names[s0], b))
            else:
                out.append(ChunkEvents(self.venue, list(self._names), osym, b))
        self._out.clear()
        return out

    def flush(self) -> list[SymbolEvents | ChunkEvents]:
        """Every queued row, also of events the stream ended in the middle of (no F_LAST)."""
        rows = int(self._g[_k.G_STAGED])
        if rows:
            out = self._outputs(rows)
            no = _k.flush(self._ss, self._g, self._si, self._sf, self._bm, self._la, *out)
            self._out.append(tuple(a[:no] for a in out))
        return self.take_events()

    def summary(self) -> dict[str, Any]:
        """As :meth:`MboBook.summary`."""
        syms = {}
        for s, name in enumerate(self._names):
            d = dict(zip(_k.STATUS_FIELDS, self._ss[s, :len(_k.STATUS_FIELDS)].tolist(), strict=True))
            d["resting_orders"] = int(self._ss[s, _k.SS_RESTING])
            syms[name] = d
        return {"records": self.records, "events": self.events, "bad_records": self.bad_records,
                "crossed": sum(s["crossed"] for s in syms.values()), "symbols": syms}

    def orders(self, iid: int) -> dict[int, tuple[int, int, int]]:
        """The resting orders of instrument ``iid`` in insertion order: id -> (side, price, size)."""
        out: dict[int, tuple[int, int, int]] = {}
        slot = self._slot.get(iid)
        if slot is None:
            return out
        s = int(self._ss[slot, _k.SS_OHEAD])
        while s >= 0:
            o = self._os[s].tolist()
            out[o[_k.O_ID]] = (o[_k.O_SIDE], o[_k.O_PRICE], o[_k.O_SIZE])
            s = o[_k.O_NEXT]
        return out

    def _check(self) -> None:
        """Per instrument: the order list, the table and the level runs agree (sorted keys,
        totals of the resting orders); every staged row belongs to one open event.  O(orders)."""
        shift = int(self._tmeta[0])
        cap = self._keys.shape[0]
        assert cap & (cap - 1) == 0 and cap == 1 << (64 - shift)
        for i in np.flatnonzero(self._keys != EMPTY).tolist():    # reachable (ids may repeat: by slot)
            assert _k.order_find(self._keys, self._vals, shift, self._keys[i], int(self._vals[i, 3])) == i
        live = 0
        for slot, iid in enumerate(self._iids):
            orders = self.orders(iid)
            assert len(orders) == self._ss[slot, _k.SS_RESTING], self._names[slot]
            live += len(orders)
            tot: tuple[dict, dict] = ({}, {})
            for oid, (side, price, size) in orders.items():
                assert size > 0
                i = int(_k.order_find(self._keys, self._vals, int(self._tmeta[0]), oid, slot))
                assert i >= 0 and self._os[int(self._vals[i, 0]), _k.O_ID] == oid
                key = price if side == BIDS else -price
                tot[side][key] = tot[side].get(key, 0) + size
            for side in (BIDS, ASKS):
                off, _, cnt = self._bm[2 * slot + side].tolist()
                run = self._la[off:off + cnt]
                assert run[:, 0].tolist() == sorted(tot[side]), self._names[slot]
                assert dict(zip(run[:, 0].tolist(), run[:, 1].tolist(), strict=True)) == tot[side]
        assert live == self._g[_k.G_LIVE] == self._g[_k.G_TABLE] == int((self._keys != EMPTY).sum())
        staged = 0
        for slot in range(len(self._iids)):
            r = int(self._ss[slot, _k.SS_PHEAD])
            while r >= 0:
                staged += 1
                r = int(self._si[r, 2])
        assert staged == self._g[_k.G_STAGED]


_MBO_BYTES = dbn.MBOMsg.__bytes__


def read_dbn(path: str | os.PathLike, *, skip_bad: bool = False, book: MboReplay | MboBook | None = None,
             chunk_bytes: int = 1 << 20) -> Iterator[SymbolEvents | ChunkEvents]:
    """Read a DBN MBO file (plain or zstd-compressed, by its magic bytes) into per-instrument
    events; symbols from the file's metadata.  Pass ``book`` to read its summary afterwards (an
    :class:`MboReplay`, the default, or the reference :class:`MboBook`).  Records of other
    schemas are counted in ``book.other_records`` and skipped.  Raises :class:`ReplayError` for
    a file the decoder refuses or that ends inside a record, after yielding the events before;
    :class:`InputError` for a bad record (see :class:`MboBook`)."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ReplayError("no such file", p)
    if os.path.isdir(p):
        raise ReplayError("is a directory, not a data file", p)
    with open(p, "rb") as f:
        zstd = f.read(4) == _ZSTD_MAGIC
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE)
    bk = book if book is not None else MboReplay(p, skip_bad=skip_bad)
    bk.new_stream()
    with open(p, "rb") as f:
        while True:
            data = f.read(chunk_bytes)
            if not data:
                break
            try:
                recs = dec.write_and_decode(data)
            except BaseException as e:   # noqa: BLE001 - the Rust decoder also panics (a BaseException)
                if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
                    raise
                yield from bk.flush()
                raise ReplayError(f"not readable as DBN after {bk.records:,} records: {str(e)[:300]}", p) from None
            bk.feed_decoded(recs)
            yield from bk.take_events()
    try:
        left = len(dec.buffer())
    except BaseException as e:   # noqa: BLE001 - as above
        if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            raise
        left, why = -1, str(e)[:300]
    yield from bk.flush()
    if left:
        raise ReplayError(f"the file ends inside a record after {bk.records:,} records "
                          f"({why if left < 0 else f'{left} bytes left over'}): truncated?", p)
    if bk.records == 0 and bk.other_records == 0 and not bk._meta_seen:
        raise ReplayError("no DBN metadata or records", p)
    if bk.records == 0 and bk.other_records:
        raise ReplayError(f"no market-by-order (MBO) records: {bk.other_records:,} records of another schema "
                          f"({bk.schema or 'unknown'}); only MBO files are books of orders", p)


def _other_record(bk: MboReplay | MboBook, r: Any) -> None:
    """A decoded record that is no MBO record: the metadata (schema, symbols), a symbol mapping
    (a live session names its instruments in the stream), or another record (counted)."""
    if isinstance(r, dbn.Metadata):
        bk._meta_seen = True
        bk.schema = str(r.schema) if r.schema is not None else None
        for iid, sym in _symbols(r).items():
            bk.symbols.setdefault(iid, sym)
            bk._rename(iid, bk.symbols[iid])
    elif isinstance(r, _MAPPING_MSGS):
        name = _mapped_symbol(r)
        if name and not bk._known(r.instrument_id):
            bk.symbols.setdefault(r.instrument_id, name)
    else:
        bk.other_records += 1


_MAPPING_MSGS = tuple(getattr(dbn, n) for n in ("SymbolMappingMsg", "SymbolMappingMsgV1") if hasattr(dbn, n))


def _mapped_symbol(r: Any) -> str | None:
    """The publisher's (raw) symbol a ``SymbolMappingMsg`` gives its instrument id: the output
    symbol (a live session maps what was subscribed, e.g. ``ES.c.0``, to the raw symbol), or the
    input symbol where the output is the id itself (a raw-symbol to instrument-id mapping)."""
    for name in (getattr(r, "stype_out_symbol", None), getattr(r, "stype_in_symbol", None)):
        if isinstance(name, str) and name.strip() and name != str(r.instrument_id):
            return name
    return None
