"""The faust stub worker: ``stub-events`` → matcher step → ``stub-matches`` (+ ``stub-dead-letter``).

The records of ``stub-events`` (keyed by channel) reach ``on_records`` a fetch per partition at a
time (batch delivery inside faust, :mod:`streams.kafka.batch_delivery`). Per partition it keeps a
:class:`~streams.stubs.partition_step.StubPartitionStep` whose state is a plain dict
(:class:`~streams.model.tracked_state.TrackedState`) in front of the faust table ``stub-state``:
the keys changed since the last commit are written to the table's changelog right before faust
commits and when a partition is revoked (as the frames worker does with ``dedup-state``; a faust
table cannot be written outside an event's context, faust #497), so a restarted worker, or the
worker that takes the partition over, resumes with the same stubs and the outcomes of the
messages already processed. Output records go to the same partition number of ``stub-matches``,
in aiokafka batches, keeping their order. Processing is at-least-once; re-emitted records carry the
same event ids and the projector applies them once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import faust
import orjson

from streams.kafka.batch_delivery import on_batch
from streams.kafka.batched_output import BatchedOutput
from streams.kafka.connection import ConnectionLike
from streams.kafka.faust_app import internal_specs, make_faust_app, written_specs
from streams.kafka.rewinding import on_before_commit
from streams.kafka.topics import Topics, TopicSpec
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.model.position import Position
from streams.model.tracked_state import TrackedState
from streams.settings import Settings
from streams.stubs.partition_step import Emit, StubPartitionStep, changelog_order
from streams.stubs.settings import MatchPolicy

log = logging.getLogger(__name__)


def store_key(key: Any) -> str:
    """A ``stub-state`` key as :class:`~streams.stubs.partition_step.StubPartitionStep` writes it (``json.dumps([p, kind, ...])``),
    from what faust's table restore gives back: the string, its UTF-8 bytes, or (rocksdb store) the decoded JSON list."""
    if isinstance(key, bytes):
        return key.decode()
    if isinstance(key, list):
        return json.dumps(key)
    return str(key)


@dataclass
class StubWorkerApp:
    """The faust app of the stub worker and its parts (exposed for tests)."""

    app: faust.App
    topics: Topics
    partitions: int
    matcher: Any
    table: Any

    def copartitioned(self) -> list[str]:
        """The topics that must have as many partitions as ``stub-events``: the ``stub-state`` changelog and ``stub-matches``."""
        return [self.table.changelog_topic_name, self.topics.stub_matches]

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic the app reads or writes, the ``stub-state`` changelog and faust's leader topic included (create them before starting)."""
        return self.topics.stub_specs(self.partitions) + internal_specs(self.app, self.table)

    def output_specs(self) -> list[TopicSpec]:
        """The topics the app writes (:meth:`topic_specs` without ``stub-events`` and faust's leader topic, which it only reads)."""
        return written_specs(self.app, self.topic_specs(), self.topics.stub_events)


def create_stub_app(settings: Settings, policy: MatchPolicy, *, connection: ConnectionLike, partitions: int, store: str = "rocksdb://",
                    data_dir: str | None = None) -> StubWorkerApp:
    """Build the stub worker for ``settings`` (namespace, replication) and ``policy`` (threshold, top N, budget).

    Args:
        connection: the Kafka connection (:mod:`streams.kafka.connection`).
        partitions: the partition count of ``stub-events`` (``stub-matches`` and the table use
            the same count).
        store: ``rocksdb://`` (production) or ``memory://`` (tests).
        data_dir: base of the workers' data directories (see :func:`streams.kafka.workdir.claim_worker_dir`).
    """
    topics = Topics(settings.topic_namespace)
    app_id = f"{settings.topic_namespace}-stubs"
    app = make_faust_app(app_id, settings, connection=connection, store=store, partitions=partitions, data_dir=data_dir)
    events = app.topic(topics.stub_events, internal=False)
    table = app.Table("stub-state", default=None, partitions=partitions,
                      schema=faust.Schema(key_type=str, key_serializer="raw", value_serializer="json"))
    steps: dict[int, StubPartitionStep] = {}
    states: dict[int, TrackedState] = {}
    out = BatchedOutput(app)
    pending: list[DeadLetter] = []  # dead letters of acked records: sent by faust's producer (key-partitioned)
    pending_lock: list[asyncio.Lock] = []  # made on first use, inside the app's running loop

    async def send_pending() -> None:
        """Hand every pending dead letter to the producer, in order; each leaves ``pending`` only once
        the producer has it, so a commit meanwhile (its before-commit flush calls this too) never
        passes records whose dead letters were not sent."""
        if not pending_lock:
            pending_lock.append(asyncio.Lock())
        async with pending_lock[0]:
            while pending:
                dl = pending[0]
                await out.send_one(topics.stub_dead_letter, f"{dl.source}:{dl.partition}:{dl.offset}".encode(),
                                   dl.model_dump_json().encode())  # its answer is confirmed before the next commit
                del pending[0]

    async def flush_state(partition: int | None = None) -> None:
        """Send the state keys changed since the last call to the table's changelog (None deletes), then every open batch."""
        topic = table.changelog_topic.get_topic_name()
        for p, state in list(states.items()):
            if partition is not None and p != partition:
                continue
            upserts, deletes = state.drain()
            changes = [(k, orjson.dumps(v)) for k, v in upserts.items()] + [(k, None) for k in deletes]
            for k, value in sorted(changes, key=lambda c: changelog_order(c[0])):  # a prefix left by a kill -9 stays consistent
                out.put(topic, p, k.encode(), value)
        await send_pending()  # dead letters of records acked already: in the producer before faust flushes it and commits
        await out.flush()

    async def before_commit() -> None:
        """Every output and state change sent, and each acknowledged (``OutputRefused`` otherwise: no commit)."""
        await flush_state()
        await out.confirm()

    on_before_commit(app, before_commit)

    @app.on_partitions_revoked.connect
    async def _forget(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
        revoked = args[0] if args else kw.get("revoked", ())
        mine = [tp.partition for tp in revoked if tp.topic == topics.stub_events and tp.partition in steps]
        for p in mine:
            await flush_state(p)  # the next owner restores the partition from the changelog
            steps.pop(p, None)
            states.pop(p, None)
        if mine:
            await app.producer.flush()

    def step_for(partition: int) -> StubPartitionStep:
        step = steps.get(partition)
        if step is None:
            prefix = f"[{partition}, "  # every store key is json.dumps([partition, ...])
            restored = ((store_key(k), v) for k, v in list(table.data.items()) if v is not None)
            state = states[partition] = TrackedState({k: v for k, v in restored if k.startswith(prefix)})
            step = steps[partition] = StubPartitionStep(partition, policy, state)
            for rej in step.restore_rejections:  # a stub that no longer loads: it matches nothing on this partition
                log.warning("stub-state partition %d: a stored stub did not load: %s", partition, rej.error.detail)
        return step

    def on_records(tp: Any, records: Sequence[Any]) -> None:
        """One fetch of a stub-events partition → stub-matches (same partition, batched) and dead letters (pending)."""
        p = tp.partition
        step = step_for(p)
        now = wall_clock_ms()
        for r in records:
            for o in step.process(r.value, Position(tp.topic, p, r.offset, r.timestamp), now):
                if isinstance(o, Emit):
                    out.put(topics.stub_matches, p, o.key, o.value)
                elif isinstance(o, DeadLetter):
                    pending.append(o)

    async def after_records() -> None:
        await out.send_full()
        await send_pending()

    on_batch(app, topics.stub_events, on_records, after_records)

    @app.agent(events)
    async def matcher(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """Subscribes the app to stub-events; its records go to ``on_records`` a fetch at a time
        (streams.kafka.batch_delivery), not through this stream."""
        async for _event in stream.events():
            yield None

    return StubWorkerApp(app, topics, partitions, matcher, table)
