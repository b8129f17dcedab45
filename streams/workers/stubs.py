"""The faust stub worker: ``stub-events`` → matcher agent → ``stub-matches`` (+ ``stub-dead-letter``).

One agent consumes ``stub-events`` (keyed by channel). Per partition it keeps a
:class:`~streams.stubs.partition_step.StubPartitionStep` whose state lives in the faust table
``stub-state`` (changelog topic), so a restarted worker, or the worker that takes the partition
over, resumes with the same stubs and the outcomes of the messages already processed. Output
records go to the same partition number of ``stub-matches``, keeping their order. Processing is
at-least-once; re-emitted records carry the same event ids and the projector applies them once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import faust

from streams.kafka.connection import ConnectionLike
from streams.kafka.faust_app import internal_specs, make_faust_app
from streams.kafka.rewinding import is_stale
from streams.kafka.topics import Topics, TopicSpec
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.model.position import Position
from streams.settings import Settings
from streams.stubs.partition_step import Emit, StubPartitionStep
from streams.stubs.settings import MatchPolicy


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
    matches = app.topic(topics.stub_matches, partitions=partitions, internal=False)
    dead = app.topic(topics.stub_dead_letter, internal=False)
    table = app.Table("stub-state", default=None, partitions=partitions,
                      schema=faust.Schema(key_type=str, key_serializer="raw", value_serializer="json"))
    steps: dict[int, StubPartitionStep] = {}

    @app.on_partitions_revoked.connect
    async def _forget(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
        revoked = args[0] if args else kw.get("revoked", ())
        for tp in revoked:
            if tp.topic == topics.stub_events:
                steps.pop(tp.partition, None)  # rebuilt from the table if it comes back

    @app.agent(events)
    async def matcher(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """stub-events → stub-matches (same partition) or stub-dead-letter."""
        async for event in stream.events():
            m = event.message
            if is_stale(app, m):  # faust #596 fix: this record comes again after a seek, in order
                yield None
                continue
            step = steps.get(m.partition)
            if step is None:
                step = steps[m.partition] = StubPartitionStep(m.partition, policy, table)
            pos = Position(m.topic, m.partition, m.offset, int(m.timestamp * 1000))
            for out in step.process(event.value, pos, wall_clock_ms()):
                if isinstance(out, Emit):
                    await matches.send(key=out.key, value=out.value, partition=m.partition)
                elif isinstance(out, DeadLetter):
                    await dead.send(key=f"{out.source}:{out.partition}:{out.offset}".encode(), value=out.model_dump_json().encode())
            yield None

    return StubWorkerApp(app, topics, partitions, matcher, table)
