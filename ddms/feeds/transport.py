"""The websocket transport: the only module that imports websockets (ruff's banned-api rule).

Client (:class:`FeedClient`): connects, reconnects with capped, jittered exponential backoff,
closes a connection that has carried no message for ``watchdog`` seconds (a silent feed is a dead
feed), lets websockets answer pings and send its own (``ping_interval``/``ping_timeout``), and
stops cleanly on :meth:`FeedClient.stop`.  Everything it receives goes, in order, through one
bounded ``asyncio.Queue`` to the consumer: ``(recv_ns, bytes)`` tuples for messages and small
frozen records for the rest (:class:`Connected`, :class:`Disconnected`, :class:`Overflow`,
:class:`SnapshotReply`, :class:`Ended`).  When the queue is full the reader waits up to
``overflow_wait`` seconds (TCP backpressure: the sender slows down); if the consumer still has not
made room, messages are dropped and counted, and an :class:`Overflow` record goes into the queue
as soon as there is room, before any later message: the consumer must resynchronize (nothing is
dropped silently).  Snapshots are fetched over HTTP (:func:`http_get`: urllib in a worker thread,
so TLS and redirects work against a real exchange) and delivered through the same queue, after
the messages received before them.

Server (:func:`serve_replay`): the websocket and HTTP glue around
:class:`ddms.feeds.server.ReplayCore`: the handshake's ``process_request`` routes a path to a
websocket subscription or an HTTP answer (the snapshot endpoints share the websocket port), the
handshake response advertises the protocol, market and snapshot path (``X-DDMS-*`` headers), and
one task performs the core's timeline, pacing it and broadcasting each frame.

Cost: per received message one ``recv`` (websockets' C-accelerated framing; no UTF-8 decode, the
protocol cores take bytes), one ``perf_counter_ns`` and one ``put_nowait``: a few microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import random
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.http11 import Request, Response

from ddms.errors import DdmsError
from ddms.feeds import DEFAULT_RETRIES, retry_policy
from ddms.feeds.server import NORMAL_CLOSE, Close, Hold, HttpAnswer, ReplayCore, Send, Stall, WsRoute

if TYPE_CHECKING:
    from ddms.feeds.venue_server import VenueReplay

__all__ = [
    "DEFAULT_RETRIES", "ClientConfig", "Connected", "Disconnected", "Ended", "FeedClient", "FeedError", "Overflow",
    "ServeConfig", "SnapshotReply", "describe_error", "http_get", "permanent_refusal", "retry_policy", "serve_replay",
]


class FeedError(DdmsError):
    """A feed that cannot be used: a URL that is not a websocket URL, a refused handshake, a
    snapshot endpoint that fails.  The message names the URL and says why."""


# ------------------------------------------------------------------------------------------
# queue records (messages themselves are plain ``(recv_ns, bytes)`` tuples: the hot path)
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Connected:
    """Connection number ``number`` (1 = the first) is open; ``headers`` of the handshake
    response (a replay server advertises ``X-DDMS-Protocol``, ``-Market``, ``-Snapshot``).  Any
    connection after the first may have missed messages: the consumer resynchronizes."""

    number: int
    url: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Disconnected:
    """The connection (or an attempt) ended: ``code``/``reason`` of the close (None: no close
    frame, or the attempt failed; ``reason`` is one plain sentence, never an exception repr),
    ``retry_in`` seconds until the next attempt (None: no more), which is reconnect attempt
    ``attempt`` of ``attempts`` (None: no limit) since the last connection that carried messages;
    ``connected``: this record ends a connection (False: an attempt that never connected)."""

    code: int | None
    reason: str
    retry_in: float | None
    attempt: int = 0
    attempts: int | None = None
    connected: bool = False


@dataclass(frozen=True, slots=True)
class Overflow:
    """``dropped`` messages were dropped because the consumer did not keep up."""

    dropped: int


@dataclass(frozen=True, slots=True)
class SnapshotReply:
    """The answer to :meth:`FeedClient.request_snapshot`: ``body`` (None on failure, with
    ``error`` saying why), received at ``recv_ns``."""

    url: str
    body: bytes | None
    recv_ns: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Ended:
    """The client stopped: the server ended the stream normally (``once``), :meth:`stop` was
    called, or the reconnect policy ran out (``max_retries`` attempts failed in a row).
    ``normal``: nothing went wrong -- a stop, or a stream the server ended normally (close code
    1000), even if the reconnect attempts after it then found no server."""

    reason: str
    normal: bool


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Client settings.  ``queue_size`` bounds the queue to the consumer; ``overflow_wait`` is how
    long the reader waits for room before dropping; ``watchdog`` the longest silence tolerated;
    ``backoff_base``/``backoff_cap`` the reconnect delays (attempt r waits
    ``min(cap, base * 2**(r-1))`` times a uniform jitter in [0.5, 1]); ``once``: a normal close
    (1000) ends the client instead of reconnecting; ``max_retries``: reconnect attempts after a
    connection ends (or the first attempt fails) before giving up, counted from the last
    connection that carried messages (None: never give up).  :meth:`policy` states it."""

    url: str
    queue_size: int = 1024
    overflow_wait: float = 1.0
    watchdog: float = 30.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    open_timeout: float = 10.0
    close_timeout: float = 2.0
    backoff_base: float = 0.1
    backoff_cap: float = 10.0
    once: bool = False
    max_retries: int | None = DEFAULT_RETRIES
    max_size: int = 2**24
    snapshot_timeout: float = 10.0

    def __post_init__(self) -> None:
        scheme = urlsplit(self.url).scheme
        if scheme not in ("ws", "wss"):
            raise FeedError(f"{self.url}: not a websocket URL (ws:// or wss://)")
        if self.queue_size < 2 or self.watchdog <= 0 or self.backoff_base <= 0 or self.backoff_cap < self.backoff_base:
            raise FeedError(f"{self.url}: need queue_size >= 2, watchdog > 0, 0 < backoff_base <= backoff_cap")
        if self.max_retries is not None and self.max_retries < 0:
            raise FeedError(f"{self.url}: max_retries must be >= 0 or None, got {self.max_retries}")

    def policy(self) -> str:
        """The reconnect policy in words, with the longest total wait it implies."""
        return retry_policy(self.max_retries, self.backoff_base, self.backoff_cap)


@dataclass
class ClientStats:
    """Transport counters: ``connects`` (successful handshakes), ``failures`` (attempts or
    connections that ended abnormally), ``messages`` received, ``bytes``, ``overflows`` and
    ``dropped`` (consumer too slow), ``watchdog`` (silent connections closed), ``snapshots``
    fetched, ``snapshot_errors``."""

    connects: int = 0
    failures: int = 0
    messages: int = 0
    bytes: int = 0
    overflows: int = 0
    dropped: int = 0
    watchdog: int = 0
    snapshots: int = 0
    snapshot_errors: int = 0
    last_close: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class FeedClient:
    """A reconnecting websocket reader feeding one bounded queue; see the module docstring.

    Use: ``client = FeedClient(config)``; ``task = asyncio.create_task(client.run())``; consume
    ``await client.queue.get()`` until an :class:`Ended` record; :meth:`request_snapshot` starts a
    fetch whose :class:`SnapshotReply` arrives in the queue; :meth:`stop` ends it all."""

    def __init__(self, config: ClientConfig, *, rng: random.Random | None = None) -> None:
        self.config = config
        self.queue: asyncio.Queue = asyncio.Queue(config.queue_size)
        self.stats = ClientStats()
        self._rng = rng or random.Random()
        self._stop = asyncio.Event()
        self._ws: ClientConnection | None = None
        self._pending_drop = 0      # dropped, not yet announced by an Overflow record
        self._last_recv = 0.0
        self._watchdog_fired = False
        self._tasks: set[asyncio.Task] = set()
        self._fetches: set[asyncio.Task] = set()     # snapshot requests in flight
        self._send_lock = asyncio.Lock()
        self._refused: str | None = None    # a handshake refusal that asking again cannot change

    # -- control --------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop reading and close the connection (idempotent; safe from a signal handler)."""
        self._stop.set()
        ws = self._ws
        if ws is not None:
            self._spawn(ws.close(1000, "client stopping"))

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def backoff(self, attempt: int) -> float:
        """Delay before reconnect attempt ``attempt`` (>= 1) in a row."""
        c = self.config
        return min(c.backoff_cap, c.backoff_base * 2 ** min(attempt - 1, 30)) * self._rng.uniform(0.5, 1.0)

    def send(self, text: str, delay: float = 0.0) -> bool:
        """Send ``text`` on the current connection (a subscription change) after ``delay``
        seconds (a venue's limit on messages per second), in call order for equal delays;
        False when there is no connection (the next connection subscribes anew)."""
        ws = self._ws
        if ws is None:
            return False
        self._spawn(self._send(ws, text, delay))
        return True

    async def _send(self, ws: ClientConnection, text: str, delay: float = 0.0) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        async with self._send_lock:
            with contextlib.suppress(ConnectionClosed):
                await ws.send(text)

    # -- snapshots --------------------------------------------------------------------------
    def request_snapshot(self, url: str, delay: float = 0.0) -> None:
        """Fetch ``url`` (after ``delay`` seconds) in the background; the :class:`SnapshotReply`
        is put into the queue (never dropped: it waits for room)."""
        task = self._spawn(self._fetch(url, delay))
        self._fetches.add(task)
        task.add_done_callback(self._fetches.discard)

    async def _answer_fetches(self) -> None:
        """Wait for the snapshot requests in flight when the server ended the stream (``once``):
        their answers still count, the updates buffered meanwhile are applied from them.  Before,
        a replay whose last message came while the snapshot was being fetched ended with the
        fetch cancelled and nothing applied.  Only the requests in flight now: a retry made after
        a failed answer is not waited for (the server may be gone).  Cost: at most one snapshot
        timeout (``snapshot_timeout``) plus the requests' delays."""
        fetches = [t for t in self._fetches if not t.done()]
        if fetches:
            await asyncio.wait(fetches)

    async def _fetch(self, url: str, delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            status, body = await http_get(url, self.config.snapshot_timeout)
        except FeedError as e:
            self.stats.snapshot_errors += 1
            await self.queue.put(SnapshotReply(url, None, time.perf_counter_ns(), str(e)))
            return
        if status != 200:
            self.stats.snapshot_errors += 1
            text = body[:300].decode("utf-8", "replace")
            await self.queue.put(SnapshotReply(url, None, time.perf_counter_ns(), f"HTTP {status}: {text}"))
            return
        self.stats.snapshots += 1
        await self.queue.put(SnapshotReply(url, body, time.perf_counter_ns()))

    # -- the reader -------------------------------------------------------------------------
    async def run(self) -> None:
        """Connect and read until stopped; always ends by putting an :class:`Ended` record.

        After a connection ends (or an attempt fails) the client waits :meth:`backoff` and tries
        again, up to ``max_retries`` times in a row; a connection that carries a message starts
        the count again.  A normal close (1000) ends the client at once with ``once``."""
        c = self.config
        retries = 0                 # reconnect attempts since the last connection that carried messages
        stream_end: str | None = None   # why the server last ended the stream normally (None: it did not)
        ended: Ended | None = None
        try:
            while not self._stop.is_set():
                connects = self.stats.connects
                code, reason, got_messages = await self._one_connection()
                if self._stop.is_set():
                    ended = Ended("stopped", True)
                    break
                connected = self.stats.connects > connects
                if self._refused is not None:       # asking again gets the same answer: fail fast
                    self.stats.failures += 1
                    await self._put_control(Disconnected(code, reason, None, retries, c.max_retries, connected))
                    ended = Ended(f"{self._refused.rstrip(': ')} (a permanent refusal: not retried; check the "
                                  f"URL's path)", False)
                    break
                if code == NORMAL_CLOSE and connected:
                    stream_end = reason or "no reason given"
                    if c.once:
                        await self._answer_fetches()
                        ended = Ended(f"server closed the stream normally ({stream_end})", True)
                        break
                elif connected:
                    stream_end = None
                if got_messages:
                    retries = 0
                self.stats.failures += 1
                if c.max_retries is not None and retries >= c.max_retries:
                    await self._put_control(Disconnected(code, reason, None, retries, c.max_retries, connected))
                    tried = f"{retries} reconnect attempt{'s' if retries != 1 else ''}"
                    if stream_end is not None:
                        ended = Ended(f"the server ended the stream normally ({stream_end}) and did not come back "
                                      f"({tried} failed, the last: {reason})", True)
                    else:
                        ended = Ended(f"gave up after {tried} in a row failed: {reason}", False)
                    break
                retries += 1
                delay = self.backoff(retries)
                await self._put_control(Disconnected(code, reason, delay, retries, c.max_retries, connected))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
            else:
                ended = Ended("stopped", True)
        finally:
            for t in list(self._tasks):
                t.cancel()
            if ended is None:
                ended = Ended("cancelled", False)
            await self._put_control(ended)

    async def _put_control(self, item: Any) -> None:
        """Control records wait for room (they are never dropped); pending drops go first."""
        if self._pending_drop:
            dropped, self._pending_drop = self._pending_drop, 0
            await self.queue.put(Overflow(dropped))
        await self.queue.put(item)

    def _flush_overflow(self) -> None:
        if self._pending_drop:
            self.queue.put_nowait(Overflow(self._pending_drop))
            self._pending_drop = 0

    async def _one_connection(self) -> tuple[int | None, str, bool]:
        """One connection: ``(close code or None, reason, whether any message arrived)``."""
        c = self.config
        before = self.stats.messages
        try:
            async with connect(c.url, proxy=None, compression=None, open_timeout=c.open_timeout,
                               ping_interval=c.ping_interval, ping_timeout=c.ping_timeout,
                               close_timeout=c.close_timeout, max_size=c.max_size, max_queue=64) as ws:
                _small_buffers(ws, socket.SO_RCVBUF)
                self._ws = ws
                if self._stop.is_set():           # stopped while the handshake was under way
                    await ws.close(1000, "client stopping")
                    return NORMAL_CLOSE, "stopped", False
                self.stats.connects += 1
                headers: dict[str, str] = {}
                for k, v in ws.response.headers.raw_items() if ws.response is not None else ():
                    headers[k] = f"{headers[k]},{v}" if k in headers else v   # a repeated header: a list
                await self._put_control(Connected(self.stats.connects, c.url, headers))
                self._last_recv = time.monotonic()
                self._watchdog_fired = False
                dog = asyncio.ensure_future(self._watchdog(ws))
                try:
                    await self._read(ws)
                finally:
                    dog.cancel()
            code, reason = NORMAL_CLOSE, "closed"
        except ConnectionClosed as e:
            if e.rcvd is not None:
                code, reason = e.rcvd.code, e.rcvd.reason
            else:
                code, reason = None, "connection lost without a close frame"
            if self._watchdog_fired:
                code, reason = None, f"watchdog: no message for {c.watchdog:g} s"
        except InvalidStatus as e:
            status = e.response.status_code
            code, reason = None, f"handshake refused: HTTP {status}: " \
                                 f"{e.response.body[:200].decode('utf-8', 'replace') if e.response.body else ''}"
            if permanent_refusal(status):
                self._refused = reason
        except (OSError, InvalidHandshake, TimeoutError, websockets.exceptions.WebSocketException) as e:
            code, reason = None, describe_error(e, c.open_timeout)
        finally:
            self._ws = None
        self.stats.last_close = f"{code} {reason}"
        return code, reason, self.stats.messages > before

    async def _read(self, ws: ClientConnection) -> None:
        """Read until the connection closes (raises ConnectionClosed).  The hot loop."""
        q = self.queue
        st = self.stats
        clock = time.perf_counter_ns
        wait = self.config.overflow_wait
        while True:
            data = await ws.recv(decode=False)
            now = clock()
            self._last_recv = time.monotonic()
            st.messages += 1
            st.bytes += len(data)
            item = (now, data)
            if self._pending_drop:
                if q.qsize() + 2 > q.maxsize:
                    self._pending_drop += 1
                    st.dropped += 1
                    continue
                self._flush_overflow()
            try:
                q.put_nowait(item)
            except asyncio.QueueFull:
                try:
                    await asyncio.wait_for(q.put(item), wait)
                except TimeoutError:
                    st.overflows += 1
                    st.dropped += 1
                    self._pending_drop = 1

    async def _watchdog(self, ws: ClientConnection) -> None:
        limit = self.config.watchdog
        while True:
            await asyncio.sleep(min(limit / 4, 1.0))
            if time.monotonic() - self._last_recv > limit:
                self._watchdog_fired = True
                self.stats.watchdog += 1
                await ws.close(4000, f"no message for {limit:g} s")
                return


def permanent_refusal(status: int) -> bool:
    """Whether a handshake refused with HTTP ``status`` is the server's final word on this URL.

    A 4xx (wrong path, unknown stream, forbidden) answers the same way on every attempt, so the
    client stops at once instead of backing off through every reconnect attempt (8 attempts took
    about 19 s to report a mistyped path).  408 (timeout) and 429 (rate limit) are the 4xx a
    later attempt can pass; 5xx and network errors stay retried."""
    return 400 <= status < 500 and status not in (408, 429)


def describe_error(e: BaseException, open_timeout: float) -> str:
    """A failed connection attempt in one plain sentence (what the user can act on), instead of
    an exception repr such as ``ConnectionRefusedError: [Errno 111] Connect call failed (...)``."""
    text = str(e)
    if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and (
            e.errno == errno.ECONNREFUSED or f"[Errno {errno.ECONNREFUSED}]" in text)):
        return "connection refused (no server listens there)"
    if isinstance(e, socket.gaierror):
        return f"cannot resolve the host name ({e.strerror or text})"
    if isinstance(e, TimeoutError):
        return f"no answer within {open_timeout:g} s"
    if isinstance(e, ConnectionResetError):
        return "connection reset by the server"
    if isinstance(e, OSError):
        return (e.strerror or text or "network error").rstrip(".")
    if isinstance(e, InvalidHandshake):
        return f"websocket handshake failed: {text or type(e).__name__}"
    return text or type(e).__name__


# ------------------------------------------------------------------------------------------
# HTTP
# ------------------------------------------------------------------------------------------

def _small_buffers(ws: Any, opt: int, size: int = 1 << 16) -> None:
    """Cap a loopback socket's kernel buffer: Linux autotunes them to megabytes, which lets an
    unthrottled replay run tens of thousands of messages ahead of its client, and a snapshot
    asked for then describes a book far in the client's future.  Remote sockets keep the
    kernel's defaults (they need the window)."""
    sock = ws.transport.get_extra_info("socket") if ws.transport is not None else None
    peer = ws.transport.get_extra_info("peername") if ws.transport is not None else None
    if sock is not None and peer and _is_local(str(peer[0])):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, opt, size)


def _is_local(host: str | None) -> bool:
    return host in ("localhost", "::1") or (host or "").startswith("127.")


def _get_sync(url: str, timeout: float) -> tuple[int, bytes]:
    host = urlsplit(url).hostname
    handlers = [urllib.request.ProxyHandler({})] if _is_local(host) else []
    opener = urllib.request.build_opener(*handlers)
    req = urllib.request.Request(url, headers={"User-Agent": "ddms-monitor"})
    try:
        with opener.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        cause = e.reason if isinstance(e, urllib.error.URLError) else e
        why = describe_error(cause, timeout) if isinstance(cause, BaseException) else str(cause)
        raise FeedError(f"{url}: snapshot request failed: {why}") from None


async def http_get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """``GET url`` -> ``(status, body)``; raises :class:`FeedError` when there is no answer.
    Runs urllib in a worker thread (a snapshot is rare; TLS and proxies for remote hosts come
    free); loopback hosts bypass any configured proxy."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise FeedError(f"{url}: not an http(s) URL")
    return await asyncio.to_thread(_get_sync, url, timeout)


# ------------------------------------------------------------------------------------------
# the replay server glue
# ------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ServeConfig:
    """``speed``: receive-time spacing divided by this (0: unthrottled); ``rate``: counted
    messages per second instead (0: off); ``host``/``port`` (0: any free port)."""

    host: str = "127.0.0.1"
    port: int = 0
    speed: float = 1.0
    rate: float = 0.0


GOING_AWAY = 1001   # the server stops before the end of the replay: a client reconnects elsewhere/later


class _Hub:
    """The connected clients and their routes."""

    def __init__(self) -> None:
        self.clients: dict[ServerConnection, WsRoute] = {}
        self.wanted: set[str] = set()      # streams some client wants (updated in place)
        self.all_streams: tuple[str, ...] = ()
        self.arrived = asyncio.Event()
        self.snapshot_asked = asyncio.Event()
        self.connections = 0
        self.last_request = 0.0            # monotonic time of the last client message or request

    def set_route(self, ws: ServerConnection, route: WsRoute | None) -> None:
        """Add, change (route) or remove (None) a client, and recompute :attr:`wanted`."""
        if route is None:
            self.clients.pop(ws, None)
        else:
            self.clients[ws] = route
        want: set[str] = set()
        for r in self.clients.values():
            want.update(self.all_streams if r.streams is None else r.streams)
        self.wanted.clear()
        self.wanted.update(want)


def _header_lines(value: str, width: int = 4000) -> list[str]:
    """A comma-separated header value as lines of at most ``width`` characters (cut at commas):
    HTTP peers refuse a header line over ~8 KB; a repeated header is the same list."""
    out: list[str] = []
    cur = ""
    for item in value.split(","):
        if cur and len(cur) + 1 + len(item) > width:
            out.append(cur)
            cur = item
        else:
            cur = f"{cur},{item}" if cur else item
    return [*out, cur]


def _log(msg: str) -> None:
    print(f"serve-feed: {msg}", file=sys.stderr, flush=True)


async def serve_replay(core: ReplayCore | VenueReplay, config: ServeConfig, on_ready: Callable[[str], None],
                       log: Callable[[str], None] = _log) -> dict[str, Any]:
    """Serve ``core`` until its timeline ends (then close every client normally and return a
    summary).  ``on_ready(ws_url)`` is called once the socket listens."""
    hub = _Hub()
    hub.all_streams = core.streams
    extra = core.headers()

    def process_request(conn: ServerConnection, request: Request) -> Response | None:
        route = core.route(request.path)
        hub.last_request = time.monotonic()
        if isinstance(route, HttpAnswer):
            if route.status == 200:
                hub.snapshot_asked.set()
            resp = conn.respond(route.status, route.body)
            resp.headers["Content-Type"] = route.content_type
            return resp
        if "upgrade" not in request.headers.get("Connection", "").lower():
            resp = conn.respond(426, '{"code": -1, "msg": "this path is a websocket stream"}')
            resp.headers["Content-Type"] = "application/json"
            return resp
        return None

    def process_response(conn: ServerConnection, request: Request, response: Response) -> None:
        if response.status_code == 101:
            for k, v in extra.items():
                for part in _header_lines(v):
                    response.headers[k] = part        # websockets' Headers: a repeated name

    async def handler(ws: ServerConnection) -> None:
        _small_buffers(ws, socket.SO_SNDBUF)
        route = core.route(ws.request.path)
        assert isinstance(route, WsRoute)
        hub.set_route(ws, route)
        hub.connections += 1
        hub.arrived.set()
        log(f"client {hub.connections} connected: {ws.request.path}")
        try:
            async for msg in ws:
                hub.last_request = time.monotonic()
                if core.protocol != "orders":
                    route, reply = core.subscribe(hub.clients[ws], msg)
                    hub.set_route(ws, route)
                    if route.streams and core.protocol in ("kraken", "okx", "coinbase"):
                        hub.snapshot_asked.set()      # a venue subscription (its snapshot comes in-stream)
                    for r in [reply] if isinstance(reply, str) else reply or ():
                        await ws.send(r)
        except ConnectionClosed:
            pass
        finally:
            hub.set_route(ws, None)

    async with serve(handler, config.host, config.port, process_request=process_request,
                     process_response=process_response, compression=None, max_queue=64,
                     server_header="ddms serve-feed") as server:
        sock = next(iter(server.sockets))
        host, port = sock.getsockname()[:2]
        on_ready(f"ws://{host}:{port}{core.ws_path()}")
        t0 = time.perf_counter()
        timeline = asyncio.ensure_future(_run_timeline(core, hub, config, log))
        loop = asyncio.get_running_loop()
        signals = []
        for sig in (signal.SIGINT, signal.SIGTERM):     # clean shutdown: close clients, then exit
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, timeline.cancel)
                signals.append(sig)
        stopped = False
        try:
            await timeline
        except asyncio.CancelledError:
            if not timeline.cancelled():
                raise
            stopped = True
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
        code, reason = (GOING_AWAY, "server shutting down") if stopped else (NORMAL_CLOSE, "end of replay")
        for ws in list(hub.clients):
            with contextlib.suppress(ConnectionClosed):
                await ws.close(code, reason)
        seconds = time.perf_counter() - t0
    summary = {"sent": core.sent, "frames": len(core.frames), "connections": hub.connections,
               "faults": core.faults_done, "seconds": round(seconds, 3), "stopped": stopped}
    log(f"replay {'stopped' if stopped else 'finished'}: {summary}")
    return summary


async def _send_many(ws: ServerConnection, frames: list[bytes]) -> None:
    """Send text frames with one socket write: websockets' documented custom-send pattern
    (``send_context`` + the Sans-I/O protocol), with the frames' bytes joined, so an unthrottled
    replay costs one syscall per batch instead of one per message (the server was the bottleneck
    of the ingestion benchmark without it).  Flow control: ``send_context`` drains on exit."""
    async with ws.send_context():
        for data in frames:
            ws.protocol.send_text(data)
        chunks = ws.protocol.data_to_send()
        if all(chunks):
            ws.transport.write(b"".join(chunks))
        else:   # an EOF marker (closing): let websockets write it the usual way
            for c in chunks:
                if c:
                    ws.transport.write(c)


_BATCH = 64   # frames per write in an unthrottled replay


async def _hold(core: Any, hub: _Hub, act: Hold) -> None:
    """Wait (at most ``act.seconds``) for what the replay needs before going on: a snapshot
    request (of ``act.symbol`` when given) from a client that wants depth, or, on a venue whose
    snapshots come in-stream (Kraken, OKX, Coinbase), a client's first subscription."""
    in_stream = core.protocol in ("kraken", "okx", "coinbase")
    deadline = time.monotonic() + act.seconds
    # a Binance client on a bare /stream has no stream until its SUBSCRIBE arrives: wait for it
    # (a client sends it on connecting; one that never subscribes delays the replay 2 s at most)
    until = min(deadline, time.monotonic() + 2.0)
    while not in_stream and time.monotonic() < until and any(
            r.streams is not None and not r.streams for r in hub.clients.values()):
        await asyncio.sleep(0.01)
    if act.subscribed:
        return
    wants_depth = in_stream or any(r.streams is None or any(core.is_depth(x) for x in r.streams)
                                   for r in hub.clients.values())
    if not wants_depth:
        return
    while True:
        if act.symbol is None or in_stream:
            if hub.snapshot_asked.is_set():
                return
        elif act.symbol in core.asked:
            return
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if act.symbol is not None and not in_stream:
            hub.snapshot_asked.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(hub.snapshot_asked.wait(), min(left, 0.2))


async def _run_timeline(core: ReplayCore | VenueReplay, hub: _Hub, config: ServeConfig,
                        log: Callable[[str], None]) -> None:
    clock = time.perf_counter
    speed, rate = config.speed, config.rate
    paced = speed > 0 or rate > 0
    start = None          # (clock, ts_ns of the first frame) of the current pacing anchor
    counted = 0
    pending: dict[ServerConnection, list[bytes]] = {}
    npend = 0

    async def flush() -> None:
        nonlocal npend
        for ws, frames in pending.items():
            try:
                await _send_many(ws, frames)
            except ConnectionClosed:
                hub.set_route(ws, None)
        pending.clear()
        npend = 0

    for act in core.timeline(hub.wanted):
        if not hub.clients:
            pending.clear()
            npend = 0
            hub.arrived.clear()
            await hub.arrived.wait()
            start = None
        if type(act) is Send:
            f = act.frame
            if f.counted:
                counted += 1
            if rate > 0 and f.counted:
                if start is None:
                    start = (clock(), counted)
                due = start[0] + (counted - start[1]) / rate
                delay = due - clock()
                if delay > 0.0005:
                    await asyncio.sleep(delay)
            elif speed > 0 and rate <= 0:
                if start is None:
                    start = (clock(), f.ts_ns)
                due = start[0] + (f.ts_ns - start[1]) / 1e9 / speed
                delay = due - clock()
                if delay > 0.0005:
                    await asyncio.sleep(delay)
            if act.note:
                log(f"fault injected: {act.note}")
            for ws, route in hub.clients.items():
                if route.streams is not None and f.stream not in route.streams:
                    continue
                data = act.data
                if not route.envelope and f.payload_at >= 0:
                    payload = f.payload()
                    data = payload if data is f.data else payload[: len(payload) // 2]
                pending.setdefault(ws, []).append(data)
            npend += 1
            if paced or npend >= _BATCH:
                await flush()
                if not paced:
                    await asyncio.sleep(0)    # let the handlers read the clients' (re)subscriptions
            continue
        await flush()
        if type(act) is Close:
            log(f"closing every connection: {act.reason}")
            for ws in list(hub.clients):
                with contextlib.suppress(ConnectionClosed):
                    await ws.close(act.code, act.reason)
                hub.set_route(ws, None)
        elif type(act) is Hold:
            await _hold(core, hub, act)
            start = None
        elif type(act) is Stall:
            log(f"stalling {act.seconds:g} s: {act.reason}")
            await asyncio.sleep(act.seconds)
            start = None
    await flush()
    if hasattr(core, "symbols") and hub.clients:
        await _linger(hub)


async def _linger(hub: _Hub, quiet: float = 1.0, most: float = 10.0) -> None:
    """After the last frame of a multi-symbol replay, keep the connections open until the
    clients have been quiet for ``quiet`` seconds (at most ``most``): a client still working
    through the frames in flight may resync a symbol (resubscribe, fetch a snapshot) and gets its
    answer before the normal close.  Costs ``quiet`` seconds at the end of such a replay."""
    t0 = time.monotonic()
    hub.last_request = max(hub.last_request, t0)
    while hub.clients and time.monotonic() - t0 < most:
        left = hub.last_request + quiet - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, 0.1))
