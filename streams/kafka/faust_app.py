"""What every hivestream faust worker shares: the app settings, its consumer, changelog topics, running.

The consumer of every app is :class:`streams.kafka.batch_delivery.BatchDeliveryConsumer`: the
faust-streaming #596 delivery fix and the before-commit hook (:mod:`streams.kafka.rewinding`), plus
batch delivery of the topics a worker registers a batch handler for.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import IO, Any

import faust

from streams.gc_tuning import tune_gc
from streams.kafka.batch_delivery import BatchDeliveryConsumer
from streams.kafka.clients import faust_app
from streams.kafka.connection import ConnectionLike
from streams.kafka.errors import scrub_logging
from streams.kafka.rewinding import RewindingFlowControl
from streams.kafka.topics import WORKER_BATCH_BYTES, TopicSpec
from streams.kafka.workdir import claim_worker_dir
from streams.settings import Settings

FETCH_BYTES_PER_PARTITION = 8 * 1024 * 1024
"""``max_partition_fetch_bytes`` of every worker's consumer (faust's ``consumer_max_fetch_size``,
default 1 MiB; Kafka's ``max.partition.fetch.bytes``; a response stays capped by aiokafka's
``fetch_max_bytes``, 50 MiB).

aiokafka sends the next fetch to a broker only once the records of the last one were taken, and
reads the response on faust's consumer thread, which shares the GIL with the busy fetch loop. With
1 MiB a fetch round trip took ~270 ms for ~2,800 hook events, and the worker waited on fetches for
about half its wall time; with 8 MiB (~13,000 events a fetch) the wait is mostly hidden behind the
processing of the previous batch. Measured on a 200,000-event backlog: ~8k → ~16-20k records/s for
~120 MiB more peak RSS (``bench/RESULTS.md``)."""


def make_faust_app(app_id: str, settings: Settings, *, connection: ConnectionLike, store: str, partitions: int, data_dir: str | None) -> faust.App:
    """A faust app configured as every hivestream worker is.

    At-least-once (faust's ``exactly_once`` has open bugs), raw bytes, ``acks=all``, commits every
    second (faust flushes its producer before each commit, so outputs and changelog writes of the
    committed records are durable), a 10 s session timeout (a killed worker's partitions move after
    10 s, not 60 s), no web server, fetches of up to :data:`FETCH_BYTES_PER_PARTITION` per partition,
    a producer that lingers 10 ms into 1 MiB batches, ``settings.standby_replicas`` standby copies of
    each table partition (default 0, see :class:`~streams.settings.Settings`), the
    #596 delivery fix (:class:`~streams.kafka.rewinding.RewindingFlowControl`) and the
    :class:`~streams.kafka.batch_delivery.BatchDeliveryConsumer`. ``data_dir`` is the base of the workers' slot
    directories (:func:`streams.kafka.workdir.claim_worker_dir`).

    The brokers and credentials come from ``connection`` (:func:`streams.kafka.connection.faust_app`:
    ``broker`` URL list and ``broker_credentials``). faust creates no topic (``topic_allow_declare``
    off): the workers create every topic they use beforehand, changelogs and the assignor's leader
    topic included (:func:`internal_specs`), with hivestream's replication; faust's own
    ``topic_replication_factor`` (default 1, an unsigned int, so it cannot say "the broker's default")
    is set to ``settings.replication_factor`` when given and is never used to create anything.
    """
    kwargs: dict[str, Any] = {}
    if data_dir:
        kwargs["datadir"] = str(claim_worker_dir(Path(data_dir), app_id))
    app: faust.App = faust_app(
        connection,
        app_id,
        store=store,
        processing_guarantee="at_least_once",
        topic_partitions=partitions,
        topic_replication_factor=settings.replication_factor or 1,
        topic_allow_declare=False,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        producer_linger=0.010,
        producer_max_batch_size=WORKER_BATCH_BYTES,
        producer_max_request_size=2_097_152,
        broker_commit_every=10_000,
        broker_commit_interval=1.0,
        broker_session_timeout=10.0,  # a killed worker's partitions move after 10 s, not 60 s
        broker_heartbeat_interval=3.0,
        stream_wait_empty=True,
        table_standby_replicas=settings.standby_replicas,
        stream_buffer_maxsize=16_384,
        consumer_max_fetch_size=FETCH_BYTES_PER_PARTITION,
        **kwargs,
    )
    app.flow_control = RewindingFlowControl(app, loop=app.loop)
    app.transport.Consumer = BatchDeliveryConsumer  # type: ignore[misc]  # the transport makes its consumer from this attribute
    return app


CHANGELOG_CONFIG = {"cleanup.policy": "compact", "segment.ms": "3600000", "max.message.bytes": "16777216"}
"""The configs of the changelog topics the workers create: compacted, and records up to 16 MiB, because
one key's state can outgrow Kafka's default 1 MiB (a frame keeps every event id it absorbed: a body
captured ~20,000 times inside one window passes it; ``tests/streams/test_hot_body.py``)."""


def changelog_specs(*tables: Any) -> list[TopicSpec]:
    """Specs of the changelog topics of faust ``tables`` (compacted, one partition per table partition).

    The workers create them before faust starts: a changelog topic that faust creates itself
    moments after its consumer fetched the cluster metadata can stay unknown to that consumer
    (0 partitions), and the table's agent then crashes in a loop with ``PartitionsMismatch``.
    """
    return [TopicSpec(t.changelog_topic_name, t.partitions, dict(CHANGELOG_CONFIG)) for t in tables if t is not None]


def leader_topic_name(app_id: str) -> str:
    """The topic faust's leader assignor uses (``faust.assignor.leader_assignor``: ``<id>-__assignor-__leader``)."""
    return f"{app_id}-__assignor-__leader"


def written_specs(app: faust.App, specs: list[TopicSpec], source: str) -> list[TopicSpec]:
    """The topics of ``specs`` that a worker app writes: all but its ``source`` topic and faust's leader
    topic (:func:`leader_topic_name`), which it only reads."""
    skip = {source, leader_topic_name(app.conf.id)}
    return [t for t in specs if t.name not in skip]


def internal_specs(app: faust.App, *tables: Any) -> list[TopicSpec]:
    """Every topic faust itself would create for ``app``: the changelogs of ``tables`` and the leader topic (1 partition)."""
    return [*changelog_specs(*tables), TopicSpec(leader_topic_name(app.conf.id), 1)]


def plain_logs_unless_tty(stream: IO[str], environ: MutableMapping[str, str]) -> bool:
    """Ask for logs without terminal colour codes when ``stream`` is not a terminal; True if asked.

    mode configures ``colorlog`` without a stream, so its formatter cannot see that stderr is a
    file or a pipe and writes escape codes into log files; ``colorlog`` honours ``NO_COLOR``
    (https://no-color.org), which is set here unless the user set it or ``FORCE_COLOR``.
    """
    if stream.isatty() or "FORCE_COLOR" in environ or "NO_COLOR" in environ:
        return False
    environ["NO_COLOR"] = "1"
    return True


def run_app(app: faust.App, loglevel: str = "warning") -> None:
    """Run a faust worker for ``app`` until it is stopped (SIGTERM/SIGINT); blocks."""
    from faust.worker import Worker

    plain_logs_unless_tty(sys.stderr, os.environ)

    class _Worker(Worker):  # type: ignore[misc]
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            # mode leaves the root logger at DEBUG and filters in the handler, so every debug
            # call of faust builds a LogRecord per event; set the level on the logger itself.
            super().on_setup_root_logger(logger, level)
            logger.setLevel(level)
            scrub_logging(logger)  # no remembered secret in any log line (streams.kafka.errors.ScrubSecrets)

    tune_gc()  # the app is built: it and the modules leave the collector's sight (streams.gc_tuning)
    _Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
