"""The embedded runner: import → validate → dedup → DuckDB in one process, no broker.

It runs the same pure steps as the Kafka path (adapters, :func:`streams.frames.capture.to_capture`,
:class:`streams.frames.dedup.DedupFold`, :class:`projections.frames.sink.FramesProjection`). Positions are stored per
input file in the same transaction as the rows, so running a file again applies nothing twice,
and a run that was killed resumes where its last batch committed. The dedup core's state is
stored in the same transaction (table ``dedup_state``), so it survives restarts too.
"""

from __future__ import annotations

import contextlib
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import duckdb

from hivestream.embedded.blocks import BatchColumns, ImportBlock, blocks_of, import_block
from projections.frames.projection import FramesBatch, FramesProjection
from streams.frames.capture import Skipped
from streams.frames.capture_import import CaptureOptions, ImportTask, Outcome, file_tasks, hook_outcomes, outcomes, rejection
from streams.frames.dedup import DedupFold
from streams.importers.files import Item, detect_format, import_file, read_lines
from streams.importers.ordered_pool import OrderedPool
from streams.memory_calls.tool_calls import MemoryToolCall, configured_rules
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.model.tracked_state import TrackedState
from streams.settings import Settings


@dataclass
class RunReport:
    """What a run read and wrote.

    Attributes:
        db: the DuckDB file.
        inputs: input name → detected format.
        records: input records (lines) that produced events or errors, not counting skipped ones.
        events: hook events produced by the importers (gateway captures included).
        captures: events that carried turn text.
        frames_created: new frames written.
        duplicates: new captures collapsed into an existing frame.
        repeated: captures whose event id was already applied (the same event ingested
            again, e.g. a snapshot of a growing file): they change nothing.
        not_captures: events that are not turns (tool and lifecycle events, empty bodies, media
            placeholders, failed sends), the rows offered to ``skipped_events``.
        not_turns: reason → count of those (:class:`streams.frames.capture.SkipReason`).
        dead_letters: reason → count.
        skipped: items skipped because their position was already applied.
    """

    db: str
    inputs: dict[str, str] = field(default_factory=dict)
    records: int = 0
    events: int = 0
    captures: int = 0
    frames_created: int = 0
    duplicates: int = 0
    repeated: int = 0
    not_captures: int = 0
    not_turns: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    skipped: int = 0


def origin_of(path: Path) -> str:
    """The input name a file's positions and dead letters are stored under: ``file:<absolute path>``."""
    return f"file:{path.resolve()}"


def file_id_of(origin: str) -> int:
    """The ``partition`` of an input's captures: a 31-bit CRC-32 of its name (the offset is the line)."""
    return zlib.crc32(origin.encode()) & 0x7FFFFFFF


def settings_meta(settings: Settings) -> dict[str, str]:
    """The settings a projection file is bound to (see :meth:`FramesProjection.check_meta`)."""
    return {"key_strategy": str(settings.key_strategy), "window_ms": str(settings.window or "unbounded")}


class EmbeddedRunner:
    """Runs files through dedup into one DuckDB file.

    Args:
        db: path of the DuckDB file (created when missing).
        settings: dedup and batch settings.
        clock: epoch-ms clock for dead-letter stamps (injected for tests).
        duckdb_threads: DuckDB's threads for the file (:class:`FramesProjection`), else DuckDB's default.
        con: a connection to ``db`` to write on instead of opening the file (the projections of one
            file share it: :func:`hivestream.embedded.log_run.open_log_run`); :meth:`close` leaves it open.

    Raises:
        projections.frames.sink.MetaMismatch: when ``db`` was built with other dedup settings.
        duckdb.IOException: when another process holds ``db``.
        ValueError, OSError: from the memory tools' rules (:func:`streams.memory_calls.configured_rules`).
    """

    def __init__(self, db: str | Path, settings: Settings | None = None, clock: Clock = wall_clock_ms, *,
                 duckdb_threads: int | None = None, con: duckdb.DuckDBPyConnection | None = None) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        self.rules = configured_rules()  # memory_tool_calls (the read side of memory)
        self.sink = FramesProjection(db, con, threads=duckdb_threads)
        try:
            self.sink.check_meta(settings_meta(self.settings))
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # the first error (a mismatch, out of memory) is the one to tell
                self.sink.close()
            raise
        self.core = DedupFold(
            self.settings.window,
            allowed_lateness_ms=self.settings.allowed_lateness_ms,
            state=TrackedState(self.sink.load_dedup_state()),
            since_sweep=self.sink.load_since_sweep(),  # a resumed run sweeps where an uninterrupted one does
        )
        self.report = RunReport(db=str(db))
        self.pending_calls: list[MemoryToolCall] = []  # the memory tool calls of the batch being made
        self.calls_written = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-write")
        self._pending: Future[None] | None = None

    def close(self) -> None:
        """Wait for the batch being written, then checkpoint and close the DuckDB file (unless it was given a connection).

        Raises:
            duckdb.Error: when that last write failed (the file is closed all the same).
        """
        try:
            self._wait()
        finally:
            self._writer.shutdown(wait=True)
            self.sink.close()

    def options(self) -> CaptureOptions:
        """The stateless import's options (:mod:`streams.frames.capture_import`) for these settings."""
        return CaptureOptions(self.settings.key_strategy, self.settings.max_body_bytes, tuple(self.rules))

    def run_file(self, path: Path, *, gateway: bool = False) -> None:
        """Import, dedup and project one file in this process.

        Raises:
            OSError: when the file cannot be read.
        """
        origin = origin_of(path)
        fmt, items = import_file(path, gateway=gateway)
        self.report.inputs[str(path)] = fmt
        opts, fid = self.options(), file_id_of(origin)
        self.run_outcomes(origin, hook_outcomes(read_lines(path), 0, opts, fid) if fmt == "hook-events" else outcomes(items, opts, fid))

    def run_items(self, origin: str, items: Iterable[Item]) -> None:
        """Run a stream of importer items that came from ``origin`` (see :meth:`run_outcomes`)."""
        self.run_outcomes(origin, outcomes(items, self.options(), file_id_of(origin)))

    def run_pooled(self, paths: Sequence[Path], pool: OrderedPool[tuple[int, ImportTask], tuple[int, ImportBlock]], *,
                   gateway: bool = False, on_file: Callable[[Path], None] | None = None) -> None:
        """Run ``paths`` in order with the import done by ``pool``'s processes (``--jobs N``, over
        :func:`hivestream.embedded.blocks.import_block`).

        The pool imports ahead while this process dedups and writes; blocks come back in file
        order, so the result equals :meth:`run_file` on each path.

        Raises:
            OSError: when a file cannot be read.
        """
        opts = self.options()

        def tasks() -> Iterator[tuple[int, ImportTask]]:
            for i, path in enumerate(paths):
                fmt = detect_format(read_lines(path))
                self.report.inputs[str(path)] = fmt
                for t in file_tasks(path, fmt, gateway, file_id_of(origin_of(path)), opts):
                    yield i, t

        for i, group in groupby(pool.map(tasks()), key=itemgetter(0)):
            self.run_blocks(origin_of(paths[i]), (blk for _, blk in group))
            if on_file:
                on_file(paths[i])

    def run_outcomes(self, origin: str, outs: Iterable[Outcome], end: int | None = None) -> None:
        """Dedup and project the import outcomes of ``origin`` (:func:`streams.frames.capture_import.outcomes`,
        or :func:`hivestream.embedded.log_run.log_outcomes` for a serve log, whose ``"x"`` outcomes
        carry a ready :class:`~streams.model.deadletter.DeadLetter`), as :meth:`run_blocks` of their blocks.
        """
        self.run_blocks(origin, blocks_of(outs, clock=self.clock), end)

    def run_blocks(self, origin: str, blocks: Iterable[ImportBlock], end: int | None = None) -> None:
        """Dedup and project the outcomes of ``origin`` held in ``blocks`` (:mod:`hivestream.embedded.blocks`).

        Outcomes at offsets below the stored position of ``origin`` are skipped; a batch is cut
        only between offsets, so each offset's events commit together with the position. The
        dedup core decides on each capture's event id, key, time and position
        (:meth:`~streams.frames.dedup.DedupFold.decide`); the other fields stay in the block's columns.
        ``end``: the offset after the input read (a serve log's records that are not hook events
        give no outcome): the last batch stores at least that position.
        """
        self._wait()
        start = self.sink.position(origin)
        batch = BatchColumns()
        decisions = batch.decisions
        dls: list[DeadLetter] = []
        skips: list[Skipped] = []
        last_off = -1
        r = self.report
        pending_calls = self.pending_calls
        decide, size = self.core.decide, self.settings.batch_size
        for blk in blocks:
            ids, keys, times, parts, others, calls = blk.ids, blk.keys, blk.times, blk.parts, blk.others, blk.calls
            ci = oi = lo = 0
            for i, (off, kind) in enumerate(zip(blk.offs, blk.kinds, strict=True)):
                if off < start:
                    r.skipped += 1
                    if kind == "c":
                        ci += 1
                        lo = ci
                    else:
                        oi += 1
                    continue
                if off != last_off:
                    if len(decisions) + len(dls) + len(skips) >= size:
                        batch.add(blk, lo, ci)
                        self._flush(batch, dls, skips, origin, off)
                        batch, dls, skips, lo = BatchColumns(), [], [], ci
                        decisions, pending_calls = batch.decisions, self.pending_calls
                    r.records += 1
                    last_off = off
                if kind == "c":
                    decisions.append(decide(ids[ci], keys[ci], times[ci], parts[ci], off))
                    ci += 1
                    r.events += 1
                    r.captures += 1
                    if calls and i in calls:
                        pending_calls.append(calls[i])
                    continue
                raw, payload, read_at = others[oi]
                oi += 1
                if kind == "x":  # a dead letter made upstream (a serve log's dead-letter record): kept as it is
                    dls.append(payload)
                    r.dead_letters[str(payload.reason)] += 1
                    continue
                if kind != "d":  # an event that is not a turn, or one capture_outcome rejected
                    r.events += 1
                    if calls and i in calls:
                        pending_calls.append(calls[i])
                if kind == "n":
                    skips.append(payload)
                    r.not_captures += 1
                    r.not_turns[payload.reason] += 1
                else:
                    assert raw is not None
                    err = rejection(payload)
                    dls.append(DeadLetter.of(err, raw, origin, 0, off, self.clock() if read_at is None else read_at, event_id=payload[2]))
                    r.dead_letters[str(err.reason)] += 1
            batch.add(blk, lo, ci)
        nxt = max(last_off + 1, start if end is None else end)
        if last_off >= 0 or nxt > start:
            self._flush(batch, dls, skips, origin, nxt)
        self._wait()

    def _flush(self, batch: BatchColumns, dls: list[DeadLetter], skips: list[Skipped], origin: str, next_off: int) -> None:
        """Hand the batch to the writer thread and go on deduplicating the next one.

        The batch's state changes and memory tool calls are taken now, so the transaction holds
        exactly the state after the batch's last capture with the batch's position (a crash
        applies all of it or none). One batch is written at a time, in order: this waits for the
        previous one first. DuckDB runs the statements without the GIL, and a commit waits for
        the disk, so the write overlaps the dedup of the next batch.
        """
        assert isinstance(self.core.state, TrackedState)
        changes = self.core.state.drain()
        calls, self.pending_calls = self.pending_calls, []
        self._wait()
        self._pending = self._writer.submit(self._write, batch, dls, skips, {(origin, 0): next_off}, changes, calls, self.core.since_sweep)

    def _write(self, batch: BatchColumns, dls: list[DeadLetter], skips: list[Skipped], positions: dict[tuple[str, int], int],
               changes: tuple[dict[str, Any], list[str]], calls: list[MemoryToolCall], since_sweep: int) -> None:
        frames, dups, _dead = self.sink.apply(FramesBatch(batch.columns(), dls, changes, calls, since_sweep, skips), positions)
        self.calls_written += len(calls)
        self.report.frames_created += frames
        self.report.duplicates += dups
        self.report.repeated += len(batch.decisions) - frames - dups

    def _wait(self) -> None:
        """Wait until no batch is being written.

        Raises:
            duckdb.Error, pyarrow.ArrowException: from the write (its transaction was rolled back).
        """
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()


def run_files(
    paths: Iterable[Path],
    db: str | Path,
    *,
    settings: Settings | None = None,
    gateway: bool = False,
    clock: Clock = wall_clock_ms,
    on_file: Callable[[Path], None] | None = None,
    jobs: int = 0,
) -> RunReport:
    """Run ``paths`` in order into ``db`` and return the report.

    Args:
        jobs: import processes beside this one (0: import here). The import processes are forked
            before the DuckDB file is opened; the result is the same for every value. With import
            processes, DuckDB runs one thread (see :class:`FramesProjection`'s ``threads``).

    Raises:
        OSError, projections.frames.sink.MetaMismatch, duckdb.IOException: see :class:`EmbeddedRunner`.
        ValueError: when ``jobs`` < 0.
    """
    if jobs < 0:
        raise ValueError("jobs must be >= 0")
    paths = list(paths)
    if jobs:
        with OrderedPool(import_block, jobs) as pool:
            runner = EmbeddedRunner(db, settings, clock, duckdb_threads=1)  # the import processes hold the other cores
            try:
                runner.run_pooled(paths, pool, gateway=gateway, on_file=on_file)
            finally:
                runner.close()
        return runner.report
    runner = EmbeddedRunner(db, settings, clock)
    try:
        for p in paths:
            runner.run_file(p, gateway=gateway)
            if on_file:
                on_file(p)
    finally:
        runner.close()
    return runner.report
