"""Results of a backtest run from its fills and a sampled mark price: pure functions over numpy
arrays.

Why pure functions: the sequential runner, the Spark sweep and the tests compute the same
numbers from the same columns (:meth:`replay.fills.FillSimulator.fill_columns` gives them), so
a result never depends on who computed it.  Every function is O(n) (one pass or a few vector
operations) except :func:`equity_curve`, O((n + m) log n) for n fills and m samples.

Inputs
------
Fills are columns in time order: ``side`` (+1 buy / -1 sell), ``qty`` (> 0), ``price``, ``fee``
(cash units, negative = rebate) and ``time``.  A run's equity is sampled at times ``times``
with mark prices ``marks`` (e.g. the mid price every N input lines).

Formulas
--------
* position after fill i: ``P_i = sum_{j<=i} side_j * qty_j``; cash:
  ``C_i = -sum_{j<=i} (side_j * price_j * qty_j + fee_j)`` (the run starts flat with cash 0).
* equity at sample k: ``E_k = C + P * mark_k`` with C, P after every fill with ``time <= times[k]``
  (a flat position contributes 0 even when the mark is nan).
* realized PnL (average cost, gross of fees): a fill that adds to the position (or opens one)
  moves the average entry price ``A`` to the quantity-weighted mean; a fill that reduces it
  realizes ``closed * (price - A) * sign(P)`` with ``closed = min(qty, |P|)``; a fill that flips
  the position realizes the closed part and opens the rest at its price.
* unrealized PnL at mark m: ``P * (m - A)``.  Identity (tested):
  ``equity = realized + unrealized - fees``.
* returns: ``r_k = (E_k - E_{k-1}) / capital`` for k >= 1 (``capital`` = 1 gives PnL per
  period; Sharpe and Sortino do not depend on it).
* Sharpe: ``mean(r) / std(r, ddof=1) * sqrt(periods_per_year)``; nan with fewer than two returns
  or zero deviation.
* Sortino: ``mean(r - target) / sqrt(mean(min(r - target, 0)^2)) * sqrt(periods_per_year)``
  (downside deviation over *all* periods); nan when no period is below target.
* max drawdown: ``max_k (max_{j<=k} E_j - E_k)`` in cash units (>= 0); as a fraction:
  ``max_k (peak_k - E_k) / (capital + peak_k)`` where ``capital + peak_k > 0``.
* trades: number of fills; win rate: fraction of the *closing* fills (those against the
  position before them: they realize PnL) whose realized PnL is > 0 (nan if none closed);
  turnover: ``sum |price * qty|``; fees: ``sum fee``; max position: ``max |P_i|``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "EquityCurve", "RunMetrics", "equity_curve", "max_drawdown", "max_drawdown_fraction", "position_cash",
    "realized_pnl", "returns", "sharpe", "sortino", "summarize", "win_rate",
]


def _f64(name: str, a) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def _fill_arrays(side, qty, price, fee=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    s, q, p = _f64("side", side), _f64("qty", qty), _f64("price", price)
    f = np.zeros_like(q) if fee is None else _f64("fee", fee)
    if not (s.shape == q.shape == p.shape == f.shape):
        raise ValueError(f"fill columns differ in length: side {s.shape}, qty {q.shape}, price {p.shape}, "
                         f"fee {f.shape}")
    if not np.isin(s, (1.0, -1.0)).all():
        raise ValueError("side must be +1 (buy) or -1 (sell)")
    if (q <= 0).any() or not np.isfinite(q).all():
        raise ValueError("qty must be finite and > 0")
    return s, q, p, f


def position_cash(side, qty, price, fee=None) -> tuple[np.ndarray, np.ndarray]:
    """Position and cash after each fill (cumulative sums, see the module formulas).  O(n)."""
    s, q, p, f = _fill_arrays(side, qty, price, fee)
    return np.cumsum(s * q), np.cumsum(-(s * p * q) - f)


@dataclass(frozen=True)
class EquityCurve:
    """Equity sampled at ``time`` (all arrays of one length)."""

    time: np.ndarray
    mark: np.ndarray
    position: np.ndarray
    cash: np.ndarray
    equity: np.ndarray


def equity_curve(times, marks, fill_time, side, qty, price, fee=None) -> EquityCurve:
    """Equity ``cash + position * mark`` at each sample time, counting the fills with
    ``fill_time <= time``.  ``fill_time`` and ``times`` must be nondecreasing."""
    t, m, ft = _f64("times", times), _f64("marks", marks), _f64("fill_time", fill_time)
    if t.shape != m.shape:
        raise ValueError(f"times and marks differ in length: {t.shape} vs {m.shape}")
    if (np.diff(t) < 0).any() or (np.diff(ft) < 0).any():
        raise ValueError("times and fill_time must be nondecreasing")
    pos, cash = position_cash(side, qty, price, fee)
    if ft.shape != pos.shape:
        raise ValueError(f"fill_time has {ft.shape[0]} rows, the fills {pos.shape[0]}")
    k = np.searchsorted(ft, t, side="right")           # fills included at each sample
    p = np.concatenate([[0.0], pos])[k]
    c = np.concatenate([[0.0], cash])[k]
    with np.errstate(invalid="ignore"):
        value = np.where(p != 0.0, p * m, 0.0)
    return EquityCurve(t, m, p, c, c + value)


def realized_pnl(side, qty, price) -> tuple[np.ndarray, float, float]:
    """Per-fill realized PnL by the average-cost method (gross of fees), the final position
    and its average entry price (nan when flat).  O(n), one Python-level pass."""
    s, q, p, _ = _fill_arrays(side, qty, price)
    out = np.zeros(q.shape[0])
    pos = 0.0
    avg = 0.0
    for i, (si, qi, pi) in enumerate(zip(s.tolist(), q.tolist(), p.tolist(), strict=True)):
        d = si * qi
        if pos == 0.0 or (pos > 0.0) == (d > 0.0):
            avg = (avg * abs(pos) + pi * qi) / (abs(pos) + qi)
            pos += d
            continue
        closed = min(qi, abs(pos))
        out[i] = closed * (pi - avg) * (1.0 if pos > 0.0 else -1.0)
        pos += d
        if pos == 0.0:
            avg = 0.0
        elif (pos > 0.0) == (d > 0.0):      # flipped: the rest opens at this price
            avg = pi
    return out, pos, (avg if pos != 0.0 else math.nan)


def win_rate(realized, closing) -> float:
    """Fraction of closing fills with realized PnL > 0; nan if no fill closed."""
    r, c = _f64("realized", realized), np.asarray(closing, dtype=bool)
    n = int(c.sum())
    return math.nan if n == 0 else float((r[c] > 0.0).sum() / n)


def returns(equity, capital: float = 1.0) -> np.ndarray:
    """Per-period returns ``diff(equity) / capital`` (length n - 1)."""
    if not (capital > 0 and math.isfinite(capital)):
        raise ValueError(f"capital must be finite and > 0, got {capital!r}")
    return np.diff(_f64("equity", equity)) / capital


def sharpe(r, periods_per_year: float = 1.0) -> float:
    """``mean / std(ddof=1) * sqrt(periods_per_year)``; nan if < 2 returns or zero deviation."""
    x = _f64("returns", r)
    if x.shape[0] < 2:
        return math.nan
    sd = float(np.std(x, ddof=1))
    if sd == 0.0 or not math.isfinite(sd):
        return math.nan
    return float(np.mean(x)) / sd * math.sqrt(periods_per_year)


def sortino(r, periods_per_year: float = 1.0, target: float = 0.0) -> float:
    """``mean(r - target) / downside deviation * sqrt(periods_per_year)``; nan when no return is
    below target (or there are none)."""
    x = _f64("returns", r) - target
    if x.shape[0] == 0:
        return math.nan
    down = np.minimum(x, 0.0)
    dd = math.sqrt(float(np.mean(down * down)))
    if dd == 0.0:
        return math.nan
    return float(np.mean(x)) / dd * math.sqrt(periods_per_year)


def max_drawdown(equity) -> float:
    """Largest peak-to-trough fall of the equity curve, in cash units (0 for an empty curve)."""
    e = _f64("equity", equity)
    if e.shape[0] == 0:
        return 0.0
    return float(np.max(np.maximum.accumulate(e) - e))


def max_drawdown_fraction(equity, capital: float) -> float:
    """Largest ``(peak - equity) / (capital + peak)`` (a fraction of the account at its peak);
    samples whose account value at the peak is <= 0 are left out; 0 for an empty curve."""
    e = _f64("equity", equity)
    peak = np.maximum.accumulate(e) if e.shape[0] else e
    base = capital + peak
    ok = base > 0
    if not ok.any():
        return 0.0
    return float(np.max((peak[ok] - e[ok]) / base[ok]))


@dataclass(frozen=True)
class RunMetrics:
    """The summary of one run (see the module docstring for each formula)."""

    realized_pnl: float
    unrealized_pnl: float
    total_pnl: float
    fees: float
    n_trades: int
    win_rate: float
    turnover: float
    max_position: float
    final_position: float
    sharpe: float
    sortino: float
    max_drawdown: float
    max_drawdown_fraction: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def summarize(fills: dict[str, np.ndarray], times, marks, *, capital: float = 1.0,
              periods_per_year: float = 1.0) -> RunMetrics:
    """All metrics of a run: ``fills`` has columns ``time, side, qty, price, fee`` (as
    :meth:`FillSimulator.fill_columns` returns them), ``times``/``marks`` the equity samples.
    Unrealized PnL uses the last finite mark (0 when flat).  O(n + m log n)."""
    side, qty, price, fee = fills["side"], fills["qty"], fills["price"], fills["fee"]
    curve = equity_curve(times, marks, fills["time"], side, qty, price, fee)
    real, pos, avg = realized_pnl(side, qty, price)
    s, q, p, f = _fill_arrays(side, qty, price, fee)
    positions = np.cumsum(s * q)
    before = np.concatenate([[0.0], positions[:-1]])
    closing = (before != 0.0) & (np.sign(s) != np.sign(before))     # reduces or flips the position
    m = np.asarray(marks, dtype=np.float64)
    finite = m[np.isfinite(m)]
    unreal = 0.0 if pos == 0.0 else (pos * (finite[-1] - avg) if finite.shape[0] else math.nan)
    realized = float(real.sum())
    fees = float(f.sum())
    r = returns(curve.equity, capital)
    return RunMetrics(
        realized_pnl=realized,
        unrealized_pnl=float(unreal),
        total_pnl=realized + float(unreal) - fees,
        fees=fees,
        n_trades=int(q.shape[0]),
        win_rate=win_rate(real, closing),
        turnover=float(np.abs(p * q).sum()),
        max_position=float(np.abs(positions).max()) if positions.shape[0] else 0.0,
        final_position=float(pos),
        sharpe=sharpe(r, periods_per_year),
        sortino=sortino(r, periods_per_year),
        max_drawdown=max_drawdown(curve.equity),
        max_drawdown_fraction=max_drawdown_fraction(curve.equity, capital),
    )
