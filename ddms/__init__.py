"""ddms: agile views over order books.

SQL aggregate views and hand-written M3 trigger programs are compiled to numba and maintained
incrementally, one input line at a time.  The pipeline is visible in the package layout:

    ddms/m3/        trigger-program IR: ir -> printer/parser -> verify -> interpreter (oracle)
    ddms/storage/   run-time structures: hash maps with slice indexes, range-cumulative maps
    ddms/backend/   M3 -> numba Python source -> content-addressed module -> compiled program
    ddms/runtime/   engine, live views, callbacks, futures, event loop
    ddms/io/        the I/O layer: every input format (sans-I/O readers), the book event schema
"""

from __future__ import annotations

import os as _os

# numba reads its cache location when it is first imported: fix it before anything imports numba,
# so that compiled programs are shared between processes and test runs.
_os.environ.setdefault(
    "NUMBA_CACHE_DIR",
    _os.path.join(_os.environ.get("XDG_CACHE_HOME", _os.path.expanduser("~/.cache")), "ddms", "numba"),
)
# numba keys its cache on a function's own file; ddms.numbacache.ClosureLocator keys it on the
# file's whole import closure, so an edited callee (a shared kernel) never runs stale from the cache.
_os.environ.setdefault("NUMBA_CACHE_LOCATOR_CLASSES",
                       "ddms.numbacache.ClosureLocator,UserProvidedCacheLocator,InTreeCacheLocator,"
                       "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator")

__version__ = "0.1.0"
