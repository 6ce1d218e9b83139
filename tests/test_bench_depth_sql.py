"""Smoke test of the cookbook depth bench (bench/depth_sql.py): it runs end to end on a tiny book
and reports every row it promises.  Nothing here is timed or compared with a speed target."""

from __future__ import annotations

import dataclasses

from bench.common import Sizes
from bench.depth_sql import cost_class, measure, sum_twin, topn_twin, view_files
from ddms.compiler import compile_sql, compile_sql_file


def test_sum_twin_rewrites_every_extreme() -> None:
    assert sum_twin("SELECT MAX(price) - min (price) AS w FROM bids") == "SELECT SUM(price) - SUM(price) AS w FROM bids"
    assert sum_twin("SELECT SUM(volume) AS v FROM bids") is None


def test_topn_twin_is_a_threshold_search_over_the_same_relation_and_order() -> None:
    """A top-N subquery (ORDER BY .. LIMIT, or ROW_NUMBER() .. rn <= n) becomes its relation
    under a threshold search on the running count in the same order; the twin compiles to a
    threshold sum (the VWAP shape) over the same ordered map."""
    orders = "SELECT SUM(o.volume) AS v FROM (SELECT price, volume FROM bids ORDER BY price DESC, id LIMIT 5) o"
    assert topn_twin(orders) == ("SELECT SUM(o.volume) AS v FROM bids o WHERE 5 > "
                                 "(SELECT COUNT(*) FROM bids o_q WHERE o_q.price > o.price)")
    rn = ("SELECT SUM(l.volume) AS v FROM (SELECT price, SUM(volume) AS volume, ROW_NUMBER() OVER (ORDER BY price) "
          "AS rn FROM asks GROUP BY price) l WHERE l.rn <= 3")
    assert topn_twin(rn) == ("SELECT SUM(l.volume) AS v FROM asks l WHERE 3 > "
                             "(SELECT COUNT(*) FROM asks l_q WHERE l_q.price < l.price)")
    assert topn_twin("SELECT SUM(volume) AS v FROM bids") is None
    [f] = view_files("top5_bid_level_volume")
    twin = topn_twin(f.read_text())
    assert twin is not None and "ORDER BY" not in twin
    assert cost_class(compile_sql(twin).program) == "O(log n)"


def test_view_files_selects_by_stem() -> None:
    assert [f.stem for f in view_files("best_bid,spread")] == ["best_bid", "spread"]
    try:
        view_files("no_such_view")
    except ValueError as e:
        assert "no_such_view" in str(e)
    else:
        raise AssertionError("an unknown view must be refused")


def test_depth_sql_smoke() -> None:
    sizes = dataclasses.replace(Sizes.make(True), depths=(1_000, 2_000))
    [f] = view_files("best_bid")
    rows = measure([f], sizes, steady=2_000)
    growth = [r for r in rows if "cost(2k) / cost(1k)" in r.case]
    twins = [r for r in rows if "SUM twin" in r.case]
    assert len(growth) == 2 and len(twins) == 2, [r.case for r in rows]   # two price models
    cls = cost_class(compile_sql_file(f).program)
    for r in growth:
        assert r.value is not None and r.value > 0 and cls in r.verdict
    for r in twins:
        assert r.value is not None and r.value > 0 and r.verdict.startswith(("PASS", "FAIL"))
