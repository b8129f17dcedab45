"""Add the captures an OpenClaw gateway fronting a backend would have made of the same turns.

When a gateway (OpenClaw) relays a chat to an agent backend (Claude Code, Codex), the same turn is
captured twice: the gateway's ``message:received`` / ``message:sent`` hooks and the backend's
``UserPromptSubmit`` / ``Stop`` hooks. :func:`with_gateway_capture` adds the gateway side to an
imported backend stream, so the double capture the dedup stage must collapse can be replayed from
real sessions.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from streams.importers.claude_transcript import Item
from streams.model.adapters.openclaw import adapt_openclaw
from streams.model.deadletter import RejectedInput
from streams.model.events import PROMPT, STOP, HookEvent

GATEWAY_SOURCE = "openclaw"
_ACTIONS = {PROMPT: "received", STOP: "sent"}


def with_gateway_capture(
    items: Iterable[Item],
    *,
    received_lead_ms: int = 250,
    sent_lag_ms: int = 350,
) -> Iterator[Item]:
    """Pass ``items`` through, adding the gateway's capture of each main-session turn.

    Args:
        items: ``(offset, line, event or RejectedInput)`` tuples from an importer.
        received_lead_ms: how long (ms) before the backend's prompt the gateway received it.
        sent_lag_ms: how long (ms) after the backend's stop the gateway sent the reply.

    Yields:
        Every input item unchanged, plus, for a backend ``user-prompt-submit`` event of a main
        session (no ``parent``), an OpenClaw ``message:received`` event just before it, and for
        a main-session ``stop`` event with a body, a ``message:sent`` event just after it. Each
        added event shares the backend event's offset and line, has the same body, session
        ``openclaw-gateway:gw-<first 8 chars of the backend session>`` and time shifted by the
        given amount (epoch ms, not below 0). Subagent events and events that are already from
        the gateway get none. An added event that fails to build is yielded as its
        :class:`RejectedInput`.
    """
    for offset, line, item in items:
        action = _action(item)
        if action is None or not isinstance(item, HookEvent):
            yield offset, line, item
            continue
        shift = -received_lead_ms if action == "received" else sent_lag_ms
        mirror = _gateway_item(item, action, item.event_time_ms + shift)
        if action == "received":
            yield offset, line, mirror
        yield offset, line, item
        if action == "sent":
            yield offset, line, mirror


def gateway_channel(backend_session: str) -> str:
    """The gateway channel id for a backend session: ``gw-`` + its first 8 characters."""
    return "gw-" + backend_session[:8]


def gateway_event(backend: HookEvent, action: str, event_time_ms: int) -> HookEvent:
    """The OpenClaw ``message:<action>`` event mirroring ``backend`` (``received`` or ``sent``).

    Built by :func:`streams.model.adapters.openclaw.adapt_openclaw` from an OpenClaw-shaped payload
    whose ``context.messageId`` is derived from the backend event id (so ids are distinct and
    stable); ``raw`` is that payload without ``context.content``.

    Raises:
        RejectedInput: from the adapter, e.g. when ``backend`` has no body.
    """
    context = {
        "channelId": gateway_channel(backend.session),
        "messageId": f"gw-{action}-{backend.event_id}",
    }
    payload = {"type": "message", "action": action, "context": {**context, "content": backend.body}}
    return adapt_openclaw(payload, max(0, event_time_ms), raw={"type": "message", "action": action, "context": context})


def _action(item: HookEvent | RejectedInput) -> str | None:
    """``received`` / ``sent`` when ``item`` is a main-session backend prompt / stop with a body."""
    if not isinstance(item, HookEvent) or item.source == GATEWAY_SOURCE or item.parent is not None:
        return None
    if item.body is None:
        return None
    return _ACTIONS.get(item.event_type)


def _gateway_item(backend: HookEvent, action: str, event_time_ms: int) -> HookEvent | RejectedInput:
    try:
        return gateway_event(backend, action, event_time_ms)
    except RejectedInput as err:
        return err
