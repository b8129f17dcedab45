"""``frames`` topic records → the sink's capture columns in one pass (pure; no DuckDB import).

The projector used to build a :class:`~streams.frames.dedup.FrameEvent` (and its ``Capture``)
per record and then fold those objects into columns (:func:`projections.frames.rows.capture_columns`):
about 10 µs of CPU per record, half the projector's budget. :func:`decode_frame_records` parses
each value with orjson and appends its fields straight to the columns when the record has exactly
the shape :func:`streams.frames.codec.frame_event_to_json` writes (the normal case). Any other
record goes through :func:`streams.frames.codec.frame_event_from_json`, so what is accepted and
the reason a record is rejected stay those of the codec; a record the codec accepts but whose
fields have the wrong types (a string time, a null event id) is rejected as ``wrong_shape``
instead of failing the whole batch in the Arrow conversion.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from projections.frames.rows import CAPTURE_COLUMNS, event_row
from streams.frames.capture import Skipped
from streams.frames.codec import FRAME_EVENT_SCHEMA, frame_event_from_json, skipped_from_record
from streams.model.deadletter import Reason, RejectedInput

_TOP_KEYS = frozenset({"schema_version", "kind", "frame_id", "frame_time_ms", "late", "capture"})
_CAP_KEYS = frozenset({"event_id", "key", "body_hash", "content", "source", "session", "event_type", "parent", "project",
                       "importance", "event_time_ms", "partition", "offset", "details"})
_STR = (str,)
_OPT_STR = (str, type(None))
_INT = (int,)
# the type every column value must have (bool is an int subclass: excluded where an int is meant)
_COLUMN_TYPES: dict[str, tuple[type, ...]] = {
    "event_id": _STR, "frame_id": _STR, "is_duplicate": (bool,), "dedup_key": _STR, "body_hash": _STR, "content": _OPT_STR,
    "source": _STR, "session": _OPT_STR, "event_type": _OPT_STR, "parent": _OPT_STR, "project": _OPT_STR,
    "importance": _OPT_STR, "event_time_ms": _INT, "frame_time_ms": _INT, "src_partition": _INT, "src_offset": _INT,
    "seq": _INT, "is_late": (bool,), "details": _OPT_STR,
}
_INT_RANGE = (-(2**63), 2**63 - 1)
_OPT_STR_SET = frozenset({str, type(None)})


def _bad_type(row: Sequence[Any]) -> str | None:
    """The first column of ``row`` (in :data:`CAPTURE_COLUMNS` order) whose value has the wrong type, or None."""
    for name, value in zip(CAPTURE_COLUMNS, row, strict=True):
        types = _COLUMN_TYPES[name]
        if not isinstance(value, types) or (types is _INT and isinstance(value, bool)):
            return f"{name} has type {type(value).__name__}"
        if types is _INT:
            lo, hi = (-(2**31), 2**31 - 1) if name == "src_partition" else _INT_RANGE
            if not lo <= value <= hi:  # type: ignore[operator]
                return f"{name} {value} is out of range"
    return None


def _plain_types(row: tuple[Any, ...]) -> bool:
    """True when every value of a fast-path ``row`` has its column's type (the inline form of :func:`_bad_type`)."""
    lo, hi = _INT_RANGE
    opt = _OPT_STR_SET
    return (type(row[0]) is str and type(row[1]) is str and type(row[3]) is str and type(row[4]) is str and type(row[6]) is str
            and type(row[5]) in opt and type(row[7]) in opt and type(row[8]) in opt and type(row[9]) in opt
            and type(row[10]) in opt and type(row[11]) in opt and type(row[18]) in opt
            and type(row[12]) is int and type(row[13]) is int and type(row[14]) is int and type(row[15]) is int
            and lo <= row[12] <= hi and lo <= row[13] <= hi and -(2**31) <= row[14] < 2**31 and lo <= row[15] <= hi)


class FrameRecords(NamedTuple):
    """What :func:`decode_frame_records` read from a run of ``frames`` records.

    Attributes:
        captures: capture columns as :func:`projections.frames.rows.capture_columns` makes them,
            one entry per frame event in order.
        rejects: (index in the values, error) of each record that could not be read.
        skipped: the skipped events (``kind: skipped``) in order.
    """

    captures: dict[str, list[Any]]
    rejects: list[tuple[int, RejectedInput]]
    skipped: list[Skipped]


def decode_frame_records(values: Sequence[bytes | None], first_seq: int = 0) -> FrameRecords:
    """Decode ``frames`` record values into capture columns and skipped events.

    Args:
        values: record values in processing order (``None`` for a tombstone).
        first_seq: the ``seq`` of the first accepted frame event (``seq`` orders the batch: the sink
            keeps the first of repeated event ids and the first writer of a frame).

    Returns:
        :class:`FrameRecords`.

    Raises:
        Nothing: every bad record becomes a reject (``malformed_json``,
        ``unknown_schema_version``, ``wrong_shape``), as :func:`frame_event_from_json` and
        :func:`streams.frames.codec.skipped_from_record` decide.
    """
    cols: dict[str, list[Any]] = {c: [] for c in CAPTURE_COLUMNS}
    (event_id, frame_id, is_dup, dedup_key, body_hash, content, source, session, event_type, parent, project, importance,
     event_time, frame_time, src_partition, src_offset, seq, is_late, details) = (cols[c] for c in CAPTURE_COLUMNS)
    rejects: list[tuple[int, RejectedInput]] = []
    skipped: list[Skipped] = []
    n = first_seq
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError
    for i, raw in enumerate(values):
        try:
            d = loads(raw) if raw is not None else None
        except JSONDecodeError:
            d = None
        c = d.get("capture") if type(d) is dict else None
        if (type(c) is not dict or c.keys() != _CAP_KEYS or d.keys() != _TOP_KEYS  # type: ignore[union-attr]
                or d["schema_version"] != FRAME_EVENT_SCHEMA or type(d["late"]) is not bool or type(d["frame_time_ms"]) is not int):  # type: ignore[index]
            if type(d) is dict and d.get("kind") == "skipped":
                try:
                    skipped.append(skipped_from_record(d))
                except RejectedInput as e:
                    rejects.append((i, e))
                continue
            row = _slow_row(raw, n)
            if isinstance(row, RejectedInput):
                rejects.append((i, row))
                continue
            for col, value in zip(cols.values(), row, strict=True):
                col.append(value)
            n += 1
            continue
        kind = d["kind"]  # type: ignore[index]
        created = kind == "created"
        if not created and kind != "touched":
            rejects.append((i, RejectedInput(Reason.WRONG_SHAPE, f"frame event: kind {kind!r}")))
            continue
        cc = c["content"]
        row = (c["event_id"], d["frame_id"], not created, c["key"], c["body_hash"], (cc if cc is not None else "") if created else None,  # type: ignore[index]
               c["source"], c["session"], c["event_type"], c["parent"], c["project"], c["importance"], c["event_time_ms"],
               d["frame_time_ms"], c["partition"], c["offset"], n, d["late"], c["details"])  # type: ignore[index]
        if not _plain_types(row):
            rejects.append((i, RejectedInput(Reason.WRONG_SHAPE, f"frame event: {_bad_type(row)}")))
            continue
        event_id.append(row[0])
        frame_id.append(row[1])
        is_dup.append(row[2])
        dedup_key.append(row[3])
        body_hash.append(row[4])
        content.append(row[5])
        source.append(row[6])
        session.append(row[7])
        event_type.append(row[8])
        parent.append(row[9])
        project.append(row[10])
        importance.append(row[11])
        event_time.append(row[12])
        frame_time.append(row[13])
        src_partition.append(row[14])
        src_offset.append(row[15])
        seq.append(n)
        is_late.append(row[17])
        details.append(row[18])
        n += 1
    return FrameRecords(cols, rejects, skipped)


def _slow_row(raw: bytes | None, seq: int) -> tuple[Any, ...] | RejectedInput:
    """The codec's reading of an unusual record, as a column row, or why it is rejected."""
    try:
        fe = frame_event_from_json(raw or b"")
    except RejectedInput as e:
        return e
    row = event_row(fe, seq)
    bad = _bad_type(row)
    return RejectedInput(Reason.WRONG_SHAPE, f"frame event: {bad}") if bad is not None else row
