"""ddms: agile views over order books.

SQL aggregate views and hand-written M3 trigger programs are compiled to numba and maintained
incrementally, one input line at a time.  The pipeline is visible in the package layout:

    ddms/m3/        trigger-program IR: ir -> printer/parser -> verify -> interpreter (oracle)
    ddms/storage/   run-time structures: hash maps with slice indexes, range-cumulative maps
    ddms/backend/   M3 -> numba Python source -> content-addressed module -> compiled program
    ddms/runtime/   engine, live views, callbacks, futures, event loop
    ddms/streams/   sans-I/O stream adaptors (order-book CSV) producing insert/delete events
"""

from __future__ import annotations

import os as _os

# numba reads its cache location when it is first imported: fix it before anything imports numba,
# so that compiled programs are shared between processes and test runs.
_os.environ.setdefault(
    "NUMBA_CACHE_DIR",
    _os.path.join(_os.environ.get("XDG_CACHE_HOME", _os.path.expanduser("~/.cache")), "ddms", "numba"),
)

__version__ = "0.1.0"
