"""Claude Code hook stdin JSON → HookEvent.

Claude Code sends every hook command a JSON object on stdin with ``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name`` and the event's own fields: ``prompt``
(UserPromptSubmit), ``last_assistant_message`` (Stop, SubagentStop), ``tool_name`` /
``tool_input`` / ``tool_response`` / ``tool_use_id`` (Pre/PostToolUse), ``agent_id`` /
``agent_type`` (SubagentStart/Stop), ``trigger`` (PreCompact), ``compact_summary``
(PostCompact), ``source`` (SessionStart), ``reason`` (SessionEnd), ``message`` (Notification).
The flattened log format that logs ``event`` instead of ``hook_event_name`` and ``ts`` for the
time is accepted too.

Turns (docs/runtime-events.md has every documented event): ``UserPromptSubmit`` (the prompt),
``Stop`` / ``SubagentStop`` (the last assistant message), ``PostCompact`` (the compaction summary,
event type ``compact-summary``) and ``PreToolUse`` / ``PostToolUse`` of the ``Agent`` (formerly
``Task``) tool (the subagent's task, ``tool_input.prompt``, event type ``subagent-task``).
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.common import opt_str, req_str
from streams.model.event_build import EventFields, new_event
from streams.model.events import COMPACT_SUMMARY, PROMPT, STOP, SUBAGENT_STOP, SUBAGENT_TASK, HookEvent, kebab, stable_id
from streams.model.workspace import workspace_name

_BODY_FIELD = {
    "UserPromptSubmit": "prompt",
    "Stop": "last_assistant_message",
    "SubagentStop": "last_assistant_message",
    "StopFailure": "last_assistant_message",
    "PostCompact": "compact_summary",
}
_TYPE = {"UserPromptSubmit": PROMPT, "Stop": STOP, "SubagentStop": SUBAGENT_STOP, "PostCompact": COMPACT_SUMMARY}
SUBAGENT_TOOLS = frozenset({"Agent", "Task"})
"""The tools that start a subagent (Claude Code named it ``Task`` before ``Agent``): their ``tool_input.prompt`` is its task."""
_TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
_ID_WITHOUT_BODY = frozenset({COMPACT_SUMMARY, SUBAGENT_TASK})


def adapt_backend_hook(payload: dict[str, Any], event_time_ms: int, source: str, *, raw: dict[str, Any] | None = None) -> HookEvent:
    """Adapt a Claude-Code-style hook payload (Codex hooks share the layout) for ``source``.

    Session scope is ``session_id``; subagent events (with ``agent_id``) get the scope
    ``<session_id>:<agent_id>`` and ``parent`` = ``session_id``. The event keeps ``raw`` as its
    ``raw`` payload, ``payload`` itself when ``raw`` is None (the importers pass the payload
    without its text).

    Raises:
        RejectedInput: ``missing_field`` / ``wrong_shape`` for a missing event name or
            session id, or a body field that is not a string.
    """
    return new_event(**backend_hook_fields(payload, event_time_ms, source, raw=raw))


def backend_hook_fields(payload: dict[str, Any], event_time_ms: int, source: str, *, raw: dict[str, Any] | None = None) -> EventFields:
    """The event fields :func:`adapt_backend_hook` builds its event from (not validated yet).

    ``run``'s line fast path restates these rules for the capture's fields
    (:mod:`streams.frames.fast_capture`): change both (``tests/streams/test_fast_capture.py`` compares them).

    Raises:
        RejectedInput: as :func:`adapt_backend_hook`.
    """
    name = payload.get("hook_event_name") or payload.get("event")
    if not isinstance(name, str) or not name:
        name = req_str(payload, "hook_event_name")
    session_id = req_str(payload, "session_id")
    agent_id = opt_str(payload, "agent_id")
    body_field = _BODY_FIELD.get(name)
    body = opt_str(payload, body_field) if body_field else None
    event_type = _TYPE.get(name) or kebab(name)
    if name == "UserPromptSubmit" and body is None:
        body = req_str(payload, "prompt")
    elif name in _TOOL_EVENTS and payload.get("tool_name") in SUBAGENT_TOOLS:
        task = payload.get("tool_input")
        if isinstance(task, dict) and isinstance(task.get("prompt"), str):
            event_type, body = SUBAGENT_TASK, task["prompt"]
    session, parent = (session_id, None)
    if agent_id:
        session, parent = (f"{session_id}:{agent_id}", session_id)
    tp = payload.get("transcript_path")
    project = workspace_name(opt_str(payload, "cwd"), tp if isinstance(tp, str) else None)
    native_id = payload.get("tool_use_id") or payload.get("turn_id") or ""
    id_body = None if event_type in _ID_WITHOUT_BODY else body  # their ids as before they had a body
    return EventFields(
        event_id=stable_id(source, session_id, agent_id, name, event_time_ms, native_id, id_body),
        source=source,
        event_type=event_type,
        native_event=name,
        session=session,
        parent=parent,
        project=project,
        event_time_ms=event_time_ms,
        body=body,
        raw=payload if raw is None else raw,
    )


def adapt_claude_code(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> HookEvent:
    """Adapt a Claude Code hook payload; see :func:`adapt_backend_hook`.

    Raises:
        RejectedInput: as :func:`adapt_backend_hook`.
    """
    return adapt_backend_hook(payload, event_time_ms, "claude-code", raw=raw)
