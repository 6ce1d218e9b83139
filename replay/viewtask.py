"""A small, real sweep task: replay one partition through an M3/SQL program and summarize views.

Why it exists: the sweep machinery (:mod:`replay.spark`) needs a pure task of the
``(partition, strategy, params) -> row`` shape that does not depend on the strategy code, for its
tests and its benchmark, and it is a useful sweep on its own ("how does this view behave on each
data set at each sampling rate").  ``strategy`` is the path of a program (``.m3`` or ``.sql``);
``params``:

* ``every`` (default 1000): sample every scalar view after every ``every`` input lines;
* ``level`` (default 0): count the samples in which a view is above it.

The row: ``partition`` (its label), ``strategy``, the params, ``lines``, ``events``, and per
scalar view ``<view>`` (final value), ``<view>_mean``/``_min``/``_max`` over the non-NaN samples
and ``<view>_above`` (samples > level).  Everything is a deterministic function of the data and
the parameters (no timings), so sequential and Spark runs give identical rows.

Cost: the replay itself (engine plus reader) and one view read per sample; the compiled program
is reused by every task of a process (``ddms.backend.cache`` keeps the module, numba's disk cache
the machine code), so only the first task of a worker pays for loading it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from ddms.errors import DdmsError, ReplayError

__all__ = ["partition_views", "view_task"]

_PROGRAMS: dict[str, object] = {}   # program path -> parsed Program (SQL compiled once per process)


def _program(path: str):
    prog = _PROGRAMS.get(path)
    if prog is None:
        if not os.path.exists(path):
            raise DdmsError(f"{path}: no such program file")
        if path.endswith(".sql"):
            from ddms.compiler import compile_sql_file
            prog = compile_sql_file(Path(path)).program
        else:
            from ddms.runtime.engine import load_program
            prog = load_program(Path(path))
        _PROGRAMS[path] = prog
    return prog


def view_task(partition: str, strategy: str, params: dict[str, float]) -> dict[str, object]:
    """Replay ``partition`` (any :func:`~ddms.io.sources.open_source` file) through the program
    ``strategy`` and summarize its scalar views; see the module docstring."""
    from ddms.io.sources import open_source
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine
    from ddms.runtime.views import ScalarView

    unknown = set(params) - {"every", "level"}
    if unknown:
        raise ReplayError(f"unknown parameter(s) {sorted(unknown)} (view_task takes every, level)", strategy)
    every = params.get("every", 1000)
    if not (isinstance(every, (int, float)) and every >= 1 and float(every).is_integer()):
        raise ReplayError(f"every must be a positive integer, got {every!r}", strategy)
    every = int(every)
    level = float(params.get("level", 0.0))
    src = open_source(partition)
    engine = Engine(_program(strategy))
    scalars = [n for n, v in engine.views.items() if isinstance(v, ScalarView)]
    stats = {n: [0, math.inf, -math.inf, 0.0, 0] for n in scalars}   # count, min, max, sum, above

    def sample(_position: int) -> None:
        for n in scalars:
            v = engine.views[n].value
            if v is None or math.isnan(v):
                continue
            s = stats[n]
            s[0] += 1
            s[1] = min(s[1], v)
            s[2] = max(s[2], v)
            s[3] += v
            s[4] += v > level

    events = 0

    def counted():
        nonlocal events
        for b in src:
            events += len(b)
            yield b

    replay(engine, counted(), engine.relmap(src.relations), every=every, checkpoint=sample)
    row: dict[str, object] = {"partition": src.name, "strategy": os.path.basename(strategy), **params,
                              "lines": engine.position, "events": events}
    for n in scalars:
        c, lo, hi, total, above = stats[n]
        row[n] = engine.views[n].value
        row[f"{n}_mean"] = total / c if c else math.nan
        row[f"{n}_min"] = lo if c else math.nan
        row[f"{n}_max"] = hi if c else math.nan
        row[f"{n}_above"] = above
    return row


def partition_views(partition: str, strategy: str, params: dict[str, float]) -> dict[str, object]:
    """``ddms run STRATEGY --data PARTITION --every N [--skip-bad] --json`` as a task: the JSON rows that run
    prints (the views after every ``every`` lines, 0: none, and at the end), for one partition (a
    file, or ``FILE#SYMBOL`` of a multi-symbol file).  The row: ``partition``, ``lines``, ``rows``
    (JSON strings, NaN spelled ``NaN``: the printer makes it ``null``).  Sequential and Spark
    runs give the same rows (a deterministic function of the file and the program).  Cost: the
    replay; the compiled program is loaded once per worker process."""
    import json

    from ddms.io.inputs import open_program_input
    from ddms.runtime.driver import replay
    from ddms.runtime.engine import Engine

    unknown = set(params) - {"every", "skip_bad"}
    if unknown:
        raise ReplayError(f"unknown parameter(s) {sorted(unknown)} (partition_views takes every, skip_bad)",
                          strategy)
    every = int(params.get("every", 0))
    program = _program(strategy)
    inputs = open_program_input(program, Path(strategy).parent, data=Path(partition),
                                skip_bad=bool(params.get("skip_bad", 0)))
    engine = Engine(program)
    rows: list[str] = []

    def show(_position: int) -> None:
        rows.append(json.dumps({"line": engine.position, "views": dict(engine.snapshot())}))

    def chunks(path: Path):
        with open(path, "rb") as f:
            while data := f.read(1 << 22):
                yield data
    replay(engine, inputs.batches(chunks), engine.relmap(inputs.names), every=every, checkpoint=show)
    if not every or engine.position % every:   # (as ddms run: the end, unless just printed)
        show(engine.position)
    return {"partition": partition, "lines": engine.position, "rows": rows}
