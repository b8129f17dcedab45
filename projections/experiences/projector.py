"""``hivestream kb project``: the ``experience-events`` and ``kb-dead-letter`` topics → the KnowHub tables.

Like :mod:`projections.frames.projector`: every partition assigned, positions read from and stored in
DuckDB (``kb_positions``) in the same transaction as the rows, the dedup state and the reminder
counters, so a kill -9 at any point loses nothing and doubles nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import duckdb

from projections.experiences.sink import KbSink
from projections.frames.snapshot import publish_snapshot, write_heartbeat
from projections.reader.seeking import SeekingProjector
from streams.experiences.build import safe_text
from streams.experiences.events import parse_kb_event
from streams.experiences.fold import KbFold
from streams.experiences.settings import KbSettings
from streams.kafka.connection import ConnectionLike
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput

log = logging.getLogger("hivestream.kb")


@dataclass
class KbProjectorReport:
    """Counts of one KnowHub projector run: records, batches, submissions, reviews, telemetry rows, dead letters."""

    records: int = 0
    batches: int = 0
    submissions: int = 0
    reviews: int = 0
    telemetry: int = 0
    dead_letters: int = 0


class KbProjector(SeekingProjector[KbProjectorReport]):
    """Consumes ``events_topic`` and ``dead_letter_topic`` into ``sink``.

    Args:
        sink: the KnowHub tables' writer.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        events_topic, dead_letter_topic: the topics to project.
        settings: the experience dedup window (the worker's privacy mode applies to a record
            that does not parse: its detail is redacted).
        batch_max: records per poll and per transaction.
        clock: epoch-ms clock.
        snapshot_every_s: least seconds between two snapshots ``<db>.snapshot`` for readers (the
            agent API on the Kafka path reads it; 0: none); one is published as soon as the
            stream is quiet after a change, and a heartbeat says when it was last caught up.

    Raises:
        RuntimeError: when a topic does not exist within 30 s.
    """

    def __init__(self, sink: KbSink, conn: ConnectionLike, events_topic: str, dead_letter_topic: str, settings: KbSettings | None = None, *,
                 batch_max: int = 5000, clock: Clock = wall_clock_ms, snapshot_every_s: float = 0.0) -> None:
        self.sink = sink
        self.snapshot_every_s = snapshot_every_s
        self._dirty = True
        self._published_at = float("-inf")
        self._beat_at = float("-inf")
        self.settings = settings or KbSettings()
        self.dead_letter_topic = dead_letter_topic
        self.clock = clock
        self.fold = KbFold(self.settings.window, sink.load_dedup_state(), sink.load_counters(), sink.load_seen_hooks())
        super().__init__(conn, [events_topic, dead_letter_topic], sink.position, KbProjectorReport(), client_id="hivestream-kb-projector",
                         batch_max=batch_max)

    def poll_once(self, timeout_ms: int = 500) -> int:
        """Poll one batch and apply it in one transaction; returns the records consumed."""
        polled = self.consumer.poll(timeout_ms=timeout_ms, max_records=self.batch_max)
        if not polled:
            self._publish(quiet=True)
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
        self._dirty = True
        self._publish(quiet=False)
        return n

    def _publish(self, *, quiet: bool) -> None:
        """Publish a snapshot when one is due (a change, and quiet or ``snapshot_every_s`` since the
        last), else a heartbeat while caught up; a failure is the next round's to retry."""
        if not self.snapshot_every_s:
            return
        now = time.monotonic()
        try:
            if self._dirty and (quiet or now - self._published_at >= self.snapshot_every_s):
                publish_snapshot(self.sink, self.clock())
                self._dirty, self._published_at = False, now
            elif not self._dirty and quiet and now - self._beat_at >= self.snapshot_every_s:
                write_heartbeat(self.sink, self.clock())
                self._beat_at = now
        except (duckdb.Error, OSError) as e:
            log.warning("kb project: the snapshot was not published (%s); retried", str(e).splitlines()[0] if str(e) else type(e).__name__)

    def close(self) -> None:
        """Publish what is not in the snapshot yet, then close the consumer (the sink is the caller's)."""
        if self.snapshot_every_s and self._dirty:
            self._publish(quiet=True)
        super().close()
