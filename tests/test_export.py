"""Views and backtest results as Arrow tables and pandas DataFrames; pandas stays optional."""

from __future__ import annotations

import builtins
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from oracle import Book

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import DdmsError, DependencyError, ViewError
from ddms.io.orderbook import parse_orderbook_text
from ddms.runtime import Engine

BOOK_M3 = Path(__file__).parent / "programs" / "book.m3"   # scalar, int, NaN-able, 1- and 2-key views

LINES = ["1,1,B,10,100", "2,2,B,5,101", "3,11,B,7,100", "4,3,S,4,110", "5,2,E,2,0", "6,13,B,1,99.5",
         "7,1,D,0,0"]


@pytest.fixture(scope="module")
def engine() -> Engine:
    e = Engine(BOOK_M3)
    e.apply(parse_orderbook_text("\n".join(LINES)), e.relmap(("bids", "asks")))
    return e


def _oracle() -> dict:
    """The views of book.m3 from an independent replay of LINES (oracle.Book, brokers = id mod 10)."""
    b = Book()
    for line in LINES:
        b.line(line)
    bids = [r for side, r in b.rows.values() if side == "bids"]
    asks = [r for side, r in b.rows.values() if side == "asks"]
    broker: dict[int, float] = {}
    bp: dict[tuple[int, float], float] = {}
    for _, _, br, vol, px in bids:
        broker[int(br)] = broker.get(int(br), 0.0) + vol
        bp[(int(br), px)] = bp.get((int(br), px), 0.0) + vol
    total = sum(r[3] for r in bids)
    return {"BID_VOL": total, "ASK_VOL": sum(r[3] for r in asks), "BID_N": len(bids),
            "BID_AVG": total / len(bids) if bids else math.nan, "BROKER_VOL": broker, "BP_VOL": bp}


def test_views_to_arrow_match_the_oracle(engine):
    want = _oracle()
    t = engine.views["BROKER_VOL"].to_arrow()
    assert t.column_names == ["B", "BROKER_VOL"]
    assert t.schema.field("B").type == pa.int64() and t.schema.field("BROKER_VOL").type == pa.float64()
    assert dict(zip(t["B"].to_pylist(), t["BROKER_VOL"].to_pylist(), strict=True)) == want["BROKER_VOL"]
    assert t["B"].to_pylist() == sorted(want["BROKER_VOL"])                       # sorted by key
    t2 = engine.views["BP_VOL"].to_arrow()
    assert t2.column_names == ["B", "P", "BP_VOL"]
    got = {(b, p): v for b, p, v in zip(*(t2[c].to_pylist() for c in t2.column_names), strict=True)}
    assert got == want["BP_VOL"]
    n = engine.views["BID_N"].to_arrow()
    assert n.column_names == ["BID_N"] and n.num_rows == 1 and n.schema.field(0).type == pa.int64()
    assert n["BID_N"].to_pylist() == [want["BID_N"]]
    assert engine.views["BID_VOL"].to_arrow()["BID_VOL"].to_pylist() == [want["BID_VOL"]]
    assert pa.table(engine.views["BROKER_VOL"]).equals(t)                        # Arrow C stream interface


def test_views_to_pandas_and_the_all_views_export(engine):
    want = _oracle()
    df = engine.views["BROKER_VOL"].to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["B", "BROKER_VOL"]
    assert dict(zip(df["B"], df["BROKER_VOL"], strict=True)) == want["BROKER_VOL"]
    assert pd.DataFrame.from_arrow(engine.views["BROKER_VOL"]).equals(df) if hasattr(pd.DataFrame, "from_arrow") \
        else True
    scalar = engine.views["BID_AVG"].to_pandas()
    assert scalar.shape == (1, 1) and scalar["BID_AVG"][0] == pytest.approx(want["BID_AVG"])
    tables = engine.export()
    assert list(tables) == list(engine.views) and all(isinstance(t, pa.Table) for t in tables.values())
    assert tables["BP_VOL"].equals(engine.views["BP_VOL"].to_arrow())
    frames = engine.export(["BID_VOL", "BROKER_VOL"], pandas=True)
    assert list(frames) == ["BID_VOL", "BROKER_VOL"] and frames["BID_VOL"]["BID_VOL"][0] == want["BID_VOL"]
    with pytest.raises(ViewError, match="no view named 'NOPE'"):
        engine.export(["NOPE"])


def test_empty_and_null_views():
    e = Engine(BOOK_M3)
    t = e.views["BROKER_VOL"].to_arrow()
    assert t.num_rows == 0 and t.column_names == ["B", "BROKER_VOL"]
    e.apply(parse_orderbook_text("1,1,B,10,100\n2,1,D,0,0"), e.relmap(("bids", "asks")))
    assert e.views["BROKER_VOL"].to_arrow().num_rows == 0                      # back to empty
    avg = e.views["BID_AVG"].to_arrow()        # 0 / 0 after the delete: SQL NULL, a null in Arrow
    assert e.views["BID_AVG"].value is None and avg["BID_AVG"].null_count == 1
    assert e.views["BID_AVG"].to_pandas()["BID_AVG"].isna().all()


def test_missing_pandas_is_a_clear_error(engine, monkeypatch):
    real = builtins.__import__

    def no_pandas(name, *args, **kw):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    for call in (engine.views["BROKER_VOL"].to_pandas, engine.views["BID_VOL"].to_pandas,
                 lambda: engine.export(pandas=True)):
        with pytest.raises(DependencyError, match=r"pip install pandas") as err:
            call()
        assert isinstance(err.value, DdmsError)
    assert engine.views["BROKER_VOL"].to_arrow().num_rows > 0                    # Arrow needs no pandas


def test_backtest_result_tables(tmp_path, monkeypatch):
    from replay.backtest import run_backtest
    r = run_backtest("synthetic:20000:3", "sobi", {"threshold": 0.0001, "order_size": 1})
    assert r.metrics.n_trades > 0
    fills = r.to_pandas("fills")
    assert list(fills.columns) == list(r.fills) and len(fills) == r.metrics.n_trades
    assert np.array_equal(fills["price"].to_numpy(), r.fills["price"])
    eq = r.to_arrow("equity")
    assert eq.column_names == ["line", "time", "mark", "position", "cash", "equity", "return"]
    assert eq["line"].to_pylist() == r.equity["line"].tolist()
    orders = r.to_pandas("orders")
    assert len(orders) == len(r.orders) and list(orders["action"]) == [o.action for o in r.orders]
    with pytest.raises(ValueError, match="no table 'nope'"):
        r.to_arrow("nope")
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "pandas" else real(name, *a, **k))
    with pytest.raises(DependencyError, match="pip install pandas"):
        r.to_pandas("fills")
