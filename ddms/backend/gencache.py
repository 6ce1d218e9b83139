"""A disk cache of generated code, so that a cached program starts without running the code generator.

:func:`~ddms.backend.codegen.generate` costs 30-90 ms of CPU for a finance query (its passes
over every statement, tried again per candidate map), a third of the distance between a cached
start and the floor of Python + numba, for a result that depends only on the program and the
generator's code.  The generated source, digest and plan are kept in ``<cache>/gen/<key>.json``,
the key a SHA-256 of the program's M3 text (printer and parser round-trip programs exactly) and
of the source of every module the generator reads (``ddms/backend``, ``ddms/m3``,
``ddms/storage``: their contents are in the module digest too, ``ddms/errors.py``).  A program
the generator refuses is never cached (the next call raises again).  A damaged or unreadable
entry is generated again.

Cost of a hit: printing the program (~0.5 ms), reading ~30 source files once per process
(~1 ms) and one file.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache

from ddms.backend.cache import cache_dir, sources_digest, write_cached
from ddms.backend.generated import Generated
from ddms.m3.ir import Program
from ddms.m3.printer import print_program

_GENERATOR = ("backend", "m3", "storage", "errors.py")


@cache
def _generator_version() -> bytes:
    """SHA-256 of the sources of the modules under :data:`_GENERATOR`: any change to the
    generator (or to what it reads) makes every key new."""
    return sources_digest(_GENERATOR).digest()


def generated_code(program: Program) -> Generated:
    """``generate(program)`` (a verified program), from the cache when this generator made it
    before; else generated and cached.  Errors are the generator's."""
    text = print_program(program)
    key = hashlib.sha256(_generator_version() + text.encode()).hexdigest()[:32]
    entry = cache_dir() / "gen" / f"{key}.json"
    try:
        saved = json.loads(entry.read_text(encoding="utf-8"))
        return Generated(saved["source"], saved["digest"], tuple(saved["plan"]), program)
    except (OSError, ValueError, KeyError, TypeError):
        pass   # not cached (or damaged): generated again
    from ddms.backend.codegen import generate  # only on a miss: a cached start never imports the generator

    g = generate(program)
    write_cached(entry, json.dumps({"source": g.source, "digest": g.digest, "plan": list(g.plan)}))
    return g
