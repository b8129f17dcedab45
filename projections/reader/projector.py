"""The one loop that projects Kafka topics into a :class:`~projections.projection.Projection`.

Every projector (``hivestream project``, ``kb project``, ``stubs project``) is this loop with its
pipeline's :class:`TopicFold`: it assigns itself every partition of the fold's topics and seeks
to the positions the projection stores (never Kafka's committed offsets: ``group_id=None``), polls,
feeds the records to the fold and applies the fold's batch with the next offsets in one
transaction, so a kill -9 at any moment loses nothing and doubles nothing (pyeventsourcing's
tracking records). A partition with no stored position starts at its first offset, or at the
first record at or after ``from_time_ms``.

Batch k is written on a writer thread while this thread polls and folds batch k + 1 (DuckDB
releases the GIL while it executes), which grows poll by poll until the write is done or it holds
``batch_max`` records: the busier the stream, the larger the transactions, while an idle stream
commits what one poll brings. Batches are applied one at a time, in order, and the connection is
used by one thread at a time (:class:`BetweenBatches` hooks and position checks run while no
write is pending). A fold's batch is a value cut when the write is handed over (:meth:`TopicFold.drain`),
so folding the next records never changes a batch being written. A batch folded when the loop
stops is dropped unapplied: its positions are not stored, so it is read again next time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, Protocol, TypeVar

from projections.projection import Projection
from projections.reader.consumer import PartitionReader, TopicPartition
from streams.kafka.connection import ConnectionLike

B = TypeVar("B")
R = TypeVar("R")
Rep = TypeVar("Rep")
R_contra = TypeVar("R_contra", contravariant=True)
Rep_co = TypeVar("Rep_co", covariant=True)

Polled = Mapping[TopicPartition, Sequence[Any]]
"""One poll: records (``.offset``, ``.key``, ``.value``) per partition, in offset order."""


class TopicFold(Protocol[B, R_contra, Rep_co]):
    """A pipeline's half of a projector: what records become, batch by batch."""

    @property
    def topics(self) -> Sequence[str]:
        """The topics to consume (every partition of each)."""

    @property
    def report(self) -> Rep_co:
        """The run's counts, returned by :meth:`KafkaProjector.run`."""

    def feed(self, polled: Polled) -> None:
        """Fold one poll's records into the batch being made (bad records become its dead letters, never exceptions)."""

    def drain(self) -> B:
        """The batch of everything fed since the last drain (a value: later feeds do not change it)."""

    def count(self, batch: B, applied: R_contra, records: int) -> None:
        """Count one applied batch of ``records`` records (``applied``: what :meth:`Projection.apply` answered) into :attr:`report`."""


class BetweenBatches(Protocol):
    """What runs between two batches, while no write is pending (the frames projector's snapshots and heartbeat)."""

    def idle(self, now: float, wrote: bool, quiet: bool) -> None:
        """Called once per round with no write pending: ``now`` (monotonic seconds), whether a batch
        was just applied, whether nothing is waiting to be written."""

    def finish(self) -> None:
        """Called once when the loop ends (not after a failed batch)."""


class KafkaProjector(Generic[B, R, Rep]):
    """Consumes ``fold.topics`` into ``projection``.

    Args:
        projection: where the batches go (the caller opens and closes it).
        fold: the pipeline's records → batches.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        client_id: Kafka ``client.id``.
        batch_max: records per poll and per transaction.
        between: run between batches (None: nothing).
        from_time_ms: where a partition with no stored position starts: the first record whose
            Kafka timestamp is at or after this epoch-ms time (``offsetsForTimes``; that start is
            stored at once); its first offset when ``None``.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
        aiokafka.errors.KafkaConnectionError: when the broker cannot be reached.
    """

    def __init__(self, projection: Projection[B, R], fold: TopicFold[B, R, Rep], conn: ConnectionLike, *, client_id: str, batch_max: int,
                 between: BetweenBatches | None = None, from_time_ms: int | None = None) -> None:
        self.projection = projection
        self.fold = fold
        self.batch_max = batch_max
        self.between = between
        self.consumer = PartitionReader(conn, client_id=client_id)
        try:
            self.tps: list[TopicPartition] = []
            for topic in fold.topics:
                self.tps.extend(TopicPartition(topic, p) for p in self.consumer.partitions(topic))
            self.consumer.assign(self.tps)
            self._seek(from_time_ms)
        except BaseException:
            self.consumer.close()
            raise

    @property
    def report(self) -> Rep:
        """The counts of this run so far."""
        return self.fold.report

    def _seek(self, from_time_ms: int | None) -> None:
        by_time = self.consumer.offsets_for_times(dict.fromkeys(self.tps, from_time_ms)) if from_time_ms is not None else {}
        ends = self.consumer.end_offsets(self.tps) if from_time_ms is not None else {}
        for tp in self.tps:
            pos = self.projection.position(tp.topic, tp.partition)
            if pos:
                self.consumer.seek(tp, pos)
            elif from_time_ms is not None:
                found = by_time.get(tp)
                start = found.offset if found is not None else ends[tp]
                self.consumer.seek(tp, start)
                self.projection.advance({(tp.topic, tp.partition): start})
            else:
                self.consumer.seek_to_beginning(tp)

    def lag(self) -> int:
        """Records between the stored positions and the end of every partition."""
        ends = self.consumer.end_offsets(self.tps)
        return sum(max(0, ends[tp] - self.projection.position(tp.topic, tp.partition)) for tp in self.tps)

    def _caught_up(self, targets: dict[TopicPartition, int]) -> bool:
        return all(self.projection.position(tp.topic, tp.partition) >= targets[tp] for tp in self.tps)

    def _apply(self, batch: B, positions: dict[tuple[str, int], int], records: int) -> int:
        """Apply one batch with its positions in one transaction and count it; returns its records."""
        self.fold.count(batch, self.projection.apply(batch, positions), records)
        return records

    def run(self, *, until_caught_up: bool = False, idle_exit_s: float | None = None, should_stop: Callable[[], bool] = lambda: False,
            on_progress: Callable[[Rep, int], None] | None = None) -> Rep:
        """Project until stopped (the module docstring tells how batches are cut and written).

        Args:
            until_caught_up: stop once every partition reaches the end offset it had at start.
            idle_exit_s: stop after this many seconds without a record.
            should_stop: polled between batches (signal handlers set it).
            on_progress: called after each batch with the report and the remaining lag (-1 unless ``until_caught_up``).

        Raises:
            duckdb.Error: when a batch cannot be written (it is rolled back; the loop stops).
        """
        targets = self.consumer.end_offsets(self.tps) if until_caught_up else None
        last_record = time.monotonic()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="projector-write") as writer:
            pending: Future[int] | None = None
            records = 0  # fed since the last drain
            positions: dict[tuple[str, int], int] = {}
            try:
                while not should_stop():
                    room = self.batch_max - records
                    waiting = pending is not None or records > 0
                    polled = self.consumer.poll(timeout_ms=0 if waiting else 500, max_records=room) if room > 0 else {}
                    if polled:  # folded now, while the writer works on the previous batch
                        self.fold.feed(polled)
                        records += sum(len(r) for r in polled.values())
                        positions.update(_positions(polled))  # a partition's offsets only grow
                    if pending is not None and not pending.done() and room > 0:
                        if not polled:
                            wait([pending], timeout=0.01)
                        continue  # the next batch grows until the write is done or it is full
                    n = pending.result() if pending is not None else 0  # from here on no write is pending
                    pending = None
                    now = time.monotonic()
                    if n or records:
                        last_record = now
                    if self.between is not None:
                        self.between.idle(now, bool(n), quiet=records == 0)
                    if on_progress and n:
                        on_progress(self.report, self.lag() if targets is not None else -1)
                    if targets is not None and self._caught_up(targets):
                        break
                    if idle_exit_s is not None and now - last_record >= idle_exit_s:
                        break
                    if records:
                        pending = writer.submit(self._apply, self.fold.drain(), positions, records)
                        records, positions = 0, {}
            finally:
                if pending is not None:
                    pending.result()
        if self.between is not None:
            self.between.finish()
        return self.report

    def close(self) -> None:
        """Close the consumer (the projection is the caller's)."""
        self.consumer.close()


def _positions(polled: Polled) -> dict[tuple[str, int], int]:
    """The next offset of every partition of one poll."""
    return {(tp.topic, tp.partition): records[-1].offset + 1 for tp, records in polled.items() if records}
