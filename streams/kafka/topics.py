"""Kafka topics of hivestream: names under a namespace, specs, idempotent creation.

Topics (``<ns>`` is :attr:`streams.settings.Settings.topic_namespace`):

* ``<ns>.hook-events``: the source of truth, keyed by the key group of a capture's body hash
  (:mod:`streams.model.key_groups`; other events by session); the dedup agent's input and the partitioning
  of its state table; retention unlimited (``retention.ms=-1``) so the log can always be replayed.
* ``<ns>.frames`` (or a versioned ``<ns>.frames.<version>`` written by ``reprocess``): frame
  created / touched events keyed by dedup key; retention unlimited, it feeds the projector.
* ``<ns>.memory-calls``: the memory tool calls (reads and writes of agent memory) found in hook
  events, redacted (:mod:`streams.memory_calls.tool_calls`); the frames projector writes them to
  ``memory_tool_calls``.
* ``<ns>.dead-letter``: rejected records with the original bytes, source topic, partition,
  offset, reason and time.

KnowHub (in :meth:`Topics.specs`, written by the same worker):

* ``<ns>.experience-events``: KnowHub events derived from hook events (redacted), keyed by the
  key group of the experience's dedup key (submissions, extractions; as on ``hook-events``), the
  experience id (reviews) or the session
  (telemetry, plugin hooks); retention unlimited, it feeds the KnowHub projector.
* ``<ns>.kb-extract``: extraction requests (redacted chat payloads), keyed by request id.
* ``<ns>.kb-dead-letter``: rejected kb calls and failed extractions (redacted).

Memory stubs (:meth:`Topics.stub_specs`):

* ``<ns>.stub-events``: stub events and message embeddings keyed by channel; global stub
  events are broadcast to every partition (:mod:`streams.stubs.routing`); retention unlimited.
* ``<ns>.stub-matches``: the stub worker's ordered output, same partitioning (forwarded stub
  state events, stub-matched events, one message-processed record per message).
* ``<ns>.stub-dead-letter``: rejected stub records with their reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from streams.kafka.clients import kafka_admin
from streams.kafka.connection import ConnectionLike

UNLIMITED = {"retention.ms": "-1", "retention.bytes": "-1"}

WORKER_BATCH_BYTES = 1_048_576
"""The workers' producer batch size (faust ``producer_max_batch_size``), bytes: a topic a worker writes
needs a ``max.message.bytes`` at least this large (Kafka's default, 1,048,588, is;
:func:`streams.kafka.topic_check.message_limit`)."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic to create.

    Attributes:
        name: full topic name.
        partitions: partition count.
        config: topic configs (Kafka ``TopicConfig`` names, string values).
    """

    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Topics:
    """The topic names of one namespace."""

    namespace: str
    frames_version: str = ""

    @property
    def hook_events(self) -> str:
        """The source-of-truth topic of hook events (key: key group of a capture, else the session scope)."""
        return f"{self.namespace}.hook-events"

    @property
    def frames(self) -> str:
        """Frame created/touched events (key: dedup key); versioned by ``reprocess``."""
        suffix = f".{self.frames_version}" if self.frames_version else ""
        return f"{self.namespace}.frames{suffix}"

    @property
    def memory_calls(self) -> str:
        """Memory tool calls seen in hook events (key: session; :mod:`streams.memory_calls.tool_calls`)."""
        return f"{self.namespace}.memory-calls"

    @property
    def dead_letter(self) -> str:
        """Rejected records with their reasons."""
        return f"{self.namespace}.dead-letter"

    @property
    def experience_events(self) -> str:
        """KnowHub events (see the module docstring for keys)."""
        return f"{self.namespace}.experience-events"

    @property
    def kb_extract(self) -> str:
        """Extraction requests (key: the ``agent_end`` event id)."""
        return f"{self.namespace}.kb-extract"

    @property
    def kb_dead_letter(self) -> str:
        """Rejected kb calls and failed extractions (redacted in strict mode)."""
        return f"{self.namespace}.kb-dead-letter"

    @property
    def stub_events(self) -> str:
        """Stub events and message embeddings (key: channel; global stub events on every partition)."""
        return f"{self.namespace}.stub-events"

    @property
    def stub_matches(self) -> str:
        """The stub worker's output, partitioned like :attr:`stub_events`."""
        return f"{self.namespace}.stub-matches"

    @property
    def stub_dead_letter(self) -> str:
        """Rejected stub records with their reasons."""
        return f"{self.namespace}.stub-dead-letter"

    def stub_specs(self, partitions: int) -> list[TopicSpec]:
        """Specs of the memory-stub topics (``stub-events`` and ``stub-matches`` with ``partitions`` each)."""
        return [
            TopicSpec(self.stub_events, partitions, dict(UNLIMITED)),
            TopicSpec(self.stub_matches, partitions, dict(UNLIMITED)),
            TopicSpec(self.stub_dead_letter, 1, dict(UNLIMITED)),
        ]

    def specs(self, partitions: int) -> list[TopicSpec]:
        """Specs of the frames and KnowHub topics, ``partitions`` each (dead-letter topics: 1, they are low volume)."""
        return [
            TopicSpec(self.hook_events, partitions, dict(UNLIMITED)),
            TopicSpec(self.frames, partitions, dict(UNLIMITED)),
            TopicSpec(self.memory_calls, partitions, dict(UNLIMITED)),
            TopicSpec(self.dead_letter, 1, dict(UNLIMITED)),
            TopicSpec(self.experience_events, partitions, dict(UNLIMITED)),
            TopicSpec(self.kb_extract, partitions, {"retention.ms": str(7 * 86_400_000)}),
            TopicSpec(self.kb_dead_letter, 1, dict(UNLIMITED)),
        ]


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for ``key``: murmur2, positive, mod n.

    Source: Java ``BuiltInPartitioner.partitionForKey`` / kafka-python
    ``DefaultPartitioner`` (``(murmur2(key) & 0x7fffffff) % partitions``).

    Raises:
        ValueError: when ``partitions`` < 1.
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    return (_positive_murmur2(key) if type(key) is bytes and len(key) <= 256 else int(_murmur2(key) & 0x7FFFFFFF)) % partitions


def _murmur2(key: bytes) -> int:
    """kafka-python's ``murmur2``, imported on first use: importing any ``kafka`` module loads the whole
    client package (~0.25 s of every command's start-up, and most commands never place a key)."""
    from kafka.partitioner.default import murmur2

    return int(murmur2(key))


@lru_cache(maxsize=65_536)
def _positive_murmur2(key: bytes) -> int:
    """``murmur2(key) & 0x7fffffff``, remembered: kafka-python's murmur2 is pure Python (~5 µs a key)
    and the workers' output keys repeat (sessions, key groups, experience ids); keys of at most 256
    bytes only, so the cache holds at most ~20 MiB."""
    return _murmur2(key) & 0x7FFFFFFF


def creation_request(spec: TopicSpec, replication_factor: int | None = None, min_insync_replicas: int | None = None) -> tuple[str, int, int, dict[str, str]]:
    """(name, partitions, replication factor, configs) of the CreateTopics request for ``spec``.

    ``replication_factor`` None asks for the broker's ``default.replication.factor`` (-1, KIP-464,
    CreateTopics v4+; the default Kafka Streams uses since KIP-733); ``min_insync_replicas`` is added
    to the topic's configs when given (None: the broker's ``min.insync.replicas``).
    """
    config = dict(spec.config)
    if min_insync_replicas is not None:
        config["min.insync.replicas"] = str(min_insync_replicas)
    return spec.name, spec.partitions, replication_factor or -1, config


def ensure_topics(
    conn: ConnectionLike,
    specs: list[TopicSpec],
    *,
    replication_factor: int | None = None,
    min_insync_replicas: int | None = None,
    timeout_ms: int = 30_000,
) -> list[str]:
    """Create the topics that do not exist yet (idempotent), with kafka-python's admin client.

    Existing topics are never altered (partitions, replicas and configs stay as they are; ``hivestream
    topics --check`` names how they differ). Every topic hivestream or its faust workers use is created
    here, with :func:`creation_request`'s replication (faust creates none: ``topic_allow_declare`` is off).

    Args:
        conn: the connection (a bare string: PLAINTEXT bootstrap servers).
        specs: the topics.
        replication_factor: replicas of each new topic (None: the broker's default).
        min_insync_replicas: ``min.insync.replicas`` of each new topic (None: the broker's default).
        timeout_ms: bound of the bootstrap and of each request.

    Returns:
        The names created now.

    Raises:
        kafka.errors.KafkaError: when the broker cannot be reached, refuses a topic
            (``InvalidReplicationFactorError`` with fewer brokers than replicas) or the user is not authorised.
    """
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = kafka_admin(conn, client_id="hivestream-admin", request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
    try:
        existing = set(admin.list_topics())
        created: list[str] = []
        for s in specs:
            if s.name in existing:
                continue
            name, partitions, replicas, config = creation_request(s, replication_factor, min_insync_replicas)
            try:
                admin.create_topics([NewTopic(name, partitions, replicas, topic_configs=config)], timeout_ms=timeout_ms)
                created.append(name)
            except TopicAlreadyExistsError:
                pass
        return created
    finally:
        admin.close()
