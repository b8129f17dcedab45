"""``hivestream stubs produce``: stub log files (JSONL) onto the ``stub-events`` topic.

Every non-blank line is sent as it is (its bytes are the record value), routed by
:func:`streams.stubs.routing.route_stub_line`: keyed by channel, global stub events to every
partition, unparseable lines to partition 0 (the worker dead-letters them with their reason,
exactly as the embedded runner does). Lines are sent in file order, so each partition holds its
channels' lines in log order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from streams.kafka.connection import ConnectionLike
from streams.produce.encode import PlacedRecord
from streams.produce.producer import send_records
from streams.stubs.routing import route_stub_line


@dataclass
class StubProduceReport:
    """Lines read, records sent (a broadcast line counts once per partition), and broadcast lines."""

    lines: int = 0
    records: int = 0
    broadcast: int = 0


def stub_records(paths: Iterable[Path], topic: str, partitions: int, report: StubProduceReport) -> Iterator[PlacedRecord]:
    """The records of every non-blank line of ``paths``, in file order, each with the partition
    :func:`streams.stubs.routing.route_stub_line` picks (a global stub event once per partition);
    ``report`` counts them as they are yielded.

    Raises:
        OSError: when a file cannot be read.
    """
    for path in paths:
        with path.open("rb") as fh:
            for line in fh:
                raw = line.rstrip(b"\r\n")
                if not raw.strip():
                    continue
                route = route_stub_line(raw, partitions)
                report.lines += 1
                report.broadcast += len(route.partitions) > 1
                for p in route.partitions:
                    report.records += 1
                    yield topic, route.key, raw, p


def produce_stub_logs(paths: Iterable[Path], conn: ConnectionLike, topic: str, partitions: int) -> StubProduceReport:
    """Send every line of ``paths`` to ``topic`` (``partitions`` partitions) with aiokafka's idempotent
    producer in per-partition batches (:func:`streams.produce.producer.send_records`); returns when every
    record is acknowledged.

    Raises:
        OSError: when a file cannot be read; aiokafka's errors on a send failure.
    """
    report = StubProduceReport()
    asyncio.run(send_records(stub_records(paths, topic, partitions, report), conn))
    return report
