"""OpenClaw's media placeholders: what a channel puts in a message's ``content`` before media understanding (pure).

OpenClaw's hooks docs say ``message:received`` "fires early in processing before media
understanding. Content may contain raw placeholders like ``<media:audio>``"; the channels write
``<media:image>``, ``<media:video>``, ``<media:audio>``, ``<media:document>``, ``<media:sticker>``,
``<media:gif>``, ``<media:attachment>``, some with a count (``<media:image> (2 images)``). A body
of placeholders alone is no turn: two voice notes from two contacts would otherwise be one frame.
"""

from __future__ import annotations

import re

_PLACEHOLDERS = re.compile(r"(?:<media:[a-z_]+>(?: \(\d+ [a-z]+\))?\s*)+")


def is_placeholder(body: str) -> bool:
    """True when ``body`` holds nothing but media placeholders (whitespace around them allowed)."""
    return "<media:" in body and _PLACEHOLDERS.fullmatch(body.strip()) is not None
