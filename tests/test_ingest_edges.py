"""The server's answers at the edges of its input (issue 19), in process over a memory sink:
every refused payload is dead-lettered with its reason and the answer says so (the verdict a
client may drop it on), never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hivestream.ingest.server import IngestConfig
from streams.model.deadletter import DeadLetter
from tests.memory_sink import MemorySink, request

PROMPT = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi", "event_time_ms": 1_790_000_000_000}


def _cfg(tmp_path: Path, **kw: object) -> IngestConfig:
    return IngestConfig(spool_dir=tmp_path / "spool", **kw)  # type: ignore[arg-type]


def _dead(sink: MemorySink) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for t, _k, v in sink.records if t.endswith("dead-letter")]


def _events(sink: MemorySink) -> list[dict[str, object]]:
    return [json.loads(v) for t, _k, v in sink.records if t.endswith("hook-events")]


def test_a_body_that_is_not_json_is_answered_with_the_dead_letter_verdict(tmp_path: Path) -> None:
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", b"{not json")
    assert status == 400 and got["dead_lettered"] == 1 and got["truncated"] is False and got["error"] == "malformed_json"
    assert [d.reason for d in _dead(sink)] == ["malformed_json"]


def test_rejected_payloads_are_counted_in_the_verdict(tmp_path: Path) -> None:
    sink = MemorySink()
    body = (json.dumps(PROMPT) + "\n" + json.dumps({"hook_event_name": "Nope"}) + "\n").encode()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", body)
    assert status == 200 and got["accepted"] == 1 and got["dead_lettered"] == 1 and got["truncated"] is False
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", b'{"hook_event_name": "Nope"}')
    assert status == 422 and got["dead_lettered"] == 1 and len(_dead(sink)) == 2


def test_a_body_just_under_the_limit_says_its_dead_letter_is_truncated(tmp_path: Path) -> None:
    sink = MemorySink()
    big = json.dumps({**PROMPT, "prompt": "x" * 900_000}).encode()
    status, got = request(_cfg(tmp_path), sink, "POST", "/v1/hooks/claude-code", big)
    assert status == 422 and got["dead_lettered"] == 1 and got["truncated"] is True  # so a client keeps the whole payload
    assert len(_dead(sink)) == 1 and "truncated" in _dead(sink)[0].detail


@pytest.mark.parametrize("runtime", ["claude_code", "nope"])
def test_an_unknown_runtime_is_refused_without_a_verdict(tmp_path: Path, runtime: str) -> None:
    sink = MemorySink()
    status, got = request(_cfg(tmp_path), sink, "POST", f"/v1/hooks/{runtime}", json.dumps(PROMPT).encode())
    assert status == 404 and got["error"] == "unknown_runtime" and not _events(sink)
