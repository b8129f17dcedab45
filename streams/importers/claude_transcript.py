"""Claude Code session transcript (``~/.claude/projects/<slug>/<sessionId>.jsonl``) → hook events.

Replays a transcript as the hook events Claude Code's hooks would have emitted for it, with event
times taken from the entries' ``timestamp`` fields. Every event is built by the live adapter
(:func:`streams.model.adapters.claude_code.adapt_claude_code`) from a synthesised hook payload, so scope,
parent, project and ``event_id`` follow the live rules; ``raw`` is that payload without its text
field (a few identifying fields, never the transcript line).

Transcript facts the importer relies on (see ``shared/corpus/SOURCES.md``):

* Claude Code writes one ``assistant`` line per content block; the lines of one API response share
  ``message.id``. Stop bodies are assembled per ``message.id``, never per line.
* ``user`` entries are typed prompts only when they are not tool results, not ``isMeta``, not
  ``isCompactSummary`` and not local-command / slash-command / task-notification wrappers. An
  ``isCompactSummary`` entry holds the summary a compaction left: it becomes ``PostCompact`` with
  that text as ``compact_summary`` (its ``trigger`` from the ``compact_boundary`` before it).
* An ``Agent`` (formerly ``Task``) ``tool_use`` block starts a subagent; its ``input.prompt`` is
  the subagent's task and goes with the ``PreToolUse`` / ``PostToolUse`` events as ``tool_input``.
* A subagent's own file has ``isSidechain: true`` and ``agentId`` on every entry.
* ``progress``, ``file-history-snapshot``, ``summary`` and ``queue-operation`` lines are not hook
  events (``agent_progress`` lines embed subagent messages that the subagent file also holds).

Turns: a turn starts at a typed prompt, and also (without a prompt event) at a slash command or a
``<task-notification>`` entry, which make Claude Code run the model again; a manual
``compact_boundary`` ends the turn before it. A turn ends at the next start or at end of input.
Its ``Stop`` carries the text of the last assistant message with text; none is emitted for a turn
without text, a turn ended by ``[Request interrupted by user…]`` (Claude Code runs no Stop hook on
an interrupt), or a turn that still awaits a tool result (the file was cut mid-turn). A failed
tool result (``is_error``) becomes ``PostToolUseFailure``: Claude Code runs no ``PostToolUse``
for it (the corpus's hook log B3 shows none). The compaction agent's file (``agentId``
``acompact-…``) yields no ``SubagentStop``; B3 shows none for it either.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from streams.model.adapters.claude_code import SUBAGENT_TOOLS, adapt_claude_code
from streams.model.deadletter import Reason, RejectedInput
from streams.model.decode import parse_json_object
from streams.model.events import HookEvent
from streams.model.timeparse import parse_time_ms

Item = tuple[int, bytes, HookEvent | RejectedInput]
"""One importer output: (0-based line offset, that line's raw bytes, event or rejection)."""

_SKIPPED = frozenset({"progress", "file-history-snapshot", "summary", "queue-operation"})
_TURN_OPENERS = ("<command-name>", "<command-message>", "<task-notification>")
_NOT_PROMPTS = (
    *_TURN_OPENERS,
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
)
_INTERRUPT = "[Request interrupted by user"
_COMPACTION_AGENT = "acompact"
_TEXT_FIELDS = ("prompt", "last_assistant_message", "compact_summary", "tool_input")


class LineFeeder(Protocol):
    """Per-file import state driven by :func:`import_jsonl`."""

    def feed(self, offset: int, line: bytes, obj: dict[str, Any]) -> Iterator[Item]:
        """Items for one decoded line; may raise :class:`RejectedInput` for that line."""
        ...

    def finish(self) -> Iterator[Item]:
        """Items still pending at end of input."""
        ...


def import_jsonl(lines: Iterable[bytes], feeder: LineFeeder) -> Iterator[Item]:
    """Drive ``feeder`` over ``lines``; shared by the transcript and rollout importers.

    Each line is decoded by :func:`streams.model.decode.parse_json_object` (strict UTF-8, one JSON
    object, lone surrogates read as U+FFFD). Blank lines are skipped (offsets still count them).
    A line that fails to decode, or whose events fail to build, yields one
    :class:`RejectedInput` (``not_utf8`` / ``malformed_json`` / ``wrong_shape`` / …) for that
    line, and the import goes on.
    """
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield from feeder.feed(offset, line, parse_json_object(line))
        except RejectedInput as err:
            yield offset, line, err
        except (TypeError, ValueError, AttributeError, KeyError) as err:  # a field of an unexpected type
            yield offset, line, RejectedInput(Reason.WRONG_SHAPE, f"unexpected shape: {type(err).__name__}: {err}")
    yield from feeder.finish()


def import_claude_transcript(lines: Iterable[bytes], path: str | None = None) -> Iterator[Item]:
    """Import one Claude Code transcript file (main session or a subagent's sidechain file).

    Args:
        lines: the file's lines as raw bytes, in order (e.g. an ``open(path, "rb")`` handle).
        path: the file's path, given to every event as its ``transcript_path`` (as the hooks send
            it), so the project is the session's workspace (:mod:`streams.model.workspace`).

    Yields:
        ``(offset, line, item)``: the 0-based line offset the item is attributed to, that line's
        bytes, and a :class:`HookEvent` (source ``claude-code``, ``event_time_ms`` in epoch ms
        from the entry's ``timestamp``) or a :class:`RejectedInput` for a bad line
        (``not_utf8`` / ``malformed_json`` / ``wrong_shape`` / ``bad_timestamp`` /
        ``missing_field``). Main files: ``SessionStart`` (startup, then compact after each
        compaction), ``UserPromptSubmit``, ``PreToolUse`` / ``PostToolUse`` /
        ``PostToolUseFailure``, ``PreCompact``, ``PostCompact``, ``Stop``. Sidechain files: tool events and one
        ``SubagentStop`` at the end, scoped ``<sessionId>:<agentId>`` with parent ``sessionId``.
        A ``Stop`` is attributed to the last entry of its turn and yielded when the turn ends.
    """
    return import_jsonl(lines, _Transcript(path))


@dataclass
class _Turn:
    """One agent turn: where it last advanced, its latest text message, its open tool calls."""

    offset: int
    line: bytes
    time_ms: int
    text_id: str | None = None
    texts: list[str] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    interrupted: bool = False

    def touch(self, offset: int, line: bytes, time_ms: int) -> None:
        """Record ``line`` as the turn's latest entry."""
        self.offset, self.line, self.time_ms = offset, line, time_ms

    def add_text(self, message_id: str, text: str) -> None:
        """Add a text block; a new ``message_id`` replaces the previous message's text."""
        if message_id != self.text_id:
            self.text_id, self.texts = message_id, []
        self.texts.append(text)

    def body(self) -> str | None:
        """The Stop body, or ``None`` when the turn ends without a stop (see module doc)."""
        if self.interrupted or self.pending or not self.texts:
            return None
        return "\n\n".join(self.texts)


class _Transcript:
    """Per-file import state; see :func:`import_claude_transcript`."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self.session: str | None = None
        self.agent: str | None = None
        self.cwd: str | None = None
        self.sidechain: bool | None = None
        self.started = False
        self.turn: _Turn | None = None
        self.tools: dict[str, str] = {}
        self.tasks: dict[str, dict[str, Any]] = {}  # tool_use id of an Agent / Task call -> its input (prompt, subagent_type, ...)
        self.trigger: str | None = None  # the last compact_boundary's trigger

    def feed(self, offset: int, line: bytes, entry: dict[str, Any]) -> Iterator[Item]:
        """Events for one transcript entry (and the Stop of a turn it ends)."""
        kind = entry.get("type")
        if not isinstance(kind, str):
            raise RejectedInput(Reason.WRONG_SHAPE, "transcript entry has no string 'type'")
        self._note_identity(entry)
        if not self.started and self.sidechain is False and entry.get("timestamp") is not None:
            self.started = True
            yield self._event("SessionStart", offset, line, _time(entry), source="startup")
        if kind in _SKIPPED:
            return
        if kind == "assistant":
            yield from self._assistant(offset, line, entry)
        elif kind == "user":
            yield from self._user(offset, line, entry)
        elif kind == "system" and entry.get("subtype") == "compact_boundary":
            yield from self._compact(offset, line, entry)

    def finish(self) -> Iterator[Item]:
        """At end of input: the open turn's Stop, or a sidechain file's SubagentStop."""
        if not self.sidechain:
            yield from self._close_turn()
            return
        turn, self.turn = self.turn, None
        body = turn.body() if turn else None
        if turn and body is not None and not (self.agent or "").startswith(_COMPACTION_AGENT):
            yield self._event(
                "SubagentStop",
                turn.offset,
                turn.line,
                turn.time_ms,
                last_assistant_message=body,
                message_id=turn.text_id,
            )

    def _note_identity(self, entry: dict[str, Any]) -> None:
        for key, attr in (("sessionId", "session"), ("agentId", "agent"), ("cwd", "cwd")):
            value = entry.get(key)
            if isinstance(value, str) and value:
                setattr(self, attr, value)
        if self.sidechain is None and "isSidechain" in entry:
            self.sidechain = entry["isSidechain"] is True

    def _assistant(self, offset: int, line: bytes, entry: dict[str, Any]) -> Iterator[Item]:
        msg, time_ms = _message(entry), _time(entry)
        turn = self._turn_at(offset, line, time_ms)
        turn.touch(offset, line, time_ms)
        turn.interrupted = False
        message_id = str(msg.get("id") or entry.get("uuid") or f"line-{offset}")
        for block in _blocks(msg.get("content")):
            if block.get("type") == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    raise RejectedInput(Reason.WRONG_SHAPE, f"text block of message {message_id} is not a string")
                if text.strip():
                    turn.add_text(message_id, text)
            elif block.get("type") == "tool_use":
                tool_id, name = str(block.get("id") or ""), block.get("name")
                self.tools[tool_id] = name if isinstance(name, str) else "unknown"
                task = block.get("input")
                if self.tools[tool_id] in SUBAGENT_TOOLS and isinstance(task, dict) and isinstance(task.get("prompt"), str):
                    self.tasks[tool_id] = task
                turn.pending.add(tool_id)
                yield self._event("PreToolUse", offset, line, time_ms, tool_name=self.tools[tool_id], tool_use_id=tool_id,
                                  tool_input=self.tasks.get(tool_id))

    def _user(self, offset: int, line: bytes, entry: dict[str, Any]) -> Iterator[Item]:
        if entry.get("isCompactSummary"):
            if not self.sidechain:
                summary = "\n\n".join(str(b.get("text") or "") for b in _blocks(_message(entry).get("content")) if b.get("type") == "text")
                yield self._event("PostCompact", offset, line, _time(entry), trigger=self.trigger, compact_summary=summary)
            return
        if entry.get("isMeta"):
            return
        blocks = _blocks(_message(entry).get("content"))
        results = [b for b in blocks if b.get("type") == "tool_result"]
        text = "\n\n".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        time_ms = _time(entry)
        interrupt = text.lstrip().startswith(_INTERRUPT)
        if results or interrupt:
            yield from self._results(offset, line, time_ms, results)
            self._turn_at(offset, line, time_ms).interrupted |= interrupt
        elif self.sidechain or not text.strip() or text.lstrip().startswith(_NOT_PROMPTS):
            yield from self._not_a_prompt(offset, line, time_ms, text)
        else:
            yield from self._close_turn()
            self.turn = _Turn(offset, line, time_ms)
            yield self._event("UserPromptSubmit", offset, line, time_ms, prompt=text, uuid=entry.get("uuid"))

    def _not_a_prompt(self, offset: int, line: bytes, time_ms: int, text: str) -> Iterator[Item]:
        """A user entry that is no typed prompt; a slash command or task notification opens a turn."""
        if not self.sidechain and text.lstrip().startswith(_TURN_OPENERS):
            yield from self._close_turn()
        self._turn_at(offset, line, time_ms)

    def _results(self, offset: int, line: bytes, time_ms: int, results: list[dict[str, Any]]) -> Iterator[Item]:
        turn = self._turn_at(offset, line, time_ms)
        turn.touch(offset, line, time_ms)
        for res in results:
            tool_id = str(res.get("tool_use_id") or "")
            turn.pending.discard(tool_id)
            name = "PostToolUseFailure" if res.get("is_error") is True else "PostToolUse"
            yield self._event(name, offset, line, time_ms, tool_name=self.tools.get(tool_id), tool_use_id=tool_id,
                              tool_input=self.tasks.get(tool_id) if name == "PostToolUse" else None)

    def _compact(self, offset: int, line: bytes, entry: dict[str, Any]) -> Iterator[Item]:
        meta = entry.get("compactMetadata")
        trigger = meta.get("trigger") if isinstance(meta, dict) else None
        self.trigger = trigger if isinstance(trigger, str) else None
        time_ms = _time(entry)
        if trigger == "manual":
            yield from self._close_turn()
        yield self._event("PreCompact", offset, line, time_ms, trigger=trigger)
        if not self.sidechain:
            yield self._event("SessionStart", offset, line, time_ms, source="compact")

    def _turn_at(self, offset: int, line: bytes, time_ms: int) -> _Turn:
        """The open turn, opening one at this line if there is none."""
        if self.turn is None:
            self.turn = _Turn(offset, line, time_ms)
        return self.turn

    def _close_turn(self) -> Iterator[Item]:
        turn, self.turn = self.turn, None
        body = turn.body() if turn else None
        if turn and body is not None and not self.sidechain:
            yield self._event("Stop", turn.offset, turn.line, turn.time_ms, last_assistant_message=body, message_id=turn.text_id)

    def _event(self, name: str, offset: int, line: bytes, time_ms: int, **fields: Any) -> Item:
        """Build one event through the live adapter; ``raw`` keeps the payload minus its text."""
        payload: dict[str, Any] = {"hook_event_name": name, "session_id": self.session, "cwd": self.cwd, "transcript_path": self.path}
        if self.sidechain and self.agent:
            payload["agent_id"] = self.agent
        payload.update(fields)
        payload = {k: v for k, v in payload.items() if v is not None}
        raw = {k: v for k, v in payload.items() if k not in _TEXT_FIELDS}
        return offset, line, adapt_claude_code(payload, time_ms, raw=raw)


def _time(entry: dict[str, Any]) -> int:
    """The entry's ``timestamp`` in epoch ms (``bad_timestamp`` when missing or unparseable)."""
    return parse_time_ms(entry.get("timestamp"))


def _message(entry: dict[str, Any]) -> dict[str, Any]:
    msg = entry.get("message")
    if not isinstance(msg, dict):
        raise RejectedInput(Reason.WRONG_SHAPE, f"{entry.get('type')} entry has no 'message' object")
    return msg


def _blocks(content: object) -> list[dict[str, Any]]:
    """Content blocks of a message; a plain string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []
