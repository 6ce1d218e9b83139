"""Checkpointed replay of a program's input files, and resuming it after the process died.

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

Supported inputs: order-book CSV and CSV files, any number of them (TABLE files are read first
and never checkpointed inside; STREAM files interleaved, each with its own reader state, byte
offset and pending lines in the checkpoint), and captures: hftbacktest Binance captures (one or
several symbols), cryptofeed captures (Kraken, OKX, Coinbase, Binance) and ``ddms monitor
--record`` recordings, whose resumable readers (:meth:`ddms.io.sources.Source.reader`) save their
protocol cores' state and their files' positions (``save_state()``/``load_state()``; JSON values
and arrays, no pickle); a capture's batches end at message boundaries, so a checkpoint never
falls inside a message.  LOBSTER, Parquet, DBN and tardis files are refused with a message
(their readers' positions are not saved).

Cost: ``python -m bench --only checkpoint`` (README, Performance).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from ddms.errors import CheckpointError
from ddms.io.events import EventBatch
from ddms.io.inputs import ProgramInput, _counted, _interleave
from ddms.io.orderbook import parse_chunks
from ddms.runtime.checkpoint import capture, commit, encode, serialize, write_temp
from ddms.runtime.engine import Engine

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


def stream_sources(inputs: ProgramInput) -> list:
    """The STREAM sources of ``inputs``, checked to be readers whose state a checkpoint can hold
    (the order-book CSV and CSV adaptors, and the capture readers: hftbacktest Binance captures,
    cryptofeed captures and ``ddms monitor --record`` recordings, whose resumable reader is set
    as ``source.reader``); a :class:`CheckpointError` names any other."""
    for s in inputs.sources:
        if s.read is None and hasattr(s.parser, "save_state"):
            continue
        if getattr(s, "reader", None) is None:
            opened = getattr(s, "opened", None)
            s.reader = opened.reader() if opened is not None and hasattr(opened, "reader") else None
        if s.reader is None:
            raise CheckpointError(f"{s.path}: checkpoints need order-book CSV, CSV or capture input (Binance, "
                                  "cryptofeed, a monitor recording); this file is read by another reader (LOBSTER, "
                                  "Parquet, DBN, tardis), whose position is not saved")
    streams = [s for s in inputs.sources if not s.table]
    if not streams:
        raise CheckpointError("checkpoints need a program with at least one STREAM file")
    return streams


def _reader(s) -> object | None:
    """A capture source's resumable reader (None for the CSV adaptors)."""
    return getattr(s, "reader", None) if s.read is not None else None


def _batch_arrays(k: int, b: EventBatch) -> dict[str, np.ndarray]:
    return {f"pending{k}.rel": b.rel, f"pending{k}.sign": b.sign, f"pending{k}.cols": b.cols,
            f"pending{k}.line": b.line}


class CheckpointedRun:
    """The batches of a program's input, with checkpoints written into ``folder`` every
    ``every`` lines and at the end; with ``resume`` the engine and the readers first continue
    from the newest complete checkpoint there (from the start if there is none).  ``keep``: how
    many of the newest checkpoints to keep (None: all); ``defer=False`` waits for a write in
    progress instead of taking a due checkpoint at a later chunk (regular boundaries for a split
    replay).  ``start``: a checkpoint file to continue from (any one, not only the newest), writing
    no checkpoints (a replay of a recorded session from a chosen point).

    Several input files: TABLE files are read completely first (no checkpoint falls inside
    them: a resumed run skips them, their rows being in the state), then the STREAM files
    interleaved line by line (:mod:`ddms.io.inputs`).  A checkpoint then holds, for every
    stream file, its reader's state and byte offset, and the lines the merge has read from it
    but not merged yet (its pending batch), so that the resumed merge continues exactly where
    the uninterrupted one was.

    Iterate :meth:`batches` and apply each batch fully before asking for the next (what
    :func:`ddms.runtime.driver.replay` does): a checkpoint is taken when the next batch is asked
    for, i.e. after the engine applied the batch before (and after a driver printed its views)."""

    def __init__(self, engine: Engine, inputs: ProgramInput, folder: str | os.PathLike, *, every: int,
                 resume: bool = False, keep: int | None = KEEP, defer: bool = True,
                 start: str | os.PathLike | None = None) -> None:
        if start is not None:   # one chosen checkpoint: replay from it, writing none
            start = Path(start)
            if not start.is_file():
                raise CheckpointError(f"{start}: no such checkpoint file")
            folder, every, resume = start.parent, 1 << 62, False
        if every < 1:
            raise CheckpointError(f"checkpoint interval must be >= 1 line, got {every}")
        self.streams = stream_sources(inputs)
        for s in self.streams:   # batches of at most ~every/4 lines (its checkpoint boundaries), as CSV chunks
            if getattr(_reader(s), "batch_updates", None) is not None:
                s.reader.batch_updates = max(16, min(s.reader.batch_updates, every // 4))
        self.engine, self.inputs, self.every, self.keep, self.defer = engine, inputs, every, keep, defer
        self.source = self.streams[0]
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        for p in self.folder.glob(f".{PREFIX}*.tmp"):   # left by a process killed while writing
            p.unlink(missing_ok=True)
        n = len(self.streams)
        self.offsets = [0] * n   # bytes of each stream file read so far
        self._last: list[tuple[int, bytes] | None] = [None] * n   # (offset, bytes) of each file's last chunk
        self.pending: dict[int, EventBatch] = {}   # the merge's lines read, not merged (several files)
        self.base: int | None = None   # lines of the TABLE files (where the streams start), once read
        self.resumed_from: int | None = None
        self.written = 0   # checkpoints taken by this run
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ddms-checkpoint")
        self._pending: concurrent.futures.Future | None = None
        self.readonly = start is not None
        if start is not None:
            self.restore(start)
            return
        found = checkpoints(self.folder)
        if found and not resume:
            raise CheckpointError(f"{self.folder} holds checkpoints (newest at line {found[-1][0]:,}): "
                                  "continue with --resume, or remove them to start over")
        if resume and found:
            self.restore(found[-1][1])

    @property
    def offset(self) -> int:
        """Bytes read of the first stream file."""
        return self.offsets[0]

    def restore(self, path: Path) -> None:
        """Continue from checkpoint ``path`` (engine, readers, file offsets, the merge's pending
        lines), checked against the input files.  A ``ddms monitor`` checkpoint (of the monitor's
        recording) is replayed from and never written to: its folder is the monitor's."""
        info: dict = {}
        self.offsets, self.pending, self.base = restore_readers(self.engine, self.inputs, path, info)
        self.resumed_from = self.engine.position
        if "monitor" in info:
            self.readonly = True

    def write(self) -> None:
        """Checkpoint the engine and the readers at the current line: the copies now, the file on
        the background thread (after the previous write has finished; its error, if any, is
        raised here)."""
        readers, arrays = [], {}
        for k, s in enumerate(self.streams):
            b = self.pending.get(k)
            held = None if b is None else [b.first_line, b.last_line, b.skipped]
            if (reader := _reader(s)) is not None:   # a capture: its reader holds its files' positions
                state, parr = reader.save_state()
                readers.append({"adaptor": type(reader).__name__, "file": str(s.path), "state": state,
                                "pending": held})
            else:
                counters, parr = s.parser.save_state()
                offset = self.offsets[k] - s.parser.pending   # where the next (partial) line starts
                readers.append({"adaptor": type(s.parser).__name__, "file": str(s.path), "offset": offset,
                                "tail": _tail_hash(s.path, offset, self._last[k]), "counters": counters,
                                "pending": held})
            arrays |= {f"reader{k}.{name}": a for name, a in parr.items()}
            if b is not None:
                arrays |= _batch_arrays(k, b)
        path = self.folder / f"{PREFIX}{self.engine.position:015d}{SUFFIX}"
        self.wait()
        packed, meta = capture(self.engine, extra={"readers": readers, "base": self.base}, extra_arrays=arrays)
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

    def _chunks(self, k: int, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None) -> Iterator[bytes]:
        # at most ~every/4 lines of bytes per chunk (lines are >= ~10 bytes), 64 KiB .. 4 MiB
        size = max(1 << 16, min(1 << 22, self.every * 3))
        path = self.streams[k].path
        total = path.stat().st_size

        def read() -> Iterator[bytes]:
            with open(path, "rb") as f:
                f.seek(self.offsets[k])
                while chunk := f.read(size):
                    yield chunk
        for chunk in (read() if wrap is None else wrap(read(), total - self.offsets[k])):
            self._last[k] = (self.offsets[k], chunk)
            self.offsets[k] += len(chunk)
            yield chunk

    def _merged(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None) -> Iterator[EventBatch]:
        """The TABLE files' batches (not after a resume), then the streams' merged batches."""
        if self.base is None:   # from the start: the tables first
            offset = 0
            for s in (s for s in self.inputs.sources if s.table):
                last = offset
                tab = parse_chunks(s.parser, _file_chunks(s.path)) if s.read is None else _counted(s.parser, s.read())
                for b in tab:
                    b = self.inputs._renumber(s, b, offset)
                    last = b.last_line
                    yield b
                offset = last
            self.base = offset
        for k, s in enumerate(self.streams):
            if (reader := _reader(s)) is not None:
                s.batches = _counted(s.parser, reader.batches())
            else:
                s.batches = parse_chunks(s.parser, self._chunks(k, wrap if k == 0 else None))
        if len(self.streams) == 1:
            for b in self.source.batches:
                yield self.inputs._renumber(self.source, b, self.base)
            return
        yield from _interleave(self.inputs, self.streams, self.engine.position, self.pending)

    def batches(self, wrap: Callable[[Iterator[bytes], int], Iterator[bytes]] | None = None) -> Iterator[EventBatch]:
        """The input after the resume point; ``wrap(chunks, bytes)`` may pass the first stream
        file's chunks through (a progress display)."""
        last = self.engine.position
        due = (last // self.every + 1) * self.every
        try:
            for batch in self._merged(wrap):
                yield batch
                if self.engine.position != batch.last_line:
                    raise CheckpointError("a batch was not applied completely before the next one was asked for")
                # due, and the previous file written (else at a later chunk: never wait on fsync);
                # never inside the TABLE files, nor before a bad line the merge holds
                writing = self.defer and self._pending is not None and not self._pending.done()
                if (self.engine.position >= due and not writing and self.base is not None and not self.readonly
                        and batch.error is None and all(b.error is None for b in self.pending.values())):
                    self.write()
                    last = self.engine.position
                    due = (last // self.every + 1) * self.every
            if not self.readonly and (self.engine.position > last or not checkpoints(self.folder)):
                self.write()
            self.wait()
        finally:
            self._pool.shutdown(wait=True)


def _file_chunks(path: Path, size: int = 1 << 22) -> Iterator[bytes]:
    with open(path, "rb") as f:
        while chunk := f.read(size):
            yield chunk


def restore_readers(engine: Engine, inputs: ProgramInput, path: Path,
                    info: dict | None = None) -> tuple[list[int], dict[int, EventBatch], int]:
    """Restore checkpoint ``path`` into ``engine`` and the readers of ``inputs``' stream files;
    returns each stream file's byte offset of its next line, the merge's pending batches and
    the line where the streams start (after the TABLE files); ``info`` receives the checkpoint's
    other metadata (``monitor``: a ``ddms monitor`` checkpoint).  Refuses
    (:class:`CheckpointError`) a checkpoint of another program, of other input files or
    adaptors, or an input file that differs before its offset, and a monitor checkpoint that
    holds no position in a recording."""
    streams = stream_sources(inputs)
    extra, arrays = engine.restore(path)
    if info is not None:
        info.update({k: v for k, v in extra.items() if k not in ("readers", "base")})
    readers = extra.get("readers")
    if not isinstance(readers, list) and "monitor" in extra:
        kind = extra["monitor"].get("kind")
        feeds = {"orders": "our order protocol, which it does not record",
                 "binance": "one Binance book (a server that names no symbols), whose recording it does not "
                            "number as a capture"}
        why = "it was taken without --record" if kind == "venue" else f"the monitor follows {feeds.get(kind, kind)}"
        raise CheckpointError(f"{path}: a ddms monitor checkpoint that holds no position in a recording ({why}); "
                              "ddms run replays a recording from the checkpoints of a monitor of a venue session "
                              "(Kraken, OKX, Coinbase, Binance with X-DDMS-Symbols) that recorded it (--record FILE)")
    if not isinstance(readers, list):
        raise CheckpointError(f"{path}: corrupt checkpoint: no reader positions")
    if len(readers) != len(streams):
        raise CheckpointError(f"{path}: checkpoint of a program reading {len(readers)} stream file(s) "
                              f"({', '.join(str(r.get('file')) for r in readers)}); this run reads {len(streams)} "
                              f"({', '.join(str(s.path) for s in streams)})")
    offsets, pending = [], {}
    for k, (source, reader) in enumerate(zip(streams, readers, strict=True)):
        data = source.path
        prefix = f"reader{k}."
        mine = {n[len(prefix):]: a for n, a in arrays.items() if n.startswith(prefix)}
        resumable = _reader(source)
        adaptor = type(resumable if resumable is not None else source.parser).__name__
        if reader.get("adaptor") != adaptor:
            raise CheckpointError(f"{path}: checkpoint of a {reader.get('adaptor')} input, this run reads "
                                  f"{data} with {adaptor}")
        if resumable is not None:
            try:
                resumable.load_state(reader["state"], mine)
            except (ValueError, KeyError, TypeError) as e:
                raise CheckpointError(f"{path}: cannot continue reading {data} from this checkpoint: {e}") from None
            offsets.append(0)
            _pending_batch(reader, arrays, k, pending)
            continue
        offset = int(reader.get("offset", -1))
        size = data.stat().st_size
        if offset < 0 or offset > size or _tail_hash(data, offset) != reader.get("tail"):
            raise CheckpointError(f"{path}: the input {data} is not the one checkpointed (file "
                                  f"{reader.get('file')}, {offset:,} bytes consumed; {data} has {size:,} bytes "
                                  "and differs before that point)")
        source.parser.load_state(reader["counters"], mine)
        offsets.append(offset)
        _pending_batch(reader, arrays, k, pending)
    base = extra.get("base")
    if len(streams) == 1:
        r = _reader(streams[0])
        at = r.position if r is not None else streams[0].parser.lines_consumed
        if at + int(base or 0) != engine.position:
            raise CheckpointError(f"{path}: corrupt checkpoint: reader at line {at}, engine at line {engine.position}")
    return offsets, pending, int(base or 0)


def _pending_batch(reader: dict, arrays: dict[str, np.ndarray], k: int, pending: dict[int, EventBatch]) -> None:
    """The merge's lines of stream ``k`` read but not merged, from a checkpoint, into ``pending``."""
    if reader.get("pending") is not None:
        first, last, skipped = reader["pending"]
        b = {n: np.array(arrays[f"pending{k}.{n}"]) for n in ("rel", "sign", "cols", "line")}
        pending[k] = EventBatch(b["rel"], b["sign"], b["cols"], b["line"], int(first), int(last), int(skipped))


def batches_after(engine: Engine, inputs: ProgramInput, checkpoint: Path | None,
                  chunk: int = 1 << 22) -> Iterator[EventBatch]:
    """The batches of a single-file input after ``checkpoint`` (restored into ``engine`` and the
    reader first; None: from the first line), writing no checkpoints: what a segment of a split
    replay runs (:mod:`replay.segments`)."""
    streams = [s for s in inputs.sources if not s.table]
    if len(inputs.sources) != 1 or len(streams) != 1:
        raise CheckpointError("a split replay needs a program that reads one input file")
    source = stream_sources(inputs)[0]
    offset = 0 if checkpoint is None else restore_readers(engine, inputs, Path(checkpoint))[0][0]
    if (reader := _reader(source)) is not None:    # a capture: its reader continues from its own position
        return _counted(source.parser, reader.batches())

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
        where = ("" if _reader(run.source) is not None else f" ({run.offset:,} bytes of {run.source.path.name})")
        print(f"resuming from the checkpoint at line {run.resumed_from:,}{where}", file=sys.stderr)
