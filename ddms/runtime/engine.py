"""The engine: one compiled program, its state, and the four client interfaces of the DBToaster
CIDR paper (callbacks, an event loop, live views, futures).

``apply(batch)`` runs a whole columnar batch inside compiled code.  With no callback registered
the compiled loop never returns early; with callbacks it returns only after an input line that
changed a watched view, the engine calls that view's callbacks (which may read any view: the
state is exactly the state after that line), and re-enters compiled code at the next event.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ddms.backend.cache import compile_lock, compiled_before, load_module
from ddms.backend.gencache import generated_code
from ddms.backend.generated import Generated
from ddms.errors import DdmsError, InputError, ProgramError, ViewError
from ddms.io.events import EventBatch, check_batch
from ddms.io.symbols import symbol_name, symbol_value
from ddms.m3.ir import Program
from ddms.m3.parser import parse_program, read_source
from ddms.m3.verify import verify
from ddms.runtime.snapshot import Snapshot
from ddms.runtime.typedio import HashTable, log_drain, table_dump, table_get
from ddms.runtime.views import GroupedView, ScalarView, TableView, TopView

if TYPE_CHECKING:
    import asyncio  # imported by until() only: asyncio (and ssl, sockets) cost ~15 ms of every start

CHUNK_EVENTS = 1 << 15
"""``apply`` runs compiled code over at most about this many events at a time (extended to the end
of a line) and serves snapshot requests of other threads in between: a request waits at most one
chunk (~1-4 ms at 10-30M events/s); each chunk costs one compiled call (~2 us).  A program's
deferred statements run once per ``apply`` (and before a request is served), not per chunk: a
per-symbol view's run once per symbol touched cost ~60 ns a line at 1,000 symbols per chunk."""

Callback = Callable[[str, tuple, float, float, int], Any]
"""``callback(view, key, old, new, position)``: key is ``()`` for scalar views; position is the
1-based input line (counted over everything the engine applied) of the update."""


def _answer(requests: list[tuple[Callable[[], Any], concurrent.futures.Future]]) -> None:
    """Run queued ``(take, future)`` requests, handing each result or exception to its future."""
    for take, fut in requests:
        try:
            fut.set_result(take())
        except BaseException as e:  # noqa: BLE001 - handed to the requesting thread
            fut.set_exception(e)


@dataclass(frozen=True)
class ViewEvent:
    """What a future resolves to: the view, the position of the update, and the view's value
    then (a number for scalar views, a dict copy for grouped views)."""

    view: str
    position: int
    value: Any


def load_program(program: Program | str | Path) -> Program:
    """A Program from an IR object, M3 text, or a path to a ``.m3`` file or a ``.sql`` script
    (compiled by :mod:`ddms.compiler`); verified."""
    if isinstance(program, Program):
        return verify(program)
    if isinstance(program, Path | str) and str(program).endswith(".sql") and "\n" not in str(program):
        from ddms.compiler import compile_sql_file
        return compile_sql_file(program).program
    if isinstance(program, Path) or (isinstance(program, str) and "\n" not in program
                                     and (program.endswith(".m3") or os.path.exists(program))):
        path = Path(program)
        parsed = parse_program(read_source(path), str(path))
        try:
            return verify(parsed)
        except ProgramError as e:   # the verifier knows maps and statements, not files
            raise ProgramError(f"{path}: {e}") from None
    return verify(parse_program(program))


def stream_relmap(program: Program, names: Sequence[str]) -> np.ndarray:
    """:meth:`Engine.relmap` of ``program`` (a function, so that engines serving a program
    without compiling it number relations the same way)."""
    out = np.full(len(names), -1, np.int64)
    for i, n in enumerate(names):
        for j, s in enumerate(program.streams):
            book = s.source.option("book") if s.source is not None else None
            if s.name.lower() == n.lower() or (book is not None and book.lower() == n.lower()):
                out[i] = j
                break
    return out


_FIRE = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_double, ctypes.c_double)
"""The C signature of the callback compiled code calls after a line that changed a watched view:
``(line, slot, old, new)``, where slot >= 0 names the only watched map that changed (a scalar one)
and old/new are its values, so the common case reads nothing back from the state arrays."""


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class Subscription:
    """A registered callback.  Calling it (or :meth:`cancel`) unregisters it; :meth:`retarget`
    moves its ``above``/``below`` bounds, e.g. a strategy at its position limit stops listening
    for the signal that would make it buy more."""

    __slots__ = ("_engine", "view", "fn", "lo", "hi", "live")

    def __init__(self, engine: Engine, view: str, fn: Callback, lo: float, hi: float) -> None:
        self._engine, self.view, self.fn, self.lo, self.hi = engine, view, fn, lo, hi
        self.live = True

    def __call__(self) -> None:
        self.cancel()

    def cancel(self) -> None:
        self.live = False
        subs = self._engine._callbacks.get(self.view, [])
        if self in subs:
            subs.remove(self)
        self._engine._set_watch(self.view)

    def retarget(self, *, above: float | None = None, below: float | None = None) -> None:
        """New bounds (both ``None``: every change fires).  Cost: O(callbacks on the view)."""
        self.lo, self.hi = self._engine._band(self.view, above, below)
        self._engine._set_gate(self.view)


class Engine:
    """Runs one M3 program.  Construction generates, loads and compiles it (numba's disk cache
    makes the second process fast); ``compile_seconds`` says how long that took.  ``on_build``,
    if given, is called once the code is generated and before it is compiled or loaded, with
    whether numba's cache holds it (a load: well under a second; else a compile: a minute or
    more), so that a command line can say which wait is coming.  ``generated``: the
    :func:`~ddms.backend.codegen.generate` of ``program`` when the caller has it already
    (``ddms run`` asks for it to know whether numba's cache holds it: generating it again cost
    ~30-60 ms of every start); a Generated of another program is refused.  Without it, the
    generated code comes from :mod:`ddms.backend.gencache` (generated once per program and
    generator)."""

    def __init__(self, program: Program | str | Path, on_build: Callable[[bool], None] | None = None,
                 restore: str | Path | None = None, generated: Generated | None = None) -> None:
        t0 = time.perf_counter()
        self.program = load_program(program)
        if generated is not None and generated.program is not self.program and generated.program != self.program:
            raise ValueError("Engine(generated=...) was generated from another program")
        self.generated: Generated = generated if generated is not None else generated_code(self.program)
        if on_build is not None:
            on_build(compiled_before(self.generated))
        self.module = load_module(self.generated.source, self.generated.digest)
        # the program's deferred statements, for a batch run in several chunks (see _apply)
        self._flush: Callable[[Any], None] | None = getattr(self.module, "flush", None)
        self.state = self.module.new_state()
        if any(m.init is not None for m in self.program.maps):   # (the interpreter: only then)
            from ddms.m3.interpreter import initial_values

            for name, value in initial_values(self.program).items():
                getattr(self.state, f"m_{name}")[0] = value
        self._mid = {m.name: i for i, m in enumerate(self.program.maps)}
        self._streams = {s.name: i for i, s in enumerate(self.program.streams)}
        # columns of each stream, and 0 last: indexed by a relation map, -1 (ignored) reads the 0
        self._arity = np.array([len(s.columns) for s in self.program.streams] + [0], np.int64)
        self._watch: np.ndarray = self.state.watch
        self._watching: np.ndarray = self.state.watching
        self._gate: np.ndarray = self.state.gate
        self._prev = np.zeros(max(len(self.program.maps), 1))
        self.views: dict[str, ScalarView | GroupedView | TableView] = {}
        # the watchable single-valued views: every query with one value, and each column
        # ``VIEW.COLUMN`` of a query with several
        self._single: dict[str, ScalarView | GroupedView] = {}
        self._logs: dict[str, tuple[Any, Any]] = {}
        for q in self.program.queries:
            if q.limit is not None:   # rows cut when read: one view over its value maps and row counts
                self.views[q.name] = self._single[q.name] = self._top_view(q)
                continue
            names = [(f"{q.name}.{c}", m) for c, m in q.columns] if q.columns else [(q.name, q.map)]
            for vname, mname in names:
                decl = self.program.map(mname)
                table = self._table(mname)
                if decl.keys:
                    self._single[vname] = GroupedView(vname, decl, table, self._at_boundary)
                    self._logs[vname] = (getattr(self.state, f"log_keys_{mname}"),
                                         getattr(self.state, f"log_old_{mname}"))
                else:
                    self._single[vname] = ScalarView(vname, decl, table, self._at_boundary)
            if q.columns:
                self.views[q.name] = TableView(q.name, q.keys, {c: self._single[f"{q.name}.{c}"] for c, _ in q.columns})
            else:
                self.views[q.name] = self._single[q.name]
        self._map_queries = {m.name: [n for n, v in self._single.items() if m.name in self._maps_of(v)]
                             for m in self.program.maps}
        self._callbacks: dict[str, list[Callback]] = {}
        # what _line_changed walks (rebuilt by _set_watch): (value cell, prev slot, (view,
        # subscription) pairs) per watched scalar view, (view name, view) per watched grouped view
        self._scalar_watch: list[tuple[np.ndarray, int, list[tuple[str, Subscription]]]] = []
        self._grouped_watch: list[tuple[str, GroupedView]] = []
        self._top_watch: list[tuple[str, TopView]] = []
        self._top_prev: dict[str, dict[tuple, tuple]] = {}   # a watched view of rows: its rows after the last line
        # the same scalar entries by map slot: what the fast path of _line_changed walks
        self._slot_watch: dict[int, list[tuple[str, Subscription]]] = {}
        self.position = 0
        self.unsaved: list[str] = []
        """State attached to this engine that a checkpoint cannot hold, named with what to add
        (a strategy without ``state()``/``restore()``: :meth:`strategies.api.Strategy.attach`
        adds it): :meth:`checkpoint` refuses while any is attached rather than lose it silently."""
        self.savers: dict[str, Callable[[], tuple[dict[str, Any], dict[str, np.ndarray]]]] = {}
        """State attached to this engine that a checkpoint holds beside the maps: ``name ->
        save()`` returning JSON values and numpy arrays (no pickle), called at the checkpoint's
        line boundary (an attached strategy, its orders and its context: :mod:`strategies.api`)."""
        self.restored: dict[str, tuple[dict[str, Any], dict[str, np.ndarray]]] = {}
        """What the last :meth:`restore` found of :attr:`savers`' state, by name, for whoever
        attaches next (:meth:`strategies.api.Strategy.attach` takes ``"strategy"``)."""
        self._fire_c = _FIRE(self._line_changed)  # compiled code calls back through this
        self._raised: BaseException | None = None
        self._batch_base = 0
        self._batch: EventBatch | None = None   # the batch being applied (apply resumes it)
        self._batch_pos = 0
        # snapshots and view reads from other threads (see snapshot): apply holds _busy while it
        # runs and serves the queued requests between chunks of at most CHUNK_EVENTS events, at
        # line boundaries.  Reentrant: a request (a snapshot) reads views, which ask again.
        self._lock = threading.RLock()
        self._busy = False
        self._writer: int | None = None
        self._requests: list[tuple[Callable[[], Any], concurrent.futures.Future]] = []
        self._relations: Any = None   # the base relations' rows, when kept (keep_relations)
        if getattr(self.module.run_batch, "signatures", None):   # compiled (or loaded) in this process
            self._compile()
        else:
            with compile_lock(self.generated.digest):   # another process compiling it: wait, then load
                self._compile()
        self.compile_seconds = time.perf_counter() - t0
        if restore is not None:
            self.restore(restore)

    def _table(self, name: str) -> Any:
        """What a view reads of map ``name``: its state field (a scalar's cell, a typed ``Dict``),
        or a :class:`~ddms.runtime.typedio.HashTable` over it when codegen keeps the map in a hash
        table (a plain array, replaced when it grows: read anew each time).  O(1)."""
        arity = len(self.program.map(name).keys)
        hashes = getattr(self.module, "HASHES", {})
        if name in hashes:   # a value column of a table shared by several maps of a view of rows
            tab, col = hashes[name]
            return HashTable(self.state, f"m_{tab}", arity, col)
        field = getattr(self.state, f"m_{name}")
        if isinstance(field, np.ndarray) and arity:
            return HashTable(self.state, f"m_{name}", arity)
        return field

    def _top_view(self, q) -> TopView:
        """The :class:`TopView` of query ``q`` (a view whose rows are cut when read)."""
        parts: dict[str, GroupedView] = {}
        if not q.limit.keys_only:
            for c, m in (q.columns or ((q.name, q.map),)):
                parts[c] = GroupedView(f"{q.name}.{c}" if q.columns else q.name, self.program.map(m),
                                       self._table(m), self._at_boundary)
        rows = self.program.map(q.limit.rows)
        keys = q.keys or tuple(c.name for c in rows.keys)
        return TopView(q.name, q.limit, keys, rows, self._table(q.limit.rows), parts,
                       self._at_boundary, self._ranked(q) if q.limit.ranks and all(
                           self.program.map(m).ordered for m in q.limit.ranks) else None)

    def _ranked(self, q) -> Callable[[], list[tuple[float, ...]]]:
        """The keys a view of rows shows, in order, read by rank (:attr:`ddms.m3.ir.Limit.ranks`):
        per partition (the keys of the first level's trees), the first level's keys in order by
        select by rank, and under each the next level's, until the ranks ``offset + 1 .. offset +
        n`` are out (a key of the last level is one row of the view; a key of the level before
        it whose last-level keys all fall within the offset left is skipped whole).
        Runs at a line boundary.  O(partitions + (n + levels) log g)."""
        from ddms.storage.btree import btree_len, btree_nth
        from ddms.storage.hashtab import ht_dict, ht_get
        lim = q.limit
        levels = []
        for j, name in enumerate(lim.ranks):
            tree, col = self.module.TREES.get(name, (name, 0))
            levels.append((tree, col, lim.order[j][1], len(self.program.map(name).keys)))
        perm = [*lim.partition, *(i for i, _ in lim.order)]   # view key position of each level key

        def trees(j: int) -> tuple[Any, Any]:
            return getattr(self.state, f"op_{levels[j][0]}"), getattr(self.state, f"or_{levels[j][0]}")

        def root(j: int, prefix: tuple[float, ...]) -> int:
            _, roots = trees(j)
            return int(roots[0]) if levels[j][3] == 1 else int(ht_get(roots, prefix, -1))

        def keys() -> list[tuple[float, ...]]:
            out: list[tuple[float, ...]] = []
            assert lim.n is not None

            def walk(j: int, prefix: tuple[float, ...], skip: int) -> int:
                # the rows under ``prefix`` in order, after ``skip`` of them; returns the skip left
                pool, _ = trees(j)
                _, col, desc, _ = levels[j]
                r = root(j, prefix)
                if r < 0:
                    return skip
                for rank in range(1, btree_len(pool, r, col) + 1):
                    if len(out) >= lim.n:
                        break
                    found, k = btree_nth(pool, r, rank, desc, col)
                    assert found
                    if j + 1 == len(levels):   # a key of the last level is one row of the view
                        if skip:
                            skip -= 1
                        else:
                            out.append((*prefix, k))
                        continue
                    if j + 2 == len(levels):   # the view's rows under k: the keys of its last-level tree
                        nxt, _ = trees(j + 1)
                        under = btree_len(nxt, root(j + 1, (*prefix, k)), levels[j + 1][1])
                        if skip >= under:      # all of them within the offset: skipped whole
                            skip -= under
                            continue
                    skip = walk(j + 1, (*prefix, k), skip)
                return skip
            if lim.partition:
                _, roots = trees(0)
                parts = sorted(ht_dict(roots)) if levels[0][3] > 1 else [()]
            else:
                parts = [()]
            shown: list[tuple[float, ...]] = []
            for part in parts:
                out.clear()
                walk(0, part, lim.offset)
                shown += out
            inv = sorted(range(len(perm)), key=lambda i: perm[i])   # level order -> view key order
            return [tuple(k[i] for i in inv) for k in shown]
        return keys

    def _maps_of(self, v) -> tuple[str, ...]:
        """The maps a view reads: its map, or a view of rows' row counts and value maps."""
        if isinstance(v, TopView):
            return (v.decl.name, *(p.decl.name for p in v.parts.values()))
        return (v.decl.name,)

    def _compile(self) -> None:
        """Compile (or load from cache) every function by running an empty batch of the exact
        array types ``apply`` uses."""
        empty = EventBatch.empty(1)
        self.module.run_batch(self.state, np.zeros(1, np.int64), empty.rel, empty.sign,
                              np.zeros((0, 1)), empty.line, 0, 0, self._prev, self._fire_c, False)
        # apply's input check is compiled too: numba loads its machine code on the first call,
        # which would otherwise land in the first timed batch (~10-50 ms of LLVM loading)
        check_batch(empty, self._arity[:1])

    # -- views ------------------------------------------------------------------------------
    def export(self, views: Sequence[str] | None = None, *, pandas: bool = False) -> dict[str, Any]:
        """``{view name: table}`` of ``views`` (default: all) as they are now: pyarrow Tables, or
        pandas DataFrames with ``pandas=True`` (optional dependency; a DependencyError says how to
        install it).  Key columns, then a value column named after the view; a scalar view is one
        row (:mod:`ddms.runtime.export`).  Cost: O(groups) per grouped view."""
        from ddms.runtime.export import export_views, to_pandas
        if pandas:
            from ddms.runtime.export import require_pandas
            require_pandas()
        tables = export_views(self.views, views)
        return {n: to_pandas(t) for n, t in tables.items()} if pandas else tables

    def view(self, name: str) -> ScalarView | GroupedView | TableView:
        """A view by name; ``VIEW.COLUMN`` is one column of a view with several."""
        v = self.views.get(name)
        if v is None:
            v = self._single.get(name)
        if v is None:
            raise ViewError(f"no view named {name!r} (views: {', '.join(self.views)})")
        return v

    def watchable(self) -> list[str]:
        """The names callbacks, conditions and futures take: every view with one value column,
        and ``VIEW.COLUMN`` for each column of a view with several."""
        return list(self._single)

    def _watchable(self, name: str) -> ScalarView | GroupedView:
        v = self.view(name)
        if isinstance(v, TableView):
            raise ViewError(f"view {name!r} has several columns: watch one of them, e.g. "
                            f"{name}.{next(iter(v.parts))}")
        return v

    def value(self, name: str) -> Any:
        """A view's value: a number (``None`` for NULL), a tuple for a view with several columns
        and no keys, or a dict of its nonzero groups (to tuples, with several columns)."""
        v = self.view(name)
        if isinstance(v, TopView):   # its rows shown, in order
            return dict(v.items_now())
        return v.value if isinstance(v, ScalarView) or (isinstance(v, TableView) and not v.key_names) else dict(v)

    def snapshot(self, views: str | Sequence[str] | None = None) -> Snapshot:
        """Frozen copies of ``views`` (a name, names, or every view) as of one input line
        boundary, never a half-applied line: a read-only :class:`~ddms.runtime.snapshot.Snapshot`
        (numbers, None for NULL, for scalar views; ``[key..., value...]`` rows sorted by key for
        grouped views; a view with several columns and no keys: its one row of values) whose
        ``position`` is that line.

        Safe from any thread while another thread runs :meth:`apply`: the request waits until the
        writer finishes its current chunk (at most :data:`CHUNK_EVENTS` events, at a line
        boundary, ~1-4 ms), and the writer copies the views asked for there, in compiled code, then
        goes on (its cost: that copy, O(1) per scalar, O(groups) per grouped view).  With no
        writer running, or from a callback on the writer's own thread, the copy is taken at once.
        """
        names = list(self.views) if views is None else [views] if isinstance(views, str) else list(views)
        for n in names:
            self.view(n)   # ViewError for an unknown name
        return self._build(*self._at_boundary(lambda: self._copy(names)))

    def _at_boundary(self, take: Callable[[], Any]) -> Any:
        """``take()`` run at an input line boundary: now if no thread is applying (or from a
        callback of the applying thread), else by the applying thread after its current chunk.
        Every view read goes through here: the compiled apply loop runs without the GIL, so a
        read from another thread taken meanwhile could see a half-updated map."""
        if self._writer == threading.get_ident():   # a callback: the state is at a line boundary
            return take()
        with self._lock:
            if not self._busy:
                return take()
            fut: concurrent.futures.Future = concurrent.futures.Future()
            self._requests.append((take, fut))
        return fut.result()

    # -- ad-hoc queries ---------------------------------------------------------------------------
    def keep_relations(self) -> None:
        """Keep the base relations (every stream's current rows: the resting bids and asks of an
        order book) beside the maps, for :meth:`query`.  Must be called before the first line
        (or after restoring a checkpoint that kept them).  Cost: one hash probe per event in
        compiled code (:mod:`ddms.runtime.relations`) and ~100 bytes per row."""
        if self._relations is not None:
            return
        if self.position:
            raise ViewError(f"keep_relations() after {self.position:,} lines: the rows before are gone "
                            "(call it before the first line, or restore a checkpoint that kept them)")
        from ddms.runtime.relations import new_relations, relations_apply
        self._rel_apply = relations_apply
        self._relations = new_relations(self.program)

    def relations(self) -> dict[str, np.ndarray]:
        """Each stream's current rows (float64, one row per copy), as of one line boundary."""
        from ddms.runtime.relations import relation_rows
        if self._relations is None:
            raise ViewError("the base relations are not kept: call keep_relations() before the first line")
        if self._writer == threading.get_ident():
            raise ViewError("relations()/query() from a callback: the relations are brought up to date per "
                            "chunk, not per line; ask from outside the callback")
        return self._at_boundary(lambda: relation_rows(self.program, self._relations))

    def query(self, sql: str, *, from_views: bool = True):
        """Answer a one-time SQL query over the current base relations (tables named after the
        streams, e.g. ``bids``/``asks``, columns as declared, all float64) as of one input line
        boundary; returns a ``pyarrow.Table``.  A query that compiles to one of the program's
        views is answered from that view (:mod:`ddms.runtime.viewmatch`: no relations needed,
        the schema metadata ``ddms.view`` names it; ``from_views=False`` asks DuckDB anyway);
        any other is evaluated by DuckDB, which needs :meth:`keep_relations`.
        Cost: a copy of the relations (O(rows)) and DuckDB's evaluation; a thread applying
        meanwhile pauses only for the compiled copy."""
        if from_views:
            from ddms.runtime.viewmatch import answer_from_view
            table = answer_from_view(self, sql)
            if table is not None:
                return table
        from ddms.runtime.adhoc import run_query
        return run_query(self.program, self.relations(), sql)

    def _copy(self, names: list[str]) -> tuple[int, dict[str, Any]]:
        """The position and raw copies of views ``names`` (compiled and cached for grouped views:
        :mod:`ddms.runtime.typedio`)."""
        out: dict[str, Any] = {}
        for n in names:
            v = self.views[n]
            if isinstance(v, ScalarView):
                out[n] = v.value
            elif isinstance(v, TableView):   # a few columns: read at the boundary in Python
                out[n] = v.rows() if v.key_names else list(v.value or ())
            elif isinstance(v, TopView):     # its rows shown, in its order
                out[n] = v.rows()
            else:
                out[n] = table_dump(v._table, len(v._types))
        return self.position, out

    def _build(self, position: int, raw: dict[str, Any]) -> Snapshot:
        from ddms.runtime.snapshot import FrozenRow, FrozenRows, grouped_rows
        values = {}
        for n, x in raw.items():
            v = self.views[n]
            values[n] = x if isinstance(v, ScalarView | TableView) else \
                FrozenRows([FrozenRow(r) for r in x]) if isinstance(v, TopView) else \
                grouped_rows(*x, v._types, v.decl.value_type)
        return Snapshot(position, values)

    def _serve(self) -> None:
        """Run the queued :meth:`_at_boundary` requests (writer thread, at a line boundary)."""
        with self._lock:
            requests, self._requests = self._requests, []
        _answer(requests)

    def _check(self) -> None:
        """Assert every invariant of the program state (tests call it after each update):
        hash maps hold no zero values; every EXTREME map's table, heap and window pass ``xh_check``; every
        secondary index holds exactly the keys of its map,
        grouped by its key positions; every range tree passes ``btree_check`` and holds exactly
        its map's entries (per prefix); no deferred statement (nor key of a keyed one) is left
        pending between batches.
        Cost: O(total map size)."""
        from ddms.storage.btree import btree_check, btree_items, btree_len
        from ddms.storage.hashtab import ht_cdict, ht_check, ht_dict, ht_fdict
        mod, st = self.module, self.state
        if self._relations is not None:   # kept base rows: no row at multiplicity 0, streams in range
            from ddms.runtime.statecopy import dict_dump
            keys, counts = dict_dump(self._relations)
            assert (counts != 0).all(), "a base row with multiplicity 0 is kept"
            assert ((keys[:, 0] >= 0) & (keys[:, 0] < len(self.program.streams))).all(), "a base row of no stream"
        if "lazy" in mod.FIELDS:
            assert not st.lazy.any(), f"deferred statements pending after a batch: groups {st.lazy}"
        for f in mod.FIELDS:
            if f.startswith("cut_"):   # a guarded deferred group's stored cuts: NaN or what its maps give now
                now = np.array(getattr(mod, f"cutv_{f[4:]}")(st), np.float64)
                kept = getattr(st, f)
                assert ((kept == now) | np.isnan(kept)).all(), f"{f}: stored cuts {kept}, the maps give {now}"
            if f.startswith("lazy_keys_"):
                assert getattr(st, f)[-1, 0] == 0, f"keyed deferred statements pending after a batch: {f}"
        for m in self.program.maps:
            if not m.keys:
                continue
            if m.extreme:   # a value table and a lazy heap (ddms.storage.extheap)
                from ddms.storage.extheap import xh_check, xh_retired
                for j, kind in enumerate(m.extremes):   # (codegen: a table and heap per extreme, xt_ first)
                    sfx = "" if j == 0 else "n"
                    xh_check(getattr(st, f"xt{sfx}_{m.name}"), getattr(st, f"xh{sfx}_{m.name}"),
                             getattr(st, f"xw_{m.name}"), 1.0 if kind == "max" else -1.0)   # (one window)
                # a window a writer retired (regrown) is let go before run_batch / flush return
                assert not xh_retired(getattr(st, f"xg_{m.name}")), f"{m.name}: a retired window is kept"
                continue
            if m.ordered:   # prefix -> root of its range tree (maybe a column of a shared tree)
                tree, col = mod.TREES.get(m.name, (m.name, 0))
                pool, roots = getattr(st, f"op_{tree}"), getattr(st, f"or_{tree}")
                if len(m.keys) == 1:
                    roots = {(): int(roots[0])} if roots[0] >= 0 else {}
                else:
                    ht_check(roots)
                    roots = ht_dict(roots)
                    assert all(r >= 0 for r in roots.values()), f"{m.name}: an empty slice keeps a root"
            if m.name in mod.TREE_ONLY:   # range trees alone: one per prefix, none empty
                for prefix, root in roots.items():
                    btree_check(pool, root)   # (a kept tree has a key in some column)
                    if m.name not in mod.TREES:
                        assert btree_len(pool, root) > 0, f"{m.name}{list(prefix)}: an empty range tree is kept"
                continue
            hashes = getattr(mod, "HASHES", {})
            if m.name in hashes:   # a column of a hash table of several value columns (a view of rows)
                tab, hcol = hashes[m.name]
                ht_check(getattr(st, f"m_{tab}"), len(m.keys))
                table = ht_cdict(getattr(st, f"m_{tab}"), len(m.keys), hcol)
            elif isinstance(stored := getattr(st, f"m_{m.name}"), np.ndarray):   # a hash table (codegen:
                ht_check(stored)                                                   # a map only probed and updated)
                table = ht_fdict(stored)
            else:
                table = dict(stored.items())
            assert all(v != 0.0 for v in table.values()), f"{m.name}: a zero value is stored"
            for pos in mod.INDEXES.get(m.name, []):
                index = getattr(st, f"ix_{m.name}_b{''.join(map(str, pos))}")
                want: dict[tuple, set] = {}
                for k in table:
                    want.setdefault(tuple(k[p] for p in pos), set()).add(k)
                got = {part: set(keys.keys()) for part, keys in index.items()}
                assert got == want, f"{m.name}: index on keys {list(pos)} disagrees with the map"
            if not m.ordered:
                continue
            prefixes = {k[:-1] for k in table}
            assert set(roots) == prefixes, f"{m.name}: range trees exist for prefixes {set(roots) ^ prefixes}"
            for prefix, root in roots.items():
                btree_check(pool, root)
                keys, vals = btree_items(pool, root, col)
                want_items = sorted((k[-1], v) for k, v in table.items() if k[:-1] == prefix)
                assert list(zip(keys.tolist(), vals.tolist(), strict=True)) == want_items, \
                    f"{m.name}{list(prefix)}: range tree disagrees with the map"

    # -- durable state --------------------------------------------------------------------------
    def checkpoint(self, path: str | Path, *, extra: dict[str, Any] | None = None,
                   extra_arrays: dict[str, np.ndarray] | None = None) -> int:
        """Write every map, index, range tree (raw, pending leaves included) and the input
        position to ``path``, atomically (:mod:`ddms.runtime.checkpoint`); ``extra`` (JSON) and
        ``extra_arrays`` carry a driver's own state, e.g. its reader's.  Call between ``apply``
        calls or from a callback (a line boundary).  Returns the file size.  Cost: O(state)."""
        from ddms.runtime.checkpoint import save
        return save(self, path, extra, extra_arrays)

    def restore(self, path: str | Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Replace the state and position with those of checkpoint ``path``, so that applying the
        input after its position gives bit for bit the results of the uninterrupted run.  Raises
        :class:`~ddms.errors.CheckpointError` for a checkpoint of another program, format or code
        version.  Callbacks stay registered.  Returns what the writer passed as ``extra`` and
        ``extra_arrays``.  Cost: O(state)."""
        from ddms.runtime.checkpoint import restore
        self._batch, self._batch_pos = None, 0
        return restore(self, path)

    # -- callbacks and futures --------------------------------------------------------------
    def on(self, view: str, callback: Callback, *, above: float | None = None,
           below: float | None = None) -> Subscription:
        """Call ``callback(view, key, old, new, position)`` after every update that changes
        ``view``, in event order.  Returns a :class:`Subscription` (call it to unregister).

        With ``above`` and/or ``below`` (scalar views only) the callback runs only for updates
        whose new value is ``> above`` or ``< below``, and the test runs in compiled code: lines
        that leave the value inside ``[below, above]`` never return to Python, so a strategy that
        reacts to a rare condition costs nothing between firings.  ``Subscription.retarget``
        moves the bounds (O(callbacks on the view))."""
        self._watchable(view)
        sub = Subscription(self, view, callback, *self._band(view, above, below))
        self._callbacks.setdefault(view, []).append(sub)
        self._set_watch(view)
        return sub

    def _band(self, view: str, above: float | None, below: float | None) -> tuple[float, float]:
        """The quiet band ``(lo, hi)`` of a condition on ``view``: the callback fires when the new
        value is not in ``[lo, hi]``.  No condition is the empty band ``(inf, -inf)``: every
        change fires.  Conditions need a scalar view and ``below <= above``."""
        v = self._watchable(view)
        if above is None and below is None:
            return math.inf, -math.inf
        if not isinstance(v, ScalarView):
            raise ViewError(f"view {view!r} is grouped: above/below conditions need a scalar view")
        lo = -math.inf if below is None else float(below)
        hi = math.inf if above is None else float(above)
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ViewError(f"view {view!r}: need below <= above, got below={below!r}, above={above!r}")
        return lo, hi

    def _set_watch(self, view: str) -> None:
        """A map is watched while any query on it has a callback (then compiled code compares
        its value before and after each line); see :meth:`_set_gate` for its band."""
        for name in self._maps_of(self._single[view]):
            self._watch[self._mid[name]] = 1 if any(self._callbacks.get(q) for q in self._map_queries[name]) else 0
        self._watching[0] = 1 if any(self._callbacks.values()) else 0
        live = [(n, self._single[n], tuple(cbs)) for n, cbs in self._callbacks.items() if cbs]
        self._top_watch = [(n, v) for n, v, _ in live if isinstance(v, TopView)]
        self._top_prev = {n: self._top_prev[n] if n in self._top_prev else v.raw() for n, v in self._top_watch}
        self._scalar_watch = [(v._cell, self._mid[v.decl.name], [(n, sub) for sub in subs])
                              for n, v, subs in live if isinstance(v, ScalarView)]
        self._grouped_watch = [(n, v) for n, v, _ in live if isinstance(v, GroupedView)]
        self._slot_watch = {}
        for _cell, slot, pairs in self._scalar_watch:
            self._slot_watch.setdefault(slot, []).extend(pairs)
        self._set_gate(view)

    def _set_gate(self, view: str) -> None:
        """The compiled band of ``view``'s map: the intersection of its callbacks' bands (empty
        as soon as one callback is unconditional), so compiled code returns whenever at least
        one callback's condition can hold.  O(callbacks on the map); a strategy retargets a
        subscription at every crossing, so this is kept to a few list walks."""
        for name in self._maps_of(self._single[view]):
            mid = self._mid[name]
            subs = [s for q in self._map_queries[name] for s in self._callbacks.get(q, ())]
            self._gate[mid, 0] = max((s.lo for s in subs), default=math.inf)
            self._gate[mid, 1] = min((s.hi for s in subs), default=-math.inf)

    def future(self, view: str, predicate: Callable[[Any], bool]) -> concurrent.futures.Future:
        """A Future resolved with a :class:`ViewEvent` when ``predicate(value)`` first holds
        for the view's value (checked now and after every update that changes the view).  A
        NULL scalar value (``None``: MIN/MAX of an empty book, and arithmetic over it) is never
        passed to the predicate: a future never fires on NULL."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        fut.set_running_or_notify_cancel()
        self._watchable(view)
        if self.value(view) is not None and predicate(self.value(view)):
            fut.set_result(ViewEvent(view, self.position, self.value(view)))
            return fut
        cancel: Callable[[], None] = lambda: None  # noqa: E731

        def check(_v: str, _k: tuple, _old: float, _new: float, position: int) -> None:
            if fut.done():
                cancel()
                return
            value = self.value(view)
            if value is not None and predicate(value):
                cancel()
                fut.set_result(ViewEvent(view, position, value))
        cancel = self.on(view, check)
        return fut

    def until(self, view: str, predicate: Callable[[Any], bool]) -> asyncio.Future:
        """The asyncio form of :meth:`future` (await it inside a running loop)."""
        import asyncio

        return asyncio.wrap_future(self.future(view, predicate))

    # -- input --------------------------------------------------------------------------------
    def relmap(self, names: Sequence[str]) -> np.ndarray:
        """Map a source's relation numbers (``names[i]`` for rel i) to this program's streams
        (-1: the program has no such stream, its events are ignored).  Names match stream names
        case-insensitively, or the ``book`` option of an orderbook source."""
        return stream_relmap(self.program, names)

    def apply(self, batch: EventBatch, relmap: np.ndarray, *, until_line: int | None = None) -> None:
        """Apply the events of ``batch`` (relations numbered as in ``relmap``), firing callbacks
        between lines.  With ``until_line`` only the events up to and including that input line
        of the batch; calling again with the *same* batch object resumes after them, so a driver
        can stop at chosen lines (a backtest samples its equity every 1,000 lines) without
        cutting the batch into copies (~7 us a call).  A batch that carries an ``error`` is
        applied up to the bad line and then the error is raised: nothing accepted before it is
        lost.

        Runs compiled code over chunks of about :data:`CHUNK_EVENTS` events, serving snapshot
        requests of other threads between them (see :meth:`snapshot`).  One thread applies at a
        time: a second thread calling ``apply`` meanwhile gets a ``DdmsError``."""
        me = threading.get_ident()
        nested = self._writer == me   # from a callback of this thread's apply
        if not nested:
            with self._lock:
                if self._busy:
                    raise DdmsError("Engine.apply called from two threads at once")
                self._busy, self._writer = True, me
        try:
            self._apply(batch, relmap, until_line)
        finally:
            if not nested:
                with self._lock:   # requests made since the last chunk: served before anyone else runs
                    self._busy, self._writer = False, None
                    requests, self._requests = self._requests, []
                    _answer(requests)

    def _apply(self, batch: EventBatch, relmap: np.ndarray, until_line: int | None) -> None:
        if batch is not self._batch:
            self._check_batch(batch, relmap)
            self._batch, self._batch_pos = batch, 0
            self._batch_base = self.position - batch.first_line + 1
        base = self._batch_base
        n = len(batch)
        last = batch.last_line if until_line is None else min(int(until_line), batch.last_line)
        stop = n if last >= batch.last_line else int(np.searchsorted(batch.line, last, side="right"))
        start = self._batch_pos
        if stop > start:
            cols = batch.cols
            if cols.ndim != 2 or cols.dtype != np.float64 or not cols.flags.c_contiguous:
                cols = np.ascontiguousarray(cols, dtype=np.float64)
            line = batch.line
            pending = False   # deferred statements of the chunks so far not yet run
            try:
                while start < stop:
                    cut = start + CHUNK_EVENTS
                    # a chunk ends with a line; the deferred statements (per-symbol views: once per
                    # symbol touched) run at the end of the batch, not of every chunk: with a
                    # thousand symbols a run of them all is ~1 ms, a third of a 32k-event chunk
                    cut = stop if cut >= stop else min(stop, int(np.searchsorted(line, line[cut - 1], side="right")))
                    defer = cut < stop and self._flush is not None
                    end = self.module.run_batch(self.state, relmap, batch.rel, batch.sign, cols, line, start, cut,
                                                self._prev, self._fire_c, defer)
                    pending = defer
                    self._batch_pos = end
                    if self._relations is not None:
                        self._rel_apply(self._relations, relmap, batch.rel, batch.sign, cols, start, end,
                                        self._arity)
                    if self._raised is not None:  # a callback raised: the batch stopped after its line
                        raised, self._raised = self._raised, None
                        self.position = base + int(line[end - 1])
                        raise raised   # the batch stays current: applying it again resumes after the line
                    if end < stop:
                        self.position = max(self.position, base + int(line[end - 1]))
                        if self._requests:   # a reader waits: the views brought up to date first
                            pending = self._run_deferred(pending)
                            self._serve()
                    start = end
            finally:   # also when stopped by an exception (Ctrl-C between chunks): the views as of the line
                self._run_deferred(pending)
        self.position = max(self.position, base + last)
        if last >= batch.last_line:
            self._batch = None
            if batch.error is not None:
                raise batch.error

    def _run_deferred(self, pending: bool) -> bool:
        """Run the deferred statements that chunks applied with ``defer`` left (if ``pending``), so
        that every map reads as of the last line applied; False (nothing pending any more).  Cost:
        one run of them, O(keys touched since) for per-symbol ones."""
        if pending and self._flush is not None:
            self._flush(self.state)
        return False

    def _check_batch(self, batch: EventBatch, relmap: np.ndarray) -> None:
        """Reject a malformed batch or relation map before compiled code (which does not check
        bounds) sees it.  O(n) compiled plus O(streams)."""
        arity = self._arity
        if relmap.ndim != 1 or relmap.dtype != np.int64 or ((relmap < -1) | (relmap >= len(arity) - 1)).any():
            raise InputError(f"relation map {relmap.tolist()} must be int64 stream numbers 0..{len(arity) - 2} "
                             "or -1 (ignored)", "<batch>")
        check_batch(batch, arity[relmap])

    def batch_line(self, position: int) -> int:
        """The input line, within the batch being applied, of engine ``position`` (what a
        callback receives): lets a driver advance its own copy of the stream in step."""
        return position - self._batch_base

    def _drain_log(self, view: str) -> dict[tuple, float]:
        """The first old value of every key written since the last drain (empties the log)."""
        keys, olds = self._logs[view]
        first: dict[tuple, float] = {}
        ks, os_ = log_drain(keys, olds, len(self.views[view].decl.keys))
        for k, o in zip(ks.tolist(), os_.tolist(), strict=True):
            first.setdefault(tuple(k), o)
        return first

    def _line_changed(self, line: int, slot: int, old: float, new: float) -> int:
        """Called from compiled code (a ctypes callback) after input ``line`` of the current batch
        changed a watched view: call the callbacks of every watched view the line changed.  An
        exception cannot cross back into compiled code, so it is kept and 1 tells the compiled
        loop to stop; ``apply`` raises it.

        The hot path of every callback (~0.3 us of Python around the user's function).  When only
        one watched map changed and it is scalar (``slot`` >= 0), compiled code passes its old and
        new values and only that map's views are walked; otherwise every watched scalar view is
        compared with its value before the line (``_prev``) and grouped views read their change
        logs.  A subscription cancelled by an earlier callback of the same line is skipped."""
        self.position = position = self._batch_base + line
        try:
            if slot >= 0:   # the one scalar map that changed, its values passed by compiled code
                # the same loop as below, written out: a shared helper or a one-change tuple cost
                # ~100-150 ns a callback, a third of the Python overhead
                for view, sub in self._slot_watch.get(slot, ()):
                    if sub.live and (sub.lo > sub.hi or new > sub.hi or new < sub.lo):
                        sub.fn(view, (), old, new, position)
                return 0
            for pairs, old, new in self._scalar_changes():
                for view, sub in pairs:
                    if sub.live and (sub.lo > sub.hi or new > sub.hi or new < sub.lo):  # NaN: unconditional only
                        sub.fn(view, (), old, new, position)
            if self._grouped_watch or self._top_watch:
                self._fire_grouped(position)
        except BaseException as e:  # noqa: BLE001 - re-raised by apply
            self._raised = e
            return 1
        return 0

    def _scalar_changes(self) -> list[tuple[list[tuple[str, Subscription]], float, float]]:
        """(view/subscription pairs, old, new) of every watched scalar view whose value differs
        from its value before the line (NaN equals NaN), in registration order."""
        item = self._prev.item
        out = []
        for cell, slot, pairs in self._scalar_watch:
            old, new = item(slot), cell.item(0)
            if old != new and (old == old or new == new):
                out.append((pairs, old, new))
        return out

    def _fire_grouped(self, position: int) -> None:
        """The callbacks of watched grouped views, per key the line changed (from the map's write
        log, drained once per map for all its views)."""
        changes: dict[str, dict[tuple, float]] = {}
        for view, v in self._grouped_watch:
            if v.decl.name not in changes:
                changes[v.decl.name] = self._drain_log(view)
            for k, old in changes[v.decl.name].items():
                new = float(table_get(v._table, k)[1])
                if not _same(old, new):
                    shown = v.show_key(k)      # symbol ids as names
                    for sub in tuple(self._callbacks.get(view, ())):
                        if sub.live:
                            sub.fn(view, shown, old, new, position)
        for view, top in self._top_watch:
            self._fire_top(view, top, changes, position)

    def _fire_top(self, view: str, top: TopView, drained: dict[str, dict[tuple, float]], position: int) -> None:
        """The callbacks of a watched view of rows (a ladder) after a line that changed one of its
        maps: its rows now against its rows after the previous such line, one call per row that
        entered (old 0), left (new 0) or changed -- a level entering the top n when the n-th
        empties changes no entry of it, so rows are compared, not write logs.  ``old``/``new``
        are the row's value (a tuple with several columns; 1/0 for a row of keys alone).
        Cost: a read of the view, O(g log g)."""
        for name in self._maps_of(top):   # (their change logs: emptied, not needed)
            if name not in drained:
                keys, olds = getattr(self.state, f"log_keys_{name}"), getattr(self.state, f"log_old_{name}")
                log_drain(keys, olds, len(self.program.map(name).keys))
                drained[name] = {}
        now = top.raw()
        before = self._top_prev.get(view, {})
        self._top_prev[view] = now
        width = len(top.parts)
        absent = (0.0,) * width

        def shown(vals: tuple | None) -> Any:
            if vals is None:
                return 0.0 if width <= 1 else absent
            return 1.0 if not width else vals[0] if width == 1 else vals
        for k in [*before, *(k for k in now if k not in before)]:
            old, new = before.get(k), now.get(k)
            if old is not None and new is not None and all(_same(a, b) for a, b in zip(old, new, strict=True)):
                continue
            key = tuple(symbol_name(x) if t == "string" else x for x, t in zip(k, top.key_types, strict=True))
            for sub in tuple(self._callbacks.get(view, ())):
                if sub.live:
                    sub.fn(view, key, shown(old), shown(new), position)

    def event(self, sign: str, stream: str, values: Sequence[float]) -> None:
        """Apply one insert (``sign='+'``) or delete (``'-'``) as its own input line.  Values must
        be finite numbers (as the stream adaptors require): a NaN or infinite value is rejected
        before anything is applied, since it would poison every sum it enters for good.  A
        ``string`` (symbol) column takes the symbol's name."""
        if sign not in ("+", "-"):
            raise ProgramError(f"event sign {sign!r} is neither '+' (insert) nor '-' (delete)")
        if stream not in self._streams:
            raise ProgramError(f"unknown stream {stream} (streams: {', '.join(self._streams)})")
        arity = len(self.program.streams[self._streams[stream]].columns)
        if len(values) != arity:
            raise ProgramError(f"stream {stream} has {arity} columns, got {len(values)}")
        where = f"{sign}{stream}"
        columns = self.program.streams[self._streams[stream]].columns
        if any(isinstance(v, str) for v in values):   # a symbol column takes the name
            values = [symbol_value(v) if isinstance(v, str) and c.type == "string" else v
                      for v, c in zip(values, columns, strict=True)]
        for i, v in enumerate(values):
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise InputError(f"column {i + 1} is not a number", where, self.position + 1, repr(v)) from None
            if not math.isfinite(x):
                raise InputError(f"column {i + 1} is not a finite number", where, self.position + 1, repr(v))
        cols = np.asarray([values], dtype=np.float64)
        batch = EventBatch(np.zeros(1, np.int8), np.array([1 if sign == "+" else -1], np.int8), cols,
                           np.ones(1, np.int64), 1, 1)
        self.apply(batch, np.array([self._streams[stream]], np.int64))

    def insert(self, stream: str, *values: float) -> None:
        self.event("+", stream, values)

    def delete(self, stream: str, *values: float) -> None:
        self.event("-", stream, values)
