"""Hook events → KnowHub events (pure, with the reminder counter's state injected).

What each hook event becomes:

* a ``kb_submit`` tool call (OpenClaw ``after_tool_call``; Claude Code / Codex ``PostToolUse``,
  MCP-prefixed names such as ``mcp__knowhub__kb_submit`` included) → :class:`ExperienceSubmitted`,
  built by :func:`streams.experiences.build.build_experience` (redacted, flagged, keyed);
* ``kb_search`` → :class:`SearchPerformed` (query redacted; hits counted from the tool result);
  ``kb_content`` → :class:`ContentFetched`; a call of hivestream's own MCP server
  (``mcp__hivestream__kb_*``) → nothing: the agent API that answered it recorded it
  (:func:`answered_by_hivestream`);
* OpenClaw ``before_agent_start``, ``before_prompt_build`` and ``agent_end`` →
  :class:`PluginHookCalled` markers, which the fold turns into reminders (see
  :mod:`streams.experiences.fold`);
* ``agent_end`` with messages, when extraction is enabled → an :class:`ExtractionRequest` whose
  chat payload is already built and redacted, so it can be written to a topic;
* a KnowHub event line (source ``knowhub``) → that event, rebuilt through the same redaction; an
  ``extraction-requested`` line (``POST /api/extract``) → an :class:`ExtractionRequest` when
  extraction is enabled.

A failed tool call (``PostToolUseFailure``, or ``event.error`` set) submits nothing. A kb call
whose arguments are unusable raises :class:`RejectedInput` with a detail free of raw text.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from streams.experiences.build import build_experience, safe_text
from streams.experiences.events import (
    ContentFetched,
    ExperienceEvent,
    ExperienceExtracted,
    ExperienceReviewed,
    ExperienceSubmitted,
    MemoryRecalled,
    PluginHookCalled,
    ReminderInjected,
    SearchPerformed,
)
from streams.experiences.extract import build_messages
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent, stable_id
from streams.redaction.redact import RedactionMode, redact
from streams.redaction.scrub import COUNTS_KEY, is_kb_relevant, prior_counts, scrub_kb_call, scrub_kb_event, scrub_value

_SPLIT = re.compile(r"__|[./:]")


HIVESTREAM_MCP_SERVER = "hivestream"
"""The name hivestream's installers give its own MCP server (``mcp__hivestream__kb_search``, ...)."""


def answered_by_hivestream(name: object) -> bool:
    """Whether the tool ``name`` is one of hivestream's own MCP server (``mcp__hivestream__…``, any case).

    The agent API that answered such a call recorded it already (its search, content fetch or
    submission is an event of its own), so the runtime's ``PostToolUse`` hook copy of the call
    derives nothing: a ``kb_search`` through MCP counts once, as the API's ``kb-search``.
    """
    return isinstance(name, str) and name.strip().lower().startswith(f"mcp__{HIVESTREAM_MCP_SERVER}__")


def kb_tool(name: object) -> str | None:
    """``kb_submit`` / ``kb_search`` / ``kb_content`` when ``name`` is one of them (any MCP or
    plugin prefix, ``-`` or ``_``, any case), else None."""
    if not isinstance(name, str) or not name:
        return None
    last = _SPLIT.split(name.strip().lower().replace("-", "_"))[-1]
    return last if last in {"kb_submit", "kb_search", "kb_content"} else None


@dataclass(frozen=True)
class ExtractionRequest:
    """An ``agent_end`` to run the extractor on.

    Attributes:
        request_id: the ``agent_end`` hook event id.
        event_time_ms: its event time (epoch ms).
        agent_id, session_key: provenance for the extracted experiences (redacted).
        chat: the chat-completions ``messages`` payload, redacted in strict mode.
    """

    request_id: str
    event_time_ms: int
    agent_id: str
    session_key: str
    chat: list[dict[str, str]]

    def to_json(self) -> bytes:
        """The ``kb-extract`` topic value."""
        return json.dumps({"schema_version": 1, "request_id": self.request_id, "event_time_ms": self.event_time_ms, "agent_id": self.agent_id,
                           "session_key": self.session_key, "chat": self.chat}, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ExtractionRequest:
        """Parse a ``kb-extract`` record.

        Raises:
            RejectedInput: ``malformed_json`` / ``wrong_shape``.
        """
        try:
            d = json.loads(raw)
            if not isinstance(d, dict) or d.get("schema_version") != 1:
                raise RejectedInput(Reason.WRONG_SHAPE, "kb-extract record: not a schema_version 1 object")
            chat = d["chat"]
            if not isinstance(chat, list) or not all(isinstance(m, dict) for m in chat):
                raise RejectedInput(Reason.WRONG_SHAPE, "kb-extract record: chat must be a list of objects")
            return cls(str(d["request_id"]), int(d["event_time_ms"]), str(d["agent_id"]), str(d["session_key"]), chat)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            if isinstance(e, RejectedInput):
                raise
            raise RejectedInput(Reason.MALFORMED_JSON, f"kb-extract record is not JSON: {type(e).__name__}") from e
        except (KeyError, TypeError) as e:
            raise RejectedInput(Reason.MISSING_FIELD, f"kb-extract record: missing {e}") from e


Derived = ExperienceEvent | ExtractionRequest


def tool_call(ev: HookEvent, raw: dict[str, Any] | None = None) -> tuple[str, Any, Any, str] | None:
    """(kb tool, arguments, result, agent id) of a successful kb tool call, else None; read from
    ``raw`` when given (a scrubbed view of ``ev.raw``, :func:`~streams.redaction.scrub.scrub_kb_call`), else from ``ev.raw``."""
    raw = (ev.raw or {}) if raw is None else raw
    if ev.native_event == "after_tool_call":
        event = raw["event"] if isinstance(raw.get("event"), dict) else {}
        ctx = raw["ctx"] if isinstance(raw.get("ctx"), dict) else {}
        tool = kb_tool(event.get("toolName") or ctx.get("toolName"))
        if tool is None or event.get("error"):
            return None
        return tool, event.get("params"), event.get("result"), str(ctx.get("agentId") or "")
    if ev.native_event == "PostToolUse":
        tool = kb_tool(raw.get("tool_name"))
        if tool is None or answered_by_hivestream(raw.get("tool_name")):
            return None
        return tool, raw.get("tool_input"), raw.get("tool_response"), str(raw.get("agent_id") or "")
    return None


def _args(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise RejectedInput(Reason.MALFORMED_JSON, "kb tool arguments are a string that is not JSON") from None
    if not isinstance(value, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, f"kb tool arguments must be an object, got {type(value).__name__}")
    return value


def hit_count(result: Any, text: Callable[[str], Any] | None = None) -> int | None:
    """Hits in a ``kb_search`` result: a list's length, ``results``/``experiences``/``hits``
    lists, a ``count``/``total``/``hit_count`` number, MCP ``content`` text holding JSON; else None.

    ``text``: applied to a string of ``result`` before it is read as JSON (the strict scrub, so an
    unscrubbed result counts as its scrubbed self would: the scrub keeps every type, length, number
    and key, and ``"text"`` is ``"text"`` scrubbed or not, so only the strings read as JSON can
    differ; and a tuple, which the scrub makes a list, is read as one); not applied inside what a
    string held.
    """
    seq = list if text is None else (list, tuple)
    if isinstance(result, str):
        try:
            return hit_count(json.loads(result if text is None else text(result)))
        except (ValueError, RecursionError):
            return None
    if isinstance(result, seq):
        if result and all(isinstance(b, dict) and b.get("type") == "text" for b in result):
            return hit_count(result[0].get("text"), text)
        return len(result)
    if isinstance(result, dict):
        for k in ("results", "experiences", "hits", "items"):
            if isinstance(result.get(k), seq):
                return len(result[k])
        for k in ("count", "total", "hit_count"):
            v = result.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
        if isinstance(result.get("content"), seq):
            return hit_count(result["content"], text)
    return None


_TOOL_CALLS = frozenset({"after_tool_call", "PostToolUse"})
"""The hook events :func:`tool_call` reads (a kb call's success)."""


def _result(ev: HookEvent) -> Any:
    """The tool result of a tool call, as its payload holds it (unscrubbed)."""
    raw = ev.raw or {}
    if ev.native_event == "after_tool_call":
        event = raw.get("event")
        return event.get("result") if isinstance(event, dict) else None
    return raw.get("tool_response")


_HOOK_ONLY = frozenset({"before_agent_start", "before_prompt_build", "agent_end"})
"""OpenClaw plugin hooks that become a :class:`PluginHookCalled` record, which is their whole KnowHub record (``agent_end``'s too when extraction is off)."""


def may_derive(ev: HookEvent) -> bool:
    """False when :meth:`ExperienceDeriver.derive` gives nothing for ``ev`` whatever its payload: it is no
    KnowHub line, no tool call and no OpenClaw plugin hook (:func:`~streams.redaction.scrub.is_kb_relevant`).
    Reads the event's fields only (no payload bytes), so it costs nothing beside the decode; the
    frames path's captures, which are most of ``hook-events``, stop here."""
    return ev.native_event in _TOOL_CALLS or is_kb_relevant(ev)


class ExperienceDeriver:
    """Derives KnowHub events from hook events.

    Args:
        settings: privacy mode, approval, extraction switch.
    """

    def __init__(self, settings: ExperienceSettings) -> None:
        self.settings = settings

    def derive(self, ev: HookEvent) -> list[Derived]:
        """The KnowHub events of one hook event (usually none).

        Raises:
            RejectedInput: a kb call or KnowHub line that cannot become an event (detail
                redacted in strict mode).
        """
        if not may_derive(ev):
            return []
        mode = self.settings.privacy_mode
        hook_only = ev.source == "openclaw" and ev.native_event in _HOOK_ONLY and not (ev.native_event == "agent_end" and self.settings.extraction_enabled)
        if hook_only:  # the record reads the ctx alone: scrubbing it gives what scrubbing the whole payload gives there
            found = (ev.raw or {}).get("ctx")
            ctx = scrub_value(found, mode) if isinstance(found, dict) else {}
        elif ev.native_event in _TOOL_CALLS and ev.source != "knowhub":
            return self._tool_call(ev, scrub_kb_call(ev, mode))
        else:
            ev = scrub_kb_event(ev, mode)  # a no-op when `hivestream produce` scrubbed it already
            if ev.source == "knowhub" and (ev.raw or {}).get("type") == "extraction-requested":
                return self._extraction_line(ev)
            if ev.source == "knowhub":
                return [self._with_counts(self._kb_line(ev), ev.raw, knowhub=True)]
            found = (ev.raw or {}).get("ctx")
            ctx = found if isinstance(found, dict) else {}
        raw = ev.raw or {}
        agent = safe_text(str((ctx or {}).get("agentId") or ""), mode)
        session_key = safe_text(str((ctx or {}).get("sessionKey") or ev.session), mode)
        if ev.native_event in _HOOK_ONLY and ev.source == "openclaw":
            out: list[Derived] = [PluginHookCalled(event_id=stable_id(ev.event_id, "hook"), event_time_ms=ev.event_time_ms, session_key=session_key,
                                               agent_id=agent, hook=ev.native_event)]  # type: ignore[arg-type]
            if ev.native_event != "agent_end":
                return out
            messages = raw["event"].get("messages") if isinstance(raw.get("event"), dict) else None
            if not self.settings.extraction_enabled or not isinstance(messages, list) or not messages:
                return out
            chat = build_messages([m for m in messages if isinstance(m, dict)], redactor=lambda s: redact(s, mode).text)
            return [*out, ExtractionRequest(ev.event_id, ev.event_time_ms, agent, session_key, chat)]
        return []

    def _extraction_line(self, ev: HookEvent) -> list[Derived]:
        """The :class:`ExtractionRequest` of an ``extraction-requested`` line (the agent API's
        ``POST /api/extract``): its ``messages`` as ``agent_end``'s; nothing while extraction is off."""
        if not self.settings.extraction_enabled:
            return []
        d = ev.raw or {}
        mode = self.settings.privacy_mode
        messages = d.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RejectedInput(Reason.MISSING_FIELD, "extraction-requested line has no messages")
        chat = build_messages([m for m in messages if isinstance(m, dict)], redactor=lambda s: redact(s, mode).text)
        return [ExtractionRequest(str(d.get("event_id")), ev.event_time_ms, safe_text(str(d.get("agent_id") or ""), mode),
                                  safe_text(str(d.get("session_key") or ev.session), mode), chat)]

    def _tool_call(self, ev: HookEvent, raw: dict[str, Any]) -> list[Derived]:
        """The KnowHub event of a tool call (none unless a successful kb call); ``raw`` is
        :func:`~streams.redaction.scrub.scrub_kb_call`'s view of its payload, the result read from
        ``ev.raw`` and scrubbed where :func:`hit_count` reads it as JSON."""
        mode = self.settings.privacy_mode
        call = tool_call(ev, raw)
        if call is None:
            return []
        tool, args_raw, _, call_agent = call
        found = raw.get("ctx")
        ctx = found if isinstance(found, dict) else {}
        agent = safe_text(str(ctx.get("agentId") or ""), mode)
        args = _args(args_raw)
        caller = call_agent or agent or ev.source
        agent_id = safe_text(str((args.get("agent_id") if tool == "kb_submit" else None) or caller), mode)
        session_key = safe_text(ev.session if ev.source != "openclaw" else str(ctx.get("sessionKey") or ev.session), mode)
        eid = stable_id(ev.event_id, tool)
        if tool == "kb_submit":
            return [self._with_counts(build_experience(args, event_id=eid, event_time_ms=ev.event_time_ms, settings=self.settings, agent_id=agent_id,
                                                       submitted_by=str(args.get("submitted_by") or ""), session_key=session_key,
                                                       source_tool=str(raw.get("tool_name") or "kb_submit"), runtime=ev.source), raw)]
        if tool == "kb_search":
            q = args.get("query", args.get("q", ""))
            filt = args.get("agent_id")
            try:  # the result as scrub_kb_event would have left it: scrubbed where it is read as JSON
                hits = hit_count(_result(ev), (lambda s: scrub_value(s, mode)) if mode is not RedactionMode.RELAXED and is_kb_relevant(ev) else None)
            except RecursionError:
                raise RejectedInput(Reason.WRONG_SHAPE, "KnowHub payload is nested too deeply to redact") from None
            return [SearchPerformed(event_id=eid, event_time_ms=ev.event_time_ms, session_key=session_key, agent_id=agent_id,
                                      query=safe_text(str(q), mode)[:4000], agent_filter=safe_text(str(filt), mode) if filt else None,
                                      hit_count=hits, runtime=ev.source)]
        ref = args.get("id", args.get("experience_id", args.get("ref", "")))
        return [ContentFetched(event_id=eid, event_time_ms=ev.event_time_ms, session_key=session_key, agent_id=agent_id,
                                 experience_ref=safe_text(str(ref), mode)[:400], runtime=ev.source)]

    @staticmethod
    def _with_counts(built: ExperienceEvent, raw: dict[str, Any] | None, *, knowhub: bool = False) -> ExperienceEvent:
        """Add the replacements made before this step to an experience event's own: those the scrub
        counted (in its scrubbed ``raw``), and for a KnowHub line redacted earlier (``kb submit``) the
        ``redactions`` it carries."""
        prior = Counter(prior_counts(raw))
        if knowhub:
            prior.update(prior_counts(raw, "redactions"))
        if not prior or not isinstance(built, ExperienceSubmitted | ExperienceExtracted):
            return built
        merged = Counter(built.redactions)
        merged.update(prior)
        return built.model_copy(update={"redactions": dict(sorted(merged.items()))})

    def _kb_line(self, ev: HookEvent) -> ExperienceEvent:
        d = dict(ev.raw or {})
        d.pop(COUNTS_KEY, None)
        mode = self.settings.privacy_mode
        kind = d.get("type")
        eid, t = str(d.get("event_id")), ev.event_time_ms
        if kind in ("experience-submitted", "experience-extracted"):
            prov = {k: safe_text(str(d.get(k) or ""), mode) for k in ("agent_id", "submitted_by", "session_key", "source_tool")}
            prov["runtime"] = str(d.get("runtime") or "cli")
            prov["source_tool"] = prov["source_tool"] or "cli"
            extracted_from = str(d.get("extracted_from") or eid) if kind == "experience-extracted" else None
            return build_experience(d, event_id=eid, event_time_ms=t, settings=self.settings, extracted_from=extracted_from,
                                    model=str(d.get("model") or ""), **prov)
        try:
            if kind == "experience-reviewed":
                d["reason"] = safe_text(str(d.get("reason") or ""), mode)
                d["reviewer"] = safe_text(str(d.get("reviewer") or ""), mode)
                return ExperienceReviewed.model_validate({**d, "event_time_ms": t})
            if kind == "kb-search":
                d["query"] = safe_text(str(d.get("query") or ""), mode)
                return SearchPerformed.model_validate({**d, "event_time_ms": t})
            if kind == "kb-content":
                return ContentFetched.model_validate({**d, "event_time_ms": t})
            if kind == "memory-recall":
                d["query"] = safe_text(str(d.get("query") or ""), mode)
                return MemoryRecalled.model_validate({**d, "event_time_ms": t})
            return ReminderInjected.model_validate({**d, "event_time_ms": t})
        except ValidationError as e:
            errs = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise RejectedInput(Reason.WRONG_SHAPE, f"KnowHub event: {errs}") from e

