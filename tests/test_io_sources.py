"""The ddms/io formats through ddms.io.sources (the registration hook in ddms/io/formats.py):
detected by ``open_source``, one symbol's book per source, convertible to ddms Parquet."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from conftest import SHARED
from test_io_tardis import DELTAS
from test_io_venues import synthetic_capture

from ddms.errors import ReplayError
from ddms.io.columnar import convert, read_parquet
from ddms.io.sources import KINDS, detect_kind, open_source


def test_detect_kind_of_the_new_formats():
    assert {"cryptofeed", "dbn", "tardis"} <= set(KINDS)
    assert detect_kind("KRAKEN.ws.50.0", b"wss://ws.kraken.com <-> 1618678132.3858151\n1.0: []\n") == "cryptofeed"
    assert detect_kind("x.txt", b"wss://ws.okx.com:8443/ws/v5/public <-> 1652459224.5\n") == "cryptofeed"
    assert detect_kind("OKX.ws.1.0", b"1652459225.5: {\"event\":\"subscribe\"}\n") == "cryptofeed"
    assert detect_kind("a.mbo.dbn.zst", b"\x28\xb5\x2f\xfd\x00\x01") == "dbn"
    assert detect_kind("a.dbn", b"DBN\x03\x00") == "dbn"
    assert detect_kind("t.csv", DELTAS.encode()[:200]) == "tardis"
    # the older formats are still what they were
    assert detect_kind("cap.gz", b'1723075200000000000 {"stream":"x"}\n') == "binance"
    assert detect_kind("f.csv", b"1,2,B,3,4\n") == "orderbook"
    with pytest.raises(ReplayError, match="binary content"):
        detect_kind("a.bin", b"\x28\xb5\x2f\xfd\x00")      # zstd that does not say .dbn


def events(batches) -> np.ndarray:
    rows = [np.column_stack([b.rel, b.sign, b.cols, b.line]) for b in batches if len(b)]
    return np.concatenate(rows) if rows else np.zeros((0, 8))


@pytest.mark.parametrize("venue,symbol", [("kraken", "BBB/EUR"), ("okx", "ETH-USD-SWAP"), ("coinbase", "SKL-GBP")])
def test_capture_source_one_symbol_and_parquet_round_trip(tmp_path, venue, symbol):
    p = tmp_path / f"{venue.upper()}.ws.1.0"
    p.write_bytes(synthetic_capture(venue))
    with pytest.raises(ReplayError, match="several symbols"):
        list(open_source(p).batches())
    with pytest.raises(ReplayError, match="no events for symbol 'NOPE'"):
        list(open_source(p, symbol="NOPE").batches())
    src = open_source(p, symbol=symbol.lower())
    assert src.kind == "cryptofeed"
    ev = events(src.batches())
    assert len(ev) > 0
    lines = ev[:, 7]
    assert lines[0] == 1 and (np.diff(lines) >= 0).all() and set(np.diff(lines).tolist()) <= {0, 1}
    info = convert(src, tmp_path / "out.parquet")
    assert info.kind == "cryptofeed"
    assert np.array_equal(events(read_parquet(tmp_path / "out.parquet")), ev)


def test_tardis_source_gzip(tmp_path):
    p = tmp_path / "book.csv.gz"
    p.write_bytes(gzip.compress(DELTAS.encode()))
    src = open_source(p)
    assert src.kind == "tardis"
    ev = events(src.batches())
    assert ev[-1, 7] == 6 and len(ev) == 12      # 6 messages with rows; 12 row changes


def test_real_dbn_and_capture_sources(tmp_path):
    dbn = SHARED / "data" / "mbo" / "esh4-glbx-mdp3-20231224.mbo.dbn.zst"
    kr = SHARED / "data" / "venues" / "KRAKEN.ws.50.0"
    if not dbn.exists() or not kr.exists():
        pytest.skip("../shared data not available")
    src = open_source(dbn)
    assert src.kind == "dbn" and len(events(src.batches())) == 8725
    src = open_source(kr, symbol="XMR/USD")
    ev = events(src.batches())
    assert ev[-1, 7] == 847      # the snapshot and 846 updates, one line each
    with pytest.raises(ReplayError, match="REST half"):
        list(open_source(SHARED / "data" / "venues" / "BINANCE.http.0.0").batches())


def test_file_hash_symbol_in_every_command(tmp_path, capsys):
    """``FILE#SYMBOL`` picks one symbol of a multi-symbol capture in ``ddms run`` and ``convert``
    (and any partition name): the final best bid/ask equal the venue core's book."""
    import json

    from conftest import EXAMPLES

    from ddms.cli import main
    from ddms.io.cryptofeed import CryptofeedParser, read_cryptofeed
    from ddms.io.levels import ASKS, BIDS

    p = tmp_path / "OKX.ws.1.0"
    p.write_bytes(synthetic_capture("okx", seed=3))
    parser = CryptofeedParser(str(p))
    list(read_cryptofeed(p, parser=parser))
    sym = "ETH-USD-SWAP"
    book = parser.core.books[sym]
    code = main(["run", str(EXAMPLES / "sobi.m3"), "--data", f"{p}#{sym}", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    views = json.loads(out.splitlines()[-1])["views"]
    assert views["BEST_BID"] == float(book.top(BIDS, 1)[0][0]) and views["BEST_ASK"] == float(book.top(ASKS, 1)[0][0])
    code = main(["convert", f"{p}#{sym}", "--out", str(tmp_path / "one.parquet")])
    assert code == 0, capsys.readouterr().err
    assert open_source(tmp_path / "one.parquet").kind == "parquet"
    code = main(["run", str(EXAMPLES / "sobi.m3"), "--data", str(p), "--json"])
    assert code != 0 and f"{p}#" in capsys.readouterr().err      # several symbols: says how to choose


@pytest.mark.parametrize("name", ["KRAKEN.ws.50.0", "OKX.ws.1.0", "COINBASE.ws.28.0"])
def test_symbol_batches_of_chunk_events_equal_line_by_line(name: str) -> None:
    """SymbolBatches reads the chunk lanes' ChunkEvents natively (symbol ids by row, one
    symbol's rows picked out): the batches of ddms run/backtest equal those of the same capture
    read line by line (one SymbolEvents per message), every symbol and one chosen symbol."""
    from ddms.io.formats import FORMATS, SymbolBatches
    path = SHARED / "data" / "venues" / name
    if not path.exists():
        pytest.skip("no shared data")
    fmt = next(f for f in FORMATS if f.kind == "cryptofeed")

    def rows(symbol: str | None, keep: bool, step: int | None) -> tuple[list, list[str]]:
        sb = SymbolBatches(fmt, str(path), symbol=symbol, keep=keep)
        if step is not None:
            sb.batch_updates = step
        bs = list(sb.batches())
        return [np.concatenate([getattr(b, f) for b in bs]) for f in ("rel", "sign", "cols", "line")], sb.seen

    _, seen = rows(None, True, None)
    assert len(seen) > 1
    for symbol, keep in ((None, True), (seen[1], False), (seen[-1], True)):
        fast, by_line = rows(symbol, keep, None)[0], rows(symbol, keep, 1)[0]
        for u, v in zip(fast, by_line, strict=True):
            assert u.dtype == v.dtype and np.array_equal(u, v)
