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
class Arith:
    """``left op right`` with op one of ``+ - * /``."""

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


SqlExpr = Col | Lit | Arith | Minus | Agg | Scalar
Cond = Compare | And | Or | Not | Bool


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
class Select:
    items: tuple[Item, ...]
    sources: tuple[FromItem, ...]
    where: Cond | None
    group: tuple[Col, ...]
    text: str = field(default="", compare=False)
    offset: int = field(default=0, compare=False)  # where the statement starts in the file


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


def has_agg(e: SqlExpr) -> bool:
    """Whether a select-list expression contains an aggregate function."""
    match e:
        case Agg():
            return True
        case Arith(_, a, b):
            return has_agg(a) or has_agg(b)
        case Minus(x):
            return has_agg(x)
    return False


def has_scalar(e: SqlExpr) -> bool:
    """Whether an expression reads a scalar subquery (outside aggregates' arguments)."""
    match e:
        case Scalar():
            return True
        case Arith(_, a, b):
            return has_scalar(a) or has_scalar(b)
        case Minus(x):
            return has_scalar(x)
    return False
