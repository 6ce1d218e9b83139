"""Which ``:=`` statements may run once per line (or per batch) instead of once per event.

A view like VWAP is typically maintained by a last statement that re-evaluates it from the maps
the trigger just updated: ``VWAP[] := AggSum(... threshold search ...)``.  Run per event, that
re-evaluation is most of the event's cost (two of the four tree descents of ``vwap.m3``, the loop
over brokers of missedtrades), yet nothing can observe the value between two events of one input
line, and nothing can observe it at all inside a batch while no view is watched.  The generated
``run_batch`` therefore marks a trigger dirty when it fires and re-runs its *deferred* statements
at the end of a line (when some view is watched) or of the batch (otherwise).

This is exact, not an approximation, for a statement ``S`` = ``M[keys] := e`` that satisfies:

1. ``e`` and the target keys use no argument of the trigger (``S`` re-evaluates a whole map from
   maps alone, so running it later computes what it would compute now from the same maps);
2. ``e`` does not read ``M``; every statement writing ``M`` is such a ``:=`` with the same target
   and expression, and every statement reading ``M`` is itself deferred (nothing non-deferred
   sees a stale ``M``);
3. every trigger that writes a map ``e`` reads contains ``S`` after all those writes (so after
   any trigger, ``S`` already equals ``e`` over the current maps, and re-running it later changes
   nothing but the time it is computed).

Under 3, a deferred statement's value after a line depends only on the maps at the end of that
line; deferred statements that read other deferred targets run, within each trigger, in the
trigger's own order, after the targets they read (also by 3).  Statements not meeting these
conditions run per event as before.  Cost of the analysis: O(statements x maps) per fixpoint
round, at most one round per statement.
"""

from __future__ import annotations

from ddms.m3.ir import Program, Statement, Trigger, map_reads, variables


def _candidate(s: Statement, t: Trigger) -> bool:
    args = set(t.args)
    return s.op == ":=" and not (set(s.target.keys) & args) and not (variables(s.expr) & args)


def deferred_maps(program: Program) -> frozenset[str]:
    """Names of the maps whose ``:=`` statements may be deferred to the end of a line (see the
    module docstring for the conditions).  Pure; O(rounds x statements x maps)."""
    writers: dict[str, set[Statement]] = {}   # target -> the (distinct) statements writing it
    ok: set[str] = set()
    bad: set[str] = set()
    for t in program.triggers:
        for s in t.statements:
            name = s.target.name
            writers.setdefault(name, set()).add(s)
            (ok if _candidate(s, t) else bad).add(name)
    cand = {m for m in ok - bad if len(writers[m]) == 1}
    while True:
        drop = {m for m in cand if not _holds(program, m, cand)}
        if not drop:
            return frozenset(cand)
        cand -= drop


def _holds(program: Program, m: str, cand: set[str]) -> bool:
    """Conditions 2 (readers) and 3 (placement) for deferring the statements writing ``m``."""
    reads: set[str] | None = None
    for t in program.triggers:
        for s in t.statements:
            if m in map_reads(s.expr) and s.target.name not in cand:
                return False
            if s.target.name == m:
                reads = map_reads(s.expr)
    if reads is None or m in reads:   # M := f(M) is not idempotent: it must run per event
        return False
    for t in program.triggers:
        writes = [j for j, s in enumerate(t.statements) if s.target.name in reads]
        if not writes:
            continue
        own = [j for j, s in enumerate(t.statements) if s.target.name == m]
        if not own or own[-1] < writes[-1]:
            return False
    return True


def keyed_deferred(program: Program, deferred: frozenset[str]) -> frozenset[str]:
    """Names of the maps whose statements may be deferred *per key*: recorded as dirty keys when
    their triggers fire and re-evaluated once per distinct key at the end of the line (views
    watched) or batch -- a grouped view re-evaluated at the event's group (``BEST[broker] :=
    Max(...)``, a best bid per broker), which reads its inputs once per group per batch instead of
    once per event.

    ``M`` qualifies when (1') every statement writing it is the one ``M[k..] := e`` (the same in
    every trigger), its target keys distinct arguments of the trigger and ``e`` using no other
    argument, so it re-evaluates exactly the entry its keys name from maps alone; (2') ``e`` does
    not read ``M`` nor any deferred map, and no statement reads ``M`` (only queries do); (3) as
    for :func:`deferred_maps`, every trigger writing a map ``e`` reads contains the statement
    after those writes.  Running it later for a key then computes what its last run for that key
    would have computed over the maps of the line's (batch's) end, which is the value the eager
    program holds for every key it re-evaluated.  Pure; O(statements x maps)."""
    writers: dict[str, set[Statement]] = {}
    bad: set[str] = set(deferred)
    read_by_statements: set[str] = set()
    for t in program.triggers:
        for s in t.statements:
            writers.setdefault(s.target.name, set()).add(s)
            read_by_statements |= map_reads(s.expr)
            keys = s.target.keys
            args = set(t.args)
            if not (s.op == ":=" and keys and len(set(keys)) == len(keys) and set(keys) <= args
                    and variables(s.expr) & args <= set(keys)):
                bad.add(s.target.name)
    out = set()
    for m, ws in writers.items():
        if m in bad or m in read_by_statements or len(ws) != 1:
            continue
        [s] = ws
        reads = map_reads(s.expr)
        if m in reads or reads & deferred:
            continue
        if _placed_after_writes(program, m, reads):
            out.add(m)
    return frozenset(out)


def _placed_after_writes(program: Program, m: str, reads: set[str]) -> bool:
    """Condition 3: every trigger writing a map of ``reads`` runs a statement writing ``m``
    after all those writes."""
    for t in program.triggers:
        writes = [j for j, s in enumerate(t.statements) if s.target.name in reads]
        if not writes:
            continue
        own = [j for j, s in enumerate(t.statements) if s.target.name == m]
        if not own or own[-1] < writes[-1]:
            return False
    return True
