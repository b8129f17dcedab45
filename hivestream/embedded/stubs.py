"""The embedded stub runner: stub logs (files, a ``stubs.db`` import, serve's log) → matches → the stub projection.

The pure replay (:class:`~streams.stubs.replay.StubFold`) in one process, written by
:class:`~projections.stubs.sink.StubProjection` one batch (one transaction) per ``batch_size``
items with the position of each input, so running a file again applies nothing twice (items
below the stored position are skipped) and a run killed halfway resumes where its last batch
committed; the runner's state is restored from the tables. ``hivestream stubs run`` runs files
(:func:`run_stub_logs`), ``hivestream run LOGDIR`` and ``serve`` the stub events of a serve log
(:meth:`StubLogRunner.apply_log`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from projections.stubs.projection import StubProjection, match_meta, settings_of, stub_batch
from streams.ingest.hook_log import STUB_EVENTS, LogRecord
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import RejectedInput
from streams.stubs.errors import code_of
from streams.stubs.events import StubDeleted, StubRefreshed, StubUpserted, parse_stub_event
from streams.stubs.log import LogEntry
from streams.stubs.replay import StubDelta
from streams.stubs.settings import MatchPolicy, MatchSettings


@dataclass
class StubRunReport:
    """What a stub run read and wrote.

    Attributes:
        db: the DuckDB file.
        inputs: input names, in order.
        items: log items applied (not counting skipped ones); ``skipped``: items below the stored position.
        stub_events, messages, subagent_messages, matched_messages, matches, tokens: counts
            over the applied items (``tokens`` in tokens).
        repeated: messages already processed (same channel and message id), and, on a serve log,
            stub state events already applied (same event id).
        logged: runtime-recorded matches read from the logs (kept for what-if, not applied).
        dead_letters: rejection code (or reason) → count.
    """

    db: str
    inputs: list[str] = field(default_factory=list)
    items: int = 0
    skipped: int = 0
    stub_events: int = 0
    messages: int = 0
    subagent_messages: int = 0
    matched_messages: int = 0
    matches: int = 0
    tokens: int = 0
    repeated: int = 0
    logged: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)

    def add(self, d: StubDelta) -> None:
        """Count one drained delta."""
        self.messages += sum(1 for m in d.messages if m.origin == "main")
        self.subagent_messages += sum(1 for m in d.messages if m.origin != "main")
        self.matched_messages += sum(1 for m in d.messages if m.matched)
        self.matches += len(d.matches)
        self.tokens += sum(m.tokens_injected for m in d.matches)
        self.repeated += d.repeated
        self.logged += len(d.logged)
        for r in d.rejections:
            self.dead_letters[code_of(r.error) or str(r.error.reason)] += 1


class StubListener(Protocol):
    """Who follows the stub state the runner applies (serve's live matcher)."""

    def reset_stubs(self, stubs: Sequence[StubUpserted], policy: MatchPolicy) -> None:
        """The live stubs as the runner holds them when it opens (its state restored from the tables) and its match settings."""

    def stub_event(self, ev: StubUpserted | StubRefreshed | StubDeleted) -> None:
        """A stub state event the runner was just fed (in log order; it judges it itself)."""


class StubLogRunner:
    """Feeds positioned stub log entries to the replay and writes them in batches with their positions.

    Args:
        sink: the stub projection (its state is restored into the runner).
        policy: the match settings.
        clock: epoch-ms clock of the dead letters (a serve log passes each record's append time).
        batch_size: items per transaction.
        report: where the counts go.
        bind: match settings to bind to the file (:meth:`StubProjection.check_meta`) before the
            first batch that matches a message (None: nothing to bind; stub writes alone bind
            nothing, as a ``stubs import`` binds nothing).
        listener: told the live stubs at open and every stub state event fed after (None: nobody).
    """

    name = "stubs"

    def __init__(self, sink: StubProjection, policy: MatchPolicy, *, clock: Clock = wall_clock_ms, batch_size: int = 1000,
                 report: StubRunReport | None = None, bind: MatchSettings | None = None, listener: StubListener | None = None) -> None:
        self.sink = sink
        self.bind = bind
        self.clock = clock
        self.batch_size = batch_size
        self.report = report or StubRunReport(db=sink.path)
        self.runner = sink.load_runner(policy)
        self._pending: dict[str, int] = {}
        self._n = 0
        self._applied: set[str] | None = None  # stub state event ids applied from serve logs (read on first use)
        self._new_applied: list[str] = []
        self.listener = listener
        if listener is not None:
            listener.reset_stubs(self.current_stubs(), policy)

    def current_stubs(self) -> list[StubUpserted]:
        """The live stubs of the runner as ``stub-upserted`` events (telemetry kept), by channel and id."""
        out = []
        for key, vec in sorted(self.runner.vectors.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
            rec = self.runner.index.record(*key)
            if rec is None:
                continue
            out.append(StubUpserted(event_id=f"restored:{key[0] or ''}:{key[1]}", event_time_ms=rec.created_at_ms, stub_id=rec.stub_id,
                                    channel=rec.channel, title=rec.title, stub_text=rec.stub_text, archive_path=rec.archive_path,
                                    archive_tokens=rec.archive_tokens, embedding_b64=vec.embedding_b64, model=vec.model, dim=vec.dim,
                                    refresh_source=rec.refresh_source, refresh_spec=rec.refresh_spec, match_count=rec.match_count,
                                    last_matched_at_ms=rec.last_matched_at_ms, last_refreshed_at_ms=rec.last_refreshed_at_ms))
        return out

    def run_entries(self, log: Iterable[LogEntry]) -> None:
        """Apply one log's entries in order; entries below their source's stored position are skipped.
        Call :meth:`flush` after the last log.

        Raises:
            duckdb.Error: when a batch cannot be written (rolled back; its positions stay).
        """
        start: dict[str, int] = {}
        report = self.report
        for e in log:
            if e.source not in start:
                start[e.source] = self.sink.position(e.source)
                if e.source not in report.inputs:
                    report.inputs.append(e.source)
            if e.offset < start[e.source]:
                report.skipped += 1
                continue
            self._feed(e)

    def apply_log(self, origin: str, records: Sequence[LogRecord]) -> None:
        """Apply the ``stub-events`` records of a serve log's ``records`` (oldest first; the others only
        move the position); a stub state event whose id was applied before is counted as repeated,
        not applied again (``stubs import`` of the same ``stubs.db`` twice through serve). Commits.

        Raises:
            duckdb.Error: when a batch cannot be written.
        """
        if not records:
            return
        start = self.sink.position(origin)
        if self._applied is None:
            self._applied = self.sink.applied_event_ids()
        for rec in records:
            if rec.offset < start:
                continue
            self._pending[origin] = rec.offset + 1
            if rec.kind != STUB_EVENTS:
                continue
            try:
                item: LogEntry = LogEntry(origin, rec.offset, rec.value, parse_stub_event(rec.value))
            except RejectedInput as e:
                item = LogEntry(origin, rec.offset, rec.value, e)
            if isinstance(item.item, StubUpserted | StubRefreshed | StubDeleted):
                if item.item.event_id in self._applied:
                    self.report.repeated += 1
                    continue
                self._applied.add(item.item.event_id)
                self._new_applied.append(item.item.event_id)
            self._feed(item)
        self.flush()

    def _feed(self, e: LogEntry) -> None:
        self.runner.feed(e)
        if self.listener is not None and isinstance(e.item, StubUpserted | StubRefreshed | StubDeleted):
            self.listener.stub_event(e.item)
        self.report.items += 1
        self.report.stub_events += isinstance(e.item, StubUpserted | StubRefreshed | StubDeleted)
        self._pending[e.source] = e.offset + 1
        self._n += 1
        if self._n >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Write what was fed since the last batch, with the positions it reached.

        Raises:
            duckdb.Error: when the batch cannot be written.
        """
        delta = self.runner.drain()
        self.report.add(delta)
        pending, applied = self._pending, self._new_applied
        self._pending, self._new_applied, self._n = {}, [], 0
        if self.bind is not None and delta.messages:  # matched under these settings: they give the rows their meaning
            self.sink.check_meta(match_meta(self.bind))
            self.bind = None
        if pending or delta.touched or delta.rejections:
            self.sink.apply(stub_batch(self.runner, delta, self.clock, applied), {(k, 0): o for k, o in pending.items()})

    def position(self, origin: str) -> int:
        """The stub projection's position of ``origin`` (a :class:`~hivestream.embedded.log_run.LogDriver`)."""
        return self.sink.position(origin)


def log_policy(sink: StubProjection, policy: MatchPolicy | None) -> tuple[MatchPolicy, MatchSettings | None]:
    """The match policy the stub events of a serve log are run with (``policy``, else the settings
    the file is bound to, else the defaults) and the settings still to bind to the file once a message
    is matched (None: the file holds them already; :meth:`StubLogRunner.flush` records them).

    Raises:
        projections.stubs.sink.StubMetaMismatch: when the file was built with other settings than ``policy``'s.
    """
    stored = settings_of(sink.stored_meta())
    if policy is None:
        policy = MatchPolicy(defaults=stored or MatchSettings())
    sink.check_meta(match_meta(policy.defaults), record=False)
    return policy, None if stored is not None else policy.defaults


def run_stub_logs(
    logs: Iterable[Iterable[LogEntry]],
    db: str | Path,
    policy: MatchPolicy | None = None,
    *,
    batch_size: int = 1000,
    clock: Clock = wall_clock_ms,
    bind_settings: bool = True,
) -> StubRunReport:
    """Run stub logs in order into ``db`` (one transaction per ``batch_size`` items, with positions).

    Each log is an iterable of :class:`LogEntry` (e.g. :func:`streams.stubs.log.read_log`); the
    position of each entry's ``source`` is stored with the batch that applied it. With
    ``bind_settings`` the file records ``policy.defaults`` on first use and refuses other
    settings later (pass False for logs without messages, e.g. a ``stubs.db`` import).

    Raises:
        projections.stubs.sink.StubMetaMismatch: when ``db`` was built with other match settings.
        duckdb.IOException: when another process holds ``db``.
        OSError: when a log cannot be read.
    """
    policy = policy or MatchPolicy()
    report = StubRunReport(db=str(db))
    with StubProjection(db) as sink:
        if bind_settings:
            sink.check_meta(match_meta(policy.defaults))
        run = StubLogRunner(sink, policy, clock=clock, batch_size=batch_size, report=report)
        for log in logs:
            run.run_entries(log)
        run.flush()
    return report
