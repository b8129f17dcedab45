"""Fold of frame events into ``frame_captures`` rows (pure; no DuckDB import).

The sink loads these columns as one Arrow table and merges them into ``frames`` /
``frame_captures`` in SQL (aggregated per frame first: DuckDB applies only the first of several
upserts of one key in a statement).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from streams.frames.dedup import FrameEvent

CAPTURE_COLUMNS = (
    "event_id", "frame_id", "is_duplicate", "dedup_key", "body_hash", "content", "source",
    "session", "event_type", "parent", "project", "importance", "event_time_ms",
    "frame_time_ms", "src_partition", "src_offset", "seq", "is_late",
)


def event_row(fe: FrameEvent, seq: int) -> tuple[Any, ...]:
    """The capture row of one frame event, values in :data:`CAPTURE_COLUMNS` order.

    ``content`` is kept only for ``created`` events (touches never overwrite a frame); ``seq``
    is the event's index in the batch, so the sink keeps the first of repeated ids.
    """
    c = fe.capture
    created = fe.kind == "created"
    return (
        c.event_id, fe.frame_id, not created, c.key, c.body_hash,
        c.content if created else None, c.source, c.session, c.event_type, c.parent,
        c.project, c.importance, c.event_time_ms, fe.frame_time_ms, c.partition, c.offset, seq, fe.late,
    )


def capture_columns(events: Iterable[FrameEvent]) -> dict[str, list[Any]]:
    """Columns (name → list, one entry per event) of the capture rows of ``events`` (see :func:`event_row`)."""
    rows = [event_row(fe, i) for i, fe in enumerate(events)]
    if not rows:
        return {c: [] for c in CAPTURE_COLUMNS}
    return {name: list(col) for name, col in zip(CAPTURE_COLUMNS, zip(*rows, strict=True), strict=True)}
