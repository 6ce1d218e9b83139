"""The order-book event schema, declared once for every reader, writer and application.

Every book reader (order-book CSV, LOBSTER, Binance captures, Parquet, cryptofeed, DBN, tardis,
the venue cores) yields :class:`~ddms.io.events.EventBatch` rows of two relations, ``bids``
(stream index :data:`BIDS`) and ``asks`` (:data:`ASKS`), with the columns :data:`COLUMNS`
(float64).  Price-level readers put one row per level (``id`` = price key, ``broker_id`` 0);
order-level readers one row per resting order.  Import the names from here: a second
declaration is a second truth that can drift.
"""

from __future__ import annotations

__all__ = ["ARITY", "ASKS", "BIDS", "COLUMNS", "RELATIONS", "SIDE_NAMES"]

BIDS = 0
"""Stream index of the ``bids`` relation."""
ASKS = 1
"""Stream index of the ``asks`` relation."""
RELATIONS = ("bids", "asks")
"""Relation names by stream index."""
COLUMNS = ("t", "id", "broker_id", "volume", "price")
"""Column names of both relations, in order."""
ARITY = len(COLUMNS)
SIDE_NAMES = {BIDS: "bid", ASKS: "ask"}
