"""Live feeds: ``ddms serve-feed`` (server.py), ``ddms monitor`` (monitor.py), the websocket
transport (transport.py).  The protocol cores they drive live in the I/O layer (``ddms/io``:
``venues/binance_book.py``, ``orderproto.py``, ``capture.py``, ``venues/``); the replay
core of many-symbol venues is venue_server.py, the monitor's many-symbol session and ``--record``
venue_session.py.

The reconnect policy a client follows (:data:`DEFAULT_RETRIES`, :func:`retry_policy`) is stated
here, free of I/O, so that ``ddms monitor --help`` can say it without importing websockets.

Nothing here opens a socket or reads a clock: the transport (``transport.py``, the only module
allowed to import websockets) feeds bytes in and performs the actions the cores ask for (fetch a
depth snapshot, resynchronize).
"""

from __future__ import annotations

__all__ = ["DEFAULT_RETRIES", "retry_policy"]


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
