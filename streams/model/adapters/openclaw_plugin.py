"""OpenClaw plugin hook events and KnowHub event lines → HookEvent.

OpenClaw's plugin API calls ``api.on(name, (event, ctx) => …)``; a plugin logs each call as one
JSON line ``{"hook": name, "event": {...}, "ctx": {"agentId", "sessionKey", ...}, "timestamp":
...}``. hivestream's KnowHub plugin logs the hooks the seed uses: ``before_agent_start``,
``before_prompt_build``, ``after_tool_call`` (``event.toolName``, ``event.params``,
``event.result``, ``event.error``) and ``agent_end`` (``event.messages``); every name of
:data:`PLUGIN_HOOKS` (OpenClaw's ``PLUGIN_HOOK_NAMES``, ``src/plugins/hook-types.ts``) is read the
same way. Two are turns: ``message_received`` (``event.content``, a prompt) and ``message_sent``
(``event.content``, a reply; no turn when ``event.success`` is false); the others carry no turn
text and are kept as ``skipped_events`` rows with their details. A KnowHub event line
(``{"type": "experience-submitted" | "experience-reviewed" | "kb-search" | …}``, see
:mod:`streams.experiences.events`) is adapted too, with source ``knowhub``, so it can travel on
``hook-events`` and be replayed with the rest of the log.
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.common import opt_str
from streams.model.deadletter import Reason, RejectedInput
from streams.model.event_build import new_event
from streams.model.events import PROMPT, STOP, HookEvent, kebab, stable_id

PLUGIN_HOOKS = frozenset({
    "before_model_resolve", "agent_turn_prepare", "before_prompt_build", "before_agent_start", "before_agent_reply",
    "model_call_started", "model_call_ended", "llm_input", "llm_output", "before_agent_finalize", "agent_end",
    "before_compaction", "after_compaction", "before_reset", "inbound_claim", "message_received", "message_sending",
    "message_sent", "before_tool_call", "after_tool_call", "tool_result_persist", "before_message_write", "session_start",
    "session_end", "subagent_spawning", "subagent_delivery_target", "subagent_spawned", "subagent_ended", "gateway_start",
    "gateway_stop", "heartbeat_prompt_contribution", "cron_changed", "before_dispatch", "reply_dispatch", "before_install",
    "before_agent_run",
})
"""OpenClaw's plugin hook names (``PLUGIN_HOOK_NAMES`` of ``src/plugins/hook-types.ts``; docs/runtime-events.md)."""
_TURNS = {"message_received": PROMPT, "message_sent": STOP}
KB_EVENT_TYPES = frozenset({"experience-submitted", "experience-extracted", "experience-reviewed", "kb-search", "kb-content", "kb-reminder",
                            "memory-recall", "extraction-requested"})
"""The ``type`` of a KnowHub event line (``extraction-requested``: a finished run the agent API was asked to extract from)."""


def adapt_openclaw_plugin(payload: dict[str, Any], event_time_ms: int) -> HookEvent:
    """Adapt one logged OpenClaw plugin hook call.

    ``message_received`` / ``message_sent`` become ``user-prompt-submit`` / ``stop`` events with
    ``event.content`` as their body; every other hook an event of type ``kebab(hook)`` without one.

    Raises:
        RejectedInput: ``wrong_shape`` when ``event`` or ``ctx`` is not an object or a field has
            the wrong type.
    """
    hook = payload["hook"]
    event, ctx = payload.get("event", {}), payload.get("ctx", {})
    if not isinstance(event, dict) or not isinstance(ctx, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, "OpenClaw plugin hook: 'event' and 'ctx' must be objects")
    session_key = opt_str(ctx, "sessionKey") or opt_str(payload, "sessionKey") or "default"
    agent_id = opt_str(ctx, "agentId")
    call_id = opt_str(event, "toolCallId") or ""
    turn = _TURNS.get(hook)
    return new_event(
        event_id=stable_id("openclaw-plugin", session_key, hook, event_time_ms, call_id, event),
        source="openclaw",
        event_type=turn or kebab(hook),
        native_event=hook,
        session=f"openclaw-gateway:{session_key}",
        parent=agent_id,
        event_time_ms=event_time_ms,
        body=opt_str(event, "content") if turn else None,
        raw=payload,
    )


def adapt_kb_line(payload: dict[str, Any], event_time_ms: int) -> HookEvent:
    """Adapt a KnowHub event line (validated later by the KnowHub step, which redacts it).

    Raises:
        RejectedInput: ``unknown_schema_version`` for a ``schema_version`` other than 1;
            ``missing_field`` when it has no ``event_id``.
    """
    if payload.get("schema_version", 1) != 1:
        raise RejectedInput(Reason.UNKNOWN_SCHEMA_VERSION, f"KnowHub event has schema_version {payload.get('schema_version')!r}; this version reads 1")
    eid = payload.get("event_id")
    if not isinstance(eid, str) or not eid:
        raise RejectedInput(Reason.MISSING_FIELD, "KnowHub event has no 'event_id'")
    session = payload.get("session_key")
    return new_event(
        event_id=stable_id("knowhub", eid),
        source="knowhub",
        event_type=str(payload["type"]),
        native_event=str(payload["type"]),
        session=session if isinstance(session, str) and session else "default",
        event_time_ms=event_time_ms,
        raw=payload,
    )
