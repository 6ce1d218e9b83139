"""Compiled copies of generated-state structures (typed ``Dict`` maps, secondary indexes,
range-tree pools) to and from plain arrays, in iteration order: what checkpoints
(:mod:`ddms.runtime.checkpoint`), snapshots and the kept relations use.  No pyarrow here, so
that a snapshot does not pay for importing it."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import literally, njit, types
from numba.core.extending import overload
from numba.np.unsafe.ndarray import to_fixed_tuple
from numba.typed import Dict

from ddms.runtime.typedio import dict_dump as _dict_dump
from ddms.storage.btree import _grow1i, _grow2f, _grow2i


# -- compiled copies ------------------------------------------------------------------------------
def key_len(d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(key_len)
def _key_len_typed(d):
    n = d.key_type.count
    return lambda d: n


def row_key(row, d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(row_key)
def _row_key_typed(row, d):
    n = d.key_type.count
    return lambda row, d: to_fixed_tuple(row, n)


def _empty_inner(d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_empty_inner)
def _empty_inner_typed(d):
    kt, vt = d.value_type.key_type, d.value_type.value_type
    return lambda d: Dict.empty(kt, vt)


def _set(obj, name, value):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_set)
def _set_typed(obj, name, value):
    if not isinstance(name, types.StringLiteral):
        return None
    ns: dict[str, Any] = {}
    exec(f"def impl(obj, name, value):\n    obj.{name.literal_value} = value\n", ns)  # noqa: S102
    return ns["impl"]


@njit(cache=True)
def set_field(obj, name, value):
    """``obj.<name> = value`` on a structref (generated state objects have getters only)."""
    _set(obj, literally(name), value)


def dict_dump(d):
    """Keys (n x arity) and values of a typed Dict, in its iteration order (the cached compiled
    copy of :func:`ddms.runtime.typedio.dict_dump`)."""
    return _dict_dump(d, d._dict_type.key_type.count)


@njit(cache=True)
def dict_load(d, ks, vs):
    d.clear()
    for i in range(ks.shape[0]):
        d[row_key(ks[i], d)] = vs[i]


@njit(cache=True)
def index_dump(ix):
    """A secondary index (part -> dict of full keys): its parts in order, the size of each part's
    dict, and every part's keys and values concatenated in order."""
    p = len(ix)
    pa_ = key_len(ix)
    parts, counts = np.empty((p, pa_)), np.empty(p, np.int64)
    n = 0
    for inner in ix.values():
        n += len(inner)
    ks, vs = np.empty((n, 0)), np.empty(n)
    i = 0
    e = 0
    for part, inner in ix.items():
        for j in range(pa_):
            parts[i, j] = part[j]
        counts[i] = len(inner)
        if e == 0 and ks.shape[1] == 0:
            ks = np.empty((n, key_len(inner)))
        for k, v in inner.items():
            for j in range(len(k)):
                ks[e, j] = k[j]
            vs[e] = v
            e += 1
        i += 1
    return parts, counts, ks, vs


@njit(cache=True)
def index_load(ix, parts, counts, ks, vs):
    ix.clear()
    e = 0
    for i in range(parts.shape[0]):
        inner = _empty_inner(ix)
        for _ in range(counts[i]):
            inner[row_key(ks[e], inner)] = vs[e]
            e += 1
        ix[row_key(parts[i], ix)] = inner


@njit(cache=True)
def pool_load(p, lf, ln, llink, ik, ii, in_, ilink, ints, ps, ppn, ppj, pn, pj, xv, dc, dn, qf, qc, qn):
    """Give pool ``p`` the saved node rows in arrays of the saved capacities (rows past the ones
    ever used are never read before an allocation pads them), and the saved pending slots.  The
    arrays are asked for huge pages before they are filled, as a growing pool's are
    (``btree._huge``): a restored pool of a million keys is read at random like a built one (not
    measured on its own: restored and built states measured alike once ``load_state`` stopped
    aliasing root tables, ``python -m bench depth_sql``'s runs 2 and 3)."""
    lcap, icap = ints[0], ints[4]
    p.lf = _grow2f(lf, lcap)      # (the copies a growing pool makes: huge pages, links past the end -1)
    p.ln = _grow1i(ln, lcap)
    p.llink = _grow1i(llink, lcap)
    p.ik = _grow2f(ik, icap)
    p.ii = _grow2i(ii, icap)
    p.in_ = _grow1i(in_, icap)
    p.ilink = _grow1i(ilink, icap)
    p.lcap, p.l_used, p.l_head, p.l_free = ints[0], ints[1], ints[2], ints[3]
    p.icap, p.i_used, p.i_head, p.i_free = ints[4], ints[5], ints[6], ints[7]
    p.ps[:] = ps
    p.ppn[:] = ppn
    p.ppj[:] = ppj
    p.pn[:] = pn
    p.pj[:] = pj
    p.xv[:] = xv
    p.dc[:] = dc
    p.dn[:] = dn
    p.qf[:] = qf
    p.qc[:] = qc
    p.qn[:] = qn
