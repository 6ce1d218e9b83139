"""Products with a factor that can be NULL (NaN), compiled: 0 * NULL is 0, as in the interpreter.

Regression found by bigprog38 on qa36's one engine program (``MAX_OF_NULL_SUMS``): a SUM over a
CASE without ELSE lowers to ``s + n * (0 / 0)`` (``n`` counts the rows that make it NULL), and a
view over that SUM's groups binds it as the key of an ordered map (``K ^= ...``, read by MAX).
M3's product drops a term with a zero factor, so the interpreter reads ``n = 0`` times NULL as 0;
the generated code multiplied in IEEE (0 * NaN = NaN) and the B+-tree refused the NaN key at run
time (``ValueError: btree map key is NaN``).  Generated products with a factor that can be NaN now
join it through ``rt.mul0`` (:meth:`ddms.backend.codegen._Codegen._product_code`).

Each view is checked against DuckDB after every line of tiny and of hypothesis streams (empty
books, brokers whose rows all make the CASE NULL), through the interpreter and the engine (one
small program: well under a minute of numba compile cold)."""

from __future__ import annotations

import pytest
import qa36_views as qa36
from conftest import shared_file
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sql_minmax import HEADER, line
from viewcheck import check_lines, stream_lines

from ddms.compiler import compile_sql
from ddms.runtime.engine import Engine

_NULL_SUM = "SELECT broker_id, SUM(CASE WHEN price > 100 THEN volume END) AS v FROM bids GROUP BY broker_id"

VIEWS = {
    "MAX_OF_NULL_SUMS": qa36.VIEWS["MAX_OF_NULL_SUMS"],
    # the same SUM as a group key (a hash map), under a range test, and cut by a top-N
    "NULL_SUM_GROUPS": f"SELECT x.v, COUNT(*) AS n FROM ({_NULL_SUM}) x GROUP BY x.v",
    "NULL_SUM_RANGE": f"SELECT COUNT(*) AS n FROM ({_NULL_SUM}) x WHERE x.v > 10",
    "NULL_SUM_TOP": f"{_NULL_SUM} ORDER BY v DESC, broker_id LIMIT 2",
    # NULLIF and AVG of a CASE: other NULL-producing sums under MIN/MAX
    "MIN_OF_NULLIF_SUMS": "SELECT MIN(x.v) AS m, MAX(x.v) AS x FROM (SELECT broker_id, SUM(NULLIF(volume, 10)) AS v "
                          "FROM bids GROUP BY broker_id) x",
    "MAX_AVG_CASE": "SELECT MAX(x.a) AS m FROM (SELECT broker_id, AVG(CASE WHEN price > 100 THEN volume END) AS a "
                    "FROM asks GROUP BY broker_id) x",
    # a NULL MAX per broker (a real NULL, not a SUM's 0): MIN and COUNT skip it
    "MIN_OF_NULL_MAXES": "SELECT MIN(x.m) AS m, COUNT(x.m) AS c FROM (SELECT broker_id, MAX(CASE WHEN volume > 20 "
                         "THEN price END) AS m FROM bids GROUP BY broker_id) x",
}

SCRIPT = HEADER + "\n;\n".join(f"CREATE VIEW {n} AS {s}" for n, s in VIEWS.items()) + "\n;"

# every broker's bids at or below 100 (its SUM of the CASE over only NULLs), then one above
NULL_ONLY = [("B", 1, 10, 99), ("B", 2, 5, 100), ("B", 3, 7, 1), ("B", 4, 3, 150), ("D", 4, 0, 0),
             ("E", 1, 10, 0), ("S", 5, 20, 101), ("B", 6, 30, 102)]


@pytest.fixture(scope="module")
def program():
    return compile_sql(SCRIPT, "<null-products>").program


@pytest.fixture(scope="module")
def engine_program(program):
    Engine(program)   # numba compiles once; each test's engine loads it from the cache
    return program


def test_generated_code_guards_the_null_product(program) -> None:
    """The key of MAX_OF_NULL_SUMS's ordered map is computed with ``mul0``, not ``*``."""
    from ddms.backend.codegen import generate
    src = generate(program).source
    rt = next(ln for ln in src.splitlines() if ln.startswith("from ddms.backend.rt import "))
    assert "mul0(" in src and "mul0" in rt.split(" import ", 1)[1].replace(" ", "").split(",")


def test_null_only_stream(engine_program) -> None:
    """Brokers whose every bid makes the CASE NULL (the failing shape), then rows that do not;
    DuckDB's rows hold NULLs (the check reaches them)."""
    assert check_lines(engine_program, stream_lines(NULL_ONLY), VIEWS, engine=Engine(engine_program),
                       check_state=True) > 0


def test_tiny_every_line(engine_program) -> None:
    lines = shared_file("data", "orderbook", "tiny", "finance.csv").read_text().splitlines()
    check_lines(engine_program, lines, VIEWS, engine=Engine(engine_program), check_state=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(line, min_size=1, max_size=30))
def test_engine_matches_duckdb(engine_program, stream: list[tuple]) -> None:
    check_lines(engine_program, stream_lines(stream), VIEWS, engine=Engine(engine_program), check_state=True)
