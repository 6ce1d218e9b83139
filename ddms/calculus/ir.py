"""The calculus: DBToaster's aggregate calculus over base relations, between SQL and M3.

Expressions are the M3 expression nodes (:mod:`ddms.m3.ir`) plus :class:`Rel`, a base relation
atom ``R(x1, ..., xn)`` whose value is the multiplicity of the tuple and whose unbound variables
range over the relation's tuples.  A query is kept in a normal form the compiler works on:

    Query(group, terms)  =  AggSum(group, sum of terms)
    Term(coef, atoms, factors)  =  coef * atom_1 * ... * factor_1 * ...

where ``atoms`` are relation atoms and ``factors`` are products' other members: variables,
comparisons (possibly over nested aggregates, which contain their own ``Rel`` atoms), divisions,
and :class:`Exists`, the rows of a ``GROUP BY`` subquery in FROM, and :class:`ExtremeAgg`, a
``MIN``/``MAX``.  Sums inside factors are
multiplied out by :mod:`ddms.calculus.normal`, so every term is a conjunctive query with a value.
Frozen dataclasses, hashable, usable as dictionary keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from ddms.m3 import ir as m3
from ddms.m3.ir import INT_BITS, Add, AggSum, Cmp, Const, Div, Func, Lift, Mod, Mul, Neg, Var


@dataclass(frozen=True)
class Rel:
    """Base relation atom ``name(vars)``; a variable may repeat (an equality)."""

    name: str
    vars: tuple[str, ...]


@dataclass(frozen=True)
class Exists:
    """The groups of an aggregate: 1 for each binding of ``group`` under which ``body`` (an
    ``AggSum(group, ...)`` counting rows) is nonzero, binding ``group``.  A ``GROUP BY`` subquery
    in FROM contributes one row per non-empty group, so it joins its enclosing query as this
    factor; its aggregate columns are nested aggregates correlated on ``group``.  Materialized as
    ``D[group] / D[group]`` over a map ``D`` of the row counts (``ddms.calculus.materialize``)."""

    group: tuple[str, ...]
    body: Expr


@dataclass(frozen=True)
class ExtremeAgg:
    """SQL ``MAX``/``MIN``: the largest/smallest value ``var`` among the rows of an aggregate.
    ``body`` is ``AggSum(group + (var,), ...)`` counting the rows at each value ``var`` of the
    argument (per binding of ``group``, the variables of an enclosing query it is correlated
    on, which are bound where it is read); the aggregate is NaN (SQL NULL) when no row is
    counted.  Materialized as ``Extreme(kind, var, C[group..., var])`` over a map ``C`` of those
    counts, maintained by deltas and ORDERED on ``var`` (``ddms.calculus.order``), so the extreme
    is one descent of a range tree, O(log n), under inserts and deletes alike.

    With ``n`` above 1 it is the ``n``-th largest/smallest value (the last when fewer than ``n``
    values are counted): the cut of a top-N, ``Extreme(kind, var, C[..], n)``, a select by rank
    in the same tree, O(log n)."""

    kind: str   # "max" or "min"
    var: str
    body: m3.AggSum
    n: int = 1
    rows: bool = False   # the n-th ROW's value (each value counted as often as its rows), not the n-th value


Expr = m3.Expr | Rel | Exists | ExtremeAgg


@dataclass(frozen=True)
class Term:
    coef: float
    atoms: tuple[Rel, ...]
    factors: tuple[Expr, ...]


@dataclass(frozen=True)
class Query:
    group: tuple[str, ...]
    terms: tuple[Term, ...]


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Rel):
        return ()
    if isinstance(e, Exists | ExtremeAgg):
        return (e.body,)
    return m3.children(e)


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """:func:`ddms.m3.ir.with_children`, also for an Exists' body."""
    if isinstance(e, Exists):
        return Exists(e.group, kids[0])
    if isinstance(e, ExtremeAgg):
        return ExtremeAgg(e.kind, e.var, kids[0], e.n, e.rows)
    return m3.with_children(e, kids)


def walk(e: Expr):
    yield e
    for c in children(e):
        yield from walk(c)


def node_vars(e: Expr) -> tuple[str, ...]:
    """The variables node ``e`` itself names (:func:`ddms.m3.ir.node_vars`, plus a relation
    atom's and an Exists' variables).  O(1)."""
    if isinstance(e, Rel):
        return e.vars
    if isinstance(e, Exists):
        return e.group
    if isinstance(e, ExtremeAgg):
        return (e.var,)
    return m3.node_vars(e)


def expr_vars(e: Expr) -> set[str]:
    """Every variable named in ``e`` (bound or not)."""
    return {v for x in walk(e) for v in node_vars(x)}


def has_rel(e: Expr) -> bool:
    return any(isinstance(x, Rel) for x in walk(e))


def nullable(e: Expr) -> bool:
    """Whether ``e`` can be SQL NULL (NaN): a quotient can (``AVG`` over nothing, ``x / 0``),
    and so can arithmetic over one; an aggregate cannot (``SUM`` skips NULL inputs and is 0 over
    nothing), nor can a comparison (NULL compares false); ``x % c`` by a nonzero constant only
    where ``x`` can, and so is ``x / c`` (kept a quotient inside a function's argument, where the
    division must be DuckDB's); an integer CAST can (NULL out of its type's range), and NULLIF;
    COALESCE, GREATEST and LEAST only where every argument can.  O(size of e),
    not entering aggregates."""
    match e:
        case Mod(a, Const(v)) | Div(a, Const(v)) if v != 0.0:
            return nullable(a)
        case Func(name, _) if name in INT_BITS or name == "nullif":
            return True
        case Func("coalesce" | "greatest" | "least", args):   # NULL only where both arguments are
            return all(nullable(a) for a in args)
        case Func("if", (_, a, b)):   # the test is 0 or 1
            return nullable(a) or nullable(b)
        case Div() | Mod() | m3.Extreme() | ExtremeAgg():
            return True
        case AggSum() | Cmp() | Rel() | Exists():
            return False
    return any(nullable(c) for c in children(e))


def term_vars(t: Term) -> set[str]:
    out: set[str] = set()
    for a in t.atoms:
        out.update(a.vars)
    for f in t.factors:
        out |= expr_vars(f)
    return out


def term_expr(t: Term) -> Expr:
    parts: list[Expr] = []
    if t.coef != 1.0 or not (t.atoms or t.factors):
        parts.append(Const(t.coef))
    parts += list(t.atoms) + list(t.factors)
    return parts[0] if len(parts) == 1 else Mul(tuple(parts))


def query_expr(q: Query) -> Expr:
    """The query as one calculus expression ``AggSum(group, t1 + t2 + ...)``."""
    if not q.terms:
        body: Expr = Const(0.0)
    elif len(q.terms) == 1:
        body = term_expr(q.terms[0])
    else:
        body = Add(tuple(term_expr(t) for t in q.terms))
    return AggSum(q.group, body)


def substitute(e: Expr, sub: dict[str, str]) -> Expr:
    """Rename variables (cost O(size))."""
    if not sub:
        return e
    match e:
        case Var(n):
            return Var(sub.get(n, n))
        case Rel(name, vs):
            return Rel(name, tuple(sub.get(v, v) for v in vs))
        case m3.MapRef(name, ks):
            return m3.MapRef(name, tuple(sub.get(k, k) for k in ks))
        case Const():
            return e
        case Add(ts):
            return Add(tuple(substitute(t, sub) for t in ts))
        case Mul(fs):
            return Mul(tuple(substitute(f, sub) for f in fs))
        case Neg(x):
            return Neg(substitute(x, sub))
        case Div(a, b):
            return Div(substitute(a, sub), substitute(b, sub))
        case Mod(a, b):
            return Mod(substitute(a, sub), substitute(b, sub))
        case Func(name, args):
            return Func(name, tuple(substitute(a, sub) for a in args))
        case Cmp(op, a, b):
            return Cmp(op, substitute(a, sub), substitute(b, sub))
        case AggSum(g, x):
            return AggSum(tuple(sub.get(v, v) for v in g), substitute(x, sub))
        case Lift(v, x):
            return Lift(sub.get(v, v), substitute(x, sub))
        case m3.Extreme(kind, v, ref, n, rows):
            return m3.Extreme(kind, sub.get(v, v), substitute(ref, sub), n, rows)
        case Exists(g, x):
            return Exists(tuple(sub.get(v, v) for v in g), substitute(x, sub))
        case ExtremeAgg(kind, v, x, n, rows):
            return ExtremeAgg(kind, sub.get(v, v), substitute(x, sub), n, rows)
    raise TypeError(e)


def substitute_term(t: Term, sub: dict[str, str]) -> Term:
    return Term(t.coef, tuple(substitute(a, sub) for a in t.atoms),
                tuple(substitute(f, sub) for f in t.factors))
