"""The base relations of a program (the current contents of its streams: for an order book, the
resting bids and asks), kept by the engine when asked, for ad-hoc queries (``Engine.query``).

Trigger programs keep aggregates, not the rows they came from, so the rows are kept beside them:
one typed ``Dict`` from ``(stream, column values...)`` to the row's multiplicity (inserts add
one, deletes take one away; a row whose multiplicity returns to 0 is removed).  Updated in
compiled code over the same event ranges ``apply`` runs, so it is consistent with the views at
every chunk boundary.  Cost when enabled: one hash probe per event (~40-60 ns, about as much
again as VWAP's own apply on a small book) and ~100 bytes per distinct row; nothing when not.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import Dict

from ddms.m3.ir import Program
from ddms.runtime.statecopy import dict_dump, key_len, row_key


def new_relations(program: Program) -> Dict:
    """An empty row table for ``program``'s streams (keys: stream number, then the widest
    stream's columns, narrower rows padded with 0)."""
    width = 1 + max((len(s.columns) for s in program.streams), default=0)
    return Dict.empty(types.UniTuple(types.float64, width), types.float64)


@njit(cache=True)
def relations_apply(d, relmap, rel, sign, cols, start, end, arity):
    """Add the events ``start..end`` of a batch to row table ``d``."""
    buf = np.zeros(key_len(d))
    for i in range(start, end):
        r = relmap[rel[i]]
        if r < 0:
            continue
        buf[0] = r
        for j in range(buf.shape[0] - 1):
            buf[j + 1] = cols[i, j] if j < arity[r] else 0.0
        k = row_key(buf, d)
        c = d.get(k, 0.0) + sign[i]
        if c == 0.0:
            del d[k]
        else:
            d[k] = c




def relation_rows(program: Program, d: Dict) -> dict[str, np.ndarray]:
    """Stream name -> its current rows (n x columns float64, a row repeated by its
    multiplicity), in insertion order.  A row deleted more often than inserted cannot be shown
    as rows: ValueError naming the stream.  O(rows), compiled copy."""
    keys, counts = dict_dump(d)
    out = {}
    for r, s in enumerate(program.streams):
        sel = keys[:, 0] == r
        c = counts[sel]
        if (c < 0).any():
            raise ValueError(f"stream {s.name}: a row was deleted more often than inserted")
        out[s.name] = np.repeat(keys[sel, 1:1 + len(s.columns)], c.astype(np.int64), axis=0)
    return out
