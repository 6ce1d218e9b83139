"""Which ORDERED maps share one range tree, as its columns: a pure analysis of an M3 program.

At a million price levels an order-book event costs what its tree descents cost, each a few cache
misses deep; VWAP updates two maps per event at the event's price (volume and price * volume) and
SOBI three per side (orders, volume, price * volume).  Maps that are always updated together at
the same key are therefore stored as the columns of one multi-column tree (``ddms.storage.btree``)
and their statements compile to one ``btree_addv``: one descent per event instead of one per map.
Every column still answers as the map it stores (its own keys, sums, counts, extremes), so reads
are unaffected; only writes are fused.

Maps M_1 .. M_C (C >= 2) of ``candidates`` (ORDERED maps living in their trees alone) form a group
when every statement writing any of them is *fusible* and each *run* of fusible statements that
writes one of them writes all of them.  A statement of a trigger is fusible when it is
``M[keys] += e`` with every key an event argument and ``e`` made of constants, event arguments and
arithmetic only (no map read, no loop): evaluating the C expressions first and writing after is
then the same as running the statements in turn.  A run is a maximal sequence of consecutive
fusible statements of one trigger with identical target keys and distinct targets; a statement
between them that is not fusible but writes no candidate map and reads none (a count per symbol
kept in a hash map, say) does not end a run: the run's statements read no map, so it commutes with
them.  (Per-symbol VWAP writes ``volume[symbol]`` between its price trees' updates; fused across
it, an event descends one tree of a thousand-instrument pool instead of two.)  Cost: O(program
size).
"""

from __future__ import annotations

from ddms.m3.ir import Add, Cmp, Const, Div, Mul, Neg, Program, Statement, Trigger, Var, map_reads, walk

_SCALAR = (Const, Var, Add, Mul, Neg, Div, Cmp)


def fusible(s: Statement, t: Trigger, candidates: frozenset[str]) -> bool:
    """``s`` (a statement of ``t``) adds an event-only expression to a candidate map at a key made
    of event arguments."""
    return (s.op == "+=" and s.target.name in candidates and bool(s.target.keys)
            and all(k in t.args for k in s.target.keys)
            and all(isinstance(n, _SCALAR) and (not isinstance(n, Var) or n.name in t.args) for n in walk(s.expr)))


def runs(t: Trigger, candidates: frozenset[str]) -> list[list[int]]:
    """The runs of trigger ``t``: lists of statement indexes (see the module docstring)."""
    out: list[list[int]] = []
    cur: list[int] = []
    for j, s in enumerate(t.statements):
        if not fusible(s, t, candidates):
            if s.target.name not in candidates and not map_reads(s.expr) & candidates:
                continue   # commutes with the run's statements (they read no map)
            cur = []
            continue
        head = t.statements[cur[0]] if cur else None
        if head is None or head.target.keys != s.target.keys or any(
                t.statements[i].target.name == s.target.name for i in cur):
            cur = [j]
            out.append(cur)
        else:
            cur.append(j)
    return out


def tree_groups(program: Program, candidates: frozenset[str]) -> tuple[tuple[str, ...], ...]:
    """The groups of maps stored as the columns of one tree, each in column order (the order of
    its statements in the first trigger that writes it), groups in the order of their first
    statement.  Maps of ``candidates`` that share a tree with no other map are left out."""
    signature: dict[str, list[tuple[int, int]]] = {}
    excluded: set[str] = set()
    first: dict[str, tuple[int, int]] = {}
    for ti, t in enumerate(program.triggers):
        in_run: dict[int, int] = {j: r for r, run in enumerate(runs(t, candidates)) for j in run}
        for j, s in enumerate(t.statements):
            name = s.target.name
            if name not in candidates:
                continue
            if j not in in_run:
                excluded.add(name)
                continue
            signature.setdefault(name, []).append((ti, in_run[j]))
            first.setdefault(name, (ti, j))
    by_sig: dict[tuple[tuple[int, int], ...], list[str]] = {}
    for name, sig in signature.items():
        if name not in excluded:
            by_sig.setdefault(tuple(sig), []).append(name)
    groups = [tuple(sorted(names, key=first.__getitem__)) for names in by_sig.values() if len(names) > 1]
    return tuple(sorted(groups, key=lambda g: first[g[0]]))
