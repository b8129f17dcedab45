"""``run``'s fast path for a hook-event line: native payload bytes → the fields of its :class:`~streams.frames.capture.Capture`.

The usual lines of a hook-event log are Claude Code / Codex hook payloads (``UserPromptSubmit``,
``Stop``, ``SubagentStop``) and OpenClaw ``message:received`` / ``message:sent`` events carrying turn
text. For those, :func:`line_capture` computes the capture that
:func:`streams.model.decode.decode_hook_record` followed by :func:`streams.frames.capture.to_capture`
would give, in one pass over the parsed payload: it reads only the fields the capture keeps, in
the adapters' order and with their rules (:func:`~streams.model.adapters.detect_runtime`,
:func:`~streams.model.adapters.payload_time_ms`,
:func:`~streams.model.adapters.openclaw.openclaw_fields`,
:func:`~streams.model.adapters.claude_code.backend_hook_fields`, the event id of
:func:`~streams.model.events.stable_id`), and it builds no event dict, no
:class:`~streams.model.events.HookEvent` and no :class:`~streams.frames.capture.Capture` (the import
processes send the runner columns; :func:`hivestream.embedded.blocks.import_block`). Each field it
keeps is one the fast event construction (:func:`streams.model.event_build.checked_fields`) would
take unchanged: exact ``str`` values from orjson, an event time :func:`payload_time_ms` accepted,
prefix tokens :func:`~streams.model.event_build.tokens_safe` passes. ``produce``'s twin,
:func:`streams.produce.fast_records.line_record`, stops at the record and reads the whole event
dict (:func:`streams.model.plain_lines.plain_fields`), as the record carries every field.

Whatever is not plainly such a line gives ``None`` and the caller takes the general path, which
also makes every dead letter: a serialised event, a KnowHub or plugin line, a payload with a
runtime hint, an ``event`` name or a ``type`` beside a hook name, a line orjson would read
differently, any field of another type than the usual one or that the general path rejects, a
session found anywhere but ``context.channelId``, prefix tokens that need rewriting, a tool event
(a possible memory tool call), an event without turn text, an empty body, a body over
:data:`streams.model.plain_lines.PLAIN_BODY_MAX` or the configured limit.
``tests/streams/test_fast_capture.py`` compares both paths outcome for outcome, on odd payloads of every
shape covered and on the generated backlog.
"""

from __future__ import annotations

import hashlib
from typing import Any

from streams.model.adapters import payload_time_ms
from streams.model.adapters.claude_code import _BODY_FIELD
from streams.model.adapters.claude_code import _TYPE as _BACKEND_TYPES
from streams.model.adapters.openclaw import _TYPES as _OPENCLAW_TYPES
from streams.model.body_hash import KeyStrategy, dedup_key
from streams.model.deadletter import RejectedInput
from streams.model.decode import _SERIALISED, _orjson_object
from streams.model.details import details_json
from streams.model.event_build import tokens_safe
from streams.model.events import HookEvent, _event_prefix, stable_id
from streams.model.injected import has_injected
from streams.model.plain_lines import PLAIN_BODY_MAX, trimmed_body
from streams.model.prefix import DEFAULT_SCOPE
from streams.model.workspace import workspace_name

CaptureFields = tuple[str, str, str, str, str, str, str, str | None, str | None, str, int, int, int, str | None]
"""The values of a :class:`~streams.frames.capture.Capture` in its field order (``Capture._make`` of them is the capture)."""

_NORMAL = HookEvent.model_fields["importance"].default
"""The importance an adapted native event gets (:class:`~streams.model.events.HookEvent`'s default)."""


def line_capture(line: bytes, strategy: KeyStrategy, max_body_bytes: int, partition: int, offset: int) -> CaptureFields | None:
    """The capture fields of one hook-event line, or None for the general path.

    Args:
        line: one line of a hook-event JSONL file (no line end).
        strategy, max_body_bytes: the dedup key strategy and the largest stripped body (UTF-8 bytes),
            as :func:`streams.frames.capture.to_capture` takes them (the memory tool rules do not
            apply: no tool event is covered).
        partition, offset: the capture's position (the runner's file id, the line's offset).

    Returns:
        Exactly ``tuple(to_capture(decode_hook_record(line), strategy=…, max_body_bytes=…,
        partition=partition, offset=offset))`` when that is a capture with no memory tool call, or None.
        Never raises: what the general path would reject gives None.

    The adapters' rules it restates (runtime, session, project, id parts) are named in
    :func:`_openclaw` and :func:`_backend`; the adapters point back here, and the tests fail when
    the two drift apart. Private names it reads: the adapters' event-type and body-field tables,
    orjson's safe parse and the serialised-event prefix of :mod:`streams.model.decode`, the
    memoised prefix of :mod:`streams.model.events`.
    """
    if line.startswith(_SERIALISED):
        return None
    obj = _orjson_object(line)
    if obj is None or "schema_version" in obj or "hivestream_source" in obj or "hook" in obj:
        return None  # validated, hinted or plugin payloads: the general path
    try:
        t = payload_time_ms(obj, None)
        kind = obj.get("type")
        if kind == "message" and "event" not in obj:
            ev = _openclaw(obj, t)
        elif kind is None and "event" not in obj:
            ev = _backend(obj, t)
        else:
            return None
    except (RejectedInput, TypeError, ValueError):
        return None  # the general path rejects it with its own reason and text (an id part nested too deeply too)
    if ev is None:
        return None
    event_id, source, session, event_type, parent, project, body, native = ev
    if not tokens_safe(source, session, parent, project, event_type):
        return None  # the general path rewrites the tokens
    if has_injected(body):
        return None  # the general path takes hivestream's own blocks out first (streams.frames.capture.without_injected)
    stripped, encoded = trimmed_body(body)
    if not stripped or len(encoded) > PLAIN_BODY_MAX or len(encoded) > max_body_bytes:
        return None  # the general path rejects it (empty, too large) or measures its JSON
    try:
        content = _event_prefix(source, session or DEFAULT_SCOPE, parent, event_type, project) + body
    except ValueError:
        return None
    h = hashlib.sha256(encoded).hexdigest()
    return (event_id, dedup_key(h, event_type, strategy), h, content, source, session, event_type, parent, project,
            _NORMAL, t, partition, offset, details_json(native, source, obj))


_FAST_NAMES = frozenset({"UserPromptSubmit", "Stop", "SubagentStop"})
"""The backend hook events this path covers (a compaction summary or a subagent task takes the general path)."""

_Event = tuple[str, str, str, str, str | None, str | None, str, str]
"""``(event_id, source, session, event_type, parent, project, body, native event)`` of a plain capture event."""


def _openclaw(obj: dict[str, Any], t: int) -> _Event | None:
    """:func:`~streams.model.adapters.openclaw.openclaw_fields`' capture fields of an OpenClaw
    ``message`` event whose session is a non-empty ``context.channelId`` string and whose
    ``context.content`` is a string, else None (the general path).

    Raises:
        ValueError: from :func:`~streams.model.events.stable_id` (not for parsed JSON).
    """
    action = obj.get("action")
    if action != "received" and action != "sent":
        return None
    ctx = obj.get("context")
    if type(ctx) is not dict:
        return None
    sid, content, mid = ctx.get("channelId"), ctx.get("content"), ctx.get("messageId")
    if type(sid) is not str or not sid or type(content) is not str or not (mid is None or type(mid) is str):
        return None
    if ctx.get("success") is False or (content and (content[0] == "<" or content[0].isspace()) and "<media:" in content):
        return None  # a failed send or a media placeholder is no turn (a placeholder starts the stripped body): the general path says why
    return (stable_id("openclaw", sid, action, t, mid or "", content), "openclaw", "openclaw-gateway:" + sid,
            _OPENCLAW_TYPES[action], None, None, content, "message:" + action)


def _backend(obj: dict[str, Any], t: int) -> _Event | None:
    """:func:`~streams.model.adapters.claude_code.backend_hook_fields`' capture fields of a Claude
    Code / Codex ``UserPromptSubmit``, ``Stop`` or ``SubagentStop`` payload with string text, a
    non-empty string ``session_id`` and a string or null ``agent_id`` / ``cwd``, else None. The
    runtime is :func:`~streams.model.adapters.detect_runtime`'s (``codex`` for a ``turn_id`` or a
    Codex transcript path).

    Raises:
        ValueError: from :func:`~streams.model.events.stable_id` (not for parsed JSON).
    """
    name = obj.get("hook_event_name")
    if type(name) is not str or name not in _FAST_NAMES:
        return None
    sid, agent, body, cwd = obj.get("session_id"), obj.get("agent_id"), obj.get(_BODY_FIELD[name]), obj.get("cwd")
    if (type(sid) is not str or not sid or type(body) is not str or not (agent is None or type(agent) is str)
            or not (cwd is None or type(cwd) is str)):
        return None
    tp = obj.get("transcript_path")
    source = "codex" if "turn_id" in obj or (type(tp) is str and "/.codex/" in tp) else "claude-code"
    native_id = obj.get("tool_use_id") or obj.get("turn_id") or ""
    session, parent = (f"{sid}:{agent}", sid) if agent else (sid, None)
    project = workspace_name(cwd, tp if type(tp) is str else None)
    return stable_id(source, sid, agent, name, t, native_id, body), source, session, _BACKEND_TYPES[name], parent, project, body, name
