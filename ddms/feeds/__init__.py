"""Sans-I/O feed protocol cores: messages in, engine bids/asks events (and actions) out.

    binance.py     Binance diff-depth decoder and book builder (spot and USD-M futures rules)
    orderproto.py  our order-level JSON protocol (the live form of finance.csv): decoder, encoder
    capture.py     ``<recv_ts_ns> <json>`` capture lines -> typed records; a thin .gz reader

Nothing here opens a socket or reads a clock: the transport (``transport.py``, the only module
allowed to import websockets) feeds bytes in and performs the actions the cores ask for (fetch a
depth snapshot, resynchronize).
"""
