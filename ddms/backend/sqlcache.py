"""A disk cache of SQL -> M3 compiles, so that a cached SQL view starts without the SQL compiler.

Importing the SQL front end (sqlglot and the calculus passes) costs 0.1-0.3 s of every ``ddms
run QUERY.sql``, a large part of the 0.7 s start target, for a result that depends only on the
SQL text, its file name and the compiler's code.  The M3 text of the compiled program is kept
in ``<cache>/sql/<key>.m3``, the key a SHA-256 of the SQL file's name and text, of the source
of every module that takes part in the compile (``ddms/compiler.py``, ``ddms/sql``,
``ddms/calculus``, ``ddms/m3``) and of sqlglot's version file; a hit is parsed back with the M3
parser (printer and parser round-trip programs exactly: tests/test_e2e_overhead.py).  A compile
error is never cached: the next run compiles again and reports it.

Cost of a lookup: reading about 40 source files (~1 ms) and one small file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import time
from functools import cache
from pathlib import Path

from ddms.backend.cache import cache_dir, sources_digest, write_cached
from ddms.m3.ir import Program
from ddms.m3.parser import parse_program, read_source

_COMPILER = ("compiler.py", "sql", "calculus", "m3")


@cache
def _compiler_version() -> bytes:
    """SHA-256 of the compiler's sources (the modules under :data:`_COMPILER`) and of sqlglot's
    version file: any change to the compile makes every key new."""
    h = sources_digest(_COMPILER)
    spec = importlib.util.find_spec("sqlglot")   # finds, does not import
    if spec is not None and spec.origin:
        version = Path(spec.origin).parent / "_version.py"
        h.update(version.read_bytes() if version.exists() else spec.origin.encode())
    return h.digest()


def sql_program(path: str | Path) -> tuple[Program, float, bool]:
    """``(program, seconds, from_cache)``: the M3 program of SQL file ``path``, from the cache
    when this compiler compiled this text before, else compiled (and cached).  Errors are the
    compiler's (:class:`~ddms.errors.ProgramError` naming the file, ``SqlError``...)."""
    t0 = time.perf_counter()
    p = Path(path)
    text = read_source(p)
    key = hashlib.sha256(_compiler_version() + str(p).encode() + b"\0" + text.encode()).hexdigest()[:32]
    folder = cache_dir() / "sql"
    hit = folder / f"{key}.m3"
    try:
        m3 = hit.read_text(encoding="utf-8")
    except OSError:
        m3 = None
    if m3 is not None:
        return parse_program(m3), time.perf_counter() - t0, True
    from ddms.compiler import compile_sql
    from ddms.m3.printer import print_program
    program = compile_sql(text, str(p)).program
    write_cached(hit, print_program(program))
    return program, time.perf_counter() - t0, False
