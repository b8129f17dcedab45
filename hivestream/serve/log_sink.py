"""The :class:`~hivestream.ingest.record_sink.RecordSink` of ``hivestream serve``: accepted records go to
the local hook-event log (:class:`~hivestream.serve.log_writer.HookLog`).

Group commit: every request's records wait in one queue; a single writer task takes whatever is
queued, appends it with one write and one fsync in a worker thread, and answers each request with
its own outcome (written, or refused by the bound), so concurrent requests share an fsync as
their records share a produce request on the Kafka path. A request is answered 2xx only after
its records are fsync'd.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from hivestream.ingest.record_sink import Gauge, Record
from hivestream.serve.log_writer import Entry, HookLog, LogFull
from hivestream.serve.progress import Progress
from streams.ingest.hook_log import DEAD_LETTER, HOOK_EVENTS, STUB_EVENTS
from streams.kafka.topics import Topics
from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.serve")

MIN_FREE_BYTES = 4 << 20
"""``/healthz`` is not ready while the log's file system has less than this free (bytes)."""


class LogSink:
    """Records of the ingest routes → the hook-event log, one fsync per group of requests.

    Args:
        hook_log: the open log.
        topics: the topic names the server's records carry (mapped to the log's record kinds).
        progress: the dedup loop's progress (for ``/healthz`` and ``/metrics``).
        db: the name of the DuckDB file the loop writes (shown by ``/healthz``, which needs no token: no path).
        retry_after_s: ``/healthz`` stays not ready this long after a failed write (seconds).
        headroom_bytes: ``/healthz`` says ``log_full`` once less than this is left under the bound
            (at most a tenth of the bound; e.g. twice the largest request body).
        clock: the append time of records (epoch ms).
    """

    error_reason = "log_error"

    def __init__(self, hook_log: HookLog, topics: Topics, progress: Progress, *, db: str = "", retry_after_s: float = 5.0,
                 headroom_bytes: int = 2 << 20, clock: Clock = wall_clock_ms) -> None:
        self.log = hook_log
        self.progress = progress
        self.db = db
        self.retry_after_s = retry_after_s
        self.headroom_bytes = min(headroom_bytes, hook_log.max_bytes // 10)
        self.clock = clock
        self._kinds = {topics.hook_events: HOOK_EVENTS, topics.dead_letter: DEAD_LETTER, topics.stub_events: STUB_EVENTS}
        self._pending: list[tuple[list[Entry], asyncio.Future[int]]] = []
        self._wake: asyncio.Event | None = None
        self._failed_at = 0.0
        self.appended = 0
        self.refused = 0
        self.write_errors = 0
        self.last_write_error = ""

    async def write(self, records: list[Record]) -> str:
        """Append ``records`` to the log; ``"log"`` once they are fsync'd.

        Raises:
            LogFull: the log's bound would be passed.
            OSError: the write or fsync failed (disk full, I/O error).
            ValueError: a record for a topic the log does not hold (a bug in the caller).
        """
        if not records:
            return "log"
        try:
            entries = [(self._kinds[t], k, v) for t, k, v in records]
        except KeyError as e:
            raise ValueError(f"the log holds no records of topic {e}") from None
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._pending.append((entries, fut))
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        await fut
        return "log"

    async def background(self) -> None:
        """The writer task: one append (write + fsync) per round for everything queued."""
        if self._wake is None:
            self._wake = asyncio.Event()
        while True:
            await self._wake.wait()
            self._wake.clear()
            batch, self._pending = self._pending, []
            if batch:
                await self._commit(batch)

    async def _commit(self, batch: list[tuple[list[Entry], asyncio.Future[int]]]) -> None:
        try:
            results = await asyncio.to_thread(self.log.append, [e for e, _f in batch], self.clock())
        except Exception as e:  # OSError (disk full, I/O error); anything else is a bug, refused the same way
            self._failed_at = time.monotonic()
            self.write_errors += 1
            self.last_write_error = f"{type(e).__name__}: {e}"
            err = e if isinstance(e, OSError) else OSError(f"log append failed: {type(e).__name__}")
            for _e, f in batch:
                if not f.done():
                    f.set_exception(err)
            return
        for (entries, f), r in zip(batch, results, strict=True):
            if f.done():
                continue
            if isinstance(r, LogFull):
                self.refused += 1
                f.set_exception(r)
            else:
                self.appended += len(entries)
                f.set_result(r)

    def _free_bytes(self) -> int | None:
        try:
            st = os.statvfs(self.log.dir)
        except OSError:
            return None
        return st.f_bavail * st.f_frsize

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(ready, body): not ready while the log is at its bound, the disk is (nearly) full, or a
        write failed within ``retry_after_s``."""
        nxt, _bound = self.log.durable()
        size = self.log.size_bytes
        free = self._free_bytes()
        status = "ok"
        if size + self.headroom_bytes > self.log.max_bytes:
            status = "log_full"
        elif free is not None and free < MIN_FREE_BYTES:
            status = "disk_full"
        elif self._failed_at and time.monotonic() - self._failed_at < self.retry_after_s:
            status = "log_error"
        p = self.progress
        body = {"status": status, "log_records": nxt, "log_bytes": size, "log_max_bytes": self.log.max_bytes,
                "applied": p.applied, "pending": max(0, nxt - p.applied), "dedup": f"failing: {p.last_error}" if p.last_error else "ok",
                "db": self.db}
        return status == "ok", body

    def gauges(self) -> list[Gauge]:
        """The log and dedup-loop gauges of ``/metrics``."""
        nxt, _bound = self.log.durable()
        p = self.progress
        behind = nxt > p.applied
        lag = max(0.0, time.time() - p.caught_up_ms / 1000) if behind and p.caught_up_ms else 0.0
        return [
            ("hivestream_serve_log_bytes", "bytes in the hook-event log now", self.log.size_bytes),
            ("hivestream_serve_log_next_offset", "records ever appended to the log (its next offset)", nxt),
            ("hivestream_serve_applied_offset", "the first log offset not yet in DuckDB", p.applied),
            ("hivestream_serve_unapplied_records", "log records not yet in DuckDB", max(0, nxt - p.applied)),
            ("hivestream_serve_apply_lag_seconds", "seconds since the dedup loop last had nothing left to apply (0 when caught up)", lag),
            ("hivestream_serve_appended_total", "records appended since start", self.appended),
            ("hivestream_serve_write_errors_total", "failed log writes since start (answered 503)", self.write_errors),
            ("hivestream_serve_dedup_errors_total", "failed DuckDB batches since start (retried)", p.errors),
            ("hivestream_serve_frames_total", "frames created since start", p.frames),
        ]

    def startup_note(self) -> str | None:
        """How much of the log the dedup loop still has to apply."""
        nxt, _b = self.log.durable()
        left = nxt - self.progress.applied
        return f"serve: {left} log records not yet in DuckDB are applied first" if left > 0 else None

    async def close(self) -> None:
        """Answer what is still queued (one last commit); the log itself is closed by its owner."""
        batch, self._pending = self._pending, []
        if batch:
            await self._commit(batch)
