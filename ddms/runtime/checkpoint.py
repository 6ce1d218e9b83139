"""Engine checkpoints: every map, index, range tree and pending-leaf state in one Arrow IPC file.

Why raw state and not a canonical form.  Results must continue bit for bit as if the run had
never stopped, floating-point sums included, and two things in the state fix a summation order
that a rebuild would change:

* a range tree's stored sums depend on its *shape* (which keys share a leaf, which leaves a
  parent), and its shape on the history of splits and merges: a tree rebuilt from its items
  would group (and so round) its range sums differently.  Pools are therefore saved as their raw
  node arrays (the rows in use, the free lists, the pending-leaf slots and their recorded paths),
  and restored into arrays of the same capacities;
* loops over a hash map or a secondary index add their terms in the map's iteration order,
  which for numba's typed ``Dict`` is insertion order of the live keys.  Maps are saved as their
  items in iteration order (indexes as their parts in order, each with its keys in order) and
  re-inserted in that order, which reproduces the iteration order exactly.

Session state is not saved: callback registrations (``watch``, ``gate``) and the change logs of
grouped views, which are empty at every line boundary outside a callback.

File format (version 2): an Arrow IPC file holding one record batch of one row; the state
arrays of one dtype are flattened (C order) and concatenated into one ``large_list`` column
named after the dtype (``<f8``, ``<i8``), and the schema metadata says where each array lies
(dtype, shape, offset), so a checkpoint opens with pyarrow (memory-mapped, no copy) and nothing
is pickled.  (Version 1 had a column per array: ~8 us of Python per array per checkpoint.)
The metadata (JSON under the key ``ddms``) names the format and its version, the program (a hash
of its canonical M3 text), the state layout (a hash of the generated code and of the storage
layouts it uses), the input position, the names of the symbols this process has seen (the state
holds their ids: a restored process prints their names before its reader meets them again) and
what the caller added (the reader's position).
Writes are atomic: a temporary file in the same directory, fsync, rename, fsync of the
directory, so a reader sees either the previous file or the complete new one, never a torn one.

Cost: O(state) both ways; the copies run in compiled code.  Measured by ``python -m bench --only
checkpoint`` (README, Performance).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ddms.errors import CheckpointError
from ddms.io.symbols import known_symbols, symbol_id
from ddms.m3.printer import print_program
from ddms.runtime.statecopy import dict_dump, dict_load, index_dump, index_load, pool_load, set_field
from ddms.storage import btree, extheap, hashtab

if TYPE_CHECKING:
    from ddms.runtime.engine import Engine

FORMAT = "ddms-checkpoint"
FORMAT_VERSION = 2
PAUSE_ENV = "DDMS_CHECKPOINT_PAUSE"
"""Test hook: seconds to sleep between writing a checkpoint's temporary file and renaming it,
so that a test can kill the process in the middle of a write."""

_SESSION_FIELDS = ("watch", "watching", "gate")
_POOL_FIELDS = [name for name, _ in btree._FIELDS]
_POOL_ARRAYS = ("ps", "ppn", "ppj", "pn", "pj", "xv", "dc", "dn", "qf", "qc", "qn")


# -- identity -------------------------------------------------------------------------------------
def program_digest(engine: Engine) -> str:
    """Hash of the program's canonical M3 text: which program a checkpoint belongs to."""
    return _digests(engine)[0]


def _digests(engine: Engine) -> tuple[str, str]:
    """(program, layout) digests, computed once per engine (the program text is printed and the
    storage sources read: about a millisecond)."""
    cached = getattr(engine, "_ckpt_digests", None)
    if cached is None:
        h = hashlib.sha256(engine.generated.source.encode())
        for mod in (btree, hashtab, extheap):
            h.update(Path(mod.__file__).read_bytes())
        cached = (hashlib.sha256(print_program(engine.program).encode()).hexdigest()[:20], h.hexdigest()[:20])
        engine._ckpt_digests = cached
    return cached


def layout_digest(engine: Engine) -> str:
    """Hash of the generated code and of the storage layouts it uses (not of where ddms is
    installed): checkpoints move between checkouts of the same code, never across a change that
    could lay out the state differently."""
    return _digests(engine)[1]


# -- state <-> arrays -----------------------------------------------------------------------------
def dump_state(engine: Engine, *, copy: bool = True) -> dict[str, np.ndarray]:
    """Every persistent state array of ``engine`` (names as in the generated module's fields,
    suffixed per part).  Call at a line boundary (between ``apply`` calls or inside a callback):
    deferred statements have then run.  With ``copy=False`` arrays of the state itself may be
    returned (views: valid until the next line is applied), for :func:`pack`, which copies
    them once.  O(state), in compiled code."""
    mod, st = engine.module, engine.state
    out: dict[str, np.ndarray] = {}
    keep = np.copy if copy else np.asarray
    for f in mod.FIELDS:
        if f in _SESSION_FIELDS or f.startswith(("log_", "xg_", "cut_")):   # (xg_: empty between batches;
            continue                                                        # cut_: see load_state)
        v = getattr(st, f)
        if f.startswith("op_"):
            pv = dict(zip(_POOL_FIELDS, btree._fields(v), strict=True))   # one compiled call, not one a field
            ints = np.array([pv[k] for k in ("lcap", "l_used", "l_head", "l_free", "icap", "i_used", "i_head",
                                             "i_free", "nc")], np.int64)
            lu, iu = int(pv["l_used"]), int(pv["i_used"])
            out |= {f"{f}.ints": ints, f"{f}.lf": keep(pv["lf"][:lu]), f"{f}.ln": keep(pv["ln"][:lu]),
                    f"{f}.llink": keep(pv["llink"][:lu]), f"{f}.ik": keep(pv["ik"][:iu]),
                    f"{f}.ii": keep(pv["ii"][:iu]), f"{f}.in_": keep(pv["in_"][:iu]),
                    f"{f}.ilink": keep(pv["ilink"][:iu])}
            out |= {f"{f}.{a}": keep(pv[a]) for a in _POOL_ARRAYS}
        elif f.startswith("ix_"):
            parts, counts, ks, vs = index_dump(v)
            out |= {f"{f}.parts": parts, f"{f}.counts": counts, f"{f}.keys": ks, f"{f}.vals": vs}
        elif isinstance(v, np.ndarray):
            out[f] = keep(v)
        else:   # a keyed map's typed Dict
            ks, vs = dict_dump(v)
            out |= {f"{f}.keys": ks, f"{f}.vals": vs}
    if engine._relations is not None:   # the base relations' rows, kept for ad-hoc queries
        ks, vs = dict_dump(engine._relations)
        out |= {"relations.keys": ks, "relations.vals": vs}
    return out


def pack(arrays: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, list]]:
    """The arrays as one flat buffer per dtype (their bytes concatenated: the one copy a
    checkpoint makes of the state) and where each lies: ``name -> [dtype, shape, offset]``.
    Why: an Arrow column per array cost ~8 us of Python each (26 arrays for VWAP: 0.2 ms a
    checkpoint, 5% of a run checkpointed every 100,000 lines); a column per dtype costs the same
    for any program.  O(state) memcpy."""
    groups: dict[str, list[np.ndarray]] = {}
    layout: dict[str, list] = {}
    sizes: dict[str, int] = {}
    for name, a in arrays.items():
        dt = a.dtype.str
        flat = a.reshape(-1)
        layout[name] = [dt, list(a.shape), sizes.get(dt, 0)]
        sizes[dt] = sizes.get(dt, 0) + flat.size
        groups.setdefault(dt, []).append(flat)
    return {dt: np.concatenate(parts) for dt, parts in groups.items()}, layout


def load_state(engine: Engine, arrays: dict[str, np.ndarray], source: str = "<checkpoint>") -> None:
    """Overwrite ``engine``'s state with ``arrays`` (from :func:`dump_state`).  The caller has
    checked the layout digest; a missing array still fails with a :class:`CheckpointError`.

    Every array is copied into the state, never taken as is: the engine writes its state in
    place, so an array of ``arrays`` kept as a state field (once, a table that grew: the prefix
    table of a per-slice tree's roots, a point map, an EXTREME map's window) was overwritten by the
    run that followed, and loading the same ``arrays`` again (``bench depth_sql`` loads one built
    book per run) paired that run's slice roots with the saved node pools: trees rooted at
    never-used nodes, whose updates indexed outside the node arrays (an IndexError in ``run_batch``
    under ``NUMBA_BOUNDSCHECK=1``; unchecked, the likely cause of a glibc "corrupted double-linked
    list" abort).  A file's arrays (:func:`read_file`) are read-only views of its buffer, too.
    Cost: one copy of each grown table, O(state) as the rest of the load."""
    mod, st = engine.module, engine.state

    def get(name: str) -> np.ndarray:
        try:
            return arrays[name]
        except KeyError:
            raise CheckpointError(f"{source}: corrupt checkpoint: no array {name!r}") from None

    for f in mod.FIELDS:
        if f in _SESSION_FIELDS or f.startswith("xg_"):   # (xg_: a window retired inside a batch, not dumped)
            continue
        v = getattr(st, f)
        if f.startswith("log_"):
            v.clear()
        elif f.startswith("cut_"):   # the cuts a guarded deferred group last saw (codegen.cutguard): not
            v[...] = np.nan          # dumped; NaN marks the group at the next event, which stores them again
        elif f.startswith("op_"):
            ints = get(f"{f}.ints")
            if int(ints[8]) != int(v.nc):
                raise CheckpointError(f"{source}: corrupt checkpoint: pool {f} has {ints[8]} columns, not {v.nc}")
            pool_load(v, get(f"{f}.lf"), get(f"{f}.ln"), get(f"{f}.llink"), get(f"{f}.ik"), get(f"{f}.ii"),
                       get(f"{f}.in_"), get(f"{f}.ilink"), ints, *(get(f"{f}.{a}") for a in _POOL_ARRAYS))
        elif f.startswith("ix_"):
            index_load(v, get(f"{f}.parts"), get(f"{f}.counts"), get(f"{f}.keys"), get(f"{f}.vals"))
        elif isinstance(v, np.ndarray):
            a = get(f)
            if a.shape == v.shape:
                v[...] = a
            else:   # a table that grew: a new array in its place, always a copy (see the docstring)
                set_field(st, f, np.array(a, dtype=v.dtype, order="C"))
        else:
            dict_load(v, get(f"{f}.keys"), get(f"{f}.vals"))
    engine._relations = None   # kept relations come back only if the checkpoint has them
    if "relations.keys" in arrays:
        from ddms.runtime.relations import new_relations, relations_apply
        engine._rel_apply = relations_apply
        engine._relations = new_relations(engine.program)
        dict_load(engine._relations, arrays["relations.keys"], arrays["relations.vals"])


# -- files ----------------------------------------------------------------------------------------
def encode(packed: tuple[dict[str, np.ndarray], dict[str, list]], meta: dict[str, Any]) -> pa.Table:
    """The one-row Arrow table of a checkpoint from :func:`pack`'s buffers: one ``large_list``
    column per dtype over its buffer (no copy), where each array lies with ``meta`` in the
    schema metadata.  O(dtypes)."""
    buffers, layout = packed
    cols = {}
    for dt, flat in buffers.items():
        values = pa.array(flat)
        cols[dt] = pa.LargeListArray.from_arrays(pa.array([0, len(values)], pa.int64()), values)
    info = {"format": FORMAT, "version": FORMAT_VERSION, **meta, "arrays": layout}
    return pa.table(cols).replace_schema_metadata({"ddms": json.dumps(info)})


def serialize(table: pa.Table) -> pa.Buffer:
    """The bytes of the Arrow IPC file of a table made by :func:`encode`, in memory (~10 us plus
    a memcpy of the state), so that a background thread can write them with system calls alone
    (which release the GIL)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue()


def write_temp(path: str | os.PathLike, data: pa.Table | pa.Buffer | bytes) -> Path:
    """Write a table made by :func:`encode` (or its :func:`serialize` bytes) to a temporary
    file beside ``path`` (not synced); :func:`commit` makes it ``path``.  Returns the temporary
    file.  Only system calls for bytes (a background thread does this)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    view = memoryview(serialize(data) if isinstance(data, pa.Table) else data)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return tmp


def commit(tmp: Path, path: str | os.PathLike) -> int:
    """fsync ``tmp``, rename it to ``path``, fsync the folder: from then on ``path`` is the
    complete checkpoint, and before it the previous file (or none) was.  Only system calls
    (they release the GIL), so it suits a background thread.  Returns the size in bytes."""
    path = Path(path)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    pause = os.environ.get(PAUSE_ENV)
    if pause:
        time.sleep(float(pause))
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return path.stat().st_size


def write_table(path: str | os.PathLike, table: pa.Table) -> int:
    """Write a table made by :func:`encode` to ``path`` atomically (:func:`write_temp`, then
    :func:`commit`).  Returns the size in bytes."""
    return commit(write_temp(path, table), path)


def write_file(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> int:
    """:func:`pack`, :func:`encode`, then :func:`write_table`.  Returns the size in bytes."""
    return write_table(path, encode(pack(arrays), meta))


def read_file(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and metadata of a checkpoint file, checked to be a ddms checkpoint of this
    format version (else :class:`CheckpointError` naming the file and what differs)."""
    path = Path(path)
    try:
        with pa.memory_map(str(path)) as src:
            table = pa.ipc.open_file(src).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise CheckpointError(f"{path}: not a readable checkpoint ({e})") from None
    raw = (table.schema.metadata or {}).get(b"ddms")
    try:
        info = json.loads(raw) if raw else {}
    except ValueError:
        info = {}
    if info.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a ddms checkpoint")
    if info.get("version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {info.get('version')}, this ddms reads "
                              f"version {FORMAT_VERSION}")
    arrays = {}
    try:
        flat = {dt: table.column(dt).combine_chunks().values.to_numpy(zero_copy_only=False).view(dt)
                for dt in {v[0] for v in info["arrays"].values()}}
        for name, (dtype, shape, offset) in info["arrays"].items():
            n = int(np.prod(shape, dtype=np.int64))
            if offset < 0 or offset + n > len(flat[dtype]):
                raise ValueError(f"array {name} lies outside its buffer")
            arrays[name] = flat[dtype][offset:offset + n].reshape(shape)
    except (KeyError, ValueError, TypeError, pa.ArrowException) as e:
        raise CheckpointError(f"{path}: corrupt checkpoint ({e})") from None
    return arrays, info


def capture(engine: Engine, extra: dict[str, Any] | None = None,
            extra_arrays: dict[str, np.ndarray] | None = None
            ) -> tuple[tuple[dict[str, np.ndarray], dict[str, list]], dict[str, Any]]:
    """A packed copy (:func:`pack`) of ``engine``'s state at its current line boundary and the
    checkpoint metadata: what :func:`encode` and :func:`write_table` write (possibly later,
    from another thread: the copy does not change).  ``extra``/``extra_arrays`` carry the
    caller's own state (a reader's position and tables) under ``extra.``-prefixed names.
    O(state): one memcpy of every array, in compiled code for maps.  Refuses an engine with
    state a checkpoint would lose (:attr:`Engine.unsaved <ddms.runtime.engine.Engine.unsaved>`:
    an attached strategy)."""
    if getattr(engine, "unsaved", None):
        raise CheckpointError(f"cannot checkpoint: {'; '.join(engine.unsaved)} would not be in the checkpoint "
                              "(a resumed run would lose it)")
    arrays = dump_state(engine, copy=False)
    for k, a in (extra_arrays or {}).items():
        arrays[f"extra.{k}"] = np.asarray(a)
    attached: dict[str, Any] = {}
    for name, saver in getattr(engine, "savers", {}).items():    # a strategy's state (Engine.savers)
        attached[name], own = saver()
        for k, a in own.items():
            arrays[f"attached.{name}.{k}"] = np.asarray(a)
    packed = pack(arrays)
    meta = {"program": program_digest(engine), "layout": layout_digest(engine), "position": engine.position,
            "symbols": sorted(known_symbols().values()), "extra": extra or {}, "attached": attached}
    return packed, meta


def save(engine: Engine, path: str | os.PathLike, extra: dict[str, Any] | None = None,
         extra_arrays: dict[str, np.ndarray] | None = None) -> int:
    """Checkpoint ``engine`` to ``path`` (:func:`capture`, :func:`encode`, :func:`write_table`)."""
    return write_table(path, encode(*capture(engine, extra, extra_arrays)))


def restore(engine: Engine, path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Load the checkpoint at ``path`` into ``engine`` after checking that it belongs to this
    program and state layout; returns the caller's ``extra`` metadata and arrays."""
    arrays, info = read_file(path)
    want, got = program_digest(engine), info.get("program")
    if got != want:
        raise CheckpointError(f"{path}: checkpoint of another program (its program hash {got}, "
                              f"this program's {want})")
    want, got = layout_digest(engine), info.get("layout")
    if got != want:
        raise CheckpointError(f"{path}: checkpoint written by another version of the code generator or "
                              f"storage (state layout {got}, this ddms's {want}); re-run from the start")
    load_state(engine, arrays, str(path))
    for name in info.get("symbols", ()):   # the names of the symbol ids in the state, for display
        symbol_id(name)
    engine.position = int(info["position"])
    engine.restored = {name: (m, {k[len(f"attached.{name}."):]: a for k, a in arrays.items()
                                  if k.startswith(f"attached.{name}.")})
                       for name, m in info.get("attached", {}).items()}
    extra = {k[len("extra."):]: a for k, a in arrays.items() if k.startswith("extra.")}
    return info.get("extra", {}), extra
