"""The I/O layer: every input format as a sans-I/O core plus a thin file transport.

Every reader yields bids/asks rows of the one book event schema (:mod:`ddms.io.schema`) in
:class:`~ddms.io.events.EventBatch` objects; the applications (CLI, monitor, backtests,
strategies, ``replay/``) sit on top and nothing here imports them (tests/test_layers.py).

    schema.py      the book event schema: BIDS/ASKS, relation and column names (declared once)
    events.py      EventBatch, the columnar insert/delete batch every reader yields; its checks
    actions.py     actions a protocol core returns to its transport (NeedSnapshot)
    detect.py      which format a file is in: the one place every command asks
    sources.py     open_source(path): any format as a replayable, picklable source
    inputs.py      a program's declared ``FROM FILE`` inputs, read and merged
    merge.py       several inputs merged into one stream by receive timestamp
    orderbook.py   DBToaster order-book CSV ``t,order_id,action,volume,price`` (numba)
    csv.py         DBToaster ``LINE DELIMITED CSV`` streams
    lobster.py     LOBSTER message files (numba)
    columnar.py    ddms Parquet event files (``ddms convert``)
    capture.py     ``<recv_ts_ns> <json>`` capture lines (hftbacktest recorder format)
    cursor.py      resumable line reading of a file (plain or gzip) from a saved position
    orderproto.py  our order-level JSON protocol (the live form of finance.csv)
    levels.py      exact price-level books per symbol, SymbolStatus counters, SymbolEvents, Resync
    venues/        venue protocol cores (Binance book builder, Kraken, OKX, Coinbase, multi-symbol Binance)
    cryptofeed.py  cryptofeed raw-data captures (``*.ws.*`` + ``*.http.*``) -> per-symbol events
    dbn.py         Databento DBN market-by-order files (the only module importing ``databento_dbn``)
    tardis.py      tardis.dev ``incremental_book_L2`` CSV -> per-symbol price-level events
    formats.py     detection and one-symbol sources of the last three
    kernels/       numba kernels shared between formats (order-id table, decimal parsing, level arrays)

Bad input is an :class:`~ddms.errors.InputError` (``file:line: reason``) or, with ``skip_bad``, a
counted skip.

Durable state: every stateful protocol core and capture reader has ``save_state()`` (JSON values
and numpy arrays, never pickle) and ``load_state()`` continuing exactly from it (the order-book
and CSV parsers, :class:`~ddms.io.orderproto.OrderFeed`, the venue cores, the capture readers of
:meth:`Source.reader <ddms.io.sources.Source.reader>`); checkpoints (:mod:`ddms.runtime.resume`,
``ddms monitor --checkpoint``) store them beside the engine's state.
"""
