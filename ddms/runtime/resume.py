"""Checkpointed replay of one input file, and resuming it after the process died.

A run writes a checkpoint every ``every`` input lines (exactly at that line) and at the end into
a folder, as ``ckpt-<line>.arrow`` (:mod:`ddms.runtime.checkpoint`: written atomically, so a
process killed at any moment, in the middle of a write too, leaves only complete checkpoints and
at worst a temporary file, which is ignored and removed by the next run).  Besides the engine's
state a checkpoint holds the reader's: the order-book adaptor's table of resting orders (what an
``E``/``F``/``D`` line refers to) and counters, the byte offset in the file after that line, and
a hash of the 64 KiB before it (so that resuming against another file is refused).

Lines are cut exactly at checkpoint lines by splitting the file's chunks at the right newline
(the adaptors number lines by newlines), so the reader has no partial line pending at a
checkpoint and its state is the state after that line.  Resuming restores both, seeks to the
offset and continues: the views then equal the uninterrupted run's bit for bit after every line.

Supported inputs: one stream file (an order-book file feeding bids and asks, or one CSV stream)
and no TABLE files; several interleaved files are refused with a message.

Cost: one O(state) checkpoint per ``every`` lines (``python -m bench --only checkpoint``) and a
newline search per chunk (numpy, about 1 ms per 4 MiB).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np

from ddms.errors import CheckpointError
from ddms.runtime.engine import Engine
from ddms.streams.events import EventBatch
from ddms.streams.inputs import ProgramInput
from ddms.streams.orderbook import parse_chunks

PREFIX, SUFFIX = "ckpt-", ".arrow"
KEEP = 2
"""Complete checkpoints kept in a folder (the newest ones); older ones are removed once a newer
one is durable."""
TAIL = 1 << 16
"""Bytes before a checkpoint's offset whose hash identifies the input file."""


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


def _tail_hash(path: Path, offset: int) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, offset - TAIL))
        return hashlib.sha256(f.read(min(offset, TAIL))).hexdigest()[:20]


def _cut(chunks: Iterable[bytes], done: int, every: int) -> Iterator[bytes]:
    """The bytes of ``chunks`` re-cut so that a piece ends right after every line numbered a
    multiple of ``every`` (lines counted from ``done``, the lines before the first byte)."""
    nxt = (done // every + 1) * every
    for c in chunks:
        if not c:
            continue
        nl = np.flatnonzero(np.frombuffer(c, np.uint8) == 10)
        start = 0
        while done + len(nl) >= nxt:
            idx = nxt - done - 1
            end = int(nl[idx]) + 1
            yield c[start:end]
            nl = nl[idx + 1:]
            done, start = nxt, end
            nxt += every
        if start < len(c):
            done += len(nl)
            yield c[start:]


class CheckpointedRun:
    """The batches of a single-file program input, with checkpoints written into ``folder`` every
    ``every`` lines and at the end; with ``resume`` the engine and the reader first continue from
    the newest complete checkpoint there (from the start if there is none).

    Iterate :meth:`batches` and apply each batch fully before asking for the next (what
    :func:`ddms.runtime.driver.replay` does): a checkpoint is written when the next batch is
    asked for, i.e. after the engine applied the batch ending at the checkpoint line (and after
    a driver printed the views of that line)."""

    def __init__(self, engine: Engine, inputs: ProgramInput, folder: str | os.PathLike, *, every: int,
                 resume: bool = False) -> None:
        if every < 1:
            raise CheckpointError(f"checkpoint interval must be >= 1 line, got {every}")
        streams = [s for s in inputs.sources if not s.table]
        if len(inputs.sources) != 1 or len(streams) != 1:
            raise CheckpointError(f"checkpoints need a program that reads one input file; this one reads "
                                  f"{', '.join(str(s.path) for s in inputs.sources)}")
        self.engine, self.inputs, self.every = engine, inputs, every
        self.source = streams[0]
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for p in self.folder.glob(f".{PREFIX}*.tmp"):   # left by a process killed while writing
            p.unlink(missing_ok=True)
        self.offset = 0
        self.resumed_from: int | None = None
        found = checkpoints(self.folder)
        if found and not resume:
            raise CheckpointError(f"{self.folder} holds checkpoints (newest at line {found[-1][0]:,}): "
                                  "continue with --resume, or remove them to start over")
        if resume and found:
            self._restore(found[-1][1])

    def _restore(self, path: Path) -> None:
        extra, arrays = self.engine.restore(path)
        reader = extra.get("reader", {})
        data = self.source.path
        offset = int(reader.get("offset", -1))
        if reader.get("adaptor") != type(self.source.parser).__name__:
            raise CheckpointError(f"{path}: checkpoint of a {reader.get('adaptor')} input, this run reads "
                                  f"{data} with {type(self.source.parser).__name__}")
        size = data.stat().st_size
        if offset < 0 or offset > size or _tail_hash(data, offset) != reader.get("tail"):
            raise CheckpointError(f"{path}: the input {data} is not the one checkpointed (file "
                                  f"{reader.get('file')}, {offset:,} bytes consumed; {data} has {size:,} bytes "
                                  "and differs before that point)")
        self.source.parser.load_state(reader["counters"], arrays)
        if self.source.parser.lines_consumed != self.engine.position:
            raise CheckpointError(f"{path}: corrupt checkpoint: reader at line {self.source.parser.lines_consumed}, "
                                  f"engine at line {self.engine.position}")
        self.offset = offset
        self.resumed_from = self.engine.position

    def write(self) -> Path:
        """Checkpoint the engine and the reader at the current line; keep the newest :data:`KEEP`."""
        parser = self.source.parser
        counters, arrays = parser.save_state()
        reader = {"adaptor": type(parser).__name__, "file": str(self.source.path), "offset": self.offset,
                  "tail": _tail_hash(self.source.path, self.offset), "counters": counters}
        path = self.folder / f"{PREFIX}{self.engine.position:015d}{SUFFIX}"
        self.engine.checkpoint(path, extra={"reader": reader}, extra_arrays=arrays)
        for _, old in checkpoints(self.folder)[:-KEEP]:
            old.unlink(missing_ok=True)
        return path

    def _chunks(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None) -> Iterator[bytes]:
        size = 1 << 22
        path = self.source.path
        total = path.stat().st_size

        def read() -> Iterator[bytes]:
            with open(path, "rb") as f:
                f.seek(self.offset)
                while chunk := f.read(size):
                    yield chunk
        raw = read() if wrap is None else wrap(read(), total - self.offset)
        for piece in _cut(raw, self.source.parser.lines_consumed, self.every):
            self.offset += len(piece)   # before the parser sees it: a checkpoint follows its batch
            yield piece

    def batches(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None = None) -> Iterator[EventBatch]:
        """The input after the resume point; ``wrap(chunks, bytes)`` may pass the file's chunks
        through (a progress display)."""
        parser = self.source.parser
        last = self.engine.position
        for batch in parse_chunks(parser, self._chunks(wrap)):
            yield batch   # one source: its lines and relations are already the program's
            if self.engine.position != batch.last_line:
                raise CheckpointError("a batch was not applied completely before the next one was asked for")
            if parser.lines_consumed % self.every == 0 and not parser.pending and self.engine.position > last:
                self.write()
                last = self.engine.position
        if self.engine.position > last or not checkpoints(self.folder):
            self.write()


def describe_resume(run: CheckpointedRun) -> None:
    """Say on stderr where a resumed run starts."""
    if run.resumed_from is None:
        print(f"no checkpoint in {run.folder}: starting from the first line", file=sys.stderr)
    else:
        print(f"resuming from the checkpoint at line {run.resumed_from:,} ({run.offset:,} bytes of "
              f"{run.source.path.name})", file=sys.stderr)
