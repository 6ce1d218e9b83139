"""Shared fixtures: where ../shared is, and per-session compiled programs (numba's disk cache
makes every later Engine of the same program cheap)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ORDERBOOK = SHARED / "data" / "orderbook"
EXAMPLES = REPO / "examples" / "m3"


def shared_file(*parts: str) -> Path:
    """A file under ../shared, or a skip where it is absent (the real-data tests run where the
    reference material is, and are skipped elsewhere)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def data_file(size: str) -> Path:
    return shared_file("data", "orderbook", size, "finance.csv")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the files marked ``long`` first. With ``--dist loadfile`` xdist hands out files in
    collection order, so a minutes-long file collected last (the README run, the wheel build)
    used to start when the other worker was idle and set the suite's wall time alone."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


# ``ddms run`` serves an uncompiled program with the interpreter while numba compiles it in the
# background by default; the suite's runs (in process and in subprocesses, README blocks included)
# compile in the foreground instead, so that each program is compiled once, not once per run that
# starts before the background compile has filled the cache.  tests/test_warm.py checks the default.
os.environ.setdefault("DDMS_FIRST_RESULTS", "0")
