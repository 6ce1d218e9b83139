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

**Keyed statements** (:func:`keyed_deferred_maps`).  A per-symbol view re-evaluates one entry per
event, keyed by the event's symbol: ``V[BIDS_SYMBOL] := e(BIDS_SYMBOL)``.  Condition 1 fails (the
key is an argument), yet the statement can still run once per *touched key* per line: the
generated ``run_batch`` records the key (the argument's value) in a per-group set when the trigger
fires, and ``flush`` re-runs the group once per recorded key.  Exact for a statement ``S`` =
``M[.., a, ..] := e`` of trigger ``t`` such that:

1'. ``a`` is the only argument of ``t`` that ``S`` uses, and a target key of ``S``;
2'. every statement writing ``M`` is such a statement, all the same up to the name of ``a``;
    ``e`` does not read ``M``; every statement reading ``M`` is keyed-deferred itself;
3'. condition 3 above (placement after the writes of what ``e`` reads), and **partition**: for
    each map ``X`` that ``e`` reads there is a key position ``p`` at which every reference to ``X``
    in ``e`` names ``a``, and every statement of any trigger writing ``X`` writes at position
    ``p`` that trigger's own key argument.

By 3', ``e(k)`` reads only entries that events of key ``k`` write, so events of other keys leave
it unchanged: the value at the end of a line equals the one after the line's last event of key
``k`` (when ``S`` last ran per event), and keys the line did not touch keep their values in both
schemes.  Keyed and whole-map deferred statements never read each other's targets (each one's
readers must be of its own kind), so ``flush`` may run the two kinds in any order.
"""

from __future__ import annotations

from ddms.m3.ir import (
    AggSum,
    Expr,
    Extreme,
    Lift,
    MapRef,
    Program,
    Statement,
    Trigger,
    Var,
    children,
    map_reads,
    variables,
    walk,
    with_children,
)

KEY = "\x00key"
"""The name the key argument takes in a keyed statement's normal form (no M3 variable has it)."""


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
    reads = _reads(program)
    while True:
        drop = {m for m in cand if not _holds(program, m, cand, reads)}
        if not drop:
            return frozenset(cand)
        cand -= drop


def _reads(program: Program) -> list[list[frozenset[str]]]:
    """The maps each statement reads, per trigger and statement: computed once per analysis, not
    once per candidate map and round (a 90-view program: ~300 maps x ~500 statements, walking
    every expression each time, was most of its ~40 s of code generation).  O(program size)."""
    return [[frozenset(map_reads(s.expr)) for s in t.statements] for t in program.triggers]


def _holds(program: Program, m: str, cand: set[str], stmt_reads: list[list[frozenset[str]]]) -> bool:
    """Conditions 2 (readers) and 3 (placement) for deferring the statements writing ``m``
    (``stmt_reads``: :func:`_reads`)."""
    reads: frozenset[str] | None = None
    for t, rs in zip(program.triggers, stmt_reads, strict=True):
        for s, r in zip(t.statements, rs, strict=True):
            if m in r and s.target.name not in cand:
                return False
            if s.target.name == m:
                reads = r
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


# -- keyed statements -----------------------------------------------------------------------------
def statement_key(s: Statement, t: Trigger) -> str | None:
    """The one argument of ``t`` that ``s`` (a ``:=``) uses, if it is also a target key (condition
    1'), else None.  O(size of s)."""
    if s.op != ":=":
        return None
    used = (set(s.target.keys) | variables(s.expr)) & set(t.args)
    if len(used) != 1:
        return None
    (a,) = used
    return a if a in s.target.keys else None


def _rename(e: Expr, old: str, new: str) -> Expr:
    """``e`` with variable ``old`` named ``new`` wherever it occurs (free or bound).  O(size)."""
    e = with_children(e, tuple(_rename(c, old, new) for c in children(e)))

    def r(v: str) -> str:
        return new if v == old else v
    match e:
        case Var(name):
            return Var(r(name))
        case MapRef(name, keys):
            return MapRef(name, tuple(map(r, keys)))
        case AggSum(group, x):
            return AggSum(tuple(map(r, group)), x)
        case Lift(v, x):
            return Lift(r(v), x)
        case Extreme(kind, v, ref, n, rows):
            return Extreme(kind, r(v), ref, n, rows)
    return e


def _normal(s: Statement, a: str) -> Statement:
    """``s`` with its key argument ``a`` renamed :data:`KEY`: equal for the same statement of
    two triggers whose arguments are named after their streams."""
    target = _rename(s.target, a, KEY)
    assert isinstance(target, MapRef)
    return Statement(target, s.op, _rename(s.expr, a, KEY))


def keyed_deferred_maps(program: Program) -> frozenset[str]:
    """Names of the maps whose keyed ``:=`` statements may run once per touched key per line (or
    batch) instead of once per event (conditions 1'-3' of the module docstring).  Disjoint from
    :func:`deferred_maps`.  Pure; O(rounds x statements x maps)."""
    forms: dict[str, set[Statement]] = {}   # target -> normal forms of its writers
    key_of: dict[tuple[int, str], str] = {}   # (trigger, target) -> the key argument there
    bad: set[str] = set()
    for i, t in enumerate(program.triggers):
        for s in t.statements:
            name = s.target.name
            a = statement_key(s, t)
            if a is None:
                bad.add(name)
                continue
            forms.setdefault(name, set()).add(_normal(s, a))
            key_of[(i, name)] = a
    cand = {m for m, f in forms.items() if m not in bad and len(f) == 1}
    reads = _reads(program)
    while True:
        drop = {m for m in cand if not _holds_keyed(program, m, cand, next(iter(forms[m])), key_of, reads)}
        if not drop:
            return frozenset(cand)
        cand -= drop


def _holds_keyed(program: Program, m: str, cand: set[str], form: Statement,
                 key_of: dict[tuple[int, str], str], stmt_reads: list[list[frozenset[str]]]) -> bool:
    """Conditions 2' (readers) and 3' (placement, partition) for the keyed statements writing ``m``,
    whose normal form is ``form`` (``stmt_reads``: :func:`_reads`)."""
    reads = map_reads(form.expr)
    if m in reads:
        return False
    for t, rs in zip(program.triggers, stmt_reads, strict=True):
        for s, r in zip(t.statements, rs, strict=True):
            if m in r and s.target.name not in cand:
                return False
    # partition: the key positions at which every reference to X in e names the key
    positions: dict[str, set[int]] = {}
    for x in walk(form.expr):
        if isinstance(x, MapRef):
            at = {p for p, k in enumerate(x.keys) if k == KEY}
            positions[x.name] = positions.get(x.name, at) & at
    for i, t in enumerate(program.triggers):
        writes = [j for j, s in enumerate(t.statements) if s.target.name in reads]
        if not writes:
            continue
        own = [j for j, s in enumerate(t.statements) if s.target.name == m]
        if not own or own[-1] < writes[-1]:
            return False
        a = key_of[(i, m)]
        for j in writes:
            target = t.statements[j].target
            positions[target.name] = {p for p in positions[target.name] if target.keys[p] == a}
    return all(positions[x] for x in reads)
