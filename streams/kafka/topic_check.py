"""What existing topics look like against what hivestream expects (``hivestream topics --check``, the workers' start).

:func:`describe_topics` reads, per existing topic, the partition count, the replicas and in-sync
replicas of every partition and the configs hivestream sets or relies on (``min.insync.replicas``,
``retention.ms``, ``retention.bytes``, ``cleanup.policy``, ``max.message.bytes``) with kafka-python's admin client
(Metadata / DescribeConfigs with ``config_filter=all``, so inherited broker defaults count).
:func:`differences` and :func:`state_mismatch` are pure: they name every difference in one line
each. Nothing here alters a topic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from streams.kafka.clients import kafka_admin
from streams.kafka.connection import ConnectionLike
from streams.kafka.topics import TopicSpec

CHECKED_CONFIGS = ("min.insync.replicas", "retention.ms", "retention.bytes", "cleanup.policy", "max.message.bytes")
"""Topic configs the check reads."""


@dataclass(frozen=True)
class TopicState:
    """One existing topic.

    Attributes:
        name: topic name.
        partitions: partition count.
        replicas: replicas of the partition with the fewest (its replication factor).
        replicas_max: replicas of the partition with the most (differs from ``replicas`` after a partial reassignment).
        in_sync: in-sync replicas of the partition with the fewest right now (below ``replicas``: under-replicated).
        configs: :data:`CHECKED_CONFIGS` → value (as the broker reports it, defaults included).
    """

    name: str
    partitions: int
    replicas: int
    replicas_max: int
    in_sync: int
    configs: dict[str, str] = field(default_factory=dict)


def describe_topics(conn: ConnectionLike, names: list[str], *, timeout_ms: int = 30_000) -> dict[str, TopicState]:
    """The state of each of ``names`` that exists (missing ones are left out).

    Raises:
        kafka.errors.KafkaError: when the broker cannot be reached or refuses (not authorised to describe).
    """
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka_admin(conn, client_id="hivestream-check", request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
    try:
        existing = sorted(set(admin.list_topics()) & set(names))
        if not existing:
            return {}
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n, configs=list(CHECKED_CONFIGS)) for n in existing],
                                         config_filter="all").get("topic", {})
        out: dict[str, TopicState] = {}
        for t in admin.describe_topics(existing):
            parts = t.get("partitions") or []
            reps = [len(p.get("replica_nodes") or ()) for p in parts] or [0]
            isr = [len(p.get("isr_nodes") or ()) for p in parts] or [0]
            cfg = {k: str(v.get("value")) for k, v in configs.get(t["name"], {}).items()}
            out[t["name"]] = TopicState(t["name"], len(parts), min(reps), max(reps), min(isr), cfg)
        return out
    finally:
        admin.close()


def broker_defaults(conn: ConnectionLike, *, timeout_ms: int = 30_000) -> dict[str, str]:
    """The controller's (or first broker's) ``default.replication.factor`` and ``min.insync.replicas``;
    empty when the cluster does not let this user describe broker configs (managed clusters may not).

    Raises:
        kafka.errors.KafkaError: when the broker cannot be reached.
    """
    from kafka.admin import ConfigResource, ConfigResourceType
    from kafka.errors import AuthorizationError, BrokerResponseError

    admin = kafka_admin(conn, client_id="hivestream-check", request_timeout_ms=timeout_ms, bootstrap_timeout_ms=timeout_ms)
    try:
        cluster = admin.describe_cluster()
        brokers = [b["broker_id"] for b in cluster.get("brokers", [])]
        node = cluster.get("controller_id") if cluster.get("controller_id") in brokers else (brokers[0] if brokers else None)
        if node is None:
            return {}
        try:
            got = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(node),
                                                         configs=["default.replication.factor", "min.insync.replicas"])], config_filter="all")
        except (AuthorizationError, BrokerResponseError):
            return {}
        return {k: str(v.get("value")) for k, v in got.get("broker", {}).get(str(node), {}).items()}
    finally:
        admin.close()


def differences(
    expected: list[TopicSpec],
    states: dict[str, TopicState],
    *,
    replication_factor: int | None,
    min_insync_replicas: int | None,
    optional: frozenset[str] = frozenset(),
    batch_bytes: int | None = None,
) -> list[str]:
    """Every way the existing topics differ from ``expected``, one line each (empty: none).

    Args:
        expected: the specs hivestream would create.
        states: what exists (:func:`describe_topics`).
        replication_factor: the expected replicas (the configured factor, or the broker's default; None: not checked).
        min_insync_replicas: the expected ``min.insync.replicas`` (None: not checked).
        optional: names whose absence is no difference (topics made only by commands not run yet).
        batch_bytes: the producers' batch size, bytes: a smaller ``max.message.bytes`` is a difference
            (:func:`message_limit`; None: not checked).
    """
    out: list[str] = []
    for spec in expected:
        st = states.get(spec.name)
        if st is None:
            if spec.name not in optional:
                out.append(f"{spec.name}: missing (`hivestream topics` creates it)")
            continue
        if st.partitions != spec.partitions:
            out.append(f"{spec.name}: {st.partitions} partitions, expected {spec.partitions} (--partitions / HIVESTREAM_PARTITIONS)")
        if replication_factor is not None and st.replicas != replication_factor:
            out.append(f"{spec.name}: {st.replicas} replicas, expected {replication_factor} (--replication-factor / HIVESTREAM_REPLICATION_FACTOR)")
        if st.replicas_max != st.replicas:
            out.append(f"{spec.name}: partitions have between {st.replicas} and {st.replicas_max} replicas")
        if min_insync_replicas is not None and st.configs.get("min.insync.replicas") not in (None, str(min_insync_replicas)):
            out.append(f"{spec.name}: min.insync.replicas {st.configs['min.insync.replicas']}, expected {min_insync_replicas} "
                       "(HIVESTREAM_MIN_INSYNC_REPLICAS)")
        isr = st.configs.get("min.insync.replicas")
        if isr is not None and isr.isdigit() and int(isr) > st.replicas:
            out.append(f"{spec.name}: min.insync.replicas {isr} is above its {st.replicas} replicas (brokers before Kafka 4 refuse "
                       "every acks=all write to it)")
        for key in ("retention.ms", "retention.bytes", "cleanup.policy"):
            want = spec.config.get(key, "delete" if key == "cleanup.policy" else None)
            have = st.configs.get(key)
            if want is not None and have is not None and have != want:
                out.append(f"{spec.name}: {key}={have}, expected {want}")
        small = None if batch_bytes is None else message_limit(st, batch_bytes)
        if small:
            out.append(small)
    return out


def message_limit(state: TopicState, batch_bytes: int) -> str | None:
    """Why ``state``'s ``max.message.bytes`` refuses the batches hivestream's producers send, or None.

    The broker refuses a record batch larger than the topic's ``max.message.bytes`` whole
    (``MESSAGE_TOO_LARGE``), and aiokafka does not split a refused batch as the Java producer does,
    so a topic must take a full batch of ``batch_bytes`` (the workers' and ``produce``'s batch
    size; Kafka's default, 1,048,588, does). A value the broker did not report is not judged.
    """
    have = state.configs.get("max.message.bytes")
    if have is None or not have.isdigit() or int(have) >= batch_bytes:
        return None
    return (f"{state.name}: max.message.bytes={int(have):,} is below hivestream's {batch_bytes:,}-byte batches (the broker refuses a "
            f"full batch and a worker stops on it): raise it to at least {batch_bytes}")


def output_problems(spec: TopicSpec, state: TopicState, batch_bytes: int) -> list[str]:
    """Why a worker cannot write its outputs to ``state`` as ``spec`` describes them, one line each (empty: it can).

    A worker writes a partition of each output per input partition (``frames``, ``memory-calls``) or
    by key over ``spec.partitions`` partitions, so fewer partitions refuse its records
    (``Unrecognized partition``); a ``max.message.bytes`` below ``batch_bytes`` refuses its full
    batches (:func:`message_limit`).
    """
    out = []
    if state.partitions < spec.partitions:
        out.append(f"{state.name} has {state.partitions} partition(s) but the worker writes {spec.partitions} (one per input "
                   "partition): the topic was recreated or changed under the namespace")
    small = message_limit(state, batch_bytes)
    if small:
        out.append(small)
    return out


def state_mismatch(source: str, partitions: int, state_topics: list[TopicState]) -> str | None:
    """Why a worker must not start, or None: its input ``source`` has ``partitions`` partitions, and
    every topic its state was built with (the tables' changelogs, a co-partitioned input) must have as many.

    A changelog's partition count is what the state was built for: a ``hook-events`` with more or
    fewer partitions sends a key group to another partition, whose state does not hold it.
    """
    for st in state_topics:
        if st.partitions != partitions:
            return (f"{source} has {partitions} partitions but {st.name}, which the worker's state was built with, has {st.partitions}: "
                    "the topics were changed under the state; never change the partitions of a live namespace: create a new "
                    "namespace with the partitions wanted and replay hook-events into it")
    return None
