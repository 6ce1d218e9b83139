"""Bytecode of ddms's own modules (and of generated programs) kept in ddms's cache folder.

Why: where ``PYTHONDONTWRITEBYTECODE`` is set (this project's machines set it) or the package
folder is not writable, Python compiles every module of an editable or source checkout from
source in every process: ~45 ddms modules and the generated program, ~0.09 s of a cached
``ddms run``'s ~0.65 s (issue #25: a start within 0.7 s).  numpy and numba do not pay this:
pip compiled their bytecode when it installed them.  ddms already keeps what it compiles (numba's
machine code, generated sources) under ``$DDMS_CACHE_DIR`` (``~/.cache/ddms``); this keeps the
bytecode of its own modules there too, never beside the sources, so the user's setting still
holds for every other package and no ``__pycache__`` appears in the checkout.

Only while ``sys.dont_write_bytecode`` is set (otherwise Python's own ``__pycache__`` serves),
only for modules of :data:`PACKAGES` and generated programs (``ddms_prog_*``), only for plain
source files.  An entry is the code object marshalled after a header of Python's magic number,
the source's size and its modification time in nanoseconds: any edit (or another Python) makes
it stale, and a stale or unreadable entry is compiled again and replaced atomically; a cache that
cannot be written costs only the compile.  ``DDMS_BYTECODE_CACHE=0`` turns it off.

Cost: one ``stat`` and one read per module imported; the first import of an edited module pays
its compile and one write.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import marshal
import os
import sys
import tempfile

__all__ = ["PACKAGES", "install"]

PACKAGES = ("ddms", "replay", "strategies")
"""Top-level packages whose modules' bytecode is kept (besides generated programs)."""

_HEADER = len(importlib.util.MAGIC_NUMBER) + 16


def _folder() -> str:
    base = os.environ.get("DDMS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ddms")
    return os.path.join(base, "pyc")


class _Loader(importlib.machinery.SourceFileLoader):
    """A source loader whose bytecode lives in ddms's cache folder, keyed on the source's path."""

    def get_code(self, fullname: str):
        path = self.get_filename(fullname)
        st = os.stat(path)
        header = (importlib.util.MAGIC_NUMBER + st.st_size.to_bytes(8, "little")
                  + st.st_mtime_ns.to_bytes(8, "little", signed=True))
        key = hashlib.blake2b(path.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        entry = os.path.join(_folder(), f"{fullname}.{key}.pyc")
        try:
            with open(entry, "rb") as f:
                data = f.read()
            if data[:_HEADER] == header:
                return marshal.loads(data[_HEADER:])
        except (OSError, ValueError, EOFError, TypeError):
            pass
        code = self.source_to_code(self.get_data(path), path)
        try:
            os.makedirs(os.path.dirname(entry), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(entry), suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(header + marshal.dumps(code))
            os.replace(tmp, entry)
        except OSError:
            pass
        return code


class _Finder:
    """Finds ddms's modules as Python's path finder does and gives them :class:`_Loader`."""

    def find_spec(self, name, path=None, target=None):
        if not (name.split(".", 1)[0] in PACKAGES or name.startswith("ddms_prog_")) or not sys.dont_write_bytecode:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return spec
        spec.loader = _Loader(name, spec.origin)
        spec.cached = None
        return spec

    def invalidate_caches(self) -> None:
        """Nothing of its own to forget (``importlib.invalidate_caches`` calls it)."""


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once); ``DDMS_BYTECODE_CACHE=0`` leaves Python's."""
    if os.environ.get("DDMS_BYTECODE_CACHE") == "0":
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
