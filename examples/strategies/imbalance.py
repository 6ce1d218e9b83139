"""An own strategy, for ``ddms backtest --strategy examples/strategies/imbalance.py:Imbalance``.

It fades the order-book imbalance.  SIGNAL is ((ASK_VWAP - MID) - (MID - BID_VWAP)) / MID over
the top k of each book (the views of ddms's SOBI program, strategies/programs/sobi.m3; a
strategy may name any .m3 or .sql file as its ``program``).  When SIGNAL leaves
[-threshold, threshold] the strategy trades against it (sells into buy pressure, buys into sell
pressure) with a limit order at the touch; when SIGNAL comes back inside [-exit, exit] it closes
the position.  Both conditions are bounds tested in compiled code, so Python runs only when one
is crossed.
"""

from __future__ import annotations

import math

from strategies import Context, Param, Strategy, StrategyError
from strategies.api import PROGRAMS


class Imbalance(Strategy):
    name = "imb"
    summary = "fade the VWAP imbalance: trade against SIGNAL beyond threshold, close inside exit"
    params = (
        Param("k", 0.25, "fraction of each side's volume in its VWAP", lo=0.0, hi=1.0, lo_open=True),
        Param("threshold", 0.0005, "open a position when |SIGNAL| crosses this", lo=0.0, lo_open=True),
        Param("exit", 0.0001, "close it when |SIGNAL| is back below this", lo=0.0),
        Param("order_size", 1.0, "quantity per order", lo=0.0, lo_open=True),
    )
    program = PROGRAMS / "sobi.m3"
    views = ("SIGNAL", "BEST_BID", "BEST_ASK")

    @classmethod
    def validate(cls, p: dict[str, float]) -> None:
        if p["exit"] >= p["threshold"]:
            raise StrategyError(f"strategy imb: exit={p['exit']:g} must be below threshold={p['threshold']:g}")

    def setup(self, engine) -> None:
        engine.insert("SOBI_PARAMS", self.p["k"])      # the program reads k from a parameter stream

    def start(self, ctx: Context) -> None:
        self.ctx = ctx
        self.side = 0                                  # 0 flat, -1 short, +1 long
        th = self.p["threshold"]
        self.sub = ctx.on("SIGNAL", self.on_signal, above=th, below=-th)

    def on_signal(self, _view: str, _key: tuple, _old: float, signal: float, _line: int) -> None:
        p, th, ex = self.p, self.p["threshold"], self.p["exit"]
        if self.side == 0:                             # SIGNAL left the band: fade it
            self.side = -1 if signal > th else 1
            self.trade("sell" if self.side < 0 else "buy", p["order_size"])
            if self.side < 0:
                self.sub.retarget(below=ex)            # short: close when SIGNAL falls below exit
            else:
                self.sub.retarget(above=-ex)           # long: close when it rises above -exit
        else:                                          # back inside: close
            pos = self.ctx.position
            self.ctx.cancel_all()
            if pos:
                self.trade("sell" if pos > 0 else "buy", abs(pos))
            self.side = 0
            self.sub.retarget(above=th, below=-th)

    def trade(self, side: str, qty: float) -> None:
        price = self.ctx.value("BEST_ASK" if side == "buy" else "BEST_BID")
        if math.isfinite(price):
            self.ctx.submit_limit(side, price, qty)
