"""The Coinbase and OKX chunk lanes (CoinbaseBooks/OkxBooks.feed_chunk: raw messages decoded and
applied in numba) against the per-message path (loads_json + feed, the reference).

Every comparison asks for identical actions, events (symbol, lines, every array), summaries,
reports, saved states (books: exact strings, dict order, rows pending) and errors, on the real
capture of ../shared, on mutated copies of it (flipped and non-UTF-8 bytes, truncated, repeated,
swapped and junk messages, JSON re-spelt: key order, whitespace, escapes; values changed: finer
prices (a re-base), crossing prices, zero sizes, odd times, unknown fields, long strings; OKX:
wrong checksums, broken or repeated sequence ids, several data entries) and on generated streams
with protocol faults, fed in chunks of random sizes.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ddms.io.kernels.strlevels import BAD, BIG, OK, decimal_of
from ddms.io.levels import per_symbol, price_key
from ddms.io.venues.base import loads_json
from ddms.io.venues.coinbase import CoinbaseBooks
from ddms.io.venues.kraken import KrakenBooks
from ddms.io.venues.okx import OkxBooks
from tests.conftest import shared_file
from tests.test_binance_chunk import same_events
from tests.test_io_venues import faulted_stream


def _payloads(name: str) -> list[bytes]:
    raw = shared_file("data", "venues", name).read_bytes().split(b"\n")
    out = []
    for line in raw[1:]:
        head, sep, body = line.partition(b": ")
        if sep and b" " not in head:
            out.append(body)
    return out


_REAL: dict[str, list[bytes]] = {}
_FILES = {"coinbase": "COINBASE.ws.28.0", "okx": "OKX.ws.1.0", "kraken": "KRAKEN.ws.50.0"}
_CORES = {"coinbase": CoinbaseBooks, "okx": OkxBooks, "kraken": KrakenBooks}


def _real(venue: str = "coinbase") -> list[bytes]:
    if venue not in _REAL:
        _REAL[venue] = _payloads(_FILES[venue])
    return _REAL[venue]


def _per_message(msgs: list[bytes], venue: str = "coinbase") -> tuple[list, list, CoinbaseBooks]:
    core = _CORES[venue]("<t>")
    acts: list = []
    events: list = []
    for n, m in enumerate(msgs, 1):
        try:
            msg = loads_json(m)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            core._bad(f"malformed JSON: {e}", n, None)
            continue
        acts += core.feed(msg, n)
        events += core.take_events()
    return acts, events, core


def _chunked(msgs: list[bytes], sizes: list[int], venue: str = "coinbase") -> tuple[list, list, CoinbaseBooks]:
    core = _CORES[venue]("<t>")
    acts: list = []
    events: list = []
    lines = list(range(1, len(msgs) + 1))
    i = k = 0
    while i < len(msgs):
        j = i + sizes[k % len(sizes)]
        k += 1
        a, e = core.feed_chunk(msgs[i:j], lines[i:j])
        acts += a
        events += per_symbol(e)
        core._check()
        i = j
    return acts, events, core


def _same(a: tuple[list, list, CoinbaseBooks], b: tuple[list, list, CoinbaseBooks]) -> None:
    (act_a, ev_a, ca), (act_b, ev_b, cb) = a, b
    assert act_a == act_b
    same_events(ev_a, ev_b)
    assert [(r.reason, r.line, r.text) for r in ca.reports] == [(r.reason, r.line, r.text) for r in cb.reports]
    assert ca.summary() == cb.summary()
    assert ca.save_state() == cb.save_state()      # books: strings, dict order, scale, pending rows
    cb._check()


def test_real_capture_through_the_lane() -> None:
    """The real capture: identical output, and the kernel did the work (else the test would
    compare the Python path with itself)."""
    msgs = _real()
    ref, got = _per_message(msgs), _chunked(msgs, [4096, 1000, 77])
    _same(ref, got)
    s = got[2].summary()
    assert s["synced"] and s["snapshots"] == 10 and s["ticker_checked"] == 107 and s["crossed"] == 0
    assert got[2]._lane.fast_messages > 0.98 * s["messages"]


def test_okx_real_capture_through_the_lane() -> None:
    """Every book message of the OKX capture through the kernel, its 290 checksums verified."""
    msgs = _real("okx")
    ref, got = _per_message(msgs, "okx"), _chunked(msgs, [4096, 50, 7], "okx")
    _same(ref, got)
    s = got[2].summary()
    assert s["synced"] and s["checksum_checked"] == 290 and s["checksum_mismatch"] == 0 and s["gaps"] == 0
    channels = sum(v for k, v in s["ignored"].items() if not k.startswith("event"))    # tickers, trades
    assert s["messages"] == 290 and channels > 100
    assert got[2]._lane.fast_messages == s["messages"] + channels      # snapshots, updates, the rest counted


def test_kraken_real_capture_through_the_lane() -> None:
    """Every book message of the Kraken capture (10 snapshots of up to 1,546 levels a side,
    4,269 updates) through the kernel, its 4,269 checksums verified there."""
    msgs = _real("kraken")
    ref, got = _per_message(msgs, "kraken"), _chunked(msgs, [4096, 300, 13], "kraken")
    _same(ref, got)
    s = got[2].summary()
    assert s["synced"] and s["checksum_checked"] == 4269 and s["checksum_mismatch"] == 0 and s["crossed"] == 0
    assert s["messages"] == 4279 and got[2]._lane.fast_messages == 4279 + s["ignored"]["event:heartbeat"] == 4310


def test_kraken_truncation_in_the_kernel() -> None:
    """The same capture as ``book-10`` and ``book-25``: every snapshot and many updates leave
    levels beyond the depth, which the kernel deletes (worst first) as ``LevelBook.truncate``
    does (a level deleted from the top 10 leaves it short: the venue would have republished the
    11th, so some checksums then fail, in both paths alike)."""
    for depth in (b"book-10", b"book-25"):
        msgs = [m.replace(b'"book-1000"', b'"' + depth + b'"') for m in _real("kraken")]
        ref, got = _per_message(msgs, "kraken"), _chunked(msgs, [1000, 37], "kraken")
        _same(ref, got)
        s = got[2].summary()
        assert s["truncated"] > 7000 and s["snapshots"] == 10 and s["checksum_checked"] > 0
        assert got[2]._lane.fast_messages >= s["snapshots"] + s["checksum_checked"]     # all in the kernel


def test_kraken_checksum_mismatch_found_by_the_kernel() -> None:
    msgs = list(_real("kraken"))
    k = next(i for i, m in enumerate(msgs) if b'"c":"' in m and i > 500)
    d = json.loads(msgs[k])
    d[-3]["c"] = str((int(d[-3]["c"]) + 1) % 2**32)
    msgs[k] = json.dumps(d, separators=(",", ":")).encode()
    ref, got = _per_message(msgs, "kraken"), _chunked(msgs, [4096], "kraken")
    _same(ref, got)
    s = got[2].summary()
    assert s["checksum_mismatch"] == 1 and s["resyncs"] == 1
    assert "checksum mismatch" in got[2].reports[-1].reason


def test_kraken_cached_checksum_still_checked() -> None:
    """An update below the 10 best levels leaves the checksum text as it was, and the kernel
    reuses the CRC of the pair's last text instead of rebuilding it (kraken_chunk._top_kept):
    a wrong ``c`` on such an update is still a mismatch, and so is one on the next update
    that does reach the 10 best (the cache is renewed, never trusted past a change)."""
    msgs = list(_real("kraken"))
    last: dict[str, str] = {}
    deep = []
    for i, m in enumerate(msgs):
        d = json.loads(m)
        if isinstance(d, list) and isinstance(d[-3], dict) and "c" in d[-3]:
            if last.get(d[-1]) == d[-3]["c"]:
                deep.append(i)
            last[d[-1]] = d[-3]["c"]
    assert len(deep) > 100      # the capture has many
    for k in (deep[10], deep[len(deep) // 2], deep[-1]):
        bad = list(msgs)
        d = json.loads(bad[k])
        d[-3]["c"] = str((int(d[-3]["c"]) + 1) % 2**32)
        bad[k] = json.dumps(d, separators=(",", ":")).encode()
        ref, got = _per_message(bad, "kraken"), _chunked(bad, [4096, 300], "kraken")
        _same(ref, got)
        s = got[2].summary()
        assert s["checksum_mismatch"] == 1 and s["resyncs"] == 1


def test_kraken_new_pairs_read_once_across_chunks() -> None:
    """Each pair's first snapshot stops the kernel (a new slot) and is resumed from what was
    read; chunks of one message, and chunks that end on a new pair, give the same output."""
    msgs = _real("kraken")
    _same(_per_message(msgs, "kraken"), _chunked(msgs, [4096], "kraken"))
    # every pair's first snapshot is within the capture's first 22 messages: tiny chunks over a
    # head well past them (each chunk is followed by an O(every book) _check(): ~25 ms)
    head = msgs[:400]
    assert len(_per_message(head, "kraken")[2].books) == len(_per_message(msgs, "kraken")[2].books)
    ref = _per_message(head, "kraken")
    for sizes in ([1], [13, 1, 2]):
        _same(ref, _chunked(head, sizes, "kraken"))


def test_held_book_is_handed_back_on_use() -> None:
    """A book the lane holds reads the same from Python at any point (top, best_key, save_state),
    and the lane takes it back after the Python path used it."""
    msgs = _real()[:3000]
    ref = _per_message(msgs)[2]
    core = CoinbaseBooks("<t>")
    core.feed_chunk(msgs, list(range(1, len(msgs) + 1)))
    sym = next(s for s in core.books if core.books[s]._ext is not None)
    assert core.books[sym].top(0, 5) == ref.books[sym].top(0, 5)
    assert core.books[sym]._ext is None and core._lane._books[core._lane._slot_of[sym]] is None
    more = _real()[3000:3400]
    core.feed_chunk(more, list(range(3001, 3401)))
    assert core.books[sym]._ext is not None or not core.status[sym].synced
    core._check()


# ------------------------------------------------------------------------------------------
# mutations of the real capture
# ------------------------------------------------------------------------------------------

def _respell(rng: random.Random, msg: dict | list) -> bytes:
    """The same JSON value spelt another way (key order, whitespace, an escape)."""
    if isinstance(msg, list):        # Kraken: key order inside the objects, whitespace, an escaped pair
        msg = [{k: d[k] for k in rng.sample(list(d), len(d))} if isinstance(d, dict) else d for d in msg]
        text = json.dumps(msg, separators=rng.choice([(",", ":"), (", ", ": ")]))
        if rng.random() < 0.2:
            text = text.replace('/', '\\/', 1)
        return (" \n" + text if rng.random() < 0.3 else text).encode()
    keys = list(msg)
    rng.shuffle(keys)
    text = json.dumps({k: msg[k] for k in keys}, separators=rng.choice([(",", ":"), (", ", ": ")]))
    if rng.random() < 0.3:
        text = text.replace('"buy"', '"\\u0062uy"', 1)
    if rng.random() < 0.3:
        text = " \t" + text + " \r"
    return text.encode()


def _mutate_value(rng: random.Random, msg: dict) -> dict:
    msg = json.loads(json.dumps(msg))
    kind = msg.get("type")
    r = rng.randrange(14)
    if kind == "l2update" and msg.get("changes"):
        c = rng.choice(msg["changes"])
        if r == 0:
            c[1] = c[1] + rng.choice(["1", "01", "0", "000001"])           # finer price: a re-base
        elif r == 1:
            c[1] = str(rng.choice([1e9, 99999, 0.5, 1e-7]))                 # maybe crossing, maybe odd
        elif r == 2:
            c[2] = rng.choice(["0", "0.000", "00", "1e5", "-1", "", "1.", ".5", "0" * 40 + "1"])
        elif r == 3:
            msg["time"] = rng.choice([None, "2021-04-17T16:43:37Z", "2021-04-17T16:43:37.1234567Z",
                                      "2021-04-17 16:43:37.1Z", "2021-02-30T00:00:00Z", 12, "x"])
        elif r == 4:
            msg.pop("time", None)
        elif r == 5:
            msg["sequence"] = 5                                            # an unknown field here
        elif r == 6:
            c[0] = rng.choice(["bid", "ask", "BUY", "sel", 1])
        elif r == 7:
            msg["product_id"] = msg["product_id"].lower()
        elif r == 8:
            msg["changes"] = rng.choice([[], [c[:2]], "x", [c + ["x"]]])
        elif r == 9:
            c[1] = "9" * rng.randrange(14, 34) + "." + "1" * rng.randrange(0, 20)
        elif r == 10:
            msg["changes"] = msg["changes"] * rng.randrange(2, 4)
    elif kind == "snapshot":
        side = rng.choice(["bids", "asks"])
        lv = msg[side]
        if r < 3 and lv:
            lv.insert(rng.randrange(len(lv) + 1), list(rng.choice(lv)))   # a repeated price
        elif r < 5 and lv:
            rng.choice(lv)[0] += rng.choice(["1", "00"])
        elif r < 7 and lv:
            rng.choice(lv)[1] = "0"
        elif r == 7 and lv:
            rng.choice(lv).append(rng.choice(["x", 3, None, [1]]))
        elif r == 8:
            msg[side] = []
        elif r == 9:
            msg.pop(side)
        elif r == 10:
            msg["product_id"] = "NEW-" + str(rng.randrange(3))
    elif kind == "ticker":
        if r < 4:
            msg["best_bid"] = rng.choice(["1", msg.get("best_bid", "1") + "0", 5, None, "x"])
        elif r < 6:
            msg.pop("best_ask", None)
        elif r == 6:
            msg["foo"] = 1
        elif r == 7:
            msg["product_id"] = "NOPE-USD"
    elif "data" in msg and isinstance(msg["data"], list) and msg["data"] and isinstance(msg["data"][0], dict):
        d = msg["data"][0]
        lv = d.get("bids") or d.get("asks")
        if r == 0 and "checksum" in d:
            d["checksum"] += 1                                            # a mismatch: resync
        elif r == 1:
            d["checksum"] = rng.choice([2**31, -(2**31), 1.5, "1", None, True])
        elif r == 2 and "prevSeqId" in d:
            d["prevSeqId"] += rng.choice([-1, 1, -5])                      # a gap or a stale message
        elif r == 3:
            d["seqId"] = rng.choice([d.get("seqId", 1), 2**63, 10**18, -1])
        elif r == 4 and lv:
            rng.choice(lv)[0] += rng.choice(["1", "05", "0"])              # finer prices: a re-base
        elif r == 5 and lv:
            rng.choice(lv)[1] = rng.choice(["0", "0.0", "x", "", "1e3"])
        elif r == 6 and lv:
            rng.choice(lv).append(rng.choice(["0", 1, "2", "3"]))
        elif r == 7:
            d["ts"] = rng.choice(["", "12345678901234567", "0", "-1", 5, "1652459225464"])
        elif r == 8:
            msg["data"] = msg["data"] * 2
        elif r == 9:
            d["new_field"] = 1
        elif r == 10:
            msg["arg"]["extra"] = rng.choice(["x", 1, None])
        elif r == 11:
            msg["action"] = rng.choice(["snapshot", "partial", None])
        elif r == 12:
            msg["arg"]["instId"] = msg["arg"]["instId"].lower()
        elif r == 13 and lv:
            lv.insert(rng.randrange(len(lv) + 1), list(rng.choice(lv)) if rng.random() < 0.5 else
                      [str(rng.choice([1, 10**6, 30200, 30300])), "1", "0", "1"])  # a repeated or crossing price
    elif r == 0:
        msg["type"] = "error"
    return msg


def _mutate_kraken(rng: random.Random, msg: list) -> list:
    """A Kraken channel message changed: checksums, prices (finer: a re-base; crossing), sizes,
    timestamps, the 4th field, the channel name (another depth: a truncation), the pair, the
    channelID, unknown keys, the update split over two objects or a snapshot mixed with update
    keys."""
    msg = json.loads(json.dumps(msg))
    if len(msg) < 4 or not all(isinstance(d, dict) for d in msg[1:-2]):
        return msg
    body = msg[1:-2]
    d = rng.choice(body)
    lv = next((v for k, v in d.items() if k in ("a", "b", "as", "bs") and isinstance(v, list) and v), None)
    r = rng.randrange(18)
    if r == 0 and "c" in d:
        d["c"] = str((int(d["c"]) + 1) % 2**32)                                  # a mismatch: resync
    elif r == 1:
        d["c"] = rng.choice(["", "x1", str(2**32), "0" * 12 + "5", 5, None, "-1"])
    elif r == 2 and lv:
        e = rng.choice(lv)
        e[0] = e[0] + rng.choice(["1", "01", "0", "000001"])                    # finer price: a re-base
    elif r == 3 and lv:
        rng.choice(lv)[0] = rng.choice(["0.00001", "99999", "1e3", "", ".5", "1" * 20, "0" * 25 + "1"])
    elif r == 4 and lv:
        rng.choice(lv)[1] = rng.choice(["0.00000000", "0", "00.0", "", "-1", "1e5", "1." + "0" * 19])
    elif r == 5 and lv:
        rng.choice(lv)[2] = rng.choice(["x", "1e9", "-5", "99999999999999999", "1618678133", "1618678133.",
                                        "1618678133.12345678901234567890", "", "0"])
    elif r == 6 and lv:
        e = rng.choice(lv)
        e[3:] = rng.choice([["r"], ["x"], ["r", "r"], [1]])
    elif r == 7:
        msg[-2] = rng.choice(["book-10", "book-3", "book-0", "book-x", "book", "trade", "book-010", "book-+5"])
    elif r == 8:
        msg[-1] = rng.choice([msg[-1].lower(), "NEW/PAIR", "é/X", 5])
    elif r == 9:
        msg[0] = rng.choice(["x", 1.5, None, -3, [1]])
    elif r == 10:
        d[rng.choice(["foo", "d", "as"])] = []
    elif r == 11 and "a" in d and "c" in d:
        msg[1:-2] = [{"a": d["a"]}, {"b": d.get("b", []), "c": d["c"]}]       # one update, two objects
    elif r == 12 and lv:
        lv.insert(rng.randrange(len(lv) + 1), list(rng.choice(lv)))          # a repeated price
    elif r == 13:
        msg.insert(1, rng.choice([{}, [], "x", {"a": []}]))
    elif r == 14 and lv:
        del lv[rng.randrange(len(lv))]
    elif r == 15 and ("as" in d or "bs" in d):
        msg[1:-2] = [{k: v} for k, v in d.items()]                          # snapshot sides in two objects
    elif r == 16:
        d[rng.choice(["a", "b"])] = rng.choice(["x", [[1, 2, 3]], [["1", "2"]], []])
    elif r == 17 and lv:
        rng.choice(lv)[0] = str(rng.choice([1, 10**6, 0.01]))                  # maybe crossing
    return msg


def _mutated(seed: int, n: int, venue: str = "coinbase") -> list[bytes]:
    rng = random.Random(seed)
    src = _real(venue)
    start = rng.randrange(0, max(1, len(src) - n))
    msgs = list(src[:30]) + list(src[start:start + n])       # the snapshots first, then a window
    out: list[bytes] = []
    for m in msgs:
        r = rng.random()
        if r < 0.03:
            b = bytearray(m)
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(bytes(b))
        elif r < 0.05:
            out.append(m[:rng.randrange(len(m))])
        elif r < 0.06:
            out.append(rng.choice([b"", b"junk", b"[1,2]", b'{"type":"l2update"}', b"\xff\xfe", b"NaN",
                                   b'{"event":"heartbeat"} x', b'{ "event" : "heartbeat" }',
                                   b'{"event":"heartbeat","a":1}',
                                   b'{"event":"heartbeat","event":"error"}', b'{"event":"heartbeat"',
                                   b'{"event":"heartbeats"}',
                                   b'{"type":"l2update","product_id":"SKL-GBP","changes":[["buy","1","1"]]} x']))
            out.append(m)
        elif r < 0.08 and out:
            out.append(out[-1])
        elif r < 0.09 and out:
            out.insert(rng.randrange(len(out)), m)
        elif r < 0.25:
            try:
                msg = json.loads(m)
            except ValueError:
                out.append(m)
                continue
            if isinstance(msg, dict):
                msg = _mutate_value(rng, msg)
            elif isinstance(msg, list):
                msg = _mutate_kraken(rng, msg)
            out.append(_respell(rng, msg) if rng.random() < 0.5 else json.dumps(msg).encode())
        else:
            out.append(m)
    return out


@pytest.mark.parametrize("venue,seed", [("coinbase", s) for s in range(12)] + [("okx", s) for s in range(12)]
                         + [("kraken", s) for s in range(12)])
def test_mutated_real_capture(venue: str, seed: int) -> None:
    msgs = _mutated(seed, 1500, venue)
    rng = random.Random(seed)
    _same(_per_message(msgs, venue), _chunked(msgs, [rng.randrange(1, 700) for _ in range(3)], venue))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(venue=st.sampled_from(["coinbase", "okx", "kraken"]), seed=st.integers(0, 2**32 - 1),
       fault=st.sampled_from([None, "drop", "duplicate", "reorder", "corrupt_price", "corrupt_checksum"]),
       sizes=st.lists(st.integers(1, 120), min_size=1, max_size=3), p_mut=st.sampled_from([0.0, 0.1, 0.4]))
@example(venue="kraken", seed=73462, fault="duplicate", sizes=[3], p_mut=0.4)   # a checksum resync ends a chunk
def test_generated_streams(venue: str, seed: int, fault: str | None, sizes: list[int], p_mut: float) -> None:
    """tests/venue_sim.py's streams (OKX with sequence ids) with a protocol fault and value
    mutations."""
    msgs, truth, rng = faulted_stream(venue, seed, fault, 120)
    raw = []
    for _, m in msgs:
        if rng.random() < p_mut and isinstance(m, dict):
            m = _mutate_value(rng, m)
        elif rng.random() < p_mut and isinstance(m, list):
            m = _mutate_kraken(rng, m)
        raw.append(_respell(rng, m) if rng.random() < 0.3 else json.dumps(m).encode())
    _same(_per_message(raw, venue), _chunked(raw, sizes, venue))


def test_crossed_and_rebased_books_are_reported_alike() -> None:
    snap = {"type": "snapshot", "product_id": "A-B", "bids": [["10.5", "1"], ["10.5", "2"], ["9", "0"], ["9.25", "3"]],
            "asks": [["11", "1"], ["12.125", "2"]]}
    ups = [{"type": "l2update", "product_id": "a-b", "changes": [["buy", "11.5", "1"]],
            "time": "2021-04-17T16:43:37.123Z"},
           {"type": "l2update", "product_id": "A-B", "changes": [["buy", "11.5", "0"], ["sell", "11.00001", "4"]],
            "time": "2021-04-17T16:43:38Z"},
           {"type": "ticker", "product_id": "A-B", "best_bid": "10.50", "best_ask": "11.000000"},
           {"type": "l2update", "product_id": "A-B", "changes": [["sell", "11.000010", "0"], ["buy", "1", "1"]]},
           snap]
    msgs = [json.dumps(m).encode() for m in [snap, *ups]] * 3
    ref, got = _per_message(msgs), _chunked(msgs, [len(msgs)])
    _same(ref, got)
    s = got[2].summary()
    assert s["crossed"] == 3 and s["ticker_checked"] == 3 and s["ticker_disagree"] == 0
    assert got[2]._lane.fast_messages == len(msgs)


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="0123456789.", max_size=40) | st.sampled_from(
    ["0", "00.00", "1.", "123.4500", "0.000000000000000001", "9007199254740991", "9007199254740992",
     "0.9007199254740993", "1" * 31, "1." + "0" * 19, "1" * 19]))
def test_decimal_of_agrees_with_price_key(text: str) -> None:
    """The kernel's decimal reader against LevelBook's (price_key): refused alike; an exact value
    read exactly (m / 10**d), float(text) as m / 10**d."""
    b = np.frombuffer(text.encode(), np.uint8)
    st_, m, d = decimal_of(b, 0, len(b))
    try:
        key, dec = price_key(text)
    except ValueError:
        assert st_ == BAD
        return
    assert st_ in (OK, BIG)
    if st_ == OK:
        assert key == m * 10 ** (18 - d) and dec == d and float(text) == m / 10.0**d


def test_okx_checksum_mismatch_found_by_the_kernel() -> None:
    """A wrong checksum in an update the kernel applies: the same resync, counters and report as
    the per-message path, found in the kernel (the message counts as a fast one)."""
    msgs = list(_real("okx"))
    k = next(i for i, m in enumerate(msgs) if b'"action":"update"' in m and i > 100)
    d = json.loads(msgs[k])
    d["data"][0]["checksum"] ^= 1
    msgs[k] = json.dumps(d, separators=(",", ":")).encode()
    ref, got = _per_message(msgs, "okx"), _chunked(msgs, [4096], "okx")
    _same(ref, got)
    s = got[2].summary()
    assert s["checksum_mismatch"] == 1 and s["resyncs"] == 1 and s["checksum_checked"] < 290
    assert "checksum mismatch" in got[2].reports[-1].reason
    assert got[2]._lane.fast_messages >= sum(b'"action":"update"' in m for m in msgs[:k + 1])


@settings(max_examples=100, deadline=None)
@given(bids=st.dictionaries(st.integers(1, 10**6), st.integers(1, 10**4), max_size=40),
       asks=st.dictionaries(st.integers(1, 10**6), st.integers(1, 10**4), max_size=40))
def test_checksum_text_and_crc32_agree_with_the_python_path(bids: dict, asks: dict) -> None:
    """strlevels.top_crc_text + okx_chunk.crc32 against okx.okx_checksum (zlib) on the same
    strings, sides of any length (a shorter side contributes what it has)."""
    import zlib

    from ddms.io.kernels.strlevels import W, top_crc_text
    from ddms.io.venues.okx import okx_checksum
    from ddms.io.venues.okx_chunk import crc32

    def side(levels: dict, best_last_desc: bool) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
        keys = sorted(levels, reverse=not best_last_desc)      # arrays: towards the best (row n - 1)
        iv = np.zeros((max(1, len(keys)), 4), np.int64)
        sv = np.zeros((max(1, len(keys)), 2 * W), np.uint8)
        for r, p in enumerate(keys):
            px, qty = f"{p / 100:g}", str(levels[p])
            iv[r] = (p, r, len(px), len(qty))
            sv[r, :len(px)] = np.frombuffer(px.encode(), np.uint8)
            sv[r, W:W + len(qty)] = np.frombuffer(qty.encode(), np.uint8)
        best_first = [(f"{p / 100:g}", str(levels[p])) for p in reversed(keys)]
        return iv, sv, best_first

    ib, sb, pb = side(bids, True)
    ia, sa, pa = side(asks, False)
    out = np.zeros(4000, np.uint8)
    m = top_crc_text(sb, ib, len(bids), sa, ia, len(asks), 25, 58, False, out)
    c = int(crc32(out, m))
    assert c == zlib.crc32(out[:m].tobytes())
    assert (c - (1 << 32) if c >= 1 << 31 else c) == okx_checksum(pb, pa)


@settings(max_examples=100, deadline=None)
@given(bids=st.dictionaries(st.integers(1, 10**9), st.integers(0, 10**9), max_size=30),
       asks=st.dictionaries(st.integers(1, 10**9), st.integers(0, 10**9), max_size=30),
       decimals=st.integers(0, 10))
def test_kraken_checksum_text_agrees_with_the_python_path(bids: dict, asks: dict, decimals: int) -> None:
    """strlevels.kraken_crc_text + crc32 against kraken.kraken_checksum (zlib) on the same
    strings: leading zeros ("0.000022900"), zero integer parts, sides shorter than 10."""

    from ddms.io.kernels.strlevels import W, crc32, kraken_crc_text
    from ddms.io.venues.kraken import kraken_checksum

    def fmt(v: int) -> str:
        return f"{v / 10**decimals:.{decimals}f}" if decimals else str(v)

    def side(levels: dict, ascending_best_last: bool) -> tuple[np.ndarray, np.ndarray, list[tuple[str, str]]]:
        keys = sorted(levels, reverse=not ascending_best_last)
        iv = np.zeros((max(1, len(keys)), 4), np.int64)
        sv = np.zeros((max(1, len(keys)), 2 * W), np.uint8)
        for r, p in enumerate(keys):
            px, qty = fmt(p), "0." + str(levels[p]).rjust(8, "0")
            iv[r] = (p, r, len(px), len(qty))
            sv[r, :len(px)] = np.frombuffer(px.encode(), np.uint8)
            sv[r, W:W + len(qty)] = np.frombuffer(qty.encode(), np.uint8)
        return iv, sv, [(fmt(p), "0." + str(levels[p]).rjust(8, "0")) for p in reversed(keys)]

    ib, sb, pb = side(bids, True)
    ia, sa, pa = side(asks, False)
    out = np.zeros(4000, np.uint8)
    m = kraken_crc_text(sb, ib, len(bids), sa, ia, len(asks), 10, out)
    assert int(crc32(out, m)) == kraken_checksum(pa, pb)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_crc32_agrees_with_zlib(data: bytes) -> None:
    """The sliced-by-8 crc32 against zlib.crc32 on any bytes (every length mod 8)."""
    import zlib

    from ddms.io.kernels.strlevels import crc32
    assert int(crc32(np.frombuffer(data, np.uint8) if data else np.zeros(0, np.uint8), len(data))) == zlib.crc32(data)


_JSON_TEXT = st.one_of(
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
                 lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=4), c, max_size=4),
                 max_leaves=16).map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
    st.binary(max_size=40),
    st.sampled_from([b"NaN", b"[1,]", b"{,}", b'{"a" 1}', b"[1 2]", b"01", b"1.", b".5", b"-", b"1e", b'{"a":1}}',
                     b"[" * 61 + b"]" * 61, b"[" * 59 + b"]" * 59, b"1" * 31, b"1" * 30, b"[tru]", b'["\\n"]',
                     b'{"a":[1,{"b":null}],"c":"d"} ', b"\t[ ]\r\n", b"[1.5e999]", b'{"a":1,"a":2}']))


@settings(max_examples=400, deadline=None)
@given(text=_JSON_TEXT)
def test_skip_json_accepts_only_what_json_loads_reads(text: bytes) -> None:
    """What the lanes' strict JSON skipper passes over (to count a ticker or trade without the
    Python path), json.loads reads: never a message the Python path would call malformed."""
    from ddms.io.venues.coinbase_chunk import skip_json
    buf = np.frombuffer(text, np.uint8) if text else np.zeros(0, np.uint8)
    if skip_json(buf, 0, len(text)) == len(text) and text.strip():
        json.loads(text)
        loads_json(text)


def test_tickers_and_trades_counted_in_the_kernel() -> None:
    """OKX tickers/trades and Coinbase matches/subscriptions: counted in ``ignored`` by the
    lanes (no Python per message), the same counts as the per-message path."""
    for venue in ("okx", "coinbase"):
        msgs = _real(venue)
        ref, got = _per_message(msgs, venue), _chunked(msgs, [4096], venue)
        _same(ref, got)
        ign = sum(got[2].ignored.values())
        assert ign > 0
        assert got[2]._lane.fast_messages >= len(msgs) - 30, (venue, got[2]._lane.fast_messages, len(msgs))
