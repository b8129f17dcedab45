"""The stub worker: ``stub-events`` → the matcher → ``stub-matches`` (+ ``stub-dead-letter``).

The Kafka machinery (batch delivery inside faust, batched outputs, dead letters, the state's
changelog flush before each commit and on revocation, the lazy restore of a partition) is
:class:`~streams.kafka.partitioned_worker.PartitionedWorker`'s; this module supplies its step,
:class:`StubStep`, and the app around it. ``stub-events`` is keyed by channel; per partition the step
keeps a :class:`~streams.stubs.partition.StubPartition` whose state is a plain dict
(:class:`~streams.model.tracked_state.TrackedState`) in front of the faust table ``stub-state``
(a faust table cannot be written outside an event's context, faust #497), so a restarted worker,
or the worker that takes the partition over, resumes with the same stubs and the outcomes of the
messages already processed. Output records go to the same partition number of ``stub-matches``,
keeping their order. Processing is at-least-once; re-emitted records carry the same event ids and
the projector applies them once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import faust

from streams.kafka.connection import ConnectionLike
from streams.kafka.faust_app import make_faust_app
from streams.kafka.partitioned_worker import Outputs, PartitionedWorker, WorkerApp
from streams.kafka.topics import Topics
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.model.position import Position
from streams.settings import Settings
from streams.stubs.partition import Emit, StubPartition
from streams.stubs.settings import MatchPolicy


class StubStep:
    """The stub worker's step on one ``stub-events`` partition: each record's :class:`Emit` records to
    ``stub-matches`` (same partition, in order), its dead letters to ``stub-dead-letter``.

    Args:
        part: the partition's matcher state and processing.
        topics: the namespace's topic names.
    """

    def __init__(self, part: StubPartition, topics: Topics) -> None:
        self.part = part
        self.topics = topics

    @classmethod
    def restore(cls, policy: MatchPolicy, topics: Topics, partition: int, items: list[tuple[Any, Any]],
                committed: Callable[[], int | None]) -> StubStep:
        """The step of ``partition`` from the ``stub-state`` table's items (:meth:`StubPartition.restore`;
        the committed offset is not needed: every outcome is kept by message)."""
        return cls(StubPartition.restore(partition, policy, items), topics)

    def process(self, records: Sequence[Any], out: Outputs) -> None:
        """One fetch of the partition → ``stub-matches`` (batched) and dead letters (pending)."""
        part = self.part
        p, now, put, dead = part.partition, wall_clock_ms(), out.put, out.dead
        source, matches, dead_topic = self.topics.stub_events, self.topics.stub_matches, self.topics.stub_dead_letter
        for r in records:
            for o in part.process(r.value, Position(source, p, r.offset, r.timestamp), now):
                if isinstance(o, Emit):
                    put(matches, p, o.key, o.value)
                elif isinstance(o, DeadLetter):
                    dead(o, dead_topic)

    def drain(self) -> list[tuple[str, Any | None]]:
        """The changelog records of one flush (:meth:`StubPartition.flush`: in its prefix-safe order)."""
        return self.part.flush()


def create_stub_app(settings: Settings, policy: MatchPolicy, *, connection: ConnectionLike, partitions: int, store: str = "rocksdb://",
                    data_dir: str | None = None) -> WorkerApp:
    """Build the stub worker for ``settings`` (namespace, replication) and ``policy`` (threshold, top N, budget).

    Args:
        connection: the Kafka connection (:mod:`streams.kafka.connection`).
        partitions: the partition count of ``stub-events`` (``stub-matches`` and the table use
            the same count).
        store: ``rocksdb://`` (production) or ``memory://`` (tests).
        data_dir: base of the workers' data directories (see :func:`streams.kafka.workdir.claim_worker_dir`).
    """
    topics = Topics(settings.topic_namespace)
    app = make_faust_app(f"{settings.topic_namespace}-stubs", settings, connection=connection, store=store, partitions=partitions,
                         data_dir=data_dir)
    events = app.topic(topics.stub_events, internal=False)
    table = app.Table("stub-state", default=None, partitions=partitions,
                      schema=faust.Schema(key_type=str, key_serializer="raw", value_serializer="json"))
    worker = PartitionedWorker(app, events, table, partial(StubStep.restore, policy, topics), agent="streams.workers.stubs.matcher")
    return WorkerApp(app, topics, partitions, worker, topics.stub_specs(partitions), [topics.stub_matches])
