"""The dedup core: a sliding event-time window per key, first writer wins (DESIGN.md §3).

Pure and clock-free: time is the captures' event time only. State lives in any
``MutableMapping[str, dict]`` — a plain dict in the embedded runner and in tests, a faust
table with a changelog topic in the Kafka worker — so a restarted worker resumes with it.

Semantics:

* A capture whose key has a live frame anchored at ``t0`` (the first writer's event time) and
  whose event time ``t`` satisfies ``|t - t0| <= window_ms`` is a *touch* of that frame. The
  window is anchored per key at its first capture, so no clock boundary splits a pair that is
  ``window_ms`` apart or less.
* Otherwise it *creates* a frame (first writer wins: its content and provenance, verbatim),
  which joins the key's list of live frames.
* A record seen again re-emits its own ``created`` event instead of counting as a duplicate of
  itself: delivery is at-least-once, and every emitted event is idempotent downstream by event
  id. The state keeps each frame's first sighting (event id, partition, offset); the match is
  on the event id, which adapters derive deterministically from the record, because one input
  record (a transcript line with its gateway capture) can carry several events.
* The watermark is ``max event time seen - allowed_lateness_ms``; :meth:`DedupCore.evict`
  drops frames whose window ended before it. ``window_ms=None`` means unbounded: state is kept
  forever, as hive-mind's own store does.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Literal

from streams.capture import Capture

DEFAULT_WINDOW_MS = 600_000  # 10 min; see README "Choosing the window"
DEFAULT_ALLOWED_LATENESS_MS = 60_000
DEFAULT_SWEEP_EVERY = 10_000  # captures between eviction sweeps


@dataclass(frozen=True, slots=True)
class FrameEvent:
    """What the dedup core emits for every capture (the ``frames`` topic payload).

    Attributes:
        kind: ``created`` (the capture became a frame) or ``touched`` (a duplicate).
        frame_id: the frame's id = the first writer's event id.
        capture: the capture itself (its provenance is recorded either way).
        frame_time_ms: the frame's anchor (first writer's event time), epoch ms.
    """

    kind: Literal["created", "touched"]
    frame_id: str
    capture: Capture
    frame_time_ms: int


class DedupCore:
    """Sliding event-time window dedup over a key → state mapping.

    Args:
        window_ms: W in milliseconds, or ``None`` for unbounded.
        allowed_lateness_ms: how far behind the max seen event time the watermark trails.
        state: key → list of ``[frame_id, anchor_ms, first_event_id, partition, offset]``
            (JSON-serialisable, for a faust table's changelog); a dict, or a faust table.
        sweep_every: run :meth:`evict` after this many captures (0 disables automatic sweeps).
        owns: which keys this core may evict (a faust table may only change keys of the
            partition being processed); all keys when ``None``.

    Raises:
        ValueError: for a negative window or lateness.
    """

    def __init__(
        self,
        window_ms: int | None = DEFAULT_WINDOW_MS,
        *,
        allowed_lateness_ms: int = DEFAULT_ALLOWED_LATENESS_MS,
        state: MutableMapping[str, Any] | None = None,
        sweep_every: int = DEFAULT_SWEEP_EVERY,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        if window_ms is not None and window_ms < 0:
            raise ValueError("window_ms must be >= 0 or None (unbounded)")
        if allowed_lateness_ms < 0:
            raise ValueError("allowed_lateness_ms must be >= 0")
        self.window_ms = window_ms
        self.allowed_lateness_ms = allowed_lateness_ms
        self.state: MutableMapping[str, Any] = {} if state is None else state
        self.sweep_every = sweep_every
        self.owns = owns
        self.max_event_time_ms: int | None = None
        self._since_sweep = 0

    @property
    def watermark_ms(self) -> int | None:
        """Event-time watermark: max event time seen minus the allowed lateness (ms)."""
        if self.max_event_time_ms is None:
            return None
        return self.max_event_time_ms - self.allowed_lateness_ms

    def _within(self, t: int, anchor: int) -> bool:
        return self.window_ms is None or abs(t - anchor) <= self.window_ms

    def process(self, c: Capture) -> FrameEvent:
        """Dedup one capture and return the frame event it produces (never raises on data).

        The key's state is a list of live frames ``[frame_id, anchor_ms, first_event_id,
        partition, offset]`` in creation order. A capture with the event id of one of them
        (the same record, processed again) re-emits that frame's ``created``; otherwise the earliest-created frame whose
        anchor is within W makes it a touch; otherwise it creates a frame. Picking by creation
        order makes a reprocessed record get the same answer as the first time, even when
        frames were created for its key after it.
        """
        t = c.event_time_ms
        if self.max_event_time_ms is None or t > self.max_event_time_ms:
            self.max_event_time_ms = t
        frames: list[list[Any]] = list(self.state.get(c.key) or ())
        out: FrameEvent | None = None
        for f, anchor, first, _p, _o in frames:
            if first == c.event_id:
                out = FrameEvent("created", f, c, anchor)
                break
        if out is None:
            for f, anchor, _first, _p, _o in frames:
                if self._within(t, anchor):
                    out = FrameEvent("touched", f, c, anchor)
                    break
        if out is None:
            out = FrameEvent("created", c.event_id, c, t)
            frames.append([c.event_id, t, c.event_id, c.partition, c.offset])
            self.state[c.key] = frames
        self._since_sweep += 1
        if self.sweep_every and self._since_sweep >= self.sweep_every:
            self.evict()
        return out

    def evict(self, watermark_ms: int | None = None) -> int:
        """Drop keys whose window ended before the watermark.

        Args:
            watermark_ms: evict against this watermark (epoch ms) instead of the core's own.

        Returns:
            The number of frames evicted from the state (0 for an unbounded window).
        """
        self._since_sweep = 0
        wm = self.watermark_ms if watermark_ms is None else watermark_ms
        if self.window_ms is None or wm is None:
            return 0
        w = self.window_ms
        evicted = 0
        for k, frames in list(self.state.items()):
            if self.owns is not None and not self.owns(k):
                continue
            live = [f for f in frames if f[1] + w >= wm]
            if len(live) == len(frames):
                continue
            evicted += len(frames) - len(live)
            if live:
                self.state[k] = live
            else:
                del self.state[k]
        return evicted
