"""First results of a program never compiled before: the M3 interpreter serves its views while
numba compiles it in another process, then the compiled engine takes over at a line boundary.

A program numba has not compiled costs 10 s (runtime library cached) to a minute or more before
:class:`~ddms.runtime.engine.Engine` applies its first line.  :class:`WarmEngine` starts that
compile in a child process (``python -m ddms.runtime.warm``, which constructs the Engine and so
fills numba's disk cache; a child and not a thread because numba holds the GIL while it
compiles) and meanwhile applies every input line with :class:`~ddms.m3.interpreter.Interpreter`,
the project's oracle, from the first line on.  Once the child has exited, the next line boundary
hands over: the Engine is constructed from the cache (well under a second), the batches the
interpreter applied are applied again to it (compiled: millions of lines a second), and from
then on every batch runs compiled.  So views read after any line are the program's views after
that line either way, and the compiled state after the hand-over is exactly the state of a
compiled-only run (the same batches, cut at the same lines).

Cost: the interpreter evaluates M3 literally (nested loops over map entries): from about 15 lines
a second (vwap.m3's range condition over a grown book: O(levels^2) a line) to a few thousand;
fine for first results, which is all it is for.  The batches applied before the hand-over are
kept until it (their arrays, not copies).

Callbacks and futures are not served by the interpreter: :meth:`WarmEngine.finish` waits for the
compile and returns the Engine, which has them.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ddms.errors import CompileError, InputError, ViewError
from ddms.io.events import EventBatch, check_batch, split_lines
from ddms.m3.interpreter import Interpreter
from ddms.m3.ir import Program
from ddms.runtime.engine import Engine, load_program, stream_relmap
from ddms.runtime.views import _null, _py

POLL_SECONDS = 0.02
"""How often (at most) the interpreter asks, between two lines of a batch, whether the compile
has finished: each poll is one ``waitpid`` system call."""


class CompileJob(Protocol):
    """A compile of a program running elsewhere: :meth:`done` says whether it has finished (never
    blocks), :meth:`wait` blocks until it has and raises :class:`CompileError` if it failed."""

    def done(self) -> bool: ...

    def wait(self) -> None: ...


class BackgroundCompile:
    """``Engine(program)`` in a child process, to fill numba's disk cache.  The child gets the
    pickled program on stdin and its own session, so that it survives the caller (and Ctrl-C in
    the caller's terminal): a run that ends before the compile lets it finish in the background
    and the next run loads the program from the cache.  Its stderr goes to a temporary file,
    read only to report a failure."""

    def __init__(self, program: Program) -> None:
        self._log = tempfile.TemporaryFile()
        root = str(Path(__file__).resolve().parents[2])   # import the same ddms as the caller
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])]))
        self.proc = subprocess.Popen([sys.executable, "-m", "ddms.runtime.warm"], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, stderr=self._log, env=env,
                                     start_new_session=True)
        assert self.proc.stdin is not None
        self.proc.stdin.write(pickle.dumps(program))
        self.proc.stdin.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def done(self) -> bool:
        return self.proc.poll() is not None

    def wait(self) -> None:
        if self.proc.wait() != 0:
            self._log.seek(0)
            tail = self._log.read().decode(errors="replace").strip().splitlines()[-5:]
            raise CompileError("compiling the program in the background failed (exit code "
                               f"{self.proc.returncode}): " + " | ".join(tail))


class WarmEngine:
    """Serves ``program``'s views from its first input line while numba compiles it (see the
    module docstring).  The interface of :class:`Engine` that ``ddms run`` uses: :meth:`relmap`,
    :meth:`apply`, :attr:`position`, :meth:`snapshot`, :meth:`value`.

    ``compile_job(program)`` starts the compile (default: :class:`BackgroundCompile`); tests pass
    one that finishes when they say so.  ``on_ready(engine, seconds)`` is called once the Engine
    has taken over (seconds since construction), e.g. to say so on stderr."""

    def __init__(self, program: Program | str | Path, *,
                 compile_job: Callable[[Program], CompileJob] | None = None,
                 on_ready: Callable[[Engine, float], None] | None = None) -> None:
        self._t0 = time.perf_counter()
        self.program = load_program(program)
        self._job: CompileJob | None = (compile_job or BackgroundCompile)(self.program)
        self._on_ready = on_ready
        self.engine: Engine | None = None
        self._interp: Interpreter | None = Interpreter(self.program)
        self._applied: list[tuple[EventBatch, np.ndarray]] = []   # what the interpreter applied
        self._streams = [(s.name, len(s.columns)) for s in self.program.streams]
        self._arity = np.array([len(s.columns) for s in self.program.streams] + [0], np.int64)
        self._position = 0
        self.handover_line: int | None = None   # the last line the interpreter applied

    # -- state ------------------------------------------------------------------------------
    @property
    def position(self) -> int:
        """Input lines applied so far (counted as :attr:`Engine.position` counts them)."""
        return self.engine.position if self.engine is not None else self._position

    @property
    def compiled(self) -> bool:
        """Whether the compiled engine has taken over."""
        return self.engine is not None

    @property
    def job(self) -> CompileJob | None:
        """The compile still running (``None`` once the engine has taken over)."""
        return self._job

    def relmap(self, names: Sequence[str]) -> np.ndarray:
        return stream_relmap(self.program, names)

    def _check(self) -> None:
        """Assert the invariants (tests call it after updates): before the hand-over the kept
        batches span exactly the lines applied (so the replay reaches the same line) and the
        interpreter's maps hold no zero values; after it nothing is kept and the Engine's own
        invariants hold.  Cost: O(kept batches + map entries)."""
        if self.engine is not None:
            assert self._interp is None and not self._applied and self._job is None
            assert self.handover_line is not None and self.handover_line <= self.engine.position
            self.engine._check()
            return
        assert self._interp is not None
        assert sum(b.last_line - b.first_line + 1 for b, _ in self._applied) == self._position, \
            "the kept batches do not span the lines applied"
        for name, m in self._interp.maps.items():
            assert all(v != 0.0 for v in m.values()), f"{name}: a zero value is stored"

    # -- input ------------------------------------------------------------------------------
    def apply(self, batch: EventBatch, relmap: np.ndarray) -> None:
        """Apply ``batch`` (as :meth:`Engine.apply` without ``until_line``): compiled once the
        compile has finished, else line by line in the interpreter, handing over at the first
        line boundary after the compile finished.  A batch carrying an ``error`` is applied up
        to the bad line, then the error is raised."""
        if self.engine is None and self._job is not None and self._job.done():
            self._hand_over()
        if self.engine is not None:
            self.engine.apply(batch, relmap)
            return
        if relmap.ndim != 1 or relmap.dtype != np.int64 or ((relmap < -1) | (relmap >= len(self._arity) - 1)).any():
            raise InputError(f"relation map {relmap.tolist()} must be int64 stream numbers "
                             f"0..{len(self._arity) - 2} or -1 (ignored)", "<batch>")
        check_batch(batch, self._arity[relmap])
        error = batch.error
        base = self._position - batch.first_line + 1
        line = self._interpret(batch, relmap, base)
        if line < batch.last_line:   # the compile finished meanwhile: the rest runs compiled
            head, tail = split_lines(batch, line)
            self._applied.append((_no_error(head), relmap))
            self._position = base + line
            self._hand_over()
            assert self.engine is not None
            self.engine.apply(tail, relmap)
            return
        self._applied.append((_no_error(batch), relmap))
        self._position = base + batch.last_line
        if error is not None:
            raise error

    def _interpret(self, batch: EventBatch, relmap: np.ndarray, base: int) -> int:
        """Apply the events of ``batch`` in the interpreter, stopping at the first line boundary
        after the compile finished; returns the last line applied (``batch.last_line`` when all
        were).  ~O(map entries) Python work per event (see the module docstring)."""
        interp, streams, job = self._interp, self._streams, self._job
        assert interp is not None and job is not None
        rel, sign, cols, lines = batch.rel.tolist(), batch.sign.tolist(), batch.cols, batch.line.tolist()
        rmap = relmap.tolist()
        next_poll = time.monotonic() + POLL_SECONDS
        for i, r in enumerate(rel):
            if i and lines[i] != lines[i - 1]:      # a line boundary: lines[i - 1] is complete
                self._position = base + lines[i - 1]
                if time.monotonic() >= next_poll:
                    if job.done():
                        return lines[i - 1]
                    next_poll = time.monotonic() + POLL_SECONDS
            s = rmap[r]
            if s < 0:
                continue
            name, arity = streams[s]
            interp.apply("+" if sign[i] > 0 else "-", name, tuple(cols[i, :arity].tolist()))
        return batch.last_line

    def _hand_over(self) -> None:
        """Load the compiled Engine (from numba's cache, which the finished compile filled),
        apply again every batch the interpreter applied, and drop the interpreter."""
        assert self._job is not None
        self._job.wait()
        engine = Engine(self.program)
        for b, relmap in self._applied:
            engine.apply(b, relmap)
        if engine.position != self._position:
            raise CompileError(f"hand-over to the compiled engine at line {self._position} found it at line "
                               f"{engine.position}")
        self.engine, self._job, self._interp, self._applied = engine, None, None, []
        self.handover_line = self._position
        if self._on_ready is not None:
            self._on_ready(engine, time.perf_counter() - self._t0)

    def finish(self) -> Engine:
        """Wait for the compile, hand over, and return the compiled Engine (callbacks, futures,
        exports).  Cost: the rest of the compile, then a cache load and the replay."""
        if self.engine is None:
            self._hand_over()
        assert self.engine is not None
        return self.engine

    # -- views --------------------------------------------------------------------------------
    def value(self, name: str) -> Any:
        """A view's value as :meth:`Engine.value` gives it: a number; a dict of its nonzero
        groups; for a view with several columns a tuple of them (``None`` for a NULL column), or
        a dict from every key present in any column to such tuples (0.0 for a column without
        the key, NaN for NULL), as :class:`~ddms.runtime.views.TableView` reads them."""
        if self.engine is not None:
            return self.engine.value(name)
        q = self._query(name)
        assert self._interp is not None
        if q.limit is not None:   # a view of rows: the rows shown, in order (TopView)
            rows = self.program.map(q.limit.rows)
            types = [self.program.map(m).value_type for m in ([] if q.limit.keys_only else q.maps)]
            out = {}
            for k, v in self._interp.view(name).items():
                vals = tuple(_py(x, t) for x, t in zip(v if isinstance(v, tuple) else (v,), types, strict=True))
                out[self._key(k, rows)] = vals[0] if len(vals) == 1 else vals
            return out
        if q.columns:
            decls = [self.program.map(m) for _, m in q.columns]
            maps = [self._interp.maps[d.name] for d in decls]
            if not q.keys:
                return tuple(_null(m.get((), 0.0), d.value_type) for m, d in zip(maps, decls, strict=True))
            keys = dict.fromkeys(k for m in maps for k in m)
            return {self._key(k, decls[0]): tuple(_py(m[k], d.value_type) if k in m else 0.0
                                                 for m, d in zip(maps, decls, strict=True)) for k in keys}
        decl = self.program.map(q.map)
        if not decl.keys:
            return _null(self._interp.view(name), decl.value_type)
        return {self._key(k, decl): _py(v, decl.value_type) for k, v in self._interp.view(name).items()}

    def snapshot(self) -> dict[str, Any]:
        """Every view as :meth:`Engine.snapshot` shows it: numbers for scalar views, ``[key...,
        value...]`` rows sorted by key for grouped ones, the one row of values of a view with
        several columns and no keys.  Cost: O(groups) per grouped view."""
        if self.engine is not None:
            return self.engine.snapshot()
        out: dict[str, Any] = {}
        for q in self.program.queries:
            v = self.value(q.name)
            if q.limit is not None:   # in the view's order
                out[q.name] = [[*k, *(x if isinstance(x, tuple) else (x,))] for k, x in v.items()]
            elif isinstance(v, dict):
                out[q.name] = sorted([*k, *(x if isinstance(x, tuple) else (x,))] for k, x in v.items())
            else:
                out[q.name] = list(v) if isinstance(v, tuple) else v
        return out

    def _query(self, name: str):
        for q in self.program.queries:
            if q.name == name:
                return q
        raise ViewError(f"no view named {name!r} (views: {', '.join(q.name for q in self.program.queries)})")

    @staticmethod
    def _key(key: tuple[float, ...], decl) -> tuple:
        return tuple(_py(x, c.type) for x, c in zip(key, decl.keys, strict=True))


def _no_error(batch: EventBatch) -> EventBatch:
    """``batch`` without its error (replayed at the hand-over, the error was raised already)."""
    if batch.error is None:
        return batch
    return EventBatch(batch.rel, batch.sign, batch.cols, batch.line, batch.first_line, batch.last_line,
                      batch.skipped, None)


def _compile_main() -> int:
    """The child of :class:`BackgroundCompile`: construct the Engine of the pickled program on
    stdin (generate, write, compile: numba's cache is filled)."""
    program = pickle.load(sys.stdin.buffer)
    Engine(program)
    return 0


if __name__ == "__main__":
    sys.exit(_compile_main())
