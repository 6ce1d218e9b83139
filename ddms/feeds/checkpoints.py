"""``ddms monitor --checkpoint DIR``: the monitor's engine and feed state, saved and restored.

A checkpoint is taken at a message boundary -- after the monitor handed a drained run of the
queue to the engine (:meth:`Monitor._flush`), where the engine has applied every event the
protocol core produced -- every ``every`` feed messages and when the session ends.  It is the
engine's checkpoint file (:func:`ddms.runtime.checkpoint.save`: Arrow IPC, atomic) named
``ckpt-<engine line>.arrow`` like ``ddms run --checkpoint``'s, with the protocol core's own
state beside it, from its ``save_state()`` (JSON values and numpy arrays, no pickle):

* the order protocol (:meth:`OrderFeed.save_state <ddms.io.orderproto.OrderFeed.save_state>`):
  the resting orders (and the orders the engine holds while waiting for a snapshot), the last
  applied ``seq``, the sync state;
* one Binance symbol (:meth:`BinanceBook.save_state
  <ddms.io.venues.binance_book.BinanceBook.save_state>`): its price levels, decimals, sequence
  state;
* a venue session of many symbols (Kraken, OKX, Coinbase, Binance: :mod:`ddms.feeds.venue_session`):
  the venue core's state, every symbol's book and sequencing (:meth:`VenueBooks.save_state
  <ddms.io.venues.base.VenueBooks.save_state>`, :meth:`BinanceBooks.save_state
  <ddms.io.venues.binance.BinanceBooks.save_state>`), the venue and the symbols followed.

Restoring (the same ``--checkpoint DIR`` on restart: the newest complete checkpoint there)
loads the engine, then the core, once it is created, with ``load_state()`` and tells it that
the feed goes on over a new connection (its ``restarted()``):

* order protocol: the decoder continues at the saved ``seq``.  A message with ``seq <= saved``
  was applied before the kill and is dropped (stale); ``saved + 1`` is applied; a later ``seq``
  is a gap: the decoder asks the server for a snapshot and replaces the restored orders by the
  snapshot's (deletes of every restored order, inserts of the snapshot's, one engine line) --
  :class:`OrderFeed`'s own gap handling.  Nothing is applied twice, nothing skipped;
* price levels (one Binance symbol, and every symbol of a venue session): a venue's sequence
  ids do not carry over to a new connection, so each symbol's book becomes the rows the engine
  holds and the symbol resynchronizes from the venue -- Binance from a fresh REST snapshot
  (one Binance book: asked for by its first depth event; a venue session: at once, as after a
  reconnect), Kraken, OKX and Coinbase from the snapshot that answers the new connection's
  subscription -- which deletes those rows and inserts the snapshot's (one engine line per
  symbol), so the views stay consistent throughout and end equal to an uninterrupted monitor's.
  A venue session's engine lines continue after the restored line.

Recording (``--record FILE`` with ``--checkpoint``; venue sessions: Kraken, OKX, Coinbase,
Binance -- a recorded Binance feed whose server names no symbol, e.g. ``serve-feed`` of an
hftbacktest capture, is a session of the symbol(s) its stream names or its snapshot path asks
for, not the one-book monitor).  A venue session numbers its engine lines as a capture
reader numbers the recording (:class:`ddms.io.formats.SymbolBatches`: one line per message that
made rows) and hands the engine the rows message by message
(:meth:`~ddms.feeds.venue_session.VenueSession.take_events`), so its engine state at a message
boundary is ``ddms run``'s over the recording at that line, floating-point sums included.  Each
checkpoint then also holds where the recording ends (line count, byte offset, a hash of the last
line: :meth:`~ddms.feeds.venue_session.Recorder.state`) and, under ``readers``, the capture
reader's state at that point in the form :func:`ddms.runtime.resume.restore_readers` restores
(:func:`_replay_state`): ``ddms run PROGRAM --data FILE --resume CKPT [--until N]`` replays the
session from any checkpoint kept (``--checkpoint-keep 0`` keeps them all) to any line, exactly as
the uninterrupted ``ddms run`` prints it.  A restarted monitor with the same ``--record FILE``
cuts the recording back to the restored checkpoint's position (the lines the killed process
wrote after it were never part of the restored state) and appends the new connection, at which
a capture reader resyncs every book as the monitor does (:func:`ddms.io.cryptofeed.resync_all`):
one file holds the whole session, restarts included.  Refused, naming the reason: restarting
with ``--record`` into another file (or a file that differs before the position), or after a
checkpoint taken without ``--record``; ``ddms run --resume`` of a monitor checkpoint that holds
no recording position (taken without ``--record``; one Binance book the monitor could not name,
which a capture reader numbers otherwise) or against another file.

The order protocol records in its own format (:mod:`ddms.io.orderrec`: the messages plus the
decoder's decisions -- snapshots applied, resyncs, restarts -- in order), and its checkpoints
hold, under ``readers``, an :class:`~ddms.io.orderrec.OrderRecordingReader`'s state at the
recording's end (the decoder's own state: it is the reader's decoder), so ``ddms run PROGRAM
--data FILE --resume CKPT`` replays it too; its engine lines are the decoder's (``seq`` on a
stream without gaps: line N of the finance.csv served).  A restarted monitor cuts the recording
back to the restored checkpoint and writes an ``X`` record where the decoder restarted.  A malformed
message is counted by the monitor and refused by a strict ``ddms run`` (``--skip-bad`` replays
it); the readers' counters of bad messages may differ from a replay's.

Counters (messages, gaps, ...) of the order protocol and of a one-symbol Binance book start
again at 0 in the restarted process (the restored book counts one resync); a venue session's
per-symbol counters continue from the checkpoint (each symbol counts one more resync); the
engine's line numbers continue.  With ``--strategy`` the checkpoint also holds the strategy's
state (its ``state()``, orders, open orders, position, subscriptions: :mod:`strategies.api`),
restored before the feed starts; a strategy without ``state()``/``restore()`` is refused, and so
is ``--strategy`` on a checkpoint taken without one.  The engine lines a strategy's set-up took
before the feed (``base``) are saved so that the feed's lines and the engine's stay matched.  A
checkpoint of another kind of feed, venue or set of symbols is refused naming the difference.

Cost: a checkpoint is O(engine state + resting orders or levels), written synchronously on the
monitor's thread (messages queue meanwhile; the transport's bounded queue absorbs the pause).
Measured with ``vwap.m3`` on the order protocol (2 loaded cores, load ~6): 1,000 resting orders
3.7 ms and 57 KB per checkpoint; 100,000 orders 112 ms and 3.3 MB; restoring 90-170 ms.  At the
default ``every`` = 10,000 messages a book of 1,000 orders costs under 1 ms per 1,000 messages.
With ``--record`` on the order protocol the decoder's arrays are written twice (the monitor's
state and the replay reader's, equal values), about doubling that part of the file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ddms.errors import CheckpointError
from ddms.io.cryptofeed import recording_state
from ddms.io.formats import SymbolBatches
from ddms.io.orderproto import OrderFeed
from ddms.io.orderrec import OrderRecordingReader
from ddms.io.schema import ASKS, BIDS
from ddms.io.venues.binance_book import BinanceBook
from ddms.runtime.checkpoint import restore, save
from ddms.runtime.resume import KEEP, PREFIX, SUFFIX, checkpoints

__all__ = ["MonitorCheckpoints"]

DEFAULT_EVERY = 10_000


class MonitorCheckpoints:
    """Checkpoints of one monitor session in ``folder`` (created if missing).  ``engine``: the
    monitor's engine; :attr:`feed` is the saved feed state to give the protocol core (None when
    starting fresh); :attr:`restored_from` the checkpoint file restored."""

    def __init__(self, folder: str | os.PathLike, engine: Any, *, every: int = DEFAULT_EVERY,
                 keep: int = KEEP) -> None:
        if every < 1:
            raise CheckpointError(f"--checkpoint-every must be >= 1 message, got {every}")
        if keep < 0:
            raise CheckpointError(f"--checkpoint-keep must be >= 0 (0 keeps every checkpoint), got {keep}")
        if engine is None:
            raise CheckpointError("--checkpoint needs --views: the checkpoint holds the engine's state")
        self.folder, self.engine, self.every, self.keep = Path(folder), engine, every, keep
        self.folder.mkdir(parents=True, exist_ok=True)
        for p in self.folder.glob(f".{PREFIX}*.tmp"):   # left by a process killed while writing
            p.unlink(missing_ok=True)
        self.feed: dict[str, Any] | None = None
        self._arrays: dict[str, np.ndarray] = {}
        self.restored_from: Path | None = None
        self.recording: dict[str, Any] | None = None   # the restored checkpoint's recording (Recorder.state)
        self.written = 0
        self._since = 0         # feed messages since the last checkpoint
        self.base = 0           # engine lines before the feed's first (a strategy's set-up rows): the monitor sets it
        found = checkpoints(self.folder)
        if found:
            path = found[-1][1]
            extra, arrays = restore(engine, path)
            if "monitor" not in extra:
                raise CheckpointError(f"{path}: not a ddms monitor checkpoint (a ddms run checkpoint?)")
            self.feed, self._arrays, self.restored_from = extra["monitor"], arrays, path
            self.base = int(extra["monitor"].get("base", 0))
            self.recording = extra["monitor"].get("recording")
            self._arrays = {k: a for k, a in arrays.items() if not k.startswith("reader0.")}

    # -- restoring ------------------------------------------------------------------------------
    def _take(self, kind: str) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
        """The saved feed state if it is of ``kind`` (None: nothing to restore); refuses another."""
        f = self.feed
        if f is None:
            return None
        self.feed = None
        if f.get("kind") != kind:
            raise CheckpointError(f"{self.restored_from}: a checkpoint of a {f.get('kind')} feed, this feed is {kind}")
        if "state" not in f:
            raise CheckpointError(f"{self.restored_from}: a monitor checkpoint of an older ddms (no feed state): "
                                  "remove it to start over")
        return f, self._arrays

    def _load(self, core: Any, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        try:
            if arrays is None:
                core.load_state({**state, "counters": {}})
            else:
                core.load_state({**state, "counters": {}}, arrays)
        except (ValueError, KeyError, TypeError) as e:
            raise CheckpointError(f"{self.restored_from}: cannot continue this feed from the checkpoint: {e}") from None

    def restore_core(self, core: OrderFeed | BinanceBook) -> str | None:
        """Give ``core`` (just created) the saved feed state (:meth:`load_state`, then
        :meth:`restarted`); returns a sentence saying what was restored (None when there was
        nothing to restore).  Raises :class:`CheckpointError` when the checkpoint is of another
        kind of feed."""
        got = self._take("orders" if isinstance(core, OrderFeed) else "binance")
        if got is None:
            return None
        f, a = got
        pos = self.engine.position
        self._load(core, f["state"], a)
        if core.updates + self.base != pos:
            raise CheckpointError(f"{self.restored_from}: corrupt checkpoint: the feed at line {core.updates:,}, "
                                  f"the engine at line {pos:,}")
        if isinstance(core, OrderFeed):
            core.restarted()
            return (f"restored {self.restored_from.name}: engine line {pos:,}, order protocol at seq "
                    f"{core.last_seq:,}, {len(core.orders or core._stale_orders or {}):,} resting orders; continuing "
                    f"from seq {core.last_seq + 1:,}")
        n = core.depth(BIDS) + core.depth(ASKS)
        core.restarted(f"restored {self.restored_from.name}")
        return (f"restored {self.restored_from.name}: engine line {pos:,}, {n:,} price levels of "
                f"{core.symbol or '?'}; resynchronizing from a fresh snapshot")

    def restore_session(self, session: Any) -> str | None:
        """Give a venue session (just created: :class:`~ddms.feeds.venue_session.VenueSession`)
        the saved state of its core (every symbol's book), then make every symbol resynchronize
        over the new connection; its engine lines continue after the restored line.  Refuses a
        checkpoint of another venue or set of symbols."""
        got = self._take("venue")
        if got is None:
            return None
        f, a = got
        if f["venue"] != session.venue or f["symbols"] != session.symbols:
            raise CheckpointError(f"{self.restored_from}: a checkpoint of {f['venue']} ({', '.join(f['symbols'])}), "
                                  f"this feed is {session.venue} ({', '.join(session.symbols)})")
        self._load(session.core, f["state"], a if session.venue == "binance" else None)
        session.restored = True       # its first connection resyncs every symbol (on_connect)
        pos = self.engine.position
        session.line_base = int(f.get("numbered", pos))
        session.line, session.last_src = pos - self.base, f.get("last_src")
        session.seen = dict.fromkeys(f.get("seen", ()))
        return (f"restored {self.restored_from.name}: engine line {self.engine.position:,}, {session.venue} books of "
                f"{', '.join(session.symbols)}; each resynchronizes from a fresh snapshot")

    # -- saving ---------------------------------------------------------------------------------
    def after_flush(self, core: Any, messages: int, recorder: Any = None) -> Path | None:
        """Called at a message boundary with ``messages`` fed so far in this run: checkpoint when
        ``every`` messages have passed since the last one.  ``core``: the protocol core or the
        venue session; ``recorder``: ``--record``'s :class:`~ddms.feeds.venue_session.Recorder`."""
        if core is None or messages - self._since < self.every:
            return None
        self._since = messages
        return self.write(core, recorder)

    def write(self, core: Any, recorder: Any = None) -> Path | None:
        """Checkpoint the engine and ``core`` (an :class:`OrderFeed`, a :class:`BinanceBook` or
        a venue session) now, at a message boundary; with ``recorder`` (``--record``) also where
        the recording is and -- a venue session -- the state of a capture reader that has read
        the recording up to there (``ddms run --resume`` continues from it).  O(state)."""
        if core is None:
            return None
        if self.feed is not None:       # restored but the core never came up: keep the checkpoint as is
            return None
        if isinstance(core, (OrderFeed, BinanceBook)):
            state, arrays = core.save_state()
            meta = {"kind": "orders" if isinstance(core, OrderFeed) else "binance", "state": state}
        else:                           # a venue session
            state = core.core.save_state()
            state, arrays = state if isinstance(state, tuple) else (state, {})
            if core.line + self.base != self.engine.position:
                raise CheckpointError(f"the venue session handed out {core.line:,} lines, the engine applied "
                                      f"{self.engine.position - self.base:,}")
            meta = {"kind": "venue", "venue": core.venue, "symbols": core.symbols, "state": state,
                    "numbered": core.line_base + core.numbered, "last_src": core.last_src, "seen": list(core.seen)}
        meta["base"] = self.base
        extra: dict[str, Any] = {"monitor": meta}
        if recorder is not None:
            meta["recording"] = recorder.state()
            if meta["kind"] == "venue":
                extra |= _replay_state(core, recorder, (state, arrays)) | {"base": self.base}
                arrays = arrays | extra.pop("arrays")
            elif meta["kind"] == "orders":      # the decoder at the recording's end: a replay's reader state
                rstate, rarrays = OrderRecordingReader.state_of(recorder.position(), state, arrays)
                extra |= {"readers": [{"adaptor": OrderRecordingReader.__name__, "file": recorder.path,
                                       "state": rstate, "pending": None}], "base": self.base}
                arrays = arrays | {f"reader0.{k}": a for k, a in rarrays.items()}
        path = self.folder / f"{PREFIX}{self.engine.position:015d}{SUFFIX}"
        save(self.engine, path, extra=extra, extra_arrays=arrays)
        self.written += 1
        if self.keep:
            for _, old in checkpoints(self.folder)[:-self.keep]:
                old.unlink(missing_ok=True)
        return path


def _replay_state(session: Any, recorder: Any, core: tuple[dict, dict[str, np.ndarray]]) -> dict[str, Any]:
    """The reader part of a ``ddms run --checkpoint`` checkpoint of the recording (what
    :func:`ddms.runtime.resume.restore_readers` restores): the capture reader of the recording
    (:class:`~ddms.io.formats.SymbolBatches` over a :class:`~ddms.io.cryptofeed.CryptofeedReader`)
    as if it had read the recording up to where it ends now, with the session's venue core
    (fed the same messages, numbered the same way), the engine lines handed out and the symbol a
    replay keeps; its arrays under ``arrays`` (``reader0.``-prefixed)."""
    reader, arrays = recording_state(recorder.position(), recorder.time, venue=recorder.venue, core=core,
                                     messages=session.line_base + session.numbered,
                                     bad_lines=session.core.bad_messages, subscribed=recorder.subscribed,
                                     connections=recorder.connections)
    state = SymbolBatches.state_of(reader, session.line, session.last_src, list(session.seen), session.want)
    return {"readers": [{"adaptor": SymbolBatches.__name__, "file": recorder.path, "state": state, "pending": None}],
            "base": 0, "arrays": {f"reader0.{k}": a for k, a in arrays.items()}}
