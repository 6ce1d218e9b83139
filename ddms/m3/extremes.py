"""Which ORDERED maps are read only by one extreme of their keys: stored as a hash table plus a heap.

Why: ``choose_orders`` makes a map ORDERED when something reads its keys in order -- range sums,
thresholds, ranks, or just its largest or smallest key.  A range tree answers all of these, at the
price of a descent and a rewrite of the counted sums along the path on every update (60-180 ns a
line for the best bid), while the maximum of a count of orders per price only changes when a price
level appears or empties.  A one-key map that the program reads only by its maximum (or only by its
minimum, or by both) and at bound keys, and that it changes only by ``+=``, needs none of the sums:
this pass declares it ``extreme="max"``/``"min"``/``"both"`` instead of ORDERED, and the code
generator keeps it in ``ddms.storage.extheap`` (a value per key in a hash table, the keys on a lazy
heap changed only when a value leaves or reaches zero; one of each per extreme read).  A map
exposed by a query, read by a range sum, a rank, a loop, or with prefix keys (one tree per group)
stays a range tree.

The decision is made here once and travels on the map declaration (printed ``EXTREME MAX``);
``ddms.m3.verify.check_extreme`` states the rule and is enforced on every program (a hand-written
M3 program may declare it too).  Pure; O(program size x ORDERED maps).
"""

from __future__ import annotations

from dataclasses import replace

from ddms.m3.ir import MapDecl, Program
from ddms.m3.verify import check_extreme, extreme_reads

__all__ = ["choose_extremes"]


def choose_extremes(program: Program) -> Program:
    """``program`` with every one-key ORDERED map that only its extremes read (see the module
    docstring) declared ``extreme`` instead of ORDERED; the same object when none is."""
    arity = {m.name: len(m.keys) for m in program.maps}
    chosen: dict[str, MapDecl] = {}
    for m in program.maps:
        if m.ordered and len(m.keys) == 1:
            kinds: set[str] = set()
            for t in program.triggers:
                for s in t.statements:
                    kinds |= extreme_reads(s.expr, m.name, frozenset(t.args), arity) or set()
            if kinds:
                cand = replace(m, ordered=False, extreme=kinds.pop() if len(kinds) == 1 else "both")
                if check_extreme(program, cand) is None:
                    chosen[m.name] = cand
    # a map written exactly where a map that stays ORDERED is written (same triggers, same keys:
    # codegen's fusion makes them columns of one tree, one descent for both) stays in that tree:
    # a tree column costs less than a descent plus a separate table and heap (ask_depth_1pct at 1M
    # distinct prices: 179 ns a line fused, 213 apart)
    sig = {m.name: _writes(program, m.name) for m in program.maps if m.ordered}
    for name in list(chosen):
        if any(other not in chosen and other != name and s == sig[name] for other, s in sig.items()):
            del chosen[name]
    maps = [chosen.get(m.name, m) for m in program.maps]
    if all(a is b for a, b in zip(maps, program.maps, strict=True)):
        return program
    return replace(program, maps=tuple(maps))


def _writes(program: Program, name: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Where map ``name`` is written: per trigger, the target keys of its ``+=`` statements (a
    ``:=`` counts as a different key, never shared)."""
    return tuple(tuple(s.target.keys if s.op == "+=" else (":=",) for s in t.statements if s.target.name == name)
                 for t in program.triggers)
