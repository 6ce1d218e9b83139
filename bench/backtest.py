"""Section 9: backtest lines/s per core -- SOBI with fills on the synthetic stream.

One process, one core: rates are input lines per CPU second of this process (``time.process_time``),
i.e. per core, so that other work on a shared machine does not count against them; each note
gives the wall-clock rate too.  Cases, all on the section-1 synthetic stream (10M lines; ``--quick``
1M; ``--lines N`` any size) parsed beforehand unless said otherwise:

* the SOBI program alone (the engine, no strategy, no simulator): the ceiling;
* the SOBI strategy backtest (``replay.backtest.run_backtest``: engine + compiled conditions +
  fill simulator + equity samples every 1,000 lines + metrics): the target, >= 1M lines/s;
* the same from bytes in memory (parse included);
* the market maker backtest on the top-of-book program.

Each backtest case runs in a fresh engine (the compiled module is loaded beforehand); the note
says how many orders, fills and Python callbacks the run had, since a strategy that trades more
costs more."""

from __future__ import annotations

import time

from bench.common import CHUNK, Row, Shared, n_lines, rate, time_apply
from ddms.io.orderbook import OrderBookParser, parse_chunks

SECTION = "9 backtest"


def _backtest(batches, name: str, params: dict) -> tuple[float, float, object, object]:
    """(wall seconds, CPU seconds of this process, result, strategy) of one backtest."""
    import strategies
    from replay.backtest import run_backtest
    strat = strategies.get(name, params)
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_backtest(batches, strat, name="synthetic")
    return time.perf_counter() - t0, time.process_time() - c0, result, strat


def _apply_cpu(eng, batches) -> tuple[float, float]:
    c0 = time.process_time()
    wall = time_apply(eng, batches)
    return wall, time.process_time() - c0


def run(sh: Shared) -> list[Row]:
    import strategies
    from replay.backtest import run_backtest

    rows: list[Row] = []
    data = sh.data("synthetic")
    batches = sh.batches("synthetic")
    lines = n_lines(batches)
    label = sh.label("synthetic")
    # the signal of the (uncrossed) synthetic book sits within about +-0.0005 of 0: at 0.0003 the
    # strategy trades about as often as 0.001 did on the earlier, crossed stream (10M lines:
    # 8,936 callbacks and 6,934 fills against 8,484 and 6,517), so the rows stay comparable
    # and the sizes the README's rows were measured with (the defaults before 1 lot, 5 max)
    sizes = {"order_size": 100, "position_limit": 1000}
    sobi = {"threshold": 0.0003, **sizes}
    mm = {"tick": 100, **sizes}
    for name, params in (("sobi", sobi), ("mm", mm)):     # load compiled code outside the timings
        run_backtest(batches[:1], name, params)
    s = strategies.get("sobi", sobi)
    eng = s.make_engine()
    s.setup(eng)
    wall, cpu = _apply_cpu(eng, batches)
    ceiling = rate(lines, cpu)
    rows.append(Row(SECTION, f"{label}: SOBI program alone (engine, no strategy)", ceiling, "lines/s/core",
                    verdict=f"the ceiling for the backtest below; wall clock {rate(lines, wall):,.0f} lines/s"))
    wall, cpu, r, strat = _backtest(batches, "sobi", sobi)
    lps = rate(lines, cpu)
    rows.append(Row(SECTION, f"{label}: SOBI backtest with fills, threshold {sobi['threshold']:g}", lps, "lines/s/core",
                    ">= 1M lines/s", ("PASS" if lps >= 1e6 else "FAIL")
                    + f": {len(r.orders):,} orders/cancels, {r.metrics.n_trades:,} fills, {strat.fired:,} callbacks;"
                    f" {100 * lps / ceiling:.0f}% of the engine alone; wall clock {rate(lines, wall):,.0f} lines/s"))
    chunks = (data[i:i + CHUNK] for i in range(0, len(data), CHUNK))
    t0, c0 = time.perf_counter(), time.process_time()
    r2 = run_backtest(parse_chunks(OrderBookParser(brokers=10), chunks), "sobi", sobi, name="synthetic")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert r2.metrics == r.metrics
    rows.append(Row(SECTION, f"{label}: SOBI backtest, parse + replay", rate(lines, cpu), "lines/s/core",
                    verdict=f"same metrics as pre-parsed; wall clock {rate(lines, wall):,.0f} lines/s"))
    wall, cpu, r, _ = _backtest(batches, "mm", mm)
    rows.append(Row(SECTION, f"{label}: market maker backtest (top of book), tick 100", rate(lines, cpu),
                    "lines/s/core", verdict=f"{len(r.orders):,} orders/cancels, {r.metrics.n_trades:,} fills; "
                    f"wall clock {rate(lines, wall):,.0f} lines/s"))
    return rows
