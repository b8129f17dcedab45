"""KnowHub events → projection rows (pure): experience dedup by the frames' dedup core.

Each experience event becomes a submission row assigned to an experience by
:class:`~streams.frames.dedup.DedupFold` keyed on the experience's dedup key (the normalised,
redacted task/resource/result): within the window W of the first submission it joins that
experience (its count and agents grow), otherwise it starts a new one whose id is its own
event id (first writer wins). Reviews and telemetry become rows as they are. The projection
derives ``experiences`` from these rows (see :data:`projections.experiences.schema.REFRESH_EXPERIENCES`),
so applying a record twice, or reviews before their experience, changes nothing.

Reminders: OpenClaw's KnowHub plugin reminds on ``before_agent_start`` and on every 3rd
``before_prompt_build`` of a session, and resets the session's counter at ``agent_end`` (seed,
MVP plan). The fold replays that counter from :class:`PluginHookCalled` markers (one session's
markers arrive in order) and emits one reminder row where the plugin injected one.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from streams.experiences.events import (
    ContentFetched,
    ExperienceEvent,
    ExperienceExtracted,
    ExperienceReviewed,
    ExperienceSubmitted,
    MemoryRecalled,
    PluginHookCalled,
    ReminderInjected,
    SearchPerformed,
)
from streams.frames.capture import Capture
from streams.frames.dedup import DedupFold
from streams.model.deadletter import DeadLetter
from streams.model.events import stable_id
from streams.model.tracked_state import TrackedState

# Allowed lateness of the experience dedup: a submission up to a day behind the newest one of its key
# group still joins an open experience (the frames' rule, docs/design.md#dedup-semantics, with W = one day).
KB_ALLOWED_LATENESS_MS = 86_400_000
REMIND_EVERY = 3  # seed: the plugin reminds on every 3rd before_prompt_build of a session


@dataclass
class ExperienceChanges:
    """Rows produced since the last drain.

    Attributes:
        submissions: ``experience_submissions`` rows (dicts with the table's columns).
        redactions: ``(event_id, kind, n)`` rows.
        reviews: ``experience_reviews`` rows.
        telemetry: ``kb_telemetry`` rows.
        dead_letters: rejected records.
        touched: experience ids whose derived row must be refreshed.
        hooks: ids of the plugin-hook markers counted in this batch (stored, so a re-delivered
            marker never moves a counter twice, even after a restart).
    """

    submissions: list[dict[str, Any]] = field(default_factory=list)
    redactions: list[tuple[str, str, int]] = field(default_factory=list)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    touched: set[str] = field(default_factory=set)
    hooks: list[str] = field(default_factory=list)
    state_changes: tuple[dict[str, Any], list[str]] = field(default_factory=lambda: ({}, []))


class ExperienceFold:
    """Folds KnowHub events into :class:`ExperienceChanges` rows.

    Args:
        window_ms: experience dedup window W (ms), ``None`` = unbounded.
        state: dedup state (:class:`~streams.frames.dedup.DedupFold` entries), as loaded from the projection;
            the fold keeps its own copy and hands its changes out with each :meth:`drain`.
        counters: session key → ``before_prompt_build`` calls since its last ``agent_end``.
        seen_hooks: ids of the plugin-hook markers counted before.
    """

    def __init__(self, window_ms: int | None, state: MutableMapping[str, Any] | None = None, counters: dict[str, int] | None = None,
                 seen_hooks: set[str] | None = None) -> None:
        self.state = TrackedState(dict(state or {}))
        self.core = DedupFold(window_ms, allowed_lateness_ms=KB_ALLOWED_LATENESS_MS, state=self.state, sweep_every=1000)
        self.counters: dict[str, int] = {} if counters is None else counters
        self._seen_hooks: set[str] = set() if seen_hooks is None else seen_hooks
        self._batch = ExperienceChanges()

    def feed(self, ev: ExperienceEvent, partition: int = 0, offset: int = 0) -> None:
        """Fold one event read at ``(partition, offset)``."""
        b = self._batch
        if isinstance(ev, ExperienceSubmitted | ExperienceExtracted):
            kind = "extracted" if isinstance(ev, ExperienceExtracted) else "submitted"
            cap = Capture(event_id=ev.event_id, key=ev.dedup_key, body_hash=ev.dedup_key, content="", source=ev.agent_id, session=ev.session_key,
                          event_type=kind, parent=None, project=None, importance="normal", event_time_ms=ev.event_time_ms,
                          partition=partition, offset=offset)
            fe = self.core.process(cap)
            b.submissions.append({
                "event_id": ev.event_id, "experience_id": fe.frame_id, "dedup_key": ev.dedup_key, "kind": kind, "task": ev.task,
                "resource": ev.resource, "result": ev.result, "confidence": ev.confidence, "agent_id": ev.agent_id,
                "submitted_by": ev.submitted_by, "session_key": ev.session_key, "source_tool": ev.source_tool, "runtime": ev.runtime,
                "privacy_mode": ev.privacy_mode, "redaction_count": sum(ev.redactions.values()), "injection_rules": list(ev.injection_rules),
                "requires_review": ev.requires_review, "anchor_ms": fe.frame_time_ms, "event_time_ms": ev.event_time_ms,
                "is_duplicate": fe.kind == "touched",
            })
            b.redactions += [(ev.event_id, k, n) for k, n in sorted(ev.redactions.items()) if n]
            b.touched.add(fe.frame_id)
        elif isinstance(ev, ExperienceReviewed):
            b.reviews.append({"event_id": ev.event_id, "experience_id": ev.experience_id, "decision": ev.decision, "reviewer": ev.reviewer,
                              "reason": ev.reason, "event_time_ms": ev.event_time_ms})
            b.touched.add(ev.experience_id)
        elif isinstance(ev, PluginHookCalled):
            self._hook(ev)
        else:
            b.telemetry.append(_telemetry(ev))

    def _hook(self, ev: PluginHookCalled) -> None:
        if ev.event_id in self._seen_hooks:  # re-delivered: the counter must not move twice
            return
        self._seen_hooks.add(ev.event_id)
        self._batch.hooks.append(ev.event_id)
        if ev.hook == "agent_end":
            self.counters.pop(ev.session_key, None)
            return
        n = 0
        if ev.hook == "before_prompt_build":
            n = self.counters.get(ev.session_key, 0) + 1
            self.counters[ev.session_key] = n
            if n % REMIND_EVERY:
                return
        reminder = ReminderInjected(event_id=stable_id(ev.event_id, "reminder"), event_time_ms=ev.event_time_ms, session_key=ev.session_key,
                                      agent_id=ev.agent_id, trigger=ev.hook, llm_call=n)
        self._batch.telemetry.append(_telemetry(reminder))

    def reject(self, dl: DeadLetter) -> None:
        """Record a dead letter (already redacted by its producer)."""
        self._batch.dead_letters.append(dl)

    def drain(self) -> ExperienceChanges:
        """The rows since the last call."""
        b, self._batch = self._batch, ExperienceChanges()
        b.state_changes = self.state.drain()
        return b


def _telemetry(ev: SearchPerformed | ContentFetched | MemoryRecalled | ReminderInjected) -> dict[str, Any]:
    row: dict[str, Any] = {"event_id": ev.event_id, "session_key": ev.session_key, "agent_id": ev.agent_id, "query": None, "agent_filter": None,
                           "hit_count": None, "experience_ref": None, "trigger": None, "llm_call": None, "runtime": None,
                           "event_time_ms": ev.event_time_ms}
    if isinstance(ev, SearchPerformed):
        row |= {"kind": "search", "query": ev.query, "agent_filter": ev.agent_filter, "hit_count": ev.hit_count, "runtime": ev.runtime}
    elif isinstance(ev, ContentFetched):
        row |= {"kind": "content", "experience_ref": ev.experience_ref, "runtime": ev.runtime}
    elif isinstance(ev, MemoryRecalled):
        row |= {"kind": "recall", "query": ev.query, "agent_filter": ev.project or None, "hit_count": ev.hit_count, "runtime": ev.runtime}
    else:
        row |= {"kind": "reminder", "trigger": ev.trigger, "llm_call": ev.llm_call}
    return row
