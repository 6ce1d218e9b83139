"""numba kernels shared between formats: public, tested on their own (tests/test_io_kernels.py,
tests/test_venue_chunk.py for strlevels).

    ordertable.py  the order-id hash table (order-book CSV, LOBSTER, the fill simulator, the MBO replay)
    mbo.py         market-by-order books of many instruments as arrays: the DBN reader's replay (ddms/io/dbn.py)
    decimal.py     exact decimal/integer parsing from a uint8 buffer (order-book CSV, LOBSTER)
    levelarrays.py blocked sorted price-level arrays keyed by integer price id (the Binance book builder)
    recvlines.py   the received-message lines of a capture block, found, timed and cut out (cryptofeed reader)
    strlevels.py   price-level books on the exact decimal strings a venue sends (the Kraken/OKX/Coinbase chunk lanes)
    jsonscan.py    JSON scanning of the venue chunk lanes; ``leaf``: a hot helper compiled without reference counting

A kernel edited here reaches its callers in other files on the next run: the cache key of a
numba function covers its file's import closure (:mod:`ddms.numbacache`).
"""
