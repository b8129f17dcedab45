"""A Claude Code ``Stop`` without ``last_assistant_message``: the reply read from the session's transcript.

Claude Code added ``last_assistant_message`` to ``Stop`` / ``SubagentStop`` in later versions;
earlier ones (the corpus's hook log) send only ``transcript_path`` (``agent_transcript_path`` for a
subagent), and the hooks reference warns that the transcript may not hold the last message yet when
the hook runs. ``hivestream hook`` runs on the agent's machine at that moment, so it is the one place
that can read the file: :func:`with_transcript_reply` adds the reply to such a payload before it is
posted, and every path downstream sees an ordinary ``Stop``. The server never reads a path a payload
names. Standard library only (the hook starts fast).

The reply is the one :mod:`streams.importers.claude_transcript` gives a turn: the text blocks of the
last assistant message (one ``message.id``, several lines) after the turn's prompt, read from the
last :data:`TAIL_BYTES` of the file. None when the file cannot be read or the turn has no text yet;
the payload then stays as it was (a ``Stop`` without text is skipped as ``no_text``).
"""

from __future__ import annotations

import json
import os
from typing import Any

TAIL_BYTES = 4 << 20
FALLBACK_KEY = "hivestream_reply_from"
"""Key added to a payload whose reply was read from its transcript (value: the field that named the file)."""
_FIELDS = {"Stop": "transcript_path", "SubagentStop": "agent_transcript_path"}
_NOT_PROMPTS = ("<command-", "<local-command-", "<task-notification>", "<bash-", "<system-reminder>", "[Request interrupted by user")


def _entries_backwards(path: str) -> list[dict[str, Any]]:
    """The JSON objects of the last :data:`TAIL_BYTES` of ``path``, last first (a partial first line
    and unparsable lines left out).

    Raises:
        OSError: when the file cannot be read.
    """
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - TAIL_BYTES))
        data = f.read()
    lines = data.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]
    out = []
    for ln in reversed(lines):
        try:
            obj = json.loads(ln)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _texts(entry: dict[str, Any]) -> list[str]:
    msg = entry.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]
    return []


def _is_prompt(entry: dict[str, Any]) -> bool:
    """A typed prompt: a user entry that is no tool result, no meta or summary entry, no command wrapper."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return False
    msg = entry.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        return False
    text = "\n\n".join(_texts(entry)).lstrip()
    return bool(text) and not text.startswith(_NOT_PROMPTS)


def last_reply(path: str) -> str | None:
    """The text of the last assistant message of the current turn of the transcript at ``path``, or None."""
    try:
        entries = _entries_backwards(path)
    except OSError:
        return None
    reply: list[str] = []
    message_id: object = None
    for e in entries:
        if _is_prompt(e):
            break
        if e.get("type") != "assistant":
            if reply:
                break
            continue
        msg = e.get("message")
        mid = msg.get("id") if isinstance(msg, dict) else None
        texts = [t for t in _texts(e) if t.strip()]
        if reply and mid != message_id:
            break
        if texts or reply:
            message_id = mid
            reply = texts + reply
    return "\n\n".join(reply) if reply else None


def with_transcript_reply(body: bytes) -> bytes:
    """``body`` (a hook payload) with ``last_assistant_message`` read from its transcript when it is
    a ``Stop`` / ``SubagentStop`` without one, and :data:`FALLBACK_KEY` saying so; else ``body``
    unchanged. Never raises."""
    if b"Stop" not in body:
        return body
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return body
    if not isinstance(obj, dict):
        return body
    field = _FIELDS.get(obj.get("hook_event_name") or obj.get("event"))  # type: ignore[arg-type]
    path = obj.get(field) if field else None
    if not isinstance(path, str) or not path or isinstance(obj.get("last_assistant_message"), str):
        return body
    reply = last_reply(path)
    if reply is None:
        return body
    obj["last_assistant_message"] = reply
    obj[FALLBACK_KEY] = field
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
