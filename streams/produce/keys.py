"""The ``hook-events`` record key of a hook event: the frames pipeline's key for a capture, the
KnowHub pipeline's for a submission, the session otherwise (the key groups are
:mod:`streams.model.key_groups`; why a body's captures share one partition is said there).
"""

from __future__ import annotations

from streams.experiences.keys import experience_dedup_key
from streams.experiences.settings import ExperienceSettings
from streams.frames.capture import capture_body_hash
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent
from streams.model.key_groups import _GROUP_KEYS, KEY_GROUPS, group_record_key, key_group
from streams.settings import DEFAULT_MAX_BODY_BYTES


def hook_event_key(ev: HookEvent, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, kb_settings: ExperienceSettings | None = None) -> bytes:
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
