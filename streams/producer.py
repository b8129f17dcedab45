"""``hivestream produce``: session files and hook-event logs onto the ``hook-events`` topic.

Files are imported exactly as the embedded runner imports them (same importers, same event ids);
each valid event is produced as a serialised :class:`~streams.events.HookEvent` keyed by its
session, so a session stays ordered within one partition. KnowHub-relevant events (kb tool calls,
OpenClaw plugin hooks, KnowHub lines) are redacted first in strict mode
(:func:`streams.experiences.scrub.scrub_kb_event`), so no raw secret reaches the topic. Lines the importer rejects go straight
to the ``dead-letter`` topic with their reason, as the embedded runner records them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streams.deadletter import DeadLetter, Reason, RejectedInput
from streams.events import HookEvent
from streams.experiences.redact import RedactionMode
from streams.experiences.scrub import scrub_kb_event
from streams.importers.files import import_file
from streams.topics import Topics

MAX_EVENT_BYTES = 900_000  # under Kafka's default 1 MiB message.max.bytes


@dataclass
class ProduceReport:
    """What ``produce`` sent: events per file format, dead letters per reason."""

    events: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    formats: dict[str, str] = field(default_factory=dict)


def event_value(ev: HookEvent) -> bytes:
    """The record value of ``ev``; the informational ``raw`` payload is dropped when the
    record would exceed :data:`MAX_EVENT_BYTES`."""
    value = ev.to_json()
    if len(value) > MAX_EVENT_BYTES and ev.raw is not None:
        value = ev.model_copy(update={"raw": None}).to_json()
    return value


def make_producer(bootstrap: str, **overrides: Any) -> Any:
    """An idempotent kafka-python producer (``enable_idempotence``, ``acks=all``), batching
    with ``linger_ms=20`` and 256 KiB batches; ``max_request_size`` 2 MiB.

    Raises:
        kafka.errors.NoBrokersAvailable: when the broker cannot be reached.
    """
    from kafka import KafkaProducer

    conf: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "client_id": "hivestream-produce",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 20,
        "batch_size": 262_144,
        "max_request_size": 2_097_152,
    }
    conf.update(overrides)
    return KafkaProducer(**conf)


def produce_files(
    paths: Iterable[Path],
    producer: Any,
    topics: Topics,
    *,
    gateway: bool = False,
    now_ms: Callable[[], int],
    on_event: Callable[[int], None] | None = None,
    privacy_mode: RedactionMode = RedactionMode.STRICT,
) -> ProduceReport:
    """Import ``paths`` and send every event to ``topics.hook_events``; flushes at the end.

    Args:
        paths: session files or hook-event JSONL.
        producer: a kafka-python producer (:func:`make_producer`).
        topics: the namespace's topics.
        gateway: also emit the OpenClaw gateway's double capture.
        now_ms: clock stamping dead letters.
        on_event: called with the count sent so far (progress).
        privacy_mode: how KnowHub-relevant payloads are prepared (strict: redacted).

    Raises:
        OSError: when a file cannot be read; kafka.errors.KafkaError on a send failure.
    """
    report = ProduceReport()
    futures = []
    for path in paths:
        fmt, items = import_file(path, gateway=gateway)
        report.formats[str(path)] = fmt
        origin = f"file:{path.resolve()}"
        for off, raw, item in items:
            if isinstance(item, RejectedInput):
                dl = DeadLetter.of(item, raw, origin, 0, off, now_ms())
                futures.append(producer.send(topics.dead_letter, key=f"{origin}:0:{off}".encode(), value=dl.model_dump_json().encode()))
                report.dead_letters[str(item.reason)] += 1
                continue
            value = event_value(scrub_kb_event(item, privacy_mode))
            if len(value) > MAX_EVENT_BYTES:
                err = RejectedInput(Reason.BODY_TOO_LARGE, f"event is {len(value)} bytes, over the {MAX_EVENT_BYTES}-byte record limit")
                dl = DeadLetter.of(err, raw, origin, 0, off, now_ms(), event_id=item.event_id)
                futures.append(producer.send(topics.dead_letter, key=f"{origin}:0:{off}".encode(), value=dl.model_dump_json().encode()))
                report.dead_letters[str(err.reason)] += 1
                continue
            futures.append(producer.send(topics.hook_events, key=item.session.encode(), value=value))
            report.events += 1
            if on_event and report.events % 500 == 0:
                on_event(report.events)
    producer.flush()
    for f in futures:
        f.get(timeout=60)
    if on_event:
        on_event(report.events)
    return report
