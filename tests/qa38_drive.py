"""qa38: drive ddms as a user (subprocesses of the CLI) and compare with qa38_gen's ground truth.

`run_views` runs `ddms run tests/qa38/symbol_book.sql --data FILE... --json`; `serve_monitor` runs
`ddms serve-feed FILE --speed max` and `ddms monitor URL --once --json` over loopback and returns
the monitor's summary line. Both are subprocesses, so each check costs an interpreter start (~1 s)
plus the replay.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SQL = REPO / "tests" / "qa38" / "symbol_book.sql"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def ddms(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m ddms ARGS` with this checkout first on the path."""
    return subprocess.run([sys.executable, "-m", "ddms", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(), cwd=REPO)


def run_views(files: list[Path], *extra: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    """The last views line of `ddms run symbol_book.sql --data F... --json`, keyed by symbol."""
    args = ["run", str(SQL), "--json", "--no-first-results"]
    for f in files:
        args += ["--data", str(f)]
    p = ddms(*args, *extra)
    last = None
    for ln in p.stdout.splitlines():
        if ln.startswith("{") and '"views"' in ln:
            last = json.loads(ln)
    if last is None:
        return p, None
    out: dict = {}
    for sym, bb, bv, bn in last["views"].get("BEST_BID", []):
        out.setdefault(sym, {}).update(best_bid=bb, bid_volume=bv, bid_levels=bn)
    for sym, ba, av, an in last["views"].get("BEST_ASK", []):
        out.setdefault(sym, {}).update(best_ask=ba, ask_volume=av, ask_levels=an)
    return p, out


def compare(got: dict, want: dict) -> list[str]:
    """Mismatches between view rows keyed by symbol and qa38_gen.summary() values."""
    bad = []
    for sym, w in want.items():
        g = got.get(sym)
        if g is None:
            bad.append(f"{sym}: missing")
            continue
        for k, v in w.items():
            gv = g.get(k, 0 if k.endswith(("volume", "levels")) else None)  # no row: an empty side
            if v is None or gv is None:
                if v != gv:
                    bad.append(f"{sym}.{k}: {gv} != {v}")
            elif not math.isclose(float(gv), float(v), rel_tol=1e-9, abs_tol=1e-9):
                bad.append(f"{sym}.{k}: {gv} != {v}")
    for sym in got:
        if sym not in want:
            bad.append(f"{sym}: unexpected symbol")
    return bad


def serve_monitor(file: Path, *serve_extra: str, monitor_extra: tuple[str, ...] = (),
                  timeout: float = 300) -> tuple[dict | None, list[dict], str, str]:
    """Replay `file` with serve-feed (any free port) and follow it with monitor --once --json.

    Returns (summary, every other JSON event, serve-feed's output, monitor's stderr).
    """
    srv = subprocess.Popen([sys.executable, "-m", "ddms", "serve-feed", str(file), "--speed", "max",
                            *serve_extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=_env(), cwd=REPO)
    url = None
    head = []
    try:
        assert srv.stdout is not None
        for ln in srv.stdout:
            head.append(ln)
            if ln.startswith("ws://"):
                url = ln.strip()
                break
        if url is None:
            srv.wait(timeout=30)
            return None, [], "".join(head), ""
        mon = subprocess.run([sys.executable, "-m", "ddms", "monitor", url, "--once", "--json",
                              "--no-display", *monitor_extra], capture_output=True, text=True,
                             timeout=timeout, env=_env(), cwd=REPO)
    finally:
        srv.terminate()
        try:
            rest, _ = srv.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            srv.kill()
            rest, _ = srv.communicate()
    summary = None
    events = []
    for ln in mon.stdout.splitlines():
        if not ln.startswith("{"):
            continue
        d = json.loads(ln)
        if d.get("event") == "summary":
            summary = d
        else:
            events.append(d)
    return summary, events, "".join(head) + (rest or ""), mon.stderr


def check_summary(summary: dict, expected: dict, *, checksums: int | None = None,
                  booktickers: int | None = None) -> list[str]:
    """Problems in a monitor summary against the truth's final books: every symbol synced, no gap,
    no resync, never crossed, checksum counts, bookTicker checks, final best bid/ask (price, size)."""
    bad = []
    syms = summary.get("symbols") or {}
    for k in ("gaps", "resyncs", "checksum_mismatch", "bookticker_mismatch", "crossed", "malformed"):
        if summary.get(k):
            bad.append(f"{k}={summary.get(k)}")
    if checksums is not None and summary.get("checksum_checked") != checksums:
        bad.append(f"checksum_checked={summary.get('checksum_checked')} want {checksums}")
    if booktickers is not None and summary.get("bookticker_checked") != booktickers:
        bad.append(f"bookticker_checked={summary.get('bookticker_checked')} want {booktickers}")
    for sym, book in expected.items():
        s = syms.get(sym.upper()) or syms.get(sym)
        if s is None:
            bad.append(f"{sym}: not in summary symbols {sorted(syms)[:5]}")
            continue
        if not s.get("synced"):
            bad.append(f"{sym}: not synced")
        want_b = list(book["bids"][0]) if book["bids"] else None
        want_a = list(book["asks"][0]) if book["asks"] else None
        if s.get("best_bid") != want_b or s.get("best_ask") != want_a:
            bad.append(f"{sym}: best {s.get('best_bid')}/{s.get('best_ask')} != {want_b}/{want_a}")
    return bad


def run_views_every(files: list[Path], *extra: str) -> tuple[subprocess.CompletedProcess, list[tuple[int, dict]]]:
    """Every views line of `ddms run symbol_book.sql --data F... --every 1 --json`: (line, rows by symbol)."""
    args = ["run", str(SQL), "--json", "--no-first-results", "--every", "1"]
    for f in files:
        args += ["--data", str(f)]
    p = ddms(*args, *extra)
    out = []
    for ln in p.stdout.splitlines():
        if ln.startswith("{") and '"views"' in ln:
            d = json.loads(ln)
            rows: dict = {}
            for sym, bb, bv, bn in d["views"].get("BEST_BID", []):
                rows.setdefault(sym, {}).update(best_bid=bb, bid_volume=bv, bid_levels=bn)
            for sym, ba, av, an in d["views"].get("BEST_ASK", []):
                rows.setdefault(sym, {}).update(best_ask=ba, ask_volume=av, ask_levels=an)
            out.append((d["line"], rows))
    return p, out
