"""Choose range-cumulative (ORDERED) maps: the pass that turns inequality loops into O(log n).

A sum over a map slice restricted by an inequality on one of its keys,

    AggSum(g, M[.., q, ..] * {lin(q, x) op c})      (q a loop variable, the rest bound)

is rewritten with the comparison solved for ``q`` (``{a_p - b_p > 1000}`` -> ``{a_p > 1000 + b_p}``)
and ``M`` is declared ORDERED with ``q`` moved to its last key, so the backend answers it with one
range-sum over a B+-tree.  When such a range sum compares with the key ``p`` of an outer map
(``AggSum(A[p] * {X > AggSum(B[q] * {q > p})})``, VWAP's shape), the outer map is ordered on
``p`` too: the backend then finds the threshold by one descent.  A map read by ``Max/Min`` over
one key (SQL ``MAX``/``MIN``: counts per value) is ordered on that key: the extreme is the
tree's last/first key, O(log n) under deletes.  A test ``{q = e}`` of a loop key against a value
computable before the loop (``price = (SELECT MAX(price) ...)``) becomes the lift ``(q ^= e)``:
one probe instead of a pass over the map; a threshold sum behind such lifts (the orders at a top-N's
cut price) moves inside them, so it is one threshold search in the lifted slice's tree.  A map wanted ordered on two
different keys keeps the first; the other reads fall back to loops (correct, O(slice)).

Pure: Program -> Program (plus the list of choices made, for ``ddms compile``).
"""

from __future__ import annotations

from dataclasses import replace

from ddms.calculus.ir import expr_vars
from ddms.m3.ir import (
    Add,
    AggSum,
    Cmp,
    Const,
    Div,
    Expr,
    Extreme,
    Func,
    Lift,
    MapRef,
    Mod,
    Mul,
    Neg,
    Program,
    Statement,
    Trigger,
    Var,
    map_reads,
)
from ddms.m3.ir import children as m3_children

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}
_RANGE = ("<", "<=", ">", ">=")


def isolate(c: Cmp, q: str) -> Cmp | None:
    """``c`` rewritten as ``{q op x}`` when ``c`` is linear in ``q`` with coefficient +-1 and
    ``x`` does not mention ``q``; else None."""
    if c.op not in _RANGE:
        return None
    # move everything to the left: left - right op 0
    terms = _linear_terms(c.left, 1.0) + _linear_terms(c.right, -1.0)
    if terms is None:
        return None
    coef = 0.0
    rest: list[Expr] = []
    for k, e in terms:
        if e == Var(q):
            coef += k
        elif q in expr_vars(e):
            return None
        else:
            rest.append(e if k == 1.0 else Neg(e) if k == -1.0 else Mul((Const(k), e)))
    if coef not in (1.0, -1.0):
        return None
    # coef*q + sum(rest) op 0  ->  q op -sum(rest)  (coef 1)  or  q flip(op) sum(rest)  (coef -1)
    if not rest:
        bound: Expr = Const(0.0)
    else:
        s = rest[0] if len(rest) == 1 else Add(tuple(rest))
        bound = Neg(s) if coef == 1.0 else s
    op = c.op if coef == 1.0 else _FLIP[c.op]
    return Cmp(op, Var(q), _fold_neg(bound))


def _fold_neg(e: Expr) -> Expr:
    match e:
        case Neg(Neg(x)):
            return _fold_neg(x)
        case Neg(Add(ts)):
            return Add(tuple(_fold_neg(Neg(t)) for t in ts))
        case Neg(Const(v)):
            return Const(-v)
    return e


def _linear_terms(e: Expr, k: float) -> list[tuple[float, Expr]] | None:
    match e:
        case Add(ts):
            out: list[tuple[float, Expr]] = []
            for t in ts:
                sub = _linear_terms(t, k)
                if sub is None:
                    return None
                out += sub
            return out
        case Neg(x):
            return _linear_terms(x, -k)
        case Mul(fs) if len(fs) == 2 and _const(fs[0]) is not None:
            return _linear_terms(fs[1], k * _const(fs[0]))
        case Mul(fs) if len(fs) == 2 and _const(fs[1]) is not None:
            return _linear_terms(fs[0], k * _const(fs[1]))
    return [(k, e)]


def _const(e: Expr) -> float | None:
    match e:
        case Const(v):
            return float(v)
        case Neg(x):
            c = _const(x)
            return None if c is None else -c
    return None


def _linear_form(e: Expr) -> tuple[dict[Expr, float], float] | None:
    """``e`` as (non-constant part: term -> coefficient, constant), or None."""
    terms = _linear_terms(e, 1.0)
    if terms is None:
        return None
    parts: dict[Expr, float] = {}
    const = 0.0
    for k, t in terms:
        c = _const(t)
        if c is not None:
            const += k * c
        else:
            parts[t] = parts.get(t, 0.0) + k
    return {t: c for t, c in parts.items() if c != 0.0}, const


def empty_range(cmps: list[Cmp]) -> bool:
    """True when comparisons ``{q op x}`` on one variable ``q`` admit no value: a lower and an
    upper bound whose difference is a constant (``q > P + 1000`` and ``q < P - 1000``)."""
    lows = [c for c in cmps if c.op in (">", ">=")]
    highs = [c for c in cmps if c.op in ("<", "<=")]
    for lo in lows:
        for hi in highs:
            a, b = _linear_form(lo.right), _linear_form(hi.right)
            if a is None or b is None or a[0] != b[0]:
                continue
            gap = b[1] - a[1]  # hi bound - lo bound
            if gap < 0 or (gap == 0 and (lo.op == ">" or hi.op == "<")):
                return True
    return False


class _Chooser:
    def __init__(self, program: Program) -> None:
        self.p = program
        self.want: dict[str, int] = {}  # map -> key position to order on
        self.notes: list[str] = []

    def wish(self, ref: MapRef, q: str, why: str) -> None:
        pos = ref.keys.index(q)
        if ref.name not in self.want:
            self.want[ref.name] = pos
            self.notes.append(f"{ref.name} ORDERED on key {pos} ({why})")

    def range_shape(self, body: Expr, bound: frozenset[str]) -> Expr | None:
        """``M[..q..] * {.. q ..}`` -> ``M[..q..] * {q op x}`` (and a wish to order M on q)."""
        if not isinstance(body, Mul) or len(body.factors) != 2:
            return None
        ref, c = body.factors
        if not isinstance(ref, MapRef) or not isinstance(c, Cmp):
            return None
        loops = [k for k in ref.keys if k not in bound]
        if len(loops) != 1 or ref.keys.count(loops[0]) != 1:
            return None
        q = loops[0]
        iso = isolate(c, q)
        if iso is None:
            return None
        self.wish(ref, q, "range sum")
        return Mul((ref, iso))

    def threshold(self, body: Expr, bound: frozenset[str]) -> None:
        """``A[..p] * {X cmp AggSum([], B[..q] * {q op p})}``: order A on p as well."""
        if not isinstance(body, Mul) or len(body.factors) != 2:
            return
        ref, c = body.factors
        if not isinstance(ref, MapRef) or not isinstance(c, Cmp):
            return
        loops = [k for k in ref.keys if k not in bound]
        if len(loops) != 1:
            return
        p = loops[0]
        for side in (c.left, c.right):
            if isinstance(side, AggSum) and isinstance(side.expr, Mul) and len(side.expr.factors) == 2:
                inner_ref, inner_c = side.expr.factors
                if isinstance(inner_ref, MapRef) and isinstance(inner_c, Cmp) and inner_c.right == Var(p):
                    self.wish(ref, p, "threshold search")


def _threshold_after_lifts(g: tuple[str, ...], body: Expr, bound: frozenset[str]
                           ) -> tuple[tuple[Expr, ...], AggSum, frozenset[str]] | None:
    """``AggSum(g, (x ^= e).. * A[.., p] * {X cmp AggSum([], B[.., q] * {q op p})})``, the one key
    ``p`` of ``A`` not bound once the lifts have run, as (the lifts, ``AggSum(g', A * {..})``,
    the variables bound inside): the sum over ``p`` moves inside the lifts, where it is a
    threshold sum (VWAP's shape) in the trees of the lifted slice, instead of a pass over the
    slice.  The cut level of a top-N over single orders: the orders at the cut price whose
    predecessors by id are fewer than the rank left, O(log n).  Exact: ``p`` is not a group
    variable and nothing outside the moved factors reads it.  O(size of body)."""
    if not isinstance(body, Mul) or len(body.factors) < 3:
        return None
    *lifts, ref, c = body.factors
    if not lifts or not all(isinstance(f, Lift) for f in lifts) or not isinstance(ref, MapRef) \
            or not isinstance(c, Cmp):
        return None
    inner_bound = bound | {f.var for f in lifts if isinstance(f, Lift)}
    loops = [k for k in ref.keys if k not in inner_bound]
    if len(loops) != 1 or ref.keys.count(loops[0]) != 1 or loops[0] in g:
        return None
    p = loops[0]
    sides = [s for s in (c.left, c.right) if isinstance(s, AggSum) and isinstance(s.expr, Mul)
             and len(s.expr.factors) == 2 and isinstance(s.expr.factors[1], Cmp) and s.expr.factors[1].right == Var(p)]
    other = c.right if sides and sides[0] is c.left else c.left
    if len(sides) != 1 or p in _free_reads(other) or not _free_reads(other) - {p} <= inner_bound | _sum_vars(other):
        return None
    group = tuple(x for x in g if x in ref.keys)
    if not set(group) <= inner_bound:
        return None
    return tuple(lifts), AggSum(group, Mul((ref, c))), inner_bound


def _sum_vars(e: Expr) -> set[str]:
    """The variables summed over inside ``e`` (keys of map reads under an ``AggSum``).  O(size)."""
    out: set[str] = set()
    for x in _walk(e):
        if isinstance(x, AggSum):
            out |= {k for y in _walk(x.expr) if isinstance(y, MapRef) for k in y.keys} - set(x.group)
    return out


def _walk(e: Expr):
    yield e
    for c in m3_children(e):
        yield from _walk(c)


def _binds(f: Expr) -> set[str]:
    match f:
        case Div(a, _) | Mod(a, _):
            return _binds(a)
        case Func(_, args):
            return _binds(args[0])
        case Mul(fs):
            return set().union(*(_binds(x) for x in fs))
        case MapRef(_, keys):
            return set(keys)
        case AggSum(g, _):
            return set(g)
        case Lift(v, _):
            return {v}
        case Extreme(_, v, _):
            return {v}
    return set()


def choose_orders(program: Program) -> tuple[Program, list[str]]:
    ch = _Chooser(program)
    triggers = []
    for t in program.triggers:
        body = []
        for s in t.statements:
            body.append(Statement(s.target, s.op, _deep(ch, s.expr, frozenset(t.args))))
        triggers.append(Trigger(t.sign, t.stream, t.args, tuple(body)))
    perms = {name: pos for name, pos in ch.want.items()}
    maps = []
    for m in program.maps:
        if m.name in perms and len(m.keys) > 0:
            pos = perms[m.name]
            keys = m.keys[:pos] + m.keys[pos + 1:] + (m.keys[pos],)
            maps.append(replace(m, keys=keys, ordered=True))
        else:
            maps.append(m)

    def fix(e: Expr) -> Expr:
        match e:
            case MapRef(name, keys) if name in perms:
                pos = perms[name]
                return MapRef(name, keys[:pos] + keys[pos + 1:] + (keys[pos],))
            case Add(ts):
                return Add(tuple(fix(x) for x in ts))
            case Mul(fs):
                return Mul(tuple(fix(x) for x in fs))
            case Neg(x):
                return Neg(fix(x))
            case Div(a, b):
                return Div(fix(a), fix(b))
            case Mod(a, b):
                return Mod(fix(a), fix(b))
            case Func(name, args):
                return Func(name, tuple(fix(a) for a in args))
            case Cmp(op, a, b):
                return Cmp(op, fix(a), fix(b))
            case AggSum(g, x):
                return AggSum(g, fix(x))
            case Lift(v, x):
                return Lift(v, fix(x))
            case Extreme(k, v, ref, n, rows):
                return Extreme(k, v, fix(ref), n, rows)
        return e
    triggers = [Trigger(t.sign, t.stream, t.args,
                        tuple(Statement(fix(s.target), s.op, fix(s.expr)) for s in t.statements))
                for t in triggers]
    ranked = ranked_rows(program)
    maps = [replace(m, ordered=True) if m.name in ranked else m for m in maps]
    notes = ch.notes + [f"{name} ORDERED: the rows of view {view} are read by rank (its n first rows, one "
                        "select by rank each per ORDER BY column: O(n log g) a read, not a sort of its g groups)"
                        for name, view in ranked.items()]
    return replace(program, maps=tuple(maps), triggers=tuple(triggers)), notes


def ranked_rows(program: Program) -> dict[str, str]:
    """The maps that read views of rows by rank (:attr:`ddms.m3.ir.Limit.ranks`: row counts
    per partition and ORDER BY prefix), to the view's name: each is ordered on its last key, so
    the rows in order are walked down one tree per level, n selects by rank instead of a sort of
    every group.  Such a map is the view's own (no statement reads it), so ordering it changes no
    other statement; it costs a descent per event, not a hash update."""
    read = {r for t in program.triggers for st in t.statements for r in map_reads(st.expr)}
    read |= {r for m in program.maps if m.init is not None for r in map_reads(m.init)}
    out: dict[str, str] = {}
    for q in program.queries:
        ranks = q.limit.ranks if q.limit is not None else ()
        if not any(m in read for m in ranks):   # (else the view's reads sort its groups)
            out.update(dict.fromkeys(ranks, q.name))
    return out


def _deep(ch: _Chooser, e: Expr, bound: frozenset[str]) -> Expr:
    """Rewrite bottom-up: inner aggregates (inside comparisons) first, with the variables an
    enclosing loop binds counted as bound."""
    match e:
        case AggSum(g, body):
            if isinstance(body, Mul):
                body = Mul(tuple(_lift_equalities(list(body.factors), bound)))
            body = _deep_body(ch, body, bound)
            if _provably_empty(body, bound):
                return Const(0.0)
            pushed = _threshold_after_lifts(g, body, bound)
            if pushed is not None:
                lifts, inner, inner_bound = pushed
                return AggSum(g, Mul(lifts + (_deep(ch, inner, inner_bound),)))
            shaped = ch.range_shape(body, bound)
            if shaped is not None:
                body = shaped
            ch.threshold(body, bound)
            return AggSum(g, body)
    return _deep_body(ch, e, bound)


def _deep_body(ch: _Chooser, e: Expr, bound: frozenset[str]) -> Expr:
    match e:
        case Mul(fs):
            out = []
            b = set(bound)
            for f in fs:
                out.append(_deep(ch, f, frozenset(b)))
                b |= _binds(f)
            return Mul(tuple(out))
        case Add(ts):
            return Add(tuple(_deep(ch, t, bound) for t in ts))
        case Neg(x):
            return Neg(_deep(ch, x, bound))
        case Div(a, b):
            return Div(_deep(ch, a, bound), _deep(ch, b, bound))
        case Mod(a, b):
            return Mod(_deep(ch, a, bound), _deep(ch, b, bound))
        case Func(name, args):
            return Func(name, tuple(_deep(ch, a, bound) for a in args))
        case Cmp(op, a, b):
            return Cmp(op, _deep(ch, a, bound), _deep(ch, b, bound))
        case Lift(v, x):
            return Lift(v, _deep(ch, x, bound))
        case AggSum():
            return _deep(ch, e, bound)
        case Extreme(_, v, ref, n):
            # MIN/MAX: the extreme key of a slice is the first/last key of its range tree (the
            # n-th key of a top-N's cut: a select by rank in that tree)
            if ref.keys.count(v) == 1 and all(k in bound for k in ref.keys if k != v):
                ch.wish(ref, v, "tree extreme" if n == 1 else "select by rank")
            return e
    return e


def _lift_equalities(fs: list[Expr], bound: frozenset[str]) -> list[Expr]:
    """Factors of one product with each test ``{x = e}`` of a loop variable ``x`` against a value
    ``e`` computable before the loops (it reads bound variables only) turned into the lift
    ``(x ^= e)``, placed first: the maps keyed by ``x`` are then read at one key instead of
    looped over (``price = (SELECT MAX(price) ...)``: one probe, not a pass over the levels).
    Exact: a NULL ``e`` binds ``x`` to NaN, a key no map holds, as ``{x = NULL}`` is false.
    O(size of the factors)."""
    lifts: list[Expr] = []
    rest: list[Expr] = []
    for f in fs:
        if isinstance(f, Cmp) and f.op == "=":
            for x, e in ((f.left, f.right), (f.right, f.left)):
                if isinstance(x, Var) and x.name not in bound and _free_reads(e) <= bound \
                        and x.name not in _free_reads(e) and all(not isinstance(g, Lift) or g.var != x.name
                                                                 for g in lifts):
                    lifts.append(Lift(x.name, e))
                    break
            else:
                rest.append(f)
            continue
        rest.append(f)
    return lifts + rest


def _free_reads(e: Expr) -> set[str]:
    """The variables ``e`` reads from outside (conservative: a loop variable of an inner sum
    counts too).  O(size of e)."""
    match e:
        case Var(n):
            return {n}
        case MapRef(_, keys):
            return set(keys)
        case Extreme(_, v, ref):
            return set(ref.keys) - {v}
        case Lift(v, x):
            return _free_reads(x) | {v}
    return set().union(*(_free_reads(c) for c in m3_children(e))) if m3_children(e) else set()


def _provably_empty(body: Expr, bound: frozenset[str]) -> bool:
    """A map slice times two or more comparisons on its one loop key that no value satisfies."""
    if not isinstance(body, Mul) or not isinstance(body.factors[0], MapRef):
        return False
    ref = body.factors[0]
    loops = [k for k in ref.keys if k not in bound]
    cmps = [f for f in body.factors[1:] if isinstance(f, Cmp)]
    if len(loops) != 1 or len(cmps) < 2 or len(cmps) != len(body.factors) - 1:
        return False
    iso = [isolate(c, loops[0]) for c in cmps]
    return all(c is not None for c in iso) and empty_range(iso)  # type: ignore[arg-type]
