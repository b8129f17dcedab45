"""``run``'s fast path for a hook-event line: native payload bytes → the fields of its :class:`~streams.frames.capture.Capture`.

The usual lines of a hook-event log are Claude Code / Codex hook payloads and OpenClaw
``message:*`` events carrying turn text. For those, :func:`line_capture` computes the capture that
:func:`streams.model.decode.decode_hook_record` followed by :func:`streams.frames.capture.to_capture`
would give, from the event fields :func:`streams.model.plain_lines.plain_fields` reads (the
adapters' own field functions, the fields :func:`streams.model.event_build.checked_fields`
accepts; ``produce``'s path reads the line the same way), without building a
:class:`~streams.model.events.HookEvent` or a :class:`~streams.frames.capture.Capture` (the import
processes send the runner columns; :func:`hivestream.embedded.blocks.import_block`). It is
the twin of ``produce``'s :func:`streams.produce.fast_records.line_record`, which covers the same
lines and stops at the record instead of the capture.

Whatever is not plainly such a line (a serialised event, a KnowHub line, a line orjson would read
differently, a rejected event, a tool event (a possible memory tool call), an event without turn
text, an empty body, a body over :data:`streams.model.plain_lines.PLAIN_BODY_MAX` or the configured limit) gives ``None``,
and the caller takes the general path, which also makes every dead letter.
``tests/test_fast_capture.py`` compares both paths outcome for outcome.
"""

from __future__ import annotations

import hashlib

from streams.memory_calls import TOOL_CALL_EVENTS
from streams.model.body_hash import KeyStrategy, dedup_key
from streams.model.events import CAPTURE_TYPES, _event_prefix
from streams.model.plain_lines import PLAIN_BODY_MAX, plain_fields, trimmed_body
from streams.model.prefix import DEFAULT_SCOPE

CaptureFields = tuple[str, str, str, str, str, str, str, str | None, str | None, str, int, int, int]
"""The values of a :class:`~streams.frames.capture.Capture` in its field order (``Capture._make`` of them is the capture)."""


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
    """
    d = plain_fields(line)
    if d is None or d["content"] is not None or d["event_type"] not in CAPTURE_TYPES or d["native_event"] in TOOL_CALL_EVENTS:
        return None  # pydantic's call, verbatim content (the general strip), or no capture
    body = d["body"]
    if body is None:
        return None
    stripped, encoded = trimmed_body(body)
    if not stripped or len(encoded) > PLAIN_BODY_MAX or len(encoded) > max_body_bytes:
        return None  # the general path rejects it (empty, too large) or measures its JSON
    source, session, event_type, parent, project = d["source"], d["session"], d["event_type"], d["parent"], d["project"]
    try:
        content = _event_prefix(source, session or DEFAULT_SCOPE, parent, event_type, project) + body
    except ValueError:
        return None
    h = hashlib.sha256(encoded).hexdigest()
    return (d["event_id"], dedup_key(h, event_type, strategy), h, content, source, session, event_type, parent, project,
            d["importance"], d["event_time_ms"], partition, offset)

