"""tardis.dev incremental_book_L2 CSV reader (ddms/io/tardis.py).

Oracles: the two sample files' books worked out by hand from the format's rules
(../shared/data/tardis/README.md); and the same levels through two paths: synthetic OKX-style
venue streams (tests/venue_sim.py) read by the OKX core, and written as tardis CSV and read by
this reader, must give one book per symbol.  Fuzzed with the mutation fuzzer.
"""

from __future__ import annotations

import gzip
import random

import pytest
from conftest import SHARED
from mutate import fuzz
from test_io_venues import Rows, book_strings
from venue_sim import okx

from ddms.errors import InputError, ReplayError
from ddms.io.levels import ASKS, BIDS
from ddms.io.tardis import TardisParser, read_tardis
from ddms.io.venues.okx import OkxBooks

TARDIS = SHARED / "data" / "tardis"
HEADER = "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n"
DELTAS = HEADER + """binance-futures,BTCUSDT,1640995200000000,1640995200100000,true,bid,50000.0,1.0
binance-futures,BTCUSDT,1640995200000000,1640995200100000,true,ask,50001.0,2.0
binance-futures,BTCUSDT,1640995201000000,1640995201100000,false,bid,49999.0,0.5
binance-futures,BTCUSDT,1640995202000000,1640995202100000,false,ask,50002.0,1.5
binance-futures,BTCUSDT,1640995203000000,1640995203100000,false,bid,49998.0,0.0
binance-futures,BTCUSDT,1640995300000000,1640995300100000,true,bid,50100.0,3.0
binance-futures,BTCUSDT,1640995300000000,1640995300100000,true,ask,50101.0,4.0
binance-futures,BTCUSDT,1640995301000000,1640995301100000,false,bid,50099.0,1.0
binance-futures,BTCUSDT,1640995302000000,1640995302100000,false,ask,50102.0,2.0
"""


def read(path, **kw):
    parser = TardisParser(str(path), skip_bad=kw.pop("skip_bad", False))
    rows = Rows()
    msgs = []
    for ev in read_tardis(path, parser=parser):
        rows.apply([ev])
        msgs.append(ev)
    parser._check()
    return parser, rows, msgs


def check_deltas(parser, rows, msgs) -> None:
    s = parser.summary()["symbols"]["BTCUSDT"]
    assert s["snapshots"] == 2 and s["messages"] == 7 and s["crossed"] == 0
    book = parser.books["BTCUSDT"]
    assert book_strings(book, BIDS) == {"50100.0": "3.0", "50099.0": "1.0"}
    assert book_strings(book, ASKS) == {"50101.0": "4.0", "50102.0": "2.0"}
    assert rows.levels("BTCUSDT") == ({50100.0: 3.0, 50099.0: 1.0}, {50101.0: 4.0, 50102.0: 2.0})
    # the second snapshot is one atomic update: the old levels' deletes and the new inserts
    (snap2,) = [m.batch for m in msgs if int(m.batch.line[0]) == 7]
    assert set(snap2.line.tolist()) == {7} and sorted(snap2.sign.tolist()) == [-1, -1, -1, -1, 1, 1]
    assert len(msgs) == 6     # line 6 removes a level that is not there: no rows
    assert msgs[0].venue == "binance-futures"


def test_deltas_with_snapshot_always(tmp_path):
    p = tmp_path / "deltas.csv.gz"
    p.write_bytes(gzip.compress(DELTAS.encode()))
    check_deltas(*read(p))


def test_real_sample_files():
    p = TARDIS / "deltas_with_snapshot.csv"
    if not p.exists():
        pytest.skip(f"{p} not available")
    check_deltas(*read(p))
    parser, rows, msgs = read(TARDIS / "deribit_incremental_book_L2_BTC-PERPETUAL.csv")
    s = parser.summary()["symbols"]["BTC-PERPETUAL"]
    assert s["snapshots"] == 1 and s["level_updates"] == 15 and s["messages"] == 1
    asks = rows.levels("BTC-PERPETUAL")[1]
    assert len(asks) == 15 and asks[6421.5] == 18640.0 and not rows.levels("BTC-PERPETUAL")[0]
    assert parser.books["BTC-PERPETUAL"].scale == 1


def to_tardis(msgs) -> str:
    """OKX-style synthetic messages as tardis rows (each message one local_timestamp)."""
    out = [HEADER.rstrip("\n")]
    for i, (sym, m) in enumerate(msgs):
        if sym is None or m.get("arg", {}).get("channel") != "books":
            continue
        d = m["data"][0]
        snap = "true" if m["action"] == "snapshot" else "false"
        for side, key in (("bid", "bids"), ("ask", "asks")):
            for e in d[key]:
                out.append(f"okex,{sym},{d['ts']}000,{1000 + i},{snap},{side},{e[0]},{e[1]}")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("seed", range(6))
def test_same_levels_through_okx_core_and_tardis_give_one_book(tmp_path, seed):
    msgs, truth = okx(random.Random(seed), n=200)
    core = OkxBooks()
    for i, (_, m) in enumerate(msgs, 1):
        core.feed(m, i)
    p = tmp_path / "okx.csv"
    p.write_text(to_tardis(msgs))
    parser, rows, _ = read(p)
    for sym in truth:
        for side in (BIDS, ASKS):
            assert book_strings(parser.books[sym], side) == book_strings(core.books[sym], side)
        assert rows.levels(sym) == tuple({float(k): float(v) for k, v in side.items()} for side in truth[sym])


def test_scientific_notation_is_read_exactly(tmp_path):
    p = tmp_path / "sci.csv"
    p.write_text(HEADER + "x,ABC,1,1,true,bid,1e-05,2.5E+3\n")
    parser, rows, _ = read(p)
    assert book_strings(parser.books["ABC"], BIDS) == {"0.00001": "2500"}


@pytest.mark.parametrize("line,reason", [
    ("x,A,1,1,true,bid,1", "7 fields, expected 8"),
    ("x,A,1.5,1,true,bid,1,1", "microsecond count"),
    ("x,A,1,1,yes,bid,1,1", "is_snapshot"),
    ("x,A,1,1,true,mid,1,1", "side"),
    ("x,A,1,1,true,bid,abc,1", "price"),
    ("x,A,1,1,true,bid,1,-1", "not a plain decimal"),
    ("x,A,1,1,true,bid,1,nan", "amount"),
])
def test_bad_rows_are_located_errors_or_counted_skips(tmp_path, line, reason):
    p = tmp_path / "bad.csv"
    p.write_text(HEADER + "x,A,1,1,true,bid,5,1\n" + line + "\nx,A,2,2,false,ask,6,1\n")
    with pytest.raises(InputError, match=rf"^{p}:3: .*{reason}"):
        read(p)
    parser, rows, _ = read(p, skip_bad=True)
    assert parser.bad_lines == 1 and rows.levels("A") == ({5.0: 1.0}, {6.0: 1.0})


def test_wrong_header_and_empty_file(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError, match="not a tardis.dev incremental_book_L2 CSV"):
        read(p)
    p.write_text("")
    with pytest.raises(ReplayError, match="empty file"):
        read(p)


@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz(tmp_path, skip_bad):
    data = (TARDIS / "deribit_incremental_book_L2_BTC-PERPETUAL.csv").read_bytes() \
        if (TARDIS / "deribit_incremental_book_L2_BTC-PERPETUAL.csv").exists() else DELTAS.encode()

    def reader(b: bytes) -> None:
        p = tmp_path / "f.csv"
        p.write_bytes(b)
        read(p, skip_bad=skip_bad)

    for d in (data, DELTAS.encode()):
        fuzz(reader, d, 60, seed=2)
