"""Helpers to build captures and run the dedup core in tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from streams.frames.capture import Capture, to_capture
from streams.frames.dedup import DedupFold, FrameEvent
from streams.model.body_hash import KeyStrategy
from streams.model.events import from_prefixed


def cap(content: str, t_ms: int, eid: str, *, offset: int | None = None, strategy: KeyStrategy = KeyStrategy.BODY) -> Capture:
    """A capture of prefixed ``content`` at event time ``t_ms`` with event id ``eid``."""
    c = to_capture(from_prefixed(content, event_time_ms=t_ms, event_id=eid), strategy=strategy,
                   offset=offset if offset is not None else abs(hash(eid)) % 10**9)
    assert c is not None
    return c


def fold(events: Iterable[FrameEvent]) -> dict[str, dict[str, object]]:
    """A reference fold of frame events: per frame, access count and sources (idempotent by event id)."""
    seen: set[str] = set()
    frames: dict[str, dict[str, object]] = {}
    for fe in events:
        if fe.capture.event_id in seen:
            continue
        seen.add(fe.capture.event_id)
        f = frames.setdefault(fe.frame_id, {"access_count": 0, "sources": Counter(), "body_hash": fe.capture.body_hash})
        f["access_count"] = int(f["access_count"]) + 1  # type: ignore[call-overload]
        f["sources"][fe.capture.source] += 1  # type: ignore[index]
    return frames


def run(core: DedupFold, caps: Iterable[Capture]) -> list[FrameEvent]:
    """Process ``caps`` in order."""
    return [core.process(c) for c in caps]
