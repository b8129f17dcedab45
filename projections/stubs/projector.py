"""``hivestream stubs project``: the ``stub-matches`` and stub dead-letter topics → the stub tables.

Like :mod:`projections.frames.projector`: the consumer assigns itself every partition and seeks to the
positions stored in DuckDB (``stub_positions``, input = topic), each poll is folded by
:class:`~streams.stubs.output_fold.OutputFold` and written by
:meth:`~projections.stubs.sink.StubSink.apply_batch` in one transaction with the next offsets and
the applied stub event ids, so a kill -9 at any point loses nothing and doubles nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from projections.reader.seeking import SeekingProjector
from projections.stubs.sink import StubSink
from streams.kafka.connection import ConnectionLike
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.stubs.outcome import parse_output_record
from streams.stubs.output_fold import OutputFold


@dataclass
class StubProjectorReport:
    """Counts of one stub projector run: records read, batches, matches and messages added, dead letters read."""

    records: int = 0
    batches: int = 0
    matches: int = 0
    messages: int = 0
    dead_letters: int = 0


class StubProjector(SeekingProjector[StubProjectorReport]):
    """Consumes ``matches_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the stub tables' writer.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        matches_topic, dead_letter_topic: the topics to project.
        batch_max: records per poll and per transaction (kafka-python ``max_poll_records``).
        clock: epoch-ms clock.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
    """

    def __init__(self, sink: StubSink, conn: ConnectionLike, matches_topic: str, dead_letter_topic: str, *, batch_max: int = 2000,
                 clock: Clock = wall_clock_ms) -> None:
        from streams.stubs.settings import MatchPolicy

        self.sink = sink
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        runner = sink.load_runner(MatchPolicy())
        seen = set(sink.con.execute("SELECT channel, message_id FROM stub_messages").fetchall())
        self.fold = OutputFold(runner, sink.applied_event_ids(), sink.match_keys(), seen)
        super().__init__(conn, [matches_topic, dead_letter_topic], sink.position, StubProjectorReport(),
                         client_id="hivestream-stub-projector", batch_max=batch_max)

    def poll_once(self, timeout_ms: int = 500) -> int:
        """Poll one batch and apply it in one transaction; returns the records consumed."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_max)
        if not polled:
            return 0
        positions: dict[tuple[str, int], int] = {}
        n = 0
        for tp, records in polled.items():
            for r in records:
                n += 1
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
            positions[(tp.topic, tp.partition)] = records[-1].offset + 1
        delta, applied = self.fold.drain()
        self.sink.apply_batch(self.fold.runner, delta, positions, self.clock, applied)
        rep = self.report
        rep.records += n
        rep.batches += 1
        rep.matches += len(delta.matches)
        rep.messages += len(delta.messages)
        return n

    def _dead_letter(self, raw: bytes, topic: str, partition: int, offset: int) -> None:
        try:
            dl = DeadLetter.model_validate_json(raw)
        except ValueError as e:
            self.fold.reject(f"{topic}[{partition}]", offset, raw, RejectedInput(Reason.WRONG_SHAPE, f"dead-letter record: {e}"))
        else:
            self.fold.reject(f"{dl.source}[{dl.partition}]", dl.offset, dl.original(), RejectedInput(dl.reason, dl.detail), dl.event_id)
        self.report.dead_letters += 1
