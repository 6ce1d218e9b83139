"""SOBI: static order book imbalance (DBToaster CIDR paper; the Penn-Lehman trading agent).

Signal: the VWAP of the top k-fraction of the bids and of the asks (by volume, best prices first),
and ``SIGNAL = ((ASK_VWAP - MID) - (MID - BID_VWAP)) / MID``.  Positive: the asks' weight sits
farther from the mid than the bids' -- buy pressure; negative: sell pressure.

Rule (edge-triggered): when SIGNAL crosses above ``+threshold`` the strategy cancels its open
orders and buys ``min(order_size, position_limit - position)`` with a limit order at the best ask
(it takes what the touch offers and never walks into the book; a rest stays working until the
next signal); crossing below ``-threshold`` sells the same way at the best bid.  Nothing happens
again on that side until SIGNAL has come back inside the band.

Why edge-triggered with compiled conditions: each side is one subscription that alternates
between *armed* (``above=threshold``: fires when the signal leaves the band) and *re-arming*
(``below=threshold``: fires when it comes back), so compiled code returns to Python twice per
crossing and never while the signal stays on one side.  Cost per crossing: two callbacks, a
cancel per open order and one order.  The position limit is checked against the filled
position; an order still working when the limit is checked may overshoot it by one order size.
"""

from __future__ import annotations

import math

from strategies.api import PROGRAMS, Context, Param, Strategy


class Sobi(Strategy):
    name = "sobi"
    summary = "trade the bid/ask VWAP imbalance of the top k-fraction of each book"
    params = (
        Param("k", 0.25, "fraction of each side's volume in its VWAP (best prices first)", lo=0.0, hi=1.0,
              lo_open=True),
        Param("threshold", 0.001, "act when |SIGNAL| = |imbalance| / mid crosses this", lo=0.0, lo_open=True),
        Param("order_size", 1.0, "quantity per order, in the data's volume units (1 BTC on the Binance "
              "BTCUSDT captures, 1 share on finance.csv)", lo=0.0, lo_open=True),
        Param("position_limit", 5.0, "largest |position| an order may bring the strategy to", lo=0.0,
              lo_open=True),
    )
    program = PROGRAMS / "sobi.m3"
    views = ("SIGNAL", "BEST_BID", "BEST_ASK")

    def setup(self, engine) -> None:
        engine.insert("SOBI_PARAMS", self.p["k"])

    def start(self, ctx: Context) -> None:
        self.ctx = ctx
        self.fired = 0                                 # callbacks run (diagnostics, tests)
        th = self.p["threshold"]
        self._buy = ctx.on("SIGNAL", self._on_buy, above=th)
        self._sell = ctx.on("SIGNAL", self._on_sell, below=-th)

    def state(self) -> dict:
        """Checkpoint protocol (strategies.api): the own fields; the subscriptions' armed /
        re-arming bounds and the orders are saved by the context."""
        return {"fired": self.fired}

    def restore(self, state: dict) -> None:
        self.fired = int(state["fired"])

    def _on_buy(self, _view: str, _key: tuple, _old: float, new: float, _pos: int) -> None:
        self.fired += 1
        th = self.p["threshold"]
        if new > th:                                   # crossed out: act, then wait to come back
            self._buy.retarget(below=th)
            self._trade("buy", self.ctx.value("BEST_ASK"))
        else:                                          # back inside: armed again
            self._buy.retarget(above=th)

    def _on_sell(self, _view: str, _key: tuple, _old: float, new: float, _pos: int) -> None:
        self.fired += 1
        th = self.p["threshold"]
        if new < -th:
            self._sell.retarget(above=-th)
            self._trade("sell", self.ctx.value("BEST_BID"))
        else:
            self._sell.retarget(below=-th)

    def _trade(self, side: str, price: float) -> None:
        ctx = self.ctx
        ctx.cancel_all()
        room = self.p["position_limit"] - (ctx.position if side == "buy" else -ctx.position)
        qty = min(self.p["order_size"], room)
        if qty > 0 and math.isfinite(price):
            ctx.submit_limit(side, price, qty)
