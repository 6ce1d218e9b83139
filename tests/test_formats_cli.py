"""Every command reads every data format (issue 23): ``ddms convert`` and ``ddms run`` on
order-book CSV, LOBSTER, Binance captures with and without a gap, and Parquet copies.

Captures are built here from scratch (a futures depth stream around a REST snapshot), so the
final book is known independently of the readers: the oracle applies each depth update to a
dict of levels by the futures rules.  The shipped captures are converted too where ../shared is.
"""

from __future__ import annotations

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba is first imported)

# isort: split
import gzip
import json
import random
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, SHARED
from test_sources import LOBSTER

from ddms.cli import main
from ddms.io.columnar import parquet_info
from ddms.io.detect import detect_file
from ddms.io.sources import open_source
from replay.synthetic import write_orderbook

SOBI_M3 = EXAMPLES / "sobi.m3"
BINANCE = SHARED / "data" / "binance"



# ------------------------------------------------------------------------------------------
# a capture made from scratch, and its book by an independent replay
# ------------------------------------------------------------------------------------------

SNAPSHOT_ID = 125          # events 0 and 1 (u = 109, 119) are older, event 2 (120..129) straddles it


def make_capture(path: Path, n: int = 60, *, gap_at: int | None = None, seed: int = 1) -> list[dict]:
    """A gzip'd futures capture of ``n`` depth updates (ids ``100 + 10 i .. + 9``, ``pu`` the
    previous ``u``) with the REST snapshot recorded after the fourth, bookTicker and trade lines
    between (which the book ignores); ``gap_at`` leaves that update out of the file.  Returns the
    updates (``b``/``a``: [price, qty] strings) including a left-out one."""
    rng = random.Random(seed)
    ts, ms = 1_723_161_255_000_000_000, 1_723_161_256_000
    snapshot = {"lastUpdateId": SNAPSHOT_ID, "E": ms, "T": ms,
                "bids": [[f"{100 - 0.1 * k:.1f}", f"{1 + k:.3f}"] for k in range(5)],
                "asks": [[f"{101 + 0.1 * k:.1f}", f"{2 + k:.3f}"] for k in range(5)]}
    updates, lines = [], []
    for i in range(n):
        U = 100 + 10 * i

        def levels(base: float, sign: int) -> list[list[str]]:
            return [[f"{base + sign * 0.1 * rng.randrange(8):.1f}",
                     "0.000" if rng.random() < 0.25 else f"{rng.randrange(1, 5000) / 1000:.3f}"]
                    for _ in range(rng.randrange(1, 4))]
        d = {"e": "depthUpdate", "E": ms + i, "T": ms + i, "s": "BTCUSDT", "U": U, "u": U + 9, "pu": U - 1,
             "b": levels(100.0, -1), "a": levels(101.0, +1)}
        updates.append(d)
        if i != gap_at:
            lines.append(f"{ts + 1000 * i} " + json.dumps({"stream": "btcusdt@depth@0ms", "data": d}))
        if i == 3:
            lines.append(f"{ts + 1000 * i + 1} " + json.dumps(snapshot))
        if i % 7 == 0:
            lines.append(f"{ts + 1000 * i + 2} " + json.dumps(
                {"stream": "btcusdt@trade", "data": {"e": "trade", "E": ms + i, "T": ms + i, "s": "BTCUSDT",
                                                     "t": i, "p": "100.5", "q": "0.001", "X": "MARKET",
                                                     "m": False}}))
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    updates.insert(0, snapshot)
    return updates


def oracle_book(updates: list[dict], stop: int | None = None) -> dict[tuple[int, float], float]:
    """``{(side 0 bids / 1 asks, price): qty}`` after the snapshot and the depth updates that the
    futures rules apply (``u >= lastUpdateId``), up to (not including) update ``stop``."""
    snap, depth = updates[0], updates[1:]
    book = {(0, float(p)): float(q) for p, q in snap["bids"]}
    book.update({(1, float(p)): float(q) for p, q in snap["asks"]})
    for d in depth[:stop]:
        if d["u"] < snap["lastUpdateId"]:
            continue
        for side, key in ((0, "b"), (1, "a")):
            for p, q in d[key]:
                if float(q) == 0:
                    book.pop((side, float(p)), None)
                else:
                    book[(side, float(p))] = float(q)
    return book


def book_of(batches) -> dict[tuple[int, float], float]:
    """The levels left by a source's events (each level update deletes the old row, inserts the
    new one): signed volume summed per (relation, price)."""
    acc: dict[tuple[int, float], float] = {}
    for b in batches:
        for rel, sign, vol, px in zip(b.rel.tolist(), b.sign.tolist(), b.cols[:, 3].tolist(), b.cols[:, 4].tolist(),
                                      strict=True):
            acc[(rel, px)] = acc.get((rel, px), 0.0) + sign * vol
    return {k: round(v, 9) for k, v in acc.items() if abs(v) > 1e-9}


def events(path) -> dict[str, np.ndarray]:
    bs = list(open_source(path))
    return {k: np.concatenate([getattr(b, k) for b in bs]) for k in ("rel", "sign", "cols", "line")}


def assert_same_events(a: Path, b: Path) -> None:
    ea, eb = events(a), events(b)
    for k in ea:
        np.testing.assert_array_equal(ea[k], eb[k], err_msg=k)


def convert(capsys, *argv: str) -> tuple[int, str]:
    code = main(["convert", *argv])
    return code, capsys.readouterr().err


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    """One small file per text format."""
    book = tmp_path / "book.csv"
    write_orderbook(book, 3000, seed=5)
    lob = tmp_path / "AAPL_message_5.csv"
    lob.write_text(LOBSTER)
    cap = tmp_path / "synth_btcusdt.gz"
    make_capture(cap)
    return {"orderbook": book, "lobster": lob, "binance": cap}


# ------------------------------------------------------------------------------------------
# ddms convert
# ------------------------------------------------------------------------------------------

def test_synthetic_capture_replays_to_the_oracle_book(tmp_path):
    cap = tmp_path / "cap.gz"
    updates = make_capture(cap)
    assert detect_file(cap) == ("binance", True)
    assert book_of(open_source(cap)) == oracle_book(updates)


@pytest.mark.parametrize("kind", ["orderbook", "lobster", "binance"])
def test_convert_every_format_and_its_parquet_copy(files, tmp_path, capsys, kind):
    src = files[kind]
    out = tmp_path / f"{kind}.parquet"
    code, err = convert(capsys, str(src), "--out", str(out))
    assert code == 0, err
    assert "warning" not in err and "Traceback" not in err
    assert parquet_info(out).kind == kind
    assert_same_events(src, out)
    again = tmp_path / f"{kind}_again.parquet"          # a Parquet file converts too
    code, err = convert(capsys, str(out), "--out", str(again))
    assert code == 0, err
    assert_same_events(src, again)


def test_convert_gap_free_capture_happy_path(tmp_path, capsys):
    """The crash of issue 23: _gap_notes on a capture without a gap (with --skip-bad too)."""
    cap = tmp_path / "synth_btcusdt.gz"
    updates = make_capture(cap, 80)
    for extra in ([], ["--skip-bad"]):
        out = tmp_path / f"cap{len(extra)}.parquet"
        code, err = convert(capsys, str(cap), "--out", str(out), *extra)
        assert code == 0, err
        assert "warning" not in err
        assert book_of(open_source(out)) == oracle_book(updates)


def test_convert_gapped_capture(tmp_path, capsys):
    n, gap = 60, 20
    cap = tmp_path / "gap_btcusdt.gz"
    updates = make_capture(cap, n, gap_at=gap)
    out = tmp_path / "gap.parquet"
    code, err = convert(capsys, str(cap), "--out", str(out))
    assert code == 2 and not out.exists()
    assert f"ddms: error: {cap}:" in err and "no later snapshot" in err and "Traceback" not in err
    code, err = convert(capsys, str(cap), "--out", str(out), "--skip-bad")
    assert code == 0, err
    # the updates after the gap wait for a snapshot that never comes: all of them are lost
    assert f"warning: {cap}:" in err and f"{n - gap - 1:,} depth updates" in err
    assert book_of(open_source(out)) == oracle_book(updates, stop=gap)


# ------------------------------------------------------------------------------------------
# ddms run reads what backtest reads
# ------------------------------------------------------------------------------------------

def run_json(capsys, *argv: str) -> tuple[int, list[dict], str]:
    code = main(["run", *argv, "--json"])
    out, err = capsys.readouterr()
    return code, [json.loads(x) for x in out.splitlines() if x.strip()], err


def engine_views(path: Path, every: int) -> list[dict]:
    """The views of sobi.m3 fed the source's batches directly (no CLI), every ``every`` lines."""
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    eng = Engine(SOBI_M3)
    out: list[dict] = []
    replay(eng, open_source(path), eng.relmap(("bids", "asks")), every=every,
           checkpoint=lambda pos: out.append({"line": pos, "views": eng.snapshot()}))
    if eng.position % every:
        out.append({"line": eng.position, "views": eng.snapshot()})
    return out


def same_views(a: list[dict], b: list[dict]) -> bool:
    """Equal lines and views, NaN (printed as null) equal to NaN."""
    def norm(rows):
        return [(r["line"], {k: (None if isinstance(v, float) and v != v else v) for k, v in r["views"].items()})
                for r in rows]
    return norm(a) == norm(b)


@pytest.mark.parametrize("kind", ["orderbook", "lobster", "binance"])
def test_run_reads_every_format_and_its_parquet_copy(files, tmp_path, capsys, kind):
    src = files[kind]
    pq = tmp_path / f"{kind}.parquet"
    assert convert(capsys, str(src), "--out", str(pq))[0] == 0
    every = 7
    code, direct, err = run_json(capsys, str(SOBI_M3), "--data", str(src), "--every", str(every))
    assert code == 0, err
    code, copy, err = run_json(capsys, str(SOBI_M3), "--data", str(pq), "--every", str(every))
    assert code == 0, err
    assert len(direct) >= 2 and same_views(direct, copy)
    assert same_views(direct, engine_views(src, every))


def test_run_capture_views_match_the_oracle_book(tmp_path, capsys):
    cap = tmp_path / "synth_btcusdt.gz"
    updates = make_capture(cap, 50)
    code, rows, err = run_json(capsys, str(SOBI_M3), "--data", str(cap))
    assert code == 0, err
    book = oracle_book(updates)
    views = rows[-1]["views"]
    assert views["BEST_BID"] == max(p for s, p in book if s == 0)
    assert views["BEST_ASK"] == min(p for s, p in book if s == 1)


def test_run_sql_declaring_a_capture_and_skip_bad_gap_note(tmp_path, capsys):
    """A SQL file may declare a capture as its orderbook stream's file; --skip-bad through a
    gap says what it cost, as convert does."""
    n, gap = 40, 30
    cap = tmp_path / "gap_btcusdt.gz"
    updates = make_capture(cap, n, gap_at=gap)
    sql = tmp_path / "views.sql"
    sql.write_text("CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)\n"
                   f"  FROM FILE '{cap.name}' LINE DELIMITED orderbook (book := 'bids');\n"
                   "SELECT SUM(b.volume) AS v FROM bids b;\n")
    code, rows, err = run_json(capsys, str(sql))
    assert code == 2 and f"{cap}:" in err and "no later snapshot" in err
    code, rows, err = run_json(capsys, str(sql), "--skip-bad")
    assert code == 0, err
    expect = sum(q for (s, _), q in oracle_book(updates, stop=gap).items() if s == 0)
    assert rows[-1]["views"]["V"] == pytest.approx(expect, rel=1e-12)
    assert f"warning: {cap}:" in err and f"{n - gap - 1:,} depth updates" in err


@pytest.mark.parametrize("name", ["usdm_btcusdt_20240808.gz", "spot_btcusdt_20240808.gz"])
def test_convert_and_run_shipped_captures(tmp_path, capsys, name):
    """Both shipped captures are gap-free: convert once (the crash of issue 23), then ddms run
    gives the same views every 1,000 updates on the capture and on its Parquet copy."""
    cap = BINANCE / name
    if not cap.exists():
        pytest.skip(f"{cap} not available")
    pq = tmp_path / "cap.parquet"
    code, err = convert(capsys, str(cap), "--out", str(pq))
    assert code == 0, err
    assert "warning" not in err and "events of" in err
    info = parquet_info(pq)
    assert info.kind == "binance" and info.events > 100_000
    runs = [run_json(capsys, str(SOBI_M3), "--data", str(p), "--every", "1000") for p in (cap, pq)]
    assert [r[0] for r in runs] == [0, 0]
    assert len(runs[0][1]) > 3 and same_views(runs[0][1], runs[1][1])


# ------------------------------------------------------------------------------------------
# serve-feed reads through the same detection, and takes --skip-bad
# ------------------------------------------------------------------------------------------

def test_serve_feed_skip_bad(tmp_path):
    from ddms.errors import InputError, ReplayError
    from ddms.feeds.server import load_replay
    book = tmp_path / "book.csv"
    book.write_text("1,1,B,100,10000\n2,2,S,50,10100\nthree,3,B,10,9000\n4,4,B,10,9000\n")
    with pytest.raises(InputError, match=":3: t is not a number"):
        load_replay(book)
    core = load_replay(book, skip_bad=True)
    assert core.skipped == 1 and [json.loads(f.data)["seq"] for f in core.frames] == [1, 2, 3]
    cap = tmp_path / "synth_btcusdt.gz"
    make_capture(cap, 20)
    lines = gzip.decompress(cap.read_bytes()).split(b"\n")
    n = sum(1 for x in lines if x.strip())
    lines.insert(8, b"1723161255000000999 {not json")
    bad = tmp_path / "bad_btcusdt.gz"
    bad.write_bytes(gzip.compress(b"\n".join(lines)))
    with pytest.raises(InputError, match=f"{bad}:9:"):
        load_replay(bad)
    core = load_replay(bad, skip_bad=True)
    assert core.skipped == 1 and len(core.frames) == len(load_replay(cap).frames) == n
    lob = tmp_path / "AAPL_message_5.csv"
    lob.write_text(LOBSTER)
    with pytest.raises(ReplayError, match="a lobster file: serve-feed serves Binance captures"):
        load_replay(lob)


def test_run_shows_progress_on_readers_without_a_byte_count(monkeypatch, capsys):
    """A capture or Parquet replay long enough reports the lines read so far on stderr."""
    import itertools
    import types

    import ddms.cli as cli
    from ddms.io.events import EventBatch
    clock = itertools.count(0, 3.0)                       # every look at the clock: 3 s later
    monkeypatch.setattr(cli, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    empty = np.zeros((0, 5))
    batches = [EventBatch(np.zeros(0, np.int8), np.zeros(0, np.int8), empty, np.zeros(0, np.int64), 1 + 10 * i,
                          10 * (i + 1)) for i in range(6)]
    assert list(cli._progress_batches(batches, "cap.gz")) == batches
    err = capsys.readouterr().err
    shown = [int(x) for x in re.findall(r"^cap\.gz: (\d+) lines$", err, re.M)]
    assert len(shown) >= 2 and shown == sorted(shown) and set(shown) <= {10, 20, 30, 40, 50, 60}
