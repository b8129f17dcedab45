"""The embedded KnowHub runner: hook-event files → KnowHub events → DuckDB, in one process.

The same pure routing as the Kafka path (:func:`streams.experiences.routing.route_kb_record`,
:func:`~streams.experiences.routing.run_extraction`, :class:`~streams.experiences.fold.ExperienceFold`,
:class:`~projections.experiences.sink.ExperienceProjection`); positions per input file, the dedup state and the
reminder counters are stored with each batch, so running a file again applies nothing twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from projections.experiences.projection import ExperienceBatch, ExperienceProjection
from streams.experiences.events import ExperienceEvent
from streams.experiences.extract import Completer
from streams.experiences.fold import ExperienceFold
from streams.experiences.from_hooks import ExperienceDeriver, ExtractionRequest
from streams.experiences.routing import route_kb_record, run_extraction
from streams.experiences.settings import ExperienceSettings
from streams.importers.files import read_lines
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter
from streams.model.position import Position


@dataclass
class ExperienceRunReport:
    """What a KnowHub run read and wrote: lines read, KnowHub events by type, extraction requests, dead letters by reason."""

    db: str
    lines: int = 0
    skipped: int = 0
    events: Counter[str] = field(default_factory=Counter)
    extraction_requests: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)


class ExperienceRunner:
    """The KnowHub steps over numbered records of one input after another into one :class:`ExperienceProjection`.

    Args:
        sink: the KnowHub tables' writer.
        settings: KnowHub settings.
        completer: the extraction endpoint's client (see :func:`run_kb_files`).
        clock: epoch-ms clock of dead letters and extraction (a serve log passes each record's append time).
        batch_size: KnowHub events per transaction.
        report: where the counts go.
    """

    def __init__(self, sink: ExperienceProjection, settings: ExperienceSettings, *, completer: Completer | None = None, clock: Clock = wall_clock_ms,
                 batch_size: int = 2000, report: ExperienceRunReport | None = None) -> None:
        self.sink = sink
        self.settings = settings
        self.completer = completer
        self.clock = clock
        self.batch_size = batch_size
        self.report = report or ExperienceRunReport(db=sink.path)
        self.deriver = ExperienceDeriver(settings)
        self.fold = ExperienceFold(settings.window, sink.load_dedup_state(), sink.load_counters(), sink.load_seen_hooks())

    def run_lines(self, origin: str, lines: Iterable[tuple[int, bytes]]) -> None:
        """Apply ``(offset, record bytes)`` of ``origin`` in order; offsets below its stored position are
        skipped, blank records only move the position. Each batch commits with the next offset.

        Raises:
            duckdb.Error: when a batch cannot be written (rolled back; the position stays).
        """
        sink, fold, report, settings, clock = self.sink, self.fold, self.report, self.settings, self.clock
        start = sink.position(origin)
        pending = 0
        next_off = start
        for off, raw in lines:
            if off < start:
                report.skipped += 1
                continue
            next_off = off + 1
            if not raw.strip():
                continue
            report.lines += 1
            pos = Position(origin, 0, off, 0)
            for out in route_kb_record(raw, pos, self.deriver, clock(), use_record_time=False, report_bad_records=True):
                for item in _extracted(out, self.completer, settings, pos, clock, report):
                    if isinstance(item, DeadLetter):
                        fold.reject(item)
                        report.dead_letters[str(item.reason)] += 1
                    else:
                        fold.feed(item, 0, off)
                        report.events[item.type] += 1
                    pending += 1
            if pending >= self.batch_size:
                sink.apply(ExperienceBatch(fold.drain(), dict(fold.counters)), {(origin, 0): next_off})
                pending = 0
        sink.apply(ExperienceBatch(fold.drain(), dict(fold.counters)), {(origin, 0): next_off})


def file_origin(path: Path) -> str:
    """The input name a file's position is stored under: ``file:<absolute resolved path>``."""
    return f"file:{path.resolve()}"


def run_kb_files(paths: Iterable[Path], db: str | Path, settings: ExperienceSettings | None = None, *, completer: Completer | None = None,
                 clock: Clock = wall_clock_ms, batch_size: int = 2000) -> ExperienceRunReport:
    """Run hook-event JSONL files (and KnowHub event lines) in order into ``db``.

    Args:
        completer: the extraction endpoint's client; required when extraction is enabled and an
            ``agent_end`` with messages is seen (without one, requests are counted and skipped).

    Raises:
        OSError: when a file cannot be read; duckdb.IOException when another process holds ``db``.
    """
    settings = settings or ExperienceSettings()
    report = ExperienceRunReport(db=str(db))
    with ExperienceProjection(db) as sink:
        runner = ExperienceRunner(sink, settings, completer=completer, clock=clock, batch_size=batch_size, report=report)
        for path in paths:
            runner.run_lines(file_origin(path), enumerate(read_lines(path)))
    return report


def _extracted(out: ExperienceEvent | ExtractionRequest | DeadLetter, completer: Completer | None, settings: ExperienceSettings, pos: Position, clock: Clock,
               report: ExperienceRunReport) -> list[ExperienceEvent | DeadLetter]:
    if not isinstance(out, ExtractionRequest):
        return [out]
    report.extraction_requests += 1
    if completer is None:
        return []
    return list(run_extraction(out, completer, settings, pos, clock()))
