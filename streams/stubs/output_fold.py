"""The stub projector's fold: ``stub-matches`` records → stub state, matches and message rows.

Pure and idempotent, so the Kafka projector can apply at-least-once input exactly once:

* a stub state event (upsert, refresh, delete) is applied the first time its event id is seen;
  a global stub event arrives once per partition (broadcast) and its later copies are skipped.
  Within a partition the worker wrote it before every match computed against it, so no match
  is folded before the state it refers to;
* a :class:`StubMatched` is applied once per ``(message, channel, stub)``: it bumps the stub's
  ``match_count`` and advances ``last_matched_at_ms``, also when the stub has been deleted since
  (a global stub deleted while another partition still had messages matching it before its copy
  of the delete), so the count at deletion includes every match;
* a :class:`MessageProcessed` adds one ``stub_messages`` row per ``(channel, message_id)``.

Anything that does not parse becomes a :class:`~streams.stubs.replay.Rejection`.

Known difference from the embedded runner (documented in docs/stubs.md): when a *global* stub is
re-upserted with explicit telemetry (a re-import) or deleted and re-created with the same id
while other channels' messages are being matched, the order between those matches and the
upsert depends on partition interleaving.
"""

from __future__ import annotations

from dataclasses import replace

from streams.model.deadletter import RejectedInput
from streams.stubs.events import StubMatched
from streams.stubs.log import LogEntry
from streams.stubs.outcome import MessageProcessed, OutputRecord
from streams.stubs.replay import MessageRecord, Rejection, StubDelta, StubFold

MatchKey = tuple[str, str, str | None, int]
"""``(message_id, channel, stub channel, stub id)``, the primary key of ``stub_matches``."""


class OutputFold:
    """Folds ``stub-matches`` records into a :class:`StubDelta` for :meth:`projections.stubs.sink.StubProjection.apply_batch`.

    Args:
        runner: holds the stub state (restored from the projection); never asked to match.
        applied_event_ids: stub state event ids applied before.
        match_keys: matches stored before.
        seen_messages: ``(channel, message_id)`` of messages stored before.
    """

    def __init__(self, runner: StubFold, applied_event_ids: set[str], match_keys: set[MatchKey], seen_messages: set[tuple[str, str]]) -> None:
        self.runner = runner
        self.applied = applied_event_ids
        self.match_keys = match_keys
        self.seen_messages = seen_messages
        self._delta = StubDelta()
        self._new_applied: list[str] = []

    def feed(self, source: str, offset: int, raw: bytes, item: OutputRecord | RejectedInput) -> None:
        """Fold one record read at ``(source, offset)`` (``item`` = the parsed record or why it did not parse)."""
        d = self._delta
        if isinstance(item, RejectedInput):
            self.reject(source, offset, raw, item)
        elif isinstance(item, StubMatched):
            self._match(item)
        elif isinstance(item, MessageProcessed):
            key = (item.channel, item.message_id)
            if key not in self.seen_messages:
                self.seen_messages.add(key)
                d.messages.append(MessageRecord(item.channel, item.message_id, item.message_event_id, item.event_time_ms, item.origin,
                                                item.match_count > 0, item.match_count, item.tokens_injected, item.best_similarity))
            else:
                d.repeated += 1
        elif item.event_id not in self.applied:
            self.applied.add(item.event_id)
            self._new_applied.append(item.event_id)
            self.runner.feed(LogEntry(source, offset, raw, item))
            inner = self.runner.drain()
            d.touched |= inner.touched
            d.rejections += inner.rejections

    def reject(self, source: str, offset: int, raw: bytes, error: RejectedInput, event_id: str = "") -> None:
        """Record a rejected item (e.g. one read from the stub dead-letter topic) for ``stub_dead_letters``."""
        self._delta.rejections.append(Rejection(source, offset, raw, error, event_id))

    def drain(self) -> tuple[StubDelta, list[str]]:
        """The delta since the last call and the stub event ids it applied."""
        out = (self._delta, self._new_applied)
        self._delta, self._new_applied = StubDelta(), []
        return out

    def _match(self, ev: StubMatched) -> None:
        key: MatchKey = (ev.message_id, ev.channel, ev.stub_channel, ev.stub_id)
        if key in self.match_keys:
            return
        self.match_keys.add(key)
        skey = (ev.stub_channel, ev.stub_id)
        gone = self.runner.deleted.get(skey)
        if gone is not None and self.runner.index.record(*skey) is None:
            last = max(gone.last_matched_at_ms or 0, ev.event_time_ms)
            self.runner.deleted[skey] = replace(gone, match_count=gone.match_count + 1, last_matched_at_ms=last)
        else:
            self.runner.index.record_match(ev)
        self._delta.touched.add(skey)
        self._delta.matches.append(ev)
