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
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.common import Row, Shared, Skip, interleaved

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
    if path.suffix == ".zst":
        from ddms.io.dbn import MboBook, read_dbn
        book = MboBook(str(path))
        for _ in read_dbn(str(path), book=book):
            pass
        return book.records
    import gzip
    with gzip.open(path, "rb") as f:
        return sum(1 for _ in f)


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


def measure(quick: bool = False) -> list[Row]:
    files = [(name, p) for name, p in (("MBO (CME ESH4 DBN, order level)", MBO),
                                       ("hftbacktest-style L2 (Binance usdm capture)", L2)) if p.exists()]
    if not files:
        raise Skip(f"neither {MBO} nor {L2} found")
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
    return rows


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
