"""Sans-I/O reader of DBToaster's ``LINE DELIMITED CSV`` streams: bytes in, event batches out.

``CREATE STREAM R(a int, b float) FROM FILE 'r.csv' LINE DELIMITED CSV (delimiter := '|')``
declares a stream whose file holds one tuple per line, fields in column order.  Options:

* ``delimiter`` (default ``,``; DBToaster spells it ``fields``): one character.
* ``deletions := 'true'``: every line starts with an extra field, the event kind: ``1`` or ``+``
  inserts the tuple, ``0``, ``-1`` or ``-`` deletes it (DBToaster's convention for streams with
  deletions).  Without it every line is an insert.

Columns are numbers, checked as the order-book adaptor checks its fields: a float column holds a
decimal number (``[+-]digits[.digits][e[+-]digits]``: no ``nan``/``inf``) that does not overflow
float64 ("out of range"), an ``int`` column an integer with ``|value| <= 2**53`` (what float64, the
engine's number type, carries exactly).  Empty lines are skipped but counted, so
line numbers in errors and ``EventBatch.line`` are the file's.  Fields are parsed by pyarrow's CSV
reader (one call per chunk, ~100-300 ns per field); only a chunk that pyarrow rejects is re-read
line by line in Python to name the first bad line and its reason (or, with ``skip_bad``, to drop
and count bad lines).
"""

from __future__ import annotations

import io
import math
import re

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ddms.errors import DdmsError, InputError, ProgramError
from ddms.io.events import EventBatch
from ddms.m3.ir import Stream

_INT_TYPES = {"int", "integer", "long", "bigint", "smallint", "tinyint"}
_FLOAT_TYPES = {"float", "double", "real", "decimal", "numeric"}
_INSERT = {"1", "+", "+1"}
_DELETE = {"0", "-", "-1"}
_MAX_INT = 2**53                     # the largest integer float64 carries exactly (as the order-book ids)
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")


def _column_kind(stream: Stream, typ: str, name: str) -> str:
    t = typ.lower().split("(")[0].strip()
    if t in _INT_TYPES:
        return "int"
    if t in _FLOAT_TYPES:
        return "float"
    raise ProgramError(f"stream {stream.name}: column {name} has type {typ!r}; the csv adaptor reads "
                       f"numbers only (int, float, double, decimal)")


class CsvParser:
    """Incremental CSV stream parser: ``feed(bytes) -> EventBatch``, then ``close()``.

    Every event has relation 0 (one parser per stream file).  State: the trailing partial line and
    the line counter.  ``feed`` costs O(len(data)).  In strict mode the first bad line stops the
    parser: the batch holds the events before it and carries the :class:`InputError`."""

    def __init__(self, stream: Stream, *, source: str = "<input>", skip_bad: bool = False,
                 delimiter: str = ",", deletions: bool = False) -> None:
        if len(delimiter) != 1 or delimiter in "\r\n\"":
            raise ProgramError(f"stream {stream.name}: csv delimiter must be one character other than "
                               f"a quote or newline, got {delimiter!r}")
        self.stream = stream
        self.source = source
        self.skip_bad = skip_bad
        self.delimiter = delimiter
        self.deletions = deletions
        self.kinds = [_column_kind(stream, c.type, c.name) for c in stream.columns]
        self.arity = len(self.kinds)
        self.lines_consumed = 0
        self.bad_lines = 0
        self.bad_samples: list[InputError] = []
        self._partial = b""
        self._error: InputError | None = None
        names = (["_kind"] if deletions else []) + [f"c{i}" for i in range(self.arity)]
        types = {f"c{i}": (pa.int64() if k == "int" else pa.float64()) for i, k in enumerate(self.kinds)}
        if deletions:
            types["_kind"] = pa.string()
        self._read = pacsv.ReadOptions(column_names=names, block_size=1 << 26)
        self._parse = pacsv.ParseOptions(delimiter=delimiter, quote_char=False)
        self._convert = pacsv.ConvertOptions(column_types=types, strings_can_be_null=False)

    @classmethod
    def for_stream(cls, stream: Stream, *, source: str, skip_bad: bool = False) -> CsvParser:
        """A parser configured by the stream's ``LINE DELIMITED CSV (...)`` options."""
        opts = stream.source.options if stream.source is not None else ()
        known = {"delimiter", "fields", "deletions"}   # fields: DBToaster's name for the delimiter
        for k, _ in opts:
            if k.lower() not in known:
                raise ProgramError(f"stream {stream.name}: unknown csv option {k!r} "
                                   f"(known: {', '.join(sorted(known))})")
        o = {k.lower(): v for k, v in opts}
        deletions = o.get("deletions", "false").lower()
        if deletions not in {"true", "false"}:
            raise ProgramError(f"stream {stream.name}: deletions := must be 'true' or 'false', got {deletions!r}")
        if "delimiter" in o and "fields" in o and o["delimiter"] != o["fields"]:
            raise ProgramError(f"stream {stream.name}: delimiter := and fields := disagree")
        return cls(stream, source=source, skip_bad=skip_bad, delimiter=o.get("delimiter", o.get("fields", ",")),
                   deletions=deletions == "true")

    @property
    def error(self) -> InputError | None:
        return self._error

    @property
    def pending(self) -> int:
        """Bytes of the remembered partial line."""
        return len(self._partial)

    # -- checkpoints ----------------------------------------------------------------------------
    def save_state(self) -> tuple[dict[str, int], dict[str, np.ndarray]]:
        """Counters after the last complete line (the parser keeps nothing else across lines but
        a pending partial line, which the caller reads again)."""
        if self._error is not None:
            raise DdmsError(f"{self.source}: parser state saved after an error")
        return {"lines_consumed": self.lines_consumed, "bad_lines": self.bad_lines}, {}

    def load_state(self, counters: dict[str, int], arrays: dict[str, np.ndarray]) -> None:
        self.lines_consumed, self.bad_lines = int(counters["lines_consumed"]), int(counters["bad_lines"])

    # -- feeding --------------------------------------------------------------------------------
    def feed(self, data: bytes) -> EventBatch:
        """Parse the complete lines of ``self._partial + data``; keep the rest for later."""
        if self._error is not None:
            raise self._error
        buf = self._partial + bytes(data)
        cut = buf.rfind(b"\n") + 1
        self._partial = buf[cut:]
        return self._lines(buf[:cut])

    def close(self) -> EventBatch:
        """Parse the last line (which needs no newline)."""
        if self._error is not None:
            raise self._error
        rest, self._partial = self._partial, b""
        return self._lines(rest + b"\n" if rest else b"")

    def _lines(self, block: bytes) -> EventBatch:
        first = self.lines_consumed + 1
        arr = np.frombuffer(block, np.uint8)
        ends = np.flatnonzero(arr == 10)
        n_lines = len(ends)
        if not n_lines:
            return EventBatch.empty(self.arity, self.lines_consumed)
        starts = np.concatenate(([0], ends[:-1] + 1))
        length = ends - starts
        cr = length > 0
        cr[cr] = arr[ends[cr] - 1] == 13
        nonempty = (length - cr) > 0
        line_no = first + np.flatnonzero(nonempty)
        try:
            sign, cols = self._fast(block, len(line_no))
            skipped, error = 0, None
        except (pa.ArrowInvalid, _Bad):
            sign, cols, line_no, skipped, error = self._slow(block, first)
        if error is not None:
            self._error = error
            n_lines = error.line - first  # the lines before the bad one were consumed
        self.lines_consumed = first - 1 + n_lines
        self.bad_lines += skipped
        return EventBatch(np.zeros(len(sign), np.int8), sign, cols, np.asarray(line_no, np.int64),
                          first, first - 1 + n_lines, skipped, error)

    def _fast(self, block: bytes, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """pyarrow parses the whole block; any problem raises and the slow path locates it."""
        if rows == 0:
            return np.zeros(0, np.int8), np.zeros((0, self.arity))
        table = pacsv.read_csv(io.BytesIO(block), self._read, self._parse, self._convert)
        if table.num_rows != rows:
            raise _Bad("row count")
        cols = np.empty((rows, self.arity), np.float64)
        for i, kind in enumerate(self.kinds):
            c = table.column(f"c{i}")
            if c.null_count:
                raise _Bad("empty field")
            values = c.to_numpy()
            # pyarrow reads nan/inf and overflows to inf, and int64 beyond 2**53 (inexact as a
            # float): the slow path names the line and the reason
            if kind == "int" and ((values > _MAX_INT) | (values < -_MAX_INT)).any():
                raise _Bad("int out of range")
            if kind == "float" and not np.isfinite(values).all():
                raise _Bad("not finite")
            cols[:, i] = values
        if not self.deletions:
            return np.ones(rows, np.int8), cols
        kind = table.column("_kind").to_numpy(zero_copy_only=False)
        sign = np.where(np.isin(kind, list(_INSERT)), 1, np.where(np.isin(kind, list(_DELETE)), -1, 0)).astype(np.int8)
        if (sign == 0).any():
            raise _Bad("event kind")
        return sign, cols

    def _slow(self, block: bytes, first: int):
        """Line by line: the reference semantics, used only for blocks pyarrow rejects."""
        signs, rows, lines, skipped = [], [], [], 0
        for k, raw in enumerate(block.split(b"\n")[:-1]):
            text = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not text:
                continue
            try:
                s, vals = self._parse_line(text)
            except _Bad as e:
                err = InputError(str(e), self.source, first + k, text)
                if not self.skip_bad:
                    return self._pack(signs, rows, lines) + (skipped, err)
                skipped += 1
                if len(self.bad_samples) < 20:
                    self.bad_samples.append(err)
                continue
            signs.append(s)
            rows.append(vals)
            lines.append(first + k)
        return self._pack(signs, rows, lines) + (skipped, None)

    def _pack(self, signs, rows, lines):
        cols = np.array(rows, np.float64).reshape(len(rows), self.arity)
        return np.array(signs, np.int8), cols, np.array(lines, np.int64)

    def _parse_line(self, text: str) -> tuple[int, list[float]]:
        fields = text.split(self.delimiter)
        sign = 1
        if self.deletions:
            kind = fields.pop(0).strip() if fields else ""
            if kind in _INSERT:
                sign = 1
            elif kind in _DELETE:
                sign = -1
            else:
                raise _Bad(f"event kind must be 1/+ (insert) or 0/-1/- (delete), got {kind!r}")
        if len(fields) != self.arity:
            raise _Bad(f"expected {self.arity} fields ({', '.join(c.name for c in self.stream.columns)}), "
                       f"got {len(fields)}")
        vals = []
        for f, kind, col in zip(fields, self.kinds, self.stream.columns, strict=True):
            f = f.strip()
            if not (_INTEGER if kind == "int" else _DECIMAL).fullmatch(f):
                raise _Bad(f"column {col.name} ({kind}): not a number: {f!r}")
            v = float(f) if kind == "float" else int(f)
            if kind == "int" and abs(v) > _MAX_INT:
                raise _Bad(f"column {col.name} ({kind}): out of range (|value| > 2**53): {f!r}")
            if kind == "float" and not math.isfinite(v):
                raise _Bad(f"column {col.name} ({kind}): out of range: {f!r}")
            vals.append(float(v))
        return sign, vals


class _Bad(Exception):
    """A line the slow path rejects (or a block the fast path cannot take as is)."""
