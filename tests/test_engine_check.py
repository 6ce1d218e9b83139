"""``Engine._check`` really checks: corrupting a map behind the engine's back is caught."""

from __future__ import annotations

import pytest
from conftest import REPO

from ddms.io.orderbook import parse_orderbook_text
from ddms.runtime.engine import Engine

LINES = "".join(f"{i},{i},{'B' if i % 2 else 'S'},{i},{100 + i % 7}\n" for i in range(1, 40))


def loaded() -> Engine:
    engine = Engine(REPO / "tests" / "programs" / "shapes.m3")
    engine.apply(parse_orderbook_text(LINES), engine.relmap(("bids", "asks")))
    engine._check()
    return engine


def test_check_catches_a_zero_value() -> None:
    engine = loaded()
    table = engine.state.m_VOL_BY_BROKER
    table[next(iter(table.keys()))] = 0.0
    with pytest.raises(AssertionError, match="zero value"):
        engine._check()


def test_check_catches_a_stale_index() -> None:
    engine = loaded()
    table = engine.state.m_BV
    key = next(iter(table.keys()))
    table.pop(key)  # the index on broker (and the range tree) still list it
    with pytest.raises(AssertionError, match="BV"):
        engine._check()


def test_check_catches_a_range_tree_out_of_step() -> None:
    engine = loaded()
    table = engine.state.m_BV
    key = next(iter(table.keys()))
    table[key] = table[key] + 1.0  # the map changed, its range tree did not
    with pytest.raises(AssertionError, match="range tree"):
        engine._check()
