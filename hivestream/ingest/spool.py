"""The ingest server's durable spool: segment files of checksummed records, bounded in bytes.

Layout: ``<dir>/seg-<seq 12 digits>-<created epoch ms>.spool``. Writers append to the *open*
segment (one ``write`` + ``fsync`` per batch, so a batch is durable when :meth:`Spool.append`
returns); :meth:`Spool.seal` closes it so the forwarder can read it whole. The forwarder reads the
sealed segments oldest first (:meth:`Spool.sealed`, :meth:`Spool.read`) and deletes one
(:meth:`Spool.delete`) only after the broker acknowledged every record in it, so a crash between
the acknowledgement and the delete forwards a segment again: the events keep their ids, and every
downstream step is idempotent on event ids. A restarted server finds the segments left on disk and
forwards them; it never appends to a segment from an earlier run (a torn tail stays torn and is
skipped, counted, by :func:`streams.ingest.spool_format.decode_records`).

Thread-safe: appends run in a worker thread (``asyncio.to_thread``) under one lock. One process
per directory: the server opens its spool with ``lock=True``, an exclusive ``flock`` on
``<dir>/.lock`` held until :meth:`Spool.close` (or the process ends), so a second server given the
same directory refuses to start (:class:`SpoolInUse`) instead of deleting the other's segments.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from hivestream.ingest.refusal import SinkFull
from streams.ingest.fsync import fsync_dir
from streams.ingest.spool_format import decode_records, encode_record

_SEG = re.compile(r"^seg-(\d{12})-(\d+)\.spool$")


class SpoolFull(SinkFull):
    """The spool would exceed its byte bound; the caller answers 503 with ``Retry-After``."""

    reason = "spool_full"


class SpoolInUse(OSError):
    """Another process holds the spool directory's lock."""


def default_spool_dir() -> Path:
    """Where ``hivestream ingest`` spools by default, whatever the working directory:
    ``$XDG_STATE_HOME/hivestream/ingest-spool``, else ``~/.local/state/hivestream/ingest-spool``."""
    state = os.environ.get("XDG_STATE_HOME")
    return (Path(state) if state else Path.home() / ".local" / "state") / "hivestream" / "ingest-spool"


def lock_directory(directory: Path) -> int:
    """Take the exclusive lock of ``directory`` (``<dir>/.lock``, holding the owner's pid); returns
    the file descriptor that holds it (closing it releases the lock).

    Raises:
        SpoolInUse: another process holds it (the message names the directory and the pid).
        OSError: the lock file cannot be opened.
    """
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise SpoolInUse(f"spool directory {directory} is in use by another process (pid {owner}); "
                         "give each ingest process its own --spool-dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


@dataclass(frozen=True)
class Segment:
    """A sealed segment: its path, sequence number, creation time (epoch ms) and size (bytes)."""

    path: Path
    seq: int
    created_ms: int
    size: int


class Spool:
    """Append-only, fsync'd, checksummed, bounded on-disk queue of records (bytes)."""

    def __init__(self, directory: Path, *, max_bytes: int = 1 << 30, segment_bytes: int = 8 << 20, lock: bool = False) -> None:
        """Open (create) the spool in ``directory``; counts what earlier runs left.

        Args:
            directory: the spool directory (created with mode 0700).
            max_bytes: bound on the total bytes of all segments.
            segment_bytes: the open segment is sealed once it grows past this.
            lock: hold the directory's exclusive lock (:func:`lock_directory`) until :meth:`close`.

        Raises:
            SpoolInUse: with ``lock``, when another process holds the directory.
            OSError: when the directory cannot be created or listed.
        """
        self.dir = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_fd = lock_directory(directory) if lock else None
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._open_path: Path | None = None
        self._open_size = 0
        self._open_records = 0
        segs = self._scan()
        self._seq = max((s.seq for s in segs), default=0)
        self._sealed_bytes = sum(s.size for s in segs)
        self._sealed_records = sum(self._count(s.path) for s in segs)

    def _scan(self) -> list[Segment]:
        out: list[Segment] = []
        for p in self.dir.iterdir():
            m = _SEG.match(p.name)
            if m and p != self._open_path:
                try:
                    out.append(Segment(p, int(m.group(1)), int(m.group(2)), p.stat().st_size))
                except FileNotFoundError:
                    continue
        return sorted(out, key=lambda s: s.seq)

    @staticmethod
    def _count(path: Path) -> int:
        try:
            return len(decode_records(path.read_bytes()).records)
        except FileNotFoundError:
            return 0

    @property
    def size_bytes(self) -> int:
        """Bytes on disk in all segments."""
        return self._sealed_bytes + self._open_size

    @property
    def records(self) -> int:
        """Records in all segments (approximate after corrupt stretches)."""
        return self._sealed_records + self._open_records

    def oldest_ms(self) -> int | None:
        """Creation time of the oldest segment holding records (epoch ms), or ``None`` when empty."""
        if self.records == 0:
            return None
        segs = self._scan()
        if segs:
            return segs[0].created_ms
        if self._open_path is not None:
            m = _SEG.match(self._open_path.name)
            return int(m.group(2)) if m else None
        return None

    def append(self, payloads: list[bytes]) -> None:
        """Append ``payloads`` as records and fsync; durable when this returns.

        Raises:
            SpoolFull: when the spool would exceed ``max_bytes`` (nothing written).
            OSError: when the write or fsync fails (the caller must not report durability).
        """
        if not payloads:
            return
        data = b"".join(encode_record(p) for p in payloads)
        with self._lock:
            if self.size_bytes + len(data) > self.max_bytes:
                raise SpoolFull(f"spool holds {self.size_bytes} bytes; {len(data)} more would pass its bound of {self.max_bytes}")
            if self._fd is None:
                self._seq += 1
                self._open_path = self.dir / f"seg-{self._seq:012d}-{time.time_ns() // 1_000_000}.spool"
                self._fd = os.open(self._open_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
                fsync_dir(self.dir)
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            os.fsync(self._fd)
            self._open_size += len(data)
            self._open_records += len(payloads)
            if self._open_size >= self.segment_bytes:
                self._seal_locked()

    def _seal_locked(self) -> None:
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        self._sealed_bytes += self._open_size
        self._sealed_records += self._open_records
        self._open_path, self._open_size, self._open_records = None, 0, 0

    def seal(self) -> None:
        """Close the open segment (if any) so the forwarder can take it."""
        with self._lock:
            self._seal_locked()

    def sealed(self) -> list[Segment]:
        """The sealed segments, oldest first."""
        with self._lock:
            return self._scan()

    @staticmethod
    def read(seg: Segment) -> tuple[list[bytes], int]:
        """The records of a sealed segment and the count of bytes skipped as torn or corrupt.

        Raises:
            OSError: when the file cannot be read.
        """
        d = decode_records(seg.path.read_bytes())
        return d.records, d.skipped_bytes

    def delete(self, seg: Segment, records: int) -> None:
        """Delete a forwarded segment (``records`` is its record count, for the gauges)."""
        with self._lock:
            try:
                seg.path.unlink()
            except FileNotFoundError:
                return
            fsync_dir(self.dir)
            self._sealed_bytes = max(0, self._sealed_bytes - seg.size)
            self._sealed_records = max(0, self._sealed_records - records)

    def close(self) -> None:
        """Seal the open segment (its records stay on disk for the next run); release the lock."""
        self.seal()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


