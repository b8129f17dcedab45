"""A stand-in for the aiokafka producer a worker's :class:`~streams.kafka.batched_output.BatchedOutput`
uses (batches appended until full, sent in order, each answered), for tests without a broker."""

from __future__ import annotations

import asyncio
from typing import Any


class FakeBatch:
    """What aiokafka's BatchBuilder offers the worker: append until full, count."""

    def __init__(self, capacity: int = 3) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []
        self.capacity = capacity

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: None) -> object | None:
        if len(self.records) >= self.capacity:
            return None
        self.records.append((key, value))
        return object()

    def record_count(self) -> int:
        return len(self.records)

    def size(self) -> int:
        return sum(len(k or b"") + len(v or b"") for k, v in self.records)


class FakeProducer:
    """Batches handed to the producer, in order: (topic, partition, key, value) per record."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, bytes | None, bytes | None]] = []

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future[None]:
        self.sent += [(topic, partition, k, v) for k, v in batch.records]
        return acknowledged()


def acknowledged(*_args: Any, **_kwargs: Any) -> asyncio.Future[None]:
    """The broker's answer to a send: acknowledged (aiokafka's delivery future, done)."""
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    fut.set_result(None)
    return fut
