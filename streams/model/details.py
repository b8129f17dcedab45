"""The ids and metadata of a hook event that memory users query: :data:`DETAIL_FIELDS`, read from its payload (pure).

A frame keeps the seed's prefix tokens (session, source, event, project); what else a runtime sends
about a turn (the OpenClaw conversation and sender, Claude Code's prompt id, the subagent's type and
transcript, Codex's turn id and model, why a session ended) goes into the ``event_details`` table,
one row per event id, beside ``frame_captures`` and ``skipped_events``. The fields are taken from the
event's native payload (``HookEvent.raw``), so a serialised event of an older log gets them too when
it is run again; an event whose payload was dropped (a record over the size limit) has none.

Where each field comes from (the first that is set; strings only, a ``threadId`` number as its
decimal text, ``isGroup`` a boolean):

* Claude Code / Codex hooks (``hook_event_name``): ``prompt_id``, ``turn_id``, ``agent_id``,
  ``agent_type``, ``model``, ``tool_use_id``, ``agent_transcript_path`` (``SubagentStop``),
  ``trigger`` (``PreCompact`` / ``PostCompact``), ``end_reason`` = ``reason`` (``SessionEnd`` only).
* Codex ``notify`` (``agent-turn-complete``): ``turn_id`` = ``turn-id``, ``input_messages`` = the
  turn's prompts (``input-messages``, a JSON array of strings).
* OpenClaw internal hooks (``message:*``, ``command:*``, …): ``session_key`` = ``sessionKey``, from ``context``:
  ``conversation_id`` = ``conversationId``, ``channel`` = ``channelId`` / ``commandSource``, ``sender`` = ``from`` /
  ``senderId`` / ``metadata.senderId``, ``recipient`` = ``to``, ``thread_id`` = ``threadId`` /
  ``metadata.threadId``, ``is_group`` = ``isGroup``, ``message_id`` = ``messageId``.
* OpenClaw plugin hooks (``{"hook", "event", "ctx"}``): the same names from ``ctx`` then ``event``
  (``sessionKey``, ``conversationId``, ``channelId``, ``senderId`` / ``from``, ``to``, ``threadId``,
  ``isGroup``, ``messageId``), ``agent_id`` = ``ctx.agentId``, ``turn_id`` = ``runId``, ``model`` =
  ``event.model`` / ``ctx.modelId``, ``end_reason`` = ``event.reason``.

Each string is cut at :data:`MAX_DETAIL_CHARS` characters, ``input_messages`` at
:data:`MAX_INPUT_MESSAGES` messages of at most that many characters, so details never make a
record too large for Kafka.
"""

from __future__ import annotations

from typing import Any

import orjson

from streams.model.jsstring import to_js_utf16

DETAIL_FIELDS = ("session_key", "conversation_id", "channel", "sender", "recipient", "thread_id", "is_group", "message_id",
                 "prompt_id", "turn_id", "agent_id", "agent_type", "model", "tool_use_id", "agent_transcript_path", "trigger",
                 "end_reason", "input_messages")
"""The detail fields, in the column order of ``event_details`` (``is_group`` a boolean, the others text)."""

MAX_DETAIL_CHARS = 4_096
MAX_INPUT_MESSAGES = 16

_BACKEND = (("prompt_id", "prompt_id"), ("turn_id", "turn_id"), ("agent_id", "agent_id"), ("agent_type", "agent_type"),
            ("model", "model"), ("tool_use_id", "tool_use_id"), ("agent_transcript_path", "agent_transcript_path"),
            ("trigger", "trigger"))
_BACKEND_KEYS = frozenset(key for _name, key in _BACKEND)
_MESSAGE = (("session_key", "sessionKey"), ("conversation_id", "conversationId"), ("channel", "channelId"), ("channel", "commandSource"),
            ("sender", "from"), ("sender", "senderId"), ("recipient", "to"), ("thread_id", "threadId"), ("message_id", "messageId"))
_CONTEXT = {key: (name, i > 0 and _MESSAGE[i - 1][0] == name) for i, (name, key) in enumerate(_MESSAGE)}
"""An internal event's ``context`` key → (its field, True when it only fills in for the key before it)."""
_PLUGIN = (*_MESSAGE, ("agent_id", "agentId"), ("turn_id", "runId"), ("model", "model"), ("model", "modelId"), ("end_reason", "reason"))
_METADATA = (("sender", "senderId"), ("thread_id", "threadId"))
_EMPTY: dict[str, Any] = {}
_dumps = orjson.dumps


def _fill(out: dict[str, Any], source: dict[str, Any], pairs: tuple[tuple[str, str], ...]) -> None:
    """Set each field of ``pairs`` (field, payload key) not set yet from ``source``: a non-empty string
    (cut at :data:`MAX_DETAIL_CHARS`) or an integer's decimal text (a ``bool`` is neither)."""
    for name, key in pairs:
        v = source.get(key)
        if v is not None and name not in out:
            if type(v) is str:
                if v:
                    out[name] = v[:MAX_DETAIL_CHARS]
            elif type(v) is int:
                out[name] = str(v)


def _context(out: dict[str, Any], ctx: dict[str, Any]) -> None:
    """:func:`_fill` of ``ctx`` with :data:`_MESSAGE` and ``isGroup``, in one pass over its keys (an
    OpenClaw message's context holds a few: half the time of a lookup per field)."""
    for k, v in ctx.items():
        spec = _CONTEXT.get(k)
        if spec is None:
            if k == "isGroup" and type(v) is bool:
                out["is_group"] = v
            continue
        name, fallback = spec
        if fallback and name in out:
            continue
        if type(v) is str:
            if v:
                out[name] = v[:MAX_DETAIL_CHARS]
        elif type(v) is int:
            out[name] = str(v)


def _group(out: dict[str, Any], *sources: dict[str, Any]) -> None:
    for src in sources:
        g = src.get("isGroup")
        if type(g) is bool:
            out["is_group"] = g
            return


def payload_details(native_event: str | None, source: str, raw: dict[str, Any] | None) -> dict[str, Any] | None:
    """The details of an event (see the module docstring) from its native payload.

    Args:
        native_event: the event's runtime name (``Stop``, ``message:received``, ``agent-turn-complete``,
            a plugin hook name, …).
        source: the event's source (``claude-code``, ``codex``, ``openclaw``, …).
        raw: the native payload (``HookEvent.raw``), or None.

    Returns:
        Field name (of :data:`DETAIL_FIELDS`) → value for the fields that are set, or None when none is.
    """
    if raw is None or native_event is None:
        return None
    out: dict[str, Any] = {}
    if source == "openclaw":
        if "hook" not in raw:  # an internal event (context), not a plugin hook call (event, ctx)
            ctx = raw.get("context")
            ctx = ctx if type(ctx) is dict else _EMPTY
            _context(out, ctx)
            if "session_key" not in out:
                key = raw.get("sessionKey")
                if type(key) is str and key:
                    out["session_key"] = key[:MAX_DETAIL_CHARS]
        else:
            ctx, event = raw.get("ctx"), raw.get("event")
            ctx = ctx if type(ctx) is dict else _EMPTY
            event = event if type(event) is dict else _EMPTY
            _fill(out, ctx, _PLUGIN)
            _fill(out, event, _PLUGIN)
            _group(out, ctx, event)
        meta = ctx.get("metadata")
        if type(meta) is dict:
            _fill(out, meta, _METADATA)
            if "is_group" not in out:
                _group(out, meta)
    elif source == "claude-code" or source == "codex":
        if native_event == "agent-turn-complete":
            _fill(out, raw, (("turn_id", "turn-id"),))
            msgs = raw.get("input-messages")
            if type(msgs) is list:
                texts = [m[:MAX_DETAIL_CHARS] for m in msgs[:MAX_INPUT_MESSAGES] if type(m) is str]
                if texts:
                    out["input_messages"] = orjson.dumps(texts).decode()
        else:
            if not raw.keys().isdisjoint(_BACKEND_KEYS):  # most Claude Code payloads have none of them
                _fill(out, raw, _BACKEND)
            if native_event == "SessionEnd":
                _fill(out, raw, (("end_reason", "reason"),))
    return out or None


def details_json(native_event: str | None, source: str, raw: dict[str, Any] | None) -> str | None:
    """:func:`payload_details` as the JSON text a capture or a skipped event carries, or None (a
    lone surrogate, which no parsed payload holds, is written as U+FFFD)."""
    d = payload_details(native_event, source, raw)
    if d is None:
        return None
    try:
        return _dumps(d).decode()
    except TypeError:
        return orjson.dumps({k: to_js_utf16(v) if type(v) is str else v for k, v in d.items()}).decode()
