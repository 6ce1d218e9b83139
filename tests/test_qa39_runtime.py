"""What only the qa39 outside check asks (its views are checked as a family in ``test_qa_views.py``):
at least eighty views; ``ddms run --json`` rows of a few of them equal to DuckDB after every line
of tiny, through the interpreter (first results) and the compiled engine; their Python values
(``None`` for NULL, a tuple for a view of several outputs); and futures and ``above=``/``below=``
conditions that never fire while a view is NULL (an empty side of the book)."""

from __future__ import annotations

import json
import math

import pytest
import qa39_views as qa39
from clitools import cli
from conftest import shared_file
from oracle import Book, Duck, coalesce_sums
from test_sql_minmax import HEADER
from viewcheck import duck_rows, key_count, same_rows

from ddms.compiler import compile_sql

# NULL on an empty side; several outputs; a CASE over MIN/MAX; a grouped view with a NULL AVG
RUN_VIEWS = ("Q_MICRO", "Q_SPREAD_BPS", "Q_STATS_BIDS", "Q_CASE_MINMAX", "Q_NULL_GROUP_AVG")


def test_at_least_eighty_views() -> None:
    assert len(qa39.VIEWS) + len(qa39.SYMBOL_VIEWS) + len(qa39.REJECTED) >= 80


def _json_rows(row, keys: int) -> dict[tuple, tuple]:
    """One view of a ``--json`` line in :func:`viewcheck.duck_rows`'s form (rows of 0 left out)."""
    if keys == 0:
        vals = row if isinstance(row, list) else [row]
        rows = {(): tuple(math.nan if v is None else float(v) for v in vals)}
    else:
        rows = {}
        for r in row:
            vals = r[keys:]
            rows[tuple(float(k) for k in r[:keys])] = tuple(math.nan if v is None else float(v) for v in vals)
    return {k: v for k, v in rows.items() if not all(abs(x) <= 1e-9 for x in v)}


@pytest.mark.parametrize("mode", ["--first-results", pytest.param("--no-first-results", marks=pytest.mark.slow)])
def test_run_json_rows_equal_duckdb_every_line(tmp_path, mode: str) -> None:
    """``ddms run FILE --data tiny --json --every 1``: each printed line's rows are DuckDB's at that line
    (``null`` for NULL), through the interpreter (first results) and the compiled engine."""
    data = shared_file("data", "orderbook", "tiny", "finance.csv")
    sql = tmp_path / "views.sql"
    sql.write_text(HEADER + "".join(qa39.as_view(n, qa39.VIEWS[n]) + ";\n" for n in RUN_VIEWS))
    prog = compile_sql(sql.read_text(), str(sql)).program
    keys = {q.name: key_count(prog, q.name) for q in prog.queries}
    p = cli("run", str(sql), "--data", str(data), "--json", "--every", "1", mode)
    out, err = p.communicate(timeout=1800)
    assert p.returncode == 0, err.decode()[-2000:]
    printed = [json.loads(s) for s in out.decode().splitlines() if s.startswith("{")]
    lines = data.read_text().splitlines()
    assert [r["line"] for r in printed] == list(range(1, len(lines) + 1))
    book, duck = Book(), Duck()
    nulls = 0
    for text, got in zip(lines, printed, strict=True):
        book.line(text)
        for name in RUN_VIEWS:
            want = duck_rows(duck.query(book, coalesce_sums(qa39.VIEWS[name])), keys[name])
            nulls += sum(math.isnan(x) for r in want.values() for x in r)
            have = _json_rows(got["views"][name], keys[name])
            assert same_rows(have, want), f"{name} line {got['line']}: --json {have} != DuckDB {want}"
    assert nulls > 0   # the NULL cases are reached (an empty ask book at the first lines)


@pytest.mark.slow
def test_null_values_are_none_and_never_fire() -> None:
    """Compiled engine: a view NULL while one side is empty reads ``None`` (a tuple with ``None`` in
    it for several outputs); futures, ``above=`` and ``below=`` stay quiet until it is a number."""
    from ddms.io.orderbook import OrderBookParser
    from ddms.runtime.engine import Engine

    prog = compile_sql(HEADER + "".join(qa39.as_view(n, qa39.VIEWS[n]) + ";\n" for n in RUN_VIEWS)).program
    e = Engine(prog)
    relmap = e.relmap(("bids", "asks"))
    parser = OrderBookParser(brokers=10)
    fired: list[tuple] = []
    fut_micro = e.future("Q_MICRO", lambda v: v > -1e18)
    fut_bps = e.future("Q_SPREAD_BPS", lambda v: v < 1e18)
    e.on("Q_MICRO", lambda *a: fired.append(("above", a)), above=-1e18)
    e.on("Q_SPREAD_BPS", lambda *a: fired.append(("below", a)), below=1e18)

    def feed(text: str) -> None:
        e.apply(parser.feed((text + "\n").encode()), relmap)

    assert e.views["Q_MICRO"].value is None and e.views["Q_SPREAD_BPS"].value is None
    assert e.views["Q_STATS_BIDS"].value == (None, None, None, 0, 0)
    for text in ("1,1,B,10,100", "2,2,B,5,101", "3,2,D,0,0", "4,1,E,4,0"):
        feed(text)     # bids only: every view over the best ask stays NULL
        assert e.views["Q_MICRO"].value is None and e.views["Q_SPREAD_BPS"].value is None
        assert not fut_micro.done() and not fut_bps.done() and not fired
    lo, hi, avg, n, v = e.views["Q_STATS_BIDS"].value
    assert (lo, hi, avg, n, v) == (100.0, 100.0, 100.0, 1, 6.0)
    assert e.views["Q_CASE_MINMAX"].value is None   # over asks: empty
    feed("5,3,S,2,104")
    assert e.views["Q_SPREAD_BPS"].value == pytest.approx((104 - 100) * 20000 / 204)
    assert e.views["Q_MICRO"].value == pytest.approx((100 * 2 + 104 * 6) / 8)
    assert fut_micro.done() and fut_bps.done()
    assert {k for k, _ in fired} == {"above", "below"}
    fired.clear()
    feed("6,3,F,0,0")   # the ask side empties again: NULL, nothing fires
    assert e.views["Q_MICRO"].value is None and not fired
