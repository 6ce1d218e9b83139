"""``ddms convert`` keeps the symbol column of multi-symbol inputs (issue 22 item 2): the Parquet
file has a ``symbol`` string column and lists its symbols in the footer, and reads back with the
same symbol ids; a multi-symbol file is never read back as one mixed book."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_file

from ddms.cli import main
from ddms.errors import ReplayError
from ddms.io.columnar import parquet_info, read_parquet, write_parquet
from ddms.io.events import EventBatch
from ddms.io.sources import open_source
from ddms.io.symbols import symbol_id, with_symbol


def _events(batches) -> tuple[np.ndarray, ...]:
    bs = list(batches)
    return (np.concatenate([b.rel for b in bs]), np.concatenate([b.sign for b in bs]),
            np.concatenate([b.cols for b in bs]), np.concatenate([b.line for b in bs]))


def _same(a, b) -> None:
    for x, y in zip(a, b, strict=True):
        assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True)


def _batches(symbols: list[str]) -> list[EventBatch]:
    """Two batches of lines alternating between ``symbols`` (6 columns)."""
    rng = np.random.default_rng(0)
    out, line = [], 0
    for _ in range(2):
        n = 40
        sids = np.array([symbol_id(symbols[i % len(symbols)]) for i in range(n)], np.float64)
        cols = with_symbol(rng.integers(1, 100, (n, 5)).astype(np.float64), 0)
        cols[:, 5] = sids
        lines = np.arange(line + 1, line + n + 1, dtype=np.int64)
        out.append(EventBatch(rng.integers(0, 2, n).astype(np.int8), np.ones(n, np.int8), cols, lines,
                              line + 1, line + n))
        line += n
    return out


def test_symbol_column_round_trip(tmp_path) -> None:
    names = ["AAA", "B/B", "C-C-SWAP"]
    batches = _batches(names)
    out = tmp_path / "s.parquet"
    info = write_parquet(batches, out, kind="test", name="s", group_events=50)
    assert info.symbols == tuple(names)
    _same(_events(read_parquet(out, symbols=True)), _events(batches))
    with pytest.raises(ReplayError, match="3 symbols"):   # never one book of three instruments
        list(read_parquet(out))
    # FILE#SYMBOL: that symbol's rows alone, without the column (a single-book program) or with it
    want = _events(batches)
    m = want[2][:, 5] == symbol_id("B/B")
    _same(_events(open_source(f"{out}#B/B").batches()), (want[0][m], want[1][m], want[2][m][:, :5], want[3][m]))
    _same(_events(open_source(f"{out}#B/B", symbols=True).batches()), tuple(x[m] for x in want))
    _same(_events(open_source(out, symbols=True).batches()), want)


def test_one_symbol_reads_back_as_one_book_and_unnamed_ids_are_refused(tmp_path) -> None:
    batches = _batches(["ONLY"])
    out = tmp_path / "one.parquet"
    write_parquet(batches, out, kind="test", name="one")
    plain = _events(read_parquet(out))
    assert plain[2].shape[1] == 5
    _same(plain, tuple(x if x.ndim == 1 else x[:, :5] for x in _events(batches)))
    bad = [EventBatch(b.rel, b.sign, np.where(np.arange(6) == 5, 12345.0, b.cols), b.line, b.first_line,
                      b.last_line) for b in batches]
    with pytest.raises(ReplayError, match="no name"):
        write_parquet(bad, tmp_path / "bad.parquet", kind="test", name="bad")
    assert not (tmp_path / "bad.parquet").exists()
    with pytest.raises(ReplayError, match="do not mix"):   # with and without a symbol column
        write_parquet([batches[0], EventBatch(batches[1].rel, batches[1].sign, batches[1].cols[:, :5],
                                              batches[1].line, 41, 80)], tmp_path / "mix.parquet",
                      kind="test", name="mix")
    with pytest.raises(ReplayError, match="no symbol column"):
        no = tmp_path / "no.parquet"
        write_parquet([EventBatch(b.rel, b.sign, b.cols[:, :5], b.line, b.first_line, b.last_line)
                       for b in batches], no, kind="test", name="no")
        list(read_parquet(no, symbols=True))


def test_convert_cli_keeps_the_symbols_of_a_capture(tmp_path, capsys) -> None:
    cap = shared_file("data", "venues", "KRAKEN.ws.50.0")
    out = tmp_path / "kraken.parquet"
    assert main(["convert", str(cap), "--out", str(out)]) == 0, capsys.readouterr().err
    info = parquet_info(out)
    assert info.symbols is not None and len(info.symbols) > 1
    want = _events(open_source(cap, symbols=True).batches())
    _same(_events(read_parquet(out, symbols=True)), want)
    sym = info.symbols[0]
    m = want[2][:, 5] == symbol_id(sym)
    # the same events as the capture's own FILE#SYMBOL (lines keep the whole file's numbers)
    _same(_events(open_source(f"{out}#{sym}").batches())[:3], _events(open_source(f"{cap}#{sym}").batches())[:3])
    assert m.any()
    again = tmp_path / "again.parquet"   # a Parquet file with symbols converts to one with them
    assert main(["convert", str(out), "--out", str(again)]) == 0
    _same(_events(read_parquet(again, symbols=True)), want)
