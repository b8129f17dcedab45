"""Stub event logs: JSONL files of stub events, read into positioned :class:`LogEntry` items.

A log line is one JSON stub event (see :mod:`streams.stubs.events`); its position is
``(source, offset)`` with ``offset`` the 0-based line number. Blank lines are skipped (their
line numbers still count). A line that does not parse becomes a :class:`RejectedInput` entry,
never an exception, so one bad line never stops a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from streams.model.deadletter import RejectedInput
from streams.stubs.events import MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted, parse_stub_event

StubEventT = StubUpserted | StubRefreshed | StubDeleted | MessageEmbedded | StubMatched
"""Any of the five stub event types."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One positioned log item.

    Attributes:
        source: the input it came from (e.g. ``file:/abs/path.jsonl``).
        offset: its position in ``source`` (0-based line number for a file).
        raw: the original bytes (kept for dead letters).
        item: the parsed event, or the :class:`RejectedInput` that says why it did not parse.
    """

    source: str
    offset: int
    raw: bytes
    item: StubEventT | RejectedInput


def source_name(path: Path) -> str:
    """The position key of a log file: ``file:`` plus its absolute path."""
    return f"file:{path.resolve()}"


def read_log(path: Path) -> Iterator[LogEntry]:
    """Read a JSONL stub log lazily, one :class:`LogEntry` per non-blank line.

    Raises:
        OSError: when the file cannot be read (bad lines never raise).
    """
    src = source_name(path)
    with path.open("rb") as fh:
        for n, line in enumerate(fh):
            raw = line.rstrip(b"\r\n")
            if not raw.strip():
                continue
            try:
                yield LogEntry(src, n, raw, parse_stub_event(raw))
            except RejectedInput as e:
                yield LogEntry(src, n, raw, e)


def entries(items: Iterable[StubEventT | RejectedInput | LogEntry], source: str = "") -> Iterator[LogEntry]:
    """Positioned entries from a mix of bare events and entries (a bare item's offset = its index).

    Bare events get ``raw`` = their JSON; a bare :class:`RejectedInput` gets ``raw`` = ``b""``.
    """
    for n, it in enumerate(items):
        if isinstance(it, LogEntry):
            yield it
        elif isinstance(it, RejectedInput):
            yield LogEntry(source, n, b"", it)
        else:
            yield LogEntry(source, n, it.model_dump_json().encode(), it)


def write_log(path: Path, events: Iterable[StubEventT]) -> int:
    """Write ``events`` as JSONL (one event per line, replacing the file); returns the count.

    Raises:
        OSError: when the file cannot be written.
    """
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(ev.model_dump_json() + "\n")
            n += 1
    return n
