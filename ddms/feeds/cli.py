"""`ddms serve-feed` and `ddms monitor`: the command-line faces of the feed transport (issue 5).

    ddms serve-feed CAPTURE|finance.csv [--speed X|max] [--rate N] [--port P] [--host H]
                    [--empty-book] [--fault KIND@N[#SYMBOL] ...]
    ddms monitor URL [URL ...] [--views FILE.sql|FILE.m3] [--strategy NAME [--param K=V ...] [--orders-log FILE]]
                 [--json] [--once] [--reconnect N|forever] [--snapshot-url URL] [--market futures|spot]
                 [--watchdog S] [--symbols A,B,...] [--record FILE]
                 [--checkpoint DIR [--checkpoint-every N] [--checkpoint-keep N]]

``serve-feed`` prints the websocket URL to connect to as its first stdout line; ``monitor`` on
that URL needs no other option (the server advertises protocol or venue, symbols, market and
snapshot endpoint).
Imports of websockets, numba and rich happen inside the commands, so ``ddms --help`` stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from ddms.errors import DdmsError
from ddms.feeds import DEFAULT_RETRIES, retry_policy

if TYPE_CHECKING:
    from ddms.feeds.monitor import MonitorConfig


def _positive(text: str, option: str, expected: str) -> float:
    """``text`` as a positive finite number, else an argparse error quoting ``option``."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"{option} {text!r}: {expected}")
    return v


def _speed(text: str) -> float:
    """``--speed``: a positive factor, or ``max``/``inf`` (0.0: unthrottled).  Zero or a negative
    factor is refused rather than read as some other pace."""
    if text.strip().lower() in ("max", "inf"):
        return 0.0
    return _positive(text, "--speed", "a positive number or 'max'")


def _rate(text: str) -> float:
    """``--rate``: a positive number of messages per second (leaving it out means: by --speed)."""
    return _positive(text, "--rate", "a positive number of messages per second")


def cmd_serve_feed(args: argparse.Namespace) -> int:
    from ddms.feeds.server import load_replay, parse_fault
    from ddms.feeds.transport import ServeConfig, serve_replay

    faults = tuple(parse_fault(f) for f in args.fault or ())
    core = load_replay(args.input, empty_book=args.empty_book, faults=faults, skip_bad=args.skip_bad)
    if core.protocol == "orders":
        what = "order protocol"
    elif core.protocol == "binance" and not hasattr(core, "symbols"):
        what = f"{core.market} {core.symbol}, streams {', '.join(core.streams)}"
    else:
        syms = core.symbols
        what = (f"{core.protocol}{' ' + core.market if core.market else ''}, {len(syms)} symbol"
                f"{'s' if len(syms) != 1 else ''} ({', '.join(syms[:12])}{', ...' if len(syms) > 12 else ''})")
    skipped = f", {core.skipped:,} bad lines skipped" if core.skipped else ""
    print(f"serve-feed: {args.input}: {len(core.frames):,} messages ({core.counted_total():,} "
          f"{'order' if core.protocol == 'orders' else 'book'} messages), {what}{skipped}", file=sys.stderr,
          flush=True)

    def ready(url: str) -> None:
        print(url, flush=True)
        print(f"serve-feed: listening on {url} (snapshots: {core.snapshot_path()}); the replay starts when a "
              "client connects", file=sys.stderr, flush=True)

    config = ServeConfig(args.host, args.port, args.speed, args.rate)
    try:
        asyncio.run(serve_replay(core, config, ready))
    except KeyboardInterrupt:
        print("serve-feed: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        raise DdmsError(f"serve-feed: cannot listen on {args.host}:{args.port}: {e}") from None
    return 0


def monitor_config(args: argparse.Namespace) -> MonitorConfig:
    """The :class:`~ddms.feeds.monitor.MonitorConfig` a ``ddms monitor`` command line asks for
    (the URL and the options checked; nothing compiled or connected yet)."""
    from ddms.feeds.monitor import MonitorConfig
    from ddms.feeds.transport import ClientConfig

    urls = list(args.url)
    for u in urls:
        ClientConfig(u)             # validates the URLs before any compile
    lists = [tuple(x.strip().upper() for x in text.split(",") if x.strip()) for text in args.symbols or ()]
    if len(lists) > 1 and len(lists) != len(urls):
        raise DdmsError(f"--symbols given {len(lists)} times for {len(urls)} URL{'s' if len(urls) > 1 else ''}: give "
                        "it once (every URL follows those of the symbols its feed has) or once per URL, in order")
    if len(urls) > 1 and args.checkpoint:
        raise DdmsError("--checkpoint with several URLs: a checkpoint holds one feed's position; run one monitor per "
                        "URL, each with its own --checkpoint DIR")
    params = []
    for text in args.param or ():
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise DdmsError(f"--param {text!r}: expected NAME=VALUE")
        try:
            params.append((key, float(value)))
        except ValueError:
            raise DdmsError(f"--param {text!r}: the value is not a number") from None
    if params and not args.strategy:
        raise DdmsError("--param needs --strategy")
    if args.orders_log and not args.strategy:
        raise DdmsError("--orders-log needs --strategy")
    return MonitorConfig(urls[0], urls=tuple(urls[1:]), views=args.views, strategy=args.strategy, json=args.json,
                         once=args.once,
                         snapshot_url=args.snapshot_url, market=args.market, watchdog=args.watchdog,
                         display=False if args.no_display else None, strategy_params=tuple(params),
                         reconnect=args.reconnect, orders_log=args.orders_log,
                         symbols=lists[0] if lists else (), peer_symbols=tuple(lists[1:]),
                         symbols_shared=len(lists) == 1 and len(urls) > 1,
                         record=args.record, checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                         checkpoint_keep=args.checkpoint_keep)


def cmd_monitor(args: argparse.Namespace) -> int:
    from ddms.feeds.monitor import Monitor

    config = monitor_config(args)
    engine = None
    if args.views or args.strategy:     # built here, after the arguments are checked, to say which wait is coming
        from ddms.cli import build_engine
        if args.views:
            engine = build_engine(args.views, args.views)
        else:                           # the strategy's own program; its name and parameters checked first
            import strategies
            strat = strategies.get(args.strategy, dict(config.strategy_params))
            engine = build_engine(strat.program, f"{strat.program.name} (strategy {args.strategy})")
    mon = Monitor(config, engine=engine)
    try:
        summary = asyncio.run(mon.run())
    except KeyboardInterrupt:   # a second Ctrl-C while shutting down
        print(json.dumps(mon.summary()), flush=True)
        return 130
    # feed faults (gaps, stale, malformed) are counted and recovered from; exit 1 only when the
    # book itself failed a check, 3 when the feed was lost (not ended by the server) and the
    # reconnect attempts failed
    if summary.get("bookticker_mismatch") or summary.get("crossed"):
        return 1
    return 0 if not summary.get("end", "").startswith("gave up") else 3


def _reconnect(text: str) -> int | None:
    """``--reconnect``: a number of attempts >= 0, or ``forever`` (None)."""
    if text.strip().lower() in ("forever", "inf"):
        return None
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"--reconnect {text!r}: a number of attempts (0, 1, 2, ...) or 'forever'")
    return n


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register the feed subcommands on the `ddms` parser."""
    sf = sub.add_parser("serve-feed", help="replay a venue capture (Binance, Kraken, OKX, Coinbase) or a finance.csv "
                        "over a local websocket speaking the venue's protocol")
    sf.add_argument("input", help="an hftbacktest Binance capture ('<recv_ts_ns> <json>' lines, .gz or text), a "
                    "cryptofeed capture (<EXCHANGE>.ws.* with its .http.* files beside it, or a ddms monitor --record "
                    "file) of Kraken, OKX, Coinbase or Binance, many symbols each, or a finance.csv")
    sf.add_argument("--speed", type=_speed, default=1.0,
                    help="replay speed: 1 = as recorded, 10 = ten times faster, max = as fast as the client reads")
    sf.add_argument("--rate", type=_rate, default=0.0,
                    help="send N depth messages (finance.csv: messages) per second instead (overrides --speed)")
    sf.add_argument("--port", type=int, default=0, help="TCP port (default: any free port; the URL is printed)")
    sf.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sf.add_argument("--empty-book", action="store_true",
                    help="accept a capture without a depth snapshot: start from an empty book")
    sf.add_argument("--fault", action="append", metavar="KIND@N",
                    help="inject a fault at the N-th book message (finance.csv: message): drop, dup, reorder, "
                         "corrupt, checksum (Kraken, OKX: a wrong checksum), close, stall (stall@N:SECONDS); "
                         "KIND@N#SYMBOL counts that symbol's book messages only; repeatable")
    sf.add_argument("--skip-bad", action="store_true", help="skip and count bad input lines instead of stopping")
    sf.set_defaults(func=cmd_serve_feed)

    mo = sub.add_parser("monitor", help="follow a live feed: book, views, checks, live display")
    mo.add_argument("url", nargs="+", metavar="URL",
                    help="websocket URL (e.g. the first line printed by ddms serve-feed); several URLs (venues, or "
                         "markets of one venue) are followed at once, one connection each, into one engine")
    mo.add_argument("--views", help="views to maintain: SQL (.sql) or M3 (.m3) over bids/asks")
    mo.add_argument("--strategy", help="run a strategy on the views: a name from ddms backtest --list, "
                    "package.module:Class or path/to/file.py:Class; without --views on the strategy's own program; "
                    "its orders are recorded, not sent anywhere, and shown in the display's orders panel "
                    "(--json: order events; --no-display: lines on stderr)")
    mo.add_argument("--param", action="append", metavar="NAME=VALUE", help="a strategy parameter; repeatable")
    mo.add_argument("--orders-log", metavar="FILE",
                    help="also write every strategy action to FILE as CSV (time, line, action, order_id, side, price, "
                         "qty), flushed as it happens")
    mo.add_argument("--json", action="store_true", help="print JSON lines (changes, problems, summary), no display")
    mo.add_argument("--once", action="store_true",
                    help="exit as soon as the server ends the stream normally (a finished replay) instead of "
                         "reconnecting; a lost connection is still retried as --reconnect says")
    mo.add_argument("--reconnect", type=_reconnect, default=DEFAULT_RETRIES, metavar="N|forever",
                    help=f"after the connection ends or an attempt fails, {retry_policy(DEFAULT_RETRIES)}, then "
                         "stop (a connection that carries messages starts the count again); 'forever' never gives "
                         "up.  A stream the server ended normally exits 0, a lost feed 3")
    mo.add_argument("--snapshot-url", help="depth snapshot URL (default: advertised by the server or implied)")
    mo.add_argument("--market", choices=("futures", "spot"), help="Binance market (default: advertised or detected)")
    mo.add_argument("--watchdog", type=float, default=30.0, help="reconnect after this many seconds without a message")
    mo.add_argument("--no-display", action="store_true", help="no live display (status lines on stderr)")
    mo.add_argument("--symbols", metavar="A,B,...", action="append",
                    help="symbols to subscribe to, as the venue spells them (default: every symbol a ddms serve-feed "
                         "server advertises; needed for a live Kraken, OKX or Coinbase URL); with several URLs, once "
                         "(each URL follows those of them its feed has) or once per URL, in the URLs' order")
    mo.add_argument("--record", metavar="FILE",
                    help="write every message received, as received, with receive times, the subscriptions sent and "
                         "the REST snapshots fetched, as a cryptofeed capture that serve-feed, run, backtest and "
                         "convert read (our order protocol: a #ddms-orders recording, which run, backtest and "
                         "convert read)")
    mo.add_argument("--checkpoint", metavar="DIR",
                    help="write checkpoints (the engine's state and the feed's position) into DIR every "
                         "--checkpoint-every messages and at the end; started again with the same DIR, the monitor "
                         "restores the newest one, then continues the order protocol from its sequence number "
                         "(a snapshot replaces the book after a gap) or resynchronizes a Binance book from a fresh "
                         "snapshot.  Needs --views")
    mo.add_argument("--checkpoint-every", type=int, default=10_000, metavar="N",
                    help="messages between checkpoints (default 10000)")
    mo.add_argument("--checkpoint-keep", type=int, default=2, metavar="N",
                    help="keep the N newest checkpoints in DIR (default 2; 0 keeps every one: with --record, ddms run "
                         "--resume FILE replays the recording from any of them)")
    mo.set_defaults(func=cmd_monitor)
