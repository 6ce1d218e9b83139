"""Trading strategies written as callbacks on views, and their registry.

``names()`` lists the registered strategies; ``get(name, params)`` builds one with validated
parameters (unknown names and parameters are errors that list what exists); ``spec(name)`` is
the class, for its declared parameters.  See :mod:`strategies.api` for the life cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strategies.api import (
    RUN_PARAMS,
    Context,
    LiveContext,
    OpenOrder,
    OrderRecord,
    Param,
    SimContext,
    Strategy,
    StrategyError,
)
from strategies.mm import MarketMaker
from strategies.sobi import Sobi

__all__ = ["RUN_PARAMS", "Context", "LiveContext", "MarketMaker", "OpenOrder", "OrderRecord", "Param",
           "SimContext", "Sobi", "Strategy", "StrategyError", "get", "names", "spec"]

_REGISTRY: dict[str, type[Strategy]] = {cls.name: cls for cls in (Sobi, MarketMaker)}


def names() -> list[str]:
    """Registered strategy names, sorted."""
    return sorted(_REGISTRY)


def spec(name: str) -> type[Strategy]:
    """The strategy class registered as ``name`` (StrategyError listing the names if none)."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise StrategyError(f"unknown strategy {name!r} (strategies: {', '.join(names())})") from None


def get(name: str, params: Mapping[str, Any] | None = None) -> Strategy:
    """A new instance of strategy ``name`` with ``params`` validated and defaults filled in."""
    return spec(name)(params)
