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
import re
from collections import Counter
from typing import Any

from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent
from streams.redaction.redact import RedactionMode, strict_redaction
from streams.redaction.rules import PiiKind

COUNTS_KEY = "hivestream_redactions"
MAX_SCRUB_CHARS = 65_536
"""A string of a KnowHub payload longer than this is cut to it (with a marker) before redaction:
redaction runs at about 2.5 MB/s, no experience field may exceed 8,000 characters, and the
extractor keeps only the last 24,000 characters of a transcript, so a huge string can only be
rejected or trimmed later; cutting it first keeps one record from stalling a partition."""
_PLUGIN = {"after_tool_call", "before_agent_start", "before_prompt_build", "agent_end"}
_EXPERIENCE_FIELDS = ("task", "resource", "result")
_KINDS = frozenset(k.value for k in PiiKind)


_MARKER = re.compile(r" \[truncated: ([0-9]{1,12}) more characters\]\Z")
"""The marker a cut string ends with (at most 12 digits: never a card number); 42 characters at most."""
_MARKER_END = " more characters]"
_remembered = strict_redaction.lookup


def _bounded(text: str, dropped: int) -> str:
    """A redacted ``text`` of at most :data:`MAX_SCRUB_CHARS` characters: what is past them is cut, and
    a marker counts the characters cut here and before (``dropped``)."""
    if len(text) > MAX_SCRUB_CHARS:
        dropped += len(text) - MAX_SCRUB_CHARS
        text = text[:MAX_SCRUB_CHARS]
    return text + f" [truncated: {dropped} more characters]" if dropped else text


def _cut_at(value: str) -> int:
    """Where to cut ``value`` (characters kept): :data:`MAX_SCRUB_CHARS`, or the last whitespace in
    the 1,024 characters before it when the cut would split a word, so that no token (a key cut in
    half would no longer be recognised) leaves its first part behind."""
    if len(value) <= MAX_SCRUB_CHARS or value[MAX_SCRUB_CHARS].isspace():
        return min(len(value), MAX_SCRUB_CHARS)
    ws = max(value.rfind(c, MAX_SCRUB_CHARS - 1024, MAX_SCRUB_CHARS) for c in " \n\t\r")
    return ws if ws > 0 else MAX_SCRUB_CHARS


def _count(counts: Counter[str] | None, found: tuple[tuple[str, int], ...]) -> None:
    """Add the replacements ``found`` by one redaction (``(kind, n)`` pairs) to ``counts`` when given
    (callers skip the call when nothing was found: most strings of a payload have nothing)."""
    if counts is not None:
        for kind, n in found:
            counts[kind] += n


def _long_text(value: str, counts: Counter[str] | None) -> str:
    """A string longer than :data:`MAX_SCRUB_CHARS` or ending in a cut marker: its body (at most
    ``MAX_SCRUB_CHARS`` characters of it) redacted, the rest cut and counted in the marker. A
    string scrubbed so already (a redacted body and a marker) comes out unchanged, so a second
    scrub (the worker's, after produce's) is a no-op; the marker's digits are never redacted."""
    m = _MARKER.search(value, max(len(value) - 48, 0)) if value.endswith(_MARKER_END) else None
    if m is not None and m.start() <= MAX_SCRUB_CHARS:
        body, dropped = value[: m.start()], int(m.group(1))
    else:
        cut = _cut_at(value)
        body, dropped = value[:cut], len(value) - cut
    out, found = strict_redaction(body)
    if found:
        _count(counts, found)
    return _bounded(out, dropped)


def _text(value: str, counts: Counter[str] | None) -> str:
    """One string of a payload, redacted (strict); its replacements added to ``counts`` when given.
    Long or marked strings take :func:`_long_text` before the memo is asked (the memo holds short
    texts whole, which would skip the marker rule). A short string that grows past the bound when
    redacted is cut as :func:`_long_text` would cut it (its whole text is the body, nothing dropped
    before), from the one redaction."""
    if len(value) > MAX_SCRUB_CHARS or value.endswith(_MARKER_END):
        return _long_text(value, counts)
    hit = _remembered(value)
    if hit is None:
        hit = strict_redaction(value)
    out, found = hit
    if found:
        _count(counts, found)
    return out if len(out) <= MAX_SCRUB_CHARS else _bounded(out, 0)


def _scrub_strict(value: Any, counts: Counter[str] | None) -> Any:
    """The strict walk: strings redacted, dicts (keys kept) and lists walked, anything else kept.
    JSON decoders give exact ``str`` / ``dict`` / ``list``; subclasses take the slower branch."""
    cls = type(value)
    if cls is dict:
        out = {}
        for k, v in value.items():
            c = type(v)
            out[k] = _text(v, counts) if c is str else (v if c in _SCALARS else _scrub_strict(v, counts))
        return out
    if cls is list:
        return [_text(v, counts) if type(v) is str else _scrub_strict(v, counts) for v in value]
    if cls is str:
        return _text(value, counts)
    if isinstance(value, str):
        return _text(str.__str__(value), counts)  # its characters (str() of a str enum is its name)
    if isinstance(value, dict):
        return _scrub_strict(dict(value), counts)
    if isinstance(value, list | tuple):
        return _scrub_strict(list(value), counts)
    return value


_SCALARS = frozenset({int, float, bool, type(None)})


def _scrub(value: Any, mode: RedactionMode, counts: Counter[str] | None) -> Any:
    if mode == RedactionMode.RELAXED:  # a plain "relaxed" compares equal, as in redact()
        return value
    return _scrub_strict(value, counts)


TOO_DEEP = "[unscrubbed: nested too deeply]"
"""What :func:`scrub_value` returns for a value nested past the interpreter's recursion limit."""


def scrub_value(value: Any, mode: RedactionMode) -> Any:
    """A JSON value with every string redacted (keys kept); :data:`TOO_DEEP` in place of a value
    nested past the recursion limit (~500 levels; nothing of it is kept). Raises nothing."""
    try:
        return _scrub(value, mode, None)
    except RecursionError:
        return TOO_DEEP


def _scrub_args(args: Any, mode: RedactionMode, counts: Counter[str]) -> Any:
    """Tool arguments redacted, their replacements counted. A JSON string (Codex) is parsed, its
    strings redacted and counted, and the JSON text written again is redacted once more as one
    string (uncounted), which catches what only its JSON context reveals (``"password": "…"``)."""
    if isinstance(args, str):  # Codex passes tool arguments as a JSON string
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):
            return _scrub(args, mode, counts)
        if isinstance(parsed, dict | list):
            return _scrub(json.dumps(_scrub(parsed, mode, counts), ensure_ascii=False), mode, None)
        return _scrub(args, mode, counts)
    return _scrub(args, mode, counts)


def is_kb_relevant(ev: HookEvent) -> bool:
    """True for the hook events the KnowHub path reads (see the module docstring)."""
    if ev.source == "knowhub":
        return True
    if ev.native_event in _PLUGIN and ev.source == "openclaw":
        return True
    return ev.native_event == "PostToolUse" and isinstance((ev.raw or {}).get("tool_name"), str) and "kb" in (ev.raw or {})["tool_name"].lower()


def scrub_kb_event(ev: HookEvent, mode: RedactionMode) -> HookEvent:
    """``ev`` with its payload redacted (strict mode) and the experience fields' replacements counted; other events unchanged.

    One walk over the payload: the experience fields (a KnowHub line's task/resource/result, a kb
    tool call's arguments) count their replacements, every other string is redacted uncounted. The
    counts a payload already carries (:func:`prior_counts`; a malformed entry is dropped) are added
    to, so a second scrub (the worker's, after produce's) changes nothing.

    Raises:
        RejectedInput: ``wrong_shape`` for a payload nested past the recursion limit (~500 levels),
            which is dead-lettered as any other rejected input.
    """
    if mode is RedactionMode.RELAXED or ev.raw is None or not is_kb_relevant(ev):
        return ev
    try:
        return _scrub_event(ev, ev.raw, mode)
    except RecursionError:
        raise RejectedInput(Reason.WRONG_SHAPE, "KnowHub payload is nested too deeply to redact") from None


def _scrub_event(ev: HookEvent, raw: dict[str, Any], mode: RedactionMode) -> HookEvent:
    return ev.model_copy(update={"raw": _scrubbed_raw(ev, raw, mode)})


def _scrubbed_raw(ev: HookEvent, raw: dict[str, Any], mode: RedactionMode) -> dict[str, Any]:
    """``raw`` scrubbed (one walk), the experience fields' replacements counted under :data:`COUNTS_KEY`."""
    counts: Counter[str] = Counter(prior_counts(raw))
    counted: dict[str, Any] = {}  # top-level key -> its scrubbed value, counted
    if ev.source == "knowhub":
        counted = {f: _scrub(raw[f], mode, counts) for f in _EXPERIENCE_FIELDS if f in raw}
    elif ev.native_event == "after_tool_call" and isinstance(raw.get("event"), dict) and "params" in raw["event"]:
        event = raw["event"]
        counted["event"] = {k: (_scrub_args(v, mode, counts) if k == "params" else _scrub(v, mode, None)) for k, v in event.items()}
    elif ev.native_event == "PostToolUse" and "tool_input" in raw:
        counted["tool_input"] = _scrub_args(raw["tool_input"], mode, counts)
    out = {k: (counted[k] if k in counted else _scrub(v, mode, None)) for k, v in raw.items() if k != COUNTS_KEY}
    out[COUNTS_KEY] = dict(sorted((k, v) for k, v in counts.items() if v))
    return out


_CALL_PARTS: dict[str, tuple[str, ...] | None] = {
    "ctx": ("agentId", "sessionKey", "toolName"), "event": ("toolName", "params", "error"),
    "tool_name": None, "tool_input": None, "agent_id": None, COUNTS_KEY: None,
}
"""What the KnowHub derivation reads of a tool call's payload: a key's value whole (None), or the named keys of an object value."""


def scrub_kb_call(ev: HookEvent, mode: RedactionMode) -> dict[str, Any]:
    """The part of a tool call's payload (OpenClaw ``after_tool_call``, ``PostToolUse``) that the
    KnowHub derivation reads (:data:`_CALL_PARTS`), scrubbed as :func:`scrub_kb_event` scrubs the
    whole payload, the tool result left out.

    Shape: ``{"ctx": {agentId, sessionKey, toolName}, "event": {toolName, params, error},
    tool_name, tool_input, agent_id, hivestream_redactions}``, each key only where the payload has
    it (``ctx`` / ``event`` only when they are objects). The payload is cut to these parts and then
    scrubbed by the same walk as the whole one; the scrub is per value (keys kept) and the counted
    branch depends only on keys the cut keeps, so every value here equals the same path of
    ``scrub_kb_event(ev, mode).raw`` and the counts are the same. A payload ``scrub_kb_event``
    leaves alone (relaxed mode, not KnowHub-relevant) is returned as it is.
    What this leaves out is not walked: a result, ids and paths (most of a call's strings, and the
    ones a memo cannot hold) cost nothing here; the caller scrubs what it reads of the result
    (:func:`streams.experiences.from_hooks.hit_count`), and a part nested too deeply that the call
    does not read is no longer a reason to reject it; how deep a part it reads may be follows the
    code that reads it (the whole scrub spent three stack frames per level of MCP ``content``
    blocks in a result, ``hit_count`` two, so such a result 300–450 levels deep is now counted,
    not dead-lettered).

    Raises:
        RejectedInput: ``wrong_shape`` for a part read here nested past the recursion limit.
    """
    raw = ev.raw
    if mode is RedactionMode.RELAXED or raw is None or not is_kb_relevant(ev):
        return raw or {}
    cut: dict[str, Any] = {}
    for k, keys in _CALL_PARTS.items():
        v = raw.get(k, _ABSENT)
        if keys is None and v is not _ABSENT:
            cut[k] = v
        elif keys is not None and isinstance(v, dict):
            cut[k] = {s: v[s] for s in keys if s in v}
    try:
        return _scrubbed_raw(ev, cut, mode)
    except RecursionError:
        raise RejectedInput(Reason.WRONG_SHAPE, "KnowHub payload is nested too deeply to redact") from None


_ABSENT = object()


def prior_counts(raw: dict[str, Any] | None, key: str = COUNTS_KEY) -> dict[str, int]:
    """The replacement counts a payload carries under ``key`` (default: the scrub's own): the entries
    whose kind is a :class:`~streams.redaction.rules.PiiKind` value and whose count is a positive
    ``int``; empty when none or malformed. Keys are not redacted, so an unknown kind (which could be
    any text, a secret too) is dropped rather than stored. Raises nothing."""
    c = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(c, dict):
        return {}
    return {k: v for k, v in c.items() if k in _KINDS and isinstance(v, int) and not isinstance(v, bool) and v > 0}
