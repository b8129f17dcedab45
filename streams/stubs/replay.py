"""Replaying a stub log: stub events and message embeddings in log order → matches and stub state.

:class:`StubFold` is the incremental, pure core shared by :func:`run_stub_events` (one shot,
in memory), the what-if (:mod:`streams.stubs.whatif`) and the DuckDB runner
(:mod:`projections.stubs.projection`). Rules:

* stub events (upsert / refresh / delete) change the :class:`StubIndex` in log order, so each
  message is matched against the stubs as they were at that point of the log;
* every message is recorded; a ``main`` message gets the matches of
  :meth:`StubIndex.match` under the runner's policy, each one a :class:`StubMatched` event that
  bumps the stub's ``match_count`` and ``last_matched_at_ms`` (starting from the imported
  state); a ``subagent`` message gets none;
* a message whose ``(channel, message_id)`` was already processed is counted as repeated and
  changes nothing (re-delivery is idempotent);
* :class:`StubMatched` events found *in* the log (what the runtime recorded) are kept in
  ``logged`` for comparison and are not applied: the runner computes its own matches, and
  applying both would count every match twice;
* anything rejected (unparseable line, malformed embedding, model mismatch, refresh of an
  unknown stub) becomes a :class:`Rejection` with its position; nothing is raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams.model.deadletter import RejectedInput
from streams.stubs.errors import StubError, reject
from streams.stubs.events import MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted
from streams.stubs.log import LogEntry, StubEventT, entries
from streams.stubs.matcher import StubIndex, to_matched_events
from streams.stubs.records import StubRecord
from streams.stubs.settings import MatchPolicy

StubKey = tuple[str | None, int]
"""A stub's identity: (scope, stub_id), scope ``None`` = the global set."""


@dataclass(frozen=True, slots=True)
class Vector:
    """A stub's current embedding as it travels in events: ``model``, ``dim`` and base64 float32 LE (``dim * 4`` bytes)."""

    model: str
    dim: int
    embedding_b64: str


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """One processed message.

    Attributes:
        channel, message_id, event_id: the message.
        event_time_ms: its event time (epoch ms).
        origin: ``main`` or ``subagent``.
        matched: True when at least one stub was injected.
        match_count: how many stubs were injected.
        tokens_injected: their archive tokens in total (tokens).
        best_similarity: the highest similarity over the candidate stubs whatever the threshold
            (unitless), ``None`` for subagent messages or when no stub was a candidate.
    """

    channel: str
    message_id: str
    event_id: str
    event_time_ms: int
    origin: str
    matched: bool
    match_count: int
    tokens_injected: int
    best_similarity: float | None


@dataclass(frozen=True, slots=True)
class Rejection:
    """A rejected log item: where it was (``source``, ``offset``), its ``raw`` bytes, the ``error`` and the event id if it parsed."""

    source: str
    offset: int
    raw: bytes
    error: RejectedInput
    event_id: str = ""


@dataclass
class StubDelta:
    """What a runner produced since the last :meth:`StubFold.drain`.

    Attributes:
        matches: computed :class:`StubMatched` events, in log order.
        messages: processed messages, in log order.
        rejections: rejected items, in log order.
        logged: :class:`StubMatched` events read from the log (runtime-recorded), deduplicated by event id.
        touched: stubs whose state changed (upsert, refresh, delete or a match).
        repeated: messages skipped because ``(channel, message_id)`` was already processed.
    """

    matches: list[StubMatched] = field(default_factory=list)
    messages: list[MessageRecord] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    logged: list[StubMatched] = field(default_factory=list)
    touched: set[StubKey] = field(default_factory=set)
    repeated: int = 0


class StubFold:
    """Incremental replay of a stub log under one :class:`MatchPolicy` (pure; rules in the module docstring).

    Args:
        policy: the match settings.
        seen_messages: ``(channel, message_id)`` pairs already processed (e.g. restored from a projection).
    """

    def __init__(self, policy: MatchPolicy | None = None, seen_messages: Iterable[tuple[str, str]] = ()) -> None:
        self.index = StubIndex(policy)
        self.vectors: dict[StubKey, Vector] = {}
        self.deleted: dict[StubKey, StubRecord] = {}
        self._seen = set(seen_messages)
        self._seen_logged: set[str] = set()
        self._delta = StubDelta()

    def restore(self, records: Iterable[StubRecord], vectors: Mapping[StubKey, Vector], deleted: Iterable[StubRecord] = ()) -> list[Rejection]:
        """Load stub state saved earlier (records with their telemetry, vectors, deleted stubs).

        Returns the rejections of records that no longer load (e.g. a stored vector that is
        invalid); a record without a vector is rejected too. Does not mark anything touched.
        """
        out: list[Rejection] = []
        for rec in records:
            key = (rec.channel, rec.stub_id)
            vec = vectors.get(key)
            try:
                if vec is None:
                    raise reject(StubError.BAD_ROW, f"stub {rec.stub_id} in {rec.channel!r}: no stored vector")
                self.index.upsert(_restore_event(rec, vec))
                self.vectors[key] = vec
            except RejectedInput as e:
                out.append(Rejection("state", rec.stub_id, b"", e))
        for rec in deleted:
            self.deleted[(rec.channel, rec.stub_id)] = rec
        return out

    def feed(self, entry: LogEntry) -> None:
        """Process one log entry (never raises for bad input: it becomes a :class:`Rejection`)."""
        item, d = entry.item, self._delta
        if isinstance(item, RejectedInput):
            d.rejections.append(Rejection(entry.source, entry.offset, entry.raw, item))
            return
        try:
            if isinstance(item, MessageEmbedded):
                self._message(item)
            elif isinstance(item, StubMatched):
                if item.event_id not in self._seen_logged:
                    self._seen_logged.add(item.event_id)
                    d.logged.append(item)
            else:
                self._state(item)
        except RejectedInput as e:
            d.rejections.append(Rejection(entry.source, entry.offset, entry.raw, e, item.event_id))

    def drain(self) -> StubDelta:
        """Return what was produced since the last call and start a new delta."""
        d, self._delta = self._delta, StubDelta()
        return d

    def stub_state(self, key: StubKey) -> tuple[StubRecord, bool] | None:
        """The stub's record and whether it is deleted (the record at deletion), or ``None`` when never seen."""
        rec = self.index.record(*key)
        if rec is not None:
            return rec, False
        gone = self.deleted.get(key)
        return (gone, True) if gone is not None else None

    def _state(self, ev: StubUpserted | StubRefreshed | StubDeleted) -> None:
        key = (ev.channel, ev.stub_id)
        if isinstance(ev, StubDeleted):
            rec = self.index.record(*key)
            if self.index.delete(ev):
                assert rec is not None
                self.deleted[key] = rec
                self.vectors.pop(key, None)
                self._delta.touched.add(key)
            return
        self.index.apply(ev)  # raises RejectedInput before changing anything
        self.vectors[key] = Vector(ev.model, ev.dim, ev.embedding_b64)
        self.deleted.pop(key, None)
        self._delta.touched.add(key)

    def _message(self, m: MessageEmbedded) -> None:
        key = (m.channel, m.message_id)
        if key in self._seen:
            self._delta.repeated += 1
            return
        matches, best = self.index.match_scored(m)  # validates the embedding even for subagents
        self._seen.add(key)
        events = to_matched_events(m, matches)
        for ev in events:
            self.index.record_match(ev)
            self._delta.touched.add((ev.stub_channel, ev.stub_id))
        self._delta.matches += events
        self._delta.messages.append(
            MessageRecord(m.channel, m.message_id, m.event_id, m.event_time_ms, m.origin, bool(events), len(events),
                          sum(e.tokens_injected for e in events), best)
        )


@dataclass
class StubRunResult:
    """The outcome of :func:`run_stub_events`.

    Attributes:
        matches, messages, rejections, logged, repeated: as in :class:`StubDelta` (whole log).
        stubs: final state of every stub ever seen, key → record (telemetry included).
        deleted: keys of stubs that are deleted at the end.
    """

    matches: list[StubMatched]
    messages: list[MessageRecord]
    rejections: list[Rejection]
    logged: list[StubMatched]
    stubs: dict[StubKey, StubRecord]
    deleted: frozenset[StubKey]
    repeated: int = 0

    @property
    def unmatched(self) -> list[MessageRecord]:
        """Main-runtime messages that matched nothing (subagent messages never match and are left out)."""
        return [m for m in self.messages if m.origin == "main" and not m.matched]


def run_stub_events(events: Iterable[StubEventT | RejectedInput | LogEntry], policy: MatchPolicy | None = None) -> StubRunResult:
    """Replay ``events`` in order under ``policy`` (default :class:`MatchPolicy()`) from an empty index.

    ``events`` may mix bare events, :class:`RejectedInput` items (a line that did not parse) and
    :class:`LogEntry` items (bare items are positioned by their index). Never raises for bad input.
    """
    runner = StubFold(policy)
    for e in entries(events):
        runner.feed(e)
    d = runner.drain()
    stubs: dict[StubKey, StubRecord] = dict(runner.deleted)
    for key in list(runner.vectors):
        rec = runner.index.record(*key)
        if rec is not None:
            stubs[key] = rec
    return StubRunResult(d.matches, d.messages, d.rejections, d.logged, stubs, frozenset(runner.deleted), d.repeated)


def _restore_event(rec: StubRecord, vec: Vector) -> StubUpserted:
    return StubUpserted(
        event_id="restore",
        event_time_ms=rec.created_at_ms,
        stub_id=rec.stub_id,
        channel=rec.channel,
        title=rec.title,
        stub_text=rec.stub_text,
        archive_path=rec.archive_path,
        archive_tokens=rec.archive_tokens,
        embedding_b64=vec.embedding_b64,
        model=vec.model,
        dim=vec.dim,
        refresh_source=rec.refresh_source,
        refresh_spec=rec.refresh_spec,
        match_count=rec.match_count,
        last_matched_at_ms=rec.last_matched_at_ms,
        last_refreshed_at_ms=rec.last_refreshed_at_ms,
    )
