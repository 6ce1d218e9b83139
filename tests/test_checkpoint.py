"""Engine checkpoints: checkpoint at a random line, restore into a NEW engine (and once in a new
process), continue; after every remaining line the restored engine's views and its whole raw
state (every map in iteration order, every index, every range-tree pool with its pending leaves)
equal the uninterrupted engine's bit for bit, and ``_check()`` passes on both.  Also: a
checkpoint of another program, format version or state layout, or a file that is no checkpoint,
is refused with a message naming the file and the mismatch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from conftest import EXAMPLES, REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.compiler import compile_sql
from ddms.errors import CheckpointError, DdmsError
from ddms.io.events import split_lines
from ddms.io.orderbook import OrderBookParser
from ddms.runtime.checkpoint import dump_state, load_state, read_file, write_file
from ddms.runtime.engine import Engine

PRICES = [1, 99, 100, 100.5, 101, 102, 150, 200, 1999999900]
IDS = st.integers(1, 40)
line = st.one_of(
    st.tuples(st.sampled_from("BS"), IDS, st.integers(1, 40), st.sampled_from(PRICES)),
    st.tuples(st.just("E"), IDS, st.integers(1, 45), st.just(0)),
    st.tuples(st.sampled_from("FD"), IDS, st.just(0), st.just(0)),
    st.tuples(st.just("T"), IDS, st.integers(0, 5), st.just(0)),
)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                            HealthCheck.function_scoped_fixture])

HEADER = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT)
  FROM FILE 'finance.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
"""
# grouped views, a join on broker, an inequality (prefix-keyed range trees) and a correlated
# subquery: hash maps, secondary indexes and prefix tables beside the range trees
BROKER_SQL = HEADER + """
SELECT b.broker_id, SUM(a.price - b.price) AS s FROM bids b, asks a
  WHERE a.broker_id = b.broker_id AND a.price > b.price GROUP BY b.broker_id;
SELECT b.broker_id, SUM(b.volume) AS big FROM bids b
  WHERE b.volume > (SELECT AVG(b2.volume) FROM bids b2 WHERE b2.broker_id = b.broker_id) GROUP BY b.broker_id;
"""

# views of rows (ladders): their value maps and row counts in hash tables, the row counts' range
# trees beside them, one table keyed by (order id, price)
LADDER_SQL = HEADER + """
SELECT price, SUM(volume) AS bid_ladder, COUNT(*) AS orders FROM bids GROUP BY price ORDER BY price DESC LIMIT 5;
SELECT l.price, l.volume AS ask_ladder
  FROM (SELECT price, SUM(volume) AS volume FROM asks GROUP BY price ORDER BY price LIMIT 5) l;
SELECT id, price, volume AS order_ladder FROM bids ORDER BY price DESC, id LIMIT 10;
"""


@pytest.fixture(scope="module", params=["vwap", "sobi", "broker_sql", "ladder_sql"])
def program(request):
    if request.param in ("broker_sql", "ladder_sql"):
        return compile_sql(BROKER_SQL if request.param == "broker_sql" else LADDER_SQL).program
    prog = EXAMPLES / f"{request.param}.m3"
    Engine(prog)   # compile (or load) once per module
    return prog


def render(stream: list[tuple]) -> bytes:
    return "".join(f"{i},{oid},{a},{v},{p}\n" for i, (a, oid, v, p) in enumerate(stream)).encode()


def same_state(a: Engine, b: Engine) -> None:
    da, db = dump_state(a), dump_state(b)
    assert da.keys() == db.keys()
    for k in da:
        assert da[k].dtype == db[k].dtype and da[k].shape == db[k].shape, k
        assert da[k].tobytes() == db[k].tobytes(), f"state array {k} differs"


def views_bits(e: Engine) -> str:
    """Every view, floats as their exact hex spelling (NaN equal to NaN; a NULL scalar view,
    None, as NaN)."""
    def fx(x):
        return float("nan" if x is None else x).hex()
    return json.dumps({n: fx(v) if not isinstance(v, list) else [[fx(x) for x in r] for r in v]
                       for n, v in e.snapshot().items()})


@SETTINGS
@given(stream=st.lists(line, min_size=1, max_size=80), cut=st.floats(0, 1))
def test_restore_continues_bit_for_bit(program, tmp_path, stream, cut):
    batch = OrderBookParser().feed(render(stream))
    n = len(stream)
    k = int(cut * n)
    ref = Engine(program)
    relmap = ref.relmap(("bids", "asks"))
    rest = batch
    for i in range(1, k + 1):   # line by line up to the cut, checked as an uninterrupted run is
        head, rest = split_lines(rest, i)
        ref.apply(head, relmap)
        ref._check()
    path = tmp_path / "c.arrow"
    ref.checkpoint(path)
    got = Engine(program, restore=path)
    assert got.position == ref.position == k
    got._check()
    same_state(ref, got)
    assert views_bits(ref) == views_bits(got)
    for i in range(k + 1, n + 1):
        head, rest = split_lines(rest, i)
        for e in (ref, got):
            e.apply(head, relmap)
            e._check()
        assert got.position == ref.position == i
        assert views_bits(ref) == views_bits(got)
        same_state(ref, got)


def test_load_state_leaves_the_dump_unchanged():
    """Loading one in-memory dump into two engines (bench.depth_sql's repeated runs): the first
    engine's updates must not reach the dump.  A grown table (a per-slice tree's root table, a
    prefix table) used to be the dump's own array, so the second engine loaded a root table
    updated by the first against the dump's pools."""
    from ddms.runtime.checkpoint import load_state

    program = compile_sql((REPO / "examples" / "sql" / "top5_bid_order_volume.sql").read_text()).program
    stream = [("B", i, 10 + i % 7, 100 + i) for i in range(1, 200)]   # 199 one-order levels: a grown root table
    head = OrderBookParser().feed(render(stream))
    built = Engine(program)
    relmap = built.relmap(("bids", "asks"))
    built.apply(head, relmap)
    saved = dump_state(built)
    kept = {k: v.copy() for k, v in saved.items()}
    tail = OrderBookParser().feed(render(stream + [("D", i, 0, 0) for i in range(1, 200, 3)]))
    _, tail = split_lines(tail, len(stream))
    first = Engine(program)
    load_state(first, saved)
    first.position = built.position
    first.apply(tail, relmap)
    first._check()
    assert all(np.array_equal(saved[k], kept[k]) for k in saved), "a dump array changed under a load"
    second = Engine(program)
    load_state(second, saved)
    second._check()
    assert views_bits(second) == views_bits(built)


@pytest.mark.parametrize("name,cut", [("sobi", 12_345), pytest.param("broker_sql", 1_234, marks=pytest.mark.slow)])
def test_restore_in_a_new_process(tmp_path, name, cut):
    """The uninterrupted run here; a second process restores the checkpoint, applies the rest of
    the stream line by line and writes its views after every line and its final state: the views
    equal this run's after every remaining line, bit for bit, and so does the whole state."""
    from replay.synthetic import generate_orderbook
    n = 2_000 if name == "broker_sql" else 20_000
    data = b"".join(generate_orderbook(n, seed=7, depth=400))
    (tmp_path / "in.csv").write_bytes(data)
    prog = EXAMPLES / "sobi.m3" if name == "sobi" else tmp_path / "broker.sql"
    if name != "sobi":
        prog.write_text(BROKER_SQL)
    ref = Engine(prog if name == "sobi" else compile_sql(BROKER_SQL).program)
    relmap = ref.relmap(("bids", "asks"))
    head, tail = split_lines(OrderBookParser().feed(data), cut)
    ref.apply(head, relmap)
    ref.checkpoint(tmp_path / "c.arrow")
    want_views = []
    for i in range(cut + 1, n + 1):
        piece, tail = split_lines(tail, i)
        ref.apply(piece, relmap)
        want_views.append(views_bits(ref))
    script = f"""
import json, sys
import numpy as np
sys.path.insert(0, {str(REPO / "tests")!r})
from test_checkpoint import views_bits
from ddms.compiler import compile_sql
from ddms.runtime.checkpoint import dump_state
from ddms.runtime.engine import Engine
from ddms.io.events import split_lines
from ddms.io.orderbook import OrderBookParser
prog = {str(prog)!r}
e = Engine(prog if prog.endswith(".m3") else compile_sql(open(prog).read()).program,
           restore={str(tmp_path / 'c.arrow')!r})
batch = OrderBookParser().feed(open({str(tmp_path / 'in.csv')!r}, 'rb').read())
_, tail = split_lines(batch, e.position)
rel = e.relmap(('bids', 'asks'))
views = []
for i in range(e.position + 1, {n} + 1):
    piece, tail = split_lines(tail, i)
    e.apply(piece, rel)
    views.append(views_bits(e))
e._check()
json.dump(views, open({str(tmp_path / 'views.json')!r}, 'w'))
np.savez({str(tmp_path / 'out.npz')!r}, position=e.position, **dump_state(e))
"""
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True)
    ref._check()
    assert json.loads((tmp_path / "views.json").read_text()) == want_views
    want = dump_state(ref)
    got = np.load(tmp_path / "out.npz")
    assert int(got["position"]) == ref.position == n
    assert set(got.files) - {"position"} == set(want)
    for k, a in want.items():
        assert got[k].tobytes() == a.tobytes(), k


def test_load_state_copies_every_array():
    """One saved state loaded into engine after engine, each then run on (what ``bench depth_sql``
    does with a built book): every load gives the saved state bit for bit, with ``_check()``
    passing, and the runs leave the saved arrays unchanged.  Regression: a table that grew past
    its initial size (here point maps and the prefix tables of per-broker range-tree roots) was
    stored into the state as the caller's array itself, so the first run rewrote the saved roots
    and the second load paired them with the saved node pools: roots of never-used nodes, then
    accesses outside the pools' arrays (IndexError under NUMBA_BOUNDSCHECK=1; unchecked, heap
    corruption: glibc "corrupted double-linked list" once in bench depth_sql)."""
    from replay.synthetic import generate_orderbook
    prog = compile_sql(BROKER_SQL).program
    batch = OrderBookParser().feed(b"".join(generate_orderbook(1_500, seed=3, depth=300)))
    head, tail = split_lines(batch, 1_000)
    built = Engine(prog)
    relmap = built.relmap(("bids", "asks"))
    built.apply(head, relmap)
    saved = dump_state(built)
    fresh = dump_state(Engine(prog))
    grown = [k for k in saved if k in fresh and saved[k].shape != fresh[k].shape and "." not in k]
    assert grown, "the stream must grow some table past its initial size (the path this test guards)"
    want = {k: a.copy() for k, a in saved.items()}
    for _ in range(3):
        e = Engine(prog)
        load_state(e, saved)
        e.position = built.position
        e._check()
        same_state(built, e)
        e.apply(tail, relmap)
        e._check()
        for k, a in want.items():
            assert saved[k].tobytes() == a.tobytes(), f"the run wrote into the loaded array {k}"


@pytest.fixture(scope="module")
def vwap_ckpt(tmp_path_factory):
    path = tmp_path_factory.mktemp("ck") / "vwap.arrow"
    e = Engine(EXAMPLES / "vwap.m3")
    e.apply(OrderBookParser().feed(b"1,1,B,10,100\n2,2,B,5,101\n"), e.relmap(("bids", "asks")))
    e.checkpoint(path)
    return path


def test_refuses_another_program(vwap_ckpt):
    with pytest.raises(CheckpointError, match=r"vwap\.arrow: checkpoint of another program"):
        Engine(EXAMPLES / "sobi.m3", restore=vwap_ckpt)


def test_refuses_another_version_or_layout(vwap_ckpt, tmp_path):
    arrays, info = read_file(vwap_ckpt)
    meta = {k: v for k, v in info.items() if k not in ("format", "version", "arrays")}
    bad = tmp_path / "layout.arrow"
    write_file(bad, arrays, {**meta, "layout": "0" * 20})
    with pytest.raises(CheckpointError, match=r"layout\.arrow: .*another version of the code generator"):
        Engine(EXAMPLES / "vwap.m3", restore=bad)
    # a future format version
    table = pa.ipc.open_file(pa.memory_map(str(vwap_ckpt))).read_all()
    info2 = {**info, "version": 99}
    fut = tmp_path / "future.arrow"
    table = table.replace_schema_metadata({"ddms": json.dumps(info2)})
    with pa.ipc.new_file(str(fut), table.schema) as w:
        w.write_table(table)
    with pytest.raises(CheckpointError, match=r"future\.arrow: checkpoint format version 99"):
        Engine(EXAMPLES / "vwap.m3", restore=fut)


def test_refuses_garbage_and_torn_files(vwap_ckpt, tmp_path):
    torn = tmp_path / "torn.arrow"
    torn.write_bytes(vwap_ckpt.read_bytes()[:200])
    junk = tmp_path / "junk.arrow"
    junk.write_text("t,id,action\n")
    for p in (torn, junk, tmp_path / "missing.arrow"):
        with pytest.raises(DdmsError, match=str(p.name)):
            Engine(EXAMPLES / "vwap.m3", restore=p)
    e = Engine(EXAMPLES / "vwap.m3")
    with pytest.raises(DdmsError):
        e.restore(torn)
    assert e.position == 0 and e.value("VWAP") == 0   # a refused restore changes nothing


def test_checkpoint_is_atomic(vwap_ckpt, tmp_path):
    """A checkpoint replaces an existing one only when complete, and leaves no temporary file."""
    e = Engine(EXAMPLES / "vwap.m3", restore=vwap_ckpt)
    assert e.position == 2 and e.value("VWAP") == 101 * 5   # only the 101 level is in the top quarter
    path = tmp_path / "c.arrow"
    e.checkpoint(path)
    e.apply(OrderBookParser().feed(b"3,3,B,1,102\n"), e.relmap(("bids", "asks")))
    e.checkpoint(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.arrow"]
    assert Engine(EXAMPLES / "vwap.m3", restore=path).position == 3


def test_layout_digest_covers_every_storage_module(tmp_path, monkeypatch):
    """The state layout digest changes with the source of each storage module whose arrays a state
    holds (range trees, hash tables, the EXTREME maps' table and heap): a checkpoint written by
    one version of those layouts is refused by another, never misread."""
    from ddms.runtime.checkpoint import layout_digest
    from ddms.storage import btree, extheap, hashtab
    eng = Engine(EXAMPLES / "vwap.m3")
    base = layout_digest(eng)
    for mod in (btree, hashtab, extheap):
        changed = tmp_path / f"{mod.__name__}.py"
        changed.write_bytes(open(mod.__file__, "rb").read() + b"\n# another layout\n")
        with monkeypatch.context() as m:
            m.setattr(mod, "__file__", str(changed))
            eng.__dict__.pop("_ckpt_digests", None)   # (computed once per engine)
            assert layout_digest(eng) != base, f"{mod.__name__} is not in the layout digest"
        eng.__dict__.pop("_ckpt_digests", None)
    assert layout_digest(eng) == base
