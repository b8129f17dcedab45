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
:class:`~streams.model.deadletter.DeadLetter` as JSON), 2 a ``stub-events`` record (the value one
memory-stub event, :mod:`streams.stubs.events`, as JSON; the key its channel, empty for a global
stub: the key ``stubs produce`` gives it on Kafka). Since each record carries its offset, a
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
from typing import NamedTuple

from streams.ingest.spool_format import HEADER_BYTES, MAGIC, MAX_RECORD_BYTES, encode_record
from streams.model.deadletter import MAX_ORIGINAL_BYTES, DeadLetter, Reason, RejectedInput

MARKER = "hivestream-log.json"
"""The marker file that makes a directory a hook-event log."""

FORMAT = "hivestream-hook-log"
VERSION = 1
HOOK_EVENTS = 0
"""Record kind: a ``hook-events`` record."""
DEAD_LETTER = 1
"""Record kind: a ``dead-letter`` record."""
STUB_EVENTS = 2
"""Record kind: a ``stub-events`` record (a memory-stub event as JSON; key: its channel, empty for a global stub)."""
KIND_NAMES = {HOOK_EVENTS: "hook-events", DEAD_LETTER: "dead-letter", STUB_EVENTS: "stub-events"}

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
    items, _used = _scan_items(bytes(buf), base_pos, final=True)
    for it in items:
        if it.rec is None:
            out.skipped.append((it.start, it.end))
        else:
            out.records.append(it.rec)
            out.end = it.end
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
    """How far a reader may read: the segment being written, the byte where its durable part ends,
    and the offset the next record will get (``-1``: not known; a corrupt stretch just before the
    bound is then left unread rather than given offsets)."""

    base: int
    end: int
    next: int = -1


class _Item(NamedTuple):
    """A whole record (``rec``) or a stretch holding none (``rec is None``) at file bytes ``[start, end)``."""

    start: int
    end: int
    rec: LogRecord | None


class _Walk:
    """The records and corrupt stretches of one segment from a byte position on, read in chunks.

    A record whose header is plausible but whose bytes go past what was read is read whole before
    it is judged; only at the segment's end (or ``limit``) is an incomplete record a stretch.
    """

    def __init__(self, seg: Segment, pos: int, limit: int | None, chunk_bytes: int) -> None:
        self.seg, self.pos, self.limit, self.chunk = seg, pos, limit, max(chunk_bytes, HEADER_BYTES)
        self.read_bytes = 0

    def items(self) -> Iterator[_Item]:
        """Items in file order until the segment's end or ``limit``; a deleted file is an empty segment."""
        try:
            f = self.seg.path.open("rb")
        except FileNotFoundError:
            return
        with f:
            buf, at = b"", self.pos  # at: the file position of buf[0]
            eof = False
            while True:
                if not eof:
                    want = self.chunk
                    if len(buf) >= HEADER_BYTES:  # a record longer than a chunk is read whole
                        magic, length, _crc = _HEAD.unpack_from(buf, 0)
                        if magic == MAGIC and length <= MAX_RECORD_BYTES:
                            want = max(want, HEADER_BYTES + length - len(buf))
                    if self.limit is not None:
                        want = min(want, max(0, self.limit - at - len(buf)))
                    f.seek(at + len(buf))
                    more = f.read(want) if want > 0 else b""
                    self.read_bytes += len(more)
                    eof = len(more) < want or want == 0
                    buf += more
                items, used = _scan_items(buf, at, final=eof)
                yield from items
                buf, at = buf[used:], at + used
                if eof and not buf:
                    return


def _scan_items(data: bytes, base_pos: int, final: bool) -> tuple[list[_Item], int]:
    """The items of ``data`` (file position ``base_pos``) and how many of its bytes they cover. Unless
    ``final``, a plausible record cut by the end of ``data`` (and whatever follows the last record
    when no ``MAGIC`` follows it) is left for the next call."""
    out: list[_Item] = []
    pos, n = 0, len(data)
    while pos < n:
        if pos + HEADER_BYTES > n and not final:
            break
        rec, end = None, pos
        if pos + HEADER_BYTES <= n:
            magic, length, crc = _HEAD.unpack_from(data, pos)
            end = pos + HEADER_BYTES + length
            if magic == MAGIC and length <= MAX_RECORD_BYTES:
                if end > n and not final:
                    break
                if end <= n and zlib.crc32(data[pos + HEADER_BYTES:end]) == crc:
                    try:
                        rec = decode_log_payload(data[pos + HEADER_BYTES:end])
                    except ValueError:
                        rec = None
        if rec is not None:
            out.append(_Item(base_pos + pos, base_pos + end, rec))
            pos = end
            continue
        nxt = data.find(MAGIC, pos + 1)
        if nxt < 0:
            if not final:
                break
            nxt = n
        out.append(_Item(base_pos + pos, base_pos + nxt, None))
        pos = nxt
    return out, pos


class LogReader:
    """Reads a log from an offset on, following it as it grows (one cursor, kept between calls).

    A fresh cursor (or a ``start`` other than where the last call ended) is placed by walking the
    segment that holds ``start`` from its first byte, however deep ``start`` lies in it. Bytes that
    hold no whole record between two known offsets (a corrupt stretch of a sealed segment, or of
    the durable part of the segment being written) cost the offsets they held: each stretch comes
    back as a ``dead-letter`` record of reason ``corrupt_record`` at the first of its lost offsets
    (the last stretch of a run takes the rest of the run's offsets), carrying the stretch's bytes,
    so a reader never jumps over records without leaving a row, and every reader of one log
    (serve, ``run LOGDIR``, ``kb run LOGDIR``, ``produce LOGDIR``) gives the same records.
    Offsets missing between two segments (a segment file deleted by hand) come back as one such
    record with no bytes. A torn tail of a log no process writes (no ``bound``) is reported and
    left unread: it was never acknowledged, and serve dead-letters it when it next opens the log.

    Args:
        directory: the log directory.
        on_skip: called with a one-line description of every stretch dead-lettered or left unread.
    """

    def __init__(self, directory: Path, on_skip: Callable[[str], None] | None = None) -> None:
        self.dir = directory
        self.on_skip = on_skip
        self._seg: Segment | None = None
        self._pos = 0
        self._prev = -1  # the offset of the last whole record before the cursor
        self._prev_time = 0
        self._next = -1  # the offset the cursor stands before (-1: no cursor)
        self._noted: set[tuple[str, int]] = set()
        self._origin = ""

    def read(self, start: int, *, bound: Bound | None = None, max_bytes: int = 8 << 20) -> list[LogRecord]:
        """The records at offsets ``>= start``, oldest first, about ``max_bytes`` of log at most
        (at least one whole record when there is one); ``[]`` only when no record at or after
        ``start`` is readable yet.

        Args:
            start: the first offset wanted (records below it are passed over).
            bound: read no further than this (the durable end the writer published); ``None``
                reads every segment to its end (a log no process writes).
            max_bytes: stop after about this many bytes (cut at a record boundary).

        Raises:
            OSError: when a segment cannot be read (a segment deleted by retention meanwhile is
                passed over).
        """
        if (self._next != start or self._seg is None) and not self._locate(start, bound):
            return []
        out: list[LogRecord] = []
        budget = max_bytes
        gap: list[_Item] = []
        while self._seg is not None:
            seg = self._seg
            limit = None
            if bound is not None:
                if seg.base > bound.base:
                    break
                if seg.base == bound.base:
                    limit = bound.end
            walk = _Walk(seg, self._pos, limit, min(budget, 1 << 20))
            full = False
            for it in walk.items():
                if it.rec is None:
                    gap.append(it)
                    continue
                if gap:
                    out.extend(r for r in self._lost(gap, it.rec.offset, it.rec.time_ms) if r.offset >= start)
                    gap = []
                if it.rec.offset >= start:
                    out.append(it.rec)
                self._prev, self._prev_time, self._pos = it.rec.offset, it.rec.time_ms, it.end
                budget -= it.end - it.start
                if budget <= 0:
                    full = True
                    break
            if full:
                break
            if limit is not None:  # the durable end of the segment being written
                if gap and bound is not None and bound.next > self._prev + 1:
                    out.extend(r for r in self._lost(gap, bound.next, self._prev_time) if r.offset >= start)
                    self._pos, gap = limit, []
                break
            following = [s for s in segments(self.dir) if s.base > seg.base]
            if not following:
                for it in gap:  # a torn tail: never acknowledged; left for serve to dead-letter
                    self._note(seg, it.start, f"log segment {seg.path.name}: {it.end - it.start} bytes at byte {it.start} after "
                                              "its last whole record left unread (a torn tail: a write cut by a crash)")
                break
            nxt = following[0].base
            if gap or nxt > self._prev + 1:
                out.extend(r for r in self._lost(gap, nxt, self._prev_time) if r.offset >= start)
                gap = []
            self._seg, self._pos = following[0], 0
            self._prev = max(self._prev, nxt - 1)
        if out:
            self._next = out[-1].offset + 1
        return out

    def _lost(self, gap: list[_Item], nxt: int, nxt_time: int) -> list[LogRecord]:
        """``corrupt_record`` dead-letter records for the stretches ``gap`` (or, empty, a missing
        run) between the cursor's last record and offset ``nxt``; moves the cursor past them."""
        assert self._seg is not None
        seg = self._seg
        lo, hi = self._prev + 1, nxt - 1
        when = self._prev_time if self._prev >= 0 else nxt_time
        if gap:
            self._pos = gap[-1].end
        if hi < lo:  # bytes that held no record: nothing was lost
            for it in gap:
                self._note(seg, it.start, f"log segment {seg.path.name}: {it.end - it.start} bytes at byte {it.start} held no record; passed over")
            return []
        if not gap:
            return [self._dead_letter(lo, hi, when, b"", f"offsets {lo}..{hi} are missing from the log before segment "
                                                          f"{segment_name(nxt)} (a segment file was removed)")]
        groups = [[it] for it in gap[:hi - lo]] + [gap[hi - lo:]] if len(gap) > hi - lo else [[it] for it in gap]
        out = []
        for i, grp in enumerate(groups):
            a = lo + i
            b = hi if i == len(groups) - 1 else a
            data = self._bytes(seg, grp[0].start, grp[-1].end)
            span = f"offset {a}" if a == b else f"offsets {a}..{b}"
            detail = (f"{grp[-1].end - grp[0].start} bytes at byte {grp[0].start} of log segment {seg.path.name} hold no whole "
                      f"record (corrupt); {span} lost")
            self._note(seg, grp[0].start, detail)
            out.append(self._dead_letter(a, b, when, data, detail))
        return out

    def _dead_letter(self, first: int, last: int, time_ms: int, data: bytes, detail: str) -> LogRecord:
        if not self._origin:
            try:
                self._origin = log_origin(read_marker(self.dir))
            except (OSError, ValueError):
                self._origin = f"log:{self.dir.name}"
        dl = DeadLetter.of(RejectedInput(Reason.CORRUPT_RECORD, detail), data, self._origin, 0, first, time_ms)
        return LogRecord(first, time_ms, DEAD_LETTER, f"{dl.source}:{dl.time_ms}:{dl.offset}".encode(), dl.model_dump_json().encode())

    @staticmethod
    def _bytes(seg: Segment, a: int, b: int) -> bytes:
        try:
            with seg.path.open("rb") as f:
                f.seek(a)
                return f.read(min(b - a, MAX_ORIGINAL_BYTES))
        except FileNotFoundError:
            return b""

    def _note(self, seg: Segment, at: int, line: str) -> None:
        if self.on_skip is not None and (seg.path.name, at) not in self._noted:
            self._noted.add((seg.path.name, at))
            self.on_skip(line)

    def _locate(self, start: int, bound: Bound | None) -> bool:
        """Place the cursor just after the last whole record below ``start`` (in the segment that holds ``start``)."""
        segs = segments(self.dir)
        if not segs:
            self._seg = None
            return False
        chosen = segs[0]
        for s in segs:
            if s.base <= start:
                chosen = s
        if start < chosen.base and self.on_skip is not None:
            self.on_skip(f"offsets {start}..{chosen.base - 1} are no longer in the log (retention deleted their segments); "
                         f"reading from {chosen.base}")
        self._seg, self._pos, self._prev, self._prev_time, self._next = chosen, 0, chosen.base - 1, 0, start
        limit = bound.end if bound is not None and chosen.base == bound.base else None
        if bound is not None and chosen.base > bound.base:
            return True
        for it in _Walk(chosen, 0, limit, 1 << 20).items():
            if it.rec is None:
                continue
            if it.rec.offset >= start:
                break
            self._prev, self._prev_time, self._pos = it.rec.offset, it.rec.time_ms, it.end
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
