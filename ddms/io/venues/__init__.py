"""Venue protocol cores (sans-I/O): parsed messages in, per-symbol books, checks and events out.

    base.py      per-symbol books, status counters, reports and the Resync action they share
    kraken.py    Kraken websocket v1 ``book`` (CRC32 checksums, depth truncation)
    okx.py       OKX v5 ``books`` (seqId/prevSeqId continuity, signed CRC32 checksums)
    coinbase.py  Coinbase ``level2`` (+ the ``ticker`` channel as a soft cross-check)
    binance.py   Binance spot / USD-M / COIN-M, many symbols: one :class:`~ddms.io.venues.binance_book.BinanceBook` each
"""
