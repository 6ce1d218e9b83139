"""Databento DBN market-by-order (MBO) files -> order-level bids/asks events per instrument.

The ONLY module importing ``databento_dbn`` (Databento's own decoder: the DBN layout and its zstd
framing are theirs to get right).  :class:`MboBook` is the sans-I/O core: MBO records in (the
decoder's ``MBOMsg`` objects, or anything with the same fields), events out;
:func:`read_dbn` is the thin file transport (plain or zstd-compressed ``.dbn``).

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

Cost: per record a few dict operations; per event one ``SortedList`` top-of-book read per side;
decoding is the Rust decoder's (about 4M records/s).
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
from ddms.io.levels import ASKS, BIDS, SymbolEvents

__all__ = ["F_LAST", "F_SNAPSHOT", "MboBook", "MboStatus", "read_dbn"]

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


def read_dbn(path: str | os.PathLike, *, skip_bad: bool = False, book: MboBook | None = None,
             chunk_bytes: int = 1 << 20) -> Iterator[SymbolEvents]:
    """Read a DBN MBO file (plain or zstd-compressed, by its magic bytes) into per-instrument
    events; symbols from the file's metadata.  Pass ``book`` to read its summary afterwards.
    Records of other schemas are counted in ``book.other_records`` and skipped.  Raises
    :class:`ReplayError` for a file the decoder refuses or that ends inside a record, after
    yielding the events before; :class:`InputError` for a bad record (see :class:`MboBook`)."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ReplayError("no such file", p)
    if os.path.isdir(p):
        raise ReplayError("is a directory, not a data file", p)
    with open(p, "rb") as f:
        zstd = f.read(4) == _ZSTD_MAGIC
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD if zstd else dbn.Compression.NONE)
    bk = book if book is not None else MboBook(p, skip_bad=skip_bad)
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
            _feed_all(bk, recs)
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


def _feed_all(bk: MboBook, recs: Iterable[Any]) -> None:
    for r in recs:
        if isinstance(r, dbn.MBOMsg):
            bk.feed(r)
        elif isinstance(r, dbn.Metadata):
            bk._meta_seen = True
            bk.schema = str(r.schema) if r.schema is not None else None
            for iid, sym in _symbols(r).items():
                bk.symbols.setdefault(iid, sym)
                if iid in bk.instruments:
                    bk.instruments[iid].symbol = bk.symbols[iid]
        elif isinstance(r, _MAPPING_MSGS):
            # a live session names its instruments in the stream, not in the metadata
            name = _mapped_symbol(r)
            if name and r.instrument_id not in bk.instruments:
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
