"""Where a stub log line goes on ``stub-events``: keyed by channel, global stub events broadcast.

``stub-events`` is partitioned by channel (Kafka's default partitioner on the UTF-8 channel
name) so that a channel's stubs and messages are in one partition, in log order. A global stub
event (``channel`` ``None``) concerns every channel, so it is written to *every* partition with
an empty key, the broadcast that Kafka Streams' ``GlobalKTable`` does by reading a whole topic
in every instance. A line that does not parse cannot be routed: it goes to partition 0 as it
is, where the worker dead-letters it.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams.kafka.topics import partition_for
from streams.model.deadletter import RejectedInput
from streams.stubs.events import parse_stub_event


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
