"""Shared fixtures: where ../shared is, and per-session compiled programs (numba's disk cache
makes every later Engine of the same program cheap)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
ORDERBOOK = SHARED / "data" / "orderbook"
EXAMPLES = REPO / "examples" / "m3"


def data_file(size: str) -> Path:
    path = ORDERBOOK / size / "finance.csv"
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path
