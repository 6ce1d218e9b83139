"""cryptofeed raw-data captures (``<EXCHANGE>.ws.<n>.<m>`` + ``<EXCHANGE>.http.<n>.<m>``) -> per-symbol events.

File format (cryptofeed's raw-data recorder, bmoscon/cryptofeed):

- websocket files: a first line ``<url> <-> <unix seconds>`` (the connection opened); lines
  ``<url> <- <unix seconds>: <json>`` the client SENT (subscriptions); every other line
  ``<unix seconds>: <raw message as received>``;
- ``.http.`` files: REST responses, one a line, ``<request url> -> <unix seconds>: <body>``
  (Binance: the depth snapshot of the ``symbol=`` in the url, taken after the stream started).

:class:`CryptofeedParser` is the sans-I/O core: it splits lines (:func:`parse_line`), decodes the
JSON and dispatches to the venue core chosen from the websocket URL (or the file name):
:class:`~ddms.io.venues.kraken.KrakenBooks`, :class:`~ddms.io.venues.okx.OkxBooks`,
:class:`~ddms.io.venues.coinbase.CoinbaseBooks`, :class:`~ddms.io.venues.binance.BinanceBooks`.
:func:`read_cryptofeed` is the thin file transport: it reads the websocket file and the ``.http.``
files of the same exchange beside it, merged by receive time (a REST snapshot is applied when it
was received), and yields :class:`~ddms.io.levels.SymbolEvents` in input order.

Rows are numbered (``EventBatch.line``) by message in the merged stream (1-based), so every
message is one atomic update; reports and errors name the real file and line.  A connection line
after the first (a reconnect, or a ``ddms monitor`` restarted from a checkpoint appending to its
recording) makes every book resync (:func:`resync_all`): no venue's sequence ids carry over to a
new connection, and the monitor did the same, so a recording replays as the session ran.

Bad input: a line that is not one of the forms above, or whose JSON does not parse, or a venue
message that is malformed, is an :class:`~ddms.errors.InputError` (``file:line: reason``) --
with ``skip_bad`` it is counted (``bad_lines``) and skipped (a malformed book message also
discards its symbol's book until the next snapshot).  Protocol faults (a gap, a checksum
mismatch) never raise: the symbol's book is discarded, counted and reported, and the other
symbols keep running; :meth:`CryptofeedParser.summary` has the per-symbol status.

Cost: one ``json.loads`` per line plus the venue core's work -- except runs of received
messages, which go through the venue core's numba chunk lane without a JSON decode (Binance,
Kraken, OKX, Coinbase); read from one plain file (:class:`CryptofeedReader`), those lines are
also found, timed and cut out by a numba scan of each step's buffer
(:mod:`ddms.io.kernels.recvlines`), so they cost no Python per line.  The Kraken, OKX and
Coinbase lanes hand the rows of a kernel run out as one :class:`~ddms.io.levels.ChunkEvents`
(each row's symbol, message number and receive time as columns; every message still one atomic
update): the events are :class:`SymbolEvents` and :class:`ChunkEvents`, in input order
(:func:`~ddms.io.levels.per_symbol` splits the latter into the per-message events).
"""

from __future__ import annotations

import heapq
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from ddms.errors import InputError, ReplayError
from ddms.io.cursor import LineCursor
from ddms.io.events import EventBatch
from ddms.io.levels import ChunkEvents, Resync, SymbolEvents
from ddms.io.venues.base import loads_json

__all__ = ["VENUES", "CryptofeedParser", "CryptofeedReader", "Line", "capture_files", "capture_paths", "depth_symbols",
           "merge_lines", "parse_line", "read_cryptofeed", "recording_state", "resync_all", "venue_of"]

VENUES = ("kraken", "okx", "coinbase", "binance", "binance_futures")
_TS = re.compile(rb"[0-9]+(?:\.[0-9]*)?\Z")

Line = tuple[str, str | None, float, bytes]
"""``(kind, url, unix seconds, payload)``: kind ``open`` / ``sent`` / ``recv`` / ``http``."""


def _ts(raw: bytes, source: str, line: int, text: bytes) -> float:
    if not _TS.match(raw) or len(raw) > 30:
        raise InputError(f"timestamp is not unix seconds: {raw[:40]!r}", source, line, _shown(text))
    return float(raw)


def _shown(b: bytes) -> str:
    return b[:200].decode("utf-8", "replace")


def parse_line(raw: bytes, line: int = 0, source: str = "<cryptofeed>") -> Line | None:
    """Split one capture line (websocket or http file); None for a blank line.  Raises
    :class:`InputError` for anything else than the documented forms.  O(len(raw))."""
    raw = raw.rstrip(b"\r\n")
    if not raw.strip():
        return None
    head, sep, payload = raw.partition(b": ")
    if not sep:
        parts = raw.split(b" ")
        if len(parts) == 3 and parts[1] == b"<->":
            return ("open", _url(parts[0], source, line, raw), _ts(parts[2], source, line, raw), b"")
        raise InputError("not a cryptofeed capture line ('<ts>: <msg>', '<url> <- <ts>: <msg>', "
                         "'<url> -> <ts>: <body>' or '<url> <-> <ts>')", source, line, _shown(raw))
    parts = head.split(b" ")
    if len(parts) == 1:
        return ("recv", None, _ts(parts[0], source, line, raw), payload)
    if len(parts) == 3 and parts[1] in (b"<-", b"->"):
        kind = "sent" if parts[1] == b"<-" else "http"
        return (kind, _url(parts[0], source, line, raw), _ts(parts[2], source, line, raw), payload)
    raise InputError("not a cryptofeed capture line: the part before ': ' is neither a timestamp nor "
                     "'<url> <- <ts>' / '<url> -> <ts>'", source, line, _shown(raw))


def _url(b: bytes, source: str, line: int, raw: bytes) -> str:
    try:
        u = b.decode("ascii")
    except UnicodeDecodeError:
        raise InputError("the URL is not ASCII", source, line, _shown(raw)) from None
    if "://" not in u:
        raise InputError(f"not a URL: {u[:60]!r}", source, line, _shown(raw))
    return u


def venue_of(url: str | None, name: str = "") -> str | None:
    """The venue of a capture from its websocket URL (a ``#venue=<venue>`` fragment, written by
    ``ddms monitor --record`` for a URL that does not tell it, comes first), else from its file
    name (cryptofeed names files by exchange: ``KRAKEN.ws.50.0``)."""
    frag = parse_qs(urlsplit(url).fragment).get("venue", [""])[0].lower() if url else ""
    if frag in VENUES:
        return frag
    u = (url or "").lower()
    for key, venue in (("kraken", "kraken"), ("okx.com", "okx"), ("okex.com", "okx"), ("coinbase", "coinbase"),
                       ("fstream.binance", "binance_futures"), ("dstream.binance", "binance_futures"),
                       ("binance", "binance")):
        if key in u:
            return venue
    base = os.path.basename(name).upper().split(".")[0]
    return {"KRAKEN": "kraken", "OKX": "okx", "OKEX": "okx", "COINBASE": "coinbase", "BINANCE": "binance",
            "BINANCE_FUTURES": "binance_futures", "BINANCE_DELIVERY": "binance_futures"}.get(base)


class CryptofeedParser:
    """Sans-I/O core for one websocket connection's capture (and the REST responses recorded
    for it).  Feed lines with :meth:`feed`; it returns the :class:`SymbolEvents` they caused.
    ``source`` names the websocket file in errors; ``venue`` may be given, else it is taken from
    the first line's URL or from ``source``'s file name."""

    def __init__(self, source: str = "<cryptofeed>", *, venue: str | None = None, skip_bad: bool = False,
                 max_samples: int = 10) -> None:
        if venue is not None and venue not in VENUES:
            raise ReplayError(f"unknown venue {venue!r} (venues: {', '.join(VENUES)})", source)
        self.source = source
        self.venue = venue
        self.skip_bad = skip_bad
        self.max_samples = max_samples
        self.core: Any = None
        self.messages = 0          # merged message number (the rows' line)
        # receive time (ns) of each message number's line, when the caller gives line times
        # (read_cryptofeed: for merging inputs by receive time); recv_now is the current line's
        self.recv_of = np.zeros(1024, np.int64)
        self.recv_now = -1
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self.actions: list = []    # Resync actions the cores asked for (a capture cannot perform them)
        self._pending: list[tuple[int, Line, str]] = []   # lines before the venue is known
        self.subscribed: set[str] = set()   # Binance: symbols with a depth stream on this connection
        self.connections = 0                # connection lines seen: after the first, every book resyncs
        self._snap_decoder: Any = None      # Binance: decodes REST snapshots from their bytes

    # -- set-up ---------------------------------------------------------------------------------
    def _start(self, url: str | None) -> None:
        venue = self.venue or venue_of(url, self.source)
        if venue is None:
            raise ReplayError("cannot tell the venue of this capture from its URL or file name "
                              f"(venues: {', '.join(VENUES)})", self.source)
        self.venue = venue
        if venue == "kraken":
            from ddms.io.venues.kraken import KrakenBooks
            self.core = KrakenBooks(self.source)
        elif venue == "okx":
            from ddms.io.venues.okx import OkxBooks
            self.core = OkxBooks(self.source)
        elif venue == "coinbase":
            from ddms.io.venues.coinbase import CoinbaseBooks
            self.core = CoinbaseBooks(self.source)
        else:
            from ddms.io.venues.binance import BinanceBooks
            self.core = BinanceBooks("futures" if venue == "binance_futures" else "spot", self.source)

    # -- input ----------------------------------------------------------------------------------
    def _fail(self, err: InputError) -> None:
        if not self.skip_bad:
            raise err
        self.bad_lines += 1
        if len(self.bad_samples) < self.max_samples:
            self.bad_samples.append(err)

    def feed(self, raw: bytes, line: int, source: str | None = None) -> list[SymbolEvents]:
        """One line of the websocket file (``source`` None) or of an ``.http.`` file named
        ``source``.  Raises :class:`InputError` for a bad line unless ``skip_bad``."""
        src = source or self.source
        try:
            parsed = parse_line(raw, line, src)
        except InputError as e:
            self._fail(e)
            return []
        if parsed is None:
            return []
        kind, url, ts, payload = parsed
        if self.core is None:
            if kind in ("open", "sent"):
                self._start(url)
            elif self.venue is not None or venue_of(None, self.source) is not None:
                self._start(None)
            else:
                self._pending.append((line, parsed, src))
                if len(self._pending) > 10_000:
                    raise ReplayError("10,000 lines without a websocket URL: cannot tell the venue", self.source)
                return []
            out: list[SymbolEvents] = []
            pend, self._pending = self._pending, []
            for ln, p, s in pend:
                out += self._dispatch(ln, p, s)
            return out + self._dispatch(line, parsed, src)
        return self._dispatch(line, parsed, src)

    # -- input in chunks (Binance) ---------------------------------------------------------------
    def chunkable(self) -> bool:
        """Whether :meth:`feed_lines` takes runs of received messages in chunks (once the venue
        core exists): a Binance capture through the numba lane, the other venues through
        :meth:`_flush_levels`; otherwise it feeds line by line."""
        return self.core is not None

    def _set_recv(self, numbers: Any, recv: Any) -> None:
        """Note the receive time of message number(s) ``numbers`` (grows :attr:`recv_of`)."""
        top = int(np.max(numbers)) if np.ndim(numbers) else int(numbers)
        if top >= len(self.recv_of):
            grown = np.zeros(max(2 * len(self.recv_of), top + 1), np.int64)
            grown[:len(self.recv_of)] = self.recv_of
            self.recv_of = grown
        self.recv_of[numbers] = recv     # a skipped message's number is its successor's: last wins

    def feed_lines(self, items: list[tuple[bytes, int, str | None]],
                   recv: list[int] | None = None) -> Iterator[SymbolEvents]:
        """Many lines ``(raw, line, source)`` in order: exactly what :meth:`feed` per line yields
        (events, counters, reports, errors), but runs of received websocket messages of a
        Binance capture go through :meth:`BinanceBooks.feed_chunk
        <ddms.io.venues.binance.BinanceBooks.feed_chunk>` (in-sequence depth updates of many
        symbols applied in one numba call; every other message is parsed and fed as
        :meth:`feed` does).  A bad line in strict mode raises after the events of the lines
        before it were yielded.  Cost: one :func:`parse_line` per line plus the lane's."""
        out: list[SymbolEvents] = []
        try:
            self.feed_into([it[0] for it in items], [it[1] for it in items], [it[2] for it in items], recv, out)
        except Exception as e:
            yield from out
            raise e from None
        yield from out

    def feed_block(self, raws: list[bytes], lines: range, recv: np.ndarray, out: list[SymbolEvents],
                   scan: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """:meth:`feed_into` of consecutive lines of the websocket file, given their
        :func:`~ddms.io.kernels.recvlines.scan_received` ``scan = (buf, kind, ps, pe, ts)``
        (every ``kind`` :data:`~ddms.io.kernels.recvlines.RECV` or 0: the caller has read the
        times the kernel left to Python) and receive times ``recv``: each run of received
        messages of a Binance capture goes to the chunk lane as spans of ``buf``
        (:class:`~ddms.io.venues.binance_chunk.Spans`: no per-line Python); every other line, and
        every line of another venue, as :meth:`feed_into` feeds it.  The same events, counters,
        reports and errors.  Cost: O(lines that are not received messages) in Python plus the
        lane's."""
        from ddms.io.venues.binance_chunk import Spans
        buf, kind, ps, pe, ts = scan
        n = len(raws)
        k = 0
        for z in [*np.flatnonzero(kind == 0).tolist(), n]:
            if k < z:
                if self.core is not None and hasattr(self.core, "feed_chunk"):
                    self.recv_now = int(recv[z - 1])
                    self._lane(Spans(buf, ps[k:z], pe[k:z]), lines[k:z], self.source, ts[k:z], recv[k:z], out)
                else:
                    self.feed_into(raws[k:z], lines[k:z], None, recv[k:z].tolist(), out)
            if z < n:
                self.feed_into(raws[z:z + 1], lines[z:z + 1], None, [int(recv[z])], out)
            k = z + 1

    def feed_into(self, raws: Sequence[bytes], lines: Sequence[int], sources: Sequence[str | None] | None,
                  recv: Sequence[int] | None, out: list[SymbolEvents]) -> None:
        """:meth:`feed_lines` of the lines ``raws`` (numbered ``lines``, of the files
        ``sources``: None for all of them in the websocket file) appending the events to
        ``out`` (so that they are there when a bad line raises): no tuple per line and no
        generator step per event for a reader that has the lines as lists."""
        run: list[tuple[bytes, int, str, float]] = []     # (payload, line, source, ts) of received messages
        run_recv: list[int] = []                          # their lines' receive times (given recv)
        lane = False
        binance = hasattr(self.core, "feed_chunk")      # a core with a numba chunk lane
        match = _TS.match
        for k, raw in enumerate(raws):
            line = lines[k]
            source = None if sources is None else sources[k]
            if recv is not None:
                self.recv_now = recv[k]
            if not lane:
                lane = self.chunkable()
                binance = hasattr(self.core, "feed_chunk")
                if not lane:
                    out += self.feed(raw, line, source)
                    continue
            src = source or self.source
            head, sep, payload = raw.rstrip(b"\r\n").partition(b": ")
            if sep and b" " not in head and len(head) <= 30 and match(head) and payload.strip():
                run.append((payload, line, src, float(head)))   # a received message (parse_line's "recv")
                if recv is not None:
                    run_recv.append(self.recv_now)
                continue
            try:
                parsed = parse_line(raw, line, src)
            except InputError as e:
                self._flush_any(binance, run, run_recv, out)
                self._fail(e)
                continue
            if parsed is None:
                continue
            if parsed[0] == "recv":
                run.append((parsed[3], line, src, parsed[2]))
                if recv is not None:
                    run_recv.append(self.recv_now)
                continue
            self._flush_any(binance, run, run_recv, out)
            out += self._dispatch(line, parsed, src)
        self._flush_any(binance, run, run_recv, out)

    def _flush_any(self, binance: bool, run: list[tuple[bytes, int, str, float]], run_recv: list[int],
                   out: list[SymbolEvents]) -> None:
        if run:
            (self._flush if binance else self._flush_levels)(run, run_recv, out)

    def _flush(self, run: list[tuple[bytes, int, str, float]], run_recv: list[int],
               out: list[SymbolEvents]) -> None:
        """Received messages ``run`` through the chunk lane, their events appended to ``out``
        (then ``run`` and their receive times ``run_recv`` are emptied)."""
        if not run:
            return
        items = list(run)
        times = np.array(run_recv, np.int64) if len(run_recv) == len(items) else None
        run.clear()
        run_recv.clear()
        self._lane([it[0] for it in items], [it[1] for it in items], [it[2] for it in items],
                   [it[3] for it in items], times, out)

    def _lane(self, payloads: Sequence[bytes], lines: Sequence[int], srcs: Sequence[str] | str,
              tss: Sequence[float], times: np.ndarray | None, out: list[SymbolEvents]) -> None:
        """Received messages through the chunk lane (``payloads``: bytes or
        :class:`~ddms.io.venues.binance_chunk.Spans`; ``lines``/``srcs``: their file lines and
        files, for errors; ``tss``: their times; ``times``: their lines' receive times or
        None), the events appended to ``out``."""
        core = self.core
        numbers = np.arange(self.messages + 1, self.messages + 1 + len(payloads), dtype=np.int64)
        failed: list[InputError] = []
        failed_acts: list = []
        ns = self.venue in ("binance", "binance_futures")      # Binance cores take receive times in ns

        def fallback(t: int) -> tuple:
            payload, line, ts = payloads[t], lines[t], tss[t]
            src = srcs if isinstance(srcs, str) else srcs[t]
            try:
                msg = loads_json(payload)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                numbers[t + 1:] -= 1          # not a message: the later ones keep their numbers
                self._fail_or_stop(InputError(f"malformed JSON: {e}", src, line, _shown(payload)), failed)
                return ()
            self.messages = int(numbers[t])
            before = core.bad_messages
            acts = core.feed(msg, self.messages, int(ts * 1e9) if ns else ts)
            if core.bad_messages > before:
                r = core.reports[-1] if core.reports else None
                err = InputError(r.reason if r else "malformed message", src, line, _shown(payload))
                if not self.skip_bad:
                    failed_acts.extend(acts)     # after the actions of the messages before it
                    core.take_events()           # as feed: a bad message's rows are not handed out
                self._fail_or_stop(err, failed)
            return acts

        def on_fast(i0: int, slots: np.ndarray) -> None:
            self.messages += len(slots)

        acts, events = core.feed_chunk(payloads, numbers, fallback=fallback, on_fast=on_fast, recv=times)
        if times is not None:
            self._set_recv(numbers, times)
        self.actions.extend(acts)
        self.actions.extend(failed_acts)
        out += events
        if failed:
            raise failed[0]

    def _flush_levels(self, run: list[tuple[bytes, int, str, float]], run_recv: list[int],
                      out: list[SymbolEvents]) -> None:
        """Received messages ``run`` of a Kraken, OKX or Coinbase capture: what :meth:`_dispatch`
        does per message (events, counters, actions, reports, errors), with the JSON decoded by
        :func:`~ddms.io.venues.base.loads_json` and the rows of the whole run turned into arrays
        once (one :class:`SymbolEvents` per symbol and message, as before: views of those
        arrays, each row with its line's receive time when ``run_recv`` has them).  A bad
        message in strict mode raises after the events of the messages before it (appended to
        ``out``).  Then ``run`` and ``run_recv`` are emptied.  Cost: per message the decode and the core's
        work; O(rows) numpy per run."""
        core = self.core
        timed = len(run_recv) == len(run)
        rows: list = []
        spans: list[tuple[str, int, int]] = []
        numbers: list[int] = []
        recvs: list[int] = []
        failed: InputError | None = None
        for k, (payload, line, src, ts) in enumerate(run):
            try:
                msg = loads_json(payload)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                err = InputError(f"malformed JSON: {e}", src, line, _shown(payload))
                if not self.skip_bad:
                    failed = err
                    break
                self._fail(err)
                continue
            self.messages += 1
            if timed and run_recv[k] >= 0:
                numbers.append(self.messages)
                recvs.append(run_recv[k])
            before = core.bad_messages
            acts = core.feed(msg, self.messages, ts)
            if acts:
                self.actions.extend(acts)
            if core.bad_messages > before:
                r = core.reports[-1] if core.reports else None
                err = InputError(r.reason if r else "malformed message", src, line, _shown(payload))
                if not self.skip_bad:
                    failed = err       # as _dispatch: the bad message's rows are not handed out
                    break
                self._fail(err)
            core.take_rows(rows, spans)
        run.clear()
        run_recv.clear()
        if numbers:
            self._set_recv(np.array(numbers, np.int64), np.array(recvs, np.int64))
        if spans:
            a = np.array(rows, np.float64)
            rel, sign = a[:, 0].astype(np.int8), a[:, 1].astype(np.int8)
            cols = np.ascontiguousarray(a[:, 2:7])
            lines = a[:, 7].astype(np.int64)
            recv = self.recv_of[lines] if numbers else None
            venue = core.venue
            for sym, i, j in spans:
                out.append(SymbolEvents(venue, sym, EventBatch(rel[i:j], sign[i:j], cols[i:j], lines[i:j], rows[i][7],
                                                          rows[j - 1][7], recv=None if recv is None else recv[i:j])))
        if failed is not None:
            core.take_rows([], [])
            self._fail(failed)

    def _fail_or_stop(self, err: InputError, failed: list[InputError]) -> None:
        """:meth:`_fail` inside a chunk: in strict mode the chunk ends at this message (the
        error is raised after the events before it are handed out)."""
        if self.skip_bad:
            self._fail(err)
            return
        from ddms.io.venues.binance_chunk import StopChunk
        failed.append(err)
        raise StopChunk

    def _note_streams(self, kind: str, url: str | None, payload: bytes) -> None:
        """Binance depth streams of this connection, from the URL (``streams=a@depth/...``) or a
        sent SUBSCRIBE: the REST files of a capture may hold snapshots of other connections'."""
        self.subscribed.update(depth_symbols(kind, url, payload))

    def _dispatch(self, line: int, parsed: Line, src: str) -> list[SymbolEvents]:
        kind, url, ts, payload = parsed
        if kind in ("open", "sent"):
            if self.venue in ("binance", "binance_futures"):
                self._note_streams(kind, url, payload)
            if kind == "open":
                self.connections += 1
                if self.connections > 1:    # a new connection: no sequence carries over (as the monitor does)
                    self.actions.extend(resync_all(self.core, list(self.core.books), f"new connection at line {line}",
                                                   self.messages))
                    return self.core.take_events()
            return []
        snap = None
        if kind == "http" and self.venue in ("binance", "binance_futures"):
            snap = self._snapshot_fast(payload)     # read cleanly: it is JSON, no need to parse it twice
        msg: Any = None
        if snap is None:
            try:
                msg = loads_json(payload)
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                self._fail(InputError(f"malformed JSON: {e}", src, line, _shown(payload)))
                return []
        self.messages += 1
        if self.recv_now >= 0:
            self._set_recv(self.messages, self.recv_now)
        core = self.core
        before = self._bad_count()
        if kind == "http":
            if self.venue not in ("binance", "binance_futures"):
                core.ignored["http"] = core.ignored.get("http", 0) + 1
                return []
            sym = parse_qs(urlsplit(url).query).get("symbol", [None])[0]
            if not sym or "depth" not in url:
                core.ignored["http"] = core.ignored.get("http", 0) + 1
                return []
            if self.subscribed and sym.upper() not in self.subscribed:
                core.ignored["http_other_connection"] = core.ignored.get("http_other_connection", 0) + 1
                return []
            acts = core.apply_snapshot(sym, snap if snap is not None else self._snapshot_record(payload, msg),
                                       self.messages, int(ts * 1e9))
        elif self.venue in ("binance", "binance_futures"):
            acts = core.feed(msg, self.messages, int(ts * 1e9))
        else:
            acts = core.feed(msg, self.messages, ts)
        self.actions.extend(acts)
        if self._bad_count() > before:
            r = core.reports[-1] if core.reports else None
            self._fail(InputError(r.reason if r else "malformed message", src, line, _shown(payload)))
        return core.take_events()

    def _snapshot_fast(self, payload: bytes) -> Any:
        """The REST snapshot record when the numba scan reads ``payload`` cleanly (a depth
        snapshot, no unknown field: :meth:`_snapshot_record`'s record), else None.  Such a
        payload is JSON that ``json.loads`` reads (plain ASCII keys of the snapshot's shape,
        integers, decimal strings; the scan refuses anything else), so the reader skips its
        ``json.loads``: for a 1,000-level snapshot the standard library's parse (orjson is not
        used for texts of more than 500 brackets) cost more than the whole rest.  O(bytes)."""
        if self._snap_decoder is None:
            from ddms.io.venues.binance_book import Decoder
            self._snap_decoder = Decoder()
        return self._snap_decoder.clean_snapshot(bytes(payload))

    def _snapshot_record(self, payload: bytes, msg: Any) -> Any:
        """A Binance REST snapshot as the record the numba scan decodes from its bytes (a
        400-level snapshot costs ~1 ms as a parsed dict in Python), when that scan reads it
        cleanly; otherwise the parsed ``msg`` as before, so that a bad snapshot is reported
        exactly as it always was.  The two give the same record (the decoder's contract)."""
        from ddms.io.venues.binance_book import Decoder, DepthSnapshot
        if self._snap_decoder is None:
            self._snap_decoder = Decoder()
        dec = self._snap_decoder
        try:
            rec = dec.decode(payload)
        except InputError:
            return msg
        if dec.new_unknown:
            dec.new_unknown.clear()
            return msg
        if dec.unknown_fields:
            dec.unknown_fields.clear()
            return msg
        return rec if type(rec) is DepthSnapshot else msg

    def _bad_count(self) -> int:
        return self.core.bad_messages

    def summary(self) -> dict[str, Any]:
        """The venue core's summary (totals, ``symbols``, ``ignored``) plus the reader's
        ``venue``, ``messages``, ``bad_lines``."""
        out = self.core.summary() if self.core is not None else {"symbols": {}}
        out.update(venue=self.venue, messages_read=self.messages, bad_lines=self.bad_lines)
        return out

    # -- durable state ------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The parser's and its venue core's state (every symbol's book, sequencing and counters)
        as JSON values and numpy arrays, no pickle: :meth:`load_state` continues from it
        exactly.  Reports are not saved.  O(levels of every symbol)."""
        meta: dict[str, Any] = {
            "venue": self.venue, "messages": self.messages, "bad_lines": self.bad_lines,
            "subscribed": sorted(self.subscribed), "connections": self.connections,
            "actions": [[a.symbol, a.reason, a.line] for a in self.actions],
            "pending": [[ln, k, u, ts, p.decode("latin-1"), src] for ln, (k, u, ts, p), src in self._pending],
            "core": None}
        arrays: dict[str, np.ndarray] = {}
        if self.core is not None:
            state = self.core.save_state()
            if isinstance(state, tuple):      # Binance: its books' arrays beside the JSON
                state, core_arrays = state
                arrays = {f"core.{k}": v for k, v in core_arrays.items()}
            meta["core"] = state
        return meta, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` (ValueError for a state of another venue)."""
        if self.venue is not None and meta["venue"] is not None and meta["venue"] != self.venue:
            raise ValueError(f"a saved {meta['venue']} capture cannot continue as a {self.venue} one")
        self.venue = meta["venue"]
        self.messages, self.bad_lines = int(meta["messages"]), int(meta["bad_lines"])
        self.subscribed = set(meta["subscribed"])
        self.connections = int(meta.get("connections", 1 if meta["core"] is not None else 0))
        self.actions = [Resync(sym, reason, line) for sym, reason, line in meta["actions"]]
        self._pending = [(ln, (k, u, ts, p.encode("latin-1")), src) for ln, k, u, ts, p, src in meta["pending"]]
        self.core = None
        if meta["core"] is not None:
            self._start(None)
            if arrays or self.venue in ("binance", "binance_futures"):
                self.core.load_state(meta["core"], {k[5:]: v for k, v in arrays.items() if k.startswith("core.")})
            else:
                self.core.load_state(meta["core"])

    def _check(self) -> None:
        if self.core is not None:
            self.core._check()


def depth_symbols(kind: str, url: str | None, payload: bytes) -> set[str]:
    """The Binance symbols (upper case) whose depth streams a capture line subscribes: a
    connection line's URL (``streams=a@depth/...``, ``/ws/a@depth``) or a sent SUBSCRIBE's
    ``params``.  Empty for other lines."""
    names: list[str] = []
    if kind == "open" and url:
        for v in parse_qs(urlsplit(url).query).get("streams", []):
            names += v.split("/")
        path = urlsplit(url).path
        if "/ws/" in path:
            names.append(path.rsplit("/", 1)[-1])
    elif kind == "sent":
        try:
            msg = loads_json(payload)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return set()
        if isinstance(msg, dict) and isinstance(msg.get("params"), list):
            names += [p for p in msg["params"] if isinstance(p, str)]
    return {n.split("@", 1)[0].upper() for n in names if "@depth" in n.lower()}


def resync_all(core: Any, symbols: list[str], reason: str, line: int) -> list[Resync]:
    """Every symbol of ``symbols`` discards its book and waits for a fresh snapshot (its rows stay
    in the engine until the snapshot replaces them), counted as a resync: what a new connection
    calls for, since no venue's sequence ids carry over to it.  The one procedure of the monitor
    (a reconnect, a restart from a checkpoint: :class:`ddms.feeds.venue_session.VenueSession`)
    and of a capture's reader (a connection line after the first), so that a recording replays
    as the session ran.  Binance books ask for a REST snapshot.  O(levels)."""
    from ddms.io.venues.binance import BinanceBooks
    out: list[Resync] = []
    for sym in symbols:
        if isinstance(core, BinanceBooks):
            out += [Resync(sym, a.reason, a.message) for a in core.book(sym).resync(reason)]
        else:
            out += core._resync(sym, reason, line)
    return out


def recording_state(position: dict[str, Any], time: float, *, venue: str, core: tuple[dict, dict[str, np.ndarray]],
                    messages: int, bad_lines: int, subscribed: set[str], connections: int
                    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """What :meth:`CryptofeedReader.save_state` gives for a one-file capture (a ``ddms monitor
    --record`` recording, REST snapshots inline) read up to ``position`` (a
    :meth:`~ddms.io.cursor.LineCursor.position` of the file; ``time`` the running receive time
    there), built by a writer that fed the same lines to a venue core itself: ``core`` its
    ``(state, arrays)``, ``messages`` the messages numbered as :class:`CryptofeedParser` numbers
    them (received messages whose JSON parses and REST responses), the Binance depth streams
    ``subscribed`` and the ``connections`` opened.  The Resync actions a capture cannot perform
    (informational) start empty."""
    meta = {"venue": venue, "messages": messages, "bad_lines": bad_lines, "subscribed": sorted(subscribed),
            "connections": connections, "actions": [], "pending": [], "core": core[0]}
    return {"parser": meta, "files": [position], "times": [time]}, {f"core.{k}": v for k, v in core[1].items()}


def capture_files(path: str | os.PathLike) -> tuple[str, list[str]]:
    """``(websocket file, its .http. files)``: the REST files of a cryptofeed capture are the
    files beside it named ``<EXCHANGE>.http.*`` for its ``<EXCHANGE>.ws.*``."""
    p = os.fspath(path)
    base = os.path.basename(p)
    exch, dot, rest = base.partition(".ws.")
    if not dot:
        return p, []
    d = os.path.dirname(p) or "."
    https = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(exch + ".http."))
    return p, https


def capture_paths(path: str | os.PathLike, use: str = "read") -> list[str]:
    """``[websocket file, its .http. files...]`` of a capture named by its websocket file:
    :class:`ReplayError` for a missing file or for the REST half named instead (``use`` says
    what the caller does with it: ``read``, ``serve``).  Shared by every reader of the format."""
    ws, https = capture_files(path)
    if not os.path.exists(ws):
        raise ReplayError("no such file", ws)
    if ".http." in os.path.basename(ws):
        raise ReplayError(f"the REST half of a cryptofeed capture: {use} its <EXCHANGE>.ws.* file, which finds "
                          "this one beside it", ws)
    return [ws, *https]


def merge_lines(streams: Iterable[Iterator[tuple]]) -> Iterator[tuple]:
    """The lines of several files (:func:`_lines_of` tuples: receive time, file tag, ...) as one
    stream by receive time; each file's lines keep their order, and on equal times a REST line
    (tag > 0) comes before the websocket line (tag 0): the snapshot was taken before."""
    streams = list(streams)
    if len(streams) == 1:       # one file (Kraken, OKX, Coinbase): its lines as they are
        return streams[0]
    return heapq.merge(*streams, key=lambda x: (x[0], x[1] == 0))


_MAX_NS = 2**63 - 1


def _lines_of(path: str | LineCursor, tag: int, last: float = 0.0) -> Iterator[tuple[float, int, int, bytes]]:
    """(receive time or -1 when unknown, file tag, line number, raw) of each line of a file (or
    of a :class:`LineCursor` from its position, ``last`` the running time there); a line whose
    time cannot be read keeps the previous line's (the parser then says what is wrong)."""
    cur = path if isinstance(path, LineCursor) else LineCursor(path)
    for raw in cur:
        head = raw.split(b": ", 1)[0].split(b" ")
        t = head[-1] if head else b""
        if _TS.match(t.rstrip(b"\r\n")):
            try:
                last = max(last, float(t))
            except ValueError:
                pass
        yield last, tag, cur.line, raw


def read_cryptofeed(path: str | os.PathLike, *, http: Iterable[str] | None = None, venue: str | None = None,
                    skip_bad: bool = False, parser: CryptofeedParser | None = None, chunk: int = 4096
                    ) -> Iterator[SymbolEvents | ChunkEvents]:
    """Read a cryptofeed websocket capture and its REST files (``http``; default: the
    ``<EXCHANGE>.http.*`` files beside it), merged by receive time; yield the events.  Pass a
    ``parser`` to read its :meth:`~CryptofeedParser.summary` afterwards (:class:`CryptofeedReader`
    is the same with a position that can be saved).  Lines go to
    :meth:`CryptofeedParser.feed_lines` ``chunk`` at a time (``chunk=1``: line by line; the
    output is the same rows, lines and receive times; the chunk lanes' as
    :class:`~ddms.io.levels.ChunkEvents`)."""
    reader = CryptofeedReader(path, http=http, venue=venue, skip_bad=skip_bad, chunk=chunk)
    if parser is not None:
        reader.parser = parser
    try:
        for evs in reader.events():
            yield from evs
    except (InputError, ReplayError) as e:
        yield from getattr(e, "events", ())
        raise


def _floats(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``float(bytes(buf[a:b]))`` of each span (``digits[.digits]``, at most 30 bytes, as
    :func:`~ddms.io.kernels.recvlines.scan_received` leaves them for Python), all at once:
    the spans as one NumPy bytes array cast to float64, which parses each as Python's ``float``
    does (correctly rounded; the tests compare the two).  Why: the times the kernel cannot
    round (more than 18 digits on a side, an integer part of 0 or beyond 2**53: rare since
    :func:`~ddms.io.kernels.recvlines._exact_seconds` reads the 17-18 digit ones) would cost one
    ``float`` each with its slicing and NumPy scalar reads.  Cost: O(spans x longest) in NumPy."""
    lens = ends - starts
    w = int(lens.max())
    cols = np.arange(w)
    idx = np.minimum(starts[:, None] + cols, len(buf) - 1)
    heads = np.where(cols < lens[:, None], buf[idx], 0).astype(np.uint8)
    return np.ascontiguousarray(heads).view(f"S{w}").ravel().astype(np.float64)


def _recv_ns(t: float) -> int:
    """A line's receive time (the files' running maximum) in ns as int64: a time beyond year
    2262 is clamped (the parser judges such a line)."""
    ns = t * 1e9
    return int(ns) if ns < _MAX_NS else _MAX_NS     # (also an infinite time: a 400-digit one)


def _timed(ev: SymbolEvents | ChunkEvents, p: CryptofeedParser) -> SymbolEvents | ChunkEvents:
    """``ev`` with each row's receive time: that of the line of the message that made it
    (:attr:`CryptofeedParser.recv_of`), for merges with other inputs."""
    b = ev.batch
    if b.recv is not None:       # already timed (the chunk lanes)
        return ev
    return replace(ev, batch=EventBatch(b.rel, b.sign, b.cols, b.line, b.first_line, b.last_line, b.skipped, b.error,
                                        p.recv_of[b.line]))


class CryptofeedReader:
    """:func:`read_cryptofeed` as an object whose position can be saved: the websocket file
    and its ``.http.`` files merged by receive time, fed to a :class:`CryptofeedParser`.
    :meth:`events` yields, per ``chunk`` input lines (:attr:`batch_updates`), the events they
    caused (a list, maybe empty: the unit of a checkpoint, so no line is ever half handed out;
    runs of Binance messages go through the parser's numba chunk lane,
    :meth:`CryptofeedParser.feed_lines`); every row carries its line's receive time
    (``EventBatch.recv``, the files' running maximum, for merges with other inputs); :meth:`save_state` /
    :meth:`load_state` hold the parser's state and, per file, the position after its last line
    fed and its running receive time.  The merge keeps the lines of every file in order and
    takes the earliest (ties: the files' order), so the merge of the files' remaining lines
    from saved positions continues the uninterrupted merge exactly."""

    def __init__(self, path: str | os.PathLike, *, http: Iterable[str] | None = None, venue: str | None = None,
                 skip_bad: bool = False, chunk: int = 4096) -> None:
        found = capture_paths(path)
        ws = found[0]
        self.files = [ws] + (list(http) if http is not None else found[1:])
        self.parser = CryptofeedParser(ws, venue=venue, skip_bad=skip_bad)
        self.cursors = [LineCursor(f) for f in self.files]
        self._fed = [c.mark() for c in self.cursors]    # each file's position after its last line fed
        self._time = [0.0] * len(self.files)             # each file's running receive time there
        self.batch_updates = max(1, chunk)   # lines per step (a checkpointed run asks for fewer)

    def _lines(self, tag: int) -> Iterator[tuple[float, int, int, bytes, tuple[int, int, bytes]]]:
        """:func:`_lines_of`'s lines after the current position, each with the position after it."""
        cur = self.cursors[tag]
        for t, _, n, raw in _lines_of(cur, tag, self._time[tag]):
            yield t, tag, n, raw, (cur.line, cur.offset, raw)

    def events(self) -> Iterator[list[SymbolEvents]]:
        """The events of the lines after the current position, one list per step of
        :attr:`batch_updates` lines (the position is saved after each).  Strict mode: a bad line
        hands out the events of the lines before it, then raises."""
        for c, mark in zip(self.cursors, self._fed, strict=True):
            if c.line != mark[0]:      # the previous iteration read ahead: back to what was fed
                c.seek(c.position(mark))
        if len(self.files) == 1 and not self.cursors[0].gz:
            yield from self._events_plain()
            return
        streams = [self._lines(i) for i in range(len(self.files))]
        raws: list[bytes] = []
        lines: list[int] = []
        sources: list[str | None] = []
        times: list[int] = []
        marks: dict[int, tuple[float, tuple[int, int, bytes]]] = {}    # per file: its last line's
        for t, tag, n, raw, pos in merge_lines(streams):
            raws.append(raw)
            lines.append(n)
            sources.append(None if tag == 0 else self.files[tag])
            times.append(_recv_ns(t))
            marks[tag] = (t, pos)
            if len(raws) >= self.batch_updates:
                yield self._step(raws, lines, sources, times, marks)
                raws, lines, sources, times, marks = [], [], [], [], {}
        if raws:
            yield self._step(raws, lines, sources, times, marks)

    def _events_plain(self) -> Iterator[list[SymbolEvents]]:
        """:meth:`events` of a capture in one plain file (no REST files: nothing to merge): the
        same steps, receive times and positions, with the lines read a step at a time as spans of
        a buffer (:meth:`LineCursor.spans <ddms.io.cursor.LineCursor.spans>`: no bytes object per
        line, except for the lines Python reads), the received messages
        found and timed by :func:`~ddms.io.kernels.recvlines.scan_received` on the step's buffer
        (the other lines by :func:`_lines_of`'s rule, in Python) and handed to
        :meth:`CryptofeedParser.feed_block`."""
        from ddms.io.kernels.recvlines import RECV, RECV_PY, scan_received
        cur = self.cursors[0]
        last = self._time[0]
        match = _TS.match
        for buf, offs, block in cur.spans(lambda: self.batch_updates):
            n = len(block)
            kind = np.empty(n, np.int8)
            ps, pe, ts = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float64)
            tl = None
            if scan_received(buf, offs, kind, ps, pe, ts):
                py = np.flatnonzero(kind == RECV_PY)
                if len(py):                 # times the kernel cannot round exactly (17 digits and more)
                    ts[py] = _floats(buf, offs[py], ps[py] - 2)
                    kind[py] = RECV
                tl = np.full(n, -np.inf)
                for i in np.flatnonzero(kind != RECV).tolist():
                    raw = block[i]
                    t = raw.partition(b": ")[0].rpartition(b" ")[2]    # _lines_of's rule
                    if match(t.rstrip(b"\r\n")):
                        try:
                            tl[i] = float(t)
                        except ValueError:
                            pass
                received = kind == RECV
                tl[received] = ts[received]
            running = np.maximum.accumulate(ts if tl is None else tl)
            np.maximum(running, last, out=running)
            last = float(running[-1])
            ns = running * 1e9
            times = np.full(n, _MAX_NS, np.int64)
            fits = ns < _MAX_NS
            times[fits] = ns[fits].astype(np.int64)
            yield self._step(block, range(cur.line - n + 1, cur.line + 1), None, times, {0: (last, cur.mark())},
                             (buf, kind, ps, pe, ts))

    def _step(self, raws: list[bytes], lines: Sequence[int], sources: list[str | None] | None, times: Sequence[int],
              marks: dict, scan: tuple | None = None) -> list[SymbolEvents]:
        """The events of one step's lines (``sources``: see :meth:`CryptofeedParser.feed_into`;
        ``scan``: see :meth:`CryptofeedParser.feed_block`), each with its receive time; then
        the files' positions advance to ``marks``."""
        p = self.parser
        got: list[SymbolEvents] = []
        try:
            if len(raws) == 1:
                p.recv_now = int(times[0])
                got += p.feed(raws[0], lines[0], None if sources is None else sources[0])
            elif scan is not None:
                p.feed_block(raws, lines, times, got, scan)
            else:
                p.feed_into(raws, lines, sources, times, got)
        except (InputError, ReplayError) as e:
            e.events = [_timed(ev, p) for ev in got]  # the events of the lines before the bad one
            raise
        out = [_timed(ev, p) for ev in got]
        for tag, (t, pos) in marks.items():
            self._fed[tag], self._time[tag] = pos, t
        return out

    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The parser's state and each file's position (after the last line fed): JSON values
        and numpy arrays.  O(the parser's state)."""
        meta, arrays = self.parser.save_state()
        return {"parser": meta, "files": [c.position(m) for c, m in zip(self.cursors, self._fed, strict=True)],
                "times": list(self._time)}, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of the same capture: ValueError when the files
        differ (another set of files, or other lines before the saved positions)."""
        files = [f["file"] for f in meta["files"]]
        if [os.path.basename(f) for f in files] != [os.path.basename(f) for f in self.files]:
            raise ValueError(f"a checkpoint of the capture files {', '.join(files)}, this run reads "
                             f"{', '.join(self.files)}")
        for c, pos in zip(self.cursors, meta["files"], strict=True):
            c.seek(pos)
        self._fed = [c.mark() for c in self.cursors]
        self._time = [float(t) for t in meta["times"]]
        self.parser.load_state(meta["parser"], arrays)
