"""``python -m bench.sql_minmax``: top of book from SQL MIN/MAX (best bid, best ask, spread, mid
in one program) and the best bid per broker, each against the SUM view of the same shape, apply
only on big/finance.csv (best of 7 fresh engines, the programs taking turns, CPU time of the
applying thread: the machine is shared).  Prints one line per program, then each MIN/MAX
program's cost over its SUM twin's (issue 21's target: within 2x)."""

from __future__ import annotations

import sys
import time

from bench.common import SHARED, n_lines, parse, rate, time_apply
from ddms.compiler import compile_sql
from ddms.runtime.engine import Engine

HEADER = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
"""
PROGRAMS = {
    "top of book (MIN/MAX: best bid, best ask, spread, mid)": """
        SELECT MAX(price) AS best_bid FROM bids;
        SELECT MIN(price) AS best_ask FROM asks;
        SELECT (SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids) AS spread;
        SELECT ((SELECT MIN(price) FROM asks) + (SELECT MAX(price) FROM bids)) / 2 AS mid;""",
    "same shape with SUM": """
        SELECT SUM(price) AS sum_bid FROM bids;
        SELECT SUM(price) AS sum_ask FROM asks;
        SELECT (SELECT SUM(price) FROM asks) - (SELECT SUM(price) FROM bids) AS sum_spread;
        SELECT ((SELECT SUM(price) FROM asks) + (SELECT SUM(price) FROM bids)) / 2 AS sum_mid;""",
    "best bid per broker (MAX ... GROUP BY broker_id)": """
        SELECT broker_id, MAX(price) AS broker_best FROM bids GROUP BY broker_id;""",
    "same shape with SUM (SUM ... GROUP BY broker_id)": """
        SELECT broker_id, SUM(price) AS broker_sum FROM bids GROUP BY broker_id;""",
}
ROUNDS = 7
TWINS = (("top of book (MIN/MAX: best bid, best ask, spread, mid)", "same shape with SUM"),
         ("best bid per broker (MAX ... GROUP BY broker_id)", "same shape with SUM (SUM ... GROUP BY broker_id)"))


def main() -> None:
    data = SHARED / "data" / "orderbook" / "big" / "finance.csv"
    if not data.exists():
        sys.exit(f"{data} not found")
    batches = parse(data.read_bytes())
    lines = n_lines(batches)
    progs = {name: compile_sql(HEADER + views).program for name, views in PROGRAMS.items()}
    for prog in progs.values():
        Engine(prog)   # compile (or load) outside the timing
    best = dict.fromkeys(progs, float("inf"))
    for _ in range(ROUNDS):   # the programs take turns, so a slow phase of the machine hits all
        for name, prog in progs.items():
            best[name] = min(best[name], time_apply(Engine(prog), batches, time.thread_time))
    for name, t in best.items():
        print(f"{name}: {rate(lines, t) / 1e6:.1f}M lines/s, {t / lines * 1e9:.1f} ns/line apply only, big "
              f"({lines} lines, CPU time, best of {ROUNDS})")
    for extreme, twin in TWINS:
        print(f"{extreme} / its SUM twin: {best[extreme] / best[twin]:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
