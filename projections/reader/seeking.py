"""The consuming half shared by the stub and KnowHub projectors: assign every partition, seek to
the positions stored in DuckDB, poll until caught up or idle.

Kafka's committed offsets are never used (``group_id=None``): the position of each partition
lives in the projection, written in the same transaction as the rows it produced, so the
projection is exactly as far as its rows say (the pattern of pyeventsourcing's tracking records).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from projections.reader.consumer import PartitionReader, TopicPartition
from streams.kafka.connection import ConnectionLike

R = TypeVar("R")


class SeekingProjector(Generic[R]):
    """Base of a projector that folds every partition of ``topics`` into a DuckDB file.

    Args:
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        topics: the topics to consume (every partition of each).
        position: ``(topic, partition) → next offset`` as stored in the projection.
        report: the subclass's counters, returned by :meth:`run`.
        client_id: Kafka ``client.id``.
        batch_max: records per poll.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
    """

    def __init__(self, conn: ConnectionLike, topics: list[str], position: Callable[[str, int], int], report: R, *, client_id: str,
                 batch_max: int) -> None:
        self.position = position
        self.report = report
        self.batch_max = batch_max
        self.consumer = PartitionReader(conn, client_id=client_id)
        self.tps: list[TopicPartition] = []
        for topic in topics:
            self.tps.extend(TopicPartition(topic, p) for p in self.consumer.partitions(topic))
        self.consumer.assign(self.tps)
        for tp in self.tps:
            self.consumer.seek(tp, position(tp.topic, tp.partition))

    def poll_once(self, timeout_ms: int = 500) -> int:
        """Poll one batch and apply it in one transaction; returns the records consumed (subclasses implement it)."""
        raise NotImplementedError

    def lag(self) -> int:
        """Records between the stored positions and the end of every partition."""
        ends = self.consumer.end_offsets(self.tps)
        return sum(max(0, ends[tp] - self.position(tp.topic, tp.partition)) for tp in self.tps)

    def run(self, *, until_caught_up: bool = False, idle_exit_s: float | None = None, should_stop: Callable[[], bool] = lambda: False) -> R:
        """Project until stopped: ``until_caught_up`` stops at the end offsets seen at start, ``idle_exit_s`` after that long without a record."""
        targets = self.consumer.end_offsets(self.tps) if until_caught_up else None
        last = time.monotonic()
        while not should_stop():
            if self.poll_once():
                last = time.monotonic()
            if targets is not None and all(self.position(tp.topic, tp.partition) >= targets[tp] for tp in self.tps):
                break
            if idle_exit_s is not None and time.monotonic() - last >= idle_exit_s:
                break
        return self.report

    def close(self) -> None:
        """Close the consumer (the sink is the caller's)."""
        self.consumer.close()
