"""The backtest core: one strategy with one parameter set over one data partition, in one process.

Why pure and deterministic: the sequential CLI and the Spark sweep (``replay/spark.py``) both
call :func:`run_task`, and the same task must give the same summary row wherever it runs.  Every
number depends only on the partition's events and the parameters (no wall clock, no randomness).

A run: open the partition (:func:`open_partition`), build the strategy's engine (compiled once
per machine, ~20 ms per further engine in a process), attach the strategy through a
:class:`~strategies.api.SimContext` (engine and fill simulator in lockstep), replay the batches
cut every ``sample_lines`` input lines (a run parameter, default 1,000), and sample the equity at
the mid price (the program's MID view, else the simulator's book) after every ``sample_lines``-th
input line and at the end -- never at a batch boundary, so the samples, and the Sharpe ratio and
drawdown computed from them, are the same however the data is chunked (a capture and its Parquet
copy have different batches).
Metrics come from :func:`replay.metrics.summarize`.

Cost: the engine's per-line cost (with callbacks watched: see ``bench`` section 9) plus the
simulator's (~60 ns a line) plus, per piece of ``sample_lines`` lines, a few Python calls
(~30 us): with the default 1,000 lines per sample ~30 ns a line.  Memory: O(book + fills +
samples), the data is streamed.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

import strategies
from ddms.errors import ReplayError
from ddms.io.events import EventBatch
from replay.fills import FillSimulator
from replay.metrics import RunMetrics, equity_curve, summarize
from strategies.api import OrderRecord, SimContext, Strategy

__all__ = ["BacktestResult", "METRICS", "identical", "open_partition", "partition_symbol", "run_backtest", "run_task",
           "summary_row", "symbol_partitions"]

METRICS: tuple[str, ...] = tuple(RunMetrics.__dataclass_fields__) + ("lines", "orders")
"""The metric columns of a summary row, after the partition and the parameters."""

SYNTHETIC = "synthetic:"


def open_partition(partition: str, *, skip_bad: bool = False) -> Iterator[EventBatch]:
    """The event batches (rel 0 = bids, 1 = asks) of ``partition``: a data file, or
    ``synthetic:LINES[:SEED]`` for the seeded generator of :mod:`replay.synthetic`.  Files go
    through :func:`ddms.io.sources.open_source` (order-book CSV, LOBSTER, Binance capture or
    Parquet, detected from the file).  A missing file or unknown format is a ReplayError naming
    it; a bad line an InputError naming file and line (``skip_bad``: skipped and counted in the
    batches' ``skipped``)."""
    return _open(partition, skip_bad)[0]


def _open(partition: str, skip_bad: bool = False) -> tuple[Iterator[EventBatch], str]:
    """(batches, how the fill simulator should read deletes: its ``trades`` mode).  Price-level
    books (Binance captures, also converted to Parquet) change a level's volume for cancels as
    much as for trades, so their reductions are not executions: ``"none"`` (resting orders fill
    only when the other side crosses them).  Order-by-order files use ``"reductions"`` (E lines
    are executions); LOBSTER batches say per event what traded."""
    if partition.startswith(SYNTHETIC):
        return _synthetic(partition), "reductions"
    from ddms.io.sources import open_source
    src = open_source(partition, skip_bad=skip_bad)
    kind = src.kind
    if kind == "parquet":
        from ddms.io.columnar import parquet_info
        kind = parquet_info(src.path).kind
    return iter(src), ("none" if "binance" in kind else "reductions")


def symbol_partitions(partitions: Iterable[str], skip_bad: bool = False) -> list[str]:
    """``partitions`` with every file that holds several symbols (cryptofeed captures, DBN,
    tardis) replaced by one ``FILE#SYMBOL`` partition per symbol, in order of first appearance:
    a backtest trades each instrument on its own (its own engine, fill simulator, position and
    metrics; one Spark task per (file, symbol) and parameter set).  Cost: one read of each such
    file to list its symbols (``skip_bad``: its bad lines skipped, as the runs will skip them)."""
    from ddms.io.sources import file_symbols
    out: list[str] = []
    for p in partitions:
        symbols = [] if p.startswith(SYNTHETIC) else file_symbols(p, skip_bad)
        out.extend([f"{p}#{s}" for s in symbols] if len(symbols) > 1 else [p])
    return out


def partition_symbol(partition: str) -> str | None:
    """The symbol a ``FILE#SYMBOL`` partition names (None for a whole file or synthetic data)."""
    import os
    if partition.startswith(SYNTHETIC) or "#" not in partition or os.path.exists(partition):
        return None
    return partition.rsplit("#", 1)[1]


def _synthetic(spec: str) -> Iterator[EventBatch]:
    from ddms.io.orderbook import OrderBookParser, parse_chunks
    from replay.synthetic import generate_orderbook
    parts = spec[len(SYNTHETIC):].split(":")
    try:
        if len(parts) > 2:
            raise ValueError
        lines = int(parts[0].replace("_", ""))
        seed = int(parts[1]) if len(parts) == 2 else 0
    except ValueError:
        raise ReplayError("expected synthetic:LINES or synthetic:LINES:SEED (integers)", spec) from None
    if lines < 1:
        raise ReplayError("the number of lines must be >= 1", spec)
    return parse_chunks(OrderBookParser(brokers=10, source=spec), generate_orderbook(lines, seed=seed))


@dataclass(frozen=True)
class BacktestResult:
    """Everything one run produced.  ``fills`` are the simulator's fill columns (time, order_id,
    side +1/-1, price, qty, fee, taker); ``equity`` the samples (line, time, mark, position,
    cash, equity, return); ``orders`` every order/cancel the strategy sent; ``seconds`` the wall
    time (not part of the summary row: it is not deterministic); ``skipped`` the bad input
    lines a ``skip_bad`` run skipped."""

    partition: str
    strategy: str
    params: dict[str, float]
    metrics: RunMetrics
    lines: int
    fills: dict[str, np.ndarray]
    equity: dict[str, np.ndarray]
    orders: tuple[OrderRecord, ...]
    seconds: float
    skipped: int = 0

    def row(self) -> dict[str, object]:
        return summary_row(self)

    TABLES = ("fills", "equity", "orders")

    def columns(self, name: str) -> dict[str, Any]:
        """The named columns of table ``name`` (one of :attr:`TABLES`); ``orders`` has line,
        time, action, order_id, side, price, qty."""
        if name == "fills":
            return dict(self.fills)
        if name == "equity":
            return dict(self.equity)
        if name == "orders":
            o = self.orders
            return {"line": np.array([r.line for r in o], np.int64),
                    "time": np.array([r.time for r in o], np.float64),
                    "action": [r.action for r in o], "order_id": np.array([r.order_id for r in o], np.int64),
                    "side": [r.side for r in o], "price": np.array([r.price for r in o], np.float64),
                    "qty": np.array([r.qty for r in o], np.float64)}
        raise ValueError(f"no table {name!r} (tables: {', '.join(self.TABLES)})")

    def to_arrow(self, name: str):
        """Table ``name`` (``"fills"``, ``"equity"`` or ``"orders"``) as a pyarrow Table."""
        from ddms.runtime.export import columns_table
        return columns_table(self.columns(name))

    def to_pandas(self, name: str):
        """Table ``name`` as a pandas DataFrame (pandas is optional: a DependencyError says how
        to install it)."""
        from ddms.runtime.export import to_pandas
        return to_pandas(self.to_arrow(name))


def summary_row(result: BacktestResult) -> dict[str, object]:
    """``{"partition", each parameter, each metric, "lines", "orders"}`` with plain Python values."""
    row: dict[str, object] = {"partition": result.partition}
    row.update({k: float(v) for k, v in result.params.items()})
    for k, v in result.metrics.as_dict().items():
        row[k] = int(v) if isinstance(v, int | np.integer) else float(v)
    row["lines"] = int(result.lines)
    row["orders"] = sum(1 for o in result.orders if o.action != "cancel")
    return row


def identical(a: object, b: object) -> bool:
    """Equal values of equal types, floats bit for bit (so NaN equals NaN and -0.0 differs from
    0.0), dict keys in the same order: how a Spark sweep's summary rows are checked against the
    sequential run's (``bench``, tests).  O(size of the values)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, dict):
        return list(a) == list(b) and all(identical(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(identical(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _cuts(batch: EventBatch, every: int) -> Iterator[int]:
    """The input lines of ``batch`` at which to stop: each multiple of ``every`` inside it (a
    sample), then its last line (the batch is applied piecewise, never copied)."""
    first = (batch.first_line - 1) // every * every + every
    yield from range(first, batch.last_line, every)
    yield batch.last_line


def run_backtest(partition: str | Iterable[EventBatch], strategy: str | Strategy,
                 params: Mapping[str, Any] | None = None, *, sample_lines: int | None = None,
                 trades: str | None = None, progress: Callable[[int], None] | None = None,
                 check: bool = False, name: str | None = None, skip_bad: bool = False) -> BacktestResult:
    """Run ``strategy`` (a registered name with ``params``, or an instance) over ``partition``
    (a path or ``synthetic:...`` spec, or an iterable of batches, then named ``name``), sampling
    the equity every ``sample_lines`` input lines (default: the ``sample_lines`` parameter).
    ``trades`` is the fill simulator's execution rule (default: by data format, see
    :func:`_open`).  ``progress(lines)`` is called after each sampled piece; ``check`` runs the simulator's and
    the context's ``_check`` after each piece (tests); ``skip_bad`` skips and counts bad lines of a
    file instead of stopping at the first.  Errors: StrategyError for an unknown
    strategy/parameter, ReplayError/InputError for bad data (naming file and line)."""
    strat = strategies.get(strategy, params) if isinstance(strategy, str) else strategy
    sample_lines = int(strat.p["sample_lines"]) if sample_lines is None else sample_lines
    if sample_lines < 1:
        raise ValueError(f"sample_lines must be >= 1, got {sample_lines}")
    if isinstance(partition, str):
        label, (batches, auto) = partition, _open(partition, skip_bad)
    else:
        label, batches, auto = name or "<batches>", partition, "reductions"
    p = strat.p
    t0 = time.perf_counter()
    engine = strat.make_engine()
    sim = FillSimulator(latency=p["latency"], maker_fee=p["maker_fee"], taker_fee=p["taker_fee"],
                         trades=trades or auto)
    ctx = SimContext(engine, sim)
    ctx.symbol = partition_symbol(partition) if isinstance(partition, str) else None
    strat.attach(engine, ctx)
    relmap = engine.relmap(("bids", "asks"))
    start = engine.position
    s_line: list[int] = []
    s_time: list[float] = []
    s_mark: list[float] = []
    last_mark = math.nan
    lines = 0
    skipped = 0
    mid_view = engine.views.get("MID")        # O(1); else the simulator's book, O(levels)

    def sample() -> None:
        nonlocal last_mark
        mid = (math.nan if (m := mid_view.value) is None else float(m)) if mid_view is not None \
            else 0.5 * (sim.best("buy") + sim.best("sell"))
        if math.isfinite(mid):
            last_mark = mid
        if math.isfinite(sim.clock) and (not s_line or s_line[-1] != lines):
            s_line.append(lines)
            s_time.append(sim.clock)
            s_mark.append(last_mark)

    for batch, cut in ((b, c) for b in batches for c in _cuts(b, sample_lines)):
        if cut == batch.last_line:
            skipped += batch.skipped
        ctx.apply(batch, relmap, until_line=cut)
        lines = engine.position - start
        if lines % sample_lines == 0:     # a batch's end is no sample: the samples depend on the lines only
            sample()
        if check:
            ctx._check()
        if progress is not None:
            progress(lines)
    sample()                              # the end of the data (unless it was just sampled)
    fills = sim.fill_columns()
    times = np.asarray(s_time, dtype=np.float64)
    marks = np.asarray(s_mark, dtype=np.float64)
    metrics = summarize(fills, times, marks)
    curve = equity_curve(times, marks, fills["time"], fills["side"], fills["qty"], fills["price"], fills["fee"])
    equity = {"line": np.asarray(s_line, dtype=np.int64), "time": curve.time, "mark": curve.mark,
              "position": curve.position, "cash": curve.cash, "equity": curve.equity,
              "return": np.concatenate([[0.0], np.diff(curve.equity)]) if curve.equity.shape[0] else curve.equity}
    return BacktestResult(label, strat.name, dict(p), metrics, lines, fills, equity, tuple(ctx.orders),
                          time.perf_counter() - t0, skipped)


def run_task(partition: str, strategy: str, params: dict[str, float], *, skip_bad: bool = False) -> dict[str, object]:
    """One summary row for ``strategy`` with ``params`` over ``partition``: the partition, every
    parameter (defaults filled in), every metric (:data:`METRICS`).  Deterministic: the same
    task gives the same row in any process (the Spark sweep relies on it)."""
    return summary_row(run_backtest(partition, strategy, params, skip_bad=skip_bad))
