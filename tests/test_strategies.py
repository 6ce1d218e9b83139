"""Strategies on scripted books: SOBI and the market maker send exactly the orders their rules
say, at the lines they say, and the fill simulator fills them as its rules say.  Plus the
registry's parameter validation and the live context."""

from __future__ import annotations

import io

import pytest

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
import strategies
from ddms.io.orderbook import parse_orderbook_text
from replay.backtest import run_backtest
from strategies.api import LiveContext, OrderRecord, StrategyError

# t,id,action,volume,price -- hand-computed SOBI signal (k = 0.5) after each line in the comments
SOBI_BOOK = """
1,1,B,10,99
2,2,S,10,101
3,3,S,30,110
4,4,B,30,90
5,5,B,60,98
6,2,D,0,0
7,7,S,5,100
8,8,S,200,100
9,9,B,500,80
"""
# line 2: BID_VWAP 99, ASK_VWAP 101, MID 100 -> SIGNAL 0
# line 3: ASK_VWAP (10*101 + 30*110) / 40 = 107.75 -> SIGNAL ((107.75-100) - 1) / 100 = 0.0675: buy 10 @ 101
#         (takes the ask at 101: position 10)
# line 4: BID_VWAP (990 + 2700) / 40 = 92.25 -> SIGNAL 0: buy side re-armed
# line 5: BID_VWAP (990 + 5880) / 70 = 98.142857 -> SIGNAL 0.0589: buy min(10, 15 - 10) = 5 @ 101; the
#         ask at 101 was taken by us, so it rests (no market impact: the replayed ask stays)
# line 6: ask 101 deleted -> MID 104.5, SIGNAL -0.0082: re-armed
# line 7: ask 5 @ 100 crosses our bid at 101: filled 5 @ 101 (maker, position 15); SIGNAL 0.0775: buy
#         crossing at the position limit: no order
# line 8: SIGNAL -0.0086: re-armed
# line 9: BID_VWAP 49570 / 600 = 82.6167 -> SIGNAL -0.1647: sell min(10, 15 + 15) = 10 @ 99 (taker)


def _batch(text: str):
    return parse_orderbook_text(text.strip(), source="scripted")


def _actions(result) -> list[tuple]:
    return [(o.line, o.action, o.side, o.price, o.qty) for o in result.orders]


def test_sobi_scripted_book_orders_and_fills():
    strat = strategies.get("sobi", {"k": 0.5, "threshold": 0.05, "order_size": 10, "position_limit": 15})
    r = run_backtest([_batch(SOBI_BOOK)], strat, sample_lines=1, check=True, name="scripted")
    assert _actions(r) == [(3, "limit", "buy", 101.0, 10.0), (5, "limit", "buy", 101.0, 5.0),
                           (9, "limit", "sell", 99.0, 10.0)]
    f = r.fills
    assert f["side"].tolist() == [1.0, 1.0, -1.0]
    assert f["price"].tolist() == [101.0, 101.0, 99.0]
    assert f["qty"].tolist() == [10.0, 5.0, 10.0]
    assert f["taker"].tolist() == [True, False, True]
    assert f["time"].tolist() == [3.0, 7.0, 9.0]
    assert r.metrics.final_position == 5.0 and r.metrics.max_position == 15.0
    assert r.metrics.realized_pnl == pytest.approx(-20.0)      # 10 sold at 99 against an average cost of 101
    # compiled conditions: Python ran only on the lines that crossed into or out of the band
    assert strat.fired == 7                                    # lines 3, 4, 5, 6, 7, 8, 9
    assert r.lines == 9 and r.equity["line"].tolist() == list(range(1, 10))


def test_sobi_latency_orders_act_later():
    strat = strategies.get("sobi", {"k": 0.5, "threshold": 0.05, "order_size": 10, "position_limit": 15,
                                    "latency": 2})
    r = run_backtest([_batch(SOBI_BOOK)], strat, sample_lines=1, check=True, name="scripted")
    # The buy sent at line 3 (t=3) acts just before line 5 (the first with t >= 5), where the ask
    # at 101 still rests: taker fill.  The buy of line 5 (room 15 - 10 = 5) acts just before
    # line 7: the ask at 101 went on line 6, so it rests at 101 and line 7's ask 5 @ 100 crosses
    # it (maker).  The sell of line 9 would act at t=11: the data ends first.
    assert [(o.line, o.side, o.price, o.qty) for o in r.orders] == [
        (3, "buy", 101.0, 10.0), (5, "buy", 101.0, 5.0), (9, "sell", 99.0, 10.0)]
    assert r.fills["time"].tolist() == [5.0, 7.0]
    assert r.fills["taker"].tolist() == [True, False]
    assert r.metrics.final_position == 15.0


MM_BOOK = """
1,1,B,10,99
2,2,S,10,101
3,3,S,10,100.5
4,2,D,0,0
5,1,D,0,0
6,6,B,10,95
7,7,S,3,96
"""


def test_market_maker_scripted_book():
    strat = strategies.get("mm", {"half_spread": 0.01, "requote": 0.02, "order_size": 10, "position_limit": 10,
                                  "skew": 0.5, "tick": 0.5})
    r = run_backtest([_batch(MM_BOOK)], strat, sample_lines=1, check=True, name="scripted")
    # cancels carry no price: compare them without it (nan != nan)
    got = [(a[0], a[1], a[2], a[4]) if a[1] == "cancel" else a for a in _actions(r)]
    assert got == [
        (2, "limit", "buy", 99.0, 10.0), (2, "limit", "sell", 101.0, 10.0),      # mid 100, band [98, 102]
        # lines 3-5 keep the mid inside the band (or NaN): no callback; line 6: mid 97.75, quotes
        # floor((97.75 - 0.9775) / 0.5) * 0.5 = 96.5 and ceil((97.75 + 0.9775) / 0.5) * 0.5 = 99
        (6, "cancel", "buy", 0.0), (6, "cancel", "sell", 0.0),
        (6, "limit", "buy", 96.5, 10.0), (6, "limit", "sell", 99.0, 10.0),
        # line 7: the ask 3 @ 96 crosses our bid at 96.5 (filled 3); mid 95.5 leaves the band;
        # position 3 skews both quotes down by 0.5 * 0.955 * 3 / 10
        (7, "cancel", "buy", 0.0), (7, "cancel", "sell", 0.0),
        (7, "limit", "buy", 94.0, 7.0), (7, "limit", "sell", 96.5, 10.0),
    ]
    assert r.fills["qty"].tolist() == [3.0] and r.fills["price"].tolist() == [96.5]
    assert r.metrics.final_position == 3.0


def test_registry_and_parameter_errors():
    assert strategies.names() == ["mm", "sobi"]
    s = strategies.get("sobi")
    assert s.p["k"] == 0.25 and s.p["latency"] == 0.0          # defaults, run parameters included
    with pytest.raises(StrategyError, match=r"unknown strategy 'nope' \(strategies: mm, sobi\)"):
        strategies.get("nope")
    with pytest.raises(StrategyError, match=r"strategy sobi: unknown parameter 'kk' \(parameters: k, threshold"):
        strategies.get("sobi", {"kk": 1})
    with pytest.raises(StrategyError, match=r"parameter k=1.5 is outside \(0, 1\]"):
        strategies.get("sobi", {"k": 1.5})
    with pytest.raises(StrategyError, match=r"parameter threshold='x' is not a number"):
        strategies.get("sobi", {"threshold": "x"})
    with pytest.raises(StrategyError, match=r"latency=-1"):
        strategies.get("mm", {"latency": -1})


def test_live_context_records_and_prints():
    strat = strategies.get("sobi", {"k": 0.5, "threshold": 0.05, "order_size": 10, "position_limit": 15})
    engine = strat.make_engine()
    out = io.StringIO()
    ctx = LiveContext(engine, out=out, clock=lambda: 0.0)
    assert strat.attach(engine, ctx) is ctx
    engine.apply(_batch(SOBI_BOOK), engine.relmap(("bids", "asks")))
    # live nothing fills unless reported, so the limit is never reached: line 7 buys at the new
    # best ask 100 too; each crossing cancels the working order first
    limits = [o for o in ctx.orders if o.action == "limit"]
    assert [(o.line, o.side, o.price, o.qty) for o in limits] == [
        (3, "buy", 101.0, 10.0), (5, "buy", 101.0, 10.0), (7, "buy", 100.0, 10.0), (9, "sell", 99.0, 10.0)]
    assert [(o.line, o.order_id) for o in ctx.orders if o.action == "cancel"] == [(5, 1), (7, 2), (9, 3)]
    assert all(isinstance(o, OrderRecord) for o in ctx.orders)
    assert "limit buy 10 @ 101" in out.getvalue()
    ctx.report_fill(limits[-1].order_id, 99.0, 4.0)
    assert ctx.position == -4.0 and ctx.cash == 396.0
    ctx._check()
    with pytest.raises(StrategyError, match="exceeds"):
        ctx.report_fill(limits[-1].order_id, 99.0, 7.0)


def test_attach_without_context_is_live_on_stderr(capsys):
    strat = strategies.get("sobi", {"k": 0.5, "threshold": 0.05})
    engine = strat.make_engine()
    ctx = strat.attach(engine)                  # no context: live, orders on stderr
    assert isinstance(ctx, LiveContext)
    engine.apply(_batch(SOBI_BOOK), engine.relmap(("bids", "asks")))
    captured = capsys.readouterr()
    assert captured.out == "" and "[line 3] order 1: limit buy 1 @ 101" in captured.err  # 1 lot


def test_missing_view_is_a_clear_error():
    mm = strategies.get("mm")
    sobi = strategies.get("sobi")
    engine = mm.make_engine()                       # top of book only: no SIGNAL view
    with pytest.raises(StrategyError, match="strategy sobi: the program has no view SIGNAL"):
        sobi.attach(engine, LiveContext(engine, out=None))
