"""LOBSTER message reader: exact events on small hand-written files, chunking independence,
bad input in strict and skip mode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddms.errors import DdmsError, InputError
from ddms.io.lobster import LobsterBatch, LobsterParser, parse_lobster_text, read_lobster

MESSAGES = """\
34200.01,1,11,100,5853300,1
34200.02,1,12,50,5854300,-1
34200.03,1,13,30,5853300,1
34200.04,4,11,40,5853300,1
34200.05,2,13,10,5853300,1
34200.06,3,12,50,5854300,-1
34200.07,5,0,10,5853000,1
34200.08,6,0,500,5853200,1
34200.09,2,99,10,5850000,1
34200.10,4,13,25,5853300,1
34200.11,7,0,0,-1,-1
34200.12,7,0,0,1,-1
34200.13,1,11,5,5853400,1
"""


def _events(b) -> list[tuple]:
    return [(int(b.rel[i]), int(b.sign[i]), *b.cols[i].tolist(), int(b.line[i]), float(b.traded[i]))
            for i in range(len(b))]


def test_every_message_type():
    p = LobsterParser(source="msg.csv")
    b = p.feed(MESSAGES.encode())
    assert isinstance(b, LobsterBatch) and b.first_line == 1 and b.last_line == 13 and b.error is None
    bid, ask = 0, 1
    assert _events(b) == [
        (bid, 1, 34200.01, 11, 0, 100, 5853300, 1, 0),
        (ask, 1, 34200.02, 12, 0, 50, 5854300, 2, 0),
        (bid, 1, 34200.03, 13, 0, 30, 5853300, 3, 0),
        (bid, -1, 34200.01, 11, 0, 100, 5853300, 4, 40),      # execution: delete + re-insert the rest
        (bid, 1, 34200.01, 11, 0, 60, 5853300, 4, 0),
        (bid, -1, 34200.03, 13, 0, 30, 5853300, 5, 0),        # partial cancel
        (bid, 1, 34200.03, 13, 0, 20, 5853300, 5, 0),
        (ask, -1, 34200.02, 12, 0, 50, 5854300, 6, 0),        # delete
        # 7 hidden execution, 8 cross, 9 unknown order: no events
        (bid, -1, 34200.03, 13, 0, 20, 5853300, 10, 20),      # execution above the size: all of it
        # 11/12 halt and resume: no events
        (bid, -1, 34200.01, 11, 0, 60, 5853300, 13, 0),       # a resting id submitted again: replaced
        (bid, 1, 34200.13, 11, 0, 5, 5853400, 13, 0),
    ]
    assert p.hidden_executions == 1 and p.hidden_volume == 10
    assert p.crosses == 1 and p.cross_volume == 500 and p.unknown_orders == 1
    assert p.halts == [(11, 34200.11, "halted"), (12, 34200.12, "trading")] and p.trading_status == "trading"
    assert p.resting == 1
    assert p.rows()["bids"].tolist() == [[34200.13, 11, 0, 5, 5853400]] and p.rows()["asks"].shape == (0, 5)
    assert p.close().last_line == 13


def test_events_are_consistent_row_by_row():
    """Every delete removes exactly a row inserted before, so any view stays consistent."""
    b = parse_lobster_text(MESSAGES)
    rows: dict[tuple, int] = {}
    for rel, sign, *cols, _line, _tr in _events(b):
        key = (rel, *cols)
        if sign > 0:
            rows[key] = rows.get(key, 0) + 1
        else:
            assert rows.get(key, 0) > 0, key
            rows[key] -= 1
    assert sorted(k for k, n in rows.items() if n) == [(0, 34200.13, 11, 0, 5, 5853400)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, len(MESSAGES)), max_size=6), st.booleans())
def test_chunking_does_not_matter(cuts, crlf):
    text = MESSAGES.replace("\n", "\r\n") if crlf else MESSAGES
    data = text.encode()
    whole = parse_lobster_text(text)
    p = LobsterParser()
    bounds = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    parts = [p.feed(data[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)] + [p.close()]
    got = [e for part in parts for e in _events(part)]
    assert got == _events(whole)
    assert sum(part.last_line - part.first_line + 1 for part in parts) == 13


def test_final_line_without_newline_and_empty_input():
    b = parse_lobster_text("1.5,1,1,10,100,-1")
    assert b.last_line == 1 and len(b) == 1 and b.rel.tolist() == [1]
    p = LobsterParser()
    e = p.feed(b"")
    assert len(e) == 0 and e.last_line < e.first_line and e.traded.shape == (0,)
    assert p.feed(b"1,1,1,10,1,1").last_line == 0      # partial line waits
    assert p.close().last_line == 1


@pytest.mark.parametrize("line, reason", [
    ("", "empty line"),
    ("1,1,1,10,100", "wrong field count: expected 6"),
    ("1,1,1,10,100,1,7", "wrong field count"),
    ("x,1,1,10,100,1", "time is not a number"),
    ("nan,1,1,10,100,1", "time is not a number"),
    ("1,1.5,1,10,100,1", "type is not an integer"),
    ("1,8,1,10,100,1", "unknown message type 8"),
    ("1,1,a,10,100,1", "order id is not an integer"),
    ("1,1,9007199254740993,10,100,1", "order id out of range"),
    ("1,1,1,ten,100,1", "size is not a number"),
    ("1,1,1,-5,100,1", "size is negative"),
    ("1,1,1,0,100,1", "submission with size <= 0"),
    ("1,1,1,10,1e999,1", "price out of range"),
    ("1,1,1,10, 100,1", "price is not a number"),
    ("1,1,1,10,100,0", "direction must be 1 (buy) or -1 (sell), got 0"),
    ("1,7,0,0,5,-1", "halt indicator price must be -1"),
])
def test_bad_lines_name_file_line_and_reason(line, reason):
    p = LobsterParser(source="day.csv")
    b = p.feed(f"1,1,5,10,100,1\n{line}\n1,1,6,10,100,1\n".encode())
    assert b.error is not None and len(b) == 1 and b.last_line == 1
    err = b.error
    assert isinstance(err, InputError) and err.line == 2 and err.source == "day.csv"
    assert reason in err.reason
    assert str(err).startswith(f"day.csv:2: {err.reason}")
    with pytest.raises(InputError):
        p.feed(b"1,1,7,10,100,1\n")
    with pytest.raises(InputError, match="day.csv:2"):
        parse_lobster_text(f"1,1,5,10,100,1\n{line}\n", source="day.csv")


def test_skip_mode_counts_and_samples_bad_lines():
    p = LobsterParser(source="s", skip_bad=True)
    b = p.feed(b"1,1,1,10,100,1\nbad\n2,9,1,1,1,1\n3,3,1,10,100,1\n")
    assert b.error is None and b.skipped == 2 and p.bad_lines == 2
    assert [e.line for e in p.bad_samples] == [2, 3]
    assert [(int(r), int(s)) for r, s in zip(b.rel, b.sign, strict=True)] == [(0, 1), (0, -1)]
    for _ in range(20):
        p.feed(b"x\n")
    assert p.bad_lines == 22 and len(p.bad_samples) == 10


def test_misuse():
    p = LobsterParser()
    with pytest.raises(TypeError, match="bytes"):
        p.feed("1,1,1,1,1,1\n")
    p.close()
    with pytest.raises(DdmsError, match="after close"):
        p.feed(b"")


def test_read_lobster_file(tmp_path):
    path = tmp_path / "AAPL_message.csv"
    path.write_bytes(MESSAGES.encode())
    batches = list(read_lobster(path, chunk_bytes=50))
    events = [e for b in batches for e in _events(b)]
    assert events == _events(parse_lobster_text(MESSAGES))
    with open(path, "rb") as f:
        assert sum(len(b) for b in read_lobster(f)) == len(events)
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"1,1,1,10,100,1\n1,1,2,10,100,2\n")
    got = []
    with pytest.raises(InputError, match=r"bad.csv:2: direction"):
        for b in read_lobster(bad):
            got.append(b)
    assert got[-1].error is not None and len(got[-1]) == 1
    assert sum(len(b) for b in read_lobster(bad, skip_bad=True)) == 1
    with pytest.raises(ValueError):
        list(read_lobster(path, chunk_bytes=0))
    assert np.array_equal(parse_lobster_text("").traded, np.zeros(0))


# ------------------------------------------------------------------------------------------
# the compiled fast path against a plain Python model (Python's float/int, a dict of orders)
# ------------------------------------------------------------------------------------------

def _model(lines: list[str]) -> tuple[list[tuple], int]:
    """Events of valid lines by the documented semantics; bad lines skipped and counted."""
    from ddms.io.lobster import _Bad, _validate

    orders: dict[int, list] = {}
    out: list[tuple] = []
    bad = 0
    for n, text in enumerate(lines, 1):
        try:
            t, typ, oid, size, px, d = _validate(text.encode())
        except _Bad:
            bad += 1
            continue
        if typ == 1:
            if oid in orders:
                b, t0, v, p = orders.pop(oid)
                out.append((b, -1, t0, oid, 0, v, p, n, 0.0))
            orders[oid] = [0 if d == 1 else 1, t, size, px]
            out.append((orders[oid][0], 1, t, oid, 0, size, px, n, 0.0))
        elif typ in (2, 3, 4) and oid in orders:
            b, t0, v, p = orders[oid]
            gone = v if typ == 3 else min(size, v)
            out.append((b, -1, t0, oid, 0, v, p, n, gone if typ == 4 else 0.0))
            if v - gone > 0:
                orders[oid][2] = v - gone
                out.append((b, 1, t0, oid, 0, v - gone, p, n, 0.0))
            else:
                del orders[oid]
    return out, bad


_num_text = st.one_of(
    st.integers(0, 10**6).map(str),
    st.floats(0, 1e5, allow_nan=False).map(repr),
    st.floats(0, 1e5, allow_nan=False).map(lambda x: f"{x:.17g}"),
    st.floats(0, 1e5, allow_nan=False).map(lambda x: f"{x:e}"),
    st.integers(0, 10**20).map(lambda x: f"+{x}"),
    st.sampled_from(["1.", ".5", "-0", "0.000", "1.5e3", "x", "", "1e", "nan"]),
)
_msg = st.tuples(_num_text, st.sampled_from(["1", "1", "2", "3", "4", "5", "6", "7", "9", "1.0"]),
                 st.sampled_from(["1", "2", "3", "-4", "12345678901234567", "x"]), _num_text,
                 st.one_of(_num_text, st.sampled_from(["-1", "0", "1"])), st.sampled_from(["1", "-1", "1", "0"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_msg, max_size=25), st.integers(1, 64))
def test_fast_path_matches_the_model(msgs, chunk):
    lines = [",".join(m) for m in msgs]
    data = "".join(line + "\n" for line in lines).encode()
    p = LobsterParser(skip_bad=True)
    parts = [p.feed(data[i:i + chunk]) for i in range(0, len(data), chunk)] + [p.close()]
    got = [e for b in parts for e in _events(b)]
    want, bad = _model(lines)
    assert got == want
    assert p.bad_lines == bad and sum(b.skipped for b in parts) == bad


def test_many_orders_grow_the_table():
    text = "".join(f"{i},1,{i},10,{100 + i % 7},{1 - 2 * (i % 2)}\n" for i in range(5000))
    text += "".join(f"{i},3,{i},10,0,1\n" for i in range(0, 5000, 2))
    p = LobsterParser()
    b = p.feed(text.encode())
    assert len(b) == 7500 and p.resting == 2500 and p.rows()["asks"].shape == (2500, 5)
