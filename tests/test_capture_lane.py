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


def _scan_waiting(self, last: int) -> list:
    """The snapshot owners' candidates as the reader found them before it noted the waiting
    books: every book in order, the waiting ones a snapshot at ``last`` can start."""
    from ddms.io.venues import binance_book as bb
    return [bk for bk in self.books.values() if bk._state == bb._WAIT and bk.can_start(last)]


def _resnap(lines: list[bytes], picks: list[tuple[int, int]]) -> list[bytes]:
    """Extra REST snapshot lines (one level a side) at positions ``i``, each at the update id of a
    depth line near it (``d`` lines back, shifted by -1..1): several books wait at once (after gaps,
    with ``skip_bad``) and a snapshot may fit more than one of them."""
    out = list(lines)
    for i, x in picks:
        i %= len(out)
        ids = [int(m.group(1)) for ln in out[max(0, i - 1 - x % 7):i + 1]
               for m in [re.search(rb'"u":(\d+)', ln)] if m]
        if ids:
            ts = out[i].partition(b" ")[0] or b"1"
            snap = b'{"lastUpdateId":%d,"bids":[["99.00","1.000"]],"asks":[["101.00","2.000"]]}' % (
                ids[0] + x % 3 - 1)
            out.insert(i + 1, ts + b" " + snap)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_snapshot_owner_from_waiting_books_equals_a_scan(base_lines, tmp_path, data, monkeypatch) -> None:
    """The reader finds a snapshot line's owner among the books it noted as waiting
    (``_waiting``); reading with a scan of every book instead gives the same batches, owners,
    notes and errors, line by line and through the lane -- with books left without their
    snapshot, books that wait again after gaps (lines dropped, ``skip_bad``) and extra snapshots
    that fit several waiting books (the owner is the one whose buffered events lie nearest)."""
    n = len(base_lines)
    snaps = [i for i, ln in enumerate(base_lines) if b"lastUpdateId" in ln]
    gone = {snaps[j % len(snaps)] for j in data.draw(st.lists(st.integers(0, 99), max_size=4))}
    lines = [ln for i, ln in enumerate(base_lines) if i not in gone]     # books left waiting from the start
    lines = _mutate(lines, [("drop", data.draw(st.integers(0, n - 1)), 0) for _ in range(data.draw(st.integers(0, 4)))])
    lines = _resnap(lines, data.draw(st.lists(st.tuples(st.integers(0, n), st.integers(0, 50)), max_size=8)))
    p = tmp_path / "usdm_resnap.txt"
    p.write_bytes(b"\n".join(lines) + b"\n")
    kw = {"symbols": True, "skip_bad": data.draw(st.booleans()), "batch_updates": 50}
    for lane in (False, True):
        got = _read(p, lane, **kw)
        with monkeypatch.context() as m:
            m.setattr(BinanceCaptureReader, "_waiting_for", _scan_waiting)
            ref = _read(p, lane, **kw)
        for k in ("notes", "error", "owner", "bad", "depth_seen"):
            assert got[k] == ref[k], (k, got[k], ref[k])
        assert len(got["batches"]) == len(ref["batches"])
        for x, y in zip(got["batches"], ref["batches"], strict=True):
            assert (x.first_line, x.last_line) == (y.first_line, y.last_line)
            assert all(np.array_equal(getattr(x, f), getattr(y, f)) for f in ("rel", "sign", "cols", "line", "recv"))


def test_joined_parts_equal_with_symbol_copies() -> None:
    """The lane reader keeps a part's five book columns and writes the symbol column once, when
    parts are joined into a batch: the same rows as a :func:`with_symbol` copy per part, for parts
    of one symbol (the per-line path), of many (a kernel run) and already joined ones."""
    from ddms.io.events import EventBatch
    from ddms.io.symbols import with_symbol
    if not REAL[0].exists():
        pytest.skip("../shared/data/binance not present")
    rng = np.random.default_rng(5)
    r = BinanceCaptureReader(open_source(str(REAL[0]), kind="binance"), [], symbols=True)

    def part(n: int, width: int, first: int) -> EventBatch:
        return EventBatch(rng.integers(0, 2, n).astype(np.int8), rng.integers(-1, 2, n).astype(np.int8),
                          rng.random((n, width)), np.arange(first, first + n, dtype=np.int64), first, first + n,
                          recv=rng.integers(0, 9, n))
    parts = [part(3, 5, 1), part(0, 5, 4), part(5, 5, 4), part(2, 6, 9), part(4, 5, 11)]
    sids = [7.0, 7.0, rng.random(5), None, rng.random(4)]
    r._parts, r._sids = list(parts), list(sids)
    got = r._joined()
    assert r._parts == [] and r._sids == []
    ref = np.concatenate([p.cols if s is None else with_symbol(p.cols, s) for p, s in zip(parts, sids, strict=True)])
    assert np.array_equal(got.cols, ref) and np.array_equal(got.line, np.concatenate([p.line for p in parts]))
    for f in ("rel", "sign", "recv"):
        assert np.array_equal(getattr(got, f), np.concatenate([getattr(p, f) for p in parts]))
    r._parts, r._sids = [], []
    assert len(r._joined()) == 0 and r._joined().cols.shape == (0, 6)
