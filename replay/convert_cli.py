"""`ddms convert SRC... --out X.parquet`: any replay source(s) to one columnar event file.

Why a command: a sweep replays each partition once per parameter set, so paying the text or
JSON parse once and replaying Parquet afterwards is the cheap path (see :mod:`ddms.io.columnar`).
Several sources are concatenated in order (their line numbers shifted so each line stays one
atomic update), or, when every one records receive timestamps (captures, DBN, tardis), merged by
receive time with their symbol columns (:mod:`ddms.io.merge`).
The command prints what it wrote and the rate; errors are the sources' own
(``file:line: reason``) and leave no output file.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace

__all__ = ["add_commands", "check_writable", "cmd_convert", "main"]


def cmd_convert(args: argparse.Namespace) -> int:
    from ddms.errors import ReplayError
    from ddms.io.columnar import convert
    from ddms.io.sources import RECEIVE_TIMED, names_symbols, open_source

    out = args.out
    if not out.endswith(".parquet"):
        raise ReplayError("the output name must end in .parquet (that is how sources are detected)", out)
    if os.path.isdir(out):
        raise ReplayError("is a directory, not an output file", out)
    if os.path.exists(out) and not args.force:
        raise ReplayError("exists already (pass --force to replace it)", out)
    check_writable(out)
    if args.group_events < 1:
        raise ReplayError(f"--group-events must be >= 1, got {args.group_events}", out)
    if any(os.path.abspath(s) == os.path.abspath(out) for s in args.sources):
        raise ReplayError("is also an input", out)
    sources = [open_source(s, kind=args.kind, brokers=args.brokers, skip_bad=args.skip_bad, market=args.market,
                           allow_empty_start=args.allow_empty_start, symbol=args.symbol) for s in args.sources]
    # a source of instruments named inside (captures, DBN, tardis, a Parquet file with a symbol
    # column) keeps its symbol column, unless one symbol was chosen (--symbol or FILE#SYMBOL)
    sources = [replace(s, symbols=True) if s.symbol is None and names_symbols(s) else s for s in sources]
    # several captures (every one with receive timestamps) merge by receive time, each keeping its
    # symbol column (one book per instrument); files without receive times are concatenated
    merge = len(sources) > 1 and all(s.kind in RECEIVE_TIMED for s in sources)
    if merge:
        sources = [replace(s, symbols=True) for s in sources]
    elif len(sources) > 1:
        untimed = next(s.path for s in sources if s.kind not in RECEIVE_TIMED)
        print(f"note: {untimed} has no receive timestamps: the sources are concatenated in the order given "
              f"(captures of {', '.join(RECEIVE_TIMED)} alone are merged by receive time)", file=sys.stderr)
    t0 = time.perf_counter()
    notes: list[str] = []
    info = convert(sources, out, group_events=args.group_events, notes=notes, merge=merge)
    sec = time.perf_counter() - t0
    rate = info.events / sec if sec > 0 else float("inf")
    skipped = f", {info.skipped:,} bad lines skipped" if info.skipped else ""
    print(f"{out}: {info.events:,} events of {info.last_line - info.first_line + 1:,} lines ({info.kind} "
          f"{info.name}) in {len(info.spans)} row group(s), {os.path.getsize(out) / 1e6:.1f} MB, "
          f"{sec:.2f} s ({rate:,.0f} events/s){skipped}", file=sys.stderr)
    for note in notes:
        print(f"warning: {note}", file=sys.stderr)
    return 0


def check_writable(out: str) -> None:
    """Fail before any work when ``out`` cannot be written: its folder is missing, is not a
    folder, or does not let us create a file (probed by creating and removing one, which also
    covers read-only and special file systems that permission bits do not show)."""
    from ddms.errors import ReplayError

    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.exists(folder):
        raise ReplayError(f"cannot write: the folder {folder} does not exist", out)
    if not os.path.isdir(folder):
        raise ReplayError(f"cannot write: {folder} is not a folder", out)
    try:
        fd, probe = tempfile.mkstemp(prefix=".ddms-probe-", dir=folder)
    except OSError as e:
        raise ReplayError(f"cannot write in {folder}: {e.strerror or e}", out) from None
    os.close(fd)
    os.remove(probe)


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``convert`` on the ``ddms`` parser."""
    from ddms.io.sources import KINDS

    p = sub.add_parser("convert", help="write order-book/LOBSTER/Binance/Parquet sources to one Parquet event file")
    p.add_argument("sources", nargs="+", metavar="SRC", help="data files (format detected from name and content)")
    p.add_argument("--out", required=True, metavar="X.parquet", help="the Parquet file to write")
    p.add_argument("--kind", choices=KINDS, metavar="KIND",
                   help=f"read every SRC as this format instead of detecting it: {', '.join(KINDS)}")
    p.add_argument("--brokers", type=int, default=10, help="order-book files: broker_id = id mod BROKERS")
    p.add_argument("--market", choices=("futures", "spot"), help="Binance captures: the market (default: detected)")
    p.add_argument("--allow-empty-start", action="store_true",
                   help="Binance captures: start from an empty book at the first depth event (no snapshot needed)")
    p.add_argument("--symbol", help="multi-symbol captures (cryptofeed, DBN, tardis): the instrument to convert, "
                   "as the venue spells it (XBT/CHF, BTC-USDT, ESH4)")
    p.add_argument("--skip-bad", action="store_true", help="skip and count bad lines instead of stopping")
    p.add_argument("--group-events", type=int, default=1 << 18, help="events per Parquet row group (about)")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.set_defaults(func=cmd_convert)


def main(argv: list[str] | None = None) -> int:
    """Run ``convert`` alone (tests; ``python -m replay.convert_cli``), with ddms's error handling."""
    from ddms.errors import DdmsError

    ap = argparse.ArgumentParser(prog="ddms")
    add_commands(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(["convert", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except DdmsError as e:
        print(f"ddms: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
