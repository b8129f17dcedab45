"""``hivestream project``: the frames (and dead-letter, memory-calls) topics → the frames projection.

:class:`Projector` is the one Kafka projector loop (:class:`~projections.reader.projector.KafkaProjector`:
every partition, positions stored in DuckDB with the rows, one transaction per batch) with the frames
pipeline's :class:`FramesTopicFold` (frame records decoded in columns, dead-letter records kept as they
are, memory tool calls beside them). One projector per DuckDB file; between two batches it
publishes a snapshot for readers every few seconds (:class:`Snapshots`: a checkpoint and a copy of
the file's bytes, :func:`projections.frames.snapshot.publish_idle_snapshot`; less often while copies
of a large file are slow and records keep coming) and a heartbeat while idle.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from projections.frames.decode import decode_frame_records
from projections.frames.projection import FramesApplied, FramesBatch, FramesProjection
from projections.frames.snapshot import HoldingProjectionLike, SnapshotPacing, publish_idle_snapshot, write_heartbeat
from projections.reader.projector import KafkaProjector, Polled
from streams.frames.capture import Skipped
from streams.kafka.connection import ConnectionLike
from streams.memory_calls.tool_calls import MemoryToolCall
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput


@dataclass
class ProjectorReport:
    """Counts of one projector run."""

    records: int = 0
    batches: int = 0
    frames_created: int = 0
    duplicates: int = 0
    dead_letters: int = 0  # new rows in dead_letters (a record seen twice counts once)
    skipped: int = 0  # skipped-event records read (valid hook events that are not turns; a record read twice counts twice)


@dataclass
class _Pending:
    """The rows of the batch being folded."""

    captures: dict[str, list[Any]] | None = None
    dead_letters: list[DeadLetter] = field(default_factory=list)
    calls: list[MemoryToolCall] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


class FramesTopicFold:
    """The frames pipeline's records → :class:`~projections.frames.sink.FramesBatch` (a :class:`~projections.reader.projector.TopicFold`).

    Args:
        frames_topic, dead_letter_topic: the topics of frame records and of dead letters.
        memory_calls_topic: the topic of memory tool calls, or None.
        clock: epoch-ms clock of the dead letters made here (records that do not parse).
    """

    def __init__(self, frames_topic: str, dead_letter_topic: str, memory_calls_topic: str | None = None, clock: Clock = wall_clock_ms) -> None:
        self.frames_topic = frames_topic
        self.memory_calls_topic = memory_calls_topic
        self.topics = [frames_topic, dead_letter_topic, *([memory_calls_topic] if memory_calls_topic else [])]
        self.clock = clock
        self.report = ProjectorReport()
        self._pending = _Pending()

    def feed(self, polled: Polled) -> None:
        """Decode one poll into the pending batch: the frame records together, in columns (``seq``
        continuing the batch's), the other records one by one; a record that does not decode becomes a dead letter."""
        p = self._pending
        frame_values: list[bytes | None] = []
        frame_origin: list[tuple[Any, int]] = []  # (partition, first index into frame_values)
        for tp, records in polled.items():
            if tp.topic == self.frames_topic:  # decoded together below
                frame_origin.append((tp, len(frame_values)))
                frame_values.extend(r.value for r in records)
                continue
            for r in records:
                if tp.topic == self.memory_calls_topic:
                    try:
                        p.calls.append(MemoryToolCall.from_json(r.value or b""))
                    except ValueError as e:
                        err = RejectedInput(Reason.WRONG_SHAPE, f"memory-call record: {e}")
                        p.dead_letters.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
                else:
                    try:
                        p.dead_letters.append(DeadLetter.model_validate_json(r.value))
                    except ValueError as e:
                        err = RejectedInput(Reason.WRONG_SHAPE, f"dead-letter record: {e}")
                        p.dead_letters.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
        first_seq = len(p.captures["seq"]) if p.captures is not None else 0
        captures, rejects, skipped = decode_frame_records(frame_values, first_seq)
        for i, err in rejects:
            tp, start = next((tp, start) for tp, start in reversed(frame_origin) if start <= i)
            r = polled[tp][i - start]
            p.dead_letters.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
        if p.captures is None:
            p.captures = captures
        else:
            for name, col in p.captures.items():
                col.extend(captures[name])
        p.skipped.extend(skipped)

    def drain(self) -> FramesBatch:
        """The pending batch; a new one starts."""
        p, self._pending = self._pending, _Pending()
        return FramesBatch(p.captures, p.dead_letters, memory_calls=p.calls, skipped=p.skipped)

    def count(self, batch: FramesBatch, applied: FramesApplied, records: int) -> None:
        """Count one applied batch."""
        rep = self.report
        rep.records += records
        rep.batches += 1
        rep.frames_created += applied[0]
        rep.duplicates += applied[1]
        rep.dead_letters += applied[2]
        rep.skipped += len(batch.skipped)


class Snapshots:
    """Snapshots and heartbeats between batches (a :class:`~projections.reader.projector.BetweenBatches`).

    Args:
        file: the file the projector holds (its path, connection and byte copier).
        every_s: least seconds between snapshot publications (0: never; more while a copy takes
            long and records keep coming: :class:`~projections.frames.snapshot.SnapshotPacing`);
            a heartbeat at most this often while nothing changed.
        clock: epoch-ms clock of the stamps.
    """

    def __init__(self, file: HoldingProjectionLike, every_s: float, clock: Clock = wall_clock_ms) -> None:
        self.file = file
        self.every_s = every_s
        self.clock = clock
        self.pacing = SnapshotPacing(every_s)
        self.dirty = True
        self.last_beat = float("-inf")

    def idle(self, now: float, wrote: bool, quiet: bool) -> None:
        """Publish a snapshot when one is due, else a heartbeat when one is due.

        Raises:
            duckdb.Error, OSError: when the checkpoint, the copy or the heartbeat fails.
        """
        self.dirty = self.dirty or wrote
        if self.dirty and self.pacing.due(now, quiet=quiet):
            publish_idle_snapshot(self.file, self.clock())
            self.pacing.published(now, time.monotonic() - now, quiet=quiet)
            self.dirty = False
        if self.every_s and not self.dirty and now - self.last_beat >= self.every_s:
            write_heartbeat(self.file, self.clock())
            self.last_beat = now

    def finish(self) -> None:
        """Publish the last changes.

        Raises:
            duckdb.Error, OSError: when the copy fails.
        """
        if self.every_s and self.dirty:
            publish_idle_snapshot(self.file, self.clock())


class Projector(KafkaProjector[FramesBatch, FramesApplied, ProjectorReport]):
    """Consumes ``frames_topic`` and ``dead_letter_topic`` (and ``memory_calls_topic``) into ``sink``.

    Args:
        sink: the frames projection; with ``snapshot_every_s`` it must hold its own file (the snapshots copy it).
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        frames_topic, dead_letter_topic: topics to project.
        batch_max: records per poll and per transaction.
        snapshot_every_s: least seconds between snapshot publications (0: never; see :class:`Snapshots`).
        clock: epoch-ms clock.
        from_time_ms: where a partition with no stored position starts (see :class:`~projections.reader.projector.KafkaProjector`).
        memory_calls_topic: the topic of memory tool calls (``memory-calls``) to project into
            ``memory_tool_calls`` too, or None.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
        ValueError: snapshots asked of a projection on a shared connection.
    """

    def __init__(self, sink: FramesProjection, conn: ConnectionLike, frames_topic: str, dead_letter_topic: str, *, batch_max: int = 5000,
                 snapshot_every_s: float = 2.0, clock: Clock = wall_clock_ms, from_time_ms: int | None = None,
                 memory_calls_topic: str | None = None) -> None:
        between = None
        if snapshot_every_s:
            if sink.file is None:
                raise ValueError("snapshots need the file: open the frames projection from its path")
            between = Snapshots(sink.file, snapshot_every_s, clock)
        super().__init__(sink, FramesTopicFold(frames_topic, dead_letter_topic, memory_calls_topic, clock), conn, client_id="hivestream-projector",
                         batch_max=batch_max, between=between, from_time_ms=from_time_ms)
        self.sink = sink
