"""What ``ddms run`` times is parsing and applying: the compiled code numba loads lazily is loaded
before the clock starts (:func:`ddms.runtime.driver.warm`), and the progress display does not
import rich when stderr is not a terminal.  Each check runs in a fresh process, where nothing
is loaded yet."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VWAP = REPO / "examples" / "m3" / "vwap.m3"

WARM = textwrap.dedent(f"""
    import sys
    from numba.core.registry import CPUDispatcher
    from ddms.runtime.driver import warm
    from ddms.runtime.engine import Engine
    from ddms.io.orderbook import OrderBookParser
    from replay.synthetic import generate_orderbook

    engine = Engine({str(VWAP)!r})
    parser = OrderBookParser(source="<synthetic>")
    warm(engine, [parser])

    def loaded():
        out = {{}}
        for name, mod in list(sys.modules.items()):
            if name.startswith(("ddms", "ddms_prog")):
                for attr, f in list(vars(mod).items()):
                    if isinstance(f, CPUDispatcher):
                        out[name + "." + attr] = len(f.overloads)
        return out

    before = loaded()
    relmap = engine.relmap(("bids", "asks"))
    for chunk in generate_orderbook(3000, seed=5):
        engine.apply(parser.feed(chunk), relmap)
    engine.apply(parser.close(), relmap)
    engine.snapshot()
    after = loaded()
    assert engine.position == 3000, engine.position
    grown = sorted(k for k in after if after[k] != before.get(k, 0))
    print("LOADED IN THE RUN", grown)
""")


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_warm_loads_every_kernel_a_run_calls():
    """After ``warm``, parsing and applying 3,000 lines and reading the views load no further
    compiled function (before it, the parser's kernels, the input check and the view readers
    were loaded inside the first timed batch)."""
    assert "LOADED IN THE RUN []" in _python(WARM)


def test_progress_without_a_terminal_does_not_import_rich():
    """A run longer than the bar delay with stderr redirected prints progress lines without
    importing rich (its import fell inside the timed part of the run)."""
    code = textwrap.dedent("""
        import sys
        import ddms.cli as cli
        cli.BAR_DELAY = 0.0
        chunks = [b"1,1,B,10,100\\n"] * 5
        assert list(cli._progress_chunks(iter(chunks), 65, "x")) == chunks
        assert list(cli._progress_batches(iter([1, 2, 3]), "y")) == [1, 2, 3]
        print("RICH", "rich" in sys.modules)
    """)
    assert "RICH False" in _python(code)


SQL = sorted((REPO / "examples" / "sql").glob("*.sql"))


def test_sql_cache_gives_the_compiled_program(tmp_path, monkeypatch):
    """The program read back from the SQL cache equals the compiler's, for every cookbook view
    (so the generated module, and numba's cache of it, are the same); a changed SQL text is a
    miss, compiled again."""
    from ddms.backend import sqlcache
    from ddms.compiler import compile_sql_file
    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path))
    for path in SQL:
        want = compile_sql_file(path).program
        first, _, hit1 = sqlcache.sql_program(path)
        again, _, hit2 = sqlcache.sql_program(path)
        assert (hit1, hit2) == (False, True)
        assert first == want and again == want, path.name
    changed = tmp_path / "v.sql"
    changed.write_text(SQL[0].read_text().replace("SELECT", "SELECT", 1))
    assert sqlcache.sql_program(changed)[2] is False
    changed.write_text(SQL[1].read_text())   # same file name, other text
    program, _, hit = sqlcache.sql_program(changed)
    assert not hit and program == compile_sql_file(changed).program


def test_cached_sql_run_does_not_import_the_sql_compiler(tmp_path):
    """``ddms run QUERY.sql`` compiled before starts without importing sqlglot (0.1-0.3 s)."""
    import os
    view = REPO / "examples" / "sql" / "spread.sql"
    data = tmp_path / "book.csv"
    data.write_text("1,1,B,10,100\n2,2,S,5,101\n")
    code = textwrap.dedent(f"""
        import sys
        from ddms.cli import main
        assert main(["run", {str(view)!r}, "--data", {str(data)!r}, "--json"]) == 0
        print("SQLGLOT", "sqlglot" in sys.modules)
    """)
    env = dict(os.environ)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                             timeout=900, env=env)
        assert out.returncode == 0, out.stderr
    assert "SQLGLOT False" in out.stdout and "from the cache" in out.stderr


def test_cached_run_generates_the_program_once(tmp_path, monkeypatch, capsys):
    """``ddms run --first-results`` of a cached program asks for its generated code once: the
    Generated that says it is cached is the one the Engine loads (generating it twice cost
    ~30-60 ms of every start)."""
    import ddms.backend.gencache as gencache
    import ddms.runtime.engine as engine
    from ddms.cli import main

    engine.Engine(VWAP)   # compiled (or loaded) before the run
    data = tmp_path / "book.csv"
    data.write_text("1,1,B,10,100\n2,2,S,5,101\n")
    calls = []

    def counted(program):
        calls.append(program)
        return generated_code(program)

    generated_code = gencache.generated_code
    monkeypatch.setattr(gencache, "generated_code", counted)
    monkeypatch.setattr(engine, "generated_code", counted)
    assert main(["run", str(VWAP), "--data", str(data), "--json", "--first-results"]) == 0
    assert len(calls) == 1 and "loaded vwap.m3" in capsys.readouterr().err


def test_generated_code_is_cached_per_program_and_generator(tmp_path, monkeypatch):
    """The generated code of a program comes from the disk cache once made (the generator not
    run), is what the generator makes, and is made again for another program, for a changed
    generator and for a damaged entry."""
    import ddms.backend.codegen as codegen
    import ddms.backend.gencache as gencache
    from ddms.backend.codegen import generate
    from ddms.runtime.engine import load_program

    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path))
    vwap, sobi = load_program(VWAP), load_program(REPO / "examples" / "m3" / "sobi.m3")
    made = []
    monkeypatch.setattr(codegen, "generate", lambda p: made.append(p) or generate(p))   # imported on a miss
    first = gencache.generated_code(vwap)
    again = gencache.generated_code(vwap)
    assert made == [vwap] and again == first == generate(vwap) and again.program is vwap
    assert gencache.generated_code(sobi) == generate(sobi) and made == [vwap, sobi]
    for entry in (tmp_path / "gen").glob("*.json"):
        entry.write_text("{")   # damaged
    assert gencache.generated_code(vwap) == first and len(made) == 3
    monkeypatch.setattr(gencache, "_generator_version", lambda: b"another generator")
    assert gencache.generated_code(vwap) == first and len(made) == 4


def test_engine_refuses_the_generated_code_of_another_program():
    from ddms.backend.codegen import generate
    from ddms.runtime.engine import Engine, load_program
    other = generate(load_program(REPO / "examples" / "m3" / "sobi.m3"))
    with pytest.raises(ValueError, match="another program"):
        Engine(VWAP, generated=other)


def test_prefetch_keeps_order_errors_and_stops_early():
    """``prefetch`` yields the batches in order, raises a reader's exception where it happened
    (after the batches before it), and closing it early stops its thread."""
    import threading

    import pytest

    from ddms.errors import InputError
    from ddms.runtime.driver import prefetch

    assert list(prefetch(iter(range(100)), depth=2)) == list(range(100))
    assert list(prefetch(iter([]))) == []

    def failing():
        yield 1
        yield 2
        raise InputError("bad line", "f.csv", 3, "x")

    got = []
    with pytest.raises(InputError, match="bad line"):
        for b in prefetch(failing()):
            got.append(b)
    assert got == [1, 2]

    read = []

    def endless():
        i = 0
        while True:
            read.append(i)
            yield i
            i += 1
    it = prefetch(endless(), depth=2)
    assert [next(it) for _ in range(5)] == [0, 1, 2, 3, 4]
    it.close()
    assert not any(t.name == "ddms-prefetch" and t.is_alive() for t in threading.enumerate())
    assert len(read) <= 5 + 2 + 2     # never more than the queue's depth (and one in hand) ahead


def test_ddms_run_with_prefetch_prints_what_a_sequential_run_prints(tmp_path, capsys, monkeypatch):
    """``ddms run`` parses ahead in a thread: the views printed every few lines, the error of a bad
    line and the views before it are those of a run without the thread."""
    from ddms import cli
    from ddms.runtime import driver
    data = tmp_path / "book.csv"
    lines = b"".join(b"%d,%d,B,%d,%d\n" % (i, i, 1 + i % 7, 100 + i % 13) for i in range(1, 3000))
    data.write_bytes(lines + b"3000,1,D,0,0\nnot a line\n3001,5,D,0,0\n")
    args = ["run", str(REPO / "examples" / "sql" / "bid_touch_volume.sql"), "--data", str(data),
            "--every", "250", "--json"]

    def run() -> tuple[int, str, str]:
        try:
            code = cli.main(args)
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return code, out.out, out.err.splitlines()[-1]
    monkeypatch.setattr(cli, "_run_chunks", lambda p: (p.read_bytes()[i:i + 4096]   # many batches
                                                                for i in range(0, p.stat().st_size, 4096)))
    threaded = run()
    monkeypatch.setattr(driver, "prefetch", lambda batches, depth=2: batches)
    sequential = run()
    assert threaded == sequential
    assert threaded[0] != 0 and "not a line" in threaded[2] and threaded[1].count("\n") == 12


def test_ddms_run_reused_read_buffer_gives_the_events_of_fresh_chunks(tmp_path, capsys, monkeypatch):
    """``ddms run`` reads every chunk into one buffer and the order-book parser takes it without a
    copy, with its memory faulted ahead on helper threads.  Over a CRLF file of several chunks
    (lines cut at chunk boundaries) with a bad line near its end, it prints what a run reading
    fresh ``bytes`` chunks prints, and the error names the file and the line."""
    from ddms import cli
    data = tmp_path / "book.csv"
    lines = b"".join(b"%d,%d,%s,%d,%d\r\n" % (i, i % 5000, b"BSEDF"[i % 5:i % 5 + 1], 1 + i % 7, 100 + i % 13)
                     for i in range(1, 40_000))
    data.write_bytes(lines + b"40000,1,Q1,0,0\r\n40001,5,D,0,0\r\n")
    assert data.stat().st_size > cli.FIRST_CHUNK + 2 * cli.MID_CHUNK   # several chunks, growing
    args = ["run", str(REPO / "examples" / "sql" / "bid_touch_volume.sql"), "--data", str(data),
            "--every", "1000", "--json"]

    def run() -> tuple[int, str, str]:
        try:
            code = cli.main(args)
        except SystemExit as e:
            code = e.code
        out = capsys.readouterr()
        return code, out.out, out.err.splitlines()[-1]
    reused = run()
    real = cli._run_chunks
    monkeypatch.setattr(cli, "_run_chunks", lambda p: (bytes(c) for c in real(p)))
    fresh = run()
    assert reused == fresh
    assert reused[0] != 0 and f"{data}:40000" in reused[2] and "Q1" in reused[2]
    assert reused[1].count("\n") == 40   # every 1,000 lines, then at line 39,999 before the bad one


def test_run_reads_small_chunks_at_both_ends(tmp_path):
    """``ddms run`` reads a small first chunk (applying starts after parsing it, not a whole
    RUN_CHUNK), then chunks that at most double (a chunk is parsed while the one before it is
    applied) up to RUN_CHUNK, tapering near the end (the last chunk is applied after all
    parsing is done); the chunks are the file's bytes in order."""
    import ddms.cli as cli
    for n in (0, 1, cli.FIRST_CHUNK, 3 * cli.RUN_CHUNK + 12345, 40 * cli.RUN_CHUNK):
        data = bytes(range(256)) * (n // 256) + b"x" * (n % 256)
        path = tmp_path / "f.csv"
        path.write_bytes(data)
        sizes = [len(c) for c in cli._run_chunks(path)]
        # each chunk is valid until the next is asked for (one buffer, read into again): copied
        assert sum(sizes) == n and b"".join(bytes(c) for c in cli._run_chunks(path)) == data
        if n:
            assert sizes[0] == min(n, cli.FIRST_CHUNK) and max(sizes) <= cli.RUN_CHUNK
            assert sizes[-1] <= cli.FIRST_CHUNK
            assert all(b <= 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
        if n >= 40 * cli.RUN_CHUNK:   # RUN_CHUNK while 16 of them are left to read, then MID_CHUNK
            assert cli.RUN_CHUNK in sizes and len(sizes) < n // cli.RUN_CHUNK + 40
            big = [i for i, b in enumerate(sizes) if b == cli.RUN_CHUNK]
            assert sum(sizes[big[-1] + 1:]) <= 16 * cli.RUN_CHUNK and cli.MID_CHUNK in sizes[big[-1]:]
        elif n:
            assert max(sizes) <= cli.MID_CHUNK


def test_prefetch_thread_starts_at_once_reads_only_when_asked_and_ends_when_dropped():
    """``prefetch`` starts its thread when called (``ddms run`` calls it before its clock) but the
    thread reads nothing before the first batch is asked for; a prefetch dropped unstarted lets
    its thread end."""
    import gc
    import threading
    import time

    from ddms.runtime.driver import prefetch

    def alive() -> int:
        return sum(t.name == "ddms-prefetch" and t.is_alive() for t in threading.enumerate())

    before = alive()
    read = []

    def source():
        for i in range(3):
            read.append(i)
            yield i
    it = prefetch(source())
    assert alive() == before + 1
    time.sleep(0.05)
    assert read == []                 # nothing read before the first next()
    assert list(it) == [0, 1, 2] and read == [0, 1, 2]
    assert alive() == before
    it = prefetch(source())
    del it
    gc.collect()
    deadline = time.monotonic() + 5
    while alive() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert alive() == before


def test_run_chunks_read_ahead_on_the_helper_and_stay_valid_until_the_next(tmp_path, monkeypatch):
    """``ddms run``'s chunks: the next one is read on the helper thread while this one is parsed
    (so each chunk after the first was read by a job of the helper), each chunk holds the file's
    bytes until the next is asked for, and closing early waits for the read in flight."""
    from ddms import cli
    from ddms.io import pages

    data = bytes(range(256)) * (4 * cli.RUN_CHUNK // 256 + 7)
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    jobs = []
    submit = pages.Helper.submit
    monkeypatch.setattr(pages.Helper, "submit",
                        lambda self, fn, *a: (jobs.append(fn.__name__), submit(self, fn, *a))[1])
    pos, n = 0, 0
    for chunk in cli._run_chunks(path):
        assert bytes(chunk) == data[pos:pos + len(chunk)]
        pos += len(chunk)
        n += 1
    assert pos == len(data) and jobs.count("read") == n   # every chunk after the first, and the final empty read
    it = cli._run_chunks(path)
    first = bytes(next(it))
    it.close()
    assert first == data[:cli.FIRST_CHUNK]
