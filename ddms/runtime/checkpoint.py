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

File format: an Arrow IPC file holding one record batch of one row; each state array is one
``large_list`` column (the array flattened, C order; its dtype and shape in the schema
metadata), so a checkpoint opens with pyarrow (memory-mapped, no copy) and nothing is pickled.
The metadata (JSON under the key ``ddms``) names the format and its version, the program (a hash
of its canonical M3 text), the state layout (a hash of the generated code and of the storage
layouts it uses), the input position and what the caller added (the reader's position).
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
from numba import literally, njit, types
from numba.core.extending import overload
from numba.np.unsafe.ndarray import to_fixed_tuple
from numba.typed import Dict

from ddms.errors import CheckpointError
from ddms.m3.printer import print_program
from ddms.storage import btree, hashtab

if TYPE_CHECKING:
    from ddms.runtime.engine import Engine

FORMAT = "ddms-checkpoint"
FORMAT_VERSION = 1
PAUSE_ENV = "DDMS_CHECKPOINT_PAUSE"
"""Test hook: seconds to sleep between writing a checkpoint's temporary file and renaming it,
so that a test can kill the process in the middle of a write."""

_SESSION_FIELDS = ("watch", "watching", "gate")
_POOL_ARRAYS = ("ps", "ppn", "ppj", "pn", "pj", "xv", "dc", "dn", "qf", "qc", "qn")


# -- compiled copies ------------------------------------------------------------------------------
def _key_len(d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_key_len)
def _key_len_typed(d):
    n = d.key_type.count
    return lambda d: n


def _row_key(row, d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_row_key)
def _row_key_typed(row, d):
    n = d.key_type.count
    return lambda row, d: to_fixed_tuple(row, n)


def _empty_inner(d):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_empty_inner)
def _empty_inner_typed(d):
    kt, vt = d.value_type.key_type, d.value_type.value_type
    return lambda d: Dict.empty(kt, vt)


def _set(obj, name, value):  # pragma: no cover - typed by the overload
    raise NotImplementedError


@overload(_set)
def _set_typed(obj, name, value):
    if not isinstance(name, types.StringLiteral):
        return None
    ns: dict[str, Any] = {}
    exec(f"def impl(obj, name, value):\n    obj.{name.literal_value} = value\n", ns)  # noqa: S102
    return ns["impl"]


@njit(cache=True)
def set_field(obj, name, value):
    """``obj.<name> = value`` on a structref (generated state objects have getters only)."""
    _set(obj, literally(name), value)


@njit(cache=True)
def _dict_dump(d):
    """Keys (n x arity) and values of a typed Dict, in its iteration order."""
    n, a = len(d), _key_len(d)
    ks, vs = np.empty((n, a)), np.empty(n)
    i = 0
    for k, v in d.items():
        for j in range(a):
            ks[i, j] = k[j]
        vs[i] = v
        i += 1
    return ks, vs


@njit(cache=True)
def _dict_load(d, ks, vs):
    d.clear()
    for i in range(ks.shape[0]):
        d[_row_key(ks[i], d)] = vs[i]


@njit(cache=True)
def _index_dump(ix):
    """A secondary index (part -> dict of full keys): its parts in order, the size of each part's
    dict, and every part's keys and values concatenated in order."""
    p = len(ix)
    pa_ = _key_len(ix)
    parts, counts = np.empty((p, pa_)), np.empty(p, np.int64)
    n = 0
    for inner in ix.values():
        n += len(inner)
    ks, vs = np.empty((n, 0)), np.empty(n)
    i = 0
    e = 0
    for part, inner in ix.items():
        for j in range(pa_):
            parts[i, j] = part[j]
        counts[i] = len(inner)
        if e == 0 and ks.shape[1] == 0:
            ks = np.empty((n, _key_len(inner)))
        for k, v in inner.items():
            for j in range(len(k)):
                ks[e, j] = k[j]
            vs[e] = v
            e += 1
        i += 1
    return parts, counts, ks, vs


@njit(cache=True)
def _index_load(ix, parts, counts, ks, vs):
    ix.clear()
    e = 0
    for i in range(parts.shape[0]):
        inner = _empty_inner(ix)
        for _ in range(counts[i]):
            inner[_row_key(ks[e], inner)] = vs[e]
            e += 1
        ix[_row_key(parts[i], ix)] = inner


@njit(cache=True)
def _pool_load(p, lf, ln, llink, ik, ii, in_, ilink, ints, ps, ppn, ppj, pn, pj, xv, dc, dn, qf, qc, qn):
    """Give pool ``p`` the saved node rows in arrays of the saved capacities (rows past the ones
    ever used are never read before an allocation pads them), and the saved pending slots."""
    lcap, icap = ints[0], ints[4]
    p.lf = np.empty((lcap, lf.shape[1]), np.float64)
    p.lf[: lf.shape[0]] = lf
    p.ln = np.full(lcap, -1, np.int64)
    p.ln[: ln.shape[0]] = ln
    p.llink = np.full(lcap, -1, np.int64)
    p.llink[: llink.shape[0]] = llink
    p.ik = np.empty((icap, ik.shape[1]), np.float64)
    p.ik[: ik.shape[0]] = ik
    p.ii = np.empty((icap, ii.shape[1]), np.int64)
    p.ii[: ii.shape[0]] = ii
    p.in_ = np.full(icap, -1, np.int64)
    p.in_[: in_.shape[0]] = in_
    p.ilink = np.full(icap, -1, np.int64)
    p.ilink[: ilink.shape[0]] = ilink
    p.lcap, p.l_used, p.l_head, p.l_free = ints[0], ints[1], ints[2], ints[3]
    p.icap, p.i_used, p.i_head, p.i_free = ints[4], ints[5], ints[6], ints[7]
    p.ps[:] = ps
    p.ppn[:] = ppn
    p.ppj[:] = ppj
    p.pn[:] = pn
    p.pj[:] = pj
    p.xv[:] = xv
    p.dc[:] = dc
    p.dn[:] = dn
    p.qf[:] = qf
    p.qc[:] = qc
    p.qn[:] = qn


# -- identity -------------------------------------------------------------------------------------
def program_digest(engine: Engine) -> str:
    """Hash of the program's canonical M3 text: which program a checkpoint belongs to."""
    return hashlib.sha256(print_program(engine.program).encode()).hexdigest()[:20]


def layout_digest(engine: Engine) -> str:
    """Hash of the generated code and of the storage layouts it uses (not of where ddms is
    installed): checkpoints move between checkouts of the same code, never across a change that
    could lay out the state differently."""
    h = hashlib.sha256(engine.generated.source.encode())
    for mod in (btree, hashtab):
        h.update(Path(mod.__file__).read_bytes())
    return h.hexdigest()[:20]


# -- state <-> arrays -----------------------------------------------------------------------------
def dump_state(engine: Engine) -> dict[str, np.ndarray]:
    """Copies of every persistent state array of ``engine`` (names as in the generated module's
    fields, suffixed per part).  Call at a line boundary (between ``apply`` calls or inside a
    callback): deferred statements have then run.  O(state), in compiled code."""
    mod, st = engine.module, engine.state
    out: dict[str, np.ndarray] = {}
    for f in mod.FIELDS:
        if f in _SESSION_FIELDS or f.startswith("log_"):
            continue
        v = getattr(st, f)
        if f.startswith("op_"):
            ints = np.array([v.lcap, v.l_used, v.l_head, v.l_free, v.icap, v.i_used, v.i_head, v.i_free, v.nc],
                            np.int64)
            lu, iu = int(v.l_used), int(v.i_used)
            out |= {f"{f}.ints": ints, f"{f}.lf": v.lf[:lu].copy(), f"{f}.ln": v.ln[:lu].copy(),
                    f"{f}.llink": v.llink[:lu].copy(), f"{f}.ik": v.ik[:iu].copy(), f"{f}.ii": v.ii[:iu].copy(),
                    f"{f}.in_": v.in_[:iu].copy(), f"{f}.ilink": v.ilink[:iu].copy()}
            out |= {f"{f}.{a}": getattr(v, a).copy() for a in _POOL_ARRAYS}
        elif f.startswith("ix_"):
            parts, counts, ks, vs = _index_dump(v)
            out |= {f"{f}.parts": parts, f"{f}.counts": counts, f"{f}.keys": ks, f"{f}.vals": vs}
        elif isinstance(v, np.ndarray):
            out[f] = v.copy()
        else:   # a keyed map's typed Dict
            ks, vs = _dict_dump(v)
            out |= {f"{f}.keys": ks, f"{f}.vals": vs}
    return out


def load_state(engine: Engine, arrays: dict[str, np.ndarray], source: str = "<checkpoint>") -> None:
    """Overwrite ``engine``'s state with ``arrays`` (from :func:`dump_state`).  The caller has
    checked the layout digest; a missing array still fails with a :class:`CheckpointError`."""
    mod, st = engine.module, engine.state

    def get(name: str) -> np.ndarray:
        try:
            return arrays[name]
        except KeyError:
            raise CheckpointError(f"{source}: corrupt checkpoint: no array {name!r}") from None

    for f in mod.FIELDS:
        if f in _SESSION_FIELDS:
            continue
        v = getattr(st, f)
        if f.startswith("log_"):
            v.clear()
        elif f.startswith("op_"):
            ints = get(f"{f}.ints")
            if int(ints[8]) != int(v.nc):
                raise CheckpointError(f"{source}: corrupt checkpoint: pool {f} has {ints[8]} columns, not {v.nc}")
            _pool_load(v, get(f"{f}.lf"), get(f"{f}.ln"), get(f"{f}.llink"), get(f"{f}.ik"), get(f"{f}.ii"),
                       get(f"{f}.in_"), get(f"{f}.ilink"), ints, *(get(f"{f}.{a}") for a in _POOL_ARRAYS))
        elif f.startswith("ix_"):
            _index_load(v, get(f"{f}.parts"), get(f"{f}.counts"), get(f"{f}.keys"), get(f"{f}.vals"))
        elif isinstance(v, np.ndarray):
            a = get(f)
            if a.shape == v.shape:
                v[...] = a
            else:   # a prefix table that grew: a new array in its place
                set_field(st, f, np.ascontiguousarray(a, dtype=v.dtype))
        else:
            _dict_load(v, get(f"{f}.keys"), get(f"{f}.vals"))


# -- files ----------------------------------------------------------------------------------------
def write_file(path: str | os.PathLike, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> int:
    """Write ``arrays`` and ``meta`` to ``path`` atomically (temporary file in the same folder,
    fsync, rename, fsync of the folder).  Returns the size in bytes."""
    path = Path(path)
    shapes = {k: [str(a.dtype), list(a.shape)] for k, a in arrays.items()}
    cols = {k: pa.array([np.ascontiguousarray(a).reshape(-1)], type=pa.large_list(pa.from_numpy_dtype(a.dtype)))
            for k, a in arrays.items()}
    info = {"format": FORMAT, "version": FORMAT_VERSION, **meta, "arrays": shapes}
    table = pa.table(cols).replace_schema_metadata({"ddms": json.dumps(info)})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        with pa.ipc.new_file(f, table.schema) as w:
            w.write_table(table)
        f.flush()
        os.fsync(f.fileno())
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
    for name, (dtype, shape) in info["arrays"].items():
        col = table.column(name).combine_chunks()
        arrays[name] = col.values.to_numpy(zero_copy_only=False).astype(dtype, copy=False).reshape(shape)
    return arrays, info


def capture(engine: Engine, extra: dict[str, Any] | None = None,
            extra_arrays: dict[str, np.ndarray] | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Copies of ``engine``'s state at its current line boundary and the checkpoint metadata:
    what :func:`write_file` writes (possibly later, from another thread: the copies do not
    change).  ``extra``/``extra_arrays`` carry the caller's own state (a reader's position and
    tables) under ``extra.``-prefixed names."""
    arrays = dump_state(engine)
    for k, a in (extra_arrays or {}).items():
        arrays[f"extra.{k}"] = np.array(a, copy=True)
    meta = {"program": program_digest(engine), "layout": layout_digest(engine), "position": engine.position,
            "extra": extra or {}}
    return arrays, meta


def save(engine: Engine, path: str | os.PathLike, extra: dict[str, Any] | None = None,
         extra_arrays: dict[str, np.ndarray] | None = None) -> int:
    """Checkpoint ``engine`` to ``path`` (:func:`capture`, then :func:`write_file`)."""
    return write_file(path, *capture(engine, extra, extra_arrays))


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
    engine.position = int(info["position"])
    extra = {k[len("extra."):]: a for k, a in arrays.items() if k.startswith("extra.")}
    return info.get("extra", {}), extra
