"""Section 4: cost per input line against book depth.

For each depth N: ``bench.synth.book_stream`` builds N resting orders (VWAP: N bids; SOBI: N/2
bids + N/2 asks, both sides matter to it), parsed and applied untimed; then a steady-state
stream of mixed updates (E / F+B / D+B, depth constant) is timed through ``Engine.apply``
(pre-parsed batches: the engine's cost only).  Target: cost(1M) / cost(1k) <= 3x."""

from __future__ import annotations

from bench.common import Row, Shared, engine, n_lines, parse_continue, time_apply
from bench.synth import book_stream
from ddms.streams.orderbook import OrderBookParser

SECTION = "4 depth"


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def steady_cost(prog: str, depth: int, steady_lines: int, seed: int = 1) -> tuple[float, int]:
    """(seconds, lines) of the steady-state stream at ``depth`` through a fresh engine."""
    build, steady = book_stream(depth, steady_lines, both_sides=(prog == "SOBI"), seed=seed)
    parser = OrderBookParser(brokers=10)
    b_build = parse_continue(parser, build)
    b_steady = parse_continue(parser, steady)
    eng = engine(prog)
    time_apply(eng, b_build)
    return time_apply(eng, b_steady), n_lines(b_steady)


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    sizes = sh.sizes
    book_stream(8, 8, both_sides=True)  # compile the generator outside the timing
    for prog in ("VWAP", "SOBI"):
        side = "bids" if prog == "VWAP" else "bids+asks"
        cost: dict[int, float] = {}
        for d in sizes.depths:
            seconds, lines = steady_cost(prog, d, sizes.steady_lines)
            cost[d] = seconds / lines * 1e9
            case = f"{prog}: {_label(d)} resting {side}, {lines:,} lines"
            rows.append(Row(SECTION, case, cost[d], "ns/line", verdict=f"{lines / seconds:,.0f} lines/s"))
        lo, hi = min(cost), max(cost)
        ratio = cost[hi] / cost[lo]
        rows.append(Row(SECTION, f"{prog}: cost({_label(hi)}) / cost({_label(lo)})", ratio, "x", "<= 3x",
                        "PASS" if ratio <= 3 else "FAIL"))
    return rows
