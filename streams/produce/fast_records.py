"""``produce``'s fast path for a hook-event line: native payload bytes → (record key, record value).

The usual lines of a hook-event log are Claude Code / Codex hook payloads and OpenClaw
``message:*`` events carrying turn text. For those, :func:`line_record` computes the record that
:func:`streams.model.decode.decode_hook_record` followed by :func:`streams.produce.encode.encode_item` would
give, from the event fields :func:`streams.model.plain_lines.plain_fields` reads (the adapters' own
field functions and the fields :func:`streams.model.event_build.checked_fields` accepts), without building a
:class:`~streams.model.events.HookEvent`: the value is the same orjson text of the non-None fields that
:meth:`~streams.model.events.HookEvent.to_json` writes, the key the same key group of the body hash that
:func:`streams.produce.keys.hook_event_key` picks. Whatever is not plainly such a line (a serialised
event, a KnowHub line, a line orjson would read differently, a rejected or KnowHub-relevant
event, an event without turn text, an empty or large body, a value over the record limit) gives
``None``, and the caller takes the general path, which also writes every dead letter.
``tests/streams/test_fast_import.py`` compares both paths record for record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator

import orjson

from streams.frames.capture import skip_reason_of
from streams.model import fastpath
from streams.model.deadletter import RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import _PASSTHROUGH, CAPTURE_TYPES, _refuse
from streams.model.injected import has_injected
from streams.model.key_groups import _GROUP_KEYS, KEY_GROUPS
from streams.model.plain_lines import PLAIN_BODY_MAX, plain_fields, trimmed_body
from streams.produce.encode import MAX_EVENT_BYTES, ItemRejected, encode_item
from streams.redaction.redact import RedactionMode


def line_record(line: bytes) -> tuple[bytes, bytes] | None:
    """The ``hook-events`` (key, value) of one hook-event line, or None for the general path.

    Args:
        line: one line of a hook-event JSONL file (no line end).

    Returns:
        Exactly ``encode_item(decode_hook_record(line), mode)`` for any privacy mode (the events
        covered are never KnowHub-relevant), or None.
    """
    d = plain_fields(line)
    if d is None or d["native_event"] == "PostToolUse" or d["content"] is not None or d["event_type"] not in CAPTURE_TYPES:
        return None  # pydantic's call, a possible KnowHub tool call, or no capture: the general path keys it
    body = d["body"]
    if body is None or skip_reason_of(d["event_type"], body, None, d["source"], d["native_event"], d["raw"]) is not None:
        return None  # not a turn: the general path keys it by its session
    if has_injected(body):
        return None  # keyed by the body without hivestream's own blocks: the general path strips them
    stripped, encoded = trimmed_body(body)
    if not stripped or len(encoded) > PLAIN_BODY_MAX:
        return None
    try:
        value = orjson.dumps({k: v for k, v in d.items() if v is not None}, default=_refuse, option=_PASSTHROUGH)
    except TypeError:
        return None
    if len(value) > MAX_EVENT_BYTES:
        return None
    return _GROUP_KEYS[int.from_bytes(hashlib.sha256(encoded).digest()[:4], "big") % KEY_GROUPS], value


def encode_lines(lines: Iterable[bytes], mode: RedactionMode) -> Iterator[tuple[int, bytes, tuple[bytes, bytes] | ItemRejected]]:
    """``(offset, line, record or why it is rejected)`` for each non-blank line of a hook-event file:
    :func:`streams.importers.files.import_hook_events` then :func:`streams.produce.encode.encode_item`,
    with :func:`line_record` first on the fast path (:mod:`streams.model.fastpath`)."""
    fast = fastpath.ENABLED
    for off, line in enumerate(lines):
        if not line.strip():
            continue
        rec = line_record(line) if fast else None
        if rec is None:
            try:
                item = decode_hook_record(line)
            except RejectedInput as e:
                yield off, line, encode_item(e, mode)
                continue
            yield off, line, encode_item(item, mode)
        else:
            yield off, line, rec
