"""Bad input on the command line ends as one ``ddms: error: <file>...: <reason>`` line and exit
code 2 (usage errors: argparse's exit 2), never a traceback, and is found before any long work
(the numba compile, a whole sweep, a conversion).  Also: a closed stdout ends a command quietly,
``--json`` prints only valid JSON, the CSV adaptor checks numbers as the order-book adaptor does,
and ``convert --skip-bad`` says what a gap in a Binance capture cost.

Most tests call ``ddms.cli.main`` in-process (an escaping exception fails the test); a few run
the real entry point in a subprocess to see the exit code and that stderr holds no traceback.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import gzip
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, SHARED

from ddms.cli import _print_views, main
from ddms.errors import ProgramError, ReplayError
from ddms.io.capture import iter_lines
from ddms.io.inputs import open_program_input
from ddms.m3 import parse_program

ROOT = Path(__file__).resolve().parents[1]
VWAP_M3 = EXAMPLES / "vwap.m3"
SPOT = SHARED / "data" / "binance" / "spot_btcusdt_20240808.gz"
BOOK = "1,1,B,100,10000\n2,2,S,50,10100\n3,3,B,10,9000\n"

SQL_HEAD = "CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)\n"
SQL_VIEW = "SELECT SUM(b.volume) AS v FROM bids b;\n"


def _sql(tmp_path: Path, options: str, path: str = "book.csv") -> Path:
    """A SQL file whose stream declaration (line 2) has the given orderbook ``options``."""
    (tmp_path / "book.csv").write_text(BOOK)
    p = tmp_path / "views.sql"
    p.write_text(SQL_HEAD + f"  FROM FILE '{path}' LINE DELIMITED orderbook ({options});\n" + SQL_VIEW)
    return p


def _error(capsys, *argv: str) -> str:
    """Run ``ddms argv`` in-process; it must fail with exit code 2 and end with one error on
    stderr (after status lines such as "SQL -> M3 in ..."), which is returned."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.count("ddms: error: ") == 1, err
    at = err.index("ddms: error: ")
    assert at == 0 or err[at - 1] == "\n", err
    return err[at:]


def _usage_error(capsys, *argv: str) -> str:
    """Run ``ddms argv``; argparse must refuse it (exit 2) and say why on stderr."""
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
    return capsys.readouterr().err


def _subprocess(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ddms.cli", *argv], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, **kw)


def _no_compile(monkeypatch) -> None:
    """Make a numba compile fail the test: the errors below must come before it."""
    import ddms.runtime.engine as engine

    def refuse(*args, **kw):
        raise AssertionError("the error should have been reported before the compile")
    monkeypatch.setattr(engine, "Engine", refuse)


# ------------------------------------------------------------------------------------------
# directories where a file is expected
# ------------------------------------------------------------------------------------------

def test_run_data_directory(tmp_path, capsys, monkeypatch):
    _no_compile(monkeypatch)
    err = _error(capsys, "run", str(VWAP_M3), "--data", str(tmp_path))
    assert f"{tmp_path}: is a directory, not a data file" in err


@pytest.mark.parametrize("command", ["run", "compile"])
def test_program_directory(tmp_path, capsys, command):
    err = _error(capsys, command, str(tmp_path))
    assert f"{tmp_path}: is a directory, not a program file" in err


def test_sql_from_file_directory(tmp_path, capsys, monkeypatch):
    _no_compile(monkeypatch)
    sql = _sql(tmp_path, "book := 'bids', brokers := '10'", path=".")
    err = _error(capsys, "run", str(sql))
    assert f"{tmp_path}: is a directory, not a data file (declared by stream BIDS)" in err


def test_serve_feed_directory(tmp_path, capsys):
    err = _error(capsys, "serve-feed", str(tmp_path))
    assert f"{tmp_path}: is a directory, not a data file" in err


def test_directory_subprocess_has_no_traceback(tmp_path):
    r = _subprocess("compile", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == f"ddms: error: {tmp_path}: is a directory, not a program file\n"


# ------------------------------------------------------------------------------------------
# damaged and wrong-format input files
# ------------------------------------------------------------------------------------------

def _truncated_gzip(path: Path, text: bytes) -> None:
    data = gzip.compress(text)
    path.write_bytes(data[: len(data) * 2 // 3])


def test_iter_lines_truncated_gzip_names_file_and_line(tmp_path):
    trunc = tmp_path / "cut.gz"
    _truncated_gzip(trunc, b"".join(b"%d {\"x\": %d}\n" % (i, i * 2654435761 % 2**32) for i in range(20000)))
    lines = 0
    with pytest.raises(ReplayError) as e:
        for _ in iter_lines(trunc):
            lines += 1
    assert lines > 0
    assert str(e.value).startswith(f"{trunc}: corrupt or truncated gzip data after line {lines:,} (")


def test_serve_feed_truncated_capture(tmp_path, capsys):
    if not SPOT.exists():
        pytest.skip(f"{SPOT} not available")
    trunc = tmp_path / "spot_cut.gz"
    data = SPOT.read_bytes()
    trunc.write_bytes(data[: len(data) // 3])
    err = _error(capsys, "serve-feed", str(trunc))
    assert f"{trunc}: corrupt or truncated gzip data after line " in err


@pytest.mark.parametrize("kind", ["gzip", "parquet"])
def test_run_refuses_unreadable_data_before_the_compile(tmp_path, capsys, monkeypatch, kind):
    """ddms run reads every format backtest reads (tests/test_run_formats.py); what no reader
    takes (a gzip'd order book, a Parquet file that is not ours) is refused before the compile."""
    _no_compile(monkeypatch)
    data = tmp_path / "data"
    if kind == "gzip":
        data.write_bytes(gzip.compress(BOOK.encode()))
        what = "a gzip-compressed file that is not a Binance capture: decompress it first"
    else:
        data.write_bytes(b"PAR1\x15\x04\x15\x10" + bytes(range(256)))
        what = "not a readable Parquet file"
    err = _error(capsys, "run", str(VWAP_M3), "--data", str(data))
    assert f"{data}: {what}" in err
    assert "field" not in err      # not a field-count error quoting the bytes


def test_csv_stream_refuses_a_capture(tmp_path, capsys, monkeypatch):
    _no_compile(monkeypatch)
    data = tmp_path / "cap.txt"
    data.write_text('1723161253937085768 {"stream":"btcusdt@depth@100ms","data":{}}\n')
    sql = tmp_path / "t.sql"
    sql.write_text("CREATE STREAM r(a FLOAT, b FLOAT) FROM FILE 'cap.txt' LINE DELIMITED CSV;\n"
                   "SELECT SUM(r.a) AS s FROM r;\n")
    err = _error(capsys, "run", str(sql))
    assert f"{data}: a Binance capture ('<recv_ts_ns> <json>' lines) (declared by stream R), but a CSV stream " \
           "reads CSV text" in err


@pytest.mark.parametrize("command", ["run", "compile"])
def test_program_not_utf8(tmp_path, capsys, command):
    prog = tmp_path / "binary.m3"
    prog.write_bytes(b"CREATE S\xff\xfeTREAM")
    err = _error(capsys, command, str(prog))
    assert f"{prog}: not UTF-8 text (byte 8" in err


# ------------------------------------------------------------------------------------------
# output locations, checked before the work
# ------------------------------------------------------------------------------------------

@pytest.fixture
def csv_book(tmp_path) -> Path:
    p = tmp_path / "in.csv"
    p.write_text(BOOK)
    return p


def test_convert_output_folder_missing(tmp_path, capsys, csv_book):
    out = tmp_path / "nodir" / "x.parquet"
    err = _error(capsys, "convert", str(csv_book), "--out", str(out))
    assert f"{out}: cannot write: the folder {tmp_path / 'nodir'} does not exist" in err


def test_convert_output_parent_is_a_file(tmp_path, capsys, csv_book):
    out = csv_book / "x.parquet"
    err = _error(capsys, "convert", str(csv_book), "--out", str(out))
    assert f"{out}: cannot write: {csv_book} is not a folder" in err


def test_convert_output_is_a_directory_even_with_force(tmp_path, capsys, csv_book):
    out = tmp_path / "d.parquet"
    out.mkdir()
    err = _error(capsys, "convert", str(csv_book), "--out", str(out), "--force")
    assert f"{out}: is a directory, not an output file" in err
    assert out.is_dir() and not list(out.iterdir())


def test_convert_output_folder_not_writable(tmp_path, capsys, csv_book, monkeypatch):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):      # root writes anyway: let the probe see what a user would
        import tempfile

        def denied(*args, **kw):
            raise PermissionError(13, "Permission denied")
        monkeypatch.setattr(tempfile, "mkstemp", denied)
    try:
        out = ro / "x.parquet"
        err = _error(capsys, "convert", str(csv_book), "--out", str(out))
        assert f"{out}: cannot write in {ro}: Permission denied" in err
        assert not out.exists()
    finally:
        ro.chmod(0o700)


def test_backtest_out_is_a_file_fails_before_the_sweep(tmp_path, capsys, monkeypatch):
    import replay.backtest

    def refuse(*args, **kw):
        raise AssertionError("the sweep ran before --out was checked")
    monkeypatch.setattr(replay.backtest, "run_backtest", refuse)
    afile = tmp_path / "afile"
    afile.write_text("")
    err = _error(capsys, "backtest", "--demo", "--demo-lines", "1000", "--param", "threshold=0.001,0.002",
                 "--out", str(afile / "sweep"))
    assert f"{afile / 'sweep'}: cannot create the folder: {afile} is a file" in err
    err = _error(capsys, "backtest", "--demo", "--demo-lines", "1000", "--out", str(afile))
    assert f"{afile}: is a file, not a folder" in err


# ------------------------------------------------------------------------------------------
# orderbook stream options
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("options,reason", [
    ("book := 'bids', brokers := 'ten'", "orderbook option brokers := 'ten' must be an integer >= 1"),
    ("book := 'bids', brokers := '0'", "orderbook option brokers := '0' must be an integer >= 1"),
    ("book := 'aks', brokers := '10'", "orderbook option book := 'aks' must be 'bids' or 'asks'"),
])
def test_run_sql_bad_orderbook_option(tmp_path, capsys, monkeypatch, options, reason):
    _no_compile(monkeypatch)
    sql = _sql(tmp_path, options)
    err = _error(capsys, "run", str(sql))
    assert f"{sql}:2:" in err and reason in err


@pytest.mark.parametrize("options,reason", [
    ("book := 'bids', brokers := 'ten'", "stream BIDS: orderbook brokers := 'ten' must be an integer >= 1"),
    ("book := 'bidz'", "stream BIDS: orderbook book := 'bidz' must be 'bids' or 'asks'"),
])
def test_m3_bad_orderbook_option(tmp_path, options, reason):
    (tmp_path / "book.csv").write_text(BOOK)
    prog = parse_program("CREATE STREAM BIDS(T float, ID int, BROKER_ID int, VOLUME float, PRICE float)\n"
                         f"  FROM FILE 'book.csv' LINE DELIMITED orderbook ({options});\n"
                         "DECLARE MAP V(float)[];\nDECLARE QUERY V := V;\n"
                         "ON + BIDS(T, ID, BROKER_ID, VOLUME, PRICE) { V[] += VOLUME; }\n")
    with pytest.raises(ProgramError, match=reason):
        open_program_input(prog, tmp_path)


# ------------------------------------------------------------------------------------------
# broken pipes and other OS errors
# ------------------------------------------------------------------------------------------

def test_closed_stdout_exits_quietly():
    p = subprocess.Popen([sys.executable, "-m", "ddms.cli", "compile", str(VWAP_M3)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()           # the reader is gone before the first write (like `| head -0`)
    err = p.stderr.read().decode()
    assert p.wait(timeout=600) == 141
    assert err == ""


def test_broken_pipe_in_process(capsys, monkeypatch):
    import ddms.cli

    def broken(args):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(ddms.cli, "cmd_compile", broken)
    assert main(["compile", str(VWAP_M3)]) == 141
    assert capsys.readouterr().err == ""


def test_os_error_names_the_file(capsys, monkeypatch):
    import ddms.cli

    def unreadable(args):
        raise PermissionError(13, "Permission denied", "/some/file.csv")
    monkeypatch.setattr(ddms.cli, "cmd_compile", unreadable)
    assert _error(capsys, "compile", str(VWAP_M3)) == "ddms: error: /some/file.csv: Permission denied\n"


# ------------------------------------------------------------------------------------------
# argument ranges
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["run", "--every", "-30"], "argument --every: must be >= 0, got -30"),
    (["run", "--demo-lines", "-5"], "argument --demo-lines: must be >= 1, got -5"),
    (["run", "--demo-lines", "0"], "argument --demo-lines: must be >= 1, got 0"),
    (["serve-feed", "x", "--rate", "0"], "argument --rate: --rate '0': a positive number"),
    (["serve-feed", "x", "--rate", "-5"], "argument --rate: --rate '-5': a positive number"),
    (["serve-feed", "x", "--speed", "0"], "argument --speed: --speed '0': a positive number or 'max'"),
])
def test_out_of_range_arguments(capsys, argv, message):
    assert message in _usage_error(capsys, *argv)


# ------------------------------------------------------------------------------------------
# --json: valid JSON only
# ------------------------------------------------------------------------------------------

def test_json_prints_non_finite_as_null(capsys):
    _print_views(3, {"a": math.inf, "b": -math.inf, "c": math.nan, "d": 1.5, "rows": [[1, math.inf]]}, True)
    line = capsys.readouterr().out
    assert json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} is not JSON")) == {
        "line": 3, "views": {"a": None, "b": None, "c": None, "d": 1.5, "rows": [[1, None]]}}


def test_run_json_infinite_view_is_null(tmp_path, capsys):
    data = tmp_path / "inf.csv"
    data.write_text("1,1,B,1e200,1e200\n")       # price * volume overflows to inf
    code = main(["run", str(VWAP_M3), "--data", str(data), "--json"])
    out = capsys.readouterr().out
    assert code == 0
    assert "Infinity" not in out
    assert json.loads(out) == {"line": 1, "views": {"VWAP": None}}


# ------------------------------------------------------------------------------------------
# convert --skip-bad on a capture: a gap is reported with what it cost
# ------------------------------------------------------------------------------------------

def test_convert_skip_bad_reports_gap_and_dropped_updates(tmp_path, capsys):
    if not SPOT.exists():
        pytest.skip(f"{SPOT} not available")
    lines = []
    for i, raw in enumerate(iter_lines(SPOT)):
        if i >= 3000:
            break
        lines.append(raw)
    bad = next(i for i in range(1000, len(lines)) if b"depthUpdate" in lines[i])
    lines[bad] = lines[bad][:60] + b"\n"          # a cut-off depth message: skipped, then a gap
    cap = tmp_path / "spot_cut.gz"
    cap.write_bytes(gzip.compress(b"".join(lines)))
    out = tmp_path / "x.parquet"
    assert main(["convert", str(cap), "--out", str(out), "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert "1 bad lines skipped" in err
    warning = next(line for line in err.splitlines() if line.startswith("warning:"))
    depth_after = sum(b"depthUpdate" in raw for raw in lines[bad + 1:])
    gap_line = next(i for i in range(bad + 1, len(lines)) if b"depthUpdate" in lines[i]) + 1
    assert f"{cap}:{gap_line}: gap:" in warning
    assert f"{depth_after:,} depth updates" in warning
    assert "dropped for lack of a later snapshot" in warning
