"""Adapters from native hook payloads (JSON objects) to :class:`~streams.model.events.HookEvent`.

:func:`adapt` recognises the payload's runtime by its shape; each runtime has its own module.
All adapters are pure: the event time comes from the payload or from the caller (the ingest
point's clock), never from the wall clock here.
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters.claude_code import adapt_claude_code
from streams.model.adapters.codex import adapt_codex_hook, adapt_codex_notify
from streams.model.adapters.openclaw import LIFECYCLE_KINDS, adapt_openclaw
from streams.model.adapters.openclaw_plugin import KB_EVENT_TYPES, PLUGIN_HOOKS, adapt_kb_line, adapt_openclaw_plugin
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent, from_prefixed
from streams.model.timeparse import parse_time_ms

_OPENCLAW_EVENT_KINDS = LIFECYCLE_KINDS | {"message"}
_TIME_FIELDS = ("event_time_ms", "timestamp", "ts", "time", "event_time", "received_at")


def payload_time_ms(payload: dict[str, Any], default_ms: int | None) -> int:
    """The event time of a native payload: its first time field, else ``default_ms``.

    Raises:
        RejectedInput: ``bad_timestamp`` when a time field is unparseable, or when there is
            none and no ``default_ms`` is given.
    """
    for f in _TIME_FIELDS:
        if f in payload and payload[f] is not None:
            return parse_time_ms(payload[f])
    if default_ms is None:
        raise RejectedInput(Reason.BAD_TIMESTAMP, "payload has no event time field " + "/".join(_TIME_FIELDS))
    return default_ms


def detect_runtime(payload: dict[str, Any]) -> str:
    """Name the runtime a payload comes from.

    Returns one of ``openclaw``, ``openclaw-plugin``, ``knowhub``, ``codex-notify``, ``codex``,
    ``claude-code``, ``prefixed``. ``run``'s line fast path (:mod:`streams.frames.fast_capture`)
    restates the part of this order that leads to ``openclaw``, ``codex`` and ``claude-code``.

    Raises:
        RejectedInput: ``unknown_payload`` when the shape matches no adapter.
    """
    hint = payload.get("hivestream_source")
    if isinstance(hint, str) and hint in {"openclaw", "codex", "codex-notify", "claude-code", "prefixed"}:
        return hint
    kind, action, event = payload.get("type"), payload.get("action"), payload.get("event")
    if isinstance(payload.get("hook"), str) and payload["hook"] in PLUGIN_HOOKS:
        return "openclaw-plugin"
    if isinstance(kind, str) and kind in KB_EVENT_TYPES:
        return "knowhub"
    if (kind == "message" or kind in LIFECYCLE_KINDS) and isinstance(action, str) and action:
        return "openclaw"
    if isinstance(event, str) and event.partition(":")[0] in _OPENCLAW_EVENT_KINDS and ":" in event:
        return "openclaw"
    if payload.get("type") == "agent-turn-complete":
        return "codex-notify"
    name = payload.get("hook_event_name", payload.get("event"))
    if isinstance(name, str) and name:
        tp = payload.get("transcript_path")
        if "turn_id" in payload or (isinstance(tp, str) and "/.codex/" in tp):
            return "codex"
        return "claude-code"
    if isinstance(payload.get("content"), str):
        return "prefixed"
    raise RejectedInput(Reason.UNKNOWN_PAYLOAD, "payload matches no known hook format (keys: " + ", ".join(sorted(payload)[:12]) + ")")


RUNTIMES = ("openclaw", "openclaw-plugin", "knowhub", "codex-notify", "codex", "claude-code", "prefixed")
"""The runtime names :func:`detect_runtime` returns and :func:`adapt` accepts as ``runtime``."""


def adapt(payload: dict[str, Any], *, received_at_ms: int | None = None, runtime: str | None = None) -> HookEvent:
    """Adapt one native hook payload to a HookEvent.

    Args:
        payload: the parsed JSON object a hook received (Claude Code or Codex stdin, Codex
            legacy notify, an OpenClaw internal hook event, or ``{"content": "[hm …] …"}``).
        received_at_ms: the ingest point's clock reading, epoch ms, used when the payload
            carries no time of its own.
        runtime: one of :data:`RUNTIMES` to skip detection (the ingest server's
            ``/v1/hooks/{runtime}``); ``None`` detects it from the shape.

    Raises:
        RejectedInput: unknown shape, missing fields or a bad event time; ``unknown_payload``
            for a runtime name outside :data:`RUNTIMES`.
    """
    if runtime is None:
        runtime = detect_runtime(payload)
    elif runtime not in RUNTIMES:
        raise RejectedInput(Reason.UNKNOWN_PAYLOAD, f"unknown runtime {runtime!r}")
    elif runtime == "openclaw-plugin" and not isinstance(payload.get("hook"), str):
        raise RejectedInput(Reason.MISSING_FIELD, "OpenClaw plugin payload needs a string 'hook'")
    elif runtime == "knowhub" and not isinstance(payload.get("type"), str):
        raise RejectedInput(Reason.MISSING_FIELD, "KnowHub event needs a string 'type'")
    t = payload_time_ms(payload, received_at_ms)
    if runtime == "openclaw":
        return adapt_openclaw(payload, t)
    if runtime == "openclaw-plugin":
        return adapt_openclaw_plugin(payload, t)
    if runtime == "knowhub":
        return adapt_kb_line(payload, t)
    if runtime == "codex-notify":
        return adapt_codex_notify(payload, t)
    if runtime == "codex":
        return adapt_codex_hook(payload, t)
    if runtime == "claude-code":
        return adapt_claude_code(payload, t)
    content = payload.get("content")
    if not isinstance(content, str):
        raise RejectedInput(Reason.MISSING_FIELD, "prefixed payload needs a string 'content'")
    eid = payload.get("event_id")
    return from_prefixed(content, event_time_ms=t, event_id=eid if isinstance(eid, str) and eid else None)
