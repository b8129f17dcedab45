"""Where a stub log line goes on ``stub-events``: keyed by channel, global stub events broadcast.

``stub-events`` is partitioned by channel (Kafka's default partitioner on the UTF-8 channel
name) so that a channel's stubs and messages are in one partition, in log order. A global stub
event (``channel`` ``None``) concerns every channel, so it is written to *every* partition with
an empty key, the broadcast that Kafka Streams' ``GlobalKTable`` does by reading a whole topic
in every instance. A line that does not parse cannot be routed: it goes to partition 0 as it
is, where the worker dead-letters it.

Read back as one table (:func:`followed_state_event`, for a front door that reads every
partition), a broadcast global event counts once: its copy on partition 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.kafka.topics import partition_for
from streams.model.deadletter import RejectedInput
from streams.stubs.events import StubDeleted, StubRefreshed, StubUpserted, parse_stub_event


@dataclass(frozen=True, slots=True)
class Route:
    """A line's destination: ``key`` (UTF-8 channel, ``b""`` for a global or unparseable line) and the ``partitions`` to write it to."""

    key: bytes
    partitions: tuple[int, ...]


def route_stub_line(raw: bytes, partitions: int) -> Route:
    """The destination of one stub log line on a ``partitions``-partition ``stub-events`` topic.

    Raises:
        ValueError: when ``partitions`` < 1.
    """
    if partitions < 1:
        raise ValueError("partitions must be >= 1")
    try:
        ev = parse_stub_event(raw)
    except RejectedInput:
        return Route(b"", (0,))
    channel = ev.channel
    if channel is None:
        return Route(b"", tuple(range(partitions)))
    key = channel.encode()
    return Route(key, (partition_for(key, partitions),))


def followed_state_event(partition: int, raw: bytes) -> StubUpserted | StubRefreshed | StubDeleted | None:
    """The stub state event a reader of every ``stub-events`` partition applies for the record ``raw`` of ``partition``:
    an upsert, refresh or delete of a channel's stub from its partition, of a global stub from partition 0 only (the
    other partitions hold copies of the broadcast); ``None`` for anything else (message embeddings, recorded matches,
    a global copy, a record that does not parse: the stub worker dead-letters those). Never raises."""
    try:
        ev = parse_stub_event(raw)
    except RejectedInput:
        return None
    if not isinstance(ev, StubUpserted | StubRefreshed | StubDeleted) or (ev.channel is None and partition != 0):
        return None
    return ev
