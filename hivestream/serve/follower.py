"""The continuous dedup loop of ``hivestream serve``: the log's durable records → DuckDB, as
``hivestream run LOGDIR`` applies them (:class:`hivestream.embedded.log_run.LogRun`: the embedded
runner's dedup core, sink and memory tool calls, then the KnowHub runner; state, rows and the log
position in one transaction per batch).

It reads only what the writer has fsync'd (:meth:`HookLog.durable`), wakes when a group commit
lands, and applies what came in one batch, so a frame is in the file tens of milliseconds after
its 2xx. Readers in other processes cannot open a file a writer holds (DuckDB), so it publishes a
snapshot beside it (``<db>.snapshot``, :func:`projections.frames.sink.publish_snapshot`, as the
Kafka projector does; ``hivestream query`` and ``report`` read it through
:func:`projections.reading.open_for_reading`) at most every ``snapshot_every_s`` while something
changed, and less often when a copy takes long (never more than a fifth of the loop's time). A
failed batch (DuckDB out of disk, say) is logged, the runner is opened again from the file (whose
state matches the last commit) and the batch is retried with a growing pause; the log keeps
accepting meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from hivestream.embedded.log_run import LogRun
from hivestream.report import Sources, write_report
from hivestream.serve.log_writer import HookLog, Retention
from hivestream.serve.progress import Progress
from projections.frames.sink import publish_snapshot, write_heartbeat
from streams.ingest.hook_log import LogReader, log_origin
from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.serve")


@dataclass
class FollowerOptions:
    """Pacing of the loop.

    Attributes:
        snapshot_every_s: least time between two published snapshots (seconds; 0: none).
        report: HTML report to refresh (``None``: none).
        report_every_s: least time between two refreshes of the report (seconds).
        retention: what applied log to delete.
        chunk_bytes: most log bytes applied in one round.
        idle_s: how long one wait for new records lasts (seconds).
    """

    snapshot_every_s: float = 1.0
    report: Path | None = None
    report_every_s: float = 60.0
    retention: Retention = field(default_factory=Retention)
    chunk_bytes: int = 4 << 20
    idle_s: float = 0.5


class Follower:
    """Applies the log to DuckDB until stopped (run :meth:`run` in a thread).

    Args:
        hook_log: the log being written.
        open_run: opens the DuckDB side (:func:`hivestream.embedded.log_run.open_log_run`), again after a failure.
        progress: where the loop's state is published.
        options: pacing.
        clock: epoch-ms clock of snapshots and retention.

    Raises:
        projections.frames.sink.MetaMismatch, duckdb.IOException: from ``open_run`` (at construction).
    """

    def __init__(self, hook_log: HookLog, open_run: Callable[[], LogRun], progress: Progress, options: FollowerOptions | None = None,
                 clock: Clock = wall_clock_ms) -> None:
        self.log = hook_log
        self.open_run = open_run
        self.progress = progress
        self.opts = options or FollowerOptions()
        self.clock = clock
        self.origin = log_origin(hook_log.log_id)
        self.run_: LogRun | None = open_run()
        progress.applied = self.run_.position(self.origin)
        self.stop = threading.Event()
        self._reader = LogReader(hook_log.dir, on_skip=lambda line: log.error("serve: %s", line))
        self._dirty = True
        self._snap_at = 0.0
        self._snap_gap = self.opts.snapshot_every_s
        self._report_at = 0.0
        self._report_dirty = True
        self._retention_at = 0.0
        self._beat_at = 0.0
        self._publish_error = ""

    def run(self) -> None:
        """The loop: until :attr:`stop` is set, then apply what is durable (up to ten seconds) and return."""
        backoff = 0.5
        deadline: float | None = None
        while True:
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + 10
            try:
                more = self.step()
                backoff = 0.5
            except Exception as e:  # a DuckDB failure (disk full...): reopen from the file and retry
                self._fail(e)
                if self.stop.wait(backoff) or (deadline is not None and time.monotonic() > deadline):
                    return
                backoff = min(30.0, backoff * 2)
                continue
            if deadline is not None and (not more or time.monotonic() > deadline):
                self._publish(force=True)
                return
            if not more and not self.stop.is_set():
                self.log.wait(self.progress.applied, self.opts.idle_s)

    def step(self) -> bool:
        """One round: apply the durable records not yet applied (one chunk); publish, refresh,
        retain when due. Returns whether records were applied.

        Raises:
            duckdb.Error, OSError: from the batch (nothing of it committed).
        """
        if self.run_ is None:
            self.run_ = self.open_run()
            self.progress.applied = self.run_.position(self.origin)
        durable_next, bound = self.log.durable()
        nxt = self.progress.applied
        applied = False
        if nxt < durable_next:
            records = self._reader.read(nxt, bound=bound, max_bytes=self.opts.chunk_bytes)
            if records:
                rep = self.run_.report
                frames0, dups0 = rep.frames_created, rep.duplicates
                self.run_.apply(self.origin, records)
                self.progress.frames += rep.frames_created - frames0
                self.progress.duplicates += rep.duplicates - dups0
                self.progress.applied = records[-1].offset + 1
                self.progress.last_error = ""
                self._dirty = self._report_dirty = applied = True
            else:  # nothing whole up to the durable end (a corrupt stretch, reported by the reader)
                self.progress.applied = durable_next
        if self.progress.applied >= durable_next:
            self.progress.caught_up_ms = self.clock()
        self._publish()
        self._retain()
        return applied

    def _fail(self, e: Exception) -> None:
        p = self.progress
        p.errors += 1
        line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if line != p.last_error:
            log.error("serve: a DuckDB batch failed (%s); it is retried, the log keeps every record meanwhile", line)
        p.last_error = line
        run, self.run_ = self.run_, None
        if run is not None:
            try:
                run.close()
            except Exception as ce:  # closing a failed file can fail too; it is opened again next round
                log.debug("serve: closing after a failure: %r", ce)

    def _publish(self, force: bool = False) -> None:
        """The snapshot for readers, the heartbeat and the report, when due; a failure is one log line
        (the previous snapshot and report stay) and is tried again next round."""
        try:
            self._publish_due(force)
        except (duckdb.Error, OSError) as e:
            line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if line != self._publish_error:
                log.error("serve: publishing the snapshot or the report failed (%s); tried again next round", line)
            self._publish_error = line
        else:
            self._publish_error = ""

    def _publish_due(self, force: bool) -> None:
        run = self.run_
        if run is None:
            return
        now = time.monotonic()
        sink = run.runner.sink
        if self.opts.snapshot_every_s > 0 and self._dirty and (force or now - self._snap_at >= self._snap_gap):
            t0 = time.monotonic()
            publish_snapshot(sink, self.clock())
            took = time.monotonic() - t0
            self._snap_at = time.monotonic()
            self._snap_gap = max(self.opts.snapshot_every_s, 4 * took)  # copying costs at most a fifth of the time
            self._dirty = False
            self.progress.snapshot_ms = self.clock()
        if self.opts.snapshot_every_s > 0 and not self._dirty and (force or now - self._beat_at >= max(1.0, self.opts.snapshot_every_s)):
            write_heartbeat(sink, self.clock())
            self._beat_at = now
        if self.opts.report is not None and self._report_dirty and (force or now - self._report_at >= self.opts.report_every_s):
            cur = sink.con.cursor()
            try:
                note = f"written by hivestream serve from {sink.path} (log {self.log.dir}, {self.progress.applied} records applied)"
                write_report(Sources(cur, cur, cur, [note]), self.opts.report, generated_at_ms=self.clock())
            finally:
                cur.close()
            self._report_at = time.monotonic()
            self._report_dirty = False

    def _retain(self) -> None:
        pol = self.opts.retention
        if pol.max_bytes is None and pol.max_age_ms is None:
            return
        now = time.monotonic()
        if now - self._retention_at < 10:
            return
        self._retention_at = now
        gone = self.log.apply_retention(self.progress.applied, pol, self.clock())
        if gone:
            log.info("serve: retention deleted %d applied log segments (%s ... %s)", len(gone), gone[0], gone[-1])

    def close(self) -> None:
        """Checkpoint and close the DuckDB file.

        Raises:
            duckdb.Error: when the last checkpoint fails.
        """
        run, self.run_ = self.run_, None
        if run is not None:
            run.close()
