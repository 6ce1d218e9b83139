"""Calculus -> M3 trigger program: recursive delta compilation with materialized maps.

For every view (:class:`ddms.sql.translate.ViewDef`):

* a **linear** aggregate (no aggregate nested in a condition) becomes a map maintained by deltas:
  for each event the delta query (:mod:`ddms.calculus.delta`) is *materialized*: the relation
  atoms left in it are grouped into connected components, each component becomes an auxiliary
  map keyed by the variables it shares with the rest (event arguments, conditions, output keys),
  and that map is compiled the same way, recursively, until deltas read no relation (each level
  has fewer atoms, so this terminates);
* a **nested** aggregate (VWAP's ``0.25 * total > volume above my price``) has no useful delta:
  its body is materialized the same way (maps over the components, nested aggregates recursively)
  and the view is re-evaluated from those maps after each event that changes one of them
  (``V := ...``).  The re-evaluation reads the maps, never the base relations; comparisons of a
  map key with a bound value become O(log n) range sums and threshold searches once
  :mod:`ddms.calculus.order` makes those maps ORDERED;
* an **aggregate subquery in FROM** (``Exists(g, count)`` and aggregate columns correlated on
  ``g``, see :mod:`ddms.sql.translate`) is a nested aggregate too: its groups become a map ``D[g]``
  of row counts (maintained by deltas, or itself re-evaluated when its WHERE nests aggregates),
  read as ``D[g] / D[g]`` (1 per non-empty group, binding ``g``), and each aggregate column is
  materialized with ``g`` bound, so the enclosing query is re-evaluated by one pass over the
  groups with a few map reads (range sums, threshold searches) per group -- or for the one group
  an event can change, when it changed the maps read only at that group (:func:`_narrow`).

* a **MIN/MAX** (:class:`ddms.calculus.ir.ExtremeAgg`) becomes a map of row counts per value
  (and per correlated outer key), maintained by deltas, read as ``Max(v, C[.., v])``; the order
  pass makes ``C`` ORDERED on ``v``, so the extreme is a tree's first/last key, O(log n);
* a view with several outputs gets one map per output column (``VIEW__COLUMN``), exposed as one
  query with columns.

Products of factors that share no loop variable are *factorized* into separate ``AggSum``s
(``sum_a sum_b f(a) g(b) = (sum_a f(a)) (sum_b g(b))``), and maps with the same definition (up to
variable names) are created once.  Budgets: ``MAX_MAPS`` maps per program.

Pure apart from the compiler's own tables; the result is verified by ``ddms.m3.verify``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ddms.calculus.delta import delta
from ddms.calculus.ir import (
    Exists,
    ExtremeAgg,
    Query,
    Rel,
    Term,
    children,
    expr_vars,
    has_rel,
    node_vars,
    nullable,
    substitute,
    term_vars,
    walk,
    with_children,
)
from ddms.calculus.normal import expand, merge_terms, simplify, simplify_term
from ddms.errors import SqlError
from ddms.m3.ir import (
    Add,
    AggSum,
    Cmp,
    Column,
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
    Stream,
    Trigger,
    Var,
)
from ddms.m3.ir import (
    Query as M3Query,
)
from ddms.sql.translate import ViewDef

MAX_MAPS = 500


@dataclass
class MapInfo:
    name: str
    keys: tuple[str, ...]  # canonical key variables K0, K1, ...
    query: Query  # canonical definition
    streams: frozenset[str]
    level: int  # most atoms in one term: a delta reads only maps of a lower level
    kind: str  # "delta" (maintained by += deltas) or "reeval" (:= after each relevant event)
    note: str = ""


@dataclass
class Compiled:
    program: Program
    maps: list[MapInfo]


class Compiler:
    def __init__(self, streams: tuple[Stream, ...]) -> None:
        self.streams = {s.name: s for s in streams}
        self.args = {s.name: tuple(f"{s.name}_{c.name}" for c in s.columns) for s in streams}
        self.maps: dict[str, MapInfo] = {}
        self.by_canon: dict[tuple, str] = {}
        self.stmts: list[tuple[str, int, Statement, str]] = []  # (stream, sign, statement, map)
        self.reeval: list[tuple[str, Statement, frozenset[str]]] = []  # (map, statement, streams)
        self.prefix = "M"
        self.counter = 0

    # -- maps -------------------------------------------------------------------------------------
    def new_name(self) -> str:
        self.counter += 1
        return f"{self.prefix}_m{self.counter}"

    def linear_map(self, group: tuple[str, ...], terms: list[Term],
                   name: str | None = None) -> tuple[str, tuple[str, ...]]:
        """The map holding AggSum(group, terms) (terms without nested aggregates).  Returns its
        name and the order in which its keys are the ``group`` variables."""
        canon, order = _canonical(group, terms)
        key = ("linear", canon)
        if name is None and key in self.by_canon:
            name0 = self.by_canon[key]
            return name0, order
        if len(self.maps) >= MAX_MAPS:
            raise SqlError(f"the program needs more than {MAX_MAPS} maps")
        name = name or self.new_name()
        streams = frozenset(a.name for t in canon.terms for a in t.atoms)
        level = max((len(t.atoms) for t in canon.terms), default=0)
        self.maps[name] = MapInfo(name, canon.group, canon, streams, level, "delta")
        if name.startswith(self.prefix + "_m"):
            self.by_canon[key] = name
        for s in sorted(streams):
            for sign in (1, -1):
                for keys, dterms in delta(canon, s, sign, self.args[s]).items():
                    bound = set(self.args[s])
                    out = tuple(k for k in keys if k not in bound)
                    expr = self.materialize(dterms, bound, out)
                    if expr is not None:
                        self.stmts.append((s, sign, Statement(MapRef(name, keys), "+=", expr), name))
        return name, order

    def reeval_map(self, group: tuple[str, ...], terms: list[Term], name: str | None = None,
                   note: str = "") -> tuple[str, tuple[str, ...]]:
        """A map recomputed (``:=``) from materialized maps after every event that changes them."""
        canon, order = _canonical(group, terms)
        key = ("reeval", canon)
        if name is None and key in self.by_canon:
            return self.by_canon[key], order
        name = name or self.new_name()
        expr = self.materialize(list(canon.terms), set(), canon.group)
        self.add_reeval(name, canon, expr if expr is not None else Const(0.0), note)
        if name.startswith(self.prefix + "_m"):
            self.by_canon[key] = name
        return name, order

    def add_reeval(self, name: str, query: Query, expr: Expr, note: str) -> None:
        """Declare ``name[query.group] := expr``, run after every event of a stream that changes a
        map ``expr`` reads (after that map's own updates: its level is above theirs)."""
        reads = {x.name for x in walk(expr) if isinstance(x, MapRef)}
        streams = frozenset().union(*(self.maps[r].streams for r in reads)) if reads else frozenset()
        level = 1 + max((self.maps[r].level for r in reads), default=0)
        self.maps[name] = MapInfo(name, query.group, query, streams, level, "reeval", note)
        self.reeval.append((name, Statement(MapRef(name, query.group), ":=", expr), streams))

    def query_map(self, group: tuple[str, ...], terms: list[Term],
                  name: str | None = None) -> tuple[str, tuple[str, ...]]:
        if any(isinstance(x, Exists) for t in terms for f in t.factors for x in walk(f)):
            return self.reeval_map(group, terms, name, "aggregate subquery in FROM: no incremental form, "
                                   "re-evaluated from maintained maps, one pass over its groups")
        if any(has_rel(f) for t in terms for f in t.factors):
            return self.reeval_map(group, terms, name, "nested aggregate: re-evaluated from maps")
        return self.linear_map(group, terms, name)

    # -- materialization ---------------------------------------------------------------------------
    def materialize(self, terms: list[Term], bound: set[str], out: tuple[str, ...]) -> Expr | None:
        """An M3 expression (maps, no relations) equal to the sum of ``terms`` with ``bound`` set
        and output variables ``out``; None for 0."""
        parts = [p for t in terms if (p := self.materialize_term(t, bound, out)) is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else Add(tuple(parts))

    def materialize_term(self, t: Term, bound: set[str], out: tuple[str, ...]) -> Expr | None:
        t = simplify_term(t)
        if t is None:
            return None
        t = _lift_out_keys(t, bound, out)
        atoms = list(t.atoms)
        nested = [f for f in t.factors if has_rel(f)]
        plain = [f for f in t.factors if not has_rel(f)]
        # components of the atoms, connected by variables that are not bound
        comp = list(range(len(atoms)))

        def find(i: int) -> int:
            while comp[i] != i:
                comp[i] = comp[comp[i]]
                i = comp[i]
            return i
        owner: dict[str, int] = {}
        for i, a in enumerate(atoms):
            for v in a.vars:
                if v in bound:
                    continue
                if v in owner:
                    comp[find(i)] = find(owner[v])
                else:
                    owner[v] = i
        groups: dict[int, list[int]] = {}
        for i in range(len(atoms)):
            groups.setdefault(find(i), []).append(i)
        comp_vars = {r: {v for i in ix for v in atoms[i].vars if v not in bound} for r, ix in groups.items()}
        local: dict[int, list[Expr]] = {r: [] for r in groups}
        plain_outside: list[Expr] = []
        for f in plain:
            vs = expr_vars(f)
            homes = [r for r, cv in comp_vars.items() if vs and vs <= cv]
            if homes:
                local[homes[0]].append(f)
            else:
                plain_outside.append(f)
        # nested aggregates see every variable of this term as bound, including the groups an
        # Exists binds and the variable a lift binds; each factor outside the components is
        # placed after the factors binding the variables it reads
        have = bound | {v for a in atoms for v in a.vars}
        inner_bound = have | {v for f in nested for v in _provides(f)}
        placed = [(f, _provides(f), expr_vars(f) - _provides(f)) for f in plain_outside]
        for f in nested:
            m = self.materialize_nested(f, inner_bound)
            placed.append((m, _provides(f), (expr_vars(m) & inner_bound) - _provides(f)))
        outside = _binding_order(placed, have)
        used_outside: set[str] = set(out)
        for f in outside:
            used_outside |= expr_vars(f)
        factors: list[Expr] = []
        domains: dict[MapRef, MapRef] = {}
        for r, ix in groups.items():
            cv = comp_vars[r]
            comp_atoms = [atoms[i] for i in ix]
            bound_in = {v for a in comp_atoms for v in a.vars if v in bound}
            needed = tuple(sorted((cv & used_outside) | bound_in))
            name, order = self.linear_map(needed, [Term(1.0, tuple(comp_atoms), tuple(local[r]))])
            ref = MapRef(name, order)
            factors.append(ref)
            keys_out = tuple(v for v in needed if v in out)
            if keys_out and len(keys_out) < len(needed):
                # the output groups of this component (a row count per group), so that a grouped
                # range or threshold sum can run once per group instead of looping over the map
                dname, dorder = self.linear_map(keys_out, [Term(1.0, tuple(comp_atoms), ())])
                domains[ref] = MapRef(dname, dorder)
        factors += [f for f in outside]
        return _factorize(t.coef, factors, bound, out, domains)

    def materialize_nested(self, e: Expr, bound: set[str]) -> Expr:
        """Replace each aggregate over relations inside ``e`` by its materialized form."""
        match e:
            case Exists(g, AggSum(_, body)):
                # the groups of a subquery in FROM: a map of row counts, 1 per non-empty group
                g = tuple(dict.fromkeys(g))
                terms = merge_terms([x for t in expand(body) if (x := simplify_term(t)) is not None])
                name, order = self.query_map(g, terms)
                return Div(MapRef(name, order), MapRef(name, order))
            case ExtremeAgg(kind, v, AggSum(g, body), n, rows):
                # MIN/MAX: the rows counted per value v (per correlated outer key, bound here),
                # a map of counts ORDERED on v; the extreme is its tree's first or last key
                terms = merge_terms([x for t in expand(body) if (x := simplify_term(t)) is not None])
                seen = {w for t in terms for w in term_vars(t)}
                corr = [w for w in g if w != v] + sorted((seen & bound) - set(g))
                name, order = self.query_map(tuple(dict.fromkeys(corr)) + (v,), terms)
                return Extreme(kind, v, MapRef(name, order), n, rows)  # type: ignore[arg-type]
            case AggSum(g, body) if has_rel(body):
                terms = expand(body)
                inner = self.materialize(merge_terms([x for t in terms if (x := simplify_term(t)) is not None]),
                                         bound, tuple(v for v in g if v not in bound))
                return inner if inner is not None else Const(0.0)
            case Cmp(op, a, b):
                return simplify(Cmp(op, self.materialize_nested(a, bound), self.materialize_nested(b, bound)))
            case Add(ts):
                return Add(tuple(self.materialize_nested(x, bound) for x in ts))
            case Mul(fs):
                return Mul(tuple(self.materialize_nested(x, bound) for x in fs))
            case Neg(x):
                return Neg(self.materialize_nested(x, bound))
            case Div(a, b):
                return Div(self.materialize_nested(a, bound), self.materialize_nested(b, bound))
            case Mod(a, b):
                return Mod(self.materialize_nested(a, bound), self.materialize_nested(b, bound))
            case Func(name, args):
                return Func(name, tuple(self.materialize_nested(a, bound) for a in args))
            case Lift(v, x):
                return Lift(v, self.materialize_nested(x, bound))
            case Rel():
                raise SqlError("a relation cannot appear outside an aggregate")
        return e

    # -- views -------------------------------------------------------------------------------------
    def view(self, v: ViewDef) -> list[tuple[str, str]]:
        """Compile the view's maps; returns (column, map) of each output: one map named after the
        view for a view with one output, ``VIEW__COLUMN`` maps for several (none for a view of
        keys alone: its map of row counts, :meth:`rows_map`, is the view)."""
        self.prefix = v.name
        self.counter = 0
        if v.limit is not None and v.limit.keys_only:
            return []
        outputs = v.columns or ((v.name, v.value),)
        targets = [(c, v.name if not v.columns else f"{v.name}__{c}") for c, _ in outputs]
        for _, name in targets:
            if name in self.maps:
                raise SqlError(f"the map name {name} is taken twice (rename a view or a column)")
        # an output that is one aggregate read nowhere else is that aggregate's map itself
        uses: dict[str, int] = {}
        for _, e in outputs:
            for x in walk(e):
                if isinstance(x, MapRef) and x.name.startswith("#"):
                    uses[x.name] = uses.get(x.name, 0) + 1
        own: dict[str, str] = {}
        for (_, e), (_, name) in zip(outputs, targets, strict=True):
            if isinstance(e, MapRef) and e.name.startswith("#") and uses[e.name] == 1 and e.keys == v.group:
                own[e.name] = name
        names: dict[str, tuple[str, tuple[str, ...]]] = {}
        for i, q in enumerate(v.aggregates):
            names[f"#{i}"] = self.query_map(q.group, list(q.terms), own.get(f"#{i}"))
        domain: MapRef | None = None
        for (_, e), (_, name) in zip(outputs, targets, strict=True):
            if isinstance(e, MapRef) and e.name in own:
                continue
            value = _replace_aggs(e, names, v.group)
            if has_rel(value):   # scalar subqueries in the SELECT list (or a view without FROM)
                value = self.materialize_nested(value, set(v.group))
            if v.group:
                if domain is None:
                    # the view's groups are those of COUNT(*) over the same body (a domain map)
                    dom, order = self.query_map(v.group, list(v.domain.terms))
                    domain = MapRef(dom, order)
                expr: Expr = AggSum(v.group, Mul((Div(domain, domain), value)))
            else:
                expr = value
            self.add_reeval(name, Query(v.group, ()), expr, "combination of aggregates")
        return targets

    def rows_map(self, v: ViewDef) -> str:
        """The map of input rows per group of a view whose rows are cut when read (a ladder):
        its nonzero keys are the view's rows (a group whose values are all 0 is still one, as in
        SQL).  Keyed by the view's keys in their order, and a map of its own, ``VIEW__ROWS``: a
        shared one (the counts per price of a MAX or a top-N) may have its keys reordered for
        another reader's range sums (:mod:`ddms.calculus.order`).  O(the delta compilation of a
        COUNT(*)); one hash update per event."""
        name, order = self.query_map(v.group, list(v.domain.terms), f"{v.name}__ROWS")
        assert order == v.group
        return name

    def rank_maps(self, v: ViewDef, rows: str) -> tuple[str, ...]:
        """The maps that read a view's rows by rank (:attr:`ddms.m3.ir.Limit.ranks`), when it is
        ordered by key columns alone, partitioned by the others, with a LIMIT: map ``j`` counts
        the rows per partition and first ``j + 1`` ORDER BY columns (``VIEW__RANKj``; the rows
        map itself when that is its key order), declared ORDERED by :mod:`ddms.calculus.order`.
        None otherwise (the read sorts the groups).  Cost per event: one tree update per map."""
        lim = v.limit
        assert lim is not None
        part, cols = list(lim.partition), [i for i, _ in lim.order]
        if lim.n is None or not cols or len(set(cols)) != len(cols) or any(i >= len(v.group) for i in cols) \
                or sorted(part + cols) != list(range(len(v.group))):
            return ()
        out = []
        for j in range(len(cols)):
            keys = tuple(v.group[i] for i in part + cols[:j + 1])
            if keys == v.group:
                out.append(rows)
                continue
            name, order = self.query_map(keys, list(v.domain.terms), f"{v.name}__RANK{j}")
            assert order == keys
            out.append(name)
        return tuple(out)

    # -- program ------------------------------------------------------------------------------------
    def program(self, views: list[ViewDef]) -> Compiled:
        queries = []
        for v in views:
            targets = self.view(v)
            limit = None if v.limit is None else replace(v.limit, rows=self.rows_map(v))
            if limit is not None:
                limit = replace(limit, ranks=self.rank_maps(v, limit.rows))
            if limit is not None and limit.keys_only:
                queries.append(M3Query(v.name, limit.rows, v.key_names, (), limit))
            elif v.columns:
                queries.append(M3Query(v.name, targets[0][1], v.key_names, tuple(targets), limit))
            else:
                queries.append(M3Query(v.name, v.name, (), (), limit))
        decls = []
        # a scalar re-evaluated map starts at its expression's value on the empty database
        # (an AVG over nothing is NULL, not 0)
        init = {name: st.expr for name, st, _ in self.reeval if not st.target.keys}
        for m in self.maps.values():
            decls.append(MapDecl(m.name, "float", tuple(Column(k, "float") for k in m.keys), init=init.get(m.name)))
        triggers = []
        for s in self.streams.values():
            for sign, sym in ((1, "+"), (-1, "-")):
                mine = [(self.maps[name].level, i, st) for i, (ss, sg, st, name) in enumerate(self.stmts)
                        if ss == s.name and sg == sign]
                mine.sort(key=lambda x: (-x[0], x[1]))
                body = [st for _, _, st in mine]
                # keys written so far in this trigger, per map (None: anywhere)
                written: dict[str, list[tuple[str, ...]] | None] = {}
                for st in body:
                    if written.get(st.target.name, []) is not None:
                        written.setdefault(st.target.name, []).append(st.target.keys)
                for _, st, streams in self.reeval:
                    if s.name not in streams:
                        continue
                    st = _narrow(st, written, self.args[s.name])
                    pinned = any(k in self.args[s.name] for k in st.target.keys)
                    if pinned and written.get(st.target.name, []) is not None:
                        written.setdefault(st.target.name, []).append(st.target.keys)
                    else:
                        written[st.target.name] = None
                    body.append(st)
                if body:
                    triggers.append(Trigger(sym, s.name, self.args[s.name], tuple(body)))
        prog = Program(tuple(self.streams.values()), tuple(decls), tuple(queries), tuple(triggers))
        return Compiled(prog, list(self.maps.values()))


# -- helpers -----------------------------------------------------------------------------------------


def _narrow(st: Statement, written: dict[str, list[tuple[str, ...]] | None], args: tuple[str, ...]) -> Statement:
    """A re-evaluation ``X[.., k, ..] := e`` restricted to the one group an event can change.

    When every map ``e`` reads that the trigger has written so far was written only at entries
    whose key at some position is one event argument ``a`` (``D[BIDS_BROKER_ID] += ..``), and
    every read of it has the target key ``k`` at that position, only the group ``k = a`` can
    have changed: the statement becomes ``X[.., a, ..] := e[k := a]``, one group per event
    instead of a pass over all of them.  Otherwise ``st`` unchanged.  O(size of e) per key."""
    if st.op != ":=" or not st.target.keys:
        return st
    reads = [x for x in walk(st.expr) if isinstance(x, MapRef) and x.name in written]
    if not reads:
        return st
    for k in st.target.keys:
        arg: str | None = None
        for r in reads:
            writes = written[r.name]
            if writes is None:
                break
            w0 = writes[0]
            hits = [w0[i] for i, x in enumerate(r.keys)
                    if x == k and w0[i] in args and all(v[i] == w0[i] for v in writes)]
            hits = [h for h in hits if arg is None or h == arg]
            if not hits:
                break
            arg = hits[0]
        else:
            if arg is not None:
                expr = _fixed_tests(substitute(st.expr, {k: arg}), set(args))
                return Statement(MapRef(st.target.name, tuple(arg if x == k else x for x in st.target.keys)), ":=",
                                 expr)
    return st


def _fixed_tests(e: Expr, args: set[str]) -> Expr:
    """Group tests ``D[g] / D[g]`` whose keys are now all event arguments become ``{D[g] != 0}``:
    they no longer bind the group, and 0 / 0 would make a vanished group NULL.  O(size of e)."""
    test = _group_test(e)
    if test is not None and set(test.left.keys) <= args:
        return test
    if isinstance(e, Exists):
        return e                          # a group domain's own body is left as it is
    kids = children(e)
    return with_children(e, tuple(_fixed_tests(x, args) for x in kids)) if kids else e


def _group_test(e: Expr) -> Cmp | None:
    """``{D[g] != 0}`` for the group quotient ``D[g] / D[g]`` of an aggregate subquery in FROM
    (1 per non-empty group), else None: once ``g`` is bound the quotient is a test, and 0 / 0
    would make a vanished group NULL."""
    if isinstance(e, Div) and isinstance(e.num, MapRef) and e.num == e.den:
        return Cmp("!=", e.num, Const(0.0))
    return None


def _lift_out_keys(t: Term, bound: set[str], out: tuple[str, ...]) -> Term:
    """``t`` with each test ``{o = e}`` of an output variable ``o`` that nothing else in the term
    binds (no atom, no lift, no Exists) turned into the lift ``(o ^= e)``, where ``e`` reads only
    ``bound`` variables and is never NULL.  Such a test is left by a map whose keys are equal by
    definition: ``MIN(broker_id) ... GROUP BY broker_id`` keeps the extreme's map keyed by the
    group and the value, and its delta for an inserted row is ``{K1 = B}`` with ``B`` known and
    ``K1`` bound by nothing (the verifier refused it: "K1 is used before it is bound").  Exact:
    summed over the free ``o``, ``{o = e} * x`` is ``x`` at ``o = e``, which the lift writes; a
    NULL ``e`` would make a key where SQL's test is false, so a nullable ``e`` is left alone.
    O(size of the term)."""
    given = bound | {v for a in t.atoms for v in a.vars} | {v for f in t.factors for v in _provides(f)}
    free = [o for o in out if o not in given]
    if not free:
        return t
    factors = list(t.factors)
    for o in free:
        for i, f in enumerate(factors):
            if not (isinstance(f, Cmp) and f.op == "="):
                continue
            side = f.right if f.left == Var(o) else f.left if f.right == Var(o) else None
            if side is not None and expr_vars(side) <= bound and not nullable(side):
                factors[i] = Lift(o, side)
                break
    return Term(t.coef, t.atoms, tuple(factors))


def _provides(f: Expr) -> set[str]:
    """The variables a calculus factor outside the relation atoms binds: an Exists its groups, a
    lift its variable."""
    match f:
        case Exists(g, _):
            return set(g)
        case Lift(v, _):
            return {v}
    return set()


def _binding_order(factors: list[tuple[Expr, set[str], set[str]]], have: set[str]) -> list[Expr]:
    """Factors ``(expr, binds, reads)`` in an order where each reads only variables in ``have``
    or bound by an earlier one: the given order when it already is one (stable), else the first
    ready factor each time.  Factors that never become ready keep their order at the end (the
    verifier names what is unbound).  An Exists (``D[g] / D[g]``) whose groups are bound by then
    is a test, ``{D[g] != 0}``: a quotient would be 0 / 0 = NULL for a group it does not hold.
    O(n^2) in the few factors of a term."""
    left = list(factors)
    done: list[Expr] = []
    avail = set(have)
    while left:
        i = next((i for i, (_, _, reads) in enumerate(left) if reads <= avail), None)
        if i is None:
            return done + [f for f, _, _ in left]
        f, binds, _ = left.pop(i)
        if binds and binds <= avail:
            f = _group_test(f) or f
        done.append(f)
        avail |= binds
    return done


def _replace_aggs(e: Expr, names: dict[str, tuple[str, tuple[str, ...]]], group: tuple[str, ...]) -> Expr:
    """The view's value with each aggregate placeholder ``#i`` replaced by its map."""
    if isinstance(e, MapRef) and e.name in names:
        name, order = names[e.name]
        return MapRef(name, order)
    kids = children(e)
    return with_children(e, tuple(_replace_aggs(x, names, group) for x in kids)) if kids else e


def _binds_of(f: Expr) -> set[str]:
    """The variables a materialized factor binds at its top: a map reference's keys (also as a
    quotient's numerator), a lift's variable."""
    match f:
        case MapRef(_, keys):
            return set(keys)
        case Div(a, _) | Mod(a, _):
            return _binds_of(a)
        case Func(_, args):
            return _binds_of(args[0])
        case Lift(v, _):
            return {v}
        case Mul(fs):
            return set().union(*(_binds_of(x) for x in fs))
    return set()


def _canonical(group: tuple[str, ...], terms: list[Term]) -> tuple[Query, tuple[str, ...]]:
    """Rename variables canonically: group variables -> K0.., others -> X0.. in order of
    appearance.  Returns the canonical query and the original group variables in canonical key
    order (K0's original variable first)."""
    sub = {g: f"K{i}" for i, g in enumerate(group)}
    n = 0
    out = []
    for t in terms:
        local = dict(sub)
        for v in _ordered_vars(t):
            if v not in local:
                local[v] = f"X{n}"
                n += 1
        out.append(Term(t.coef, tuple(substitute(a, local) for a in t.atoms),
                        tuple(substitute(f, local) for f in t.factors)))
    out.sort(key=repr)
    return Query(tuple(f"K{i}" for i in range(len(group))), tuple(out)), group


def _ordered_vars(t: Term) -> list[str]:
    """The variables of ``t`` in order of first appearance (atoms, then factors walked pre-order),
    so equal terms up to renaming list them alike, whatever the names."""
    seen: list[str] = []
    for a in t.atoms:
        for v in a.vars:
            if v not in seen:
                seen.append(v)
    for f in t.factors:
        for x in walk(f):
            for v in node_vars(x):
                if v not in seen:
                    seen.append(v)
    return seen


def _factorize(coef: float, factors: list[Expr], bound: set[str], out: tuple[str, ...],
               domains: dict[MapRef, MapRef] | None = None) -> Expr | None:
    """coef * product of factors, summed over every variable not bound and not output, as a
    product of independent AggSums (one per group of factors connected by such variables)."""
    free = lambda f: {v for v in expr_vars(f) if v not in bound and v not in out}  # noqa: E731
    n = len(factors)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    owner: dict[str, int] = {}
    for i, f in enumerate(factors):
        for v in free(f):
            if v in owner:
                parent[find(i)] = find(owner[v])
            else:
                owner[v] = i
    groups: dict[int, list[Expr]] = {}
    for i, f in enumerate(factors):
        groups.setdefault(find(i), []).append(f)
    parts: list[Expr] = []
    if coef != 1.0:
        parts.append(Const(coef))
    # groups that bind output variables (a map keyed by them, a lift) first, then those that
    # only read them (a range sum per output group compares with its key), then the rest
    outs = set(out) - bound

    def rank(fs: list[Expr]) -> int:
        if any(_binds_of(f) & outs for f in fs):
            return 0
        return 1 if any(set(expr_vars(f)) & set(out) for f in fs) else 2
    ordered = sorted(groups.values(), key=rank)
    for fs in ordered:
        fs = sorted(fs, key=lambda f: 0 if isinstance(f, MapRef) else 1)
        body = fs[0] if len(fs) == 1 else Mul(tuple(fs))
        loops = set().union(*(free(f) for f in fs))
        if loops:
            g = tuple(v for v in out if any(v in expr_vars(f) for f in fs))
            refs = [f for f in fs if isinstance(f, MapRef) and f in (domains or {})]
            d = (domains or {})[refs[0]] if len(refs) == 1 else None
            if (d is not None and g and any(isinstance(f, Cmp) for f in fs) and loops - set(g)
                    and set(g) - bound <= set(expr_vars(d))):
                # per output group: AggSum(g, D[g] / D[g] * AggSum([], body)), D the group's
                # domain, which must bind every output variable (a GROUP BY expression is bound
                # by a lift inside the body: the inner sum would lose it)
                parts.append(AggSum(g, Mul((Div(d, d), AggSum((), body)))))
                continue
            parts.append(AggSum(g, body))
        else:
            parts.append(body)
    if not parts:
        return Const(coef)
    return parts[0] if len(parts) == 1 else Mul(tuple(parts))


__all__ = ["Compiler", "Compiled", "MapInfo"]
