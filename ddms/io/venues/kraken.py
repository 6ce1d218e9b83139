"""Kraken websocket v1 ``book`` channel, many pairs on one connection (sans-I/O).

Protocol (Kraken's public websocket v1 docs, "book" and "Book checksum"):

- snapshot ``[channelID, {"as": [[price, volume, timestamp], ...], "bs": [...]}, "book-<depth>", pair]``;
- update ``[channelID, {"a": [...]}, {"b": [...], "c": "<crc>"}, "book-<depth>", pair]`` (one or
  two dicts); ``volume`` is the level's absolute size, ``"0.00000000"`` removes the level; an
  entry may carry a 4th field ``"r"`` (a republished level that came back into the subscribed
  depth after a truncation: applied like any other);
- after each update the book is truncated to the subscribed depth (the worst levels go);
- ``c`` is the CRC32 of the book AFTER the update: for the 10 best asks (ascending) then the 10
  best bids (descending), each price string then volume string with ``.`` removed and leading
  zeros stripped, concatenated; the unsigned CRC32 of that text in decimal.  It is computed on
  the exact strings received (:mod:`ddms.io.levels` keeps them).

A checksum mismatch or a malformed book message discards that pair's book and returns a
:class:`~ddms.io.levels.Resync` (on Kraken: unsubscribe and subscribe again, which sends a new
snapshot); updates of a pair without a book are dropped until then.  Dict messages
(``heartbeat``, ``systemStatus``, ``subscriptionStatus``) are counted in ``ignored`` (an error
status is also reported).  Symbols are the pair as Kraken spells it (``XBT/CHF``).

Cost per update: the level updates, the truncation, and O(20) for the checksum text plus a
``zlib.crc32``.
"""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ddms.io.levels import ASKS, BIDS, ChunkEvents, Resync, SymbolEvents, check_decimal
from ddms.io.venues.base import VenueBooks

__all__ = ["KrakenBooks", "kraken_checksum"]


@functools.lru_cache(maxsize=1 << 16)
def _strip(s: str) -> str:
    return s.replace(".", "").lstrip("0")


def kraken_checksum(asks: list[tuple[str, str]], bids: list[tuple[str, str]]) -> int:
    """The unsigned CRC32 of the 10 best ``asks`` (best first) then ``bids`` (best first), each
    ``(price, volume)`` as sent.  O(20)."""
    return zlib.crc32("".join([_pair(p, q) for p, q in asks[:10]] + [_pair(p, q) for p, q in bids[:10]]).encode())


@functools.lru_cache(maxsize=1 << 16)
def _pair(p: str, q: str) -> str:
    """A level's checksum text (a level repeats across many checksums: one cache hit each)."""
    return _strip(p) + _strip(q)


_DEPTHS: dict[str, int] = {}    # channel name -> its depth (a feed has one or two names)


def _entries(lst: Any, what: str) -> list[tuple[str, str, float]]:
    """Validated ``[price, volume, ts(, "r")]`` entries -> ``(price, volume, t_ms)``; raises
    ValueError naming the entry."""
    if not isinstance(lst, list):
        raise ValueError(f"{what!r} is not a list")
    out = []
    for j, e in enumerate(lst):
        n = len(e) if isinstance(e, list) else 0
        if not ((n == 3 or n == 4) and isinstance(e[0], str) and isinstance(e[1], str) and isinstance(e[2], str)
                and (n == 3 or isinstance(e[3], str))):
            raise ValueError(f"{what}[{j}] is not [price, volume, timestamp(, 'r')]: {e!r}")
        if n == 4 and e[3] != "r":
            raise ValueError(f"{what}[{j}] has a 4th field other than 'r': {e[3]!r}")
        try:
            t = float(e[2]) * 1e3
        except ValueError:
            raise ValueError(f"{what}[{j}] has a timestamp that is not a number: {e[2]!r}") from None
        if not 0 <= t < 1e16:
            raise ValueError(f"{what}[{j}] has a timestamp out of range: {e[2]!r}")
        out.append((e[0], e[1], t))
    return out


class KrakenBooks(VenueBooks):
    """Books of every pair on a Kraken v1 connection.  ``depth`` is the subscribed depth when the
    channel name does not say it (``book-<depth>``).  :meth:`feed` takes one parsed message."""

    venue = "kraken"

    def __init__(self, source: str = "<kraken>", *, depth: int = 10, max_reports: int = 1000) -> None:
        super().__init__(source, max_reports=max_reports)
        self.depth = depth

    def _save_extra(self) -> dict[str, Any]:
        return {"depth": self.depth}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        self.depth = int(extra["depth"])

    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int], *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, Any], None] | None = None,
                   recv: Any = None) -> tuple[list[Resync], list[SymbolEvents | ChunkEvents]]:
        """Many raw messages (bytes, or :class:`~ddms.io.venues.binance_chunk.Spans`) numbered
        ``lines``: the actions and events of feeding them one by one (parsed JSON through
        :meth:`feed`; a message that is not JSON is counted and reported), with the ``book``
        snapshots and updates of the books the lane holds -- truncation and checksum included
        -- applied in numba (:mod:`ddms.io.venues.kraken_chunk`; ``fallback``, ``on_fast``,
        ``recv``: see :meth:`CoinbaseLane.feed_chunk
        <ddms.io.venues.coinbase_chunk.CoinbaseLane.feed_chunk>`).  Cost: O(bytes + levels) in
        numba plus the events' Python."""
        if self._lane is None:
            from ddms.io.venues.kraken_chunk import KrakenLane
            self._lane = KrakenLane(self)
        return self._lane.feed_chunk(msgs, lines, fallback=fallback, on_fast=on_fast, recv=recv)

    def feed(self, msg: Any, line: int = 0, recv_s: float = 0.0) -> tuple[Resync, ...]:
        """Process one parsed message (``line`` numbers it in reports and rows).  Returns the
        actions to perform.  Bad input is counted and reported, never raised."""
        if isinstance(msg, dict):
            ev = msg.get("event")
            self._ignore(f"event:{ev}" if isinstance(ev, str) else "dict")
            if msg.get("status") == "error" or ev == "error":
                self._report(f"error from the venue: {msg.get('errorMessage', msg)}", line, msg)
            return ()
        if not (isinstance(msg, list) and len(msg) >= 4 and isinstance(msg[-1], str) and isinstance(msg[-2], str)):
            return self._bad("not a Kraken channel message [channelID, payload..., channelName, pair]", line, msg)
        chan, symbol = msg[-2], msg[-1].upper()
        if not chan.startswith("book"):
            self._ignore(chan.split("-")[0])
            return ()
        depth = self.depth
        if chan.startswith("book-"):
            depth = _DEPTHS.get(chan, 0)
            if depth == 0:
                try:
                    depth = int(chan[5:])
                except ValueError:
                    return self._bad(f"channel name {chan!r} is not book-<depth>", line, msg)
                if depth < 1:
                    return self._bad(f"channel name {chan!r} has a depth below 1", line, msg)
                if len(_DEPTHS) < 1024:
                    _DEPTHS[chan] = depth
        body = msg[1:-2]
        snapshot = False
        for d in body:
            if not isinstance(d, dict):
                body = None
                break
            snapshot = snapshot or "as" in d or "bs" in d
        if not body:
            return self._resync(symbol, "book message without payload objects", line, msg, malformed=True)
        book, st = self._sym(symbol)
        st.messages += 1
        if snapshot:
            return self._snapshot(symbol, body, depth, line, msg)
        st.depth_events += 1
        if not st.synced:
            return ()
        unknown: list[str] = []
        try:
            sides = []
            crc = None
            for d in body:
                for k, v in d.items():
                    if k in ("a", "b"):
                        sides.append((ASKS if k == "a" else BIDS, _entries(v, k)))
                    elif k == "c":
                        crc = int(v) if isinstance(v, str) and v.isdigit() else 2**32
                        if crc >= 2**32:
                            raise ValueError(f"checksum 'c' is not an unsigned 32-bit decimal string: {v!r}")
                    else:
                        unknown.append(k)
            if not sides:
                raise ValueError("book update without 'a' or 'b'")
            if unknown:
                self._unknown(unknown, line)
            for side, entries in sides:
                for px, qty, t in entries:
                    book.set(side, px, qty, t, line)
                    st.level_updates += 1
        except ValueError as e:
            return self._resync(symbol, f"malformed book update: {e}", line, msg, malformed=True)
        st.truncated += book.truncate(depth, line)
        if crc is not None:
            bad = self._checksum(symbol, kraken_checksum(book.top(ASKS, 10), book.top(BIDS, 10)), crc, line, msg)
            if bad is not None:
                return bad
        self._after_update(symbol, line)
        return ()

    def _snapshot(self, symbol: str, body: list[dict], depth: int, line: int, msg: Any) -> tuple[Resync, ...]:
        book, st = self._sym(symbol)
        try:
            sides = []
            for d in body:
                for k, v in d.items():
                    if k not in ("as", "bs"):
                        self._unknown((k,), line)
                        continue
                    sides.append((ASKS if k == "as" else BIDS, _entries(v, k)))
            for _, entries in sides:   # validate every price before the book changes
                for px, qty, _t in entries:
                    check_decimal(px)
                    check_decimal(qty)
        except ValueError as e:
            return self._resync(symbol, f"malformed book snapshot: {e}", line, msg, malformed=True)
        book.clear(line)
        try:
            for side, entries in sides:
                for px, qty, t in entries:
                    book.set(side, px, qty, t, line)
                    st.level_updates += 1
        except ValueError as e:
            return self._resync(symbol, f"malformed book snapshot: {e}", line, msg, malformed=True)
        st.truncated += book.truncate(depth, line)
        st.snapshots += 1
        st.synced = True
        self._after_update(symbol, line)
        return ()
