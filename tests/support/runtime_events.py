"""The documented payload of every row of ``docs/runtime-events.md``, and the table's rows as data.

:func:`rows` reads the page's tables; :data:`PAYLOADS` holds, for each (section, event, case), the
route it is posted to and a payload built as the runtime's docs describe it (field names, nesting,
optional fields), each with its own event time and text so no two rows share a frame by accident.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

DOC = Path(__file__).resolve().parents[2] / "docs" / "runtime-events.md"
SECTIONS = {"Claude Code": "claude-code", "Codex": "codex", "OpenClaw internal hooks": "openclaw", "OpenClaw plugin hooks": "openclaw-plugin"}
T0 = 1_790_000_000_000


class Row(NamedTuple):
    """One row of the page: its section, event, case, outcome (``frame``/``skipped``, event type or reason) and details kept."""

    section: str
    event: str
    case: str
    kind: str
    what: str
    details: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{SECTIONS[self.section]}:{self.event}" + (f":{self.case}" if self.case else "")


def rows() -> list[Row]:
    """Every row of the page's four tables, in order."""
    out: list[Row] = []
    section = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if section not in SECTIONS or not line.startswith("| ") or line.startswith(("| event |", "|---")):
            continue
        event, case, outcome, details = (c.strip() for c in line.strip().strip("|").split("|"))
        m = re.fullmatch(r"`(frame|skipped) ([a-z_-]+)`", outcome)
        assert m, f"unreadable outcome {outcome!r} in: {line}"
        out.append(Row(section, event, case, m.group(1), m.group(2), tuple(d.strip() for d in details.split(",") if d.strip())))
    return out


def _claude(hook: str, i: int, /, **fields: Any) -> dict[str, Any]:
    base = {"session_id": "c1a0de00-0000-4000-8000-000000000001", "transcript_path": "/home/ana/.claude/projects/-home-ana-tidepool/s.jsonl",
            "cwd": "/home/ana/tidepool", "permission_mode": "default", "hook_event_name": hook, "event_time_ms": T0 + i * 1000}
    return {**base, **fields}


def _codex(hook: str, i: int, /, **fields: Any) -> dict[str, Any]:
    base = {"session_id": "019e1625-789d-76c0-80ab-3724b5ddb799", "transcript_path": "/home/ana/.codex/sessions/2026/12/06/rollout-x.jsonl",
            "cwd": "/home/ana/tidepool", "hook_event_name": hook, "model": "gpt-5.5", "turn_id": f"turn-{i}", "event_time_ms": T0 + i * 1000}
    return {**base, **fields}


def _internal(kind: str, action: str, i: int, **context: Any) -> dict[str, Any]:
    return {"type": kind, "action": action, "sessionKey": "agent:main:whatsapp:dm:+15550001", "timestamp": T0 + i * 1000,
            "context": context}


def _plugin(hook: str, i: int, event: dict[str, Any], **ctx: Any) -> dict[str, Any]:
    return {"hook": hook, "event": event, "ctx": {"sessionKey": "agent:main:telegram:dm:42", **ctx}, "timestamp": T0 + i * 1000}


_TASK = {"description": "Map the dedup code", "prompt": "Find every place the dedup window is read and list them.", "subagent_type": "Explore"}
_MSG = {"channelId": "whatsapp", "conversationId": "+15550001", "from": "+15550001", "messageId": "wamid-1",
        "metadata": {"threadId": 7, "senderName": "Ana"}}


def _payloads() -> dict[tuple[str, str, str], tuple[str, dict[str, Any]]]:
    cc, cx, oc, pl = "Claude Code", "Codex", "OpenClaw internal hooks", "OpenClaw plugin hooks"
    p: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}

    def add(section: str, event: str, case: str, route: str, payload: dict[str, Any]) -> None:
        p[(section, event, case)] = (route, payload)

    n = iter(range(1, 10_000))
    # Claude Code
    add(cc, "SessionStart", "", "claude-code", _claude("SessionStart", next(n), source="startup", model="claude-opus-4-7", agent_type="reviewer"))
    add(cc, "Setup", "", "claude-code", _claude("Setup", next(n), trigger="init"))
    add(cc, "UserPromptSubmit", "", "claude-code", _claude("UserPromptSubmit", next(n), prompt_id="p-1", prompt="Explain the watermark rule."))
    add(cc, "UserPromptExpansion", "", "claude-code", _claude("UserPromptExpansion", next(n), prompt_id="p-2", command_name="review",
                                                              prompt="/review the last commit"))
    add(cc, "PreToolUse", "any tool but a subagent's", "claude-code", _claude("PreToolUse", next(n), tool_name="Bash",
                                                                                tool_input={"command": "ls"}, tool_use_id="toolu_1"))
    add(cc, "PreToolUse", "tool `Agent` (formerly `Task`)", "claude-code", _claude("PreToolUse", next(n), tool_name="Agent", tool_input=_TASK,
                                                                                    tool_use_id="toolu_2"))
    add(cc, "PermissionRequest", "", "claude-code", _claude("PermissionRequest", next(n), tool_name="Bash", tool_input={"command": "rm x"}))
    add(cc, "PermissionDenied", "", "claude-code", _claude("PermissionDenied", next(n), tool_name="Bash", tool_input={"command": "rm x"},
                                                        reason="auto mode denied it"))
    add(cc, "PostToolUse", "any tool but a subagent's", "claude-code", _claude("PostToolUse", next(n), tool_name="Bash", tool_input={"command": "ls"},
                                                                                 tool_response={"stdout": "a"}, tool_use_id="toolu_1"))
    add(cc, "PostToolUse", "tool `Agent` (formerly `Task`)", "claude-code", _claude("PostToolUse", next(n), tool_name="Agent", tool_input=_TASK,
                                                                                     tool_response={"content": "done"}, tool_use_id="toolu_2"))
    add(cc, "PostToolUseFailure", "", "claude-code", _claude("PostToolUseFailure", next(n), tool_name="Bash", tool_input={"command": "x"},
                                                          tool_use_id="toolu_3", error="exit 1"))
    add(cc, "PostToolBatch", "", "claude-code", _claude("PostToolBatch", next(n)))
    add(cc, "Notification", "", "claude-code", _claude("Notification", next(n), message="Claude is waiting for your input",
                                                    notification_type="idle_prompt"))
    add(cc, "SubagentStart", "", "claude-code", _claude("SubagentStart", next(n), agent_id="a7", agent_type="Explore"))
    sub = {"agent_id": "a7", "agent_type": "Explore", "agent_transcript_path": "/home/ana/.claude/projects/-home-ana-tidepool/s/subagents/agent-a7.jsonl",
           "stop_hook_active": False}
    add(cc, "SubagentStop", "with `last_assistant_message`", "claude-code",
        _claude("SubagentStop", next(n), **sub, last_assistant_message="The window is read in dedup.py and settings.py."))
    add(cc, "SubagentStop", "without `last_assistant_message`", "claude-code", _claude("SubagentStop", next(n), **sub))
    add(cc, "TaskCreated", "", "claude-code", _claude("TaskCreated", next(n), task_id="t1", task_subject="Write tests"))
    add(cc, "TaskCompleted", "", "claude-code", _claude("TaskCompleted", next(n), task_id="t1", task_subject="Write tests"))
    add(cc, "Stop", "with `last_assistant_message`", "claude-code", _claude("Stop", next(n), prompt_id="p-1", stop_hook_active=False,
                                                                               last_assistant_message="The watermark trails the group's greatest time."))
    add(cc, "Stop", "`last_assistant_message` empty (a turn that only ran tools)", "claude-code",
        _claude("Stop", next(n), stop_hook_active=False, last_assistant_message=""))
    add(cc, "Stop", "without `last_assistant_message`", "claude-code", _claude("Stop", next(n), stop_hook_active=False))
    add(cc, "StopFailure", "", "claude-code", _claude("StopFailure", next(n), error="rate_limit", error_details="429"))
    add(cc, "TeammateIdle", "", "claude-code", _claude("TeammateIdle", next(n), teammate_name="reviewer", team_name="core"))
    add(cc, "InstructionsLoaded", "", "claude-code", _claude("InstructionsLoaded", next(n), file_path="/home/ana/tidepool/CLAUDE.md",
                                                          load_reason="session_start"))
    add(cc, "ConfigChange", "", "claude-code", _claude("ConfigChange", next(n), source="user_settings"))
    add(cc, "CwdChanged", "", "claude-code", _claude("CwdChanged", next(n), old_cwd="/home/ana/tidepool", new_cwd="/home/ana/tidepool/src"))
    add(cc, "FileChanged", "", "claude-code", _claude("FileChanged", next(n), file_path="/home/ana/tidepool/.env", event="change"))
    add(cc, "WorktreeCreate", "", "claude-code", _claude("WorktreeCreate", next(n), name="feature-x"))
    add(cc, "WorktreeRemove", "", "claude-code", _claude("WorktreeRemove", next(n), worktree_path="/home/ana/tidepool-feature-x"))
    add(cc, "PreCompact", "", "claude-code", _claude("PreCompact", next(n), trigger="manual", custom_instructions="keep the decisions"))
    add(cc, "PostCompact", "with `compact_summary`", "claude-code",
        _claude("PostCompact", next(n), trigger="auto", compact_summary="We chose a 10 minute window and a 60 s lateness."))
    add(cc, "PostCompact", "without `compact_summary`", "claude-code", _claude("PostCompact", next(n), trigger="auto"))
    add(cc, "Elicitation", "", "claude-code", _claude("Elicitation", next(n), mcp_server_name="db", message="Which table?"))
    add(cc, "ElicitationResult", "", "claude-code", _claude("ElicitationResult", next(n), mcp_server_name="db", action="accept"))
    add(cc, "SessionEnd", "", "claude-code", _claude("SessionEnd", next(n), reason="prompt_input_exit"))
    for name in ("PreModelSwitch", "PostModelSwitch", "MessageDisplay", "DirectoryAdded"):
        add(cc, name, "", "claude-code", _claude(name, next(n)))
    # Codex (the generated schemas' required fields)
    add(cx, "SessionStart", "", "codex", {k: v for k, v in _codex("SessionStart", next(n), source="startup", permission_mode="default").items()
                                          if k != "turn_id"})
    add(cx, "UserPromptSubmit", "", "codex", _codex("UserPromptSubmit", next(n), permission_mode="default", prompt="Add a test for eviction."))
    add(cx, "PreToolUse", "", "codex", _codex("PreToolUse", next(n), permission_mode="default", tool_name="shell",
                                              tool_input={"command": ["ls"]}, tool_use_id="call_1"))
    add(cx, "PermissionRequest", "", "codex", _codex("PermissionRequest", next(n), permission_mode="default", tool_name="shell",
                                                     tool_input={"command": ["rm", "x"]}))
    add(cx, "PostToolUse", "", "codex", _codex("PostToolUse", next(n), permission_mode="default", tool_name="shell",
                                               tool_input={"command": ["ls"]}, tool_response="a", tool_use_id="call_1"))
    add(cx, "PreCompact", "", "codex", _codex("PreCompact", next(n), trigger="auto"))
    add(cx, "PostCompact", "", "codex", _codex("PostCompact", next(n), trigger="auto"))
    add(cx, "Stop", "", "codex", _codex("Stop", next(n), permission_mode="default", stop_hook_active=False,
                                        last_assistant_message="Eviction is covered now."))
    add(cx, "StopFailure", "", "codex", _codex("StopFailure", next(n), permission_mode="default", error="stream error",
                                               error_details="reset", last_assistant_message=None))
    add(cx, "SubagentStart", "", "codex", _codex("SubagentStart", next(n), permission_mode="default", agent_id="sa1", agent_type="worker"))
    add(cx, "SubagentStop", "", "codex", _codex("SubagentStop", next(n), permission_mode="default", agent_id="sa1", agent_type="worker",
                                                agent_transcript_path="/home/ana/.codex/sessions/2026/12/06/sub.jsonl", stop_hook_active=False,
                                                last_assistant_message="The worker finished the migration."))
    add(cx, "notify `agent-turn-complete`", "", "codex-notify",
        {"type": "agent-turn-complete", "thread-id": "019e1625-789d-76c0-80ab-3724b5ddb799", "turn-id": "turn-99", "cwd": "/home/ana/tidepool",
         "input-messages": ["Rename the setting.", "And update the docs."], "last-assistant-message": "Renamed it and updated the docs.",
         "event_time_ms": T0 + next(n) * 1000})
    # OpenClaw internal hooks
    add(oc, "command:new", "", "openclaw", _internal("command", "new", next(n), senderId="+15550001", commandSource="whatsapp",
                                                     cfg={"gateway": {"token": "secret"}}))
    add(oc, "command:reset", "", "openclaw", _internal("command", "reset", next(n), senderId="+15550001", commandSource="whatsapp"))
    add(oc, "command:stop", "", "openclaw", _internal("command", "stop", next(n), sessionId="sid-1"))
    add(oc, "session:compact:before", "", "openclaw", _internal("session", "compact:before", next(n)))
    add(oc, "session:compact:after", "", "openclaw", _internal("session", "compact:after", next(n)))
    add(oc, "session:patch", "", "openclaw", _internal("session", "patch", next(n)))
    add(oc, "agent:bootstrap", "", "openclaw", _internal("agent", "bootstrap", next(n), workspaceDir="/home/ana/.openclaw/workspace"))
    add(oc, "gateway:startup", "", "openclaw", {"type": "gateway", "action": "startup", "timestamp": T0 + next(n) * 1000, "context": {}})
    add(oc, "message:received", "text", "openclaw", _internal("message", "received", next(n), content="Can you book the table for eight?", **_MSG))
    add(oc, "message:received", "a media placeholder only (`<media:audio>`)", "openclaw",
        _internal("message", "received", next(n), **{**_MSG, "messageId": "wamid-2", "metadata": {}}, content="<media:audio>"))
    add(oc, "message:received", "empty content", "openclaw",
        _internal("message", "received", next(n), channelId="whatsapp", content="", **{"from": "+15550001"}))
    add(oc, "message:transcribed", "", "openclaw", _internal("message", "transcribed", next(n), **{**_MSG, "messageId": "wamid-2", "metadata": {}},
                                                            body="<media:audio>", transcript="Remind me to call the bakery at nine.",
                                                            mediaType="audio/ogg"))
    add(oc, "message:preprocessed", "with a transcript", "openclaw",
        _internal("message", "preprocessed", next(n), **{**_MSG, "messageId": "wamid-3", "metadata": {}}, body="<media:audio>",
                  bodyForAgent="[Audio] Transcript: Order more flour.", transcript="Order more flour.", isGroup=False))
    add(oc, "message:preprocessed", "media (a placeholder `body`), no transcript", "openclaw",
        _internal("message", "preprocessed", next(n), channelId="whatsapp", **{"from": "+15550001"}, body="<media:image>",
                  bodyForAgent="[Image] A receipt from the bakery, 42 euros.", isGroup=False))
    add(oc, "message:preprocessed", "a text message", "openclaw",
        _internal("message", "preprocessed", next(n), channelId="whatsapp", **{"from": "+15550001"}, body="See you at eight",
                  bodyForAgent="[WhatsApp +15550001] See you at eight", isGroup=False))
    add(oc, "message:sent", "sent", "openclaw", _internal("message", "sent", next(n), to="+15550001", content="Booked for eight.", success=True,
                                                          channelId="whatsapp", conversationId="+15550001", messageId="wamid-9", isGroup=False))
    add(oc, "message:sent", "`success: false`", "openclaw", _internal("message", "sent", next(n), to="+15550001", content="Booked for nine.",
                                                                       success=False, error="blocked", channelId="whatsapp"))
    # OpenClaw plugin hooks (event, ctx as OpenClaw's hook types define them)
    run = {"runId": "run-1", "sessionId": "sid-1", "provider": "openai", "model": "gpt-5.5"}
    plain: dict[str, dict[str, Any]] = {
        "before_model_resolve": {"prompt": "hi"}, "agent_turn_prepare": {"prompt": "hi"}, "before_prompt_build": {"prompt": "hi", "messages": []},
        "before_agent_start": {"prompt": "hi"}, "before_agent_reply": {"cleanedBody": "hi"},
        "model_call_started": {**run, "callId": "c1", "sessionKey": "agent:main:telegram:dm:42"},
        "model_call_ended": {**run, "callId": "c1", "durationMs": 900, "outcome": "completed"},
        "llm_input": {**run, "prompt": "hi", "historyMessages": [], "imagesCount": 0},
        "llm_output": {**run, "assistantTexts": ["Hello!"], "prompt": "hi"},
        "before_agent_finalize": {"sessionId": "sid-1", "model": "gpt-5.5", "stopHookActive": False, "lastAssistantMessage": "Hello!"},
        "agent_end": {"runId": "run-1", "messages": [], "success": True},
        "before_compaction": {"messageCount": 80, "tokenCount": 120_000}, "after_compaction": {"messageCount": 12, "compactedCount": 68},
        "before_reset": {"reason": "new"},
        "inbound_claim": {"content": "hi", "channel": "telegram", "isGroup": True, "senderId": "u42"},
        "message_sending": {"to": "42", "content": "Hello!"},
        "before_tool_call": {"toolName": "exec", "params": {"cmd": "ls"}, "toolCallId": "tc1"},
        "after_tool_call": {"toolName": "exec", "params": {"cmd": "ls"}, "toolCallId": "tc2", "result": "a"},
        "tool_result_persist": {"toolName": "exec", "toolCallId": "tc2", "message": {"role": "tool"}},
        "before_message_write": {"message": {"role": "assistant"}, "sessionKey": "agent:main:telegram:dm:42"},
        "session_start": {"sessionId": "sid-1", "sessionKey": "agent:main:telegram:dm:42"},
        "session_end": {"sessionId": "sid-1", "messageCount": 40, "reason": "idle"},
        "subagent_spawning": {"childSessionKey": "agent:sub:1", "agentId": "sub", "mode": "run", "threadRequested": False},
        "subagent_delivery_target": {"childSessionKey": "agent:sub:1", "requesterSessionKey": "agent:main:telegram:dm:42",
                                     "expectsCompletionMessage": True},
        "subagent_spawned": {"childSessionKey": "agent:sub:1", "agentId": "sub", "mode": "run", "threadRequested": False, "runId": "run-2"},
        "subagent_ended": {"targetSessionKey": "agent:sub:1", "targetKind": "subagent", "reason": "completed", "runId": "run-2"},
        "gateway_start": {"port": 18789}, "gateway_stop": {"reason": "shutdown"},
        "heartbeat_prompt_contribution": {"prompt": "beat"},
        "cron_changed": {"action": "added", "jobId": "j1"},
        "before_dispatch": {"content": "hi", "channel": "telegram", "senderId": "u42", "isGroup": True},
        "reply_dispatch": {"inboundAudio": False, "shouldRouteToOriginating": False, "shouldSendToolSummaries": False, "sendPolicy": "allow"},
        "before_install": {"targetType": "plugin", "targetName": "x", "sourcePath": "/tmp/x", "sourcePathKind": "directory"},
        "before_agent_run": {"prompt": "hi", "messages": [], "channelId": "telegram", "senderId": "u42"},
    }
    ctx_for = {"before_prompt_build": {"agentId": "main"}, "before_agent_start": {"agentId": "main"}, "agent_end": {"agentId": "main"},
               "after_tool_call": {"agentId": "main", "toolName": "exec"}, "inbound_claim": {"channelId": "telegram", "conversationId": "42"},
               "message_sending": {"channelId": "telegram"}, "before_dispatch": {"channelId": "telegram", "conversationId": "42"}}
    no_session = {"subagent_spawning", "subagent_delivery_target", "subagent_spawned", "subagent_ended", "gateway_start", "gateway_stop",
                  "cron_changed", "before_install", "before_agent_run"}
    for hook, event in plain.items():
        payload = _plugin(hook, next(n), event, **ctx_for.get(hook, {}))
        if hook in no_session:
            payload["ctx"] = {}
        add(pl, hook, "", "openclaw-plugin", payload)
    msg_ctx = {"channelId": "telegram", "conversationId": "42", "messageId": "m1", "senderId": "u42"}
    add(pl, "message_received", "text", "openclaw-plugin",
        _plugin("message_received", next(n), {"from": "u42", "content": "What did we decide about the window?", "threadId": 3, "messageId": "m1"},
                **msg_ctx))
    add(pl, "message_received", "a media placeholder only", "openclaw-plugin",
        _plugin("message_received", next(n), {"from": "u42", "content": "<media:image> (2 images)"}, channelId="telegram"))
    add(pl, "message_sent", "sent", "openclaw-plugin",
        _plugin("message_sent", next(n), {"to": "42", "content": "Ten minutes, with a minute of lateness.", "success": True, "messageId": "m2"},
                channelId="telegram"))
    add(pl, "message_sent", "`success: false`", "openclaw-plugin",
        _plugin("message_sent", next(n), {"to": "42", "content": "Ten minutes, maybe.", "success": False, "error": "403"}, channelId="telegram"))
    return p


PAYLOADS = _payloads()
"""(section, event, case) → (``/v1/hooks/{route}``, payload)."""
