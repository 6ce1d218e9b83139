"""Columnar event files: any source written once to Parquet, replayed many times fast.

Why: a sweep replays each partition once per parameter set.  Parsing text (LOBSTER, the order
book CSV) or JSON captures (Binance: decoding dominates, ~0.3M events/s) is then paid again and
again; reading the already-derived ``bids``/``asks`` events back from Parquet is a decompress
and a copy.

File layout (one row per event, in replay order)::

    rel int8 (0 bids, 1 asks) | sign int8 (+1/-1) | t, id, broker_id, volume, price float64
    | line int64 | traded float64 (only for LOBSTER sources: the volume a delete traded)
    | symbol string (only for sources read with their symbol column: the instrument's name)

Row groups end on input-line boundaries (all events of one line are in one group, so a group
is one atomic :class:`~ddms.io.events.EventBatch`).  The footer's key-value metadata holds
``ddms.format`` (:data:`FORMAT`), the source's ``kind``, ``name`` and ``path``, the relations,
the total ``events``/``first_line``/``last_line``/``skipped``, and ``ddms.spans``: per row group the
``[first_line, last_line]`` span of input lines it covers (lines without events included), so
the replayed batches advance an engine's position exactly as the original reader did.  A file
with a ``symbol`` column lists its symbols in ``ddms.symbols`` (JSON, in order of appearance);
reading it back gives the symbol ids (:func:`~ddms.io.symbols.symbol_id` of the names) as the
sixth column when asked (``symbols=True``), and refuses to mix the books of several symbols into
five columns otherwise.

Writing goes to a temporary file renamed into place at the end: a failing source (a bad line in
strict mode) leaves no partial output.  Reading validates the metadata, the schema and, per
row group, the values (relations, signs, line order): a file that is not ours or is damaged
raises :class:`~ddms.errors.ReplayError` naming it.  Arrow hands out read-only arrays; the
reader copies them into ordinary writable numpy arrays (one pass, ~10 bytes per event besides
the ``(n, 5)`` column block it has to assemble anyway), so compiled consumers see exactly the
array types the text readers produce and numba compiles no second signature.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ddms.errors import ReplayError
from ddms.io.events import EventBatch
from ddms.io.schema import COLUMNS
from ddms.io.symbols import symbol_id, symbol_name

__all__ = ["FORMAT", "ParquetInfo", "convert", "parquet_info", "read_parquet", "write_parquet"]

FORMAT = "ddms-events/1"
_KEY = "ddms."
_BASE_FIELDS = [pa.field("rel", pa.int8(), nullable=False), pa.field("sign", pa.int8(), nullable=False)] + [
    pa.field(c, pa.float64(), nullable=False) for c in COLUMNS] + [pa.field("line", pa.int64(), nullable=False)]
_TRADED = pa.field("traded", pa.float64(), nullable=False)
_SYMBOL = pa.field("symbol", pa.string(), nullable=False)


@dataclass(frozen=True)
class ParquetInfo:
    """What a columnar event file's footer says: its source (``kind``, ``name``, ``path``),
    ``relations``, totals, the row groups' line ``spans`` and whether it carries ``traded``."""

    path: str
    kind: str
    name: str
    source: str
    relations: tuple[str, ...]
    events: int
    first_line: int
    last_line: int
    skipped: int
    spans: tuple[tuple[int, int], ...]
    traded: bool
    symbols: tuple[str, ...] | None = None   # the symbol column's names (None: no column)


class _Writer:
    """Accumulates batches and writes row groups of about ``group_events`` events, cut only
    between batches (readers never split an input line across batches)."""

    def __init__(self, path: str, traded: bool, compression: str, symbols: bool = False) -> None:
        self.schema = pa.schema(_BASE_FIELDS + ([_TRADED] if traded else []) + ([_SYMBOL] if symbols else []))
        self.traded = traded
        self.symbols: dict[str, None] | None = {} if symbols else None   # names, in order of appearance
        self.pw = pq.ParquetWriter(path, self.schema, compression=compression)
        self.parts: list[EventBatch] = []
        self.n = 0
        self.spans: list[tuple[int, int]] = []
        self.events = 0

    def add(self, b: EventBatch) -> None:
        self.parts.append(b)
        self.n += len(b)

    def flush(self) -> None:
        if not self.parts:
            return
        parts, self.parts, n, self.n = self.parts, [], self.n, 0
        cols = np.concatenate([p.cols for p in parts]) if len(parts) > 1 else parts[0].cols
        arrays = [pa.array(np.concatenate([p.rel for p in parts]).astype(np.int8, copy=False)),
                  pa.array(np.concatenate([p.sign for p in parts]).astype(np.int8, copy=False))]
        arrays += [pa.array(np.ascontiguousarray(cols[:, j], dtype=np.float64)) for j in range(5)]
        arrays.append(pa.array(np.concatenate([p.line for p in parts]).astype(np.int64, copy=False)))
        if self.traded:
            arrays.append(pa.array(np.concatenate([_traded_of(p) for p in parts])))
        if self.symbols is not None:
            ids, first, inverse = np.unique(cols[:, 5], return_index=True, return_inverse=True)
            names = [symbol_name(float(x)) for x in ids]
            for x, nm in zip(ids, names, strict=True):
                if nm.startswith("#"):
                    raise ReplayError(f"symbol id {x!r} has no name: a symbol column needs instrument names")
            self.symbols.update(dict.fromkeys(names[i] for i in np.argsort(first, kind="stable")))
            arrays.append(pa.DictionaryArray.from_arrays(pa.array(inverse.astype(np.int32)),
                                                         pa.array(names, pa.string())).dictionary_decode())
        self.pw.write_table(pa.Table.from_arrays(arrays, schema=self.schema), row_group_size=max(n, 1))
        self.spans.append((parts[0].first_line, parts[-1].last_line))
        self.events += n


def _traded_of(b: EventBatch) -> np.ndarray:
    tr = getattr(b, "traded", None)
    return np.zeros(len(b)) if tr is None else np.asarray(tr, np.float64)


def write_parquet(batches: Iterable[EventBatch], out: str | os.PathLike, *, kind: str, name: str,
                  source: str = "", relations: tuple[str, ...] = ("bids", "asks"), traded: bool | None = None,
                  group_events: int = 1 << 18, compression: str = "snappy") -> ParquetInfo:
    """Write ``batches`` to ``out`` (see the module docstring for the layout).  ``traded``
    (default: whether the first batch has a ``traded`` array) adds the LOBSTER traded column.
    A batch carrying an ``error`` aborts the write (the error is raised, no file is left).
    Cost: one copy of the events into Arrow arrays plus compression; memory ~ ``group_events``."""
    out = os.fspath(out)
    if group_events < 1:
        raise ValueError("group_events must be >= 1")
    tmp = f"{out}.tmp-{os.getpid()}"
    w: _Writer | None = None
    first_line, last_line, skipped = 1, 0, 0
    try:
        for b in batches:
            if b.error is not None:
                raise b.error
            if w is None:
                w = _Writer(tmp, getattr(b, "traded", None) is not None if traded is None else traded, compression,
                            symbols=b.cols.ndim == 2 and b.cols.shape[1] == 6)
                first_line = b.first_line
            width = 5 if w.symbols is None else 6
            if b.rel.shape[0] != b.cols.shape[0] or b.cols.ndim != 2 or b.cols.shape[1] != width:
                shape = "(t, id, broker_id, volume, price" + (", symbol)" if width == 6 else ")")
                raise ReplayError(f"batch of lines {b.first_line}..{b.last_line} does not have the {shape} shape "
                                  "of the first batch (sources with and without a symbol column do not mix)",
                                  source or out)
            last_line = max(last_line, b.last_line)
            skipped += b.skipped
            w.add(b)
            if w.n >= group_events:
                w.flush()
        if w is None:
            w = _Writer(tmp, bool(traded), compression)
        w.flush()
        if not w.spans:   # a source without events: still record its lines
            w.spans.append((first_line, last_line))
        # the flush spans start where the previous ended: lines without events belong to the next group
        spans, prev = [], first_line - 1
        for _, hi in w.spans:
            spans.append((prev + 1, hi))
            prev = hi
        meta = {"format": FORMAT, "kind": kind, "name": name, "source": source, "relations": ",".join(relations),
                "events": str(w.events), "first_line": str(first_line), "last_line": str(last_line),
                "skipped": str(skipped), "spans": json.dumps(spans)}
        if w.symbols is not None:
            meta["symbols"] = json.dumps(list(w.symbols))
        w.pw.add_key_value_metadata({_KEY + k: v for k, v in meta.items()})
        w.pw.close()
        os.replace(tmp, out)
    except BaseException:
        if w is not None:
            try:
                w.pw.close()
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return parquet_info(out)


def convert(sources: Iterable, out: str | os.PathLike, *, notes: list[str] | None = None, merge: bool = False,
            **kw) -> ParquetInfo:
    """Write one :class:`~ddms.io.sources.Source` (or several, concatenated in order with their
    lines renumbered consecutively, or with ``merge`` merged by receive time:
    :mod:`ddms.io.merge`) to ``out``.  ``notes`` collects the sources' warnings about
    data lost without an error (see :meth:`~ddms.io.sources.Source.batches`).  Other keyword
    arguments go to :func:`write_parquet`."""
    srcs = list(sources) if not hasattr(sources, "batches") else [sources]
    if not srcs:
        raise ReplayError("nothing to convert", os.fspath(out))
    kinds = sorted({s.kind for s in srcs})
    kw.setdefault("kind", kinds[0] if len(kinds) == 1 else "+".join(kinds))
    kw.setdefault("name", srcs[0].name if len(srcs) == 1 else "+".join(s.name for s in srcs))
    kw.setdefault("source", os.pathsep.join(s.path for s in srcs))
    if len(srcs) > 1 and "traded" not in kw:
        kw["traded"] = any(s.kind == "lobster" or (s.kind == "parquet" and parquet_info(s.path).traded) for s in srcs)
    if merge and len(srcs) > 1:
        from ddms.io.merge import TimedInput, merge_by_receive_time
        width = 6 if all(s.symbols for s in srcs) else 5
        batches = merge_by_receive_time([TimedInput(s.batches(notes), s.path) for s in srcs], width=width)
        return write_parquet(batches, out, **kw)
    return write_parquet(_chain(srcs, notes), out, **kw)


def _chain(srcs: list, notes: list[str] | None = None) -> Iterator[EventBatch]:
    """Batches of several sources one after the other; lines of later sources are shifted past
    the earlier ones, so every line stays one atomic update and numbers keep increasing."""
    offset = 0
    for s in srcs:
        last = 0
        for b in s.batches(notes):
            if offset:
                b = type(b)(**{**b.__dict__, "line": b.line + offset, "first_line": b.first_line + offset,
                               "last_line": b.last_line + offset})
            last = b.last_line
            yield b
        offset = max(offset, last)


def _one_line(e: BaseException) -> str:
    """pyarrow's message on one line (its thrift errors span several: an error line stays one line)."""
    return " ".join(str(e).split())


def _open(path: str) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except FileNotFoundError:
        raise ReplayError("no such file", path) from None
    except (pa.ArrowException, OSError) as e:
        raise ReplayError(f"not a readable Parquet file ({_one_line(e)})", path) from None


def _info(path: str, pf: pq.ParquetFile) -> ParquetInfo:
    raw = pf.metadata.metadata or {}
    meta = {k.decode()[len(_KEY):]: v.decode() for k, v in raw.items() if k.startswith(_KEY.encode())}
    if meta.get("format") != FORMAT:
        found = meta.get("format")
        raise ReplayError(f"a Parquet file, but not a ddms event file (format {found!r}, want {FORMAT!r}; "
                          "write one with `ddms convert`)", path)
    names = pf.schema_arrow.names
    want = [f.name for f in _BASE_FIELDS]
    with_symbol = names[-1:] == ["symbol"]
    traded = names[:len(names) - with_symbol] == want + ["traded"]
    if names[:len(names) - with_symbol] != want and not traded:
        raise ReplayError(f"unexpected columns {names} (want {want} [+ traded] [+ symbol])", path)
    for f in _BASE_FIELDS + ([_TRADED] if traded else []) + ([_SYMBOL] if with_symbol else []):
        got = pf.schema_arrow.field(f.name).type
        if got != f.type:
            raise ReplayError(f"column {f.name!r} has type {got}, want {f.type}", path)
    try:
        spans = tuple((int(a), int(b)) for a, b in json.loads(meta["spans"]))
        info = ParquetInfo(path, meta["kind"], meta["name"], meta.get("source", ""),
                           tuple(meta["relations"].split(",")), int(meta["events"]), int(meta["first_line"]),
                           int(meta["last_line"]), int(meta["skipped"]), spans, traded,
                           tuple(str(x) for x in json.loads(meta["symbols"])) if with_symbol else None)
    except (KeyError, ValueError, TypeError) as e:
        raise ReplayError(f"damaged ddms metadata ({type(e).__name__}: {e})", path) from None
    n_groups = pf.metadata.num_row_groups
    if n_groups != len(spans) and not (n_groups == 0 and len(spans) == 1):
        raise ReplayError(f"{n_groups} row groups but {len(spans)} line spans in the metadata", path)
    if pf.metadata.num_rows != info.events:
        raise ReplayError(f"{pf.metadata.num_rows} rows but the metadata says {info.events} events", path)
    return info


def parquet_info(path: str | os.PathLike) -> ParquetInfo:
    """Read and validate the footer of a columnar event file (no data pages).  Raises
    :class:`ReplayError` for anything that is not a ddms event file."""
    p = os.fspath(path)
    return _info(p, _open(p))


def read_parquet(path: str | os.PathLike, *, symbols: bool = False) -> Iterator[EventBatch]:
    """Replay a columnar event file: one batch per row group (a
    :class:`~ddms.io.lobster.LobsterBatch` when the file has ``traded``), with the original line
    numbers and line spans.  ``symbols``: with the symbol ids as a sixth column (the file must
    have a symbol column); without, a file holding several symbols is refused (their books
    would mix).  Raises :class:`ReplayError` naming the file and row group for damaged data.
    Cost: decompression plus one copy of the columns (no parsing)."""
    p = os.fspath(path)
    pf = _open(p)
    info = _info(p, pf)
    if symbols and info.symbols is None:
        raise ReplayError("has no symbol column (convert a multi-symbol source to keep one)", p)
    if not symbols and info.symbols is not None and len(info.symbols) > 1:
        raise ReplayError(f"holds the books of {len(info.symbols)} symbols ({', '.join(info.symbols[:5])}"
                          f"{', ...' if len(info.symbols) > 5 else ''}): read it with its symbol column (a "
                          "program whose streams declare `symbol VARCHAR`) or choose one as FILE#SYMBOL", p)
    if info.traded:
        from ddms.io.lobster import LobsterBatch
    names = [f.name for f in _BASE_FIELDS] + (["traded"] if info.traded else []) + (["symbol"] if symbols else [])
    last = len(info.spans) - 1
    prev_line = info.first_line - 1
    for g, (lo, hi) in enumerate(info.spans):
        if pf.metadata.num_row_groups == 0:   # a source without events: only its line span
            yield EventBatch(np.zeros(0, np.int8), np.zeros(0, np.int8), np.zeros((0, 5)), np.zeros(0, np.int64),
                             lo, hi, info.skipped)
            break
        try:
            tbl = pf.read_row_group(g, columns=names)
        except (pa.ArrowException, OSError) as e:
            raise ReplayError(f"row group {g}: damaged data ({_one_line(e)})", p) from None
        n = tbl.num_rows
        rel = _column(tbl, "rel", np.int8, p)
        sign = _column(tbl, "sign", np.int8, p)
        line = _column(tbl, "line", np.int64, p)
        cols = np.empty((n, 6 if symbols else 5), np.float64)
        for j, c in enumerate(COLUMNS):
            col = tbl.column(c)
            if col.null_count:
                raise ReplayError(f"row group {g}: column {c!r} has nulls", p)
            cols[:, j] = col.to_numpy()
        if symbols:
            col = tbl.column("symbol")
            if col.null_count:
                raise ReplayError(f"row group {g}: column 'symbol' has nulls", p)
            enc = col.combine_chunks().dictionary_encode()
            try:
                ids = np.array([symbol_id(x) for x in enc.dictionary.to_pylist()] + [0], np.float64)
            except ValueError as e:
                raise ReplayError(f"row group {g}: bad symbol ({e})", p) from None
            cols[:, 5] = ids[np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)] if n else 0.0
        where = f"row group {g}"
        if n:
            if (rel.view(np.uint8) > 1).any():
                raise ReplayError(f"{where}: a rel value other than 0 (bids) and 1 (asks)", p)
            if ((sign != 1) & (sign != -1)).any():
                raise ReplayError(f"{where}: a sign other than +1 and -1", p)
            if line[0] < lo or line[-1] > hi or line[0] <= prev_line or (n > 1 and (np.diff(line) < 0).any()):
                raise ReplayError(f"{where}: line numbers out of order or outside the span {lo}..{hi}", p)
            prev_line = int(line[-1])
        if info.traded:
            yield LobsterBatch(rel, sign, cols, line, lo, hi, info.skipped if g == last else 0, None,
                               traded=_column(tbl, "traded", np.float64, p))
        else:
            yield EventBatch(rel, sign, cols, line, lo, hi, info.skipped if g == last else 0)


def _column(tbl: pa.Table, name: str, dtype, path: str) -> np.ndarray:
    col = tbl.column(name)
    if col.null_count:
        raise ReplayError(f"column {name!r} has nulls", path)
    return np.array(col.to_numpy(), dtype=dtype, copy=True)
