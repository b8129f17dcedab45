"""The embedded runner: import → validate → dedup → DuckDB in one process, no broker.

It runs the same pure steps as the Kafka path (adapters, :func:`streams.frames.capture.to_capture`,
:class:`streams.frames.dedup.DedupCore`, :class:`projections.sink.DuckSink`). Positions are stored per
input file in the same transaction as the rows, so running a file again applies nothing twice,
and a run that was killed resumes where its last batch committed. The dedup core's state is
stored in the same transaction (table ``dedup_state``), so it survives restarts too.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from projections.memory_calls import MemoryCallPass
from projections.sink import DuckSink
from streams.clock import Clock, wall_clock_ms
from streams.deadletter import DeadLetter, RejectedInput
from streams.frames.capture import to_capture
from streams.frames.dedup import DedupCore, FrameEvent
from streams.importers.files import Item, import_file
from streams.settings import Settings
from streams.state import TrackedState


@dataclass
class RunReport:
    """What a run read and wrote.

    Attributes:
        db: the DuckDB file.
        inputs: input name → detected format.
        records: input records (lines) that produced events or errors, not counting skipped ones.
        events: hook events produced by the importers (gateway captures included).
        captures: events that carried turn text.
        frames_created: new frames written.
        duplicates: new captures collapsed into an existing frame.
        repeated: captures whose event id was already applied (the same event ingested
            again, e.g. a snapshot of a growing file): they change nothing.
        not_captures: events without turn text (tool, lifecycle events).
        dead_letters: reason → count.
        skipped: items skipped because their position was already applied.
    """

    db: str
    inputs: dict[str, str] = field(default_factory=dict)
    records: int = 0
    events: int = 0
    captures: int = 0
    frames_created: int = 0
    duplicates: int = 0
    repeated: int = 0
    not_captures: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    skipped: int = 0


def settings_meta(settings: Settings) -> dict[str, str]:
    """The settings a projection file is bound to (see :meth:`DuckSink.check_meta`)."""
    return {"key_strategy": str(settings.key_strategy), "window_ms": str(settings.window or "unbounded")}


class EmbeddedRunner:
    """Runs files through dedup into one DuckDB file.

    Args:
        db: path of the DuckDB file (created when missing).
        settings: dedup and batch settings.
        clock: epoch-ms clock for dead-letter stamps (injected for tests).

    Raises:
        projections.sink.MetaMismatch: when ``db`` was built with other dedup settings.
        duckdb.IOException: when another process holds ``db``.
    """

    def __init__(self, db: str | Path, settings: Settings | None = None, clock: Clock = wall_clock_ms) -> None:
        self.settings = settings or Settings()
        self.clock = clock
        self.sink = DuckSink(db)
        self.sink.check_meta(settings_meta(self.settings))
        self.core = DedupCore(
            self.settings.window,
            allowed_lateness_ms=self.settings.allowed_lateness_ms,
            state=TrackedState(self.sink.load_dedup_state()),
        )
        self.report = RunReport(db=str(db))
        self.memory = MemoryCallPass(self.sink.con)  # issue 12: memory_tool_calls (the read side of memory)

    def close(self) -> None:
        """Close the DuckDB file."""
        self.sink.close()

    def run_file(self, path: Path, *, gateway: bool = False) -> None:
        """Import, dedup and project one file.

        Raises:
            OSError: when the file cannot be read.
        """
        origin = f"file:{path.resolve()}"
        fmt, items = import_file(path, gateway=gateway)
        self.report.inputs[str(path)] = fmt
        self.run_items(origin, items)

    def run_items(self, origin: str, items: Iterable[Item]) -> None:
        """Run a stream of importer items that came from ``origin``.

        Items at offsets below the stored position of ``origin`` are skipped; a batch is cut
        only between offsets, so each offset's events commit together with the position.
        """
        file_id = zlib.crc32(origin.encode()) & 0x7FFFFFFF
        start = self.sink.position(origin)
        events: list[FrameEvent] = []
        dls: list[DeadLetter] = []
        last_off = -1
        r = self.report
        for off, raw, item in items:
            if off < start:
                r.skipped += 1
                continue
            if off != last_off:
                if len(events) + len(dls) >= self.settings.batch_size:
                    self._flush(events, dls, origin, off)
                    events, dls = [], []
                r.records += 1
                last_off = off
            if isinstance(item, RejectedInput):
                dls.append(DeadLetter.of(item, raw, origin, 0, off, self.clock()))
                r.dead_letters[str(item.reason)] += 1
                continue
            r.events += 1
            self.memory.observe(item)  # issue 12
            try:
                cap = to_capture(item, strategy=self.settings.key_strategy,
                                 max_body_bytes=self.settings.max_body_bytes,
                                 partition=file_id, offset=off)
            except RejectedInput as e:
                dls.append(DeadLetter.of(e, raw, origin, 0, off, self.clock(), event_id=item.event_id))
                r.dead_letters[str(e.reason)] += 1
                continue
            if cap is None:
                r.not_captures += 1
                continue
            events.append(self.core.process(cap))
            r.captures += 1
        if last_off >= 0:
            self._flush(events, dls, origin, last_off + 1)

    def _flush(self, events: list[FrameEvent], dls: list[DeadLetter], origin: str, next_off: int) -> None:
        assert isinstance(self.core.state, TrackedState)
        self.memory.flush()  # issue 12: before the positions commit (idempotent on event id)
        frames, dups, _dead = self.sink.apply_batch(events, dls, {(origin, 0): next_off}, self.core.state.drain())
        self.report.frames_created += frames
        self.report.duplicates += dups
        self.report.repeated += len(events) - frames - dups


def run_files(
    paths: Iterable[Path],
    db: str | Path,
    *,
    settings: Settings | None = None,
    gateway: bool = False,
    clock: Clock = wall_clock_ms,
    on_file: Callable[[Path], None] | None = None,
) -> RunReport:
    """Run ``paths`` in order into ``db`` and return the report.

    Raises:
        OSError, projections.sink.MetaMismatch, duckdb.IOException: see :class:`EmbeddedRunner`.
    """
    runner = EmbeddedRunner(db, settings, clock)
    try:
        for p in paths:
            runner.run_file(p, gateway=gateway)
            if on_file:
                on_file(p)
    finally:
        runner.close()
    return runner.report
