"""The dedup hash and key (docs/design.md#frame-prefix-and-dedup-key).

``body_hash(content)`` equals hive-mind's JavaScript
``createHash('sha256').update(stripHmPrefix(content).trim()).digest('hex')``
(packages/hive-mind-core/src/mind/content-hash.ts in marolinik/waggle-os) for every string.
"""

from __future__ import annotations

import hashlib
from enum import StrEnum

from streams.model.jsstring import js_trim, js_utf8, to_js_utf16
from streams.model.prefix import strip_hm_prefix


class KeyStrategy(StrEnum):
    """How the dedup key is formed.

    ``body``: the body hash alone (default; provenance-insensitive, the seed's decision).
    ``body+event``: the body hash plus the event type, so different events never collide
    (the seed's noted narrowing, §7).
    """

    BODY = "body"
    BODY_EVENT = "body+event"


def stripped_body(content: str) -> str:
    """Return ``stripHmPrefix(content).trim()`` with JavaScript semantics.

    Lone surrogates are first read as Node reads them (U+FFFD), so the result always encodes
    to UTF-8.
    """
    return js_trim(strip_hm_prefix(to_js_utf16(content)))


def body_hash(content: str) -> str:
    """SHA-256 hex digest (64 chars) of the stripped, trimmed body, UTF-8 encoded as Node does."""
    return hashlib.sha256(js_utf8(stripped_body(content))).hexdigest()


def dedup_key(content_hash: str, event_type: str | None, strategy: KeyStrategy) -> str:
    """The key a capture is deduplicated (and partitioned) under.

    Args:
        content_hash: :func:`body_hash` of the content (64 hex chars).
        event_type: the capture's normalised event type, e.g. ``stop``.
        strategy: :class:`KeyStrategy`.

    Returns:
        ``content_hash`` for ``body``; ``"<event_type>:<content_hash>"`` for ``body+event``.
    """
    if strategy is KeyStrategy.BODY:
        return content_hash
    return f"{event_type or '-'}:{content_hash}"
