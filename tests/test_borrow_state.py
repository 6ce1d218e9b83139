"""The borrowed state handle (``btree.borrow_state``) that ``run_batch`` passes to the triggers it
inlines: generated code uses it for every trigger and prefetch call of its event loop, field reads
and stores through it reach the state's own payload, and a store through it counts the stored
array's references as a store through the state does (nothing leaked, nothing freed early)."""

from __future__ import annotations

import re

import numpy as np
from numba import njit, types
from numba.experimental import structref

from ddms.backend.codegen import generate
from ddms.compiler import compile_sql
from ddms.storage.btree import borrow_state

SQL = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'f.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'f.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
SELECT (SELECT MIN(price) FROM asks) - (SELECT MAX(price) FROM bids) AS spread;
"""


def test_run_batch_passes_the_borrowed_state() -> None:
    src = generate(compile_sql(SQL).program).source
    body = src[src.index("def run_batch("):]
    assert "    bst = borrow_state(st)\n" in body
    calls = re.findall(r"\b(on_(?:insert|delete)_\w+|prefetch_hash|prefetch)\((\w+),", body)
    assert calls and all(arg == "bst" for _, arg in calls), calls
    assert "xh_wadd(" in src   # EXTREME writers try the window first


@structref.register
class _BoxType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((n, types.unliteral(t)) for n, t in fields)


class _Box(structref.StructRefProxy):
    @property
    def a(self):
        return _get_a(self)

    @property
    def n(self):
        return _get_n(self)


@njit
def _get_a(box):
    return box.a


@njit
def _get_n(box):
    return box.n


structref.define_proxy(_Box, _BoxType, ["a", "n"])


@njit
def _new_box():
    return _Box(np.arange(4.0), np.zeros(1))


@njit
def _grow(box):
    b = borrow_state(box)
    old = b.a
    b.a = np.concatenate((old, old + 10.0))   # a store through the borrowed handle
    b.n[0] += old.sum()
    return b.a.shape[0]


@njit
def _grow_twice(box):
    return _grow(box) + _grow(box)


def test_stores_through_the_borrowed_state_count_references() -> None:
    box = _new_box()
    first = box.a
    assert _grow(box) == 8
    np.testing.assert_array_equal(first, np.arange(4.0))   # the old array, still ours, intact
    np.testing.assert_array_equal(box.a, np.concatenate((np.arange(4.0), np.arange(4.0) + 10.0)))
    assert box.n[0] == 6.0
    held = box.a
    assert _grow_twice(box) == 16 + 32
    np.testing.assert_array_equal(held[:4], np.arange(4.0))   # replaced twice, still ours
    assert box.a.shape[0] == 32
    # the state holds its field array once, and the Python handles above their own references
    assert box.a.base.refcount == 2     # the state's and this expression's
