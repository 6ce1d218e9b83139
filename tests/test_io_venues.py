"""Venue book cores (ddms/io/venues) and the cryptofeed capture reader (ddms/io/cryptofeed.py).

Oracles: synthetic streams whose true books and checksums are computed independently
(tests/venue_sim.py); the real captures in ../shared/data/venues (skipped where absent), whose
every checksum must verify; and a row store that replays the emitted bids/asks events (every
delete must remove exactly the row inserted before) and must end equal to the books.
Fault injection: one symbol's messages are dropped, duplicated, reordered or corrupted; the fault
must be detected for that symbol (or be harmless: the book stays equal to the truth), and every
other symbol must run exactly as without the fault.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
from decimal import Decimal

import pytest
from conftest import SHARED
from hypothesis import given, settings
from hypothesis import strategies as st
from mutate import fuzz
from venue_sim import binance, coinbase, kraken, okx

from ddms.errors import InputError, ReplayError
from ddms.io.cryptofeed import CryptofeedParser, parse_line, read_cryptofeed, venue_of
from ddms.io.levels import ASKS, BIDS, LevelBook, per_symbol, price_key
from ddms.io.venues.binance import BinanceBooks
from ddms.io.venues.coinbase import CoinbaseBooks
from ddms.io.venues.kraken import KrakenBooks, kraken_checksum
from ddms.io.venues.okx import OkxBooks, okx_checksum

VENUES = SHARED / "data" / "venues"
CORES = {"kraken": KrakenBooks, "okx": OkxBooks, "coinbase": CoinbaseBooks}
GEN = {"kraken": kraken, "okx": okx, "coinbase": coinbase}


class Rows:
    """The engine's view of the events: per symbol, (rel, id) -> (t, volume, price)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def apply(self, events) -> None:
        for ev in per_symbol(events):     # a chunk lane's ChunkEvents as the per-message events
            b = ev.batch
            assert (b.line[1:] >= b.line[:-1]).all() and b.first_line <= int(b.line[0]) <= b.last_line
            store = self.rows.setdefault(ev.symbol, {})
            for rel, sign, cols in zip(b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), strict=True):
                t, i, broker, vol, px = cols
                assert broker == 0 and i == int(i)
                key = (rel, i)
                if sign < 0:
                    assert store.pop(key) == (t, vol, px), f"{ev.symbol}: delete of a row not held"
                else:
                    assert key not in store, f"{ev.symbol}: insert over a held row"
                    store[key] = (t, vol, px)

    def levels(self, symbol: str) -> tuple[dict, dict]:
        out: tuple[dict, dict] = ({}, {})
        for (rel, _), (_, vol, px) in self.rows.get(symbol, {}).items():
            assert px not in out[rel]
            out[rel][px] = vol
        return out


def as_floats(side: dict[str, str]) -> dict[float, float]:
    return {float(p): float(q) for p, q in side.items()}


def book_strings(book: LevelBook, side: int) -> dict[str, str]:
    return {lv.px: lv.qty for lv in book.levels[side].values()}


def run_core(venue: str, msgs: list, check: bool = True):
    core = CORES[venue](f"<{venue}>")
    rows = Rows()
    actions = []
    for i, (_, m) in enumerate(msgs, 1):
        actions += core.feed(m, i)
        rows.apply(core.take_events())
        if check and i % 7 == 0:
            core._check()
    core._check()
    return core, rows, actions


def assert_equals_truth(core, rows, truth, symbols=None) -> None:
    for sym, (b, a) in truth.items():
        if symbols is not None and sym not in symbols:
            continue
        book = core.books[sym]
        assert book_strings(book, BIDS) == b and book_strings(book, ASKS) == a, sym
        assert rows.levels(sym) == (as_floats(b), as_floats(a)), sym


# ------------------------------------------------------------------------------------------
# synthetic streams
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=25, deadline=None)
def test_synthetic_streams_build_the_true_books(venue, seed):
    msgs, truth = GEN[venue](random.Random(seed))
    core, rows, actions = run_core(venue, msgs)
    assert actions == [] and not core.reports and core.malformed == 0
    assert_equals_truth(core, rows, truth)
    for sym in truth:
        s = core.status[sym]
        updates = sum(1 for x, m in msgs if x == sym and not (isinstance(m, dict) and m.get("type") == "ticker")) - 1
        assert s.synced and s.resyncs == 0 and s.crossed == 0 and s.snapshots == 1 and s.depth_events == updates
        if venue != "coinbase":
            # OKX snapshots carry a checksum too, Kraken's do not
            assert s.checksum_checked == updates + (venue == "okx") and s.checksum_mismatch == 0
        else:
            tickers = sum(1 for x, m in msgs if x == sym and m.get("type") == "ticker")
            assert s.ticker_checked == tickers and s.ticker_disagree == 0


def test_kraken_truncates_to_depth_and_applies_republished_levels():
    msgs, truth = kraken(random.Random(7), depth=10, n=400)
    assert any(len(e) == 4 for _, m in msgs if isinstance(m, list) for d in m[1:-2] for k in ("a", "b")
               for e in d.get(k, []))
    core, rows, _ = run_core("kraken", msgs)
    assert_equals_truth(core, rows, truth)
    assert sum(s.truncated for s in core.status.values()) > 0
    assert all(core.books[p].depth(BIDS) <= 10 for p in truth)


def test_checksum_functions_match_the_documented_examples():
    # Kraken's documented example (support article "How to calculate the checksum"), top levels only
    asks = [("0.05005", "0.00000500"), ("0.05010", "0.00000500")]
    assert kraken_checksum(asks, []) == __import__("zlib").crc32(b"50055005010500")
    # OKX: interleaving when one side is shorter, and the sign
    bids = [("3366.1", "7"), ("3366", "6")]
    asks = [("3366.8", "9")]
    c = __import__("zlib").crc32(b"3366.1:7:3366.8:9:3366:6")
    assert okx_checksum(bids, asks) == (c - 2**32 if c >= 2**31 else c)


def test_level_book_rebases_ids_on_a_finer_price():
    book = LevelBook("X")
    book.set(BIDS, "100", "1", 1.0, 1)
    book.set(BIDS, "99.5", "2", 1.0, 2)
    rows = Rows()
    from ddms.io.levels import SymbolEvents
    rows.apply([SymbolEvents("v", "X", book.take())])
    book._check()
    assert book.scale == 1 and sorted(k for _, k in rows.rows["X"]) == [995.0, 1000.0]
    assert price_key("99.50") == price_key("99.5")[:1] + (1,)
    with pytest.raises(ValueError):
        book.set(BIDS, "1e5", "1", 1.0, 3)
    with pytest.raises(ValueError):
        book.set(BIDS, "1." + "1" * 17, "1", 1.0, 3)   # 17 decimals: the id is not exact in float64
    book._check()


# ------------------------------------------------------------------------------------------
# fault injection (synthetic: always available)
# ------------------------------------------------------------------------------------------

def _is_update(venue: str, m) -> bool:
    if venue == "kraken":
        return isinstance(m, list) and not any("as" in d or "bs" in d for d in m[1:-2])
    if venue == "okx":
        return m.get("action") == "update"
    return m.get("type") == "l2update"


def _entries(venue: str, m) -> list[list]:
    if venue == "kraken":
        return [e for d in m[1:-2] for k in ("a", "b") for e in d.get(k, [])]
    if venue == "okx":
        return m["data"][0]["asks"] + m["data"][0]["bids"]
    return [c[1:] for c in m["changes"]]


def faulted_stream(venue: str, seed: int, fault: str | None, n: int) -> tuple[list, dict, random.Random]:
    """:data:`GEN`'s stream of ``venue`` (``n`` messages, from ``seed``) with ``fault`` injected
    in one of its symbols (:func:`inject`; Coinbase carries no checksum, so its checksum fault
    corrupts a price; a symbol without an update to spoil is left clean); with the generator's
    random state, which the callers go on drawing from."""
    if venue == "coinbase" and fault == "corrupt_checksum":
        fault = "corrupt_price"
    rng = random.Random(seed)
    msgs, truth = GEN[venue](rng, n=n)
    if fault is not None:
        try:
            msgs = inject(venue, msgs, sorted(truth)[seed % len(truth)], fault, rng)
        except (IndexError, StopIteration, KeyError):
            pass                       # no update of that symbol to spoil
    return msgs, truth, rng


def inject(venue: str, msgs: list, sym: str, fault: str, rng: random.Random) -> list:
    """``msgs`` with one fault in ``sym``'s updates."""
    out = copy.deepcopy(msgs)
    idx = [i for i, (s, m) in enumerate(out) if s == sym and _is_update(venue, m)]
    # a swapped pair needs a later update of the symbol: each message of the pair carries the
    # checksum of the state it makes, so a level's republish and its removal swapped as the
    # symbol's last two messages both verify (nothing after them can see the level left behind)
    i = rng.choice(idx[:-2] if fault == "reorder" else idx[:-1]) if len(idx) > 1 else idx[0]
    m = out[i][1]
    if fault == "drop":
        del out[i]
    elif fault == "duplicate":
        out.insert(i + 1, copy.deepcopy(out[i]))
    elif fault == "reorder":
        j = idx[idx.index(i) + 1] if idx.index(i) + 1 < len(idx) else i
        out[i], out[j] = out[j], out[i]
    elif fault == "corrupt_price":
        e = _entries(venue, m)[0]
        if venue == "coinbase":
            m["changes"][0][1] = "not-a-price"
        else:
            e[0] = str(Decimal(e[0]) + Decimal("0.01"))
    elif fault == "corrupt_checksum":
        if venue == "kraken":
            d = next(d for d in m[1:-2] if "c" in d)
            d["c"] = str((int(d["c"]) + 1) % 2**32)
        else:
            m["data"][0]["checksum"] += 1
    else:  # pragma: no cover
        raise AssertionError(fault)
    return out


def recovery_snapshot(venue: str, sym: str, truth) -> object:
    b, a = truth[sym]
    bids = sorted(b.items(), key=lambda kv: Decimal(kv[0]), reverse=True)
    asks = sorted(a.items(), key=lambda kv: Decimal(kv[0]))
    if venue == "kraken":
        return [1, {"as": [[p, q, "1.0"] for p, q in asks], "bs": [[p, q, "1.0"] for p, q in bids]}, "book-10", sym]
    if venue == "okx":
        return {"arg": {"channel": "books", "instId": sym}, "action": "snapshot",
                "data": [{"asks": [[p, q, "0", "1"] for p, q in asks], "bids": [[p, q, "0", "1"] for p, q in bids],
                          "ts": "1", "seqId": 10**9, "prevSeqId": -1}]}
    return {"type": "snapshot", "product_id": sym, "bids": [list(x) for x in bids], "asks": [list(x) for x in asks]}


ALWAYS_DETECTED = {("kraken", "corrupt_checksum"), ("kraken", "corrupt_price"), ("okx", "corrupt_checksum"),
                   ("okx", "drop"), ("okx", "reorder"), ("coinbase", "corrupt_price")}
# the levels a venue's checks cover: an undetected fault must leave them right (Kraken's checksum
# covers its whole depth-10 book here, OKX's the best 25 levels; Coinbase's level2 has no check
# that could see a lost or reordered message)
COVERED = {"kraken": 10, "okx": 25, "coinbase": 0}


def assert_top_equals_truth(core, truth, sym, n) -> None:
    b, a = truth[sym]
    want_b = sorted(b.items(), key=lambda kv: Decimal(kv[0]), reverse=True)[:n]
    want_a = sorted(a.items(), key=lambda kv: Decimal(kv[0]))[:n]
    assert core.books[sym].top(BIDS, n) == want_b and core.books[sym].top(ASKS, n) == want_a, sym


@pytest.mark.parametrize("venue,fault", [(v, f) for v in ("kraken", "okx", "coinbase")
                                         for f in ("drop", "duplicate", "reorder", "corrupt_price", "corrupt_checksum")
                                         if not (v == "coinbase" and f == "corrupt_checksum")])
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=12, deadline=None)
def test_fault_in_one_symbol_is_detected_for_it_only(venue, fault, seed):
    rng = random.Random(seed)
    msgs, truth = GEN[venue](rng, n=120)
    syms = sorted(truth)
    need = 3 if fault == "reorder" else 2   # a swapped pair and an update after it (see inject)
    sym = rng.choice([s for s in syms if sum(1 for x, m in msgs if x == s and _is_update(venue, m)) >= need]
                     or pytest.skip(f"no symbol with {need} updates"))
    clean, _, _ = run_core(venue, msgs)
    bad = inject(venue, msgs, sym, fault, rng)
    core, rows, actions = run_core(venue, bad)
    st_ = core.status[sym]
    detected = st_.resyncs > 0 or st_.stale > 0
    assert {a.symbol for a in actions} <= {sym}
    if (venue, fault) in ALWAYS_DETECTED:
        assert detected, (fault, sym)
    if st_.resyncs:
        assert not st_.synced and actions and all(r.reason for r in actions)
    else:                       # not detected: then the fault was harmless where the checks look
        assert_top_equals_truth(core, truth, sym, COVERED[venue])
    for other in syms:          # the others run exactly as without the fault
        if other != sym:
            assert core.status[other] == clean.status[other], other
    assert_equals_truth(core, rows, truth, set(syms) - {sym})
    core.feed(recovery_snapshot(venue, sym, truth), len(bad) + 1)   # resubscribe / fresh snapshot
    rows.apply(core.take_events())
    core._check()
    assert core.status[sym].synced
    assert_equals_truth(core, rows, truth)


def test_okx_with_sequence_numbers_detects_duplicates_as_stale():
    rng = random.Random(3)
    msgs, truth = okx(rng, n=60)
    bad = inject("okx", msgs, "BTC-USDT", "duplicate", rng)
    core, rows, actions = run_core("okx", bad)
    assert core.status["BTC-USDT"].stale == 1 and core.status["BTC-USDT"].resyncs == 0 and not actions
    assert_equals_truth(core, rows, truth)


def test_okx_without_sequence_numbers_relies_on_the_checksum():
    msgs, truth = okx(random.Random(5), seq=False)
    core, rows, _ = run_core("okx", msgs)
    assert_equals_truth(core, rows, truth)
    assert all(s.checksum_checked > 0 and s.gaps == 0 for s in core.status.values())


def test_bad_messages_are_counted_and_never_raise():
    for venue, core in (("kraken", KrakenBooks()), ("okx", OkxBooks()), ("coinbase", CoinbaseBooks())):
        for i, m in enumerate((None, 3, "x", [], [1, 2, 3, 4], {}, {"arg": 1}, {"type": 5},
                               [1, {"a": "x"}, "book-x", "P"],
                               {"arg": {"channel": "books", "instId": "P"}, "action": "update", "data": [{"asks": 1}]},
                               {"type": "l2update", "product_id": "P", "changes": [["buy", "1", "x"]]}), 1):
            core.feed(m, i)
            core.take_events()
        core._check()
        assert core.malformed + sum(s.malformed for s in core.status.values()) >= 3, venue
        assert all(isinstance(r, InputError) and r.source for r in core.reports)


# ------------------------------------------------------------------------------------------
# the cryptofeed reader: real captures
# ------------------------------------------------------------------------------------------

def venue_file(name: str):
    p = VENUES / name
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


def read_all(path, **kw):
    parser = CryptofeedParser(str(path), skip_bad=kw.pop("skip_bad", False))
    rows = Rows()
    for ev in read_cryptofeed(path, parser=parser, **kw):
        rows.apply([ev])
    parser._check()
    return parser, rows


_CAPTURES = {"KRAKEN.ws.50.0": 10, "OKX.ws.1.0": 3, "COINBASE.ws.28.0": 10, "BINANCE.ws.1.0": 4,
             "BINANCE_FUTURES.ws.1.0": 4}


@pytest.fixture(scope="module")
def clean_runs():
    return {}


def clean(clean_runs, name):
    if name not in clean_runs:
        clean_runs[name] = read_all(venue_file(name))
    return clean_runs[name]


@pytest.mark.parametrize("name", sorted(_CAPTURES))
def test_real_capture_every_symbol_synced_and_checked(clean_runs, name):
    parser, rows = clean(clean_runs, name)
    s = parser.summary()
    assert len(s["symbols"]) == _CAPTURES[name]
    for sym, st_ in s["symbols"].items():
        assert st_["synced"] and st_["gaps"] == 0 and st_["resyncs"] == 0 and st_["crossed"] == 0, sym
        assert st_["malformed"] == 0 and st_["checksum_mismatch"] == 0 and st_["depth_events"] > 0, sym
    assert parser.bad_lines == 0 and s["malformed"] == 0
    want_checksums = {"KRAKEN.ws.50.0": 4269, "OKX.ws.1.0": 290}.get(name, 0)
    assert s["checksum_checked"] == want_checksums
    if name.startswith("COINBASE"):
        assert s["ticker_checked"] == 107 and s["ticker_checked"] - s["ticker_disagree"] >= 100
    if name.startswith("BINANCE"):
        assert s["bookticker_checked"] > 0 and s["bookticker_mismatch"] == 0 and s["snapshots"] == 4
    core = parser.core
    for sym in s["symbols"]:       # the events replay to the final books
        if isinstance(core, (KrakenBooks, OkxBooks, CoinbaseBooks)):
            b = core.books[sym]
            want = tuple({float(lv.px): float(lv.qty) for lv in b.levels[side].values()} for side in (BIDS, ASKS))
        else:
            bk = core.books[sym]
            want = tuple({float(p) / 10**bk.px_decimals: q / 10**bk.qty_decimals
                          for p, q in bk.levels(side).items()} for side in (BIDS, ASKS))
            want = tuple({p: pytest.approx(q, rel=1e-15) for p, q in w.items()} for w in want)
        assert rows.levels(sym) == want, sym


def _faulty_copy(tmp_path, name: str, sym_key: bytes, fault: str, k: int = 5):
    """The capture with one fault in the k-th book message mentioning ``sym_key``."""
    src = venue_file(name)
    lines = src.read_bytes().split(b"\n")
    idx = [i for i, ln in enumerate(lines) if sym_key in ln and (b'"c":' in ln or b'"action":"update"' in ln
                                                                   or b"depthUpdate" in ln)]
    if not name.startswith("BINANCE"):
        # a message that changes the checksummed top of the book, and whose levels the next
        # message of the symbol does not set again (else losing it may be invisible and harmless)
        def info(ln: bytes):
            m = json.loads(ln.partition(b": ")[2])
            if isinstance(m, list):
                return m[-3]["c"], {e[0] for d in m[1:-2] for kk in ("a", "b") for e in d.get(kk, [])}
            d = m["data"][0]
            return d["checksum"], {e[0] for e in d["asks"] + d["bids"]}
        infos = [info(lines[i]) for i in idx]
        idx = [i for n, i in enumerate(idx[1:-1], 1)
               if infos[n][0] != infos[n - 1][0] and not infos[n][1] <= infos[n + 1][1]]
    assert len(idx) >= 2, "no message to fault"
    k = min(k, len(idx) - 2)
    i = idx[k]
    if fault == "drop":
        del lines[i]
    elif fault == "reorder":
        lines[i], lines[idx[k + 1]] = lines[idx[k + 1]], lines[i]
    elif fault == "duplicate":
        lines.insert(i + 1, lines[i])
    elif fault == "corrupt_checksum":
        head, _, js = lines[i].partition(b": ")
        m = json.loads(js)
        if isinstance(m, list):
            d = next(d for d in m[1:-2] if "c" in d)
            d["c"] = str((int(d["c"]) + 1) % 2**32)
        else:
            m["data"][0]["checksum"] += 1
        lines[i] = head + b": " + json.dumps(m).encode()
    for f in src.parent.iterdir():
        if f.name.split(".")[0] == name.split(".")[0] and ".http." in f.name:
            shutil.copy(f, tmp_path / f.name)
    out = tmp_path / name
    out.write_bytes(b"\n".join(lines))
    return out


@pytest.mark.parametrize("name,key,sym", [("KRAKEN.ws.50.0", b'"XMR/USD"', "XMR/USD"),
                                          ("OKX.ws.1.0", b'"BTC-USDT"', "BTC-USDT"),
                                          ("BINANCE_FUTURES.ws.1.0", b'"s":"SUSHIUSDT"', "SUSHIUSDT")])
@pytest.mark.parametrize("fault", ["drop", "reorder", "corrupt_checksum"])
def test_real_capture_fault_is_detected_for_that_symbol_only(clean_runs, tmp_path, name, key, sym, fault):
    if fault == "corrupt_checksum" and name.startswith("BINANCE"):
        pytest.skip("Binance depth messages carry no checksum")
    base, _ = clean(clean_runs, name)
    parser, _ = read_all(_faulty_copy(tmp_path, name, key, fault))
    s, b = parser.summary()["symbols"], base.summary()["symbols"]
    assert s[sym]["resyncs"] >= 1 and not s[sym]["synced"], s[sym]
    assert s[sym]["gaps"] + s[sym]["checksum_mismatch"] >= 1
    assert all(a.symbol == sym for a in parser.actions if "buffered" not in a.reason)
    for other in s:
        if other != sym:
            assert s[other] == b[other], other


# ------------------------------------------------------------------------------------------
# the cryptofeed reader: lines, detection, fuzzing
# ------------------------------------------------------------------------------------------

def test_parse_line_forms_and_errors():
    assert parse_line(b"wss://ws.kraken.com <-> 1618678132.38\n") == ("open", "wss://ws.kraken.com", 1618678132.38, b"")
    assert parse_line(b"wss://x <- 1.5: {}") == ("sent", "wss://x", 1.5, b"{}")
    assert parse_line(b"https://a/b?symbol=X -> 2: {}") == ("http", "https://a/b?symbol=X", 2.0, b"{}")
    assert parse_line(b"3.25: [1]\r\n") == ("recv", None, 3.25, b"[1]")
    assert parse_line(b"  \n") is None
    for bad in (b"x: {}", b"1.5 {}", b"\xff\xfe: 1", b"wss://x <= 1: {}", b"1e5: {}", b"nonsense"):
        with pytest.raises(InputError, match=r"^f:4: "):
            parse_line(bad, 4, "f")
    assert venue_of("wss://fstream.binance.com/stream") == "binance_futures"
    assert venue_of(None, "/x/KRAKEN.ws.50.0") == "kraken" and venue_of("wss://ws.okx.com:8443/ws/v5") == "okx"


def synthetic_capture(venue: str, seed: int = 1) -> bytes:
    msgs, _ = GEN[venue](random.Random(seed), n=40)
    url = {"kraken": "wss://ws.kraken.com", "okx": "wss://ws.okx.com:8443/ws/v5/public",
           "coinbase": "wss://ws-feed.pro.coinbase.com"}[venue]
    lines = [f"{url} <-> 1600000000.0", f'{url} <- 1600000000.1: {{"op":"subscribe"}}']
    lines += [f"{1600000001 + i / 10}: {json.dumps(m, separators=(',', ':'))}" for i, (_, m) in enumerate(msgs)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
def test_synthetic_capture_reads_and_strict_mode_names_file_and_line(tmp_path, venue):
    data = synthetic_capture(venue)
    p = tmp_path / f"{venue.upper()}.ws.1.0"
    p.write_bytes(data)
    parser, _ = read_all(p)
    assert parser.summary()["synced"] and parser.bad_lines == 0
    lines = data.split(b"\n")
    lines[5] = lines[5][:-3]
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(InputError, match=rf"^{p}:6: malformed JSON"):
        read_all(p)
    parser, _ = read_all(p, skip_bad=True)
    assert parser.bad_lines == 1 and parser.bad_samples[0].line == 6


def _reader(tmp_path, name: str, skip_bad: bool):
    def read(data: bytes) -> None:
        p = tmp_path / name
        p.write_bytes(data)
        parser = CryptofeedParser(str(p), skip_bad=skip_bad)
        for _ in read_cryptofeed(p, parser=parser, http=[]):
            pass
        parser._check()
        parser.summary()
    return read


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_synthetic_capture(tmp_path, venue, skip_bad):
    out = fuzz(_reader(tmp_path, f"{venue.upper()}.ws.1.0", skip_bad), synthetic_capture(venue), 60, seed=11)
    assert out["ok"] + out["error"] == 60
    if skip_bad:
        assert out["error"] <= 6     # only whole-file problems (ReplayError) remain errors


@pytest.mark.parametrize("name", sorted(_CAPTURES))
def test_fuzz_real_capture_heads(tmp_path, name):
    head = b"".join(venue_file(name).read_bytes().splitlines(keepends=True)[:150])
    for skip_bad in (False, True):
        fuzz(_reader(tmp_path, name, skip_bad), head, 30, seed=5)


def test_unknown_venue_is_a_replay_error(tmp_path):
    p = tmp_path / "SOMEWHERE.ws.1.0"
    p.write_bytes(b"wss://example.org <-> 1.0\n2.0: {}\n")
    with pytest.raises(ReplayError, match="cannot tell the venue"):
        read_all(p)


# ------------------------------------------------------------------------------------------
# Binance, many symbols (synthetic: always available)
# ------------------------------------------------------------------------------------------

def run_binance(msgs, snaps, market: str):
    core = BinanceBooks(market, "<binance>")
    rows = Rows()
    at: dict[int, list] = {}
    for sym, (pos, snap) in snaps.items():
        at.setdefault(pos, []).append((sym, snap))
    line = 0
    for i in range(len(msgs) + 1):
        for sym, snap in at.get(i, ()):
            line += 1
            core.apply_snapshot(sym, snap, line)
            rows.apply(core.take_events())
        if i < len(msgs):
            line += 1
            core.feed(msgs[i][1], line)
            rows.apply(core.take_events())
    core._check()
    return core, rows


def binance_truth_equal(core, rows, truth, symbols) -> None:
    for sym in symbols:
        bk = core.books[sym]
        for side in (BIDS, ASKS):
            want = {price_key(p)[0] // 10**16: int(q) for p, q in truth[sym][side].items()}
            assert dict(bk.levels(side)) == want, sym
        assert rows.levels(sym) == tuple({float(p): float(q) for p, q in truth[sym][side].items()}
                                         for side in (BIDS, ASKS)), sym


@pytest.mark.parametrize("market,coin_m", [("spot", False), ("futures", False), ("futures", True)])
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=15, deadline=None)
def test_binance_many_symbols_clean(market, coin_m, seed):
    syms = ("BTCUSD_PERP", "ETHUSD_PERP") if coin_m else ("BTCUSDT", "ETHUSDT", "XRPUSDT")
    msgs, truth, snaps = binance(random.Random(seed), syms, market=market, coin_m=coin_m)
    core, rows = run_binance(msgs, snaps, market)
    s = core.summary()
    assert s["synced"] and s["gaps"] == s["resyncs"] == s["malformed"] == s["crossed"] == 0
    assert s["bookticker_mismatch"] == 0
    binance_truth_equal(core, rows, truth, syms)
    ndepth = sum(1 for _, m in msgs if "depthUpdate" == m["data"].get("e"))
    assert s["unknown_fields"] == ({"ps": ndepth} if coin_m else {})
    assert s["ignored"].get("aggtrade", 0) == sum(1 for _, m in msgs if "aggTrade" in m["stream"])


@pytest.mark.parametrize("fault", ["drop", "duplicate", "reorder", "corrupt_price"])
@pytest.mark.parametrize("market", ["spot", "futures"])
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=10, deadline=None)
def test_binance_fault_in_one_symbol_only(market, fault, seed):
    rng = random.Random(seed)
    syms = ("BTCUSDT", "ETHUSDT", "XRPUSDT")
    msgs, truth, snaps = binance(rng, syms, market=market, n=200)
    clean_core, _ = run_binance(msgs, snaps, market)
    sym = rng.choice(syms)
    pos = snaps[sym][0]
    idx = [i for i, (s, m) in enumerate(msgs) if s == sym and i >= pos and m["data"].get("e") == "depthUpdate"]
    if len(idx) < 3:
        return
    i = rng.choice(idx[1:-1])   # after the symbol's first applied event, before its last
    bad = copy.deepcopy(msgs)
    if fault == "drop":
        del bad[i]
    elif fault == "duplicate":
        bad.insert(i + 1, copy.deepcopy(bad[i]))
    elif fault == "reorder":
        j = idx[idx.index(i) + 1]
        bad[i], bad[j] = bad[j], bad[i]
    else:
        d = bad[i][1]["data"]
        (d["b"] or d["a"])[0][0] = "1.2.3"
    shift = {"drop": -1, "duplicate": 1}.get(fault, 0)
    snaps2 = {s: (p + (shift if p > i else 0), snap) for s, (p, snap) in snaps.items()}
    core, rows = run_binance(bad, snaps2, market)
    st_ = core.books[sym].counters()
    if fault == "duplicate":
        assert st_["stale"] == 1 and st_["gaps"] == 0 and core.books[sym].synced
    else:
        assert st_["gaps"] == 1 and st_["resyncs"] == 1 and not core.books[sym].synced
        assert st_["malformed"] == (1 if fault == "corrupt_price" else 0)
    for other in syms:
        if other != sym:
            assert core.books[other].counters() == clean_core.books[other].counters(), other
    binance_truth_equal(core, rows, truth, [o for o in syms if o != sym])
    last_u = max(m["data"]["u"] for s, m in msgs if s == sym and m["data"].get("e") == "depthUpdate")
    b, a = truth[sym]
    core.apply_snapshot(sym, {"lastUpdateId": last_u, "bids": [[p, q] for p, q in b.items()],
                              "asks": [[p, q] for p, q in a.items()]}, 10**6)
    rows.apply(core.take_events())
    core._check()
    assert core.books[sym].synced
    binance_truth_equal(core, rows, truth, syms)


# ------------------------------------------------------------------------------------------
# LevelBook alone against a dict
# ------------------------------------------------------------------------------------------

_px = st.builds(lambda i, d: f"{i / 10**d:.{d}f}", st.integers(1, 5000), st.integers(0, 6))
_qty = st.sampled_from(["0", "0.0", "1", "2.50", "0.001", "7", "1e3"])
_ops = st.lists(st.one_of(
    st.tuples(st.just("set"), st.integers(0, 1), _px, _qty),
    st.tuples(st.just("truncate"), st.integers(1, 5)),
    st.tuples(st.just("discard")),
    st.tuples(st.just("clear"))), max_size=60)


@given(_ops)
@settings(max_examples=200, deadline=None)
def test_level_book_matches_a_dict_and_its_rows(ops):
    """Random sets (new levels, changes, removals of present and absent levels, repeated prices
    written with other decimals), truncations, discards and snapshot clears: the book equals a
    dict model, and its rows replayed equal the book."""
    from ddms.io.levels import SymbolEvents
    book = LevelBook("S")
    model: tuple[dict, dict] = ({}, {})
    rows = Rows()
    held = False          # a discarded book's rows are still in the engine until clear()
    for line, op in enumerate(ops, 1):
        if op[0] == "set":
            _, side, px, qty = op
            if held:
                with pytest.raises(RuntimeError, match="discarded book"):
                    book.set(side, px, qty, 1.0, line)
                continue
            try:
                key = price_key(px)[0]
                q = price_key(qty)[0]
            except ValueError:
                with pytest.raises(ValueError):
                    book.set(side, px, qty, 1.0, line)
                continue
            book.set(side, px, qty, 1.0, line)
            if q == 0:
                model[side].pop(key, None)
            else:
                model[side][key] = qty
        elif op[0] == "truncate":
            book.truncate(op[1], line)
            for side in (BIDS, ASKS):
                keep = sorted(model[side], reverse=side == BIDS)[:op[1]]
                for k in list(model[side]):
                    if k not in keep:
                        del model[side][k]
        elif op[0] == "discard":
            book.discard()
            model[BIDS].clear()
            model[ASKS].clear()
            held = True
        else:
            book.clear(line)
            model[BIDS].clear()
            model[ASKS].clear()
            held = False
        book._check()
        assert book.as_dict(BIDS) == model[BIDS] and book.as_dict(ASKS) == model[ASKS]
        b = book.take()
        if b is not None:
            rows.apply([SymbolEvents("v", "S", b)])
        if not held:
            want = tuple({float(book.levels[s][k].px): float(v) for k, v in model[s].items()} for s in (BIDS, ASKS))
            assert rows.levels("S") == want


def test_binance_cryptofeed_capture_merges_rest_snapshots_by_time(tmp_path):
    """A synthetic cryptofeed Binance capture: the websocket file for two of three symbols, the
    REST file with all three snapshots; snapshots apply at their receive time, the third
    symbol's (another connection's) is ignored."""
    syms = ("BTCUSDT", "ETHUSDT", "XRPUSDT")
    msgs, truth, snaps = binance(random.Random(9), syms, market="futures", n=240)
    mine = ("BTCUSDT", "ETHUSDT")
    streams = "/".join(f"{s.lower()}@depth@100ms/{s.lower()}@bookTicker" for s in mine)
    url = f"wss://fstream.binance.com/stream?streams={streams}"
    ws = [f"{url} <-> 1600000000.0"]
    http = []
    for i, (s, m) in enumerate(msgs):
        t = 1600000001 + i / 100
        for sym, (pos, snap) in snaps.items():
            if pos == i:
                http.append(f"https://fapi.binance.com/fapi/v1/depth?symbol={sym}&limit=1000 -> {t - 0.001}: "
                            f"{json.dumps(snap)}")
        if s in mine:
            ws.append(f"{t}: {json.dumps(m, separators=(',', ':'))}")
    for sym, (pos, snap) in snaps.items():
        if pos == len(msgs):
            http.append(f"https://fapi.binance.com/fapi/v1/depth?symbol={sym}&limit=1000 -> 1700000000.0: "
                        f"{json.dumps(snap)}")
    (tmp_path / "BINANCE_FUTURES.ws.1.0").write_text("\n".join(ws) + "\n")
    (tmp_path / "BINANCE_FUTURES.http.0.0").write_text("\n".join(http) + "\n")
    parser, rows = read_all(tmp_path / "BINANCE_FUTURES.ws.1.0")
    s = parser.summary()
    assert set(s["symbols"]) == set(mine) and s["ignored"].get("http_other_connection") == 1
    assert s["synced"] and s["gaps"] == s["resyncs"] == s["malformed"] == 0 and s["bookticker_mismatch"] == 0
    binance_truth_equal(parser.core, rows, truth, mine)


@pytest.mark.parametrize("venue", ["kraken", "okx", "coinbase"])
def test_unknown_fields_are_counted_not_fatal(venue):
    """A venue adds a field: every book message carries ``zz`` (and OKX's data entries ``yy``);
    the books are those of the clean stream, no resync, each name counted per message."""
    msgs, truth = GEN[venue](random.Random(4))
    extra = copy.deepcopy(msgs)
    n = 0
    for sym, m in extra:
        if sym is None:
            continue
        if venue == "kraken":
            m[1]["zz"] = "new"
        elif venue == "okx":
            m["zz"] = 1
            m["data"][0]["yy"] = [1, {"a": None}]
        else:
            m["zz"] = {"nested": True}
        n += 1
    core, rows, actions = run_core(venue, extra)
    assert actions == [] and all(s.resyncs == 0 and s.malformed == 0 for s in core.status.values())
    assert_equals_truth(core, rows, truth)
    want = {"zz": n, "yy": n} if venue == "okx" else {"zz": n}
    if venue == "coinbase":   # tickers carry it too, counted; the subscriptions message has no product
        want = {"zz": sum(1 for s, m in extra if s is not None)}
    assert core.summary()["unknown_fields"] == want
    assert sum("unknown field" in r.reason for r in core.reports) == len(want)   # reported once per name
