"""Projection pushdown in the order-book parser (``OrderBookParser.books``, ``ProgramInput.project``):
a parser keeping one book emits exactly the events of that book a full parser emits, whatever
the ids do across the books (an id replaced by the other side, executed, deleted, repeated)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddms  # noqa: F401  (sets NUMBA_CACHE_DIR before numba loads)
from ddms.errors import DdmsError
from ddms.io.inputs import open_program_input
from ddms.io.orderbook import ASKS, BIDS, OrderBookParser, orderbook_rows
from ddms.m3.parser import parse_program
from tests.conftest import REPO
from tests.test_orderbook_stream import _streams, events_of, feed_pieces

BIG = REPO.parent / "shared" / "data" / "orderbook" / "big" / "finance.csv"


def _kept(books: tuple[bool, bool], events: list) -> list:
    return [e for e in events if books[e[0]]]


# few ids (0..12), so orders move between the books: B 3 then S 3 deletes the bid, E/F/D of an ask id
_crossing = st.builds(lambda t, i, a, v, p: f"{t},{i},{a},{v},{p}", st.integers(0, 99), st.integers(0, 6),
                      st.sampled_from(list("BSEFDBS")), st.integers(1, 9), st.integers(1, 50))


@st.composite
def _crossing_streams(draw):
    lines = draw(st.lists(_crossing, max_size=60))
    data = ("\n".join(lines) + "\n").encode() if lines else b""
    return data, draw(st.lists(st.integers(0, len(data)), max_size=4)), draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_streams(), _crossing_streams()), st.sampled_from([(True, False), (False, True), (False, False)]),
       st.booleans())
def test_one_book_emits_the_full_parsers_events_of_that_book(case, books, skip_bad):
    data, cuts, reuse = case
    full, fb = feed_pieces(data, cuts, reuse, skip_bad=skip_bad)
    proj = OrderBookParser(skip_bad=skip_bad)
    proj.books = books
    assert proj.books == books
    # (feed_pieces makes its own parser: the same pieces through a projected one)
    pb, prev = [], 0
    for c in sorted(set(cuts)) + [len(data)]:
        b = proj.feed(data[prev:c])
        pb.append(b)
        prev = c
        if b.error is not None:
            break
    else:
        pb.append(proj.close())
    assert events_of(*pb) == _kept(books, events_of(*fb))
    # the same lines consumed and the same error or skips: parsing and checking are unchanged
    assert proj.lines_consumed == full.lines_consumed and proj.bad_lines == full.bad_lines
    assert [(b.first_line, b.last_line, b.skipped, str(b.error)) for b in pb] == \
        [(b.first_line, b.last_line, b.skipped, str(b.error)) for b in fb]
    # the kept book's resting orders are the full parser's; the other book holds nothing
    rows, want = orderbook_rows(proj), orderbook_rows(full)
    for book, name in ((BIDS, "bids"), (ASKS, "asks")):
        expect = want[name] if books[book] else want[name][:0]
        assert np.array_equal(rows[name], expect)
    assert proj.resting == sum(len(rows[n]) for n in ("bids", "asks"))


def test_books_are_set_before_the_first_feed_and_block_checkpoints():
    p = OrderBookParser()
    p.books = (True, False)
    with pytest.raises(DdmsError, match="keeping one book"):
        p.save_state()
    p.feed(b"1,1,B,1,1\n")
    with pytest.raises(DdmsError, match="before its first feed"):
        p.books = (True, True)
    q = OrderBookParser()
    q.feed(b"1,1,B,1,1\n")
    q.save_state()   # (both books: as before)


def test_program_input_projects_the_books_the_program_reads(tmp_path: Path):
    data = tmp_path / "x.csv"
    data.write_bytes(b"1,1,B,5,10\n2,2,S,7,11\n3,2,B,4,9\n4,1,E,2,0\n")
    from tests.test_cli import VWAP_M3

    program = parse_program(VWAP_M3.read_text())   # (declares BIDS only)
    pi = open_program_input(program, tmp_path, data=[data])
    from ddms.runtime.engine import stream_relmap
    read = stream_relmap(program, pi.names) >= 0
    assert read.tolist() == [True, False]
    pi.project(read)
    (parser,) = pi.parsers
    assert parser.books == (True, False)
    events = events_of(*pi.batches(lambda p: [p.read_bytes()]))
    # the S of id 2 rests nowhere; its B (line 3) is a plain insert; the E of id 1 re-inserts 3
    assert [(r, s, c[1], c[3], ln) for r, s, c, ln in events] == [
        (0, 1, 1.0, 5.0, 1), (0, 1, 2.0, 4.0, 3), (0, -1, 1.0, 5.0, 4), (0, 1, 1.0, 3.0, 4)]


@pytest.mark.skipif(not BIG.exists(), reason="shared data absent")
def test_real_file_bids_only_events_equal_the_full_parsers_bids():
    data = BIG.read_bytes()[: 1 << 20]
    full = OrderBookParser()
    proj = OrderBookParser()
    proj.books = (True, False)
    fb, pb = full.feed(data), proj.feed(data)
    keep = fb.rel == BIDS
    assert len(pb) < len(fb)
    for c in ("rel", "sign", "cols", "line"):
        assert np.array_equal(getattr(pb, c), getattr(fb, c)[keep])
    assert proj.resting == full.resting_bids


def test_ddms_run_of_a_bids_only_program_prints_the_same_views(tmp_path: Path, capsys):
    """``ddms run`` projects (vwap.m3 reads bids only) and ``--checkpoint`` runs do not: the same views."""
    from tests.test_cli import VWAP_M3, run_cli

    lines = [f"{i},{i % 7},{'BSEFDBS'[i % 7]},{1 + i % 5},{10 + i % 3}" for i in range(300)]
    data = tmp_path / "x.csv"
    data.write_text("\n".join(lines) + "\n")
    code, plain, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json", "--every", "50")
    assert code == 0, err
    code, ckpt, err = run_cli(capsys, "run", str(VWAP_M3), "--data", str(data), "--json", "--every", "50",
                              "--checkpoint", str(tmp_path / "c"), "--checkpoint-every", "100")
    assert code == 0, err
    assert plain == ckpt and len(plain) == 6
