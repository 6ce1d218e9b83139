"""SQL views over CSV streams with their own schemas (``LINE DELIMITED CSV``): the run-time
adaptor (:mod:`ddms.io.csv`), the merge of several files (:mod:`ddms.io.inputs`), and
views checked against DuckDB running the same SQL on the tables the files describe, after every
line (reference interpreter, hypothesis streams with deletions) and through ``ddms run``."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import duckdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import coalesce_sums, rows_of, same_view

from ddms.cli import main
from ddms.compiler import compile_sql
from ddms.errors import InputError, ProgramError
from ddms.io.csv import CsvParser
from ddms.io.inputs import open_program_input
from ddms.m3.interpreter import Interpreter

SCHEMA = """
CREATE TABLE ITEMS(item INT, weight FLOAT) FROM FILE 'items.csv' LINE DELIMITED CSV;
CREATE STREAM R(a INT, b INT, x FLOAT) FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := '|', deletions := 'true');
CREATE STREAM S(b INT, c FLOAT) FROM FILE 's.csv' LINE DELIMITED CSV;
"""

VIEWS = {
    "join_sum": "SELECT SUM(r.x * s.c) AS js FROM R r, S s WHERE r.b = s.b",
    "group_count": "SELECT r.a, COUNT(*) AS n FROM R r GROUP BY r.a",
    "table_join": "SELECT r.a, SUM(r.x * i.weight) AS w FROM R r, ITEMS i WHERE i.item = r.b GROUP BY r.a",
    "above_avg": "SELECT SUM(s.c) AS big FROM S s WHERE s.c > (SELECT AVG(r.x) FROM R r)",
    "ineq_join": "SELECT COUNT(*) AS pairs FROM R r, S s WHERE r.x < s.c AND r.b = s.b",
}

ALIAS = {"join_sum": "JS", "group_count": "N", "table_join": "W", "above_avg": "BIG", "ineq_join": "PAIRS"}


def _files(rng: random.Random, n_r: int, n_s: int) -> dict[str, list[str]]:
    """Random tables; R's deletions delete rows inserted before (multiset semantics)."""
    items = [f"{i},{rng.choice([0.5, 1, 2.5])}" for i in range(1, 5)]
    live: list[str] = []
    r = []
    for _ in range(n_r):
        if live and rng.random() < 0.3:
            row = live.pop(rng.randrange(len(live)))
            r.append("0|" + row)
        else:
            row = f"{rng.randint(1, 3)}|{rng.randint(1, 5)}|{rng.choice([1.5, 2, 3, 10])}"
            live.append(row)
            r.append("1|" + row)
    s = [f"{rng.randint(1, 5)},{rng.choice([1, 2, 2.5, 12])}" for _ in range(n_s)]
    return {"items.csv": items, "r.csv": r, "s.csv": s}


def _tables(files: dict[str, list[str]], upto: dict[str, int]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = {"ITEMS": [], "R": [], "S": []}
    for line in files["items.csv"][:upto.get("items.csv", 10**9)]:
        out["ITEMS"].append(tuple(float(v) for v in line.split(",")))
    for line in files["r.csv"][:upto.get("r.csv", 10**9)]:
        kind, *vals = line.split("|")
        row = tuple(float(v) for v in vals)
        if kind == "1":
            out["R"].append(row)
        else:
            out["R"].remove(row)
    for line in files["s.csv"][:upto.get("s.csv", 10**9)]:
        out["S"].append(tuple(float(v) for v in line.split(",")))
    return out


def _duck(tables: dict[str, list[tuple]], sql: str):
    con = duckdb.connect()
    con.execute("CREATE TABLE ITEMS(item INT, weight DOUBLE)")
    con.execute("CREATE TABLE R(a INT, b INT, x DOUBLE)")
    con.execute("CREATE TABLE S(b INT, c DOUBLE)")
    for name, rows in tables.items():
        if rows:
            marks = ",".join("?" * len(rows[0]))
            con.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
    return rows_of(con.execute(coalesce_sums(sql)).fetchall())


def _write(tmp: Path, files: dict[str, list[str]], views: list[str]) -> Path:
    for name, lines in files.items():
        (tmp / name).write_text("".join(x + "\n" for x in lines))
    sql = tmp / "views.sql"
    sql.write_text(SCHEMA + "".join(VIEWS[v] + ";\n" for v in views))
    return sql


def _interleaved_prefixes(files: dict[str, list[str]]) -> list[dict[str, int]]:
    """After each merged line: how many lines of each file were consumed (tables first, then the
    streams line by line in declaration order: the documented merge order)."""
    out, upto = [], {"items.csv": 0, "r.csv": 0, "s.csv": 0}
    for _ in files["items.csv"]:
        upto["items.csv"] += 1
        out.append(dict(upto))
    for j in range(max(len(files["r.csv"]), len(files["s.csv"]))):
        for f in ("r.csv", "s.csv"):
            if j < len(files[f]):
                upto[f] += 1
                out.append(dict(upto))
    return out


SETTINGS = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
_PROGRAM: dict = {}


def _program(tmp_path: Path, files):
    sql = _write(tmp_path, files, list(VIEWS))
    if "p" not in _PROGRAM:
        _PROGRAM["p"] = compile_sql(sql.read_text(), str(sql)).program
    return sql, _PROGRAM["p"]


@SETTINGS
@given(seed=st.integers(0, 10**6), n_r=st.integers(0, 25), n_s=st.integers(0, 12))
def test_csv_views_match_duckdb_after_every_merged_line(tmp_path, seed, n_r, n_s):
    files = _files(random.Random(seed), n_r, n_s)
    sql, program = _program(tmp_path, files)
    inputs = open_program_input(program, sql.parent)
    interp = Interpreter(program)
    prefixes = _interleaved_prefixes(files)
    pos = 0
    for batch in inputs.batches(lambda p: [p.read_bytes()[i:i + 7] for i in range(0, p.stat().st_size, 7)]):
        assert batch.first_line == pos + 1
        lines = batch.line
        for ln in range(batch.first_line, batch.last_line + 1):
            for k in np.flatnonzero(lines == ln):
                name = inputs.names[batch.rel[k]]
                arity = len(next(s for s in program.streams if s.name == name).columns)
                interp.apply("+" if batch.sign[k] > 0 else "-", name, tuple(float(v) for v in batch.cols[k, :arity]))
            tables = _tables(files, prefixes[ln - 1])
            for name, text in VIEWS.items():
                want = _duck(tables, text)
                got = interp.view(ALIAS[name])
                assert same_view(got, want), f"{name} after merged line {ln}: {got} != DuckDB {want}"
        pos = batch.last_line
    assert pos == len(prefixes)


def test_ddms_run_on_csv_streams_equals_duckdb(tmp_path, capsys):
    files = _files(random.Random(7), 400, 150)
    sql = _write(tmp_path, files, ["join_sum", "group_count", "table_join"])
    assert main(["run", str(sql), "--json", "--every", "101"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    prefixes = _interleaved_prefixes(files)
    assert [o["line"] for o in out] == list(range(101, len(prefixes) + 1, 101)) + [len(prefixes)]
    for o in out:
        tables = _tables(files, prefixes[o["line"] - 1])
        for name in ("join_sum", "group_count", "table_join"):
            want = _duck(tables, VIEWS[name])
            got = o["views"][ALIAS[name]]
            if isinstance(want, dict):
                got = {tuple(r[:-1]): r[-1] for r in got}
            assert same_view(math.nan if got is None else got, want), (name, o["line"], got, want)


def test_bad_csv_line_names_file_line_and_reason(tmp_path, capsys):
    files = _files(random.Random(3), 20, 10)
    files["s.csv"][4] = "3,abc"
    sql = _write(tmp_path, files, ["join_sum"])
    assert main(["run", str(sql), "--json"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 's.csv'}:5: column C (float): not a number: 'abc'" in err
    # --skip-bad: the line is skipped and counted, everything else applied
    assert main(["run", str(sql), "--json", "--skip-bad"]) == 0
    assert "1 bad lines skipped" in capsys.readouterr().err


def test_csv_parser_strict_and_errors():
    program = compile_sql("CREATE STREAM T(a INT, b FLOAT) FROM FILE 't.csv' LINE DELIMITED CSV;"
                          "SELECT SUM(a * b) AS v FROM T;").program
    p = CsvParser.for_stream(program.streams[0], source="t.csv")
    b = p.feed(b"1,2.5\n\n3,")
    assert b.first_line == 1 and b.last_line == 2 and b.line.tolist() == [1]
    b = p.feed(b"4\n5,x\n6,1\n")
    assert b.line.tolist() == [3] and b.cols.tolist() == [[3.0, 4.0]]
    assert isinstance(b.error, InputError) and b.error.line == 4 and "column B (float)" in str(b.error)
    with pytest.raises(InputError):
        p.feed(b"7,1\n")
    p = CsvParser.for_stream(program.streams[0], source="t.csv")
    b = p.feed(b"1.5,2\n")
    assert "column A (int): not a number: '1.5'" in str(b.error)
    p = CsvParser.for_stream(program.streams[0], source="t.csv")
    assert "expected 2 fields (A, B), got 3" in str(p.feed(b"1,2,3\n").error)
    p = CsvParser.for_stream(program.streams[0], source="t.csv")
    b = p.feed(b"1,2")
    assert len(b) == 0
    b = p.close()
    assert b.cols.tolist() == [[1.0, 2.0]] and b.last_line == 1
    fields = compile_sql("CREATE STREAM T(a INT, b FLOAT) FROM FILE 't.csv' LINE DELIMITED CSV (fields := '|');"
                         "SELECT SUM(a * b) AS v FROM T;").program
    assert CsvParser.for_stream(fields.streams[0], source="t.csv").feed(b"2|3.5\n").cols.tolist() == [[2.0, 3.5]]
    with pytest.raises(ProgramError, match="unknown csv option 'sep'"):
        bad = compile_sql("CREATE STREAM T(a INT) FROM FILE 't.csv' LINE DELIMITED CSV (sep := ';');"
                          "SELECT SUM(a) AS v FROM T;").program
        CsvParser.for_stream(bad.streams[0], source="t.csv")


@pytest.mark.parametrize("line,reason", [
    (b"1,nan\n", "column B (float): not a number: 'nan'"),
    (b"1,inf\n", "column B (float): not a number: 'inf'"),
    (b"1,1e400\n", "column B (float): out of range: '1e400'"),
    (b"1,-1e400\n", "column B (float): out of range: '-1e400'"),
    (b"9007199254740993,1\n", "column A (int): out of range (|value| > 2**53): '9007199254740993'"),
    (b"-9007199254740993,1\n", "column A (int): out of range (|value| > 2**53): '-9007199254740993'"),
])
def test_csv_numbers_checked_like_the_orderbook_adaptor(line, reason):
    """NaN, infinities and integers float64 cannot carry exactly are bad lines (file:line: reason:
    'text'), as in the order-book adaptor; the good lines around them are kept, in both the
    pyarrow path (a block) and the line-by-line path (skip_bad)."""
    program = compile_sql("CREATE STREAM T(a INT, b FLOAT) FROM FILE 't.csv' LINE DELIMITED CSV;"
                          "SELECT SUM(a * b) AS v FROM T;").program
    p = CsvParser.for_stream(program.streams[0], source="t.csv")
    b = p.feed(b"2,0.5\n" + line + b"3,1\n")
    assert b.cols.tolist() == [[2.0, 0.5]]
    assert str(b.error) == f"t.csv:2: {reason}: {line.decode().strip()!r}"
    p = CsvParser.for_stream(program.streams[0], source="t.csv", skip_bad=True)
    b = p.feed(b"2,0.5\n" + line + b"9007199254740992,1\n")
    assert b.cols.tolist() == [[2.0, 0.5], [2.0**53, 1.0]] and b.error is None
    assert p.bad_lines == 1 and reason in str(p.bad_samples[0])
