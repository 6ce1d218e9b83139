"""MBO replay in events/s next to an hftbacktest-style L2 replay (issue 22).

Two replays of real files through the same per-symbol view (examples/sql/symbol_best_bid.sql,
``MAX(price) GROUP BY symbol``: a range tree per symbol):

* ``MBO``: the CME ESH4 Databento market-by-order file (../shared/data/mbo) through
  :func:`ddms.io.sources.open_source` (``read_dbn``: order-level rows, one atomic update per
  exchange event, i.e. per F_LAST record);
* ``hftbacktest-style L2``: the Binance USD-M capture (../shared/data/binance, ``<ns> <json>``
  lines) through the same entry point (price-level rows, one atomic update per depth message).

Per file three rates, in *CPU time* of this process (``time.process_time``: a shared 2-core
machine makes wall time meaningless), best of N, the two files taking turns (A, B, A, B): the
reader alone (engine events/s, exchange events/s, input records/s), the engine alone on the
pre-read batches (apply only), and the replay end to end (read + apply in one pass).  Engine
construction is untimed; the view is loaded from numba's cache (compiled on first use).

Then :func:`read_dbn` alone in records/s, its numba replay (the default) against the reference
Python replay (``MboBook``), on the CME file and on two generated multi-instrument DBN files
(:func:`synthetic_mbo`, written with Databento's encoder into a temporary directory).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.common import Row, Shared, interleaved

SECTION = "mbo"
REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
MBO = SHARED / "data" / "mbo" / "esh4-glbx-mdp3-20231225.mbo.dbn.zst"
L2 = SHARED / "data" / "binance" / "usdm_btcusdt_20240808.gz"
VIEW = REPO / "examples" / "sql" / "symbol_best_bid.sql"


def _read(path: Path) -> tuple[list, int, int]:
    """(batches, engine events, exchange events = atomic lines) of ``path``'s replay source."""
    from ddms.io.sources import open_source
    batches = list(open_source(str(path), symbols=True))
    events = sum(len(b) for b in batches)
    lines = batches[-1].last_line if batches else 0
    return batches, events, lines


def _records(path: Path) -> int:
    """Input records: DBN MBO records, or capture lines (every message, depth or not)."""
    if ".dbn" in path.name:
        from ddms.io.dbn import MboReplay, read_dbn
        book = MboReplay(str(path))
        for _ in read_dbn(str(path), book=book):
            pass
        return book.records
    import gzip
    with gzip.open(path, "rb") as f:
        return sum(1 for _ in f)


def synthetic_mbo(path: Path, n: int = 400_000, instruments: int = 8, seed: int = 1, zstd: bool = True) -> int:
    """Write a DBN MBO file of ``instruments`` interleaved instruments with Databento's own
    encoder (``databento_dbn``: metadata, ``SymbolMappingMsg`` records naming the instruments as a
    live session does, ``MBOMsg`` records; zstd by its ``Transcoder``): per instrument a
    500-order snapshot, then ``n`` records in events of 1-3 records (adds 40%, cancels 30% of
    which a third partial, modifies of price and size 20%, trade + fill pairs 10%), the event's
    instrument drawn at random.  Returns the number of MBO records.  Cost: ~3 us a record."""
    import io
    import random

    import databento_dbn as dbn
    rng = random.Random(seed)
    meta = dbn.Metadata(dataset="GLBX.MDP3", start=0, stype_in=dbn.SType.RAW_SYMBOL,
                        stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema("mbo"))
    out = [meta.encode()]
    iids = list(range(1001, 1001 + instruments))
    for i in iids:
        out.append(bytes(dbn.SymbolMappingMsg(
            publisher_id=1, instrument_id=i, ts_event=0, stype_in=dbn.SType.RAW_SYMBOL, stype_in_symbol=f"SYN{i}",
            stype_out=dbn.SType.INSTRUMENT_ID, stype_out_symbol=str(i), start_ts=0, end_ts=0)))
    ts = 1_700_000_000_000_000_000
    tick = 250_000_000
    live: dict[int, dict[int, tuple[str, int, int]]] = {i: {} for i in iids}
    mid = {i: 4_000_000_000_000 + 10_000 * tick * k for k, i in enumerate(iids)}
    next_id = 1
    recs = 0
    action, side = {c: dbn.Action(c) for c in "ACMTF"}, {c: dbn.Side(c) for c in "BAN"}

    def msg(i: int, a: str, sd: str, px: int, q: int, oid: int, flags: int) -> None:
        nonlocal recs
        out.append(bytes(dbn.MBOMsg(publisher_id=1, instrument_id=i, ts_event=ts, order_id=oid, price=px, size=q,
                                    action=action[a], side=side[sd], ts_recv=ts + 1000, flags=flags)))
        recs += 1

    def price(i: int, sd: str) -> int:
        k = rng.randrange(1, 40)
        return mid[i] - k * tick if sd == "B" else mid[i] + k * tick

    for i in iids:
        for j in range(500):
            sd = rng.choice("BA")
            px, q = price(i, sd), rng.randrange(1, 20)
            live[i][next_id] = (sd, px, q)
            msg(i, "A", sd, px, q, next_id, 0x20 | (0x80 if j == 499 else 0))
            next_id += 1
    while recs < n + 500 * instruments:
        i = rng.choice(iids)
        book = live[i]
        ts += rng.randrange(1, 100_000)
        k = rng.randrange(1, 4)
        for j in range(k):
            f = 0x80 if j == k - 1 else 0
            op = rng.random()
            if op < 0.4 or len(book) < 50:
                sd = rng.choice("BA")
                px, q = price(i, sd), rng.randrange(1, 20)
                book[next_id] = (sd, px, q)
                msg(i, "A", sd, px, q, next_id, f)
                next_id += 1
            elif op < 0.7:
                oid = rng.choice(list(book)) if len(book) < 64 else next(iter(book)) + rng.randrange(0, 30)
                if oid not in book:
                    oid = next(iter(book))
                sd, px, q = book[oid]
                c = q if rng.random() < 0.67 or q == 1 else rng.randrange(1, q)
                msg(i, "C", sd, px, c, oid, f)
                if c == q:
                    del book[oid]
                else:
                    book[oid] = (sd, px, q - c)
            elif op < 0.9:
                oid = next(reversed(book))
                sd, px, _ = book.pop(oid)
                px2, q2 = px + rng.choice((-tick, 0, tick)), rng.randrange(1, 20)
                if (px2 >= mid[i]) if sd == "B" else (px2 <= mid[i]):    # a book that never crosses
                    px2 = px
                book[oid] = (sd, px2, q2)
                msg(i, "M", sd, px2, q2, oid, f)
            else:
                msg(i, "T", "B", mid[i], 1, 0, 0)
                msg(i, "F", "N", mid[i], 1, 0, f)
    data = b"".join(out)
    if zstd:
        buf = io.BytesIO()
        tr = dbn.Transcoder(buf, dbn.Encoding.DBN, dbn.Compression.ZSTD)
        tr.write(data)
        tr.finish()
        data = buf.getvalue()
    path.write_bytes(data)
    return recs


def _engine():
    from ddms.compiler import compile_sql_file
    from ddms.runtime.engine import Engine
    return Engine(compile_sql_file(VIEW).program)


def _apply(engine, batches: list) -> None:
    relmap = engine.relmap(("bids", "asks"))
    for b in batches:
        engine.apply(b, relmap)


def _replay(engine, path: Path) -> None:
    """Read and apply in one pass (end to end)."""
    from ddms.io.sources import open_source
    relmap = engine.relmap(("bids", "asks"))
    for b in open_source(str(path), symbols=True):
        engine.apply(b, relmap)


def _read_dbn(path: Path, reference: bool) -> int:
    """Read a DBN file with :func:`read_dbn` (the numba replay, or the reference ``MboBook``);
    returns the records."""
    from ddms.io.dbn import MboBook, MboReplay, read_dbn
    book = MboBook(str(path)) if reference else MboReplay(str(path))
    for _ in read_dbn(str(path), book=book):
        pass
    return book.records


def _spread(t) -> str:
    ts = sorted(t.times)
    return f"median {ts[len(ts) // 2] * 1e3:.1f} ms, range {ts[0] * 1e3:.1f}-{ts[-1] * 1e3:.1f} ms over {len(ts)}"


def measure_readers(tmp: Path, quick: bool = False) -> list[Row]:
    """``read_dbn`` alone, records/s (CPU time), the numba replay (:class:`~ddms.io.dbn.MboReplay`,
    the default) and the reference Python replay (``MboBook``) taking turns, on the CME file and
    two generated multi-instrument files (:func:`synthetic_mbo`: 8 instruments zstd-compressed,
    100 instruments uncompressed)."""
    n = 100_000 if quick else 200_000
    files = [(f"CME ESH4 {MBO.name}", MBO)] if MBO.exists() else []
    for k, z in ((8, True), (100, False)):
        p = tmp / f"synthetic_{k}.mbo.dbn{'.zst' if z else ''}"
        synthetic_mbo(p, n, k, zstd=z)
        files.append((f"generated, {k} interleaved instruments{' (zstd)' if z else ''}", p))
    fns = [lambda p=p, ref=ref: _read_dbn(p, ref) for _, p in files for ref in (False, True)]
    timings = interleaved(fns, 3 if quick else 5, clock=time.process_time)
    rows = []
    for j, (name, _) in enumerate(files):
        new, ref = timings[2 * j], timings[2 * j + 1]
        recs = new.result
        rows.append(Row(SECTION, f"read_dbn alone, {name}: {recs:,} records, numba replay", recs / new.best,
                        "records/s", ">= 1M", f"{'OK' if recs / new.best >= 1e6 else 'below'}; CPU, best; "
                        f"{_spread(new)}"))
        rows.append(Row(SECTION, "  same file, reference Python replay (MboBook)", recs / ref.best, "records/s", "",
                        f"x{ref.best / new.best:.1f} slower; {_spread(ref)}"))
    return rows


def measure(quick: bool = False) -> list[Row]:
    import tempfile
    files = [(name, p) for name, p in (("MBO (CME ESH4 DBN, order level)", MBO),
                                       ("hftbacktest-style L2 (Binance usdm capture)", L2)) if p.exists()]
    with tempfile.TemporaryDirectory(prefix="ddms-bench-mbo-") as tmp:
        reader_rows = measure_readers(Path(tmp), quick)
    if not files:
        return reader_rows
    reps = 3 if quick else 7
    _engine()                             # compiles or loads the view once
    info = {}
    for name, p in files:                 # warm-up: kernels, page cache; the counts
        batches, events, lines = _read(p)
        info[name] = (batches, events, lines, _records(p))
    fns: list = []
    setup: list = []
    keys: list[tuple[str, str]] = []
    for name, p in files:                 # per file: read, apply (fresh engine), end to end (fresh engine)
        fns += [lambda p=p: _read(p), lambda e, b=info[name][0]: _apply(e, b), lambda e, p=p: _replay(e, p)]
        setup += [None, _engine, _engine]   # engine construction untimed
        keys += [(name, "read"), (name, "apply"), (name, "end")]
    timings = interleaved(fns, reps, clock=time.process_time, setup=setup, warm_up=False)
    best = {k: t.best for k, t in zip(keys, timings, strict=True)}
    rows = []
    for name, _ in files:
        _, events, lines, records = info[name]
        r, a, e = best[name, "read"], best[name, "apply"], best[name, "end"]
        rows.append(Row(SECTION, f"{name}: replay end to end, read + apply ({VIEW.name})", events / e,
                        "events/s", "", f"{lines / e:,.0f} exchange events/s; CPU time, best of {reps}, interleaved"))
        rows.append(Row(SECTION, f"  same file: reader alone ({records:,} records, {lines:,} exchange events, "
                                 f"{events:,} engine events)", events / r, "events/s", "",
                        f"{records / r:,.0f} records/s, {lines / r:,.0f} exchange events/s"))
        rows.append(Row(SECTION, "  same file: apply only (pre-read batches)", events / a, "events/s", "",
                        f"{lines / a:,.0f} exchange events/s"))
    return rows + reader_rows


def run(shared: Shared) -> list[Row]:
    return measure(quick=shared.sizes.quick)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.mbo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 repetitions instead of 7")
    args = ap.parse_args(argv)
    for row in measure(quick=args.quick):
        value = f"{row.value:,.0f} {row.unit}" if row.value is not None else "-"
        print(f"{row.case:<95} {value:>22}  {row.verdict}")


if __name__ == "__main__":
    main()
