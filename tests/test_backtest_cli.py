"""``ddms backtest`` output and options (issue 23): tables that fit 80 and 120 columns and
``--json``/``--csv`` with every column; the compile notice and a throughput without the compile;
``--skip-bad``; ``ddms --version``; and every subcommand's ``--help`` written for users."""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import argparse
import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddms.cli import build_parser, main
from replay.backtest import METRICS, run_task
from replay.table import fit_columns, fmt

REPO = Path(__file__).resolve().parents[1]
GRID = ["--param", "threshold=0.0005,0.001", "--param", "k=0.2,0.3"]
DATA = "synthetic:20000:4"


@pytest.fixture(scope="module")
def expected() -> list[dict]:
    return [run_task(DATA, "sobi", {"threshold": t, "k": k}) for t in (0.0005, 0.001) for k in (0.2, 0.3)]


def _backtest(capsys, *argv: str) -> tuple[str, str]:
    assert main(["backtest", DATA, *GRID, *argv]) == 0
    return capsys.readouterr()


def test_table_fits_the_terminal(capsys, monkeypatch, expected):
    shown = {}
    for width in (80, 120):
        monkeypatch.setenv("COLUMNS", str(width))
        out, err = _backtest(capsys)
        lines = out.splitlines()
        assert max(len(x) for x in lines) <= width, out
        header = next(x for x in lines if "partition" in x)
        cols = [c.strip() for c in re.split(r"[┃│]", header) if c.strip()]
        assert cols[:6] == ["#", "partition", "threshold", "k", "total_pnl", "n_trades"]
        left = re.search(r"not shown at this width: (.*?) \(--json", " ".join(out.split()))
        hidden = left.group(1).split(", ") if left else []
        assert sorted(cols[4:] + hidden) == sorted(["total_pnl", "n_trades", "sharpe", "max_drawdown", "win_rate",
                                                    "realized_pnl", "fees", "sortino", "max_position", "turnover"])
        body = [x for x in lines if re.match(r"^│ \d ", x)]
        assert len(body) == 4
        for row, want in zip(body, expected, strict=True):   # the numbers, written once by replay.table.fmt
            cells = [c.strip() for c in row.strip("│").split("│")]
            assert cells[4] == fmt(want["total_pnl"]) and cells[5] == fmt(want["n_trades"])
        assert "…" not in out                                 # nothing cut
        shown[width] = cols
    assert len(shown[120]) > len(shown[80])
    monkeypatch.delenv("COLUMNS")
    out, _ = _backtest(capsys)                               # not a terminal: every column
    assert "not shown" not in out and "turnover" in out


def test_json_and_csv_print_every_column(capsys, monkeypatch, expected):
    monkeypatch.setenv("COLUMNS", "80")
    out, _ = _backtest(capsys, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows == [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in expected]
    assert set(METRICS) <= set(rows[0])
    out, _ = _backtest(capsys, "--csv")
    got = list(csv.DictReader(io.StringIO(out)))
    assert [list(r) for r in got] == [list(r) for r in expected]
    for g, w in zip(got, expected, strict=True):
        for k, v in w.items():
            assert g[k] == ("" if isinstance(v, float) and v != v else str(v)), k


def test_fit_columns_keeps_the_first_ones_and_skips_what_does_not_fit():
    header = ["#", "partition", "a", "bbbbbbbbbb", "c"]
    cells = [["0", "p", "1", "2", "3"]]
    assert fit_columns(header, cells, 200, 2) == [0, 1, 2, 3, 4]
    # widths + 3 each, + 1 border: # 4, partition 12, a 4, bbbbbbbbbb 13, c 4
    assert fit_columns(header, cells, 1 + 4 + 12 + 4 + 4, 2) == [0, 1, 2, 4]
    assert fit_columns(header, cells, 10, 2) == [0, 1]
    assert [fmt(x) for x in (1234.5, -0.000123456, float("nan"), 12, "x")] == ["1,234", "-0.0001235", "-", "12", "x"]


def test_compile_notice_and_throughput_without_it(capsys):
    out, err = _backtest(capsys)
    assert re.search(r"(compiling sobi\.m3 \(strategy sobi\) with numba|loading sobi\.m3 \(strategy sobi\), "
                     r"compiled before, from the cache)", err), err
    assert re.search(r"(compiled|loaded) sobi\.m3 \(strategy sobi\) in \d+\.\d\d s", err)
    title = " ".join(out.split())
    m = re.search(r"sobi: 4 run\(s\), 80,000 lines in ([\d.]+) s replay \(([\d,]+) lines/s; compile time "
                  r"excluded: ([\d.]+) s to compile or load\)", title)
    assert m, title
    replay_s, rate, compile_s = float(m.group(1)), int(m.group(2).replace(",", "")), float(m.group(3))
    assert compile_s >= 0 and rate > 0
    assert rate * replay_s == pytest.approx(80_000, rel=0.1)    # the rate is lines over the replay time only


def test_backtest_skip_bad(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("1,1,B,100,10000\n2,2,S,50,10100\nthree,3,B,10,9000\n4,4,B,10,9000\n")
    assert main(["backtest", str(bad)]) == 2
    assert f"{bad}:3:" in capsys.readouterr().err
    assert main(["backtest", str(bad), "--skip-bad", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["lines"] == 4 and "1 bad lines skipped" in err


# ------------------------------------------------------------------------------------------
# help and version
# ------------------------------------------------------------------------------------------

def _subparsers(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in ap._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    return {}


DEVELOPER = re.compile(r"\(issue \d+\)|issue \d+|``|:(func|class|mod|meth|data|attr):`")


def test_every_help_is_written_for_users(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    ap = build_parser()
    subs = _subparsers(ap)
    assert {"run", "compile", "backtest", "convert", "serve-feed", "monitor"} <= set(subs)
    for name, p in [("ddms", ap), *subs.items()]:
        text = p.format_help()
        assert not DEVELOPER.search(text), (name, DEVELOPER.search(text).group(0))
        assert max(len(x) for x in text.splitlines()) <= 80, name


def test_commands_reading_data_take_skip_bad():
    subs = _subparsers(build_parser())
    for name in ("run", "convert", "backtest", "serve-feed"):
        assert "--skip-bad" in subs[name].format_help(), name


def test_version(capsys):
    from importlib.metadata import version
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"ddms {version('ddms')}"
    r = subprocess.run([sys.executable, "-m", "ddms", "--version"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and re.fullmatch(r"ddms \d+\.\d+\S*\n", r.stdout)
