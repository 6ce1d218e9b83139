"""The qa32 outside check over captures ddms has not seen (``tests/qa_captures.py`` transforms
the real ones): venues' new fields, renamed symbols and markets, COIN-M, rescaled prices, gzip,
several symbols in one hftbacktest file.

Found by this check: a field a venue adds to every message (a new JSON key in each Coinbase
``l2update``) made every message fall back from the chunk lane to the Python path, and each
fallback handed the product's whole book back and forth between the lane's arrays and its
``LevelBook`` (O(levels) each way): the full Coinbase capture took 417 s to read instead of 1 s.
The lane now leaves such a book to the Python path for a doubling number of its messages.
An hftbacktest capture of several Binance symbols was refused by ``ddms backtest`` ("holds
several symbols: choose one"), where the venue captures run one partition per symbol."""

from __future__ import annotations

import json

import pytest
from conftest import shared_file
from qa_captures import cf_transform, hft_merge, hft_transform

from ddms.io.sources import file_symbols, open_source
from ddms.io.venues.coinbase_chunk import CoinbaseLane
from replay.backtest import symbol_partitions
from tests.test_venue_chunk import _chunked, _per_message, _real, _same


def _with_field(msgs: list[bytes], venue: str) -> list[bytes]:
    """Every JSON object message with a field the venue might add tomorrow."""
    out = []
    for m in msgs:
        try:
            d = json.loads(m)
        except ValueError:
            out.append(m)
            continue
        if isinstance(d, dict):
            d["newField"] = 1
        out.append(json.dumps(d, separators=(",", ":")).encode())
    return out


@pytest.mark.parametrize("venue", ["coinbase", "okx"])
def test_a_new_field_in_every_message_does_not_ping_pong_books(venue: str, monkeypatch) -> None:
    """Same output as the per-message path (the new field counted in every message), and the
    books are taken over by the lane a bounded number of times, not once per message."""
    shared_file("data", "venues", "COINBASE.ws.28.0" if venue == "coinbase" else "OKX.ws.1.0")
    msgs = _with_field(_real(venue), venue)
    takes = []
    take = CoinbaseLane._take

    def counted(self, s: int) -> None:
        take(self, s)
        if self._books[s] is not None:
            takes.append(s)
    monkeypatch.setattr(CoinbaseLane, "_take", counted)
    ref, got = _per_message(msgs, venue), _chunked(msgs, [4096, 1000, 77], venue)
    _same(ref, got)
    s = got[2].summary()
    assert s["unknown_fields"]["newField"] >= s["messages"] > 0   # (other messages carry it too)
    books = len(got[2].books)
    assert len(takes) <= books * 16, (len(takes), s["messages"])   # was one per message (9,7k Coinbase)


def test_multi_symbol_hftbacktest_capture_is_partitioned_per_symbol(tmp_path) -> None:
    """Two renamed, rescaled copies of the spot capture's head in one file (receive times
    interleaved): listed per symbol, and each ``FILE#SYMBOL`` replays its own book."""
    spot = shared_file("data", "binance", "spot_btcusdt_20240808.gz")
    a = hft_transform(spot, tmp_path / "a.gz", symbol="ADAEUR", price_exp10=-4, lines=3000)
    b = hft_transform(spot, tmp_path / "b.gz", symbol="DOTTRY", price_exp10=1, ns_offset=1234567, lines=3000,
                      extra={"newField": 1})
    both = hft_merge([a, b], tmp_path / "two.gz")
    assert file_symbols(both) == ["ADAEUR", "DOTTRY"]
    assert symbol_partitions([str(both)]) == [f"{both}#ADAEUR", f"{both}#DOTTRY"]
    assert symbol_partitions([str(a)]) == [str(a)]          # one symbol: the file itself
    rows = {s: sum(len(x) for x in open_source(f"{both}#{s}").batches()) for s in ("ADAEUR", "DOTTRY")}
    assert rows["ADAEUR"] == rows["DOTTRY"] == sum(len(x) for x in open_source(a).batches()) > 0


# real venue captures, transformed: renamed symbols, a new field in every JSON object, gzip; the
# Binance futures capture as COIN-M (dstream/dapi hosts, *_PERP symbols, a ps field)
_VENUES = {
    "KRAKEN.ws.50.0": ("KRAKEN.ws.51.0.gz", None, {"XBT/CHF": "ZEC/JPY", "ADA/XBT": "DOGE/GBP"}, 4269, None),
    "OKX.ws.1.0": ("OKX.ws.2.0", None, {"BTC-USDT": "SOL-USDC", "UNI-USD-SWAP": "ETH-USD-SWAP"}, 290, None),
    "COINBASE.ws.28.0": ("COINBASE.ws.29.0.gz", None, {"SKL-USD": "SHIB-USD", "BAND-GBP": "ZRX-EUR"}, 0, None),
    "BINANCE.ws.1.0": ("BINANCE.ws.3.0", "BINANCE.http.0.0", {"NKNUSDT": "PEPEUSDT", "BLZETH": "WIFBTC"}, 0, None),
    "BINANCE_FUTURES.ws.1.0": ("BINANCE_DELIVERY.ws.1.0", "BINANCE_FUTURES.http.0.0",
                               {"SUSHIUSDT": "SUSHIUSD_PERP", "AKROUSDT": "AKROUSD_PERP"}, 0,
                               (("fstream.binance.com", "dstream.binance.com"),
                                ("fapi.binance.com/fapi/v1", "dapi.binance.com/dapi/v1"))),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_VENUES))
def test_transformed_venue_capture_replays_clean(tmp_path, name: str) -> None:
    """serve-feed + monitor over the transformed capture: every (renamed) symbol synced, 0 gaps,
    every checksum verified, every bookTicker equal, the new field counted in unknown_fields."""
    from tests.test_feeds_venues import _clean, _session, run

    src = shared_file("data", "venues", name)
    out, http, names, checksums, hosts = _VENUES[name]
    ws_url, rest_url = hosts if hosts else (None, None)
    path = cf_transform(src, tmp_path / out, names, extra={"newField": 1}, url=ws_url)
    if http:    # the REST snapshots beside it
        cf_transform(src.parent / http, tmp_path / (out.split(".ws.")[0] + ".http.0.0"), names, url=rest_url)
    _, _, s, _ = run(_session(path))
    syms = set(s["symbols"])
    assert set(names.values()) <= syms and not set(names) & syms
    _clean(s, syms)
    assert s["checksum_checked"] == checksums and s["unknown_fields"]["newField"] > 0
    if name == "BINANCE_FUTURES.ws.1.0":
        assert s["bookticker_checked"] > 0
