"""A small, neutral SQL syntax tree: what the front end (``parse``) hands to ``translate``.

sqlglot is imported by ``ddms.sql.parse`` only; everything after the front end sees these frozen
dataclasses instead, so the subset the compiler accepts is spelled out here, in one place.
Each node keeps ``text``, the SQL it came from, so later passes can quote it in errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ddms.m3.ir import Stream


@dataclass(frozen=True)
class Col:
    """``table.name`` (``table`` None when unqualified)."""

    table: str | None
    name: str
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Lit:
    value: float
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Str:
    """A string literal (``'BTCUSDT'``).  Its only meaning here is a symbol name compared with a
    ``VARCHAR`` column (``=``, ``<>``, ``IN``), which ``translate`` turns into that symbol's id
    (:func:`ddms.io.symbols.symbol_id`); anywhere else it is refused there, where the column
    types are known."""

    value: str
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Arith:
    """``left op right`` with op one of ``+ - * / %``."""

    op: str
    left: SqlExpr
    right: SqlExpr
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Minus:
    expr: SqlExpr
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Agg:
    """``SUM(arg)``, ``COUNT(*)`` / ``COUNT(arg)`` (arg None for ``*``), ``AVG(arg)``, ``MIN(arg)``,
    ``MAX(arg)``."""

    func: str
    arg: SqlExpr | None
    text: str = field(default="", compare=False)
    distinct: bool = False   # COUNT(DISTINCT x), SUM(DISTINCT x), AVG(DISTINCT x)
    filter: Cond | None = None   # AGG(x) FILTER (WHERE c): the aggregate over the rows where c holds


@dataclass(frozen=True)
class Call:
    """A scalar function of values: ``ROUND(x[, d])``, ``FLOOR``, ``CEIL``/``CEILING``, ``TRUNC(x[,
    d])``, ``SIGN``, and ``CAST(x AS INTEGER)`` (``int32``; ``int8`` .. ``int128`` for the other
    integer types), named as :data:`ddms.m3.ir.FUNCS` names them; a precision ``d`` is an integer
    constant."""

    name: str
    args: tuple[SqlExpr, ...]
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Scalar:
    """A scalar subquery ``(SELECT agg FROM ...)`` used as a value."""

    select: Select
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Compare:
    """``left op right``; op one of ``= != < <= > >=``."""

    op: str
    left: SqlExpr
    right: SqlExpr
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class And:
    items: tuple[Cond, ...]
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Or:
    items: tuple[Cond, ...]
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Not:
    cond: Cond
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Bool:
    value: bool
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Null:
    """The SQL ``NULL`` literal."""

    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Case:
    """``CASE WHEN c1 THEN v1 ... ELSE d END`` (no ELSE: NULL); ``COALESCE``, ``NULLIF``, ``ABS``,
    ``GREATEST`` and ``LEAST`` are written as one by the front end, which keeps the function and
    its arguments in ``fn`` (``Call("greatest", (a, b))``; longer lists nest): the CASE names each
    argument several times, so the translator takes the function instead where an argument holds
    a CASE itself (:meth:`ddms.sql.translate._Translator.sugar`)."""

    whens: tuple[tuple[Cond, SqlExpr], ...]
    default: SqlExpr
    text: str = field(default="", compare=False)
    fn: Call | None = field(default=None, compare=False)


@dataclass(frozen=True)
class IsNull:
    """``x IS NULL`` (``IS NOT NULL`` is its ``Not``)."""

    expr: SqlExpr
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Exists:
    """``EXISTS (SELECT ...)``; ``x IN (SELECT y ...)`` arrives as ``EXISTS`` with ``y = x`` added
    to the subquery's conditions (``match``: the pair, kept apart until translation because
    ``x`` is read in the enclosing query)."""

    select: Select
    match: tuple[SqlExpr, SqlExpr] | None = None
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Quantified:
    """``x op ALL (SELECT e ...)`` (``all``) or ``x op ANY/SOME (SELECT e ...)``, SQL's
    three-valued rules kept: ALL over no rows is true, a NULL ``e`` makes ALL not true unless
    another row makes it false; ``NOT`` of one is the other with the negated operator."""

    op: str
    expr: SqlExpr
    select: Select
    all: bool
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class InList:
    """``x IN (c1, c2, ...)`` over distinct constants: numbers, or symbol names (strings) when
    ``x`` is a ``VARCHAR`` column."""

    expr: SqlExpr
    values: tuple[float | str, ...]
    text: str = field(default="", compare=False)


SqlExpr = Col | Lit | Str | Arith | Minus | Agg | Scalar | Null | Case | Call
Cond = Compare | And | Or | Not | Bool | IsNull | Exists | InList | Quantified


@dataclass(frozen=True)
class FromTable:
    name: str
    alias: str
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class FromSelect:
    select: Select
    alias: str
    text: str = field(default="", compare=False)


FromItem = FromTable | FromSelect


@dataclass(frozen=True)
class Item:
    """One SELECT list entry: an expression and its output name (alias, or the column name)."""

    expr: SqlExpr
    name: str
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class TopN:
    """The first ``n`` rows of a subquery in FROM by ``key`` (descending when ``desc``), per
    value of the ``partition`` columns: ``ORDER BY key DESC LIMIT n`` (Materialize's shape) or
    ``ROW_NUMBER() OVER (PARTITION BY .. ORDER BY key DESC) AS rn`` filtered ``rn <= n`` by the
    enclosing WHERE (Feldera's shape), which the front end folds into this one node.  ``ties``:
    the ORDER BY columns after ``key`` (column, descending), which break its ties (``ORDER BY
    price DESC, id``: the n best single orders).  ``n`` is -1 for no bound (``rn > m``, OFFSET m
    without LIMIT: every row past the first m)."""

    key: Col
    desc: bool
    n: int
    partition: tuple[Col, ...] = ()
    text: str = field(default="", compare=False)
    ties: tuple[tuple[Col, bool], ...] = ()
    rank: bool = False   # RANK() <= n: every row with fewer than n rows before it (ties all kept)
    offset: int = 0      # LIMIT n OFFSET m, rn BETWEEN m + 1 AND m + n: the ranks m + 1 .. m + n
    dense: bool = False  # DENSE_RANK() <= n (with ``rank``): the rows at the n first distinct keys


@dataclass(frozen=True)
class RowCut:
    """A view's own ``ORDER BY cols [DESC] [LIMIT n] [OFFSET m]``: the rows it shows, in that
    order (a price ladder: ``... GROUP BY price ORDER BY price DESC LIMIT 5``).  ``order`` names
    output columns (by alias or column); ``n`` None without LIMIT."""

    order: tuple[tuple[Col, bool], ...]
    n: int | None
    offset: int = 0
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Select:
    items: tuple[Item, ...]
    sources: tuple[FromItem, ...]
    where: Cond | None
    group: tuple[SqlExpr, ...]   # columns; in a view's own SELECT also expressions (GROUP BY price / 100)
    text: str = field(default="", compare=False)
    offset: int = field(default=0, compare=False)  # where the statement starts in the file
    having: Cond | None = None
    top: TopN | None = None   # a subquery in FROM cut to its first rows (ORDER BY .. LIMIT)
    rows: RowCut | None = None   # a view's own ORDER BY / LIMIT / OFFSET
    distinct: bool = False       # SELECT DISTINCT (read as GROUP BY every selected column)


@dataclass(frozen=True)
class View:
    """A top-level SELECT: the view is named by its single aggregate output (upper case)."""

    name: str
    select: Select


@dataclass(frozen=True)
class Script:
    """A parsed .sql file: stream declarations (as M3 streams), then views."""

    streams: tuple[Stream, ...]
    views: tuple[View, ...]
    source: str
    text: str


def parts(e: SqlExpr | Cond) -> tuple:
    """The direct subexpressions and subconditions of ``e`` (not entering subqueries)."""
    match e:
        case Arith(_, a, b) | Compare(_, a, b):
            return (a, b)
        case Minus(x) | Not(x) | IsNull(x) | InList(x):
            return (x,)
        case Call(_, args):
            return args
        case Quantified(_, x):
            return (x,)
        case And(items) | Or(items):
            return items
        case Case(whens, default, _, fn) if fn is not None:   # the arguments once (the CASE repeats them)
            return fn.args
        case Case(whens, default):
            return (*(x for w in whens for x in w), default)
    return ()


def has_agg(e: SqlExpr | Cond) -> bool:
    """Whether a select-list expression contains an aggregate function."""
    return isinstance(e, Agg) or any(has_agg(x) for x in parts(e))


def has_scalar(e: SqlExpr | Cond) -> bool:
    """Whether an expression reads a scalar subquery (outside aggregates' arguments)."""
    return isinstance(e, Scalar) or (not isinstance(e, Agg) and any(has_scalar(x) for x in parts(e)))


def one_row(sel: Select) -> bool:
    """Whether ``sel`` is a row of plain expressions over a FROM that is exactly one row whatever
    its input: it has sources, each an aggregate subquery without GROUP BY or a cut (``(SELECT
    MAX(price) AS p FROM bids) bb``, also as a WITH query), no WHERE or GROUP BY filters or
    splits their product, and no aggregate in its SELECT list (SQL refuses plain columns beside
    aggregates).  Each expression over such columns is one value, as over scalar subqueries."""
    return bool(sel.sources) and sel.where is None and not sel.group and not any(
        has_agg(it.expr) for it in sel.items) and all(
        isinstance(s, FromSelect) and not s.select.group and s.select.top is None
        and any(has_agg(it.expr) for it in s.select.items) for s in sel.sources)
