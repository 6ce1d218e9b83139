"""Trading strategies written as callbacks on views, and how a strategy is found by name.

A strategy reference (``--strategy REF``, ``strategies.get(REF, params)``) is one of:

* a built-in name (:data:`BUILTIN`: ``sobi``, ``mm``);
* the name of an installed plugin: an entry point in the ``ddms.strategies`` group whose object
  is a :class:`Strategy` subclass, e.g. in the plugin's ``pyproject.toml``::

      [project.entry-points."ddms.strategies"]
      imb = "mypackage.imbalance:Imbalance"

* ``package.module:Class``: a class in an importable module;
* ``path/to/file.py:Class``: a class in a Python file (loaded once per process under a module
  name derived from its absolute path).

``names()`` lists the built-in and entry-point names; ``spec(ref)`` is the class, ``get(ref,
params)`` an instance with validated parameters; unknown references are a :class:`StrategyError`
listing what exists.  :func:`portable` turns a reference into one another process of the same
interpreter resolves to the same class (Spark workers), with the ``sys.path`` entries it needs.
See :mod:`strategies.api` for the life cycle.  Cost: resolving a name reads the installed
packages' entry points (a few ms) unless it is built in; a class is imported once.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from strategies.api import (
    RUN_PARAMS,
    Context,
    LiveContext,
    OpenOrder,
    OrderRecord,
    Param,
    SimContext,
    Strategy,
    StrategyError,
)
from strategies.mm import MarketMaker
from strategies.sobi import Sobi

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "RUN_PARAMS", "Context", "LiveContext", "MarketMaker", "OpenOrder",
           "OrderRecord", "Param", "SimContext", "Sobi", "Strategy", "StrategyError", "get", "names", "origin",
           "portable", "spec"]

ENTRY_POINT_GROUP = "ddms.strategies"
BUILTIN: dict[str, type[Strategy]] = {cls.name: cls for cls in (Sobi, MarketMaker)}
"""The strategies shipped with ddms; a plugin of the same name is shadowed by these."""

_FILES: dict[str, type[Strategy]] = {}     # "abs/path.py:Class" -> class (a file is loaded once per process)


def _plugins() -> dict[str, EntryPoint]:
    """The installed ``ddms.strategies`` entry points by name (not loaded); a built-in name wins."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN}


def names() -> list[str]:
    """Built-in strategy names, then the installed plugins' names, each sorted."""
    return sorted(BUILTIN) + sorted(_plugins())


def origin(name: str) -> str:
    """Where a plugin name comes from: ``module:Class (distribution)``."""
    ep = _plugins().get(name)
    if ep is None:
        return "built in" if name in BUILTIN else "unknown"
    dist = getattr(ep, "dist", None)
    return f"{ep.value} ({dist.name})" if dist is not None else ep.value


def _check_class(obj: Any, ref: str) -> type[Strategy]:
    if not (isinstance(obj, type) and issubclass(obj, Strategy)):
        raise StrategyError(f"strategy {ref!r}: {obj!r} is not a subclass of strategies.Strategy")
    if not obj.name:
        raise StrategyError(f"strategy {ref!r}: the class sets no name (class attribute name = '...')")
    return obj


def _is_file(left: str) -> bool:
    return left.endswith(".py") or os.sep in left or "/" in left


def _split(ref: str) -> tuple[str, str]:
    left, _, cls = ref.rpartition(":")
    if not left or not cls.isidentifier():
        raise StrategyError(f"strategy {ref!r}: expected NAME, package.module:Class or path/to/file.py:Class")
    return left, cls


def _from_module(module: str, cls: str, ref: str) -> type[Strategy]:
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        raise StrategyError(f"strategy {ref!r}: cannot import {module} ({type(e).__name__}: {e})") from None
    if not hasattr(mod, cls):
        raise StrategyError(f"strategy {ref!r}: module {module} has no {cls}")
    return _check_class(getattr(mod, cls), ref)


def _from_file(path: str, cls: str, ref: str) -> type[Strategy]:
    p = Path(path).resolve()
    key = f"{p}:{cls}"
    if key in _FILES:
        return _FILES[key]
    if not p.is_file():
        raise StrategyError(f"strategy {ref!r}: no such file {p}")
    # one module name per file, stable across processes (pickling, Spark workers)
    name = f"_ddms_strategy_{p.stem}_{hashlib.sha1(str(p).encode()).hexdigest()[:10]}"
    mod = sys.modules.get(name)
    if mod is None:
        spec_ = importlib.util.spec_from_file_location(name, p)
        if spec_ is None or spec_.loader is None:
            raise StrategyError(f"strategy {ref!r}: {p} is not a Python file")
        mod = importlib.util.module_from_spec(spec_)
        sys.modules[name] = mod
        try:
            spec_.loader.exec_module(mod)
        except Exception as e:
            del sys.modules[name]
            raise StrategyError(f"strategy {ref!r}: {p} failed to load: {type(e).__name__}: {e}") from e
    if not hasattr(mod, cls):
        raise StrategyError(f"strategy {ref!r}: {p} defines no {cls}")
    _FILES[key] = _check_class(getattr(mod, cls), ref)
    return _FILES[key]


def spec(ref: str) -> type[Strategy]:
    """The strategy class ``ref`` refers to (see the module docstring); a StrategyError that lists
    the known names when there is none, or says why a plugin, module or file did not load."""
    if ref in BUILTIN:
        return BUILTIN[ref]
    if ":" in ref:
        left, cls = _split(ref)
        return _from_file(left, cls, ref) if _is_file(left) else _from_module(left, cls, ref)
    ep = _plugins().get(ref)
    if ep is None:
        raise StrategyError(f"unknown strategy {ref!r} (strategies: {', '.join(names())}); a strategy of "
                            "your own is package.module:Class or path/to/file.py:Class")
    try:
        obj = ep.load()
    except Exception as e:
        raise StrategyError(f"strategy {ref!r} (entry point {ep.value}) failed to load: "
                            f"{type(e).__name__}: {e}") from e
    return _check_class(obj, ref)


def get(ref: str, params: Mapping[str, Any] | None = None) -> Strategy:
    """A new instance of strategy ``ref`` with ``params`` validated and defaults filled in."""
    return spec(ref)(params)


def portable(ref: str) -> tuple[str, tuple[str, ...]]:
    """``(ref2, paths)``: a reference that another process of this interpreter resolves to the
    same class once ``paths`` are on its ``sys.path`` -- a built-in name as is, a file made
    absolute, a module or plugin as ``module:Class`` with the folder its top-level package was
    imported from (a plugin installed in a folder only this process has on its path works on
    Spark workers too).  Resolves ``ref`` (StrategyError as :func:`spec`)."""
    cls = spec(ref)
    if ref in BUILTIN:
        return ref, ()
    if ":" in ref and _is_file(_split(ref)[0]):
        left, name = _split(ref)
        return f"{Path(left).resolve()}:{name}", ()
    module = cls.__module__
    top = sys.modules[module.partition(".")[0]]
    where = getattr(top, "__file__", None)
    if where is None:                       # a namespace package: its first folder's parent
        paths = list(getattr(top, "__path__", []))
        root = str(Path(paths[0]).parent) if paths else None
    else:
        p = Path(where).resolve()
        root = str(p.parent.parent if p.name == "__init__.py" else p.parent)
    return f"{module}:{cls.__qualname__}", (root,) if root else ()
