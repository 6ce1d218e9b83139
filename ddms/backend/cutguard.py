"""Events beyond the cut of a top-N: when a deferred statement cannot change (issue 21, item 4).

A top-N view re-evaluates from its maps after every line while it is watched (``deferral.py``):
``V := AggSum(M[p] * {p >= Max(p', C[p'], 5)})`` -- the cut (the 5th best key of the count map
``C``), then range sums above it -- a few tree descents per line (measured ~105-130 ns a line,
``top5_bid_order_volume`` watched, tick levels).  Yet on a deep book nearly every event lies below
the 5th best level, and such an event cannot change the value: it changes neither the cut (the
n-th largest key depends on the keys at or above it only) nor any entry the statement reads (all at
keys at or above the cut).  This module finds, per group of deferred statements, the cuts its
statements read and, per trigger that marks the group dirty, the event arguments that decide it:
the generated ``run_batch`` then marks the group dirty only when some such argument is *not*
strictly beyond the cut the last evaluation saw (kept in state, ``cut_<g>``, NaN until then).

Exact under these conditions, checked here on the M3 (nothing is assumed of the SQL):

1. A *cut* is ``Max(x, C[x], n [rows])`` or ``Min(..)`` over a one-key ORDERED map ``C`` stored in a
   range tree (no EXTREME heap).  Its stored value is the n-th key (row) only when ``C`` holds at
   least n keys (rows); with fewer, the cut is the last key and a key beyond it would join the
   top-N, so the stored value is NaN and nothing is skipped.  (Rows: the values are row counts,
   nonnegative, as :func:`ddms.storage.btree.btree_nth_row` already requires.)
2. Every read of a map by the group's statements is *bounded* by some cut at some key position:
   that key is the cut itself (``X ^= Max(..)``, ``{X = Max(..)}``), or compared with it or with a
   bounded variable towards the inside (``X >= cut``, ``X > Y`` with Y bounded, for a max cut;
   mirrored for a min cut) by a factor of an enclosing product (a false comparison zeroes the
   whole product, so entries outside the bound never contribute).  The cut map's own read by the
   cut counts as bounded at its key.  Reads of targets of the group itself are free (their values
   follow from the rest); reads of other deferred maps make the group unguarded.
3. A trigger that marks the group dirty writes each map the group reads only by ``+=`` at a key
   whose bounded position is one of its event arguments.  The event is skipped when, for every
   such (argument, cut), the argument lies strictly beyond the cut (below a max cut, above a min
   cut).  By induction over the skipped events, the cuts and every entry read keep the values the
   last evaluation saw, so the group's targets already hold what re-running it would compute.

4. The cuts compared with are *current*: every trigger that writes a cut's map marks this group
   (so the cut is stored again after it, or it was skipped and left the cut as it was).  A cut
   map also written by triggers of other groups (an imbalance of both sides re-evaluated by the
   bid and the ask triggers' groups alike) could move unseen: no guard compares with it.

A trigger with nothing to compare keeps marking the group dirty (a view with no reads would
otherwise never run once).  Cost of the analysis: O(size of the group's statements + the
triggers' statements); at run time one compare per guarded argument per event.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddms.m3.ir import Cmp, Expr, Extreme, Lift, MapDecl, MapRef, Mul, Statement, Trigger, Var, children

_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "=": "="}
_INSIDE = {"max": (">", ">=", "="), "min": ("<", "<=", "=")}


@dataclass(frozen=True)
class Cut:
    """A cut a group reads: the ``n``-th largest (``max``) / smallest key of one-key map ``map``,
    by rows (weighted by its values) if ``rows``."""

    kind: str
    map: str
    n: int
    rows: bool


@dataclass(frozen=True)
class Guard:
    """Events of trigger ``trigger`` (its index in the program) leave the group unchanged when every
    ``(argument, cut index)`` of ``tests`` has the argument strictly beyond that cut."""

    trigger: int
    tests: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupGuards:
    """The cuts a group of deferred statements reads (stored in state after each evaluation, in
    this order) and the guarded triggers among those that mark it dirty."""

    cuts: tuple[Cut, ...]
    guards: tuple[Guard, ...]


def _cut(e: Expr, decl: dict[str, MapDecl]) -> Cut | None:
    if not isinstance(e, Extreme) or e.n < 1 or e.ref.keys != (e.var,):
        return None
    m = decl.get(e.ref.name)
    if m is None or not m.ordered or m.extreme is not None or len(m.keys) != 1:
        return None
    return Cut(e.kind, e.ref.name, e.n, e.rows)


class _Reads:
    """The bounded key positions of every map read of a group (see the module docstring, 2)."""

    def __init__(self, decl: dict[str, MapDecl], free: frozenset[str], deferred: frozenset[str]) -> None:
        self.decl = decl
        self.free = free            # the group's own targets
        self.deferred = deferred    # every deferred target (of any group): not readable here
        self.cuts: list[Cut] = []
        self.reads: dict[str, list[frozenset[tuple[int, int]]]] = {}
        self.ok = True

    def cut_index(self, e: Expr) -> int | None:
        c = _cut(e, self.decl)
        if c is None:
            return None
        if c not in self.cuts:
            self.cuts.append(c)
        return self.cuts.index(c)

    def _cuts_of(self, e: Expr, bounded: dict[str, frozenset[int]]) -> frozenset[int]:
        """The cuts ``e`` equals or is bounded by (a cut itself, or a bounded variable)."""
        c = self.cut_index(e)
        if c is not None:
            return frozenset((c,))
        if isinstance(e, Var):
            return bounded.get(e.name, frozenset())
        return frozenset()

    def _bind(self, factors: tuple[Expr, ...], bounded: dict[str, frozenset[int]]) -> dict[str, frozenset[int]]:
        """``bounded`` extended by the lifts and comparisons among ``factors`` (to a fixpoint: a
        comparison may name a variable a later factor lifts)."""
        out = dict(bounded)
        rebound = {f.var for f in factors if isinstance(f, Lift) and self.cut_index(f.expr) is None}
        for v in rebound:   # a variable lifted from something else is not bounded here
            out.pop(v, None)
        while True:
            grew = False
            for f in factors:
                pairs: list[tuple[str, str, Expr]] = []
                if isinstance(f, Lift) and f.var not in rebound:
                    pairs.append((f.var, "=", f.expr))
                elif isinstance(f, Cmp):
                    if isinstance(f.left, Var):
                        pairs.append((f.left.name, f.op, f.right))
                    if isinstance(f.right, Var):
                        pairs.append((f.right.name, _FLIP.get(f.op, ""), f.left))
                for v, op, other in pairs:
                    if v in rebound:
                        continue
                    add = frozenset(c for c in self._cuts_of(other, out) if op in _INSIDE[self.cuts[c].kind])
                    if add - out.get(v, frozenset()):
                        out[v] = out.get(v, frozenset()) | add
                        grew = True
            if not grew:
                return out

    def visit(self, e: Expr, bounded: dict[str, frozenset[int]]) -> None:
        if isinstance(e, Extreme):
            c = self.cut_index(e)
            if c is None:
                self.ok = False
            else:
                self.reads.setdefault(e.ref.name, []).append(frozenset(((0, c),)))
            return
        if isinstance(e, MapRef):
            if e.name in self.free:
                return
            if e.name in self.deferred:
                self.ok = False
                return
            self.reads.setdefault(e.name, []).append(
                frozenset((p, c) for p, k in enumerate(e.keys) for c in bounded.get(k, ())))
            return
        if isinstance(e, Mul):
            bounded = self._bind(e.factors, bounded)
        for x in children(e):
            self.visit(x, bounded)


def group_guards(statements: tuple[Statement, ...], triggers: list[tuple[int, Trigger]],
                 program: tuple[Trigger, ...], maps: tuple[MapDecl, ...],
                 deferred: frozenset[str]) -> GroupGuards | None:
    """The cuts and guards of the group of deferred ``statements`` marked dirty by ``triggers``
    (index, trigger), or None when no trigger can skip (see the module docstring).  ``program``:
    every trigger of the program; ``deferred``: every deferred target.  Pure; O(size of the
    statements and triggers)."""
    decl = {m.name: m for m in maps}
    own = frozenset(s.target.name for s in statements)
    r = _Reads(decl, own, deferred - own)
    for s in statements:
        r.visit(s.expr, {})
    if not r.ok or not r.cuts:
        return None
    guards = []
    for ti, t in triggers:
        tests: set[tuple[str, int]] = set()
        ok = True
        for s in t.statements:
            name = s.target.name
            if name in own or name not in r.reads:
                continue
            if s.op != "+=":
                ok = False
                break
            for read in r.reads[name]:
                opts = sorted((p, c) for p, c in read if s.target.keys[p] in t.args)
                if not opts:
                    ok = False
                    break
                p, c = opts[0]
                tests.add((s.target.keys[p], c))
            if not ok:
                break
        if ok and tests:
            guards.append(Guard(ti, tuple(sorted(tests, key=lambda x: (t.args.index(x[0]), x[1])))))
    # a stored cut is current only if every trigger writing its map marks this group (4.): else
    # another group's events move it unseen, and the guards comparing with it go
    marking = {ti for ti, _ in triggers}
    writers = {name: {ti for ti, t in enumerate(program) if any(s.target.name == name for s in t.statements)}
               for name in {cut.map for cut in r.cuts}}
    current = {c for c, cut in enumerate(r.cuts) if writers[cut.map] <= marking}
    guards = [g for g in guards if all(c in current for _, c in g.tests)]
    if not guards:
        return None
    used = sorted({c for g in guards for _, c in g.tests})   # only the cuts some guard compares with are stored
    index = {c: i for i, c in enumerate(used)}
    return GroupGuards(tuple(r.cuts[c] for c in used),
                       tuple(Guard(g.trigger, tuple((a, index[c]) for a, c in g.tests)) for g in guards))
