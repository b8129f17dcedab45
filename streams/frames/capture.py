"""HookEvent → Capture: the dedup core's input, with the body hashed and the key chosen."""

from __future__ import annotations

import hashlib
import json
from typing import NamedTuple

from streams.model import fastpath
from streams.model.body_hash import KeyStrategy, dedup_key, stripped_body
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent
from streams.model.jsstring import js_trim, js_utf8, to_js_utf16
from streams.settings import DEFAULT_MAX_BODY_BYTES

MAX_RECORD_BYTES = 900_000  # a capture's JSON must fit Kafka's default 1 MiB message.max.bytes
_CHECK_JSON_ABOVE = 100_000  # JSON escaping can grow a body up to 6x: measure it above this size


class Capture(NamedTuple):
    """One capture of a turn, ready for dedup (a named tuple: cheap to build and to pickle between
    the import processes and the runner, see :mod:`streams.frames.capture_import`).

    Attributes:
        event_id: the hook event's id (idempotency key).
        key: dedup key (:func:`streams.model.body_hash.dedup_key`).
        body_hash: 64-hex SHA-256 of the stripped, trimmed body (hive-mind parity).
        content: the frame content, prefix included, as the first writer would store it.
        source, session, event_type, parent, project, importance: provenance.
        event_time_ms: event time, epoch ms.
        partition, offset: where the record was read (topic partition/offset, or a file id
            and line number); used to recognise a record processed twice.
    """

    event_id: str
    key: str
    body_hash: str
    content: str
    source: str
    session: str
    event_type: str
    parent: str | None
    project: str | None
    importance: str
    event_time_ms: int
    partition: int
    offset: int


def capture_body_hash(ev: HookEvent, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> str | None:
    """The body hash of ``ev``'s capture (:func:`streams.model.body_hash.body_hash` of its frame content),
    or ``None`` when ``ev`` carries no turn text; the checks and errors of :func:`to_capture`.

    For an event with a ``body`` (no verbatim ``content``) the frame content is the prefix built
    from the event's tokens plus the body, and those tokens hold neither whitespace nor ``]``, so
    ``stripHmPrefix`` removes exactly the prefix and the body's leading JavaScript whitespace: on
    the fast path (:mod:`streams.model.fastpath`) the body is trimmed and hashed without building the
    prefix (an ASCII body needs no surrogate check either). Prefixed ``content`` always takes the
    general path.

    Args:
        ev: a validated hook event.
        max_body_bytes: the largest stripped body accepted, in UTF-8 bytes.

    Returns:
        64 hex chars (SHA-256), or ``None``.

    Raises:
        RejectedInput: ``empty_body`` / ``body_too_large`` as :func:`to_capture`.
    """
    if not ev.is_capture:
        return None
    body = ev.body
    if fastpath.ENABLED and ev.content is None and body is not None:
        stripped = js_trim(body if body.isascii() else to_js_utf16(body))
        encoded = stripped.encode("utf-8")  # to_js_utf16 left no surrogate to replace
    else:
        content = ev.frame_content()
        assert content is not None  # is_capture guarantees it
        stripped = stripped_body(content)
        encoded = js_utf8(stripped)
    if not stripped:
        raise RejectedInput(Reason.EMPTY_BODY, f"{ev.native_event or ev.event_type} event {ev.event_id} has an empty body after the [hm] prefix")
    if len(encoded) > max_body_bytes:
        raise RejectedInput(Reason.BODY_TOO_LARGE, f"body is {len(encoded)} bytes, over the {max_body_bytes}-byte limit")
    if len(encoded) > _CHECK_JSON_ABOVE:
        as_json = len(json.dumps(ev.frame_content(), ensure_ascii=False).encode())
        if as_json > MAX_RECORD_BYTES:
            raise RejectedInput(Reason.BODY_TOO_LARGE, f"content is {as_json} bytes as JSON, over the {MAX_RECORD_BYTES}-byte record limit")
    return hashlib.sha256(encoded).hexdigest()


def to_capture(
    ev: HookEvent,
    *,
    strategy: KeyStrategy = KeyStrategy.BODY,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    partition: int = 0,
    offset: int = 0,
) -> Capture | None:
    """Make the Capture of ``ev``, or ``None`` when ``ev`` carries no turn text.

    Args:
        ev: a validated hook event.
        strategy: dedup key strategy.
        max_body_bytes: the largest stripped body accepted, in UTF-8 bytes.
        partition, offset: the record's position.

    Raises:
        RejectedInput: ``empty_body`` when nothing is left after stripping the prefix and
            whitespace; ``body_too_large`` above ``max_body_bytes``, or when the content as JSON
            would not fit one Kafka record (:data:`MAX_RECORD_BYTES`).
    """
    h = capture_body_hash(ev, max_body_bytes=max_body_bytes)
    if h is None:
        return None
    content = ev.frame_content()
    assert content is not None  # a capture has content
    return Capture(
        event_id=ev.event_id,
        key=dedup_key(h, ev.event_type, strategy),
        body_hash=h,
        content=content,
        source=ev.source,
        session=ev.session,
        event_type=ev.event_type,
        parent=ev.parent,
        project=ev.project,
        importance=ev.importance,
        event_time_ms=ev.event_time_ms,
        partition=partition,
        offset=offset,
    )
