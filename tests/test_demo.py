"""The demos say what they show and what to try next, show an uncrossed book, and
``ddms backtest --demo`` announces its compile and leaves it out of the reported rate."""

from __future__ import annotations

import json

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.cli import main


def test_run_demo_explains_itself_and_shows_an_uncrossed_book(capsys):
    assert main(["run", "--demo-lines", "30000", "--json"]) == 0
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    assert [d["line"] for d in lines] == list(range(3000, 30001, 3000))
    for d in lines:
        v = d["views"]
        assert v["SPREAD"] > 0 and v["BEST_BID"] < v["BEST_ASK"]
        assert v["SPREAD"] == v["BEST_ASK"] - v["BEST_BID"]
    flat = " ".join(err.split())
    assert flat.startswith("demo: the SOBI program (examples/m3/sobi.m3) over 30,000 lines of generated order flow")
    assert "the book is never crossed" in flat and "Next: ddms sample-data data ddms run examples/m3/vwap.m3" in flat
    intro = err[:err.index("Next:")]
    assert max(len(line) for line in intro.splitlines()) <= 80                  # fits a terminal
    assert err.index("demo: the SOBI") < err.index("sobi.m3 with numba" if "compiling" in err else "loading sobi.m3")
    assert "demo: book uncrossed at every checkpoint with both sides (10 of 10)" in err
    assert "30,000 lines in" in err and "lines/s, compile time excluded)" in err


def test_backtest_demo_explains_itself_and_announces_the_compile(capsys):
    assert main(["backtest", "--demo", "--demo-lines", "20000"]) == 0
    out, err = capsys.readouterr()
    flat = " ".join(err.split())
    assert "demo: strategy sobi with simulated fills over 20,000 lines of generated order flow" in flat
    assert "sweeping threshold=0.0001,0.0002,0.0003" in flat and "Next: ddms sample-data data" in flat
    intro = err[:err.index("loading sobi.m3") if "loading sobi.m3" in err else err.index("compiling sobi.m3")]
    assert max(len(line) for line in intro.splitlines()) <= 80
    announce = err.find("compiling sobi.m3 (strategy sobi) with numba")
    if announce < 0:
        announce = err.index("loading sobi.m3 (strategy sobi), compiled before, from the cache")
    assert err.index("demo: strategy") < announce < err.index("backtest: run 1/3")
    flat_out = " ".join(out.split())
    assert "sobi: 3 run(s), 60,000 lines in" in flat_out and "s to compile or load)" in flat_out
    assert "synthetic:20000:0" in out
