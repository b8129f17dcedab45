"""The writer of ``hivestream serve``'s local hook-event log (format: :mod:`streams.ingest.hook_log`).

One process owns a log directory (an exclusive ``flock`` on ``<dir>/.lock``; a second one refuses
to start). :meth:`HookLog.append` writes a group of requests' records with one ``write`` and one
``fsync`` (``F_FULLFSYNC`` on macOS, where ``fsync`` does not reach the platter) and only then
publishes the new durable end (:meth:`HookLog.durable`), which is as far as the dedup loop reads:
nothing reaches DuckDB before it is on disk in the log. A failed write or fsync (a full disk) is
truncated back to the last durable byte, so the log never holds a record no one was promised and
no offset twice; until the truncation succeeds every append fails.

On open, the tail of the last segment is checked: bytes after its last whole record (a write cut
by a crash or a power loss, never acknowledged) are cut off and handed to the caller
(:attr:`HookLog.torn`) to dead-letter, and appends continue after the last whole record. The log is
bounded (``max_bytes``: past it :class:`LogFull`, a 503); :meth:`HookLog.apply_retention` deletes the
oldest sealed segments that every pipeline has applied once they pass a size or an age.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from hivestream.ingest.refusal import SinkFull
from streams.ingest.fsync import fsync_dir
from streams.ingest.hook_log import FORMAT, MARKER, VERSION, Bound, Segment, encode_log_record, read_marker, scan, segment_name, segments

log = logging.getLogger("hivestream.serve")

Entry = tuple[int, bytes, bytes]
"""(kind, key, value) of one record to append (kinds: :data:`streams.ingest.hook_log.HOOK_EVENTS`, ``DEAD_LETTER``, ``STUB_EVENTS``)."""


class LogFull(SinkFull):
    """The log would pass its byte bound (``--log-max-bytes``): 503 with ``Retry-After``."""

    reason = "log_full"


class LogBusy(RuntimeError):
    """Another process holds the log directory."""


@dataclass(frozen=True)
class Retention:
    """How much applied log to keep (``None``: no limit). Sealed segments past ``max_bytes`` in total
    or whose last write is older than ``max_age_ms`` go, oldest first, once every pipeline has applied them."""

    max_bytes: int | None = None
    max_age_ms: int | None = None


@dataclass(frozen=True)
class Torn:
    """Bytes cut off a segment's tail at open: the segment's name, where they started, the bytes."""

    segment: str
    at: int
    data: bytes


def _sync(fd: int) -> None:
    if sys.platform == "darwin":  # fsync leaves the data in the drive's cache on macOS
        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def ensure_marker(directory: Path) -> str:
    """The log id of ``directory``, writing a new marker (atomically) when there is none.

    Raises:
        ValueError: when the marker exists but is no hook-event log marker of this version.
        OSError: when it cannot be read or written.
    """
    if (directory / MARKER).exists():
        return read_marker(directory)
    log_id = uuid.uuid4().hex
    tmp = directory / f".{MARKER}.tmp"
    tmp.write_text(json.dumps({"format": FORMAT, "version": VERSION, "log_id": log_id}) + "\n", encoding="utf-8")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        _sync(fd)
    finally:
        os.close(fd)
    tmp.replace(directory / MARKER)
    fsync_dir(directory)
    return log_id


class HookLog:
    """The single writer of one log directory.

    Args:
        directory: the log directory (created with mode 0700).
        max_bytes: bound on the bytes of all segments (appends past it raise :class:`LogFull`).
        segment_bytes: a segment is sealed (a new one started) once it is this large.

    Raises:
        LogBusy: another process holds the directory.
        ValueError: the directory holds a marker of something else or another version.
        OSError: the directory cannot be created, locked, read or repaired.
    """

    def __init__(self, directory: Path, *, max_bytes: int = 8 << 30, segment_bytes: int = 16 << 20) -> None:
        self.dir = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            os.close(self._lock_fd)
            raise LogBusy(f"{directory} is held by another hivestream serve (one process per log directory)") from e
        self.log_id = ensure_marker(directory)
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self.torn: Torn | None = None
        self.skipped_bytes = 0
        segs = segments(directory)
        self._sizes = {s.base: s.path.stat().st_size for s in segs}
        self._next = 0
        self._fd: int | None = None
        self._active: Segment | None = None
        self._size = 0  # the active segment's durable size
        self._dirty = False  # a failed write left bytes after _size
        if segs:
            self._recover(segs[-1])
        self._bound = Bound(self._active.base if self._active else self._next, self._size, self._next)

    def _recover(self, last: Segment) -> None:
        data = last.path.read_bytes()
        sc = scan(data)
        self.skipped_bytes = sum(b - a for a, b in sc.skipped if b <= sc.end)
        self._next = sc.records[-1].offset + 1 if sc.records else last.base
        if sc.end < len(data):
            self.torn = Torn(last.path.name, sc.end, data[sc.end:])
            with open(last.path, "r+b") as f:
                f.truncate(sc.end)
                _sync(f.fileno())
            log.warning("serve: log segment %s: %d torn bytes after its last whole record (a write cut by a crash or power loss, "
                        "never acknowledged) were cut off; %d whole records kept", last.path.name, len(data) - sc.end, len(sc.records))
        self._open(last, sc.end)

    def _open(self, seg: Segment, size: int) -> None:
        self._fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._active, self._size = seg, size
        self._sizes[seg.base] = size

    @property
    def next_offset(self) -> int:
        """The offset the next record will get (records below it are durable)."""
        return self._next

    @property
    def size_bytes(self) -> int:
        """Bytes in all segments."""
        return sum(self._sizes.values())

    def durable(self) -> tuple[int, Bound]:
        """(next offset, the bound a reader may read to): everything below is fsync'd."""
        with self._cond:
            return self._next, self._bound

    def wait(self, after: int, timeout_s: float) -> int:
        """Block until the durable next offset passes ``after`` or ``timeout_s`` passes; the durable next offset."""
        with self._cond:
            self._cond.wait_for(lambda: self._next > after, timeout=timeout_s)
            return self._next

    def append(self, groups: Sequence[Sequence[Entry]], time_ms: int) -> list[int | LogFull]:
        """Append each group (one request's records) that fits the bound, with one write and one fsync.

        Returns:
            per group, its first offset, or the :class:`LogFull` that refused it (nothing of it written).

        Raises:
            OSError: the write or the fsync failed (nothing of any group is promised; the segment
                is truncated back to its last durable byte).
        """
        with self._write_lock:
            if self._dirty:
                self._truncate_back()
            if self._fd is None or self._size >= self.segment_bytes:
                self._roll()
            out: list[int | LogFull] = []
            chunks: list[bytes] = []
            nxt, total, added = self._next, self.size_bytes, 0
            for g in groups:
                data = b"".join(encode_log_record(nxt + i, time_ms, k, key, value) for i, (k, key, value) in enumerate(g))
                if total + added + len(data) > self.max_bytes:
                    out.append(LogFull(f"the log holds {total + added} bytes; {len(data)} more would pass its bound of "
                                       f"{self.max_bytes} (--log-max-bytes; --retain-bytes/--retain-days free applied segments)"))
                    continue
                out.append(nxt)
                chunks.append(data)
                nxt += len(g)
                added += len(data)
            if not chunks:
                return out
            self._write_durably(b"".join(chunks))
            with self._cond:
                self._next = nxt
                self._size += added
                assert self._active is not None
                self._sizes[self._active.base] = self._size
                self._bound = Bound(self._active.base, self._size, nxt)
                self._cond.notify_all()
            return out

    def _write_durably(self, data: bytes) -> None:
        assert self._fd is not None
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            _sync(self._fd)
        except OSError:
            self._dirty = True
            with contextlib.suppress(OSError):
                self._truncate_back()
            raise

    def _truncate_back(self) -> None:
        assert self._fd is not None
        os.ftruncate(self._fd, self._size)
        _sync(self._fd)
        self._dirty = False

    def _roll(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        seg = Segment(self._next, self.dir / segment_name(self._next))
        self._open(seg, 0)
        fsync_dir(self.dir)
        with self._cond:
            self._bound = Bound(seg.base, 0, self._next)

    def apply_retention(self, applied: int, policy: Retention, now_ms: int | None = None) -> list[str]:
        """Delete sealed segments whose records are all below ``applied`` (every pipeline has them)
        while the log is over ``policy.max_bytes`` or a segment's last write is older than
        ``policy.max_age_ms``, oldest first; returns the deleted file names.

        Raises:
            OSError: when a segment cannot be deleted.
        """
        if policy.max_bytes is None and policy.max_age_ms is None:
            return []
        now = time.time() * 1000 if now_ms is None else now_ms
        deleted: list[str] = []
        with self._write_lock:
            segs = segments(self.dir)
            total = self.size_bytes
            for seg, following in pairwise(segs):
                if self._active is not None and seg.base == self._active.base:
                    break
                if following.base > applied:
                    break
                over = policy.max_bytes is not None and total > policy.max_bytes
                old = policy.max_age_ms is not None and seg.path.stat().st_mtime * 1000 < now - policy.max_age_ms
                if not (over or old):
                    break
                seg.path.unlink()
                total -= self._sizes.pop(seg.base, 0)
                deleted.append(seg.path.name)
            if deleted:
                fsync_dir(self.dir)
        return deleted

    def close(self) -> None:
        """Close the active segment and release the directory lock."""
        with self._write_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._lock_fd >= 0:
                os.close(self._lock_fd)
                self._lock_fd = -1
