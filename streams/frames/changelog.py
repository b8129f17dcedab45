"""The frames worker's dedup state on a changelog topic: what one flush writes, and the restore.

The frames worker (:mod:`streams.workers.hooks`) keeps each partition's
:class:`~streams.frames.dedup.DedupCore` state in a :class:`~streams.model.tracked_state.TrackedState`
in front of the faust table ``dedup-state``, and writes the keys changed since the last flush to the
table's changelog topic right before faust commits offsets (and when the partition is revoked). A
worker that takes the partition over restores the state from the compacted changelog and processes
again every record since the last committed offset.

Pure: the worker does the I/O (it encodes each value with orjson, ``None`` is a tombstone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from streams.frames.dedup import DedupCore
from streams.model.tracked_state import TrackedState

CoreFactory = Callable[[TrackedState], DedupCore]


def _identity(v: Any) -> Any:
    return v


class PartitionChangelog:
    """One partition's dedup core and the records of its changelog flushes.

    Args:
        partition: the ``hook-events`` partition (= the changelog partition) the core serves.
        core: its dedup core; ``core.state`` must be a :class:`TrackedState`.

    Raises:
        TypeError: when ``core.state`` is not a :class:`TrackedState`.
    """

    def __init__(self, partition: int, core: DedupCore) -> None:
        if not isinstance(core.state, TrackedState):
            raise TypeError("the core's state must be a TrackedState (it tracks the changed keys)")
        self.partition = partition
        self.core = core
        self.state: TrackedState = core.state

    @classmethod
    def restore(cls, partition: int, items: Iterable[tuple[str, Any]], owns: Callable[[str], bool],
                make_core: CoreFactory, decode: Callable[[Any], Any] = _identity) -> PartitionChangelog:
        """Build the partition's core from the restored changelog contents.

        Args:
            partition: the partition.
            items: (key, value) pairs of the table (every partition it holds; ``None`` values are
                deleted keys).
            owns: whether a state key belongs to ``partition``.
            make_core: builds the core around its restored state.
            decode: turns a stored value into its dict (e.g. ``orjson.loads``), called for the
                partition's keys only.

        Raises:
            whatever ``decode`` raises for a value it cannot read.
        """
        entries = {k: decode(v) for k, v in items if v is not None and owns(k)}
        return cls(partition, make_core(TrackedState(entries)))

    def flush(self) -> list[tuple[str, Any | None]]:
        """The changelog records of the keys changed since the last flush, in the order to write them.

        Returns:
            (state key, its value as a JSON-able dict, or ``None`` for a deleted key) pairs: the
            changed keys, then the deleted ones; empty when nothing changed.
        """
        upserts, deletes = self.state.drain()
        return [*upserts.items(), *((k, None) for k in deletes)]
