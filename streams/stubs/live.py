"""The current stubs of a live matcher, kept apart per embedding model (pure).

The matcher (:class:`~streams.stubs.matcher.StubIndex`) refuses to compare a message with a scope of
another model; a live front door must instead match a prompt against the stubs of its own model
and report the others. :class:`LiveStubs` keeps one :class:`StubIndex` per ``(model, dim)``, applies
the stub state events in order (a stub refreshed with another model moves to that model's index),
and counts, for a prompt, the candidate stubs of other models it never compares.
"""

from __future__ import annotations

from collections import Counter

from streams.model.deadletter import RejectedInput
from streams.stubs.events import MessageEmbedded, StubDeleted, StubMatched, StubRefreshed, StubUpserted
from streams.stubs.matcher import Match, StubIndex
from streams.stubs.records import StubRecord
from streams.stubs.settings import MatchPolicy, MatchSettings

ModelKey = tuple[str, int]
"""An embedding model and its dimension."""


class LiveStubs:
    """The stubs per model, ready for matching; not thread-safe (callers hold a lock around changes and matches).

    Args:
        policy: the match settings (threshold, top N, budget per channel) of every index.
    """

    def __init__(self, policy: MatchPolicy | None = None) -> None:
        self.policy = policy or MatchPolicy()
        self._indexes: dict[ModelKey, StubIndex] = {}
        self._model_of: dict[tuple[str | None, int], ModelKey] = {}
        self._count: dict[str | None, Counter[ModelKey]] = {}  # scope -> model -> stubs
        self._b64: dict[tuple[str | None, int], str] = {}  # the stub's embedding as its last event carried it
        self.rejected = 0
        """State events refused (a bad embedding); each also returned by :meth:`apply`."""

    def __len__(self) -> int:
        """Stubs over all models."""
        return len(self._model_of)

    def models(self) -> Counter[ModelKey]:
        """How many stubs each ``(model, dim)`` holds."""
        return Counter(self._model_of.values())

    def record(self, channel: str | None, stub_id: int) -> StubRecord | None:
        """The stub's metadata and telemetry, or ``None``."""
        key = self._model_of.get((channel, stub_id))
        return None if key is None else self._indexes[key].record(channel, stub_id)

    def apply(self, ev: StubUpserted | StubRefreshed | StubDeleted | StubMatched) -> RejectedInput | None:
        """Apply one state event; the refusal (never raised) for a bad embedding or a refresh of an unknown stub."""
        try:
            self._apply(ev)
        except RejectedInput as e:
            self.rejected += 1
            return e
        return None

    def _apply(self, ev: StubUpserted | StubRefreshed | StubDeleted | StubMatched) -> None:
        if isinstance(ev, StubMatched):
            key = self._model_of.get((ev.stub_channel, ev.stub_id))
            if key is not None:
                self._indexes[key].record_match(ev)
            return
        stub = (ev.channel, ev.stub_id)
        old = self._model_of.get(stub)
        if isinstance(ev, StubDeleted):
            if old is not None:
                self._drop(old, ev)
            return
        new = (ev.model, ev.dim)
        if isinstance(ev, StubRefreshed) and old is not None and old != new:
            rec = self._indexes[old].record(*stub)
            assert rec is not None
            ev = StubUpserted(event_id=ev.event_id, event_time_ms=rec.created_at_ms, stub_id=ev.stub_id, channel=ev.channel,
                              title=rec.title if ev.title is None else ev.title, stub_text=ev.stub_text, archive_path=rec.archive_path,
                              archive_tokens=ev.archive_tokens, embedding_b64=ev.embedding_b64, model=ev.model, dim=ev.dim,
                              refresh_source=rec.refresh_source, refresh_spec=rec.refresh_spec, match_count=rec.match_count,
                              last_matched_at_ms=rec.last_matched_at_ms, last_refreshed_at_ms=ev.event_time_ms)
        index = self._indexes.get(new) or StubIndex(self.policy)
        index.apply(ev)  # raises before anything changed
        self._indexes[new] = index
        if old is not None and old != new:
            self._drop(old, StubDeleted(event_id=ev.event_id, event_time_ms=ev.event_time_ms, stub_id=ev.stub_id, channel=ev.channel))
        if self._model_of.get(stub) != new:
            self._model_of[stub] = new
            self._count.setdefault(ev.channel, Counter())[new] += 1
        self._b64[stub] = ev.embedding_b64

    def _drop(self, key: ModelKey, ev: StubDeleted) -> None:
        index = self._indexes[key]
        index.delete(ev)
        del self._model_of[(ev.channel, ev.stub_id)]
        self._b64.pop((ev.channel, ev.stub_id), None)
        per = self._count[ev.channel]
        per[key] -= 1
        if not per[key]:
            del per[key]
            if not per:
                del self._count[ev.channel]
        if not len(index):
            del self._indexes[key]

    def stubs(self) -> list[tuple[StubRecord, str]]:
        """Every stub's record and its embedding (base64 float32 LE, as its last event carried it), by channel (global first) and id."""
        out = []
        for key in sorted(self._model_of, key=lambda k: (k[0] is not None, k[0] or "", k[1])):
            rec = self.record(*key)
            if rec is not None:
                out.append((rec, self._b64[key]))
        return out

    def candidates(self, channel: str) -> int:
        """How many stubs of ``channel`` and of the global set exist, over all models."""
        return sum(n for scope in {channel, None} for n in self._count.get(scope, {}).values())

    def others(self, channel: str, model: str, dim: int) -> int:
        """How many stubs of ``channel`` and of the global set use another model or dimension than ``(model, dim)``."""
        return sum(n for scope in {channel, None} for key, n in self._count.get(scope, {}).items() if key != (model, dim))

    def match(self, message: MessageEmbedded, settings: MatchSettings | None = None) -> tuple[list[Match], float | None]:
        """The matches and best similarity of ``message`` among the stubs of its model (:meth:`StubIndex.match_scored`),
        under ``settings`` (default: the policy's for the message's channel).

        Raises:
            RejectedInput: a bad message embedding.
        """
        index = self._indexes.get((message.model, message.dim))
        if index is None:
            return [], None
        return index.match_scored(message, settings)
