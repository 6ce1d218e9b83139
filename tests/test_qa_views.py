"""The outside checks' views (``tests/qa_views.py`` of qa32, ``tests/qa33_views.py`` of qa33),
one family each: every view compiles alone under its name and equals DuckDB running the same
SELECT after every line of tiny (qa33's: every 3rd by default, 50 views' DuckDB queries a line)
and on hypothesis streams (deletes, executions, repeated ids, ties at the extremes, empty books),
through the interpreter (default) and one shared engine program per family (``-m slow``: its
numba compile costs minutes cold); the per-symbol views over streams of several symbols; the
rejected ones with ``file:line:column`` and a caret.  What only one check asks is in
``test_qa33_views.py``.

Regressions found by qa32: a NATURAL (or ASOF) JOIN compiled as a cross join (a wrong answer,
now rejected at the join); a non-aggregate expression over the columns of one-row aggregate
subqueries in FROM (``WITH bb AS (SELECT MAX(price) AS p FROM bids), ba AS (...) SELECT (bb.p +
ba.p) / 2 AS mid FROM bb, ba``) was refused with a caret inside the WITH query.  By qa33: see
``test_qa33_views.py``.  By qa34: NOT over a condition that can be NULL was 1 minus it, so
counted the NULL rows in (``broker_id NOT IN (1, NULL)``, ``NOT (price > (SELECT MIN(price) FROM
asks) AND ...)`` over an empty ask book, ``NULLIF(..) NOT IN (..)``, ``HAVING NOT (x / NULLIF(..)
> 20)``), and so did ``x NOT IN (SELECT y ...)`` where x or a y is NULL (now x <> ALL (...));
``EXISTS (SELECT MAX(..) FROM .. WHERE ..)`` counted the rows where it is one row, always;
``BETWEEN SYMMETRIC`` was read as a plain BETWEEN; refused but legal: a scalar subquery over
one-row WITH queries (``(SELECT p FROM best)``), ``WHERE rn = k`` past k = 1, IN-lists in HAVING.
By qa35: a column list after an alias (``FROM (...) AS x(volume, price)``, ``WITH lv(p, v)``) was
dropped, the subquery's own names read (swapped: a wrong answer), and OFFSET without LIMIT in a
subquery was dropped (every row kept): both now refused at the part.  By qa36: a VARCHAR symbol
column read as its id (a hash) where SQL orders or computes with it (``ORDER BY symbol``,
``MIN(symbol)``, ``symbol = 1``, ``symbol IN (SELECT broker_id ...)``, ``symbol + 0``): now refused
at the part (``symbol_rejected``, compiled over ``SYM_HEADER``).  By qa37 (no wrong answer found in ~230
views): legal shapes made exact -- IS [NOT] DISTINCT FROM, IS [NOT] TRUE/FALSE, GROUP BY (), WHERE
NULL, a LEFT JOIN of a one-row aggregate ON TRUE, rn > m, OFFSET without LIMIT in a subquery,
DENSE_RANK() <= n -- and its ~200 views split: ``qa37`` (the default suite's ~16) and ``qa37_more``
(all of them, ``-m slow`` only: a Family with ``slow``).  By qa39 (~100 views, see
``qa39_views.py`` and ``test_qa39_runtime.py``): split the same way, ``qa39`` and ``qa39_more``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import qa33_views as qa33
import qa34_views as qa34
import qa35_views as qa35
import qa36_views as qa36
import qa37_views as qa37
import qa39_views as qa39
import qa_views as qa32
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import coalesce_sums
from test_sql_minmax import HEADER, line
from test_sql_outside import SymbolRun
from test_symbols import LINE as SYMBOL_LINE
from test_symbols import SYM_HEADER
from viewcheck import REAL_RUNS, check_lines, check_real_data, stream_lines

from ddms.compiler import compile_sql
from ddms.errors import SqlError
from ddms.runtime.engine import Engine


@dataclass(frozen=True)
class Family:
    """One outside check's views: each as the statement compiled (``views``, ``symbols``) and as
    the SELECT DuckDB runs (``duck``, ``symbol_duck``); the rejected ones; how often its tiny
    run compares (the default suite's cost); whether its rejections all point past column 1."""

    views: dict[str, str]
    duck: dict[str, str]
    symbols: dict[str, str]
    symbol_duck: dict[str, str]
    rejected: dict[str, tuple[str, str]]
    tiny_every: int
    caret_inside: bool   # every rejection points past the statement's first column (qa33 wrote them so)
    symbol_rejected: dict[str, tuple[str, str]] = field(default_factory=dict)   # over SYM_HEADER's streams
    slow: bool = False   # every test of the family under -m slow only (its default-suite cost)


def _select(sql: str) -> str:
    return sql.split(" AS ", 1)[1] if sql.upper().startswith("CREATE VIEW") else sql


def _split(name: str, m) -> dict[str, Family]:
    """A family of module ``m`` (``VIEWS``, ``SYMBOL_VIEWS``, ``REJECTED``, and the few views the
    default suite runs, ``DEFAULT``/``SYMBOL_DEFAULT``) as two: ``name``, those few and the
    rejections, and ``name_more``, every view, under ``-m slow`` only."""
    def pick(views: dict[str, str], names) -> dict[str, str]:
        return {n: views[n] for n in names}

    def fam(views: dict[str, str], symbols: dict[str, str], **kw) -> Family:
        return Family({n: m.as_view(n, s) for n, s in views.items()}, views,
                      {n: m.as_view(n, s) for n, s in symbols.items()}, symbols, **kw)

    return {name: fam(pick(m.VIEWS, m.DEFAULT), pick(m.SYMBOL_VIEWS, m.SYMBOL_DEFAULT), rejected=m.REJECTED,
                      tiny_every=3, caret_inside=True),
            f"{name}_more": fam(m.VIEWS, m.SYMBOL_VIEWS, rejected={}, tiny_every=1, caret_inside=True, slow=True)}


FAMILIES = {
    "qa32": Family(qa32.VIEWS, {n: _select(s) for n, s in qa32.VIEWS.items()}, qa32.SYMBOL_VIEWS,
                   qa32.SYMBOL_VIEWS, qa32.REJECTED, 1, False),
    "qa33": Family({n: qa33.as_view(n, s) for n, s in qa33.VIEWS.items()}, qa33.VIEWS,
                   {n: qa33.as_view(n, s) for n, s in qa33.SYMBOL_VIEWS.items()}, qa33.SYMBOL_VIEWS,
                   qa33.REJECTED, 3, True),
    "qa34": Family({n: qa34.as_view(n, s) for n, s in qa34.VIEWS.items()}, qa34.VIEWS,
                   {n: qa34.as_view(n, s) for n, s in qa34.SYMBOL_VIEWS.items()}, qa34.SYMBOL_VIEWS,
                   qa34.REJECTED, 3, True),
    "qa35": Family({n: qa35.as_view(n, s) for n, s in qa35.VIEWS.items()}, qa35.VIEWS,
                   {n: qa35.as_view(n, s) for n, s in qa35.SYMBOL_VIEWS.items()}, qa35.SYMBOL_VIEWS,
                   qa35.REJECTED, 3, True),
    "qa36": Family({n: qa36.as_view(n, s) for n, s in qa36.VIEWS.items()}, qa36.VIEWS,
                   {n: qa36.as_view(n, s) for n, s in qa36.SYMBOL_VIEWS.items()}, qa36.SYMBOL_VIEWS,
                   qa36.REJECTED, 3, True, qa36.SYMBOL_REJECTED),
    # qa37's ~200 and qa39's ~130 views: a few in the default suite, all of them (minutes through the
    # interpreter) under -m slow only
    **_split("qa37", qa37),
    **_split("qa39", qa39),
}
REJECTED = [(f, name) for f, fam in FAMILIES.items() for name in fam.rejected]
SYMBOL_REJECTED = [(f, name) for f, fam in FAMILIES.items() for name in fam.symbol_rejected]


def _script(header: str, views: dict[str, str]) -> str:
    return header + "\n;\n".join(views.values()) + "\n;"


@pytest.fixture(scope="module", params=[pytest.param(f, marks=pytest.mark.slow) if fam.slow else f
                                        for f, fam in FAMILIES.items()])
def family(request) -> Family:
    return FAMILIES[request.param]


@pytest.fixture(scope="module")
def program(family):
    prog = compile_sql(_script(HEADER, family.views), "<qa>").program
    assert [q.name for q in prog.queries] == list(family.views)
    return prog


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # numba compiles once; each test's engine loads it from the cache
    return program


@pytest.fixture(scope="module")
def symbol_program(family):
    prog = compile_sql(_script(SYM_HEADER, family.symbols), "<qa-symbols>").program
    assert [q.name for q in prog.queries] == list(family.symbols)
    return prog


def test_each_view_compiles_alone_under_its_name(family) -> None:
    for name, sql in {**family.views, **family.symbols}.items():
        header = SYM_HEADER if name in family.symbols else HEADER
        assert [q.name for q in compile_sql(header + sql + "\n;", "v.sql").program.queries] == [name]


@pytest.mark.parametrize("fam,name", REJECTED)
def test_rejected_with_location_and_caret(fam: str, name: str) -> None:
    _rejected(fam, HEADER, *FAMILIES[fam].rejected[name])


@pytest.mark.parametrize("fam,name", SYMBOL_REJECTED)
def test_symbol_rejected_with_location_and_caret(fam: str, name: str) -> None:
    """Over streams with a VARCHAR ``symbol`` column: what reads a symbol as a number."""
    _rejected(fam, SYM_HEADER, *FAMILIES[fam].symbol_rejected[name])


def _rejected(fam: str, header: str, sql: str, reason: str) -> None:
    text = header + "-- a comment\n" + sql + ";"
    with pytest.raises(SqlError) as e:
        compile_sql(text, "v.sql")
    head, src, caret = str(e.value).split("\n")[:3]
    file, ln, col, why = head.split(":", 3)
    assert file == "v.sql" and reason in why, str(e.value)
    code = text.splitlines()[int(ln) - 1]
    assert code.strip() and src.strip() == code.strip(), str(e.value)
    pad = src.index(code.strip()) - (len(code) - len(code.lstrip()))
    assert caret.index("^") == pad + int(col) - 1, str(e.value)
    assert int(col) > 1 or not FAMILIES[fam].caret_inside, str(e.value)   # under the part, not the start


def _tiny() -> list[str]:
    return shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()


def test_tiny(family, program) -> None:
    check_lines(program, _tiny(), family.duck, every=family.tiny_every)


@pytest.mark.slow
def test_tiny_every_line(family, program) -> None:
    check_lines(program, _tiny(), family.duck)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_interpreter_matches_duckdb(family, program, stream: list[tuple]) -> None:
    check_lines(program, stream_lines(stream), family.duck)


@pytest.mark.slow
def test_engine_tiny_every_line(family, engine_program) -> None:
    check_lines(engine_program, _tiny(), family.duck, interp=False, engine=Engine(engine_program), check_state=True)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(family, engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), family.duck, interp=False, engine=Engine(engine_program),
                check_state=True)


class _Run(SymbolRun):
    """tests/test_sql_outside's multi-symbol runner over a family's per-symbol views."""

    def __init__(self, program, duck: dict[str, str], *, interp: bool, engine: bool) -> None:
        super().__init__(program, interp=interp, engine=engine)
        self.queries = {n: coalesce_sums(s) for n, s in duck.items()}


def _apply(run: _Run, stream: list[tuple]) -> None:
    for i, (sym, (a, oid, v, p)) in enumerate(stream):
        run.line(sym, f"{i},{oid},{a},{v},{p}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_interpreter(family, symbol_program, stream) -> None:
    _apply(_Run(symbol_program, family.symbol_duck, interp=True, engine=False), stream)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(SYMBOL_LINE, min_size=1, max_size=30))
def test_symbol_views_engine(family, symbol_program, stream) -> None:
    _apply(_Run(symbol_program, family.symbol_duck, interp=False, engine=True), stream)


@pytest.mark.slow
@pytest.mark.parametrize("run", REAL_RUNS)
def test_real_data(family, engine_program, run: str) -> None:
    """Every view against DuckDB after every line of standard and every 1,000th of big."""
    check_real_data(engine_program, family.duck, run)
