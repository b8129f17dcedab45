"""Committed lag of a consumer group: how many records of its topics it has not committed yet."""

from __future__ import annotations

from dataclasses import dataclass

from streams.kafka.clients import kafka_admin, kafka_consumer
from streams.kafka.connection import ConnectionLike


@dataclass(frozen=True)
class PartitionLag:
    """One partition: the group's committed offset (None: nothing committed) and the end offset."""

    topic: str
    partition: int
    committed: int | None
    end: int

    @property
    def lag(self) -> int:
        """Records not committed yet (every record when nothing is committed)."""
        return self.end - (self.committed or 0)


def worker_group(namespace: str, frames_version: str = "") -> str:
    """The consumer group of the frames workers (the faust app id, :func:`streams.workers.frames.create_app`)."""
    return f"{namespace}-dedup" + (f"-{frames_version}" if frames_version else "")


def consumer_lag(conn: ConnectionLike, group: str, topics: list[str], *, timeout_ms: int = 30_000) -> list[PartitionLag]:
    """Per partition of ``topics``, the committed offset of ``group`` and the end offset (kafka-python admin
    ``list_group_offsets`` and consumer ``end_offsets``), sorted by topic and partition.

    Raises:
        kafka.errors.KafkaError: when the broker cannot be reached (within ``timeout_ms``) or the group
            coordinator is not ready.
    """
    from kafka import TopicPartition

    admin = kafka_admin(conn, client_id="hivestream-lag", bootstrap_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms)
    try:
        c = kafka_consumer(conn, client_id="hivestream-lag", bootstrap_timeout_ms=timeout_ms)
    except BaseException:
        admin.close()
        raise
    try:
        committed = admin.list_group_offsets(group).get(group, {})
        tps = sorted(TopicPartition(t, p) for t in topics for p in (c.partitions_for_topic(t) or set()))
        ends = c.end_offsets(tps)
        out = []
        for tp in tps:
            meta = committed.get(tp)
            off = meta.offset if meta is not None and meta.offset >= 0 else None
            out.append(PartitionLag(tp.topic, tp.partition, off, ends[tp]))
        return out
    finally:
        c.close()
        admin.close()
