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
                       "ddms.numbacache.ClosureLocator,ddms.numbacache.ProgramLocator,InTreeCacheLocator,"
                       "UserWideCacheLocator,IPythonCacheLocator,ZipCacheLocator")


def _numba_imported_first() -> None:
    """numba imported before ddms (``import numba`` at the top of a user's script) has read its
    configuration already: give it the two settings above as well (numba reads both again for
    every function it caches, so ddms's kernels, defined after this, get them); without this
    they would be cached by numba's file-stamped locator, which misses an edited callee."""
    import sys

    config = sys.modules.get("numba.core.config")
    if config is None:
        return
    if not getattr(config, "CACHE_DIR", ""):
        config.CACHE_DIR = _os.environ["NUMBA_CACHE_DIR"]
    if not getattr(config, "CACHE_LOCATOR_CLASSES", ""):
        config.CACHE_LOCATOR_CLASSES = _os.environ["NUMBA_CACHE_LOCATOR_CLASSES"]


_numba_imported_first()

# ddms's own modules' bytecode in ddms's cache folder where Python writes none (ddms.bytecode).
from ddms import bytecode as _bytecode  # noqa: E402

_bytecode.install()

__version__ = "0.1.0"


class _ArraymathWithoutScipy:
    """A one-shot import hook: while ``numba.np.arraymath`` is first imported (numba does it when
    it loads its first compiled function, cached or not), ``scipy.linalg`` reads as absent, so
    numba does not import it (0.25 s of every ddms start, about half the distance between the
    floor of Python + numba and the 0.7 s start target).  arraymath only asks whether a BLAS
    exists (by importing ``scipy.linalg.cython_blas``), for the inner product of
    ``np.correlate``/``np.convolve`` in compiled code (a plain loop instead; ddms calls neither);
    ``np.dot`` and ``np.linalg`` look for SciPy again when they are compiled, and a
    ``scipy.linalg`` imported before is used as is.  ``DDMS_NUMBA_SCIPY=1`` turns the hook off."""

    def find_spec(self, name, path=None, target=None):
        if name != "numba.np.arraymath":
            return None
        import importlib.machinery
        import sys

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or "scipy.linalg" in sys.modules:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            sys.modules["scipy.linalg"] = None   # ``import scipy.linalg...`` raises ImportError meanwhile
            try:
                load(module)
            finally:
                if "scipy.linalg" in sys.modules and sys.modules["scipy.linalg"] is None:
                    del sys.modules["scipy.linalg"]
        spec.loader.exec_module = exec_module
        return spec


if _os.environ.get("DDMS_NUMBA_SCIPY") != "1":
    import sys as _sys

    if "numba.np.arraymath" not in _sys.modules:
        _sys.meta_path.insert(0, _ArraymathWithoutScipy())
