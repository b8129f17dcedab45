"""Output records collected into aiokafka batches per (topic, partition) and sent whole (the workers' producer path),
and the broker's answers to them checked before any commit."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import faust

from streams.kafka.errors import scrub
from streams.kafka.topics import WORKER_BATCH_BYTES


class OutputRefused(Exception):
    """The broker did not acknowledge an output a worker sent (its producer gave up on the batch), so the
    input records behind it must not be committed.

    Kafka Streams' default production exception handler fails the task the same way: a record the
    broker refused (``MESSAGE_TOO_LARGE`` against the topic's ``max.message.bytes``,
    ``TOPIC_AUTHORIZATION_FAILED``, a delivery timeout after aiokafka's retries) is not skipped,
    because committing past it would lose it. ``str()`` is one line naming each topic, partition and
    error (secrets scrubbed, :func:`streams.kafka.errors.scrub`).
    """


class BatchedOutput:
    """Records to send, collected into one aiokafka batch per (topic, partition) and sent whole.

    faust's per-message send (a coroutine, a future and an accumulator call per record) costs more
    than the rest of the dedup step; appending to an aiokafka ``BatchBuilder`` costs a C call. A
    batch is sent when it is full and by :meth:`flush`, which every worker registers as a
    before-commit hook (:func:`streams.kafka.rewinding.on_before_commit`): faust then flushes its
    producer and commits, so a committed record's outputs are always acknowledged (at-least-once).
    Per partition, batches are sent in the order they were filled, so outputs keep their order.

    The broker's answer to every batch (and to every record handed to :meth:`track`) is kept until
    :meth:`confirm`, which the before-commit hook awaits after :meth:`flush`: a refused output raises
    :class:`OutputRefused` there, so no offset is committed past it (aiokafka's and faust's
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
        self._sent: list[tuple[str, int | None, asyncio.Future[Any]]] = []  # answers not yet confirmed, and refusals

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
        self._sent.append((topic, partition, await self._producer().send_batch(batch, topic, partition=partition)))

    def track(self, topic: str, partition: int | None, answer: Awaitable[Any]) -> None:
        """Keep the broker's ``answer`` to one record sent by other means (faust's ``producer.send``, which
        returns aiokafka's delivery future) for the next :meth:`confirm`."""
        self._sent.append((topic, partition, asyncio.ensure_future(answer)))

    async def confirm(self) -> None:
        """Wait for the broker's answer to every output sent so far; return when each was acknowledged.

        A refusal stays recorded, so every later call raises too (a worker never commits past it).

        Raises:
            OutputRefused: when the producer gave up on any of them (one line: topic, partition, error).
        """
        waiting = [f for _t, _p, f in self._sent if not f.done()]
        if waiting:
            await asyncio.wait(waiting)
        refused = [(t, p, f) for t, p, f in self._sent if f.done() and (f.cancelled() or f.exception() is not None)]
        self._sent = [s for s in self._sent if not s[2].done()] + refused
        if refused:
            raise OutputRefused(refusal_line(refused))

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


def refusal_line(refused: list[tuple[str, int | None, asyncio.Future[Any]]]) -> str:
    """One line for refused outputs: how many, then per topic and error the partitions it hit.

    ``refused``: (topic, partition or None when the producer chose it, the done future) triples.
    """
    by: dict[tuple[str, str], list[str]] = {}
    for topic, partition, fut in refused:
        parts = by.setdefault((topic, "cancelled" if fut.cancelled() else _error_text(fut.exception())), [])
        where = "?" if partition is None else str(partition)
        if where not in parts:
            parts.append(where)
    said = "; ".join(f"{topic} partition(s) {', '.join(sorted(parts, key=lambda x: (len(x), x)))}: {err}"
                     for (topic, err), parts in by.items())
    hint = (" (a batch is larger than the topic's max.message.bytes: raise it to at least the workers' batch size, "
            f"{WORKER_BATCH_BYTES:,} bytes)") if "MessageSizeTooLarge" in said else ""
    return f"the broker did not acknowledge {len(refused)} output batch(es), so no offset was committed past them: {said}{hint}"


def _error_text(exc: BaseException | None) -> str:
    name = type(exc).__name__
    text = " ".join(str(exc).split())
    return scrub(name if not text or name in text else f"{name}: {text}")
