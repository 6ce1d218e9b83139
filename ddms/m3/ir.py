"""The M3 trigger-program IR: frozen dataclasses, nothing else.

An M3 program (the target language of DBToaster's compiler) declares input streams, maps with
typed key columns, the queries (views) that expose some maps, and one trigger per stream event
(``ON + BIDS(...)``/``ON - BIDS(...)``).  A trigger is a list of statements ``m[keys] += e`` or
``m[keys] := e`` run in order; one event is atomic.

Expressions are DBToaster's calculus: a value *with bindings*.  Evaluated under an environment of
bound variables, an expression yields a multiset of (new bindings, value) pairs:

* ``Const``/``Var`` yield one value; ``Var`` must be bound.
* ``MapRef(m, keys)`` reads map ``m``: bound key variables select, unbound ones are *loop
  variables* that range over the map's (nonzero) entries and become bound to their keys.
* ``Mul`` is a join: factors are evaluated left to right, each seeing the bindings of the ones
  before (sideways information passing); values multiply.
* ``Add`` is a union: each term yields its own pairs (terms must bind the same variables).
* ``Neg``/``Div`` negate/divide values (division by zero yields NaN, read as SQL NULL);
  ``Mod`` is SQL's ``%`` on values: C's ``fmod`` (the sign of the dividend, as DuckDB's ``%``),
  NaN when the divisor is zero.
* ``Func(name, args)`` is a scalar SQL function of values (``Round(x)``, ``Round(x, 2)``,
  ``Floor``, ``Ceil``, ``Trunc``, ``Sign``, and ``Int32(x)`` etc. for ``CAST(x AS INTEGER)``), with
  DuckDB's semantics on DOUBLE (:data:`FUNCS`); NaN (NULL) in, NaN out.  Its first argument may
  bind variables (as a numerator does), the others are closed values (a constant precision).
* ``Cmp`` is 1 where the comparison holds and 0 otherwise; both sides must be bound.
* ``AggSum(group, e)`` sums ``e`` over every loop variable not in ``group``.
* ``Lift(x, e)`` (printed ``(x ^= e)``) binds ``x`` to the value of ``e`` with value 1; if ``x`` is
  already bound it is 1 where ``x`` equals ``e`` and 0 otherwise.
* ``Extreme('max'|'min', x, ref)`` is the largest/smallest key ``x`` among the nonzero entries of
  the map slice ``ref`` (NaN when the slice is empty): best bid and best ask.  ``Extreme(.., n)``
  (printed ``Max(x, ref, n)``) is the ``n``-th largest/smallest, the last when there are fewer;
  ``Max(x, ref, n rows)`` ranks rows, each key counted as often as its (nonnegative) value: the
  key of the ``n``-th row (a row count per key: the price of the n-th best order), the last key
  when the values add up to fewer than ``n``.

A statement's target keys are either bound by the trigger's arguments or are output variables of
its right-hand side; ``:=`` replaces the target slice (entries the right-hand side does not produce
become 0), ``+=`` adds to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Type = Literal["float", "int", "string"]
TYPES: tuple[str, ...] = ("float", "int", "string")
"""``string`` (SQL ``VARCHAR``): a stream column or map key of instrument symbols, held as the
ids of :mod:`ddms.io.symbols` and shown as names; compared by equality only."""
STRING_ALIASES: tuple[str, ...] = ("string", "varchar", "char", "text")
CMP_OPS: tuple[str, ...] = ("=", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class Const:
    value: float
    type: Type = "float"


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class MapRef:
    name: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Add:
    terms: tuple[Expr, ...]


@dataclass(frozen=True)
class Mul:
    factors: tuple[Expr, ...]


@dataclass(frozen=True)
class Neg:
    expr: Expr


@dataclass(frozen=True)
class Div:
    num: Expr
    den: Expr


@dataclass(frozen=True)
class Mod:
    num: Expr
    den: Expr


@dataclass(frozen=True)
class Func:
    """A scalar SQL function of values (:data:`FUNCS`): not linear, so it is computed where its
    argument is a value (per row inside an aggregate, or over aggregate results at the output),
    never distributed over a delta."""

    name: str
    args: tuple[Expr, ...]


FUNCS: dict[str, tuple[int, ...]] = {
    "round": (1, 2), "floor": (1,), "ceil": (1,), "trunc": (1, 2), "sign": (1,),
    "int8": (1,), "int16": (1,), "int32": (1,), "int64": (1,), "int128": (1,),
    "abs": (1,), "nullif": (2,), "coalesce": (2,), "greatest": (2,), "least": (2,), "if": (3,), "mul": (2,),
}
"""Function name -> the numbers of arguments it takes.  ``round``: half away from zero
(``Round(x, d)``: ``round(x * 10^d) / 10^d``, for ``d < 0`` ``round(x / 10^-d) * 10^-d``, as
DuckDB's ROUND on DOUBLE); ``trunc`` alike toward zero; ``sign`` -1, 0 or 1; ``intN``
(``CAST(x AS INTEGER)`` and the other integer casts) rounds half to even, as DuckDB's cast of a
DOUBLE, and is NaN (NULL) out of the type's range (where DuckDB raises a conversion error).

``abs``, ``nullif``, ``coalesce``, ``greatest`` and ``least`` (two arguments; SQL's longer lists
nest) follow DuckDB on NULL, not "NULL in, NULL out": ``Nullif(a, b)`` is NULL where ``a = b``,
``Coalesce(a, b)`` is ``b`` where ``a`` is NULL, ``Greatest``/``Least`` skip a NULL argument (NULL
only when both are).  ``If(t, a, b)`` is ``a`` where the 0/1 test ``t`` is nonzero, else ``b``
(a CASE whose condition holds a CASE).  ``Mul(a, b)`` is SQL's ``a * b``: NULL where either is NULL,
``0 * NULL`` included, unlike M3's product, where a zero factor drops the term (``0 * NULL`` is 0
there, as a delta and the CASE forms' indicators need); the translator uses it for SQL's ``*`` where
one factor can be NULL and the other 0 (``COUNT(*) * MIN(volume)`` over an empty book is NULL, and so
is a row's ``volume * NULLIF(price, 100)`` at volume 0, which COUNT then skips).  The translator writes the
others as a CASE (a sum of guarded branches, which factorises like any sum) and uses the function
only where an argument holds a CASE itself: the CASE form copies each argument into several
branches and tests, so nesting it grows the program
exponentially (:meth:`ddms.sql.translate._Translator.sugar`)."""

NULL_SKIPPING: frozenset[str] = frozenset({"nullif", "coalesce", "greatest", "least", "if"})
"""The functions of :data:`FUNCS` that are not "NULL in, NULL out" (see above)."""

INT_BITS: dict[str, int] = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "int128": 128}


@dataclass(frozen=True)
class Cmp:
    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class AggSum:
    group: tuple[str, ...]
    expr: Expr


@dataclass(frozen=True)
class Lift:
    var: str
    expr: Expr


@dataclass(frozen=True)
class Extreme:
    """The largest/smallest key ``var`` of the nonzero entries of the slice ``ref``; with ``n``
    above 1, the ``n``-th largest/smallest (select by rank: the cut of a top-N), the last key of
    that order when the slice holds fewer than ``n``.  NaN when the slice is empty.  With
    ``rows``, each key counts as often as its value (row counts): the key of the ``n``-th row."""

    kind: Literal["max", "min"]
    var: str
    ref: MapRef
    n: int = 1
    rows: bool = False   # rank by rows: each key counts as often as its value (printed ``n rows``)


Expr = Const | Var | MapRef | Add | Mul | Neg | Div | Mod | Func | Cmp | AggSum | Lift | Extreme


@dataclass(frozen=True)
class Column:
    name: str
    type: Type


@dataclass(frozen=True)
class Source:
    """Where a stream's events come from: ``FROM FILE 'path' LINE DELIMITED adaptor(k := 'v', ...)``.
    ``adaptor`` is ``orderbook`` or ``csv``; ``path`` is relative to the program file."""

    path: str
    adaptor: str
    options: tuple[tuple[str, str], ...] = ()

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class Stream:
    name: str
    columns: tuple[Column, ...]
    source: Source | None = None
    kind: Literal["STREAM", "TABLE"] = "STREAM"


@dataclass(frozen=True)
class MapDecl:
    """A map ``name(value_type)[keys]``.  ``ordered`` asks for a range-cumulative index on the
    last key column (prefix sums and threshold search in O(log n)).  ``init`` (maps without keys
    only) is the value before any event: an expression over the maps, read on an empty database
    in declaration order, e.g. ``Max(P, BID_CNT[P])`` is NaN (SQL NULL) on an empty book.

    ``extreme`` (``"max"``/``"min"``/``"both"``, one-key maps only, never with ``ordered``) states
    that the program reads the map only by that extreme (or both) of its nonzero keys and at bound
    keys, and writes it only by ``+=``: no range sums, ranks or loops (decided by
    :mod:`ddms.m3.extremes`).  Its storage then need not keep the keys in order: a hash table of the
    values plus a heap of the keys per extreme (:mod:`ddms.storage.extheap`).  Printed
    ``EXTREME MAX``, ``EXTREME MIN``, ``EXTREME MAX MIN``."""

    name: str
    value_type: Type
    keys: tuple[Column, ...]
    ordered: bool = False
    init: Expr | None = None
    extreme: Literal["max", "min", "both"] | None = None

    @property
    def extremes(self) -> tuple[str, ...]:
        """The extremes an EXTREME map is read by: ``("max",)``, ``("min",)``, ``("max", "min")``
        or none."""
        return {"max": ("max",), "min": ("min",), "both": ("max", "min")}.get(self.extreme or "", ())


@dataclass(frozen=True)
class Limit:
    """The rows a view shows, cut at read time: a SQL ``ORDER BY .. [LIMIT n] [OFFSET m]`` on a
    view (a price ladder: the 5 best levels as rows), ``ROW_NUMBER() OVER (PARTITION BY ..) <= n``
    per partition, or the keys alone (``SELECT DISTINCT``).  The view's maps hold every group,
    maintained by deltas as for any grouped view; its rows are the nonzero keys of ``rows`` (the
    count of input rows per group, so a group whose values are all 0 is still a row, as in SQL),
    each with its value columns (0 where a value map lacks the key), ordered by ``order`` --
    ``(column, descending)`` pairs over the row ``[key..., value...]``, NULL (NaN) last as DuckDB
    orders it, ties broken by the whole key -- and per value of the ``partition`` key columns
    the ranks ``offset .. offset + n - 1`` kept (all from ``offset`` on when ``n`` is None).
    ``keys_only``: the rows are the keys, without values (the query's map is then ``rows``).  Printed after the query as
    ``ROWS OF map [PARTITION BY i, ..] [ORDER BY i [DESC], ..] [LIMIT n] [OFFSET m] [KEYS]``."""

    rows: str
    order: tuple[tuple[int, bool], ...] = ()
    n: int | None = None
    offset: int = 0
    partition: tuple[int, ...] = ()
    keys_only: bool = False
    ranks: tuple[str, ...] = ()
    """Maps that read the rows by rank instead of sorting every group: when the view is ordered by
    key columns alone (partitioned by the others), map ``j`` counts the rows per partition and
    first ``j + 1`` ORDER BY columns, a range tree on its last key, so the n rows shown are n
    selects by rank walked down the levels: O(n log g) a read (a price ladder: one level; the n
    best orders by price, id: two)."""

    def cut(self, rows: list[tuple[tuple, tuple]]) -> list[tuple[tuple, tuple]]:
        """The rows shown, in order, from ``(key, values)`` pairs of every group present.
        O(g log g) for g groups."""
        def rank(row: tuple[tuple, tuple]) -> tuple:
            full = (*row[0], *row[1])
            out: list = [full[i] for i in self.partition]
            for i, desc in self.order:
                x = float(full[i])
                out.append((1, 0.0) if x != x else (0, -x if desc else x))
            return (*out, *row[0])
        ordered = sorted(rows, key=rank)
        if self.n is None and not self.offset:
            return ordered
        seen: dict[tuple, int] = {}
        out = []
        for row in ordered:
            part = tuple(row[0][i] for i in self.partition)
            r = seen.get(part, 0)
            seen[part] = r + 1
            if r >= self.offset and (self.n is None or r < self.offset + self.n):
                out.append(row)
        return out


@dataclass(frozen=True)
class Query:
    """A view: the map ``map`` (one value per key), or, with ``columns``, several value columns
    ``(column name, map)`` over maps with the same keys (a SQL SELECT with several aggregates:
    one row per key present in any of them), whose key columns are named ``keys``; ``map`` is
    then the first column's map.  Printed ``DECLARE QUERY V[K..] := (C1 := M1, C2 := M2);``."""

    name: str
    map: str
    keys: tuple[str, ...] = ()
    columns: tuple[tuple[str, str], ...] = ()
    limit: Limit | None = None

    @property
    def maps(self) -> tuple[str, ...]:
        """The maps the view exposes (its value columns, in order)."""
        return tuple(m for _, m in self.columns) if self.columns else (self.map,)

    @property
    def exposed(self) -> tuple[str, ...]:
        """Every map the view reads when it is read: its value maps and the row counts of its
        :class:`Limit` (kept as tables with change logs, never stored as trees alone)."""
        return tuple(dict.fromkeys((*self.maps, *((self.limit.rows,) if self.limit is not None else ()))))


@dataclass(frozen=True)
class Statement:
    target: MapRef
    op: Literal["+=", ":="]
    expr: Expr


@dataclass(frozen=True)
class Trigger:
    sign: Literal["+", "-"]
    stream: str
    args: tuple[str, ...]
    statements: tuple[Statement, ...]


@dataclass(frozen=True)
class Program:
    streams: tuple[Stream, ...]
    maps: tuple[MapDecl, ...]
    queries: tuple[Query, ...]
    triggers: tuple[Trigger, ...]

    def map(self, name: str) -> MapDecl:
        for m in self.maps:
            if m.name == name:
                return m
        raise KeyError(name)

    def stream(self, name: str) -> Stream:
        for s in self.streams:
            if s.name == name:
                return s
        raise KeyError(name)

    def trigger(self, sign: str, stream: str) -> Trigger | None:
        for t in self.triggers:
            if t.sign == sign and t.stream == stream:
                return t
        return None


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct subexpressions of ``e`` (cost O(1))."""
    match e:
        case Add(terms):
            return terms
        case Mul(factors):
            return factors
        case Func(_, args):
            return args
        case Neg(x) | AggSum(_, x) | Lift(_, x):
            return (x,)
        case Div(a, b) | Mod(a, b) | Cmp(_, a, b):
            return (a, b)
        case Extreme(_, _, ref):
            return (ref,)
    return ()


def with_children(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``e`` with its direct subexpressions (in :func:`children` order) replaced by ``kids``: the
    one place a structural rewrite rebuilds a node, so a pass states only the cases it changes
    (cost O(1) plus the tuple)."""
    match e:
        case Add():
            return Add(tuple(kids))
        case Mul():
            return Mul(tuple(kids))
        case Neg():
            return Neg(kids[0])
        case AggSum(group, _):
            return AggSum(group, kids[0])
        case Lift(var, _):
            return Lift(var, kids[0])
        case Div():
            return Div(kids[0], kids[1])
        case Mod():
            return Mod(kids[0], kids[1])
        case Func(name, _):
            return Func(name, tuple(kids))
        case Cmp(op, _, _):
            return Cmp(op, kids[0], kids[1])
        case Extreme(kind, var, _, n, rows):
            return Extreme(kind, var, kids[0], n, rows)
    return e


def walk(e: Expr):
    """Every subexpression of ``e``, pre-order."""
    yield e
    for c in children(e):
        yield from walk(c)


def node_vars(e: Expr) -> tuple[str, ...]:
    """The variables node ``e`` itself names (not its children's): a variable, map keys, an
    AggSum's group, a lifted or Max/Min variable.  O(1)."""
    match e:
        case Var(name):
            return (name,)
        case MapRef(_, keys):
            return keys
        case AggSum(group, _):
            return tuple(group)
        case Lift(var, _) | Extreme(_, var, _):
            return (var,)
    return ()


def variables(e: Expr) -> set[str]:
    """Every variable named anywhere in ``e``, free or aggregated over.  O(size of e)."""
    return {v for x in walk(e) for v in node_vars(x)}


def map_reads(e: Expr) -> set[str]:
    """Names of the maps an expression reads."""
    return {x.name for x in walk(e) if isinstance(x, MapRef)}
