"""Section 4: cost per input line against book depth.

For each depth N: ``bench.synth.book_stream`` builds N resting orders (VWAP: N bids; SOBI: N/2
bids + N/2 asks, both sides matter to it), parsed and applied untimed; then a steady-state
stream of mixed updates (E / F+B / D+B, depth constant) is timed through ``Engine.apply``
(pre-parsed batches: the engine's cost only).  Two price models (see ``bench.synth``):

* distinct prices: most orders have a price level of their own, so the levels grow with N;
* tick levels: integer ticks within +-2,000 of a drifting mid, so the levels stay bounded (a
  few hundred to a few thousand) and deep books stack many orders per level, as real ones do.

Each depth is measured ``REPEATS`` times, the depths taking turns, and the best run counts: on the
shared VMs we measure on, one run of the same depth varied by up to 25% (slow phases of the
machine), and taking turns keeps a slow phase from landing on one depth only.

Target, per program and price model: cost(1M) / cost(1k) <= 3x."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from bench.common import Row, Shared, Sizes, engine, n_lines, parse_continue, time_apply
from bench.synth import book_stream
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser
from ddms.runtime.engine import Engine

SECTION = "4 depth"
TICK_BAND = 2_000
MODELS = (("distinct prices", 0), ("tick levels", TICK_BAND))
REPEATS = 3


def label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def _levels(batches: list[EventBatch]) -> int:
    """Distinct (side, price) levels among the inserts of ``batches``."""
    rel = np.concatenate([b.rel for b in batches])
    sign = np.concatenate([b.sign for b in batches])
    px = np.concatenate([b.cols[:, 4] for b in batches])
    ins = sign > 0
    return sum(len(np.unique(px[ins & (rel == r)])) for r in (0, 1))


def steady_cost(prog: str | Callable[[], Engine], depth: int, steady_lines: int, seed: int = 1,
                tick_band: int = 0, both_sides: bool | None = None) -> tuple[float, int, int]:
    """(seconds, lines, price levels after the build) of the steady-state stream at ``depth``
    through a fresh engine (``prog``: a bench program name, or a function making the engine)."""
    if both_sides is None:
        both_sides = prog == "SOBI"
    build, steady = book_stream(depth, steady_lines, both_sides=both_sides, seed=seed, tick_band=tick_band)
    parser = OrderBookParser(brokers=10)
    b_build = parse_continue(parser, build)
    b_steady = parse_continue(parser, steady)
    eng = engine(prog) if isinstance(prog, str) else prog()
    time_apply(eng, b_build)
    return time_apply(eng, b_steady), n_lines(b_steady), _levels(b_build)


def best_costs(prog: str | Callable[[], Engine], sizes: Sizes, steady_lines: int,
               **kw) -> dict[int, tuple[float, int, int]]:
    """:func:`steady_cost` at each of ``sizes.depths``, the best of ``REPEATS`` runs (one with
    ``--quick``), the depths taking turns (so that a slow phase of the machine does not land on
    one depth only)."""
    best: dict[int, tuple[float, int, int]] = {}
    for _ in range(1 if sizes.quick else REPEATS):
        for d in sizes.depths:
            got = steady_cost(prog, d, steady_lines, **kw)
            if d not in best or got[0] < best[d][0]:
                best[d] = got
    return best


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    sizes = sh.sizes
    for _, band in MODELS:   # compile the generator outside the timing
        book_stream(8, 8, both_sides=True, tick_band=band)
    for model, band in MODELS:
        for prog in ("VWAP", "SOBI"):
            side = "bids" if prog == "VWAP" else "bids+asks"
            best = best_costs(prog, sizes, sizes.steady_lines, tick_band=band)
            cost: dict[int, float] = {}
            for d, (seconds, lines, levels) in best.items():
                cost[d] = seconds / lines * 1e9
                case = f"{prog}, {model}: {label(d)} resting {side}, {lines:,} lines"
                rows.append(Row(SECTION, case, cost[d], "ns/line",
                                verdict=f"{lines / seconds:,.0f} lines/s; {levels:,} price levels"))
            lo, hi = min(cost), max(cost)
            ratio = cost[hi] / cost[lo]
            rows.append(Row(SECTION, f"{prog}, {model}: cost({label(hi)}) / cost({label(lo)})", ratio, "x",
                            "<= 3x", "PASS" if ratio <= 3 else "FAIL"))
    return rows
