"""Canonical M3 text.  ``parse_program(print_program(p)) == p`` for every valid program, so the
text is what golden tests diff and what ``ddms compile`` prints.  Cost: linear in program size."""

from __future__ import annotations

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

# binding strength: higher binds tighter
_PREC_ADD, _PREC_MUL, _PREC_NEG, _PREC_ATOM = 1, 2, 3, 4


def _number(c: Const) -> str:
    if c.type == "int":
        return str(int(c.value))
    text = repr(float(c.value))
    return text if any(ch in text for ch in ".eEn") else text + ".0"


def _prec(e: Expr) -> int:
    match e:
        case Add():
            return _PREC_ADD
        case Mul() | Div() | Mod():
            return _PREC_MUL
        case Neg():
            return _PREC_NEG
        case Const(value) if value < 0:
            return _PREC_NEG
    return _PREC_ATOM


def _wrap(e: Expr, at_least: int) -> str:
    text = print_expr(e)
    return f"({text})" if _prec(e) < at_least else text


def print_expr(e: Expr) -> str:
    """One expression in canonical form (fully determined by the tree)."""
    match e:
        case Const():
            return _number(e)
        case Var(name):
            return name
        case MapRef(name, keys):
            return f"{name}[{', '.join(keys)}]"
        case Add(terms):
            return " + ".join(_wrap(t, _PREC_ADD + 1) for t in terms)
        case Mul(factors):
            return " * ".join(_wrap(f, _PREC_MUL + 1) for f in factors)
        case Div(num, den):
            return f"{_wrap(num, _PREC_MUL)} / {_wrap(den, _PREC_MUL + 1)}"
        case Mod(num, den):
            return f"{_wrap(num, _PREC_MUL)} % {_wrap(den, _PREC_MUL + 1)}"
        case Func(name, args):
            return f"{name.capitalize()}({', '.join(print_expr(a) for a in args)})"
        case Neg(x):
            # "-(...)" unless the operand is a plain name: "--" would start a comment and "-1.0"
            # would read back as a negative constant
            return "-" + print_expr(x) if isinstance(x, Var | MapRef) else f"-({print_expr(x)})"
        case Cmp(op, a, b):
            return f"{{{print_expr(a)} {op} {print_expr(b)}}}"
        case AggSum(group, x):
            return f"AggSum([{', '.join(group)}], {print_expr(x)})"
        case Lift(var, x):
            return f"({var} ^= {print_expr(x)})"
        case Extreme(kind, var, ref, n, rows):
            rank = f", {n} rows" if rows else f", {n}" if n != 1 else ""
            return f"{kind.capitalize()}({var}, {print_expr(ref)}{rank})"
    raise TypeError(f"not an M3 expression: {e!r}")


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def print_stream(s: Stream) -> str:
    cols = ", ".join(f"{c.name} {c.type}" for c in s.columns)
    out = f"CREATE {s.kind} {s.name}({cols})"
    if s.source is not None:
        opts = ", ".join(f"{k} := {_quote(v)}" for k, v in s.source.options)
        out += f"\n  FROM FILE {_quote(s.source.path)} LINE DELIMITED {s.source.adaptor}({opts})"
    return out + ";"


def print_map(m: MapDecl) -> str:
    keys = ", ".join(f"{c.name}: {c.type}" for c in m.keys)
    init = f" := {print_expr(m.init)}" if m.init is not None else ""
    extreme = " EXTREME " + " ".join(k.upper() for k in m.extremes) if m.extreme else ""
    return f"DECLARE MAP {m.name}({m.value_type})[{keys}]" + (" ORDERED" if m.ordered else "") + extreme + init + ";"


def print_statement(s: Statement) -> str:
    return f"{print_expr(s.target)} {s.op} {print_expr(s.expr)};"


def print_trigger(t: Trigger) -> str:
    body = "".join(f"  {print_statement(s)}\n" for s in t.statements)
    return f"ON {t.sign} {t.stream}({', '.join(t.args)}) {{\n{body}}}"


def print_query(q) -> str:
    if not q.columns:
        keys = f"[{', '.join(q.keys)}]" if q.keys else ""
        return f"DECLARE QUERY {q.name}{keys} := {q.map}{print_limit(q.limit)};"
    cols = ", ".join(f"{c} := {m}" for c, m in q.columns)
    return f"DECLARE QUERY {q.name}[{', '.join(q.keys)}] := ({cols}){print_limit(q.limit)};"


def print_limit(limit) -> str:
    """`` ROWS OF map [PARTITION BY i, ..] [ORDER BY i [DESC], ..] [LIMIT n] [OFFSET m] [KEYS]``
    (:class:`ddms.m3.ir.Limit`), or nothing."""
    if limit is None:
        return ""
    out = f" ROWS OF {limit.rows}"
    if limit.partition:
        out += " PARTITION BY " + ", ".join(str(i) for i in limit.partition)
    if limit.order:
        out += " ORDER BY " + ", ".join(f"{i}{' DESC' if d else ''}" for i, d in limit.order)
    if limit.n is not None:
        out += f" LIMIT {limit.n}"
    if limit.offset:
        out += f" OFFSET {limit.offset}"
    if limit.ranks:
        out += " RANKED BY " + ", ".join(limit.ranks)
    return out + (" KEYS" if limit.keys_only else "")


def print_program(p: Program) -> str:
    """The whole program, sections in a fixed order, ending with a newline."""
    parts = ["-- streams", *(print_stream(s) for s in p.streams), "",
             "-- maps", *(print_map(m) for m in p.maps), "",
             "-- queries", *(print_query(q) for q in p.queries), "",
             "-- triggers"]
    for t in p.triggers:
        parts += [print_trigger(t), ""]
    return "\n".join(parts).rstrip("\n") + "\n"
