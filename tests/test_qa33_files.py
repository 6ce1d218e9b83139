"""The qa33 outside check's files: inputs ``ddms run`` had not seen, run through the CLI as a user
runs it (``ddms.cli.main`` in-process: an escaping exception fails the test).

- A named pipe as ``--data`` (or a stream's file) used to hang for ever: format detection reads
  the file's head, then the reader opens it again, and the second open of a FIFO waits for a
  writer that has gone.  Now refused at once, naming the file and why.
- The two one-line answers the issue asked about are right: tardis's deribit sample is 15 rows
  sharing one ``local_timestamp`` (one message), and the 2023-12-24 MBO file is 8,725 snapshot
  Adds of which only the last carries F_LAST (one exchange event).  Both are checked against the
  files' own contents, read here independently (csv module, Databento's decoder).
- A Binance COIN-M hftbacktest capture of three unseen symbols (prices rescaled, update ids
  shifted, new fields in every object, gzip, lines interleaved by receive time) gives each
  symbol the book of the capture it came from, through ``run``, ``convert`` + ``run`` on the
  Parquet, and equals each symbol's file read alone.
- ``ddms run`` over mutants of every format (``--skip-bad`` and strict): exit 0, or exit 2 with one
  ``ddms: error:`` line naming the file; never an exception.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, shared_file
from mutate import mutants

from ddms.cli import main

SQL = REPO / "examples" / "sql"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def _last(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


# -- named pipes ------------------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.parametrize("argv", [
    ["run", str(SQL / "best_bid.sql"), "--data", "{fifo}", "--json"],
    ["backtest", "--no-plot", "{fifo}"],
    ["convert", "{fifo}", "--out", "{tmp}/x.parquet"],
])
def test_a_named_pipe_is_refused_not_waited_on(tmp_path, argv) -> None:
    fifo = tmp_path / "feed.csv"
    os.mkfifo(fifo)
    args = [a.format(fifo=fifo, tmp=tmp_path) for a in argv]
    rc, _, err = _run(*args)
    assert rc == 2 and f"ddms: error: {fifo}: is a named pipe (FIFO), not a regular file" in err, err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_named_pipe_with_a_writer_ends_in_time(tmp_path) -> None:
    """The real entry point with a writer on the pipe (the case that hung): exit 2 in seconds."""
    fifo = tmp_path / "feed.csv"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["sh", "-c", f"printf '1,1,B,10,100\\n' > {fifo}"])
    try:
        r = subprocess.run([sys.executable, "-m", "ddms", "run", str(SQL / "best_bid.sql"), "--data", str(fifo)],
                           capture_output=True, text=True, timeout=120, cwd=REPO,
                           env={**os.environ, "DDMS_FIRST_RESULTS": "0"})
    finally:
        with contextlib.suppress(OSError), open(fifo, "rb"):   # let the writer finish
            pass
        writer.wait(timeout=30)
    assert r.returncode == 2 and "named pipe" in r.stderr and "Traceback" not in r.stderr, r.stderr


# -- the one-line files -----------------------------------------------------------------------

def test_tardis_deribit_sample_is_one_message() -> None:
    path = shared_file("data", "tardis", "deribit_incremental_book_L2_BTC-PERPETUAL.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert len({r["local_timestamp"] for r in rows}) == 1 and len(rows) == 15
    asks = sorted((float(r["price"]), float(r["amount"])) for r in rows if r["side"] == "ask")
    rc, out, _ = _run("run", str(SQL / "ask_ladder.sql"), "--data", str(path), "--json")
    got = _last(out)
    assert rc == 0 and got["line"] == 1
    assert got["views"]["ASK_LADDER"] == [list(a) for a in asks[:5]]
    rc, out, _ = _run("run", str(SQL / "best_bid.sql"), "--data", str(path), "--json")
    assert rc == 0 and _last(out)["views"] == {"BEST_BID": None}   # the sample has no bids


def test_mbo_snapshot_day_is_one_exchange_event() -> None:
    import databento_dbn as dbn

    path = shared_file("data", "mbo", "esh4-glbx-mdp3-20231224.mbo.dbn.zst")
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD)
    dec.write(path.read_bytes())
    recs = [r for r in dec.decode() if isinstance(r, dbn.MBOMsg)]
    assert len(recs) == 8725 and {str(r.action) for r in recs} == {"A"}
    assert [i for i, r in enumerate(recs) if r.flags & 0x80] == [len(recs) - 1]   # F_LAST once, at the end
    best_bid = max(r.price for r in recs if str(r.side) == "B") / 1e9
    best_ask = min(r.price for r in recs if str(r.side) == "A") / 1e9
    for view, want in (("best_bid", best_bid), ("best_ask", best_ask)):
        rc, out, _ = _run("run", str(SQL / f"{view}.sql"), "--data", str(path), "--json")
        got = _last(out)
        assert rc == 0 and got["line"] == 1 and got["views"] == {view.upper(): want}


# -- an unseen COIN-M capture of three symbols ------------------------------------------------

@pytest.fixture(scope="module")
def coinm(tmp_path_factory):
    from qa_captures import hft_merge, hft_transform

    src = shared_file("data", "binance", "usdm_btcusdt_20240808.gz")
    out = tmp_path_factory.mktemp("coinm")
    one = {
        "ETHUSD_PERP": hft_transform(src, out / "a.gz", symbol="ETHUSD_PERP", coinm=True, lines=1500,
                                     extra={"zz": [1, {"q": 2}]}),
        "LTCUSD_240927": hft_transform(src, out / "b.gz", symbol="LTCUSD_240927", coinm=True, price_exp10=-3,
                                       ns_offset=777, id_offset=10**9, lines=1500),
        "XRPUSD_PERP": hft_transform(src, out / "c.gz", symbol="XRPUSD_PERP", coinm=True, price_exp10=-5,
                                     ns_offset=-555, id_offset=5 * 10**9, lines=1500),
    }
    return one, hft_merge(list(one.values()), out / "coinm3.gz")


def test_unseen_coinm_symbols_each_keep_their_book(coinm, tmp_path) -> None:
    one, both = coinm
    view = str(SQL / "symbol_spread.sql")
    alone = {}
    for path in one.values():
        rc, out, err = _run("run", view, "--data", str(path), "--json")
        assert rc == 0, err
        [[name, spread]] = _last(out)["views"]["SYMBOL_SPREAD"]
        alone[name] = spread
    assert set(alone) == set(one)
    # prices scaled by 10**-3 and 10**-5 scale the spread the same way
    assert alone["LTCUSD_240927"] == pytest.approx(alone["ETHUSD_PERP"] * 1e-3, rel=1e-9)
    assert alone["XRPUSD_PERP"] == pytest.approx(alone["ETHUSD_PERP"] * 1e-5, rel=1e-9)
    rc, out, err = _run("run", view, "--data", str(both), "--json")
    assert rc == 0 and "unknown message fields ignored: ps" in err, err
    merged = _last(out)
    assert {k: v for k, v in merged["views"]["SYMBOL_SPREAD"]} == alone
    parquet = tmp_path / "coinm3.parquet"
    rc, _, err = _run("convert", str(both), "--out", str(parquet))
    assert rc == 0, err
    rc, out, err = _run("run", view, "--data", str(parquet), "--json")
    assert rc == 0 and _last(out) == merged, err


# -- mutants through ddms run -----------------------------------------------------------------

def _head(path: Path, n: int) -> bytes:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


# name in the run folder, source, lines of it mutated, gzip the mutant, a file to put beside it
_FORMATS = {
    "orderbook": ("finance.csv", ("orderbook", "tiny", "finance.csv"), 100, False, None),
    "tardis": ("deltas.csv", ("tardis", "deltas_with_snapshot.csv"), 20, False, None),
    "hftbacktest": ("usdm.gz", ("binance", "usdm_btcusdt_20240808.gz"), 300, True, None),
    "okx": ("OKX.ws.1.0", ("venues", "OKX.ws.1.0"), 100, False, None),
    "kraken": ("KRAKEN.ws.50.0", ("venues", "KRAKEN.ws.50.0"), 100, False, None),
    "coinbase": ("COINBASE.ws.28.0", ("venues", "COINBASE.ws.28.0"), 150, False, None),
    "binance_ws": ("BINANCE.ws.1.0", ("venues", "BINANCE.ws.1.0"), 120, False, "BINANCE.http.0.0"),
}


@pytest.mark.parametrize("fmt", sorted(_FORMATS))
def test_run_survives_mutants(tmp_path, fmt: str) -> None:
    name, parts, lines, gz, beside = _FORMATS[fmt]
    src = shared_file("data", *parts)
    data = _head(src, lines)
    view = str(SQL / "symbol_best_bid.sql")
    seen = {0: 0, 2: 0}
    for label, m in mutants(data, 9, seed=33):
        path = tmp_path / label.replace("#", "_") / name
        path.parent.mkdir()
        if gz:
            with gzip.open(path, "wb") as f:
                f.write(m)
        else:
            path.write_bytes(m)
        if beside:
            shutil.copy(src.parent / beside, path.parent / beside)
        for flags in ([], ["--skip-bad"]):
            rc, _, err = _run("run", view, "--data", str(path), "--json", *flags)
            assert rc in (0, 2) and "Traceback" not in err, (label, flags, err)
            assert rc == 0 or f"ddms: error: {path}" in err, (label, flags, err)
            seen[rc] += 1
    assert seen[0] and seen[2], seen   # both outcomes reached: the mutants are not all harmless


# -- a cryptofeed Binance capture without (all of) its REST snapshots --------------------------

def test_binance_cryptofeed_capture_without_its_rest_file_says_why(tmp_path) -> None:
    """Without BINANCE.http.* beside it no book can start (Binance's book begins at a REST
    snapshot): ``ddms run`` printed empty views over 0 lines and said nothing.  Now an error
    naming the file, the symbols and the missing REST file."""
    shutil.copy(shared_file("data", "venues", "BINANCE.ws.1.0"), tmp_path)
    rc, out, err = _run("run", str(SQL / "symbol_best_bid.sql"), "--data", str(tmp_path / "BINANCE.ws.1.0"), "--json")
    assert rc == 2 and not out, (out, err)
    assert f"ddms: error: {tmp_path / 'BINANCE.ws.1.0'}: " in err and "met no snapshot" in err, err
    assert "NKNUSDT" in err and "no <EXCHANGE>.http.* REST file beside it" in err, err


def test_kraken_capture_without_snapshot_messages_says_why(tmp_path) -> None:
    """Kraken (as OKX and Coinbase) sends its snapshots in the stream: a capture cut after them
    is refused naming the missing snapshot messages, not a REST file it never needs."""
    lines = shared_file("data", "venues", "KRAKEN.ws.50.0").read_bytes().split(b"\n")
    (tmp_path / "KRAKEN.ws.50.0").write_bytes(b"\n".join(x for x in lines if b'"as"' not in x))
    rc, out, err = _run("run", str(SQL / "symbol_best_bid.sql"), "--data", str(tmp_path / "KRAKEN.ws.50.0"), "--json")
    assert rc == 2 and not out and "met no snapshot" in err, (out, err)
    assert "no kraken snapshot message" in err and ".http." not in err, err


def test_binance_cryptofeed_capture_missing_one_snapshot_warns(tmp_path) -> None:
    src = shared_file("data", "venues", "BINANCE.ws.1.0")
    shutil.copy(src, tmp_path)
    rest = [ln for ln in (src.parent / "BINANCE.http.0.0").read_text().splitlines() if "symbol=BLZETH" not in ln]
    (tmp_path / "BINANCE.http.0.0").write_text("\n".join(rest) + "\n")
    rc, out, err = _run("run", str(SQL / "symbol_best_bid.sql"), "--data", str(tmp_path / "BINANCE.ws.1.0"), "--json")
    assert rc == 0, err
    assert {r[0] for r in _last(out)["views"]["SYMBOL_BEST_BID"]} == {"LRCBTC", "NKNUSDT", "RUNEEUR"}
    assert "warning: " in err and "depth messages of BLZETH met no snapshot" in err, err
