"""``hivestream stubs produce``: stub log files (JSONL) onto the ``stub-events`` topic.

Every non-blank line is sent as it is (its bytes are the record value), routed by
:func:`streams.stubs.routing.route_stub_line`: keyed by channel, global stub events to every
partition, unparseable lines to partition 0 (the worker dead-letters them with their reason,
exactly as the embedded runner does). Lines are sent in file order, so each partition holds its
channels' lines in log order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streams.stubs.routing import route_stub_line


@dataclass
class StubProduceReport:
    """Lines read, records sent (a broadcast line counts once per partition), and broadcast lines."""

    lines: int = 0
    records: int = 0
    broadcast: int = 0


def produce_stub_logs(paths: Iterable[Path], producer: Any, topic: str, partitions: int) -> StubProduceReport:
    """Send every line of ``paths`` to ``topic`` (``partitions`` partitions); flushes and waits for every send.

    Raises:
        OSError: when a file cannot be read; kafka.errors.KafkaError on a send failure.
    """
    report = StubProduceReport()
    futures = []
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
                    futures.append(producer.send(topic, key=route.key, value=raw, partition=p))
                    report.records += 1
    producer.flush()
    for f in futures:
        f.get(timeout=60)
    return report
