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

import os

from streams.deadletter import RejectedInput
from streams.events import HookEvent
from streams.experiences.settings import KbSettings
from streams.frames.capture import DEFAULT_MAX_BODY_BYTES, capture_body_hash

KEY_GROUPS = 256
_GROUP_PREFIX = "kg:"
_GROUP_KEYS = tuple(f"{_GROUP_PREFIX}{g}".encode() for g in range(KEY_GROUPS))


def key_group(body_hash: str) -> int:
    """The key group of a body hash: its first 32 bits as an unsigned integer, mod :data:`KEY_GROUPS`.

    Args:
        body_hash: 64-hex SHA-256 (:func:`streams.body_hash.body_hash`); any hex string of at
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


def hook_event_key(ev: HookEvent, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, kb_settings: KbSettings | None = None) -> bytes:
    """The ``hook-events`` record key of ``ev``.

    A capture (an event with turn text) is keyed by the key group of its body hash
    (:func:`group_record_key`); anything else, and a capture whose body the worker will reject,
    by its session scope (UTF-8). The key strategy does not matter here: ``body+event`` keys refine
    ``body`` keys, so both strategies find all their captures in one partition.

    Args:
        ev: a validated hook event.
        max_body_bytes: the body limit the worker applies (a rejected body keeps the session key).
        kb_settings: the KnowHub settings the worker uses (the privacy mode changes the
            experience key); default: from the environment.

    Returns:
        The key bytes; pass them to the producer and let its default partitioner pick the partition.
    """
    try:
        h = capture_body_hash(ev, max_body_bytes=max_body_bytes)
    except RejectedInput:
        h = None
    if h is not None:
        return _GROUP_KEYS[int(h[:8], 16) % KEY_GROUPS]
    kb = experience_dedup_key(ev, kb_settings)
    if kb is not None:
        return group_record_key(key_group(kb))
    return ev.session.encode()


_ENV_KB_SETTINGS: dict[tuple[tuple[str, str], ...], KbSettings] = {}


def env_kb_settings() -> KbSettings:
    """``KbSettings()`` as the environment sets it now, built once per distinct ``HIVESTREAM_KB_*``
    environment (pydantic-settings reads the environment in ~0.5 ms, once per KnowHub line before)."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith("HIVESTREAM_KB_")))
    s = _ENV_KB_SETTINGS.get(env)
    if s is None:
        if len(_ENV_KB_SETTINGS) > 16:
            _ENV_KB_SETTINGS.clear()
        s = _ENV_KB_SETTINGS[env] = KbSettings()
    return s


def experience_dedup_key(ev: HookEvent, kb_settings: KbSettings | None = None) -> str | None:
    """The experience dedup key a KnowHub submission in ``ev`` gets, or None (not a submission, or rejected)."""
    from streams.experiences.events import ExperienceSubmitted
    from streams.experiences.from_hooks import KbDeriver, tool_call

    if ev.source != "knowhub":
        call = tool_call(ev)
        if call is None or call[0] != "kb_submit":
            return None
    try:
        derived = KbDeriver(kb_settings or env_kb_settings()).derive(ev)
    except RejectedInput:
        return None
    for d in derived:
        if isinstance(d, ExperienceSubmitted):
            return d.dedup_key
    return None
