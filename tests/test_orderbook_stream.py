"""The order-book stream adaptor against a line-by-line Python oracle of the README semantics.

Covers exact event sequences on hand-written snippets, chunk-boundary independence, every kind
of bad input in strict and skip mode, numbers off the parser's fast path, and the final resting
counts of the real finance.csv files (skipped when ../shared is absent).
"""

from __future__ import annotations

import io
import math
import re
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import DdmsError, InputError
from ddms.io.events import EventBatch
from ddms.io.orderbook import (
    ASKS,
    BIDS,
    MAX_BAD_SAMPLES,
    OrderBookParser,
    orderbook_rows,
    parse_orderbook_text,
    read_orderbook,
)

DATA = Path(__file__).parents[2] / "shared" / "data" / "orderbook"

# ------------------------------------------------------------------------------------------
# oracle: the README semantics, one line at a time, in plain Python
# ------------------------------------------------------------------------------------------

_NUM = re.compile(rb"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INT = re.compile(rb"[+-]?[0-9]+")


def _line_error(line: bytes) -> str | None:
    """Why the (terminator-stripped) line is bad, as a substring of the parser's reason."""
    if line.strip(b" \t\r") == b"":
        return "empty line"
    f = line.split(b",")
    if len(f) != 5:
        return "wrong field count"
    if not _NUM.fullmatch(f[0]):
        return "t is not a number"
    if not _INT.fullmatch(f[1]):
        return "order id is not an integer"
    if abs(int(f[1])) > 2**53:
        return "order id out of range"
    if not re.fullmatch(rb"[A-Z]", f[2]):
        return "unknown action"
    if not _NUM.fullmatch(f[3]):
        return "volume is not a number"
    if not _NUM.fullmatch(f[4]):
        return "price is not a number"
    for name, v in (("t", f[0]), ("volume", f[3]), ("price", f[4])):
        if not math.isfinite(float(v)):
            return f"{name} out of range"
    return None


class Oracle:
    """Reference model: dict id -> (book, row); events as (rel, sign, row tuple, line)."""

    def __init__(self, brokers: int = 10, skip_bad: bool = False) -> None:
        self.brokers, self.skip_bad = brokers, skip_bad
        self.orders: dict[int, tuple[int, tuple[float, ...]]] = {}
        self.events: list[tuple[int, int, tuple[float, ...], int]] = []
        self.bad: list[tuple[int, str]] = []
        self.error: tuple[int, str] | None = None

    def run(self, data: bytes) -> Oracle:
        parts = data.split(b"\n")
        lines = parts[:-1] + ([parts[-1]] if parts[-1] else [])
        for n, raw in enumerate(lines, 1):
            line = raw[:-1] if raw.endswith(b"\r") else raw
            why = _line_error(line)
            if why is not None:
                if not self.skip_bad:
                    self.error = (n, why)
                    return self
                self.bad.append((n, why))
                continue
            self.apply(line, n)
        return self

    def apply(self, line: bytes, n: int) -> None:
        f = line.split(b",")
        t, oid, act, vol, px = float(f[0]), int(f[1]), f[2].decode(), float(f[3]), float(f[4])
        brk = float(oid % self.brokers)
        if act not in "BSEFD":
            return
        old = self.orders.get(oid)
        if old is not None:
            book, row = old
            self.events.append((book, -1, row, n))
            rem = row[3] - vol
            if act == "E" and rem > 0:
                new = (row[0], row[1], row[2], rem, row[4])
                self.orders[oid] = (book, new)
                self.events.append((book, 1, new, n))
            else:
                del self.orders[oid]
        if act in "BS":
            book = BIDS if act == "B" else ASKS
            row = (t, float(oid), brk, vol, px)
            self.orders[oid] = (book, row)
            self.events.append((book, 1, row, n))

    def rows(self, book: int) -> np.ndarray:
        r = sorted(row for b, row in self.orders.values() if b == book)
        r.sort(key=lambda x: x[1])
        return np.array(r, dtype=np.float64).reshape(-1, 5)


def events_of(*batches: EventBatch) -> list[tuple[int, int, tuple[float, ...], int]]:
    out = []
    for b in batches:
        for i in range(len(b)):
            out.append((int(b.rel[i]), int(b.sign[i]), tuple(float(x) for x in b.cols[i]), int(b.line[i])))
    return out


def feed_pieces(data: bytes, cuts: list[int], reuse: bool = False, **kw) -> tuple[OrderBookParser, list[EventBatch]]:
    """Feed ``data`` cut at ``cuts``; with ``reuse`` every piece is a memoryview of one buffer
    (as ``ddms run`` reads), overwritten with junk after each feed: a parser that kept a reference
    to its input instead of a copy would see the junk."""
    p = OrderBookParser(**kw)
    batches = []
    prev = 0
    buf = bytearray(len(data) + 16)
    for c in sorted(set(cuts)) + [len(data)]:
        if reuse:
            buf[: c - prev] = data[prev:c]
            b = p.feed(memoryview(buf)[: c - prev])
            buf[:] = b"9,9,B,9,9\n#" * (len(buf) // 11) + b"#" * (len(buf) % 11)
        else:
            b = p.feed(data[prev:c])
        batches.append(b)
        prev = c
        if b.error is not None:
            return p, batches
    batches.append(p.close())
    return p, batches


def same_floats(a: list, b: list) -> bool:
    """Event lists equal (float fields compared with ==, so -0.0 equals 0.0)."""
    return a == b


# ------------------------------------------------------------------------------------------
# exact event sequences
# ------------------------------------------------------------------------------------------

def ev(rel, sign, t, oid, vol, px, line, brokers=10):
    return (rel, sign, (float(t), float(oid), float(oid % brokers), float(vol), float(px)), line)


def test_basic_actions_exact_events():
    text = ("10,1,B,100,5000\n"      # 1 insert bid
            "11,2,S,50,6000\n"       # 2 insert ask
            "12,1,E,30,0\n"          # 3 partial execution of a bid: delete + insert remaining 70
            "13,2,E,20,0\n"          # 4 partial execution of an ask
            "14,2,E,30,0\n"          # 5 E to zero: delete only
            "15,1,F,0,0\n"           # 6 fill: delete
            "16,3,B,5,4000\n"        # 7
            "17,3,D,0,0\n"           # 8 cancel
            "18,99,D,0,0\n"          # 9 unknown id: nothing
            "19,99,E,5,0\n"          # 10 unknown id: nothing
            "20,4,T,5,4000\n"        # 11 ignored action
            "21,5,S,7,6100\n")       # 12
    b = parse_orderbook_text(text)
    assert events_of(b) == [
        ev(BIDS, 1, 10, 1, 100, 5000, 1),
        ev(ASKS, 1, 11, 2, 50, 6000, 2),
        ev(BIDS, -1, 10, 1, 100, 5000, 3), ev(BIDS, 1, 10, 1, 70, 5000, 3),
        ev(ASKS, -1, 11, 2, 50, 6000, 4), ev(ASKS, 1, 11, 2, 30, 6000, 4),
        ev(ASKS, -1, 11, 2, 30, 6000, 5),
        ev(BIDS, -1, 10, 1, 70, 5000, 6),
        ev(BIDS, 1, 16, 3, 5, 4000, 7),
        ev(BIDS, -1, 16, 3, 5, 4000, 8),
        ev(ASKS, 1, 21, 5, 7, 6100, 12),
    ]
    assert (b.first_line, b.last_line, b.skipped, b.error) == (1, 12, 0, None)
    assert b.rel.dtype == np.int8 and b.sign.dtype == np.int8 and b.cols.dtype == np.float64
    assert b.line.dtype == np.int64 and b.cols.shape == (11, 5)


def test_repeated_id_replaces_atomically():
    b = parse_orderbook_text("1,7,B,10,100\n2,7,S,3,200\n3,7,B,4,300\n")
    assert events_of(b) == [
        ev(BIDS, 1, 1, 7, 10, 100, 1),
        ev(BIDS, -1, 1, 7, 10, 100, 2), ev(ASKS, 1, 2, 7, 3, 200, 2),
        ev(ASKS, -1, 2, 7, 3, 200, 3), ev(BIDS, 1, 3, 7, 4, 300, 3),
    ]
    p = OrderBookParser()
    p.feed(b"1,7,B,10,100\n2,7,S,3,200\n")
    assert (p.resting, p.resting_bids, p.resting_asks) == (1, 0, 1)
    assert orderbook_rows(p)["asks"].tolist() == [[2.0, 7.0, 7.0, 3.0, 200.0]]


def test_e_remaining_keeps_original_t_and_overexecution_deletes():
    b = parse_orderbook_text("5,1,S,10,100\n9,1,E,4,0\n9,1,E,100,0\n")
    assert events_of(b) == [
        ev(ASKS, 1, 5, 1, 10, 100, 1),
        ev(ASKS, -1, 5, 1, 10, 100, 2), ev(ASKS, 1, 5, 1, 6, 100, 2),
        ev(ASKS, -1, 5, 1, 6, 100, 3),
    ]


def test_brokers_crlf_decimals_negative_ids():
    b = parse_orderbook_text("1.5,-7,B,2.25,1e2\r\n2,8,S,+3,.5\r\n", brokers=3)
    assert events_of(b) == [ev(BIDS, 1, 1.5, -7, 2.25, 100, 1, 3), ev(ASKS, 1, 2, 8, 3, 0.5, 2, 3)]
    assert b.cols[0, 2] == 2.0  # Python floor modulo: -7 mod 3 == 2
    with pytest.raises(ValueError):
        OrderBookParser(brokers=0)
    with pytest.raises(ValueError):
        OrderBookParser(brokers=True)


def test_numbers_off_the_fast_path_are_correctly_rounded():
    vals = ["0.1000000000000000000000001", "123456789012345678", "9007199254740993", "1e30",
            "1.7976931348623157e308", "4.9e-324", "0.000000000000000000000000123", "-0",
            "00000000000000000000012",
            "3.14159265358979323846264338327950288"]
    text = "".join(f"{v},{i},B,{v},{v}\n" for i, v in enumerate(vals))
    b = parse_orderbook_text(text)
    assert len(b) == len(vals)
    for i, v in enumerate(vals):
        assert b.cols[i, 0] == float(v) and b.cols[i, 3] == float(v) and b.cols[i, 4] == float(v)
    assert events_of(b) == Oracle().run(text.encode()).events


def test_final_line_without_newline_and_empty_input():
    p = OrderBookParser()
    b1 = p.feed(b"1,1,B,1,1\n2,2,S,1")
    assert len(b1) == 1 and p.lines_consumed == 1 and p.pending == 7
    b2 = p.feed(b",1")
    assert len(b2) == 0 and (b2.first_line, b2.last_line) == (2, 1)
    b3 = p.close()
    assert events_of(b3) == [ev(ASKS, 1, 2, 2, 1, 1, 2)]
    assert p.close().last_line == 2
    with pytest.raises(DdmsError):
        p.feed(b"3,3,B,1,1\n")
    assert len(parse_orderbook_text("")) == 0
    assert len(OrderBookParser().feed(b"")) == 0


# ------------------------------------------------------------------------------------------
# chunk boundaries
# ------------------------------------------------------------------------------------------

SNIPPET = (b"25260635,36721,B,100,10000\r\n25260709,36909,S,50,238500\n25260772,36721,E,40,0\n"
           b"25260773,36909,E,50,0\n25260775,37263,B,10,160700\n25265754,37263,D,0,0\n"
           b"1,5,T,1,1\n1.25,36721,F,0,0\n2,8,S,1e1,1.5")


def test_every_split_position_gives_identical_events():
    ref = events_of(*feed_pieces(SNIPPET, [])[1])
    assert same_floats(ref, Oracle().run(SNIPPET).events)
    for cut in range(len(SNIPPET) + 1):
        for reuse in (False, True):
            p, batches = feed_pieces(SNIPPET, [cut], reuse)
            assert events_of(*batches) == ref, cut
        assert p.lines_consumed == 9 and p.resting == 1


_num_text = st.one_of(
    st.integers(0, 10**7).map(str),
    st.integers(-50, 50).map(str),
    st.sampled_from(["1.5", ".5", "2.", "1e3", "-0", "1e400", "0.30000000000000004", "x", "", "1 ",
                     "12345678901234567890", "+7", "1e", "--1", "nan", "inf"]),
)
_good_line = st.builds(
    lambda t, i, a, v, p: f"{t},{i},{a},{v},{p}",
    st.integers(0, 10**8), st.integers(0, 12), st.sampled_from(list("BSEFDTBSE")),
    st.integers(1, 120), st.integers(1, 10**6))
_any_line = st.one_of(
    _good_line, _good_line, _good_line,
    st.builds(lambda t, i, a, v, p: f"{t},{i},{a},{v},{p}", _num_text,
              st.one_of(st.integers(-3, 12).map(str), st.sampled_from(["1.0", "a", "", "99999999999999999"])),
              st.sampled_from(list("BSEFDTXC") + ["b", "BS", "", "É", " B"]), _num_text, _num_text),
    st.sampled_from(["", " ", "\t\r", "1,2,B,3", "1,2,B,3,4,5", ",,,,", "\x00", "1,2,B,3,4\r"]),
)


@st.composite
def _streams(draw):
    lines = draw(st.lists(_any_line, max_size=25))
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    text = sep.join(lines) + (sep if lines and draw(st.booleans()) else "")
    data = text.encode("utf-8")
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=6))
    return data, cuts, draw(st.booleans())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams())
def test_random_streams_match_oracle_in_skip_mode(case):
    data, cuts, reuse = case
    p, batches = feed_pieces(data, cuts, reuse, skip_bad=True)
    o = Oracle(skip_bad=True).run(data)
    assert same_floats(events_of(*batches), o.events)
    assert p.bad_lines == len(o.bad) == sum(b.skipped for b in batches)
    samples = o.bad[:MAX_BAD_SAMPLES]
    assert [(e.line, why in e.reason) for e, (_, why) in zip(p.bad_samples, samples, strict=True)] == \
        [(n, True) for n, _ in samples]
    rows = orderbook_rows(p)
    assert np.array_equal(rows["bids"], o.rows(BIDS)) and np.array_equal(rows["asks"], o.rows(ASKS))
    # the batches tile the consumed lines
    spans = [(b.first_line, b.last_line) for b in batches]
    assert spans[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:], strict=False))
    assert spans[-1][1] == p.lines_consumed


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_streams())
def test_random_streams_match_oracle_in_strict_mode(case):
    data, cuts, reuse = case
    p, batches = feed_pieces(data, cuts, reuse)
    o = Oracle().run(data)
    assert same_floats(events_of(*batches), o.events)
    errs = [b.error for b in batches if b.error is not None]
    if o.error is None:
        assert errs == [] and p.error is None
    else:
        assert len(errs) == 1 and batches[-1].error is errs[0]
        err = errs[0]
        assert err.line == o.error[0] and o.error[1] in err.reason
        assert p.lines_consumed == o.error[0] - 1 == batches[-1].last_line
        rows = orderbook_rows(p)
        assert np.array_equal(rows["bids"], o.rows(BIDS)) and np.array_equal(rows["asks"], o.rows(ASKS))
        with pytest.raises(InputError) as ei:
            p.feed(b"1,1,B,1,1\n")
        assert ei.value is err


# ------------------------------------------------------------------------------------------
# bad input
# ------------------------------------------------------------------------------------------

BAD_CASES = [
    (b"\n", "empty line"),
    (b"   \r\n", "empty line"),
    (b"1,2,B,3\n", "wrong field count"),
    (b"1,2,B,3,4,5\n", "wrong field count"),
    (b"1,2,BS,3,4\n", "unknown action"),
    (b"1,2,b,3,4\n", "unknown action"),
    (b"1,2,,3,4\n", "unknown action"),
    (b"x,2,B,3,4\n", "t is not a number"),
    (b"nan,2,B,3,4\n", "t is not a number"),
    (b"1,2.0,B,3,4\n", "order id is not an integer"),
    (b"1,,B,3,4\n", "order id is not an integer"),
    (b"1,99999999999999999999,B,3,4\n", "order id out of range"),
    (b"1,2,B,three,4\n", "volume is not a number"),
    (b"1,2,B,3,4 \n", "price is not a number"),
    (b"1,2,B,3,4e\n", "price is not a number"),
    (b"1,2,B,1e999,4\n", "volume out of range"),
]


@pytest.mark.parametrize("bad,why", BAD_CASES)
def test_strict_mode_bad_line(bad, why):
    good = b"1,10,B,5,100\n2,11,S,6,200\n"
    p = OrderBookParser(source="feed.csv")
    b = p.feed(good + b"3,10,D,0,0\n" + bad + b"4,12,B,1,1\n")
    assert isinstance(b.error, InputError)
    msg = str(b.error)
    assert msg.startswith("feed.csv:4: ") and why in msg, msg
    assert (b.error.source, b.error.line) == ("feed.csv", 4)
    assert b.error.text == bad.decode().rstrip("\n").rstrip("\r")
    assert events_of(b) == [ev(BIDS, 1, 1, 10, 5, 100, 1), ev(ASKS, 1, 2, 11, 6, 200, 2),
                            ev(BIDS, -1, 1, 10, 5, 100, 3)]
    assert (b.first_line, b.last_line) == (1, 3) and p.lines_consumed == 3
    assert orderbook_rows(p)["asks"].tolist() == [[2.0, 11.0, 1.0, 6.0, 200.0]] and p.resting == 1
    for call in (lambda: p.feed(b"5,13,B,1,1\n"), p.close):
        with pytest.raises(InputError) as ei:
            call()
        assert ei.value is b.error
    assert p.resting == 1


def test_strict_bad_line_completed_across_feeds_and_at_close():
    p = OrderBookParser()
    assert len(p.feed(b"1,1,B,1,1\n1,1,")) == 1
    b = p.feed(b"Q!,1,1\n2,2,B,1,1\n")
    assert b.error is not None and b.error.line == 2 and "unknown action" in b.error.reason
    p = OrderBookParser()
    p.feed(b"1,1,B,1,1\n1,2,B")
    b = p.close()
    assert b.error is not None and b.error.line == 2 and "wrong field count" in b.error.reason
    with pytest.raises(InputError):
        p.close()


def test_skip_mode_counts_and_samples():
    bad_lines = b"".join(bad for bad, _ in BAD_CASES)
    data = b"1,1,B,1,1\n" + bad_lines * 2 + b"2,2,S,1,1\n"
    p = OrderBookParser(skip_bad=True, source="s")
    b = p.feed(data)
    b2 = p.close()
    assert b.error is None and b2.error is None
    assert b.skipped == p.bad_lines == 2 * len(BAD_CASES)
    assert len(p.bad_samples) == MAX_BAD_SAMPLES
    for e, (_, why) in zip(p.bad_samples, BAD_CASES[:MAX_BAD_SAMPLES], strict=True):
        assert why in e.reason and e.source == "s"
    assert [e.line for e in p.bad_samples] == list(range(2, 2 + MAX_BAD_SAMPLES))
    assert [x[3] for x in events_of(b)] == [1, 2 * len(BAD_CASES) + 2]
    assert p.lines_consumed == 2 * len(BAD_CASES) + 2 and p.resting == 2


def test_parse_text_and_read_raise_in_strict_mode(tmp_path):
    with pytest.raises(InputError, match=r"<string>:2: wrong field count"):
        parse_orderbook_text("1,1,B,1,1\n1,2\n")
    f = tmp_path / "book.csv"
    f.write_bytes(b"1,1,B,1,1\n2,2,S,1,1\n3,3,Z,,1\n4,4,B,1,1\n")
    seen = []
    with pytest.raises(InputError) as ei:
        for batch in read_orderbook(f, chunk_bytes=7):
            seen.append(batch)
    assert str(f) in str(ei.value) and ei.value.line == 3 and "volume is not a number" in ei.value.reason
    assert [x[3] for x in events_of(*seen)] == [1, 2] and seen[-1].error is ei.value
    batches = list(read_orderbook(f, chunk_bytes=5, skip_bad=True))
    assert sum(b.skipped for b in batches) == 1 and len(events_of(*batches)) == 3
    batches = list(read_orderbook(io.BytesIO(b"1,1,B,1,1\n2,1,E,1,0")))
    assert [x[1] for x in events_of(*batches)] == [1, -1]


def test_output_growth_many_events_per_line():
    adds = "".join(f"{i},{i},B,1000,{i}\n" for i in range(3000))
    execs = "".join(f"{i},{i % 3000},E,1,0\n" for i in range(12000))
    data = (adds + execs).encode()
    p, batches = feed_pieces(data, [])
    assert same_floats(events_of(*batches), Oracle().run(data).events)
    assert p.resting == 3000 and len(batches[0]) == 3000 + 2 * 12000


# ------------------------------------------------------------------------------------------
# real data
# ------------------------------------------------------------------------------------------

REAL = [("tiny", 18, 15), ("standard", 1119, 1751), ("big", 3788, 13989)]


@pytest.mark.parametrize("name,bids,asks", REAL)
def test_real_files_final_resting_counts(name, bids, asks):
    path = DATA / name / "finance.csv"
    if not path.exists():
        pytest.skip("shared order-book data not present")
    p = OrderBookParser(source=str(path))
    b = p.feed(path.read_bytes())
    p.close()
    assert b.error is None and p.bad_lines == 0
    assert (p.resting_bids, p.resting_asks) == (bids, asks)
    rows = orderbook_rows(p)
    assert rows["bids"].shape == (bids, 5) and rows["asks"].shape == (asks, 5)
    # replaying the events gives the same table
    net: dict[tuple, int] = {}
    for rel, sign, row in zip(b.rel.tolist(), b.sign.tolist(), map(tuple, b.cols.tolist()), strict=True):
        net[(rel, row)] = net.get((rel, row), 0) + sign
    live = sorted(k for k, v in net.items() if v)
    assert all(v in (0, 1) for v in net.values())
    assert live == sorted([(BIDS, tuple(r)) for r in rows["bids"].tolist()]
                          + [(ASKS, tuple(r)) for r in rows["asks"].tolist()])
    if name != "big":
        o = Oracle().run(path.read_bytes())
        assert same_floats(events_of(b), o.events)
        assert np.array_equal(rows["bids"], o.rows(BIDS)) and np.array_equal(rows["asks"], o.rows(ASKS))


@pytest.mark.parametrize("name,chunks", [("tiny", (1, 2, 3)), ("standard", (97, 4096))])
def test_real_file_chunked_read_matches_whole(name, chunks):
    path = DATA / name / "finance.csv"
    if not path.exists():
        pytest.skip("shared order-book data not present")
    whole = events_of(*read_orderbook(path))
    for chunk in chunks:
        assert events_of(*read_orderbook(path, chunk_bytes=chunk)) == whole


# -- output buffers reused once no batch refers to them -----------------------------------------

def _copy(b: EventBatch) -> tuple:
    return b.rel.copy(), b.sign.copy(), b.cols.copy(), b.line.copy(), b.first_line, b.last_line


def _same(b: EventBatch, c: tuple) -> bool:
    return (np.array_equal(b.rel, c[0]) and np.array_equal(b.sign, c[1]) and np.array_equal(b.cols, c[2])
            and np.array_equal(b.line, c[3]) and (b.first_line, b.last_line) == c[4:])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), cuts=st.lists(st.integers(1, 3000), min_size=1, max_size=12),
       keep=st.lists(st.booleans(), min_size=12, max_size=12))
def test_reused_output_never_overwrites_a_kept_batch(seed, cuts, keep):
    """The parser writes a new batch into the buffer of an earlier one only once nothing refers
    to it: batches a consumer keeps stay as they were when returned, batches it dropped are
    reused, and the events are those of a parser fed everything at once."""
    from replay.synthetic import generate_orderbook
    data = b"".join(generate_orderbook(400, seed=seed))
    parser = OrderBookParser()
    kept, events = [], []
    pos = 0
    for n, k in zip([*cuts, len(data)], keep, strict=False):
        b = parser.feed(data[pos:pos + n])
        pos += n
        events.append(_copy(b))
        if k:
            kept.append((b, events[-1]))
        del b
    if pos < len(data):
        events.append(_copy(parser.feed(data[pos:])))
    events.append(_copy(parser.close()))
    for b, c in kept:
        assert _same(b, c), "a kept batch was overwritten by a later feed"
    whole = OrderBookParser().feed(data + (b"" if data.endswith(b"\n") else b"\n"))
    assert np.array_equal(np.concatenate([e[2] for e in events]), whole.cols)
    assert np.array_equal(np.concatenate([e[3] for e in events]), whole.line)
    assert np.array_equal(np.concatenate([e[0] for e in events]), whole.rel)


def test_a_dropped_batch_buffer_is_reused_and_a_kept_one_is_not():
    def lines(k):   # new orders: one event a line
        return b"".join(b"1,%d,B,10,100\n" % i for i in range(1000 * k + 1000, 1000 * k + 1200))
    parser = OrderBookParser()
    b = parser.feed(lines(0))
    base = id(b.cols.base)   # (a reference to it would keep it from reuse)
    del b
    b2 = parser.feed(lines(1))
    assert id(b2.cols.base) == base   # dropped: its buffer was reused (it is alive: the parser keeps it)
    b3 = parser.feed(lines(2))
    assert b3.cols.base is not b2.cols.base and not np.shares_memory(b3.cols, b2.cols)


def test_memory_faulted_ahead_on_helper_threads_changes_nothing():
    """``fault_ahead`` (ddms run): the next table's arrays are made on a helper thread once the
    table is a quarter full and the growth re-inserts into them; the next output buffers are
    written on a helper thread while the parser's buffers are fewer than it keeps.  Events, resting
    rows and the table's invariants are those of a parser without it; the growths after the first
    feed used the helper's arrays; a table replaced by ``load_state`` never grows into arrays made for
    another size."""
    from ddms.io.kernels.ordertable import table_check
    rng = np.random.default_rng(7)
    lines = []
    for i in range(30_000):   # ~20k resting orders: the table grows 1,024 -> ... -> 65,536 slots
        oid = int(rng.integers(0, 40_000)) if rng.random() < 0.3 else 100_000 + i
        act = "BSEFD"[int(rng.integers(0, 5))] if oid < 100_000 else "BS"[i % 2]
        lines.append(f"{i},{oid},{act},{int(rng.integers(1, 50))},{int(rng.integers(1, 10**6))}\n")
    data = "".join(lines).encode()
    cuts = list(range(0, len(data), 40_000))[1:]
    plain, ref = feed_pieces(data, cuts)
    ahead = OrderBookParser()
    ahead.fault_ahead = True
    got, prev = [], 0
    for c in cuts + [len(data)]:
        got.append(ahead.feed(data[prev:c]))
        prev = c
    got.append(ahead.close())
    assert events_of(*got) == events_of(*ref)
    assert ahead.tables_made_ahead >= 2 and plain.tables_made_ahead == 0
    assert ahead.outputs_made_ahead >= 1 and plain.outputs_made_ahead == 0
    assert ahead._keys.shape[0] == plain._keys.shape[0] == 1 << 16
    table_check(ahead._keys, ahead._vals, int(ahead._meta[3]))
    rows, want = orderbook_rows(ahead), orderbook_rows(plain)
    assert all(np.array_equal(rows[k], want[k]) for k in want)
    # a pending table made for the old size is not used after load_state puts a smaller table in
    cut = data.index(b"\n", 20_000) + 1   # at a line end
    small = OrderBookParser()
    small.feed(data[:cut])
    counters, arrays = small.save_state()
    ahead2 = OrderBookParser()
    ahead2.fault_ahead = True
    start = 0
    while start < len(data):   # whole lines, until arrays for a larger table are pending
        end = data.index(b"\n", min(start + 10_000, len(data) - 1)) + 1
        ahead2.feed(data[start:end])
        start = end
        if ahead2._ahead is not None and ahead2._ahead[2] > small._keys.shape[0] * 4:
            break
    assert ahead2.pending == 0
    assert ahead2._ahead is not None and ahead2._ahead[2] > small._keys.shape[0] * 4
    ahead2.load_state(counters, arrays)
    rest = events_of(ahead2.feed(data[cut:]), ahead2.close())
    small_rest = events_of(small.feed(data[cut:]), small.close())
    assert rest == small_rest
    table_check(ahead2._keys, ahead2._vals, int(ahead2._meta[3]))


def test_fault_ahead_starts_no_thread_per_job_and_large_tables_sit_on_huge_pages(monkeypatch):
    """The fault-ahead jobs go to the process's one helper thread (``ddms.io.pages.helper``):
    ``Thread.start`` made the parsing thread wait until the new thread ran (milliseconds on a busy
    2-core machine), once per job.  The order table's arrays of 1 MiB or more are mapped on huge
    pages, whether grown ahead or in place; the events are those of a plain parser either way."""
    import mmap
    import threading

    from ddms.io.kernels.ordertable import table_check
    from ddms.io.pages import _CAN_HUGE, HUGE_MIN, helper

    helper()   # (started once per process, before any timed run)
    starts = []
    start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: (starts.append(self.name), start(self))[1])
    data = "".join(f"{i},{100_000 + i},{'BS'[i % 2]},{1 + i % 7},{1000 + i % 97}\n" for i in range(40_000)).encode()
    cuts = list(range(0, len(data), 50_000))[1:]
    plain, ref = feed_pieces(data, cuts)
    ahead = OrderBookParser()
    ahead.fault_ahead = True
    got, prev = [], 0
    for c in cuts + [len(data)]:
        got.append(ahead.feed(data[prev:c]))
        prev = c
    ahead.wait_helpers()
    assert starts == []
    assert ahead.tables_made_ahead >= 2 and ahead.outputs_made_ahead >= 1
    assert events_of(*got) == events_of(*ref)
    for p in (ahead, plain):
        assert p._keys.shape[0] == 1 << 17 and p._vals.nbytes >= HUGE_MIN
        table_check(p._keys, p._vals, int(p._meta[3]))
        if _CAN_HUGE:
            root = p._vals
            while root.base is not None and isinstance(root.base, np.ndarray):
                root = root.base
            assert isinstance(root.base, memoryview) and isinstance(root.base.obj, mmap.mmap)


def test_fault_ahead_never_writes_rows_of_a_batch_however_late_the_helper_runs():
    """The helper writes (zeros) the upper rows of a new output buffer, for the larger chunks it is
    reused for.  Dense lines (a replacement makes two events in 10 bytes) fill more rows than the
    feed's estimate (one event per 16 bytes), so those writes may only start once the feed is
    done: with the helper held back until after the feed, every event of the batch is intact."""
    from ddms.io.pages import helper

    gate, running = threading.Event(), threading.Event()

    def hold():
        running.set()
        gate.wait()
    held = helper().submit(hold)
    running.wait()
    data = b"1,7,B,1,1\n" * 3000 + b"2,8,S,2,3\n"   # 6,000 events for an estimate of 1,939
    plain, ref = feed_pieces(data, [])
    p = OrderBookParser()
    p.fault_ahead = True
    got = [p.feed(data)]
    gate.set()
    held.join()
    p.wait_helpers()
    got.append(p.close())
    assert len(got[0]) == 6000 and events_of(*got) == events_of(*ref)
