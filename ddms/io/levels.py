"""Per-symbol price-level books kept on the exact decimal strings a venue sends (sans-I/O).

Why exact strings: Kraken's and OKX's checksums are CRC32s of the price and size strings *as
sent* ("0.000022900" and "0.0000229" are the same price but not the same checksum text), so a
float round trip would break them; and comparing a ticker with the book must not round either.
A level is keyed by its price as an integer at a fixed scale of :data:`KEY_DECIMALS` decimals
(Python ints: exact and unbounded, so any plain decimal string a venue sends sorts exactly),
and keeps the strings it was last set with.

Engine rows (relations ``bids`` = 0 and ``asks`` = 1, schema ``(t, id, broker_id, volume,
price)``, one row per price level, as the Binance core does): ``id`` = the price times
``10**scale`` (an integer, exact in float64), ``broker_id`` 0, ``volume``/``price`` the floats of
the strings (correctly rounded), ``t`` the event time of the message that set the level.  A
level change is a delete of the old row plus an insert of the new one.  ``scale`` is the largest
number of price decimals seen for the symbol; a finer price re-bases every row's id within the
same update (deletes and inserts, one atomic update), so ids stay unique and stable in between.
Rows carry the input line of the message: every message is one atomic update for the engine.

:class:`SymbolStatus` holds a symbol's counters (the per-symbol part of a monitor summary);
:class:`Resync` is the action a venue core returns when a symbol needs a fresh snapshot (or a
resubscription): continuity or checksum broken, never guessed past.

Cost: a level update is a dict lookup plus, when a level appears or disappears, a
``SortedList`` insert/remove (O(log n)); a top-k read for a checksum is O(k).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from sortedcontainers import SortedList

from ddms.io.events import EventBatch
from ddms.io.schema import ASKS, BIDS

__all__ = ["ASKS", "BIDS", "KEY_DECIMALS", "ChunkEvents", "LevelBook", "Resync", "SymbolEvents", "SymbolStatus",
           "check_decimal", "event_symbols", "per_symbol", "price_key"]

KEY_DECIMALS = 18
"""Price keys are integers at this many decimals (a venue sending more is refused)."""
MAX_ID = 2**53
_DEC = re.compile(r"([0-9]+)(?:\.([0-9]*))?\Z")


def price_key(text: str) -> tuple[int, int]:
    """``"123.4500"`` -> ``(123450000000000000000, 4)``: the value times ``10**KEY_DECIMALS``
    (exact) and the number of decimals as written.  Raises ValueError for anything but a plain
    non-negative decimal with at most :data:`KEY_DECIMALS` decimals.  O(len(text)); memoized
    (a feed repeats its price and size strings: a hit is one dict lookup)."""
    if type(text) is not str:
        raise ValueError(f"not a plain decimal string: {text!r}")
    return _price_key(text)


@functools.lru_cache(maxsize=1 << 16)
def _price_key(text: str) -> tuple[int, int]:
    m = _DEC.match(text)
    if m is None:
        raise ValueError(f"not a plain decimal string: {text!r}")
    frac = m.group(2) or ""
    if len(frac) > KEY_DECIMALS or len(m.group(1)) > 30:
        raise ValueError(f"decimal out of range (more than {KEY_DECIMALS} decimals or 30 digits): {text!r}")
    return int(m.group(1) + frac.ljust(KEY_DECIMALS, "0")), len(frac.rstrip("0")) if frac else 0


_DECIMALS: dict[str, tuple[int, int, float]] = {}
_DECIMALS_MAX = 1 << 16
_DIV = tuple(10 ** (KEY_DECIMALS - s) for s in range(KEY_DECIMALS + 1))   # key // _DIV[scale] = id


def check_decimal(text: str) -> None:
    """Raise ValueError unless :func:`price_key` reads ``text``; a string seen before costs one
    dict lookup (the venue cores validate every price and size before their book changes)."""
    try:
        _DECIMALS[text]
    except (KeyError, TypeError):
        _decimal(text)


def _decimal(text: str) -> tuple[int, int, float]:
    """:func:`price_key` plus ``float(text)``, memoized in a dict (:meth:`LevelBook.set` looks
    every price and size up: a hit is one dict lookup, no call).  Raises ValueError as
    :func:`price_key` does."""
    key, dec = price_key(text)
    if len(_DECIMALS) >= _DECIMALS_MAX:
        _DECIMALS.clear()
    v = _DECIMALS[text] = (key, dec, float(text))
    return v


@dataclass(frozen=True)
class Resync:
    """Action: ``symbol``'s book is discarded and needs a fresh snapshot (REST) or a
    resubscription (websocket-only venues); ``line`` is the input line (message number) that made
    the core ask, ``reason`` says why."""

    symbol: str
    reason: str
    line: int


@dataclass(frozen=True)
class SymbolEvents:
    """The engine rows of one symbol from one or more consecutive messages: the unit a
    multi-symbol reader yields (a ``symbol`` column can be filled from it later)."""

    venue: str
    symbol: str
    batch: EventBatch


@dataclass(frozen=True)
class ChunkEvents:
    """The engine rows of many consecutive messages of many symbols as one batch: what a chunk
    lane hands out per kernel run (:mod:`ddms.io.venues.coinbase_chunk`) instead of one
    :class:`SymbolEvents` per message -- building those cost more than the kernel's work for a
    message of one or two levels.  Row ``i`` is of symbol ``symbols[sym[i]]``; rows are in
    message order and ``batch.line`` numbers each row's message, so every message stays one
    atomic update (views are looked at between lines) exactly as with the per-message objects:
    :meth:`split` gives those objects back.  ``symbols`` is the lane's list of slot names
    (append-only: an index never changes its name)."""

    venue: str
    symbols: list[str]
    sym: np.ndarray
    batch: EventBatch

    def names(self) -> list[str]:
        """The symbols of the rows, in order of first appearance.  O(rows log rows)."""
        idx, first = np.unique(self.sym, return_index=True)
        return [self.symbols[i] for i in idx[np.argsort(first, kind="stable")].tolist()]

    def split(self) -> list[SymbolEvents]:
        """One :class:`SymbolEvents` per run of rows of one symbol and one message: the events
        the per-message path gives for the same messages (lines, arrays and dtypes equal).
        O(rows) in numpy plus one object per run."""
        b, sym = self.batch, self.sym
        n = len(b)
        if n == 0:
            return []
        cut = np.flatnonzero((sym[1:] != sym[:-1]) | (b.line[1:] != b.line[:-1])) + 1
        starts, ends = [0, *cut.tolist()], [*cut.tolist(), n]
        lines, syms = b.line[starts].tolist(), sym[starts].tolist()
        out = []
        for a, e, line, s in zip(starts, ends, lines, syms, strict=True):
            out.append(SymbolEvents(self.venue, self.symbols[s], EventBatch(
                b.rel[a:e], b.sign[a:e], b.cols[a:e], b.line[a:e], line, line,
                recv=None if b.recv is None else b.recv[a:e])))
        return out


def per_symbol(events: list[SymbolEvents | ChunkEvents]) -> list[SymbolEvents]:
    """``events`` with every :class:`ChunkEvents` split into its :class:`SymbolEvents`."""
    out: list[SymbolEvents] = []
    for ev in events:
        if type(ev) is ChunkEvents:
            out += ev.split()
        else:
            out.append(ev)
    return out


def event_symbols(ev: SymbolEvents | ChunkEvents) -> list[str]:
    """The symbols whose rows ``ev`` holds, in order of first appearance."""
    return ev.names() if type(ev) is ChunkEvents else [ev.symbol]


_STATUS_INT = ("messages", "depth_events", "snapshots", "level_updates", "gaps", "resyncs", "stale", "malformed",
               "checksum_checked", "checksum_mismatch", "crossed", "bookticker_checked", "bookticker_mismatch",
               "ticker_checked", "ticker_disagree", "truncated")


@dataclass
class SymbolStatus:
    """Counters of one symbol.  ``synced``: a snapshot applied and no break since; ``gaps``:
    continuity breaks; ``resyncs``: books discarded (gaps, checksum mismatches, malformed book
    messages); ``stale``: duplicate/late messages dropped; ``checksum_checked/_mismatch``;
    ``crossed``: updates after which best bid >= best ask; ``bookticker_checked/_mismatch``: the
    exact top-of-book check (Binance); ``ticker_checked/ticker_disagree``: the soft one (Coinbase's
    ticker channel is not ordered with level2); ``truncated``: levels dropped beyond the
    subscribed depth."""

    synced: bool = False
    messages: int = 0
    depth_events: int = 0
    snapshots: int = 0
    level_updates: int = 0
    gaps: int = 0
    resyncs: int = 0
    stale: int = 0
    malformed: int = 0
    checksum_checked: int = 0
    checksum_mismatch: int = 0
    crossed: int = 0
    bookticker_checked: int = 0
    bookticker_mismatch: int = 0
    ticker_checked: int = 0
    ticker_disagree: int = 0
    truncated: int = 0

    def as_dict(self) -> dict[str, int | bool]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(slots=True)
class _Level:
    px: str
    qty: str
    row: tuple[float, float, float, float, float]   # t, id, broker, volume, price as emitted


@dataclass
class LevelBook:
    """One symbol's price-level book and its pending engine rows (see the module docstring).
    ``source`` names the input in reports.  Mutated only through :meth:`set`, :meth:`clear`,
    :meth:`truncate`; :meth:`take` hands out the rows."""

    symbol: str
    scale: int = 0
    keys: tuple[SortedList, SortedList] = field(default_factory=lambda: (SortedList(), SortedList()))
    levels: tuple[dict, dict] = field(default_factory=lambda: ({}, {}))
    _rows: list = field(default_factory=list)      # (rel, sign, t, id, volume, price, line)
    _stale: list | None = None                     # rows the engine holds for a discarded book
    # a chunk lane holding this book's levels in numba arrays (e.g. CoinbaseLane): every method
    # first hands them back (``_ext.pull(self)``), so Python never sees a stale book
    _ext: Any = field(default=None, repr=False, compare=False)

    # -- reads --------------------------------------------------------------------------------
    def depth(self, side: int) -> int:
        if self._ext is not None:
            self._ext.pull(self)
        return len(self.keys[side])

    def top(self, side: int, n: int) -> list[tuple[str, str]]:
        """The best ``n`` levels of ``side`` as ``(price, qty)`` strings as last sent, best
        first.  O(n)."""
        if self._ext is not None:
            self._ext.pull(self)
        ks = self.keys[side]
        lv = self.levels[side]
        # sortedcontainers keeps the list as sorted sublists (``_lists``, ~1,000 keys each): the
        # best n are nearly always all in the first (asks) or last (bids) one -- a slice, where
        # islice builds an iterator chain (which was most of a Kraken checksum's cost)
        parts = ks._lists
        if side == BIDS:
            it = parts[-1][:-n - 1:-1] if parts and len(parts[-1]) >= n else ks.islice(
                max(len(ks) - n, 0), len(ks), reverse=True)
        else:
            it = parts[0][:n] if parts and len(parts[0]) >= n else ks.islice(0, n)
        return [(v.px, v.qty) for v in map(lv.__getitem__, it)]

    def best_key(self, side: int) -> int | None:
        if self._ext is not None:
            self._ext.pull(self)
        parts = self.keys[side]._lists      # see top()
        if not parts:
            return None
        return parts[-1][-1] if side == BIDS else parts[0][0]

    def is_crossed(self) -> bool:
        if self._ext is not None:
            self._ext.pull(self)
        b, a = self.best_key(BIDS), self.best_key(ASKS)
        return b is not None and a is not None and b >= a

    def as_dict(self, side: int) -> dict[int, str]:
        """``price key -> qty string`` of a side (a copy, for tests)."""
        if self._ext is not None:
            self._ext.pull(self)
        return {k: v.qty for k, v in self.levels[side].items()}

    # -- writes -------------------------------------------------------------------------------
    def set(self, side: int, px: str, qty: str, t: float, line: int) -> None:
        """Set the level at price ``px`` to the absolute size ``qty`` (a zero size removes it).
        Raises ValueError (nothing changed) for a price or size that is not a plain decimal, and
        RuntimeError on a discarded book (its old rows are still in the engine: a snapshot must
        :meth:`clear` it first)."""
        if self._ext is not None:
            self._ext.pull(self)
        if self._stale is not None:
            raise RuntimeError(f"{self.symbol}: set() on a discarded book; clear() it first (a snapshot)")
        try:
            key, dec, fpx = _DECIMALS[px]
        except (KeyError, TypeError):
            key, dec, fpx = _decimal(px)
        try:
            qkey, _, fqty = _DECIMALS[qty]
        except (KeyError, TypeError):
            qkey, _, fqty = _decimal(qty)
        if dec > self.scale:
            f = _DIV[dec]
            top = max([key, *(ks[-1] for ks in self.keys if ks)])
            if top // f >= MAX_ID:
                raise ValueError(f"price {px} (or a level of the book) at {dec} decimals is not exact in float64")
            self._rebase(dec, line)
            pid = key // f
        else:
            # at an unchanged scale the resting keys were checked when set: only the new one can fail
            pid = key // _DIV[self.scale]
            if pid >= MAX_ID:
                raise ValueError(f"price {px} (or a level of the book) at {self.scale} decimals is not exact "
                                 "in float64")
        lv = self.levels[side]
        old = lv.get(key)
        if old is not None:
            self._rows.append((side, -1, *old.row, line))
            if qkey == 0:
                del lv[key]
                self.keys[side].remove(key)
                return
        elif qkey == 0:
            return
        else:
            self.keys[side].add(key)
        row = (float(t), float(pid), 0.0, fqty, fpx)
        lv[key] = _Level(px, qty, row)
        self._rows.append((side, 1, *row, line))

    def truncate(self, depth: int, line: int) -> int:
        """Drop the levels beyond the best ``depth`` of each side (deletes emitted); returns how
        many were dropped.  O(dropped * log n)."""
        if self._ext is not None:
            self._ext.pull(self)
        dropped = 0
        for side in (BIDS, ASKS):
            ks = self.keys[side]
            for _ in range(len(ks) - depth):
                key = ks.pop(0) if side == BIDS else ks.pop()
                old = self.levels[side].pop(key)
                self._rows.append((side, -1, *old.row, line))
                dropped += 1
        return dropped

    def discard(self) -> None:
        """Forget the book (a resync): its rows stay in the engine until :meth:`clear` at the next
        snapshot deletes them, so views keep the last good state meanwhile."""
        if self._ext is not None:
            self._ext.pull(self)
        stale = [(side, -1, *v.row) for side in (BIDS, ASKS) for v in self.levels[side].values()]
        self._stale = (self._stale or []) + stale
        self.keys[BIDS].clear()
        self.keys[ASKS].clear()
        self.levels[BIDS].clear()
        self.levels[ASKS].clear()

    def clear(self, line: int) -> None:
        """Empty the book before a snapshot: deletes of every row the engine holds."""
        if self._ext is not None:
            self._ext.pull(self)
        self.discard()
        for r in self._stale or ():
            self._rows.append((*r, line))
        self._stale = None

    def _rebase(self, scale: int, line: int) -> None:
        """A finer price than the scale: every row's id is re-emitted at the new scale."""
        if self._ext is not None:
            self._ext.pull(self)
        f = 10 ** (KEY_DECIMALS - scale)
        for side in (BIDS, ASKS):
            for key, v in self.levels[side].items():
                self._rows.append((side, -1, *v.row, line))
                t, _, b, vol, px = v.row
                v.row = (t, float(key // f), b, vol, px)
                self._rows.append((side, 1, *v.row, line))
        self.scale = scale

    def take_rows(self) -> list[tuple]:
        """The rows queued since the last call as tuples ``(rel, sign, t, id, broker_id, volume,
        price, line)``, without building arrays (a caller gathering many symbols' rows in order
        builds them once).  O(1)."""
        if self._ext is not None:
            self._ext.pull(self)
        rows, self._rows = self._rows, []
        return rows

    def take(self) -> EventBatch | None:
        """The rows queued since the last call as one batch (None if there are none).  O(rows)."""
        if self._ext is not None:
            self._ext.pull(self)
        rows = self._rows
        if not rows:
            return None
        self._rows = []
        a = np.array(rows, np.float64)
        line = a[:, 7].astype(np.int64)
        return EventBatch(a[:, 0].astype(np.int8), a[:, 1].astype(np.int8), np.ascontiguousarray(a[:, 2:7]),
                          line, int(line[0]), int(line[-1]))

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> dict:
        """The book as JSON values (:meth:`load_state` continues from it): each side's levels as
        ``[price, size, t]`` (strings as sent, so checksums continue; ``t`` round-trips exactly
        through JSON) in the order they were set -- the order :meth:`discard` and :meth:`clear`
        emit their deletes in, so the engine's floating-point sums continue bit for bit after a
        resync --, the scale, the rows the engine holds for a discarded book and the rows not
        handed out yet.  O(levels)."""
        if self._ext is not None:
            self._ext.pull(self)
        return {"symbol": self.symbol, "scale": self.scale,
                "sides": [[[v.px, v.qty, v.row[0]] for v in self.levels[s].values()] for s in (BIDS, ASKS)],
                "stale": None if self._stale is None else [list(r) for r in self._stale],
                "rows": [list(r) for r in self._rows]}

    @classmethod
    def from_state(cls, state: dict) -> LevelBook:
        """A book continuing from :meth:`save_state` (rows rebuilt from the strings at the saved
        scale: the ids and floats the engine holds).  Raises ValueError for a bad price."""
        book = cls(state["symbol"], int(state["scale"]))
        f = 10 ** (KEY_DECIMALS - book.scale)
        for side, levels in zip((BIDS, ASKS), state["sides"], strict=True):
            for px, qty, t in levels:
                key = price_key(px)[0]
                book.keys[side].add(key)
                book.levels[side][key] = _Level(px, qty, (float(t), float(key // f), 0.0, float(qty), float(px)))
        book._stale = None if state["stale"] is None else [tuple(r) for r in state["stale"]]
        book._rows = [tuple(r) for r in state["rows"]]
        return book

    def _check(self) -> None:
        """Invariants: keys and levels agree per side, sizes > 0, ids exact and unique per side
        and equal to the key at the current scale, rows pending in line order."""
        if self._ext is not None:
            self._ext.pull(self)
        f = 10 ** (KEY_DECIMALS - self.scale)
        for side in (BIDS, ASKS):
            ks, lv = self.keys[side], self.levels[side]
            assert list(ks) == sorted(lv), f"{self.symbol}: keys and levels disagree on side {side}"
            for k, v in lv.items():
                assert price_key(v.px)[0] == k and price_key(v.qty)[0] > 0
                assert v.row[1] == k // f and k // f < MAX_ID, f"{self.symbol}: id of {v.px} stale"
        lines = [r[-1] for r in self._rows]
        assert lines == sorted(lines)
