"""``hivestream produce LOGDIR``: a serve log onto Kafka, record for record.

Each ``hook-events`` record of the log goes to ``<ns>.hook-events`` with the key and value
``hivestream ingest`` would have produced for the same payload (the log holds exactly those bytes:
the server's code made them), each ``dead-letter`` record to ``<ns>.dead-letter``; the partition is
Kafka's default partitioner's on the key, as ``ingest`` and ``produce`` pick it. Each
``stub-events`` record goes to ``<ns>.stub-events`` where ``hivestream stubs produce`` puts the same
event (:func:`streams.stubs.routing.route_stub_line`: keyed by channel, a global stub event to every
partition). So the workers and projectors make the same tables of it as serve made (tested), and the
move from one machine to the Kafka path loses and changes nothing. Producing a log twice sends the
same event ids twice, which every step downstream ignores.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams.ingest.hook_log import DEAD_LETTER, STUB_EVENTS, read_chunks, read_marker
from streams.kafka.connection import ConnectionLike
from streams.kafka.topics import Topics
from streams.produce.encode import PlacedRecord, Record
from streams.produce.producer import send_records
from streams.stubs.routing import route_stub_line


@dataclass
class HandoffReport:
    """Records sent by kind (``hook-events``, ``dead-letter``, ``stub-events``: a broadcast stub event
    counts once) and the first and last log offsets."""

    sent: Counter[str] = field(default_factory=Counter)
    first: int = -1
    last: int = -1
    skipped_notes: list[str] = field(default_factory=list)


def log_records(directory: Path, topics: Topics, report: HandoffReport,
                stub_partitions: Callable[[], int] | None = None) -> Iterator[Record | PlacedRecord]:
    """The Kafka records of the log in ``directory``, in log order.

    Args:
        stub_partitions: the partition count of ``topics.stub_events``, asked once, at the first
            stub event (the caller may create the stub topics then).

    Raises:
        ValueError: ``directory`` holds no hook-event log of a version this code reads, or it holds
            stub events and no ``stub_partitions`` was given.
        OSError: a segment cannot be read.
    """
    read_marker(directory)
    partitions: int | None = None
    for chunk in read_chunks(directory, 0, report.skipped_notes.append):
        for rec in chunk:
            if report.first < 0:
                report.first = rec.offset
            report.last = rec.offset
            if rec.kind == STUB_EVENTS:
                if partitions is None:
                    if stub_partitions is None:
                        raise ValueError(f"{directory} holds memory-stub events: give the partition count of {topics.stub_events}")
                    partitions = stub_partitions()
                report.sent["stub-events"] += 1
                route = route_stub_line(rec.value, partitions)
                for part in route.partitions:
                    yield topics.stub_events, route.key, rec.value, part
            elif rec.kind == DEAD_LETTER:
                report.sent["dead-letter"] += 1
                yield topics.dead_letter, rec.key, rec.value
            else:
                report.sent["hook-events"] += 1
                yield topics.hook_events, rec.key, rec.value


def produce_log(directory: Path, conn: ConnectionLike, topics: Topics, on_sent: Callable[[int], None] | None = None,
                delivery_timeout_s: float | None = None, stub_partitions: Callable[[], int] | None = None) -> HandoffReport:
    """Send the log in ``directory`` to ``topics`` (which must exist; the stub topics by the time
    ``stub_partitions`` answers) and wait for every acknowledgement, at most ``delivery_timeout_s``
    seconds after the last send (None: 120 s; Kafka's ``delivery.timeout.ms``).

    Raises:
        ValueError, OSError: see :func:`log_records`; ValueError also for a ``delivery_timeout_s`` that is not a
            positive number of seconds; aiokafka's errors when a send fails; ``KafkaSetupError`` as
            :func:`streams.produce.producer.send_records`.
    """
    report = HandoffReport()
    asyncio.run(send_records(log_records(directory, topics, report, stub_partitions), conn, on_sent=on_sent,
                             delivery_timeout_s=delivery_timeout_s))
    return report
