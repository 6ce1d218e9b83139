"""The hftbacktest capture reader's chunk lane (``BinanceCaptureReader(lane=True)``, what
``open_source`` iterates) against its line-by-line path (the reference, what a checkpointed run
reads): the same batches row for row (rel, sign, columns, lines, receive times, boundaries,
errors, skipped counts), notes, snapshot owners, bad-line, ignored and unknown-field counts -- on
the real captures, on generated multi-symbol captures (spot, USD-M, COIN-M; a chosen symbol; small
batches) and on mutated ones (bad bytes, truncated lines, junk JSON, new fields, gaps, odd times),
strict and with ``skip_bad``."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.ingest import binance_feed, write_recorder
from ddms.io.sources import BinanceCaptureReader, open_source

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "binance"
REAL = [DATA / "spot_btcusdt_20240808.gz", DATA / "usdm_btcusdt_20240808.gz"]


def _read(path: Path, lane: bool, **kw) -> dict:
    src = replace(open_source(str(path), kind="binance"), **kw)
    notes: list[str] = []
    r = BinanceCaptureReader(src, notes, symbols=src.symbols, lane=lane)
    batches, err = [], None
    try:
        for b in r.batches():
            batches.append(b)
    except Exception as e:  # noqa: BLE001 - compared as text
        err = f"{type(e).__name__}: {e}"
    if lane:
        r._check()
    return {"batches": batches, "notes": notes, "error": err, "owner": r.snapshot_owner,
            "bad": (r.parser.bad_lines, [str(e) for e in r.parser.bad_samples]), "ignored": r.parser.ignored,
            "unknown": r.parser.unknown_fields, "depth_seen": r.depth_seen, "reader": r}


def _same(path: Path, **kw) -> dict:
    a, b = _read(path, False, **kw), _read(path, True, **kw)
    assert len(a["batches"]) == len(b["batches"]), (len(a["batches"]), len(b["batches"]), a["error"], b["error"])
    for x, y in zip(a["batches"], b["batches"], strict=True):
        assert (x.first_line, x.last_line, x.skipped, str(x.error)) == (y.first_line, y.last_line, y.skipped,
                                                                      str(y.error))
        for f in ("rel", "sign", "cols", "line", "recv"):
            u, v = getattr(x, f), getattr(y, f)
            assert u.dtype == v.dtype and np.array_equal(u, v), f
    for k in ("notes", "error", "owner", "bad", "ignored", "unknown", "depth_seen"):
        assert a[k] == b[k], (k, a[k], b[k])
    return b


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name.split("_")[0])
@pytest.mark.parametrize("kw", [{}, {"symbols": True, "batch_updates": 1000}])
def test_real_captures(path: Path, kw: dict) -> None:
    if not path.exists():
        pytest.skip("no ../shared/data/binance")
    b = _same(path, **kw)
    assert b["error"] is None and b["reader"]._lane.fast_messages > 0.9 * b["reader"].parser.lines


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("rec")
    out = {}
    for market in ("spot", "usdm", "coinm"):
        snaps, msgs = binance_feed(30, 2500, 12, seed=7, market=market, others=True, trades=True)
        out[market] = d / f"{market}_gen.txt"
        write_recorder(out[market], snaps, msgs)
    return out


@pytest.mark.parametrize("market", ["spot", "usdm", "coinm"])
@pytest.mark.parametrize("kw", [{"symbols": True}, {"symbols": True, "batch_updates": 97},
                                {"symbol": "S0003USDT", "batch_updates": 40}, {"symbols": True, "symbol": "S0011USDT"},
                                {}])
def test_generated_multi_symbol(generated, market: str, kw: dict) -> None:
    b = _same(generated[market], **kw)
    if kw:
        assert b["error"] is None and b["reader"]._lane.fast_messages > 0
    else:       # several symbols and none chosen: refused the same way
        assert b["error"] is not None and "holds several symbols" in b["error"]


def test_two_symbols_one_id_space(generated, tmp_path) -> None:
    """USD-M update ids from one sequence: a snapshot line fits both symbols' events; the lane
    places it (it takes the per-line path) as the line reader does."""
    ids = re.compile(rb'"(U|u|pu|lastUpdateId)":(\d+)')
    lines = generated["usdm"].read_bytes().splitlines()
    a = [ln for ln in lines if b"S0001USDT" in ln or b"s0001usdt" in ln]
    b = [ln for ln in lines if b"S0002USDT" in ln or b"s0002usdt" in ln]
    snaps = [ln for ln in lines if b"lastUpdateId" in ln]
    both = sorted(a + b + snaps[:2], key=lambda ln: int(ln.split(b" ", 1)[0]))
    shifted = [ids.sub(lambda m: b'"%s":%d' % (m.group(1), int(m.group(2)) + 7), ln) if b"S0002" in ln else ln
               for ln in both]
    p = tmp_path / "usdm_two.txt"
    p.write_bytes(b"\n".join(shifted) + b"\n")
    for kw in ({"symbols": True}, {"symbols": True, "skip_bad": True}):
        _same(p, **kw)


_JUNK = [b"\xff\xfe garbage", b"{", b'{"stream":"x@depth","data":{"e":"depthUpdate"}}', b"", b"   ",
         b'{"stream":"s0001usdt@aggTrade","data":{"e":"aggTrade","s":"S0001USDT"}}', b"null", b"[1,2]",
         b'{"result":null,"id":1}']


@st.composite
def _mutations(draw, n: int) -> list[tuple]:
    ops = st.sampled_from(["junk", "truncate", "bytes", "field", "drop", "dup", "blank", "crlf", "bigts", "badts",
                           "swap", "lower", "nofield"])
    return draw(st.lists(st.tuples(ops, st.integers(0, n - 1), st.integers(0, 10_000)), min_size=1, max_size=6))


def _mutate(lines: list[bytes], muts: list[tuple]) -> list[bytes]:
    out = list(lines)
    for op, i, x in muts:
        i %= len(out)
        ln = out[i]
        ts, _, js = ln.partition(b" ")
        if op == "junk":
            out[i] = ts + b" " + _JUNK[x % len(_JUNK)]
        elif op == "truncate":
            out[i] = ln[:max(1, x % max(len(ln), 1))]
        elif op == "bytes":
            k = x % max(len(ln), 1)
            out[i] = ln[:k] + bytes([x % 256]) + ln[k + 1:]
        elif op == "field":      # a venue's new field (a name seen twice is counted in the kernel)
            out[i] = ln.replace(b'"data":{', b'"data":{"zz%d":%d,' % (x % 2, x), 1)
        elif op == "nofield":
            out[i] = re.sub(rb'"[EsT]":[^,]*,', b"", ln, count=1)
        elif op == "drop":
            del out[i]
        elif op == "dup":
            out.insert(i, ln)
        elif op == "blank":
            out.insert(i, b"")
        elif op == "crlf":
            out[i] = ln + b"\r"
        elif op == "bigts":
            out[i] = b"%d" % (2**63 + x) + b" " + js if x % 2 else b"9" * 19 + b" " + js
        elif op == "badts":
            out[i] = b"-" + ln if x % 2 else b"1x " + js
        elif op == "swap" and i + 1 < len(out):
            out[i], out[i + 1] = out[i + 1], out[i]
        elif op == "lower":
            out[i] = ln.replace(b'"s":"S', b'"s":"s', 1)
    return out


@pytest.fixture(scope="module")
def base_lines(tmp_path_factory) -> list[bytes]:
    d = tmp_path_factory.mktemp("mut")
    snaps, msgs = binance_feed(6, 300, 6, seed=3, market="usdm", others=True, trades=True)
    p = d / "usdm_base.txt"
    write_recorder(p, snaps, msgs)
    return p.read_bytes().splitlines()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_captures(base_lines, tmp_path, data) -> None:
    muts = data.draw(_mutations(len(base_lines)))
    lines = _mutate(base_lines, muts)
    p = tmp_path / "usdm_mut.txt"
    p.write_bytes(b"\n".join(lines) + b"\n")
    skip = data.draw(st.booleans())
    empty = data.draw(st.booleans())
    _same(p, symbols=True, skip_bad=skip, allow_empty_start=empty, batch_updates=data.draw(st.sampled_from([50, 4096])))


def test_gzip_damage(tmp_path) -> None:
    """A gzip capture cut off: the lines before the damage, then the same error."""
    import gzip
    if not REAL[0].exists():
        pytest.skip("no ../shared/data/binance")
    raw = gzip.compress(gzip.decompress(REAL[0].read_bytes())[:3_000_000])
    p = tmp_path / "spot_cut.gz"
    p.write_bytes(raw[: len(raw) - 5000])
    b = _same(p, symbols=True)
    assert b["error"] is not None and "truncated gzip" in b["error"]
