"""``hivestream stubs project``: the ``stub-matches`` and stub dead-letter topics → the stub tables.

The one Kafka projector loop (:class:`~projections.reader.projector.KafkaProjector`) with the stub
fold (:class:`StubTopicFold`): every partition assigned, each batch folded by
:class:`~streams.stubs.output_fold.OutputFold` and written with the next offsets and the applied
stub event ids in one transaction (``stub_positions``, input = topic), so a kill -9 at any point
loses nothing and doubles nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.reader.projector import KafkaProjector, Polled
from projections.stubs.projection import StubBatch, StubProjection, stub_batch
from streams.kafka.connection import ConnectionLike
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.stubs.outcome import parse_output_record
from streams.stubs.output_fold import OutputFold
from streams.stubs.settings import MatchPolicy


@dataclass
class StubProjectorReport:
    """Counts of one stub projector run: records read, batches, matches and messages added, dead letters read."""

    records: int = 0
    batches: int = 0
    matches: int = 0
    messages: int = 0
    dead_letters: int = 0


class StubTopicFold:
    """``stub-matches`` and stub dead-letter records → :class:`~projections.stubs.sink.StubBatch` (a
    :class:`~projections.reader.projector.TopicFold`).

    Args:
        fold: the output fold, restored from the projection.
        matches_topic, dead_letter_topic: the topics.
        clock: epoch-ms clock of the dead letters.
    """

    def __init__(self, fold: OutputFold, matches_topic: str, dead_letter_topic: str, clock: Clock = wall_clock_ms) -> None:
        self.fold = fold
        self.topics = [matches_topic, dead_letter_topic]
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        self.report = StubProjectorReport()

    def feed(self, polled: Polled) -> None:
        """Fold one poll's records; a record that does not parse becomes a dead letter."""
        for tp, records in polled.items():
            for r in records:
                raw = r.value or b""
                if tp.topic == self.dead_letter_topic:
                    self._dead_letter(raw, tp.topic, tp.partition, r.offset)
                    continue
                try:
                    item = parse_output_record(raw)
                except RejectedInput as e:
                    self.fold.feed(f"{tp.topic}[{tp.partition}]", r.offset, raw, e)
                    continue
                self.fold.feed(f"{tp.topic}[{tp.partition}]", r.offset, raw, item)

    def drain(self) -> StubBatch:
        """The batch since the last drain, with the stub state as the fold holds it now."""
        delta, applied = self.fold.drain()
        return stub_batch(self.fold.runner, delta, self.clock, applied)

    def count(self, batch: StubBatch, applied: None, records: int) -> None:
        """Count one applied batch."""
        rep = self.report
        rep.records += records
        rep.batches += 1
        rep.matches += 0 if batch.matches is None else batch.matches.num_rows
        rep.messages += 0 if batch.messages is None else batch.messages.num_rows

    def _dead_letter(self, raw: bytes, topic: str, partition: int, offset: int) -> None:
        try:
            dl = DeadLetter.model_validate_json(raw)
        except ValueError as e:
            self.fold.reject(f"{topic}[{partition}]", offset, raw, RejectedInput(Reason.WRONG_SHAPE, f"dead-letter record: {e}"))
        else:
            self.fold.reject(f"{dl.source}[{dl.partition}]", dl.offset, dl.original(), RejectedInput(dl.reason, dl.detail), dl.event_id)
        self.report.dead_letters += 1


class StubProjector(KafkaProjector[StubBatch, None, StubProjectorReport]):
    """Consumes ``matches_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the stub projection.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        matches_topic, dead_letter_topic: the topics to project.
        batch_max: records per poll and per transaction.
        clock: epoch-ms clock.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
    """

    def __init__(self, sink: StubProjection, conn: ConnectionLike, matches_topic: str, dead_letter_topic: str, *, batch_max: int = 2000,
                 clock: Clock = wall_clock_ms) -> None:
        fold = OutputFold(sink.load_runner(MatchPolicy()), sink.applied_event_ids(), sink.match_keys(), sink.seen_messages())
        super().__init__(sink, StubTopicFold(fold, matches_topic, dead_letter_topic, clock), conn, client_id="hivestream-stub-projector",
                         batch_max=batch_max)
        self.sink = sink
