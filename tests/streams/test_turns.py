"""What is a turn, what is not, and what of it is kept: the cases found by posting the runtimes'
documented payloads (voice notes, failed sends, tool-only turns, a Windows or ``cd``-ed working
directory, compaction summaries, subagent tasks, the ids memory users query), through ``hivestream
run`` on a hook log and through ``hivestream serve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from hivestream.embedded.frames import run_files
from projections.frames.projection import FramesProjection
from streams.importers.transcript_tail import FALLBACK_KEY, last_reply, with_transcript_reply
from streams.ingest.payloads import to_event
from streams.model.adapters.openclaw_plugin import PLUGIN_HOOKS
from streams.model.workspace import workspace_name
from tests.support.hook_stand import AnswerStand, hook
from tests.support.session_sets import SessionSet

T0 = 1_790_000_000_000
SLUG = "/home/ana/.claude/projects/-home-ana-tidepool/4d56.jsonl"


def _run(tmp_path: Path, payloads: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    """``hivestream run`` on a hook log of ``payloads``; the DuckDB file, open read-only."""
    log = tmp_path / "hooks.jsonl"
    log.write_text("".join(json.dumps(p) + "\n" for p in payloads))
    run_files([log], tmp_path / "m.duckdb")
    return duckdb.connect(str(tmp_path / "m.duckdb"), read_only=True)


def _voice(contact: str, t: int, mid: str) -> dict[str, Any]:
    return {"type": "message", "action": "received", "sessionKey": f"agent:main:whatsapp:dm:{contact}", "timestamp": t,
            "context": {"from": contact, "content": "<media:audio>", "channelId": "whatsapp", "conversationId": contact, "messageId": mid}}


def _transcribed(contact: str, t: int, mid: str, text: str) -> dict[str, Any]:
    return {"type": "message", "action": "transcribed", "sessionKey": f"agent:main:whatsapp:dm:{contact}", "timestamp": t,
            "context": {"from": contact, "transcript": text, "body": "<media:audio>", "channelId": "whatsapp", "conversationId": contact,
                        "messageId": mid}}


def test_two_voice_notes_from_two_contacts_are_two_transcripts_not_one_placeholder_frame(tmp_path: Path) -> None:
    con = _run(tmp_path, [_voice("+15550001", T0, "m1"), _voice("+15550002", T0 + 500, "m2"),
                          _transcribed("+15550001", T0 + 3_000, "m1", "Book the table for eight."),
                          _transcribed("+15550002", T0 + 3_400, "m2", "Can you move my dentist appointment?")])
    frames = con.execute("SELECT content, access_count FROM frames ORDER BY content").fetchall()
    assert frames == [("[hm session:openclaw-gateway:whatsapp src:openclaw event:user-prompt-submit] Book the table for eight.", 1),
                      ("[hm session:openclaw-gateway:whatsapp src:openclaw event:user-prompt-submit] Can you move my dentist appointment?", 1)]
    assert con.execute("SELECT reason, count(*) FROM skipped_events GROUP BY ALL").fetchall() == [("placeholder", 2)]
    # the conversation and the sender of each capture, queryable beside the seed's prefix
    rows = con.execute("""SELECT d.session_key, d.conversation_id, d.sender, d.channel FROM frame_captures c
                          JOIN event_details d USING (event_id) ORDER BY d.sender""").fetchall()
    assert rows == [("agent:main:whatsapp:dm:+15550001", "+15550001", "+15550001", "whatsapp"),
                    ("agent:main:whatsapp:dm:+15550002", "+15550002", "+15550002", "whatsapp")]
    assert con.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)


def test_a_failed_send_a_tool_only_turn_and_an_empty_message_are_skipped_not_frames_nor_dead_letters(tmp_path: Path) -> None:
    sent = {"type": "message", "action": "sent", "sessionKey": "agent:main:telegram:dm:42", "timestamp": T0,
            "context": {"to": "42", "content": "Booked for nine.", "success": False, "error": "403 Forbidden", "channelId": "telegram"}}
    tool_only = {"session_id": "s1", "hook_event_name": "Stop", "cwd": "/w/tidepool", "stop_hook_active": False,
                 "last_assistant_message": "", "event_time_ms": T0 + 10}
    empty = {"type": "message", "action": "received", "sessionKey": "k", "timestamp": T0 + 20, "context": {"channelId": "tg", "content": " "}}
    con = _run(tmp_path, [sent, tool_only, empty])
    assert con.execute("SELECT count(*) FROM frames").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM dead_letters").fetchone() == (0,)
    assert sorted(con.execute("SELECT reason, native_event FROM skipped_events").fetchall()) == [
        ("empty_body", "Stop"), ("empty_body", "message:received"), ("failed_send", "message:sent")]


@pytest.mark.parametrize(("cwd", "transcript", "project"), [
    ("C:\\Users\\Ana Maria\\tidepool", None, "tidepool"),
    ("C:\\Users\\Ana Maria\\tidepool\\src", "C:\\Users\\Ana Maria\\.claude\\projects\\C--Users-Ana-Maria-tidepool\\s.jsonl", "tidepool"),
    ("/home/ana/tidepool/src", SLUG, "tidepool"),
    ("/home/ana/tidepool/src/deep", SLUG, "tidepool"),
    ("/home/ana/tidepool", SLUG, "tidepool"),
    ("/tmp/elsewhere", SLUG, "elsewhere"),
    ("/home/ana/tidepool/src", None, "src"),
    ("/home/ana", "/home/ana/.claude/projects/-home-ana/s.jsonl", None),
    ("C:\\Users\\Ana Maria", None, None),
    ("/Users/ana", None, None),
    ("/root", None, None),
    ("/", None, None),
    ("C:\\", None, None),
    ("/srv/my-app/", None, "my-app"),
])
def test_the_project_is_the_workspace_never_the_user(cwd: str, transcript: str | None, project: str | None) -> None:
    assert workspace_name(cwd, transcript) == project


def test_the_project_is_stable_after_cd_and_keeps_the_users_name_out_on_run_and_serve(tmp_path: Path) -> None:
    """The project of a session's frames: ``tidepool`` before and after ``cd src``, from a Windows
    path too, on ``run`` and on ``serve`` (the body hash, and so the dedup key, never depends on it)."""
    win = "C:\\Users\\Ana Maria\\tidepool"
    payloads = [
        {"session_id": "s1", "hook_event_name": "UserPromptSubmit", "cwd": "/home/ana/tidepool", "transcript_path": SLUG,
         "prompt": "Where is the window read?", "event_time_ms": T0},
        {"session_id": "s1", "hook_event_name": "Stop", "cwd": "/home/ana/tidepool/src", "transcript_path": SLUG,
         "last_assistant_message": "In dedup.py.", "event_time_ms": T0 + 1_000},
        {"session_id": "w1", "hook_event_name": "UserPromptSubmit", "cwd": win, "prompt": "Run the tests on Windows.", "event_time_ms": T0 + 2_000},
    ]
    con = _run(tmp_path, payloads)
    ran = con.execute("SELECT project, content FROM frames ORDER BY created_at_ms").fetchall()
    assert [p for p, _c in ran] == ["tidepool"] * 3
    assert all("project:tidepool]" in c and "Ana" not in c and "project:src" not in c for _p, c in ran)
    from tests.support.serve_harness import ServeProc

    serve = ServeProc(tmp_path / "serve.duckdb", "--no-report")
    try:
        for p in payloads:
            assert httpx.post(f"{serve.url}/v1/hooks/claude-code", json=p, timeout=30).status_code == 200
        serve.wait_applied()
    finally:
        assert serve.stop() == 0
    served = duckdb.connect(str(tmp_path / "serve.duckdb"), read_only=True)
    assert served.execute("SELECT project, content FROM frames ORDER BY created_at_ms").fetchall() == ran


def test_every_openclaw_plugin_hook_is_recognised_on_auto() -> None:
    """``/v1/hooks/auto`` knew four plugin hook names; every other one was ``unknown_payload``."""
    for name in sorted(PLUGIN_HOOKS):
        ev = to_event({"hook": name, "event": {"content": "hi", "success": True}, "ctx": {"sessionKey": "k"}, "timestamp": T0}, "auto",
                      gateway="g", received_at_ms=T0)
        assert (ev.source, ev.native_event) == ("openclaw", name)
    assert len(PLUGIN_HOOKS) >= 36


def test_compaction_summaries_subagent_tasks_and_the_ids_are_kept(tmp_path: Path) -> None:
    task = {"description": "Map the dedup code", "prompt": "Find every place the window is read.", "subagent_type": "Explore"}
    base = {"session_id": "s1", "cwd": "/home/ana/tidepool", "transcript_path": SLUG, "permission_mode": "default"}
    payloads = [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt_id": "p-7", "prompt": "Map the window code.", "event_time_ms": T0},
        {**base, "hook_event_name": "PreToolUse", "tool_name": "Agent", "tool_input": task, "tool_use_id": "toolu_1", "event_time_ms": T0 + 1},
        {**base, "hook_event_name": "PostToolUse", "tool_name": "Agent", "tool_input": task, "tool_response": {"content": "ok"},
         "tool_use_id": "toolu_1", "event_time_ms": T0 + 9},
        {**base, "hook_event_name": "SubagentStop", "agent_id": "a7", "agent_type": "Explore", "stop_hook_active": False,
         "agent_transcript_path": "/home/ana/.claude/projects/-home-ana-tidepool/s1/subagents/agent-a7.jsonl",
         "last_assistant_message": "dedup.py and settings.py.", "event_time_ms": T0 + 8},
        {**base, "hook_event_name": "PostCompact", "trigger": "auto", "compact_summary": "We chose W = 10 min.", "event_time_ms": T0 + 20},
        {**base, "hook_event_name": "SessionEnd", "reason": "prompt_input_exit", "event_time_ms": T0 + 30},
        {"session_id": "cx", "hook_event_name": "Stop", "cwd": "/w/tidepool", "turn_id": "turn-3", "model": "gpt-5.5", "stop_hook_active": False,
         "transcript_path": None, "last_assistant_message": "Renamed.", "event_time_ms": T0 + 40},
        {"type": "agent-turn-complete", "thread-id": "th", "turn-id": "turn-4", "cwd": "/w/tidepool", "input-messages": ["Rename it.", "Docs too."],
         "last-assistant-message": "Renamed it, docs too.", "event_time_ms": T0 + 50},
    ]
    con = _run(tmp_path, payloads)
    frames = dict(con.execute("SELECT event_type, content FROM frames WHERE event_type IN ('compact-summary', 'subagent-task')").fetchall())
    assert frames == {"compact-summary": "[hm session:s1 src:claude-code event:compact-summary project:tidepool] We chose W = 10 min.",
                      "subagent-task": "[hm session:s1 src:claude-code event:subagent-task project:tidepool] Find every place the window is read."}
    assert con.execute("SELECT access_count FROM frames WHERE event_type = 'subagent-task'").fetchone() == (2,)  # Pre and Post: one frame
    got = sorted(con.execute("""SELECT c.event_type, d.prompt_id, d.turn_id, d.model, d.agent_type, d.agent_transcript_path, d.input_messages,
                                       d.trigger, d.tool_use_id FROM frame_captures c JOIN event_details d USING (event_id)""").fetchall(), key=repr)
    sub = "/home/ana/.claude/projects/-home-ana-tidepool/s1/subagents/agent-a7.jsonl"
    assert got == sorted([
        ("user-prompt-submit", "p-7", None, None, None, None, None, None, None),
        ("subagent-task", None, None, None, None, None, None, None, "toolu_1"), ("subagent-task", None, None, None, None, None, None, None, "toolu_1"),
        ("subagent-stop", None, None, None, "Explore", sub, None, None, None),
        ("compact-summary", None, None, None, None, None, None, "auto", None),
        ("stop", None, "turn-3", "gpt-5.5", None, None, None, None, None),
        ("stop", None, "turn-4", None, None, None, '["Rename it.","Docs too."]', None, None),
    ], key=repr)
    assert con.execute("""SELECT s.event_type, d.end_reason FROM skipped_events s JOIN event_details d USING (event_id)
                          WHERE s.native_event = 'SessionEnd'""").fetchone() == ("session-end", "prompt_input_exit")


def test_run_on_a_transcript_keeps_its_compaction_summary_and_the_subagent_task(tmp_path: Path, sessions: SessionSet) -> None:
    src = sessions.path("manual_main")
    run_files([src], tmp_path / "t.duckdb")
    con = duckdb.connect(str(tmp_path / "t.duckdb"), read_only=True)
    summary = con.execute("SELECT content FROM frames WHERE event_type = 'compact-summary'").fetchall()
    assert len(summary) == 1 and "continued from a previous conversation" in summary[0][0]
    assert con.execute("SELECT trigger FROM event_details d JOIN frame_captures c USING (event_id) "
                       "WHERE c.event_type = 'compact-summary'").fetchone() == ("manual",)
    tasks = con.execute("SELECT content, access_count FROM frames WHERE event_type = 'subagent-task'").fetchall()
    assert len(tasks) == 1 and tasks[0][1] == 2  # its PreToolUse and PostToolUse


def _transcript(path: Path, *entries: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def _assistant(mid: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": mid, "role": "assistant", "content": list(blocks)}}


def test_the_reply_read_from_a_transcript_is_the_turns_last_assistant_message(tmp_path: Path) -> None:
    prompt = {"type": "user", "message": {"role": "user", "content": "Where is the window read?"}}
    result = {"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}}
    path = _transcript(tmp_path / "s.jsonl", {"type": "user", "message": {"role": "user", "content": "an earlier prompt"}},
                       _assistant("m0", {"type": "text", "text": "an earlier reply"}), prompt,
                       _assistant("m1", {"type": "text", "text": "Let me look."}), _assistant("m1", {"type": "tool_use", "id": "t1", "name": "Grep"}),
                       result, _assistant("m2", {"type": "text", "text": "In dedup.py"}), _assistant("m2", {"type": "text", "text": "and settings.py."}))
    assert last_reply(str(path)) == "In dedup.py\n\nand settings.py."
    assert last_reply(str(_transcript(tmp_path / "n.jsonl", prompt, _assistant("m1", {"type": "tool_use", "id": "t", "name": "X"})))) is None
    assert last_reply(str(tmp_path / "missing.jsonl")) is None
    stop = json.dumps({"hook_event_name": "Stop", "session_id": "s", "transcript_path": str(path), "stop_hook_active": False}).encode()
    got = json.loads(with_transcript_reply(stop))
    assert got["last_assistant_message"] == "In dedup.py\n\nand settings.py." and got[FALLBACK_KEY] == "transcript_path"
    has = json.dumps({"hook_event_name": "Stop", "session_id": "s", "transcript_path": str(path), "last_assistant_message": "own"}).encode()
    assert with_transcript_reply(has) == has


def test_the_command_hook_posts_a_stop_with_the_reply_from_its_transcript(tmp_path: Path) -> None:
    path = _transcript(tmp_path / "s.jsonl", {"type": "user", "message": {"role": "user", "content": "Ping?"}},
                       _assistant("m1", {"type": "text", "text": "Pong."}))
    stand = AnswerStand()
    try:
        r = hook(["claude-code"], {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path / "spool")},
                 json.dumps({"hook_event_name": "Stop", "session_id": "s", "transcript_path": str(path), "stop_hook_active": False}))
    finally:
        stand.close()
    assert r.returncode == 0 and r.stderr == "", r.stderr
    (posted,) = [json.loads(b) for _p, b in stand.seen]
    assert posted["last_assistant_message"] == "Pong." and posted[FALLBACK_KEY] == "transcript_path"


def test_a_file_made_before_the_new_tables_gets_them_and_keeps_its_rows(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    log = tmp_path / "a.jsonl"
    log.write_text(json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "first", "event_time_ms": T0}) + "\n")
    run_files([log], db)
    with FramesProjection(db) as sink:  # what a file of the version before looks like: none of them
        sink.con.execute("DROP TABLE skipped_events")
        sink.con.execute("DROP VIEW event_details")
        sink.con.execute("DROP TABLE event_details_json")
    more = tmp_path / "b.jsonl"
    more.write_text("".join(json.dumps(p) + "\n" for p in [
        {"session_id": "s", "hook_event_name": "Stop", "last_assistant_message": "", "event_time_ms": T0 + 1},
        {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "second", "prompt_id": "p2", "event_time_ms": T0 + 2}]))
    rep = run_files([log, more], db)
    assert rep.not_turns == {"empty_body": 1} and rep.skipped == 1  # the first file's line was applied before
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM frames").fetchone() == (2,)
    assert con.execute("SELECT reason FROM skipped_events").fetchall() == [("empty_body",)]
    assert con.execute("SELECT prompt_id FROM event_details").fetchall() == [("p2",)]
