"""The aiokafka ``ConsumerRecord`` fields hivestream's batch consumer and the workers' batch handlers read, for tests."""

from __future__ import annotations

from typing import Any, NamedTuple


class Rec(NamedTuple):
    """A fetched record as aiokafka gives it (``topic``, ``partition``, ``offset``, ``timestamp`` in epoch ms, ``key``, ``value``), the rest defaulted."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    timestamp_type: int = 0
    headers: tuple[Any, ...] = ()
    checksum: None = None
    serialized_key_size: int = 0
    serialized_value_size: int = 0
