"""HookEvent → Capture (the dedup core's input, with the body hashed and the key chosen) or Skipped (valid, but not a turn)."""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, NamedTuple

from streams.model import fastpath
from streams.model.body_hash import KeyStrategy, dedup_key, stripped_body
from streams.model.deadletter import Reason, RejectedInput
from streams.model.details import details_json
from streams.model.events import CAPTURE_TYPES, HookEvent
from streams.model.injected import has_injected, strip_injected
from streams.model.jsstring import js_trim, js_utf8, to_js_utf16
from streams.model.placeholders import is_placeholder
from streams.settings import DEFAULT_MAX_BODY_BYTES

MAX_RECORD_BYTES = 900_000  # a capture's JSON must fit Kafka's default 1 MiB message.max.bytes
_CHECK_JSON_ABOVE = 100_000  # JSON escaping can grow a body up to 6x: measure it above this size


class Capture(NamedTuple):
    """One capture of a turn, ready for dedup (a named tuple: cheap to build and to pickle between
    the import processes and the runner, see :mod:`streams.frames.capture_import`).

    Attributes:
        event_id: the hook event's id (idempotency key).
        key: dedup key (:func:`streams.model.body_hash.dedup_key`).
        body_hash: 64-hex SHA-256 of the stripped, trimmed body (hive-mind parity).
        content: the frame content, prefix included, as the first writer would store it.
        source, session, event_type, parent, project, importance: provenance.
        event_time_ms: event time, epoch ms.
        partition, offset: where the record was read (topic partition/offset, or a file id
            and line number); used to recognise a record processed twice.
        details: the event's ids and metadata as JSON text (:func:`streams.model.details.details_json`),
            or None; they go to ``event_details``, never into the frame.
    """

    event_id: str
    key: str
    body_hash: str
    content: str
    source: str
    session: str
    event_type: str
    parent: str | None
    project: str | None
    importance: str
    event_time_ms: int
    partition: int
    offset: int
    details: str | None = None


class SkipReason(StrEnum):
    """Why a valid hook event is not a turn (counted in ``skipped_events``, never a dead letter: docs/design.md#dedup-semantics).

    Dead letters stay for input that is wrong; these events are right and are simply not memory.
    """

    NOT_A_TURN = "not_a_turn"  # an event type that carries no turn: tool calls, lifecycle, notifications, compaction starts
    NO_TEXT = "no_text"  # a turn's event type without its text (a Stop without last_assistant_message, a Codex PostCompact)
    EMPTY_BODY = "empty_body"  # nothing left after the [hm] prefix and JavaScript whitespace (a tool-only turn's Stop)
    PLACEHOLDER = "placeholder"  # an OpenClaw media placeholder and nothing else (<media:audio>, <media:image> (2 images), ...)
    FAILED_SEND = "failed_send"  # an OpenClaw message:sent / message_sent the platform refused (success false)


class Skipped(NamedTuple):
    """A valid hook event that is not a turn: one ``skipped_events`` row (a named tuple, as :class:`Capture`).

    Attributes:
        event_id: the hook event's id (the row's key: a replay adds nothing).
        reason: a :class:`SkipReason` value.
        source, session, event_type, native_event, project: the event's provenance.
        event_time_ms: its event time, epoch ms.
        partition, offset: where the record was read.
        details: :func:`streams.model.details.details_json` of the event, or None.
    """

    event_id: str
    reason: str
    source: str
    session: str
    event_type: str
    native_event: str | None
    project: str | None
    event_time_ms: int
    partition: int
    offset: int
    details: str | None = None


_FAILED_SEND = frozenset({"message:sent", "message_sent"})


def _failed_send(native_event: str | None, raw: dict[str, Any] | None) -> bool:
    """True for an OpenClaw send whose payload says it failed (``success: false``)."""
    if native_event not in _FAILED_SEND or raw is None:
        return False
    holder = raw.get("context") if native_event == "message:sent" else raw.get("event")
    return isinstance(holder, dict) and holder.get("success") is False


def skip_reason(ev: HookEvent) -> SkipReason | None:
    """Why ``ev`` is not a turn, before its body is trimmed (:data:`SkipReason.EMPTY_BODY` comes
    after: :func:`capture_body_hash`), or None. Prefixed ``content`` is always a candidate turn."""
    return skip_reason_of(ev.event_type, ev.body, ev.content, ev.source, ev.native_event, ev.raw)


def skip_reason_of(event_type: str, body: str | None, content: str | None, source: str, native_event: str | None,
                   raw: dict[str, Any] | None) -> SkipReason | None:
    """:func:`skip_reason` of an event given by these fields (``produce``'s line fast path holds them
    without an event: :func:`streams.produce.fast_records.line_record`)."""
    if content is not None:
        return None
    if event_type not in CAPTURE_TYPES:
        return SkipReason.NOT_A_TURN
    if body is None:
        return SkipReason.NO_TEXT
    if source == "openclaw":
        if _failed_send(native_event, raw):
            return SkipReason.FAILED_SEND
        if is_placeholder(body):
            return SkipReason.PLACEHOLDER
    return None


def without_injected(ev: HookEvent) -> HookEvent:
    """``ev`` with hivestream's own injected blocks taken out of its body or content
    (:func:`streams.model.injected.strip_injected`): a turn that quotes them is captured without
    them, so memory handed back to an agent never becomes a frame again. ``ev`` itself when it holds none."""
    if ev.content is not None and has_injected(ev.content):
        return ev.model_copy(update={"content": strip_injected(ev.content)})
    if ev.content is None and ev.body is not None and has_injected(ev.body):
        return ev.model_copy(update={"body": strip_injected(ev.body)})
    return ev


def _hash_or_skip(ev: HookEvent, max_body_bytes: int) -> tuple[str, None] | tuple[None, SkipReason]:
    """``(body hash, None)`` of a turn, or ``(None, why it is not one)``.

    For an event with a ``body`` (no verbatim ``content``) the frame content is the prefix built
    from the event's tokens plus the body, and those tokens hold neither whitespace nor ``]``, so
    ``stripHmPrefix`` removes exactly the prefix and the body's leading JavaScript whitespace: on
    the fast path (:mod:`streams.model.fastpath`) the body is trimmed and hashed without building the
    prefix (an ASCII body needs no surrogate check either). Prefixed ``content`` always takes the
    general path.

    Raises:
        RejectedInput: ``body_too_large`` above ``max_body_bytes``, or when the content as JSON
            would not fit one Kafka record (:data:`MAX_RECORD_BYTES`).
    """
    why = skip_reason(ev)
    if why is not None:
        return None, why
    body = ev.body
    if fastpath.ENABLED and ev.content is None and body is not None:
        stripped = js_trim(body if body.isascii() else to_js_utf16(body))
        encoded = stripped.encode("utf-8")  # to_js_utf16 left no surrogate to replace
    else:
        content = ev.frame_content()
        assert content is not None  # skip_reason left only events with content or a body
        stripped = stripped_body(content)
        encoded = js_utf8(stripped)
    if not stripped:
        return None, SkipReason.EMPTY_BODY
    if len(encoded) > max_body_bytes:
        raise RejectedInput(Reason.BODY_TOO_LARGE, f"body is {len(encoded)} bytes, over the {max_body_bytes}-byte limit")
    if len(encoded) > _CHECK_JSON_ABOVE:
        as_json = len(json.dumps(ev.frame_content(), ensure_ascii=False).encode())
        if as_json > MAX_RECORD_BYTES:
            raise RejectedInput(Reason.BODY_TOO_LARGE, f"content is {as_json} bytes as JSON, over the {MAX_RECORD_BYTES}-byte record limit")
    return hashlib.sha256(encoded).hexdigest(), None


def capture_body_hash(ev: HookEvent, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> str | None:
    """The body hash (64 hex chars) of ``ev``'s capture, or ``None`` when ``ev`` is not a turn.

    ``max_body_bytes`` bounds the stripped body in UTF-8 bytes; above it :class:`RejectedInput`
    ``body_too_large``, as :func:`capture_outcome` raises."""
    return _hash_or_skip(without_injected(ev), max_body_bytes)[0]


def capture_outcome(
    ev: HookEvent,
    *,
    strategy: KeyStrategy = KeyStrategy.BODY,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    partition: int = 0,
    offset: int = 0,
) -> Capture | Skipped:
    """What the frames step makes of ``ev``: its :class:`Capture`, or a :class:`Skipped` row when
    it is not a turn (:class:`SkipReason`). Either carries the event's details
    (:func:`streams.model.details.details_json`).

    Args:
        ev: a validated hook event.
        strategy: dedup key strategy.
        max_body_bytes: the largest stripped body accepted, in UTF-8 bytes.
        partition, offset: the record's position.

    Raises:
        RejectedInput: ``body_too_large`` above ``max_body_bytes``, or when the content as JSON
            would not fit one Kafka record (:data:`MAX_RECORD_BYTES`).
    """
    ev = without_injected(ev)
    h, why = _hash_or_skip(ev, max_body_bytes)
    details = details_json(ev.native_event, ev.source, ev.raw)
    if h is None:
        assert why is not None
        return Skipped(ev.event_id, str(why), ev.source, ev.session, ev.event_type, ev.native_event, ev.project, ev.event_time_ms,
                       partition, offset, details)
    content = ev.frame_content()
    assert content is not None  # a capture has content
    return Capture(
        event_id=ev.event_id,
        key=dedup_key(h, ev.event_type, strategy),
        body_hash=h,
        content=content,
        source=ev.source,
        session=ev.session,
        event_type=ev.event_type,
        parent=ev.parent,
        project=ev.project,
        importance=ev.importance,
        event_time_ms=ev.event_time_ms,
        partition=partition,
        offset=offset,
        details=details,
    )


def to_capture(
    ev: HookEvent,
    *,
    strategy: KeyStrategy = KeyStrategy.BODY,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    partition: int = 0,
    offset: int = 0,
) -> Capture | None:
    """The :class:`Capture` of ``ev`` (:func:`capture_outcome`), or ``None`` when it is not a turn.

    Raises:
        RejectedInput: ``body_too_large`` as :func:`capture_outcome`.
    """
    out = capture_outcome(ev, strategy=strategy, max_body_bytes=max_body_bytes, partition=partition, offset=offset)
    return out if isinstance(out, Capture) else None
