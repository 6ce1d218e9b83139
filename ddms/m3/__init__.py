"""M3 trigger programs: the IR (``ir``), its text form (``printer``/``parser``), the verifier
(``verify``) and a pure-Python reference interpreter (``interpreter``) used as an oracle."""

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
    Query,
    Source,
    Statement,
    Stream,
    Trigger,
    Var,
)
from ddms.m3.parser import parse_program
from ddms.m3.printer import print_expr, print_program
from ddms.m3.verify import verify

__all__ = [
    "Add", "AggSum", "Cmp", "Column", "Const", "Div", "Expr", "Extreme", "Func", "Lift", "MapDecl", "MapRef",
    "Mod", "Mul", "Neg", "Program", "Query", "Source", "Statement", "Stream", "Trigger", "Var",
    "parse_program", "print_expr", "print_program", "verify",
]
