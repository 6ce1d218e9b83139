"""Run metrics on hand-computed series, and the accounting identity on random fills."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.metrics import (
    equity_curve,
    max_drawdown,
    max_drawdown_fraction,
    position_cash,
    realized_pnl,
    returns,
    sharpe,
    sortino,
    summarize,
    win_rate,
)

# buy 10@100, buy 10@110, sell 15@120, sell 10@90 (flips to short 5), buy 5@80 (flat)
FILLS = {
    "time": np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
    "side": np.array([1.0, 1.0, -1.0, -1.0, 1.0]),
    "qty": np.array([10.0, 10.0, 15.0, 10.0, 5.0]),
    "price": np.array([100.0, 110.0, 120.0, 90.0, 80.0]),
    "fee": np.array([1.0, 1.0, 1.5, 0.5, 0.0]),
}
TIMES = np.array([0.0, 1.0, 2.5, 3.0, 4.5, 5.0])
MARKS = np.array([100.0, 100.0, 112.0, 118.0, 85.0, 80.0])


def _cols(*names):
    return [FILLS[n] for n in names]


def test_position_cash_and_realized_pnl_by_average_cost():
    pos, cash = position_cash(*_cols("side", "qty", "price", "fee"))
    assert pos.tolist() == [10, 20, 5, -5, 0]
    assert cash.tolist() == [-1001, -2102, -303.5, 596, 196]
    real, final, avg = realized_pnl(*_cols("side", "qty", "price"))
    # avg 105 after two buys; +15*(120-105); closes 5 at 90 (-75) and opens short 5 at 90; +5*(90-80)
    assert real.tolist() == [0, 0, 225, -75, 50]
    assert final == 0 and math.isnan(avg)
    real3, pos3, avg3 = realized_pnl([1, 1, -1], [10, 10, 15], [100, 110, 120])
    assert real3.tolist() == [0, 0, 225] and pos3 == 5 and avg3 == 105


def test_equity_curve_counts_fills_up_to_each_sample():
    c = equity_curve(TIMES, MARKS, *_cols("time", "side", "qty", "price", "fee"))
    assert c.position.tolist() == [0, 10, 20, 5, -5, 0]
    assert c.equity.tolist() == [0, -1, 138, 286.5, 171, 196]
    # a flat position is worth 0 even without a mark
    c2 = equity_curve([0.5, 6.0], [math.nan, math.nan], *_cols("time", "side", "qty", "price", "fee"))
    assert c2.equity.tolist() == [0, 196]


def test_returns_sharpe_sortino_drawdown_by_hand():
    e = np.array([0, -1, 138, 286.5, 171, 196])
    r = returns(e)
    assert r.tolist() == [-1, 139, 148.5, -115.5, 25]
    assert returns(e, capital=1000).tolist() == pytest.approx([-0.001, 0.139, 0.1485, -0.1155, 0.025])
    mean = 196 / 5
    assert sharpe(r) == pytest.approx(mean / math.sqrt(47656.3 / 4))
    assert sharpe(r, periods_per_year=252) == pytest.approx(mean / math.sqrt(47656.3 / 4) * math.sqrt(252))
    assert sortino(r) == pytest.approx(mean / math.sqrt((1 + 115.5**2) / 5))
    assert max_drawdown(e) == 115.5
    assert max_drawdown_fraction(e, 1000) == pytest.approx(115.5 / 1286.5)
    # degenerate cases
    assert math.isnan(sharpe([1.0])) and math.isnan(sharpe([2.0, 2.0]))
    assert math.isnan(sortino([1.0, 2.0])) and math.isnan(sortino([]))
    assert max_drawdown([]) == 0 and max_drawdown([1, 2, 3]) == 0
    assert max_drawdown_fraction([], 1.0) == 0


def test_win_rate_counts_closing_fills():
    real, _, _ = realized_pnl(*_cols("side", "qty", "price"))
    assert win_rate(real, [False, False, True, True, True]) == pytest.approx(2 / 3)
    assert math.isnan(win_rate([0.0], [False]))


def test_summarize_a_run():
    m = summarize(FILLS, TIMES, MARKS, capital=1000)
    assert m.realized_pnl == 200 and m.unrealized_pnl == 0 and m.fees == 4 and m.total_pnl == 196
    assert m.n_trades == 5 and m.win_rate == pytest.approx(2 / 3)
    assert m.turnover == 5200 and m.max_position == 20 and m.final_position == 0
    assert m.max_drawdown == 115.5 and m.max_drawdown_fraction == pytest.approx(115.5 / 1286.5)
    assert m.sharpe == pytest.approx(sharpe(returns(np.array([0, -1, 138, 286.5, 171, 196]))))
    d = m.as_dict()
    assert set(d) >= {"sharpe", "sortino", "win_rate", "turnover", "fees", "max_position"}
    # a run still open: unrealized PnL at the last finite mark
    part = {k: v[:3] for k, v in FILLS.items()}
    m3 = summarize(part, [1.0, 3.0, 4.0], [100.0, 118.0, math.nan])
    assert m3.realized_pnl == 225 and m3.unrealized_pnl == 5 * (118 - 105) and m3.fees == 3.5
    assert m3.total_pnl == 225 + 65 - 3.5
    # no fills at all
    m0 = summarize({k: v[:0] for k, v in FILLS.items()}, [0.0, 1.0], [1.0, 2.0])
    assert m0.n_trades == 0 and m0.total_pnl == 0 and math.isnan(m0.win_rate) and m0.max_position == 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="side"):
        position_cash([2], [1], [1])
    with pytest.raises(ValueError, match="qty"):
        position_cash([1], [0], [1])
    with pytest.raises(ValueError, match="length"):
        position_cash([1, 1], [1], [1])
    with pytest.raises(ValueError, match="nondecreasing"):
        equity_curve([2.0, 1.0], [1.0, 1.0], [], [], [], [])
    with pytest.raises(ValueError, match="capital"):
        returns([1.0, 2.0], capital=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1.0, -1.0]), st.integers(1, 50), st.integers(90, 110),
                          st.integers(0, 3)), min_size=1, max_size=30), st.integers(80, 120))
def test_equity_equals_realized_plus_unrealized_minus_fees(fills, mark):
    side, qty, price, fee = (np.array(c, np.float64) for c in zip(*fills, strict=True))
    t = np.arange(len(fills), dtype=np.float64)
    c = equity_curve([t[-1]], [float(mark)], t, side, qty, price, fee)
    m = summarize({"time": t, "side": side, "qty": qty, "price": price, "fee": fee}, [t[-1]], [float(mark)])
    assert c.equity[-1] == pytest.approx(m.realized_pnl + m.unrealized_pnl - m.fees, abs=1e-6)
    assert m.total_pnl == pytest.approx(c.equity[-1], abs=1e-6)
