"""Which fetched records a consumer may deliver, and how far it may commit: the faust #596 fix, pure.

Source: faust-streaming issue #596 (open in 0.15.3). faust decides both questions with one number
per partition, ``_read_offset``, written by the fetch loop *after* it has handed a record on and by
every seek. A seek that lands while the loop holds records of an older fetch breaks it either way:

* a stale record beyond the seek position looks like a jump, faust marks the offsets in between as
  a "gap" (acked) and drops the refetched ones as already read: records are lost;
* records fetched after the seek but dropped from the stream queues by ``flow_control.resume()``
  (recovery seeks, then clears) are never acked and never refetched: the committed offset stops
  for good (the stall of #596).

:class:`DeliveryLedger` keeps, per partition, a seek *epoch* and the next offset expected from the
fetch position, and decides at the moment a record is handed on (no await in between):

* a record fetched under an older epoch is not delivered (the seek that bumped the epoch set a
  position at or below it, so the record is fetched again);
* a record below the next expected offset is a duplicate of one already delivered;
* a record above it, from the same continuous fetch, proves the offsets in between absent from the
  log (compaction, transaction markers, retention): only those become gaps a commit may skip.

:meth:`DeliveryLedger.commit_point` then commits only an unbroken run from the committed offset
through acked offsets and proven gaps. Nothing here does I/O; :mod:`streams.kafka.faust_app` wires it
into faust's consumer.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field


@dataclass
class _Partition:
    epoch: int = 0
    next: int | None = None  # next offset the fetch position will return; None = unknown
    floor: int | None = None  # lowest offset sought since assignment (the commit base while nothing is committed)
    gaps: list[list[int]] = field(default_factory=list)  # [start, end) offsets proven absent, sorted
    seeks: list[tuple[int, int | None]] = field(default_factory=list)  # (epoch, offset) of recent seeks
    seeking: bool = False  # a seek was started and its offset is not known yet


SEEK_HISTORY = 256
"""Seeks remembered per partition to judge records handed on before them (:meth:`DeliveryLedger.is_current`)."""


class DeliveryLedger:
    """Per-partition delivery state of one consumer (partitions are any hashable, e.g. faust ``TP``).

    Offsets are Kafka offsets (ints); "next" offsets follow Kafka's commit convention (the offset of
    the next record to read).
    """

    def __init__(self) -> None:
        self._parts: dict[Hashable, _Partition] = {}
        self._resync: set[Hashable] = set()  # fetched records were not handed on: position may be past next
        self._fetched: dict[Hashable, tuple[int, int]] = {}  # tp → (epoch, highest offset) of the last fetch

    def _part(self, tp: Hashable) -> _Partition:
        part = self._parts.get(tp)
        if part is None:
            part = self._parts[tp] = _Partition()
        return part

    def epochs(self) -> dict[Hashable, int]:
        """A snapshot of every partition's epoch, taken right before a fetch is dispatched."""
        return {tp: p.epoch for tp, p in self._parts.items()}

    def seeking(self, tp: Hashable) -> None:
        """A seek of ``tp`` started (its offset becomes known with :meth:`seeked`): records fetched
        from now until then are not handed on, since the position may move at any point in between;
        they are fetched again from the sought offset (:meth:`before_fetch`)."""
        self.seeked(tp, None)
        self._part(tp).seeking = True

    def seeked(self, tp: Hashable, offset: int | None) -> None:
        """The fetch position of ``tp`` was set to ``offset`` (None: unknown, e.g. left to the reset
        policy); records fetched before are stale from now on."""
        part = self._part(tp)
        part.epoch += 1
        part.next = offset
        if offset is not None and (part.floor is None or offset < part.floor):
            part.floor = offset  # the lowest offset sought since the partition was assigned
        part.seeking = False
        part.seeks.append((part.epoch, offset))
        del part.seeks[:-SEEK_HISTORY]
        if offset is not None:
            part.gaps = [g for g in part.gaps if g[1] <= offset]

    def forget(self, tp: Hashable) -> None:
        """``tp`` was revoked or newly assigned: drop what is known of it (records in flight are stale)."""
        old = self._part(tp)
        self._parts[tp] = _Partition(epoch=old.epoch + 1, seeks=[*old.seeks[-SEEK_HISTORY + 1:], (old.epoch + 1, None)])

    def is_current(self, tp: Hashable, epoch: int, offset: int) -> bool:
        """Whether a record of ``tp`` at ``offset``, handed on in ``epoch``, should still be processed.

        It should not when a later seek went to ``offset`` or below (or to an unknown position, or
        the partition was revoked): the record comes again from there, in order, and processing the
        old copy first would process the partition out of order (a live queue clear leaves one record
        stuck in faust's hand-over, which would otherwise overtake the rewound ones).
        """
        part = self._parts.get(tp)
        if part is None or part.epoch == epoch:
            return True
        if part.seeks and part.seeks[0][0] > epoch + 1:
            return False  # history trimmed past it: the safe answer is "comes again"
        return not any(e > epoch and (off is None or off <= offset) for e, off in part.seeks)

    def next_offset(self, tp: Hashable) -> int | None:
        """The next offset ``tp``'s fetch position returns, when known."""
        part = self._parts.get(tp)
        return None if part is None else part.next

    def needs_rewind(self, tp: Hashable, offset: int) -> bool:
        """Whether records from ``offset`` on would not be fetched again without a seek: the fetch
        position of ``tp`` is unknown or beyond ``offset`` (a rewind never seeks forward, which would
        skip records)."""
        nxt = self.next_offset(tp)
        return nxt is None or offset < nxt

    def epoch(self, tp: Hashable) -> int:
        """The current epoch of ``tp`` (0 for a partition never seen)."""
        part = self._parts.get(tp)
        return 0 if part is None else part.epoch

    def admit(self, fetched_at: Mapping[Hashable, int], tp: Hashable, offset: int, *, track_gaps: bool = True) -> bool:
        """Whether the record at ``offset`` of ``tp``, from a fetch dispatched at epochs
        ``fetched_at`` (:meth:`epochs`), is delivered; records the delivery when it is.

        Args:
            fetched_at: the epoch snapshot taken before the fetch.
            tp: the record's partition.
            offset: the record's offset.
            track_gaps: record skipped offsets as gaps (only for partitions whose offsets are committed:
                a compacted changelog's gaps would pile up otherwise).

        Returns:
            False for a record of a stale fetch, one fetched while a seek is in progress, or one
            already delivered since the last seek.
        """
        part = self._part(tp)
        if fetched_at.get(tp, 0) != part.epoch or part.seeking:
            self._resync.add(tp)  # the fetch position may have moved past it since the seek
            return False
        if part.next is not None:
            if offset < part.next:
                return False
            if offset > part.next and track_gaps:
                self._add_gap(part, part.next, offset)
        part.next = offset + 1
        return True

    def fetched(self, fetched_at: Mapping[Hashable, int], highest: Mapping[Hashable, int]) -> None:
        """A fetch dispatched at epochs ``fetched_at`` returned records up to ``highest[tp]`` per partition."""
        self._fetched = {tp: (fetched_at.get(tp, 0), hi) for tp, hi in highest.items()}

    def before_fetch(self) -> list[tuple[Hashable, int]]:
        """The (partition, offset) seeks to make before the next fetch so every record fetched but
        not handed on comes again: partitions with records of a stale fetch (the seek may have moved
        the position past them before the ledger heard of it) and partitions whose last fetch was
        not handed on to its end (faust's loop breaks off on a rebalance or a pause). The caller
        seeks, then calls :meth:`seeked`. A partition whose next offset is unknown waits."""
        for tp, (epoch, hi) in self._fetched.items():
            nxt = self.next_offset(tp)
            if self.epoch(tp) == epoch and nxt is not None and nxt <= hi:
                self._resync.add(tp)
        self._fetched = {}
        out = []
        for tp in list(self._resync):
            nxt = self.next_offset(tp)
            if nxt is not None:
                out.append((tp, nxt))
                self._resync.discard(tp)
        return out

    @staticmethod
    def _add_gap(part: _Partition, start: int, end: int) -> None:
        gaps = part.gaps
        if gaps and gaps[-1][1] >= start:
            gaps[-1][1] = max(gaps[-1][1], end)
        else:
            gaps.append([start, end])

    def gaps(self, tp: Hashable) -> list[tuple[int, int]]:
        """The [start, end) offset ranges of ``tp`` proven absent and not yet committed past."""
        part = self._parts.get(tp)
        return [] if part is None else [(a, b) for a, b in part.gaps]

    def commit_point(self, tp: Hashable, committed: int | None, acked: list[int]) -> tuple[int | None, int]:
        """How far ``tp`` may commit: the end of the unbroken run of acked offsets and proven gaps
        that starts at ``committed`` (or, with nothing committed yet, at the lowest offset sought since the
        partition was assigned; with
        neither known, nothing is committed).

        Args:
            tp: the partition.
            committed: the committed offset (next to read), None when the group has none.
            acked: acked offsets at or above ``committed``, sorted ascending, without repeats.

        Returns:
            (offset to commit or None when the run does not move, number of leading ``acked``
            entries the run used up: the caller removes them). Gaps the run passed are dropped.
        """
        part = self._part(tp)
        base = committed if committed is not None else part.floor
        if base is None:
            return None, 0  # nothing committed and no seek offset known: wait for the recovery's seek
        pos, i, gaps, g = base, 0, part.gaps, 0
        while True:
            if i < len(acked) and acked[i] < pos:
                i += 1
            elif i < len(acked) and acked[i] == pos:
                pos += 1
                i += 1
            elif g < len(gaps) and gaps[g][0] <= pos:
                pos = max(pos, gaps[g][1])
                g += 1
            else:
                break
        part.gaps = [gap for gap in gaps if gap[1] > pos]
        if committed is not None and pos <= committed:
            return None, i
        if committed is None and pos == base and i == 0:
            return None, 0
        return pos, i
