"""Summary tables of backtests for a terminal: how numbers are written, and which columns fit.

Why here: a sweep's table has a dozen metric columns, and a terminal may be 80 characters wide.
Rather than let the table squeeze every column into ``31,253…``, :func:`fit_columns` keeps the
columns in priority order (the run number, the partition, the varied parameters, then the
metrics most people read first) while they fit, and names the ones left out; ``--json`` and
``--csv`` print the whole table.  :func:`fmt` is the one place a number in a table is written
(the console table and the run page of :mod:`replay.results` use it).

Pure functions on rows (``dict`` from column to value); cost O(rows x columns).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["METRIC_PRIORITY", "fit_columns", "fmt"]

METRIC_PRIORITY = ("total_pnl", "n_trades", "sharpe", "max_drawdown", "win_rate", "realized_pnl", "fees",
                   "sortino", "max_position", "turnover")
"""Metric columns of the console table, most important first (the first ones are kept when the
terminal is narrow)."""

_PAD = 3          # rich's default: one space each side of a cell and a separator


def fmt(v: object) -> str:
    """A table cell: thousands separators from 1,000 up (no decimals), 4 significant digits
    below, ``-`` for NaN (an undefined metric, e.g. the win rate of no trade), integers in full."""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def fit_columns(header: Sequence[str], cells: Sequence[Sequence[str]], width: int, keep: int) -> list[int]:
    """The indices of the columns to show within ``width`` characters: the first ``keep``
    columns always, then every further column in order while the table still fits (a column
    that does not fit is skipped, a narrower one after it may still fit).  A column's width is
    its widest cell or header plus rich's padding."""
    def need(j: int) -> int:
        return max([len(header[j])] + [len(row[j]) for row in cells]) + _PAD
    chosen = list(range(min(keep, len(header))))
    used = 1 + sum(need(j) for j in chosen)       # 1: the table's left border
    for j in range(len(chosen), len(header)):
        if used + need(j) <= width:
            chosen.append(j)
            used += need(j)
    return chosen
