"""Import in several processes for ``hivestream produce --jobs N``, in file order.

The import (decode, adapt, scrub, serialise, key) costs Python time per event; the sender is one
ordered aiokafka producer. :class:`ImportPool` runs the import in ``N`` forked worker processes
and hands the parent each task's result in submission order, so the records reach the sender in
exactly the order the one-process import yields them (a key's records stay in file order):

* a hook-event JSONL file (stateless per line) is cut into byte ranges of about
  :data:`CHUNK_BYTES` at line ends, one task per range; the parent adds each range's first line
  number (the running count of the lines before it) to the offsets the task reports;
* a session file (Claude Code transcript, Codex rollout: turns span lines) is one task.

A task returns its line count, its records' keys (a list: the 256 key-group keys are shared
objects, pickled once each), its values as one bytes blob with their end offsets (one copy
through the pipe instead of an object per record; the parent hands the sender ``memoryview``
slices of it, which aiokafka's batch copies from) and its dead letters as
``(records before it, offset, original line, reason, detail, event_id)``; the parent builds the
dead-letter record (its clock stamps it) and counts, and hands the sender whole runs of records
(:func:`streams.produce.producer.hook_blocks`). At most ``2 × N`` tasks are in flight, so memory stays
bounded by the window, not by the input. Worker processes are forked when the pool starts (the
parent then holds no event loop or broker connection yet).
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import pairwise
from pathlib import Path
from types import TracebackType

from streams.importers.files import CHUNK_BYTES, detect_format, import_file, read_lines, split_lines
from streams.importers.ordered_pool import AUTO_MIN_BYTES, auto_jobs, die_with_parent  # noqa: F401 (produce's default, re-exported)
from streams.model.deadletter import RejectedInput
from streams.produce.encode import ItemRejected, encode_items
from streams.produce.fast_records import encode_lines
from streams.redaction.redact import RedactionMode

Task = tuple[str, str, int, int, bool, RedactionMode]
"""(path, format, first byte, end byte or -1 for the whole file, gateway, privacy mode)."""
Dead = tuple[int, int, bytes, str, str, str]
"""(records of the task before it, line offset, original bytes, reason, detail, event_id) of a dead letter."""
TaskResult = tuple[int, list[bytes], bytes, list[int], list[Dead]]
"""(line count or 0 for a whole file, record keys, record values concatenated, each value's end
offset in that blob, dead letters) of one task."""


def byte_ranges(path: Path, chunk: int = CHUNK_BYTES) -> list[tuple[int, int]]:
    """``[start, end)`` byte ranges of ``path`` of about ``chunk`` bytes, each ending at a line end.

    Raises:
        OSError: when the file cannot be read.
    """
    size = path.stat().st_size
    bounds = [0]
    with path.open("rb") as f:
        while bounds[-1] + chunk < size:
            f.seek(bounds[-1] + chunk)
            f.readline()  # to the end of the line the cut falls in
            pos = f.tell()
            if pos >= size:
                break
            bounds.append(pos)
    bounds.append(size)
    return list(pairwise(bounds))


def run_task(task: Task) -> TaskResult:
    """Import one task (in a worker process): its line count (0 for a whole file), the ``hook-events``
    records' keys and values in import order (see :data:`TaskResult`), and its dead letters (see :data:`Dead`).

    Raises:
        OSError: when the file cannot be read.
    """
    path, fmt, start, end, gateway, mode = task
    if end < 0:
        encoded = encode_items(import_file(Path(path), gateway=gateway, fmt=fmt)[1], mode)
        n_lines = 0
    else:
        with open(path, "rb") as f:
            f.seek(start)
            lines = split_lines(f.read(end - start))
        encoded = encode_lines(lines, mode)
        n_lines = len(lines)
    keys: list[bytes] = []
    values: list[bytes] = []
    ends: list[int] = []
    dead: list[Dead] = []
    add_key, add_value, add_end = keys.append, values.append, ends.append
    end = 0
    for off, raw, rec in encoded:
        if type(rec) is tuple:
            add_key(rec[0])
            add_value(rec[1])
            end += len(rec[1])
            add_end(end)
        else:
            assert isinstance(rec, ItemRejected)
            dead.append((len(keys), off, raw, str(rec.err.reason), rec.err.detail, rec.event_id))
    return n_lines, keys, b"".join(values), ends, dead




def _ready() -> int:
    return 0


class ImportPool:
    """``jobs`` import processes; use as a context manager, then :meth:`outcomes` per file.

    Args:
        jobs: worker processes (at least 1).

    Raises:
        ValueError: when ``jobs`` < 1.
    """

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise ValueError("jobs must be >= 1")
        self.jobs = jobs
        methods = multiprocessing.get_all_start_methods()
        ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        self._ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=die_with_parent)

    def __enter__(self) -> ImportPool:
        for f in [self._ex.submit(_ready) for _ in range(self.jobs)]:
            f.result()  # every worker is up before the caller opens sockets or an event loop
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self._ex.shutdown(wait=True, cancel_futures=True)

    def results(self, paths: list[Path], gateway: bool, mode: RedactionMode, formats: dict[str, str]) -> Iterator[tuple[Path, TaskResult]]:
        """Each task's result for ``paths`` in import order, with its file; dead-letter offsets are absolute.

        Args:
            paths: the input files, in order.
            gateway: also emit the OpenClaw gateway's double capture (session files).
            mode: the privacy mode KnowHub-relevant events are scrubbed with.
            formats: filled with path → detected format as files are reached.

        Raises:
            OSError: when a file cannot be read (from the worker that read it).
        """
        pending: deque[tuple[int, Path, Future[TaskResult]]] = deque()
        base: dict[int, int] = {}  # the lines before the next range, per file (by its place in paths)

        def drain(limit: int) -> Iterator[tuple[Path, TaskResult]]:
            while len(pending) > limit:
                i, path, fut = pending.popleft()
                n_lines, keys, blob, ends, dead = fut.result()
                first = base.pop(i, 0)
                base[i] = first + n_lines
                if first and dead:
                    dead = [(pos, off + first, raw, reason, detail, eid) for pos, off, raw, reason, detail, eid in dead]
                yield path, (n_lines, keys, blob, ends, dead)

        for i, path in enumerate(paths):
            fmt = detect_format(read_lines(path))
            formats[str(path)] = fmt
            ranges = byte_ranges(path) if fmt == "hook-events" else [(0, -1)]
            for start, end in ranges:
                pending.append((i, path, self._ex.submit(run_task, (str(path), fmt, start, end, gateway, mode))))
                yield from drain(2 * self.jobs)
        yield from drain(0)


def value_views(blob: bytes, ends: list[int]) -> list[memoryview]:
    """The values of a :data:`TaskResult` as ``memoryview`` slices of its blob (no copy)."""
    view = memoryview(blob)
    return [view[a:b] for a, b in zip([0, *ends], ends, strict=False)]


def as_rejection(reason: str, detail: str) -> RejectedInput:
    """The :class:`RejectedInput` a worker reported as ``(reason, detail)``."""
    from streams.model.deadletter import Reason

    return RejectedInput(Reason(reason), detail)
