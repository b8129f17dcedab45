"""hivestream's own blocks in text an agent was given, and their removal before the text is captured again.

hivestream hands memory back to agents inside tagged blocks: ``<knowhub-experiences …>`` (``kb
search --format prompt``, the MCP tools, the OpenClaw plugin's index), ``<knowhub-experience …>``,
``<knowhub-guidance>`` and ``<knowhub-reminder …>`` (the OpenClaw plugin,
``hivestream/hooks/openclaw_knowhub/lib/format.js``) and any ``<hivestream-NAME …>`` block (frames
recall, memory stubs). A reply or a transcript that quotes such a block must not become a frame or
an experience of it (a loop: memory-lancedb-pro #85), so the capture step and the experience
builders pass their text through :func:`strip_injected` first. A block is its opening tag, everything
up to the matching closing tag, and the rest of the closing tag's line; the plugin's follow-up line
``Call kb_content with an id for the whole experience.`` right after a block goes with it, as the
plugin's own ``stripInjected`` removes it. An opening tag without its closing tag is left as it is
(it is no block hivestream wrote). Pure; :func:`has_injected` is a substring test, so text without
a block costs one scan.
"""

from __future__ import annotations

import re

MARKERS = ("<knowhub-", "<hivestream-")
"""What every block hivestream injects starts with."""

_BLOCK = re.compile(r"<(knowhub-[a-z]+|hivestream-[a-z][a-z-]*)\b[^>]*>.*?</\1>[^\n]*(?:\n|\Z)"
                    r"(?:Call kb_content with an id for the whole experience\.[^\n]*(?:\n|\Z))?", re.DOTALL)


def has_injected(text: str) -> bool:
    """Whether ``text`` may hold a block hivestream injected (one of :data:`MARKERS` occurs in it)."""
    return any(m in text for m in MARKERS)


def strip_injected(text: str) -> str:
    """``text`` without the blocks hivestream injected (see the module docstring); ``text`` itself when it holds none."""
    if not has_injected(text):
        return text
    return _BLOCK.sub("", text)
