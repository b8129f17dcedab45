"""Command-line options shared by the Kafka commands (``hivestream``, ``hivestream kb`` and ``hivestream stubs``).

Every Kafka command takes ``--bootstrap`` and ``--kafka-config`` (tests/streams/test_kafka_connection.py
checks it) and builds its connection with :func:`kafka_connection`: options > environment >
properties file (:func:`streams.kafka.connection.resolve_connection`), then a bounded preflight
(:func:`streams.kafka.preflight.check_connection`) so a command that cannot connect says why in one
line instead of retrying. Commands that create topics take ``--replication-factor`` too.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from streams.kafka.connection import KafkaConnection, resolve_connection
from streams.kafka.errors import KafkaSetupError
from streams.kafka.preflight import check_connection
from streams.kafka.topic_check import describe_topics, output_problems, state_mismatch
from streams.kafka.topics import TopicSpec, ensure_topics
from streams.settings import Settings

BootstrapOpt = Annotated[str | None, typer.Option("--bootstrap", help="Kafka bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS, "
                                                  "bootstrap.servers of --kafka-config, or 127.0.0.1:19092)")]
KafkaConfigOpt = Annotated[Path | None, typer.Option("--kafka-config", dir_okay=False,
                                                     help="Kafka client properties file, Java or librdkafka keys (default: "
                                                          "HIVESTREAM_KAFKA_CONFIG); HIVESTREAM_KAFKA_* variables override it")]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="topic namespace (default: HIVESTREAM_TOPIC_NAMESPACE or hivestream)")]
PartitionsOpt = Annotated[int | None, typer.Option("--partitions", help="partitions of the topics created (default: HIVESTREAM_PARTITIONS or 4)")]
ReplicationOpt = Annotated[int | None, typer.Option("--replication-factor", min=1,
                                                    help="replicas of the topics created (default: HIVESTREAM_REPLICATION_FACTOR, "
                                                         "else the broker's default.replication.factor)")]


def kafka_settings(namespace: str | None, partitions: int | None, **more: object) -> Settings:
    """Settings from the environment with the given options on top (``None`` = not given).

    Raises:
        pydantic.ValidationError: on an invalid value.
    """
    overrides: dict[str, object] = {k: v for k, v in more.items() if v is not None}
    if namespace:
        overrides["topic_namespace"] = namespace
    if partitions:
        overrides["partitions"] = partitions
    return Settings(**overrides)  # type: ignore[arg-type]


def kafka_connection(bootstrap: str | None, kafka_config: Path | None, *, check: bool = True) -> KafkaConnection:
    """The command's Kafka connection (options > environment > file); with ``check``, also connected
    once within 10 s (:func:`streams.kafka.preflight.check_connection`).

    Raises:
        KafkaSetupError: a setting that cannot work, or the one-line cause of a failed connection.
    """
    conn = resolve_connection(bootstrap=bootstrap, config_file=kafka_config)
    if check:
        check_connection(conn)
    return conn


SERVICE_TOPIC_WAIT_S = 180.0
"""How long a long-running command (worker, projector) waits for a cluster to take its topics."""

_TRANSIENT = ("InvalidReplicationFactorError", "KafkaConnectionError", "NodeNotReadyError", "KafkaTimeoutError",
              "NotControllerError", "RequestTimedOutError")


def quiet_client_logs() -> None:
    """Silence aiokafka's per-attempt connection logs ("Unable connect to node …", hundreds a minute
    while a broker is down) in a one-shot command, which reports the cause itself in one line."""
    import logging

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)


def create_topics(conn: KafkaConnection, s: Settings, specs: list[TopicSpec], *, wait_s: float = 0.0,
                  sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """:func:`streams.kafka.topics.ensure_topics` with the replication of ``s``; the names created.

    With ``wait_s`` > 0 (the workers and projectors: services that a rolling restart must not stop),
    a refusal that passes when brokers return (fewer brokers registered than the replication factor,
    a broker or the controller not reachable) is retried every 5 s for up to ``wait_s`` seconds, with
    one stderr line per try naming the cause; commands (``topics``, ``produce``) fail at once.

    Raises:
        kafka.errors.KafkaError: as ``ensure_topics`` (the last try's error once ``wait_s`` has passed).
    """
    deadline = clock() + wait_s
    while True:
        try:
            return ensure_topics(conn, specs, replication_factor=s.replication_factor, min_insync_replicas=s.min_insync_replicas)
        except Exception as e:
            if type(e).__name__ not in _TRANSIENT or clock() >= deadline:
                raise
            from streams.kafka.errors import explain

            sys.stderr.write(f"hivestream: waiting for the cluster to take the topics ({explain(e, conn)}); "
                             f"trying again for up to {max(0.0, deadline - clock()):.0f} s\n")
            sleep(5.0)


def input_partitions(conn: KafkaConnection, topic: str, configured: int) -> int:
    """The partition count of ``topic`` if it exists (an existing topic is never altered), else ``configured``.

    Raises:
        kafka.errors.KafkaError: when the topic cannot be described.
    """
    found = describe_topics(conn, [topic]).get(topic)
    return found.partitions if found is not None else configured


def refuse_state_mismatch(conn: KafkaConnection, source: str, partitions: int, copartitioned: list[str]) -> None:
    """Raise when a topic the worker's state was built with has another partition count than ``source``'s ``partitions``.

    Raises:
        KafkaSetupError: naming both topics and their counts (:func:`streams.kafka.topic_check.state_mismatch`).
    """
    states = describe_topics(conn, copartitioned)
    why = state_mismatch(source, partitions, [states[n] for n in copartitioned if n in states])
    if why:
        raise KafkaSetupError(f"the worker refuses to start: {why}")


def refuse_unusable_outputs(conn: KafkaConnection, outputs: list[TopicSpec], batch_bytes: int) -> None:
    """Raise when a worker could not write its ``outputs`` (the topics it writes, as it expects them):
    too few partitions, or a ``max.message.bytes`` below its ``batch_bytes`` batches.

    Raises:
        KafkaSetupError: one line naming each problem (:func:`streams.kafka.topic_check.output_problems`).
    """
    states = describe_topics(conn, [t.name for t in outputs])
    problems = [why for t in outputs if t.name in states for why in output_problems(t, states[t.name], batch_bytes)]
    if problems:
        raise KafkaSetupError("the worker refuses to start: " + "; ".join(problems))


def stop_on_signals() -> Callable[[], bool]:
    """Install SIGTERM/SIGINT handlers that ask a long-running command to stop after its current
    batch; returns the ``should_stop`` predicate to poll."""
    stop = {"flag": False}

    def on_signal(_sig: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return lambda: stop["flag"]
