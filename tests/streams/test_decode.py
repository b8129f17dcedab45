"""Adapters and validation: every bad input becomes a reasoned rejection, never a crash."""

from __future__ import annotations

import json

import pytest

from streams.frames.capture import Skipped, SkipReason, capture_outcome, to_capture
from streams.model.deadletter import Reason, RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.events import PROMPT, STOP, HookEvent

T = "2026-11-02T10:00:00Z"


def dec(obj: object) -> HookEvent:
    return decode_hook_record(json.dumps(obj).encode())


def reason(raw: bytes, **kw: object) -> Reason:
    with pytest.raises(RejectedInput) as ei:
        ev = decode_hook_record(raw)
        to_capture(ev, **kw)  # type: ignore[arg-type]
    return ei.value.reason


def test_claude_code_prompt_and_stop() -> None:
    p = dec({"hook_event_name": "UserPromptSubmit", "session_id": "s1", "prompt": "hi", "cwd": "/w/tide", "ts": T})
    assert (p.source, p.event_type, p.session, p.project, p.body) == ("claude-code", PROMPT, "s1", "tide", "hi")
    s = dec({"hook_event_name": "Stop", "session_id": "s1", "last_assistant_message": "done", "timestamp": T})
    assert s.frame_content() == "[hm session:s1 src:claude-code event:stop] done"


def test_claude_code_events_without_text_are_not_captures() -> None:
    e = dec({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "tool_input": {}, "ts": T})
    assert e.event_type == "pre-tool-use" and to_capture(e) is None
    e = dec({"event": "Stop", "session_id": "s1", "stop_hook_active": False, "ts": T})  # flattened log format, no text
    assert e.event_type == STOP and to_capture(e) is None


@pytest.mark.parametrize("raw", [b'{"content": "[hm src:a event:stop] \\u3000 ", "timestamp": 1}', b'{"content": "", "timestamp": 1}'])
def test_an_empty_body_is_skipped_not_rejected(raw: bytes) -> None:
    out = capture_outcome(decode_hook_record(raw))
    assert isinstance(out, Skipped) and out.reason == SkipReason.EMPTY_BODY


def test_subagent_scope() -> None:
    e = dec({"hook_event_name": "SubagentStop", "session_id": "s1", "agent_id": "a7", "last_assistant_message": "x", "ts": T})
    assert (e.session, e.parent, e.event_type) == ("s1:a7", "s1", "subagent-stop")


def test_codex_hook_and_notify() -> None:
    e = dec({"hook_event_name": "Stop", "session_id": "th", "turn_id": "t1", "model": "gpt-5.5", "cwd": "/x/y",
             "permission_mode": "default", "stop_hook_active": False, "transcript_path": None,
             "last_assistant_message": "ok", "ts": T})
    assert (e.source, e.event_type) == ("codex", STOP)
    n = dec({"type": "agent-turn-complete", "thread-id": "th", "turn-id": "t1", "cwd": "/x", "input-messages": ["a"],
             "last-assistant-message": "ok", "timestamp": T})
    assert (n.source, n.event_type, n.body, n.session) == ("codex", STOP, "ok", "th")


@pytest.mark.parametrize(
    ("ctx", "top", "scope"),
    [({"channelId": "tg"}, {"sessionKey": "k"}, "openclaw-gateway:tg"),
     ({}, {"sessionKey": "k", "sessionId": "i"}, "openclaw-gateway:k"),
     ({"sessionId": "i"}, {}, "openclaw-gateway:i")],
)
def test_openclaw_session_precedence(ctx: dict, top: dict, scope: str) -> None:
    e = dec({"type": "message", "action": "received", "timestamp": T, "context": {"content": "q", **ctx}, **top})
    assert (e.source, e.event_type, e.session, e.native_event) == ("openclaw", PROMPT, scope, "message:received")


def test_prefixed_content_keeps_provenance_and_is_verbatim() -> None:
    c = "[hm session:s9 parent:p src:hive-mind event:note project:x] body"
    e = dec({"content": c, "timestamp": 1_700_000_000})
    assert (e.source, e.session, e.parent, e.event_type, e.project) == ("hive-mind", "s9", "p", "note", "x")
    assert e.frame_content() == c and e.event_time_ms == 1_700_000_000_000


def test_serialised_hook_event_round_trip() -> None:
    e = dec({"hook_event_name": "Stop", "session_id": "s1", "last_assistant_message": "done", "ts": T})
    assert decode_hook_record(e.to_json()) == e


def test_lone_surrogate_escape_is_not_bad_input() -> None:
    e = decode_hook_record(b'{"content": "a\\ud800b", "timestamp": 5}')
    assert e.content == "a\ufffdb"
    assert e.to_json()  # serialisable to UTF-8


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"content": "x", "timestamp": ', Reason.MALFORMED_JSON),
        (b"[1, 2]", Reason.WRONG_SHAPE),
        (b'"just a string"', Reason.WRONG_SHAPE),
        (b'{"hook_event_name": "Stop", "ts": "2026-01-01T00:00:00Z"}', Reason.MISSING_FIELD),
        (b'{"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": 5, "ts": 1}', Reason.WRONG_SHAPE),
        (b'{"type": "message", "action": "sent", "timestamp": 1, "context": {"channelId": "c"}}', Reason.MISSING_FIELD),
        (b'{"type": "message", "action": "sent", "timestamp": 1, "context": {"content": "x"}}', Reason.MISSING_FIELD),
        (b'{"type": "message", "action": "sent", "timestamp": 1, "context": []}', Reason.WRONG_SHAPE),
        (b'{"foo": 1}', Reason.UNKNOWN_PAYLOAD),
        (b'{"content": "x"}', Reason.BAD_TIMESTAMP),
        (b'{"content": "x", "timestamp": "next tuesday"}', Reason.BAD_TIMESTAMP),
        (b'{"content": "x", "timestamp": -5}', Reason.BAD_TIMESTAMP),
        (b'{"content": "x", "timestamp": 1e300}', Reason.BAD_TIMESTAMP),
        (b'{"content": "x\xff", "timestamp": 1}', Reason.NOT_UTF8),
        (b'{"schema_version": 2, "event_id": "e"}', Reason.UNKNOWN_SCHEMA_VERSION),
        (b'{"schema_version": 1, "event_id": "e", "source": "x"}', Reason.MISSING_FIELD),
        (b'{"schema_version": 1, "event_id": "e", "source": "x", "event_type": "stop", "event_time_ms": "soon"}', Reason.BAD_TIMESTAMP),
        (b'{"schema_version": 1, "event_id": "e", "source": "x", "event_type": "stop", "event_time_ms": 1, "bogus": 1}', Reason.WRONG_SHAPE),
    ],
)
def test_bad_input_reasons(raw: bytes, expected: Reason) -> None:
    assert reason(raw) == expected


def test_body_over_the_size_limit() -> None:
    raw = json.dumps({"content": "é" * 600, "timestamp": 1}).encode()
    assert reason(raw, max_body_bytes=1000) == Reason.BODY_TOO_LARGE
    assert to_capture(decode_hook_record(raw), max_body_bytes=1200) is not None


@pytest.mark.parametrize(
    "raw",
    [
        b'{"type": ["x"]}',
        b'{"type": {"a": 1}}',
        b'{"type": "message", "action": ["sent"], "timestamp": 1, "context": {"content": "x"}}',
        b'{"event": 5, "session_id": "s", "ts": 1}',
        b'{"schema_version": true, "event_id": "e", "source": "x", "event_type": "stop", "event_time_ms": 1}',
        b'{"type": "agent-turn-complete", "thread-id": ["t"], "timestamp": 1}',
    ],
)
def test_fields_of_unexpected_types_are_rejected_not_raised(raw: bytes) -> None:
    with pytest.raises(RejectedInput):
        to_capture(decode_hook_record(raw))


def test_deep_nesting_is_malformed_json() -> None:
    assert reason(b"[" * 100_000) == Reason.MALFORMED_JSON


def test_an_integer_past_python_s_digit_limit_is_malformed_json() -> None:
    # json.loads raises a plain ValueError for it (sys.get_int_max_str_digits), not JSONDecodeError
    assert reason(b'{"hook_event_name": "Stop", "session_id": "s", "last_assistant_message": "x", "ts": 1' + b"0" * 5000 + b"}") \
        == Reason.MALFORMED_JSON


def test_a_body_whose_json_would_not_fit_a_kafka_record() -> None:
    raw = json.dumps({"content": "\x01" * 200_000, "timestamp": 1}).encode()  # 200 KB, 1.2 MB as JSON
    assert reason(raw) == Reason.BODY_TOO_LARGE
