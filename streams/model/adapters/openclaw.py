"""OpenClaw internal hook events ``message:received`` / ``transcribed`` / ``preprocessed`` / ``sent`` → HookEvent.

OpenClaw's gateway fires internal hooks as ``{"type": "message", "action": …, "sessionKey",
"timestamp", "context": {"content", "channelId", "from"|"to", "messageId", …}}`` (OpenClaw's hooks
docs, "Message Events"); the flattened form ``{"event": "message:received", …}`` is accepted too.
The turn's text:

* ``received``: ``context.content`` (a prompt); it may be a media placeholder such as
  ``<media:audio>``, which is no turn (:func:`streams.frames.capture.skip_reason`).
* ``transcribed``: ``context.transcript``, a voice note's transcript (a prompt).
* ``preprocessed``: the ``transcript`` when there is one, else ``bodyForAgent`` (what media
  understanding made of an image, say) when the raw ``body`` was empty or a placeholder, else none:
  a text message's text is ``received``'s.
* ``sent``: ``context.content`` (a reply, ``stop``); a send with ``success: false`` is no turn.

The session is ``channelId``, then ``sessionKey``, then ``sessionId`` (context first, then the top
level); the scope is ``openclaw-gateway:<id>`` as hive-mind's OpenClaw hook stamps it (seed OQ-6
§3), so every capture keeps hive-mind's prefix. The other documented internal events
(``command:*``, ``session:*``, ``agent:bootstrap``, ``gateway:startup``) are read too: no turn. The conversation (``sessionKey``,
``conversationId``), the sender, the thread and ``isGroup`` go to ``event_details``
(:mod:`streams.model.details`).
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.common import opt_str
from streams.model.deadletter import Reason, RejectedInput
from streams.model.event_build import EventFields, new_event
from streams.model.events import PROMPT, STOP, HookEvent, kebab, stable_id
from streams.model.placeholders import is_placeholder
from streams.model.prefix import DEFAULT_SCOPE

_TYPES = {"received": PROMPT, "sent": STOP, "transcribed": PROMPT, "preprocessed": PROMPT}
LIFECYCLE_KINDS = frozenset({"command", "session", "agent", "gateway"})
"""The internal event types besides ``message`` (OpenClaw's hooks docs, "Event types"): valid, never a turn."""


def adapt_openclaw(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> HookEvent:
    """Adapt an OpenClaw ``message:received`` / ``message:sent`` event; the event keeps ``raw``
    as its ``raw`` payload (``payload`` itself when None).

    Raises:
        RejectedInput: ``wrong_shape`` when ``context`` is not an object, the action is not one of
            received / transcribed / preprocessed / sent, or a text field is not a string;
            ``missing_field`` when no session id, no ``context.content`` (received, sent) or no
            ``context.transcript`` (transcribed).
    """
    return new_event(**openclaw_fields(payload, event_time_ms, raw=raw))


def openclaw_fields(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> EventFields:
    """The event fields :func:`adapt_openclaw` builds its event from (not validated yet).

    ``run``'s line fast path restates these rules for the capture's fields
    (:mod:`streams.frames.fast_capture`): change both (``tests/streams/test_fast_capture.py`` compares them).

    Raises:
        RejectedInput: as :func:`adapt_openclaw`.
    """
    kind, action = payload.get("type", "message"), payload.get("action")
    if action is None and isinstance(payload.get("event"), str):
        kind, _, action = payload["event"].partition(":")
    if kind != "message":
        return _lifecycle_fields(payload, kind, action, event_time_ms)
    if action not in _TYPES:
        raise RejectedInput(Reason.WRONG_SHAPE, f"OpenClaw message action must be received, transcribed, preprocessed or sent, got {action!r}")
    ctx = payload.get("context", {})
    if not isinstance(ctx, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, "OpenClaw 'context' must be an object")
    sid = None
    for key in ("channelId", "sessionKey", "sessionId"):
        sid = opt_str(ctx, key) or opt_str(payload, key)
        if sid:
            break
    if not sid:
        raise RejectedInput(Reason.MISSING_FIELD, "OpenClaw event has no channelId, sessionKey or sessionId")
    content = _text(ctx, action)
    mid = opt_str(ctx, "messageId") or ""
    return EventFields(
        event_id=stable_id("openclaw", sid, action, event_time_ms, mid, content),
        source="openclaw",
        event_type=_TYPES[action],
        native_event=f"message:{action}",
        session=f"openclaw-gateway:{sid}",
        event_time_ms=event_time_ms,
        body=content,
        raw=payload if raw is None else raw,
    )


def _lifecycle_fields(payload: dict[str, Any], kind: object, action: object, event_time_ms: int) -> EventFields:
    """The fields of a documented internal event that is no message (``command:new``,
    ``session:compact:after``, ``agent:bootstrap``, ``gateway:startup``, …): no turn text, scope
    ``openclaw-gateway:<sessionKey>`` (``default`` without one), ``raw`` the payload with only the
    scalar values of its ``context`` (a command event's context holds the whole gateway config).

    Raises:
        RejectedInput: ``wrong_shape`` for a type outside :data:`LIFECYCLE_KINDS` or an action that is
            no non-empty string.
    """
    if kind not in LIFECYCLE_KINDS or not isinstance(action, str) or not action:
        raise RejectedInput(Reason.WRONG_SHAPE, f"OpenClaw event type must be one of message, {', '.join(sorted(LIFECYCLE_KINDS))} "
                                                f"with a string action, got {kind!r}:{action!r}")
    ctx = payload.get("context", {})
    if not isinstance(ctx, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, "OpenClaw 'context' must be an object")
    key = opt_str(payload, "sessionKey") or opt_str(ctx, "sessionKey") or DEFAULT_SCOPE
    scalars = {k: v for k, v in ctx.items() if isinstance(v, (str, int, float, bool))}
    return EventFields(
        event_id=stable_id("openclaw", kind, action, key, event_time_ms),
        source="openclaw",
        event_type=kebab(f"{kind}:{action}"),
        native_event=f"{kind}:{action}",
        session=f"openclaw-gateway:{key}",
        event_time_ms=event_time_ms,
        raw={**{k: v for k, v in payload.items() if k != "context"}, "context": scalars},
    )


def _text(ctx: dict[str, Any], action: str) -> str | None:
    """The turn text of a message event's ``context`` (see the module docstring).

    Raises:
        RejectedInput: ``missing_field`` / ``wrong_shape`` for a missing or non-string text field.
    """
    if action == "received" or action == "sent":
        content = opt_str(ctx, "content")
        if content is None:
            raise RejectedInput(Reason.MISSING_FIELD, "OpenClaw event has no context.content")
        return content
    transcript = opt_str(ctx, "transcript")
    if action == "transcribed":
        if transcript is None:
            raise RejectedInput(Reason.MISSING_FIELD, "OpenClaw message:transcribed has no context.transcript")
        return transcript
    if transcript and transcript.strip():
        return transcript
    enriched, body = opt_str(ctx, "bodyForAgent"), opt_str(ctx, "body")
    if enriched and (not body or not body.strip() or is_placeholder(body)):
        return enriched
    return None
