"""Content-addressed module cache for generated programs.

numba's ``cache=True`` needs functions that live in a real, importable file (code made with
``exec`` cannot be cached).  The generated source is written once to
``<cache>/programs/ddms_prog_<digest>.py`` (atomically: temp file + rename, so concurrent
processes never import half a file) and imported; numba then caches each function's machine code
under ``NUMBA_CACHE_DIR``, so a second process starts a compiled program without recompiling.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType


def cache_dir() -> Path:
    """``$DDMS_CACHE_DIR`` or ``~/.cache/ddms``: where generated modules are kept."""
    base = os.environ.get("DDMS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ddms")
    return Path(base)


def load_module(source: str, digest: str) -> ModuleType:
    """Write ``source`` as module ``ddms_prog_<digest>`` (once) and import it.  Cost: one file
    write on first use; importing the module is cheap, compiling happens lazily on first call
    (or is read from numba's cache)."""
    name = f"ddms_prog_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    folder = cache_dir() / "programs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(source)
        os.replace(tmp, path)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return importlib.import_module(name)


def compiled_before(digest: str) -> bool:
    """Whether numba's disk cache (``NUMBA_CACHE_DIR``) holds machine code of generated program
    ``digest``'s ``run_batch``: then constructing its engine loads rather than compiles (a
    fraction of a second instead of a minute or more), unless the cache was written for another
    Python or CPU.  For messages and for choosing ``ddms run --first-results``'s path.  Cost: one
    directory scan."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    if not base or not os.path.isdir(base):
        return False
    return any((Path(base) / _numba_subdir(cache_dir() / "programs")).glob(f"ddms_prog_{digest}.run_batch-*.nbi"))


def _numba_subdir(folder: Path) -> str:
    """The folder under ``NUMBA_CACHE_DIR`` where numba caches functions of modules in ``folder``
    (numba's ``_CacheLocator.get_suitable_cache_subpath``: the folder's name and the SHA-1 of its
    absolute path).  The cache of a program is per module *path*: the same program generated
    under another ``DDMS_CACHE_DIR`` is compiled again, so only this folder counts."""
    path = os.path.abspath(folder)
    return f"{os.path.basename(path)}_{hashlib.sha1(path.encode()).hexdigest()}"
