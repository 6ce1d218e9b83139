"""The ``ddms`` command line: ``ddms run`` (JSON lines, --every, --skip-bad, errors, the demo) and
``ddms compile``.

Most tests call ``ddms.cli.main`` in-process (compiled programs are shared within the process);
a few run ``python -m ddms.cli`` in a subprocess to check the real entry point and exit codes.
Expected view values come from the reference interpreter, not from the engine.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import importlib.util
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddms.cli import main
from ddms.io.orderbook import parse_orderbook_text
from ddms.m3 import parse_program
from ddms.m3.interpreter import Interpreter

ROOT = Path(__file__).resolve().parents[1]
VWAP_M3 = ROOT / "examples" / "m3" / "vwap.m3"
SOBI_M3 = ROOT / "examples" / "m3" / "sobi.m3"
TINY = Path(__file__).resolve().parents[2] / "shared" / "data" / "orderbook" / "tiny" / "finance.csv"

SAMPLE = """\
1,1,B,100,10000
2,2,S,50,238500
3,3,B,10,9000
4,4,B,30,11000
5,1,E,40,0
6,5,T,1,1
7,3,D,0,0
8,6,B,20,10500
9,4,F,0,0
10,7,B,5,12000
"""

BOOK_M3 = Path(__file__).parent / "programs" / "book.m3"  # shared with test_runtime.py


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------

def run_cli(capsys, *argv: str) -> tuple[int, list[dict], str]:
    """``main(argv)`` -> (exit code, parsed JSON stdout lines, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def vwap_oracle(text: str) -> dict[int, float]:
    """VWAP after every line of ``text`` by the reference interpreter."""
    prog = parse_program(VWAP_M3.read_text())
    interp = Interpreter(prog)
    batch = parse_orderbook_text(text, skip_bad=True)
    out, i = {}, 0
    for line in range(1, batch.last_line + 1):
        while i < len(batch) and batch.line[i] == line:
            if batch.rel[i] == 0:
                interp.apply("+" if batch.sign[i] > 0 else "-", "BIDS", tuple(map(float, batch.cols[i])))
            i += 1
        out[line] = interp.view("VWAP")
    return out


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9)


# ------------------------------------------------------------------------------------------
# ddms run: output format and checkpoints
# ------------------------------------------------------------------------------------------

def test_run_json_prints_final_views_once(tmp_path, capsys):
    data = write(tmp_path, "book.csv", SAMPLE)
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json")
    assert code == 0
    assert len(lines) == 1
    assert set(lines[0]) == {"line", "views"}
    assert lines[0]["line"] == 10
    assert set(lines[0]["views"]) == {"VWAP"}
    assert close(lines[0]["views"]["VWAP"], vwap_oracle(SAMPLE)[10])
    assert re.search(r"(compiled|loaded) vwap\.m3 in \d+\.\d\d s", err) and "10 lines" in err


def test_run_says_whether_it_compiles_or_loads(tmp_path, capsys, monkeypatch):
    """``ddms run`` announces a compile when numba's cache lacks the program (it takes a minute
    or more) and a load when it has it; after one run it has it."""
    from ddms.backend.cache import compiled_before
    from ddms.backend.codegen import generate
    from ddms.runtime.engine import load_program
    prog = write(tmp_path, "vw.m3", VWAP_M3.read_text().replace("0.25", "0.375"))   # a program of its own
    data = write(tmp_path, "book.csv", SAMPLE)
    digest = generate(load_program(prog))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "empty"))
    assert not compiled_before(digest)
    monkeypatch.undo()
    for _ in range(2):
        before = compiled_before(digest)
        code, _, err = run_cli(capsys, "run", str(prog), "--data", str(data), "--json")
        assert code == 0, err
        if before:
            assert "loading vw.m3, compiled before" in err and "loaded vw.m3 in" in err, err
        else:
            assert "compiling vw.m3 with numba" in err and "compiled vw.m3 in" in err, err
        assert compiled_before(digest)



@pytest.mark.parametrize("every, expected", [
    (3, [3, 6, 9, 10]),
    (5, [5, 10]),       # 5 divides 10: no duplicate at the end
    (10, [10]),
    (1, list(range(1, 11))),
    (25, [10]),         # never reached: printed once at the end
])
def test_run_every(tmp_path, capsys, every, expected):
    data = write(tmp_path, "book.csv", SAMPLE)
    code, lines, _ = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json",
                             "--every", str(every))
    assert code == 0
    assert [d["line"] for d in lines] == expected
    want = vwap_oracle(SAMPLE)
    for d in lines:
        assert close(d["views"]["VWAP"], want[d["line"]]), d


def test_run_every_across_input_chunks(tmp_path, capsys):
    """A file larger than one read chunk (4 MiB): checkpoints stay exact across chunk borders."""
    n = 200_000
    text = "".join(f"{i},{i},{'B' if i % 2 else 'S'},{i % 7 + 1},{10000 + i % 50}\n" for i in range(1, n + 1))
    assert len(text) > 1 << 22
    data = write(tmp_path, "big.csv", text)
    code, lines, _ = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json",
                             "--every", "30000")
    assert code == 0
    assert [d["line"] for d in lines] == [*range(30000, n + 1, 30000), n]


def test_run_text_output(tmp_path, capsys):
    data = write(tmp_path, "book.csv", SAMPLE)
    code = main(["run", str(VWAP_M3), "--data", str(data), "--every", "5"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert [line.split(":")[0] for line in out.splitlines()] == ["line 5", "line 10"]
    assert "VWAP=" in out


def test_run_grouped_views_rows_sorted_and_nan_as_null(tmp_path, capsys):
    prog = BOOK_M3
    text = ("1,17,B,10,100\n"      # broker 7
            "2,12,B,5,103\n"       # broker 2
            "3,22,B,4,101\n"       # broker 2, other price
            "4,27,B,1,99\n"        # broker 7, other price
            "5,31,B,2,100\n"       # broker 1
            "6,17,F,0,0\n6,12,D,0,0\n6,22,D,0,0\n6,27,D,0,0\n6,31,D,0,0\n")   # all gone: 0/0
    data = write(tmp_path, "book.csv", text)
    code, lines, _ = run_cli(capsys, "run", str(prog), "--data", str(data), "--json", "--every", "5")
    assert code == 0
    assert [d["line"] for d in lines] == [5, 10]
    v5 = lines[0]["views"]
    assert list(v5) == ["BID_VOL", "ASK_VOL", "BID_N", "BID_AVG", "BROKER_VOL", "BP_VOL"]  # declared order
    assert v5["BID_AVG"] == 22 / 5
    assert v5["BID_N"] == 5 and isinstance(v5["BID_N"], int)
    assert v5["BROKER_VOL"] == [[1, 2.0], [2, 9.0], [7, 11.0]]
    assert all(isinstance(r[0], int) for r in v5["BROKER_VOL"])       # int keys print as ints
    assert v5["BP_VOL"] == [[1, 100.0, 2.0], [2, 101.0, 4.0], [2, 103.0, 5.0],
                            [7, 99.0, 1.0], [7, 100.0, 10.0]]
    v10 = lines[1]["views"]
    assert v10 == {"BID_VOL": 0.0, "ASK_VOL": 0.0, "BID_AVG": None, "BROKER_VOL": [], "BP_VOL": [], "BID_N": 0}


def test_run_nan_inside_rows_prints_null(tmp_path, capsys):
    prog = write(tmp_path, "ratio.m3", """
CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float);
DECLARE MAP V(float)[B: int];
DECLARE MAP N(float)[B: int];
DECLARE MAP R(float)[B: int];
DECLARE QUERY R := R;
ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) {
  V[BROKER_ID] += VOLUME;
  N[BROKER_ID] += PRICE;
  R[BROKER_ID] := V[BROKER_ID] / N[BROKER_ID];
}
""")
    data = write(tmp_path, "book.csv", "1,3,B,6,0\n2,4,B,4,2\n")   # broker 3: 6 / 0
    code, lines, _ = run_cli(capsys, "run", str(prog), "--data", str(data), "--json")
    assert code == 0
    assert lines == [{"line": 2, "views": {"R": [[3, None], [4, 2.0]]}}]


@pytest.mark.skipif(not TINY.exists(), reason="shared tiny order book not present")
def test_run_tiny_final_vwap(capsys):
    code, lines, _ = run_cli(capsys, "run", str(VWAP_M3), "--data", str(TINY), "--json")
    assert code == 0
    assert lines == [{"line": 100, "views": {"VWAP": 491070000.0}}]
    code, lines, _ = run_cli(capsys, "run", str(VWAP_M3), "--data", str(TINY), "--json", "--every", "10")
    assert code == 0
    assert [d["line"] for d in lines] == list(range(10, 101, 10))
    assert lines[-1]["views"]["VWAP"] == 491070000.0
    want = vwap_oracle(TINY.read_text())
    for d in lines:
        assert close(d["views"]["VWAP"], want[d["line"]]), d


@pytest.mark.skipif(not TINY.exists(), reason="shared tiny order book not present")
def test_run_tiny_subprocess():
    r = subprocess.run([sys.executable, "-m", "ddms.cli", "run", str(VWAP_M3), "--data", str(TINY), "--json"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == [{"line": 100, "views": {"VWAP": 491070000.0}}]
    assert "100 lines" in r.stderr


@pytest.mark.skipif(not TINY.exists(), reason="shared tiny order book not present")
def test_run_leaves_out_unused_imports():
    """A short ``ddms run`` of an order-book program imports neither rich (progress bar) nor
    pyarrow (csv streams) nor the feed and backtest commands: ~0.2 s of start time."""
    code = ("import sys; from ddms.cli import main; main(['run', sys.argv[1], '--data', sys.argv[2]]); "
            "print(' '.join(sys.modules))")
    r = subprocess.run([sys.executable, "-c", code, str(VWAP_M3), str(TINY)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.splitlines()[-1].split())
    assert not {m for m in loaded if m.split(".")[0] in ("rich", "pyarrow", "replay")
                or m.startswith("ddms.feeds")}


def test_run_unrecognized_argument_usage_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        main(["run", str(VWAP_M3), "--bogus"])
    err = capsys.readouterr().err
    assert "{run,compile,sample-data,serve-feed,monitor,backtest,convert}" in err
    assert "unrecognized arguments: --bogus" in err


# ------------------------------------------------------------------------------------------
# ddms run: bad input
# ------------------------------------------------------------------------------------------

BAD_AT_6 = SAMPLE.splitlines(keepends=True)[:5] + ["6,9,B,lots,100\n"] + SAMPLE.splitlines(keepends=True)[6:]


def test_run_bad_line_exit_2_names_file_line_reason(tmp_path, capsys):
    data = write(tmp_path, "bad.csv", "".join(BAD_AT_6))
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json")
    assert code == 2
    assert [d["line"] for d in lines] == [5]       # the views as of the line before the bad one
    assert close(lines[0]["views"]["VWAP"], vwap_oracle(SAMPLE)[5])
    assert f"{data}:6:" in err
    assert "volume is not a number" in err
    assert "6,9,B,lots,100" in err
    assert "Traceback" not in err


def test_run_bad_line_with_every_prints_lines_before_it(tmp_path, capsys):
    data = write(tmp_path, "bad.csv", "".join(BAD_AT_6))
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json", "--every", "2")
    assert code == 2
    assert [d["line"] for d in lines] == [2, 4, 5]
    want = vwap_oracle(SAMPLE)
    assert all(close(d["views"]["VWAP"], want[d["line"]]) for d in lines)
    assert f"{data}:6:" in err


@pytest.mark.parametrize("every", [2, 3])
def test_run_bad_line_right_after_a_checkpoint(tmp_path, capsys, every):
    lines_in = SAMPLE.splitlines(keepends=True)
    data = write(tmp_path, "bad.csv", "".join(lines_in[:6] + ["1,2,3\n"] + lines_in[7:]))   # bad line 7
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json",
                               "--every", str(every))
    assert code == 2 and f"{data}:7:" in err and "wrong field count" in err
    assert [d["line"] for d in lines] == sorted(set(range(every, 7, every)) | {6})


def test_run_bad_line_subprocess_exit_code(tmp_path):
    data = write(tmp_path, "bad.csv", "".join(BAD_AT_6))
    r = subprocess.run([sys.executable, "-m", "ddms.cli", "run", str(VWAP_M3), "--data", str(data),
                        "--json", "--every", "2"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 2
    assert [json.loads(x)["line"] for x in r.stdout.splitlines()] == [2, 4, 5]
    assert f"{data}:6: volume is not a number" in r.stderr


def test_run_skip_bad_counts_and_continues(tmp_path, capsys):
    good = SAMPLE.splitlines(keepends=True)
    text = "".join(good[:3] + ["garbage\n"] + good[3:7] + ["7,8,Buy,1,1\n"] + good[7:])
    data = write(tmp_path, "bad.csv", text)
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json", "--skip-bad")
    assert code == 0
    assert len(lines) == 1 and lines[0]["line"] == 12       # lines count the skipped ones
    assert close(lines[0]["views"]["VWAP"], vwap_oracle(SAMPLE)[10])
    assert "2 bad lines skipped" in err
    assert f"{data}:4:" in err and f"{data}:9:" in err       # samples name file and line
    assert "unknown action 'Buy'" in err


def test_run_skip_bad_with_every(tmp_path, capsys):
    good = SAMPLE.splitlines(keepends=True)
    text = "".join(good[:3] + ["\n"] + good[3:])             # blank line 4
    data = write(tmp_path, "bad.csv", text)
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json",
                               "--skip-bad", "--every", "4")
    assert code == 0
    assert [d["line"] for d in lines] == [4, 8, 11]
    want = vwap_oracle(SAMPLE)
    assert [d["views"]["VWAP"] for d in lines] == pytest.approx([want[3], want[7], want[10]])
    assert "1 bad lines skipped" in err and "empty line" in err


def test_run_empty_file_warns(tmp_path, capsys):
    """An empty file runs (the views of empty books) but says so: rarely what was meant."""
    data = write(tmp_path, "empty.csv", "")
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json")
    assert code == 0
    assert [d["line"] for d in lines] == [0]
    assert "warning: empty.csv holds no input lines" in err


# ------------------------------------------------------------------------------------------
# ddms run: missing files and bad arguments
# ------------------------------------------------------------------------------------------

def test_run_missing_program(tmp_path, capsys):
    data = write(tmp_path, "book.csv", SAMPLE)
    missing = tmp_path / "nope.m3"
    code, lines, err = run_cli(capsys, "run", str(missing), "--data", str(data))
    assert code == 2 and lines == []
    assert str(missing) in err and "no such program file" in err
    assert err.startswith("ddms: error:")


def test_run_missing_data(tmp_path, capsys):
    missing = tmp_path / "nope.csv"
    code, lines, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(missing), "--json")
    assert code == 2 and lines == []
    assert str(missing) in err and "no such data file" in err


def test_run_program_without_data_file(capsys):
    code, _, err = run_cli(capsys, "run", str(VWAP_M3))
    assert code == 2
    assert "--data" in err


def test_run_sql_program_is_refused(tmp_path, capsys):
    sql = write(tmp_path, "q.sql", "SELECT SUM(volume) FROM bids;")
    code, _, err = run_cli(capsys, "run", str(sql), "--data", str(write(tmp_path, "b.csv", SAMPLE)))
    assert code == 2 and "q.sql" in err


def test_run_missing_program_subprocess(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ddms.cli", "run", str(tmp_path / "nope.m3")],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 2
    assert "nope.m3: no such program file" in r.stderr and "Traceback" not in r.stderr


def test_compile_missing_program(tmp_path, capsys):
    missing = tmp_path / "nope.m3"
    code = main(["compile", str(missing)])
    _, err = capsys.readouterr()
    assert code == 2 and str(missing) in err


def test_compile_syntax_error_exit_2(tmp_path, capsys):
    bad = write(tmp_path, "bad.m3", "DECLARE MAP X(float)[;\n")
    code = main(["compile", str(bad)])
    _, err = capsys.readouterr()
    assert code == 2
    assert f"{bad}:1:" in err


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["run", "--every", "x"])
    assert e.value.code == 2


# ------------------------------------------------------------------------------------------
# ddms compile
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [VWAP_M3, SOBI_M3], ids=["vwap", "sobi"])
def test_compile_round_trips(path, capsys):
    code = main(["compile", str(path)])
    out, _ = capsys.readouterr()
    assert code == 0
    assert parse_program(out) == parse_program(path.read_text(), str(path))
    head, sep, plan = out.partition("-- access plan")
    assert sep
    assert parse_program(head) == parse_program(path.read_text())
    assert plan.strip()
    assert all(line.startswith("--") for line in plan.strip().splitlines())


def test_compile_vwap_plan_mentions_threshold(capsys):
    assert main(["compile", str(VWAP_M3)]) == 0
    out, _ = capsys.readouterr()
    plan = out.partition("-- access plan")[2]
    assert "threshold" in plan
    assert "O(log n)" in plan


# ------------------------------------------------------------------------------------------
# demo
# ------------------------------------------------------------------------------------------

def _has_synthetic() -> bool:
    try:
        return importlib.util.find_spec("replay.synthetic") is not None
    except ModuleNotFoundError:
        return False


@pytest.mark.skipif(not _has_synthetic(), reason="replay.synthetic (the demo's order-flow generator, "
                    "imported by ddms/cli.py) does not exist yet")
def test_demo_runs(capsys):
    code, lines, err = run_cli(capsys, "run", "--demo-lines", "20000", "--json")
    assert code == 0, err
    assert [d["line"] for d in lines] == list(range(2000, 20001, 2000))
    views = lines[-1]["views"]
    assert set(views) == {"BID_VWAP", "ASK_VWAP", "BEST_BID", "BEST_ASK", "SPREAD", "MID", "SOBI"}
    for v in views.values():
        assert v is None or isinstance(v, (int, float))
    if views["BEST_BID"] is not None and views["BEST_ASK"] is not None:
        assert views["SPREAD"] == pytest.approx(views["BEST_ASK"] - views["BEST_BID"])
        assert views["MID"] == pytest.approx((views["BEST_ASK"] + views["BEST_BID"]) / 2)
    assert "demo" in err.lower() or "synthetic" in err.lower() or "20,000 lines" in err
