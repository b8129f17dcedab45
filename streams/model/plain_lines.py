"""The fields of a plain native hook line, for the line fast paths of ``produce`` and ``run``.

The usual lines of a hook-event log are Claude Code / Codex hook payloads and OpenClaw events.
:func:`plain_fields` gives the ``__dict__`` a :class:`~streams.model.events.HookEvent` of such a line
would get, from the adapters' own field functions
(:func:`~streams.model.adapters.openclaw.openclaw_fields`,
:func:`~streams.model.adapters.claude_code.backend_hook_fields`) and the fields
:func:`streams.model.event_build.checked_fields` accepts, without building the event; anything
else gives None (the caller takes the general path: :func:`streams.model.decode.decode_hook_record`).
Used by :func:`streams.produce.fast_records.line_record` (the record carries every field);
``run``'s :func:`streams.frames.fast_capture.line_capture` reads only the capture's fields itself and
shares :data:`PLAIN_BODY_MAX` and :func:`trimmed_body` with it.
"""

from __future__ import annotations

from typing import Any

from streams.model.adapters import detect_runtime, payload_time_ms
from streams.model.adapters.claude_code import backend_hook_fields
from streams.model.adapters.openclaw import openclaw_fields
from streams.model.deadletter import RejectedInput
from streams.model.decode import _SERIALISED, _orjson_object
from streams.model.event_build import EventFields, checked_fields
from streams.model.jsstring import js_trim, to_js_utf16

PLAIN_BODY_MAX = 100_000
"""The largest trimmed body (UTF-8 bytes) a line fast path takes: below both the body limit's default and
:func:`streams.frames.capture.capture_body_hash`'s JSON-size check, which only the general path makes."""


def plain_fields(line: bytes) -> dict[str, Any] | None:
    """The event ``__dict__`` of one plain native hook line, or None for the general path.

    Args:
        line: one line of a hook-event JSONL file (no line end).

    Returns:
        ``decode_hook_record(line).__dict__`` when the line is a Claude Code / Codex hook payload or
        an OpenClaw event whose fields need no pydantic validation; None for a serialised event, a
        KnowHub line, a line orjson would read differently, another runtime, or any field the
        general path rejects or must validate (it then gives the same reason and text).
    """
    if line.startswith(_SERIALISED):
        return None
    obj = _orjson_object(line)
    if obj is None or "schema_version" in obj:
        return None
    fields: EventFields
    try:
        runtime = detect_runtime(obj)
        if runtime == "openclaw":
            fields = openclaw_fields(obj, payload_time_ms(obj, None))
        elif runtime == "claude-code" or runtime == "codex":
            fields = backend_hook_fields(obj, payload_time_ms(obj, None), runtime)
        else:
            return None
    except (RejectedInput, TypeError, ValueError, AttributeError, KeyError):
        return None  # the general path rejects it with the same reason and text
    return checked_fields(fields)


def trimmed_body(body: str) -> tuple[str, bytes]:
    """``(stripped, its UTF-8)``: the body JavaScript's ``trim()`` leaves, as hive-mind's
    ``stripHmPrefix(content).trim()`` sees it after a prefix built from safe tokens
    (:func:`streams.frames.capture.capture_body_hash`'s fast path; a non-ASCII body is first made
    JavaScript's UTF-16 view, so no lone surrogate is left to replace)."""
    stripped = js_trim(body if body.isascii() else to_js_utf16(body))
    return stripped, stripped.encode("utf-8")
