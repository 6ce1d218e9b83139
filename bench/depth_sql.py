"""Section ``depth_sql``: per-line cost of every cookbook view (``examples/sql``) against book depth.

For each view file, its program alone (compiled from the file) is driven as section 4 drives VWAP
and SOBI (:func:`bench.depth.steady_cost`): a book of N resting orders (N/2 bids, N/2 asks) built
untimed by ``bench.synth.book_stream``, then a steady stream of mixed updates (E / F+B / D+B,
depth constant) timed through ``Engine.apply`` (pre-parsed batches), at N = 1k, 10k, 100k, 1M,
under both price models (distinct prices; tick levels within +-2,000 ticks of a drifting mid).
Each depth is measured ``depth.REPEATS`` times (the depths taking turns) and the best run counts.
What makes the full run (to 1M) feasible: the streams are generated and parsed once per price
model and depth and shared by every view; each program builds each book once, and its later runs
start from a copy of the built state (``checkpoint.dump_state`` / ``load_state``: tens of ms at
1M instead of re-applying a million insertions through the view).
Times are the applying thread's CPU time (``time.thread_time``), not wall time: on a shared machine
with more runnable processes than cores, wall time measures the neighbours (cache and memory
contention still show).

Printed per view and price model: the cost class ``ddms compile`` prints for it, ns/line at each
depth, growth cost(1M)/cost(1k) (target <= 3x for O(1) and O(log n) views), and for a view using
MIN or MAX the ratio of its cost to the *SUM view of the same shape* -- the same file with every
``MIN(``/``MAX(`` written ``SUM(`` (its worst ratio over the depths; target <= 2x).  A SUM twin that
does not compile is reported as such.  ``--quick``: depths 1k..100k, fewer lines, one run each.

The SUM twin of a *top-N* view (a ``ORDER BY k [DESC] .. LIMIT n`` subquery in FROM, or a
``ROW_NUMBER() OVER (ORDER BY k [DESC])`` one filtered by ``rn <= n``): each such subquery over
relation R is replaced by R itself, restricted by a threshold search on the running count in k's
order, ``WHERE n > (SELECT COUNT(*) FROM R q WHERE q.k > a.k)`` (``<`` for ascending): the rows with
fewer than n rows before them.  That is DBToaster's VWAP shape (a SUM over an ordered map of R by k,
its boundary found by a prefix-sum search, O(log n)), over the same relation, key and direction,
so the ratio prices what the top-N cut itself costs: select by rank, and for a top-N of orders
(ties broken by a second key) the per-level trees of that key.  The same view without its LIMIT
would not do: a SUM of everything is one float add per event, whatever the shape.

Run: ``python -m bench --only depth_sql [--quick]``; ``DDMS_BENCH_VIEWS=best_bid,spread`` limits the
views (file stems).  Numba compiles each program (two for a MIN/MAX view) on first use: minutes the
first time, cached after.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import REPO, Row, Shared, Sizes, n_lines, parse_continue, time_apply
from bench.depth import MODELS, REPEATS, label
from bench.synth import book_stream
from ddms.backend.codegen import generate
from ddms.backend.cost import CLASSES, view_costs
from ddms.compiler import compile_sql
from ddms.errors import DdmsError
from ddms.io.orderbook import OrderBookParser
from ddms.m3.ir import Program
from ddms.runtime.checkpoint import dump_state, load_state
from ddms.runtime.engine import Engine

SECTION = "14 depth_sql"
VIEWS_DIR = REPO / "examples" / "sql"
GROWTH_TARGET = 3.0
RATIO_TARGET = 2.0
_EXTREME = re.compile(r"\b(MIN|MAX)\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class ViewCase:
    """One cookbook file: its program, cost class, and the SUM twin of a MIN/MAX view."""

    name: str
    program: Program
    cost: str
    twin: Program | None     # the SUM twin: MIN/MAX -> SUM, top-N -> threshold (None: neither, or no compile)
    twin_note: str = ""


def cost_class(program: Program) -> str:
    """The worst cost class ``ddms compile`` prints for the queries of ``program``."""
    classes = [cls for _, cls, _ in view_costs(program, generate(program).plan)]
    return max(classes, key=CLASSES.index)


_ORDER_LIMIT = re.compile(
    r"\(\s*SELECT\s+(?:[^()]|\([^()]*\))*?\s+FROM\s+(?P<rel>\w+)\s+(?:GROUP\s+BY\s+\w+\s+)?ORDER\s+BY\s+(?P<key>\w+)"
    r"(?:\s+(?P<dir>ASC|DESC))?(?:\s*,\s*\w+(?:\s+(?:ASC|DESC))?)*\s+LIMIT\s+(?P<n>\d+)\s*\)\s*(?P<alias>\w+)",
    re.IGNORECASE)
_ROW_NUMBER = re.compile(
    r"\(\s*SELECT\s+(?:[^()]|\([^()]*\))*?ROW_NUMBER\s*\(\s*\)\s+OVER\s*\(\s*ORDER\s+BY\s+(?P<key>\w+)(?:\s+(?P<dir>ASC|DESC))?"
    r"\s*\)\s+AS\s+(?P<rn>\w+)\s+FROM\s+(?P<rel>\w+)(?:\s+GROUP\s+BY\s+\w+)?\s*\)\s*(?P<alias>\w+)"
    r"\s+WHERE\s+(?P=alias)\.(?P=rn)\s*<=\s*(?P<n>\d+)",
    re.IGNORECASE)


def sum_twin(text: str) -> str | None:
    """``text`` with every ``MIN(`` / ``MAX(`` written ``SUM(``; None if it has neither."""
    return _EXTREME.sub("SUM(", text) if _EXTREME.search(text) else None


def topn_twin(text: str) -> str | None:
    """``text`` with every top-N subquery in FROM replaced by its relation under a threshold search
    on the running count (see the module docstring); None if it has none."""
    def threshold(m: re.Match) -> str:
        rel, key, alias, n = m["rel"], m["key"], m["alias"], m["n"]
        op = ">" if (m["dir"] or "").upper() == "DESC" else "<"
        q = f"{alias}_q"
        return f"{rel} {alias} WHERE {n} > (SELECT COUNT(*) FROM {rel} {q} WHERE {q}.{key} {op} {alias}.{key})"
    out, hits = _ROW_NUMBER.subn(threshold, text)
    out, more = _ORDER_LIMIT.subn(threshold, out)
    return out if hits + more else None


def cases(files: list[Path]) -> list[ViewCase]:
    out = []
    for f in files:
        text = f.read_text()
        prog = compile_sql(text).program
        twin, note = None, ""
        twin_text = sum_twin(text) or topn_twin(text)
        if twin_text is not None:
            try:
                twin = compile_sql(twin_text).program
            except DdmsError as e:   # a SUM twin the compiler refuses: say so, no ratio
                note = f"SUM twin does not compile: {str(e).splitlines()[0]}"
        out.append(ViewCase(f.stem, prog, cost_class(prog), twin, note))
    return out


def view_files(only: str | None = None) -> list[Path]:
    """The cookbook files, or those whose stems ``only`` (comma-separated) names, in that order (a
    long run measures the views that matter most first)."""
    files = sorted(VIEWS_DIR.glob("*.sql"))
    if only:
        want = list(dict.fromkeys(s.strip() for s in only.split(",") if s.strip()))
        by_stem = {f.stem: f for f in files}
        unknown = [w for w in want if w not in by_stem]
        if unknown:
            raise ValueError(f"DDMS_BENCH_VIEWS: no view {', '.join(sorted(unknown))} in {VIEWS_DIR}")
        files = [by_stem[w] for w in want]
    return files


Streams = dict[int, tuple[list, list]]
"""depth -> (parsed build batches, parsed steady batches)."""


def streams(sizes: Sizes, steady: int, band: int) -> Streams:
    """The book-building and steady-state batches at each depth of ``sizes`` for one price model
    (``band``), parsed once and shared by every view.  O(depth + steady) per depth."""
    out = {}
    for d in sizes.depths:
        build, tail = book_stream(d, steady, both_sides=True, seed=1, tick_band=band)
        parser = OrderBookParser(brokers=10)
        out[d] = (parse_continue(parser, build), parse_continue(parser, tail))
    return out


def costs(program: Program, sizes: Sizes, books: Streams) -> dict[int, float]:
    """ns/line of the steady stream at each depth of ``books``: the best of ``REPEATS`` runs (one
    with ``--quick``), the depths taking turns, each on a fresh engine holding the built book: the
    first run of a depth builds it (untimed) and keeps a copy of the state, later runs load that
    copy (bit for bit the state the build left, node-array capacities included)."""
    built: dict[int, tuple[dict, int]] = {}
    best: dict[int, float] = {}
    for _ in range(1 if sizes.quick else REPEATS):
        for d, (b_build, b_steady) in books.items():
            eng = Engine(program)
            if d in built:
                load_state(eng, built[d][0])
                eng.position = built[d][1]
            else:
                time_apply(eng, b_build, time.thread_time)
                if not sizes.quick:
                    built[d] = (dump_state(eng), eng.position)
            ns = time_apply(eng, b_steady, time.thread_time) / n_lines(b_steady) * 1e9
            best[d] = min(best.get(d, ns), ns)
    return best


def measure(files: list[Path], sizes: Sizes, steady: int, progress=None) -> list[Row]:
    """The rows of the section for ``files``.  ``progress(text)`` is told what runs."""
    rows: list[Row] = []
    books: dict[int, Streams] = {}
    def add(row: Row) -> None:   # (told as it comes: a long run cut short keeps what it measured)
        rows.append(row)
        if progress:
            progress(f"{row.case}: {row.value if row.value is None else round(row.value, 3)} {row.unit} {row.verdict}")
    for case in cases(files):
        extra = [s.name for s in case.program.streams if len(s.columns) != 5]
        if extra:   # the generated book has t, id, broker, volume, price: a per-symbol view needs more
            add(Row(SECTION, case.name, None, "", verdict=f"skipped: stream {extra[0]} has columns the generated "
                    "book does not (per-symbol views: python -m bench.symbols)"))
            continue
        for prog in (case.program, case.twin):
            if prog is not None:
                Engine(prog)   # numba compile (or cache load) outside the timing
        for model, band in MODELS:
            if progress:
                progress(f"{case.name}, {model}")
            if band not in books:
                books[band] = streams(sizes, steady, band)
            got = costs(case.program, sizes, books[band])
            lo, hi = min(got), max(got)
            growth = got[hi] / got[lo]
            per_depth = "; ".join(f"{label(d)} {c:,.0f}" for d, c in got.items())
            bounded = case.cost in ("O(1)", "O(log n)")
            verdict = (f"{'PASS' if growth <= GROWTH_TARGET else 'FAIL'}: " if bounded else "") + \
                f"{case.cost}; ns/line {per_depth}"
            add(Row(SECTION, f"{case.name} ({model}): cost({label(hi)}) / cost({label(lo)})", growth, "x",
                            f"<= {GROWTH_TARGET:g}x" if bounded else "(not O(log n))", verdict))
            if case.twin is not None:
                twin = costs(case.twin, sizes, books[band])
                ratios = {d: got[d] / twin[d] for d in got}
                worst = max(ratios, key=ratios.get)
                detail = "; ".join(f"{label(d)} {r:.2f}x" for d, r in ratios.items())
                add(Row(SECTION, f"{case.name} ({model}): / SUM twin, worst at {label(worst)}",
                                ratios[worst], "x", f"<= {RATIO_TARGET:g}x",
                                f"{'PASS' if ratios[worst] <= RATIO_TARGET else 'FAIL'}: {detail}; "
                                "SUM twin ns/line " + "; ".join(f"{label(d)} {c:,.0f}" for d, c in twin.items())))
            elif case.twin_note:
                add(Row(SECTION, f"{case.name} ({model}): / SUM twin", None, "", verdict=case.twin_note))
    return rows


def run(sh: Shared) -> list[Row]:
    sizes = sh.sizes
    steady = sizes.steady_lines // 5
    import sys
    return measure(view_files(os.environ.get("DDMS_BENCH_VIEWS")), sizes, steady,
                   progress=lambda s: print(f"bench: depth_sql {s}", file=sys.stderr, flush=True))
