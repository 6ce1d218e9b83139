"""Which maintained view, if any, answers an ad-hoc query: one pure pass over M3 programs.

``Engine.query(sql)`` first compiles ``sql`` with the program's stream declarations through the
SQL compiler (the same front end, calculus and delta passes that made the program).  A view of
the program answers the query when the query's compiled trigger program *is* that view's part of
the engine's program up to names: the maps the view reads (its columns' maps and, transitively,
every map their statements read), declared alike (value and key types, ordering, initial value)
and maintained by the same statements in the same triggers.  Names are normalised first: maps by
order of first appearance from the view's columns through the triggers, variables by order of
first appearance in each trigger (so aliases, whitespace and the names the compiler generates do
not matter).  Queries that differ as SQL but compile to the same calculus match too, which is
right: the compiled program is what computes the view.

Cost: O(size of the program) per query, plus the SQL compile of the query (milliseconds).
"""

from __future__ import annotations

from dataclasses import replace

from ddms.m3.ir import AggSum, Expr, Extreme, Lift, MapRef, Program, Query, Var, children, with_children
from ddms.m3.printer import print_expr


def _maps_in(e: Expr | None) -> list[str]:
    """Map names read by ``e``, in order of appearance (every node kind: ``%`` and SQL functions
    read maps through their operands like any other)."""
    out: list[str] = []

    def walk(x: Expr | None) -> None:
        if x is None:
            return
        if isinstance(x, MapRef):
            out.append(x.name)
        for c in children(x):
            walk(c)
    walk(e)
    return out


def _rename(e: Expr, maps: dict[str, str], var) -> Expr:
    """``e`` with map names from ``maps`` and variable names through ``var(name)``."""
    match e:
        case Var(name):
            return Var(var(name))
        case MapRef(name, keys):
            return MapRef(maps[name], tuple(var(k) for k in keys))
        case AggSum(group, x):
            return AggSum(tuple(var(g) for g in group), _rename(x, maps, var))
        case Lift(v, x):
            return Lift(var(v), _rename(x, maps, var))
        case Extreme(kind, v, ref, n, rows):   # (the rank too: a top 3 is not a top 5)
            return Extreme(kind, var(v), _rename(ref, maps, var), n, rows)
    kids = children(e)
    return with_children(e, tuple(_rename(k, maps, var) for k in kids)) if kids else e


def _namer():
    """``name -> v0, v1, ...`` in order of first appearance."""
    seen: dict[str, str] = {}
    return lambda v: seen.setdefault(v, f"v{len(seen)}")


def signature(program: Program, query: Query) -> str:
    """The normalised text of the part of ``program`` that maintains ``query`` (see the module
    docstring): equal for two queries exactly when the same statements maintain them."""
    names: dict[str, str] = {}

    def name(m: str) -> None:
        if m not in names:
            names[m] = f"M{len(names)}"
    for m in query.exposed:
        name(m)
    decls = {m.name: m for m in program.maps}
    grown = True
    while grown:   # the maps the view reads, transitively, named in order of appearance
        grown = False
        for m in list(names):
            for r in _maps_in(decls[m].init):
                grown |= r not in names
                name(r)
        for t in program.triggers:
            for s in t.statements:
                if s.target.name in names:
                    for r in _maps_in(s.expr):
                        grown |= r not in names
                        name(r)
    lines = []
    for m, canon in sorted(names.items(), key=lambda kv: int(kv[1][1:])):
        d = decls[m]
        init = print_expr(_rename(d.init, names, lambda v: v)) if d.init is not None else ""
        # not its storage (ORDERED, EXTREME): a physical choice the program makes per map from all
        # of its views (a map another view reads by range stays a tree), which never changes a value
        lines.append(f"{canon} {d.value_type} {[c.type for c in d.keys]} {init}")
    for t in program.triggers:
        var = _namer()
        args = [var(a) for a in t.args]
        body = [f"{print_expr(_rename(s.target, names, var))} {s.op} {print_expr(_rename(s.expr, names, var))}"
                for s in t.statements if s.target.name in names]
        if body:
            lines.append(f"ON {t.sign} {t.stream}({', '.join(args)}): " + "; ".join(body))
    return "\n".join(lines)


def matching_view(program: Program, adhoc: Program) -> Query | None:
    """The query of ``program`` that ``adhoc`` (a program of one query compiled with the same
    stream declarations) computes, or None."""
    if len(adhoc.queries) != 1:
        return None
    want = adhoc.queries[0]
    sig = signature(adhoc, want)
    for q in program.queries:
        if len(q.keys) == len(want.keys) and len(q.maps) == len(want.maps) and _cut(q) == _cut(want) \
                and signature(program, q) == sig:
            return q
    return None


def _cut(q: Query):
    """A query's row cut without the name of its row-count map (a top 3 is not a top 5)."""
    return None if q.limit is None else replace(q.limit, rows="")


def answer_from_view(engine, sql: str):
    """``sql`` answered from the engine's view that computes it (see the module docstring), as a
    ``pyarrow.Table`` (key columns, then value columns, named in lower case; rows sorted by key;
    the schema metadata ``ddms.view`` names the view), or None when ``sql`` compiles to no
    maintained view (or not at all: a query outside the SQL subset views are written in).  The
    answer follows the views' conventions (a SUM over no rows is 0, a group whose aggregates are
    all 0 is absent; DuckDB would give NULL and keep the group).  Cost: the query's SQL compile
    (milliseconds), O(program) to match, and a snapshot of the view."""
    import pyarrow as pa

    from ddms.compiler import compile_sql
    from ddms.errors import DdmsError
    from ddms.m3.printer import print_stream
    header = "\n".join(print_stream(s) for s in engine.program.streams)
    try:
        adhoc = compile_sql(f"{header}\n{sql.strip().rstrip(';')};", "<query>").program
    except DdmsError:
        return None
    view = matching_view(engine.program, adhoc)
    if view is None:
        return None
    want = adhoc.queries[0]
    decl = adhoc.map(want.map)
    keys = [c.name.lower() for c in decl.keys] if not want.keys else [k.lower() for k in want.keys]
    values = [c.lower() for c, _ in want.columns] if want.columns else [want.name.lower()]
    if want.limit is not None and want.limit.keys_only:   # SELECT DISTINCT: the keys alone
        values = []
    got = engine.snapshot(view.name)[view.name]
    if not keys:
        rows = [list(got) if want.columns else [got]]
    else:
        rows = [list(r) for r in got]
    names = keys + values
    cols = {i: [r[i] for r in rows] for i in range(len(names))}
    table = pa.table([pa.array(cols[i], pa.float64()) for i in range(len(names))], names=names)
    return table.replace_schema_metadata({"ddms.view": view.name})
