"""A program loaded from the cache compiles nothing at run time: not its triggers, and not the
typed-container helpers numba would otherwise compile in every process when Python reads a
grouped view (about 2 s at each start before ddms/runtime/typedio.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "tests" / "programs" / "book.m3"   # grouped views with one and two keys

SCRIPT = textwrap.dedent(f"""
    import numba.core.event as ev
    from ddms.runtime import Engine

    compiled = []

    class Listener(ev.Listener):
        def on_start(self, event):
            compiled.append(str(event.data["dispatcher"]))

        def on_end(self, event):
            pass

    engine = Engine({str(BOOK)!r})
    seen = []
    engine.on("BROKER_VOL", lambda view, key, old, new, line: seen.append((key, old, new)))
    ev.register("numba:compile", Listener())
    engine.insert("BIDS", 1, 1, 7, 10, 100)
    engine.insert("BIDS", 2, 2, 7, 5, 101)
    engine.insert("BIDS", 3, 3, 8, 4, 100)
    engine.delete("BIDS", 2, 2, 7, 5, 101)
    v, bp = engine.views["BROKER_VOL"], engine.views["BP_VOL"]
    assert v[7] == 10 and v[8] == 4 and 7 in v and 9 not in v and len(v) == 2, dict(v)
    assert sorted(v) == [(7,), (8,)], sorted(v)
    assert bp.rows() == [[7, 100.0, 10.0], [8, 100.0, 4.0]], bp.rows()
    assert engine.snapshot()["BROKER_VOL"] == [[7, 10.0], [8, 4.0]]
    assert seen == [((7.0,), 0.0, 10.0), ((7.0,), 10.0, 15.0), ((8.0,), 0.0, 4.0), ((7.0,), 15.0, 10.0)], seen
    print("COMPILED", compiled)
""")


def _run() -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cached_program_compiles_nothing_when_its_views_are_read():
    _run()                            # compiles (or loads) the program and the helpers once
    assert "COMPILED []" in _run()    # a second process loads everything from numba's cache


RUN = textwrap.dedent("""
    import sys
    import numba.core.event as ev

    compiled = []

    class Listener(ev.Listener):
        def on_start(self, event):
            compiled.append(str(event.data["dispatcher"]))

        def on_end(self, event):
            pass

    ev.register("numba:compile", Listener())
    from ddms.cli import main
    assert main(["run", sys.argv[1], "--data", sys.argv[2], "--every", "2", "--json"]) == 0
    print("COMPILED", compiled)
""")

KINDS = {"hand-written M3 (vwap)": REPO / "examples" / "m3" / "vwap.m3",
         "hand-written M3 (sobi)": REPO / "examples" / "m3" / "sobi.m3",
         "SQL scalar view": REPO / "examples" / "sql" / "spread.sql",
         "SQL grouped view, several columns, MIN/MAX": REPO / "examples" / "sql" / "broker_book.sql",
         "SQL grouped view with a range condition": REPO / "examples" / "sql" / "cumulative_bid_depth.sql"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cached_ddms_run_compiles_nothing(kind, tmp_path):
    """``ddms run`` of a program compiled before (every kind: hand-written M3, SQL scalar and
    grouped views) compiles nothing in the whole process: not the triggers, not the parser,
    not the input check, not the typed-container reads of the printed views."""
    data = tmp_path / "book.csv"
    data.write_text("1,1,B,10,100\n1,2,S,10,200\n2,3,B,5,101\n2,1,E,5,0\n3,2,D,0,0\n4,4,S,2,150\n")
    cmd = [sys.executable, "-c", RUN, str(KINDS[kind]), str(data)]
    for _ in range(2):   # the first run compiles (or loads) everything once
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
    assert "COMPILED []" in out.stdout, out.stdout


LOCKED = textwrap.dedent("""
    import sys
    from ddms.runtime import Engine

    def building(cached):
        print("BUILDING", flush=True)

    engine = Engine(sys.argv[1], on_build=building)
    stats = engine.module.run_batch.stats
    print("STATS", sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), flush=True)
""")


def test_processes_starting_together_compile_a_program_once(tmp_path, monkeypatch):
    """Two processes constructing the same never-compiled program at the same time (two test
    workers, two ``ddms run``): one compiles it, the other waits on the program's compile lock and
    loads the first one's machine code from numba's cache.  Both start while this process holds
    the lock, so both have passed the cache check and stand at the lock when it is released;
    without the lock both would compile (two cache misses).  A small program of its own module
    folder (``DDMS_CACHE_DIR``: a new program path, compiled afresh; the runtime library comes
    from the shared numba cache)."""
    from ddms.backend.cache import compile_lock
    from ddms.backend.codegen import generate
    from ddms.runtime.engine import load_program

    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path / "ddms"))
    digest = generate(load_program(BOOK)).digest
    with compile_lock(digest):
        procs = [subprocess.Popen([sys.executable, "-c", LOCKED, str(BOOK)], cwd=REPO, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        for p in procs:   # each has generated the program and found no machine code for it in the cache
            assert p.stdout.readline().strip() == "BUILDING", p.communicate()[1]
        time.sleep(0.5)   # ... and is waiting at the lock
    stats = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        [line] = [x for x in out.splitlines() if x.startswith("STATS")]
        stats.append(tuple(map(int, line.split()[1:])))
    assert sorted(stats) == [(0, 1), (1, 0)], stats   # (cache hits, cache misses) of run_batch


LEAN = textwrap.dedent("""
    import sys
    import ddms  # noqa: F401  (numba's cache settings first)
    from numba.core import codegen

    parsed = []
    parse_bitcode = codegen.ll.parse_bitcode
    codegen.ll.parse_bitcode = lambda data: parsed.append(len(data)) or parse_bitcode(data)
    from ddms.cli import main
    assert main(["run", sys.argv[1], "--data", sys.argv[2], "--json"]) == 0
    print("PARSED", len(parsed))
    print("IMPORTED", " ".join(sorted(m for m in sys.modules if m in sys.argv[3].split(","))))
""")

NOT_AT_START = ("ddms.backend.codegen", "ddms.backend.deferral", "ddms.backend.fusion", "asyncio", "ssl",
                "ddms.runtime.loop", "ddms.runtime.warm", "ddms.io.levels", "ddms.io.orderproto", "ddms.io.orderrec",
                "ddms.sql", "ddms.calculus",
                # numba's implementation registries (ddms.numbacache._install_lazy_registries)
                "numba.np.linalg", "numba.np.random.generator_core", "numba.np.polynomial.polynomial_core")


@pytest.mark.parametrize("program", [REPO / "examples" / "m3" / "vwap.m3", REPO / "examples" / "sql" / "spread.sql"],
                         ids=lambda p: p.name)
def test_cached_ddms_run_imports_only_what_it_uses(program, tmp_path):
    """A cached ``ddms run`` of an order-book CSV (issue #25: a start within 0.7 s) imports
    neither the code generator, nor asyncio, nor the readers of other formats, nor the warm
    engine; and loads the program's machine code without parsing the bitcode numba keeps beside it
    for linking (ddms.numbacache: the object's symbol table instead), nor loading numba's typing
    and lowering registries (~0.25 s: nothing is typed or lowered)."""
    data = tmp_path / "book.csv"
    data.write_text("1,1,B,10,100\n1,2,S,10,200\n2,3,B,5,101\n2,1,E,5,0\n3,2,D,0,0\n4,4,S,2,150\n")
    cmd = [sys.executable, "-c", LEAN, str(program), str(data), ",".join(NOT_AT_START)]
    for _ in range(2):   # the first run compiles (or loads) everything once
        out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr
    assert "PARSED 0\n" in out.stdout and "IMPORTED \n" in out.stdout, out.stdout
