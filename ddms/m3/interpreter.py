"""A pure-Python reference interpreter of M3: the oracle the numba backend is tested against.

It follows the binding semantics of ``ir`` literally (nested loops over map entries, no indexes,
no range maps, no threshold search), so it is slow (a threshold query costs O(n^2) per event)
but obviously right.  Maps are dicts from key tuples (floats) to nonzero float values.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

from ddms.errors import ProgramError
from ddms.m3.ir import (
    INT_BITS,
    NULL_SKIPPING,
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
    Var,
)
from ddms.m3.verify import outputs, verify

Env = dict[str, float]

_CMP = {
    "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def compare(op: str, a: float, b: float) -> bool:
    """SQL-style comparison: anything compared with NaN (NULL) is false."""
    if math.isnan(a) or math.isnan(b):
        return False
    return _CMP[op](a, b)


def initial_values(program: Program) -> dict[str, float]:
    """The nonzero values of the maps declared with ``:= init``, evaluated in declaration order
    over an empty database (each init sees the initial values of the maps declared before it)."""
    empty = Interpreter.__new__(Interpreter)
    empty.maps = {m.name: {} for m in program.maps}
    empty._map_arity = {m.name: len(m.keys) for m in program.maps}
    out = {}
    for m in program.maps:
        if m.init is not None:
            v = empty.value(m.init, {})
            if v != 0.0:
                out[m.name] = empty.maps[m.name][()] = v
    return out



def _fmod(a: float, b: float) -> float:
    """SQL's ``%``: C's fmod (the dividend's sign, as DuckDB), NaN (NULL) for a zero divisor."""
    return math.fmod(a, b) if b != 0.0 and not math.isnan(b) and not math.isinf(a) else math.nan


def _away(p: float) -> float:
    """``p`` rounded to an integer, halves away from zero (C's ``round``)."""
    t = float(math.trunc(p))
    return t + math.copysign(1.0, p) if abs(p - t) >= 0.5 else t


def _round(x: float, d: float | None) -> float:
    """DuckDB's ROUND on DOUBLE: ``round(x * 10^d) / 10^d`` halves away from zero, where a product
    that rounded onto a half is decided by the exact product (``ROUND(16.15, 1)`` is 16.1:
    16.15 is 16.1499.. in binary); for ``d < 0``, ``round(x / 10^-d) * 10^-d`` (0 on overflow)."""
    if math.isnan(x) or math.isinf(x):
        return x
    if d is None:
        return _away(x)
    if d < 0:
        m = 10.0 ** -d if -d <= 308 else math.inf
        r = _away(x / m) * m
        return 0.0 if math.isnan(r) or math.isinf(r) else r
    m = 10.0 ** d if d <= 308 else math.inf
    p = x * m
    if math.isinf(p) or math.isnan(p):
        return x
    t = float(math.trunc(p))
    if abs(p - t) == 0.5:
        exact = Fraction(x) * Fraction(m)
        r = _away(p) if exact == p else float(math.floor(p) if exact < p else math.ceil(p))
    else:
        r = _away(p)
    r /= m
    return x if math.isnan(r) or math.isinf(r) else r


def _trunc(x: float, d: float | None) -> float:
    """DuckDB's TRUNC on DOUBLE: toward zero, ``trunc(x * 10^d) / 10^d`` (for ``d < 0``,
    ``trunc(x / 10^-d) * 10^-d``)."""
    if math.isnan(x) or math.isinf(x):
        return x
    if d is None:
        return float(math.trunc(x))
    if d < 0:
        m = 10.0 ** -d if -d <= 308 else math.inf
        r = float(math.trunc(x / m)) * m
        return 0.0 if math.isnan(r) or math.isinf(r) else r
    m = 10.0 ** d if d <= 308 else math.inf
    p = x * m
    r = float(math.trunc(p)) / m if not (math.isinf(p) or math.isnan(p)) else math.nan
    return x if math.isnan(r) or math.isinf(r) else r


def _cast_int(x: float, bits: int) -> float:
    """DuckDB's CAST of a DOUBLE to an integer type: to the nearest integer, halves to even; NULL
    (NaN) out of the type's range, where DuckDB raises a conversion error."""
    if math.isnan(x) or math.isinf(x):
        return math.nan
    r = float(round(x))
    return r if -(2.0 ** (bits - 1)) <= r <= 2.0 ** (bits - 1) - 1 else math.nan


def call(name: str, args: tuple[float, ...]) -> float:
    """The value of ``Func(name, args)`` (:data:`ddms.m3.ir.FUNCS`); NULL (NaN) in, NULL out,
    except for the NULL-skipping functions (:data:`ddms.m3.ir.NULL_SKIPPING`), DuckDB's way."""
    x = args[0]
    if name == "mul":       # SQL's product: NULL (NaN) in, NULL out, 0 * NULL included
        return x * args[1]
    if name == "if":
        return args[1] if x != 0.0 else args[2]
    if name in NULL_SKIPPING:
        y = args[1]
        if name == "nullif":
            return math.nan if x == y else x
        if math.isnan(x) or math.isnan(y):
            return y if math.isnan(x) else x
        return x if name == "coalesce" else max(x, y) if name == "greatest" else min(x, y)
    if math.isnan(x):
        return math.nan
    d = None if len(args) < 2 else args[1]
    if d is not None and (math.isnan(d) or not d.is_integer()):
        return math.nan
    match name:
        case "round":
            return _round(x, d)
        case "trunc":
            return _trunc(x, d)
        case "floor":
            return float(math.floor(x)) if not math.isinf(x) else x
        case "ceil":
            return float(math.ceil(x)) if not math.isinf(x) else x
        case "sign":
            return 1.0 if x > 0 else -1.0 if x < 0 else 0.0
        case "abs":
            return abs(x)
    return _cast_int(x, INT_BITS[name])


class Interpreter:
    """Holds the maps of one program and applies events to them one at a time."""

    def __init__(self, program: Program) -> None:
        self.program = verify(program)
        self.maps: dict[str, dict[tuple[float, ...], float]] = {m.name: {} for m in program.maps}
        self._map_arity = {m.name: len(m.keys) for m in program.maps}
        self._arity = {s.name: len(s.columns) for s in program.streams}
        for name, value in initial_values(program).items():
            self.maps[name][()] = value

    # -- events ---------------------------------------------------------------------------
    def apply(self, sign: str, stream: str, values: tuple[float, ...]) -> None:
        """Run the trigger of ``sign stream(values)`` (a no-op if the program has none)."""
        if stream not in self._arity:
            raise ProgramError(f"unknown stream {stream}")
        if len(values) != self._arity[stream]:
            raise ProgramError(f"stream {stream} has {self._arity[stream]} columns, got {len(values)}")
        trigger = self.program.trigger(sign, stream)
        if trigger is None:
            return
        env = {a: float(v) for a, v in zip(trigger.args, values, strict=True)}
        for s in trigger.statements:
            self.run_statement(s, env)

    def run_statement(self, s: Statement, env: Env) -> None:
        results: dict[tuple[float, ...], float] = {}
        for b, v in self.eval(s.expr, env):
            full = env | b
            key = tuple(full[k] for k in s.target.keys)
            results[key] = results.get(key, 0.0) + v
        m = self.maps[s.target.name]
        if s.op == ":=":
            fixed = [(i, env[k]) for i, k in enumerate(s.target.keys) if k in env]
            for key in [k for k in m if all(k[i] == v for i, v in fixed)]:
                del m[key]
        for key, v in results.items():
            new = v if s.op == ":=" else m.get(key, 0.0) + v
            if new == 0.0:
                m.pop(key, None)
            else:
                m[key] = new

    # -- expressions ------------------------------------------------------------------------
    def value(self, e: Expr, env: Env) -> float:
        """The value of an expression that binds no variables."""
        return sum((v for _, v in self.eval(e, env)), 0.0)

    def eval(self, e: Expr, env: Env) -> Iterator[tuple[Env, float]]:
        """Every (new bindings, value) pair of ``e`` under ``env``; zero values may be omitted."""
        match e:
            case Const(value):
                yield {}, value
            case Var(name):
                yield {}, env[name]
            case MapRef(name, keys):
                yield from self._read(name, keys, env)
            case Mul(factors):
                yield from self._product(factors, env)
            case Add(terms):
                for t in terms:
                    yield from self.eval(t, env)
            case Neg(x):
                for b, v in self.eval(x, env):
                    yield b, -v
            case Div(num, den) if not outputs(num, frozenset(env), self._map_arity):
                d = self.value(den, env)  # a closed quotient has a value even when it is 0/0
                yield {}, (self.value(num, env) / d if d != 0.0 else math.nan)
            case Div(num, den):
                for b, v in self.eval(num, env):
                    d = self.value(den, env | b)
                    yield b, (v / d if d != 0.0 else math.nan)
            case Mod(num, den) if not outputs(num, frozenset(env), self._map_arity):
                yield {}, _fmod(self.value(num, env), self.value(den, env))
            case Mod(num, den):
                for b, v in self.eval(num, env):
                    yield b, _fmod(v, self.value(den, env | b))
            case Func(name, args) if not outputs(args[0], frozenset(env), self._map_arity):
                yield {}, call(name, tuple(self.value(a, env) for a in args))
            case Func(name, args):
                for b, v in self.eval(args[0], env):
                    yield b, call(name, (v, *(self.value(a, env | b) for a in args[1:])))
            case Cmp(op, a, b):
                if compare(op, self.value(a, env), self.value(b, env)):
                    yield {}, 1.0
            case AggSum(group, x):
                groups: dict[tuple[float, ...], float] = {}
                free = [g for g in group if g not in env]
                for b, v in self.eval(x, env):
                    key = tuple(b[g] for g in free)
                    groups[key] = groups.get(key, 0.0) + v
                for key, v in groups.items():
                    yield dict(zip(free, key, strict=True)), v
            case Lift(var, x):
                v = self.value(x, env)
                if var in env:
                    if env[var] == v:
                        yield {}, 1.0
                else:
                    yield {var: v}, 1.0
            case Extreme(kind, var, ref, n, rows):
                entries = sorted(((b[var], v) for b, v in self._read(ref.name, ref.keys, env) if v != 0.0),
                                 reverse=kind == "max")
                if rows:   # the key of the n-th row: each key counted as often as its value
                    left, pick = n, entries[-1][0] if entries else math.nan
                    for key, count in entries:
                        left -= count
                        if left <= 0:
                            pick = key
                            break
                    yield {}, pick
                else:
                    yield {}, (entries[min(n, len(entries)) - 1][0] if entries else math.nan)
            case _:
                raise ProgramError(f"not an M3 expression: {e!r}")

    def _read(self, name: str, keys: tuple[str, ...], env: Env) -> Iterator[tuple[Env, float]]:
        m = self.maps[name]
        if all(k in env for k in keys):
            v = m.get(tuple(env[k] for k in keys), 0.0)
            if v != 0.0:
                yield {}, v
            return
        for key, v in list(m.items()):
            b: Env = {}
            for k, x in zip(keys, key, strict=True):
                have = env[k] if k in env else b.get(k)
                if have is None:
                    b[k] = x
                elif have != x:
                    break
            else:
                yield b, v

    def _product(self, factors: tuple[Expr, ...], env: Env) -> Iterator[tuple[Env, float]]:
        if not factors:
            yield {}, 1.0
            return
        for b1, v1 in self.eval(factors[0], env):
            if v1 == 0.0:
                continue
            for b2, v2 in self._product(factors[1:], env | b1):
                yield b1 | b2, v1 * v2

    # -- results --------------------------------------------------------------------------
    def view(self, name: str) -> float | tuple | dict:
        """A query's current value: a float for a map without keys, else a dict of nonzero rows;
        with several columns a tuple of them, or a dict key -> tuple."""
        q = next((q for q in self.program.queries if q.name == name), None)
        if q is None:
            raise ProgramError(f"unknown query {name}")
        if q.limit is not None:   # rows cut at read time: key -> value(s) in the order shown
            rows = self.maps[q.limit.rows]
            maps = [self.maps[m] for m in q.maps]
            shown = q.limit.cut([(k, () if q.limit.keys_only else tuple(m.get(k, 0.0) for m in maps))
                                 for k, c in rows.items() if c != 0.0])
            return {k: v if q.columns or q.limit.keys_only else v[0] for k, v in shown}
        if q.columns:   # several columns: a tuple of values, or key -> tuple per present key
            maps = [self.maps[m] for m in q.maps]
            if not q.keys:
                return tuple(m.get((), 0.0) for m in maps)
            keys = {k for m in maps for k in m}
            return {k: tuple(m.get(k, 0.0) for m in maps) for k in keys}
        m = self.maps[q.map]
        if not self.program.map(q.map).keys:
            return m.get((), 0.0)
        return dict(m)
