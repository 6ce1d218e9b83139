"""Recordings of our order protocol (``ddms monitor URL/orders --record FILE``) and their reader.

Why: a monitor on the order protocol (:mod:`ddms.io.orderproto`) decides what reaches the
engine from more than the messages -- when a snapshot answered a gap, when it resynchronized
after a reconnect, when a restarted process restored a checkpoint -- so a recording must hold
those decisions too, in the order they were taken, for a replay to make the same engine rows on
the same lines (the monitor's line numbers are its :class:`~ddms.io.orderproto.OrderFeed`'s
``updates``: ``seq`` on a stream that never resyncs, so line N of a finance.csv served is line N
of the monitor and of the replay).

Format (text, one record a line; a :class:`~ddms.io.cursor.LineCursor` reads it, so a
checkpoint holds a byte offset and a hash of the line before it):

``#ddms-orders 1 brokers=<n>``
    the first line: the format, its version, the decoder's ``brokers``
``<ts> C <url>``
    a connection opened (informational)
``<ts> M <json>``
    a message received, as received (:meth:`OrderFeed.feed_message`); a message holding a line
    break is written as a JSON string of its text (``<ts> Q "<...>"``), so every record is one line
``<ts> S <json>``
    a snapshot answer applied (:meth:`OrderFeed.apply_snapshot`)
``<ts> R <reason>``
    the monitor resynchronized (a reconnect, a queue overflow: :meth:`OrderFeed.resync`)
``<ts> X <reason>``
    a restarted monitor restored a checkpoint here (:meth:`OrderFeed.restarted`)

``<ts>`` is the receive time in unix seconds.  Malformed messages are recorded as received and
counted by the decoder in a replay as in the monitor; a malformed *record* (an unknown tag, no
header) is an :class:`~ddms.errors.InputError` naming the file and line (``skip_bad``: counted in
:attr:`OrderRecordingReader.bad_lines` and skipped).

Cost: the writer formats and flushes one line a message; the reader is one ``json.loads`` and
the decoder's work a message (:class:`OrderFeed`), rows turned into arrays every
``batch_updates`` records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from ddms.errors import InputError
from ddms.io.cursor import LineCursor, position
from ddms.io.detect import ORDERS_HEADER, is_order_recording
from ddms.io.events import EventBatch

if TYPE_CHECKING:
    # imported by the reader only: format detection (every ``ddms run``) asks
    # is_order_recording, and the decoder is the io layer's largest module (~5 ms to compile)
    from ddms.io.orderproto import OrderFeed

__all__ = ["HEADER", "OrderRecorder", "OrderRecordingReader", "is_order_recording"]

HEADER = ORDERS_HEADER
VERSION = 1


class OrderRecorder:
    """Writes a monitor's order-protocol session (see the module docstring); each line is flushed
    at once (a recording cut by a crash keeps every line before).  ``out``: a binary file at its
    end; ``resume``: the :meth:`state` of the process before (its recording cut back to that
    position), whose counts continue; a new recording starts with the header.  The interface is
    :class:`ddms.feeds.venue_session.Recorder`'s (``received``, ``rest``, ``opened``,
    ``position``, ``state``) plus :meth:`resync` and :meth:`restarted`."""

    def __init__(self, out: IO[bytes], path: str = "", brokers: int = 10, resume: dict[str, Any] | None = None) -> None:
        self.out, self.path, self.brokers = out, path, brokers
        r = resume or {}
        self.lines, self.offset = int(r.get("line", 0)), int(r.get("offset", 0))
        self.last = r.get("last_bytes", b"")
        self.time = float(r.get("time", 0.0))
        self.connections = int(r.get("connections", 0))
        if self.lines == 0:
            self._line(HEADER + f"{VERSION} brokers={brokers}".encode())

    def _line(self, raw: bytes) -> None:
        raw += b"\n"
        self.out.write(raw)
        self.out.flush()
        self.lines += 1
        self.offset += len(raw)
        self.last = raw

    def _record(self, t: float, tag: str, body: bytes) -> None:
        self.time = max(self.time, t)
        self._line(f"{t:.6f} {tag} ".encode() + body)

    def opened(self, url: str, t: float) -> None:
        self.connections += 1
        self._record(t, "C", url.encode("utf-8", "surrogateescape"))

    def received(self, t: float, data: bytes | str) -> None:
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else bytes(data)
        if b"\n" in raw or b"\r" in raw:
            self._record(t, "Q", json.dumps(raw.decode("utf-8", "surrogateescape")).encode())
        else:
            self._record(t, "M", raw)

    def rest(self, url: str, t: float, body: bytes) -> None:
        """A snapshot answer the monitor applies next (``url``: where it came from, not kept)."""
        text = bytes(body).replace(b"\r", b" ").replace(b"\n", b" ")   # JSON: line breaks are whitespace
        self._record(t, "S", text)

    def resync(self, t: float, reason: str) -> None:
        self._record(t, "R", reason.replace("\n", " ").encode())

    def restarted(self, t: float, reason: str) -> None:
        self._record(t, "X", reason.replace("\n", " ").encode())

    def position(self) -> dict[str, Any]:
        """Where the recording ends now, as :meth:`ddms.io.cursor.LineCursor.position`."""
        return position(self.path, self.lines, self.offset, self.last)

    def state(self) -> dict[str, Any]:
        """What a restarted process needs to continue this recording (JSON values; the keys of
        :meth:`ddms.feeds.venue_session.Recorder.state`)."""
        return {"file": self.path, "position": self.position(), "time": self.time, "subscribed": [],
                "connections": self.connections}

    def _check(self) -> None:
        """The counts agree with the file (open or closed): its size is the bytes counted, its
        last line the one kept, its line count the lines counted, its first line the header."""
        if not self.out.closed:
            self.out.flush()
        with open(self.path, "rb") as f:
            body = f.read()
        assert len(body) == self.offset, "bytes counted != the file's size"
        assert body.endswith(self.last) and self.last.endswith(b"\n"), "the last line kept is not the file's"
        assert body.count(b"\n") == self.lines and body.startswith(HEADER), "line count or header"


class OrderRecordingReader:
    """Replays an order-protocol recording through an :class:`OrderFeed`, as the monitor fed it:
    :meth:`batches` yields the engine rows (line = the decoder's ``updates``, the monitor's engine
    lines); :meth:`save_state` / :meth:`load_state` hold the position in the file (a
    :class:`LineCursor` position) and the decoder's state, so a resumed iteration continues the
    uninterrupted one exactly -- and a ``ddms monitor --record --checkpoint`` checkpoint holds
    the same state (:mod:`ddms.feeds.checkpoints`), so ``ddms run --resume`` replays a session
    from the monitor's checkpoints."""

    def __init__(self, path: str, *, skip_bad: bool = False, batch_updates: int = 4096) -> None:
        self.path, self.skip_bad, self.batch_updates = path, skip_bad, batch_updates
        self.cursor = LineCursor(path)
        self.feed: OrderFeed | None = None     # made by the header (its brokers)
        self.bad_lines = 0

    @property
    def position(self) -> int:
        """Engine lines handed out so far."""
        return self.feed._taken if self.feed is not None else 0

    def _bad(self, reason: str, raw: bytes) -> None:
        if not self.skip_bad:
            raise InputError(reason, self.path, self.cursor.line, raw.decode("utf-8", "replace").rstrip())
        self.bad_lines += 1

    def _header(self, raw: bytes) -> None:
        words = raw.strip().lstrip(b"\xef\xbb\xbf").split()
        try:
            version, brokers = int(words[1]), int(words[2].split(b"=", 1)[1])
        except (IndexError, ValueError):
            version, brokers = -1, 0
        if words[:1] != [HEADER.strip()] or version != VERSION or brokers < 1:
            raise InputError(f"not an order-protocol recording header (expected '#ddms-orders {VERSION} "
                             "brokers=N')", self.path, self.cursor.line, raw.decode("utf-8", "replace").rstrip())
        from ddms.io.orderproto import OrderFeed

        self.feed = OrderFeed(brokers=brokers, source=self.path)

    def _apply(self, raw: bytes) -> None:
        feed = self.feed
        assert feed is not None
        parts = raw.rstrip(b"\r\n").split(b" ", 2)
        if len(parts) < 2:
            return self._bad("expected '<ts> <tag> <body>'", raw)
        tag, body = parts[1], parts[2] if len(parts) == 3 else b""
        try:
            ts = float(parts[0])
        except ValueError:
            return self._bad(f"the receive time {parts[0][:40]!r} is not a number", raw)
        if tag == b"M":
            feed.feed_message(body, int(ts * 1e9))
        elif tag == b"Q":
            try:
                text = json.loads(body)
            except ValueError as e:
                return self._bad(f"a Q record holds no JSON string: {e}", raw)
            feed.feed_message(str(text), int(ts * 1e9))
        elif tag == b"S":
            feed.apply_snapshot(body)
        elif tag == b"R":
            feed.resync(body.decode("utf-8", "replace"))
        elif tag == b"X":
            feed.restarted()
        elif tag != b"C":
            self._bad(f"unknown record tag {tag[:10]!r} (expected C, M, Q, S, R or X)", raw)

    def batches(self) -> Iterator[EventBatch]:
        """The engine rows after the current position, a batch every :attr:`batch_updates`
        records (lines whose messages made no rows included: first_line..last_line)."""
        n = 0
        for raw in self.cursor:
            if self.feed is None:
                self._header(raw)
                continue
            self._apply(raw)
            n += 1
            if n >= self.batch_updates:
                n = 0
                b = self.feed.take_events()
                if b.last_line >= b.first_line:
                    yield b
        if self.feed is None:
            raise InputError("empty: no order-protocol recording header", self.path, 0)
        b = self.feed.take_events()
        if b.last_line >= b.first_line:
            yield b

    def save_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The file position and the decoder's state (JSON values, numpy arrays).  Between
        batches only (the decoder holds no rows not handed out)."""
        if self.feed is None:
            raise ValueError(f"{self.path}: nothing read yet")
        return self.state_of(self.cursor.position(), *self.feed.save_state(), self.bad_lines)

    @staticmethod
    def state_of(cursor: dict[str, Any], feed: dict[str, Any], arrays: dict[str, np.ndarray],
                 bad_lines: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """The :meth:`save_state` of a reader at ``cursor`` (a position in the file) whose decoder
        is in ``feed``/``arrays`` (:meth:`OrderFeed.save_state`): what a monitor checkpoint
        writes for a replay of its recording."""
        if feed["taken"] != feed["updates"]:
            raise ValueError("the decoder holds rows not handed out")
        return {"cursor": cursor, "feed": feed, "bad_lines": int(bad_lines)}, arrays

    def load_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Continue from a :meth:`save_state` of the same file (ValueError when the file differs
        before the saved position)."""
        from ddms.io.orderproto import OrderFeed

        self.cursor.seek(meta["cursor"])
        feed = OrderFeed(brokers=int(meta["feed"]["brokers"]), source=self.path)
        feed.load_state(meta["feed"], arrays)
        self.feed, self.bad_lines = feed, int(meta.get("bad_lines", 0))
