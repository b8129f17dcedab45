"""How a hook event is keyed when it enters Kafka: by the key group of its body hash.

Every capture of one body must reach the dedup step through one partition, in the order the log
holds it, whatever the partition count; and the event-time watermark that decides when a frame
closes must not depend on which other bodies share that partition. Both follow from keying
``hook-events`` by a **key group**: ``int(body_hash[:8], 16) % KEY_GROUPS`` (the role Flink's
key groups / max parallelism play). The record key is ``b"kg:<group>"``, so any Kafka client's
default partitioner (murmur2 of the key, mod the partition count) sends a whole key group to one
partition; the dedup step keeps one watermark per key group, so its decisions depend only on the
sequence of that group's captures, which is the same on every partition count, live and on replay,
and in the embedded runner.

KnowHub submissions (a ``kb_submit`` tool call, a KnowHub ``experience-submitted`` line) are keyed
the same way by the key group of the experience's dedup key, so the experience dedup (window one
day) sees each group's submissions in log order too. Other events that carry no turn text (tool
calls, session starts, plugin hooks) keep the session key, so a session's events stay ordered; an
event whose body is rejected (empty, too large) also keeps the session key and is dead-lettered by
the worker as before.

``KEY_GROUPS`` is fixed for the life of a topic: it bounds the useful partition count (256).
"""

from __future__ import annotations

KEY_GROUPS = 256
_GROUP_PREFIX = "kg:"
_GROUP_KEYS = tuple(f"{_GROUP_PREFIX}{g}".encode() for g in range(KEY_GROUPS))


def key_group(body_hash: str) -> int:
    """The key group of a body hash: its first 32 bits as an unsigned integer, mod :data:`KEY_GROUPS`.

    Args:
        body_hash: 64-hex SHA-256 (:func:`streams.model.body_hash.body_hash`); any hex string of at
            least 8 characters.

    Raises:
        ValueError: when ``body_hash`` does not start with 8 hex digits.
    """
    return int(body_hash[:8], 16) % KEY_GROUPS


def group_record_key(group: int) -> bytes:
    """The ``hook-events`` record key of key group ``group`` (``b"kg:17"``)."""
    if 0 <= group < KEY_GROUPS:
        return _GROUP_KEYS[group]
    return f"{_GROUP_PREFIX}{group}".encode()
