"""``hivestream kb project``: the ``experience-events`` and ``kb-dead-letter`` topics → the KnowHub tables.

Like :mod:`projections.projector`: every partition assigned, positions read from and stored in
DuckDB (``kb_positions``) in the same transaction as the rows, the dedup state and the reminder
counters, so a kill -9 at any point loses nothing and doubles nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from projections.kb_sink import KbSink
from streams.clock import Clock, wall_clock_ms
from streams.deadletter import DeadLetter, Reason, RejectedInput
from streams.experiences.build import safe_text
from streams.experiences.events import parse_kb_event
from streams.experiences.fold import KbFold
from streams.experiences.settings import KbSettings


@dataclass
class KbProjectorReport:
    """Counts of one KnowHub projector run: records, batches, submissions, reviews, telemetry rows, dead letters."""

    records: int = 0
    batches: int = 0
    submissions: int = 0
    reviews: int = 0
    telemetry: int = 0
    dead_letters: int = 0


class KbProjector:
    """Consumes ``events_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the KnowHub tables' writer.
        bootstrap: Kafka ``bootstrap.servers``.
        events_topic, dead_letter_topic: the topics to project.
        settings: the experience dedup window (the worker's privacy mode applies to a record
            that does not parse: its detail is redacted).
        batch_max: records per poll and per transaction.
        clock: epoch-ms clock.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
    """

    def __init__(self, sink: KbSink, bootstrap: str, events_topic: str, dead_letter_topic: str, settings: KbSettings | None = None, *,
                 batch_max: int = 5000, clock: Clock = wall_clock_ms) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self.sink = sink
        self.settings = settings or KbSettings()
        self.dead_letter_topic = dead_letter_topic
        self.batch_max = batch_max
        self.clock = clock
        self.report = KbProjectorReport()
        self.fold = KbFold(self.settings.window, sink.load_dedup_state(), sink.load_counters(), sink.load_seen_hooks())
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id="hivestream-kb-projector", group_id=None, enable_auto_commit=False,
                                      auto_offset_reset="earliest", max_poll_records=batch_max)
        self.tps: list[Any] = []
        for topic in (events_topic, dead_letter_topic):
            deadline = time.monotonic() + 30.0
            while not (parts := self.consumer.partitions_for_topic(topic)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic!r} does not exist (run `hivestream topics` or start a worker first)")
                time.sleep(0.2)
            self.tps.extend(TopicPartition(topic, p) for p in sorted(parts))
        self.consumer.assign(self.tps)
        for tp in self.tps:
            self.consumer.seek(tp, sink.position(tp.topic, tp.partition))

    def poll_once(self, timeout_ms: int = 500) -> int:
        """Poll one batch and apply it in one transaction; returns the records consumed."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_max)
        if not polled:
            return 0
        positions: dict[tuple[str, int], int] = {}
        n = 0
        mode = self.settings.privacy_mode
        for tp, records in polled.items():
            for r in records:
                n += 1
                raw = r.value or b""
                if tp.topic == self.dead_letter_topic:
                    try:
                        self.fold.reject(DeadLetter.model_validate_json(raw))
                    except ValueError as e:
                        err = RejectedInput(Reason.WRONG_SHAPE, safe_text(f"kb dead-letter record: {e}", mode))
                        self.fold.reject(DeadLetter.of(err, b"", tp.topic, tp.partition, r.offset, self.clock()))
                    continue
                try:
                    self.fold.feed(parse_kb_event(raw), tp.partition, r.offset)
                except RejectedInput as e:
                    err = RejectedInput(e.reason, safe_text(e.detail, mode))
                    self.fold.reject(DeadLetter.of(err, safe_text(raw.decode("utf-8", "replace"), mode).encode(), tp.topic, tp.partition, r.offset,
                                                   self.clock()))
            positions[(tp.topic, tp.partition)] = records[-1].offset + 1
        b = self.fold.drain()
        self.sink.apply_batch(b, positions, self.fold.counters)
        rep = self.report
        rep.records += n
        rep.batches += 1
        rep.submissions += len(b.submissions)
        rep.reviews += len(b.reviews)
        rep.telemetry += len(b.telemetry)
        rep.dead_letters += len(b.dead_letters)
        return n

    def run(self, *, until_caught_up: bool = False, idle_exit_s: float | None = None, should_stop: Callable[[], bool] = lambda: False) -> KbProjectorReport:
        """Project until stopped: ``until_caught_up`` stops at the end offsets seen at start, ``idle_exit_s`` after that long without a record."""
        targets = self.consumer.end_offsets(self.tps) if until_caught_up else None
        last = time.monotonic()
        while not should_stop():
            if self.poll_once():
                last = time.monotonic()
            if targets is not None and all(self.sink.position(tp.topic, tp.partition) >= targets[tp] for tp in self.tps):
                break
            if idle_exit_s is not None and time.monotonic() - last >= idle_exit_s:
                break
        return self.report

    def close(self) -> None:
        """Close the consumer (the sink is the caller's)."""
        self.consumer.close()
