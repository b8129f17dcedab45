"""The frames worker's dedup state on a changelog topic: what one flush writes, in a prefix-safe order, and the restore.

The frames worker (:mod:`streams.workers.frames`) keeps each partition's
:class:`~streams.frames.dedup.DedupFold` state in a :class:`~streams.model.tracked_state.TrackedState`
in front of the faust table ``dedup-state``, and writes the keys changed since the last flush to the
table's changelog topic right before faust commits offsets (and when the partition is revoked). A
worker that takes the partition over restores the state from the compacted changelog and processes
again every record since the last committed offset C. A kill -9 in the middle of a flush leaves an
arbitrary prefix of the flush's records in the changelog.

**The bug this order fixes.** A key's entry carries ``"g"``, its key group's greatest event time at
the key's last capture, and the core used to rebuild each group's watermark as the maximum over the
restored entries. After a cut flush some entries hold their value at the cut flush's drain point D1
and the others their value at the previous flush's D0; an entry from D1 brings D1's watermark to
the records between C and D1 of the keys still at D0, which are decided again: they can be flagged
late, or find a frame closed that was open the first time (another frame id), or the reverse.
Example (W = 1000, L = 300, keys A, B, C of one group, all after C): ``b1`` (B, t=0) creates a frame
that closes at 1000; ``c1`` (C, t=2000) moves the watermark to 1700; ``b2`` (B, t=500) finds that
frame closed and creates its own (late); ``a1`` (A, t=5000). The flush is cut after A's entry: the
rebuilt watermark is 4700 at once, so ``b1`` and ``c1`` come out late, ``b1``'s frame now closes at
5700, and ``b2`` becomes a touch of ``b1`` instead of a frame of its own.

**The order.** A flush writes:

1. the partition's *watermark marker* (key :func:`marker_key`: every key group's greatest event
   time) as restored, when the changelog holds none yet (a partition's first flush, or a changelog
   written before the markers);
2. the changed keys' entries and the deleted keys' tombstones, by key (any order would do);
3. the marker with the group maxima at the drain point: only once every entry is written.

The restore takes the watermarks from the marker (:meth:`PartitionChangelog.restore`), so it gets
the maxima of the last *complete* flush's drain point D0 with every entry at D0 or D1, and the core
moves the watermark on by the event time a record it has absorbed already had when it was first
processed (kept in the frame; ``DedupFold._again``). Why every prefix then gives the first run's answers, record by record from C:

* a record up to D0 has its key's entry at D0 or D1, which absorbed it (eviction drops only frames
  of keys whose last capture is below the committed offset, so never one a re-processing reaches):
  the same answer again, late flag included, and the watermark takes its first event time as the
  first time did (a record that was itself a read-again the first time moves it by its original's
  time, which the first run held already); at D0 the watermarks are exactly D0's again;
* a record between D0 and D1 of a key at D1: the same, absorbed; of a key at D0: decided again from
  the same entry (an entry changes only by its key's own records, and by eviction, which drops only
  frames no later capture can touch) and the same group maximum (the marker's, raised by every
  event time of the group replayed since) as the first time, so the same answer and entry;
* after D1 the state and watermarks are the first run's, up to frames the first run had evicted
  already (no answer depends on those).

A changelog without a marker (written before this order) falls back to the rebuild from the
entries: right when the last flush was complete, as before.

**Not covered** (a strict xfail in ``tests/streams/test_dedup_changelog_attack.py``): a record whose event
id a frame absorbed at an *earlier offset* (a producer retry, an input imported twice). Once that
frame is evicted the record is decided as new, and whether a sweep ran before it depends on the
captures counted since the core was built and on the committed offset then, which a restore
changes. (Such a record, while its frame is held, moves the watermark by the time its first reading
had, not by its own: a retry stamped with a later receive time moves nothing, as before the marker.)
An entry written before the frames kept their absorbed captures' times moves no watermark when read
again, so a flush cut during the upgrade is covered only once the entries were rewritten.

Pure: the worker does the I/O (:class:`streams.kafka.partitioned_worker.PartitionedWorker` writes the
records in this order, each value encoded with orjson; ``None`` is a tombstone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streams.frames.dedup import DedupFold
from streams.model.tracked_state import TrackedState, drain_changes

MARKER_PREFIX = "~watermarks:"  # + the partition number (is_marker_key: a dedup key may start with it too)
_PARTITION_DIGITS = 10  # a Kafka partition number is below 2**31

CoreFactory = Callable[[TrackedState, Mapping[int, int] | None], DedupFold]
Records = list[tuple[str, Any | None]]


def marker_key(partition: int) -> str:
    """The state key of ``partition``'s watermark marker (``"~watermarks:3"``)."""
    return f"{MARKER_PREFIX}{int(partition)}"


def is_marker_key(key: str) -> bool:
    """Whether ``key`` is a watermark marker's key (of any partition) rather than a dedup key.

    A marker's key is :data:`MARKER_PREFIX` and a partition number (1 to 10 ASCII digits). A dedup
    key can start with the prefix too: a ``body+event`` key is ``<event type>:<body hash>``, and an
    event type is any token (``event:~watermarks`` in an ``[hm …]`` prefix gives
    ``~watermarks:<hash>``); but it ends with the 64 hex digits of its hash, so it is never taken
    for a marker (the restore would drop its entry).
    """
    if not key.startswith(MARKER_PREFIX):
        return False
    number = key[len(MARKER_PREFIX):]
    return 0 < len(number) <= _PARTITION_DIGITS and number.isascii() and number.isdigit()


def marker_value(group_max: Mapping[int, int]) -> dict[str, Any]:
    """A marker's value: ``{"watermarks": [[key group, greatest event time ms], ...]}``, by group."""
    return {"watermarks": [[int(g), int(t)] for g, t in sorted(group_max.items())]}


def parse_marker(value: Any) -> dict[int, int]:
    """Key group → greatest event time (ms) of a marker's value (:func:`marker_value`).

    Raises:
        ValueError: when ``value`` is not a marker's value.
    """
    try:
        return {int(g): int(t) for g, t in value["watermarks"]}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"not a watermark marker: {value!r:.200}") from e


def _identity(v: Any) -> Any:
    return v


class PartitionChangelog:
    """One partition's dedup core and the records of its changelog flushes (see the module docstring).

    Args:
        partition: the ``hook-events`` partition (= the changelog partition) the core serves.
        core: its dedup core; ``core.state`` must be a :class:`TrackedState`.
        marked: the group maxima of the marker the changelog holds for ``partition``, or ``None``
            when it holds none (the first flush then opens with the core's present maxima).

    Raises:
        TypeError: when ``core.state`` is not a :class:`TrackedState`.
    """

    def __init__(self, partition: int, core: DedupFold, marked: Mapping[int, int] | None = None) -> None:
        if not isinstance(core.state, TrackedState):
            raise TypeError("the core's state must be a TrackedState (it tracks the changed keys)")
        self.partition = partition
        self.core = core
        self.state: TrackedState = core.state
        self.key = marker_key(partition)
        self._base = dict(core.group_max)  # the maxima of the point of the log the state was restored at
        self._written: dict[int, int] | None = None if marked is None else dict(marked)

    @classmethod
    def restore(cls, partition: int, items: Iterable[tuple[str, Any]], owns: Callable[[str], bool],
                make_core: CoreFactory, decode: Callable[[Any], Any] = _identity) -> PartitionChangelog:
        """Build the partition's core from the restored changelog contents.

        Args:
            partition: the partition.
            items: (key, value) pairs of the table (every partition it holds; ``None`` values are
                deleted keys).
            owns: whether a dedup key belongs to ``partition``.
            make_core: builds the core around its restored state and watermarks (the marker's
                group maxima, or ``None`` without a marker: the core rebuilds them from the state).
            decode: turns a stored value into its dict (e.g. ``orjson.loads``), called for the
                partition's keys only.

        Raises:
            ValueError: for a marker that cannot be read; whatever ``decode`` raises.
        """
        entries: dict[str, Any] = {}
        marked: dict[int, int] | None = None
        key = marker_key(partition)
        for k, v in items:
            if v is None:
                continue
            if is_marker_key(k):
                if k == key:
                    marked = parse_marker(decode(v))
            elif owns(k):
                entries[k] = decode(v)
        return cls(partition, make_core(TrackedState(entries), marked), marked)

    def flush(self) -> Records:
        """The changelog records of one flush, in the order to write them (see the module docstring).

        Returns:
            (key, JSON-able value, or ``None`` for a deleted key) pairs: the opening marker (when
            the changelog holds none), the changed and deleted dedup keys by key, the closing
            marker; empty when no key changed and the watermarks are the ones written last.
        """
        changes = drain_changes(self.state)
        now = dict(self.core.group_max)
        last = self._base if self._written is None else self._written
        if not changes and now == last:
            return []
        out: Records = []
        if self._written is None:
            out.append((self.key, marker_value(self._base)))
        out += changes
        out.append((self.key, marker_value(now)))
        self._written = now
        return out
