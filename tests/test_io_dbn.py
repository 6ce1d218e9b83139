"""Databento DBN MBO reader (ddms/io/dbn.py) against an independent replay.

The oracle is a plain dict of resting orders per instrument, written here from Databento's
documented action semantics (../shared/data/mbo/README.md), advanced record by record; after
every F_LAST event the rows the reader emitted (replayed into a row store: every delete must
remove exactly the row inserted before) must equal the oracle's resting orders.  Comparing the
touched orders per event plus the sizes is exact, because both sides start equal and only the
touched orders can change; a full comparison runs every 2,000 events and at the end.
Real data (CME ESH4) is skipped where ../shared is absent; hypothesis streams of several
instruments always run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import SHARED
from hypothesis import given, settings
from hypothesis import strategies as st
from mutate import fuzz

from ddms.errors import InputError, ReplayError
from ddms.io.dbn import F_LAST, F_SNAPSHOT, MboBook, MboReplay, read_dbn
from ddms.io.levels import per_symbol

MBO = SHARED / "data" / "mbo"


def mbo_file(name: str):
    p = MBO / name
    if not p.exists():
        pytest.skip(f"{p} not available")
    return p


@dataclass(frozen=True)
class Rec:
    """A stand-in MBO record with the fields the core reads."""

    instrument_id: int
    action: str
    side: str
    price: int
    size: int
    order_id: int
    flags: int
    ts_event: int = 1_700_000_000_000_000_000


class Oracle:
    """Resting orders per instrument: order_id -> (side, price, size)."""

    def __init__(self) -> None:
        self.books: dict[int, dict[int, tuple[str, int, int]]] = {}
        self.snap: dict[int, bool] = {}

    def apply(self, r) -> set[int]:
        a, side = str(getattr(r.action, "value", r.action)), str(getattr(r.side, "value", r.side))
        book = self.books.setdefault(int(r.instrument_id), {})
        touched: set[int] = set()
        snap = bool(int(r.flags) & F_SNAPSHOT)
        if a in ("A", "C", "M") and snap and not self.snap.get(r.instrument_id):
            touched |= set(book)
            book.clear()
        if a in ("A", "C", "M"):
            self.snap[r.instrument_id] = snap
        if a == "A":
            book[r.order_id] = (side, r.price, r.size)
        elif a == "C":
            s, p, q = book[r.order_id]
            if q == r.size:
                del book[r.order_id]
            else:
                book[r.order_id] = (s, p, q - r.size)
        elif a == "M":
            book[r.order_id] = (side, r.price, r.size)
        elif a == "R":
            touched |= set(book)
            book.clear()
        if a in ("A", "C", "M"):
            touched.add(r.order_id)
        return touched


class Store:
    """Rows per symbol: id -> (rel, volume, price)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, tuple]] = {}

    def apply(self, events) -> None:
        for ev in events:
            b = ev.batch
            assert (b.line[1:] >= b.line[:-1]).all()
            s = self.rows.setdefault(ev.symbol, {})
            for rel, sign, (t, i, _br, vol, px) in zip(b.rel.tolist(), b.sign.tolist(), b.cols.tolist(), strict=True):
                i = int(i)
                if sign < 0:
                    assert s.pop(i) == (rel, t, vol, px)
                else:
                    assert i not in s
                    s[i] = (rel, t, vol, px)


def expect(oracle_book: dict, oid: int):
    side, price, size = oracle_book[oid]
    return (0 if side == "B" else 1, float(size), price * 1e-9)


def compare(store: Store, oracle: Oracle, names: dict[int, str], iid: int, oids) -> None:
    ob = oracle.books.get(iid, {})
    rows = store.rows.get(names.get(iid, str(iid)), {})
    for oid in oids:
        if oid in ob:
            rel, _, vol, px = rows[oid]
            assert (rel, vol, px) == expect(ob, oid), oid
        else:
            assert oid not in rows, oid
    assert len(rows) == len(ob)


def replay_and_check(records, names: dict[int, str] | None = None, full_every: int = 2000):
    """Feed records one by one; after every F_LAST compare the emitted rows with the oracle."""
    names = names or {}
    bk = MboBook("<test>", symbols=names)
    oracle, store = Oracle(), Store()
    touched: dict[int, set[int]] = {}
    events = 0
    for r in records:
        bk.feed(r)
        touched.setdefault(int(r.instrument_id), set()).update(oracle.apply(r))
        if int(r.flags) & F_LAST:
            store.apply(bk.take_events())
            iid = int(r.instrument_id)
            compare(store, oracle, names, iid, touched.pop(iid, ()))
            events += 1
            if events % full_every == 0:
                bk._check()
                for i in oracle.books:
                    compare(store, oracle, names, i, oracle.books[i])
    store.apply(bk.flush())
    bk._check()
    for i in oracle.books:
        compare(store, oracle, names, i, oracle.books[i])
    return bk, store, oracle


# ------------------------------------------------------------------------------------------
# real CME data
# ------------------------------------------------------------------------------------------

def _records(path):
    import databento_dbn as dbn
    dec = dbn.DBNDecoder(compression=dbn.Compression.ZSTD)
    recs = dec.write_and_decode(path.read_bytes())
    return [r for r in recs if isinstance(r, dbn.MBOMsg)]


@pytest.fixture(scope="module")
def day25():
    return _records(mbo_file("esh4-glbx-mdp3-20231225.mbo.dbn.zst"))


def test_real_mbo_matches_independent_replay_after_every_event(day25):
    bk, store, oracle = replay_and_check(day25, {17077: "ESH4"})
    s = bk.summary()["symbols"]["ESH4"]
    assert s["records"] == 68_792 and s["snapshots"] == 1 and bk.bad_records == 0
    assert (s["adds"], s["cancels"], s["modifies"], s["trades"], s["fills"]) == (29_216, 17_999, 12_233, 2_973, 6_371)
    assert s["resting_orders"] == len(oracle.books[17077]) > 0
    # crossed books are counted, not an error; on CME they belong to the pre-open auction, which
    # ends with the open's first trade: after it the book is never crossed
    assert 0 <= s["crossed"] < s["events"]
    bk2 = MboBook()
    first_trade, last_crossed = None, None
    for r in day25:
        before = bk2.instruments[17077].status.crossed if bk2.instruments else 0
        bk2.feed(r)
        if str(r.action.value) == "T" and first_trade is None:
            first_trade = r.ts_event
        if bk2.instruments[17077].status.crossed > before:
            last_crossed = r.ts_event
    assert bk2.summary()["crossed"] == s["crossed"]
    assert first_trade is not None and (last_crossed is None or last_crossed <= first_trade)


def test_real_mbo_file_reader_symbols_and_crossed_report():
    p = mbo_file("esh4-glbx-mdp3-20231225.mbo.dbn.zst")
    bk = MboBook(str(p))
    store = Store()
    for ev in read_dbn(p, book=bk):
        assert ev.symbol == "ESH4" and ev.venue == "databento"
        store.apply([ev])
    s = bk.summary()
    assert s["events"] == 47_022 and s["records"] == 68_792 and s["symbols"]["ESH4"]["resting_orders"] == 11_217
    assert len(store.rows["ESH4"]) == 11_217
    print("ESH4 crossed after", s["crossed"], "of", s["events"], "events")


def test_second_file_snapshot_replaces_the_book_instead_of_doubling_it(day25):
    p24, p25 = mbo_file("esh4-glbx-mdp3-20231224.mbo.dbn.zst"), mbo_file("esh4-glbx-mdp3-20231225.mbo.dbn.zst")
    bk = MboBook("both")
    store = Store()
    for p in (p24, p25):                      # one book over two files: each file's snapshot replaces it
        for ev in read_dbn(p, book=bk):
            store.apply([ev])
    bk._check()
    assert bk.summary()["symbols"]["ESH4"]["snapshots"] == 2
    alone = MboBook("alone")
    list(read_dbn(p25, book=alone))
    want = {oid: (s, p, q) for oid, (s, p, q, _) in alone.instruments[17077].orders.items()}
    assert {oid: (s, p, q) for oid, (s, p, q, _) in bk.instruments[17077].orders.items()} == want
    assert len(store.rows["ESH4"]) == len(want)
    # the same records without the stream boundary: the repeated snapshot orders are refused
    day24 = _records(p24)
    raw = MboBook("raw")
    with pytest.raises(InputError, match=r"^raw:8726: add of order \d+, which is already resting"):
        for r in day24 + day25:
            raw.feed(r)


def test_fuzz_real_dbn_file(tmp_path):
    data = mbo_file("esh4-glbx-mdp3-20231224.mbo.dbn.zst").read_bytes()

    def read(b: bytes) -> None:
        p = tmp_path / "x.mbo.dbn.zst"
        p.write_bytes(b)
        for _ in read_dbn(p, skip_bad=True):
            pass

    out = fuzz(read, data, 40, seed=3, kinds=("flip", "non_utf8", "cut_file", "json_junk", "insert_line"))
    assert out["error"] > 0


def test_not_dbn_is_a_replay_error(tmp_path):
    p = tmp_path / "x.dbn"
    p.write_bytes(b"garbage" * 20)
    with pytest.raises(ReplayError, match="not readable as DBN"):
        list(read_dbn(p))
    p.write_bytes(b"")
    with pytest.raises(ReplayError, match="no DBN metadata"):
        list(read_dbn(p))
    with pytest.raises(ReplayError, match="no such file"):
        list(read_dbn(tmp_path / "missing.dbn"))


# ------------------------------------------------------------------------------------------
# synthetic multi-instrument streams
# ------------------------------------------------------------------------------------------

def synthetic(rng: random.Random, n: int = 300, instruments=(1, 2, 3)) -> list[Rec]:
    live: dict[int, dict[int, tuple[str, int, int]]] = {i: {} for i in instruments}
    out: list[Rec] = []
    next_id = 1
    for i in instruments:                       # a snapshot per instrument
        for _ in range(rng.randrange(0, 8)):
            side = rng.choice("BA")
            price = (rng.randrange(90, 100) if side == "B" else rng.randrange(100, 110)) * 10**9
            live[i][next_id] = (side, price, rng.randrange(1, 50))
            out.append(Rec(i, "A", side, price, live[i][next_id][2], next_id, F_SNAPSHOT))
            next_id += 1
        if out and out[-1].instrument_id == i:
            out[-1] = Rec(i, "A", out[-1].side, out[-1].price, out[-1].size, out[-1].order_id, F_SNAPSHOT | F_LAST)
    for _ in range(n):
        i = rng.choice(instruments)
        book = live[i]
        event = []
        for _ in range(rng.randrange(1, 4)):
            op = rng.random()
            if op < 0.35 or not book:
                side = rng.choice("BA")
                price = (rng.randrange(90, 100) if side == "B" else rng.randrange(100, 110)) * 10**9
                book[next_id] = (side, price, rng.randrange(1, 50))
                event.append(Rec(i, "A", side, price, book[next_id][2], next_id, 0))
                next_id += 1
            elif op < 0.6:
                oid = rng.choice(list(book))
                s, p, q = book[oid]
                c = rng.randrange(1, q + 1)
                event.append(Rec(i, "C", s, p, c, oid, 0))
                if c == q:
                    del book[oid]
                else:
                    book[oid] = (s, p, q - c)
            elif op < 0.8:
                oid = rng.choice(list(book))
                s, p, q = book[oid]
                p2 = p + rng.choice((-1, 0, 1)) * 10**9
                book[oid] = (s, p2, rng.randrange(1, 50))
                event.append(Rec(i, "M", s, p2, book[oid][2], oid, 0))
            elif op < 0.9:
                event.append(Rec(i, rng.choice("TFN"), rng.choice("BAN"), 100 * 10**9, 1, 0, 0))
            elif op < 0.93:
                book.clear()
                event.append(Rec(i, "R", "N", 0, 0, 0, 0))
            else:                     # a modify of an order not resting: an add
                side = rng.choice("BA")
                price = (rng.randrange(90, 100) if side == "B" else rng.randrange(100, 110)) * 10**9
                book[next_id] = (side, price, rng.randrange(1, 50))
                event.append(Rec(i, "M", side, price, book[next_id][2], next_id, 0))
                next_id += 1
        last = event[-1]
        event[-1] = Rec(last.instrument_id, last.action, last.side, last.price, last.size, last.order_id, F_LAST)
        out += event
    return out


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_synthetic_multi_instrument_matches_replay(seed):
    recs = synthetic(random.Random(seed))
    bk, store, oracle = replay_and_check(recs, {1: "AAA", 2: "BBB"}, full_every=25)
    s = bk.summary()
    assert set(s["symbols"]) <= {"AAA", "BBB", "3"} and s["bad_records"] == 0
    # the rows of one event share one line: an event is one atomic update
    assert s["events"] == sum(1 for r in recs if r.flags & F_LAST)


def test_rows_wait_for_f_last_and_interleaved_instruments_keep_their_events_whole():
    bk = MboBook()
    bk.feed(Rec(1, "A", "B", 10**9, 5, 1, 0))
    bk.feed(Rec(2, "A", "A", 2 * 10**9, 5, 2, F_LAST))      # instrument 2's event ends first
    evs = bk.take_events()
    assert [(e.symbol, len(e.batch)) for e in evs] == [("2", 1)]
    bk.feed(Rec(1, "A", "B", 10**9, 7, 3, F_LAST))
    (e,) = bk.take_events()
    assert e.symbol == "1" and e.batch.line.tolist() == [2, 2]       # one event, one line
    assert bk.summary()["symbols"]["1"]["events"] == 1


@pytest.mark.parametrize("rec,reason", [
    (Rec(1, "C", "B", 10**9, 1, 99, F_LAST), "cancel of order 99, which is not resting"),
    (Rec(1, "A", "B", 10**9, 1, 1, F_LAST), "already resting"),
    (Rec(1, "C", "B", 10**9, 9, 1, F_LAST), "cancel of 9 from order 1"),
    (Rec(1, "A", "N", 10**9, 1, 5, F_LAST), "side 'N'"),
    (Rec(1, "X", "B", 10**9, 1, 5, F_LAST), "unknown action"),
    (Rec(1, "A", "B", 10**9, 0, 5, F_LAST), "size 0"),
    (Rec(1, "A", "B", 2**63 - 1, 1, 5, F_LAST), "price"),
    (Rec(1, "A", "B", 10**9, 1, 2**60, F_LAST), "not exact in float64"),
])
def test_bad_records_are_located_errors_or_counted_skips(rec, reason):
    bk = MboBook("feed.dbn")
    bk.feed(Rec(1, "A", "B", 10**9, 5, 1, F_LAST))
    with pytest.raises(InputError, match=r"^feed\.dbn:2: .*" + reason.replace("(", r"\(")):
        bk.feed(rec)
    bk._check()
    skip = MboBook("feed.dbn", skip_bad=True)
    skip.feed(Rec(1, "A", "B", 10**9, 5, 1, F_LAST))
    skip.feed(rec)
    skip._check()
    assert skip.bad_records == 1 and skip.summary()["symbols"]["1"]["resting_orders"] == 1


# ------------------------------------------------------------------------------------------
# synthetic DBN files (written with databento_dbn's own encoder: always available)
# ------------------------------------------------------------------------------------------

def write_dbn(path, records: list[Rec], schema: str = "mbo") -> bytes:
    import databento_dbn as dbn
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema(schema))
    out = [meta.encode()]
    for r in records:
        if schema == "mbo":
            out.append(bytes(dbn.MBOMsg(publisher_id=1, instrument_id=r.instrument_id, ts_event=r.ts_event,
                                        order_id=r.order_id, price=r.price, size=r.size, action=dbn.Action(r.action),
                                        side=dbn.Side(r.side), ts_recv=r.ts_event, flags=r.flags)))
        else:
            out.append(bytes(dbn.MBP1Msg(publisher_id=1, instrument_id=r.instrument_id, ts_event=r.ts_event,
                                         price=r.price, size=r.size, action=dbn.Action("A"), side=dbn.Side("B"),
                                         depth=0, ts_recv=r.ts_event)))
    data = b"".join(out)
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("seed", range(4))
def test_synthetic_dbn_file_matches_replay(tmp_path, seed):
    recs = synthetic(random.Random(seed), n=200)
    p = tmp_path / "x.dbn"
    write_dbn(p, recs)
    bk = MboBook(str(p))
    store = Store()
    for ev in read_dbn(p, book=bk, chunk_bytes=997):     # records cut across chunks
        store.apply([ev])
    bk._check()
    oracle = Oracle()
    for r in recs:
        oracle.apply(r)
    for iid, book in oracle.books.items():
        compare(store, oracle, {}, iid, book)
    assert bk.summary()["events"] == sum(1 for r in recs if r.flags & F_LAST)


def test_dbn_of_another_schema_and_truncated_file(tmp_path):
    recs = synthetic(random.Random(1), n=20)
    p = tmp_path / "mbp.dbn"
    write_dbn(p, recs, schema="mbp-1")
    with pytest.raises(ReplayError, match=r"no market-by-order \(MBO\) records: .* \(mbp-1\)"):
        list(read_dbn(p))
    q = tmp_path / "cut.dbn"
    data = write_dbn(q, recs)
    q.write_bytes(data[:-7])
    with pytest.raises(ReplayError, match="ends inside a record"):
        list(read_dbn(q))


@pytest.mark.parametrize("skip_bad", [False, True])
def test_fuzz_synthetic_dbn_file(tmp_path, skip_bad):
    data = write_dbn(tmp_path / "seed.dbn", synthetic(random.Random(2), n=60))

    def read(b: bytes) -> None:
        p = tmp_path / "f.dbn"
        p.write_bytes(b)
        bk = MboBook(str(p), skip_bad=skip_bad)
        for _ in read_dbn(p, book=bk):
            pass
        bk._check()

    out = fuzz(read, data, 80, seed=4, kinds=("flip", "non_utf8", "cut_file", "json_junk", "number_out_of_range",
                                              "insert_line", "duplicate_line"))
    assert out["ok"] > 0 and out["error"] > 0


def test_live_stream_names_its_instruments_by_symbol_mapping_records(tmp_path):
    """A live session's DBN (no mappings in the metadata: ``SymbolMappingMsg`` records name the
    instruments in the stream) gives each instrument its publisher symbol, as a historical file's
    metadata does (was: the ids, so ``FILE#NQM5`` found nothing and views printed "101")."""
    import databento_dbn as dbn
    recs = synthetic(random.Random(5), n=40, instruments=(101, 202))
    p = tmp_path / "live.dbn"
    data = write_dbn(p, recs)
    meta_len = len(dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                                stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema("mbo")).encode())
    maps = [bytes(dbn.SymbolMappingMsg(publisher_id=1, instrument_id=i, ts_event=0, stype_in=dbn.SType.CONTINUOUS,
                                       stype_in_symbol=f"{s}.c.0", stype_out=dbn.SType.RAW_SYMBOL,
                                       stype_out_symbol=s, start_ts=0, end_ts=0))
            for i, s in ((101, "NQM5"), (202, "ZN U5"))]
    p.write_bytes(data[:meta_len] + b"".join(maps) + data[meta_len:])
    bk = MboBook(str(p))
    assert {ev.symbol for ev in read_dbn(p, book=bk)} == {"NQM5", "ZN U5"}
    assert bk.other_records == 0 and set(bk.summary()["symbols"]) == {"NQM5", "ZN U5"}


# ------------------------------------------------------------------------------------------
# the numba replay (MboReplay, read_dbn's default) against the reference MboBook
# ------------------------------------------------------------------------------------------

def to_msgs(records: list[Rec]) -> list:
    """``records`` as the decoder's MBOMsg objects: encoded with databento_dbn (an action or side
    byte it has no enum for patched into the bytes) and decoded back, as a file would be."""
    import databento_dbn as dbn
    out = [dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema("mbo")).encode()]
    for r in records:
        b = bytearray(bytes(dbn.MBOMsg(publisher_id=1, instrument_id=r.instrument_id, ts_event=r.ts_event,
                                       order_id=r.order_id, price=r.price, size=r.size, action=dbn.Action("A"),
                                       side=dbn.Side("B"), ts_recv=r.ts_event + 7, flags=r.flags)))
        b[38], b[39] = ord(r.action), ord(r.side)
        out.append(bytes(b))
    recs = dbn.DBNDecoder().write_and_decode(b"".join(out))
    assert len(recs) == len(records) + 1
    return recs[1:]


def row_table(events) -> tuple:
    """Every row of ``events`` (SymbolEvents and ChunkEvents) as columns, symbols as names."""
    evs = per_symbol(events)
    if not evs:
        return ()
    cat = lambda f: np.concatenate([f(e.batch) for e in evs])   # noqa: E731
    return (cat(lambda b: b.rel), cat(lambda b: b.sign), cat(lambda b: b.cols), cat(lambda b: b.line),
            cat(lambda b: b.recv), [e.symbol for e in evs for _ in range(len(e.batch))])


def assert_same_rows(a, b) -> None:
    ta, tb = row_table(a), row_table(b)
    assert len(ta) == len(tb)
    for x, y in zip(ta[:5], tb[:5], strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    if ta:
        assert ta[5] == tb[5]
    for ev in b:
        lines = ev.batch.line
        assert (lines[1:] >= lines[:-1]).all() and ev.batch.first_line == lines[0] and ev.batch.last_line == lines[-1]


def wild(rng: random.Random, n: int, instruments=(1, 2, 3)) -> list[Rec]:
    """Records with no regard for validity: ids from a small pool shared by the instruments
    (duplicate adds, cancels of unknown ids, cancels above the resting size), modifies that
    move an order to the other side, snapshots starting mid-stream, clears, trades, unknown
    actions and sides, out-of-range values, events left open at the end."""
    out = []
    for _ in range(n):
        a = rng.choices("ACMRTFNX", weights=(30, 22, 18, 2, 4, 3, 2, 1))[0]
        side = rng.choices("BAN?", weights=(45, 45, 6, 2))[0]
        price = rng.randrange(95, 106) * 10**9
        size = rng.randrange(1, 12)
        oid = rng.randrange(1, 40)
        r = rng.random()
        if r < 0.01:
            price = 2**63 - 1
        elif r < 0.02:
            size = 0
        elif r < 0.03:
            oid = 2**53 + rng.randrange(3)
        flags = (F_LAST if rng.random() < 0.6 else 0) | (F_SNAPSHOT if rng.random() < 0.05 else 0)
        out.append(Rec(rng.choice(instruments), a, side, price, size, oid, flags,
                       ts_event=1_700_000_000_000_000_000 + rng.randrange(10**12)))
    return out


def both(msgs: list, cuts: list[int], skip_bad: bool):
    """Feed ``msgs`` to an MboBook and an MboReplay, taking events after every cut; returns
    (book, replay, events of each, the error of each or None)."""
    ref, new = MboBook("s.dbn", skip_bad=skip_bad), MboReplay("s.dbn", skip_bad=skip_bad)
    out: tuple[list, list] = ([], [])
    errs: list = [None, None]
    for k, bk in enumerate((ref, new)):
        at = 0
        try:
            for c in [*cuts, len(msgs)]:
                bk.feed_decoded(msgs[at:c])
                at = c
                out[k].extend(bk.take_events())
        except InputError as e:
            errs[k] = str(e)
        out[k].extend(bk.flush())
    return ref, new, out[0], out[1], errs


@given(seed=st.integers(0, 2**32 - 1), skip_bad=st.booleans(), n=st.integers(1, 400), ncut=st.integers(0, 6))
@settings(max_examples=150, deadline=None)
def test_replay_equals_reference_on_wild_streams(seed, skip_bad, n, ncut):
    rng = random.Random(seed)
    msgs = to_msgs(wild(rng, n, instruments=rng.choice(((7,), (1, 2), (1, 2, 3, 4, 5)))))
    cuts = sorted(rng.randrange(len(msgs) + 1) for _ in range(ncut))
    ref, new, a, b, errs = both(msgs, cuts, skip_bad)
    assert errs[0] == errs[1]
    assert_same_rows(a, b)
    assert ref.summary() == new.summary()
    assert [str(e) for e in ref.bad_samples] == [str(e) for e in new.bad_samples]
    ref._check()
    new._check()
    for iid, inst in ref.instruments.items():
        assert {o: v[:3] for o, v in inst.orders.items()} == new.orders(iid)
        assert list(inst.orders) == list(new.orders(iid))        # insertion order: what a clear deletes in


@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_replay_matches_independent_oracle_on_valid_streams(seed):
    """The replay's rows against the oracle (not the reference) after every chunk of events."""
    rng = random.Random(seed)
    recs = synthetic(rng, n=300, instruments=(1, 2, 3, 4))
    msgs = to_msgs(recs)
    new = MboReplay("<t>")
    oracle, store = Oracle(), Store()
    at, checked = 0, 0
    is_open: dict[int, bool] = {}
    while at < len(msgs):
        c = min(len(msgs), at + rng.randrange(1, 40))
        new.feed_decoded(msgs[at:c])
        for r in recs[at:c]:
            oracle.apply(r)
            is_open[r.instrument_id] = not r.flags & F_LAST
        store.apply(per_symbol(new.take_events()))
        if not any(is_open.values()):        # no event open: every book's rows are out
            checked += 1
            for iid in oracle.books:
                compare(store, oracle, {}, iid, oracle.books[iid])
        at = c
    assert checked > 0
    store.apply(per_symbol(new.flush()))
    new._check()
    for iid in oracle.books:
        compare(store, oracle, {}, iid, oracle.books[iid])
    assert new.summary()["events"] == sum(1 for r in recs if r.flags & F_LAST)


def test_replay_equals_reference_on_real_files():
    p24, p25 = mbo_file("esh4-glbx-mdp3-20231224.mbo.dbn.zst"), mbo_file("esh4-glbx-mdp3-20231225.mbo.dbn.zst")
    for chunk in (1 << 20, 4099):
        ref, new = MboBook("both"), MboReplay("both")
        a = [ev for p in (p24, p25) for ev in read_dbn(p, book=ref, chunk_bytes=chunk)]
        b = [ev for p in (p24, p25) for ev in read_dbn(p, book=new, chunk_bytes=chunk)]
        assert_same_rows(a, b)
        assert ref.summary() == new.summary()
        assert new.summary()["symbols"]["ESH4"]["snapshots"] == 2
        new._check()
        assert list(new.orders(17077).items()) == [(o, v[:3]) for o, v in ref.instruments[17077].orders.items()]


def test_read_dbn_default_is_the_replay_and_keeps_the_reference_errors(tmp_path):
    recs = synthetic(random.Random(9), n=50)
    bad = Rec(recs[5].instrument_id, "C", "B", 10**9, 1, 10**6, F_LAST)       # an unknown order
    p = tmp_path / "bad.dbn"
    write_dbn(p, [*recs[:40], bad, *recs[40:]])
    with pytest.raises(InputError, match=r"bad\.dbn:41: cancel of order 1000000, which is not resting"):
        list(read_dbn(p))
    with pytest.raises(InputError, match=r"bad\.dbn:41: cancel of order 1000000, which is not resting"):
        list(read_dbn(p, book=MboBook(str(p))))
    new = MboReplay(str(p), skip_bad=True)
    evs = list(read_dbn(p, book=new))
    ref = MboBook(str(p), skip_bad=True)
    assert_same_rows(list(read_dbn(p, book=ref)), evs)
    assert new.bad_records == 1 and str(new.bad_samples[0]) == str(ref.bad_samples[0])


def _outcome(p, book):
    """(rows, error text or None) of reading ``p`` into ``book``; only ddms errors may escape."""
    evs: list = []
    try:
        for ev in read_dbn(p, book=book):
            evs.append(ev)
    except (InputError, ReplayError) as e:
        return evs, str(e)
    return evs, None


@given(seed=st.integers(0, 2**32 - 1), nflip=st.integers(1, 12), skip_bad=st.booleans())
@settings(max_examples=60, deadline=None)
def test_fuzzed_dbn_bytes_same_outcome_as_reference(tmp_path_factory, seed, nflip, skip_bad):
    """Random bytes overwritten anywhere in a multi-instrument DBN file (metadata, record headers,
    actions, sides, flags, ids, prices, sizes): the replay ends as the reference does -- the same
    rows, then the same located error or none -- and never with another exception."""
    rng = random.Random(seed)
    p = tmp_path_factory.mktemp("fz") / "f.dbn"
    data = bytearray(write_dbn(p, synthetic(rng, n=60, instruments=(1, 2, 3))))
    for _ in range(nflip):
        at = rng.randrange(len(data))
        data[at] = rng.choice((0, 0xFF, ord("A"), ord("C"), ord("X"), 0x80, 0x20, rng.randrange(256)))
    p.write_bytes(bytes(data))
    ref, new = MboBook(str(p), skip_bad=skip_bad), MboReplay(str(p), skip_bad=skip_bad)
    (a, ea), (b, eb) = _outcome(p, ref), _outcome(p, new)
    assert ea == eb
    assert_same_rows(a, b)
    assert ref.summary() == new.summary()
    new._check()


def test_replay_level_arena_grows_and_compacts():
    """Many instruments with deep books: level runs move and the arena is rebuilt compacted,
    rows and books still the reference's."""
    rng = random.Random(11)
    recs, oid = [], 1
    live: dict[int, list[int]] = {}
    for _ in range(6000):
        i = rng.randrange(60)
        if live.get(i) and rng.random() < 0.3:
            o = live[i].pop(rng.randrange(len(live[i])))
            recs.append(Rec(i, "C", "B", 0, 1, o, F_LAST))         # every order rests with size 1
        else:
            side = rng.choice("BA")
            px = (rng.randrange(1, 300) if side == "B" else rng.randrange(300, 600)) * 10**7
            recs.append(Rec(i, "A", side, px, 1, oid, F_LAST))
            live.setdefault(i, []).append(oid)
            oid += 1
    msgs = to_msgs(recs)
    ref, new, a, b, errs = both(msgs, [1000, 3000, 3001], False)
    assert errs == [None, None]
    assert_same_rows(a, b)
    assert ref.summary() == new.summary()
    new._check()
    assert new._la.shape[0] > 1024
