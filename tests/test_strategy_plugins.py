"""Strategies of one's own (issue 23): found by entry point (``ddms.strategies``), by
``package.module:Class`` and by ``path/to/file.py:Class``; listed by ``ddms backtest --list``;
backtested from the command line with the same summary row as the Python API gives for the class
itself.  (The Spark sweep of a plugin is in tests/test_spark.py, on the shared session.)"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from strategy_plugin import EXAMPLE, REPO, make_plugin

import strategies
from ddms.cli import main
from replay.backtest import run_backtest, summary_row
from strategies.api import StrategyError

DATA = "synthetic:30000:3"
PARAMS = {"threshold": 0.0002, "exit": 0.00005}


def _example_class():
    """The example's class loaded independently of strategies.spec (the oracle's own import)."""
    spec = importlib.util.spec_from_file_location("imbalance_oracle", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Imbalance


@pytest.fixture(scope="module")
def expected_row():
    return summary_row(run_backtest(DATA, _example_class()(PARAMS)))


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    root = make_plugin(tmp_path / "site")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for m in [m for m in sys.modules if m == "imbplug" or m.startswith("imbplug.")]:
        del sys.modules[m]


def _cli_rows(capsys, strategy: str) -> list[dict]:
    args = ["backtest", DATA, "--strategy", strategy, "--json"]
    for k, v in PARAMS.items():
        args += ["--param", f"{k}={v}"]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return [json.loads(x) for x in out.splitlines()]


def _same(rows: list[dict], expected: dict) -> None:
    assert len(rows) == 1
    want = {k: (None if isinstance(v, float) and v != v else v) for k, v in expected.items()}
    assert rows[0] == want
    assert expected["n_trades"] > 0            # the example trades on this data: the row says something


def test_file_reference_relative_and_absolute(capsys, monkeypatch, expected_row):
    monkeypatch.chdir(REPO)
    _same(_cli_rows(capsys, "examples/strategies/imbalance.py:Imbalance"), expected_row)
    _same(_cli_rows(capsys, f"{EXAMPLE}:Imbalance"), expected_row)
    assert strategies.spec(f"{EXAMPLE}:Imbalance") is strategies.spec("examples/strategies/imbalance.py:Imbalance")


def test_module_reference(plugin, capsys, expected_row):
    _same(_cli_rows(capsys, "imbplug:Imbalance"), expected_row)
    ref, paths = strategies.portable("imbplug:Imbalance")
    assert ref == "imbplug:Imbalance" and paths == (str(plugin.resolve()),)


def test_entry_point(plugin, capsys, expected_row):
    assert "imb" in strategies.names() and strategies.names()[:2] == ["mm", "sobi"]
    assert strategies.spec("imb").__name__ == "Imbalance"
    assert strategies.portable("imb") == ("imbplug:Imbalance", (str(plugin.resolve()),))
    _same(_cli_rows(capsys, "imb"), expected_row)
    assert main(["backtest", "--list"]) == 0
    listed = capsys.readouterr().out
    assert "imb: fade the VWAP imbalance" in listed and "[imbplug:Imbalance (imbplug)]" in listed
    assert "    exit " in listed


def test_entry_point_through_the_installed_command(plugin, tmp_path):
    """The real entry point in a fresh process finds the plugin on PYTHONPATH (as installed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(plugin)]))
    r = subprocess.run([sys.executable, "-m", "ddms", "backtest", "--list"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "imb: fade the VWAP imbalance" in r.stdout


def test_bad_references_say_why(tmp_path, plugin):
    cases = {
        "nope": "unknown strategy 'nope' (strategies: mm, sobi, imb)",
        "no_such_module_xyz:Foo": "cannot import no_such_module_xyz",
        "imbplug:Nope": "module imbplug has no Nope",
        f"{tmp_path / 'missing.py'}:X": "no such file",
        "imbplug:": "expected NAME, package.module:Class or path/to/file.py:Class",
        "json:JSONDecoder": "is not a subclass of strategies.Strategy",
    }
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    cases[f"{broken}:X"] = "failed to load: RuntimeError: boom"
    for ref, words in cases.items():
        with pytest.raises(StrategyError) as ei:
            strategies.spec(ref)
        assert words in str(ei.value), (ref, str(ei.value))


def test_plugin_parameters_are_validated(plugin):
    with pytest.raises(StrategyError, match="exit=0.003 must be below threshold=0.0005"):
        strategies.get("imb", {"exit": 0.003})
    with pytest.raises(StrategyError, match="unknown parameter 'kk'"):
        strategies.get(f"{EXAMPLE}:Imbalance", {"kk": 1})


def test_monitor_runs_a_plugin_and_a_file_strategy(plugin):
    """``ddms monitor --strategy REF`` builds the strategy through load_strategy: any reference
    works, and the strategy places orders on live batches."""
    import io

    from ddms.feeds.monitor import load_strategy
    from replay.backtest import open_partition
    for ref in ("imb", f"{EXAMPLE}:Imbalance"):
        log = io.StringIO()
        strat, engine, ctx = load_strategy(ref, None, {"threshold": 0.0002, "exit": 0.00005}, out=log)
        assert type(strat).__name__ == "Imbalance" and strat.p["threshold"] == 0.0002
        relmap = engine.relmap(("bids", "asks"))
        for batch in open_partition(DATA):
            engine.apply(batch, relmap)
        assert len(ctx.orders) > 0 and log.getvalue().count("\n") >= len(ctx.orders)


def test_readme_shows_the_example_file():
    """The README's "Write your own strategy" block is the example file."""
    readme = (REPO / "README.md").read_text()
    assert f"<!-- file: examples/strategies/imbalance.py -->\n```python\n{EXAMPLE.read_text()}```" in readme
