"""The answer a runtime's own ``http`` hook gets instead of the server's verdict (pure).

Claude Code reads the 2xx body of an ``http`` hook as hook output (hooks reference, "HTTP hooks":
an empty body or a JSON object, validated like a command hook's stdout; checked with Claude Code
2.1.197 ``--debug hooks``): keys it does not know are logged ("unrecognized keys (ignored)") and
the ones it knows act (``continue: false`` stops Claude, ``decision: "block"`` blocks the prompt,
``hookSpecificOutput.additionalContext`` goes to the model). The verdict
(``accepted``, ``durable``, ...) is for hivestream's own clients (the delivery rule of
:mod:`hivestream.hooks.delivery`) and means nothing there. So a request carrying
:data:`RUNTIME_HOOK_HEADER`, which ``hivestream hooks install`` writes into each ``http`` hook it
installs, is answered on a 2xx with :func:`hook_output`; every other request (the command hook,
``hook flush``, the OpenClaw handler, any other client) keeps the verdict. Non-2xx answers are
unchanged: Claude Code reads only their status (a non-blocking error, ``HTTP 503 from URL``).
"""

from __future__ import annotations

from typing import Any

RUNTIME_HOOK_HEADER = "X-Hivestream-Hook"
"""Request header marking a runtime's own ``http`` hook (any value; the installer writes one)."""

CONTEXT_EVENTS = frozenset({"UserPromptSubmit", "SessionStart", "PreToolUse", "PostToolUse"})
"""Claude Code events whose ``hookSpecificOutput`` takes ``additionalContext`` (hooks reference)."""


def hook_output(event_name: object, additional_context: str | None = None) -> dict[str, Any]:
    """Claude Code hook output for one accepted hook payload.

    Args:
        event_name: the payload's ``hook_event_name`` (any value: only a string is used).
        additional_context: text for the model, or ``None`` (nothing to add).

    Returns:
        ``{}`` (go on, nothing to add: no key Claude Code would warn about or act on), or, with
        ``additional_context``, ``{"hookSpecificOutput": {"hookEventName": event_name,
        "additionalContext": ...}}``; Claude Code refuses a ``hookSpecificOutput`` naming another
        event than the one that fired, hence the name from the payload.

    Raises:
        ValueError: ``additional_context`` for an event not in :data:`CONTEXT_EVENTS`.
    """
    if additional_context is None:
        return {}
    if not isinstance(event_name, str) or event_name not in CONTEXT_EVENTS:
        raise ValueError(f"Claude Code takes additionalContext only on {', '.join(sorted(CONTEXT_EVENTS))}, not on {event_name!r}")
    return {"hookSpecificOutput": {"hookEventName": event_name, "additionalContext": additional_context}}
