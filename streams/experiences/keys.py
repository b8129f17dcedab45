"""The experience dedup key of a KnowHub submission, as the front door keys it onto ``hook-events``
(:mod:`streams.produce.keys`): the key group of this key sends every submission of one experience
to one partition, so the one-day experience dedup sees them in log order.
"""

from __future__ import annotations

import os

from streams.experiences.events import ExperienceSubmitted
from streams.experiences.from_hooks import ExperienceDeriver, tool_call
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent

_ENV_KB_SETTINGS: dict[tuple[tuple[str, str], ...], ExperienceSettings] = {}


def env_kb_settings() -> ExperienceSettings:
    """``ExperienceSettings()`` as the environment sets it now, built once per distinct ``HIVESTREAM_KB_*``
    environment (pydantic-settings reads the environment in ~0.5 ms, once per KnowHub line before)."""
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.upper().startswith("HIVESTREAM_KB_")))
    s = _ENV_KB_SETTINGS.get(env)
    if s is None:
        if len(_ENV_KB_SETTINGS) > 16:
            _ENV_KB_SETTINGS.clear()
        s = _ENV_KB_SETTINGS[env] = ExperienceSettings()
    return s


def experience_dedup_key(ev: HookEvent, kb_settings: ExperienceSettings | None = None) -> str | None:
    """The experience dedup key a KnowHub submission in ``ev`` gets, or None (not a submission, or rejected)."""
    if ev.source != "knowhub":
        call = tool_call(ev)
        if call is None or call[0] != "kb_submit":
            return None
    try:
        derived = ExperienceDeriver(kb_settings or env_kb_settings()).derive(ev)
    except RejectedInput:
        return None
    for d in derived:
        if isinstance(d, ExperienceSubmitted):
            return d.dedup_key
    return None
