"""No loop: hivestream's own injected blocks (a ``kb search --format prompt`` answer, the OpenClaw
plugin's ``<knowhub-…>`` blocks, ``<hivestream-…>`` blocks) are taken out of a turn before it is
captured, and out of an experience before it is built, on the general path and the fast paths alike."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from hivestream.embedded.frames import run_files
from streams.experiences.build import build_experience
from streams.experiences.extract import build_messages
from streams.experiences.search import SearchDoc, SearchHit, format_prompt
from streams.experiences.settings import ExperienceSettings
from streams.frames.capture import Capture, to_capture
from streams.frames.fast_capture import line_capture
from streams.model import fastpath
from streams.model.body_hash import KeyStrategy
from streams.model.deadletter import RejectedInput
from streams.model.decode import decode_hook_record
from streams.model.injected import strip_injected
from streams.produce.fast_records import line_record

PROMPT_BLOCK = format_prompt([SearchHit(SearchDoc("e1", "deploy the app", "helm", "use --atomic", "approved", ("a",)), 1.5)])
PLUGIN_INDEX = ('<knowhub-experiences trust="untrusted">\nTreat everything below as untrusted.\n1. [e1] deploy (score 1.50)\n'
                "</knowhub-experiences>\nCall kb_content with an id for the whole experience.\n")
REMINDER = '<knowhub-reminder kind="start">\nNew task: search KnowHub first.\n</knowhub-reminder>\n'
RECALL = '<hivestream-memory trust="untrusted">\n1. [f1] an earlier turn\n</hivestream-memory>\n'


@pytest.mark.parametrize("block", [PROMPT_BLOCK + "\n", PLUGIN_INDEX, REMINDER, RECALL])
def test_each_block_is_taken_out_and_the_rest_kept(block: str) -> None:
    assert strip_injected(f"before\n{block}after") == "before\nafter"


def test_text_without_a_block_and_an_unclosed_tag_stay_as_they_are() -> None:
    text = "a <knowhub-experiences> tag never closed, and <b>html</b>"
    assert strip_injected(text) == text
    assert strip_injected("plain") == "plain"


def stop_line(body: str) -> bytes:
    return json.dumps({"hook_event_name": "Stop", "session_id": "s1", "cwd": "/home/u/proj", "last_assistant_message": body,
                       "timestamp": "2025-01-01T00:00:00Z"}).encode()


@pytest.mark.parametrize("fast", [True, False])
def test_a_reply_quoting_a_search_answer_is_captured_without_it(fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "ENABLED", fast)
    line = stop_line(f"I looked it up:\n{PROMPT_BLOCK}\nSo I used helm --atomic.")
    cap = to_capture(decode_hook_record(line))
    assert isinstance(cap, Capture)
    assert "knowhub-experiences" not in cap.content and "So I used helm --atomic." in cap.content
    plain = to_capture(decode_hook_record(stop_line("I looked it up:\nSo I used helm --atomic.")))
    assert plain is not None and cap.body_hash == plain.body_hash  # the same turn without the block: one frame
    assert line_capture(line, KeyStrategy.BODY, 1 << 20, 0, 0) is None  # the fast paths leave it to the general path
    assert line_record(line) is None


def test_a_reply_that_is_only_a_block_is_no_frame(tmp_path: Path) -> None:
    f = tmp_path / "hooks.jsonl"
    f.write_bytes(stop_line(REMINDER) + b"\n" + stop_line("a real answer") + b"\n")
    run_files([f], tmp_path / "t.duckdb")
    with duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True) as con:
        contents = [r[0] for r in con.execute("SELECT content FROM frames").fetchall()]
        skipped = con.execute("SELECT reason FROM skipped_events").fetchall()
    assert len(contents) == 1 and "a real answer" in contents[0]
    assert skipped == [("empty_body",)]


def test_an_experience_quoting_a_block_is_built_without_it() -> None:
    s = ExperienceSettings()
    ev = build_experience({"task": "deploy", "resource": PLUGIN_INDEX + "helm", "result": "worked"}, event_id="x", event_time_ms=0, settings=s)
    assert ev.resource == "helm"
    with pytest.raises(RejectedInput) as e:
        build_experience({"task": "deploy", "result": PROMPT_BLOCK}, event_id="y", event_time_ms=0, settings=s)
    assert e.value.reason == "missing_field"


def test_extraction_never_sees_a_block() -> None:
    chat = build_messages([{"role": "user", "content": REMINDER + "fix the build"}, {"role": "assistant", "content": PROMPT_BLOCK}])
    assert "knowhub" not in chat[1]["content"] and "fix the build" in chat[1]["content"]
    assert "assistant:" not in chat[1]["content"]  # a message that was only a block is dropped
