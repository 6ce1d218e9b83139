"""Backtest outputs: summary tables, per-run fills/equity/orders files, and a plot.

Why both CSV and Parquet: CSV for a person and a spreadsheet, Parquet (typed columns, exact
float64) for the next program.  Both come from one pyarrow table, so they hold the same rows.
The plot (PNG, plus an HTML page with the same figure as SVG and the run's numbers) needs
matplotlib; without it the files are written and the plot is skipped with a note.

Layout of ``--out DIR``::

    summary.csv, summary.parquet    one row per (partition, parameter set)
    runs/NNN/                       one directory per run (sequential sweeps; with --spark: the best)
        fills.csv|parquet           time, order_id, side (+1/-1), price, qty, fee, taker
        equity.csv|parquet          line, time, mark, position, cash, equity, return
        orders.csv|parquet          every order and cancel the strategy sent
        run.json                    partition, strategy, parameters, metrics
        plot.png, plot.html         mid price with fills, position, equity

Cost: O(rows) per file; a plot is ~0.3 s (matplotlib), its points thinned to at most 4,000
per line.
"""

from __future__ import annotations

import html
import io
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from replay.backtest import BacktestResult, summary_row
from replay.table import fmt

__all__ = ["epoch_unit", "plot_run", "time_axis", "write_run", "write_summary", "write_table"]

MAX_POINTS = 4000


def write_table(columns: dict[str, Sequence | np.ndarray] | pa.Table, out_dir: str | os.PathLike,
                stem: str) -> list[Path]:
    """``stem.csv`` and ``stem.parquet`` in ``out_dir`` from named columns; returns the paths."""
    table = columns if isinstance(columns, pa.Table) else pa.table(
        {k: pa.array(np.asarray(v) if isinstance(v, np.ndarray) else list(v)) for k, v in columns.items()})
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    csv_path, pq_path = d / f"{stem}.csv", d / f"{stem}.parquet"
    pacsv.write_csv(table, csv_path)
    pq.write_table(table, pq_path)
    return [csv_path, pq_path]


def write_summary(rows: list[dict[str, object]], out_dir: str | os.PathLike) -> list[Path]:
    """``summary.csv``/``summary.parquet``: one row per run, columns in the rows' key order
    (partition, parameters, metrics).  Every row must have the same keys."""
    if not rows:
        raise ValueError("no summary rows to write")
    keys = list(rows[0])
    for i, r in enumerate(rows):
        if list(r) != keys:
            raise ValueError(f"summary row {i} has columns {list(r)}, row 0 has {keys}")
    cols = {}
    for k in keys:
        vals = [r[k] for r in rows]
        if all(isinstance(v, str) for v in vals):
            cols[k] = pa.array(vals, pa.string())
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
            cols[k] = pa.array(vals, pa.int64())
        else:
            cols[k] = pa.array([float(v) for v in vals], pa.float64())
    return write_table(pa.table(cols), out_dir, "summary")


def _jsonable(x: object) -> object:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else str(x)
    return x


def write_run(result: BacktestResult, out_dir: str | os.PathLike, *, plot: bool = True) -> list[Path]:
    """Every file of one run in ``out_dir`` (see the module docstring); returns the paths.
    The plot is skipped (not an error) when matplotlib is missing."""
    d = Path(out_dir)
    paths = [p for name in result.TABLES for p in write_table(result.to_arrow(name), d, name)]
    meta = {"partition": result.partition, "strategy": result.strategy, "params": result.params,
            "metrics": {k: _jsonable(v) for k, v in summary_row(result).items() if k not in result.params},
            "seconds": result.seconds}
    (d / "run.json").write_text(json.dumps(meta, indent=1, default=_jsonable) + "\n")
    paths.append(d / "run.json")
    if plot:
        paths += plot_run(result, d)
    return paths


_EPOCH_UNITS = (("s", 1e9, 1e10), ("ms", 1e12, 1e13), ("us", 1e15, 1e16), ("ns", 1e18, 1e19))


def epoch_unit(*times: np.ndarray) -> str | None:
    """The unit (``"s"``, ``"ms"``, ``"us"``, ``"ns"``) in which every finite value of ``times``
    reads as a date between 2001-09-09 and 2286 (Binance event times are ms since the epoch), or
    None when they do not (finance.csv's counter, LOBSTER's seconds after midnight).  O(n)."""
    vals = [t[np.isfinite(t)] for t in (np.asarray(x, np.float64) for x in times)]
    vals = [v for v in vals if v.shape[0]]
    if not vals:
        return None
    lo, hi = min(float(v.min()) for v in vals), max(float(v.max()) for v in vals)
    for unit, a, b in _EPOCH_UNITS:
        if a <= lo and hi < b:
            return unit
    return None


def time_axis(times: np.ndarray, unit: str | None) -> np.ndarray:
    """``times`` for a plot's x axis: UTC ``datetime64`` values when ``unit`` is an epoch unit
    (see :func:`epoch_unit`), else the data's own numbers unchanged.  Every point keeps its own
    time (nothing is shifted to the first sample), so a fill is drawn where it happened."""
    t = np.asarray(times, np.float64)
    if unit is None:
        return t
    return np.round(t).astype(np.int64).astype(f"datetime64[{unit}]")


def _thin(n: int) -> np.ndarray:
    """At most MAX_POINTS indices spread over ``range(n)``, first and last included."""
    if n <= MAX_POINTS:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, MAX_POINTS).round().astype(np.int64))


def figure(result: BacktestResult):
    """The matplotlib Figure that :func:`plot_run` saves (None without matplotlib or without
    equity samples); the caller saves and closes it.  Cost: ~0.2 s."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    eq = result.equity
    if eq["time"].shape[0] == 0:
        return None
    k = _thin(eq["time"].shape[0])
    f = result.fills
    unit = epoch_unit(eq["time"], f["time"])
    t = time_axis(eq["time"][k], unit)
    fig, (ax_px, ax_pos, ax_eq) = plt.subplots(3, 1, figsize=(11, 7.5), sharex=True,
                                               gridspec_kw={"height_ratios": [2.2, 1, 1.4]})
    ax_px.plot(t, eq["mark"][k], color="#444444", lw=0.9, label="mid")
    for side, color, marker, label in ((1.0, "#1a9850", "^", "buy fill"), (-1.0, "#d73027", "v", "sell fill")):
        sel = np.flatnonzero(f["side"] == side)
        if sel.shape[0] > MAX_POINTS:
            sel = sel[_thin(sel.shape[0])]
        if sel.shape[0]:
            ax_px.scatter(time_axis(f["time"][sel], unit), f["price"][sel], s=14, c=color, marker=marker,
                          label=label, zorder=3, linewidths=0)
    ax_px.set_ylabel("price")
    ax_px.legend(loc="upper left", fontsize=8, frameon=False, ncol=3)
    ax_pos.step(t, eq["position"][k], where="post", color="#4575b4", lw=1.0)
    ax_pos.axhline(0, color="#999999", lw=0.6)
    ax_pos.set_ylabel("position")
    e = eq["equity"][k]
    peak = np.maximum.accumulate(np.where(np.isnan(e), -np.inf, e))
    ax_eq.plot(t, e, color="#762a83", lw=1.1, label="equity")
    ax_eq.fill_between(t, e, peak, where=peak > e, color="#d73027", alpha=0.15, lw=0, label="drawdown")
    ax_eq.axhline(0, color="#999999", lw=0.6)
    ax_eq.set_ylabel("equity")
    if unit is None:
        ax_eq.set_xlabel("data time (the input's t column, in its own units)")
    else:
        import matplotlib.dates as mdates
        loc = mdates.AutoDateLocator()
        ax_eq.xaxis.set_major_locator(loc)
        ax_eq.xaxis.set_major_formatter(mdates.ConciseDateFormatter(loc))
        ax_eq.set_xlabel("time (UTC, from the data's timestamps)")
    ax_eq.legend(loc="upper left", fontsize=8, frameon=False, ncol=2)
    m = result.metrics
    params = ", ".join(f"{k}={v:g}" for k, v in result.params.items())
    fig.suptitle(f"{result.strategy} on {result.partition}\n{params}", fontsize=10)
    ax_px.set_title(f"PnL {m.total_pnl:,.2f} (realized {m.realized_pnl:,.2f}, fees {m.fees:,.2f})   "
                    f"trades {m.n_trades:,}   Sharpe {m.sharpe:.3g}   max drawdown {m.max_drawdown:,.2f}",
                    fontsize=9)
    for ax in (ax_px, ax_pos, ax_eq):
        ax.grid(alpha=0.25, lw=0.5)
    fig.tight_layout()
    return fig


def plot_run(result: BacktestResult, out_dir: str | os.PathLike) -> list[Path]:
    """``plot.png`` and ``plot.html``: three panels over the data clock -- mid price with buy
    (green ^) and sell (red v) fills, position, and equity (cash + position at the mid) with its
    drawdown shaded.  The x axis is wall-clock time (UTC) when the data's timestamps are
    epoch-like, else the data's own time units (:func:`epoch_unit`); each fill sits at its own
    time.  Returns the paths written ([] without matplotlib or without samples)."""
    fig = figure(result)
    if fig is None:
        return []
    import matplotlib.pyplot as plt
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    png, page = d / "plot.png", d / "plot.html"
    fig.savefig(png, dpi=110)
    svg = io.StringIO()
    fig.savefig(svg, format="svg")
    plt.close(fig)
    body = svg.getvalue()
    body = body[body.index("<svg"):]
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(fmt(v))}</td></tr>"
                   for k, v in summary_row(result).items())
    page.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>backtest "
        f"{html.escape(result.strategy)} {html.escape(result.partition)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse;font-size:13px}"
        "th{text-align:left;padding:2px 12px 2px 0;font-weight:500;color:#555}td{text-align:right}"
        "svg{max-width:100%;height:auto}</style></head><body>"
        f"<h2>{html.escape(result.strategy)} on {html.escape(result.partition)}</h2>{body}"
        f"<table>{rows}</table></body></html>\n")
    return [png, page]

