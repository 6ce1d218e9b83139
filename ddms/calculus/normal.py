"""Normal form: multiply calculus expressions out into terms, and simplify terms.

``expand`` turns a product/sum expression into a list of :class:`Term` (sums distributed over
products, constants folded into the coefficient, relation atoms separated from other factors).
``unify`` removes equalities between variables by renaming (``b2.broker_id = b1.broker_id`` makes
the inner relation atom read the outer variable, so the equality becomes a map key), and
``simplify_term`` folds comparisons decided by their syntax (``{x > x}`` is 0; ``{x = x}`` is 1
unless ``x`` can be NULL: then it is the test "x is not NULL").  Pure functions;
cost linear in the size of the result (which can be exponential in nested sums: ``expand`` stops
at ``MAX_TERMS``).
"""

from __future__ import annotations

from ddms.calculus.ir import Exists, ExtremeAgg, Rel, Term, nullable, substitute_term
from ddms.errors import SqlError
from ddms.m3.ir import Add, AggSum, Cmp, Const, Div, Expr, Func, Lift, Mod, Mul, Neg, Var

MAX_TERMS = 4096
"""Budget of terms one expansion may produce (a product of k sums of 2 terms has 2**k terms)."""


def expand(e: Expr) -> list[Term]:
    """Distribute products over sums: ``e`` as a list of terms (empty list = 0)."""
    match e:
        case Const(v):
            return [] if v == 0.0 else [Term(float(v), (), ())]
        case Rel():
            return [Term(1.0, (e,), ())]
        case Add(ts):
            out: list[Term] = []
            for t in ts:
                out += expand(t)
            check_budget(out)
            return out
        case Neg(x):
            return [Term(-t.coef, t.atoms, t.factors) for t in expand(x)]
        case Mul(fs):
            acc = [Term(1.0, (), ())]
            for f in fs:
                part = expand(f)
                acc = [Term(a.coef * b.coef, a.atoms + b.atoms, a.factors + b.factors) for a in acc for b in part]
                check_budget(acc)
                if not acc:
                    return []
            return acc
    # Var, Cmp, Div, AggSum, Lift, MapRef, Extreme, Exists, ExtremeAgg: an opaque factor
    return [Term(1.0, (), (e,))]


def check_budget(terms: list[Term]) -> None:
    """Raise when a multiplication produced more than ``MAX_TERMS`` terms."""
    if len(terms) > MAX_TERMS:
        raise SqlError(f"the query multiplies out into more than {MAX_TERMS} terms (too many ORs or sums of "
                       "products); simplify the conditions")


def unify(t: Term, local: set[str], keep: set[str]) -> Term:
    """Replace each equality ``{x = y}`` between variables by a renaming, when one side is a
    variable of this query level (``local``) that need not be kept (``keep``: output and outer
    variables are the representatives).  Repeats until no such equality is left."""
    while True:
        for i, f in enumerate(t.factors):
            if isinstance(f, Cmp) and f.op == "=" and isinstance(f.left, Var) and isinstance(f.right, Var):
                x, y = f.left.name, f.right.name
                rest = t.factors[:i] + t.factors[i + 1:]
                if x == y:
                    t = Term(t.coef, t.atoms, rest)
                    break
                if y in local and y not in keep:
                    t = substitute_term(Term(t.coef, t.atoms, rest), {y: x})
                    break
                if x in local and x not in keep:
                    t = substitute_term(Term(t.coef, t.atoms, rest), {x: y})
                    break
        else:
            return t


def simplify_term(t: Term) -> Term | None:
    """Fold syntactically decided comparisons; None when the term is 0."""
    out: list[Expr] = []
    coef = t.coef
    for f in t.factors:
        f = simplify(f)
        if isinstance(f, Const):
            coef *= f.value
            if coef == 0.0:
                return None
            continue
        out.append(f)
    if coef == 0.0:
        return None
    return Term(coef, t.atoms, tuple(out))


def simplify(e: Expr) -> Expr:
    match e:
        case Cmp(op, a, b):
            a, b = simplify(a), simplify(b)
            if a == b and not nullable(a):
                return Const(1.0 if op in ("=", "<=", ">=") else 0.0)
            if isinstance(a, Const) and isinstance(b, Const):
                x, y = a.value, b.value
                ok = {"=": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
                return Const(1.0 if ok else 0.0)
            return Cmp(op, a, b)
        case Add(ts):
            return Add(tuple(simplify(x) for x in ts))
        case Mul(fs):
            return Mul(tuple(simplify(x) for x in fs))
        case Neg(x):
            return Neg(simplify(x))
        case Div(a, b):
            return Div(simplify(a), simplify(b))
        case Mod(a, b):
            return Mod(simplify(a), simplify(b))
        case Func(name, args):
            return Func(name, tuple(simplify(a) for a in args))
        case AggSum(g, x):
            return AggSum(g, simplify(x))
        case Lift(v, x):
            return Lift(v, simplify(x))
        case Exists(g, x):
            return Exists(g, simplify(x))
        case ExtremeAgg(kind, v, x, n, rows):
            return ExtremeAgg(kind, v, simplify(x), n, rows)
    return e


def merge_terms(terms: list[Term]) -> list[Term]:
    """Add up the coefficients of identical terms; drop zeros (keeps first-seen order)."""
    acc: dict[tuple, float] = {}
    for t in terms:
        k = (t.atoms, t.factors)
        acc[k] = acc.get(k, 0.0) + t.coef
    return [Term(c, a, f) for (a, f), c in acc.items() if c != 0.0]
