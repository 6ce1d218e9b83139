"""The M3 programs shipped with ddms, as package data: ``sobi.m3`` (what ``ddms run`` runs with
no program: the demo) and ``vwap.m3``.  ``examples/m3/`` in a source checkout links to these
files, so the README's ``examples/m3/vwap.m3`` and an installed wheel read the same text.

Why package data: a non-editable install (a wheel) has no source tree to find them in, so they
are found through :mod:`importlib.resources` next to this module.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from ddms.errors import DdmsError

__all__ = ["program_path"]


def program_path(name: str) -> Path:
    """The file of shipped program ``name`` (e.g. ``"sobi.m3"``).  Installed packages are
    directories, so the resource is a real file; a missing one is a broken install."""
    res = files(__name__) / name
    if not res.is_file():
        raise DdmsError(f"shipped program {name!r} is missing from {files(__name__)}: a broken ddms install "
                        "(reinstall it)")
    return Path(str(res))
