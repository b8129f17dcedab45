"""Codex rollout file (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl``) → hook events.

Replays a rollout as the hook events Codex's hooks would have emitted, with event times from
each line's top-level ``timestamp``. Events are built by the live adapter
(:func:`streams.model.adapters.codex.adapt_codex_hook`) from a synthesised hook payload (with
``turn_id``, as real Codex hook payloads carry it); ``raw`` is that payload minus its text field.

Codex logs most things twice (see ``shared/corpus/SOURCES.md``, "Notes for deduplication"), so
only one copy of each is read:

* prompts: ``event_msg/user_message`` only. ``response_item/message`` with role user/developer
  repeats them and also holds instructions and environment context; ``compacted``'s
  ``replacement_history`` replays old prompts. Neither yields a prompt.
* assistant text: ``event_msg/agent_message`` only (not ``response_item/message`` role assistant).
* tools: ``response_item`` ``function_call`` / ``custom_tool_call`` and their ``*_output``,
  paired by ``call_id``.

``Stop`` is emitted at ``event_msg/task_complete`` with its ``last_agent_message``, else the
turn's last agent message; a turn without ``task_complete`` (aborted, unfinished, cut off) gets
none. ``PreCompact`` at ``compacted`` has trigger ``auto`` when the turn already had a prompt
(compaction mid-turn) and ``manual`` otherwise (a ``/compact`` turn has no user message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from streams.importers.claude_transcript import Item, import_jsonl
from streams.model.adapters.codex import adapt_codex_hook
from streams.model.deadletter import Reason, RejectedInput
from streams.model.timeparse import parse_time_ms

_TEXT_FIELDS = ("prompt", "last_assistant_message")
_CALLS = ("function_call", "custom_tool_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def import_codex_rollout(lines: Iterable[bytes]) -> Iterator[Item]:
    """Import one Codex rollout file.

    Args:
        lines: the file's lines as raw bytes, in order.

    Yields:
        ``(offset, line, item)``: the 0-based line offset, that line's bytes, and a
        :class:`~streams.model.events.HookEvent` (source ``codex``, session = ``session_meta.payload.id``,
        project = :func:`~streams.model.workspace.workspace_name` of the current ``cwd``, ``event_time_ms`` in epoch ms) or a
        :class:`RejectedInput` for a bad line (``not_utf8`` / ``malformed_json`` /
        ``wrong_shape`` / ``bad_timestamp``; ``missing_field`` for an event before any
        ``session_meta``). Events: ``SessionStart`` (startup), ``UserPromptSubmit``,
        ``PreToolUse`` / ``PostToolUse``, ``PreCompact``, ``Stop``.
    """
    return import_jsonl(lines, _Rollout())


class _Rollout:
    """Per-file import state; see :func:`import_codex_rollout`."""

    def __init__(self) -> None:
        self.session: str | None = None
        self.cwd: str | None = None
        self.turn_id: str | None = None
        self.prompted = False
        self.last_agent: str | None = None
        self.tools: dict[str, str] = {}
        self._handlers: dict[tuple[str, str | None], Callable[..., Iterator[Item]]] = {
            ("session_meta", None): self._session_meta,
            ("turn_context", None): self._turn_context,
            ("compacted", None): self._compacted,
            ("event_msg", "task_started"): self._task_started,
            ("event_msg", "user_message"): self._user_message,
            ("event_msg", "agent_message"): self._agent_message,
            ("event_msg", "task_complete"): self._task_complete,
            ("event_msg", "turn_aborted"): self._turn_aborted,
            **{("response_item", t): self._tool_call for t in _CALLS},
            **{("response_item", t): self._tool_output for t in _OUTPUTS},
        }

    def feed(self, offset: int, line: bytes, obj: dict[str, Any]) -> Iterator[Item]:
        """Events for one rollout line."""
        kind, payload = obj.get("type"), obj.get("payload")
        if not isinstance(kind, str) or not isinstance(payload, dict):
            raise RejectedInput(Reason.WRONG_SHAPE, "rollout line needs a string 'type' and a 'payload' object")
        sub = payload.get("type") if kind in ("event_msg", "response_item") else None
        handler = self._handlers.get((kind, sub if isinstance(sub, str) else None))
        if handler is None:
            return
        yield from handler(offset, line, parse_time_ms(obj.get("timestamp")), payload)

    def finish(self) -> Iterator[Item]:
        """Nothing is pending at end of input: an unfinished turn has no Stop."""
        return iter(())

    def _session_meta(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        self.session = _str(p.get("id")) or self.session
        self.cwd = _str(p.get("cwd")) or self.cwd
        yield self._event("SessionStart", offset, line, t, source="startup")

    def _turn_context(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        self.cwd = _str(p.get("cwd")) or self.cwd
        self.turn_id = _str(p.get("turn_id")) or self.turn_id
        return iter(())

    def _task_started(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        self.turn_id, self.prompted, self.last_agent = _str(p.get("turn_id")), False, None
        return iter(())

    def _user_message(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        self.prompted = True
        message = p.get("message")
        if not isinstance(message, str):
            raise RejectedInput(Reason.WRONG_SHAPE, "user_message 'message' must be a string")
        yield self._event("UserPromptSubmit", offset, line, t, prompt=message)

    def _agent_message(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        message = p.get("message")
        if message is not None and not isinstance(message, str):
            raise RejectedInput(Reason.WRONG_SHAPE, "agent_message 'message' must be a string")
        self.last_agent = _str(message) or self.last_agent
        return iter(())

    def _task_complete(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        body = _str(p.get("last_agent_message")) or self.last_agent
        turn = _str(p.get("turn_id")) or self.turn_id
        yield self._event("Stop", offset, line, t, turn_id=turn, last_assistant_message=body)
        self.turn_id, self.prompted, self.last_agent = None, False, None

    def _turn_aborted(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        self.turn_id, self.prompted, self.last_agent = None, False, None
        return iter(())

    def _compacted(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        yield self._event("PreCompact", offset, line, t, trigger="auto" if self.prompted else "manual")

    def _tool_call(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        call_id = _str(p.get("call_id")) or f"line-{offset}"
        self.tools[call_id] = _str(p.get("name")) or "unknown"
        yield self._event("PreToolUse", offset, line, t, tool_name=self.tools[call_id], tool_use_id=call_id)

    def _tool_output(self, offset: int, line: bytes, t: int, p: dict[str, Any]) -> Iterator[Item]:
        call_id = _str(p.get("call_id")) or f"line-{offset}"
        yield self._event("PostToolUse", offset, line, t, tool_name=self.tools.get(call_id), tool_use_id=call_id)

    def _event(self, name: str, offset: int, line: bytes, time_ms: int, **fields: Any) -> Item:
        """Build one event through the live adapter; ``raw`` keeps the payload minus its text."""
        payload: dict[str, Any] = {
            "hook_event_name": name,
            "session_id": self.session,
            "cwd": self.cwd,
            "turn_id": self.turn_id,
        }
        payload.update(fields)
        payload = {k: v for k, v in payload.items() if v is not None}
        raw = {k: v for k, v in payload.items() if k not in _TEXT_FIELDS}
        return offset, line, adapt_codex_hook(payload, time_ms, raw=raw)


def _str(value: object) -> str | None:
    """``value`` when it is a non-empty string, else ``None``."""
    return value if isinstance(value, str) and value else None
