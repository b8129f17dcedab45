"""JSON codecs of the records on hivestream's topics (each with a ``schema_version``)."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from streams.capture import Capture
from streams.deadletter import Reason, RejectedInput
from streams.dedup import FrameEvent

CAPTURE_SCHEMA = 1
FRAME_EVENT_SCHEMA = 1


def capture_to_json(c: Capture) -> bytes:
    """A capture as UTF-8 JSON (the ``captures`` topic value)."""
    return json.dumps({"schema_version": CAPTURE_SCHEMA, **asdict(c)}, ensure_ascii=False).encode()


def capture_from_json(raw: bytes) -> Capture:
    """Parse a ``captures`` record.

    Raises:
        RejectedInput: ``malformed_json``, ``unknown_schema_version`` or ``wrong_shape``.
    """
    d = _load(raw)
    if d.pop("schema_version", None) != CAPTURE_SCHEMA:
        raise RejectedInput(Reason.UNKNOWN_SCHEMA_VERSION, "capture record has an unknown schema_version")
    try:
        return Capture(**d)
    except TypeError as e:
        raise RejectedInput(Reason.WRONG_SHAPE, f"capture record: {e}") from e


def frame_event_to_json(fe: FrameEvent) -> bytes:
    """A frame event as UTF-8 JSON (the ``frames`` topic value); touches carry no content."""
    cap = asdict(fe.capture)
    if fe.kind == "touched":
        cap["content"] = None
    doc = {"schema_version": FRAME_EVENT_SCHEMA, "kind": fe.kind, "frame_id": fe.frame_id,
           "frame_time_ms": fe.frame_time_ms, "late": fe.late, "capture": cap}
    return json.dumps(doc, ensure_ascii=False).encode()


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


def _load(raw: bytes) -> dict[str, Any]:
    try:
        d = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise RejectedInput(Reason.MALFORMED_JSON, str(e)) from e
    if not isinstance(d, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, "record must be a JSON object")
    return d
