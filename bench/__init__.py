"""Benchmarks: ``python -m bench`` (see bench/__main__.py)."""

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before anything imports numba)
