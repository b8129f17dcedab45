"""A process pool that returns its tasks' results in submission order, with bounded work in flight.

The import of a file (JSON parsing, adapting, hashing) costs Python time per event, and one
Python process runs on one core. :class:`OrderedPool` runs a pure task function in ``jobs``
forked worker processes and yields the results in the order the tasks were submitted, so a
caller that needs log order (the dedup core reads a key group's captures in file order) gets
exactly the sequence one process would have produced. At most ``ahead × jobs`` tasks are
submitted and not yet consumed, so memory is bounded by the tasks' size, not by the input.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


AUTO_MIN_BYTES = 4_194_304
"""Below this much input (bytes, all files) ``produce`` and ``run`` import in their own process by default."""


def auto_jobs(paths: Sequence[Path], cores: int | None = None) -> int:
    """The default ``--jobs`` of ``produce`` and ``run``: one import process per usable core when
    there are at least two cores and ``paths`` hold at least :data:`AUTO_MIN_BYTES`, else 0 (import
    in the sending or deduplicating process; forking would cost more than it saves).

    On 2 cores the pool imports the generated 200,000-event backlog faster than one process does
    (``produce`` with the broker beside it, ``run`` alone; bench/RESULTS.md); the records, their
    order and the tables are the same.

    Args:
        paths: the input files.
        cores: usable cores; default: this process's CPU affinity.

    Raises:
        OSError: when a file cannot be stat'ed.
    """
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if cores < 2 or sum(p.stat().st_size for p in paths) < AUTO_MIN_BYTES:
        return 0
    return cores


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent() -> None:
    """Process-pool initializer: end this worker when the process that forked it dies.

    A parent killed with ``kill -9`` (or ended by SIGTERM's default action) runs no clean-up, and
    its pool's workers would wait on their pipes forever, adopted by init. Linux's
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` has the kernel kill the worker when its parent goes; the
    parent's pid is checked after the call in case it died in between. Elsewhere this does nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(1)


def _ready() -> int:
    return 0


class OrderedPool(Generic[T, R]):
    """``jobs`` worker processes running ``fn``; use as a context manager, then :meth:`map`.

    Args:
        fn: a module-level (picklable) function of one task; it runs in a worker process.
        jobs: worker processes (at least 1).
        ahead: tasks in flight per worker (at least 1).

    Raises:
        ValueError: when ``jobs`` or ``ahead`` < 1.
    """

    def __init__(self, fn: Callable[[T], R], jobs: int, *, ahead: int = 2) -> None:
        if jobs < 1 or ahead < 1:
            raise ValueError("jobs and ahead must be >= 1")
        self.fn = fn
        self.jobs = jobs
        self.limit = jobs * ahead
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=die_with_parent)

    def __enter__(self) -> OrderedPool[T, R]:
        for f in [self._ex.submit(_ready) for _ in range(self.jobs)]:
            f.result()  # every worker is forked before the caller opens files, sockets or event loops
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._ex.shutdown(wait=True, cancel_futures=True)

    def map(self, tasks: Iterable[T]) -> Iterator[R]:
        """``fn(task)`` for each task, in the order of ``tasks``.

        Raises:
            Exception: whatever ``fn`` raised for the first failing task, when its turn comes.
        """
        pending: deque[Future[R]] = deque()
        for task in tasks:
            pending.append(self._ex.submit(self.fn, task))
            while len(pending) > self.limit:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
