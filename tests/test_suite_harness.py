"""The suite's own machinery (tests/conftest.py): what a worker does once its tests are over,
and the order files are handed to the workers in."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import conftest
import pytest


def test_a_finished_worker_ignores_sigint(monkeypatch):
    """execnet SIGINTs a worker still ending 5 s after the controller closed its channel: a
    worker whose session has finished ignores it (a process outside xdist keeps Ctrl-C)."""
    monkeypatch.delenv("DDMS_COMPILE_PROFILE", raising=False)   # (else this would write a record file)
    before = signal.getsignal(signal.SIGINT)
    try:
        monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
        conftest.pytest_sessionfinish(None)
        assert signal.getsignal(signal.SIGINT) is before
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
        conftest.pytest_sessionfinish(None)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_long_files_first_longest_first():
    def item(name, *args):
        mark = None if args == (None,) else SimpleNamespace(args=args)
        return SimpleNamespace(name=name, get_closest_marker=lambda _n, m=mark: m)
    items = [item("a", None), item("b", 30), item("c"), item("d", None), item("e", 300)]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["e", "c", "b", "a", "d"]   # c: long without seconds, 60


def test_xdist_keeps_the_collection_order(pytestconfig):
    """xdist's default reorders files by number of tests, which put the long files last."""
    if not hasattr(pytestconfig.option, "loadscopereorder"):
        pytest.skip("pytest-xdist not installed")
    assert pytestconfig.option.loadscopereorder is False
