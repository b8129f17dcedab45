"""What every hivestream faust worker shares: the app settings, the commit hook, batched output, changelog topics, running.

Known and left open: faust-streaming issue #596. After a table restore faust resumes and seeks the
input partitions, then clears the stream queues; a fetch that lands between the seek and the clear
leaves offsets that are never acked, and the committed offset can stop advancing (the consumer
group's lag grows; the next restart re-processes from the stale offset; outputs stay complete and
idempotent). Not clearing the queues there (tried in this project) turns the stall into a silent
loss: a stale pre-seek fetch marks the refetched offsets as a gap (acked) and faust skips them as
already read. The fix belongs in faust's seek/gap bookkeeping.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import faust
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer

from streams.settings import Settings
from streams.topics import TopicSpec
from streams.workdir import claim_worker_dir

_BEFORE_COMMIT: WeakKeyDictionary[Any, list[Callable[[], Awaitable[None]]]] = WeakKeyDictionary()


def on_before_commit(app: faust.App, hook: Callable[[], Awaitable[None]]) -> None:
    """Run ``hook`` right before each offset commit of ``app`` (see :class:`FlushBeforeCommitConsumer`)."""
    _BEFORE_COMMIT.setdefault(app, []).append(hook)


async def run_before_commit(app: Any) -> None:
    """Run the before-commit hooks of ``app`` in the order they were added."""
    for hook in _BEFORE_COMMIT.get(app, ()):
        await hook()


class FlushBeforeCommitConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """faust's aiokafka consumer that runs the app's before-commit hooks before it commits.

    A hook writes state that changed since the last commit to its table's changelog (through the
    producer); faust then flushes its producer and commits. So the changelog
    always holds the state of at least every committed record (a write-back cache in front of a
    faust table, as Kafka Streams flushes its stores on commit), and a table can be written outside
    an event's context (faust issue #497: a table cannot be written inside ``take()``).
    """

    async def _commit_offsets(self, offsets: Mapping[Any, int], start_new_transaction: bool = True) -> bool:
        await run_before_commit(self.app)
        done: bool = await super()._commit_offsets(offsets, start_new_transaction)
        return done


class BatchedOutput:
    """Records to send, collected into one aiokafka batch per (topic, partition) and sent whole.

    faust's per-message send (a coroutine, a future and an accumulator call per record) costs more
    than the rest of the dedup step; appending to an aiokafka ``BatchBuilder`` costs a C call. A
    batch is sent when it is full and by :meth:`flush`, which every worker registers as a
    before-commit hook (:func:`on_before_commit`): faust then flushes its producer and commits, so a
    committed record's outputs are always acknowledged (at-least-once). Per partition, batches are
    sent in the order they were filled, so outputs keep their order.

    Args:
        app: the faust app whose producer (aiokafka's ``AIOKafkaProducer``) sends the batches.
    """

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self._batches: dict[tuple[str, int], Any] = {}

    def _producer(self) -> Any:
        return self.app.producer._ensure_producer()  # type: ignore[attr-defined]  # the AIOKafkaProducer faust started

    async def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None) -> None:
        """Add one record for ``topic``/``partition`` (a ``None`` value is a tombstone).

        Raises:
            ValueError: when one record is larger than a whole batch (``producer_max_batch_size``).
        """
        tp = (topic, partition)
        batch = self._batches.get(tp)
        if batch is None:
            batch = self._batches[tp] = self._producer().create_batch()
        if batch.append(key=key, value=value, timestamp=None) is None:
            await self._producer().send_batch(batch, topic, partition=partition)
            batch = self._batches[tp] = self._producer().create_batch()
            if batch.append(key=key, value=value, timestamp=None) is None:
                raise ValueError(f"a record of {len(value or b'')} bytes does not fit one batch")

    async def flush(self) -> None:
        """Hand every open batch to the producer (faust's producer flush then waits for the acks)."""
        batches, self._batches = self._batches, {}
        for (topic, partition), batch in batches.items():
            if batch.record_count():
                await self._producer().send_batch(batch, topic, partition=partition)


def make_faust_app(app_id: str, settings: Settings, *, store: str, partitions: int, data_dir: str | None) -> faust.App:
    """A faust app configured as every hivestream worker is.

    At-least-once (faust's ``exactly_once`` has open bugs), raw bytes, ``acks=all``, commits every
    second (faust flushes its producer before each commit, so outputs and changelog writes of the
    committed records are durable), a 10 s session timeout (a killed worker's partitions move after
    10 s, not 60 s), no web server, a producer that lingers 10 ms into 1 MiB batches, and the
    :class:`FlushBeforeCommitConsumer`. ``data_dir`` is the base of the workers' slot
    directories (:func:`streams.workdir.claim_worker_dir`).
    """
    kwargs: dict[str, Any] = {}
    if data_dir:
        kwargs["datadir"] = str(claim_worker_dir(Path(data_dir), app_id))
    app = faust.App(
        app_id,
        broker=f"kafka://{settings.kafka_bootstrap_servers}",
        store=store,
        processing_guarantee="at_least_once",
        topic_partitions=partitions,
        topic_replication_factor=1,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_linger=0.010,
        producer_max_batch_size=1_048_576,
        producer_max_request_size=2_097_152,
        broker_commit_every=10_000,
        broker_commit_interval=1.0,
        broker_session_timeout=10.0,  # a killed worker's partitions move after 10 s, not 60 s
        broker_heartbeat_interval=3.0,
        stream_wait_empty=True,
        stream_buffer_maxsize=16_384,
        **kwargs,
    )
    app.transport.Consumer = FlushBeforeCommitConsumer  # type: ignore[misc]  # the transport makes its consumer from this attribute
    return app


def changelog_specs(*tables: Any) -> list[TopicSpec]:
    """Specs of the changelog topics of faust ``tables`` (compacted, one partition per table partition).

    The workers create them before faust starts: a changelog topic that faust creates itself
    moments after its consumer fetched the cluster metadata can stay unknown to that consumer
    (0 partitions), and the table's agent then crashes in a loop with ``PartitionsMismatch``.
    """
    return [TopicSpec(t.changelog_topic_name, t.partitions, {"cleanup.policy": "compact", "segment.ms": "3600000"}) for t in tables if t is not None]


def run_app(app: faust.App, loglevel: str = "warning") -> None:
    """Run a faust worker for ``app`` until it is stopped (SIGTERM/SIGINT); blocks."""
    from faust.worker import Worker

    class _Worker(Worker):  # type: ignore[misc]
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            # mode leaves the root logger at DEBUG and filters in the handler, so every debug
            # call of faust builds a LogRecord per event; set the level on the logger itself.
            super().on_setup_root_logger(logger, level)
            logger.setLevel(level)

    _Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
