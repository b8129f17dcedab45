"""A process pool that returns its tasks' results in submission order, with bounded work in flight.

The import of a file (JSON parsing, adapting, hashing) costs Python time per event, and one
Python process runs on one core. :class:`OrderedPool` runs a pure task function in ``jobs``
forked worker processes and yields the results in the order the tasks were submitted, so a
caller that needs log order (the dedup core reads a key group's captures in file order) gets
exactly the sequence one process would have produced. At most ``ahead × jobs`` tasks are
submitted and not yet consumed, so memory is bounded by the tasks' size, not by the input.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from types import TracebackType
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


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
        self._ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)

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
