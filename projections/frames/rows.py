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
    "frame_time_ms", "src_partition", "src_offset", "seq", "is_late", "details",
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
        c.project, c.importance, c.event_time_ms, fe.frame_time_ms, c.partition, c.offset, seq, fe.late, c.details,
    )


def capture_columns(events: Iterable[FrameEvent]) -> dict[str, list[Any]]:
    """Columns (name → list, one entry per event) of the capture rows of ``events``: the rows of
    :func:`event_row` (``seq`` the index), built by transposing the events and their captures
    (no tuple per row: the embedded runner's writer spent ~1 µs per capture on the rows)."""
    evs = list(events)
    if not evs:
        return {c: [] for c in CAPTURE_COLUMNS}
    kinds, frame_ids, caps, frame_times, lates = zip(*evs, strict=True)
    (event_ids, keys, hashes, contents, sources, sessions, event_types, parents, projects, importances,
     event_times, partitions, offsets, details) = zip(*caps, strict=True)
    created = [k == "created" for k in kinds]
    return {
        "event_id": list(event_ids), "frame_id": list(frame_ids), "is_duplicate": [not c for c in created],
        "dedup_key": list(keys), "body_hash": list(hashes),
        "content": [t if c else None for t, c in zip(contents, created, strict=True)],
        "source": list(sources), "session": list(sessions), "event_type": list(event_types), "parent": list(parents),
        "project": list(projects), "importance": list(importances), "event_time_ms": list(event_times),
        "frame_time_ms": list(frame_times), "src_partition": list(partitions), "src_offset": list(offsets),
        "seq": list(range(len(evs))), "is_late": list(lates), "details": list(details),
    }
