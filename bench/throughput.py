"""Section 1: VWAP and SOBI lines/s on big/finance.csv and on a synthetic stream.

Per dataset: generation time (synthetic), parse-only lines/s, then per program end-to-end
(parse + apply) and apply-only lines/s, each into a fresh engine.  Streams under 1M lines are
timed best of 3."""

from __future__ import annotations

from bench.common import Row, Shared, Skip, engine, n_lines, rate, time_apply, time_end_to_end, time_parse

SECTION = "1 throughput"


def run(sh: Shared) -> list[Row]:
    rows: list[Row] = []
    for name in sh.datasets():
        label = sh.label(name)
        try:
            data = sh.data(name)
        except Skip as e:
            rows.append(Row(SECTION, label, None, "", verdict=f"skipped: {e}"))
            continue
        if name == "synthetic":
            lines = data.count(b"\n")
            rows.append(Row(SECTION, f"{label}: generate ({sh.gen_name})", sh.gen_seconds, "s",
                            verdict=f"{rate(lines, sh.gen_seconds) / 1e6:.1f}M lines/s"))
        reps = 3 if len(data) < 30_000_000 else 1
        best = f" (best of {reps})" if reps > 1 else ""
        seconds, lines = min(time_parse(data) for _ in range(reps))
        parse_rate = rate(lines, seconds)
        rows.append(Row(SECTION, f"{label}: parse only{best}", parse_rate, "lines/s"))
        batches = sh.batches(name)
        assert n_lines(batches) == lines
        for prog in ("VWAP", "SOBI"):
            e2e = min(time_end_to_end(engine(prog), data)[0] for _ in range(reps))
            app = min(time_apply(engine(prog), batches) for _ in range(reps))
            sh.apply_rate[(name, prog)] = rate(lines, app)
            rows.append(Row(SECTION, f"{label}: {prog} parse+apply{best}", rate(lines, e2e), "lines/s",
                            verdict=f"parse = {100 * seconds / e2e:.0f}% of time"))
            rows.append(Row(SECTION, f"{label}: {prog} apply only{best}", rate(lines, app), "lines/s"))
    return rows
