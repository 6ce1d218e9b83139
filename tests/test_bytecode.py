"""ddms.bytecode: ddms's modules' bytecode kept in ddms's cache folder where Python writes none."""

from __future__ import annotations

import importlib
import marshal
import os
import sys
from pathlib import Path

import pytest

from ddms import bytecode


@pytest.fixture
def prog(tmp_path, monkeypatch):
    """A generated-program-like module in its own folder, bytecode cache under ``tmp_path``."""
    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    src = tmp_path / "src"
    src.mkdir()
    monkeypatch.syspath_prepend(str(src))
    bytecode.install()
    name = f"ddms_prog_bytecode_test_{os.getpid()}"
    yield name, src / f"{name}.py", tmp_path / "cache" / "pyc"
    sys.modules.pop(name, None)


def _import(name: str):
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def test_entry_written_read_and_replaced_when_stale(prog) -> None:
    name, path, folder = prog
    path.write_text("VALUE = 1\n")
    assert _import(name).VALUE == 1
    [entry] = list(folder.glob(f"{name}.*.pyc"))
    assert not list(path.parent.glob("__pycache__"))            # nothing beside the source

    # the entry is what is read: a code object of the same header answers for the file
    original = entry.read_bytes()
    code = compile("VALUE = 'from the entry'\n", str(path), "exec")
    entry.write_bytes(original[:bytecode._HEADER] + marshal.dumps(code))
    assert _import(name).VALUE == "from the entry"

    # an edit (size and time) makes the entry stale: compiled again, entry replaced
    path.write_text("VALUE = 22\n")
    assert _import(name).VALUE == 22
    assert entry.read_bytes() != original and len(list(folder.glob(f"{name}.*.pyc"))) == 1

    # a corrupt entry is a miss, never an error
    entry.write_bytes(b"\0" * 5)
    assert _import(name).VALUE == 22


def test_off_when_python_writes_bytecode_or_when_asked(prog, monkeypatch) -> None:
    name, path, folder = prog
    path.write_text("VALUE = 3\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    assert _import(name).VALUE == 3
    assert not folder.exists()
    finder = next(f for f in sys.meta_path if isinstance(f, bytecode._Finder))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert finder.find_spec("numpy") is None                      # not ours
    assert type(finder.find_spec(name).loader) is bytecode._Loader


def test_ddms_modules_are_loaded_through_it() -> None:
    """In a process where Python writes no bytecode, ddms's submodules carry the cache's loader."""
    import ddms.errors
    if sys.dont_write_bytecode and os.environ.get("DDMS_BYTECODE_CACHE") != "0":
        assert type(ddms.errors.__spec__.loader) is bytecode._Loader
    assert Path(ddms.errors.__file__).name == "errors.py"
