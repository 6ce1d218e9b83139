"""Actions a sans-I/O protocol core returns to its transport (it never performs I/O itself)."""

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
