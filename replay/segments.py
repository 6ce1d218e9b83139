"""One long history split into segments that run as separate (Spark) tasks.

A first pass replays the file once with checkpoints kept at chosen boundaries
(:func:`first_pass`, ``ddms run --checkpoint`` with every checkpoint kept).  Then
:func:`segment_tasks` makes one task per segment ``(checkpoint before it, line it ends at)``,
and :func:`segment_task` replays one segment: it restores the engine and the reader from the
segment's checkpoint, seeks, applies the lines up to the segment's end, and returns the views
printed every ``every`` lines in it (the last segment also the final views), as JSON strings of
the engine's snapshot.  The concatenated rows of the segments, run on Spark
(``replay.spark.run_sweep(tasks, fn=segment_task)``) or one after the other, equal the rows of
the sequential run (:func:`sequential_rows`) row for row, bit for bit: each segment starts from
the bit-exact state the sequential run had there.

The first pass costs one sequential replay plus the checkpoints (README: Performance); it pays
off when the history is replayed again (other sampling, other observers of the views).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SplitRun", "count_lines", "first_pass", "run_split", "segment_task", "segment_tasks", "sequential_rows"]

_PROGRAMS: dict[str, object] = {}


def _program(path: str):
    prog = _PROGRAMS.get(path)
    if prog is None:
        from replay.viewtask import _program as load
        prog = _PROGRAMS[path] = load(path)
    return prog


def _inputs(program: str, data: str):
    from ddms.io.inputs import open_program_input
    return open_program_input(_program(program), Path(program).parent, data=Path(data))


def first_pass(program: str, data: str, folder: str | Path, every: int) -> list[int]:
    """Replay ``data`` through ``program`` once, keeping a checkpoint after about every ``every``
    lines (and at the end) in ``folder``; returns the checkpoint lines."""
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    from ddms.runtime.resume import CheckpointedRun, checkpoints
    engine = Engine(_program(program))
    inputs = _inputs(program, data)
    run = CheckpointedRun(engine, inputs, folder, every=every, keep=None, defer=False)
    replay(engine, run.batches(), engine.relmap(inputs.names))
    return [line for line, _ in checkpoints(Path(folder))]


def segment_tasks(program: str, data: str, folder: str | Path, every: int) -> list[tuple[str, str, dict]]:
    """One ``(data, program, params)`` task per segment between the checkpoints in ``folder``
    (the first from line 0); ``every``: print the views every that many lines."""
    from ddms.runtime.resume import checkpoints
    found = checkpoints(Path(folder))
    starts = [("", 0)] + [(str(p), line) for line, p in found[:-1]]
    return [(data, program, {"checkpoint": ck, "start": start, "until": line, "every": every,
                             "last": i == len(found) - 1})
            for i, ((ck, start), (line, _)) in enumerate(zip(starts, found, strict=True))]


def _views_json(engine) -> str:
    return json.dumps({"line": engine.position, "views": dict(engine.snapshot())})


def segment_task(partition: str, strategy: str, params: dict) -> dict[str, object]:
    """Replay one segment (see the module docstring); the row: ``start``, ``until`` and ``rows``
    (the JSON views printed in the segment)."""
    from ddms.io.events import split_lines
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    from ddms.runtime.resume import batches_after
    engine = Engine(_program(strategy))
    inputs = _inputs(strategy, partition)
    until, every = int(params["until"]), int(params["every"])
    ck = params.get("checkpoint") or None
    batches = batches_after(engine, inputs, Path(ck) if ck else None)
    if engine.position != int(params.get("start", engine.position)):
        raise ValueError(f"checkpoint {ck} is at line {engine.position}, the task expects {params['start']}")

    def upto() -> Iterator:
        for b in batches:
            if b.last_line >= until:
                head, _ = split_lines(b, until) if b.last_line > until else (b, None)
                yield head
                return
            yield b
    rows: list[str] = []
    replay(engine, upto(), engine.relmap(inputs.names), every=every,
           checkpoint=(lambda _pos: rows.append(_views_json(engine))) if every else None)
    if params.get("last") and (not every or engine.position % every):
        rows.append(_views_json(engine))
    return {"start": int(params.get("start", 0)), "until": engine.position, "rows": rows}


def sequential_rows(program: str, data: str, every: int) -> list[str]:
    """The rows of the whole file replayed in one go (what the segments must add up to)."""
    row = segment_task(data, program, {"checkpoint": "", "start": 0, "until": 1 << 62, "every": every,
                                       "last": True})
    return row["rows"]


def count_lines(data: str | Path, chunk: int = 1 << 22) -> int:
    """Lines of a text file (a last line without newline counted): where a first pass cuts a
    file into segments of equal line counts.  O(file) at memory speed (~1 GB/s)."""
    n, last = 0, b"\n"
    with open(data, "rb") as f:
        while block := f.read(chunk):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


@dataclass(frozen=True)
class SplitRun:
    """What :func:`run_split` did: the rows (JSON views, in input order), the first pass's time
    (a sequential replay writing the checkpoints; 0 when its checkpoints were reused), the
    segments' time (program builds and the Spark session's start excluded from both), how many
    and where they ran."""

    rows: list[str]
    first_pass_seconds: float
    segments_seconds: float
    segments: int
    master: str | None
    reused: bool


def run_split(program: str, data: str, folder: str | Path, *, segments: int, every: int,
              master: str | None = None, progress: Callable[[str], None] | None = None) -> SplitRun:
    """``ddms run PROGRAM --data FILE --segments N [--spark MASTER]``: a first pass over ``data``
    keeps checkpoints every ``ceil(lines / segments)`` lines in ``folder`` (skipped when
    ``folder`` already holds the checkpoints of an earlier first pass: each segment's restore
    checks that they belong to this program and file), then the segments run as Spark tasks on
    ``master`` (or one after the other in this process without one).  The rows, concatenated,
    are what the sequential ``ddms run --every`` prints (a row per ``every`` lines, and the final
    views; ``every`` 0: the final views only).  Cost: the first pass is a sequential replay plus
    a checkpoint write per segment; then each segment restores its checkpoint (O(state)) and
    replays its lines."""
    from ddms.runtime.engine import Engine
    from ddms.runtime.resume import checkpoints
    say = progress or (lambda _msg: None)
    folder = Path(folder)
    reused = bool(checkpoints(folder))
    Engine(_program(program))   # compiled or loaded once here: not part of the timings
    t0 = time.perf_counter()
    if not reused:
        lines = count_lines(data)
        step = max(1, -(-lines // max(1, segments)))
        say(f"first pass: {lines:,} lines, a checkpoint every {step:,} lines into {folder}")
        first_pass(program, data, folder, every=step)
    t_first = 0.0 if reused else time.perf_counter() - t0
    tasks = segment_tasks(program, data, folder, every=every)
    say(f"{len(tasks)} segments" + (f" on Spark {master}" if master else " in this process") + " ...")
    if master:
        from replay import spark
        spark.get_session(master)   # the JVM's start (~10 s) is not part of the timings
        t0 = time.perf_counter()
        out = spark.run_sweep(tasks, master, fn=segment_task)
    else:
        t0 = time.perf_counter()
        out = [segment_task(*t) for t in tasks]
    t_seg = time.perf_counter() - t0
    return SplitRun([x for r in out for x in r["rows"]], t_first, t_seg, len(tasks), master, reused)
