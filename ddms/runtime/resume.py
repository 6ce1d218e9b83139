"""Checkpointed replay of one input file, and resuming it after the process died.

A run writes a checkpoint after every ``every`` input lines and at the end into a folder, as
``ckpt-<line>.arrow`` (:mod:`ddms.runtime.checkpoint`: written atomically, so a process killed at
any moment, in the middle of a write too, leaves only complete checkpoints and at worst a
temporary file, which is ignored and removed by the next run).  Besides the engine's state a
checkpoint holds the reader's: the order-book adaptor's table of resting orders (what an
``E``/``F``/``D`` line refers to) and counters, the byte offset in the file where the next line
starts, and a hash of the 64 KiB before it (so that resuming against another file is refused).

A checkpoint is taken at the first chunk boundary at or after each multiple of ``every`` lines:
there the engine has applied every complete line the reader has seen, and the reader's state
is the state after that line (a partial line it holds is not saved: resuming reads it again
from the offset).  Chunks are at most 4 MiB and at most about ``every / 4`` lines' worth of
bytes, so a checkpoint lands within a quarter interval after its multiple.  Resuming restores
both states, seeks to the offset and continues: the views then equal the uninterrupted run's
bit for bit after every line.

The state is copied at the line boundary on the applying thread (one memcpy per dtype into a
packed buffer, :func:`ddms.runtime.checkpoint.pack`: ~0.15 ms for a book of 1,000 orders, the
reader's order table included); the Arrow encoding, writing the temporary file, fsync, rename
and the folder's fsync run on a background thread (~0.2 ms of Python holding the GIL, the rest
system calls that release it) while the run goes on (fsync alone is ~10-20 ms
on the VMs we measure on), one write at a time: a checkpoint that falls due while the previous
file is still being written is taken at the first chunk boundary after that write has finished,
so the run never waits on the disk (at 5M lines/s, 100,000 lines take 20 ms, about one write).

Supported inputs: one stream file (an order-book file feeding bids and asks, or one CSV stream)
and no TABLE files; several interleaved files are refused with a message.

Cost: ``python -m bench --only checkpoint`` (README, Performance).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ddms.errors import CheckpointError
from ddms.runtime.checkpoint import capture, commit, encode, serialize, write_temp
from ddms.runtime.engine import Engine
from ddms.streams.events import EventBatch
from ddms.streams.inputs import ProgramInput
from ddms.streams.orderbook import parse_chunks

PREFIX, SUFFIX = "ckpt-", ".arrow"
KEEP = 2
"""Complete checkpoints kept in a folder (the newest ones); older ones are removed once a newer
one is durable."""
TAIL = 1 << 12
"""Bytes before a checkpoint's offset whose hash identifies the input file (with its size)."""


def checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints in ``folder``, oldest first, as (input line, path)."""
    out = []
    if folder.is_dir():
        for p in folder.iterdir():
            if p.name.startswith(PREFIX) and p.name.endswith(SUFFIX):
                try:
                    out.append((int(p.name[len(PREFIX):-len(SUFFIX)]), p))
                except ValueError:
                    continue
    return sorted(out)


def _tail_hash(path: Path, offset: int, last: tuple[int, bytes] | None = None) -> str:
    """Hash of the :data:`TAIL` bytes of ``path`` before ``offset``; from ``last`` = (file offset
    of a chunk, its bytes) when the chunk holds them (no read)."""
    lo = max(0, offset - TAIL)
    if last is not None and last[0] <= lo and offset <= last[0] + len(last[1]):
        return hashlib.sha256(memoryview(last[1])[lo - last[0]:offset - last[0]]).hexdigest()[:20]
    with open(path, "rb") as f:
        f.seek(lo)
        return hashlib.sha256(f.read(offset - lo)).hexdigest()[:20]


class CheckpointedRun:
    """The batches of a single-file program input, with checkpoints written into ``folder`` every
    ``every`` lines and at the end; with ``resume`` the engine and the reader first continue from
    the newest complete checkpoint there (from the start if there is none).  ``keep``: how many
    of the newest checkpoints to keep (None: all); ``defer=False`` waits for a write in progress
    instead of taking a due checkpoint at a later chunk (regular boundaries for a split replay).

    Iterate :meth:`batches` and apply each batch fully before asking for the next (what
    :func:`ddms.runtime.driver.replay` does): a checkpoint is taken when the next batch is asked
    for, i.e. after the engine applied the batch before (and after a driver printed its views)."""

    def __init__(self, engine: Engine, inputs: ProgramInput, folder: str | os.PathLike, *, every: int,
                 resume: bool = False, keep: int | None = KEEP, defer: bool = True) -> None:
        if every < 1:
            raise CheckpointError(f"checkpoint interval must be >= 1 line, got {every}")
        streams = [s for s in inputs.sources if not s.table]
        if len(inputs.sources) != 1 or len(streams) != 1:
            raise CheckpointError(f"checkpoints need a program that reads one input file; this one reads "
                                  f"{', '.join(str(s.path) for s in inputs.sources)}")
        self.engine, self.inputs, self.every, self.keep, self.defer = engine, inputs, every, keep, defer
        self.source = streams[0]
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for p in self.folder.glob(f".{PREFIX}*.tmp"):   # left by a process killed while writing
            p.unlink(missing_ok=True)
        self.offset = 0   # bytes of the file read so far
        self._last: tuple[int, bytes] | None = None   # (offset, bytes) of the last chunk read
        self.resumed_from: int | None = None
        self.written = 0   # checkpoints taken by this run
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ddms-checkpoint")
        self._pending: concurrent.futures.Future | None = None
        found = checkpoints(self.folder)
        if found and not resume:
            raise CheckpointError(f"{self.folder} holds checkpoints (newest at line {found[-1][0]:,}): "
                                  "continue with --resume, or remove them to start over")
        if resume and found:
            self.restore(found[-1][1])

    def restore(self, path: Path) -> None:
        """Continue from checkpoint ``path`` (engine, reader, file offset), checked against the
        input file."""
        self.offset = restore_reader(self.engine, self.source, path)
        self.resumed_from = self.engine.position

    def write(self) -> None:
        """Checkpoint the engine and the reader at the current line: the copies now, the file on
        the background thread (after the previous write has finished; its error, if any, is
        raised here)."""
        parser = self.source.parser
        counters, arrays = parser.save_state()
        offset = self.offset - parser.pending   # where the next (partial) line starts
        reader = {"adaptor": type(parser).__name__, "file": str(self.source.path), "offset": offset,
                  "tail": _tail_hash(self.source.path, offset, self._last), "counters": counters}
        path = self.folder / f"{PREFIX}{self.engine.position:015d}{SUFFIX}"
        self.wait()
        packed, meta = capture(self.engine, extra={"reader": reader}, extra_arrays=arrays)
        self._pending = self._pool.submit(self._commit, packed, meta, path)
        self.written += 1

    def _commit(self, packed, meta, path: Path) -> None:
        commit(write_temp(path, serialize(encode(packed, meta))), path)
        if self.keep is not None:
            for _, old in checkpoints(self.folder)[:-self.keep]:
                old.unlink(missing_ok=True)

    def wait(self) -> None:
        """Wait for the checkpoint being written (raising its error)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _chunks(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None) -> Iterator[bytes]:
        # at most ~every/4 lines of bytes per chunk (lines are >= ~10 bytes), 64 KiB .. 4 MiB
        size = max(1 << 16, min(1 << 22, self.every * 3))
        path = self.source.path
        total = path.stat().st_size

        def read() -> Iterator[bytes]:
            with open(path, "rb") as f:
                f.seek(self.offset)
                while chunk := f.read(size):
                    yield chunk
        for chunk in (read() if wrap is None else wrap(read(), total - self.offset)):
            self._last = (self.offset, chunk)
            self.offset += len(chunk)
            yield chunk

    def batches(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None = None) -> Iterator[EventBatch]:
        """The input after the resume point; ``wrap(chunks, bytes)`` may pass the file's chunks
        through (a progress display)."""
        parser = self.source.parser
        last = self.engine.position
        due = (last // self.every + 1) * self.every
        try:
            for batch in parse_chunks(parser, self._chunks(wrap)):
                yield batch   # one source: its lines and relations are already the program's
                if self.engine.position != parser.lines_consumed:
                    raise CheckpointError("a batch was not applied completely before the next one was asked for")
                # due, and the previous file written (else at a later chunk: never wait on fsync)
                writing = self.defer and self._pending is not None and not self._pending.done()
                if self.engine.position >= due and not writing:
                    self.write()
                    last = self.engine.position
                    due = (last // self.every + 1) * self.every
            if self.engine.position > last or not checkpoints(self.folder):
                self.write()
            self.wait()
        finally:
            self._pool.shutdown(wait=True)


def restore_reader(engine: Engine, source, path: Path) -> int:
    """Restore checkpoint ``path`` into ``engine`` and ``source``'s reader; returns the byte
    offset of the next line in ``source.path``.  Refuses (:class:`CheckpointError`) a checkpoint
    of another program or adaptor, or an input file that differs before that offset."""
    extra, arrays = engine.restore(path)
    reader = extra.get("reader", {})
    data = source.path
    offset = int(reader.get("offset", -1))
    if reader.get("adaptor") != type(source.parser).__name__:
        raise CheckpointError(f"{path}: checkpoint of a {reader.get('adaptor')} input, this run reads "
                              f"{data} with {type(source.parser).__name__}")
    size = data.stat().st_size
    if offset < 0 or offset > size or _tail_hash(data, offset) != reader.get("tail"):
        raise CheckpointError(f"{path}: the input {data} is not the one checkpointed (file "
                              f"{reader.get('file')}, {offset:,} bytes consumed; {data} has {size:,} bytes "
                              "and differs before that point)")
    source.parser.load_state(reader["counters"], arrays)
    if source.parser.lines_consumed != engine.position:
        raise CheckpointError(f"{path}: corrupt checkpoint: reader at line {source.parser.lines_consumed}, "
                              f"engine at line {engine.position}")
    return offset


def batches_after(engine: Engine, inputs: ProgramInput, checkpoint: Path | None,
                  chunk: int = 1 << 22) -> Iterator[EventBatch]:
    """The batches of a single-file input after ``checkpoint`` (restored into ``engine`` and the
    reader first; None: from the first line), writing no checkpoints: what a segment of a split
    replay runs (:mod:`replay.segments`)."""
    streams = [s for s in inputs.sources if not s.table]
    if len(inputs.sources) != 1 or len(streams) != 1:
        raise CheckpointError("a split replay needs a program that reads one input file")
    source = streams[0]
    offset = 0 if checkpoint is None else restore_reader(engine, source, Path(checkpoint))

    def read() -> Iterator[bytes]:
        with open(source.path, "rb") as f:
            f.seek(offset)
            while data := f.read(chunk):
                yield data
    return parse_chunks(source.parser, read())


def describe_resume(run: CheckpointedRun) -> None:
    """Say on stderr where a resumed run starts."""
    if run.resumed_from is None:
        print(f"no checkpoint in {run.folder}: starting from the first line", file=sys.stderr)
    else:
        print(f"resuming from the checkpoint at line {run.resumed_from:,} ({run.offset:,} bytes of "
              f"{run.source.path.name})", file=sys.stderr)
