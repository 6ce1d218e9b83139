"""OKX v5 public ``books`` channels, many instruments on one connection (sans-I/O).

Protocol (OKX API v5 docs, "Order book channel" and "Checksum"):

- ``{"arg": {"channel": "books", "instId": ...}, "action": "snapshot"|"update", "data": [{"asks":
  [[price, size, "0", orders], ...], "bids": [...], "ts": "<ms>", "checksum": <int>, "seqId": <int>,
  "prevSeqId": <int>}]}``; ``size`` is the level's absolute size, ``"0"`` removes it;
- continuity, when the messages carry ``seqId``: an update's ``prevSeqId`` equals the previous
  message's ``seqId`` (``seqId == prevSeqId`` is an update without changes; after a sequence
  reset ``seqId`` may drop, the rule still holds); older captures (2022) have no ``seqId``: the
  checksum is then the only continuity check;
- ``checksum`` is the SIGNED 32-bit CRC32 of ``bid1px:bid1sz:ask1px:ask1sz:bid2px:...`` over the
  25 best levels of each side (when one side has fewer, the other's continue alone), on the raw
  strings.

Channels ``books``, ``books-l2-tbt``, ``books50-l2-tbt`` share these rules; other channels
(``tickers``, ``trades``, ``books5``, ...) and ``event`` messages are counted in ``ignored``
(``error`` events are reported).  A continuity break, a checksum mismatch or a malformed book
message discards that instrument's book and returns a :class:`~ddms.io.levels.Resync`
(resubscribe: OKX answers with a snapshot); its updates are dropped until a snapshot arrives.
Symbols are the ``instId`` (``BTC-USDT``).

Cost per message: the level updates plus O(50) for the checksum text and a ``zlib.crc32``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ddms.io.levels import ASKS, BIDS, ChunkEvents, Resync, SymbolEvents, check_decimal
from ddms.io.venues.base import VenueBooks

__all__ = ["OkxBooks", "okx_checksum"]

BOOK_CHANNELS = frozenset({"books", "books-l2-tbt", "books50-l2-tbt"})
_MSG_KEYS = frozenset({"arg", "action", "data"})
_DATA_KEYS = frozenset({"asks", "bids", "ts", "checksum", "seqId", "prevSeqId"})


def okx_checksum(bids: list[tuple[str, str]], asks: list[tuple[str, str]]) -> int:
    """The signed CRC32 of the 25 best ``bids`` and ``asks`` (best first), interleaved.  O(50)."""
    parts: list[str] = []
    for i in range(25):
        if i < len(bids):
            parts += bids[i]
        if i < len(asks):
            parts += asks[i]
    c = zlib.crc32(":".join(parts).encode())
    return c - (1 << 32) if c >= 1 << 31 else c


def _levels(lst: Any, what: str) -> list[tuple[str, str]]:
    if not isinstance(lst, list):
        raise ValueError(f"{what!r} is not a list")
    out = []
    for j, e in enumerate(lst):
        n = len(e) if isinstance(e, list) else 0
        if not (2 <= n <= 4 and isinstance(e[0], str) and isinstance(e[1], str)
                and (n < 3 or isinstance(e[2], str)) and (n < 4 or isinstance(e[3], str))):
            raise ValueError(f"{what}[{j}] is not [price, size, ...] strings: {e!r}")
        check_decimal(e[0])
        check_decimal(e[1])
        out.append((e[0], e[1]))
    return out


def _int(v: Any, what: str) -> int:
    if type(v) is not int or not -(2**63) <= v < 2**63:
        raise ValueError(f"{what} is not a 64-bit integer: {v!r}")
    return v


class OkxBooks(VenueBooks):
    """Books of every instrument on an OKX v5 public connection; :meth:`feed` takes one parsed
    message."""

    venue = "okx"

    def __init__(self, source: str = "<okx>", *, max_reports: int = 1000) -> None:
        super().__init__(source, max_reports=max_reports)
        self.last_seq: dict[str, int | None] = {}

    def _save_extra(self) -> dict[str, Any]:
        return {"last_seq": [[k, v] for k, v in self.last_seq.items()]}

    def _load_extra(self, extra: dict[str, Any]) -> None:
        self.last_seq = {k: v for k, v in extra["last_seq"]}


    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int], *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, Any], None] | None = None,
                   recv: Any = None) -> tuple[list[Resync], list[SymbolEvents | ChunkEvents]]:
        """Many raw messages (bytes, or :class:`~ddms.io.venues.binance_chunk.Spans`) numbered
        ``lines``: the actions and events of feeding them one by one (parsed JSON through
        :meth:`feed`; a message that is not JSON is counted and reported), with ``update``
        messages of synced books -- continuity and checksum included -- handled in numba
        (:mod:`ddms.io.venues.okx_chunk`; ``fallback``, ``on_fast``, ``recv``: see
        :meth:`CoinbaseLane.feed_chunk <ddms.io.venues.coinbase_chunk.CoinbaseLane.feed_chunk>`).
        Cost: O(bytes + levels) in numba plus ~1-2 us of Python per applied update."""
        if self._lane is None:
            from ddms.io.venues.okx_chunk import OkxLane
            self._lane = OkxLane(self)
        return self._lane.feed_chunk(msgs, lines, fallback=fallback, on_fast=on_fast, recv=recv)

    def feed(self, msg: Any, line: int = 0, recv_s: float = 0.0) -> tuple[Resync, ...]:
        """Process one parsed message; returns the actions to perform.  Never raises on bad input."""
        if not isinstance(msg, dict):
            return self._bad("not a JSON object", line, msg)
        if "event" in msg:
            ev = msg["event"]
            self._ignore(f"event:{ev}" if isinstance(ev, str) else "event")
            if ev == "error":
                self._report(f"error from the venue: {msg.get('msg', msg)}", line, msg)
            return ()
        arg = msg.get("arg")
        if not (isinstance(arg, dict) and isinstance(arg.get("channel"), str) and isinstance(arg.get("instId"), str)):
            return self._bad("message without arg.channel / arg.instId", line, msg)
        if arg["channel"] not in BOOK_CHANNELS:
            self._ignore(arg["channel"])
            return ()
        symbol = arg["instId"].upper()
        if not _MSG_KEYS.issuperset(msg):
            self._unknown([k for k in msg if k not in _MSG_KEYS], line)
        book, st = self._sym(symbol)
        st.messages += 1
        action, data = msg.get("action"), msg.get("data")
        try:
            if action not in ("snapshot", "update"):
                raise ValueError(f"action is not 'snapshot' or 'update': {action!r}")
            if not (isinstance(data, list) and data and all(isinstance(d, dict) for d in data)):
                raise ValueError("data is not a non-empty list of objects")
            parts = []
            for d in data:
                if not _DATA_KEYS.issuperset(d):
                    self._unknown([k for k in d if k not in _DATA_KEYS], line)
                t = d.get("ts", "0")
                if not (isinstance(t, str) and t.isdigit() and len(t) < 17):
                    raise ValueError(f"ts is not a millisecond timestamp string: {t!r}")
                seq = _int(d["seqId"], "seqId") if "seqId" in d else None
                prev = _int(d["prevSeqId"], "prevSeqId") if "prevSeqId" in d else None
                crc = _int(d["checksum"], "checksum") if "checksum" in d else None
                if crc is not None and not -(2**31) <= crc < 2**31:
                    raise ValueError(f"checksum is not a signed 32-bit integer: {crc}")
                parts.append((float(t), _levels(d.get("bids", []), "bids"), _levels(d.get("asks", []), "asks"),
                              seq, prev, crc))
        except (ValueError, KeyError) as e:
            return self._resync(symbol, f"malformed {action} message: {e}", line, msg, malformed=True)
        if action == "snapshot":
            book.clear(line)
            st.snapshots += 1
            st.synced = True
            self.last_seq[symbol] = None
        else:
            st.depth_events += 1
            if not st.synced:
                return ()
        for t, bids, asks, seq, prev, crc in parts:
            last = self.last_seq.get(symbol)
            if action == "update" and prev is not None and last is not None and prev != last:
                if seq is not None and seq <= last and prev < last:
                    st.stale += 1     # an old message again (duplicate / late): already in the book
                    self._report(f"{symbol}: stale update seqId={seq} <= last seqId={last}: dropped", line, msg)
                    continue
                return self._resync(symbol, f"gap: prevSeqId={prev} but the last seqId={last}", line, msg, gap=True)
            try:
                for side, levels in ((BIDS, bids), (ASKS, asks)):
                    for px, qty in levels:
                        book.set(side, px, qty, t, line)
                        st.level_updates += 1
            except ValueError as e:
                return self._resync(symbol, f"malformed {action} message: {e}", line, msg, malformed=True)
            if seq is not None:
                self.last_seq[symbol] = seq
            if crc is not None:
                bad = self._checksum(symbol, okx_checksum(book.top(BIDS, 25), book.top(ASKS, 25)), crc, line, msg)
                if bad is not None:
                    return bad
        self._after_update(symbol, line)
        return ()
