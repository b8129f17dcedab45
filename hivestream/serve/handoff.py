"""``hivestream produce LOGDIR``: a serve log onto Kafka, record for record.

Each ``hook-events`` record of the log goes to ``<ns>.hook-events`` with the key and value
``hivestream ingest`` would have produced for the same payload (the log holds exactly those bytes:
the server's code made them), each ``dead-letter`` record to ``<ns>.dead-letter``; the partition is
Kafka's default partitioner's on the key, as ``ingest`` and ``produce`` pick it. So a worker and a
projector make the same frames of it as serve made (tested), and the move from one machine to the
Kafka path loses and changes nothing. Producing a log twice sends the same event ids twice, which
every step downstream ignores.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from streams.ingest.hook_log import DEAD_LETTER, read_chunks, read_marker
from streams.kafka.connection import ConnectionLike
from streams.kafka.topics import Topics
from streams.produce.encode import Record
from streams.produce.producer import send_records


@dataclass
class HandoffReport:
    """Records sent by kind (``hook-events``, ``dead-letter``) and the first and last log offsets."""

    sent: Counter[str] = field(default_factory=Counter)
    first: int = -1
    last: int = -1
    skipped_notes: list[str] = field(default_factory=list)


def log_records(directory: Path, topics: Topics, report: HandoffReport) -> Iterator[Record]:
    """The Kafka records of the log in ``directory``, in log order.

    Raises:
        ValueError: ``directory`` holds no hook-event log of a version this code reads.
        OSError: a segment cannot be read.
    """
    read_marker(directory)
    for chunk in read_chunks(directory, 0, report.skipped_notes.append):
        for rec in chunk:
            if report.first < 0:
                report.first = rec.offset
            report.last = rec.offset
            if rec.kind == DEAD_LETTER:
                report.sent["dead-letter"] += 1
                yield topics.dead_letter, rec.key, rec.value
            else:
                report.sent["hook-events"] += 1
                yield topics.hook_events, rec.key, rec.value


def produce_log(directory: Path, conn: ConnectionLike, topics: Topics, on_sent: Callable[[int], None] | None = None,
                delivery_timeout_s: float | None = None) -> HandoffReport:
    """Send the log in ``directory`` to ``topics`` (which must exist) and wait for every acknowledgement,
    at most ``delivery_timeout_s`` seconds after the last send (None: 120 s; Kafka's ``delivery.timeout.ms``).

    Raises:
        ValueError, OSError: see :func:`log_records`; ValueError also for a ``delivery_timeout_s`` that is not a
            positive number of seconds; aiokafka's errors when a send fails; ``KafkaSetupError`` as
            :func:`streams.produce.producer.send_records`.
    """
    report = HandoffReport()
    asyncio.run(send_records(log_records(directory, topics, report), conn, on_sent=on_sent, delivery_timeout_s=delivery_timeout_s))
    return report
