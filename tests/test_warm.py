"""WarmEngine: views served by the interpreter while the program compiles equal the compiled
engine's after every line; the hand-over happens at a line boundary and applies nothing twice.

The compile is injected (a job the test finishes when it likes) except in the one slow test,
which compiles a program of its own in a real child process under a fresh DDMS_CACHE_DIR."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from ddms.errors import InputError
from ddms.io.events import EventBatch
from ddms.io.orderbook import OrderBookParser, parse_chunks
from ddms.runtime import warm
from ddms.runtime.driver import replay
from ddms.runtime.engine import Engine, load_program
from ddms.runtime.warm import BackgroundCompile, WarmEngine
from replay.synthetic import generate_orderbook
from tests.conftest import EXAMPLES, REPO

PROGRAMS = {"vwap": EXAMPLES / "vwap.m3", "book": REPO / "tests" / "programs" / "book.m3",
            "sobi": EXAMPLES / "sobi.m3"}
LINES = 240


class Job:
    """A compile that reports done after ``after`` polls (``None``: never, until released)."""

    def __init__(self, after: int | None) -> None:
        self.after, self.polls, self.waited = after, 0, 0

    def done(self) -> bool:
        self.polls += 1
        return self.after is not None and self.polls > self.after

    def wait(self) -> None:
        self.waited += 1


def batches(seed: int = 1, chunk: int = 37) -> list[EventBatch]:
    parser = OrderBookParser(source="<synthetic>")
    return list(parse_chunks(parser, generate_orderbook(LINES, seed=seed, chunk_lines=chunk)))


def same(a, b) -> bool:
    """Equal snapshots, NaN equal to NaN (bit for bit otherwise)."""
    if isinstance(a, list | tuple):
        return isinstance(b, list | tuple) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


@pytest.fixture(scope="module", params=sorted(PROGRAMS))
def compiled(request):
    """(program, per-line snapshots of a compiled-only run, final compiled engine)."""
    program = load_program(PROGRAMS[request.param])
    engine = Engine(program)
    snaps: list = []
    replay(engine, batches(), engine.relmap(("bids", "asks")), every=1,
           checkpoint=lambda pos: snaps.append((pos, engine.snapshot())))
    assert len(snaps) == LINES
    return program, snaps, engine


def run_warm(program, job: Job, every: int = 1):
    served: list = []
    w = WarmEngine(program, compile_job=lambda p: job)

    def checkpoint(pos: int) -> None:
        served.append((pos, w.compiled, w.snapshot()))
        w._check()
    replay(w, batches(), w.relmap(("bids", "asks")), every=every, checkpoint=checkpoint)
    w._check()
    return w, served


@pytest.mark.parametrize("after", [None, 0, 50, 200])
def test_served_views_equal_compiled_after_every_line(compiled, monkeypatch, after):
    """Views after every line, interpreted before the hand-over and compiled after it, equal a
    compiled-only run's; the compiled state at the end is the compiled-only state (a line applied
    twice would change a sum) and passes its invariants."""
    program, want, ref = compiled
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.0)
    w, served = run_warm(program, Job(after))
    assert [p for p, _, _ in served] == [p for p, _ in want]
    for (pos, _, got), (_, exp) in zip(served, want, strict=True):
        assert same(got, exp), f"line {pos}: {got} != {exp}"
    kinds = [c for _, c, _ in served]
    if after is None:
        assert not any(kinds) and not w.compiled        # the first result came before the compile
        engine = w.finish()
        w._check()
        assert w.handover_line == LINES
    else:
        assert kinds == sorted(kinds) and kinds[-1]      # interpreted, then compiled from the hand-over on
        engine = w.engine
        assert (after == 0) == all(kinds)
    assert engine.position == ref.position == w.position == LINES
    assert same(engine.snapshot(), ref.snapshot())
    engine._check()


def test_hand_over_inside_a_batch_at_a_line_boundary(compiled, monkeypatch):
    """The compile finishing in the middle of a batch hands over after the line being applied:
    the rest of the batch runs compiled, the interpreted head is replayed once."""
    program, want, ref = compiled
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.0)
    job = Job(after=60)
    w, served = run_warm(program, job, every=0)
    assert w.compiled and job.waited == 1
    assert 0 < w.handover_line < LINES
    assert w.handover_line % 37 != 0            # not at the end of a 37-line batch: inside one
    assert served == [] and w.position == LINES
    assert same(w.snapshot(), want[-1][1])
    assert same(w.engine.snapshot(), ref.snapshot())
    w.engine._check()


def test_first_result_before_compile_finishes(compiled):
    """With a compile that never finishes, every view is still served, and `value` agrees with
    the compiled engine's."""
    program, want, ref = compiled
    job = Job(None)
    w = WarmEngine(program, compile_job=lambda p: job)
    bs = batches()
    w.apply(bs[0], w.relmap(("bids", "asks")))
    assert not w.compiled and w.position == bs[0].last_line
    assert same(w.snapshot(), want[w.position - 1][1])
    for q in program.queries:
        v = w.value(q.name)
        assert isinstance(v, dict | float | int)


def test_bad_batch_is_rejected_before_anything_is_applied(compiled):
    program, _, _ = compiled
    w = WarmEngine(program, compile_job=lambda p: Job(None))
    b = batches()[0]
    bad = EventBatch(b.rel, b.sign, b.cols, b.line[::-1].copy(), b.first_line, b.last_line)
    with pytest.raises(InputError, match="out of order"):
        w.apply(bad, w.relmap(("bids", "asks")))
    assert w.position == 0
    with pytest.raises(InputError, match="relation map"):
        w.apply(b, np.array([5, 0], np.int64))


@pytest.mark.slow
def test_real_background_compile(tmp_path, monkeypatch):
    """A program never compiled (its own module under a fresh DDMS_CACHE_DIR) serves its first
    result at once, while a child process compiles it; then the compiled engine takes over and
    the views equal a compiled-only run's."""
    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path / "ddms"))
    text = (EXAMPLES / "vwap.m3").read_text().replace("0.25", "0.3125")   # a program of its own
    program = load_program(text)
    t0 = time.perf_counter()
    w = WarmEngine(program)
    relmap = w.relmap(("bids", "asks"))
    bs = batches()
    w.apply(bs[0], relmap)
    first = time.perf_counter() - t0
    assert not w.compiled and isinstance(w.job, BackgroundCompile), "compiled before the first batch"
    served = [w.snapshot()]
    w.job.proc.wait(timeout=900)
    for b in bs[1:]:
        w.apply(b, relmap)
        served.append(w.snapshot())
    assert w.compiled and w.handover_line == bs[0].last_line
    ref = Engine(program)
    for b, got in zip(bs, served, strict=True):
        ref.apply(b, relmap)
        assert same(got, ref.snapshot())
    assert first < 5, f"first result after {first:.1f} s"


class PidJob(Job):
    pid = 0


@pytest.mark.parametrize("after", [None, 2])
def test_cli_first_results_prints_what_a_compiled_run_prints(tmp_path, capsys, monkeypatch, after):
    """``ddms run --first-results`` of a program numba has not compiled prints the same views as
    a compiled run; a run that ends before the compile says the compile goes on."""
    from tests.test_cli import run_cli
    data = tmp_path / "book.csv"
    data.write_bytes(b"".join(generate_orderbook(60, seed=3)))
    prog = str(PROGRAMS["vwap"])
    code, want, _ = run_cli(capsys, "run", prog, "--data", str(data), "--every", "7", "--json")
    assert code == 0 and len(want) == 9
    monkeypatch.setattr("ddms.backend.cache.compiled_before", lambda digest: False)
    monkeypatch.setattr(warm, "BackgroundCompile", lambda program: PidJob(after))
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.0)
    code, got, err = run_cli(capsys, "run", prog, "--data", str(data), "--every", "7", "--json",
                             "--first-results")
    assert code == 0, err
    assert "the interpreter serves the views" in err
    assert got == want
    assert ("goes on in the background" in err) == (after is None)
    assert ("compiled code continues from line" in err) == (after is not None)
    assert ("all interpreted" in err) == (after is None) and "compile time excluded" not in err



def test_first_results_is_the_default(tmp_path, capsys, monkeypatch):
    """Without ``--first-results`` an uncompiled program is served by the interpreter while numba
    compiles (the test suite turns that off with DDMS_FIRST_RESULTS=0); ``--no-first-results``, a
    checkpointed run and the suite's setting compile first."""
    from tests.test_cli import run_cli
    data = tmp_path / "book.csv"
    data.write_bytes(b"".join(generate_orderbook(60, seed=3)))
    prog = str(PROGRAMS["vwap"])
    code, want, _ = run_cli(capsys, "run", prog, "--data", str(data), "--json")
    assert code == 0
    monkeypatch.setattr("ddms.backend.cache.compiled_before", lambda digest: False)
    monkeypatch.setattr(warm, "BackgroundCompile", lambda program: PidJob(2))
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.0)
    monkeypatch.delenv("DDMS_FIRST_RESULTS", raising=False)
    code, got, err = run_cli(capsys, "run", prog, "--data", str(data), "--json")
    assert code == 0 and got == want and "the interpreter serves the views" in err, err
    for extra in (["--no-first-results"], ["--checkpoint", str(tmp_path / "ck")]):
        code, got, err = run_cli(capsys, "run", prog, "--data", str(data), "--json", *extra)
        assert code == 0 and got == want and "the interpreter serves the views" not in err, (extra, err)
    monkeypatch.setenv("DDMS_FIRST_RESULTS", "0")
    code, got, err = run_cli(capsys, "run", prog, "--data", str(data), "--json")
    assert code == 0 and got == want and "the interpreter serves the views" not in err, err

SLOW = pytest.mark.slow   # the interpreter takes 15-35 s on these (its nested loops over the book)
FINANCE = ("axfinder", "brokerspread", "brokervariance", pytest.param("chrissedtrades", marks=SLOW),
           pytest.param("missedtrades", marks=SLOW), "pricespread", "vwap")


@pytest.mark.parametrize("query", FINANCE)
def test_finance_views_interpreted_equal_compiled_bit_for_bit(query):
    """The finance SQL views served by the interpreter equal the compiled engine's after every
    line of the first 300 lines of standard/finance.csv, bit for bit (NULL as NaN)."""
    from ddms.compiler import compile_sql_file
    from tests.conftest import data_file, shared_file
    program = compile_sql_file(shared_file("queries", "finance", f"{query}.sql")).program
    text = data_file("standard").read_bytes()
    head = b"".join(text.splitlines(keepends=True)[:300])

    def lines() -> list[EventBatch]:
        return list(parse_chunks(OrderBookParser(source="<head>"), [head[:len(head) // 2], head[len(head) // 2:]]))
    engine = Engine(program)
    w = WarmEngine(program, compile_job=lambda p: Job(None))
    want: list = []
    got: list = []
    names = ("bids", "asks")
    replay(engine, lines(), engine.relmap(names), every=1, checkpoint=lambda p: want.append(engine.snapshot()))
    replay(w, lines(), w.relmap(names), every=1, checkpoint=lambda p: got.append(w.snapshot()))
    assert len(got) == len(want) == 300 and not w.compiled
    for i, (g, e) in enumerate(zip(got, want, strict=True)):
        assert same(g, e), f"{query} line {i + 1}: {g} != {e}"


def test_compiled_before_is_per_module_folder(tmp_path, monkeypatch):
    """numba caches a program per module path: one compiled under the default DDMS_CACHE_DIR is
    not compiled before under another (``--first-results`` must then take the warm path)."""
    from ddms.backend.cache import compiled_before
    from ddms.backend.codegen import generate
    program = load_program(PROGRAMS["vwap"])
    Engine(program)    # compiled (or loaded) under the default folder
    digest = generate(program)
    assert compiled_before(digest)
    monkeypatch.setenv("DDMS_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert not compiled_before(digest)


def test_failed_compile_is_reported_at_the_hand_over(compiled):
    """A compile that failed raises its CompileError at the next batch; the views served so far
    stay readable (the CLI prints them before the error)."""
    from ddms.errors import CompileError

    class Failed(Job):
        def wait(self) -> None:
            raise CompileError("numba failed: boom")

    program, want, _ = compiled
    job = Failed(after=None)
    w = WarmEngine(program, compile_job=lambda p: job)
    bs = batches()
    relmap = w.relmap(("bids", "asks"))
    w.apply(bs[0], relmap)
    job.after = 0      # the compile ends (failing) now
    with pytest.raises(CompileError, match="boom"):
        w.apply(bs[1], relmap)
    assert not w.compiled and w.position == bs[0].last_line
    assert same(w.snapshot(), want[w.position - 1][1])


SEVERAL = ("book_totals", "broker_book")   # several columns: one row without keys / rows per broker


@pytest.fixture(scope="module", params=SEVERAL)
def several(request):
    """(program, per-line snapshots of a compiled-only run) of a cookbook view with several
    output columns."""
    from ddms.compiler import compile_sql_file
    program = compile_sql_file(REPO / "examples" / "sql" / f"{request.param}.sql").program
    assert any(q.columns for q in program.queries)
    engine = Engine(program)
    snaps: list = []
    replay(engine, batches(), engine.relmap(("bids", "asks")), every=1,
           checkpoint=lambda pos: snaps.append(engine.snapshot()))
    return program, snaps, engine


@pytest.mark.parametrize("after", [None, 90])
def test_views_with_several_columns_served_while_compiling(several, monkeypatch, after):
    """A view with several output columns (keyed or not, with MAX/MIN columns that are NULL on
    an empty book) is served by the interpreter while compiling: after every line its snapshot
    and value equal the compiled engine's, before and after the hand-over."""
    program, want, ref = several
    monkeypatch.setattr(warm, "POLL_SECONDS", 0.0)
    w, served = run_warm(program, Job(after))
    assert len(served) == len(want) == LINES
    for (pos, _, got), exp in zip(served, want, strict=True):
        assert same(got, dict(exp)), f"line {pos}: {got} != {exp}"
    assert any(not c for _, c, _ in served)            # some lines were served by the interpreter
    assert w.compiled == (after is not None)
    for q in program.queries:
        assert same(w.value(q.name), ref.value(q.name))
