"""Kafka's default partitioner with each key's hash computed once.

``hook-events`` keys are few and repeat (``kg:<0..255>`` for every capture, session keys for the
rest, see :mod:`streams.model.key_groups`), while aiokafka's :class:`~aiokafka.partitioner.DefaultPartitioner`
runs its pure-Python murmur2 on every record (a few µs each). :class:`MemoPartitioner` keeps
``murmur2(key) & 0x7fffffff`` per key and picks ``all_partitions[hash % len(all_partitions)]``:
the same partition the default partitioner (and the Java client) picks, whatever the partition
count. Source: aiokafka ``partitioner.py`` (the Java client's ``Utils.murmur2`` / ``toPositive``).
"""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner, murmur2

MAX_KEYS = 65_536
"""Keys remembered before the memo starts over (bounds memory when keys do not repeat)."""


class MemoPartitioner:
    """A drop-in ``partitioner`` for :class:`aiokafka.AIOKafkaProducer` (call signature of
    :class:`~aiokafka.partitioner.DefaultPartitioner`).

    Args:
        max_keys: keys remembered at most; the memo is cleared when it is full.
    """

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._hashes: dict[bytes, int] = {}
        self._max_keys = max_keys

    def __len__(self) -> int:
        return len(self._hashes)

    def __call__(self, key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        """The partition of ``key``: one of ``all_partitions`` (sorted ids, never empty); a record
        without a key gets a random available partition, as with the default partitioner."""
        if key is None:
            return int(DefaultPartitioner()(key, all_partitions, available))
        h = self._hashes.get(key)
        if h is None:
            if len(self._hashes) >= self._max_keys:
                self._hashes.clear()
            h = self._hashes[key] = murmur2(key) & 0x7FFFFFFF
        return all_partitions[h % len(all_partitions)]
