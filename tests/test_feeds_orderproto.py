"""Our order protocol against the finance.csv adaptor (ddms.io.orderbook).

* encode finance.csv -> messages -> decode gives the adaptor's events line for line (rel, sign,
  every column, line) and the same final bids/asks, on tiny and standard, and on hypothesis
  order flow (repeated ids, executions past zero, deletes of absent ids, other actions);
* faults: a dropped, duplicated or reordered message, corrupt JSON, unknown/missing fields:
  detected, reported, and after a resync from the server's snapshot (an encoder at the furthest
  position sent) the book equals the adaptor's; every engine delete removes exactly a resting row;
* bad finance.csv lines are refused by the encoder as by the adaptor.
``_check()`` runs after every message.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import data_file
from hypothesis import given, settings
from hypothesis import strategies as st

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import InputError
from ddms.io.actions import NeedSnapshot
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser, orderbook_rows, parse_orderbook_text, read_orderbook
from ddms.io.orderproto import OrderEncoder, OrderFeed, encode_line, encode_orderbook, format_message


def concat(batches: list[EventBatch]) -> tuple[np.ndarray, ...]:
    return tuple(np.concatenate([getattr(b, f) for b in batches]) for f in ("rel", "sign", "cols", "line"))


def assert_same_events(a: tuple[np.ndarray, ...], b: tuple[np.ndarray, ...]) -> None:
    for x, y, name in zip(a, b, ("rel", "sign", "cols", "line"), strict=True):
        assert x.shape == y.shape and np.array_equal(x, y), name


class RowStore:
    """The engine's relations: deletes must remove exactly a resting row."""

    def __init__(self) -> None:
        self.rows: dict[tuple[int, float], tuple[float, ...]] = {}

    def apply(self, batch: EventBatch) -> None:
        assert (np.diff(batch.line) >= 0).all()
        for rel, sign, row in zip(batch.rel.tolist(), batch.sign.tolist(), batch.cols.tolist(), strict=True):
            key = (rel, row[1])
            if sign < 0:
                assert self.rows.pop(key) == tuple(row)
            else:
                assert key not in self.rows
                self.rows[key] = tuple(row)

    def as_rows(self) -> dict[str, list[tuple[float, ...]]]:
        out: dict[str, list] = {"bids": [], "asks": []}
        for (rel, _), row in self.rows.items():
            out[("bids", "asks")[rel]].append(row)
        return {k: sorted(v, key=lambda r: r[1]) for k, v in out.items()}


def rows_of(parser: OrderBookParser) -> dict[str, list[tuple[float, ...]]]:
    return {k: [tuple(r) for r in v.tolist()] for k, v in orderbook_rows(parser).items()}


@pytest.mark.parametrize("size", ["tiny", "standard"])
def test_encode_decode_equals_the_adaptor(size):
    path = data_file(size)
    want = concat(list(read_orderbook(path)))
    msgs = [format_message(m) for m in encode_orderbook(path)]
    assert [json.loads(m)["seq"] for m in msgs] == list(range(1, len(msgs) + 1))
    feed = OrderFeed(source=size)
    store = RowStore()
    batches = []
    for m in msgs:
        assert feed.feed_message(m) == ()
        feed._check()
        b = feed.take_events()
        store.apply(b)
        batches.append(b)
    assert_same_events(concat(batches), want)
    parser = OrderBookParser()
    parser.feed(path.read_bytes())
    parser.close()
    assert store.as_rows() == rows_of(parser)
    assert feed.counters()["applied"] == len(msgs) and not feed.reports
    # the final snapshot message round-trips into a fresh decoder
    other = OrderFeed()
    assert other.feed_message(format_message(feed.snapshot_message())) == ()
    other._check()
    assert other.orders == feed.orders and other.last_seq == len(msgs)


_line = st.tuples(
    st.integers(0, 50),                                        # t
    st.integers(-3, 12),                                       # id: few ids, so repeats and misses
    st.sampled_from("BBSSEEEFDTX"),
    st.one_of(st.integers(0, 20), st.sampled_from([0.5, 2.25, 1e-3])),
    st.one_of(st.integers(0, 1000), st.sampled_from([1999999900, 12.5])),
)


@settings(max_examples=120, deadline=None)
@given(st.lists(_line, min_size=1, max_size=60), st.integers(1, 5))
def test_random_order_flow_equals_the_adaptor(lines, brokers):
    text = "".join(f"{t},{i},{a},{v},{p}\n" for t, i, a, v, p in lines)
    want = parse_orderbook_text(text, brokers=brokers)
    feed = OrderFeed(brokers=brokers)
    batches = []
    for m in encode_orderbook(text.splitlines(keepends=True)):
        assert feed.feed_message(format_message(m)) == ()
        feed._check()
        batches.append(feed.take_events())
    assert_same_events(concat(batches), (want.rel, want.sign, want.cols, want.line))


# ------------------------------------------------------------------------------------------
# faults
# ------------------------------------------------------------------------------------------

WINDOW = 1200   # fault tests use the first lines of standard/finance.csv


def window() -> list[bytes]:
    return data_file("standard").read_bytes().splitlines(keepends=True)[:WINDOW]


def drive(lines: list[bytes], stream: list[tuple[str, int]]):
    """Feed ``stream`` ((text, seq it stands for)); answer each NeedSnapshot with the server's
    snapshot at the furthest seq sent (an encoder over the lines)."""
    enc = OrderEncoder("server")
    feed = OrderFeed(source="client", max_reports=10_000)
    store = RowStore()
    furthest = 0
    actions: list[NeedSnapshot] = []

    def answer(acts) -> None:
        for a in acts:
            assert isinstance(a, NeedSnapshot) and a.reason
            actions.append(a)
        if acts and feed.needs_snapshot:
            while enc.line < furthest:
                enc.encode(lines[enc.line])
            more = feed.apply_snapshot(format_message(enc.snapshot_message()))
            feed._check()
            answer(more)

    for text, seq in stream:
        furthest = max(furthest, seq)
        answer(feed.feed_message(text))
        feed._check()
        store.apply(feed.take_events())
    return feed, store, actions


def faulty(lines: list[bytes], fault: str, k: int) -> list[tuple[str, int]]:
    msgs = [(format_message(m), m["seq"]) for m in encode_orderbook(lines)]
    if fault == "drop":
        del msgs[k]
    elif fault == "duplicate":
        msgs.insert(k + 1, msgs[k])
    elif fault == "reorder":
        msgs[k], msgs[k + 1] = msgs[k + 1], msgs[k]
    elif fault == "corrupt":
        msgs[k] = (msgs[k][0][:-4], msgs[k][1])
    elif fault == "unknown_field":
        msgs[k] = (msgs[k][0][:-1] + ',"colour":"red"}', msgs[k][1])
    elif fault == "missing_field":
        obj = json.loads(msgs[k][0])
        del obj["id"]
        msgs[k] = (json.dumps(obj), msgs[k][1])
    elif fault == "bad_side":
        obj = json.loads(msgs[k][0])
        obj.update(type="add", side="buy", volume=1, price=1, t=1)
        obj.pop("action", None)
        msgs[k] = (json.dumps(obj), msgs[k][1])
    return msgs


def final_rows(lines: list[bytes]) -> dict[str, list[tuple[float, ...]]]:
    parser = OrderBookParser()
    parser.feed(b"".join(lines))
    parser.close()
    return rows_of(parser)


@pytest.mark.parametrize("fault", ["drop", "corrupt", "unknown_field", "missing_field", "bad_side"])
def test_lost_message_is_a_gap_and_resyncs(fault):
    lines = window()
    feed, store, actions = drive(lines, faulty(lines, fault, 700))
    assert feed.gaps == 1 and feed.resyncs == 1 and feed.snapshots == 1
    assert feed.malformed == (0 if fault == "drop" else 1)
    assert actions[0].reason.startswith("gap: seq 702 after seq 700")
    reasons = [r.reason for r in feed.reports]
    expect = {"drop": "gap", "corrupt": "malformed JSON", "unknown_field": "unknown field 'colour'",
              "missing_field": "missing field 'id'", "bad_side": "field 'side' is not 'bid' or 'ask'"}[fault]
    assert any(expect in r for r in reasons)
    assert all(r.source == "client" for r in feed.reports)
    assert feed.synced and store.as_rows() == final_rows(lines)


def test_duplicate_is_stale_and_reorder_resyncs():
    lines = window()
    feed, store, _ = drive(lines, faulty(lines, "duplicate", 300))
    assert feed.stale == 1 and feed.gaps == 0 and "stale message" in feed.reports[0].reason
    assert store.as_rows() == final_rows(lines)
    feed, store, _ = drive(lines, faulty(lines, "reorder", 300))
    assert feed.gaps == 1 and feed.stale == 1 and feed.resyncs == 1
    assert store.as_rows() == final_rows(lines)


def test_stream_joined_midway_needs_a_snapshot():
    path = data_file("tiny")
    msgs = [format_message(m) for m in encode_orderbook(path)]
    enc = OrderEncoder()
    for line in path.read_bytes().splitlines(keepends=True)[:40]:
        enc.encode(line)
    feed = OrderFeed()
    acts = feed.feed_message(msgs[45])
    assert "starts at seq 46" in acts[0].reason and not feed.synced
    feed._check()
    for m in msgs[46:50]:
        assert feed.feed_message(m) == ()
    old = feed.apply_snapshot(format_message(enc.snapshot_message()))          # seq 40: too old
    assert "too old" in old[0].reason and feed.snapshots_rejected == 1
    feed._check()
    for line in path.read_bytes().splitlines(keepends=True)[40:45]:
        enc.encode(line)
    assert feed.apply_snapshot(format_message(enc.snapshot_message())) == ()   # seq 45: fits
    feed._check()
    for m in msgs[50:]:
        assert feed.feed_message(m) == ()
    store = RowStore()
    store.apply(feed.take_events())
    assert store.as_rows() == final_rows(path.read_bytes().splitlines(keepends=True))
    # an unsolicited snapshot is ignored; a non-snapshot given as one is rejected
    assert feed.apply_snapshot(format_message(enc.snapshot_message())) == ()
    assert feed.snapshots_rejected == 2
    feed.apply_snapshot(msgs[3])
    assert feed.snapshots_rejected == 3 and "not a snapshot" in feed.reports[-1].reason
    feed._check()


def test_snapshot_validation_and_resync_request():
    feed = OrderFeed()
    feed.feed_message('{"seq":1,"type":"add","side":"bid","id":7,"volume":2,"price":100,"t":1}')
    acts = feed.resync("consumer too slow")
    assert acts[0].reason == "consumer too slow" and feed.resyncs == 1 and not feed.synced
    feed._check()
    bad = [{"seq": 1, "type": "snapshot", "orders": [{"side": "bid", "id": 1, "volume": 1, "price": 1}]},
           {"seq": 1, "type": "snapshot", "orders": [{"side": "bid", "id": 1, "volume": 1, "price": 1, "t": 0}] * 2},
           {"seq": 1, "type": "snapshot", "orders": [{"side": "bid", "id": True, "volume": 1, "price": 1, "t": 0}]},
           {"seq": 1, "type": "snapshot", "orders": [{"side": "bid", "id": 1, "volume": 1e999, "price": 1, "t": 0}]}]
    for i, b in enumerate(bad):
        assert feed.apply_snapshot(json.dumps(b)) and feed.snapshots_rejected == i + 1
        feed._check()
    reasons = [r.reason for r in feed.reports][1:]
    assert "exactly the fields" in reasons[0] and "repeats order id 1" in reasons[1]
    assert "is not an integer" in reasons[2] and "is not finite" in reasons[3]
    good = {"seq": 1, "type": "snapshot", "orders": [{"side": "ask", "id": 9, "volume": 3, "price": 5, "t": 2}]}
    assert feed.apply_snapshot(json.dumps(good)) == ()
    ev = feed.take_events()
    assert ev.sign.tolist() == [1, -1, 1] and ev.rel.tolist() == [0, 0, 1] and ev.line.tolist() == [1, 2, 2]
    assert ev.cols.tolist() == [[1.0, 7.0, 7.0, 2.0, 100.0]] * 2 + [[2.0, 9.0, 9.0, 3.0, 5.0]]
    assert ev.first_line == 1 and ev.last_line == 2
    feed._check()


def test_encoder_refuses_bad_lines_like_the_adaptor():
    bad = ["", "1,2,B,3", "x,1,B,1,1", "1,1.5,B,1,1", "1,1,b,1,1", "1,1,BB,1,1", "1,1,B,z,1", "1,1,B,1,",
           "1,99999999999999999,B,1,1", "1e999,1,B,1,1", " ,1,B,1,1"]
    for line in bad:
        with pytest.raises(InputError) as mine:
            encode_line(line, 3, "f.csv")
        with pytest.raises(InputError) as theirs:
            parse_orderbook_text("1,1,B,1,1\n1,1,T,1,1\n" + line + "\n", source="f.csv")
        assert mine.value.line == theirs.value.line == 3
        assert mine.value.reason.split(" (")[0] == theirs.value.reason.split(" (")[0], line
    assert encode_line("1.5,-4,E,2.25,7\r\n", 9) == {"seq": 9, "type": "execute", "id": -4, "volume": 2.25, "t": 1.5}
    assert encode_line("1,4,X,0,7", 2)["type"] == "other"
