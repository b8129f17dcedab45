"""A brute-force reference of the dedup rule (docs/dedup.md), independent of the dedup core.

It keeps every frame ever created in one list and scans it for each capture: no state mapping, no
eviction, no changelog, no partitions. Per key group (``int(body_hash[:8], 16) % 256``) the
watermark is the greatest event time seen minus the allowed lateness L. A capture joins the
earliest-created frame of its key that is still open (watermark at or below ``max(anchor,
watermark when it opened) + W``) and within W of its anchor; otherwise it opens a frame. A capture
below its group's watermark is late (flagged, never dropped). An event id seen before is the same
capture read again: it keeps its first answer and changes nothing. W ``None`` is unbounded.

The Kafka-vs-embedded tests compare two paths that share :class:`streams.frames.dedup.DedupFold`;
this is the check of the dedup itself: :func:`expected_tables` against ``hivestream run``'s tables
(:func:`db_tables`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from streams.frames.capture import Capture, to_capture
from streams.importers.files import import_file
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import RejectedInput

GROUPS = 256


@dataclass
class RefFrame:
    """One frame: its first writer, anchor and close time, and every capture it took (in log order)."""

    frame_id: str
    key: str
    anchor_ms: int
    close_ms: int | None
    times: list[int] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)


@dataclass
class RefResult:
    """The reference's answer for a log.

    Attributes:
        frames: every frame, in creation order.
        answers: event id → (frame id, is a duplicate, is late), one per distinct event id.
    """

    frames: list[RefFrame] = field(default_factory=list)
    answers: dict[str, tuple[str, bool, bool]] = field(default_factory=dict)


def reference_dedup(captures: Iterable[Capture], window_ms: int | None, lateness_ms: int) -> RefResult:
    """Decide every capture of ``captures`` (in log order) by brute force (see the module docstring).

    Args:
        captures: the log's captures, in the order the dedup step reads them.
        window_ms: W (ms), or ``None`` for unbounded.
        lateness_ms: L (ms).
    """
    out = RefResult()
    greatest: dict[int, int] = {}
    for c in captures:
        if c.event_id in out.answers:
            continue
        group = int(c.body_hash[:8], 16) % GROUPS
        before = greatest.get(group)
        late = before is not None and c.event_time_ms < before - lateness_ms
        greatest[group] = c.event_time_ms if before is None else max(before, c.event_time_ms)
        watermark = greatest[group] - lateness_ms
        hit = None
        for f in out.frames:
            if f.key != c.key:
                continue
            if window_ms is None or (f.close_ms is not None and f.close_ms >= watermark and abs(c.event_time_ms - f.anchor_ms) <= window_ms):
                hit = f
                break
        if hit is None:
            close = None if window_ms is None else max(c.event_time_ms, watermark) + window_ms
            hit = RefFrame(c.event_id, c.key, c.event_time_ms, close)
            out.frames.append(hit)
        hit.times.append(c.event_time_ms)
        hit.sources.add(c.source)
        out.answers[c.event_id] = (hit.frame_id, hit.frame_id != c.event_id, late)
    return out


def log_captures(paths: Iterable[Path], *, gateway: bool = False, strategy: KeyStrategy = KeyStrategy.BODY) -> list[Capture]:
    """Every capture of ``paths``, file by file in the given order, as the importers read them
    (rejected lines and events that are no capture left out)."""
    out: list[Capture] = []
    for i, p in enumerate(paths):
        _fmt, items = import_file(p, gateway=gateway)
        for off, _line, ev in items:
            if isinstance(ev, RejectedInput):
                continue
            try:
                c = to_capture(ev, strategy=strategy, partition=i, offset=off)
            except RejectedInput:
                continue
            if c is not None:
                out.append(c)
    return out


Tables = dict[str, list[tuple[object, ...]]]


def expected_tables(result: RefResult) -> Tables:
    """The rows ``hivestream run`` should write for ``result``, in the shape of :func:`db_tables`."""
    frames = sorted((f.frame_id, f.key, f.anchor_ms, min(f.times), max(f.times), len(f.times), sorted(f.sources)) for f in result.frames)
    captures = sorted((eid, fid, dup, late) for eid, (fid, dup, late) in result.answers.items())
    return {"frames": frames, "captures": captures}


def db_tables(db: Path) -> Tables:
    """The frames and frame_captures rows of ``db`` that the reference decides, sorted."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "frames": [tuple(r) for r in con.execute(
                "SELECT frame_id, dedup_key, created_at_ms, first_seen_ms, last_accessed_ms, access_count, sources FROM frames ORDER BY frame_id").fetchall()],
            "captures": [tuple(r) for r in con.execute(
                "SELECT event_id, frame_id, is_duplicate, is_late FROM frame_captures ORDER BY event_id").fetchall()],
        }
    finally:
        con.close()
