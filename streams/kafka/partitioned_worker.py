"""One partitioned worker: the Kafka machinery of every hivestream worker, written once; each pipeline supplies a step.

A *step* (:class:`PartitionStep`) is a pipeline's processing of one partition of its source topic:
it is restored from the partition's changelog items, processes the partition's records a batch at
a time into outputs and dead letters (:class:`Outputs`), and drains the state changes since its
last drain as changelog records in its pipeline's prefix-safe order. :class:`PartitionedWorker`
does the rest, inside a faust app (:func:`streams.kafka.faust_app.make_faust_app`):

* **Batch delivery** -- the source topic's records reach :meth:`PartitionedWorker.on_records` a
  fetch per partition at a time (:mod:`streams.kafka.batch_delivery`, with the #596 ledger of
  :mod:`streams.kafka.rewinding` deciding which records are delivered and how far to commit); a
  no-op agent subscribes the app to the topic so faust assigns its partitions.
* **Lazy restore** -- a partition's step is restored from the state table (faust restored it from
  the compacted changelog topic) on the partition's first batch.
* **Outputs** -- records go into aiokafka batches (:class:`~streams.kafka.batched_output.BatchedOutput`);
  dead letters wait in order and are sent by key (``source:partition:offset``) after the batch.
* **Changelog flush before commit** -- right before faust commits, every step's drained records are
  written to the table's changelog topic in the order the step gave, then every pending dead letter
  and open batch is sent and each answer confirmed
  (:class:`~streams.kafka.acknowledgements.OutputRefused` otherwise: nothing is committed past it).
* **Revoke** -- a revoked partition is flushed the same way and its step dropped; the next owner
  restores it from the changelog.

Processing is at-least-once: a record processed again re-emits the same answers (every step keeps
what it decided by event id), which the projectors apply once. A step never raises on data (each
pipeline's record processing is under a :class:`~streams.model.guard.Guard`); an exception out of
:meth:`PartitionStep.process` is a bug and stops the worker, as an agent's crash would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import faust
import orjson
from faust.types import TP

from streams.kafka.batch_delivery import on_batch
from streams.kafka.batched_output import BatchedOutput
from streams.kafka.faust_app import internal_specs, written_specs
from streams.kafka.rewinding import on_before_commit
from streams.kafka.topics import Topics, TopicSpec
from streams.model.deadletter import DeadLetter

Put = Callable[[str, int, bytes | None, bytes | None], None]
"""``put(topic, partition, key, value)``: one output record into its batch, without awaiting (a ``None`` value is a tombstone)."""


class Outputs:
    """Where a step's outputs go while it processes a batch (nothing here awaits).

    Attributes:
        put: :data:`Put` (:meth:`BatchedOutput.put`): the record waits in its batch.
        pending: the dead letters not yet handed to the producer, with their topics, in order.
    """

    __slots__ = ("pending", "put")

    def __init__(self, put: Put) -> None:
        self.put = put
        self.pending: list[tuple[DeadLetter, str]] = []

    def dead(self, letter: DeadLetter, topic: str) -> None:
        """Send ``letter`` to ``topic`` (by key) once the batch is processed, before any commit past its record."""
        self.pending.append((letter, topic))


class PartitionStep(Protocol):
    """A pipeline's processing of one partition of its source topic (see the module docstring)."""

    def process(self, records: Sequence[Any], out: Outputs) -> None:
        """Process one fetch of the partition's records (aiokafka ``ConsumerRecord`` s in offset
        order: ``offset``, ``timestamp`` epoch ms, ``key``, ``value`` bytes or None) into ``out``.
        Synchronous, and raises nothing on data."""

    def drain(self) -> Iterable[tuple[str, Any]]:
        """The state changes since the last drain as changelog records ``(key, JSON-able value or
        None for a deleted key)``, in the order to write them: any prefix of them, with every
        earlier record, must restore a state that gives the first run's answers."""


class Restore(Protocol):
    """How a pipeline restores its step for a partition."""

    def __call__(self, partition: int, items: list[tuple[Any, Any]], committed: Callable[[], int | None]) -> PartitionStep:
        """The step of ``partition`` from the state table's ``items`` (every partition's ``(key,
        value)`` pairs as faust's table holds them; a ``None`` value is a deleted key);
        ``committed()`` reads the source partition's committed offset (None before the first commit)."""


async def _subscribe(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
    """The no-op agent: subscribes the app to the source topic (so faust assigns its partitions);
    the records go to :meth:`PartitionedWorker.on_records` a fetch at a time, not through this stream."""
    async for _event in stream.events():
        yield None


class PartitionedWorker:
    """The Kafka machinery around one pipeline's steps (see the module docstring).

    Args:
        app: the faust app (:func:`streams.kafka.faust_app.make_faust_app`: its consumer delivers batches).
        source: the faust topic the worker reads.
        table: the faust table holding the steps' state (its changelog topic is written by :meth:`flush`).
        restore: the pipeline's :class:`Restore`.
        agent: the name of the no-op agent that subscribes the app to ``source``.

    Attributes:
        steps: partition → its step, for the partitions restored and not revoked since.
        out: the steps' :class:`Outputs`; ``batched`` the :class:`BatchedOutput` behind its ``put``.
        agent: the no-op faust agent.
    """

    def __init__(self, app: faust.App, source: Any, table: Any, restore: Restore, *, agent: str) -> None:
        self.app = app
        self.table = table
        self.restore = restore
        self.source: str = source.get_topic_name()
        self.batched = BatchedOutput(app)
        self.out = Outputs(self.batched.put)
        self.steps: dict[int, PartitionStep] = {}
        self._lock: asyncio.Lock | None = None  # made on first use, inside the app's running loop
        on_before_commit(app, self.before_commit)
        app.on_partitions_revoked.connect(self._revoked)
        on_batch(app, self.source, self.on_records, self.after_records)
        self.agent = app.agent(source, name=agent)(_subscribe)

    def step(self, partition: int) -> PartitionStep:
        """The step of ``partition``, restored from the state table on first use."""
        step = self.steps.get(partition)
        if step is None:
            tp = TP(self.source, partition)

            def committed() -> int | None:
                off = getattr(self.app.consumer, "_committed_offset", {}).get(tp)  # faust keeps the last committed offsets here
                return int(off) if off is not None else None

            step = self.steps[partition] = self.restore(partition, list(self.table.data.items()), committed)
        return step

    def on_records(self, tp: Any, records: Sequence[Any]) -> None:
        """The batch handler (:data:`streams.kafka.batch_delivery.BatchHandler`): one fetch of a source partition to its step."""
        self.step(tp.partition).process(records, self.out)

    async def after_records(self) -> None:
        """After a fetch's batches were acked: hand the filled batches and the dead letters to the producer."""
        await self.batched.send_full()
        await self.send_pending()

    async def send_dead(self, letter: DeadLetter, topic: str) -> None:
        """Send one dead letter to ``topic``, keyed ``source:partition:offset``; its answer is confirmed before the next commit."""
        key = f"{letter.source}:{letter.partition}:{letter.offset}".encode()
        await self.batched.send_one(topic, key, letter.model_dump_json().encode())

    async def send_pending(self) -> None:
        """Hand every pending dead letter to the producer, in order; each leaves the queue only once
        the producer has it, so a commit that runs meanwhile (its before-commit flush calls this too)
        waits for them instead of committing past records whose dead letters were never sent."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            pending = self.out.pending
            while pending:
                letter, topic = pending[0]
                await self.send_dead(letter, topic)
                del pending[0]

    async def flush(self, partition: int | None = None) -> None:
        """Write the drained changelog records of every step (or of ``partition``'s) to the table's
        changelog topic, then send every pending dead letter and every open batch."""
        topic = self.table.changelog_topic.get_topic_name()
        put = self.batched.put
        for p, step in list(self.steps.items()):
            if partition is not None and p != partition:
                continue
            # put without an await between, so a flush of the same partition that overlaps (a commit's
            # and a revocation's) cannot interleave its records with these: the step's order holds
            for k, v in step.drain():
                put(topic, p, k.encode(), None if v is None else orjson.dumps(v))
            await self.batched.send_full()
        await self.send_pending()  # dead letters of records acked already: in the producer before faust flushes it and commits
        await self.batched.flush()

    async def before_commit(self) -> None:
        """Every output and state change sent, and each acknowledged (``OutputRefused`` otherwise: no commit)."""
        await self.flush()
        await self.batched.confirm()

    async def _revoked(self, sender: Any, /, *args: Any, signal: Any = None, **kw: Any) -> None:
        """faust's ``on_partitions_revoked``: flush each revoked source partition's step, then drop it."""
        revoked = args[0] if args else kw.get("revoked", ())
        mine = [tp.partition for tp in revoked if tp.topic == self.source and tp.partition in self.steps]
        for p in mine:
            await self.flush(p)  # the next owner restores the partition from the changelog
            self.steps.pop(p, None)
        if mine:
            await self.app.producer.flush()


@dataclass
class WorkerApp:
    """A worker's faust app and its parts: what the CLI creates topics for, checks and runs.

    Attributes:
        app: the faust app.
        topics: the namespace's topic names.
        partitions: the source topic's partition count (the state table's and the co-partitioned outputs').
        worker: the :class:`PartitionedWorker`.
        specs: the pipeline's topics (its source and outputs).
        copartitioned_outputs: the topics besides the state changelog that must have ``partitions`` partitions.
        tables: the app's other faust tables (their changelogs are created too).
    """

    app: faust.App
    topics: Topics
    partitions: int
    worker: PartitionedWorker
    specs: list[TopicSpec]
    copartitioned_outputs: list[str] = field(default_factory=list)
    tables: tuple[Any, ...] = ()

    @property
    def table(self) -> Any:
        """The state table (faust)."""
        return self.worker.table

    def copartitioned(self) -> list[str]:
        """The topics that must have as many partitions as the source: the state changelog, then :attr:`copartitioned_outputs`."""
        return [self.table.changelog_topic_name, *self.copartitioned_outputs]

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic the app reads or writes, the tables' changelogs and faust's leader topic included
        (create them before starting: faust creates none, :func:`streams.kafka.faust_app.make_faust_app`)."""
        return self.specs + internal_specs(self.app, self.table, *self.tables)

    def output_specs(self) -> list[TopicSpec]:
        """The topics the app writes (:meth:`topic_specs` without the source and faust's leader topic, which it only reads)."""
        return written_specs(self.app, self.topic_specs(), self.worker.source)
