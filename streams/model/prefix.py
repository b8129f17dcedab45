"""The hive-mind frame prefix ``[hm session:… parent:… src:… event:… project:…] BODY``.

Source: docs/design.md#frame-prefix-and-dedup-key and hive-mind's ``buildPrefix`` (shim-core ``frame-encoder.ts``) and
``stripHmPrefix`` (``content.replace(/^\\[hm [^\\]]*\\]\\s*/, '')``) as quoted in
hive-mind's OQ-6 dedup design (docs/design.md#sources) §3–4.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from streams.model.jsstring import JS_WS_RE

# The JS regex /^\[hm [^\]]*\]\s*/ : [^\]] matches any code unit but ']', newlines included;
# \s is the ECMAScript whitespace set, not Python's.
HM_PREFIX_RE = re.compile(r"\A\[hm [^\]]*\]" + JS_WS_RE + "*")

DEFAULT_SCOPE = "default"


@dataclass(frozen=True, slots=True)
class Provenance:
    """The tokens of an ``[hm …]`` prefix.

    Attributes:
        source: capturing runtime (``src:``), e.g. ``claude-code``, ``codex``, ``openclaw``.
        session: session scope (``session:``); ``default`` is omitted from the prefix.
        parent: parent frame or session id (``parent:``), optional.
        event: hook event type (``event:``), optional, e.g. ``stop``.
        project: project name (``project:``), optional.
    """

    source: str
    session: str = DEFAULT_SCOPE
    parent: str | None = None
    event: str | None = None
    project: str | None = None


_BAD_TOKEN = re.compile(r"[\s\]]")  # Python's str.isspace() set (re's \s on str patterns) and "]"


def build_prefix(p: Provenance) -> str:
    """Build the prefix for ``p``: ``"[hm " + tokens + "] "`` in hive-mind's token order.

    Tokens, each only when set: ``session:<scope>`` (omitted for ``default``), ``parent:<id>``,
    ``src:<source>`` (always), ``event:<type>``, ``project:<project>``.

    Raises:
        ValueError: when a token value is empty or contains ``]`` or whitespace, which would
            make the prefix unparseable by ``stripHmPrefix``.
    """
    pairs: list[tuple[str, str]] = []
    if p.session and p.session != DEFAULT_SCOPE:
        pairs.append(("session", p.session))
    if p.parent:
        pairs.append(("parent", p.parent))
    pairs.append(("src", p.source))
    if p.event:
        pairs.append(("event", p.event))
    if p.project:
        pairs.append(("project", p.project))
    for key, value in pairs:  # a value may end in ":" (a session id "s:"): parse_prefix splits at the first one
        if not value or _BAD_TOKEN.search(value):
            raise ValueError(f"prefix token {key}:{value!r} is empty or contains ']' or whitespace")
    return "[hm " + " ".join(f"{key}:{value}" for key, value in pairs) + "] "


def strip_hm_prefix(content: str) -> str:
    """Remove a leading ``[hm …]`` prefix and the JS whitespace after it, as hive-mind does.

    Content without the prefix is returned unchanged; a ``[`` later in the body is never
    touched (the regex is anchored at the start).
    """
    m = HM_PREFIX_RE.match(content)
    return content[m.end():] if m else content


_TOKEN_KEYS = {"session", "parent", "src", "event", "project"}


def parse_prefix(content: str) -> tuple[Provenance | None, str]:
    """Split ``content`` into its parsed prefix and the body after it.

    Unknown tokens are ignored; a prefix without ``src:`` yields source ``unknown``.

    Returns:
        ``(provenance, body)``; ``(None, content)`` when there is no ``[hm …]`` prefix.
    """
    m = HM_PREFIX_RE.match(content)
    if not m:
        return None, content
    inner = content[4 : content.index("]")]
    fields: dict[str, str] = {}
    for tok in inner.split():
        key, sep, value = tok.partition(":")
        if sep and key in _TOKEN_KEYS and key not in fields:
            fields[key] = value
    prov = Provenance(
        source=fields.get("src", "unknown"),
        session=fields.get("session", DEFAULT_SCOPE),
        parent=fields.get("parent"),
        event=fields.get("event"),
        project=fields.get("project"),
    )
    return prov, content[m.end():]
