"""Every reader survives mutated input: a clear located error (a DdmsError) or a counted skip.

Mutations (tests/mutate.py): flipped bits, non-UTF-8 bytes, truncated, dropped, duplicated and
inserted lines, JSON junk, numbers out of range, a file cut short.  Each reader reads the whole
mutant through ``ddms.io.sources.open_source`` (the path ``ddms backtest`` and ``ddms convert``
take), strict and with ``skip_bad``; Parquet files are mutated as bytes.  Real files from
../shared are used where present; small synthetic inputs always run.  (The readers of ddms/io
are fuzzed in their own test files.)
Regression: a 0xff byte inside a string of a Binance capture line used to end the replay with a
UnicodeDecodeError from the decoder's fast path.
"""

from __future__ import annotations

import gzip

import pytest
from conftest import SHARED
from mutate import fuzz

from ddms.errors import DdmsError, InputError
from ddms.io.sources import open_source

ORDERBOOK = b"".join(f"{t},{t % 7 + 1},{'BSEFD'[t % 5]},{t % 13 + 1},{100 + t % 9}\n".encode() for t in range(60))
LOBSTER = b"""34200.01,1,11,100,5853300,1
34200.02,1,12,50,5854300,-1
34200.03,1,13,30,5853300,1
34200.04,4,11,40,5853300,1
34200.05,2,13,10,5853300,1
34200.06,3,12,50,5854300,-1
34200.07,5,0,10,5853000,1
34200.13,1,11,5,5853400,1
"""
CAPTURE = b"\n".join([
    b'100 {"lastUpdateId":10,"E":1,"T":1,"bids":[["100.0","1"],["99.5","2"]],"asks":[["101.0","3"]]}',
    b'101 {"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":2,"T":2,"s":"BTCUSDT","U":9,"u":11,'
    b'"pu":8,"b":[["100.0","4"]],"a":[]}}',
    b'102 {"stream":"btcusdt@bookTicker","data":{"e":"bookTicker","u":11,"s":"BTCUSDT","b":"100.0","B":"4",'
    b'"a":"101.0","A":"3","T":2,"E":2}}',
    b'103 {"stream":"btcusdt@depth@100ms","data":{"e":"depthUpdate","E":3,"T":3,"s":"BTCUSDT","U":12,"u":12,'
    b'"pu":11,"b":[],"a":[["101.0","0"],["102.5","7"]]}}',
]) + b"\n"


def reader(tmp_path, name: str, skip_bad: bool):
    def read(data: bytes) -> None:
        p = tmp_path / name
        p.write_bytes(data)
        for _ in open_source(p, skip_bad=skip_bad).batches():
            pass
    return read


def head_lines(path, n: int) -> bytes:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as f:
            return b"".join(f.readline() for _ in range(n))
    with open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


@pytest.mark.parametrize("name,data", [("book.csv", ORDERBOOK), ("x_message_1.csv", LOBSTER),
                                       ("cap_futures.txt", CAPTURE)], ids=["orderbook", "lobster", "binance"])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_synthetic_inputs(tmp_path, name, data, skip_bad):
    out = fuzz(reader(tmp_path, name, skip_bad), data, 90, seed=7)
    assert out["ok"] + out["error"] == 90


_REAL = [("orderbook", "tiny", "finance.csv", "finance.csv", 300),
         ("binance", None, "usdm_btcusdt_20240808.gz", "cap_futures.txt", 400),
         ("binance", None, "spot_btcusdt_20240808.gz", "cap_spot.txt", 400)]


@pytest.mark.parametrize("kind,sub,fname,name,lines", _REAL)
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_real_files(tmp_path, kind, sub, fname, name, lines, skip_bad):
    path = SHARED / "data" / kind / (sub or "") / fname
    if not path.exists():
        pytest.skip(f"{path} not available")
    fuzz(reader(tmp_path, name, skip_bad), head_lines(path, lines), 40, seed=1)


def test_fuzz_parquet(tmp_path):
    """Our Parquet event files: damaged bytes are a ReplayError naming the file, never pyarrow's own."""
    from ddms.io.columnar import convert

    (tmp_path / "b.csv").write_bytes(ORDERBOOK * 3)
    convert(open_source(tmp_path / "b.csv"), tmp_path / "b.parquet")
    data = (tmp_path / "b.parquet").read_bytes()
    out = fuzz(reader(tmp_path, "m.parquet", False), data, 60, seed=1,
               kinds=("flip", "cut_file", "non_utf8", "json_junk", "number_out_of_range", "insert_line", "drop_line"))
    assert out["error"] > 0


_SERVED = [("venues", "BINANCE.ws.1.0", "BINANCE.http.0.0"), ("venues", "KRAKEN.ws.50.0", None),
           ("venues", "OKX.ws.1.0", None), ("venues", "COINBASE.ws.28.0", None),
           ("binance", "usdm_btcusdt_20240808.gz", None)]


@pytest.mark.parametrize("kind,fname,http", _SERVED, ids=[f[1].split(".")[0] for f in _SERVED])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_serve_feed_loader(tmp_path, kind, fname, http, skip_bad):
    """``ddms serve-feed`` loads (frames, checks) a whole capture before it serves: its loader is a
    reader too, strict and with ``--skip-bad``."""
    from ddms.feeds.server import load_replay

    path = SHARED / "data" / kind / fname
    if not path.exists():
        pytest.skip(f"{path} not available")
    if http is not None:
        (tmp_path / http).write_bytes((path.parent / http).read_bytes())
    name = fname.removesuffix(".gz")

    def read(data: bytes) -> None:
        p = tmp_path / name
        p.write_bytes(data)
        load_replay(p, skip_bad=skip_bad)
    fuzz(read, head_lines(path, 300), 20, seed=3)


def test_non_utf8_byte_in_a_capture_string_is_a_located_error(tmp_path):
    lines = CAPTURE.split(b"\n")
    lines[2] = lines[2].replace(b'"bookTicker","u"', b'"book\xffTicker","u"')
    p = tmp_path / "cap_futures.txt"
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=rf"^{p}:3: malformed JSON"):
        list(open_source(p).batches())
    batches = list(open_source(p, skip_bad=True).batches())
    assert sum(b.skipped for b in batches) == 1


def test_unknown_field_in_a_capture_is_counted_not_fatal(tmp_path):
    """A COIN-M-style extra field (``ps``) no longer stops a replay."""
    p = tmp_path / "cap_futures.txt"
    p.write_bytes(CAPTURE.replace(b'"s":"BTCUSDT","U":12', b'"s":"BTCUSDT","ps":"BTCUSD","U":12'))
    notes: list[str] = []
    rows = sum(len(b) for b in open_source(p).batches(notes))
    assert rows == sum(len(b) for b in open_source(reader_path(tmp_path)).batches())
    assert notes == [f"{p}: unknown message fields ignored: ps (1 lines)"]


def reader_path(tmp_path):
    q = tmp_path / "clean_futures.txt"
    q.write_bytes(CAPTURE)
    return q


def test_fuzz_outcomes_are_ddms_errors_only(tmp_path):
    """The fuzzer itself fails on a non-DdmsError (so the tests above can fail)."""
    def read(data: bytes) -> None:
        if b"\xff" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "boom")
        raise DdmsError("fine")
    with pytest.raises(AssertionError, match="UnicodeDecodeError"):
        fuzz(read, b"abc\n", 9, seed=0, kinds=("non_utf8",))
