"""Which format a data file is in: the one place every command (``ddms run``, ``backtest``,
``convert``) asks.

Why one place: a user hands any command any file, and the answer must not depend on the command
(a capture accepted by ``backtest`` and refused by ``run`` was a bug).  The readers all live in
this package (order-book CSV :mod:`ddms.io.orderbook`, LOBSTER :mod:`ddms.io.lobster`, Parquet
:mod:`ddms.io.columnar`, Binance captures :mod:`ddms.io.capture`); this module only names the format.

Rules (:func:`detect_kind`, sans-I/O: a file name and its first bytes in, a kind out): the
Parquet magic ``PAR1``; a first line ``<digits> {`` (after gzip decompression) -> a Binance
capture; a first line ``#ddms-orders ...`` -> a ``ddms monitor --record`` recording of our order
protocol (:mod:`ddms.io.orderrec`); otherwise the first line's field count (5 -> order book, 6 -> LOBSTER); a name
containing ``message`` is LOBSTER.  The formats of :mod:`ddms.io` (cryptofeed captures, Databento
DBN, tardis.dev CSV) register through :data:`ddms.io.formats.FORMATS` and are tried right after
the Parquet magic.  Anything else is a :class:`~ddms.errors.ReplayError` naming
the file and saying what was seen.  :func:`read_head` is the thin I/O part: at most 64 KiB read
(and decompressed, for gzip).
"""

from __future__ import annotations

import os
import re
import stat
import zlib

from ddms.errors import ReplayError
from ddms.io import formats as io_formats

__all__ = ["GZIP_MAGIC", "GZIP_READERS", "HEAD_BYTES", "KINDS", "ORDERS_HEADER", "PARQUET_MAGIC", "detect_file",
           "detect_kind", "is_order_recording", "read_head"]

ORDERS_HEADER = b"#ddms-orders "
"""How a recording of our order protocol starts (:mod:`ddms.io.orderrec`, which writes and reads
it; declared here so that detecting a format never imports the recording's reader and decoder)."""


def is_order_recording(head: bytes) -> bool:
    """Whether a file's first bytes are an order-protocol recording's header."""
    return head.lstrip(b"\xef\xbb\xbf").startswith(ORDERS_HEADER)

_IO = {f.kind: f for f in io_formats.FORMATS}
GZIP_READERS = tuple(k for k, f in _IO.items() if f.gzip_ok)   # ddms/io kinds that read .gz themselves
KINDS = ("orderbook", "lobster", "binance", "parquet", "orders", *_IO)
HEAD_BYTES = 1 << 16
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"
_CAPTURE_LINE = re.compile(rb"^\d+ [{\[]")


def _first_line(head: bytes) -> bytes:
    for line in head.split(b"\n"):
        if line.strip():
            return line.rstrip(b"\r")
    return b""


def detect_kind(name: str, head: bytes) -> str:
    """The kind of a file from its ``name`` and its first bytes ``head`` (for a gzip file: its
    first decompressed bytes).  Raises :class:`ReplayError` saying what the start of the file
    looks like when it is none of :data:`KINDS`."""
    lower = os.path.basename(name).lower()
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if lower.endswith(".parquet"):
        raise ReplayError("not a Parquet file (it does not start with the magic bytes PAR1)", name)
    fmt = io_formats.detect(name, head)
    if fmt is not None:
        return fmt.kind
    if is_order_recording(head):
        return "orders"
    if not head:
        if lower.endswith(".csv"):
            return "lobster" if "message" in lower else "orderbook"
        raise ReplayError("empty file of unknown format (an empty .csv counts as an empty order book)", name)
    if b"\x00" in head:
        raise ReplayError("binary content that is neither Parquet nor a gzip capture", name)
    line = _first_line(head)
    if _CAPTURE_LINE.match(line):
        return "binance"
    if "message" in lower:
        return "lobster"
    fields = line.count(b",") + 1
    if fields == 5:
        return "orderbook"
    if fields == 6:
        return "lobster"
    shown = line[:80].decode("utf-8", "replace")
    raise ReplayError(
        f"unknown format: the first line {shown!r} has {fields} comma-separated field(s); expected "
        "5 (order book t,order_id,action,volume,price), 6 (LOBSTER time,type,order_id,size,price,direction), "
        "'<recv_ts_ns> <json>' (Binance capture) or a Parquet file", name)


def _not_regular(path: str) -> str | None:
    """Why ``path`` cannot be read as a data file, when it exists but is not a regular file
    (a named pipe, a terminal, a socket...): every reader opens a data file twice (this head,
    then the data from byte 0) and checkpoints name byte offsets, which a pipe cannot give (the
    second open of a FIFO waits forever for a writer that has gone).  ``None`` for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None   # (the open below says why)
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    what = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return (f"is {what}, not a regular file: ddms reads a data file's head to tell its format and then "
            "reads it again from the start (checkpoints name byte offsets), which a stream cannot do; "
            "write the stream to a file first (a live venue feed is read by `ddms monitor URL`)")


def read_head(path: str) -> tuple[bytes, bool]:
    """The first bytes of ``path`` (decompressed if it is gzip) and whether it is gzip.  Raises
    :class:`ReplayError` for corrupt gzip data or a path that is not a regular file (a FIFO,
    which would block); ``OSError`` for a file that cannot be read."""
    why = _not_regular(path)
    if why is not None:
        raise ReplayError(why, path)
    with open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    if head.startswith(GZIP_MAGIC):
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            return d.decompress(head, HEAD_BYTES), True
        except zlib.error as e:
            raise ReplayError(f"corrupt gzip data at the start of the file ({e})", path) from None
    return head, False


def detect_file(path: str | os.PathLike, kind: str | None = None) -> tuple[str, bool]:
    """``(kind, gzip?)`` of the file at ``path``: :func:`detect_kind` on its head, or ``kind``
    when given (checked against what the file obviously is).  Raises :class:`ReplayError` naming
    the file for a missing file, a directory, an unreadable or unknown file, a gzip file that is
    not a Binance capture.  Cost: one read of at most 64 KiB."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise ReplayError("no such file", p)
    if os.path.isdir(p):
        raise ReplayError("is a directory, not a data file", p)
    if kind is not None and kind not in KINDS:
        raise ReplayError(f"unknown source kind {kind!r} (kinds: {', '.join(KINDS)})", p)
    try:
        head, gz = read_head(p)
    except OSError as e:
        raise ReplayError(f"cannot read: {e.strerror or e}", p) from None
    found = detect_kind(p, head) if kind is None else kind
    if gz and found != "binance" and found not in GZIP_READERS:
        raise ReplayError(f"gzip-compressed {found} files are not read directly (only Binance captures are): "
                          "decompress it first (gunzip)", p)
    if kind is not None and kind != "parquet" and head.startswith(PARQUET_MAGIC):
        raise ReplayError(f"asked to read it as {kind!r}, but it is a Parquet file", p)
    return found, gz
