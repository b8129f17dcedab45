"""The KnowHub CLI's own event log ``<db>.kb-events.jsonl``: where ``kb submit|approve|reject``
put an event for a file no serve holds, and from where it is applied at once (and replayed by
``kb run``).

The log's position in the file is a line count (:func:`streams.importers.files.read_lines`), so
two things would make an event appended to it never apply, or apply glued to another: a last line
without its ``\\n`` (a write cut by a crash) and a log shorter than the position the file stored
for it (truncated, replaced, deleted). :func:`append_event` checks, appends (``fsync``) and applies
while it holds ``db`` open (DuckDB lets one writing process open a file, so no other writer of
``db`` appends meanwhile); it closes a torn last line with a ``\\n`` of its own (that line then
stands alone: dead-lettered, unless the cut fell just before its ``\\n``; the new event is a line
of its own), and refuses a shortened log
(:class:`LogShortened`, nothing appended) until it is put back or continued (:func:`continue_log`:
blank lines for the lines lost, which were all applied already).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from hivestream.embedded.experiences import ExperienceRunner, file_origin
from projections.experiences.projection import ExperienceProjection
from streams.experiences.settings import ExperienceSettings
from streams.importers.files import read_lines

CHUNK = 1 << 20
"""Bytes read at a time when the log's lines are counted."""


def event_log(db: Path) -> Path:
    """The KnowHub CLI's event log of ``db``: ``<db>.kb-events.jsonl`` beside it."""
    return db.with_name(db.name + ".kb-events.jsonl")


class CannotOpen(Exception):
    """``db`` cannot be opened for writing (another process holds it, or DuckDB's reason); nothing
    was appended. One line: DuckDB's first."""


class LogShortened(Exception):
    """The log holds fewer lines than the file has applied of it; one line saying how to go on."""


class NotApplied(Exception):
    """The event was appended but the file's position for the log did not move past it (one line)."""


@dataclass(frozen=True)
class Appended:
    """An event appended and applied: the log, its line number (from 0), and the length in bytes
    of a torn last line closed before it (0: there was none)."""

    log: Path
    line: int
    torn_bytes: int


def scan(fd: int) -> tuple[int, int]:
    """``(lines, torn bytes)`` of the open file ``fd``: its line count as
    :func:`~streams.importers.files.read_lines` counts (a last line without ``\\n`` counts), and
    the length of that last line when it has no ``\\n`` (0 otherwise).

    Raises:
        OSError: when it cannot be read.
    """
    newlines, size, last_nl = 0, 0, -1
    while chunk := os.pread(fd, CHUNK, size):
        n = chunk.count(b"\n")
        if n:
            newlines += n
            last_nl = size + chunk.rindex(b"\n")
        size += len(chunk)
    torn = size - last_nl - 1
    return newlines + (1 if torn else 0), torn


@contextmanager
def _opened(log: Path) -> Iterator[int]:
    fd = os.open(log, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        yield fd
    finally:
        os.close(fd)


def _shortened(log: Path, db: Path, lines: int | None, applied: int) -> LogShortened:
    held = "is gone" if lines is None else f"holds {lines} line{'' if lines == 1 else 's'}"
    return LogShortened(f"{log} {held} but {db} has applied {applied} lines of it (the log was truncated, replaced "
                        f"or deleted), so an event appended now would never apply: put the log back, or continue it after line "
                        f"{applied} with `hivestream kb repair-log --db {db}`")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def append_event(db: Path, line: bytes, settings: ExperienceSettings | None = None) -> Appended:
    """Append one KnowHub event line (JSON, no ``\\n``) to ``db``'s log and apply the log to ``db``.

    Raises:
        CannotOpen: another process holds ``db`` (nothing appended).
        LogShortened: the log is shorter than what ``db`` applied of it (nothing appended).
        NotApplied: appended, but ``db``'s position did not move past it.
        duckdb.Error: the batch could not be written (the event stays in the log for ``kb run``).
        OSError: the log cannot be read or written.
    """
    log = event_log(db)
    origin = file_origin(log)
    try:
        opened = ExperienceProjection(db)  # before the log is touched: a held file refuses with nothing appended
    except duckdb.IOException as e:
        raise CannotOpen(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    with opened as sink:
        applied = sink.position(origin)
        if applied and not log.exists():
            raise _shortened(log, db, None, applied)
        with _opened(log) as fd:
            lines, torn = scan(fd)
            if lines < applied:
                raise _shortened(log, db, lines, applied)
            _write_all(fd, (b"\n" if torn else b"") + line + b"\n")
            os.fsync(fd)
            ExperienceRunner(sink, settings or ExperienceSettings()).run_lines(origin, enumerate(read_lines(log)))
            if sink.position(origin) <= lines:
                raise NotApplied(f"the event is line {lines} of {log} but {db} applied only {sink.position(origin)} lines of it")
    return Appended(log, lines, torn)


def continue_log(db: Path) -> tuple[int, int]:
    """Pad ``db``'s log with blank lines up to the position ``db`` stored for it (the lines lost were
    all applied, so nothing is applied twice or skipped); ``(blank lines added, position)``.

    Raises:
        duckdb.IOException: another process holds ``db``.
        OSError: the log cannot be read or written.
    """
    log = event_log(db)
    with ExperienceProjection(db) as sink:
        applied = sink.position(file_origin(log))
        if not applied:
            return 0, 0
        with _opened(log) as fd:
            lines, torn = scan(fd)
            missing = max(0, applied - lines)
            if missing:
                _write_all(fd, (b"\n" if torn else b"") + b"\n" * missing)
                os.fsync(fd)
    return missing, applied
