"""Sans-I/O feed protocol cores: messages in, engine bids/asks events (and actions) out.

    binance.py     Binance diff-depth decoder and book builder (spot and USD-M futures rules)
    orderproto.py  our order-level JSON protocol (the live form of finance.csv): decoder, encoder
    capture.py     ``<recv_ts_ns> <json>`` capture lines -> typed records; a thin .gz reader

Nothing here opens a socket or reads a clock: the transport (``transport.py``, the only module
allowed to import websockets) feeds bytes in and performs the actions the cores ask for (fetch a
depth snapshot, resynchronize).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["NeedSnapshot"]


@dataclass(frozen=True, slots=True)
class NeedSnapshot:
    """Action returned by a protocol core: fetch a fresh snapshot (Binance: the REST depth
    snapshot; our order protocol: a ``snapshot`` message of the resting orders) and hand it to the
    core's ``apply_snapshot``.  ``message`` is the number of the message that made the core ask
    (0: not a message)."""

    reason: str
    message: int
