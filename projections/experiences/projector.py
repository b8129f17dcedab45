"""``hivestream kb project``: the ``experience-events`` and ``kb-dead-letter`` topics → the KnowHub tables.

The one Kafka projector loop (:class:`~projections.reader.projector.KafkaProjector`) with the
KnowHub fold (:class:`ExperienceTopicFold`): every partition assigned, positions read from and stored in
DuckDB (``kb_positions``) in the same transaction as the rows, the dedup state and the reminder
counters, so a kill -9 at any point loses nothing and doubles nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.experiences.projection import ExperienceBatch, ExperienceProjection
from projections.frames.projector import Snapshots
from projections.reader.projector import KafkaProjector, Polled
from streams.experiences.build import safe_text
from streams.experiences.events import parse_kb_event
from streams.experiences.fold import ExperienceFold
from streams.experiences.settings import ExperienceSettings
from streams.kafka.connection import ConnectionLike
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput


@dataclass
class ExperienceProjectorReport:
    """Counts of one KnowHub projector run: records, batches, submissions, reviews, telemetry rows, dead letters."""

    records: int = 0
    batches: int = 0
    submissions: int = 0
    reviews: int = 0
    telemetry: int = 0
    dead_letters: int = 0


class ExperienceTopicFold:
    """KnowHub records → :class:`~projections.experiences.sink.ExperienceBatch` (a :class:`~projections.reader.projector.TopicFold`).

    Args:
        fold: the experience dedup and reminder fold, restored from the projection.
        events_topic, dead_letter_topic: the topics of KnowHub events and of their dead letters.
        settings: the privacy mode applied to a record that does not parse (its detail is redacted).
        clock: epoch-ms clock of the dead letters made here.
    """

    def __init__(self, fold: ExperienceFold, events_topic: str, dead_letter_topic: str, settings: ExperienceSettings, clock: Clock = wall_clock_ms) -> None:
        self.fold = fold
        self.topics = [events_topic, dead_letter_topic]
        self.dead_letter_topic = dead_letter_topic
        self.settings = settings
        self.clock = clock
        self.report = ExperienceProjectorReport()

    def feed(self, polled: Polled) -> None:
        """Fold one poll's records; a record that does not parse becomes a dead letter (redacted as the privacy mode says)."""
        mode = self.settings.privacy_mode
        for tp, records in polled.items():
            for r in records:
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
                    self.fold.reject(DeadLetter.of(err, safe_text(raw.decode("utf-8", "replace"), mode).encode(), tp.topic, tp.partition,
                                                   r.offset, self.clock()))

    def drain(self) -> ExperienceBatch:
        """The rows since the last drain and the reminder counters as they are now."""
        return ExperienceBatch(self.fold.drain(), dict(self.fold.counters))

    def count(self, batch: ExperienceBatch, applied: None, records: int) -> None:
        """Count one applied batch."""
        rep, b = self.report, batch.rows
        rep.records += records
        rep.batches += 1
        rep.submissions += len(b.submissions)
        rep.reviews += len(b.reviews)
        rep.telemetry += len(b.telemetry)
        rep.dead_letters += len(b.dead_letters)


class ExperienceProjector(KafkaProjector[ExperienceBatch, None, ExperienceProjectorReport]):
    """Consumes ``events_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the KnowHub projection.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        events_topic, dead_letter_topic: the topics to project.
        settings: the experience dedup window (the worker's privacy mode applies to a record
            that does not parse: its detail is redacted).
        batch_max: records per poll and per transaction.
        clock: epoch-ms clock.
        snapshot_every_s: least seconds between snapshots ``<db>.snapshot`` for readers (the agent
            API on the Kafka path reads them; 0: none), with heartbeats while caught up
            (:class:`~projections.frames.projector.Snapshots`).

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
        ValueError: snapshots asked of a projection on a shared connection.
    """

    def __init__(self, sink: ExperienceProjection, conn: ConnectionLike, events_topic: str, dead_letter_topic: str,
                 settings: ExperienceSettings | None = None, *, batch_max: int = 5000, clock: Clock = wall_clock_ms,
                 snapshot_every_s: float = 0.0) -> None:
        settings = settings or ExperienceSettings()
        fold = ExperienceFold(settings.window, sink.load_dedup_state(), sink.load_counters(), sink.load_seen_hooks())
        between = None
        if snapshot_every_s:
            if sink.file is None:
                raise ValueError("snapshots need the file: open the KnowHub projection from its path")
            between = Snapshots(sink.file, snapshot_every_s, clock)
        super().__init__(sink, ExperienceTopicFold(fold, events_topic, dead_letter_topic, settings, clock), conn,
                         client_id="hivestream-kb-projector", batch_max=batch_max, between=between)
        self.sink = sink
