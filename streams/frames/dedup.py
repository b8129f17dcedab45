"""The dedup core: a per-key event-time window, first writer wins, a watermark per key group.

Pure and clock-free: time is the captures' event time only. State lives in any
``MutableMapping[str, Any]`` — a dict in tests, a :class:`~streams.model.tracked_state.TrackedState` stored in
DuckDB by the embedded runner, a faust table with a changelog topic in the Kafka worker.

Semantics (docs/dedup.md; the contract: docs/design.md#dedup-semantics):

* **Key group.** Every key belongs to one of :data:`streams.model.key_groups.KEY_GROUPS` groups (from its
  body hash). ``hook-events`` is keyed by key group, so a group's captures reach one dedup step in
  log order on every partition count; the embedded runner reads them in the same order.
* **Watermark.** Per key group: the greatest event time of the group's captures processed so
  far, minus the allowed lateness L. It depends only on the group's own captures, so it is the same
  on every path, however partitions interleave.
* **Decision.** A capture at event time ``t`` touches the earliest-created *open* frame of its key
  whose anchor ``a`` satisfies ``|t - a| <= W``; otherwise it creates a frame anchored at ``t``
  (first writer wins: its content and provenance, verbatim; the frame id is its event id).
* **Closing.** A frame is open while the group's watermark is at or below its close time
  ``max(a, watermark when it opened) + W``. For an on-time capture that is ``a + W``; a frame opened
  by a *late* capture (event time below the watermark) stays open for W of watermark progress, so
  a late turn's double capture still collapses.
* **Late captures** (event time below the group's watermark) are processed by the same rule and
  flagged ``late``; none is dropped. One whose frame has already closed starts a new frame.
* **At-least-once.** A frame remembers the event ids it absorbed (and which of its touches were
  late); a capture whose event id is already there (a record processed again after a crash, or
  delivered twice) re-emits the same answer, its late flag included, and changes no state (the
  watermark takes the event time the absorbed capture had when it was first processed, kept in the
  frame: a no-op but after a changelog flush cut short; a retry stamped with a later time moves
  nothing). The decision is a function of the key's
  entry, the group's watermark and the capture, so re-processed records get the same answers as
  the first time when the watermarks are restored from one point of the log and every entry from
  that point or later (the frames worker's changelog, :mod:`streams.frames.changelog`).
* **Eviction** (garbage collection: no change of answer, but for the one case at the end): closed frames are dropped once the
  key's last capture is below the committed offset (so no re-processing can reach them);
  a key's entry that holds its group's greatest event time is kept, so the group watermark can be
  rebuilt from the state alone. ``window_ms=None`` means unbounded: frames never close, as in
  hive-mind's own store. One exception: an event id read again at a later offset after its frame
  was evicted is decided as a new capture (it can open a frame that later captures join), so its
  answer, and theirs, depend on when the sweeps ran (:mod:`streams.frames.changelog`, "Not covered").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, Literal, NamedTuple

from streams.frames.capture import Capture
from streams.model.key_groups import key_group
from streams.settings import DEFAULT_ALLOWED_LATENESS_MS, DEFAULT_WINDOW_MS

DEFAULT_SWEEP_EVERY = 20_000  # captures between eviction sweeps


class FrameEvent(NamedTuple):
    """What the dedup core emits for every capture (the ``frames`` topic payload; a named tuple).

    Attributes:
        kind: ``created`` (the capture became a frame) or ``touched`` (a duplicate).
        frame_id: the frame's id = the first writer's event id.
        capture: the capture itself (its provenance is recorded either way).
        frame_time_ms: the frame's anchor (first writer's event time), epoch ms.
        late: the capture's event time was below its key group's watermark when first processed.
    """

    kind: Literal["created", "touched"]
    frame_id: str
    capture: Capture
    frame_time_ms: int
    late: bool = False


Decision = tuple[bool, str, int, bool]
"""What the dedup core decided for one capture: ``(created, frame id, the frame's anchor (epoch ms), late)``
(:class:`FrameEvent` without the capture; ``created`` False is a touch)."""


def group_of_key(key: str) -> int:
    """The key group of a dedup key: the group of the 64-hex body hash it ends with.

    ``body`` keys are the hash; ``body+event`` keys are ``<event>:<hash>``; KnowHub experience keys
    are hex digests too. A key that does not end in 8+ hex digits falls in group 0.
    """
    tail = key[-64:] if len(key) >= 64 else key
    try:
        return key_group(tail)
    except ValueError:
        return 0


# one frame in the state: [frame_id, anchor_ms, close_ms | None, late_flag, [absorbed event ids...],
# [the event ids of its late touches...] (a subset of the absorbed ones), [the absorbed captures' event times (ms)...]
# (parallel to the absorbed ids: the time each had when it was processed as new)]. Entries written before the sixth
# and seventh items existed have five or six; they are read as having no late touch and no times.
_ID, _ANCHOR, _CLOSE, _LATE, _ABSORBED, _LATE_TOUCHES, _TIMES = range(7)


class DedupFold:
    """Per-key event-time window dedup over a key → state mapping (see the module docstring).

    Args:
        window_ms: W in milliseconds, or ``None`` for unbounded.
        allowed_lateness_ms: L: how far the watermark trails the greatest event time of a key group (ms).
        state: key → ``{"f": [[frame_id, anchor_ms, close_ms, late, [event ids], [late touches' event ids],
            [the event ids' event times, ms]], ...],
            "g": the group's greatest event time after this key's last capture (ms),
            "p": [partition, offset] of the key's last capture}``; JSON-serialisable.
        sweep_every: run :meth:`evict` after this many captures (0 disables automatic sweeps).
        owns: which keys this core may evict (a faust table may only change keys of the
            partition being processed); all keys when ``None``.
        committed: ``(partition) -> offset``: the first offset of ``partition`` that could still be
            processed again (the committed offset); frames of a key whose last capture is below it
            may be evicted. ``None``: everything processed is committed (the embedded runner stores
            state and rows in one transaction).
        group_of: key → key group (default :func:`group_of_key`).
        watermarks: key group → its greatest event time (ms) at the point of the log ``state`` was
            taken at, when known apart from the state (the frames worker's changelog marker,
            :mod:`streams.frames.changelog`); ``None``: rebuilt from the state's entries
            (:meth:`rebuild_watermarks`), right only for a state taken at one point of the log.
        since_sweep: captures processed since the last sweep when ``state`` was taken (the
            embedded runner stores it with the state, so a resumed run sweeps where an
            uninterrupted one does and keeps the same state; :attr:`since_sweep`).

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
        committed: Callable[[int], int | None] | None = None,
        group_of: Callable[[str], int] = group_of_key,
        watermarks: Mapping[int, int] | None = None,
        since_sweep: int = 0,
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
        self.committed = committed
        self.group_of = group_of
        self.group_max: dict[int, int] = {}
        self._since_sweep = since_sweep
        if watermarks is None:
            self.rebuild_watermarks()
        else:
            self.group_max.update(watermarks)

    @property
    def since_sweep(self) -> int:
        """Captures processed since the last sweep (:meth:`evict`); the next runs after ``sweep_every``."""
        return self._since_sweep

    def rebuild_watermarks(self) -> None:
        """Rebuild the per-group greatest event times from the state (after a restore).

        Every key's entry carries its group's greatest event time as of its last capture, and
        eviction keeps the entry that holds the greatest one, so the maximum over the entries of a
        group is the group's value at the end of the restored prefix.
        """
        gm: dict[int, int] = {}
        for k, v in list(self.state.items()):
            if self.owns is not None and not self.owns(k):
                continue
            g = self.group_of(k)
            if v["g"] > gm.get(g, -(2**62)):
                gm[g] = v["g"]
        for g, t in gm.items():
            if t > self.group_max.get(g, -(2**62)):
                self.group_max[g] = t

    def watermark_ms(self, group: int) -> int | None:
        """Event-time watermark of key group ``group``: its greatest event time minus L (ms), or None."""
        t = self.group_max.get(group)
        return None if t is None else t - self.allowed_lateness_ms

    def process(self, c: Capture) -> FrameEvent:
        """Dedup one capture and return the frame event it produces (never raises on data)."""
        created, frame_id, anchor, late = self.decide(c.event_id, c.key, c.event_time_ms, c.partition, c.offset)
        return FrameEvent("created" if created else "touched", frame_id, c, anchor, late)

    def decide(self, event_id: str, key: str, t: int, partition: int, offset: int) -> Decision:
        """Dedup one capture given by the fields the decision reads (:meth:`process` without the
        :class:`Capture` and the :class:`FrameEvent`: ``hivestream run`` keeps the other fields in
        columns, :mod:`hivestream.embedded.blocks`).

        Args:
            event_id, key: the capture's event id and dedup key.
            t: its event time, epoch ms.
            partition, offset: where it was read.

        Returns:
            :data:`Decision`. Never raises on data.
        """
        st = self.state.get(key)
        frames: list[list[Any]] = [] if st is None else st["f"]
        for f in frames:  # processed before (at-least-once re-delivery): the same answer, no change of state
            if event_id in f[_ABSORBED]:
                return self._again(event_id, key, f)
        g = self.group_of(key)
        prev = self.group_max.get(g)
        late = prev is not None and t < prev - self.allowed_lateness_ms
        gmax = t if prev is None or t > prev else prev
        self.group_max[g] = gmax
        wm = gmax - self.allowed_lateness_ms
        w = self.window_ms
        out: Decision | None = None
        frames = [list(f) for f in frames]
        for f in frames:
            if (f[_CLOSE] is None or f[_CLOSE] >= wm) and (w is None or abs(t - f[_ANCHOR]) <= w):
                if len(f) <= _TIMES:  # an entry from before the late touches and times were kept
                    f[_LATE_TOUCHES:] = [f[_LATE_TOUCHES] if len(f) > _LATE_TOUCHES else [], [None] * len(f[_ABSORBED])]
                f[_ABSORBED] = [*f[_ABSORBED], event_id]
                f[_TIMES] = [*f[_TIMES], t]
                if late:  # remembered, so a re-processed late touch is flagged late again
                    f[_LATE_TOUCHES] = [*f[_LATE_TOUCHES], event_id]
                out = (False, f[_ID], f[_ANCHOR], late)
                break
        if out is None:
            close = None if w is None else max(t, wm) + w
            frames.append([event_id, t, close, late, [event_id], [], [t]])
            out = (True, event_id, t, late)
        self.state[key] = {"f": frames, "g": gmax, "p": [partition, offset]}
        self._since_sweep += 1
        if self.sweep_every and self._since_sweep >= self.sweep_every:
            self.evict()
        return out

    def _again(self, event_id: str, key: str, f: list[Any]) -> Decision:
        """The answer of a capture that frame ``f`` absorbed before; the watermark moves as the first time.

        The group's greatest event time takes the event time the absorbed capture had when it was
        processed as new (kept in the frame), not the capture's own: a no-op when the watermarks come from the
        same point of the log as the state or later (they hold it already: an uninterrupted run, the
        embedded runner), and what keeps the next captures' watermark right when the state holds
        entries from later in the log than the watermarks (a changelog flush cut short,
        :mod:`streams.frames.changelog`). The capture's own time may differ from it (a retried POST that
        names its event id and no time gets a later receive time): a read-again capture moves no
        watermark past what its first reading did. An entry written before the times were kept
        moves nothing.
        """
        i = f[_ABSORBED].index(event_id)
        first = f[_TIMES][i] if len(f) > _TIMES else None
        if first is not None:
            g = self.group_of(key)
            prev = self.group_max.get(g)
            if prev is None or first > prev:
                self.group_max[g] = first
        created = f[_ID] == event_id
        late = bool(f[_LATE]) if created else len(f) > _LATE_TOUCHES and event_id in f[_LATE_TOUCHES]
        return created, f[_ID], f[_ANCHOR], late

    def evict(self) -> int:
        """Drop closed frames that no re-processing can reach (garbage collection only).

        A frame is dropped when its close time is below its group's watermark and its key's last
        capture is below the committed position of its partition; a key with no frame left is
        deleted unless its entry holds its group's greatest event time.

        Returns:
            The number of frames dropped (0 for an unbounded window).
        """
        self._since_sweep = 0
        if self.window_ms is None:
            return 0
        dropped = 0
        committed: dict[int, int | None] = {}
        lateness, group_max, group_of, owns = self.allowed_lateness_ms, self.group_max, self.group_of, self.owns
        for k, v in list(self.state.items()):
            if owns is not None and not owns(k):
                continue
            if self.committed is not None:
                part, off = v["p"]
                if part not in committed:
                    committed[part] = self.committed(part)
                limit = committed[part]
                if limit is None or off >= limit:
                    continue
            g = group_of(k)
            gmax = group_max.get(g)
            if gmax is None:
                continue
            wm = gmax - lateness
            fs = v["f"]
            live = [f for f in fs if f[_CLOSE] >= wm]
            if len(live) == len(fs):
                continue
            dropped += len(fs) - len(live)
            if live or v["g"] >= gmax:
                self.state[k] = {**v, "f": live}
            else:
                del self.state[k]
        return dropped
