"""The cost class of each view per input event, from the access plan codegen chose: what
``ddms compile`` prints so that a user sees a cliff before running.

A statement costs O(1) (map probes), O(log n) (range sums, threshold searches, tree extremes),
O(groups) (a pass over a map keyed by exactly the view's keys: its groups, each a few probes or
range sums), O(slice) (a loop over the entries of a map that share some keys: one group's
orders) or O(n) (a loop over any other whole map: a re-evaluation by one pass every event,
flagged).  A view costs the worst
of the statements that write its maps or the maps they read, transitively.  Pure; linear in the
plan and the program.
"""

from __future__ import annotations

import re

from ddms.m3.ir import Program, map_reads

CLASSES = ("O(1)", "O(log n)", "O(groups)", "O(slice)", "O(n)")


def statement_costs(program: Program, plan: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """Target map -> (worst class, what causes it) over the plan's statements writing it."""
    arity = {m.name: len(m.keys) for m in program.maps}
    out: dict[str, tuple[str, str]] = {}
    target = ""
    for line in plan:
        head = re.match(r"(\w+): (\w+)\[[^\]]*\] (\+=|:=) ", line)
        if head is not None:
            target = head.group(2)
            out.setdefault(target, ("O(1)", ""))
            continue
        if not line.startswith("  ") or not target:
            continue
        whole = line.strip().startswith("loop over") and " slice" not in line   # every entry of a map
        looped = re.match(r"\s*loop over (?:all of )?(\w+)", line)
        groups = looped is not None and 0 < arity.get(looped.group(1), -1) == arity.get(target, -2)
        cls = ("O(groups)" if whole and groups else "O(n)" if line.rstrip().endswith("O(n)") or whole
               else "O(slice)" if "O(slice)" in line else "O(log n)" if "O(log n)" in line else "O(1)")
        if CLASSES.index(cls) > CLASSES.index(out[target][0]):
            out[target] = (cls, line.strip())
    return out


def view_costs(program: Program, plan: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(view, class, cause) for every query of ``program``: the worst statement cost over the
    maps it depends on."""
    per_map = statement_costs(program, plan)
    reads: dict[str, set[str]] = {}
    for t in program.triggers:
        for s in t.statements:
            reads.setdefault(s.target.name, set()).update(map_reads(s.expr))
    out = []
    for q in program.queries:
        seen: set[str] = set()
        todo = list(q.exposed)
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += reads.get(m, ())
        worst, cause = "O(1)", ""
        for m in sorted(seen):
            cls, why = per_map.get(m, ("O(1)", ""))
            if CLASSES.index(cls) > CLASSES.index(worst):
                worst, cause = cls, why
        ranked = [m for m in (q.limit.ranks if q.limit is not None else ()) if program.map(m).ordered]
        if ranked and worst == "O(1)":
            worst, cause = "O(log n)", f"{', '.join(ranked)}: the range trees that rank its rows, a descent per event"
        out.append((q.name, worst, cause))
    return out


def read_costs(program: Program) -> list[tuple[str, str]]:
    """(view, what one read costs) for every view whose rows are cut or ordered when read
    (:class:`ddms.m3.ir.Limit`: a ladder, the n best orders, SELECT DISTINCT): its maps keep every
    group at the per-event cost above, and a read (a printed line, a snapshot, a callback's check
    of a watched view after a line that changed it) copies the groups present, orders them and
    keeps the ranks asked for."""
    out = []
    for q in program.queries:
        if q.limit is None:
            continue
        lim = q.limit
        what = "the keys present" if lim.keys_only else "the rows"
        cut = (f"ranks {lim.offset + 1}..{lim.offset + lim.n}" if lim.n is not None else
               f"ranks from {lim.offset + 1}" if lim.offset else "every row")
        per = " per partition" if lim.partition else ""
        if lim.ranks and all(program.map(m).ordered for m in lim.ranks):   # (ddms.calculus.order.ranked_rows)
            parts = " per partition (and a pass over the partitions)" if lim.partition else ""
            out.append((q.name, f"O(n log g) per read: {cut} by selects by rank in the range trees that count "
                                f"its rows per ORDER BY prefix{parts}"))
        else:
            out.append((q.name, f"O(g log g) per read, g its groups: {what} ordered, {cut}{per} shown"))
    return out
