"""Redaction of a KnowHub-relevant hook event's raw payload, at ingest (pure, idempotent).

``hivestream produce`` applies :func:`scrub_kb_event` before a hook event is written to
``hook-events``, and the KnowHub step applies it again before deriving anything (a no-op on a
scrubbed event), so both paths see the same text and strict mode keeps raw secrets off every
topic. Only events the KnowHub path reads are touched: kb tool calls (``after_tool_call``,
``PostToolUse``), OpenClaw plugin hooks (``agent_end`` carries the session's messages) and
KnowHub event lines. Every string of their payload is redacted; the replacements made in the
experience fields (the tool arguments, or the line's task/resource/result) are counted under
``hivestream_redactions`` in the payload, so the count survives the trip through the topic.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from streams.model.events import HookEvent
from streams.redaction.redact import RedactionMode, strict_redaction

COUNTS_KEY = "hivestream_redactions"
MAX_SCRUB_CHARS = 65_536
"""A string of a KnowHub payload longer than this is cut to it (with a marker) before redaction:
redaction runs at about 2.5 MB/s, no experience field may exceed 8,000 characters, and the
extractor keeps only the last 24,000 characters of a transcript, so a huge string can only be
rejected or trimmed later; cutting it first keeps one record from stalling a partition."""
_PLUGIN = {"after_tool_call", "before_agent_start", "before_prompt_build", "agent_end"}
_EXPERIENCE_FIELDS = ("task", "resource", "result")


def _scrub(value: Any, mode: RedactionMode, counts: Counter[str] | None) -> Any:
    if mode == RedactionMode.RELAXED:  # a plain "relaxed" compares equal, as in redact()
        return value
    return _scrub_strict(value, counts)


def _scrub_strict(value: Any, counts: Counter[str] | None) -> Any:
    if isinstance(value, str):
        if len(value) > MAX_SCRUB_CHARS:
            value = value[:MAX_SCRUB_CHARS] + f" [truncated: {len(value) - MAX_SCRUB_CHARS} more characters]"
        text, found = strict_redaction(value)
        if found and counts is not None:
            counts.update(dict(found))
        return text
    if isinstance(value, dict):
        return {k: (v if k == COUNTS_KEY else _scrub_strict(v, counts)) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_strict(v, counts) for v in value]
    return value


def scrub_value(value: Any, mode: RedactionMode) -> Any:
    """A JSON value with every string redacted (keys kept)."""
    return _scrub(value, mode, None)


def _scrub_args(args: Any, mode: RedactionMode, counts: Counter[str]) -> Any:
    if isinstance(args, str):  # Codex passes tool arguments as a JSON string
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):
            return _scrub(args, mode, counts)
        return json.dumps(_scrub(parsed, mode, counts), ensure_ascii=False) if isinstance(parsed, dict | list) else _scrub(args, mode, counts)
    return _scrub(args, mode, counts)


def is_kb_relevant(ev: HookEvent) -> bool:
    """True for the hook events the KnowHub path reads (see the module docstring)."""
    if ev.source == "knowhub":
        return True
    if ev.native_event in _PLUGIN and ev.source == "openclaw":
        return True
    return ev.native_event == "PostToolUse" and isinstance((ev.raw or {}).get("tool_name"), str) and "kb" in (ev.raw or {})["tool_name"].lower()


def scrub_kb_event(ev: HookEvent, mode: RedactionMode) -> HookEvent:
    """``ev`` with its payload redacted (strict mode) and the experience fields' replacements counted; other events unchanged."""
    if mode is RedactionMode.RELAXED or ev.raw is None or not is_kb_relevant(ev):
        return ev
    raw = dict(ev.raw)
    counts: Counter[str] = Counter(raw.get(COUNTS_KEY) or {})
    if ev.source == "knowhub":
        for f in _EXPERIENCE_FIELDS:
            if f in raw:
                raw[f] = _scrub(raw[f], mode, counts)
    elif ev.native_event == "after_tool_call" and isinstance(raw.get("event"), dict) and "params" in raw["event"]:
        raw["event"] = {**raw["event"], "params": _scrub_args(raw["event"]["params"], mode, counts)}
    elif ev.native_event == "PostToolUse" and "tool_input" in raw:
        raw["tool_input"] = _scrub_args(raw["tool_input"], mode, counts)
    raw = _scrub(raw, mode, None)
    raw[COUNTS_KEY] = dict(sorted((k, v) for k, v in counts.items() if v))
    return ev.model_copy(update={"raw": raw})


def prior_counts(raw: dict[str, Any] | None, key: str = COUNTS_KEY) -> dict[str, int]:
    """The replacement counts a payload carries under ``key`` (default: the scrub's own; empty when none or malformed)."""
    c = (raw or {}).get(key)
    if not isinstance(c, dict):
        return {}
    return {k: v for k, v in c.items() if isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0}
