"""Content-addressed module cache for generated programs.

numba's ``cache=True`` needs functions that live in a real, importable file (code made with
``exec`` cannot be cached).  The generated source is written once to
``<cache>/programs/ddms_prog_<digest>.py`` (atomically: temp file + rename, so concurrent
processes never import half a file) and imported; numba then caches each function's machine code
under ``NUMBA_CACHE_DIR``, so a second process starts a compiled program without recompiling.
:func:`compile_lock` makes that true of processes that start at the same time too: the first
compiles, the others wait for it and load its machine code.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ddms.backend.generated import Generated


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


def sources_digest(parts: tuple[str, ...]) -> hashlib._Hash:
    """A SHA-256 of the sources of ``parts`` (files or folders of ``.py`` files under the ddms
    package), names and contents: what a disk cache of a compile pass's output keys on, so that
    a change to the pass makes every key new.  Cost: reading those files (~1 ms for ~40)."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for part in parts:
        root = pkg / part
        for f in sorted([root] if root.is_file() else root.rglob("*.py")):
            h.update(str(f.relative_to(pkg)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h


def write_cached(path: Path, text: str) -> None:
    """Write ``text`` to cache entry ``path`` atomically (a concurrent reader gets a whole file
    or none); a cache that cannot be written (read-only, full) is skipped: it only costs
    computing the entry again next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass


@contextlib.contextmanager
def compile_lock(digest: str) -> Iterator[None]:
    """Hold an exclusive lock on generated program ``digest`` while compiling (or loading) it.
    Without it, two processes that construct the same program before either has filled numba's
    cache both compile it (a minute or more each, e.g. two test workers, or two ``ddms run``
    started together); with it, the second waits for the first and then loads its machine code
    from the cache.  An advisory ``flock`` on ``<cache>/programs/ddms_prog_<digest>.lock``: the
    kernel drops it when its holder exits, killed or not, so a crashed compile never blocks the
    next one.  Threads of one process serialise on it the same way (each takes its own open file
    description).  Cost: one open and two system calls when nobody holds it."""
    folder = cache_dir() / "programs"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"ddms_prog_{digest}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def compiled_before(generated: Generated) -> bool:
    """Whether numba's disk cache (``NUMBA_CACHE_DIR``) holds machine code of ``generated``'s
    ``run_batch``: then constructing its engine loads
    rather than compiles (a fraction of a second instead of a minute or more), unless the cache
    was written for another Python or CPU.  For messages and for choosing ``ddms run
    --first-results``'s path.  Cost: one ``stat`` of the index file numba would read (named by
    the module, the function, its first line and the Python version, as numba names it); not a
    scan of the folder, which holds every program ever compiled (tens of thousands of files on
    a long-used machine: 40 ms a scan)."""
    base = os.environ.get("NUMBA_CACHE_DIR")
    if not base or not os.path.isdir(base):
        return False
    line = _first_line(generated.source, "run_batch")
    if line is None:
        return False
    py = f"{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}"
    name = f"ddms_prog_{generated.digest}.run_batch-{line}.py{py}.nbi"
    return (Path(base) / _numba_subdir(cache_dir() / "programs") / name).is_file()


def _first_line(source: str, func: str) -> int | None:
    """The line numba names ``func``'s cache entry by: its code object's first line, which for
    a decorated function is its first decorator's."""
    lines = source.splitlines()
    for i, text in enumerate(lines):
        if text.startswith(f"def {func}("):
            while i > 0 and lines[i - 1].startswith("@"):
                i -= 1
            return i + 1
    return None


def _numba_subdir(folder: Path) -> str:
    """The folder under ``NUMBA_CACHE_DIR`` where numba caches functions of modules in ``folder``
    (numba's ``_CacheLocator.get_suitable_cache_subpath``: the folder's name and the SHA-1 of its
    absolute path).  The cache of a program is per module *path*: the same program generated
    under another ``DDMS_CACHE_DIR`` is compiled again, so only this folder counts."""
    path = os.path.abspath(folder)
    return f"{os.path.basename(path)}_{hashlib.sha1(path.encode()).hexdigest()}"
