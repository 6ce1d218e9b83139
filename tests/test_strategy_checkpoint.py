"""A strategy's state in engine checkpoints (issue 24): the protocol of :mod:`strategies.api`.

* a backtest (engine + fill simulator + strategy, :class:`SimContext`) checkpointed at random
  lines -- between batches and in the middle of one -- and resumed on a NEW engine, simulator,
  context and strategy object gives the uninterrupted run's orders, fills, position and cash
  bit for bit, for every strategy of the repository (sobi, mm), with their ``_check()``s;
* the same through a new process (the checkpoint file is all that carries over);
* live (:class:`LiveContext`): open orders, reported fills, position and cash come back;
* refusals: a strategy without ``state()``/``restore()`` (the README's example strategy) is
  refused at the checkpoint with a message naming what to add; attaching another strategy or
  other parameters to a restored engine is refused; a context of another kind too.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
import strategies
from ddms.errors import CheckpointError
from ddms.io.orderbook import read_orderbook
from replay.fills import FillSimulator
from replay.synthetic import write_orderbook
from strategies.api import LiveContext, SimContext, StrategyError

CASES = {"sobi": {"threshold": 0.0002, "latency": 0.5}, "mm": {"half_spread": 0.0005, "requote": 0.0002}}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sck") / "book.csv"
    write_orderbook(path, 30_000, seed=4, depth=300)
    return path


def _batches(path: Path, size: int = 4000) -> list:
    """The file's batches cut at line boundaries about every ``size`` events (several batches,
    whatever the reader's chunking)."""
    out = []
    for b in read_orderbook(str(path)):
        first, lo = b.first_line, 0
        while lo < len(b):
            hi = len(b) if lo + size >= len(b) else int(np.searchsorted(b.line, b.line[lo + size], side="left"))
            last = b.last_line if hi == len(b) else int(b.line[hi]) - 1
            m = slice(lo, hi)
            out.append(replace(b, rel=b.rel[m], sign=b.sign[m], cols=b.cols[m], line=b.line[m], first_line=first,
                               last_line=last))
            first, lo = last + 1, hi
    return out


def _after(batch, line: int):
    """The part of ``batch`` after input line ``line``."""
    m = batch.line > line
    return replace(batch, rel=batch.rel[m], sign=batch.sign[m], cols=batch.cols[m], line=batch.line[m],
                   first_line=line + 1)


def _sim(strat) -> FillSimulator:
    p = strat.p
    return FillSimulator(latency=p["latency"], maker_fee=p["maker_fee"], taker_fee=p["taker_fee"])


def _outcome(ctx: SimContext) -> dict:
    ctx._check()
    f = ctx.sim.fill_columns()
    return {"orders": [tuple(map(repr, (r.line, r.time, r.action, r.order_id, r.side, r.price, r.qty)))
                       for r in ctx.orders],
            "fills": {k: np.asarray(v).tobytes().hex() for k, v in f.items()},
            "position": repr(ctx.position), "cash": repr(ctx.cash),
            "open": [repr(o) for o in ctx.open_orders]}


def _backtest(name: str, batches: list, *, stop: int | None = None, ckpt: Path | None = None) -> dict:
    """Run strategy ``name`` over ``batches``; with ``stop``, checkpoint into ``ckpt`` after that
    input line (applying the batch that holds it up to there, then on)."""
    strat = strategies.get(name, CASES[name])
    engine = strat.make_engine()
    ctx = SimContext(engine, _sim(strat))
    strat.attach(engine, ctx)
    relmap = engine.relmap(("bids", "asks"))
    for b in batches:
        if stop is not None and b.first_line <= stop <= b.last_line:
            ctx.apply(b, relmap, until_line=stop)
            engine.checkpoint(ckpt)
            if stop == b.last_line:     # done (applying a finished batch again would apply it twice)
                continue
        ctx.apply(b, relmap)
    return _outcome(ctx)


def _resume(name: str, batches: list, ckpt: Path) -> dict:
    """A new engine, simulator, context and strategy object from checkpoint ``ckpt``, then the
    input after its line."""
    strat = strategies.get(name, CASES[name])
    engine = strat.make_engine()
    engine.restore(ckpt)
    ctx = SimContext(engine, _sim(strat))
    strat.attach(engine, ctx)
    relmap = engine.relmap(("bids", "asks"))
    stop = engine.position - ctx.origin       # the data line (the strategy's set-up took engine lines)
    for b in batches:
        if b.last_line > stop:
            ctx.apply(_after(b, stop) if b.first_line <= stop else b, relmap)
    return _outcome(ctx)


@pytest.mark.parametrize("name", sorted(CASES))
def test_backtest_resumed_from_a_checkpoint_is_the_uninterrupted_one(data, tmp_path, name):
    batches = _batches(data)
    want = _backtest(name, batches)
    assert len(want["orders"]) >= 10 and len(want["fills"]["time"]) > 0     # the strategy trades here
    rng = random.Random(name)
    last = batches[-1].last_line
    stops = [batches[2].last_line, *sorted(rng.sample(range(1, last), 3))]   # a batch's end, then anywhere
    for k, stop in enumerate(stops):
        ckpt = tmp_path / f"ck{k}.arrow"
        assert _backtest(name, batches, stop=stop, ckpt=ckpt) == want        # checkpointing changes nothing
        assert _resume(name, batches, ckpt) == want, stop


_CHILD = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_strategy_checkpoint import _batches, _resume
from pathlib import Path
print(json.dumps(_resume(sys.argv[2], _batches(Path(sys.argv[3])), Path(sys.argv[4]))))
"""


def test_resumed_in_a_new_process(data, tmp_path):
    batches = _batches(data)
    want = _backtest("sobi", batches)
    ckpt = tmp_path / "ck.arrow"
    _backtest("sobi", batches, stop=batches[-1].last_line // 2 + 7, ckpt=ckpt)
    p = subprocess.run([sys.executable, "-c", _CHILD, str(REPO / "tests"), "sobi", str(data), str(ckpt)],
                       capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[-1]) == json.loads(json.dumps(want))


def test_live_context_state_comes_back(data, tmp_path):
    strat = strategies.get("sobi", CASES["sobi"])
    engine = strat.make_engine()
    ctx = strat.attach(engine, LiveContext(engine, out=None, clock=lambda: 1.0))
    relmap = engine.relmap(("bids", "asks"))
    batches = _batches(data)
    for b in batches[:4]:
        engine.apply(b, relmap)
        for o in ctx.open_orders[:1]:                # a broker reports part of the first open order filled
            ctx.report_fill(o.id, o.price if o.price == o.price else 100.0, o.qty / 2)
    assert ctx.orders and ctx.fills
    at = len(ctx.orders)
    engine.checkpoint(tmp_path / "live.arrow")
    again = strategies.get("sobi", CASES["sobi"])
    e2 = again.make_engine()
    e2.restore(tmp_path / "live.arrow")
    c2 = again.attach(e2, LiveContext(e2, out=None, clock=lambda: 1.0))
    c2._check()
    for attr in ("orders", "open_orders", "fills", "position", "cash", "line", "origin"):
        assert repr(getattr(c2, attr)) == repr(getattr(ctx, attr)), attr      # repr: NaN prices compare
    assert again.fired == strat.fired
    assert [(s.view, s.lo, s.hi) for s in c2.subscriptions] == [(s.view, s.lo, s.hi) for s in ctx.subscriptions]
    for b in batches[4:]:                            # and both go on alike
        engine.apply(b, relmap)
        e2.apply(b, relmap)
    assert repr(c2.orders) == repr(ctx.orders) and repr(c2.open_orders) == repr(ctx.open_orders)
    assert len(ctx.orders) > at and strat.fired == again.fired


def test_refusals(data, tmp_path):
    # a strategy without the protocol: refused, naming what to add; nothing written
    ref = f"{REPO / 'examples' / 'strategies' / 'imbalance.py'}:Imbalance"
    strat = strategies.get(ref, {})
    engine = strat.make_engine()
    engine.checkpoint(tmp_path / "before.arrow")      # without a strategy attached: fine
    strat.attach(engine, LiveContext(engine, out=None))
    with pytest.raises(CheckpointError, match=r"defines no state\(\) -> dict and restore\(state\)"):
        engine.checkpoint(tmp_path / "after.arrow")
    assert not (tmp_path / "after.arrow").exists()
    # another strategy, other parameters, another kind of context on a restored engine
    sobi = strategies.get("sobi", CASES["sobi"])
    engine = sobi.make_engine()
    sobi.attach(engine, LiveContext(engine, out=None))
    engine.apply(_batches(data)[0], engine.relmap(("bids", "asks")))
    engine.checkpoint(tmp_path / "sobi.arrow")
    for params, ctx_kind, why in (({"threshold": 0.01}, LiveContext, "the checkpoint holds strategy sobi"),
                                  (CASES["sobi"], SimContext, "trading through a LiveContext")):
        other = strategies.get("sobi", params)
        e2 = other.make_engine()
        e2.restore(tmp_path / "sobi.arrow")
        ctx = LiveContext(e2, out=None) if ctx_kind is LiveContext else SimContext(e2, _sim(other))
        with pytest.raises(StrategyError, match=why):
            other.attach(e2, ctx)


def _actions(ctx) -> list[tuple]:
    """A live context's actions without their wall-clock times."""
    return [(r.line, r.action, r.order_id, r.side, repr(r.price), r.qty) for r in ctx.orders]


def test_monitor_with_a_strategy_killed_and_restarted(tmp_path):
    """``ddms monitor --strategy sobi --checkpoint`` on the order protocol, killed with SIGKILL
    after a few checkpoints and restarted against a server replaying from seq 1: the restored
    strategy goes on where the checkpoint was, and its actions over the whole session equal an
    uninterrupted monitor's, line for line; the restart prints only the new ones."""
    import asyncio

    from clitools import serve, small_book
    from test_feeds_venues import _session
    from test_monitor_recording import _killed

    from ddms.runtime.resume import checkpoints
    data = small_book(tmp_path, 3000)
    kw = {"strategy": "sobi", "strategy_params": (("threshold", 0.0005),)}
    _, mon, _, _ = asyncio.run(_session(data, **kw))
    want = _actions(mon.strategy_ctx)
    assert len(want) > 30
    folder = tmp_path / "ck"
    server, url = serve(data, "--rate", "1000")
    try:
        _killed(url, ["monitor", url, "--strategy", "sobi", "--param", "threshold=0.0005", "--json", "--once",
                      "--checkpoint", str(folder), "--checkpoint-every", "300"], folder, 2)
    finally:
        server.kill()
    restored = checkpoints(folder)[-1][0]
    assert 0 < restored < 3000
    _, mon, s, lines = asyncio.run(_session(data, checkpoint=str(folder), checkpoint_every=300, **kw))
    assert [x["line"] for x in lines if x.get("event") == "restored"] == [restored]
    assert _actions(mon.strategy_ctx) == want
    printed = [(x["line"], x["action"], x["order_id"]) for x in lines if x.get("event") == "order"]
    assert printed == [a[:3] for a in want if a[0] > restored - mon.strategy_ctx.origin]
    mon.strategy_ctx._check()
    assert s["strategy"]["orders"] + s["strategy"]["cancels"] == len(want)
