"""The I/O layer: every input format as a sans-I/O core plus a thin file transport.

This package is where the readers are converging (issue 22); the older readers still live in
``ddms/streams``, ``ddms/feeds`` and ``replay``.  Here so far:

    levels.py      exact price-level books per symbol, SymbolStatus counters, SymbolEvents, Resync
    venues/        venue protocol cores (Kraken, OKX, Coinbase, Binance multi-symbol)
    cryptofeed.py  cryptofeed raw-data captures (``*.ws.*`` + ``*.http.*``) -> per-symbol events
    dbn.py         Databento DBN market-by-order files -> order-level events (the only module
                   importing ``databento_dbn``)
    tardis.py      tardis.dev ``incremental_book_L2`` CSV -> per-symbol price-level events
    formats.py     their detection and one-symbol sources (registered in ddms/streams/detect.py
                   and replay/sources.py, so every command reads them)

Every reader yields :class:`~ddms.io.levels.SymbolEvents` (venue, symbol, an
:class:`~ddms.streams.events.EventBatch` of ``bids``/``asks`` rows), so a ``symbol`` column can
be added from the batch later.  Bad input is an :class:`~ddms.errors.InputError`
(``file:line: reason``) or, with ``skip_bad``, a counted skip.
"""
