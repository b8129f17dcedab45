"""Output records collected into aiokafka batches per (topic, partition) and sent whole (the workers' producer path),
and the broker's answers to them checked before any commit."""

from __future__ import annotations

import asyncio
from typing import Any

import faust

from streams.kafka.acknowledgements import Acknowledgements, Sent, refused_at_once


class BatchedOutput:
    """Records to send, collected into one aiokafka batch per (topic, partition) and sent whole.

    faust's per-message send (a coroutine, a future and an accumulator call per record) costs more
    than the rest of the dedup step; appending to an aiokafka ``BatchBuilder`` costs a C call. A
    batch is sent when it is full and by :meth:`flush`, which every worker registers as a
    before-commit hook (:func:`streams.kafka.rewinding.on_before_commit`) followed by :meth:`confirm`,
    so a committed record's outputs are always acknowledged (at-least-once).
    Per partition, batches are sent in the order they were filled, so outputs keep their order.

    The broker's answer to every batch (and to every record sent by :meth:`send_one`) is kept until
    :meth:`confirm`, which the before-commit hook awaits after :meth:`flush`: a refused output raises
    :class:`~streams.kafka.acknowledgements.OutputRefused` there, so no offset is committed past it (aiokafka's and faust's
    producer flush only wait for the batches; they do not raise on a failed one).

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
        self.answers = Acknowledgements()

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
            await self._send(batch, topic, partition)

    async def _send(self, batch: Any, topic: str, partition: int) -> None:
        size, records = batch.size(), batch.record_count()
        try:
            answer = await self._producer().send_batch(batch, topic, partition=partition)
        except Exception as exc:  # refused before sending (a partition the producer does not know): a refusal like any other
            answer = refused_at_once(exc)
        self.answers.add(Sent(topic, partition, answer, size, records))

    async def send_one(self, topic: str, key: bytes, value: bytes, partition: int | None = None) -> None:
        """Send one record through faust's producer (``partition`` None: by key) and keep its answer for :meth:`confirm`
        (the workers' dead letters)."""
        fut: asyncio.Future[Any]
        try:
            fut = asyncio.ensure_future(await self.app.producer.send(topic, key, value, partition, None, None))
        except Exception as exc:  # faust raises ProducerSendError at once for some refusals
            fut = refused_at_once(exc)
        self.answers.add(Sent(topic, partition, fut))

    async def confirm(self) -> None:
        """Wait for the broker's answer to every output sent so far (:meth:`Acknowledgements.confirm`).

        Raises:
            OutputRefused: when any was refused, now or before (one line).
        """
        await self.answers.confirm()

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
                    await self._send(batch, topic, partition)
