"""What one hook event becomes on the frames path: the one routing ``run`` and the Kafka worker share (pure).

:func:`route_event` decides for a decoded event (or the rejection of its line): a
:class:`~streams.frames.capture.Capture` to dedup, a :class:`~streams.frames.capture.Skipped` row
(a valid event that is not a turn), or :class:`Refused` (bad input, with its reason), and the
memory tool call the event records. ``run``'s import encodes that result into its column outcomes
(:func:`streams.frames.capture_import.item_outcome`); the worker's step reads a ``hook-events``
record through :func:`route_record`, which decodes it and makes the dead letter, under the
:class:`~streams.model.guard.Guard` (a bug becomes a ``processing_error`` dead letter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streams.frames.capture import Capture, Skipped, capture_outcome
from streams.memory_calls.tool_calls import MemoryToolCall, ToolRule, memory_call
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import DeadLetter, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.model.guard import Guard, record_value
from streams.model.position import Position
from streams.settings import Settings

GUARD = Guard("frames")


@dataclass(frozen=True, slots=True)
class Refused:
    """A hook event or line the frames path rejects: why, and the event's id (``""`` when no event decoded)."""

    error: RejectedInput
    event_id: str = ""


Routed = tuple[Capture | Skipped | Refused, MemoryToolCall | None]
"""What :func:`route_event` returns: the frames result and the memory tool call (or None)."""


def route_event(item: HookEvent | RejectedInput, strategy: KeyStrategy, max_body_bytes: int, partition: int, offset: int,
                rules: Sequence[ToolRule] | None) -> Routed:
    """What one hook event becomes on the frames path, and its memory tool call.

    Args:
        item: the decoded event, or the rejection of a record that decoded to none.
        strategy, max_body_bytes: the dedup key strategy and the largest stripped body (UTF-8 bytes).
        partition, offset: the record's position (a file's id and line number in ``run``).
        rules: the memory tool rules (:func:`streams.memory_calls.configured_rules`), or None to
            look for no memory tool call.

    Returns:
        ``(Capture | Skipped | Refused, memory tool call or None)``; a rejection as ``item`` is
        :class:`Refused` with no event id and no call. Raises nothing on data.
    """
    if isinstance(item, RejectedInput):
        return Refused(item), None
    call = None if rules is None else memory_call_of(item, rules)
    try:
        return capture_outcome(item, strategy=strategy, max_body_bytes=max_body_bytes, partition=partition, offset=offset), call
    except RejectedInput as e:
        return Refused(e, item.event_id), call


def route_record(raw: bytes | None, pos: Position, settings: Settings, now_ms: int,
                 rules: Sequence[ToolRule] | None = None) -> tuple[HookEvent | None, Capture | Skipped | DeadLetter, MemoryToolCall | None]:
    """What one ``hook-events`` record becomes (:func:`route_event` of its decoded event), with its dead letter made.

    Args:
        raw: the record value.
        pos: its position; the Kafka timestamp is the event time of a native payload that has
            none (the producer stamps it when the hook fires).
        settings: key strategy and body limit.
        now_ms: the clock reading that stamps a dead letter.
        rules: as :func:`route_event` takes them.

    Returns:
        ``(the decoded event or None, Capture | Skipped | DeadLetter, memory tool call or None)``;
        the event is returned so the worker's KnowHub derivation need not decode the record again.
        Never raises: bad input is a dead letter with its reason, a bug a ``processing_error`` one.
    """
    data = raw if raw is not None else b""
    ev: HookEvent | None = None
    try:
        ev = decode_hook_record(record_value(data), received_at_ms=pos.timestamp_ms)
        res, call = route_event(ev, settings.key_strategy, settings.max_body_bytes, pos.partition, pos.offset, rules)
    except Exception as e:
        return ev, GUARD.letter(e, data, pos, now_ms, "" if ev is None else ev.event_id), None
    if isinstance(res, Refused):
        return ev, GUARD.letter(res.error, data, pos, now_ms, res.event_id), call
    return ev, res, call


def memory_call_of(ev: HookEvent, rules: Sequence[ToolRule]) -> MemoryToolCall | None:
    """The memory tool call ``ev`` records (:func:`streams.memory_calls.memory_call`), else None.

    Never raises (an unexpected error gives None: the record's frame and KnowHub outputs go on).
    """
    try:
        return memory_call(ev, rules)
    except Exception:
        return None
