"""Section 3: what a user would otherwise do -- keep the book in a DuckDB table, apply each
update as row inserts/deletes, and re-run the VWAP SELECT of queries/finance/vwap.sql (with
COALESCE on the inner sum, so the top price level is not lost to a NULL) after every line.

The book and the updates are those of section 4 (bids only) at 1k, 10k and 100k resting orders;
each depth is time-boxed (a query still running at the end is interrupted).  The same updates
are timed through the engine, and the engine's VWAP after the last line DuckDB finished is
compared with DuckDB's.  For contrast, the same VWAP as a window-function query over price
levels (what a SQL-savvy user might write instead) is run the same way."""

from __future__ import annotations

import re
import threading
import time

import duckdb
import numpy as np
import pyarrow as pa

from bench.common import VWAP_SQL, Row, Shared, Skip, engine, merge, n_lines, parse_continue, time_apply
from bench.depth import label
from bench.synth import book_stream
from ddms.io.orderbook import COLUMNS, OrderBookParser, orderbook_rows
from ddms.runtime.driver import split_lines

SECTION = "3 duckdb"


def vwap_select() -> str:
    """The SELECT of vwap.sql, its inner ``SUM(b2.volume)`` wrapped in COALESCE(.., 0)."""
    if not VWAP_SQL.exists():
        raise Skip(f"{VWAP_SQL} not found")
    text = VWAP_SQL.read_text()
    m = re.search(r"\bSELECT\b.*", text, re.S | re.I)
    sql = m.group(0).strip().rstrip(";") if m else ""
    new, k = re.subn(r"\(\s*SELECT\s+SUM\((b2\.volume)\)", r"(SELECT COALESCE(SUM(\1), 0)", sql, flags=re.I)
    if k != 1:
        raise Skip(f"{VWAP_SQL}: could not find the inner SUM(b2.volume) to wrap")
    return new


# The same VWAP written the way a SQL-savvy user might (not the brief's query; shown for
# contrast): one pass over the price levels with a running sum of the volume above each level.
WINDOW_SQL = """SELECT COALESCE(SUM(pv), 0) FROM (
  SELECT SUM(price * volume) AS pv,
         SUM(SUM(volume)) OVER (ORDER BY price DESC ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
           AS above
  FROM bids GROUP BY price)
WHERE 0.25 * (SELECT SUM(volume) FROM bids) > COALESCE(above, 0)"""


def _duck_updates(con, query: str, steady, seconds: float) -> tuple[int, float, float]:
    """Apply lines of ``steady`` (events grouped by line), running ``query`` after each line,
    until the time box is spent; a query still running then is interrupted and not counted.
    Returns (lines done, seconds, VWAP after the last line done)."""
    rel, sign, cols, line = steady.rel, steady.sign, steady.cols.tolist(), steady.line
    n = len(steady)
    ex = con.execute
    lines = 0
    value = 0.0
    i = 0
    timer = threading.Timer(seconds, con.interrupt)
    t0 = time.perf_counter()
    timer.start()
    try:
        while i < n:
            ln = line[i]
            while i < n and line[i] == ln:
                if rel[i] == 0:
                    if sign[i] < 0:
                        ex("DELETE FROM bids WHERE id = ?", [int(cols[i][1])])
                    else:
                        t, oid, broker, vol, px = cols[i]
                        ex("INSERT INTO bids VALUES (?, ?, ?, ?, ?)", [t, int(oid), int(broker), vol, px])
                i += 1
            value = ex(query).fetchone()[0]
            lines += 1
            if time.perf_counter() - t0 >= seconds:
                break
    except duckdb.InterruptException:
        pass
    finally:
        timer.cancel()
    return lines, time.perf_counter() - t0, (value or 0.0)


def _connect(book: np.ndarray):
    """A fresh in-memory DuckDB holding ``book`` (rows of COLUMNS) as table ``bids``."""
    con = duckdb.connect()
    con.register("arrow_book", pa.table({c: pa.array(book[:, j]) for j, c in enumerate(COLUMNS)}))
    con.execute("CREATE TABLE bids (t DOUBLE, id BIGINT, broker_id BIGINT, volume DOUBLE, price DOUBLE)")
    con.execute("INSERT INTO bids SELECT t, id::BIGINT, broker_id::BIGINT, volume, price FROM arrow_book")
    con.unregister("arrow_book")
    return con


def _engine_value_after(b_build, steady, lines: int) -> float:
    check = engine("VWAP")
    time_apply(check, b_build)
    head, _ = split_lines(steady, steady.first_line + lines - 1)
    time_apply(check, [head])
    return float(check.value("VWAP"))


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    queries = {"vwap.sql": vwap_select(), "window rewrite": WINDOW_SQL}
    sizes = sh.sizes
    box = sizes.duck_seconds
    for d in sizes.duck_depths:
        build, steady_bytes = book_stream(d, 200_000, both_sides=False, seed=2)
        parser = OrderBookParser(brokers=10)
        b_build = parse_continue(parser, build)
        book = orderbook_rows(parser)["bids"]
        b_steady = parse_continue(parser, steady_bytes)
        steady = merge(b_steady)
        eng = engine("VWAP")
        time_apply(eng, b_build)
        e_rate = n_lines(b_steady) / time_apply(eng, b_steady)
        for qname, query in queries.items():
            con = _connect(book)
            lines, seconds, d_value = _duck_updates(con, query, steady, box)
            con.close()
            case = f"DuckDB {qname}, {label(d)} resting bids"
            if lines == 0:
                note = f"< {1 / box:.2g} updates/s: the first query did not finish in {box:g} s (interrupted)"
                rows.append(Row(SECTION, case, None, "updates/s", verdict=note))
                rows.append(Row(SECTION, f"engine / DuckDB {qname}, {label(d)}", None, "x",
                                verdict=f"> {e_rate * box:,.0f}x (engine {e_rate:,.0f} lines/s)"))
                continue
            d_rate = lines / seconds
            e_value = _engine_value_after(b_build, steady, lines)
            same = bool(np.isclose(e_value, d_value, rtol=1e-9, atol=1e-6))
            note = f"{lines:,} lines in {seconds:.1f} s; {'agrees' if same else 'DISAGREES'} with engine"
            if not same:
                note += f": {d_value:.10g} vs {e_value:.10g}"
            rows.append(Row(SECTION, case, d_rate, "updates/s", verdict=note))
            rows.append(Row(SECTION, f"engine / DuckDB {qname}, {label(d)}", e_rate / d_rate, "x",
                            verdict=f"engine {e_rate:,.0f} lines/s"))
    return rows
