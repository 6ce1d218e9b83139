"""Coinbase Exchange ``level2`` channel with ``ticker`` as a soft cross-check (sans-I/O).

Protocol (Coinbase Exchange websocket docs, "Level2 channel", "Ticker channel"):

- ``{"type": "snapshot", "product_id": ..., "bids": [[price, size], ...], "asks": [...]}`` starts
  (or restarts) a product's book;
- ``{"type": "l2update", "product_id": ..., "changes": [[side, price, size], ...], "time": ISO}``:
  ``side`` ``buy`` (bids) or ``sell`` (asks), ``size`` absolute, ``"0"`` removes the level;
- this channel has no sequence numbers and no checksum: a lost message cannot be detected from
  level2 alone.  What is checked: every message is well-formed (a malformed one loses the
  product's book: :class:`~ddms.io.levels.Resync`), the book never crosses, and the ``ticker``
  channel's ``best_bid``/``best_ask`` are compared with the book built to that point -- a *soft*
  check counted in ``ticker_checked``/``ticker_disagree`` (the two channels are not ordered with
  each other, so a few disagreements are normal; a stream of them is a lost message).

Other message types (``match``, ``subscriptions``, ``heartbeat``, ...) are counted in ``ignored``;
``error`` is also reported.  Symbols are the ``product_id`` (``BTC-USD``).

Cost per message: the level updates; a ticker is two key comparisons.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ddms.io.levels import ASKS, BIDS, ChunkEvents, Resync, SymbolEvents, check_decimal, price_key
from ddms.io.venues.base import VenueBooks

__all__ = ["CoinbaseBooks"]

_SIDES = {"buy": BIDS, "sell": ASKS, "bid": BIDS, "ask": ASKS}
_KEYS = {   # documented fields per message type; others are counted in unknown_fields
    "snapshot": frozenset({"type", "product_id", "bids", "asks", "time"}),
    "l2update": frozenset({"type", "product_id", "changes", "time"}),
    "ticker": frozenset({"type", "sequence", "product_id", "price", "open_24h", "volume_24h", "low_24h", "high_24h",
                         "volume_30d", "best_bid", "best_ask", "side", "time", "trade_id", "last_size",
                         "best_bid_size", "best_ask_size"}),
}


def _time_ms(v: Any) -> float:
    if v is None:
        return 0.0
    if not isinstance(v, str):
        raise ValueError(f"time is not a string: {v!r}")
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * 1e3
    except ValueError:
        raise ValueError(f"time is not an ISO 8601 timestamp: {v!r}") from None


def _pairs(lst: Any, what: str) -> list[tuple[str, str]]:
    if not isinstance(lst, list):
        raise ValueError(f"{what!r} is not a list")
    out = []
    for j, e in enumerate(lst):
        if not (isinstance(e, list) and len(e) >= 2 and isinstance(e[0], str) and isinstance(e[1], str)):
            raise ValueError(f"{what}[{j}] is not [price, size, ...] strings: {e!r}")
        check_decimal(e[0])
        check_decimal(e[1])
        out.append((e[0], e[1]))
    return out


class CoinbaseBooks(VenueBooks):
    """Books of every product on a Coinbase ``level2`` (+ ``ticker``) connection; :meth:`feed`
    takes one parsed message."""

    venue = "coinbase"

    def feed_chunk(self, msgs: Sequence[Any], lines: Sequence[int], *,
                   fallback: Callable[[int], Sequence[Resync]] | None = None,
                   on_fast: Callable[[int, Any], None] | None = None,
                   recv: Any = None) -> tuple[list[Resync], list[SymbolEvents | ChunkEvents]]:
        """Many raw messages (bytes, or :class:`~ddms.io.venues.binance_chunk.Spans`) numbered
        ``lines``: the actions and events of feeding them one by one (parsed JSON through
        :meth:`feed`; a message that is not JSON is counted and reported), with in-sequence
        ``l2update`` and ``ticker`` messages handled in numba
        (:meth:`CoinbaseLane.feed_chunk <ddms.io.venues.coinbase_chunk.CoinbaseLane.feed_chunk>`,
        which says what ``fallback``, ``on_fast`` and ``recv`` do).  Cost: O(bytes + levels)
        in numba plus ~1-2 us of Python per applied update."""
        if self._lane is None:
            from ddms.io.venues.coinbase_chunk import CoinbaseLane
            self._lane = CoinbaseLane(self)
        return self._lane.feed_chunk(msgs, lines, fallback=fallback, on_fast=on_fast, recv=recv)

    def feed(self, msg: Any, line: int = 0, recv_s: float = 0.0) -> tuple[Resync, ...]:
        """Process one parsed message; returns the actions to perform.  Never raises on bad input."""
        if not isinstance(msg, dict) or not isinstance(msg.get("type"), str):
            return self._bad("not a Coinbase message (a JSON object with a string 'type')", line, msg)
        kind = msg["type"]
        if kind not in ("snapshot", "l2update", "ticker"):
            self._ignore(kind)
            if kind == "error":
                self._report(f"error from the venue: {msg.get('message', msg)}", line, msg)
            return ()
        if not isinstance(msg.get("product_id"), str):
            return self._bad(f"{kind} message without a string product_id", line, msg)
        symbol = msg["product_id"].upper()
        if not _KEYS[kind].issuperset(msg):
            self._unknown([k for k in msg if k not in _KEYS[kind]], line)
        if kind == "ticker":
            return self._ticker(symbol, msg, line)
        book, st = self._sym(symbol)
        st.messages += 1
        try:
            t = _time_ms(msg.get("time"))
            if kind == "snapshot":
                sides = ((BIDS, _pairs(msg.get("bids"), "bids")), (ASKS, _pairs(msg.get("asks"), "asks")))
            else:
                ch = msg.get("changes")
                if not isinstance(ch, list) or not ch:
                    raise ValueError("changes is not a non-empty list")
                changes = []
                for j, c in enumerate(ch):
                    if not (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and isinstance(c[1], str)
                            and isinstance(c[2], str) and c[0] in _SIDES):
                        raise ValueError(f"changes[{j}] is not [buy|sell, price, size]: {c!r}")
                    check_decimal(c[1])
                    check_decimal(c[2])
                    changes.append((_SIDES[c[0]], c[1], c[2]))
        except ValueError as e:
            return self._resync(symbol, f"malformed {kind}: {e}", line, msg, malformed=True)
        if kind == "snapshot":
            book.clear(line)
            st.snapshots += 1
            st.synced = True
            try:
                for side, levels in sides:
                    for px, qty in levels:
                        book.set(side, px, qty, t, line)
                        st.level_updates += 1
            except ValueError as e:
                return self._resync(symbol, f"malformed snapshot: {e}", line, msg, malformed=True)
        else:
            st.depth_events += 1
            if not st.synced:
                return ()
            try:
                for side, px, qty in changes:
                    book.set(side, px, qty, t, line)
                    st.level_updates += 1
            except ValueError as e:
                return self._resync(symbol, f"malformed l2update: {e}", line, msg, malformed=True)
        self._after_update(symbol, line)
        return ()

    def _ticker(self, symbol: str, msg: dict, line: int) -> tuple[Resync, ...]:
        st = self.status.get(symbol)
        if st is None or not st.synced:
            self._ignore("ticker_before_book")
            return ()
        bb, ba = msg.get("best_bid"), msg.get("best_ask")
        try:
            want = (price_key(bb)[0], price_key(ba)[0])
        except ValueError as e:
            return self._bad(f"ticker for {symbol}: {e}", line, msg)
        book = self.books[symbol]
        st.ticker_checked += 1
        if (book.best_key(BIDS), book.best_key(ASKS)) != want:
            st.ticker_disagree += 1
        return ()
