"""Sans-I/O feed protocol cores: messages in, engine bids/asks events (and actions) out.

    binance.py     Binance diff-depth decoder and book builder (spot and USD-M futures rules)
    orderproto.py  our order-level JSON protocol (the live form of finance.csv): decoder, encoder
    capture.py     ``<recv_ts_ns> <json>`` capture lines -> typed records; a thin .gz reader
    server.py      the replay core of ``serve-feed`` (one Binance symbol, finance.csv)
    venue_server.py  the replay core for many symbols: Kraken, OKX, Coinbase, Binance (cryptofeed captures)
    venue_session.py the monitor's many-symbol venue session (subscriptions, resyncs) and ``--record``

The reconnect policy a client follows (:data:`DEFAULT_RETRIES`, :func:`retry_policy`) is stated
here, free of I/O, so that ``ddms monitor --help`` can say it without importing websockets.

Nothing here opens a socket or reads a clock: the transport (``transport.py``, the only module
allowed to import websockets) feeds bytes in and performs the actions the cores ask for (fetch a
depth snapshot, resynchronize).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_RETRIES", "NeedSnapshot", "retry_policy"]


@dataclass(frozen=True, slots=True)
class NeedSnapshot:
    """Action returned by a protocol core: fetch a fresh snapshot (Binance: the REST depth
    snapshot; our order protocol: a ``snapshot`` message of the resting orders) and hand it to the
    core's ``apply_snapshot``.  ``message`` is the number of the message that made the core ask
    (0: not a message)."""

    reason: str
    message: int


DEFAULT_RETRIES = 8
"""Reconnect attempts in a row before a feed client gives up (``ddms monitor --reconnect``)."""


def retry_policy(retries: int | None, base: float = 0.1, cap: float = 10.0) -> str:
    """``retries`` reconnect attempts with backoff ``base`` doubling to ``cap``, in words: what
    ``ddms monitor --help`` and its messages say."""
    if retries is None:
        return f"reconnect forever, waiting {base:g} s before the first attempt and doubling up to {cap:g} s"
    if retries == 0:
        return "no reconnect attempt"
    total = sum(min(cap, base * 2 ** (r - 1)) for r in range(1, retries + 1))
    return (f"up to {retries} reconnect attempt{'s' if retries > 1 else ''}, waiting {base:g} s before the first "
            f"and doubling up to {cap:g} s ({total:.3g} s of waiting at most)")
