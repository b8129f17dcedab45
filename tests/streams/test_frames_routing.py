"""The one routing of a hook event: what ``run``'s import says of a line (its outcome) and what the
Kafka worker says of the same record (a capture, a skipped row or a dead letter, and the memory tool
call) are one decision; a record never raises."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.backlog import BacklogSpec, generate
from bench.stage_backlog import ExperienceBacklogSpec, kb_backlog
from streams.frames.capture import Capture, Skipped
from streams.frames.capture_import import CaptureOptions, item_outcome
from streams.frames.routing import Refused, route_event, route_record
from streams.memory_calls.tool_calls import DEFAULT_RULES
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import HookEvent
from streams.model.position import Position
from streams.settings import Settings

T = 1_790_000_000_000
LIMIT = 600  # bytes: some generated bodies are over it


def memory_tool_call(i: int) -> bytes:
    return json.dumps({"hook_event_name": "PostToolUse", "session_id": f"s{i}", "tool_name": "mcp__hive-mind__recall_memory",
                       "tool_input": {"query": f"q{i}"}, "tool_response": "[]", "ts": 5 + i}).encode()


def lines() -> list[bytes]:
    """Turns, tool and lifecycle events, KnowHub calls, memory tool calls, bodies over the limit, bad lines."""
    out = [line for _, line in generate(BacklogSpec(turns=300, bad_every=20, seed=3))]
    out += list(kb_backlog(ExperienceBacklogSpec(events=600, seed=4)))
    out += [memory_tool_call(i) for i in range(5)]
    out += [b"\xff\xfe", b"{not json", b"[]", b'{"content": "[hm src:x]  ", "timestamp": 7}',
            json.dumps({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "x" * (LIMIT + 1), "ts": 9}).encode()]
    return out


def decoded(line: bytes) -> HookEvent | RejectedInput:
    try:
        return decode_hook_record(line, received_at_ms=T)
    except RejectedInput as e:
        return e


def test_run_and_the_worker_route_every_line_the_same_way() -> None:
    opts = CaptureOptions(KeyStrategy.BODY, LIMIT, DEFAULT_RULES)
    s = Settings(max_body_bytes=LIMIT)
    kinds: dict[str, int] = {}
    calls = 0
    for off, line in enumerate(lines()):
        o_off, kind, raw, payload, o_call = item_outcome(off, line, decoded(line), opts, 2)
        ev, res, call = route_record(line, Position("ns.hook-events", 2, off, T), s, 0, DEFAULT_RULES)
        kinds[kind] = kinds.get(kind, 0) + 1
        calls += call is not None
        assert o_off == off and o_call == call, line
        if kind in ("c", "n"):
            assert raw is None and res == payload, line
        else:
            assert isinstance(res, DeadLetter) and raw == line and (str(res.reason), res.detail, res.event_id) == payload, line
            assert (ev is None) is (kind == "d"), line
    assert calls >= 5 and all(kinds.get(k, 0) > 0 for k in "cned"), (kinds, calls)  # every way a line can go, and memory tool calls


def test_a_rejection_is_refused_without_an_event_and_a_body_over_the_limit_with_its_event() -> None:
    bad = RejectedInput(Reason.MALFORMED_JSON, "nope")
    assert route_event(bad, KeyStrategy.BODY, LIMIT, 0, 1, DEFAULT_RULES) == (Refused(bad, ""), None)
    ev = decoded(json.dumps({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "y" * (LIMIT + 1), "ts": 9}).encode())
    assert isinstance(ev, HookEvent)
    res, call = route_event(ev, KeyStrategy.BODY, LIMIT, 0, 1, DEFAULT_RULES)
    assert isinstance(res, Refused) and res.error.reason == Reason.BODY_TOO_LARGE and res.event_id == ev.event_id and call is None


def test_a_memory_tool_call_is_looked_for_only_with_rules() -> None:
    ev = decoded(memory_tool_call(0))
    assert isinstance(ev, HookEvent)
    res, call = route_event(ev, KeyStrategy.BODY, LIMIT, 0, 1, DEFAULT_RULES)
    assert isinstance(res, Skipped) and call is not None and call.session == ev.session
    assert route_event(ev, KeyStrategy.BODY, LIMIT, 0, 1, None) == (res, None)


def test_a_capture_takes_its_record_s_position() -> None:
    ev = decoded(json.dumps({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "done", "ts": 9}).encode())
    assert isinstance(ev, HookEvent)
    res, _call = route_event(ev, KeyStrategy.BODY, LIMIT, 4, 77, None)
    assert isinstance(res, Capture) and (res.partition, res.offset) == (4, 77)


def test_a_native_payload_without_a_time_takes_the_record_timestamp() -> None:
    line = json.dumps({"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "done"}).encode()
    ev, res, _call = route_record(line, Position("t", 0, 0, T), Settings(), 0)
    assert ev is not None and isinstance(res, Capture) and res.event_time_ms == T


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_a_record_never_raises(raw: bytes | None) -> None:
    ev, res, call = route_record(raw, Position("t", 0, 0, T), Settings(), 0, DEFAULT_RULES)
    assert isinstance(res, Capture | Skipped | DeadLetter)
    assert ev is not None or (isinstance(res, DeadLetter) and call is None)
