"""What ``hivestream serve`` publishes beside its DuckDB file, on a thread of its own: the snapshot
``<db>.snapshot`` (for readers that cannot ask serve: an older ``hivestream``, the DuckDB CLI),
its heartbeat, and the HTML report.

Each is made on a cursor the :class:`~hivestream.serve.read_gate.ReadGate` lends (DuckDB MVCC: the
copy is the file as of its start, the dedup loop goes on committing meanwhile), so a copy that
takes seconds on a large file never delays a frame: the loop's thread only applies records, and
this one runs at a lower CPU priority (Linux), so it takes spare CPU, not the HTTP side's. The
snapshot is published at most every ``snapshot_every_s`` while something changed, and less often
when a copy takes long (the thread copies at most a tenth of the time: ``hivestream query`` asks
serve and no longer waits for a copy, and the CPU is better left to the loop and the HTTP side);
the report at most every ``report_every_s``. A failure is one log line (the previous
snapshot and report stay); a failed snapshot leaves no temporary file and is tried again after a
pause that doubles per failure (:meth:`~projections.frames.snapshot.SnapshotPacing.failed`, at most
two minutes), a failed report after ``report_every_s``. A snapshot that would leave less than
``reserve_bytes`` free on its disk is not tried (:func:`~projections.frames.snapshot.snapshot_room`):
the log, which answers the POSTs, keeps that room, so ``/healthz`` never turns ``disk_full`` for a
snapshot. Temporary files a killed serve left are removed at start, and any at stop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from hivestream.serve.progress import Progress
from hivestream.serve.read_gate import ReadGate, Unavailable
from projections.frames.snapshot import (
    SNAPSHOT_RESERVE_BYTES,
    SnapshotPacing,
    copy_snapshot,
    remove_snapshot_leftovers,
    snapshot_room,
    write_heartbeat_of,
)
from streams.model.clock import Clock, wall_clock_ms

log = logging.getLogger("hivestream.serve")


@dataclass
class PublishOptions:
    """Pacing of what is published.

    Attributes:
        snapshot_every_s: least time between two snapshots (seconds; 0: none, and no heartbeat).
        report: the HTML report to refresh (``None``: none).
        report_every_s: least time between two refreshes of the report (seconds).
        log_dir: the hook-event log (named in the report).
        reserve_bytes: free space a snapshot must leave on its file system (bytes).
    """

    snapshot_every_s: float = 1.0
    report: Path | None = None
    report_every_s: float = 60.0
    log_dir: Path | None = None
    reserve_bytes: int = SNAPSHOT_RESERVE_BYTES


class Publisher:
    """Publishes the snapshot, the heartbeat and the report when due (run :meth:`run` in a thread).

    Args:
        gate: lends the cursors.
        progress: the dedup loop's state (``snapshot_ms`` is set here).
        options: pacing.
        clock: the epoch-ms stamp of snapshots, heartbeats and reports.
        write_report: ``(cursor, note, out, generated_at_ms)`` writes the report (default
            :func:`hivestream.report.write_report` on the cursor for all three sources).
    """

    def __init__(self, gate: ReadGate, progress: Progress, options: PublishOptions | None = None, clock: Clock = wall_clock_ms,
                 write_report: Callable[[duckdb.DuckDBPyConnection, str, Path, int], None] | None = None) -> None:
        self.gate = gate
        self.progress = progress
        self.opts = options or PublishOptions()
        self.clock = clock
        self.write_report = write_report or _write_report
        self.stop = threading.Event()
        self._wake = threading.Event()
        self._dirty = self._report_dirty = True
        self._report_at = self._beat_at = 0.0
        self._pacing = SnapshotPacing(self.opts.snapshot_every_s)
        self._error = ""
        self._no_room = False

    def changed(self) -> None:
        """Records were applied: the snapshot and the report are due again (called by the loop)."""
        self._dirty = self._report_dirty = True
        self._wake.set()

    def run(self) -> None:
        """Until :attr:`stop` is set: publish what is due; then publish once more, whatever the pacing.
        Temporary files of a snapshot are removed before the first round and after the last. On
        Linux the thread runs at nice 10 (:func:`lower_priority`)."""
        lower_priority()
        self._remove_leftovers()
        try:
            while not self.stop.is_set():
                self.publish()
                self._wake.wait(0.25)
                self._wake.clear()
            self.publish(force=True)
        finally:
            self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        db = self.gate.path
        if db is not None and self.opts.snapshot_every_s > 0:
            for p in remove_snapshot_leftovers(db):
                log.info("serve: removed %s (left by a snapshot that did not finish)", p.name)

    def publish(self, force: bool = False) -> None:
        """One round: what is due (everything changed with ``force``); a failure is logged (once until a
        snapshot succeeds again), never raised."""
        try:
            self._due(force)
        except Unavailable:
            return  # the file is being reopened: next round
        except (duckdb.Error, OSError) as e:
            line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            if line != self._error:
                log.error("serve: publishing the snapshot or the report failed (%s); the snapshot is tried again "
                          "after a pause that doubles per failure, the report after %g s", line, self.opts.report_every_s)
            self._error = line

    def _due(self, force: bool) -> None:
        now = time.monotonic()
        every = self.opts.snapshot_every_s
        # quiet=False: readers that need fresh rows ask serve, so the copy's share stays bounded even when idle
        if every > 0 and self._dirty and (force or self._pacing.due(now, quiet=False)) and self._room():
            self._dirty = False
            t0 = time.monotonic()
            try:
                with self.gate.cursor() as (cur, path):
                    copy_snapshot(cur, path, self.clock())
            except BaseException as e:
                self._dirty = True
                if not isinstance(e, Unavailable):
                    self._pacing.failed(time.monotonic())
                raise
            self._pacing.published(t0, time.monotonic() - t0)  # copies take at most a tenth of the time (the CPU is the loop's and the HTTP side's)
            self.progress.snapshot_ms = self.clock()
            self._error = ""  # the next failure is logged again
        if every > 0 and not self._dirty and (force or now - self._beat_at >= max(1.0, every)):
            with self.gate.cursor() as (_cur, path):
                write_heartbeat_of(path, self.clock())
            self._beat_at = now
        if self.opts.report is not None and self._report_dirty and (force or now - self._report_at >= self.opts.report_every_s):
            self._report_dirty = False
            self._report_at = now  # a failed report is tried again after report_every_s, not every round
            try:
                with self.gate.cursor() as (cur, path):
                    note = (f"written by hivestream serve from {path} (log {self.opts.log_dir}, "
                            f"{self.progress.applied} records applied)")
                    self.write_report(cur, note, self.opts.report, self.clock())
            except BaseException:
                self._report_dirty = True
                raise
            self._report_at = time.monotonic()

    def _room(self) -> bool:
        """Whether a snapshot fits on its disk with the reserve left free; logs when that changes."""
        db = self.gate.path
        if db is None:
            return True  # the file is being reopened: the cursor says so
        room = snapshot_room(db, self.opts.reserve_bytes)
        if not room.ok and not self._no_room:
            log.warning("serve: the snapshot is not published while its disk is this full (%s); readers asking serve "
                        "are answered as before", room.line())
        elif room.ok and self._no_room:
            log.info("serve: the snapshot is published again (%s)", room.line())
        self._no_room = not room.ok
        return room.ok


def lower_priority(nice: int = 10) -> None:
    """Lower the calling thread's CPU priority by ``nice`` (Linux: a thread is a task of its own for
    ``setpriority``), so a copy or a report competes with the dedup loop and the HTTP side only for
    spare CPU; elsewhere (macOS: per process only) nothing. Never raises."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)


def _write_report(cur: duckdb.DuckDBPyConnection, note: str, out: Path, generated_at_ms: int) -> None:
    from hivestream.report import Sources, write_report

    write_report(Sources(cur, cur, cur, [note]), out, generated_at_ms=generated_at_ms)
