"""The continuous dedup loop of ``hivestream serve``: the log's durable records → DuckDB, as
``hivestream run LOGDIR`` applies them (:class:`hivestream.embedded.log_run.LogRun`: every projection
of the file in turn, the frames with the memory tool calls, the KnowHub experiences, the memory
stubs; state, rows and the log position in one transaction per batch).

It reads only what the writer has fsync'd (:meth:`HookLog.durable`), wakes when a group commit
lands, and applies what came in one batch, so a frame is in the file tens of milliseconds after
its 2xx. Readers in other processes cannot open a file a writer holds (DuckDB): serve answers
their queries itself on cursors of this loop's connection, which it lends through a
:class:`~hivestream.serve.read_gate.ReadGate` (:mod:`hivestream.serve.read_api`), and publishes a
snapshot and the report on a thread of its own (:class:`~hivestream.serve.publisher.Publisher`,
told of each applied batch by ``on_applied``), so this thread only applies records. A failed
batch (DuckDB out of disk, say) is logged, the runner is opened again from the file (whose state
matches the last commit) and the batch is retried with a growing pause; the log keeps accepting
meanwhile.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from hivestream.embedded.log_run import LogRun
from hivestream.serve.log_writer import HookLog, Retention
from hivestream.serve.progress import Progress
from hivestream.serve.read_gate import ReadGate
from streams.ingest.hook_log import LogReader, log_origin
from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.serve")


@dataclass
class FollowerOptions:
    """Pacing of the loop.

    Attributes:
        retention: what applied log to delete.
        chunk_bytes: most log bytes applied in one round.
        idle_s: how long one wait for new records lasts (seconds).
        min_batch_s: least time between the starts of two rounds that applied records (seconds):
            under a stream of single posts each batch then holds what came in that time, not one
            group commit, which costs the loop less CPU (the HTTP side's) for at most this much
            more delay before a frame is queryable.
    """

    retention: Retention = field(default_factory=Retention)
    chunk_bytes: int = 4 << 20
    idle_s: float = 0.5
    min_batch_s: float = 0.05


class Follower:
    """Applies the log to DuckDB until stopped (run :meth:`run` in a thread).

    Args:
        hook_log: the log being written.
        open_run: opens the DuckDB side (:func:`hivestream.embedded.log_run.open_log_run`), again after a failure.
        progress: where the loop's state is published.
        options: pacing.
        clock: epoch-ms clock of retention.
        gate: where the open connection is lent to readers (set on every open, cleared before a close).
        on_applied: called after each committed batch (the publisher's :meth:`~hivestream.serve.publisher.Publisher.changed`).

    Raises:
        projections.frames.sink.MetaMismatch, duckdb.IOException: from ``open_run`` (at construction).
    """

    def __init__(self, hook_log: HookLog, open_run: Callable[[], LogRun], progress: Progress, options: FollowerOptions | None = None,
                 clock: Clock = wall_clock_ms, gate: ReadGate | None = None, on_applied: Callable[[], None] | None = None) -> None:
        self.log = hook_log
        self.open_run = open_run
        self.progress = progress
        self.opts = options or FollowerOptions()
        self.clock = clock
        self.gate = gate or ReadGate()
        self.on_applied = on_applied
        self.origin = log_origin(hook_log.log_id)
        self.run_: LogRun | None = None
        self._open()
        self.stop = threading.Event()
        self._reader = LogReader(hook_log.dir, on_skip=lambda line: log.error("serve: %s", line))
        self._retention_at = 0.0

    def _open(self) -> None:
        run = self.open_run()
        self.progress.applied = run.position(self.origin)
        self.run_ = run
        try:
            self.gate.set(run.con, run.path)
        except BaseException:
            self.run_ = None
            run.close()
            raise

    def run(self) -> None:
        """The loop: until :attr:`stop` is set, then apply what is durable (up to ten seconds) and return."""
        backoff = 0.5
        deadline: float | None = None
        while True:
            if self.stop.is_set() and deadline is None:
                deadline = time.monotonic() + 10
            started = time.monotonic()
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
                return
            if not more and not self.stop.is_set():
                self.log.wait(self.progress.applied, self.opts.idle_s)
            elif more and deadline is None:
                self.stop.wait(max(0.0, started + self.opts.min_batch_s - time.monotonic()))

    def step(self) -> bool:
        """One round: apply the durable records not yet applied (one chunk); retain when due.
        Returns whether records were applied.

        Raises:
            duckdb.Error, OSError: from the batch (nothing of it committed).
        """
        if self.run_ is None:
            self._open()
        assert self.run_ is not None
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
                applied = True
                if self.on_applied is not None:
                    self.on_applied()
            else:  # the reader turns corrupt stretches into dead letters, so this is a log changed under serve
                self._stuck(nxt, durable_next)
        if self.progress.applied >= durable_next:
            self.progress.caught_up_ms = self.clock()
        self._retain()
        return applied

    def _stuck(self, nxt: int, durable_next: int) -> None:
        """No record readable at ``nxt`` below the durable end: never jumped over (``applied`` stays,
        retention keeps the segments); said once per offset on the log and in ``/healthz``."""
        line = f"no record of the log readable at offset {nxt} below its durable end {durable_next} (a segment file removed or changed?)"
        if line != self.progress.last_error:
            log.error("serve: %s; nothing past it is applied until it can be read", line)
        self.progress.last_error = line
        self.stop.wait(self.opts.idle_s)

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
                self.gate.set(None)
                run.close()
            except Exception as ce:  # closing a failed file can fail too; it is opened again next round
                log.debug("serve: closing after a failure: %r", ce)

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
            self.gate.set(None)
            run.close()
