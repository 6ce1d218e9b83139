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
from collections.abc import Iterator
from pathlib import Path

__all__ = ["first_pass", "segment_task", "segment_tasks", "sequential_rows"]

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
           checkpoint=lambda _pos: rows.append(_views_json(engine)))
    if params.get("last") and engine.position % every:
        rows.append(_views_json(engine))
    return {"start": int(params.get("start", 0)), "until": engine.position, "rows": rows}


def sequential_rows(program: str, data: str, every: int) -> list[str]:
    """The rows of the whole file replayed in one go (what the segments must add up to)."""
    row = segment_task(data, program, {"checkpoint": "", "start": 0, "until": 1 << 62, "every": every,
                                       "last": True})
    return row["rows"]
