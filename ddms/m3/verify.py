"""The IR verifier: every rule a program must satisfy before it is run or compiled.

Run after parsing and after every compiler pass.  Checks names (streams, maps, queries, triggers
are declared once and refer to declared things), arities, and variable binding: with the
left-to-right binding rules of ``ir``, every variable is bound where its value is needed, sums
bind the same variables in every term, and a statement's loop variables are target keys.
Raises :class:`ProgramError` naming the trigger, statement and variable.  Cost: linear.
"""

from __future__ import annotations

import weakref

from ddms.errors import ProgramError
from ddms.m3.ir import (
    FUNCS,
    Add,
    AggSum,
    Cmp,
    Const,
    Div,
    Expr,
    Extreme,
    Func,
    Lift,
    MapDecl,
    MapRef,
    Mod,
    Mul,
    Neg,
    Program,
    Statement,
    Var,
    children,
)


def outputs(e: Expr, bound: frozenset[str], arity: dict[str, int], where: str = "") -> tuple[str, ...]:
    """The variables ``e`` newly binds when evaluated with ``bound`` already bound, in binding
    order.  Raises ProgramError on any binding violation."""

    def fail(msg: str) -> None:
        from ddms.m3.printer import print_expr
        raise ProgramError(f"{where}{msg} in {print_expr(e)}")

    def closed(x: Expr, b: frozenset[str], what: str) -> None:
        out = outputs(x, b, arity, where)
        if out:
            fail(f"{what} must not bind variables, but binds {', '.join(out)}")

    match e:
        case Const():
            return ()
        case Var(name):
            if name not in bound:
                fail(f"variable {name} is used before it is bound")
            return ()
        case MapRef(name, keys):
            if name not in arity:
                fail(f"unknown map {name}")
            if len(keys) != arity[name]:
                fail(f"map {name} has {arity[name]} keys, not {len(keys)}")
            out: list[str] = []
            for k in keys:
                if k not in bound and k not in out:
                    out.append(k)
            return tuple(out)
        case Mul(factors):
            out = []
            b = bound
            for f in factors:
                new = outputs(f, b, arity, where)
                out += new
                b = b | frozenset(new)
            return tuple(out)
        case Add(terms):
            outs = [outputs(t, bound, arity, where) for t in terms]
            if any(set(o) != set(outs[0]) for o in outs):
                fail("terms of a sum bind different variables "
                     + " vs ".join("{" + ", ".join(o) + "}" for o in outs))
            return outs[0]
        case Neg(x):
            return outputs(x, bound, arity, where)
        case Div(num, den) | Mod(num, den):
            out = outputs(num, bound, arity, where)
            closed(den, bound | frozenset(out), "a divisor")
            return out
        case Func(name, args):
            if name not in FUNCS or len(args) not in FUNCS[name]:
                fail(f"unknown function {name.capitalize()} of {len(args)} argument(s)")
            out = outputs(args[0], bound, arity, where)
            for a in args[1:]:
                closed(a, bound | frozenset(out), "a function's precision")
            return out
        case Cmp(_, a, b):
            closed(a, bound, "a comparison operand")
            closed(b, bound, "a comparison operand")
            return ()
        case AggSum(group, x):
            out = outputs(x, bound, arity, where)
            for g in group:
                if g not in bound and g not in out:
                    fail(f"group variable {g} is neither bound nor bound by the aggregated expression")
            return tuple(v for v in out if v in group)
        case Lift(var, x):
            closed(x, bound, "a lifted expression")
            return () if var in bound else (var,)
        case Extreme(_, var, ref):
            if var in bound:
                fail(f"the variable {var} of Max/Min must be unbound")
            out = outputs(ref, bound, arity, where)
            if out != (var,):
                fail(f"Max/Min over {var} must leave exactly {var} unbound in its map reference")
            return ()
    raise ProgramError(f"{where}not an M3 expression: {e!r}")


def verify_statement(s: Statement, bound: frozenset[str], arity: dict[str, int], where: str) -> None:
    target = s.target
    if target.name not in arity:
        raise ProgramError(f"{where}unknown target map {target.name}")
    if len(target.keys) != arity[target.name]:
        raise ProgramError(f"{where}map {target.name} has {arity[target.name]} keys, not {len(target.keys)}")
    # a repeated key variable is allowed: m[P, P] += e writes the diagonal entry (P, P), as the
    # higher-order delta of a self-join keyed by both occurrences' prices does
    out = outputs(s.expr, bound, arity, where)
    for k in target.keys:
        if k not in bound and k not in out:
            raise ProgramError(f"{where}target key {k} is bound neither by the trigger nor by the expression")
    extra = [v for v in out if v not in target.keys]
    if extra:
        raise ProgramError(f"{where}loop variable(s) {', '.join(extra)} are not keys of {target.name}: "
                           "sum them away with AggSum")


def extreme_reads(e: Expr, name: str, bound: frozenset[str], arity: dict[str, int]) -> set[str] | None:
    """The kinds of extreme (``max``/``min``) ``e`` reads one-key map ``name`` by, evaluated with
    ``bound`` bound; None if ``e`` also reads the map otherwise than by a plain extreme
    ``Max(X, M[X])`` or at a bound key (a point read): by a loop, a rank or a row rank.  What
    decides an EXTREME map (``ddms.m3.extremes``).  O(size of e)."""
    kinds: set[str] = set()
    ok = True

    def go(x: Expr, b: frozenset[str]) -> None:
        nonlocal ok
        match x:
            case MapRef(n, keys):
                ok = ok and (n != name or set(keys) <= b)
            case Extreme(kind, var, ref, rank, rows) if ref.name == name:
                ok = ok and rank == 1 and not rows and ref.keys == (var,)
                kinds.add(kind)
            case Extreme():
                pass
            case Mul(factors):
                for f in factors:
                    go(f, b)
                    b = b | frozenset(outputs(f, b, arity))
            case Div(num, den) | Mod(num, den):
                go(num, b)
                go(den, b | frozenset(outputs(num, b, arity)))
            case Func(_, args):
                go(args[0], b)
                for a in args[1:]:
                    go(a, b | frozenset(outputs(args[0], b, arity)))
            case _:
                for c in children(x):
                    go(c, b)
    go(e, bound)
    return kinds if ok else None


def check_extreme(p: Program, m: MapDecl) -> str | None:
    """Why map ``m`` (``m.extreme`` set) cannot be kept for that extreme alone, or None if it can:
    one key, not ORDERED, no initial value, no query exposes it, written only by ``+=``, read only
    by that extreme and at bound keys (:func:`extreme_reads`) in the triggers.  O(program size)."""
    if m.extreme not in ("max", "min", "both"):
        return f"{m.extreme!r} is no extreme"
    if len(m.keys) != 1 or m.ordered or m.init is not None:
        return "it must have one key, no ORDERED and no initial value"
    if any(m.name in q.exposed for q in p.queries):
        return "a query exposes it"
    arity = {d.name: len(d.keys) for d in p.maps}
    reads = []   # (initial values are read on an empty database, by the interpreter: not here)
    for t in p.triggers:
        for s in t.statements:
            if s.target.name == m.name and s.op != "+=":
                return f"ON {t.sign} {t.stream} assigns it with :="
            reads.append(extreme_reads(s.expr, m.name, frozenset(t.args), arity))
    if any(r is None for r in reads):
        return "it is read otherwise than by its extreme or at bound keys"
    other = set().union(*reads) - set(m.extremes)
    return f"it is also read by its {', '.join(sorted(other))}" if other else None


def _check_limit(q, arity: dict[str, int]) -> None:
    """A query's row cut names a map of row counts with the query's keys, and columns of its rows."""
    lim = q.limit
    keys = arity[q.map]
    width = keys + (0 if lim.keys_only else len(q.maps))
    if lim.rows not in arity or arity[lim.rows] != keys or not keys:
        raise ProgramError(f"query {q.name}: ROWS OF names a map with the query's {keys} keys (its row counts)")
    if lim.keys_only and q.map != lim.rows:
        raise ProgramError(f"query {q.name}: a KEYS query's map is its row counts, {lim.rows}")
    if any(not 0 <= i < keys for i in lim.partition) or any(not 0 <= i < width for i, _ in lim.order):
        raise ProgramError(f"query {q.name}: PARTITION BY takes key columns, ORDER BY columns of the row "
                           f"(0..{width - 1})")
    if lim.ranks and (len(lim.ranks) != len(lim.order) or any(i >= keys for i, _ in lim.order)
                      or sorted([*lim.partition, *(i for i, _ in lim.order)]) != list(range(keys))
                      or any(arity.get(m) != len(lim.partition) + j + 1 for j, m in enumerate(lim.ranks))):
        raise ProgramError(f"query {q.name}: RANKED BY names one map per ORDER BY column (all of them keys, with "
                           "the PARTITION BY columns every key), map j keyed by the partition and j + 1 of them")
    if (lim.n is not None and lim.n < 0) or lim.offset < 0:
        raise ProgramError(f"query {q.name}: LIMIT and OFFSET are whole numbers")


_VERIFIED: dict[int, weakref.ref] = {}
"""id -> a weak reference to a Program that passed :func:`verify`.  A Program is frozen, so its
verdict cannot change: every Interpreter and Engine of the same object (hypothesis tests build
one per example; ``check_extreme`` alone is O(maps x program)) skips the walk.  An entry leaves
with its program (the reference's callback), so a new object reusing the id is verified afresh."""


def verify(p: Program) -> Program:
    """Check ``p`` and return it unchanged (so passes can be chained); raise ProgramError.
    Cost: O(program size) (O(program) per EXTREME map), the first time for a given object; a
    dict look-up afterwards (:data:`_VERIFIED`)."""
    key = id(p)
    known = _VERIFIED.get(key)
    if known is not None and known() is p:
        return p
    _verify(p)
    _VERIFIED[key] = weakref.ref(p, lambda _ref, key=key: _VERIFIED.pop(key, None))
    return p


def _verify(p: Program) -> None:
    seen: set[str] = set()
    for kind, names in (("stream", [s.name for s in p.streams]), ("map", [m.name for m in p.maps]),
                        ("query", [q.name for q in p.queries])):
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ProgramError(f"{kind} {sorted(dup)[0]} is declared twice")
        seen |= set(names)
    arity = {m.name: len(m.keys) for m in p.maps}
    for m in p.maps:
        if m.ordered and not m.keys:
            raise ProgramError(f"map {m.name} is ORDERED but has no key to order by")
        if m.extreme is not None:
            why = check_extreme(p, m)
            if why is not None:
                raise ProgramError(f"map {m.name} is declared EXTREME {' '.join(k.upper() for k in m.extremes)}, "
                                   f"but {why}")
        if len({c.name for c in m.keys}) != len(m.keys):
            raise ProgramError(f"map {m.name} repeats a key column name")
        if m.init is not None:
            if m.keys:
                raise ProgramError(f"map {m.name}: only maps without keys take an initial value")
            outputs(m.init, frozenset(), arity, f"initial value of {m.name}: ")
    for q in p.queries:
        for m in (q.map, *q.maps):
            if m not in arity:
                raise ProgramError(f"query {q.name} refers to unknown map {m}")
        if q.columns:
            names = [c for c, _ in q.columns]
            if len(set(names)) != len(names) or q.map != q.columns[0][1]:
                raise ProgramError(f"query {q.name}: column names repeat, or its map is not its first column's")
            if any(arity[m] != len(q.keys) for m in q.maps):
                raise ProgramError(f"query {q.name}: every column map must have the query's {len(q.keys)} keys")
        if q.limit is not None:
            _check_limit(q, arity)
    streams = {s.name: s for s in p.streams}
    events: set[tuple[str, str]] = set()
    for t in p.triggers:
        where = f"ON {t.sign} {t.stream}: "
        if t.stream not in streams:
            raise ProgramError(f"{where}unknown stream {t.stream}")
        if (t.sign, t.stream) in events:
            raise ProgramError(f"{where}a second trigger for the same event")
        events.add((t.sign, t.stream))
        if len(t.args) != len(streams[t.stream].columns):
            raise ProgramError(f"{where}stream {t.stream} has {len(streams[t.stream].columns)} columns, "
                               f"the trigger names {len(t.args)}")
        if len(set(t.args)) != len(t.args):
            raise ProgramError(f"{where}trigger arguments repeat a name")
        bound = frozenset(t.args)
        for i, s in enumerate(t.statements, 1):
            verify_statement(s, bound, arity, f"{where}statement {i}: ")
