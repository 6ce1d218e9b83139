"""Key types of compiled maps: which map keys hold symbols (``string`` stream columns).

Why: the SQL compiler declares every map key ``float`` (the values are floats either way), but a
view keyed by a symbol must show the symbol's name, not its id, and the runtime reads a view's
key types from its map's declaration.  This pass (pure: program in, program out) propagates the
``string`` type from stream columns through trigger arguments, map reads, lifts and extremes to
the keys of the maps they write, until nothing changes.  A program without a ``string`` column is
returned unchanged (the same object): single-instrument programs and their generated code are
untouched.

Cost: O(fixpoint rounds x program size); rounds <= number of map keys, in practice 2-3.
"""

from __future__ import annotations

from dataclasses import replace

from ddms.m3.ir import Column, Expr, Extreme, Lift, MapRef, Program, Var, walk

__all__ = ["infer_key_types"]

STRING = "string"


def infer_key_types(program: Program) -> Program:
    """``program`` with every map key that can only hold a ``string`` value declared ``string``."""
    if not any(c.type == STRING for s in program.streams for c in s.columns):
        return program
    strings: dict[str, set[int]] = {m.name: {i for i, c in enumerate(m.keys) if c.type == STRING}
                                    for m in program.maps}
    changed = True
    while changed:
        changed = False
        for trig in program.triggers:
            stream = program.stream(trig.stream)
            env = {a for a, c in zip(trig.args, stream.columns, strict=False) if c.type == STRING}
            for st in trig.statements:
                svars = _string_vars(st.expr, strings, env)
                for i, k in enumerate(st.target.keys):
                    if k in svars and i not in strings[st.target.name]:
                        strings[st.target.name].add(i)
                        changed = True
    maps = tuple(replace(m, keys=tuple(Column(c.name, STRING) if i in strings[m.name] else c
                                       for i, c in enumerate(m.keys)))
                 if strings[m.name] else m for m in program.maps)
    return replace(program, maps=maps)


def _string_vars(e: Expr, strings: dict[str, set[int]], env: set[str]) -> set[str]:
    """The variables of ``e`` bound to symbols: ``env`` (the trigger's symbol arguments), keys at
    symbol positions of map reads, extremes over a symbol key, lifts of a symbol variable."""
    out = set(env)
    grew = True
    while grew:
        before = len(out)
        for x in walk(e):
            if isinstance(x, MapRef):
                out.update(k for i, k in enumerate(x.keys) if i in strings.get(x.name, ()))
            elif isinstance(x, Extreme) and len(x.ref.keys) - 1 in strings.get(x.ref.name, ()):
                out.add(x.var)
            elif isinstance(x, Lift) and isinstance(x.expr, Var) and x.expr.name in out:
                out.add(x.var)
        grew = len(out) > before
    return out
