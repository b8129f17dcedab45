"""The embedded runner over ``hivestream serve``'s hook-event log (:mod:`streams.ingest.hook_log`):
the one code path of ``hivestream run LOGDIR``, ``hivestream kb run LOGDIR`` and serve's own
continuous dedup loop, so the three give the same tables.

A log record becomes what a line of a hook-event file becomes (:func:`log_outcomes`): a
``hook-events`` record's value is decoded by :func:`streams.model.decode.decode_hook_record` and
goes through :func:`streams.frames.capture_import.outcomes` into
:meth:`hivestream.embedded.frames.EmbeddedRunner.run_outcomes` (the dedup core, the sink, the
memory tool calls), and into :class:`hivestream.embedded.experiences.KnowHub's runner <KbRunner>`; a
``dead-letter`` record (a payload the server refused) is recorded as it is. The input name is
``log:<log id>`` (:func:`streams.ingest.hook_log.log_origin`), the captures' partition its CRC, their
offset the log offset; the dead letters' times and the KnowHub clock are the records' append
times, so a run is the same whenever and wherever it happens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from hivestream.embedded.experiences import KbRunner, KbRunReport
from hivestream.embedded.frames import EmbeddedRunner, RunReport, file_id_of
from projections.experiences.sink import KbSink
from streams.experiences.extract import Completer
from streams.experiences.settings import KbSettings
from streams.frames.capture_import import CaptureOptions, Outcome, outcomes
from streams.ingest.hook_log import DEAD_LETTER, HOOK_EVENTS, LogRecord, is_log_dir, log_origin, read_chunks, read_marker
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.settings import Settings

LOG_FORMAT = "serve-log"
"""The format name a log directory is reported under (``RunReport.inputs``)."""


class RecordClock:
    """A clock that reads the append time of the log record being processed (set by the generators below)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def log_outcomes(records: Iterable[LogRecord], opts: CaptureOptions, file_id: int, origin: str, clock: RecordClock) -> Iterator[Outcome]:
    """The runner's outcomes of log records, in order (see the module docstring).

    A dead-letter record that does not parse (it cannot happen unless the file was edited) becomes
    a ``wrong_shape`` dead letter of its own, as the Kafka projector does with such a record.
    """
    for rec in records:
        clock.now = rec.time_ms
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
    """``(offset, value)`` of the log's hook events for the KnowHub runner; a dead-letter record
    only moves its position (an empty value)."""
    for rec in records:
        clock.now = rec.time_ms
        yield rec.offset, rec.value if rec.kind == HOOK_EVENTS else b""


@dataclass
class LogRun:
    """The frames runner and the KnowHub runner of one DuckDB file, applying log records.

    Build with :func:`open_log_run`; :meth:`apply` one chunk of records at a time (the frames
    first, then KnowHub, each in its own transactions with its position); :meth:`close` at the end.
    """

    runner: EmbeddedRunner
    kb: KbRunner
    clock: RecordClock

    @property
    def report(self) -> RunReport:
        """The frames runner's counts."""
        return self.runner.report

    def position(self, origin: str) -> int:
        """The first offset of ``origin`` not applied by both pipelines."""
        return min(self.runner.sink.position(origin), self.kb.sink.position(origin))

    def apply(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Apply ``records`` of the log ``origin`` (oldest first; offsets already applied are skipped).

        Raises:
            duckdb.Error: when a batch cannot be written (rolled back; its position stays, so it is applied again).
        """
        if not records:
            return
        self.runner.run_outcomes(origin, log_outcomes(records, self.runner.options(), file_id_of(origin), origin, self.clock))
        self.kb.run_lines(origin, kb_lines(records, self.clock))

    def close(self) -> None:
        """Close the KnowHub cursor, then checkpoint and close the file."""
        try:
            self.kb.sink.con.close()
        finally:
            self.runner.close()


def open_log_run(db: str | Path, settings: Settings | None = None, kb_settings: KbSettings | None = None, *,
                 completer: Completer | None = None, duckdb_threads: int | None = None) -> LogRun:
    """Open ``db`` for applying log records (both projections on one connection; ``duckdb_threads``:
    DuckDB's threads for it, else DuckDB's default, see :class:`~projections.frames.sink.DuckSink`).

    Raises:
        projections.frames.sink.MetaMismatch: when ``db`` was built with other dedup settings.
        duckdb.IOException: when another process holds ``db``.
    """
    clock = RecordClock()
    runner = EmbeddedRunner(db, settings, clock, duckdb_threads=duckdb_threads)
    try:
        kb_sink = KbSink(db, con=runner.sink.con.cursor())
        kb = KbRunner(kb_sink, kb_settings or KbSettings(), completer=completer, clock=clock, report=KbRunReport(db=str(db)))
    except BaseException:
        runner.close()
        raise
    return LogRun(runner, kb, clock)


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


def run_inputs(paths: Sequence[Path], db: str | Path, *, settings: Settings | None = None, kb_settings: KbSettings | None = None,
               gateway: bool = False, on_file: Callable[[Path], None] | None = None,
               on_skip: Callable[[str], None] | None = None) -> tuple[RunReport, KbRunReport]:
    """``hivestream run`` over files and serve logs in order, into one file: a file as
    :meth:`EmbeddedRunner.run_file` runs it, a log with both projections (as serve writes it).

    Raises:
        OSError, ValueError, projections.frames.sink.MetaMismatch, duckdb.Error: see :func:`apply_log`, :func:`open_log_run`.
    """
    run = open_log_run(db, settings, kb_settings)
    try:
        for p in paths:
            if is_log_dir(p):
                apply_log(run, p, on_skip)
            else:
                run.runner.run_file(p, gateway=gateway)
            if on_file:
                on_file(p)
    finally:
        run.close()
    return run.report, run.kb.report


def run_kb_log(directory: Path, db: str | Path, settings: KbSettings | None = None, *, completer: Completer | None = None,
               on_skip: Callable[[str], None] | None = None) -> KbRunReport:
    """``hivestream kb run LOGDIR``: the KnowHub tables of a serve log alone (the same rows serve writes).

    Raises:
        ValueError, OSError: see :func:`apply_log`; duckdb.IOException when another process holds ``db``.
    """
    origin = log_dir_origin(directory)
    clock = RecordClock()
    with KbSink(db) as sink:
        kb = KbRunner(sink, settings or KbSettings(), completer=completer, clock=clock, report=KbRunReport(db=str(db)))
        for chunk in read_chunks(directory, sink.position(origin), on_skip):
            kb.run_lines(origin, kb_lines(chunk, clock))
    return kb.report
