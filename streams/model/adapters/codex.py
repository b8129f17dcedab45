"""Codex hook JSON and Codex's legacy ``notify`` JSON → HookEvent.

Hook payloads follow ``codex-rs/hooks/schema/generated/*.command.input.schema.json`` (the
copies in ``shared/corpus/codex-hook-schemas/``): the Claude Code layout plus ``turn_id`` and
``model``. The legacy notify program receives
``{"type": "agent-turn-complete", "thread-id", "turn-id", "cwd", "input-messages",
"last-assistant-message"}`` as its last argument; it becomes a ``stop`` event.
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.claude_code import adapt_backend_hook
from streams.model.adapters.common import opt_str, req_str
from streams.model.event_build import new_event
from streams.model.events import STOP, HookEvent, stable_id
from streams.model.workspace import workspace_name


def adapt_codex_hook(payload: dict[str, Any], event_time_ms: int, *, raw: dict[str, Any] | None = None) -> HookEvent:
    """Adapt a Codex hook stdin payload (UserPromptSubmit, Stop, PreToolUse, …); ``raw`` as in
    :func:`~streams.model.adapters.claude_code.adapt_backend_hook`.

    Raises:
        RejectedInput: missing ``hook_event_name`` / ``session_id`` or a non-string body.
    """
    return adapt_backend_hook(payload, event_time_ms, "codex", raw=raw)


def adapt_codex_notify(payload: dict[str, Any], event_time_ms: int) -> HookEvent:
    """Adapt a Codex legacy notify payload (``agent-turn-complete``) to a ``stop`` event.

    Raises:
        RejectedInput: ``missing_field`` without ``thread-id``; ``wrong_shape`` for a
            non-string ``last-assistant-message``.
    """
    thread = req_str(payload, "thread-id")
    turn = opt_str(payload, "turn-id")
    body = opt_str(payload, "last-assistant-message")
    cwd = opt_str(payload, "cwd")
    return new_event(
        event_id=stable_id("codex-notify", thread, turn, event_time_ms, body),
        source="codex",
        event_type=STOP,
        native_event="agent-turn-complete",
        session=thread,
        project=workspace_name(cwd),
        event_time_ms=event_time_ms,
        body=body,
        raw=payload,
    )
