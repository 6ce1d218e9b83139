"""Memory for the readers' large fresh buffers: arrays on transparent huge pages, and one helper
thread that writes memory ahead of the parsing thread.

Why: a fresh process pays a page fault for every 4 KiB it writes for the first time, ~1.3-1.8 us
each on this kind of VM, so the 2.6 MB order table big/finance.csv grows into cost ~640 faults
(~0.7-1 ms, a tenth of a whole ``ddms run``).  On a transparent huge page (Linux, ``madvise`` mode)
the same 2 MiB costs one fault that clears the page (~0.15 ms measured).  Only buffers of at least
:data:`HUGE_MIN` bytes are worth it: a huge page is cleared whole, however little of it is used.

The helper thread (:func:`helper`) exists because starting a thread costs its starter 40-130 us
of CPU and, on a busy 2-core machine, milliseconds of waiting until the new thread is scheduled
(``Thread.start`` waits for it): the order-book parser's fault-ahead jobs went to a new thread
each and stalled the parsing thread that way.  One thread started before a timed run takes jobs
from a queue instead (a put costs ~1 us).
"""

from __future__ import annotations

import math
import mmap
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["HUGE", "HUGE_MIN", "Helper", "Job", "helper", "huge_empty"]

HUGE = 1 << 21
"""Bytes of a transparent huge page (x86-64, arm64 with 4 KiB pages)."""
HUGE_MIN = 1 << 20
"""The smallest array :func:`huge_empty` puts on huge pages: below it, clearing a whole 2 MiB page
costs more than the 4 KiB faults it saves (a 512 KiB array: 128 faults, ~0.2 ms, against a 2 MiB
clear, ~0.15 ms plus the slack)."""
_CAN_HUGE = hasattr(mmap, "MADV_HUGEPAGE") and hasattr(mmap, "MAP_ANONYMOUS")


def huge_empty(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array like ``np.empty(shape, dtype)``, on transparent huge
    pages when it has at least :data:`HUGE_MIN` bytes and the system offers them (private
    anonymous memory advised ``MADV_HUGEPAGE``, its start aligned to :data:`HUGE`); else
    ``np.empty``.  Its pages are touched by no one yet (like ``np.empty``).  The mapping lives as
    long as the array (or a view of it) does; it costs up to one huge page more address space than
    asked for, and the whole last huge page of memory once any of it is written.  O(1)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < HUGE_MIN or not _CAN_HUGE:
        return np.empty(shape, dtype)
    size = -(-nbytes // HUGE) * HUGE + HUGE   # room to align the start
    try:
        m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        m.madvise(mmap.MADV_HUGEPAGE)
    except (OSError, ValueError):   # no such advice here (an old kernel, THP compiled out): plain pages
        return np.empty(shape, dtype)
    raw = np.frombuffer(m, np.uint8)
    start = -raw.ctypes.data % HUGE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


_PENDING, _STARTED, _CANCELLED = 0, 1, 2


class Job:
    """A job of the :class:`Helper`: :meth:`join` waits for it (and re-raises its exception);
    :meth:`cancel_or_join` takes it back if the helper has not started it."""

    __slots__ = ("_done", "_error", "_lock", "_state")

    def __init__(self) -> None:
        # a held lock, released once the job is over: cheaper than threading.Event (whose set and
        # wait run Python code under the GIL, which the parsing and applying threads want too)
        self._done = threading.Lock()
        self._done.acquire()
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._state = _PENDING

    def join(self) -> None:
        with self._done:
            pass
        if self._error is not None:
            raise self._error

    def cancel_or_join(self) -> bool:
        """True if the helper had not started the job: it never will, and the caller does
        without it or does the work itself.  Else wait for it to finish (as :meth:`join`) and
        return False.  Why: on a loaded machine the helper may wait milliseconds for a core, and
        a thread that needs the work now should not wait for it to be scheduled, only for work
        already running."""
        with self._lock:
            if self._state == _PENDING:
                self._state = _CANCELLED
                self._done.release()
                return True
        self.join()
        return False

    def _start(self) -> bool:   # (the helper: whether to run it)
        with self._lock:
            if self._state == _CANCELLED:
                return False
            self._state = _STARTED
            return True

    @property
    def done(self) -> bool:
        return not self._done.locked()


class Helper:
    """One daemon thread running submitted calls in order.  Meant for work that releases the GIL
    (numba ``nogil`` kernels writing memory ahead of the parsing thread).  ``submit`` costs a
    queue put; the thread blocks on the queue between jobs (no CPU)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="ddms-helper", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            fn, args, job = self._jobs.get()
            if not job._start():
                continue
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to whoever joins the job
                job._error = e
            job._done.release()

    def cpu_time(self) -> float:
        """CPU seconds the helper thread has used so far (its own clock, like ``time.thread_time``
        on it): what a benchmark adds to a run's cost for the work it moved here
        (:mod:`bench.e2e_trace`).  O(1); 0.0 where a thread's clock cannot be read (not Unix)."""
        ident = self._thread.ident
        if ident is None or not hasattr(time, "pthread_getcpuclockid"):
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(ident))

    def submit(self, fn: Callable[..., Any], *args: Any) -> Job:
        job = Job()
        self._jobs.put((fn, args, job))
        return job


_helper: Helper | None = None
_helper_lock = threading.Lock()


def helper() -> Helper:
    """The process's :class:`Helper`, started on first use (``ddms run`` starts it before its
    clock, through :func:`ddms.runtime.driver.warm`).  A forked child starts its own."""
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = Helper()
        return _helper


def _forget_helper() -> None:   # the thread does not exist in a forked child (nor does a holder of the lock)
    global _helper, _helper_lock
    _helper, _helper_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helper)
