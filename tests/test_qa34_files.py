"""The qa34 outside check's inputs: captures written from scratch by the venues' documented rules
(``qa34_captures``: Kraken ``book-25`` of unseen pairs, Coinbase ``level2`` and OKX ``books`` of
unseen instruments, a bitmex tardis CSV of two symbols, Databento MBO files of three instruments,
historical and live), run through the CLI as a user runs it
(``ddms.cli.main`` in-process: an escaping exception fails the test) and compared with the
generator's own replay; and mutants of every reader's input (BOM, CRLF, blank and 3 MB lines,
swapped lines, numbers spelled as Python reads them but no venue writes them: ``1_000.5``,
Arabic-Indic digits, ``0x1F``, ``nan``, ``1e400``, quoted/unquoted swaps), which end in exit 0 or
one located ``ddms: error:`` line, never a traceback.

Regression found: a live session's DBN (``SymbolMappingMsg`` records, no mappings in the
metadata) named its instruments by id ("101"), so ``FILE#NQM5`` found nothing."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import random
import re
import shutil
import traceback

import pytest
from conftest import shared_file
from qa34_captures import Final, coinbase_capture, dbn_capture, kraken_capture, okx_capture, tardis_capture

from ddms.cli import main

VIEWS = """
CREATE STREAM bids(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'x.csv' LINE DELIMITED orderbook (book := 'bids', brokers := '10', deterministic := 'yes');
CREATE STREAM asks(t FLOAT, id INT, broker_id INT, volume FLOAT, price FLOAT, symbol VARCHAR)
  FROM FILE 'x.csv' LINE DELIMITED orderbook (book := 'asks', brokers := '10', deterministic := 'yes');
CREATE VIEW SB AS SELECT symbol, MAX(price) AS best_bid, SUM(volume) AS bid_vol, COUNT(*) AS n_bids FROM bids
  GROUP BY symbol;
CREATE VIEW SA AS SELECT symbol, MIN(price) AS best_ask, SUM(volume) AS ask_vol FROM asks GROUP BY symbol;
"""

CAPTURES = {
    "kraken": ("KRAKEN.ws.7.0", lambda p: kraken_capture(p, 3, 600)),
    "coinbase": ("COINBASE.ws.3.0", lambda p: coinbase_capture(p, 9, 600)),
    "okx": ("OKX.ws.5.0", lambda p: okx_capture(p, 13, 600)),
    "tardis": ("bitmex_incremental_book_L2_2024-01-01.csv.gz", lambda p: tardis_capture(p, 5, 600)),
    "dbn": ("multi.dbn", lambda p: dbn_capture(p, 7, 800)),
    "dbn_live": ("live.dbn", lambda p: dbn_capture(p, 11, 800, live=True)),
}


def _run(*argv: str) -> tuple[int | str, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    except Exception:   # noqa: BLE001 - the point: an escaping exception is reported, not raised
        return "exception", out.getvalue(), err.getvalue() + traceback.format_exc()
    return rc, out.getvalue(), err.getvalue()


def _views(stdout: str) -> dict[str, Final]:
    views = json.loads(stdout.strip().splitlines()[-1])["views"]
    sa = {r[0]: r[1:] for r in views["SA"]}
    out = {}
    for sym in {r[0] for r in views["SB"]} | set(sa):
        b = next((r[1:] for r in views["SB"] if r[0] == sym), [None, 0.0, 0])
        a = sa.get(sym, [None, 0.0])
        out[sym] = Final(b[0], b[1], b[2], a[0], a[1])
    return out


def _same(got: dict[str, Final], want: dict[str, Final]) -> bool:
    def eq(x, y) -> bool:
        return (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y, rel_tol=1e-9,
                                                                                                abs_tol=1e-9))
    want = {s: f for s, f in want.items() if f.n_bids or f.ask_vol}   # a symbol with an empty book has no rows
    return got.keys() == want.keys() and all(
        all(eq(getattr(got[s], k), getattr(want[s], k)) for k in Final.__dataclass_fields__) for s in want)


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    p = tmp_path_factory.mktemp("views") / "sym.sql"
    p.write_text(VIEWS)
    return str(p)


@pytest.mark.parametrize("kind", sorted(CAPTURES))
def test_unseen_capture_equals_its_replay(tmp_path, views, kind: str) -> None:
    """Each symbol's book through ``ddms run`` and through ``ddms convert`` + ``run`` on the
    Parquet equals the generator's replay; one symbol alone as ``FILE#SYMBOL`` too."""
    name, make = CAPTURES[kind]
    path = tmp_path / name
    want = make(path)
    rc, out, err = _run("run", views, "--data", str(path), "--json")
    assert rc == 0, err
    got = _views(out)
    assert _same(got, want), (got, want)
    rc, _, err = _run("convert", str(path), "--out", str(tmp_path / "x.parquet"))
    assert rc == 0, err
    rc, out, err = _run("run", views, "--data", str(tmp_path / "x.parquet"), "--json")
    assert rc == 0 and _same(_views(out), want), err
    sym = sorted(got)[-1]   # "ZN U5" for the DBN files: a name with a space
    rc, out, err = _run("run", views, "--data", f"{path}#{sym}", "--json")
    assert rc == 0 and _same(_views(out), {sym: want[sym]}), err


# -- mutants ------------------------------------------------------------------------------------

_NUMBER = re.compile(rb'"-?\d+\.\d+"|(?<=,)-?\d+\.\d+(?=[,\n])')
_SPELLINGS = {"retype": None, "underscore": b"1_000.5", "arabic_digits": "١٢٣".encode(), "hex": b"0x1F",
              "nan": b"nan", "huge": b"1e400", "zero": b"0", "negative": None}
KINDS = ("bom", "crlf", "blank_lines", "long_line", "swap_lines", "empty", "header_only", *_SPELLINGS)


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    """``data`` with one mutation of ``kind`` (a number's spelling: one number, picked at random)."""
    lines = data.split(b"\n")
    i = rng.randrange(1, max(2, len(lines) - 1))
    if kind in ("bom", "crlf", "empty", "header_only"):
        return {"bom": b"\xef\xbb\xbf" + data, "crlf": data.replace(b"\n", b"\r\n"), "empty": b"",
                "header_only": lines[0] + b"\n"}[kind]
    if kind in ("blank_lines", "long_line", "swap_lines"):
        if kind == "blank_lines":
            lines[i:i] = [b"", b"   ", b"\t"]
        elif kind == "long_line":
            lines.insert(i, b"1" * (3 << 20))
        else:
            lines[i - 1], lines[i] = lines[i], lines[i - 1]
        return b"\n".join(lines)
    found = list(_NUMBER.finditer(data))
    if not found:
        return data[: len(data) // 2]
    m = rng.choice(found)
    s, quoted = m.group(), m.group().startswith(b'"')
    if kind == "retype":
        new = s.strip(b'"') if quoted else b'"' + s + b'"'
    elif kind == "negative":
        new = b'"-' + s.strip(b'"').lstrip(b"-") + b'"' if quoted else b"-" + s.lstrip(b"-")
    else:
        new = b'"' + _SPELLINGS[kind] + b'"' if quoted else _SPELLINGS[kind]
    return data[: m.start()] + new + data[m.end():]


def _head(path, n: int) -> bytes:
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        return b"".join(line for _, line in zip(range(n), f, strict=False))


_REAL = {   # file name -> (path parts under ../shared/data, lines kept, gzip, REST file beside it)
    "finance.csv": (("orderbook", "tiny", "finance.csv"), 100, False, None),
    "usdm.gz": (("binance", "usdm_btcusdt_20240808.gz"), 300, True, None),
    "OKX.ws.1.0": (("venues", "OKX.ws.1.0"), 100, False, None),
    "COINBASE.ws.28.0": (("venues", "COINBASE.ws.28.0"), 150, False, None),
    "BINANCE.ws.1.0": (("venues", "BINANCE.ws.1.0"), 120, False, "BINANCE.http.0.0"),
}
SOURCES = sorted([*_REAL, *CAPTURES])


def _source(tmp_path, src: str) -> tuple[str, bytes, bool, object]:
    if src in CAPTURES:
        name, make = CAPTURES[src]
        p = tmp_path / "seed" / name
        p.parent.mkdir()
        make(p)
        gz = name.endswith(".gz")
        return name.removesuffix(".gz") if gz else name, _head(p, 200), gz, None
    parts, n, gz, beside = _REAL[src]
    p = shared_file("data", *parts)
    return src, _head(p, n), gz, (p.parent / beside if beside else None)


@pytest.mark.parametrize("src", SOURCES)
def test_reader_mutants_end_in_a_located_error_or_a_run(tmp_path, views, src: str) -> None:
    name, data, gz, beside = _source(tmp_path, src)
    binary = name.endswith(".dbn")
    rng = random.Random(34)
    seen = {0: 0, 2: 0}
    for kind in KINDS:
        if binary and kind not in ("bom", "crlf", "blank_lines", "long_line", "swap_lines", "empty", "header_only"):
            continue
        d = tmp_path / kind
        d.mkdir()
        path = d / (name + ".gz" if gz else name)
        m = mutate(data, kind, rng)
        if gz:
            with gzip.open(path, "wb") as f:
                f.write(m)
        else:
            path.write_bytes(m)
        if beside is not None:
            shutil.copy(beside, d / beside.name)
        for flags in ([], ["--skip-bad"]):
            rc, _, err = _run("run", views, "--data", str(path), "--json", *flags)
            assert rc in (0, 2) and "Traceback" not in err, (kind, flags, err)
            assert rc == 0 or f"ddms: error: {path}" in err, (kind, flags, err)
            seen[rc] += 1
        rc, _, err = _run("convert", str(path), "--out", str(d / "x.parquet"))
        assert rc in (0, 2) and "Traceback" not in err, (kind, "convert", err)
    assert seen[0] and seen[2], seen
