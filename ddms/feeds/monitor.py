"""``ddms monitor``: follow a live feed, maintain the book and the views, check them, show them.

The monitor is the consumer side of :mod:`ddms.feeds.transport`: it takes the queue's records in
order, feeds messages to the protocol core (:class:`~ddms.io.venues.binance_book.BinanceBook` or
:class:`~ddms.io.orderproto.OrderFeed`), performs the actions the core asks for (fetch a
snapshot), resynchronizes after a reconnect or a queue overflow, and hands the core's events to
the engine once per drained run of the queue (one ``Engine.apply`` per run: at low rates a run is
one message, so latency stays low; at high rates runs grow and the per-call cost is shared).

What it knows without options: the protocol, market and snapshot endpoint come from the replay
server's ``X-DDMS-*`` handshake headers; otherwise from the URL (``/orders`` is our order
protocol; ``fstream.binance.com`` is USD-M futures, ``stream.binance.com`` spot, each with its
REST host) and, for the market, from the first depth message (futures messages carry ``pu``).

Checks (Binance): the core counts gaps, stale and malformed messages, crossed books and compares
its top of book with every bookTicker whose ``u`` is the final id of an applied depth event.
Every problem is reported (``--json``: one JSON line each) with the message number and reason.
Unknown message fields (a venue extends its messages without notice) are ignored and counted:
``unknown_fields`` in the summary maps each name to the messages that carried it.

Output: a live rich display on a terminal; ``--json``: JSON lines (view changes, problems,
connection events), then the final views as ``ddms run --json`` prints them, then one summary
line; the summary line is printed however the monitor ends (stream end, Ctrl-C, give-up).
Without either, one plain line per session event on stderr (never an exception repr).

Ending: with ``once`` a normal close (the server ended the stream) ends the session.  Otherwise
the transport reconnects up to ``reconnect`` times in a row (:func:`ddms.feeds.retry_policy`
states the policy; the first retry's line states it to the user), then the session ends: as a
stream the server ended (exit 0) when the last connection was closed normally, else as a lost
feed (exit 3).

Checkpoints (``checkpoint``: a folder): the engine's and the feed's state every
``checkpoint_every`` messages and at the end, restored when the monitor starts again with the
same folder (:mod:`ddms.feeds.checkpoints` says what is saved and how a restored feed resumes).

Strategy orders (``LiveContext.orders``) are drained after each engine update and go to the
display's orders panel, ``order`` JSON events, or stderr lines, and to ``orders_log`` (CSV) when
given -- never onto the display's own stream, where they would garble it.

MULTI -- several connections, one engine (``ddms monitor URL URL ...``, or one Binance feed on a
bare ``/stream`` with more symbols than a connection carries: ``max_streams``, Binance's 1,024
streams, when the monitor opens one more connection to the same URL per share of symbols by
itself).  The first URL's :class:`Monitor` (the root) owns the engine, the strategy and the
display; each other connection is a peer :class:`Monitor` (its own client, venue session,
checks, resyncs, reconnects and ``--record`` file), so a fault on one connection is detected,
reported and recovered on it alone while the others go on.  Every connection must be a venue
session (Kraken, OKX, Coinbase, Binance naming its symbols).  The root takes the records of
every queue as they come and applies them in receive order (:meth:`Monitor._take_ready`: by
receive time, each connection's own order kept), each connection's rows renumbered onto one
sequence of engine lines, one ``Engine.apply`` per drained round.  Symbols are keyed as their
venue spells them; when two venues spell one alike (Binance spot and USD-M ``BTCUSDT``) both are
keyed ``VENUE:SYMBOL`` (``binance:BTCUSDT``, ``binance_futures:BTCUSDT``: the venue as cryptofeed
names it) in the engine's symbol column, the views, the summary and the display; the keys are
settled once every first connection has reported (their messages wait until then), and a
connection starting later keys only its own clashing symbols so.  One venue's symbol on two
connections is refused (one book per symbol).  The summary sums every connection's counters at
the top level, keys ``symbols`` as above (each with its ``symbol``, ``venue``, ``connection``),
and lists ``connections``; JSON events of a connection carry ``connection`` and ``venue``.
``--record FILE``: one recording per connection (a cryptofeed capture holds one venue): FILE,
then :func:`numbered_recording` names (``FILE``'s stem ``.2``, ``.3``, ...); ``ddms run --data
F1 --data F2`` merges them by receive time.  ``--checkpoint`` is refused (a checkpoint holds
one connection's position and line numbering).  Cost: one sort of each drained round's records
(O(r log r)) and a renumbering copy of the rows' line numbers.

Rates (``messages_per_s``, ``level_updates_per_s``) are over ``active_seconds``: from the first
message's receive time to the end of the last update, so connecting and waiting for the server do
not count.  Latency is measured from the transport's receive time (``perf_counter_ns`` right after ``recv``)
to the end of the engine update that applied the message (after its callbacks ran): the delay a
strategy callback sees, queueing included.  Kept for the last 2**17 depth messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import json
import math
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urljoin, urlsplit, urlunsplit

import numpy as np

from ddms.errors import DdmsError
from ddms.feeds.server import DEPTH_PATHS, NORMAL_CLOSE, ORDERS_PATH, ORDERS_SNAPSHOT_PATH
from ddms.feeds.transport import (
    DEFAULT_RETRIES,
    ClientConfig,
    Connected,
    Disconnected,
    Ended,
    FeedClient,
    Overflow,
    SnapshotReply,
)
from ddms.feeds.venue_session import (
    IN_STREAM_VENUES,
    FetchSnapshot,
    Recorder,
    SendText,
    VenueSession,
    binance_streams,
    binance_symbols,
    venue_from_url,
)
from ddms.io.actions import NeedSnapshot
from ddms.io.events import EventBatch, concat
from ddms.io.orderproto import OrderFeed
from ddms.io.orderrec import OrderRecorder
from ddms.io.schema import COLUMNS
from ddms.io.venues.binance_book import FUTURES, MAX_STREAMS, SPOT, BinanceBook, Decoder, DepthUpdate

__all__ = ["Monitor", "MonitorConfig", "load_strategy"]

_LAT_CAP = 1 << 17
_REMOTE_REST = {"fstream.binance.com": (FUTURES, "https://fapi.binance.com"),
                "stream.binance.com": (SPOT, "https://api.binance.com"),
                "data-stream.binance.vision": (SPOT, "https://api.binance.com")}


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    """``url`` of the feed; ``views``: an .sql/.m3 file (None: book only); ``strategy``: a
    registered strategy name (its own program when ``views`` is None), ``strategy_params`` its
    parameters; ``json``: JSON lines instead of the display; ``once``: stop when the
    server ends the stream normally; ``reconnect``: reconnect attempts in a row before giving up
    (None: forever; see :func:`ddms.feeds.transport.retry_policy`); ``orders_log``: a CSV file
    receiving every strategy action; ``snapshot_url``/``market``/``protocol`` override what the
    server advertises; ``display``: draw the rich display (default: when stdout is a terminal).
    Several connections (MULTI in the module docstring): ``urls`` the URLs after ``url``;
    ``symbols`` the first connection's symbols and ``peer_symbols`` the others' (in order;
    missing: ``symbols``); ``symbols_shared``: ``symbols`` is for every URL, each following those
    its feed has; ``max_streams``: streams per Binance connection (a feed with more symbols on
    a bare ``/stream`` is split over connections)."""

    url: str
    views: str | None = None
    strategy: str | None = None
    json: bool = False
    once: bool = False
    snapshot_url: str | None = None
    market: str | None = None
    protocol: str | None = None
    display: bool | None = None
    watchdog: float = 30.0
    queue_size: int = 1024
    overflow_wait: float = 1.0
    reconnect: int | None = DEFAULT_RETRIES
    orders_log: str | None = None
    brokers: int = 10
    max_batch: int = 1024
    strategy_params: tuple[tuple[str, Any], ...] = ()
    symbols: tuple[str, ...] = ()
    record: str | None = None
    checkpoint: str | None = None
    checkpoint_every: int = 10_000
    checkpoint_keep: int = 2
    urls: tuple[str, ...] = ()
    peer_symbols: tuple[tuple[str, ...], ...] = ()
    symbols_shared: bool = False
    max_streams: int = MAX_STREAMS


class Monitor:
    """One monitoring session; :meth:`run` returns the summary dict."""

    def __init__(self, config: MonitorConfig, out: TextIO | None = None, engine: Any = None) -> None:
        self.config = config
        self.out = out or sys.stdout
        parts = urlsplit(config.url)
        self.host = parts.hostname or ""
        self.protocol = config.protocol or ("orders" if parts.path.rstrip("/") == ORDERS_PATH else None)
        self.market = config.market or (_REMOTE_REST[self.host][0] if self.host in _REMOTE_REST else None)
        self.advertised_snapshot: str | None = None
        self.book: BinanceBook | OrderFeed | None = None
        self.engine = engine
        self.relmap = None
        self._pre: list[tuple[int, bytes]] = []     # messages before the protocol/market is known
        self._decoder = Decoder()
        self._lat = np.zeros(_LAT_CAP, np.int64)
        self._nlat = 0
        self._lat_pending: list[int] = []
        self._snap_inflight = False
        self._snap_retries = 0
        self.recent: deque[str] = deque(maxlen=8)
        self.problems = 0
        self.events: list[str] = []
        self.end_reason = ""
        self.client: FeedClient | None = None
        self.t0 = time.perf_counter()
        self.strategy_obj: Any = None
        self._runs = 0
        self._t_first = 0               # receive time of the first message (perf_counter_ns)
        self._t_last = 0                # end of the last processed run
        self._resyncs_seen = 0
        self._checked_base = 0
        self.strategy_ctx: Any = None
        self.session: VenueSession | None = None     # a multi-symbol venue feed (see venue_session.py)
        self.recorder: Recorder | OrderRecorder | None = None
        self._record_file: Any = None                # --record's file (binary)
        self._record_resume: dict[str, Any] | None = None   # the recording's counts at a restored checkpoint
        self._wall0 = time.time_ns() - time.perf_counter_ns()    # perf_counter_ns -> unix ns
        self._lat_sym: list[tuple[int, str]] = []
        self._yield_now = False                      # a subscription change waits to be sent
        self._snap_syms: dict[str, str] = {}         # snapshot URL in flight -> symbol
        # several connections (MULTI in the module docstring): the first URL's monitor (the root)
        # owns the engine and drives the others (its peers), which feed it their rows
        self.parent: Monitor | None = None
        self.peers: list[Monitor] = []
        self.index = 1                  # the connection's number (1: the root)
        self.label: str | None = None   # the venue (VenueSession.label) once the session started
        self.names: dict[str, str] = {}     # symbol -> its key in views and the summary (VENUE:SYMBOL on a clash)
        self.ended = False
        self.started = False            # the connection reported its first control record
        self._reader: asyncio.Task | None = None
        self._getter: asyncio.Task | None = None
        self._held: list[tuple[int, Any]] = []      # records waiting for every first connection (MULTI)
        self._key = 0                   # running maximum of the receive times taken (the merge key)
        self._gline = 0                 # engine lines handed out over every connection (MULTI)
        self._named = False             # the symbols' keys are settled (every first connection reported)
        if config.urls and config.checkpoint:
            raise DdmsError("--checkpoint with several URLs: a checkpoint holds one feed's position; run one "
                            "monitor per URL, each with its own --checkpoint DIR")
        if engine is None and config.views:
            from ddms.runtime.engine import Engine
            self.engine = Engine(config.views)
        self.recent_orders: deque[str] = deque(maxlen=_ORDERS_SHOWN)
        self._orders_seen = 0           # strategy actions already shown/logged
        self._orders_log: TextIO | None = None
        self.checkpoints: Any = None            # --checkpoint (see ddms.feeds.checkpoints)
        if config.checkpoint:
            if config.strategy and self.engine is None:
                import strategies
                self.engine = strategies.get(config.strategy, dict(config.strategy_params)).make_engine()
            from ddms.feeds.checkpoints import MonitorCheckpoints
            # restored before the strategy attaches: it finds its saved state in the engine
            self.checkpoints = MonitorCheckpoints(config.checkpoint, self.engine, every=config.checkpoint_every,
                                                  keep=config.checkpoint_keep)
        if config.strategy:
            ck = self.checkpoints
            if ck is not None and ck.restored_from is not None and "strategy" not in self.engine.restored:
                raise DdmsError(f"--strategy {config.strategy}: the checkpoint {ck.restored_from} holds no strategy "
                                "state (taken without --strategy): restart without --strategy, or start a new "
                                "session (another --checkpoint DIR)")
            self.strategy_obj, self.engine, self.strategy_ctx = load_strategy(
                config.strategy, self.engine, dict(config.strategy_params))
            if self.checkpoints is not None:
                if not self.strategy_obj.checkpointable:
                    raise DdmsError(f"--checkpoint with --strategy {config.strategy}: the strategy defines no "
                                    "state() -> dict and restore(state), so its state cannot be checkpointed "
                                    "(see strategies.api)")
                self._orders_seen = len(self.strategy_ctx.orders)   # restored orders were shown before
                if self.checkpoints.restored_from is None:          # the strategy's set-up took engine lines
                    self.checkpoints.base = self.engine.position
        if config.orders_log:
            if not config.strategy:
                raise DdmsError("--orders-log needs --strategy")
            try:
                self._orders_log = open(config.orders_log, "w", encoding="utf-8", newline="")
            except OSError as e:
                raise DdmsError(f"--orders-log {config.orders_log}: cannot write: {e.strerror or e}") from None
            self._orders_csv = csv.writer(self._orders_log)
            self._orders_csv.writerow(ORDERS_LOG_COLUMNS)
            self._orders_log.flush()
        if config.record:
            self._open_record_file(config.record)
        self._symbol_rows = False   # the views' bids/asks carry a symbol column (every symbol of a session)
        if self.engine is not None:
            self.relmap = self.engine.relmap(("bids", "asks"))
            self._symbol_rows = any(len(s.columns) > len(COLUMNS) for s in self.engine.program.streams
                                    if s.name.lower() in ("bids", "asks"))
            if config.json:
                for name in self.engine.watchable():
                    self.engine.on(name, self._print_change)
        for k, url in enumerate(config.urls):
            syms = config.peer_symbols[k] if k < len(config.peer_symbols) else config.symbols
            self._add_peer(url, syms, config.symbols_shared)

    # -- several connections (MULTI) -------------------------------------------------------------
    @property
    def root(self) -> Monitor:
        return self.parent if self.parent is not None else self

    @property
    def multi(self) -> bool:
        """More than one connection feeds the engine (several URLs, or a split Binance feed)."""
        return bool(self.root.peers)

    def conns(self) -> list[Monitor]:
        """Every connection's monitor, the root first."""
        r = self.root
        return [r, *r.peers]

    def _add_peer(self, url: str, symbols: tuple[str, ...], shared: bool) -> Monitor:
        """A monitor of one more connection, feeding this (root) monitor's engine: no views,
        strategy, orders log or checkpoint of its own; ``--record FILE`` goes to FILE with the
        connection's number before its suffix (``session.rec``: ``session.2.rec``, ...).  Started
        at once when the session runs already (a split)."""
        k = len(self.peers) + 2
        c = self.config
        cfg = replace(c, url=url, urls=(), peer_symbols=(), views=None, strategy=None, strategy_params=(),
                      orders_log=None, checkpoint=None, symbols=tuple(symbols), symbols_shared=shared,
                      record=numbered_recording(c.record, k) if c.record else None)
        peer = Monitor(cfg, out=self.out)
        peer.parent, peer.index, peer._symbol_rows = self, k, self._symbol_rows
        self.peers.append(peer)
        if self.client is not None:         # the session runs: connect now
            peer._start_client()
        return peer

    def _start_client(self) -> None:
        c = self.config
        self.client = FeedClient(ClientConfig(c.url, queue_size=c.queue_size, watchdog=c.watchdog, once=c.once,
                                              overflow_wait=c.overflow_wait, max_retries=c.reconnect))
        self._reader = asyncio.create_task(self.client.run())

    def _split(self, syms: list[str]) -> list[str]:
        """A Binance feed on a bare ``/stream`` with more symbols than one connection carries
        (``max_streams``, Binance's 1,024 streams): this connection keeps the first share and a
        peer connection to the same URL follows each other share (equal shares of at most
        ``max_streams`` symbols, in the feed's order).  Refused with ``--checkpoint`` (one
        connection's position per checkpoint)."""
        c = self.config
        cap = c.max_streams
        if len(syms) <= cap or binance_streams(c.url):
            return syms
        if self.root.config.checkpoint:
            raise DdmsError(f"{c.url}: {len(syms):,} symbols, more than one Binance connection carries ({cap} "
                            "streams), so the monitor would open several connections, and --checkpoint follows one: "
                            f"choose at most {cap} with --symbols, or run without --checkpoint")
        n = -(-len(syms) // cap)
        size = -(-len(syms) // n)
        shares = [syms[i:i + size] for i in range(0, len(syms), size)]
        root = self.root
        for share in shares[1:]:
            root._add_peer(c.url, tuple(share), False)
        self._note("split", f"{len(syms):,} symbols over {len(shares)} connections of at most {cap} streams "
                   f"({', '.join(str(len(x)) for x in shares)} symbols)", symbols=len(syms),
                   connections=len(shares), max_streams=cap)
        return shares[0]

    def _settle_names(self) -> None:
        """Key every followed symbol (root; once every first connection reported, and for a
        connection starting later): the symbol as its venue spells it, or ``VENUE:SYMBOL`` when
        two venues spell it alike (the key in the engine's symbol column, the summary's
        ``symbols`` and the display).  A symbol followed twice on one venue is refused (one book
        per symbol).  A connection starting after the keys were settled keeps the keys given:
        only its own clashing symbols take the ``VENUE:`` form."""
        by_sym: dict[str, dict[str, Monitor]] = {}
        for m in self.conns():
            if m.session is None:
                continue
            for sym in m.session.symbols:
                other = by_sym.setdefault(sym, {}).get(m.label or "")
                if other is not None and other is not m:
                    raise DdmsError(f"{sym} of {m.label} is followed on two connections ({other.config.url} and "
                                    f"{m.config.url}): one book per symbol; choose each connection's symbols with "
                                    "--symbols (once per URL)")
                by_sym[sym][m.label or ""] = m
        for m in self.conns():
            if m.session is None:
                continue
            for sym in m.session.symbols:
                if sym in m.names and self._named:
                    continue
                clash = len(by_sym[sym]) > 1
                m.names[sym] = f"{m.label}:{sym}" if clash else sym
        total = sum(len(m.session.symbols) for m in self.conns() if m.session is not None)
        if self.engine is not None and total > 1 and not self._symbol_rows:
            raise DdmsError(f"--views/--strategy on {total} symbols of {len(self.conns())} connections: the bids/asks "
                            "relations hold one book; declare a symbol column (symbol VARCHAR) in the views' streams, "
                            "or choose one symbol with --symbols")

    def _check(self) -> None:
        """Invariants of several connections: every followed symbol has one key, no two keys
        alike; the lines handed out are the engine's (once every connection applies through
        the root); each session's own invariants."""
        keys: list[str] = []
        for m in self.conns():
            if m.session is None:
                continue
            m.session._check()
            if self._named and self.multi:
                assert set(m.names) == set(m.session.symbols), (m.index, m.names)
                keys += [m.names[x] for x in m.session.symbols]
        assert len(keys) == len(set(keys)), keys
        if self.multi and self.engine is not None and self._named:
            assert self._gline == self.engine.position, (self._gline, self.engine.position)

    def _take_rows(self) -> EventBatch | None:
        """This connection's engine rows since the last call (its session's batch, with each
        symbol's key in the symbol column), renumbered onto the root's engine lines after every
        line handed out so far over all connections (MULTI).  O(rows)."""
        sess = self.session
        if sess is None:
            return None
        b = sess.take_batch(self._symbol_rows, self.names)
        if b is None:
            return None
        root = self.root
        n = b.last_line - b.first_line + 1
        line = b.line - b.first_line + (root._gline + 1)
        b = EventBatch(b.rel, b.sign, b.cols, line, root._gline + 1, root._gline + n, b.skipped, b.error, b.recv)
        root._gline += n
        return b

    def _stamp_latency(self) -> None:
        """The latency of the messages fed since the last call, as of now (after the engine update)."""
        pend = self._lat_sym
        if not pend:
            return
        sess = self.session
        now = time.perf_counter_ns()
        n = self._nlat
        for r, sym in pend:
            self._lat[n % _LAT_CAP] = now - r
            if sess is not None:
                sess.record_latency(sym, now - r)
            n += 1
        self._nlat = n
        pend.clear()

    def _take_ready(self) -> list[tuple[int, Monitor, Any]]:
        """Every record the connections' queues hold now (MULTI), in receive order: each keyed
        by its receive time (a message, a snapshot reply) or, for a control record, the
        connection's running maximum, so that each connection keeps its own order; ties in
        connection order.  Until every first connection has reported its first record, a
        connection's messages (and what follows them) are held, so that the symbols' keys are
        settled before any row is made.  O(records log records)."""
        root = self.root
        cap = root.config.max_batch
        out: list[tuple[int, Monitor, Any]] = []
        settled = root._named
        for m in self.conns():
            if settled and m._held:         # the keys are settled: what waited goes first
                out += [(k, m, item) for k, item in m._held]
                m._held = []
            if m.ended:
                continue
            items: list[Any] = []
            g = m._getter
            if g is not None and g.done():
                m._getter = None
                items.append(g.result())
            q = m.client.queue if m.client is not None else None
            while q is not None and len(items) < cap and not q.empty():
                items.append(q.get_nowait())
            for item in items:
                t = type(item)
                if t is tuple:
                    m._key = max(m._key, item[0])
                elif t is SnapshotReply:
                    m._key = max(m._key, item.recv_ns)
                if not settled and (m._held or t is tuple or t is SnapshotReply):
                    m._held.append((m._key, item))
                    continue
                out.append((m._key, m, item))
        idx = {id(m): i for i, m in enumerate(self.conns())}
        out.sort(key=lambda x: (x[0], idx[id(x[1])]))   # stable: each connection's order kept
        return out

    async def _wait_any(self) -> None:
        """Wait until some connection's queue has a record (MULTI): one pending ``get`` per
        connection, kept between calls (its record is taken first next time)."""
        if self._named and any(m._held for m in self.conns()):
            return
        waits = []
        for m in self.conns():
            if m.ended or m.client is None:
                continue
            if m._getter is None:
                if not m.client.queue.empty():
                    return
                m._getter = asyncio.ensure_future(m.client.queue.get())
            waits.append(m._getter)
        if waits and not any(w.done() for w in waits):
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)

    def _multi_step(self) -> None:
        """One drained round of every connection (MULTI): records in receive order, each run of
        one connection's records fed to its session, the rows of every run handed to the one
        engine in that order (one ``apply``), then latencies, reports and orders."""
        items = self._take_ready()
        if not items:
            return
        if self._t_first == 0:
            self._t_first = next((it[0] for _, _, it in items if type(it) is tuple), 0)
        batches: list[EventBatch] = []
        touched: dict[int, Monitor] = {}
        i = 0
        while i < len(items):
            m = items[i][1]
            j = i
            while j < len(items) and items[j][1] is m:
                j += 1
            m._process([it for _, _, it in items[i:j]])
            touched[id(m)] = m
            b = m._take_rows()
            if b is not None:
                batches.append(b)
            i = j
        if batches and self.engine is not None:
            self.engine.apply(batches[0] if len(batches) == 1 else concat(batches), self.relmap)
        for m in touched.values():
            m._stamp_latency()
            m._drain_reports()
        if self.strategy_ctx is not None:
            self._drain_orders()
        if not self._named and all(m.started for m in self.conns()):
            self._named = True      # every first connection reported: key the symbols, then make rows
            self._settle_names()

    def _process(self, items: list[Any]) -> None:
        """One connection's records in order (MULTI): messages to its session (each run
        together: the venue's chunk lane), control records to :meth:`_on_control`
        (an ended connection is marked ended).  A connection that is not a venue session (our
        order protocol, a Binance feed naming no symbol) is refused: only sessions' rows carry
        their symbol."""
        run: list[tuple[int, bytes]] = []
        for item in items:
            if type(item) is tuple:
                if self.session is None:
                    raise DdmsError(f"{self.config.url}: several connections feed one engine only from venue sessions "
                                    "(Kraken, OKX, Coinbase, Binance naming its symbols); this feed is "
                                    f"{self.protocol or 'not recognised'}: monitor it alone")
                run.append(item)
                continue
            if run:
                self._feed_run(run)
                run = []
            if self._on_control(item):
                self.ended = True
        if run:
            self._feed_run(run)

    # -- output -----------------------------------------------------------------------------
    def _emit(self, obj: dict) -> None:
        self.out.write(json.dumps(obj, default=str) + "\n")

    def _print_change(self, view: str, key: tuple, old: float, new: float, position: int) -> None:
        ev = {"event": "change", "view": view, "key": list(key), "old": _num(old), "new": _num(new), "line": position}
        if not self._symbol_rows:       # the views follow one symbol (_start_session, _settle_names)
            m = next((m for m in self.conns() if m.session is not None), None)
            if m is not None:
                ev["symbol"] = m.session.symbols[0]
                if self.multi and m.label:
                    ev["venue"] = m.label
        self._emit(ev)

    def _note(self, kind: str, say: str | None = None, **fields: Any) -> None:
        """Record a session event: one JSON line with ``--json``, else one line of text (``say``,
        or the fields) in the display's event list or on stderr."""
        text = say if say is not None else f"{kind}: " + ", ".join(f"{k}={v}" for k, v in fields.items())
        root = self.root
        if self.multi:      # which connection (and venue) said it
            fields = {**fields, "connection": self.index, **({"venue": self.label} if self.label else {})}
            text = f"[{self.index}{' ' + self.label if self.label else ''}] {text}"
        root.recent.append(text)
        if self.config.json:
            self._emit({"event": kind, **fields})
        elif not root._display_on:
            print(f"monitor: {text}", file=sys.stderr, flush=True)

    def _drain_orders(self) -> None:
        """Route the strategy's new actions (``LiveContext.orders`` since the last call) to where
        they belong: the orders log (``--orders-log``), JSON lines (``--json``), the display's
        orders panel, or -- with neither a display nor JSON -- one line each on stderr.  Never
        on the display's stream: order lines printed there would garble the live display.
        O(new actions)."""
        ctx = self.strategy_ctx
        if ctx is None or len(ctx.orders) == self._orders_seen:
            return
        new = ctx.orders[self._orders_seen:]
        self._orders_seen = len(ctx.orders)
        for r in new:
            if self._orders_log is not None:
                self._orders_csv.writerow(_order_row(r))
            if self.config.json:
                self._emit({"event": "order", "line": r.line, "time": r.time, "action": r.action,
                            "order_id": r.order_id, "side": r.side, "price": _num(r.price), "qty": r.qty})
            elif self._display_on:
                self.recent_orders.append(_order_text(r))
            elif self._orders_log is None:
                print(f"monitor: order: {_order_text(r)}", file=sys.stderr, flush=True)
        if self._orders_log is not None:
            self._orders_log.flush()

    def _drain_reports(self) -> None:
        book = self.session.core if self.session is not None else self.book
        if book is None:
            return
        syms = self.session.stats if self.session is not None else {}
        while book.reports:
            e = book.reports.popleft()
            self.problems += 1
            extra = {}
            head = e.reason.split(": ", 1)[0]
            if head in syms:
                extra["symbol"] = head
            self._note("problem", f"problem at message {e.line:,}: {e.reason}", message=e.line, reason=e.reason,
                       text=e.text[:200], **extra)

    # -- the protocol core ------------------------------------------------------------------
    def _make_book(self) -> None:
        if self.protocol == "orders":
            self.book = OrderFeed(brokers=self.config.brokers, source=self.config.url)
        else:
            self.book = BinanceBook(self.market or FUTURES, source=self.config.url)
        if self.checkpoints is not None:
            said = self.checkpoints.restore_core(self.book)
            if said:
                if isinstance(self.recorder, OrderRecorder):    # a replay restarts its decoder here too
                    self.recorder.restarted(time.time(), f"restored {self.checkpoints.restored_from.name}")
                self._note("restored", said, checkpoint=str(self.checkpoints.restored_from),
                           line=self.engine.position)
                if self.book.needs_snapshot:
                    self._request_snapshot("restored a checkpoint taken while waiting for a snapshot")
        pre, self._pre = self._pre, []
        for recv, data in pre:          # recorded when they were received
            self._feed(recv, data, record=False)

    def _try_detect(self, data: bytes) -> None:
        """Learn the protocol/market from a message when nothing said it."""
        if self.protocol is None:
            head = data[:200]
            self.protocol = "orders" if (b'"seq"' in head and b'"type"' in head) else "binance"
        if self.protocol == "binance" and self.market is None:
            try:
                rec = self._decoder.decode(data)
            except DdmsError:
                return
            if isinstance(rec, DepthUpdate):
                self.market = FUTURES if rec.prev_final_id is not None else SPOT
        if self.protocol == "orders" or self.market is not None:
            self._make_book()

    def _wall(self, perf_ns: int) -> float:
        return (perf_ns + self._wall0) / 1e9

    def _feed(self, recv: int, data: bytes, record: bool = True) -> None:
        if self.recorder is not None and record:
            self.recorder.received(self._wall(recv), data)
        if self.session is not None:
            acts, sym = self.session.feed(data)
            if sym is not None:
                self._lat_sym.append((recv, sym))
            if acts:
                self._session_act(acts)
            return
        book = self.book
        if book is None:
            self._pre.append((recv, data))
            if len(self._pre) > 100_000:
                raise DdmsError(f"{self.config.url}: 100,000 messages and no depth message: cannot tell the market "
                                "(give --market futures|spot)")
            self._try_detect(data)
            return
        before = book.depth_events if type(book) is BinanceBook else book.messages
        actions = book.feed_message(data)
        after = book.depth_events if type(book) is BinanceBook else book.messages
        if after != before:
            self._lat_pending.append(recv)
        if actions:
            self._act(actions)

    def _feed_run(self, run: list[tuple[int, bytes]]) -> None:
        """A drained run of a venue session's messages: recorded one by one, then fed together
        (:meth:`VenueSession.feed_many`: the venue's chunk lane), as :meth:`_feed` per message
        would (the same counters, events and actions; the actions are performed after the run)."""
        sess = self.session
        assert sess is not None
        if self.recorder is not None:
            for recv, data in run:
                self.recorder.received(self._wall(recv), data)
        acts, syms = sess.feed_many([data for _, data in run])
        for (recv, _), sym in zip(run, syms, strict=True):
            if sym is not None:
                self._lat_sym.append((recv, sym))
        if acts:
            self._session_act(acts)

    def _session_act(self, acts: list[SendText | FetchSnapshot]) -> None:
        """Perform a venue session's actions: send a subscription change, fetch a symbol's REST
        snapshot.  Each is reported (the message that caused it and why)."""
        client = self.client
        for a in acts:
            if type(a) is SendText:
                self._note("subscription", f"sending {a.text[:120]} ({a.reason})", text=a.text, reason=a.reason)
                if client is not None and client.send(a.text, a.delay):
                    self._yield_now = True       # the send task runs at the next await
                    if self.recorder is not None:
                        self.recorder.sent(self.config.url, time.time(), a.text)
            elif client is not None:
                self._snap_syms[a.url] = a.symbol
                self._note("snapshot_request", f"asking for a snapshot of {a.symbol} ({a.reason}): {a.url}",
                           symbol=a.symbol, reason=a.reason, url=a.url)
                client.request_snapshot(a.url, 0.0)

    def _start_session(self, h: dict[str, str]) -> None:
        """Start a multi-symbol venue session when the handshake headers or the URL say the feed
        is one (Kraken, OKX, Coinbase, Binance with several symbols)."""
        c = self.config
        venue = h.get("x-ddms-protocol") or c.protocol
        syms = [s for s in h.get("x-ddms-symbols", "").split(",") if s]
        if venue == "binance" and not syms and (c.record or self.multi):
            # a recorded Binance feed whose server names no symbol (an hftbacktest capture of one
            # symbol): a session of its one symbol, which numbers and applies the engine lines as
            # ddms run reads the recording, so the recording and the checkpoints join up
            syms = binance_symbols(c.url, h.get("x-ddms-snapshot")) or list(c.symbols)
        if venue is None or (venue == "binance" and not syms):
            venue, syms = venue_from_url(c.url)
        if venue not in (*IN_STREAM_VENUES, "binance") or (venue == "binance" and not syms):
            return
        if c.symbols:
            want = [s.upper() for s in c.symbols]
            unknown = [s for s in want if syms and s not in syms]
            if c.symbols_shared:        # one --symbols for several URLs: each follows those its server has
                want = [s for s in want if s not in unknown]
                if not want:
                    raise DdmsError(f"{c.url}: none of --symbols {','.join(c.symbols)} is on this feed (it has "
                                    f"{', '.join(syms)}); give --symbols once per URL")
            elif unknown:
                raise DdmsError(f"--symbols: {', '.join(unknown)} not on this feed (it has {', '.join(syms)})")
            syms = want
        if venue == "binance":
            syms = self._split(syms)
        self.protocol = venue
        self.market = h.get("x-ddms-market") or c.market or self.market
        kinds = [k for k in h.get("x-ddms-streams", "").split(",") if k]
        self.session = VenueSession(venue, syms, c.url, market=self.market, snapshot=h.get("x-ddms-snapshot"),
                                    stream_kinds=kinds,    # a ddms replay (X-DDMS-*) has no message rate limit
                                    subscribe_interval=0.0 if "x-ddms-protocol" in h else 0.25,
                                    max_streams=c.max_streams)
        self.label = self.session.label
        self.session.want = None if self._symbol_rows else syms[0]   # the symbol a replay keeps (None: all)
        if self.root._named:        # a connection starting after the others: key its symbols now
            self.root._settle_names()
        if self.engine is not None and len(syms) > 1 and not self._symbol_rows:
            raise DdmsError(f"--views/--strategy on {len(syms)} symbols: the bids/asks relations hold one book; "
                            f"choose one with --symbols (this feed: {', '.join(syms)}), or declare a symbol column "
                            "(symbol VARCHAR) in the views' streams")
        if self.checkpoints is not None:
            said = self.checkpoints.restore_session(self.session)
            if said:
                self._note("restored", said, checkpoint=str(self.checkpoints.restored_from),
                           line=self.engine.position)

    def _resync_book(self, reason: str) -> None:
        """The one book resyncs (:meth:`resync` of its core); an order-protocol recording says so
        where it happened, so that a replay resyncs there too."""
        assert self.book is not None
        if isinstance(self.recorder, OrderRecorder):
            self.recorder.resync(time.time(), reason)
        self._act(self.book.resync(reason))

    def _act(self, actions: tuple[NeedSnapshot, ...]) -> None:
        for a in actions:
            if isinstance(a, NeedSnapshot):
                self._request_snapshot(a.reason)

    def _snapshot_url(self) -> str:
        if self.config.snapshot_url:
            return self.config.snapshot_url
        parts = urlsplit(self.config.url)
        http = urlunsplit(("https" if parts.scheme == "wss" else "http", parts.netloc, parts.path, parts.query, ""))
        if self.advertised_snapshot:
            return urljoin(http, self.advertised_snapshot)
        if self.protocol == "orders":
            return urljoin(http, ORDERS_SNAPSHOT_PATH)
        market = self.market or FUTURES
        symbol = (getattr(self.book, "symbol", None) or "").upper()
        if self.host in _REMOTE_REST:
            base = _REMOTE_REST[self.host][1]
            return f"{base}{DEPTH_PATHS[market]}?symbol={symbol}&limit={1000 if market == FUTURES else 5000}"
        return urljoin(http, f"{DEPTH_PATHS[market]}?symbol={symbol}&limit=1000")

    def _request_snapshot(self, reason: str) -> None:
        if self._snap_inflight or self.client is None:
            return
        self._snap_inflight = True
        delay = 0.0 if self._snap_retries == 0 else min(2.0, 0.05 * 2 ** (self._snap_retries - 1))
        url = self._snapshot_url()
        later = f" in {delay:g} s" if delay else ""
        self._note("snapshot_request", f"asking for a snapshot{later} ({reason}): {url}", reason=reason, url=url,
                   delay=round(delay, 3))
        self.client.request_snapshot(url, delay)

    def _on_snapshot(self, rep: SnapshotReply) -> None:
        if self.session is not None:
            sym = self._snap_syms.pop(rep.url, None)
            if sym is None:
                return
            if rep.body is None:
                self._note("snapshot_error", f"snapshot request of {sym} failed: {rep.error}", symbol=sym,
                           url=rep.url, reason=rep.error)
                self._snap_syms[rep.url] = sym
                if self.client is not None:
                    self.client.request_snapshot(rep.url, 0.5)
                return
            stamp = Recorder.stamp(self._wall(rep.recv_ns))    # the time recorded: a replay makes the same rows
            if self.recorder is not None:
                self.recorder.rest(rep.url, stamp, rep.body)
            acts = self.session.apply_snapshot(sym, rep.body, int(float(stamp) * 1e9))
            synced = self.session._synced(sym)
            self._note("snapshot", f"snapshot of {sym} {'applied; in sync' if synced else 'not usable'}", symbol=sym,
                       url=rep.url, synced=synced)
            if acts:
                self._session_act(acts)
            return
        self._snap_inflight = False
        book = self.book
        if book is None:
            return
        if rep.body is not None and self.recorder is not None:     # recorded where it is applied
            self.recorder.rest(rep.url, self._wall(rep.recv_ns), rep.body)
        if rep.body is None:
            self._snap_retries += 1
            self._note("snapshot_error", f"snapshot request failed: {rep.error}", url=rep.url, reason=rep.error)
            if book.needs_snapshot:
                self._request_snapshot("previous snapshot request failed")
            return
        rejected = book.snapshots_rejected
        if isinstance(book, BinanceBook):
            actions = book.apply_snapshot(rep.body, time.time_ns())
        else:
            actions = book.apply_snapshot(rep.body)
        self._snap_retries = self._snap_retries + 1 if book.snapshots_rejected > rejected else 0
        applied = book.snapshots_rejected == rejected
        self._note("snapshot", f"snapshot {'applied' if applied else 'not usable (asking again)'}"
                   f"{'; the book is in sync' if book.synced else ''}", url=rep.url, applied=applied,
                   synced=book.synced)
        if actions:
            self._act(actions)

    def _on_control(self, item: Any) -> bool:
        """Handle a control record; True when the session (MULTI: this connection) is over."""
        self.started = True
        t = type(item)
        if t is Connected:
            h = {k.lower(): v for k, v in item.headers.items()}
            if not self.config.protocol and "x-ddms-protocol" in h:
                self.protocol = h["x-ddms-protocol"]
            if not self.config.market and "x-ddms-market" in h:
                self.market = h["x-ddms-market"]
            if "x-ddms-snapshot" in h:
                self.advertised_snapshot = h["x-ddms-snapshot"]
            if self.session is None and item.number == 1:
                self._start_session(h)
            again = f" (connection {item.number})" if item.number > 1 else ""
            self._note("connected", f"connected to {item.url}{again}", number=item.number, url=item.url)
            self._open_recording(item.url)
            if self.session is not None:
                self._session_act(self.session.on_connect(item.number))
            elif self.book is None and self.protocol is not None and (self.protocol == "orders" or self.market):
                self._make_book()
            elif self.book is not None and item.number > 1:
                self._resync_book(f"reconnected (connection {item.number}): messages may have been lost")
        elif t is Disconnected:
            self._note("disconnected", self._say_disconnected(item), code=item.code, reason=item.reason,
                       retry_in=item.retry_in, attempt=item.attempt, attempts=item.attempts)
        elif t is Overflow:
            self._note("overflow", f"fell behind the feed: {item.dropped:,} messages dropped; resynchronizing",
                       dropped=item.dropped)
            if self.session is not None:
                self._session_act(self.session.resync_all(f"the consumer did not keep up: {item.dropped} messages "
                                                          "dropped"))
            elif self.book is not None:
                self._resync_book(f"the consumer did not keep up: {item.dropped} messages dropped")
        elif t is SnapshotReply:
            self._on_snapshot(item)
        elif t is Ended:
            self.end_reason = item.reason
            self._note("ended", f"stopped: {item.reason}", reason=item.reason, normal=item.normal)
            return True
        return False

    def _open_record_file(self, path: str) -> None:
        """Open ``--record``'s file: a new recording, or -- restoring a checkpoint taken while
        recording -- the same recording cut back to the checkpoint's position (what this process
        restored: the lines after it, written before the process died, were never part of the
        restored state) and continued there, so that the recording and every checkpoint keep
        joining up.  Refused (:class:`DdmsError`): a restored checkpoint taken without a
        recording, or a file that is not the checkpoint's recording up to its position."""
        ck = self.checkpoints
        saved = ck.recording if ck is not None else None
        if ck is None or ck.restored_from is None:
            try:
                self._record_file = open(path, "wb")
            except OSError as e:
                raise DdmsError(f"--record {path}: cannot write: {e.strerror or e}") from None
            return
        where = f"the checkpoint {ck.restored_from}"
        if saved is None:
            raise DdmsError(f"--record {path}: {where} was taken without --record, so no recording holds the session "
                            "before it: restart without --record, or start a new session (another --checkpoint "
                            "DIR) to record one whole")
        pos = saved["position"]
        offset, n = int(pos["offset"]), int(pos["last_len"])
        try:
            f = open(path, "r+b")
        except OSError as e:
            raise DdmsError(f"--record {path}: {where} continues the recording {saved['file']} at byte {offset:,}, "
                            f"which cannot be opened here ({e.strerror or e}): record to that file") from None
        f.seek(max(0, offset - n))
        last = f.read(n) if offset >= n else b""
        from ddms.io.cursor import position
        if offset < n or len(last) != n or position(path, 0, offset, last)["last"] != pos["last"]:
            f.close()
            raise DdmsError(f"--record {path}: not the recording {where} was taken with ({saved['file']}: "
                            f"{int(pos['line']):,} lines, {offset:,} bytes at the checkpoint); a session's "
                            "recording must be one file: record to that file")
        f.truncate(offset)
        f.seek(offset)
        self._record_file = f
        self._record_resume = {**pos, "last_bytes": last, "time": saved["time"], "subscribed": saved["subscribed"],
                               "connections": saved["connections"]}

    def _open_recording(self, url: str) -> None:
        """``--record``: the connection line (the venue appended when the URL does not say it); the
        order protocol is recorded in its own format (:mod:`ddms.io.orderrec`)."""
        if self._record_file is None:
            return
        if self.recorder is None:
            venue = self.protocol or "binance"
            if venue == "orders":       # our own format: the decoder's decisions too (ddms.io.orderrec)
                self.recorder = OrderRecorder(self._record_file, self.config.record or "", self.config.brokers,
                                              self._record_resume)
            else:
                if venue == "binance":
                    fut = (self.market or FUTURES) == FUTURES
                    venue = "binance_futures" if fut else "binance"
                self.recorder = Recorder(self._record_file, venue, self.config.record or "", self._record_resume)
        self.recorder.opened(url, time.time())

    def _say_disconnected(self, d: Disconnected) -> str:
        """One line for a lost connection or a failed attempt: what happened and what comes next
        (the policy is stated with the first attempt of a run)."""
        if d.connected and d.code == NORMAL_CLOSE:
            what = f"the server ended the stream normally ({d.reason})"
        elif d.connected:
            what = f"connection lost ({f'code {d.code}: ' if d.code is not None else ''}{d.reason})"
        else:
            what = f"connection attempt failed: {d.reason}"
        if d.retry_in is None:
            return f"{what}; no more reconnect attempts"
        of = f" of {d.attempts}" if d.attempts is not None else ""
        text = f"{what}; reconnect attempt {d.attempt}{of} in {d.retry_in:.1f} s"
        if d.attempt == 1:
            c = self.client.config if self.client is not None else ClientConfig(self.config.url)
            hints = [] if d.attempts is None else ["--reconnect forever never gives up"]
            if not self.config.once:
                hints.append("--once stops when the server ends the stream")
            text += f" (policy: {c.policy()}{'; ' if hints else ''}{', '.join(hints)})"
        return text

    def _flush_session(self) -> None:
        sess = self.session
        assert sess is not None
        # one batch, message by message (as ddms run reads the recording); with a symbol column when
        # the views' streams have one (every symbol's rows)
        b = sess.take_batch(self._symbol_rows, self.names)
        if b is not None and self.engine is not None:
            self.engine.apply(b, self.relmap)
        self._stamp_latency()
        if self.strategy_ctx is not None:
            self._drain_orders()
        self._drain_reports()

    def _flush(self) -> None:
        """Hand the queued events to the engine; record latencies."""
        if self.session is not None:
            self._flush_session()
            return
        book = self.book
        if book is not None and self.engine is not None:
            batch = book.take_events()
            if len(batch) or batch.last_line >= batch.first_line:
                self.engine.apply(batch, self.relmap)
        elif book is not None:
            book.discard_events()
        if book is not None and book.resyncs != self._resyncs_seen:
            self._resyncs_seen = book.resyncs
            self._checked_base = getattr(book, "bookticker_checked", 0)
        pend = self._lat_pending
        if pend:
            now = time.perf_counter_ns()
            n = self._nlat
            for r in pend:
                self._lat[n % _LAT_CAP] = now - r
                n += 1
            self._nlat = n
            pend.clear()
        if self.strategy_ctx is not None:      # after the latency stamp: logging is not the strategy's delay
            self._drain_orders()
        self._drain_reports()

    # -- the session ----------------------------------------------------------------------------
    @property
    def _display_on(self) -> bool:
        d = self.config.display
        return (self.out.isatty() and not self.config.json) if d is None else d

    async def run(self) -> dict[str, Any]:
        _warm_up()
        self.t0 = time.perf_counter()
        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.stop)
        for m in self.conns():
            m._start_client()
        display = _Display(self) if self._display_on else None
        try:
            if display is not None:
                display.start()
            multi_started = False
            while not all(m.ended for m in self.conns()):
                if self.peers:          # several connections (from the start, or since a split)
                    if not multi_started:
                        multi_started = True
                        self._gline = self.engine.position if self.engine is not None else 0
                    await self._wait_any()
                    self._multi_step()
                else:
                    await self._single_step()
                self._t_last = time.perf_counter_ns()
                if display is not None:
                    display.tick()
                await self._after_batch()
        finally:
            await self._close_all()
            with contextlib.suppress(NotImplementedError, RuntimeError):
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
            if display is not None:
                display.stop()
        return self.finish()

    async def _single_step(self) -> None:
        """One drained run of the one connection's queue (at most ``max_batch`` records), fed to
        the protocol core, then one engine update."""
        q = self.client.queue
        if self._getter is not None:     # not after a split: only MULTI waits with a pending get
            item = await self._getter
            self._getter = None
        else:
            item = await q.get()
        if self._t_first == 0 and type(item) is tuple:
            self._t_first = item[0]
        n = 0
        run: list[tuple[int, bytes]] = []    # a venue session's messages, fed together
        feed = self._feed
        while True:
            if type(item) is tuple:
                if self.session is not None:     # every venue session: its chunk lane
                    run.append(item)
                else:
                    feed(item[0], item[1])
            else:
                if run:
                    self._feed_run(run)
                    run = []
                if self._on_control(item):
                    self.ended = True
                    break
            n += 1
            if n >= self.config.max_batch or q.empty() or self.peers:
                break
            item = q.get_nowait()
        if run:
            self._feed_run(run)
        self._flush()
        if self.checkpoints is not None:
            if self.session is not None:
                self.checkpoints.after_flush(self.session, self.session.messages, self.recorder)
            elif self.book is not None:
                self.checkpoints.after_flush(self.book, self.book.messages, self.recorder)

    async def _close_all(self) -> None:
        """Stop every connection and wait (5 s at most) for their readers to end."""
        conns = self.conns()
        for m in conns:
            if m.client is not None:
                m.client.stop()
            if m._getter is not None and not m._getter.done():
                m._getter.cancel()
        deadline = time.monotonic() + 5.0
        for m in conns:
            reader, q = m._reader, m.client.queue if m.client is not None else None
            if reader is None:
                continue
            while not reader.done() and time.monotonic() < deadline:
                while q is not None and not q.empty():      # the reader may wait for room to say it ended
                    q.get_nowait()
                await asyncio.sleep(0.01)
            if not reader.done():
                reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _after_batch(self) -> None:
        """Called after each drained run of the queue.  Yields to the event loop every 64 runs so
        that the reader, pings and the watchdog keep running under sustained load (a subclass
        may await here, e.g. a strategy that places orders)."""
        self._runs += 1
        if not self._runs & 63 or self._yield_now:
            self._yield_now = False
            await asyncio.sleep(0)

    def stop(self) -> None:
        """Stop the session (Ctrl-C): the readers close the connections and end the queues."""
        for m in self.conns():
            if m.client is not None:
                m.client.stop()

    def finish(self) -> dict[str, Any]:
        """Print the final views (as ``ddms run --json``) and the summary line; return the
        summary."""
        self._drain_reports()
        self._drain_orders()
        if self.checkpoints is not None:
            self.checkpoints.write(self.session if self.session is not None else self.book, self.recorder)
        if self._orders_log is not None:
            self._orders_log.close()
        for m in self.conns():
            if m._record_file is not None:
                m._record_file.close()
        if self.engine is not None and self.config.json:
            from ddms.cli import _jsonable
            self.out.write(json.dumps({"line": self.engine.position,
                                       "views": {k: _jsonable(v) for k, v in self.engine.snapshot().items()}})
                           + "\n")
        s = self.summary()
        self.out.write(json.dumps(s) + "\n")
        self.out.flush()
        return s

    def latency_us(self) -> tuple[float | None, float | None]:
        n = min(self._nlat, _LAT_CAP)
        if n == 0:
            return None, None
        p50, p99 = np.percentile(self._lat[:n], [50, 99])
        return round(float(p50) / 1e3, 1), round(float(p99) / 1e3, 1)

    def summary(self) -> dict[str, Any]:
        """The counters so far (see the module docstring; MULTI: :meth:`_summary_multi`)."""
        return self._summary_multi() if self.multi else self._summary_one()

    def _summary_multi(self) -> dict[str, Any]:
        """The summary of several connections (MULTI in the module docstring): each
        connection's counters (:meth:`_summary_one`) summed at the top level (numbers; ``synced``
        when every connection is; ``unknown_fields`` and ``ignored`` merged), ``symbols`` keyed
        by each symbol's key (the venue's spelling, ``VENUE:SYMBOL`` on a clash) with its
        ``venue`` and ``connection``, ``connections`` (one entry per connection: URL, venue,
        its counters without ``symbols``), latency over every connection's messages, the rates
        over the session's active time."""
        conns = self.conns()
        parts = [m._summary_one() for m in conns]
        out: dict[str, Any] = {"event": "summary", "url": [m.config.url for m in conns],
                               "protocol": _one_or_list([m.protocol for m in conns]),
                               "market": _one_or_list([m.market for m in conns]),
                               "venues": list(dict.fromkeys(m.label for m in conns if m.label))}
        skip = {"event", "url", "protocol", "market", "venue", "position", "seconds", "active_seconds",
                "messages_per_s", "level_updates_per_s", "latency_p50_us", "latency_p99_us", "end", "symbols",
                "best_bid", "best_ask", "bookticker_checked_since_resync", "strategy"}
        for p in parts:
            for k, v in p.items():
                if k in skip:
                    continue
                if type(v) is int:
                    out[k] = out.get(k, 0) + v
                elif type(v) is bool:
                    out[k] = out.get(k, True) and v
                elif isinstance(v, dict):
                    d = out.setdefault(k, {})
                    for kk, vv in v.items():
                        d[kk] = d.get(kk, 0) + vv if type(vv) is int else vv
        syms: dict[str, Any] = {}
        for m, p in zip(conns, parts, strict=True):
            for sym, d in p.get("symbols", {}).items():
                syms[m.names.get(sym, sym)] = {**d, "symbol": sym, "venue": m.label, "connection": m.index}
        out["symbols"] = syms
        lats = [m._lat[:min(m._nlat, _LAT_CAP)] for m in conns]
        lat = np.concatenate(lats) if lats else np.zeros(0, np.int64)
        p50, p99 = (np.percentile(lat, [50, 99]) / 1e3).round(1).tolist() if len(lat) else (None, None)
        active = (self._t_last - self._t_first) / 1e9 if self._t_first and self._t_last > self._t_first else 0.0
        ends = [m.end_reason for m in conns if m.end_reason]
        lost = [e for e in ends if e.startswith("gave up")]
        out.update({"latency_p50_us": p50, "latency_p99_us": p99, "seconds": round(time.perf_counter() - self.t0, 3),
                    "active_seconds": round(active, 3),
                    "messages_per_s": round(out.get("messages", 0) / active) if active > 0 else None,
                    "level_updates_per_s": round((out.get("level_updates") or 0) / active) if active > 0 else None,
                    "end": "; ".join(dict.fromkeys(lost + ends)),
                    "connections": [{"connection": m.index, "url": m.config.url, "venue": m.label,
                                     "symbols": [m.names.get(x, x) for x in (m.session.symbols if m.session else ())],
                                     **{k: v for k, v in p.items() if k not in ("event", "url", "symbols")}}
                                    for m, p in zip(conns, parts, strict=True)]})
        if self.engine is not None:
            out["position"] = self.engine.position
        if "strategy" in parts[0]:
            out["strategy"] = parts[0]["strategy"]
        return out

    def _summary_one(self) -> dict[str, Any]:
        """The counters of this connection so far (see the module docstring)."""
        book = self.book
        seconds = time.perf_counter() - self.t0
        st = self.client.stats if self.client is not None else None
        out: dict[str, Any] = {"event": "summary", "url": self.config.url, "protocol": self.protocol,
                               "market": self.market}
        active = (self._t_last - self._t_first) / 1e9 if self._t_first and self._t_last > self._t_first else 0.0
        if self.session is not None:
            out.update(self.session.summary(active))
        elif isinstance(book, BinanceBook):
            out.update(book.counters())
            out["unknown_fields"] = book.unknown_fields
            out["ignored"] = dict(book.ignored)
            bb, ba = book.best_bid(), book.best_ask()
            out["bookticker_checked_since_resync"] = book.bookticker_checked - self._checked_base
            out["best_bid"] = [str(x) for x in bb] if bb else None
            out["best_ask"] = [str(x) for x in ba] if ba else None
            out["synced"] = book.synced
            out.update(checksum_checked=0, checksum_mismatch=0)    # Binance depth carries no checksum
            sym = (book.symbol or "").upper() or "?"
            out["symbols"] = {sym: {k: out.get(k, 0) for k in _SYMBOL_KEYS} | {
                "synced": book.synced, "best_bid": out["best_bid"], "best_ask": out["best_ask"]}}
        else:
            keys = ("messages", "depth_events", "applied", "level_updates", "gaps", "resyncs", "stale", "malformed",
                    "crossed", "snapshots", "snapshots_rejected", "booktickers", "bookticker_checked",
                    "bookticker_mismatch", "trades", "buffer_dropped")
            counters = book.counters() if book is not None else {}
            out.update({k: counters.get(k, 0) for k in keys})
            if book is not None:
                out["depth_events"] = counters["applied"]      # order messages applied
                out["level_updates"] = counters["applied"]
                out["synced"] = book.synced
                out["resting_orders"] = len(book.orders)
            out["crossed"] = None     # order-level feeds are not checked for crossing
        if st is not None:
            out.update({"connects": st.connects, "reconnects": max(st.connects - 1, 0), "overflows": st.overflows,
                        "dropped": st.dropped, "watchdog": st.watchdog, "received": st.messages,
                        "received_bytes": st.bytes})
        p50, p99 = self.latency_us()
        out.update({"problems": self.problems, "latency_p50_us": p50, "latency_p99_us": p99,
                    "seconds": round(seconds, 3), "active_seconds": round(active, 3),
                    "messages_per_s": round(out.get("messages", 0) / active) if active > 0 else None,
                    "level_updates_per_s": round((out.get("level_updates") or 0) / active) if active > 0 else None,
                    "end": self.end_reason})
        if self.engine is not None:
            out["position"] = self.engine.position
        ctx = self.strategy_ctx
        if ctx is not None:
            placed = sum(1 for r in ctx.orders if r.action != "cancel")
            out["strategy"] = {"name": self.config.strategy, "orders": placed,
                               "cancels": len(ctx.orders) - placed,
                               "open_orders": len(ctx.open_orders), "position": ctx.position, "cash": ctx.cash}
            if self.config.orders_log:
                out["strategy"]["orders_log"] = self.config.orders_log
        return out


_SYMBOL_KEYS = ("messages", "depth_events", "snapshots", "gaps", "resyncs", "stale", "malformed", "crossed",
                "bookticker_checked", "bookticker_mismatch", "checksum_checked", "checksum_mismatch")

_WARM = (b'{"lastUpdateId":10,"bids":[["100.0","1.0"]],"asks":[["101.0","1.0"]]}',
         b'{"stream":"x@depth","data":{"e":"depthUpdate","E":1,"T":1,"s":"X","U":9,"u":11,"pu":8,'
         b'"b":[["100.5","2.0"]],"a":[["101.0","0.0"],["102.0","1.5"]]}}',
         b'{"stream":"x@bookTicker","data":{"e":"bookTicker","u":11,"s":"X","b":"100.5","B":"2.0",'
         b'"a":"102.0","A":"1.5","T":1,"E":1}}')


def _warm_up() -> None:
    """Run the book builder's numba kernels once on a tiny made-up book before connecting: the
    first call loads them from numba's disk cache, which takes a moment (seconds on a loaded
    machine) that must not fall between receiving the first depth event and asking for the
    snapshot."""
    bk = BinanceBook(FUTURES, source="<warm-up>")
    for m in _WARM:
        bk.feed_message(m)
    bk.take_events()


def _one_or_list(xs: list[Any]) -> Any:
    """One value when every connection has it, else the list (in connection order)."""
    return xs[0] if len(set(xs)) == 1 else xs


def numbered_recording(path: str, k: int) -> str:
    """``--record``'s file of connection ``k`` (2, 3, ...) of a monitor of several connections:
    the connection's number before the file's suffix (``rec/session.rec``: ``rec/session.2.rec``;
    no suffix: ``session.2``).  Connection 1 records to ``path`` itself."""
    p = Path(path)
    return str(p.with_name(f"{p.stem}.{k}{p.suffix}"))


def _num(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


_ORDERS_SHOWN = 10      # strategy actions in the display's orders panel
ORDERS_LOG_COLUMNS = ("time", "line", "action", "order_id", "side", "price", "qty")
"""Columns of ``--orders-log``: wall-clock UTC time (ISO 8601), the input line (message-derived
book update) the strategy acted on, ``limit``/``market``/``cancel``, the order id, the side, the
limit price (empty for market orders and cancels) and the quantity (0 for cancels)."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _order_row(r: Any) -> tuple:
    return (_iso(r.time), r.line, r.action, r.order_id, r.side, "" if math.isnan(r.price) else repr(r.price),
            repr(r.qty))


def _order_text(r: Any) -> str:
    """One strategy action as a short line (the display's orders panel, stderr)."""
    clock = _iso(r.time)[11:23]
    if r.action == "cancel":
        return f"{clock}  line {r.line:,}  cancel order {r.order_id} ({r.side})"
    at = f" @ {r.price:g}" if r.action == "limit" else " at market"
    return f"{clock}  line {r.line:,}  order {r.order_id}: {r.action} {r.side} {r.qty:g}{at}"


# ------------------------------------------------------------------------------------------
# strategies
# ------------------------------------------------------------------------------------------

def load_strategy(name: str, engine: Any, params: dict[str, Any] | None = None,
                  out: TextIO | None = None) -> tuple[Any, Any, Any]:
    """Build strategy ``name`` from the registry (``strategies.get(name, params)``: validated
    parameters), on ``engine`` or, when None, on a fresh engine of the strategy's own program, and
    attach it through a :class:`strategies.LiveContext` (orders are recorded in ``ctx.orders``
    and also written to ``out`` when given: the monitor leaves it None and routes them itself).
    Returns ``(strategy, engine, context)``.  Imported lazily: the monitor does not need the
    strategies package unless asked.  Unknown names and parameters raise the registry's error,
    which lists what exists."""
    try:
        import strategies
    except ImportError as e:
        raise DdmsError(f"--strategy {name}: the strategies package cannot be imported ({e})") from None
    strat = strategies.get(name, params or {})
    if engine is None:
        engine = strat.make_engine()
    ctx = strat.attach(engine, strategies.LiveContext(engine, out=out))
    return strat, engine, ctx


# ------------------------------------------------------------------------------------------
# the live display
# ------------------------------------------------------------------------------------------

class _Display:
    """A rich Live display redrawn at most 4 times a second (drawing is off the hot path: the
    consumer calls :meth:`tick` after each drained run and it redraws only when due)."""

    def __init__(self, mon: Monitor) -> None:
        from rich.console import Console
        from rich.live import Live
        self.mon = mon
        self.console = Console(file=mon.out)
        self.live = Live(console=self.console, auto_refresh=False, transient=False)
        self.next = 0.0
        self.last = (time.perf_counter(), 0)
        self.rate = 0.0

    def start(self) -> None:
        self.live.start()

    def stop(self) -> None:
        self.live.update(self.render(), refresh=True)
        self.live.stop()
        if not self.console.is_terminal:
            self.console.file.write("\n")     # the summary line starts on a line of its own

    def tick(self) -> None:
        now = time.perf_counter()
        if now < self.next:
            return
        self.next = now + 0.25
        self.live.update(self.render(), refresh=True)

    def render(self) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text
        mon = self.mon
        s = mon.summary()
        now = time.perf_counter()
        t, n = self.last
        if now - t >= 1.0:
            self.rate = (s.get("messages", 0) - n) / (now - t)
            self.last = (now, s.get("messages", 0))
        urls = [m.config.url for m in mon.conns()]
        head = Table(title=f"ddms monitor  {urls[0]}{f' (+{len(urls) - 1} connections)' if len(urls) > 1 else ''}",
                     show_header=False, expand=False)
        head.add_column("k")
        head.add_column("v", justify="right")
        head.add_column("k2")
        head.add_column("v2", justify="right")
        pairs = [("protocol", f"{mon.protocol or '?'} {mon.market or ''}" if not mon.multi else
                  ", ".join(s.get("venues") or ["?"])),
                 ("state", "synced" if s.get("synced") else
                  "waiting for snapshot" if s.get("connects") else "not connected"),
                 ("messages", f"{s.get('messages', 0):,}"), ("msgs/s", f"{self.rate:,.0f}"),
                 ("depth events", f"{s.get('depth_events', 0):,}"), ("level updates", f"{s.get('level_updates', 0):,}"),
                 ("gaps", s.get("gaps")), ("resyncs", s.get("resyncs")),
                 ("stale", s.get("stale")), ("malformed", s.get("malformed")),
                 ("crossed", s.get("crossed")), ("reconnects", s.get("reconnects")),
                 ("bookTicker checked", s.get("bookticker_checked")),
                 ("bookTicker mismatch", s.get("bookticker_mismatch")),
                 ("latency p50 us", s.get("latency_p50_us")), ("latency p99 us", s.get("latency_p99_us")),
                 ("best bid", " x ".join(s["best_bid"]) if s.get("best_bid") else "-"),
                 ("best ask", " x ".join(s["best_ask"]) if s.get("best_ask") else "-")]
        for i in range(0, len(pairs), 2):
            (a, b), (c, d) = pairs[i], pairs[i + 1]
            head.add_row(a, str(b), c, str(d))
        parts: list[Any] = [head]
        if any(m.session is not None for m in mon.conns()):
            parts.append(_symbol_table(s))
        if mon.engine is not None:
            views = Table(title="views", expand=False)
            views.add_column("view")
            views.add_column("value", justify="right")
            for name, v in mon.engine.snapshot().items():
                if isinstance(v, list):
                    shown = ", ".join(str(r) for r in v[:5]) + (f" ... ({len(v)} rows)" if len(v) > 5 else "")
                else:
                    shown = f"{v:.6g}" if isinstance(v, float) else str(v)
                views.add_row(name, shown)
            parts.append(views)
        ctx = mon.strategy_ctx
        if ctx is not None:
            st = s["strategy"]
            title = (f"orders ({mon.config.strategy}): {st['orders']} placed, {st['cancels']} cancelled, "
                     f"{st['open_orders']} open, position {st['position']:g}")
            log = f"all orders in {mon.config.orders_log}" if mon.config.orders_log else None
            body = "\n".join(mon.recent_orders) if mon.recent_orders else "no order yet"
            parts.append(Panel(Text(body, no_wrap=True, overflow="ellipsis"), title=title, title_align="left",
                               subtitle=log, subtitle_align="left"))
        if mon.recent:
            parts.append(Panel(Text("\n".join(list(mon.recent)[-8:]), overflow="fold"), title="events",
                               title_align="left"))
        return Group(*parts)


def _symbol_table(s: dict[str, Any]) -> Any:
    """The display's row per symbol (several connections: per venue and symbol, with the venue
    and connection): state, best bid/ask, message rate, gaps, resyncs, checksum state (checked /
    mismatched; Coinbase: ticker agreement), latency of the last update."""
    from rich.table import Table
    t = Table(title="symbols", expand=False)
    venues = any("venue" in d for d in s.get("symbols", {}).values())
    if venues:
        t.add_column("venue", no_wrap=True)
        t.add_column("conn", justify="right", no_wrap=True)
    for col in ("symbol", "state", "best bid", "best ask", "msgs/s", "gaps", "resyncs", "checksum", "crossed",
                "latency us"):
        t.add_column(col, justify="left" if col in ("symbol", "state") else "right", no_wrap=True)
    for sym, d in s.get("symbols", {}).items():
        if d.get("checksum_checked") or d.get("checksum_mismatch"):
            ck = f"{d['checksum_checked']:,} ok" if not d["checksum_mismatch"] else \
                f"{d['checksum_mismatch']} bad / {d['checksum_checked']:,}"
        elif d.get("ticker_checked"):
            ck = f"ticker {d['ticker_checked'] - d.get('ticker_disagree', 0)}/{d['ticker_checked']}"
        elif d.get("bookticker_checked"):
            ck = f"bookTicker {d['bookticker_checked'] - d['bookticker_mismatch']}/{d['bookticker_checked']}"
        else:
            ck = "-"
        rate = d.get("messages_per_s")
        lead = [str(d.get("venue") or "-"), str(d.get("connection", ""))] if venues else []
        t.add_row(*lead, d.get("symbol", sym), "synced" if d.get("synced") else "resyncing",
                  " x ".join(d["best_bid"]) if d.get("best_bid") else "-",
                  " x ".join(d["best_ask"]) if d.get("best_ask") else "-",
                  f"{rate:,.0f}" if rate is not None else "-", str(d.get("gaps", 0)), str(d.get("resyncs", 0)), ck,
                  str(d.get("crossed", 0)), str(d.get("latency_us") if d.get("latency_us") is not None else "-"))
    return t
