"""A hand-written numba VWAP: the practical speed limit for examples/m3/vwap.m3.

    VWAP = SUM(price * volume) over bids b1 with 0.25 * SUM(volume) > SUM(volume of bids priced
           strictly above b1.price)

Reference only, so it may cheat where the engine cannot: the bid prices of the whole stream are
pre-scanned and compressed to ranks 1..L, and two Fenwick trees over the ranks hold the volume
and the price * volume per level.  The qualifying levels are exactly the ranks above the largest
rank r with prefix_volume(r) <= 0.75 * total (volume above a level falls as the price rises),
found by one O(log L) descent that also sums the price * volume up to r.  The VWAP is recomputed
after every input line that touched the bids (other lines cannot change it).
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from bench.common import Row, Shared, Skip, engine, merge, n_lines, parse, rate, time_apply
from ddms.streams.events import EventBatch

SECTION = "2 vwap kernel"


def price_ranks(batch: EventBatch) -> tuple[np.ndarray, int]:
    """(1-based rank of each event's price among the bid prices, number of levels); 0 for asks."""
    bids = batch.rel == 0
    levels, inv = np.unique(batch.cols[bids, 4], return_inverse=True)
    ranks = np.zeros(len(batch), np.int64)
    ranks[bids] = inv + 1
    return ranks, len(levels)


@njit(cache=True)
def vwap_kernel(rel, sign, cols, line, ranks, n_levels, trace, base):  # pragma: no cover - compiled
    """Apply every event; returns the final VWAP.  With ``len(trace) > 0`` also writes the VWAP
    after each line (indexed by ``line - base``)."""
    vol = np.zeros(n_levels + 1)
    pv = np.zeros(n_levels + 1)
    top = 1
    while top * 2 <= n_levels:
        top *= 2
    total = 0.0
    pv_total = 0.0
    vwap = 0.0
    n = rel.shape[0]
    dirty = False
    tracing = trace.shape[0] > 0
    for i in range(n):
        if rel[i] == 0:
            v = cols[i, 3] if sign[i] > 0 else -cols[i, 3]
            w = cols[i, 4] * cols[i, 3]
            if sign[i] < 0:
                w = -w
            total += v
            pv_total += w
            j = ranks[i]
            while j <= n_levels:
                vol[j] += v
                pv[j] += w
                j += j & -j
            dirty = True
        if dirty and (i + 1 == n or line[i + 1] != line[i]):
            dirty = False
            rem = total - 0.25 * total
            pos = 0
            below = 0.0
            step = top
            while step > 0:
                nxt = pos + step
                if nxt <= n_levels and vol[nxt] <= rem:
                    pos = nxt
                    rem -= vol[nxt]
                    below += pv[nxt]
                step //= 2
            vwap = pv_total - below
        if tracing and (i + 1 == n or line[i + 1] != line[i]):
            trace[line[i] - base] = vwap
    return vwap


def run_kernel(batch: EventBatch, ranks: np.ndarray, n_levels: int, trace: np.ndarray | None = None) -> float:
    """The final VWAP; ``trace`` (one slot per line from ``batch.first_line``) gets the VWAP
    after every line that carried an event."""
    return float(vwap_kernel(batch.rel, batch.sign, batch.cols, batch.line, ranks, n_levels,
                             trace if trace is not None else np.zeros(0), batch.first_line))


def _engine_trace(batches: list[EventBatch], first: int, count: int) -> np.ndarray:
    """The engine's VWAP after each of ``count`` lines (callbacks record every change)."""
    eng = engine("VWAP")
    pos: list[int] = []
    val: list[float] = []
    eng.on("VWAP", lambda _v, _k, _o, new, p: (pos.append(p), val.append(new)))
    time_apply(eng, batches)
    out = np.zeros(count)
    if pos:
        idx = np.searchsorted(np.asarray(pos), np.arange(first, first + count), side="right") - 1
        out = np.where(idx >= 0, np.asarray(val)[np.maximum(idx, 0)], 0.0)
    return out


def _ffill(a: np.ndarray) -> np.ndarray:
    """Lines without events keep the previous value (the kernel writes only the lines that
    carried an event; the rest are NaN here, and 0 before the first event)."""
    idx = np.where(np.isnan(a), 0, np.arange(len(a)))
    np.maximum.accumulate(idx, out=idx)
    out = a[idx]
    return np.where(np.isnan(out), 0.0, out)


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    warm = merge(parse(b"1,1,B,10,100\n1,2,B,5,90\n2,1,D,0,0\n"))
    r, nl = price_ranks(warm)
    run_kernel(warm, r, nl)   # compile / load from cache outside the timing
    for name in sh.datasets():
        label = sh.label(name)
        try:
            batches = sh.batches(name)
        except Skip as e:
            rows.append(Row(SECTION, label, None, "", verdict=f"skipped: {e}"))
            continue
        lines = n_lines(batches)
        batch = merge(batches)
        t0 = time.perf_counter()
        ranks, levels = price_ranks(batch)
        prescan = time.perf_counter() - t0
        reps = 3 if lines < 1_000_000 else 1
        best = f" (best of {reps})" if reps > 1 else ""
        seconds = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            k_value = run_kernel(batch, ranks, levels)
            seconds = min(seconds, time.perf_counter() - t0)
        k_rate = rate(lines, seconds)
        rows.append(Row(SECTION, f"{label}: kernel apply only{best}", k_rate, "lines/s",
                        verdict=f"{levels:,} levels; pre-scan {prescan * 1e3:.0f} ms (not counted)"))
        if (name, "VWAP") not in sh.apply_rate:
            sh.apply_rate[(name, "VWAP")] = rate(lines, min(time_apply(engine("VWAP"), batches)
                                                            for _ in range(reps)))
        e_rate = sh.apply_rate[(name, "VWAP")]
        ratio = e_rate / k_rate
        rows.append(Row(SECTION, f"{label}: engine / kernel (apply only)", ratio, "x", ">= 0.3x",
                        "PASS" if ratio >= 0.3 else "FAIL"))
        eng = engine("VWAP")
        time_apply(eng, batches)
        e_value = float(eng.value("VWAP"))
        ok = abs(e_value - k_value) <= 1e-9 * max(1.0, abs(k_value))
        note = f"engine {e_value:.10g}, kernel {k_value:.10g}"
        if name == "finance":
            first = batches[0].first_line
            k_trace = np.full(lines, np.nan)
            run_kernel(batch, ranks, levels, k_trace)
            k_trace = _ffill(k_trace)
            e_trace = _engine_trace(batches, first, lines)
            bad = np.abs(e_trace - k_trace) > 1e-9 * np.maximum(1.0, np.abs(k_trace))
            note += f"; lines disagreeing: {int(bad.sum()):,} of {lines:,}"
            if bad.any():
                note += f" (first at line {first + int(np.argmax(bad))})"
            ok = ok and not bad.any()
        rows.append(Row(SECTION, f"{label}: final VWAP agrees", None, "", "engine == kernel",
                        ("PASS: " if ok else "FAIL: ") + note))
    return rows
