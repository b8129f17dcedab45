"""``hivestream project``: the frames (and dead-letter) topics → the DuckDB projection.

The projector assigns itself every partition of its topics and seeks to the positions stored in
DuckDB (never Kafka's committed offsets): each batch (up to thousands of records) is one
transaction holding the rows and the next offsets, so a kill -9 at any moment loses nothing and
doubles nothing, and a re-delivered event (same event id) changes nothing. One projector per
DuckDB file; it publishes a snapshot for readers every few seconds, between two batches: a
checkpoint and a copy of the file's bytes (:func:`projections.frames.snapshot.publish_idle_snapshot`;
less often while copies of a large file are slow and records keep coming).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from projections.frames.decode import decode_frame_records
from projections.frames.sink import DuckSink
from projections.frames.snapshot import SnapshotPacing, publish_idle_snapshot, write_heartbeat
from projections.reader.consumer import PartitionReader, TopicPartition
from streams.frames.capture import Skipped
from streams.kafka.connection import ConnectionLike
from streams.memory_calls import MemoryToolCall
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
class _Batch:
    """One poll decoded into the rows of one transaction."""

    records: int
    captures: dict[str, list[Any]]
    dead_letters: list[DeadLetter] = field(default_factory=list)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)
    calls: list[MemoryToolCall] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def extend(self, later: _Batch) -> _Batch:
        """Append ``later`` (decoded with ``first_seq`` = this batch's capture count) to this batch."""
        self.records += later.records
        for name, col in self.captures.items():
            col.extend(later.captures[name])
        self.dead_letters.extend(later.dead_letters)
        self.positions.update(later.positions)  # a partition's offsets only grow
        self.calls.extend(later.calls)
        self.skipped.extend(later.skipped)
        return self


class Projector:
    """Consumes ``frames_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the DuckDB writer.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        frames_topic, dead_letter_topic: topics to project.
        batch_max: records per poll and per transaction.
        snapshot_every_s: least seconds between snapshot publications (0: never; more while a
            copy takes long and records keep coming: :class:`~projections.frames.snapshot.SnapshotPacing`).
        clock: epoch-ms clock.
        from_time_ms: where a partition with no stored position starts: the first record
            whose Kafka timestamp is at or after this epoch-ms time (``offsetsForTimes``);
            offset 0 when ``None``.
        memory_calls_topic: the topic of memory tool calls (``memory-calls``) to project into
            ``memory_tool_calls`` too, or None.
    """

    def __init__(
        self,
        sink: DuckSink,
        conn: ConnectionLike,
        frames_topic: str,
        dead_letter_topic: str,
        *,
        batch_max: int = 5000,
        snapshot_every_s: float = 2.0,
        clock: Clock = wall_clock_ms,
        from_time_ms: int | None = None,
        memory_calls_topic: str | None = None,
    ) -> None:
        self.sink = sink
        self.memory_calls_topic = memory_calls_topic
        self.frames_topic = frames_topic
        self.dead_letter_topic = dead_letter_topic
        self.batch_max = batch_max
        self.snapshot_every_s = snapshot_every_s
        self.clock = clock
        self.report = ProjectorReport()
        self.consumer = PartitionReader(conn, client_id="hivestream-projector")
        self.tps: list[TopicPartition] = []
        for topic in (frames_topic, dead_letter_topic, *([memory_calls_topic] if memory_calls_topic else [])):
            self.tps.extend(TopicPartition(topic, p) for p in self.consumer.partitions(topic))
        self.consumer.assign(self.tps)
        by_time = self.consumer.offsets_for_times(dict.fromkeys(self.tps, from_time_ms)) if from_time_ms is not None else {}
        ends = self.consumer.end_offsets(self.tps) if from_time_ms is not None else {}
        for tp in self.tps:
            pos = sink.position(tp.topic, tp.partition)
            if pos:
                self.consumer.seek(tp, pos)
            elif from_time_ms is not None:
                found = by_time.get(tp)
                start = found.offset if found is not None else ends[tp]
                self.consumer.seek(tp, start)
                sink.apply_batch([], [], {(tp.topic, tp.partition): start})
            else:
                self.consumer.seek_to_beginning(tp)

    def lag(self) -> int:
        """Records between the stored positions and the end of every partition."""
        ends = self.consumer.end_offsets(self.tps)
        return sum(max(0, ends[tp] - self.sink.position(tp.topic, tp.partition)) for tp in self.tps)

    def poll_once(self, timeout_ms: int = 500) -> int:
        """Poll one batch and apply it in one transaction; returns the records consumed."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_max)
        if not polled:
            return 0
        return self._apply(self._prepare(polled))

    def _prepare(self, polled: dict[TopicPartition, list[Any]], first_seq: int = 0) -> _Batch:
        """Decode one poll's records into the rows of one transaction (no DuckDB call); the
        captures' ``seq`` starts at ``first_seq`` (the captures already in the batch it extends)."""
        dls: list[DeadLetter] = []
        calls: list[MemoryToolCall] = []
        positions: dict[tuple[str, int], int] = {}
        frame_values: list[bytes | None] = []
        frame_origin: list[tuple[TopicPartition, int]] = []  # (partition, first index into frame_values)
        n = 0
        for tp, records in polled.items():
            n += len(records)
            positions[(tp.topic, tp.partition)] = records[-1].offset + 1
            if tp.topic == self.frames_topic:  # decoded together below
                frame_origin.append((tp, len(frame_values)))
                frame_values.extend(r.value for r in records)
                continue
            for r in records:
                if tp.topic == self.memory_calls_topic:
                    try:
                        calls.append(MemoryToolCall.from_json(r.value or b""))
                    except ValueError as e:
                        err = RejectedInput(Reason.WRONG_SHAPE, f"memory-call record: {e}")
                        dls.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
                else:
                    try:
                        dls.append(DeadLetter.model_validate_json(r.value))
                    except ValueError as e:
                        err = RejectedInput(Reason.WRONG_SHAPE, f"dead-letter record: {e}")
                        dls.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
        captures, rejects, skipped = decode_frame_records(frame_values, first_seq)
        for i, err in rejects:
            tp, start = next((tp, start) for tp, start in reversed(frame_origin) if start <= i)
            r = polled[tp][i - start]
            dls.append(DeadLetter.of(err, r.value or b"", tp.topic, tp.partition, r.offset, self.clock()))
        return _Batch(n, captures, dls, positions, calls, skipped)

    def _apply(self, b: _Batch) -> int:
        """Apply a prepared batch in one transaction and count it; returns its records."""
        frames, dups, dead = self.sink.apply_columns(b.captures, b.dead_letters, b.positions, memory_calls=b.calls, skipped=b.skipped)
        n = b.records
        rep = self.report
        rep.records += n
        rep.batches += 1
        rep.frames_created += frames
        rep.duplicates += dups
        rep.dead_letters += dead
        rep.skipped += len(b.skipped)
        return n

    def run(
        self,
        *,
        until_caught_up: bool = False,
        idle_exit_s: float | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        on_progress: Callable[[ProjectorReport, int], None] | None = None,
    ) -> ProjectorReport:
        """Project until stopped.

        Batch k is written to DuckDB on a writer thread while this thread polls and decodes batch
        k + 1 (DuckDB releases the GIL while it executes), which grows poll by poll until the
        write is done or it holds ``batch_max`` records: the busier the stream, the larger the
        transactions, while an idle stream commits what one poll brings. Batches are still applied one at a
        time, in order, each in its own transaction, and the connection is used by one thread at
        a time (snapshots, heartbeats and position checks run while no write is pending). A
        batch decoded when the loop stops is dropped unapplied: its positions are not stored, so
        it is read again next time.

        Args:
            until_caught_up: stop once every partition reaches the end offset it had at start.
            idle_exit_s: stop after this many seconds without a record.
            should_stop: polled between batches (signal handlers set it).
            on_progress: called after each batch with the report and the remaining lag.

        Raises:
            duckdb.Error: when a batch cannot be written (it is rolled back; the loop stops).
        """
        targets = self.consumer.end_offsets(self.tps) if until_caught_up else None
        last_record = time.monotonic()
        last_beat = float("-inf")
        pacing = SnapshotPacing(self.snapshot_every_s)
        dirty = True
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="projector-write") as writer:
            pending: Future[int] | None = None
            batch: _Batch | None = None
            try:
                while not should_stop():
                    room = self.batch_max - (batch.records if batch is not None else 0)
                    waiting = pending is not None or batch is not None
                    polled = self.consumer.poll(timeout_ms=0 if waiting else 500, max_records=room) if room > 0 else {}
                    if polled:  # decoded now, while the writer works on the previous batch
                        more = self._prepare(polled, len(batch.captures["seq"]) if batch is not None else 0)
                        batch = more if batch is None else batch.extend(more)
                    if pending is not None and not pending.done() and room > 0:
                        if not polled:
                            wait([pending], timeout=0.01)
                        continue  # the next batch grows until the write is done or it is full
                    n = pending.result() if pending is not None else 0  # from here on no write is pending
                    pending = None
                    now = time.monotonic()
                    if n or batch is not None:
                        last_record = now
                    dirty = dirty or bool(n)
                    if dirty and pacing.due(now, quiet=batch is None):
                        publish_idle_snapshot(self.sink, self.clock())
                        pacing.published(now, time.monotonic() - now, quiet=batch is None)
                        dirty = False
                    if self.snapshot_every_s and not dirty and now - last_beat >= self.snapshot_every_s:
                        write_heartbeat(self.sink, self.clock())
                        last_beat = now
                    if on_progress and n:
                        on_progress(self.report, self.lag() if targets is not None else -1)
                    if targets is not None and all(self.sink.position(tp.topic, tp.partition) >= targets[tp] for tp in self.tps):
                        break
                    if idle_exit_s is not None and now - last_record >= idle_exit_s:
                        break
                    if batch is not None:
                        pending = writer.submit(self._apply, batch)
                        batch = None
            finally:
                if pending is not None:
                    pending.result()
        if self.snapshot_every_s and dirty:
            publish_idle_snapshot(self.sink, self.clock())
        return self.report

    def close(self) -> None:
        """Close the consumer (the sink is the caller's)."""
        self.consumer.close()
