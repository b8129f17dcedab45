"""The faust agents in faust's test context with the memory store (no broker)."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import AsyncMock

import pytest

from streams.codec import capture_to_json, frame_event_from_json
from streams.faust_app import create_app
from streams.settings import Settings
from tests.dedup_helpers import cap


def sent_values(mock: AsyncMock) -> list[Any]:
    return [c.kwargs["value"] for c in mock.call_args_list]


@pytest.fixture
def h() -> Any:
    app = create_app(Settings(window_ms=60_000), store="memory://", partitions=2)
    for ch in app.channels.values():
        ch.send = AsyncMock()
    return app


async def test_dedup_agent_collapses_and_keeps_state_in_the_table(h: Any) -> None:
    a = cap("[hm session:openclaw-gateway:c1 src:openclaw event:stop] BODY", 1000, "a")
    b = cap("[hm session:s2 src:claude-code event:stop] BODY", 1300, "b")
    async with h.dedup.test_context() as agent:
        await agent.put(capture_to_json(a), key=a.key.encode(), partition=0)
        await agent.put(capture_to_json(b), key=b.key.encode(), partition=0)
        await agent.put(capture_to_json(a), key=a.key.encode(), partition=0)  # redelivered
    out = [frame_event_from_json(v) for v in sent_values(h.channels["frames"].send)]
    assert [(fe.kind, fe.frame_id, fe.capture.source) for fe in out] == [
        ("created", "a", "openclaw"), ("touched", "a", "claude-code"), ("created", "a", "openclaw")]
    assert h.table[a.key][0][:3] == ["a", 1000, "a"]


async def test_dedup_agent_dead_letters_a_bad_capture_record(h: Any) -> None:
    async with h.dedup.test_context() as agent:
        await agent.put(b"{not json", key=b"k", partition=1)
        await agent.put(json.dumps({"schema_version": 9}).encode(), key=b"k", partition=1)
    reasons = [json.loads(v)["reason"] for v in sent_values(h.channels["dead_letter"].send)]
    assert reasons == ["malformed_json", "unknown_schema_version"]
    assert h.channels["frames"].send.call_count == 0


async def test_validate_agent_routes_captures_tool_events_and_bad_input(h: Any) -> None:
    good = json.dumps({"hook_event_name": "Stop", "session_id": "s1", "last_assistant_message": "done", "ts": 5}).encode()
    tool = json.dumps({"hook_event_name": "PreToolUse", "session_id": "s1", "tool_name": "Bash", "ts": 6}).encode()
    async with h.validate.test_context() as agent:
        for v in (good, tool, b"\xff\xfe", b'{"content": "[hm src:x]  ", "timestamp": 7}'):
            await agent.put(v, key=b"s1", partition=0)
    caps = [json.loads(v) for v in sent_values(h.channels["captures"].send)]
    assert [c["source"] for c in caps] == ["claude-code"]
    reasons = [json.loads(v)["reason"] for v in sent_values(h.channels["dead_letter"].send)]
    assert reasons == ["not_utf8", "empty_body"]


def test_an_unexpected_exception_is_dead_lettered_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams import steps
    from streams.steps import Position, route_hook_record

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("bug")

    monkeypatch.setattr(steps, "decode_hook_record", boom)
    out = route_hook_record(b"{}", Position("t", 0, 5, 0), Settings(), 1)
    assert out is not None and not hasattr(out, "key")
    assert out.reason == "processing_error" and "ZeroDivisionError" in out.detail  # type: ignore[union-attr]


def test_a_tombstone_is_dead_lettered_with_a_clear_reason() -> None:
    from streams.steps import Position, route_hook_record

    out = route_hook_record(None, Position("t", 0, 1, 0), Settings(), 1)
    assert out is not None and out.reason == "malformed_json" and "tombstone" in out.detail  # type: ignore[union-attr]


def test_each_running_worker_claims_its_own_state_directory(tmp_path: Any) -> None:
    import subprocess
    import sys

    from streams.workdir import claim_worker_dir

    first = claim_worker_dir(tmp_path, "app")
    second = claim_worker_dir(tmp_path, "app")
    assert (first.name, second.name) == ("worker-0", "worker-1")
    # another process gets the next free slot while this one holds two
    code = "import sys; from pathlib import Path; from streams.workdir import claim_worker_dir; print(claim_worker_dir(Path(sys.argv[1]), 'app').name)"
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "worker-2"
