"""What every hivestream faust worker shares: the app settings, the recovery fix, changelog topics, running.

The recovery fix (faust-streaming issue #596, open in 0.15.3): after a table restore, faust's
``Recovery`` resumes the stream partitions, seeks them to the committed offsets, and only then
calls ``app.flow_control.resume()``, which also *clears* every stream queue. Flow was already
resumed for the changelog restore, so records fetched from the input partitions between the seek
and that call sit in the queues and are dropped: their offsets are never acked, faust commits only
a contiguous run of acked offsets, and the committed offset stops advancing for good (the
consumer group's lag grows; the next restart re-processes everything since). :class:`KeepQueuedFlowControl`
makes ``resume()`` clear the queues only when flow was actually suspended (a suspension already
cleared them at the revocation), so records fetched after the seek are processed and acked.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import faust
from faust.transport.drivers.aiokafka import Consumer as AIOKafkaConsumer
from mode.utils.queues import FlowControlEvent

from streams.settings import Settings
from streams.topics import TopicSpec
from streams.workdir import claim_worker_dir


class KeepQueuedFlowControl(FlowControlEvent):
    """``app.flow_control`` whose :meth:`resume` keeps queued records when flow is already active.

    Source: faust-streaming issue #596 (recovery clears queued records after seeking; acked offsets
    get a permanent gap). Clearing on a real suspend → resume transition is kept.
    """

    def resume(self) -> None:
        """Resume flow; clear the queues only if flow was suspended."""
        was_suspended = not self.is_active()
        self._suspend.clear()
        self._resume.set()
        if was_suspended:
            self.clear()


_BEFORE_COMMIT: WeakKeyDictionary[Any, list[Callable[[], None]]] = WeakKeyDictionary()


def on_before_commit(app: faust.App, hook: Callable[[], None]) -> None:
    """Run ``hook`` right before each offset commit of ``app`` (see :class:`FlushBeforeCommitConsumer`)."""
    _BEFORE_COMMIT.setdefault(app, []).append(hook)


def run_before_commit(app: Any) -> None:
    """Run the before-commit hooks of ``app`` in the order they were added."""
    for hook in _BEFORE_COMMIT.get(app, ()):
        hook()


class FlushBeforeCommitConsumer(AIOKafkaConsumer):  # type: ignore[misc]
    """faust's aiokafka consumer that runs the app's before-commit hooks before it commits.

    A hook writes state that changed since the last commit to its table's changelog
    (``send_changelog``, buffered); faust then flushes its producer and commits. So the changelog
    always holds the state of at least every committed record (a write-back cache in front of a
    faust table, as Kafka Streams flushes its stores on commit), and a table can be written outside
    an event's context (faust issue #497: a table cannot be written inside ``take()``).
    """

    async def _commit_offsets(self, offsets: Mapping[Any, int], start_new_transaction: bool = True) -> bool:
        run_before_commit(self.app)
        done: bool = await super()._commit_offsets(offsets, start_new_transaction)
        return done


def make_faust_app(app_id: str, settings: Settings, *, store: str, partitions: int, data_dir: str | None) -> faust.App:
    """A faust app configured as every hivestream worker is.

    At-least-once (faust's ``exactly_once`` has open bugs), raw bytes, ``acks=all``, commits every
    second (faust flushes its producer before each commit, so outputs and changelog writes of the
    committed records are durable), a 10 s session timeout (a killed worker's partitions move after
    10 s, not 60 s), no web server, a producer that lingers 10 ms into 1 MiB batches, and the
    :class:`KeepQueuedFlowControl` recovery fix and the :class:`FlushBeforeCommitConsumer`. ``data_dir`` is the base of the workers' slot
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
    app.flow_control = KeepQueuedFlowControl(loop=app.loop)
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
