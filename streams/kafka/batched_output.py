"""Output records collected into aiokafka batches per (topic, partition) and sent whole (the workers' producer path)."""

from __future__ import annotations

import asyncio
from typing import Any

import faust


class BatchedOutput:
    """Records to send, collected into one aiokafka batch per (topic, partition) and sent whole.

    faust's per-message send (a coroutine, a future and an accumulator call per record) costs more
    than the rest of the dedup step; appending to an aiokafka ``BatchBuilder`` costs a C call. A
    batch is sent when it is full and by :meth:`flush`, which every worker registers as a
    before-commit hook (:func:`streams.kafka.rewinding.on_before_commit`): faust then flushes its
    producer and commits, so a committed record's outputs are always acknowledged (at-least-once).
    Per partition, batches are sent in the order they were filled, so outputs keep their order.

    Two ways in: :meth:`append` (async: a full batch is sent at once) and :meth:`put` (synchronous,
    for a batch handler that must not await between taking records and acking them,
    :mod:`streams.kafka.batch_delivery`: a full batch waits in a queue until :meth:`send_full` or
    :meth:`flush`). Every send goes through one lock, so batches of a partition reach the producer
    in the order they were filled even when a commit's flush and a handler's send overlap.

    Args:
        app: the faust app whose producer (aiokafka's ``AIOKafkaProducer``) sends the batches.
    """

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self._batches: dict[tuple[str, int], Any] = {}
        self._full: list[tuple[str, int, Any]] = []  # filled batches not yet handed to the producer, in fill order
        self._lock: asyncio.Lock | None = None

    def _producer(self) -> Any:
        return self.app.producer._ensure_producer()  # type: ignore[attr-defined]  # the AIOKafkaProducer faust started

    def _send_lock(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()  # made on first use, inside the app's running loop
        return self._lock

    def put(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Add one record for ``topic``/``partition`` without awaiting (a ``None`` value is a tombstone);
        a batch it fills waits for :meth:`send_full` / :meth:`flush`.

        Raises:
            ValueError: when one record is larger than a whole batch (``producer_max_batch_size``).
        """
        tp = (topic, partition)
        batch = self._batches.get(tp)
        if batch is None:
            batch = self._batches[tp] = self._producer().create_batch()
        if batch.append(key=key, value=value, timestamp=None) is None:
            self._full.append((topic, partition, batch))
            batch = self._batches[tp] = self._producer().create_batch()
            if batch.append(key=key, value=value, timestamp=None) is None:
                raise ValueError(f"a record of {len(value or b'')} bytes does not fit one batch")

    def pending_full(self) -> int:
        """How many filled batches wait to be handed to the producer."""
        return len(self._full)

    async def send_full(self) -> None:
        """Hand every filled batch to the producer, in fill order."""
        if not self._full:
            return
        async with self._send_lock():
            await self._send_queued()

    async def _send_queued(self) -> None:
        while self._full:
            topic, partition, batch = self._full.pop(0)
            await self._producer().send_batch(batch, topic, partition=partition)

    async def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Add one record for ``topic``/``partition`` (a ``None`` value is a tombstone); a batch it
        fills is sent before this returns.

        Raises:
            ValueError: when one record is larger than a whole batch (``producer_max_batch_size``).
        """
        self.put(topic, partition, key, value)
        await self.send_full()

    async def flush(self) -> None:
        """Hand every filled and every open batch to the producer (faust's producer flush then waits for the acks)."""
        async with self._send_lock():
            await self._send_queued()
            batches, self._batches = self._batches, {}
            for (topic, partition), batch in batches.items():
                if batch.record_count():
                    await self._producer().send_batch(batch, topic, partition=partition)
