"""A dict that remembers which keys changed, to write dedup state next to the rows.

The embedded runner persists the dedup core's state in the same DuckDB transaction as the
batch (the role a faust table's changelog topic plays on Kafka).
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, MutableMapping
from operator import itemgetter
from typing import Any


class TrackedState(MutableMapping[str, Any]):
    """A ``MutableMapping`` that records the keys set or deleted since the last :meth:`drain`.

    Args:
        initial: the state loaded at start (not counted as changes).
    """

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(initial or {})
        self._changed: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._data[key] = value
        self._changed.add(key)

    def __delitem__(self, key: str) -> None:
        del self._data[key]
        self._changed.add(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key``, or ``default`` (the dict's own lookup: the mixin's costs a ``KeyError``)."""
        return self._data.get(key, default)

    def items(self) -> ItemsView[str, Any]:
        """A view of the (key, value) pairs (the dict's own view)."""
        return self._data.items()

    def __len__(self) -> int:
        return len(self._data)

    def drain(self) -> tuple[dict[str, Any], list[str]]:
        """Return (keys set → their value, keys deleted) since the last call, and reset."""
        upserts = {k: self._data[k] for k in self._changed if k in self._data}
        deletes = [k for k in self._changed if k not in self._data]
        self._changed.clear()
        return upserts, deletes


def drain_changes(state: TrackedState, order: Callable[[str], Any] | None = None) -> list[tuple[str, Any | None]]:
    """The keys of ``state`` changed since its last :meth:`~TrackedState.drain`, as ``(key, value)``
    pairs (``None`` for a deleted key), sorted by ``order(key)`` (default: by key; ties keep the
    set keys before the deleted ones): what a worker writes to its changelog, in the pipeline's
    prefix-safe order."""
    upserts, deletes = state.drain()
    changes: list[tuple[str, Any | None]] = [*upserts.items(), *((k, None) for k in deletes)]
    if order is None:
        changes.sort(key=itemgetter(0))
    else:
        changes.sort(key=lambda kv: order(kv[0]))
    return changes
