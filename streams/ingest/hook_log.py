"""The local hook-event log of ``hivestream serve``: its on-disk format and its reader (pure but for
reading files).

A log is a directory holding a marker file (:data:`MARKER`, JSON ``{"format", "version",
"log_id"}``) and segment files ``<base offset, 20 digits>.hlog``, each a run of the spool's
checksummed records (:mod:`streams.ingest.spool_format`: ``MAGIC | length | crc32 | payload``).
The payload of one log record is ``offset (u64 BE) | time_ms (i64 BE) | kind (u8) | key length
(u32 BE) | key | value``: its place in the log (0-based, one sequence over every segment, the
first one in the file name), the server's clock when it was appended (epoch ms), and the Kafka
record it stands for: ``kind`` 0 is a ``hook-events`` record (the value is the serialised
:class:`~streams.model.events.HookEvent` the ingest server would produce, the key its
:func:`streams.produce.keys.hook_event_key`), 1 a ``dead-letter`` record (the value a
:class:`~streams.model.deadletter.DeadLetter` as JSON). Since each record carries its offset, a
stretch skipped as torn or corrupt shifts no other record's offset.

The design follows Kafka's own log (segments named by base offset, records with offset and
timestamp, recovery by truncating a torn tail), with the spool's framing.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams.ingest.spool_format import HEADER_BYTES, MAGIC, MAX_RECORD_BYTES, encode_record

MARKER = "hivestream-log.json"
"""The marker file that makes a directory a hook-event log."""

FORMAT = "hivestream-hook-log"
VERSION = 1
HOOK_EVENTS = 0
"""Record kind: a ``hook-events`` record."""
DEAD_LETTER = 1
"""Record kind: a ``dead-letter`` record."""
KIND_NAMES = {HOOK_EVENTS: "hook-events", DEAD_LETTER: "dead-letter"}

_SEG = re.compile(r"^(\d{20})\.hlog$")
_HEAD = struct.Struct(">4sII")
_META = struct.Struct(">QqBI")  # offset, time_ms, kind, key length


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of the log: offset, append time (epoch ms), kind, Kafka key and value."""

    offset: int
    time_ms: int
    kind: int
    key: bytes
    value: bytes


@dataclass(frozen=True, slots=True)
class Segment:
    """A segment file: its base offset (the offset of its first record) and path."""

    base: int
    path: Path


@dataclass
class Scan:
    """What :func:`scan` found in a buffer.

    Attributes:
        records: the whole, checksummed records in order.
        skipped: ``(start, end)`` byte ranges that held no valid record (torn or corrupt).
        end: the byte just after the last valid record (0 when there is none); what follows it
            is a torn tail when it is not the buffer's end.
    """

    records: list[LogRecord] = field(default_factory=list)
    skipped: list[tuple[int, int]] = field(default_factory=list)
    end: int = 0


def segment_name(base: int) -> str:
    """The file name of the segment whose first record has offset ``base``."""
    return f"{base:020d}.hlog"


def encode_log_record(offset: int, time_ms: int, kind: int, key: bytes, value: bytes) -> bytes:
    """One framed log record (see the module docstring).

    Raises:
        ValueError: for an unknown ``kind`` or a record over the spool format's size limit.
    """
    if kind not in KIND_NAMES:
        raise ValueError(f"unknown log record kind {kind}")
    return encode_record(_META.pack(offset, time_ms, kind, len(key)) + key + value)


def decode_log_payload(payload: bytes) -> LogRecord:
    """The :class:`LogRecord` in a checksummed payload.

    Raises:
        ValueError: when the payload is shorter than its lengths say or has an unknown kind.
    """
    if len(payload) < _META.size:
        raise ValueError("log record too short")
    offset, time_ms, kind, kl = _META.unpack_from(payload, 0)
    if kind not in KIND_NAMES or len(payload) < _META.size + kl:
        raise ValueError("log record with an unknown kind or too short for its key")
    start = _META.size
    return LogRecord(offset, time_ms, kind, payload[start:start + kl], payload[start + kl:])


def scan(buf: bytes | memoryview, base_pos: int = 0) -> Scan:
    """Walk ``buf`` record by record; invalid stretches are skipped up to the next ``MAGIC``.

    Args:
        buf: bytes of a segment from a record boundary on.
        base_pos: the file position of ``buf[0]`` (the byte ranges and ``end`` are file positions).
    """
    out = Scan(end=base_pos)
    data = bytes(buf)
    pos, n = 0, len(data)
    while pos < n:
        rec = None
        if pos + HEADER_BYTES <= n:
            magic, length, crc = _HEAD.unpack_from(data, pos)
            end = pos + HEADER_BYTES + length
            if magic == MAGIC and length <= MAX_RECORD_BYTES and end <= n:
                payload = data[pos + HEADER_BYTES:end]
                if zlib.crc32(payload) == crc:
                    try:
                        rec = decode_log_payload(payload)
                    except ValueError:
                        rec = None
        if rec is not None:
            out.records.append(rec)
            pos = end
            out.end = base_pos + pos
            continue
        nxt = data.find(MAGIC, pos + 1)
        nxt = n if nxt < 0 else nxt
        out.skipped.append((base_pos + pos, base_pos + nxt))
        pos = nxt
    return out


def is_log_dir(path: Path) -> bool:
    """True when ``path`` is a directory holding a hook-event log's marker."""
    return path.is_dir() and (path / MARKER).is_file()


def read_marker(directory: Path) -> str:
    """The log id in ``directory``'s marker.

    Raises:
        ValueError: when the marker is not a hook-event log marker of a version this code reads.
        OSError: when it cannot be read.
    """
    try:
        meta = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{directory / MARKER} is not JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("log_id"), str):
        raise ValueError(f"{directory / MARKER} is not a hivestream hook-event log marker")
    if meta.get("version") != VERSION:
        raise ValueError(f"{directory} is a hook-event log of version {meta.get('version')!r}; this version reads {VERSION}")
    return str(meta["log_id"])


def log_origin(log_id: str) -> str:
    """The input name a log's positions, captures and dead letters are stored under: ``log:<id>``
    (the same wherever the directory is copied, so ``run`` over a copy gives the same tables)."""
    return f"log:{log_id}"


def segments(directory: Path) -> list[Segment]:
    """The segment files of a log, by base offset.

    Raises:
        OSError: when the directory cannot be listed.
    """
    out = []
    for p in directory.iterdir():
        m = _SEG.match(p.name)
        if m:
            out.append(Segment(int(m.group(1)), p))
    return sorted(out, key=lambda s: s.base)


@dataclass(frozen=True, slots=True)
class Bound:
    """How far a reader may read: the segment being written and the byte where its durable part ends."""

    base: int
    end: int


class LogReader:
    """Reads a log from an offset on, following it as it grows (one cursor, kept between calls).

    Args:
        directory: the log directory.
        on_skip: called with a one-line description of every stretch skipped as torn or corrupt.
    """

    def __init__(self, directory: Path, on_skip: Callable[[str], None] | None = None) -> None:
        self.dir = directory
        self.on_skip = on_skip
        self._seg: Segment | None = None
        self._pos = 0
        self._next = -1  # the offset the cursor stands before (-1: no cursor)

    def read(self, start: int, *, bound: Bound | None = None, max_bytes: int = 8 << 20) -> list[LogRecord]:
        """The records at offsets ``>= start``, oldest first, about ``max_bytes`` of log at most
        (at least one whole record when there is one).

        Args:
            start: the first offset wanted (records below it are passed over).
            bound: read no further than this (the durable end the writer published); ``None``
                reads every segment to its end (a log no process writes: a torn tail is skipped
                and reported).
            max_bytes: stop after about this many bytes (cut at a record boundary).

        Raises:
            OSError: when a segment cannot be read (a segment deleted by retention meanwhile is
                passed over).
        """
        if (self._next != start or self._seg is None) and not self._locate(start):
            return []
        out: list[LogRecord] = []
        budget = max_bytes
        while budget > 0 and self._seg is not None:
            seg = self._seg
            limit = None
            if bound is not None:
                if seg.base > bound.base:
                    break
                if seg.base == bound.base:
                    limit = bound.end
            data, at_end = self._read_from(seg, limit, budget)
            sc = scan(data, self._pos)
            cut = not at_end and bool(sc.skipped) and sc.skipped[-1][1] == self._pos + len(data)
            for a, b in sc.skipped[:-1] if cut else sc.skipped:  # a record cut by the budget is read next time
                if self.on_skip:
                    self.on_skip(f"log segment {seg.path.name}: {b - a} bytes at byte {a} skipped (torn or corrupt)")
            out.extend(r for r in sc.records if r.offset >= start)
            self._pos = sc.skipped[-1][0] if cut else self._pos + len(data)
            budget -= len(data)
            if not at_end:
                continue
            if limit is not None:  # the segment being written: its durable part is read
                break
            following = [s for s in segments(self.dir) if s.base > seg.base]
            if not following:
                break
            self._seg, self._pos = following[0], 0
        if out:
            self._next = out[-1].offset + 1
        return out

    def _read_from(self, seg: Segment, limit: int | None, budget: int) -> tuple[bytes, bool]:
        """Bytes of ``seg`` from the cursor on (at least the whole record there) and whether they
        reach the segment's end (or ``limit``)."""
        try:
            with seg.path.open("rb") as f:
                f.seek(self._pos)
                head = f.read(HEADER_BYTES)
                want = budget
                if len(head) == HEADER_BYTES:
                    magic, length, _crc = _HEAD.unpack(head)
                    if magic == MAGIC and length <= MAX_RECORD_BYTES:
                        want = max(want, HEADER_BYTES + length)
                if limit is not None:
                    want = min(want, max(0, limit - self._pos))
                f.seek(self._pos)
                data = f.read(want) if want > 0 else b""
        except FileNotFoundError:
            return b"", True
        if limit is not None:
            return data, self._pos + len(data) >= limit
        return data, len(data) < want or want == 0

    def _locate(self, start: int) -> bool:
        segs = segments(self.dir)
        if not segs:
            self._seg = None
            return False
        chosen = segs[0]
        for s in segs:
            if s.base <= start:
                chosen = s
        self._seg, self._pos, self._next = chosen, 0, start
        return True


def read_chunks(directory: Path, start: int = 0, on_skip: Callable[[str], None] | None = None,
                chunk_bytes: int = 8 << 20) -> Iterator[list[LogRecord]]:
    """Every record of a log no process writes, from ``start`` on, in chunks (lists, oldest
    first) of about ``chunk_bytes``.

    Raises:
        OSError: when a segment cannot be read.
    """
    reader = LogReader(directory, on_skip)
    nxt = start
    while True:
        recs = reader.read(nxt, max_bytes=chunk_bytes)
        if not recs:
            return
        nxt = recs[-1].offset + 1
        yield recs
