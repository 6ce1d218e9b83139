"""M3 text: printer/parser round trip, golden canonical forms, located syntax errors, and the
verifier's rules."""

from __future__ import annotations

import ast

import pytest
from conftest import EXAMPLES, REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from ddms.backend.codegen import generate
from ddms.errors import DdmsError, M3SyntaxError, ProgramError
from ddms.m3 import (
    Add,
    AggSum,
    Cmp,
    Const,
    Div,
    Extreme,
    Lift,
    MapRef,
    Mod,
    Mul,
    Neg,
    Var,
    parse_program,
    print_expr,
    print_program,
    verify,
)
from ddms.m3.parser import parse_expr

PROGRAMS = [EXAMPLES / "vwap.m3", EXAMPLES / "sobi.m3", REPO / "tests" / "programs" / "shapes.m3"]


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_round_trip(path) -> None:
    program = verify(parse_program(path.read_text(), str(path)))
    text = print_program(program)
    assert parse_program(text) == program
    assert print_program(parse_program(text)) == text


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_golden_canonical_text(path) -> None:
    """The canonical text is stable: a change to the printer shows up as a diff here."""
    golden = REPO / "tests" / "golden" / (path.stem + ".m3")
    text = print_program(parse_program(path.read_text()))
    if not golden.exists():
        golden.write_text(text)
        pytest.fail(f"wrote missing golden file {golden}; review and commit it")
    assert text == golden.read_text()


NAMES = st.sampled_from(["A", "B", "P", "Q"])
MAPS = st.sampled_from([("M0", 0), ("M1", 1), ("M2", 2)])
leaf = st.one_of(
    st.builds(lambda v: Const(float(v), "int"), st.integers(-5, 5)),
    st.builds(lambda v: Const(v, "float"), st.floats(-1e6, 1e6, allow_nan=False).filter(lambda x: x != int(x))),
    st.builds(Var, NAMES),
    st.builds(lambda m, ks: MapRef(m[0], tuple(ks[:m[1]])), MAPS, st.lists(NAMES, min_size=2, max_size=2)),
)
exprs = st.recursive(leaf, lambda sub: st.one_of(
    st.builds(lambda xs: Add(tuple(xs)), st.lists(sub, min_size=2, max_size=3)),
    st.builds(lambda xs: Mul(tuple(xs)), st.lists(sub, min_size=2, max_size=3)),
    st.builds(Neg, sub),
    st.builds(Div, sub, sub),
    st.builds(Mod, sub, sub),
    st.builds(Cmp, st.sampled_from(["=", "!=", "<", "<=", ">", ">="]), sub, sub),
    st.builds(lambda g, x: AggSum(tuple(g), x), st.lists(NAMES, max_size=2, unique=True), sub),
    st.builds(Lift, NAMES, sub),
    st.builds(lambda k, v, n: Extreme(k, v, MapRef("M1", (v,)), n), st.sampled_from(["max", "min"]), NAMES,
              st.sampled_from([1, 1, 2, 10])),
), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(exprs)
def test_expression_round_trip(e) -> None:
    assert parse_expr(print_expr(e)) == e


@pytest.mark.parametrize("text,where,reason", [
    ("DECLARE MAP X(float)[];\nON + S(A) {\n  X[] += A * ;\n}", ":3:14", "expected an expression"),
    ("DECLARE MAP X(double)[];", ":1:15", "unknown type 'double'"),
    ("CREATE STREAM S(A float)", ":1:25", "expected ';'"),
    ("DECLARE MAP X(float)[];\nON + S(A) { X[] += {A ~ 1}; }", ":2:23", "unexpected character '~'"),
    ("DECLARE MAP X(float)[];\nON * S(A) {}", ":2:4", "expected + or -"),
])
def test_syntax_errors_point_at_the_problem(text: str, where: str, reason: str) -> None:
    with pytest.raises(M3SyntaxError) as err:
        parse_program(text, "prog.m3")
    msg = str(err.value)
    assert f"prog.m3{where}" in msg and reason in msg and "^" in msg
    assert isinstance(err.value, DdmsError)


STREAM = "CREATE STREAM S(A float, B float);\n"


@pytest.mark.parametrize("body,reason", [
    ("DECLARE MAP X(float)[];\nON + S(A, B) { Y[] += A; }", "unknown target map Y"),
    ("DECLARE MAP X(float)[K: float];\nON + S(A, B) { X[A, B] += A; }", "X has 1 keys, not 2"),
    ("DECLARE MAP X(float)[];\nON + S(A, B) { X[] += C; }", "variable C is used before it is bound"),
    ("DECLARE MAP X(float)[K: float];\nON + S(A, B) { X[K] += A; }", "target key K is bound neither"),
    ("DECLARE MAP X(float)[K: float];\nDECLARE MAP Y(float)[];\nON + S(A, B) { Y[] += X[K]; }",
     "loop variable(s) K are not keys of Y"),
    ("DECLARE MAP X(float)[];\nON + S(A) { X[] += A; }", "stream S has 2 columns"),
    ("DECLARE MAP X(float)[];\nON + T(A, B) { X[] += A; }", "unknown stream T"),
    ("DECLARE MAP X(float)[];\nDECLARE MAP X(float)[];", "map X is declared twice"),
    ("DECLARE MAP X(float)[] ORDERED;", "ORDERED but has no key"),
    ("DECLARE MAP X(float)[K: float];\nDECLARE MAP Y(float)[];\nON + S(A, B) { Y[] += X[K] + A; }",
     "terms of a sum bind different variables"),
    ("DECLARE MAP X(float)[];\nDECLARE QUERY Q := Z;", "query Q refers to unknown map Z"),
    ("DECLARE MAP X(float)[K: float];\nDECLARE MAP Y(float)[];\nON + S(A, B) { Y[] += {X[K] > 1}; }",
     "a comparison operand must not bind variables"),
])
def test_verifier_rejects(body: str, reason: str) -> None:
    with pytest.raises(ProgramError) as err:
        verify(parse_program(STREAM + body))
    assert reason in str(err.value)


def test_codegen_is_pure_and_content_addressed() -> None:
    program = parse_program((EXAMPLES / "vwap.m3").read_text())
    a, b = generate(program), generate(parse_program(print_program(program)))
    assert a.source == b.source and a.digest == b.digest
    assert any("threshold sum" in line for line in a.plan)
    assert not any("loop over all" in line for line in a.plan), "VWAP must not loop over price levels"


def _names_used_but_not_bound(source: str, prefixes: tuple[str, ...]) -> dict[str, set[str]]:
    """Per generated function, the local names with these prefixes it reads but neither takes
    as a parameter nor assigns (numba would refuse to compile it)."""
    out = {}
    for f in ast.parse(source).body:
        if isinstance(f, ast.FunctionDef):
            names = [n for n in ast.walk(f) if isinstance(n, ast.Name) and n.id.startswith(prefixes)]
            bound = {a.arg for a in f.args.args} | {n.id for n in names if isinstance(n.ctx, ast.Store)}
            loose = {n.id for n in names if isinstance(n.ctx, ast.Load)} - bound
            if loose:
                out[f.name] = loose
    return out


@pytest.mark.parametrize("fillers", [9, 10, 11, 12, 20])
def test_threshold_boundaries_stay_with_their_users(fillers: int) -> None:
    """A trigger at the statement limit computes its shared threshold boundaries and hoisted
    probes in the function that uses them (16 statements once split a boundary from its user)."""
    maps = "".join(f"DECLARE MAP S{i}(float)[];\n" for i in range(fillers))
    stmts = "".join(f"  S{i}[] += VOLUME * {i + 1};\n" for i in range(fillers))
    program = parse_program(
        "CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);\n"
        "DECLARE MAP TOT(float)[];\nDECLARE MAP VOL(float)[P: float] ORDERED;\n"
        "DECLARE MAP PV(float)[P: float] ORDERED;\nDECLARE MAP A(float)[];\nDECLARE MAP B(float)[];\n"
        + maps + "DECLARE QUERY A := A;\nDECLARE QUERY B := B;\n"
        "ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {\n  TOT[] += VOLUME;\n  VOL[PRICE] += VOLUME;\n"
        "  PV[PRICE] += PRICE * VOLUME;\n" + stmts
        + "  A[] := AggSum([], PV[P1] * {0.25 * TOT[] > AggSum([], VOL[P2] * {P2 > P1})});\n"
        "  B[] := AggSum([], VOL[P1] * {0.25 * TOT[] > AggSum([], VOL[P2] * {P2 > P1})});\n}\n")
    source = generate(program).source
    assert "threshold_cut" in source
    assert _names_used_but_not_bound(source, ("cut", "h_")) == {}
