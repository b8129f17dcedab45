"""JSON codec of the ``frames`` topic records (with a ``schema_version``).

A record is what the frames step decided for one hook event: a frame event (``kind`` ``created`` or
``touched``, with its capture) or a skipped event (``kind`` ``skipped``: valid, not a turn;
:class:`~streams.frames.capture.Skipped`), so a versioned ``frames`` topic (``reprocess``) rebuilds both.
"""

from __future__ import annotations

from typing import Any

import orjson

from streams.frames.capture import Capture, Skipped
from streams.frames.dedup import FrameEvent
from streams.model.deadletter import Reason, RejectedInput

FRAME_EVENT_SCHEMA = 1


def frame_event_to_json(fe: FrameEvent) -> bytes:
    """A frame event as UTF-8 JSON (the ``frames`` topic value); touches carry no content.

    Encoded with orjson (about ten times faster than ``json`` here); lone surrogates cannot occur,
    since captures hold text as Node reads it (:func:`streams.model.jsstring.to_js_utf16`).
    """
    c = fe.capture
    cap = {"event_id": c.event_id, "key": c.key, "body_hash": c.body_hash, "content": c.content if fe.kind == "created" else None,
           "source": c.source, "session": c.session, "event_type": c.event_type, "parent": c.parent, "project": c.project,
           "importance": c.importance, "event_time_ms": c.event_time_ms, "partition": c.partition, "offset": c.offset,
           "details": c.details}
    doc = {"schema_version": FRAME_EVENT_SCHEMA, "kind": fe.kind, "frame_id": fe.frame_id,
           "frame_time_ms": fe.frame_time_ms, "late": fe.late, "capture": cap}
    return orjson.dumps(doc)


def frame_event_from_json(raw: bytes) -> FrameEvent:
    """Parse a ``frames`` record.

    Raises:
        RejectedInput: ``malformed_json``, ``unknown_schema_version`` or ``wrong_shape``.
    """
    d = _load(raw)
    if d.get("schema_version") != FRAME_EVENT_SCHEMA:
        raise RejectedInput(Reason.UNKNOWN_SCHEMA_VERSION, "frame event has an unknown schema_version")
    try:
        cap = dict(d["capture"])
        if cap.get("content") is None:
            cap["content"] = ""
        kind = d["kind"]
        if kind not in ("created", "touched"):
            raise ValueError(f"kind {kind!r}")
        return FrameEvent(kind, str(d["frame_id"]), Capture(**cap), int(d["frame_time_ms"]), bool(d.get("late", False)))
    except (KeyError, TypeError, ValueError) as e:
        raise RejectedInput(Reason.WRONG_SHAPE, f"frame event: {e}") from e


def skipped_to_json(s: Skipped) -> bytes:
    """A skipped event as a ``frames`` record value: ``{"schema_version", "kind": "skipped", "skipped": {…}}``."""
    return orjson.dumps({"schema_version": FRAME_EVENT_SCHEMA, "kind": "skipped", "skipped": s._asdict()})


_SKIPPED_TYPES: dict[str, tuple[type, ...]] = {
    "event_id": (str,), "reason": (str,), "source": (str,), "session": (str,), "event_type": (str,), "native_event": (str, type(None)),
    "project": (str, type(None)), "event_time_ms": (int,), "partition": (int,), "offset": (int,), "details": (str, type(None)),
}


def skipped_from_record(d: dict[str, object]) -> Skipped:
    """The :class:`Skipped` of a parsed ``kind: skipped`` record (:func:`skipped_to_json`).

    Raises:
        RejectedInput: ``unknown_schema_version``, or ``wrong_shape`` for a missing, extra or mistyped field.
    """
    if d.get("schema_version") != FRAME_EVENT_SCHEMA:
        raise RejectedInput(Reason.UNKNOWN_SCHEMA_VERSION, "skipped event has an unknown schema_version")
    body = d.get("skipped")
    if not isinstance(body, dict) or body.keys() != _SKIPPED_TYPES.keys():
        raise RejectedInput(Reason.WRONG_SHAPE, "skipped event: 'skipped' must hold exactly " + ", ".join(_SKIPPED_TYPES))
    for name, types in _SKIPPED_TYPES.items():
        v = body[name]
        if not isinstance(v, types) or isinstance(v, bool):
            raise RejectedInput(Reason.WRONG_SHAPE, f"skipped event: {name} has type {type(v).__name__}")
        if isinstance(v, int) and not -(2 ** (31 if name == "partition" else 63)) <= v < 2 ** (31 if name == "partition" else 63):
            raise RejectedInput(Reason.WRONG_SHAPE, f"skipped event: {name} {v} is out of range")
    return Skipped(**body)


def _load(raw: bytes) -> dict[str, Any]:
    try:
        d = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise RejectedInput(Reason.MALFORMED_JSON, str(e)) from e
    if not isinstance(d, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, "record must be a JSON object")
    return d
