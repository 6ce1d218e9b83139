"""The Binance book builder and decoder against an independent oracle, on real captures.

* real data: both captures replay with no gap, never crossed, and every bookTicker whose ``u`` is
  the final id of an applied depth event matches the top of book (README: 629 futures, 564 spot);
  the engine rows, replayed into a row store (every delete must remove exactly the row inserted
  before), equal the final book, and so does a plain-Python Decimal oracle of Binance's procedure;
* faults: a dropped, duplicated or reordered depth message, corrupt JSON, unknown or missing
  fields: counted, reported, never corrupting the book; after a resync from a snapshot taken
  from the oracle at that point, tickers match again and the final book equals the oracle's;
* the spot/futures rules at their boundaries on hand-made messages, and hypothesis: random
  depth streams on a small price grid against a dict model, fast decoder == json decoder.
``_check()`` runs after every operation (after every book-changing message on full replays).
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from functools import cache

import numpy as np
import pytest
from conftest import SHARED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import InputError
from ddms.io.actions import NeedSnapshot
from ddms.io.capture import CaptureParser, iter_lines, read_capture, split_line
from ddms.io.events import EventBatch
from ddms.io.venues.binance_book import (
    ASKS,
    BIDS,
    BinanceBook,
    BookTicker,
    Decoder,
    DepthSnapshot,
    DepthUpdate,
    Trade,
    decode_message,
    format_units,
    parse_units,
)

BINANCE = SHARED / "data" / "binance"
FUT = "usdm_btcusdt_20240808.gz"
SPOT = "spot_btcusdt_20240808.gz"
PAIRS = {FUT: 629, SPOT: 564}
MARKET = {FUT: "futures", SPOT: "spot"}


@cache
def _lines(name: str) -> tuple[tuple[int, bytes], ...]:
    path = BINANCE / name
    if not path.exists():
        pytest.skip(f"{path} not available")
    return tuple(split_line(line, i + 1) for i, line in enumerate(iter_lines(path)))


# ------------------------------------------------------------------------------------------
# oracles
# ------------------------------------------------------------------------------------------

class RefBook:
    """Binance's documented procedure in plain Python over json.loads and Decimal: start from the
    capture's snapshot, drop older events, check the straddle and continuity (asserting them: the
    original captures have no gap)."""

    def __init__(self, futures: bool) -> None:
        self.futures = futures
        self.bids: dict[Decimal, Decimal] = {}
        self.asks: dict[Decimal, Decimal] = {}
        self.last: int | None = None
        self.started = False
        self.buffer: list[dict] = []

    def feed(self, raw: bytes) -> None:
        if b"depthUpdate" not in raw and b"lastUpdateId" not in raw:
            return
        obj = json.loads(raw)
        if "lastUpdateId" in obj:
            self.bids = {Decimal(p): Decimal(q) for p, q in obj["bids"] if Decimal(q)}
            self.asks = {Decimal(p): Decimal(q) for p, q in obj["asks"] if Decimal(q)}
            self.last = obj["lastUpdateId"]
            for d in self.buffer:
                self.apply(d)
            return
        if self.last is None:
            self.buffer.append(obj["data"])
        else:
            self.apply(obj["data"])

    def apply(self, d: dict) -> None:
        last = self.last
        if not self.started:
            if (d["u"] < last) if self.futures else (d["u"] <= last):
                return
            assert (d["U"] <= last <= d["u"]) if self.futures else (d["U"] <= last + 1 <= d["u"])
            self.started = True
        else:
            assert (d["pu"] == last) if self.futures else (d["U"] == last + 1)
        for side, book in (("b", self.bids), ("a", self.asks)):
            for p, q in d[side]:
                if Decimal(q):
                    book[Decimal(p)] = Decimal(q)
                else:
                    book.pop(Decimal(p), None)
        self.last = d["u"]

    def snapshot(self) -> dict:
        return {"lastUpdateId": self.last,
                "bids": [[str(p), str(q)] for p, q in sorted(self.bids.items(), reverse=True)],
                "asks": [[str(p), str(q)] for p, q in sorted(self.asks.items())]}

    def units(self, bk: BinanceBook) -> tuple[dict[int, int], dict[int, int]]:
        pd, qd = bk.px_decimals, bk.qty_decimals
        return tuple({parse_units(str(p), pd): parse_units(str(q), qd) for p, q in book.items()}
                     for book in (self.bids, self.asks))


class RowStore:
    """The engine's view of the relations: a delete must remove exactly the row that is there."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, float], tuple[float, ...]] = {}
        self.last_line = 0

    def apply(self, batch: EventBatch) -> None:
        assert batch.first_line == self.last_line + 1
        assert batch.cols.shape == (len(batch), 5) and batch.cols.dtype == np.float64
        assert (np.diff(batch.line) >= 0).all()
        assert len(batch) == 0 or (batch.line[0] >= batch.first_line and batch.line[-1] <= batch.last_line)
        for rel, sign, row in zip(batch.rel.tolist(), batch.sign.tolist(), batch.cols.tolist(), strict=True):
            key = (rel, row[1])
            if sign < 0:
                assert self.rows.pop(key) == tuple(row), "delete of a row that is not there"
            else:
                assert key not in self.rows, "insert of a level that is already there"
                self.rows[key] = tuple(row)
        self.last_line = batch.last_line

    def levels(self, rel: int) -> dict[int, tuple[float, float]]:
        return {int(k[1]): (r[3], r[4]) for k, r in self.rows.items() if k[0] == rel}


def book_units(bk: BinanceBook) -> tuple[dict[int, int], dict[int, int]]:
    return dict(bk.levels(BIDS)), dict(bk.levels(ASKS))


def assert_store_matches(store: RowStore, bk: BinanceBook) -> None:
    ps, qs = 10.0 ** bk.px_decimals, 10.0 ** bk.qty_decimals
    for side in (BIDS, ASKS):
        want = {p: (q / qs, p / ps) for p, q in bk.levels(side).items()}
        assert store.levels(side) == want


# ------------------------------------------------------------------------------------------
# real captures
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [FUT, SPOT])
def test_capture_replays_clean(name):
    lines = _lines(name)
    bk = BinanceBook(MARKET[name], source=name)
    ref = RefBook(MARKET[name] == "futures")
    asked = []
    for ts, raw in lines:
        actions = bk.feed_message(raw, ts)
        asked.extend(actions)
        ref.feed(raw)
        if b"depthUpdate" in raw or b"lastUpdateId" in raw:
            bk._check()
            assert not bk.is_crossed()
    events = bk.take_events()
    c = bk.counters()
    assert c["messages"] == len(lines)
    assert c["gaps"] == c["resyncs"] == c["malformed"] == c["stale"] == c["crossed"] == 0
    assert c["snapshots"] == 1 and c["bookticker_mismatch"] == 0
    assert c["bookticker_checked"] >= PAIRS[name]
    assert c["applied"] >= c["depth_events"] - 10   # only the few events older than the snapshot dropped
    assert len(asked) == 1 and isinstance(asked[0], NeedSnapshot)   # the start, answered by the capture
    assert not bk.reports
    assert book_units(bk) == ref.units(bk)
    if name == SPOT:       # row by row (every delete removes the row inserted before)
        store = RowStore()
        store.apply(events)
        assert_store_matches(store, bk)
    else:                  # vectorized: net row count and net quantity per level
        assert_net_rows(events, bk)
    # the snapshot export round-trips through a fresh builder
    snap = bk.to_snapshot()
    other = BinanceBook(MARKET[name], px_decimals=bk.px_decimals, qty_decimals=bk.qty_decimals)
    assert other.apply_snapshot(json.dumps(snap)) == ()
    other._check()
    assert book_units(other) == book_units(bk)
    assert bk.best_bid() == ref_best(ref.bids, max) and bk.best_ask() == ref_best(ref.asks, min)


def assert_net_rows(ev: EventBatch, bk: BinanceBook) -> None:
    qs = 10 ** bk.qty_decimals
    for side in (BIDS, ASKS):
        sel = ev.rel == side
        ids = ev.cols[sel, 1].astype(np.int64)
        units = np.rint(ev.cols[sel, 3] * qs).astype(np.int64) * ev.sign[sel]
        uniq, inv = np.unique(ids, return_inverse=True)
        count = np.zeros(uniq.shape[0], np.int64)
        net = np.zeros(uniq.shape[0], np.int64)
        np.add.at(count, inv, ev.sign[sel].astype(np.int64))
        np.add.at(net, inv, units)
        assert set(count.tolist()) <= {0, 1}
        assert dict(zip(uniq[count == 1].tolist(), net[count == 1].tolist(), strict=True)) == bk.levels(side)
        assert (net[count == 0] == 0).all()


def ref_best(book: dict, pick) -> tuple[Decimal, Decimal]:
    p = pick(book)
    return p, book[p]


def test_capture_parser_types_and_lines():
    lines = _lines(SPOT)
    kinds: dict[type, int] = {}
    for c in read_capture(BINANCE / SPOT):
        kinds[type(c.record)] = kinds.get(type(c.record), 0) + 1
        if c.line == 8:
            assert isinstance(c.record, DepthSnapshot) and c.record.last_update_id == 50093239218
    assert kinds == {DepthUpdate: 3451, BookTicker: 28040, Trade: 9757, DepthSnapshot: 1}
    assert sum(kinds.values()) == len(lines)
    parser = CaptureParser("cap.txt")
    with pytest.raises(InputError, match=r"cap.txt:3: malformed JSON"):
        list(parser.parse_lines([lines[0][1].join([b"1 ", b""]), b"", b"2 {\"stream\":"]))
    skip = CaptureParser("cap.txt", skip_bad=True)
    got = list(skip.parse_lines([b"x {}", b"12 " + lines[1][1], b"no-space-here", b"5 [1]"]))
    assert [c.line for c in got] == [2] and skip.bad_lines == 3
    assert [e.line for e in skip.bad_samples] == [1, 3, 4]
    assert "not '<recv_ts_ns> <json>'" in str(skip.bad_samples[1])
    assert "timestamp" in str(skip.bad_samples[0])


def test_read_capture_plain_and_gzip(tmp_path):
    lines = _lines(FUT)[:60]
    text = b"".join(b"%d %s\n" % (ts, raw) for ts, raw in lines)
    (tmp_path / "c.txt").write_bytes(text)
    (tmp_path / "c.gz").write_bytes(gzip.compress(text))
    a = [(c.line, c.recv_ts_ns, c.raw) for c in read_capture(tmp_path / "c.txt")]
    b = [(c.line, c.recv_ts_ns, c.raw) for c in read_capture(tmp_path / "c.gz")]
    assert a == b == [(i + 1, ts, raw) for i, (ts, raw) in enumerate(lines)]


def test_fast_decoder_equals_json_decoder_on_real_messages():
    dec = Decoder()
    for name in (FUT, SPOT):
        for _, raw in _lines(name)[:4000]:
            assert_same_record(dec.decode(raw), dec.from_obj(json.loads(raw)))


def assert_same_record(a, b) -> None:
    assert type(a) is type(b)
    for f in a.__slots__:
        x, y = getattr(a, f), getattr(b, f)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype == np.int64 and x.shape == y.shape and (x == y).all(), f
        else:
            assert x == y and type(x) is type(y), (f, x, y)


# ------------------------------------------------------------------------------------------
# fault injection on a window of each capture
# ------------------------------------------------------------------------------------------

def _window(name: str, n: int = 1100) -> list[tuple[int, bytes]]:
    return list(_lines(name)[:n])


def _depth_positions(msgs: list[tuple[int, bytes]]) -> list[int]:
    return [i for i, (_, raw) in enumerate(msgs) if b"depthUpdate" in raw]


def drive(name: str, stream: list[tuple[int, bytes, int]], check_every: bool = True):
    """Feed ``stream`` ((ts, raw, index in the original window)); whenever the builder asks for
    a snapshot after its first one, answer with the oracle's book at the furthest original
    position fed so far (what a replay server rebuilds).  Returns the builder, the row store,
    the oracle (advanced to the end) and the actions seen."""
    market = MARKET[name]
    orig = _window(name)
    bk = BinanceBook(market, source=name, max_reports=10_000)
    ref = RefBook(market == "futures")
    store = RowStore()
    pos = -1   # the oracle has consumed orig[: pos + 1]
    furthest = -1
    actions: list[NeedSnapshot] = []

    def answer(acts) -> None:
        nonlocal pos
        for a in acts:
            actions.append(a)
            assert isinstance(a, NeedSnapshot) and a.reason
        if acts and bk.snapshots > 0 and bk.needs_snapshot:
            while pos < furthest:
                pos += 1
                ref.feed(orig[pos][1])
            more = bk.apply_snapshot(json.dumps(ref.snapshot()))
            bk._check()
            answer(more)

    for ts, raw, at in stream:
        furthest = max(furthest, at)
        answer(bk.feed_message(raw, ts))
        if check_every:
            bk._check()
        store.apply(bk.take_events())
    while pos < len(orig) - 1:
        pos += 1
        ref.feed(orig[pos][1])
    return bk, store, ref, actions


def faulty(name: str, fault: str, k: int) -> list[tuple[int, bytes, int]]:
    msgs = _window(name)
    depth = _depth_positions(msgs)
    i = depth[k]
    j = depth[k + 1]
    out = [(ts, raw, n) for n, (ts, raw) in enumerate(msgs)]
    if fault == "drop":
        del out[i]
    elif fault == "duplicate":
        out.insert(i + 1, out[i])
    elif fault == "reorder":
        out[i], out[j] = out[j], out[i]
    elif fault == "corrupt":
        ts, raw, n = out[i]
        out[i] = (ts, raw[: len(raw) // 2], n)
    elif fault == "unknown_field":
        ts, raw, n = out[i]
        out[i] = (ts, raw.replace(b'"e":"depthUpdate"', b'"e":"depthUpdate","zz":1'), n)
    elif fault == "missing_field":
        obj = json.loads(out[i][1])
        del obj["data"]["u"]
        out[i] = (out[i][0], json.dumps(obj).encode(), out[i][2])
    else:  # pragma: no cover
        raise AssertionError(fault)
    return out


def assert_recovered(bk: BinanceBook, store: RowStore, ref: RefBook) -> None:
    bk._check()
    assert bk.synced and not bk.needs_snapshot
    assert bk.bookticker_mismatch == 0 and bk.crossed == 0
    assert book_units(bk) == ref.units(bk)
    assert_store_matches(store, bk)


@pytest.mark.parametrize("name", [FUT, SPOT])
@pytest.mark.parametrize("fault", ["drop", "corrupt", "missing_field"])
def test_lost_depth_message_resyncs(name, fault):
    k = 30
    bk, store, ref, actions = drive(name, faulty(name, fault, k))
    assert bk.gaps == 1 and bk.resyncs == 1 and bk.snapshots == 2
    assert bk.malformed == (0 if fault == "drop" else 1)
    reasons = [r.reason for r in bk.reports]
    assert any(r.startswith("gap") for r in reasons)
    if fault == "corrupt":
        assert any("malformed JSON" in r for r in reasons)
    if fault == "missing_field":
        assert any("missing field 'u'" in r for r in reasons)
    assert [a.reason.split(":")[0] for a in actions][-1] == "gap"
    assert_recovered(bk, store, ref)
    # tickers were checked after the resync too
    before = _checked_until(name, k)
    assert bk.bookticker_checked > before


@pytest.mark.parametrize("name", [FUT, SPOT])
def test_unknown_field_is_ignored_and_counted(name):
    """A venue's new field (COIN-M sends ``ps``) is tolerated: no gap, no resync, the book equals
    the oracle's, and the field is counted once per message and reported once per name."""
    k = 30
    stream = faulty(name, "unknown_field", k)
    for extra in (k + 2, k + 5):
        stream = [(ts, raw, n) for ts, raw, n in stream]
        i = _depth_positions(_window(name))[extra]
        ts, raw, n = stream[i]
        stream[i] = (ts, raw.replace(b'"e":"depthUpdate"', b'"e":"depthUpdate","zz":[1,{"q":2}]'), n)
    bk, store, ref, actions = drive(name, stream)
    assert bk.gaps == 0 and bk.resyncs == 0 and bk.malformed == 0
    assert bk.unknown_fields == {"zz": 3}
    assert [r.reason for r in bk.reports if "unknown field" in r.reason] == [
        "unknown field 'zz' ignored (counted in unknown_fields)"]
    assert_recovered(bk, store, ref)


def test_coin_m_depth_update_with_ps_decodes():
    """The COIN-M message of issue 22 ("unknown field(s) ['ps'] in a depthUpdate message")."""
    dec = Decoder()
    raw = ('{"stream":"btcusd_perp@depth@100ms","data":{"e":"depthUpdate","E":1,"T":1,"s":"BTCUSD_PERP",'
           '"ps":"BTCUSD","U":5,"u":7,"pu":4,"b":[["60000.1","3"]],"a":[]}}')
    rec = dec.decode(raw)
    assert isinstance(rec, DepthUpdate) and rec.symbol == "BTCUSD_PERP" and rec.prev_final_id == 4
    assert rec.bids.tolist() == [[600001, 3]] and rec.px_dec == 1
    dec.decode(raw.replace('"data"', '"extra":1,"data"'))
    assert dec.unknown_fields == {"ps": 2, "extra": 1}


def test_non_utf8_byte_is_a_located_input_error():
    """A 0xff byte inside a string (it passes the fast scan) is a located InputError, not a
    UnicodeDecodeError from the fast path."""
    raw = b'{"stream":"x@depth","data":{"e":"depthUpdate","E":1,"s":"A\xff","U":1,"u":2,"b":[],"a":[]}}'
    assert b"\xff" in raw
    with pytest.raises(InputError, match=r"^cap:3: malformed JSON"):
        Decoder().decode(raw, "cap", 3)
    parser = CaptureParser("cap.gz", skip_bad=True)
    assert list(parser.parse_lines([b"17 " + raw + b"\n"])) == [] and parser.bad_lines == 1


@cache
def _checked_until(name: str, k: int) -> int:
    msgs = _window(name)
    stop = _depth_positions(msgs)[k]
    bk = BinanceBook(MARKET[name])
    for ts, raw in msgs[:stop]:
        bk.feed_message(raw, ts)
    return bk.bookticker_checked


@pytest.mark.parametrize("name", [FUT, SPOT])
def test_duplicate_depth_message_is_stale_not_a_gap(name):
    bk, store, ref, actions = drive(name, faulty(name, "duplicate", 30))
    assert bk.stale == 1 and bk.gaps == 0 and bk.resyncs == 0
    assert "stale depth update" in bk.reports[-1].reason and bk.reports[-1].line > 0
    assert_recovered(bk, store, ref)


@pytest.mark.parametrize("name", [FUT, SPOT])
def test_reordered_depth_messages_resync(name):
    bk, store, ref, actions = drive(name, faulty(name, "reorder", 30))
    assert bk.gaps == 1 and bk.resyncs == 1
    # the late message arrives after the resync: stale (futures) or older than the snapshot (spot)
    assert bk.stale == (1 if name == FUT else 0)
    assert_recovered(bk, store, ref)


@pytest.mark.parametrize("name", [FUT, SPOT])
def test_corrupt_bookticker_and_trade_are_counted_only(name):
    msgs = _window(name)
    stream = [(ts, raw, n) for n, (ts, raw) in enumerate(msgs)]
    bt = [i for i, (_, raw, _) in enumerate(stream) if b"bookTicker" in raw][200]
    tr = [i for i, (_, raw, _) in enumerate(stream) if b"@trade" in raw][50]
    stream[bt] = (stream[bt][0], stream[bt][1][:-3], stream[bt][2])
    stream[tr] = (stream[tr][0], stream[tr][1].replace(b'"q":"', b'"q":"x'), stream[tr][2])
    bk, store, ref, _ = drive(name, stream, check_every=False)
    assert bk.malformed == 2 and bk.gaps == 0 and bk.resyncs == 0
    errs = [r for r in bk.reports if isinstance(r, InputError)]
    assert errs[0].line == bt + 1 and "malformed JSON" in errs[0].reason and errs[0].source == name
    assert errs[1].line == tr + 1 and "field 'q' is not a plain decimal" in errs[1].reason
    assert_recovered(bk, store, ref)


def test_bookticker_mismatch_is_counted_and_reported():
    msgs = _window(FUT)
    bk = BinanceBook("futures")
    for ts, raw in msgs:
        bk.feed_message(raw, ts)
    checked = bk.bookticker_checked
    assert checked > 0 and bk.bookticker_mismatch == 0
    bp, bq, ap, aq = bk.top_units()
    u = bk.last_u
    base = {"e": "bookTicker", "s": "BTCUSDT", "b": format_units(bp, 2), "B": format_units(bq, 3),
            "a": format_units(ap, 2), "A": format_units(aq, 3), "T": 1, "E": 1}
    assert bk.feed_message(json.dumps({**base, "u": u})) == ()
    assert bk.bookticker_checked == checked + 1 and bk.bookticker_mismatch == 0
    bk.feed_message(json.dumps({**base, "u": u, "B": format_units(bq + 1, 3)}))
    assert bk.bookticker_mismatch == 1 and "mismatch" in bk.reports[-1].reason
    # equal values written differently still match (exact decimal comparison)
    bk.feed_message(json.dumps({**base, "u": u, "b": format_units(bp, 2) + "000"}))
    assert bk.bookticker_mismatch == 1 and bk.bookticker_checked == checked + 3
    bk._check()


# ------------------------------------------------------------------------------------------
# the rules at their boundaries, on hand-made messages
# ------------------------------------------------------------------------------------------

def depth(U: int, u: int, pu: int | None = None, b=(), a=(), s: str = "BTCUSDT", E: int = 1000) -> str:
    d = {"e": "depthUpdate", "E": E, "s": s, "U": U, "u": u, "b": [list(x) for x in b], "a": [list(x) for x in a]}
    if pu is not None:
        d["T"] = E
        d["pu"] = pu
    return json.dumps({"stream": "btcusdt@depth", "data": d})


def snapshot(last: int, b=(("100.0", "1.0"),), a=(("101.0", "1.0"),)) -> str:
    return json.dumps({"lastUpdateId": last, "bids": [list(x) for x in b], "asks": [list(x) for x in a]})


def test_futures_rules_at_the_boundaries():
    bk = BinanceBook("futures")
    acts = bk.feed_message(depth(90, 99, 89, b=[("100.0", "9.0")]))     # u < 100: dropped
    assert len(acts) == 1 and not bk.synced
    bk.feed_message(depth(100, 105, 99, b=[("100.0", "2.0")]))         # U <= 100 <= u: first applied
    bk.feed_message(depth(106, 110, 105, a=[("101.0", "3.0")]))
    bk._check()
    assert bk.apply_snapshot(snapshot(100)) == ()
    bk._check()
    assert bk.synced and bk.last_u == 110 and bk.applied == 2
    assert bk.best_bid() == (Decimal("100.0"), Decimal("2.0")) and bk.best_ask() == (Decimal("101.0"), Decimal("3.0"))
    # continuity is pu == previous u; U need not be previous u + 1 on futures
    assert bk.feed_message(depth(115, 120, 110, b=[("99.5", "1.0")])) == ()
    acts = bk.feed_message(depth(121, 125, 119))
    assert bk.gaps == 1 and "pu=119" in acts[0].reason and not bk.synced
    bk._check()


def test_spot_rules_at_the_boundaries():
    bk = BinanceBook("spot")
    bk.feed_message(depth(90, 100, b=[("100.0", "9.0")]))               # u <= 100: dropped on spot
    bk.feed_message(depth(101, 105, b=[("100.0", "2.0")]))              # U <= 101 <= u: applied
    assert bk.apply_snapshot(snapshot(100)) == ()
    bk._check()
    assert bk.applied == 1 and bk.last_u == 105
    assert bk.feed_message(depth(106, 107)) == ()
    acts = bk.feed_message(depth(109, 110))                            # U != 107 + 1
    assert bk.gaps == 1 and "expected U=108" in acts[0].reason
    bk._check()


@pytest.mark.parametrize("market", ["futures", "spot"])
def test_snapshot_too_old_then_newer(market):
    fut = market == "futures"
    bk = BinanceBook(market)
    bk.feed_message(depth(200, 210, 199 if fut else None, b=[("100.0", "2.0")]))
    acts = bk.apply_snapshot(snapshot(150))
    assert len(acts) == 1 and "older than the buffered events" in acts[0].reason
    assert bk.snapshots_rejected == 1 and bk.needs_snapshot and not bk.synced
    bk._check()
    assert bk.apply_snapshot(snapshot(205)) == ()
    bk._check()
    assert bk.synced and bk.last_u == 210 and bk.best_bid() == (Decimal("100.0"), Decimal("2.0"))
    # an unsolicited snapshot while synchronized is ignored (reported)
    assert bk.apply_snapshot(snapshot(300)) == () and bk.snapshots_rejected == 2 and bk.last_u == 210
    bk._check()


def test_snapshot_newer_than_buffer_waits_for_straddling_event():
    bk = BinanceBook("futures")
    bk.feed_message(depth(10, 20, 9))
    assert bk.apply_snapshot(snapshot(30)) == ()          # every buffered event older: dropped
    assert bk.synced and bk.applied == 0
    assert bk.feed_message(depth(21, 29, 20)) == ()        # still older than the snapshot: dropped
    assert bk.feed_message(depth(25, 35, 29, b=[("100.0", "0")])) == ()
    assert bk.applied == 1 and bk.best_bid() is None
    bk._check()
    bk2 = BinanceBook("futures")
    bk2.feed_message(depth(10, 20, 9))
    bk2.apply_snapshot(snapshot(30))
    acts = bk2.feed_message(depth(31, 35, 30))             # U > lastUpdateId: no straddle
    assert bk2.gaps == 1 and "does not satisfy" in acts[0].reason
    bk2._check()


def test_events_level_updates_and_resync_replacement():
    bk = BinanceBook("futures", symbol="BTCUSDT")
    store = RowStore()
    bk.apply_snapshot(json.dumps({"lastUpdateId": 1, "E": 5000, "bids": [["100.00", "1.50"], ["99.50", "2"]],
                                  "asks": [["101.00", "1.0"]]}))
    ev = bk.take_events()
    store.apply(ev)
    # the snapshot is one line of inserts; ids are price * 10**2, volumes exact decimals
    assert ev.first_line == ev.last_line == 1 and (ev.line == 1).all() and (ev.sign == 1).all()
    rows = sorted(map(tuple, ev.cols.tolist()))
    assert rows == [(5000.0, 9950.0, 0.0, 2.0, 99.5), (5000.0, 10000.0, 0.0, 1.5, 100.0),
                    (5000.0, 10100.0, 0.0, 1.0, 101.0)]
    bk.feed_message(depth(1, 3, 0, b=[("100.0", "0.25"), ("99.5", "0"), ("98", "7")], E=6000))
    ev = bk.take_events()
    store.apply(ev)
    assert ev.first_line == ev.last_line == 2
    assert list(zip(ev.rel.tolist(), ev.sign.tolist(), ev.cols[:, 1].tolist(), ev.cols[:, 3].tolist(),
                    strict=True)) == [(0, -1, 10000.0, 1.5), (0, 1, 10000.0, 0.25), (0, -1, 9950.0, 2.0),
                                      (0, 1, 9800.0, 7.0)]
    assert ev.cols[1, 0] == 6000.0 and ev.cols[0, 0] == 5000.0    # t: the time that set the level
    acts = bk.feed_message(depth(10, 12, 9))
    assert isinstance(acts[0], NeedSnapshot) and len(bk.take_events()) == 0   # rows stay until replaced
    bk.apply_snapshot(snapshot(12, b=[("100.0", "4")], a=[("102.0", "1")]))
    ev = bk.take_events()
    store.apply(ev)
    assert (ev.line == 3).all() and ev.first_line == 3
    assert ev.sign.tolist() == [-1, -1, -1, 1, 1]
    assert_store_matches(store, bk)
    bk._check()


def test_bad_messages_never_touch_the_book():
    bk = BinanceBook("futures")
    bk.feed_message(depth(1, 1, 0))
    bk.apply_snapshot(snapshot(1))
    before = book_units(bk)
    bad = [b"{", b"[]", b"null", b'{"stream":"x"}', depth(2, 3, 1, s="ETHUSDT"), depth(5, 3, 1),
           json.dumps({"e": "depthUpdate", "E": 1, "s": "BTCUSDT", "U": 2, "u": 3, "b": [], "a": []}),  # no pu
           json.dumps({"e": "depthUpdate", "E": 1, "s": "BTCUSDT", "U": 2, "u": 3, "pu": 1, "b": [["1", "x"]],
                       "a": []}),
           json.dumps({"e": "kline", "E": 1}), b"\xff\xfe"]
    for i, m in enumerate(bad):
        assert bk.feed_message(m) == ()
        bk._check()
        assert bk.malformed == i + 1, m
        assert book_units(bk) == before
    reasons = [r.reason for r in bk.reports]
    assert "symbol 'ETHUSDT'" in reasons[4] and "U=5 > u=3" in reasons[5] and "without 'pu'" in reasons[6]
    assert "not a pair of plain decimal strings" in reasons[7] and "unknown event type 'kline'" in reasons[8]
    assert all(r.source == "<binance>" for r in bk.reports)
    assert [r.line for r in bk.reports] == list(range(2, 2 + len(bad)))


def test_crossed_book_is_counted():
    bk = BinanceBook("spot")
    bk.feed_message(depth(2, 2))
    bk.apply_snapshot(snapshot(1))
    bk.feed_message(depth(3, 3, b=[("101.5", "1")]))
    assert bk.crossed == 1 and bk.is_crossed() and "crossed" in bk.reports[-1].reason
    bk._check()
    bk.feed_message(depth(4, 4, b=[("101.5", "0")]))
    assert bk.crossed == 1 and not bk.is_crossed()
    bk._check()


def test_scale_mismatches():
    bk = BinanceBook("spot")
    bk.feed_message(depth(2, 2, b=[("100.5", "1")]))         # fewer decimals than the snapshot: rescaled
    bk.apply_snapshot(snapshot(1, b=[("100.25", "1.000")]))
    assert bk.px_decimals == 2 and bk.qty_decimals == 3
    assert bk.levels(BIDS) == {10025: 1000, 10050: 1000}
    acts = bk.feed_message(depth(3, 3, b=[("100.125", "1")]))  # more decimals than the book's scale
    assert bk.gaps == 1 and bk.malformed == 1 and "more decimals" in acts[0].reason
    bk._check()


def test_resync_on_request_and_parse_units():
    bk = BinanceBook("spot")
    bk.feed_message(depth(2, 2))
    bk.apply_snapshot(snapshot(1))
    acts = bk.resync("consumer too slow")
    assert acts[0].reason == "consumer too slow" and bk.resyncs == 1 and bk.gaps == 0
    bk._check()
    assert parse_units("1.2300", 2) == 123 and parse_units("1.231", 2) is None and parse_units("7", 3) == 7000
    with pytest.raises(ValueError):
        parse_units("1e5", 2)
    assert format_units(5, 3) == "0.005" and format_units(6180020, 2) == "61800.20" and format_units(7, 0) == "7"
    with pytest.raises(ValueError):
        BinanceBook("options")


# ------------------------------------------------------------------------------------------
# hypothesis
# ------------------------------------------------------------------------------------------

_level = st.tuples(st.integers(0, 20), st.integers(0, 3))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(_level, max_size=6), st.lists(_level, max_size=6)), min_size=1, max_size=25),
       st.lists(_level, max_size=8), st.lists(_level, max_size=8), st.sampled_from(["futures", "spot"]))
def test_random_depth_streams_against_a_dict_model(updates, snap_b, snap_a, market):
    """Bids on prices 0..20, asks on 10..30 (so books may cross), repeated prices within a
    message: the book equals a dict model after every event, and the rows replay to it."""
    fut = market == "futures"
    bk = BinanceBook(market, px_decimals=1, qty_decimals=0)
    store = RowStore()
    model = [{}, {}]

    def fmt(side, lv):
        return [(f"{p + 10 * side}.{p % 10}", str(q)) for p, q in lv]

    for side, lv in enumerate((snap_b, snap_a)):
        for p, q in fmt(side, lv):
            if int(q):
                model[side][parse_units(p, 1)] = int(q)
    snap = {"lastUpdateId": 10, "bids": [list(x) for x in fmt(0, snap_b)], "asks": [list(x) for x in fmt(1, snap_a)]}
    bk.feed_message(depth(9, 9, 8 if fut else None))     # older than the snapshot on both markets
    seen = {}
    for p, _q in snap["bids"]:
        seen[p] = seen.get(p, 0) + 1
    acts = bk.apply_snapshot(json.dumps(snap))
    if any(v > 1 for v in seen.values()) or len({p for p, _ in snap["asks"]}) < len(snap["asks"]):
        assert bk.snapshots_rejected == 1 and acts      # a snapshot repeating a level is refused
        return
    bk._check()
    store.apply(bk.take_events())
    u = 10
    for b, a in updates:
        acts = bk.feed_message(depth(u if fut else u + 1, u + 2, u if fut else None, b=fmt(0, b), a=fmt(1, a)))
        assert acts == ()
        u += 2
        for side, lv in enumerate((b, a)):
            for p, q in fmt(side, lv):
                if int(q):
                    model[side][parse_units(p, 1)] = int(q)
                else:
                    model[side].pop(parse_units(p, 1), None)
        bk._check()
        store.apply(bk.take_events())
        assert book_units(bk) == (model[0], model[1])
        crossed = bool(model[0] and model[1] and max(model[0]) >= min(model[1]))
        assert bk.is_crossed() == crossed
    assert_store_matches(store, bk)
    assert bk.gaps == 0 and bk.applied == len(updates)


_dec_str = st.builds(lambda i, f: f"{i}.{f}" if f else str(i), st.integers(0, 10**6),
                     st.sampled_from(["", "0", "5", "25", "00100000", "12345678"]))


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_fast_decoder_matches_json_decoder(data):
    kind = data.draw(st.sampled_from(["depth", "ticker", "trade", "snapshot"]))
    if kind == "depth":
        obj = {"e": "depthUpdate", "E": data.draw(st.integers(0, 2**62)), "s": "BTCUSDT",
               "U": data.draw(st.integers(0, 10**15)), "u": data.draw(st.integers(0, 10**15)),
               "b": data.draw(st.lists(st.lists(_dec_str, min_size=2, max_size=2), max_size=5)),
               "a": data.draw(st.lists(st.lists(_dec_str, min_size=2, max_size=2), max_size=5))}
        if data.draw(st.booleans()):
            obj["pu"] = data.draw(st.integers(0, 10**15))
            obj["T"] = 5
    elif kind == "ticker":
        obj = {"u": data.draw(st.integers(0, 10**15)), "s": "BTCUSDT", "b": data.draw(_dec_str),
               "B": data.draw(_dec_str), "a": data.draw(_dec_str), "A": data.draw(_dec_str)}
        if data.draw(st.booleans()):
            obj.update({"e": "bookTicker", "E": 1, "T": 2})
    elif kind == "trade":
        obj = {"e": "trade", "E": 1, "T": 2, "s": "BTCUSDT", "t": data.draw(st.integers(0, 10**12)),
               "p": data.draw(_dec_str), "q": data.draw(_dec_str), "m": data.draw(st.booleans())}
    else:
        obj = {"lastUpdateId": data.draw(st.integers(0, 10**15)),
               "bids": data.draw(st.lists(st.lists(_dec_str, min_size=2, max_size=2), max_size=5)),
               "asks": data.draw(st.lists(st.lists(_dec_str, min_size=2, max_size=2), max_size=5))}
    keys = data.draw(st.permutations(list(obj)))
    obj = {k: obj[k] for k in keys}
    if kind != "snapshot" and data.draw(st.booleans()):
        obj = {"stream": "btcusdt@x", "data": obj}
    indent = data.draw(st.sampled_from([None, 1]))
    sep = data.draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    text = json.dumps(obj, indent=indent, separators=sep, ensure_ascii=data.draw(st.booleans()))
    mutate = data.draw(st.sampled_from(["none", "none", "escape", "cut", "extra", "float", "neg", "dup", "top",
                                        "unknown", "unknown"]))
    if mutate == "escape":
        text = text.replace('"BTCUSDT"', '"BTC\\u0055SDT"')
    elif mutate == "cut":
        text = text[: data.draw(st.integers(0, max(0, len(text) - 1)))]
    elif mutate == "extra":
        text = text[:-1] + ', "zz": [1, {"q": null}]}'
    elif mutate == "float":
        text = text.replace('"u": ', '"u": 1.5e1 + ').replace('"u":', '"u":0.5,"x":')
    elif mutate == "neg":
        text = text.replace('"E":', '"E":-')
    elif mutate == "dup":
        text = text[:-1] + ', "s": "BTCUSDT"}'
    elif mutate == "top":     # a message field beside the envelope (or a second copy in a bare one)
        text = '{"u": 7, ' + text[1:]
    elif mutate == "unknown":   # unknown scalar members (COIN-M's ps): the fast path skips and counts them
        scalars = st.one_of(st.text(max_size=8), st.integers(-2**70, 2**70), st.floats(allow_nan=False,
                            allow_infinity=False), st.booleans(), st.none())
        extra = data.draw(st.dictionaries(st.sampled_from(["ps", "zz", "x1", "E2"]), scalars, min_size=1, max_size=5))
        body = ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=data.draw(st.booleans()))}"
                         for k, v in extra.items())
        inner = text.rfind("}", 0, len(text) - 1) if text.startswith('{"stream"') else -1
        at = inner if inner > 0 and data.draw(st.booleans()) else len(text) - 1
        text = text[:at].rstrip() + ", " + body + text[at:]
        fast, slow = Decoder(), Decoder()
        try:
            slow.from_obj(json.loads(text))
        except (ValueError, InputError):
            pass
        else:
            fast.decode(text)
            assert fast.unknown_fields == slow.unknown_fields
    dec = Decoder()
    try:
        want = dec.from_obj(json.loads(text))
    except (ValueError, InputError):
        with pytest.raises(InputError):
            dec.decode(text)
        return
    if mutate == "dup":   # json keeps the last duplicate; the decoder must not be more lenient
        try:
            assert_same_record(dec.decode(text), want)
        except InputError:
            pass
        return
    assert_same_record(dec.decode(text), want)
    assert_same_record(decode_message(text.encode()), want)


def test_decoder_errors_name_source_and_line():
    with pytest.raises(InputError, match=r"^feed:7: malformed JSON"):
        Decoder().decode(b'{"e":', "feed", 7)
    with pytest.raises(InputError, match="not a Binance message"):   # the envelope's extra field is ignored
        decode_message('{"stream": "a", "data": {}, "x": 1}')
    with pytest.raises(InputError, match="out of range"):
        decode_message('{"lastUpdateId": 1, "bids": [["9007199254740992", "1"]], "asks": []}')
    r = decode_message('{"result": null, "id": 3}')
    assert r.id == 3 and r.result is None
    rec = decode_message('{"lastUpdateId": 1, "bids": [["1.5", "2"], ["1.25", "3.000"]], "asks": []}')
    assert rec.px_dec == 2 and rec.qty_dec == 3 and rec.bids.tolist() == [[150, 2000], [125, 3000]]
