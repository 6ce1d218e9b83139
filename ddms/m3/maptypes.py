"""Types of compiled maps: which map keys hold symbols or integers, which map values are integers.

Why: the SQL compiler declares every map key and value ``float`` (the maps hold float64 either
way), but the runtime shows a view's keys and values by their declared types: a view keyed by a
symbol must show the symbol's name, not its id; a view keyed by ``broker_id INT`` shows
``3``, not ``3.0``; ``COUNT(*)`` is an integer, as in DuckDB.  This pass (pure: program in,
program out) gives each map key and value the type of everything that can be written there.

Types are ordered ``int`` < ``float`` < ``string`` and a slot's type is the largest type of
anything that reaches it: a key is ``string`` if any statement binds a symbol to it (the key then
holds symbol ids), ``int`` if every statement binds an integer (an ``INT`` stream column, an integer
constant, an integer key of another map, integer arithmetic), else ``float``; a value likewise from
the expressions written into it (``+ - *`` of integers, ``%`` of integers, comparisons and
indicators are integers; ``/`` is not, but for ``x / x``).  Starting from ``int`` everywhere and only ever raising
a slot, the fixpoint is reached in at most two raises per slot.  The types only change how views
show their numbers (the runtime shows an ``int`` that is not integral, such as NULL, as it is), so
the generated code is the same.

Applied to SQL programs only: an M3 program states its own types.
Cost: O(rounds x program size); rounds <= 2 x number of slots, in practice 2-4.
"""

from __future__ import annotations

from dataclasses import replace

from ddms.m3 import ir
from ddms.m3.ir import (
    INT_BITS,
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
    Type,
    Var,
    walk,
)

__all__ = ["infer_map_types"]

_RANK = {"int": 0, "float": 1, "string": 2}


def _join(a: Type, b: Type) -> Type:
    return a if _RANK[a] >= _RANK[b] else b


def infer_map_types(program: ir.Program) -> ir.Program:
    """``program`` with each map key and value declared by what can be written there (see the
    module docstring); the same object when nothing changes."""
    keys: dict[str, list[Type]] = {m.name: ["string" if c.type == "string" else "int" for c in m.keys]
                                   for m in program.maps}
    values: dict[str, Type] = {m.name: "int" for m in program.maps}
    changed = True
    while changed:
        changed = False
        for m in program.maps:
            if m.init is not None:
                changed |= _raise(values, m.name, _expr_type(m.init, _var_types(m.init, keys, {}), values))
        for trig in program.triggers:
            stream = program.stream(trig.stream)
            env = {a: c.type for a, c in zip(trig.args, stream.columns, strict=False)}
            for st in trig.statements:
                vt = _var_types(st.expr, keys, env)
                slots = keys[st.target.name]
                for i, k in enumerate(st.target.keys):
                    t = _join(slots[i], vt.get(k, "float"))
                    if t != slots[i]:
                        slots[i], changed = t, True
                changed |= _raise(values, st.target.name, _expr_type(st.expr, vt, values))
    maps = tuple(_declared(m, keys[m.name], values[m.name]) for m in program.maps)
    if all(a is b for a, b in zip(maps, program.maps, strict=True)):
        return program
    return replace(program, maps=maps)


def _raise(values: dict[str, Type], name: str, t: Type) -> bool:
    joined = _join(values[name], t)
    if joined == values[name]:
        return False
    values[name] = joined
    return True


def _declared(m, key_types: list[Type], value_type: Type):
    value_type = "float" if value_type == "string" else value_type   # (a symbol is never a value)
    if [c.type for c in m.keys] == key_types and m.value_type == value_type:
        return m
    return replace(m, value_type=value_type,
                   keys=tuple(replace(c, type=t) for c, t in zip(m.keys, key_types, strict=True)))


def _var_types(e: Expr, keys: dict[str, list[Type]], env: dict[str, Type]) -> dict[str, Type]:
    """The type of every variable of ``e``: the join of what every occurrence that binds or
    matches it says (trigger arguments, map key positions, extremes over a key, lifts)."""
    out: dict[str, Type] = dict(env)

    def put(v: str, t: Type) -> bool:
        joined = _join(out.get(v, t), t)
        if out.get(v) == joined:
            return False
        out[v] = joined
        return True

    grew = True
    while grew:
        grew = False
        for x in walk(e):
            if isinstance(x, MapRef):
                for k, t in zip(x.keys, keys.get(x.name, ()), strict=False):
                    grew |= put(k, t)
            elif isinstance(x, Extreme):
                slot = keys.get(x.ref.name, ())
                grew |= put(x.var, slot[len(x.ref.keys) - 1] if slot else "float")
            elif isinstance(x, Lift):
                grew |= put(x.var, _expr_type(x.expr, out, {}))
    return out


def _expr_type(e: Expr, var_types: dict[str, Type], values: dict[str, Type]) -> Type:
    """``int`` if ``e`` always yields an integer (given the variables' and maps' types), else
    ``float``."""
    match e:
        case Const(v, t):
            return "int" if t == "int" or float(v).is_integer() else "float"
        case Var(name):
            return "int" if var_types.get(name) == "int" else "float"
        case MapRef(name, _):
            return "int" if values.get(name) == "int" else "float"
        case Add(parts) | Mul(parts):
            return "int" if all(_expr_type(p, var_types, values) == "int" for p in parts) else "float"
        case Neg(x) | AggSum(_, x):
            return _expr_type(x, var_types, values)
        case Mod(a, b):
            return "int" if _expr_type(a, var_types, values) == _expr_type(b, var_types, values) == "int" else "float"
        case Extreme(_, var, _):   # the extreme key itself (NaN over nothing: NULL, shown as such)
            return "int" if var_types.get(var) == "int" else "float"
        case Cmp() | Lift():   # 0/1
            return "int"
        case Func(name, _) if name == "sign" or name in INT_BITS:   # TINYINT, an integer CAST
            return "int"
        case Func("coalesce" | "greatest" | "least" | "mul", args) | Func("if", (_, *args)):   # both arguments' type
            return "int" if all(_expr_type(a, var_types, values) == "int" for a in args) else "float"
        case Func(_, args):   # ROUND, FLOOR, ABS, NULLIF ... keep their (first) argument's type, as in DuckDB
            return _expr_type(args[0], var_types, values)
        case Div(a, b) if a == b:   # x / x: 1 over the nonzero entries a loop ranges over (COUNT DISTINCT)
            return "int"
    return "float"   # Div
