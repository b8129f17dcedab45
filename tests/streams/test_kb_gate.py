"""The KnowHub derivation's gate on decoded events (streams.experiences.from_hooks.may_derive).

The worker used to skip a record for the KnowHub derivation when its bytes held none of a few markers
(``kb_``, ``KB_``, ``"hook"``, …), while ``hivestream kb run`` derived every record: a tool named
``kB_search`` or a name written with JSON escapes was derived by one and not the other. The gate
now reads the decoded event, and is only a shortcut: where it says no, the derivation without it
gives nothing either.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streams.experiences.from_hooks as from_hooks
from streams.experiences.from_hooks import ExperienceDeriver, may_derive
from streams.experiences.routing import route_kb_record
from streams.experiences.settings import ExperienceSettings
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.model.position import Position

SOURCES = ["openclaw", "claude-code", "codex", "knowhub", "gateway-x"]
NATIVE = ["after_tool_call", "before_agent_start", "before_prompt_build", "agent_end", "PostToolUse", "PostToolUseFailure",
          "UserPromptSubmit", "Stop", "message:received", "message:sent", "experience-submitted", "kb-search", None]
value = st.recursive(st.one_of(st.text(max_size=8), st.integers(), st.none()),
                     lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)), max_leaves=6)


@st.composite
def events(draw: st.DrawFn) -> HookEvent:
    raw: dict[str, Any] = {
        "ctx": {"agentId": draw(st.text(max_size=6)), "sessionKey": "s", "toolName": draw(st.sampled_from(["kb_search", "kB_submit", "x"]))},
        "event": {"toolName": draw(st.sampled_from(["kb_search", "kb_content", "Bash"])), "params": {"query": "q", "task": "t", "result": "r"},
                  "messages": [{"role": "user", "content": "hi"}]},
        "tool_name": draw(st.sampled_from(["mcp__knowhub__kb_search", "kB_submit", "Read"])), "tool_input": {"task": "t", "result": "r"},
        "type": draw(st.sampled_from(["experience-submitted", "kb-search", "kb-content", "x"])), "event_id": "k1", "task": "t", "result": "r",
        "extra": draw(value),
    }
    return HookEvent(schema_version=1, event_id="e1", source=draw(st.sampled_from(SOURCES)), event_type="x",
                     native_event=draw(st.sampled_from(NATIVE)), session="s", event_time_ms=1_790_000_000_000, raw=raw)


def outcome(deriver: ExperienceDeriver, ev: HookEvent) -> Any:
    try:
        return [e.model_dump() if hasattr(e, "model_dump") else e.to_json() for e in deriver.derive(ev)]
    except Exception as e:  # a rejected kb call is an outcome like any other here
        return (type(e).__name__, str(e))


@settings(max_examples=500, deadline=None)
@given(events(), st.booleans())
def test_where_the_gate_says_no_the_derivation_gives_nothing(ev: HookEvent, extraction: bool) -> None:
    deriver = ExperienceDeriver(ExperienceSettings(extraction_enabled=extraction))
    gated = outcome(deriver, ev)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(from_hooks, "may_derive", lambda _ev: True)
        ungated = outcome(deriver, ev)
    assert gated == ungated
    if not may_derive(ev):
        assert ungated == []


@pytest.mark.parametrize("name", ["kB_search", "mcp__knowhub__Kb-Search"])
def test_a_record_the_byte_markers_missed_is_derived_as_kb_run_derives_it(name: str) -> None:
    line = json.dumps({"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": name, "tool_input": {"query": "lag"},
                       "tool_response": {"results": [1, 2]}, "timestamp": 1_790_000_000_000}).encode()
    assert b"kb_" not in line and b"KB_" not in line and b"Kb_" not in line and b'"hook"' not in line
    deriver = ExperienceDeriver(ExperienceSettings())
    pos = Position("hook-events", 0, 7, 1_790_000_000_000)
    as_worker = route_kb_record(line, pos, deriver, 0, decoded=decode_hook_record(line, received_at_ms=pos.timestamp_ms))
    as_kb_run = route_kb_record(line, pos, deriver, 0, use_record_time=False, report_bad_records=True)
    assert [e.model_dump() for e in as_worker] == [e.model_dump() for e in as_kb_run]  # type: ignore[union-attr]
    assert len(as_worker) == 1 and as_worker[0].hit_count == 2  # type: ignore[union-attr]
