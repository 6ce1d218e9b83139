"""Shared fixtures: where ../shared is, and per-session compiled programs (numba's disk cache
makes every later Engine of the same program cheap)."""

from __future__ import annotations

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
