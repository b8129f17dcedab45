"""The embedded runners over ``hivestream serve``'s log (:mod:`streams.ingest.hook_log`): the one code
path of ``hivestream run LOGDIR``, ``hivestream kb run LOGDIR`` and serve's own continuous loop, so
they give the same tables.

A :class:`LogRun` holds the projections of one DuckDB file as a list of :class:`LogDriver` (one
connection, a cursor each after the first), and applies each chunk of log records to each in turn,
every one in its own transactions with its own position of the log: the frames
(:class:`FramesLog`: a ``hook-events`` record becomes what a line of a hook-event file becomes,
:func:`log_outcomes`, through the dedup core with the memory tool calls; a ``dead-letter`` record, a
payload the server refused, is recorded as it is), the KnowHub experiences (:class:`ExperienceLog`),
the memory stubs (:class:`hivestream.embedded.stubs.StubLogRunner`: the ``stub-events`` records).
Each skips the records of other kinds, which only move its position. Adding a projection to serve
is adding a driver to :func:`open_log_run`'s list. The input name is ``log:<log id>``
(:func:`streams.ingest.hook_log.log_origin`), the captures' partition its CRC, their offset the log
offset; the dead letters' times and the KnowHub clock are the records' append times, so a run is
the same whenever and wherever it happens.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb

from hivestream.embedded.experiences import ExperienceRunner, ExperienceRunReport
from hivestream.embedded.frames import EmbeddedRunner, RunReport, file_id_of
from hivestream.embedded.stubs import StubListener, StubLogRunner, StubRunReport, log_policy
from projections.experiences.projection import ExperienceProjection
from projections.projection_file import ProjectionFile
from projections.stubs.projection import StubProjection
from streams.experiences.extract import Completer
from streams.experiences.settings import ExperienceSettings
from streams.frames.capture_import import CaptureOptions, Outcome, outcomes
from streams.ingest.hook_log import DEAD_LETTER, HOOK_EVENTS, STUB_EVENTS, LogRecord, is_log_dir, log_origin, read_chunks, read_marker
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.settings import Settings
from streams.stubs.settings import MatchPolicy

LOG_FORMAT = "serve-log"
"""The format name a log directory is reported under (``RunReport.inputs``)."""


class RecordClock:
    """A clock that reads the append time of the log record being processed (set by the generators below)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def log_outcomes(records: Iterable[LogRecord], opts: CaptureOptions, file_id: int, origin: str, clock: RecordClock) -> Iterator[Outcome]:
    """The runner's outcomes of log records, in order (see the module docstring); a ``stub-events``
    record gives none.

    A dead-letter record that does not parse (it cannot happen unless the file was edited) becomes
    a ``wrong_shape`` dead letter of its own, as the Kafka projector does with such a record.
    """
    for rec in records:
        clock.now = rec.time_ms
        if rec.kind == STUB_EVENTS:
            continue
        if rec.kind == DEAD_LETTER:
            try:
                dl = DeadLetter.model_validate_json(rec.value)
            except ValueError as e:
                dl = DeadLetter.of(RejectedInput(Reason.WRONG_SHAPE, f"dead-letter record: {e}"), rec.value, origin, 0, rec.offset, rec.time_ms)
            yield rec.offset, "x", None, dl, None
            continue
        item: HookEvent | RejectedInput
        try:
            item = decode_hook_record(rec.value)
        except RejectedInput as e:
            item = e
        yield from outcomes(((rec.offset, rec.value, item),), opts, file_id)


def kb_lines(records: Iterable[LogRecord], clock: RecordClock) -> Iterator[tuple[int, bytes]]:
    """``(offset, value)`` of the log's hook events for the KnowHub runner; a record of another kind
    (a dead letter, a stub event) only moves its position (an empty value)."""
    for rec in records:
        clock.now = rec.time_ms
        yield rec.offset, rec.value if rec.kind == HOOK_EVENTS else b""


class LogDriver(Protocol):
    """One projection's embedded runner over serve logs (what :class:`LogRun` holds a list of)."""

    name: str

    def position(self, origin: str) -> int:
        """The first offset of the log ``origin`` this projection has not applied."""

    def apply_log(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Apply ``records`` of the log ``origin`` (oldest first; offsets already applied are skipped) and commit.

        Raises:
            duckdb.Error: when a batch cannot be written (rolled back; its position stays).
        """


class FramesLog:
    """The frames runner over serve logs (a :class:`LogDriver`): :func:`log_outcomes` through the dedup core."""

    name = "frames"

    def __init__(self, runner: EmbeddedRunner, clock: RecordClock) -> None:
        self.runner = runner
        self.clock = clock

    def position(self, origin: str) -> int:
        """The frames projection's position of ``origin``."""
        return self.runner.sink.position(origin)

    def apply_log(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Dedup and project the hook events and dead letters of ``records``; the position reaches the last record."""
        if records:
            outs = log_outcomes(records, self.runner.options(), file_id_of(origin), origin, self.clock)
            self.runner.run_outcomes(origin, outs, end=records[-1].offset + 1)


class ExperienceLog:
    """The KnowHub runner over serve logs (a :class:`LogDriver`): the hook events of :func:`kb_lines`."""

    name = "experiences"

    def __init__(self, kb: ExperienceRunner, clock: RecordClock) -> None:
        self.kb = kb
        self.clock = clock

    def position(self, origin: str) -> int:
        """The KnowHub projection's position of ``origin``."""
        return self.kb.sink.position(origin)

    def apply_log(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Derive and project the KnowHub events of ``records``' hook events."""
        self.kb.run_lines(origin, kb_lines(records, self.clock))


@dataclass
class LogRun:
    """The projections of one DuckDB file, applying log records.

    Build with :func:`open_log_run`; :meth:`apply` one chunk of records at a time (to each driver
    in turn, each in its own transactions with its position); :meth:`close` at the end.

    Attributes:
        file: the DuckDB file (its connection: the frames runner's; the others write on cursors of it).
        drivers: the projections, in the order they apply a chunk.
        clock: the append time of the record being applied.
    """

    file: ProjectionFile
    drivers: list[LogDriver]
    clock: RecordClock

    @property
    def frames(self) -> EmbeddedRunner:
        """The frames runner (the first driver)."""
        first = self.drivers[0]
        assert isinstance(first, FramesLog)
        return first.runner

    @property
    def report(self) -> RunReport:
        """The frames runner's counts."""
        return self.frames.report

    def driver(self, name: str) -> LogDriver | None:
        """The driver of the projection ``name`` (``frames``, ``experiences``, ``stubs``), or None."""
        return next((d for d in self.drivers if d.name == name), None)

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The file's connection (serve lends cursors of it to readers)."""
        return self.file.con

    @property
    def path(self) -> Path:
        """The DuckDB file."""
        return Path(self.file.path)

    def position(self, origin: str) -> int:
        """The first offset of ``origin`` not applied by every projection."""
        return min(d.position(origin) for d in self.drivers)

    def apply(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Apply ``records`` of the log ``origin`` (oldest first; offsets a projection applied already it skips).

        Raises:
            duckdb.Error: when a batch cannot be written (rolled back; its position stays, so it is applied again).
        """
        if not records:
            return
        for d in self.drivers:
            d.apply_log(origin, records)

    def close(self) -> None:
        """Close the drivers' cursors and the frames runner (its last write), then checkpoint and close the file."""
        try:
            for d in self.drivers:
                if isinstance(d, ExperienceLog):
                    d.kb.sink.con.close()
                elif isinstance(d, StubLogRunner):
                    d.sink.con.close()
            self.frames.close()
        finally:
            self.file.close()


def open_log_run(db: str | Path, settings: Settings | None = None, kb_settings: ExperienceSettings | None = None, *,
                 completer: Completer | None = None, duckdb_threads: int | None = None, stub_policy: MatchPolicy | None = None,
                 stub_listener: StubListener | None = None) -> LogRun:
    """Open ``db`` for applying log records: the frames (with the memory tool calls), the KnowHub
    experiences and the memory stubs on one connection (``duckdb_threads``: DuckDB's threads for it,
    else DuckDB's default, see :class:`~projections.projection_file.ProjectionFile`).

    ``stub_policy``: the match settings of the stub events (None: those the file holds, else the
    defaults), bound to the file when the first message is matched, refused when the file holds others.
    ``stub_listener``: told the live stubs and each stub state event applied (serve's live matcher).

    Raises:
        projections.projection.MetaMismatch: when ``db`` was built with other dedup or match settings.
        duckdb.IOException: when another process holds ``db``.
    """
    clock = RecordClock()
    file = ProjectionFile(db, threads=duckdb_threads)
    try:
        runner = EmbeddedRunner(db, settings, clock, con=file.con)
        kb = ExperienceRunner(ExperienceProjection(db, file.cursor()), kb_settings or ExperienceSettings(), completer=completer, clock=clock,
                      report=ExperienceRunReport(db=str(db)))
        stub_sink = StubProjection(db, file.cursor())
        policy, bind = log_policy(stub_sink, stub_policy)
        stubs = StubLogRunner(stub_sink, policy, clock=clock, report=StubRunReport(db=str(db)), bind=bind, listener=stub_listener)
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a close failing after the first error (out of memory) must not hide it
            file.close()
        raise
    return LogRun(file, [FramesLog(runner, clock), ExperienceLog(kb, clock), stubs], clock)


def log_dir_origin(directory: Path) -> str:
    """The input name of the log in ``directory``.

    Raises:
        ValueError, OSError: see :func:`streams.ingest.hook_log.read_marker`.
    """
    return log_origin(read_marker(directory))


def apply_log(run: LogRun, directory: Path, on_skip: Callable[[str], None] | None = None) -> None:
    """Apply every record of the log in ``directory`` that ``run``'s file does not hold yet.

    Raises:
        ValueError: ``directory`` holds no log of a version this code reads.
        OSError: a segment cannot be read.
        duckdb.Error: a batch cannot be written.
    """
    origin = log_dir_origin(directory)
    run.report.inputs[str(directory)] = LOG_FORMAT
    for chunk in read_chunks(directory, run.position(origin), on_skip):
        run.apply(origin, chunk)


def run_inputs(paths: Sequence[Path], db: str | Path, *, settings: Settings | None = None, kb_settings: ExperienceSettings | None = None,
               gateway: bool = False, on_file: Callable[[Path], None] | None = None,
               on_skip: Callable[[str], None] | None = None) -> tuple[RunReport, ExperienceRunReport]:
    """``hivestream run`` over files and serve logs in order, into one file: a file as
    :meth:`EmbeddedRunner.run_file` runs it, a log with every projection (as serve writes it).

    Raises:
        OSError, ValueError, projections.projection.MetaMismatch, duckdb.Error: see :func:`apply_log`, :func:`open_log_run`.
    """
    run = open_log_run(db, settings, kb_settings)
    try:
        for p in paths:
            if is_log_dir(p):
                apply_log(run, p, on_skip)
            else:
                run.frames.run_file(p, gateway=gateway)
            if on_file:
                on_file(p)
    finally:
        run.close()
    kb = run.driver("experiences")
    assert isinstance(kb, ExperienceLog)
    return run.report, kb.kb.report


def run_kb_log(directory: Path, db: str | Path, settings: ExperienceSettings | None = None, *, completer: Completer | None = None,
               on_skip: Callable[[str], None] | None = None) -> ExperienceRunReport:
    """``hivestream kb run LOGDIR``: the KnowHub tables of a serve log alone (the same rows serve writes).

    Raises:
        ValueError, OSError: see :func:`apply_log`; duckdb.IOException when another process holds ``db``.
    """
    origin = log_dir_origin(directory)
    clock = RecordClock()
    with ExperienceProjection(db) as sink:
        kb = ExperienceRunner(sink, settings or ExperienceSettings(), completer=completer, clock=clock, report=ExperienceRunReport(db=str(db)))
        for chunk in read_chunks(directory, sink.position(origin), on_skip):
            kb.run_lines(origin, kb_lines(chunk, clock))
    return kb.report
