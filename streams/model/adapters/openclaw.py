"""OpenClaw internal hook events ``message:received`` / ``message:sent`` → HookEvent.

OpenClaw's gateway fires internal hooks as ``{"type": "message", "action": "received"|"sent",
"sessionKey", "timestamp", "context": {"content", "channelId", "from"|"to", "messageId", …}}``;
the flattened form ``{"event": "message:received", …}`` is accepted too. The text is
``context.content``; the session is ``channelId``, then ``sessionKey``, then ``sessionId``
(context first, then the top level); the scope is ``openclaw-gateway:<id>`` as hive-mind's
OpenClaw hook stamps it (seed OQ-6 §3).
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.common import opt_str
from streams.model.deadletter import Reason, RejectedInput
from streams.model.event_build import EventFields, new_event
from streams.model.events import PROMPT, STOP, HookEvent, stable_id

_TYPES = {"received": PROMPT, "sent": STOP}


def adapt_openclaw(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> HookEvent:
    """Adapt an OpenClaw ``message:received`` / ``message:sent`` event; the event keeps ``raw``
    as its ``raw`` payload (``payload`` itself when None).

    Raises:
        RejectedInput: ``wrong_shape`` when ``context`` is not an object or the action is not
            received/sent; ``missing_field`` when no session id or no ``context.content``.
    """
    return new_event(**openclaw_fields(payload, event_time_ms, raw=raw))


def openclaw_fields(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> EventFields:
    """The event fields :func:`adapt_openclaw` builds its event from (not validated yet).

    ``run``'s line fast path restates these rules for the capture's fields
    (:mod:`streams.frames.fast_capture`): change both (``tests/test_fast_capture.py`` compares them).

    Raises:
        RejectedInput: as :func:`adapt_openclaw`.
    """
    action = payload.get("action")
    if action is None and isinstance(payload.get("event"), str):
        action = payload["event"].partition(":")[2]
    if action not in _TYPES:
        raise RejectedInput(Reason.WRONG_SHAPE, f"OpenClaw message action must be received or sent, got {action!r}")
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
    content = opt_str(ctx, "content")
    if content is None:
        raise RejectedInput(Reason.MISSING_FIELD, "OpenClaw event has no context.content")
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
