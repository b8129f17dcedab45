"""The per-record processing steps of the Kafka path, as pure functions.

The faust agents only move bytes between topics; what happens to a record is decided here, so
it is unit-tested without a broker and shared with the embedded runner's semantics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from streams.frames.capture import Capture, Skipped, capture_outcome
from streams.memory_calls import MemoryToolCall, ToolRule, memory_call
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.model.position import Position
from streams.settings import Settings

log = logging.getLogger(__name__)


def route_hook_record(raw: bytes | None, pos: Position, settings: Settings, now_ms: int) -> Capture | Skipped | DeadLetter:
    """Decide what one ``hook-events`` record becomes.

    Args:
        raw: the record value.
        pos: its position; the Kafka timestamp is the event time of a native payload that has
            none (the producer stamps it when the hook fires).
        settings: key strategy and body limit.
        now_ms: the clock reading that stamps a dead letter.

    Returns:
        A :class:`Capture` (to dedup), a :class:`Skipped` (a valid event that is not a turn: a tool
        or lifecycle event, an empty body, a media placeholder, a failed send), or a
        :class:`DeadLetter` (bad input, with its reason; an unexpected exception becomes
        ``processing_error`` and is logged). Never raises.
    """
    return route_hook_event(raw, pos, settings, now_ms)[1]


def route_hook_event(raw: bytes | None, pos: Position, settings: Settings, now_ms: int) -> tuple[HookEvent | None, Capture | Skipped | DeadLetter]:
    """:func:`route_hook_record` and the decoded event (``None`` when the record did not decode), so the
    worker's other steps of the same record (memory tool calls, KnowHub) need not decode it again. Never raises."""
    data = raw if raw is not None else b""
    event_id = ""
    if not data:
        return None, DeadLetter.of(RejectedInput(Reason.MALFORMED_JSON, "empty record value (a null value / tombstone)"), data,
                                   pos.topic, pos.partition, pos.offset, now_ms)
    ev: HookEvent | None = None
    try:
        ev = decode_hook_record(data, received_at_ms=pos.timestamp_ms)
        event_id = ev.event_id
        return ev, capture_outcome(ev, strategy=settings.key_strategy, max_body_bytes=settings.max_body_bytes,
                                   partition=pos.partition, offset=pos.offset)
    except RejectedInput as e:
        return ev, DeadLetter.of(e, data, pos.topic, pos.partition, pos.offset, now_ms, event_id=event_id)
    except Exception as e:  # a bug must not stop the stream (Kafka Streams' "log and continue" handler)
        log.exception("processing error at %s[%d]@%d", pos.topic, pos.partition, pos.offset)
        err = RejectedInput(Reason.PROCESSING_ERROR, f"{type(e).__name__}: {e}")
        return ev, DeadLetter.of(err, data, pos.topic, pos.partition, pos.offset, now_ms, event_id=event_id)


def memory_call_of(ev: HookEvent, rules: Sequence[ToolRule]) -> MemoryToolCall | None:
    """The memory tool call a decoded ``hook-events`` record holds (:func:`streams.memory_calls.memory_call`), else None.

    Never raises (an unexpected error gives None: the record's frame and KnowHub steps go on).
    """
    try:
        return memory_call(ev, rules)
    except Exception:
        return None
