"""The KnowHub derivation of a tool call scrubs only what it reads (streams.redaction.scrub.scrub_kb_call)
and gives what it gave when it scrubbed the whole payload first.

The derivation used to be ``derive(scrub_kb_event(ev))``. The scrub is idempotent, so that equals
``derive(scrub_kb_event(ev))`` today exactly when ``derive(ev) == derive(scrub_kb_event(ev))``:
the property checked here on generated tool calls full of secrets, with the view's values also
checked path by path against the whole scrub.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from streams.experiences.from_hooks import ExperienceDeriver, hit_count
from streams.experiences.settings import ExperienceSettings
from streams.model.deadletter import Reason, RejectedInput
from streams.model.events import HookEvent
from streams.redaction.redact import RedactionMode
from streams.redaction.scrub import COUNTS_KEY, is_kb_relevant, scrub_kb_call, scrub_kb_event, scrub_value
from tests.streams.test_redact import CASES

STRICT = RedactionMode.STRICT
CARD = "4111111111111111"  # a Luhn-valid card number: redacted, which breaks the JSON it is a number of
TEXTS = [c.text for c in CASES[:40]] + ["text", "plain", "", "call-1-1790000077729", "exp-912886", "agent-7", CARD]

text = st.sampled_from(TEXTS)
scalar = st.one_of(text, st.integers(-3, 5), st.booleans(), st.none(), st.just(int(CARD)))
value = st.recursive(scalar, lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(text, kids, max_size=3)), max_leaves=8)
tools = st.sampled_from(["kb_search", "kb_submit", "kb_content", "mcp__knowhub__kb_search", "KB-Search", "memory_search", "Bash", TEXTS[0]])


@st.composite
def results(draw: st.DrawFn) -> Any:
    """Tool results of every shape hit_count reads, some as JSON text, numbers a redaction breaks."""
    inner = draw(st.one_of(
        st.fixed_dictionaries({"count": st.just(int(CARD))}),
        st.lists(value, max_size=4),
        st.fixed_dictionaries({"results": st.lists(value, max_size=4)}),
        st.fixed_dictionaries({draw(st.sampled_from(["count", "total", "hit_count"])): st.one_of(st.integers(-1, 9), st.just(int(CARD)))}),
        value,
    ))
    as_text = json.dumps(inner)
    block = [{"type": "text", "text": draw(st.sampled_from([as_text, json.dumps(as_text), draw(text)]))}]
    return draw(st.sampled_from([inner, as_text, as_text, block, {"content": block}, {"content": [{"type": draw(text), "text": as_text}]}]))


@st.composite
def args(draw: st.DrawFn) -> Any:
    fields = draw(st.dictionaries(st.sampled_from(["task", "result", "resource", "query", "q", "id", "agent_id", "submitted_by", "note"]),
                                  st.one_of(text, value), max_size=6))
    return draw(st.sampled_from([fields, json.dumps(fields), draw(value)]))


@st.composite
def tool_calls(draw: st.DrawFn) -> HookEvent:
    """An OpenClaw after_tool_call or a Claude Code / Codex PostToolUse, with secrets anywhere."""
    extra = draw(st.dictionaries(text, value, max_size=2))
    if draw(st.booleans()):
        event = {"toolName": draw(tools), "params": draw(args()), "result": draw(results()), "toolCallId": draw(text), **extra}
        if draw(st.integers(0, 3)) == 0:
            event["error"] = draw(value)
        if draw(st.integers(0, 3)) == 0:
            del event["params"]
        ctx = {"agentId": draw(st.one_of(text, value)), "sessionKey": draw(text), "toolName": draw(tools)}
        raw: dict[str, Any] = {"hook": "after_tool_call", "ctx": draw(st.sampled_from([ctx, "not an object"])), "event": event}
        source, native = "openclaw", "after_tool_call"
    else:
        raw = {"tool_name": draw(tools), "tool_input": draw(args()), "tool_response": draw(results()), "tool_use_id": draw(text),
               "cwd": draw(text), **extra}
        if draw(st.booleans()):
            raw["agent_id"] = draw(text)
        source, native = draw(st.sampled_from(["claude-code", "codex"])), "PostToolUse"
    if draw(st.booleans()):
        raw[COUNTS_KEY] = {"email": draw(st.integers(0, 3)), TEXTS[0]: 1}
    return HookEvent(schema_version=1, event_id="e1", source=source, event_type="x", native_event=native, session=draw(text),
                     event_time_ms=1_790_000_000_000, raw=raw)


def outcome(deriver: ExperienceDeriver, ev: HookEvent) -> Any:
    try:
        return [e.model_dump() if hasattr(e, "model_dump") else e for e in deriver.derive(ev)]
    except RejectedInput as e:
        return ("rejected", e.reason, e.detail)
    except Exception as e:  # a field over its limit is a pydantic error (the worker dead-letters it)
        return ("error", type(e).__name__, str(e))


SEARCH = HookEvent(schema_version=1, event_id="e1", source="openclaw", event_type="x", native_event="after_tool_call", session="s",
                   event_time_ms=1, raw={"ctx": {}, "event": {"toolName": "kb_search", "params": {"query": "q"}, "result": json.dumps({"count": int(CARD)})}})


@settings(max_examples=600, deadline=None)
@given(tool_calls(), st.booleans())
@example(SEARCH, False)
def test_deriving_a_call_equals_deriving_its_whole_scrub(ev: HookEvent, approval: bool) -> None:
    deriver = ExperienceDeriver(ExperienceSettings(require_approval=approval))
    assert outcome(deriver, ev) == outcome(deriver, scrub_kb_event(ev, STRICT))


@settings(max_examples=400, deadline=None)
@given(tool_calls())
def test_every_value_of_the_view_is_the_whole_scrubs_value_at_that_path(ev: HookEvent) -> None:
    whole = scrub_kb_event(ev, STRICT).raw or {}
    view = scrub_kb_call(ev, STRICT)
    if not is_kb_relevant(ev):  # the whole scrub leaves such a payload alone, and so does the view
        assert view is ev.raw and whole is ev.raw
        return
    assert view[COUNTS_KEY] == whole[COUNTS_KEY]
    for key, part in view.items():
        if isinstance(part, dict) and key in ("ctx", "event"):
            assert all(whole[key][k] == v for k, v in part.items()), key
        else:
            assert whole[key] == part, key
    assert "result" not in view.get("event", {}) and "tool_response" not in view and "cwd" not in view


@settings(max_examples=400, deadline=None)
@given(results())
def test_a_result_counts_as_its_scrubbed_self(result: Any) -> None:
    assert hit_count(result, lambda s: scrub_value(s, STRICT)) == hit_count(scrub_value(result, STRICT))


def test_the_property_can_fail_a_result_read_unscrubbed() -> None:
    """A card number as a JSON count: the scrub breaks that JSON, so the scrubbed result has no count."""
    result = json.dumps({"count": int(CARD)})
    assert hit_count(result) == int(CARD)
    assert hit_count(scrub_value(result, STRICT)) is None
    assert hit_count(result, lambda s: scrub_value(s, STRICT)) is None


def test_relaxed_mode_and_other_tools_are_not_scrubbed() -> None:
    raw = {"tool_name": "Bash", "tool_input": {"command": CASES[0].text}, "tool_response": "x"}
    ev = HookEvent(schema_version=1, event_id="e1", source="claude-code", event_type="x", native_event="PostToolUse", session="s",
                   event_time_ms=1, raw=raw)
    assert scrub_kb_call(ev, STRICT) is ev.raw
    assert scrub_kb_call(ev.model_copy(update={"raw": {**raw, "tool_name": "kb_search"}}), RedactionMode.RELAXED)["tool_input"] == raw["tool_input"]


def test_a_deep_result_of_a_search_is_rejected_not_a_crash() -> None:
    deep: Any = {"results": []}
    for _ in range(3000):
        deep = {"content": [{"type": "text", "text": deep}]}
    ev = HookEvent(schema_version=1, event_id="e1", source="openclaw", event_type="x", native_event="after_tool_call", session="s",
                   event_time_ms=1, raw={"ctx": {}, "event": {"toolName": "kb_search", "params": {"query": "q"}, "result": deep}})
    assert outcome(ExperienceDeriver(ExperienceSettings()), ev)[:2] == ("rejected", Reason.WRONG_SHAPE)


def test_a_tuple_result_counts_as_the_list_the_whole_scrub_made_of_it() -> None:
    """An event built in Python may hold tuples: the whole scrub made them lists (which hit_count
    counts), and relaxed mode left them tuples (which it does not)."""
    for result in [("a", "b"), {"results": (1, 2, 3)}, {"content": ({"type": "text", "text": "[1, 2]"},)}]:
        ev = HookEvent(schema_version=1, event_id="e1", source="claude-code", event_type="x", native_event="PostToolUse", session="s",
                       event_time_ms=1, raw={"tool_name": "kb_search", "tool_input": {"query": CASES[0].text}, "tool_response": result})
        for mode in (STRICT, RedactionMode.RELAXED):
            deriver = ExperienceDeriver(ExperienceSettings(privacy_mode=mode))
            assert outcome(deriver, ev) == outcome(deriver, scrub_kb_event(ev, mode)), (result, mode)
