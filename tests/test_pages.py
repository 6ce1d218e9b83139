"""ddms/io/pages.py: arrays on transparent huge pages and the one helper thread of the readers.

Whether the kernel actually backs an advised mapping with huge pages depends on the machine
(``/sys/kernel/mm/transparent_hugepage/enabled``); the check that it does is skipped where THP is
off.  Everything else (shapes, alignment, contents, lifetime, jobs) holds everywhere.
"""

from __future__ import annotations

import gc
import mmap
import os
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from ddms.io import pages
from ddms.io.pages import HUGE, HUGE_MIN, Helper, helper, huge_empty


def _root(a: np.ndarray):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a.obj if isinstance(a, memoryview) else a


@pytest.mark.parametrize("shape,dtype", [((HUGE_MIN // 8,), np.int64), ((1 << 16, 4), np.float64),
                                         ((3 * HUGE + 5,), np.uint8), (((1 << 17) + 3, 5), np.float64)])
def test_large_arrays_are_aligned_private_mappings_that_behave_like_np_empty(shape, dtype):
    a = huge_empty(shape, dtype)
    assert a.shape == shape and a.dtype == np.dtype(dtype) and a.flags.c_contiguous and a.flags.writeable
    if pages._CAN_HUGE:
        assert isinstance(_root(a), mmap.mmap) and a.ctypes.data % HUGE == 0
    a[...] = 7
    assert (a == 7).all()
    b = a.copy()
    a[...] = 0
    assert (b == 7).all() and (a == 0).all()


def test_small_arrays_stay_on_ordinary_pages():
    a = huge_empty((HUGE_MIN // 8 - 1,), np.int64)
    assert not isinstance(_root(a), mmap.mmap)
    assert huge_empty(0, np.float64).shape == (0,)


@pytest.mark.skipif(not pages._CAN_HUGE, reason="no MADV_HUGEPAGE here")
def test_mapping_lives_as_long_as_a_view_of_it():
    a = huge_empty((1 << 18,), np.float64)
    a[:] = np.arange(a.shape[0])
    ref = weakref.ref(_root(a))
    view = a[5:10]
    del a
    gc.collect()
    assert ref() is not None and list(view) == [5.0, 6.0, 7.0, 8.0, 9.0]
    del view
    gc.collect()
    assert ref() is None   # unmapped once nothing refers to it


def _thp_mode() -> str:
    p = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if not p.exists():
        return "never"
    text = p.read_text()
    return text[text.index("[") + 1:text.index("]")]


@pytest.mark.skipif(not pages._CAN_HUGE or _thp_mode() == "never", reason="transparent huge pages are off here")
def test_written_array_sits_on_huge_pages():
    a = huge_empty((HUGE // 8 * 2,), np.float64)   # two huge pages
    a[:] = 1.0
    start = a.ctypes.data
    huge_kb = 0
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(x, 16) for x in head.split("-"))
            if lo <= start < hi:
                for follow in lines[i + 1:]:
                    if follow.startswith("AnonHugePages:"):
                        huge_kb = int(follow.split()[1])
                        break
                break
    if huge_kb == 0:
        pytest.skip("the kernel gave no huge page (memory fragmented?): nothing to check here")
    assert huge_kb >= 2 * HUGE // 1024


def test_helper_runs_jobs_in_order_and_hands_errors_to_join():
    h = Helper()
    seen: list[int] = []
    jobs = [h.submit(seen.append, i) for i in range(50)]
    for j in jobs:
        j.join()
    assert seen == list(range(50)) and all(j.done for j in jobs)
    bad = h.submit(int, "not a number")
    with pytest.raises(ValueError):
        bad.join()
    h.submit(seen.append, 50).join()   # the thread survived the error
    assert seen[-1] == 50


def test_one_helper_per_process_and_a_new_one_after_fork():
    assert helper() is helper()
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its helper must be a new, running thread
        try:
            done = threading.Event()
            helper().submit(done.set).join()
            os.write(write, b"ok" if done.is_set() else b"no")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if done[0] == 0:   # a child stuck (it forked a threaded process): never hang the suite
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child did not finish within 60 s")
    assert os.read(read, 2) == b"ok" and done[1] == 0
    os.close(read)


def test_cancel_or_join_takes_back_a_job_not_started_and_waits_for_one_running():
    h = Helper()
    gate, running = threading.Event(), threading.Event()

    def blocker():
        running.set()
        gate.wait()
    first = h.submit(blocker)
    ran: list[int] = []
    second = h.submit(ran.append, 2)
    running.wait()
    assert second.cancel_or_join() is True      # queued behind the blocker: never runs
    gate.set()
    assert first.cancel_or_join() is False      # was running: waited for
    h.submit(ran.append, 3).join()
    assert ran == [3] and second.done and first.done


def test_cpu_time_counts_the_work_the_helper_did():
    """Helper.cpu_time: the helper thread's own CPU clock (bench.e2e_trace adds it to a run's
    cost), which grows by the work of its jobs and not by the caller's."""
    h = Helper()
    h.submit(lambda: None).join()   # (the thread has started)
    before = h.cpu_time()
    end = time.thread_time() + 0.05
    while time.thread_time() < end:   # the caller's work: not the helper's
        pass
    assert h.cpu_time() - before < 0.03

    def spin() -> None:
        stop = time.thread_time() + 0.05
        while time.thread_time() < stop:
            pass
    h.submit(spin).join()
    assert h.cpu_time() - before >= 0.05
