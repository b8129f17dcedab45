"""Where a record was read (topic, partition, offset, timestamp): the one position type every
worker step and embedded runner passes to the pure pipelines, so their dead letters and frames
name their source the same way on Kafka and in a file (the embedded runner's topic is the input)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Position:
    """Where a record was read: topic, partition, offset, and its Kafka timestamp (epoch ms)."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
