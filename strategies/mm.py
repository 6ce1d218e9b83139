"""A market maker on the mid price: two limit quotes around MID, skewed against inventory,
re-quoted only when the mid has moved.

Quotes at mid m with position P (limit L, size S): offset ``o = half_spread * m``, shift
``s = -skew * o * P / L``; bid ``floor((m - o + s) / tick) * tick`` for ``min(S, L - P)``,
ask ``ceil((m + o + s) / tick) * tick`` for ``min(S, L + P)`` (a side with nothing left to trade
is not quoted).  Each re-quote cancels the working quotes first.

Why a band: the subscription on MID carries ``above = m * (1 + requote)`` and
``below = m * (1 - requote)`` around the mid of the last quote, tested in compiled code; Python
runs only when the mid leaves that band, then the band moves with the new quotes.  Cost per
re-quote: one callback, up to two cancels and two orders.  Fills between re-quotes are seen at
the next one (the skew then uses the new position).
"""

from __future__ import annotations

import math

from strategies.api import PROGRAMS, Context, Param, Strategy


class MarketMaker(Strategy):
    name = "mm"
    summary = "quote both sides around the mid, skewed by inventory; re-quote when the mid moves"
    params = (
        Param("half_spread", 0.001, "quote distance from the mid, as a fraction of the mid", lo=0.0, hi=0.5,
              lo_open=True),
        Param("requote", 0.0005, "re-quote when the mid moves by this fraction", lo=0.0, hi=1.0, lo_open=True),
        Param("order_size", 1.0, "quantity per quote, in the data's volume units (1 BTC on the Binance "
              "BTCUSDT captures, 1 share on finance.csv)", lo=0.0, lo_open=True),
        Param("position_limit", 5.0, "largest |position| a quote may bring the strategy to", lo=0.0,
              lo_open=True),
        Param("skew", 0.5, "inventory skew: at the limit both quotes move by skew * offset", lo=0.0, hi=1.0),
        Param("tick", 1.0, "price grid of the quotes (data price units)", lo=0.0, lo_open=True),
    )
    program = PROGRAMS / "top.m3"
    views = ("MID",)

    def start(self, ctx: Context) -> None:
        self.ctx = ctx
        self._sub = ctx.on("MID", self._on_mid)       # the first finite mid quotes, then a band

    def state(self) -> dict:
        """Checkpoint protocol (strategies.api): no own fields beyond what the context saves
        (the band of the MID subscription, the quotes, the position)."""
        return {}

    def restore(self, state: dict) -> None:
        pass

    def _on_mid(self, _view: str, _key: tuple, _old: float, mid: float, _pos: int) -> None:
        if not math.isfinite(mid) or mid <= 0:
            return
        self.quote(mid)
        band = self.p["requote"] * mid
        self._sub.retarget(above=mid + band, below=mid - band)

    def quotes(self, mid: float, position: float) -> tuple[float, float, float, float]:
        """``(bid, bid_qty, ask, ask_qty)`` at ``mid`` and ``position`` (qty 0: no quote)."""
        p = self.p
        off = p["half_spread"] * mid
        shift = -p["skew"] * off * position / p["position_limit"]
        tick = p["tick"]
        bid = math.floor((mid - off + shift) / tick) * tick
        ask = math.ceil((mid + off + shift) / tick) * tick
        if ask <= bid:
            ask = bid + tick
        return (bid, max(0.0, min(p["order_size"], p["position_limit"] - position)),
                ask, max(0.0, min(p["order_size"], p["position_limit"] + position)))

    def quote(self, mid: float) -> None:
        ctx = self.ctx
        ctx.cancel_all()
        bid, qb, ask, qa = self.quotes(mid, ctx.position)
        if qb > 0:
            ctx.submit_limit("buy", bid, qb)
        if qa > 0:
            ctx.submit_limit("sell", ask, qa)
