"""Several inputs merged by receive timestamp (ddms/io/merge.py, ``ddms run --data A --data B``,
``ddms convert A B``).

Oracle: the merged stream must equal the input lines sorted by (receive time as a running maximum
over its own input, input index, position in the input), each input line's events kept together
and in order.  Checked on the merge alone (hypothesis: random lines, ties, clocks stepping back,
lines without events, random batch cuts, bad lines), on synthetic tardis captures through the
readers and ``open_program_input`` (hypothesis), and on real captures (Kraken with a copy of the
Coinbase capture shifted in time so the two interleave; two Binance captures of one symbol are
refused).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddms.cli import main
from ddms.compiler import compile_sql
from ddms.errors import DdmsError, InputError, ProgramError, ReplayError
from ddms.io.events import EventBatch
from ddms.io.inputs import open_program_input
from ddms.io.merge import TimedInput, merge_by_receive_time
from ddms.io.sources import open_source
from ddms.io.symbols import symbol_name

VENUES = SHARED / "data" / "venues"
BINANCE = SHARED / "data" / "binance"
SYMBOL_SQL = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'x.csv' LINE DELIMITED orderbook (book := 'bids');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'x.csv' LINE DELIMITED orderbook (book := 'asks');
SELECT symbol, MAX(price) AS best_bid FROM bids GROUP BY symbol;
"""


@pytest.fixture(scope="module")
def symbol_program():
    return compile_sql(SYMBOL_SQL).program


# -- the oracle ------------------------------------------------------------------------------------
def input_lines(batches) -> list[tuple[int, list[tuple]]]:
    """[(running-max receive key, [(rel, sign, cols..., recv) of the line's events])] of one input."""
    lines: dict[int, list] = {}
    span = None
    for b in batches:
        span = (b.first_line if span is None else span[0], b.last_line)
        for i in range(len(b)):
            lines.setdefault(int(b.line[i]), []).append(
                (int(b.rel[i]), int(b.sign[i]), *b.cols[i].tolist(), int(b.recv[i])))
    out, hi = [], np.iinfo(np.int64).min
    for ln in range(span[0], span[1] + 1) if span else ():
        ev = lines.get(ln, [])
        hi = max([hi] + [e[-1] for e in ev])
        out.append((hi, ev))
    return out


def expected_lines(per_input: list[list[tuple[int, list]]], width: int) -> list[list[tuple]]:
    """Lines sorted by (key, input, position); events padded to ``width`` columns."""
    rows = [(key, k, pos, ev) for k, lines in enumerate(per_input) for pos, (key, ev) in enumerate(lines)]
    rows.sort(key=lambda r: r[:3])
    pad = [[(e[0], e[1], *e[2:-1], *([0.0] * (width - (len(e) - 3))), e[-1]) for e in r[3]] for r in rows]
    return pad


def merged_lines(batches) -> list[list[tuple]]:
    out: list[list[tuple]] = []
    expect_first = None
    for b in batches:
        if expect_first is not None:
            assert b.first_line == expect_first          # consecutive spans
        expect_first = b.last_line + 1
        assert np.all(np.diff(b.line) >= 0)
        for ln in range(b.first_line, b.last_line + 1):
            m = b.line == ln
            out.append([(int(b.rel[i]), int(b.sign[i]), *b.cols[i].tolist(), int(b.recv[i]))
                        for i in np.flatnonzero(m)])
    return out


# -- the merge alone -------------------------------------------------------------------------------
line_st = st.tuples(st.integers(0, 3), st.integers(0, 40), st.booleans())   # events, ts, clock step back


@st.composite
def inputs_st(draw):
    n_inputs = draw(st.integers(1, 4))
    out = []
    for _ in range(n_inputs):
        lines = draw(st.lists(line_st, max_size=25))
        cuts = draw(st.lists(st.integers(0, max(len(lines), 1)), max_size=4))
        out.append((lines, sorted(set(cuts))))
    return out


def batches_of(k: int, lines, cuts, width: int = 5) -> list[EventBatch]:
    """The lines as batches cut at ``cuts`` (line counts); events carry (k, line, j) in cols."""
    ts, rows = 0, []
    for n, (events, t, back) in enumerate(lines, 1):
        ts = max(0, ts - t) if back else ts + t
        rows += [(n, j, ts) for j in range(events)]
    out, first = [], 1
    for cut in [c for c in cuts if 0 < c < len(lines)] + [len(lines)]:
        sel = [r for r in rows if first <= r[0] <= cut]
        cols = np.array([[k, r[0], r[1], 1.0, 2.0][:width] for r in sel], float).reshape(len(sel), width)
        out.append(EventBatch(np.array([r[1] % 2 for r in sel], np.int8), np.ones(len(sel), np.int8), cols,
                              np.array([r[0] for r in sel], np.int64), first, cut,
                              recv=np.array([r[2] for r in sel], np.int64)))
        first = cut + 1
    return out


@settings(max_examples=300, deadline=None)
@given(inputs_st())
def test_merge_equals_a_sort_by_receive_time_input_position(spec):
    per_input = [batches_of(k, lines, cuts) for k, (lines, cuts) in enumerate(spec)]
    want = expected_lines([input_lines(bs) for bs in per_input], 5)
    inputs = [TimedInput(iter(bs), f"in{k}") for k, bs in enumerate(per_input)]
    got = merged_lines(merge_by_receive_time(inputs, width=5, offset=7))
    assert got == want
    for inp in inputs:
        inp._check()


def test_merge_numbers_lines_after_offset_and_shifts_relations():
    a = batches_of(0, [(1, 5, False), (2, 5, False)], [])
    b = batches_of(1, [(1, 7, False)], [])
    out = list(merge_by_receive_time([TimedInput(iter(a), "a"), TimedInput(iter(b), "b", base=2)], width=5,
                                     offset=10))
    assert out[0].first_line == 11 and out[-1].last_line == 13
    lines = merged_lines(out)
    assert [ev[0][2] for ev in lines] == [0.0, 1.0, 0.0]          # a@5, b@7, a@10
    assert {ev[0][0] for ev in lines if ev[0][2] == 1.0} == {2}    # b's relation 0 is merged relation 2


def test_a_bad_line_stops_the_merge_where_it_would_be_merged():
    """An input stopping at a bad line (strict reader): every line keyed at or before it (its
    predecessor's key) is merged, then the batch carrying the error, then the error."""
    err = InputError("bad", "a.csv", 3)
    a = batches_of(0, [(1, 10, False), (1, 10, False)], [])          # keys 10, 20, then the bad line
    a = [EventBatch(*[getattr(a[0], f) for f in ("rel", "sign", "cols", "line", "first_line", "last_line")],
                    error=err, recv=a[0].recv)]
    b = batches_of(1, [(1, 5, False), (1, 15, False), (1, 5, False)], [])   # keys 5, 20, 25
    seen = []
    with pytest.raises(InputError, match="bad"):
        for batch in merge_by_receive_time([TimedInput(iter(a), "a"), TimedInput(iter(b), "b")], width=5):
            seen.append(batch)
    keys = [ev[0][-1] for ev in merged_lines(seen)]
    # the bad line sorts as (20, input a): b's line at 20 (a later input) and at 25 come after it
    assert keys == [5, 10, 20]
    assert seen[-1].error is err


def test_a_batch_without_receive_times_is_refused_naming_the_input():
    b = batches_of(0, [(1, 1, False)], [])[0]
    b = EventBatch(b.rel, b.sign, b.cols, b.line, b.first_line, b.last_line)
    with pytest.raises(ReplayError, match="x.csv.*no receive timestamps"):
        list(merge_by_receive_time([TimedInput(iter([b]), "x.csv"), TimedInput(iter([]), "y")], width=5))


# -- synthetic captures through the readers ----------------------------------------------------------
HEADER = "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n"


@st.composite
def tardis_files(draw):
    """2-3 tardis files, each with its own symbols, messages at interleaving local timestamps
    (ties across files likely)."""
    files = []
    for k in range(draw(st.integers(2, 3))):
        syms = [f"S{k}X{j}" for j in range(draw(st.integers(1, 2)))]
        rows, ts, started = [], 1_000_000, set()
        for _ in range(draw(st.integers(1, 12))):
            ts += draw(st.sampled_from([0, 1000, 2000, 5000]))
            sym = draw(st.sampled_from(syms))
            snap = sym not in started
            started.add(sym)
            for _ in range(draw(st.integers(1, 3))):
                side = draw(st.sampled_from(["bid", "ask"]))
                px = draw(st.integers(1, 5)) + (100 if side == "ask" else 0)
                amt = draw(st.sampled_from(["0", "1.5", "2"])) if not snap else "1"
                rows.append(f"ex,{sym},{ts},{ts},{'true' if snap else 'false'},{side},{px},{amt}")
            ts += 1 if draw(st.booleans()) else 0      # two messages of one symbol need distinct times
        files.append(rows)
    return files


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tardis_files())
def test_several_captures_merge_as_the_sort_of_their_streams(tmp_path_factory, symbol_program, files):
    folder = tmp_path_factory.mktemp("tardis")
    paths = []
    for k, rows in enumerate(files):
        p = folder / f"f{k}.csv"
        p.write_text(HEADER + "\n".join(rows) + "\n")
        paths.append(p)
    per_input = [input_lines(open_source(p, symbols=True).batches()) for p in paths]
    want = expected_lines(per_input, 6)
    pi = open_program_input(symbol_program, folder, data=paths)
    assert pi.merged and pi.width == 6
    got = merged_lines(pi.batches(lambda p: iter([p.read_bytes()])))
    assert got == want
    assert sum(len(ev) for ev in got) == sum(len(ev) for lines in per_input for _, ev in lines)


# -- real captures -----------------------------------------------------------------------------------
def _shifted_copy(src: Path, dst: Path, shift: float) -> None:
    """``src`` (a cryptofeed capture) with every receive time moved by ``shift`` seconds."""
    out = []
    for raw in src.read_bytes().split(b"\n"):
        head, sep, rest = raw.partition(b": ")
        words = head.split(b" ")
        try:
            words[-1] = f"{float(words[-1]) + shift:.7f}".encode()
        except ValueError:
            out.append(raw)
            continue
        out.append(b" ".join(words) + sep + rest)
    dst.write_bytes(b"\n".join(out))


def test_real_captures_interleave_by_receive_time(tmp_path, symbol_program):
    kraken, coinbase = VENUES / "KRAKEN.ws.50.0", VENUES / "COINBASE.ws.28.0"
    if not (kraken.exists() and coinbase.exists()):
        pytest.skip("../shared/data/venues not present")
    shifted = tmp_path / "COINBASE.ws.28.0"
    # Coinbase's session recorded 316 s before Kraken's: shifted, the two 30 s sessions overlap by half
    _shifted_copy(coinbase, shifted, 1618678132.8 - 1618677817.1 + 15)
    paths = [kraken, shifted]
    per_input = [input_lines(open_source(p, symbols=True).batches()) for p in paths]
    want = expected_lines(per_input, 6)
    pi = open_program_input(symbol_program, tmp_path, data=paths)
    got = merged_lines(pi.batches(lambda p: iter([p.read_bytes()])))
    assert got == want
    # really interleaved: the venues alternate many times
    venue = [int(ev[0][-2] in {r[-2] for _, evs in per_input[1] for r in evs}) for ev in got if ev]
    assert sum(a != b for a, b in zip(venue, venue[1:], strict=False)) > 100
    assert len(got) == len(per_input[0]) + len(per_input[1])


def test_one_symbol_in_two_captures_is_refused(symbol_program, tmp_path):
    spot, usdm = BINANCE / "spot_btcusdt_20240808.gz", BINANCE / "usdm_btcusdt_20240808.gz"
    if not (spot.exists() and usdm.exists()):
        pytest.skip("../shared/data/binance not present")
    pi = open_program_input(symbol_program, tmp_path, data=[spot, usdm])
    with pytest.raises(ReplayError,
                       match=r"symbol BTCUSDT is also in .*(spot|usdm)_btcusdt.*one book per symbol.*FILE#PREFIX\*"):
        for _ in pi.batches(lambda p: iter([p.read_bytes()])):
            pass


def test_one_symbol_in_two_captures_merges_under_prefixes(symbol_program, tmp_path):
    """FILE#PREFIX* names every symbol of a file PREFIX + its name: Binance spot and USD-M
    BTCUSDT become two books (SPOT:BTCUSDT, USDM:BTCUSDT) merged by receive time, each row as
    its file gives it apart from the symbol; the refusal above says how."""
    spot, usdm = BINANCE / "spot_btcusdt_20240808.gz", BINANCE / "usdm_btcusdt_20240808.gz"
    if not (spot.exists() and usdm.exists()):
        pytest.skip("../shared/data/binance not present")
    named = [f"{spot}#SPOT:*", f"{usdm}#USDM:*"]
    plain = [input_lines(open_source(p, symbols=True).batches()) for p in (spot, usdm)]
    per_input = [input_lines(open_source(p, symbols=True).batches()) for p in named]
    for lines, ref, prefix in zip(per_input, plain, ("SPOT:", "USDM:"), strict=True):
        assert [k for k, _ in lines] == [k for k, _ in ref]
        for (_, ev), (_, ev0) in zip(lines, ref, strict=True):
            assert [e[:-2] + e[-1:] for e in ev] == [e[:-2] + e[-1:] for e in ev0]
            assert all(symbol_name(e[-2]) == prefix + symbol_name(e0[-2]) for e, e0 in zip(ev, ev0, strict=True))
    pi = open_program_input(symbol_program, tmp_path, data=[Path(p) for p in named])
    got = merged_lines(pi.batches(lambda p: iter([p.read_bytes()])))
    assert got == expected_lines(per_input, 6)
    assert {symbol_name(e[-2]) for ev in got for e in ev} == {"SPOT:BTCUSDT", "USDM:BTCUSDT"}
    with pytest.raises(ReplayError, match="one book: choose one symbol with FILE#SYMBOL"):
        list(open_source(named[0]).batches())
    with pytest.raises(ReplayError, match="a symbol prefix is non-empty"):
        open_source(f"{spot}#*")


# -- the commands ------------------------------------------------------------------------------------
def _tardis(path: Path, sym: str, t0: int) -> Path:
    path.write_text(HEADER + f"ex,{sym},{t0},{t0},true,bid,1,1\nex,{sym},{t0},{t0},true,ask,2,1\n"
                    f"ex,{sym},{t0 + 10},{t0 + 10},false,bid,1.5,1\n")
    return path


def test_run_refuses_several_files_without_receive_times(tmp_path, capsys):
    sql = tmp_path / "v.sql"
    sql.write_text(SYMBOL_SQL)
    csv = tmp_path / "book.csv"
    csv.write_text("1,1,B,10,100\n")
    cap = _tardis(tmp_path / "a.csv", "AAA", 5)
    assert main(["run", str(sql), "--data", str(cap), "--data", str(csv)]) == 2
    err = capsys.readouterr().err
    assert "book.csv" in err and "no receive timestamps" in err and "Traceback" not in err


def test_the_same_file_twice_is_refused(tmp_path, symbol_program):
    a = _tardis(tmp_path / "a.csv", "AAA", 5)
    with pytest.raises(DdmsError, match="given twice"):
        open_program_input(symbol_program, tmp_path, data=[a, tmp_path / "." / "a.csv"])


def test_run_refuses_several_files_for_streams_without_symbols(tmp_path, capsys):
    sql = tmp_path / "v.sql"
    sql.write_text(SYMBOL_SQL.replace(", symbol VARCHAR", "").replace("symbol, ", "").replace(" GROUP BY symbol", ""))
    a, b = _tardis(tmp_path / "a.csv", "AAA", 5), _tardis(tmp_path / "b.csv", "BBB", 7)
    assert main(["run", str(sql), "--data", str(a), "--data", str(b)]) == 2
    err = capsys.readouterr().err
    assert "need the symbol column" in err
    with pytest.raises(ProgramError):
        open_program_input(compile_sql(sql.read_text()).program, tmp_path, data=[a, b])


def test_convert_merges_captures_by_receive_time(tmp_path, capsys):
    from ddms.io.columnar import read_parquet
    from replay.convert_cli import main as convert_main
    a, b = _tardis(tmp_path / "a.csv", "AAA", 5), _tardis(tmp_path / "b.csv", "BBB", 7)
    out = tmp_path / "m.parquet"
    assert convert_main([str(a), str(b), "--out", str(out)]) == 0
    batches = list(read_parquet(out, symbols=True))
    lines = np.concatenate([x.line for x in batches])
    syms = np.concatenate([x.cols[:, 5] for x in batches])
    # a@5 (snapshot), b@7 (snapshot), a@15, b@17 (each update re-bases its book's ids: a finer price)
    assert [symbol_name(syms[lines == n][0]) for n in (1, 2, 3, 4)] == ["AAA", "BBB", "AAA", "BBB"]
    assert list(lines) == sorted(lines)
    # with an order-book CSV among them: concatenated, and said so
    csv = tmp_path / "book.csv"
    csv.write_text("1,1,B,10,100\n")
    assert convert_main([str(csv), f"{a}#AAA", "--out", str(tmp_path / "c.parquet")]) == 0
    assert "concatenated in the order given" in capsys.readouterr().err


def test_cli_data_option_is_repeatable():
    from ddms.cli import build_parser
    args = build_parser(all_commands=False).parse_args(["run", "p.sql", "--data", "a", "--data", "b"])
    assert args.data == ["a", "b"]
    assert json.dumps(args.data)


def test_binance_capture_and_cryptofeed_capture_merge(tmp_path, symbol_program):
    """Two formats at once (an hftbacktest-recorder capture and a cryptofeed capture): the
    Binance rows carry the receive time of the message that applied them (one per line, taken
    from the capture's own lines), and the merge is the sort."""
    import gzip
    spot, kraken = BINANCE / "spot_btcusdt_20240808.gz", VENUES / "KRAKEN.ws.50.0"
    if not (spot.exists() and kraken.exists()):
        pytest.skip("../shared/data not present")
    with gzip.open(spot, "rb") as f:
        stamps = {int(line.split(b" ", 1)[0]) for line in f if line.strip()}
    batches = list(open_source(spot, symbols=True).batches())
    recv = np.concatenate([b.recv for b in batches])
    line = np.concatenate([b.line for b in batches])
    assert set(np.unique(recv).tolist()) <= stamps
    assert np.all(np.diff(recv) >= 0)                      # the capture's messages are in receive order
    for ln in np.unique(line)[:2000]:
        assert len(set(recv[line == ln].tolist())) == 1    # one receive time per atomic update
    per_input = [input_lines(batches), input_lines(open_source(kraken, symbols=True).batches())]
    pi = open_program_input(symbol_program, tmp_path, data=[spot, kraken])
    got = merged_lines(pi.batches(lambda p: iter([p.read_bytes()])))
    assert got == expected_lines(per_input, 6)
    assert got[0][0][-1] < 1.7e18 < got[-1][0][-1]         # Kraken's 2021 session first, Binance's 2024 after
