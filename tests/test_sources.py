"""Replay sources: every format yields bids/asks batches, the Parquet round trip is exact (events,
line spans, LOBSTER's traded column, an engine's final views), the Binance source equals the book
builder fed by hand, and bad files give errors naming the file and the reason."""

from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EXAMPLES, SHARED, data_file

from ddms.errors import DdmsError, InputError, ReplayError
from ddms.io.capture import iter_lines, split_line
from ddms.io.columnar import convert, parquet_info, read_parquet, write_parquet
from ddms.io.sources import Source, detect_kind, open_source, partition_name
from ddms.io.venues.binance_book import BinanceBook
from replay.convert_cli import main as convert_main

BINANCE = SHARED / "data" / "binance"
SPOT = BINANCE / "spot_btcusdt_20240808.gz"
FUT = BINANCE / "usdm_btcusdt_20240808.gz"

LOBSTER = """\
34200.01,1,11,100,5853300,1
34200.02,1,12,50,5854300,-1
34200.03,1,13,30,5853300,1
34200.04,4,11,40,5853300,1
34200.05,2,13,10,5853300,1
34200.06,3,12,50,5854300,-1
34200.07,5,0,10,5853000,1
34200.08,6,0,500,5853200,1
34200.11,7,0,0,-1,-1
34200.12,7,0,0,1,-1
34200.13,1,11,5,5853400,1
34200.14,1,14,7,5854400,-1
"""


def _capture(name):
    path = BINANCE / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return path


def _slice(src, dst, n: int, drop=lambda raw: False) -> None:
    """The first ``n`` lines of a capture (without those ``drop`` selects), gzip-compressed."""
    with gzip.open(dst, "wb") as f:
        for i, raw in enumerate(iter_lines(src)):
            if i >= n:
                break
            if not drop(raw):
                f.write(raw)


def cat(batches) -> dict:
    """Every batch of a source concatenated, plus its line spans (and traded when present)."""
    bs = list(batches)
    out = {k: np.concatenate([getattr(b, k) for b in bs]) for k in ("rel", "sign", "cols", "line")}
    if bs and getattr(bs[0], "traded", None) is not None:
        out["traded"] = np.concatenate([b.traded for b in bs])
    out["first_line"], out["last_line"] = bs[0].first_line, bs[-1].last_line
    out["skipped"] = sum(b.skipped for b in bs)
    for a, b in zip(bs, bs[1:], strict=False):   # consecutive spans, no line split between batches
        assert b.first_line == a.last_line + 1
        if len(a) and len(b):
            assert a.line[-1] < b.line[0]
    return out


def assert_same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert a[k].dtype == b[k].dtype, k
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        else:
            assert a[k] == b[k], k


def check_relations(src: Source) -> dict:
    assert src.relations == ("bids", "asks")
    got = cat(src)
    assert set(np.unique(got["rel"]).tolist()) == {0, 1}
    assert set(np.unique(got["sign"]).tolist()) <= {-1, 1}
    assert got["cols"].shape[1] == 5 and got["cols"].dtype == np.float64
    return got


# ------------------------------------------------------------------------------------------
# each format
# ------------------------------------------------------------------------------------------

def test_orderbook_csv():
    path = data_file("standard")
    src = open_source(path)
    assert (src.kind, src.name) == ("orderbook", "standard/finance")
    got = check_relations(src)
    assert got["last_line"] == 5000
    np.testing.assert_array_equal(got["cols"][:, 2], np.mod(got["cols"][:, 1], 10))   # broker = id mod 10


def test_lobster(tmp_path):
    path = tmp_path / "AAPL_2012-06-21_message_10.csv"
    path.write_text(LOBSTER)
    src = open_source(path)
    assert src.kind == "lobster" and src.name.endswith("/AAPL_2012-06-21_message_10")
    got = check_relations(src)
    assert got["last_line"] == 12 and "traded" in got and got["traded"].sum() == 40
    plain = tmp_path / "day.csv"     # detected from the field count alone
    plain.write_text(LOBSTER)
    assert open_source(plain).kind == "lobster"


def test_binance_capture_slice_equals_the_book_fed_by_hand(tmp_path):
    src_path = _capture("spot_btcusdt_20240808.gz")
    path = tmp_path / "spot_slice.gz"
    _slice(src_path, path, 800)
    src = open_source(path)
    assert (src.kind, src.market) == ("binance", "spot")
    got = check_relations(src)
    bk = BinanceBook("spot", source=str(path))
    for raw in iter_lines(path):
        ts, js = split_line(raw)
        bk.feed_message(js, ts)
    want = bk.take_events()
    assert bk.snapshots == 1 and bk.gaps == 0
    for k in ("rel", "sign", "cols", "line"):
        np.testing.assert_array_equal(got[k], getattr(want, k))
    assert got["last_line"] == want.last_line == bk.updates
    np.testing.assert_array_equal(got["cols"][:, 2], 0)                       # broker 0
    ids = got["cols"][:, 1]
    np.testing.assert_array_equal(ids, np.rint(got["cols"][:, 4] * 10**bk.px_decimals))   # id from the price
    # small batches cut only between book updates
    small = cat(Source(str(path), "binance", "x", market="spot", batch_updates=7))
    for k in ("rel", "sign", "cols", "line", "last_line"):
        np.testing.assert_array_equal(small[k], got[k])


def test_binance_market_from_content(tmp_path):
    path = tmp_path / "capture.txt"          # plain text, no market in the name
    with open(path, "wb") as f:
        for i, raw in enumerate(iter_lines(_capture("usdm_btcusdt_20240808.gz"))):
            if i >= 300:
                break
            f.write(raw)
    src = open_source(path)
    assert src.kind == "binance" and src.market is None
    assert len(check_relations(src)["rel"]) > 0 and detect_kind(str(path), path.read_bytes()[:100]) == "binance"


# ------------------------------------------------------------------------------------------
# Parquet round trip
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("group_events", [1 << 18, 1000])
def test_parquet_round_trip_orderbook(tmp_path, group_events):
    src = open_source(data_file("standard"))
    out = tmp_path / "std.parquet"
    info = convert(src, out, group_events=group_events)
    assert (info.kind, info.name, info.first_line, info.last_line) == ("orderbook", "standard/finance", 1, 5000)
    assert len(info.spans) == (1 if group_events > 5000 else len(info.spans)) and info.events == len(cat(src)["rel"])
    pq_src = open_source(out)
    assert pq_src.kind == "parquet"
    assert_same(cat(src), cat(pq_src))


def test_parquet_round_trip_many_groups_line_spans(tmp_path):
    # chunks of 1 KB give many batches; row groups of 50 events end on batch (line) boundaries
    from ddms.io.orderbook import read_orderbook
    path = data_file("standard")
    out = tmp_path / "std.parquet"
    info = write_parquet(read_orderbook(path, chunk_bytes=1024), out, kind="orderbook", name="s", group_events=50)
    assert len(info.spans) > 20
    assert info.spans[0][0] == 1 and info.spans[-1][1] == 5000
    assert all(b[0] == a[1] + 1 for a, b in zip(info.spans, info.spans[1:], strict=False))
    assert_same(cat(read_orderbook(path)), cat(read_parquet(out)))


def test_parquet_round_trip_lobster_keeps_traded(tmp_path):
    path = tmp_path / "x_message_1.csv"
    path.write_text(LOBSTER)
    out = tmp_path / "x.parquet"
    info = convert(open_source(path), out)
    assert info.traded and info.kind == "lobster"
    assert_same(cat(open_source(path)), cat(open_source(out)))


def test_parquet_round_trip_binance(tmp_path):
    path = tmp_path / "usdm_slice.gz"
    _slice(_capture("usdm_btcusdt_20240808.gz"), path, 1500)
    out = tmp_path / "usdm.parquet"
    convert(open_source(path), out, group_events=5000)
    assert_same(cat(open_source(path)), cat(open_source(out)))


def test_parquet_replay_gives_the_same_views(tmp_path):
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    src = open_source(data_file("standard"))
    out = tmp_path / "std.parquet"
    convert(src, out, group_events=700)
    views = []
    for s in (src, open_source(out)):
        eng = Engine(EXAMPLES / "vwap.m3")
        replay(eng, s, eng.relmap(s.relations))
        views.append((eng.position, eng.snapshot()))
    assert views[0] == views[1] and views[0][0] == 5000


def test_convert_several_sources_renumbers_lines(tmp_path):
    tiny = data_file("tiny")
    out = tmp_path / "two.parquet"
    info = convert([open_source(tiny), open_source(tiny)], out)
    assert info.last_line == 200
    one, two = cat(open_source(tiny)), cat(open_source(out))
    np.testing.assert_array_equal(two["line"], np.concatenate([one["line"], one["line"] + 100]))


def test_convert_command(tmp_path, capsys):
    out = tmp_path / "tiny.parquet"
    assert convert_main([str(data_file("tiny")), "--out", str(out)]) == 0
    assert "events of 100 lines" in capsys.readouterr().err
    assert parquet_info(out).last_line == 100
    assert convert_main([str(data_file("tiny")), "--out", str(out)]) == 2          # exists
    assert "exists already" in capsys.readouterr().err
    assert convert_main([str(data_file("tiny")), "--out", str(tmp_path / "x.csv")]) == 2
    assert "must end in .parquet" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------
# bad files
# ------------------------------------------------------------------------------------------

def _raises(exc, path, *words):
    with pytest.raises(exc) as ei:
        src = open_source(path)
        for _ in src:
            pass
    msg = str(ei.value)
    assert str(path) in msg, msg
    for w in words:
        assert w in msg, msg
    assert isinstance(ei.value, DdmsError)
    return ei.value


def test_missing_unknown_and_binary_files(tmp_path):
    _raises(ReplayError, tmp_path / "nope.csv", "no such file")
    _raises(ReplayError, tmp_path, "is a directory")
    (tmp_path / "three.csv").write_text("1,2,3\n")
    _raises(ReplayError, tmp_path / "three.csv", "unknown format", "3 comma-separated")
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02garbage")
    _raises(ReplayError, tmp_path / "blob.bin", "binary content")
    (tmp_path / "empty.txt").write_bytes(b"")
    _raises(ReplayError, tmp_path / "empty.txt", "empty file")
    (tmp_path / "fake.parquet").write_text("1,2,B,3,4\n")
    _raises(ReplayError, tmp_path / "fake.parquet", "not a Parquet file")
    with pytest.raises(ReplayError, match="unknown source kind"):
        open_source(data_file("tiny"), kind="excel")
    (tmp_path / "book.csv.gz").write_bytes(gzip.compress(data_file("tiny").read_bytes()))
    _raises(ReplayError, tmp_path / "book.csv.gz", "gzip-compressed orderbook", "decompress it first")


def test_bad_lines_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,1,B,10,100\n2,2,Q9,10,100\n")
    e = _raises(InputError, bad, "unknown action")
    assert e.line == 2
    lob = tmp_path / "x_message_1.csv"
    lob.write_text("34200.01,1,11,100,5853300,1\n34200.02,9,12,50,5854300,-1\n")
    assert _raises(InputError, lob).line == 2
    # a failed conversion leaves no output
    out = tmp_path / "bad.parquet"
    with pytest.raises(InputError):
        convert(open_source(bad), out)
    assert not out.exists() and not any(p.name.startswith("bad.parquet") for p in tmp_path.iterdir())


def test_bad_parquet_files(tmp_path):
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), other)
    _raises(ReplayError, other, "not a ddms event file")
    good = tmp_path / "good.parquet"
    convert(open_source(data_file("tiny")), good)
    data = good.read_bytes()
    trunc = tmp_path / "trunc.parquet"
    trunc.write_bytes(data[: len(data) // 2])
    _raises(ReplayError, trunc, "not a readable Parquet file")
    # right metadata, wrong values: a relation number 5
    tbl = pq.read_table(good)
    rel = tbl.column("rel").to_numpy().copy()
    rel[3] = 5
    tbl = tbl.set_column(0, pa.field("rel", pa.int8(), nullable=False), pa.array(rel))
    meta = pq.ParquetFile(good).metadata.metadata
    damaged = tmp_path / "damaged.parquet"
    with pq.ParquetWriter(damaged, tbl.schema) as w:
        w.write_table(tbl)
        w.add_key_value_metadata(meta)
    _raises(ReplayError, damaged, "row group 0", "rel value")
    # metadata that lies about the events
    bad_meta = dict(meta)
    bad_meta[b"ddms.events"] = b"7"
    lying = tmp_path / "lying.parquet"
    with pq.ParquetWriter(lying, pq.read_table(good).schema) as w:
        w.write_table(pq.read_table(good))
        w.add_key_value_metadata(bad_meta)
    _raises(ReplayError, lying, "metadata says 7 events")
    with pytest.raises(ReplayError, match="it is a Parquet file"):
        open_source(good, kind="orderbook")


def test_capture_without_snapshot(tmp_path):
    path = tmp_path / "spot_nosnap.gz"
    _slice(_capture("spot_btcusdt_20240808.gz"), path, 400, drop=lambda raw: b"lastUpdateId" in raw)
    e = _raises(ReplayError, path, "never started", "allow_empty_start")
    assert "depth updates" in str(e)
    started = cat(open_source(path, allow_empty_start=True))
    first = started["line"] == started["line"][0]
    assert first.sum() >= 1 and (started["sign"][first] == 1).all()   # an empty book: the first update inserts


def test_corrupt_and_truncated_captures(tmp_path):
    full = tmp_path / "spot_ok.gz"
    _slice(_capture("spot_btcusdt_20240808.gz"), full, 1000)
    data = full.read_bytes()
    trunc = tmp_path / "spot_trunc.gz"
    trunc.write_bytes(data[: len(data) * 2 // 3])
    _raises(ReplayError, trunc, "truncated gzip")
    lines = gzip.decompress(data).split(b"\n")
    clean = list(lines)
    lines[120] = lines[120][:40]                     # a cut-off JSON message on line 121
    badline = tmp_path / "spot_badline.gz"
    badline.write_bytes(gzip.compress(b"\n".join(lines)))
    e = _raises(InputError, badline)
    assert e.line == 121
    skipped = cat(open_source(badline, skip_bad=True))
    assert skipped["skipped"] == 1
    # a gap: drop one depth update after the snapshot
    depth = [i for i, ln in enumerate(clean) if b"depthUpdate" in ln]
    gap = list(clean)
    assert len(depth) > 40
    del gap[depth[30]]
    gapped = tmp_path / "spot_gap.gz"
    gapped.write_bytes(gzip.compress(b"\n".join(gap)))
    assert "no later snapshot" in str(_raises(InputError, gapped))


def test_replay_error_pickles_with_its_fields():
    import pickle
    e = pickle.loads(pickle.dumps(ReplayError("why", "f.csv")))
    assert (str(e), e.reason, e.source) == ("f.csv: why", "why", "f.csv")


def test_detect_kind_is_sans_io():
    assert detect_kind("a.parquet", b"PAR1xxxx") == "parquet"
    assert detect_kind("a.csv", b"25260635,36721,B,100,10000\n") == "orderbook"
    assert detect_kind("a.csv", b"34200.01,1,11,100,5853300,1\n") == "lobster"
    assert detect_kind("x_message_5.csv", b"") == "lobster"
    assert detect_kind("a.csv", b"") == "orderbook"
    assert detect_kind("c.gz", b'1723161253937085768 {"stream":"x"}\n') == "binance"
    assert partition_name("/d/big/finance.csv") == "big/finance"
    assert partition_name(os.path.join("b", "spot.gz")) == "b/spot"
    assert json.loads(json.dumps(partition_name("x.parquet"))) == "x"
