"""Generated agent-session files in the real formats, laid out as the corpus is (``tests/support/corpus.py``).

:func:`write_sessions` writes, under one directory, ``claude-code/*.jsonl`` (Claude Code transcripts:
main sessions, Task subagents' sidechain files, compaction agents, Warmup sidechains, two snapshots of
a growing session, and one hook-event log in the flattened ``ts``/``event`` format of the corpus's
B3) and ``codex/*.jsonl`` (Codex rollouts). Each session kind reproduces one shape the corpus holds
(``shared/corpus/SOURCES.md``): assistant responses split one content block per line under one
``message.id``; ``hook_progress`` and ``stop_hook_summary`` lines where Claude Code ran its hooks;
failed tool results; manual and automatic compaction; slash commands, an interrupt, a task
notification; Codex's doubled records (``response_item`` beside ``event_msg``), ``compacted``
replacement history, an aborted turn, a steer, a file cut mid tool call.

What was written is returned as :class:`Facts` (counts the tests would otherwise take from
SOURCES.md). The files are what Claude Code and Codex write, never derived from hivestream's
importers, so a test comparing an importer with the facts or with the hook log checks it.
Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

START_MS = 1_790_000_000_000  # 2026-09-21 (UTC)
_WORDS = (
    "kafka", "partition", "offset", "consumer", "replay", "window", "watermark", "frame", "memory", "agent", "gateway", "session",
    "dedup", "projection", "duckdb", "snapshot", "changelog", "worker", "rebalance", "commit", "spool", "hook", "prompt", "capture",
    "schema", "index", "query", "latency", "backlog", "retry", "timeout", "parser", "fixture", "migration", "config", "release",
)
_VERBS = ("fix", "add", "check", "rename", "explain", "test", "refactor", "measure", "document", "review")
SHORT_PROMPTS = ("continue", "yes, go ahead", "run the tests again")
_TOOLS = ("Bash", "Read", "Edit", "Grep", "Glob", "Write", "mcp__postgres__query")


def iso(ms: int) -> str:
    """Epoch ms as Claude Code / Codex write it: ``2026-09-21T13:46:40.123Z``."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize()


def prompt_text(rng: random.Random) -> str:
    """A typed request, e.g. ``Fix the kafka offset replay in worker.py (3f2a9c)``."""
    return f"{rng.choice(_VERBS).capitalize()} the {_sentence(rng, 3).lower()} in {rng.choice(_WORDS)}.py ({rng.getrandbits(24):06x})"


def reply_text(rng: random.Random, sentences: int = 3) -> str:
    """An assistant answer of a few sentences, unique per call."""
    return " ".join(f"{_sentence(rng, rng.randint(5, 12))}." for _ in range(sentences)) + f" ({rng.getrandbits(32):08x})"


@dataclass(frozen=True)
class SessionSpec:
    """What to generate.

    Attributes:
        seed: random seed (the files are a function of the spec).
        extra_sessions: ordinary sessions (Claude Code and Codex, alternating) beyond the one of
            each shape, for volume: each adds 3 to 5 turns.
        tools_per_turn: most tool calls in one turn (each is a Pre and a Post event).
    """

    seed: int = 11
    extra_sessions: int = 8
    tools_per_turn: int = 8


@dataclass
class Facts:
    """What was written, by role (a role names one file; see :data:`ROLES`).

    Attributes:
        hooked_prompts: typed prompts of the ``hooked`` main transcript (its hook log has them too).
        split_stops: Stop hooks run in the ``split`` main transcript (one per finished turn).
        split_text_lines: assistant lines holding a text block there (several per message).
        split_second_stop: the start of the second Stop's body there (the turn before the task notification).
        slash_prompts: the typed prompts of the ``slash`` transcript (its slash command and interrupt are none).
        codex_user_messages: ``user_message`` events of ``codex_compacted`` (a repeated text counts each time).
        codex_replayed: user messages its ``compacted`` replacement history replays.
        codex_counts: role → (prompts, stops) of each rollout.
        codex_calls: role → (tool calls, tool outputs) of each rollout.
        codex_first_prompt: the first prompt of ``codex_two_turns``.
        codex_project: the last component of ``codex_two_turns``'s working directory.
    """

    hooked_prompts: int = 0
    split_stops: int = 0
    split_text_lines: int = 0
    split_second_stop: str = ""
    slash_prompts: tuple[str, ...] = ()
    codex_user_messages: int = 0
    codex_replayed: int = 0
    codex_counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    codex_calls: dict[str, tuple[int, int]] = field(default_factory=dict)
    codex_first_prompt: str = ""
    codex_project: str = ""


ROLES: dict[str, str] = {
    "hooked_main": "claude-code/gen-hooked-main-transcript",
    "hook_log": "claude-code/gen-hooked-hook-events-log",
    "split_main": "claude-code/gen-split-main-",
    "manual_main": "claude-code/gen-manual-main-",
    "slash_main": "claude-code/gen-slash-session",
    "snapshot_first": "claude-code/gen-snapshot1-first",
    "snapshot_grown": "claude-code/gen-snapshot2-first",
    "codex_compacted": "codex/gen-long-compacted",
    "codex_two_turns": "codex/gen-2turns",
    "codex_unfinished": "codex/gen-7turns-unfinished",
    "codex_truncated": "codex/gen-truncated-mid-toolcall",
}
"""Role → ``<subdir>/<file name prefix>`` of the generated files (one file matches each)."""

SESSION_GROUPS: dict[str, str] = {"split": "gen-split-", "manual": "gen-manual-", "slash": "gen-slash-"}
"""Session → the file-name prefix of its main file and its subagents' files (``claude-code/``)."""


# ---------------------------------------------------------------- Claude Code


@dataclass
class Tool:
    """One tool call of a turn: name, input, what it returned, whether it failed."""

    name: str
    input: dict[str, Any]
    result: str
    is_error: bool = False


def random_tool(rng: random.Random, cwd: str) -> Tool:
    """A Bash / Read / Edit / Grep / Glob / Write / MCP database call with a plausible input and result; about 1 in 12 fails."""
    name = rng.choice(_TOOLS)
    path = f"{cwd}/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
    inputs: dict[str, dict[str, Any]] = {
        "Bash": {"command": f"pytest -q tests/test_{rng.choice(_WORDS)}.py", "description": "Run the tests"},
        "Read": {"file_path": path},
        "Edit": {"file_path": path, "old_string": rng.choice(_WORDS), "new_string": rng.choice(_WORDS)},
        "Grep": {"pattern": rng.choice(_WORDS), "path": cwd},
        "Glob": {"pattern": f"**/*{rng.choice(_WORDS)}*.py"},
        "Write": {"file_path": path, "content": reply_text(rng, 1)},
        "mcp__postgres__query": {"sql": f"select count(*) from {rng.choice(_WORDS)}s"},
    }
    failed = rng.random() < 1 / 12
    result = f"Exit code 1\n{_sentence(rng, 6)}" if failed else f"{_sentence(rng, rng.randint(4, 20))}\n"
    return Tool(name, inputs[name], result, failed)


class ClaudeTranscript:
    """Writes one Claude Code transcript (main session or sidechain), entry by entry.

    Args:
        rng: the generator's random source.
        session_id: the ``sessionId`` of every entry.
        t_ms: the clock (epoch ms); every entry advances it.
        cwd: the working directory.
        agent_id: for a sidechain file (``isSidechain: true`` and ``agentId`` on every entry).
        hooks: the hook events configured (``hook_progress`` lines are written for these).
        hook_progress: whether this Claude Code version writes ``hook_progress`` lines (2.0.x: no,
            only the ``stop_hook_summary``).
    """

    def __init__(self, rng: random.Random, session_id: str, t_ms: int, cwd: str, *, agent_id: str | None = None,
                 hooks: frozenset[str] = frozenset(), hook_progress: bool = True, version: str = "2.1.39", model: str = "claude-opus-4-6") -> None:
        self.rng, self.session_id, self.t, self.cwd = rng, session_id, t_ms, cwd
        self.agent_id, self.hooks, self.version, self.model = agent_id, hooks, version, model
        self.writes_progress = hook_progress
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.slug = "-".join(rng.choice(_WORDS) for _ in range(3))
        self.pending_stop_text: str | None = None
        self.tool_ids: list[str] = []

    # -- primitives
    def uid(self) -> str:
        """A random (seeded) UUID4 string."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def tick(self, lo: int = 80, hi: int = 2_500) -> int:
        """Advance the clock by ``lo``..``hi`` ms; the new time."""
        self.t += self.rng.randint(lo, hi)
        return self.t

    def _base(self, kind: str) -> dict[str, Any]:
        e: dict[str, Any] = {"parentUuid": self.parent, "isSidechain": self.agent_id is not None, "userType": "external", "cwd": self.cwd,
                             "sessionId": self.session_id, "version": self.version, "gitBranch": "main"}
        if self.agent_id:
            e["agentId"] = self.agent_id
        e["slug"] = self.slug
        e["type"] = kind
        return e

    def _add(self, entry: dict[str, Any], *, chain: bool = True) -> dict[str, Any]:
        self.lines.append(entry)
        if chain and "uuid" in entry:
            self.parent = entry["uuid"]
        return entry

    def snapshot(self) -> None:
        """A ``file-history-snapshot`` line (no top-level time; not a hook event)."""
        mid = self.uid()
        self._add({"type": "file-history-snapshot", "messageId": mid,
                   "snapshot": {"messageId": mid, "trackedFileBackups": {}, "timestamp": iso(self.t)}, "isSnapshotUpdate": False}, chain=False)

    def summary(self, text: str) -> None:
        """A ``summary`` line as Claude Code writes at the top of a resumed file."""
        self._add({"type": "summary", "summary": text, "leafUuid": self.uid()}, chain=False)

    def user(self, content: str | list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        """A ``user`` entry (a typed prompt when ``content`` is a plain string and nothing marks it otherwise)."""
        e = self._base("user")
        e["message"] = {"role": "user", "content": content}
        e |= {"uuid": self.uid(), "timestamp": iso(self.tick(300, 4_000))}
        e |= extra
        return self._add(e)

    def progress(self, data: dict[str, Any], tool_use_id: str) -> None:
        """A ``progress`` line (``hook_progress``, ``bash_progress``, ``agent_progress``)."""
        e = self._base("progress")
        e |= {"data": data, "parentToolUseID": tool_use_id, "toolUseID": tool_use_id, "timestamp": iso(self.tick(5, 60)), "uuid": self.uid()}
        self._add(e)

    def hook_progress(self, event: str, tool_use_id: str, name: str | None = None) -> None:
        """The ``hook_progress`` line Claude Code writes when it runs a configured hook."""
        if event in self.hooks and self.writes_progress:
            self.progress({"type": "hook_progress", "hookEvent": event, "hookName": f"{event}:{name}" if name else event,
                           "command": "hivestream hook"}, tool_use_id)

    def system(self, subtype: str, **fields: Any) -> None:
        """A ``system`` entry (``stop_hook_summary``, ``turn_duration``, ``compact_boundary``)."""
        e = self._base("system")
        e["subtype"] = subtype
        e |= fields
        e |= {"timestamp": iso(self.tick(20, 300)), "uuid": self.uid()}
        self._add(e)

    # -- a model response: one line per content block, one message id
    def response(self, texts: list[str], tools: list[Tool], *, thinking: bool = True, results: bool = True) -> None:
        """One API response: optional thinking, ``texts`` as text blocks, then ``tools`` as tool_use
        blocks (one line each, one ``message.id``); then each tool's hooks and (unless ``results``
        is false) its result."""
        mid = f"msg_{self.rng.getrandbits(96):024x}"
        req = f"req_{self.rng.getrandbits(96):024x}"
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": _sentence(self.rng, 12) + ".", "signature": f"{self.rng.getrandbits(128):032x}"})
        blocks += [{"type": "text", "text": t} for t in texts]
        ids = [f"toolu_{self.rng.getrandbits(96):024x}" for _ in tools]
        blocks += [{"type": "tool_use", "id": i, "name": tool.name, "input": tool.input} for i, tool in zip(ids, tools, strict=True)]
        for b in blocks:
            e = self._base("assistant")
            del e["type"]
            e["message"] = {"model": self.model, "id": mid, "type": "message", "role": "assistant", "content": [b], "stop_reason": None,
                            "stop_sequence": None, "usage": {"input_tokens": self.rng.randint(3, 900), "output_tokens": self.rng.randint(8, 600)}}
            e |= {"requestId": req, "type": "assistant", "uuid": self.uid(), "timestamp": iso(self.tick(60, 1_500))}
            self._add(e)
        for i, tool in zip(ids, tools, strict=True):
            self.hook_progress("PreToolUse", i, tool.name)
        if results:
            for i, tool in zip(ids, tools, strict=True):
                self.tool_result(i, tool)
        self.tool_ids += ids
        if texts:
            self.pending_stop_text = "\n\n".join(texts)

    def tool_result(self, tool_use_id: str, tool: Tool) -> None:
        """The tool's result entry and, after it, its PostToolUse (or PostToolUseFailure) hook."""
        block: dict[str, Any] = {"tool_use_id": tool_use_id, "type": "tool_result", "content": tool.result}
        if tool.is_error or self.rng.random() < 0.5:
            block["is_error"] = tool.is_error
        self.user([block], toolUseResult={"stdout": tool.result, "stderr": "", "interrupted": False})
        self.hook_progress("PostToolUseFailure" if tool.is_error else "PostToolUse", tool_use_id, tool.name)

    def stop_hooks(self) -> None:
        """What Claude Code writes when a turn ends with text: the Stop hook's progress, its summary, the turn's duration."""
        if "Stop" not in self.hooks:
            return
        tid = self.uid()
        self.hook_progress("Stop", tid)
        self.system("stop_hook_summary", hookCount=1, hookInfos=[{"command": "hivestream hook"}], hookErrors=[], preventedContinuation=False,
                    stopReason="", hasOutput=False, level="suggestion", toolUseID=tid)
        self.system("turn_duration", durationMs=self.rng.randint(5_000, 300_000), isMeta=False)

    # -- a whole turn
    def turn(self, tools: int, *, final: str | None = None, texts_per_step: int = 1) -> str:
        """Model responses with ``tools`` tool calls in steps of 1-3 (some with commentary text),
        then a final response with text, then the Stop hooks; returns the final text."""
        while tools > 0:
            k = min(tools, self.rng.randint(1, 3))
            tools -= k
            commentary = [reply_text(self.rng, 1) for _ in range(texts_per_step)] if self.rng.random() < 0.5 else []
            self.response(commentary, [random_tool(self.rng, self.cwd) for _ in range(k)])
        final = final or reply_text(self.rng, 4)
        parts = [final] if texts_per_step == 1 else [final, *(reply_text(self.rng, 2) for _ in range(texts_per_step - 1))]
        self.response(parts, [])
        self.stop_hooks()
        return "\n\n".join(parts)

    def prompt(self, text: str) -> None:
        """A typed prompt (with the file-history snapshot Claude Code writes before it)."""
        self.snapshot()
        self.user(text, thinkingMetadata={"level": "high", "disabled": False, "triggers": []}, todos=[])

    def slash(self, name: str, args: str) -> None:
        """A slash command: its command entry (no prompt; it opens a turn)."""
        self.user(f"<command-message>{name.lstrip('/')}</command-message>\n<command-name>{name}</command-name>\n<command-args>{args}</command-args>")

    def compact(self, trigger: str) -> None:
        """A compaction: its boundary and the summary Claude Code continues from (``isCompactSummary``)."""
        self.parent = None
        self.system("compact_boundary", content="Conversation compacted", isMeta=False, level="info",
                    compactMetadata={"trigger": trigger, "preTokens": self.rng.randint(20_000, 170_000)})
        self.user("This session is being continued from a previous conversation that ran out of context. "
                  "The conversation is summarized below:\n" + reply_text(self.rng, 5), isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def task_tool(self, prompt: str, sub: ClaudeTranscript, run: Callable[[], str]) -> None:
        """A Task tool call with ``prompt``: its tool_use, then the subagent (``run`` writes ``sub``'s
        entries from this clock on and returns its last text), its progress here, the call's result."""
        tool = Tool("Task", {"subagent_type": "Explore", "description": "Explore the code", "prompt": prompt}, "")
        self.response([], [tool], results=False)
        tid = self.tool_ids[-1]
        sub.t = self.t
        tool.result = run()
        self.progress({"type": "agent_progress", "message": {"type": "user", "message": {"role": "user", "content": prompt}}, "agentId": sub.agent_id}, tid)
        self.t = max(self.t, sub.t)
        self.tool_result(tid, tool)

    def write(self, path: Path) -> Path:
        """The entries as JSONL (compact separators, as Claude Code writes)."""
        path.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in self.lines))
        return path


class Generator:
    """Writes every session of one :class:`SessionSpec` (see :func:`write_sessions`)."""

    def __init__(self, root: Path, spec: SessionSpec) -> None:
        self.root, self.spec = root, spec
        self.rng = random.Random(spec.seed)
        self.facts = Facts()
        self.t = START_MS
        (root / "claude-code").mkdir(parents=True, exist_ok=True)
        (root / "codex").mkdir(parents=True, exist_ok=True)

    def uid(self) -> str:
        """A random (seeded) UUID4 string."""
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def next_start(self) -> int:
        """The start of the next session: 20-90 minutes after the previous one's."""
        self.t += self.rng.randint(20, 90) * 60_000
        return self.t

    def claude(self, name: str, tr: ClaudeTranscript) -> Path:
        """Write ``tr`` as ``claude-code/<name>.jsonl``."""
        return tr.write(self.root / "claude-code" / f"{name}.jsonl")

    def subagent(self, main: ClaudeTranscript, agent_id: str, prompt: str, tools: int) -> ClaudeTranscript:
        """A Task subagent of ``main``: its sidechain transcript, run through ``main``'s Task tool."""
        sub = ClaudeTranscript(self.rng, main.session_id, main.t, main.cwd, agent_id=agent_id, hooks=frozenset({"PreToolUse", "PostToolUse"}),
                               version=main.version, model="claude-sonnet-4-5-20250929")

        def run() -> str:
            sub.user(prompt)
            return sub.turn(tools, texts_per_step=2)

        main.task_tool(prompt, sub, run)
        return sub

    def compaction_agent(self, main: ClaudeTranscript, agent_id: str) -> ClaudeTranscript:
        """The compaction agent's file: its summarising prompt and the summary (no SubagentStop hook runs for it)."""
        a = ClaudeTranscript(self.rng, main.session_id, main.t, main.cwd, agent_id=agent_id, version=main.version)
        a.user("<system-reminder>\nPostToolUse hook additional context: ok\n</system-reminder>", isMeta=True)
        a.user("Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests.")
        a.response(["<analysis>\n" + reply_text(self.rng, 6) + "\n</analysis>"], [], thinking=False)
        return a

    # ---------------------------------------------------------------- the Claude Code shapes
    def hooked(self) -> None:
        """A session recorded both as a transcript and by a logging hook (the corpus's B1-B3):
        Warmup sidechains, typed prompts, failed tools, a ``/compact``, an idle notification."""
        sid, cwd, t0 = self.uid(), "/workspace", self.next_start()
        tr = ClaudeTranscript(self.rng, sid, t0, cwd, hooks=frozenset({"Stop"}), hook_progress=False, version="2.0.76", model="claude-haiku-4-5-20251001")
        log: list[dict[str, Any]] = []
        base = {"session_id": sid, "cwd": cwd, "permission_mode": "default"}

        def logged(ms: int, event: str, **f: Any) -> None:
            log.append({"ts": iso(ms - ms % 1000)[:19] + "Z", "session_id": sid, "event": event, **{k: v for k, v in base.items() if k != "session_id"}, **f})

        warmups = [f"{self.rng.getrandbits(28):07x}" for _ in range(2)]
        for agent in warmups:
            w = ClaudeTranscript(self.rng, sid, t0 - 5_000, cwd, agent_id=agent, version=tr.version, model=tr.model)
            w.user("Warmup")
            w.response(["I'm ready to help you search and explore the codebase. " + _sentence(self.rng, 8) + "."], [], thinking=False)
            logged(w.t, "SubagentStop", agent_id=agent, stop_hook_active=False)
            if agent == warmups[0]:
                self.claude(f"gen-hooked-subagent-{agent}-warmup", w)
        logged(t0, "SessionStart", source="startup", transcript_path=f"/root/.claude/projects/-workspace/{sid}.jsonl")
        n = self.rng.randint(4, 6)
        fail_at = {1, n - 1}
        for k in range(n):
            text = prompt_text(self.rng)
            tr.prompt(text)
            logged(tr.t, "UserPromptSubmit", prompt=text)
            for _step in range(self.rng.randint(1, 2)):
                tools = [random_tool(self.rng, cwd) for _ in range(self.rng.randint(1, 3))]
                for tool in tools:
                    tool.is_error = k in fail_at and tool is tools[0]
                tr.response([], tools)
                uses = [e for e in tr.lines if e["type"] == "assistant" and e["message"]["content"][0]["type"] == "tool_use"][-len(tools):]
                results = [e for e in tr.lines if e["type"] == "user" and isinstance(e["message"]["content"], list)][-len(tools):]
                for tool, use in zip(tools, uses, strict=True):
                    logged(_ms(use["timestamp"]), "PreToolUse", tool_name=tool.name, tool_input=tool.input)
                for tool, res in zip(tools, results, strict=True):
                    if not tool.is_error:  # Claude Code runs no PostToolUse for a failed call
                        logged(_ms(res["timestamp"]), "PostToolUse", tool_name=tool.name, tool_input=tool.input, tool_response={"stdout": tool.result})
            tr.response([reply_text(self.rng, 3)], [])
            stop_ms = tr.t
            tr.stop_hooks()
            logged(stop_ms + 200, "Stop", stop_hook_active=False)
        self.facts.hooked_prompts = n
        # /compact: the command's caveat, the command, its output; the boundary and the summary
        tr.snapshot()
        compact_ms = tr.tick(5_000, 20_000)
        logged(compact_ms, "PreCompact", trigger="manual")
        tr.compact("manual")
        logged(tr.t, "SessionStart", source="compact")
        tr.user("Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.", isMeta=True)
        tr.slash("/compact", "")
        tr.user("<local-command-stdout>Compacted (ctrl+o to see full summary)\nPreCompact [hivestream hook] completed successfully</local-command-stdout>")
        logged(tr.tick(30_000, 90_000), "Notification", message="Claude is waiting for your input", notification_type="idle_prompt")
        self.claude("gen-hooked-main-transcript", tr)
        (self.root / "claude-code" / "gen-hooked-hook-events-log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in log))

    def split(self) -> None:
        """A long session (the corpus's A1-A3): responses split over many lines, hooks on every tool,
        an Explore subagent, an automatic compaction mid-turn and its agent, a task notification."""
        sid, cwd = self.uid(), f"/home/USER/projects/{self.rng.choice(_WORDS)}"
        tr = ClaudeTranscript(self.rng, sid, self.next_start(), cwd, hooks=frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"}))
        stops: list[str] = []
        tr.prompt(prompt_text(self.rng))
        agent = f"{self.rng.getrandbits(28):07x}"
        sub = self.subagent(tr, agent, "Very thorough exploration. " + reply_text(self.rng, 2), tools=self.spec.tools_per_turn)
        self.claude(f"gen-split-subagent-{agent}-explore", sub)
        tr.turn(self.spec.tools_per_turn // 2, texts_per_step=2)
        stops.append("first")
        tr.prompt("continue")
        tr.response([reply_text(self.rng, 1)], [random_tool(self.rng, cwd) for _ in range(3)])
        compactor = self.compaction_agent(tr, f"acompact-{self.rng.getrandbits(24):06x}")
        tr.t = compactor.t
        tr.compact("auto")  # mid-turn: the turn goes on after the summary
        self.claude(f"gen-split-subagent-{compactor.agent_id}", compactor)
        second = tr.turn(self.spec.tools_per_turn, texts_per_step=3)
        stops.append(second)
        tr.lines.append({"type": "queue-operation", "operation": "enqueue", "timestamp": iso(tr.tick()), "sessionId": sid,
                         "content": "<task-notification>\n<status>completed</status>\n</task-notification>"})
        tr.user(f"<task-notification>\n<task-id>{self.rng.getrandbits(28):07x}</task-id>\n<status>completed</status>\n"
                "<summary>Background command \"Run the tests\" completed (exit code 0)</summary>\n</task-notification>")
        tr.turn(2, texts_per_step=2)
        stops.append("third")
        self.facts.split_stops = len(stops)
        self.facts.split_second_stop = second.split("\n\n")[0]
        self.facts.split_text_lines = sum(1 for e in tr.lines if e["type"] == "assistant" and e["message"]["content"][0]["type"] == "text")
        self.claude("gen-split-main-autocompact-task", tr)

    def manual(self) -> None:
        """A session with a ``/compact`` slash command between two prompts (the corpus's A4-A6)."""
        sid, cwd = self.uid(), f"/home/USER/projects/{self.rng.choice(_WORDS)}"
        tr = ClaudeTranscript(self.rng, sid, self.next_start(), cwd, hooks=frozenset({"PreToolUse", "PostToolUse", "Stop"}))
        tr.prompt(prompt_text(self.rng))
        agent = f"{self.rng.getrandbits(28):07x}"
        sub = self.subagent(tr, agent, "Search the web for " + _sentence(self.rng, 4).lower(), tools=4)
        self.claude(f"gen-manual-subagent-{agent}-websearch", sub)
        tr.turn(self.spec.tools_per_turn, texts_per_step=2)
        tr.slash("/compact", "keep the open questions")
        tr.user("<local-command-stdout>Compacted\nPreCompact [hivestream hook] completed</local-command-stdout>")
        compactor = self.compaction_agent(tr, f"acompact-{self.rng.getrandbits(24):06x}")
        tr.t = compactor.t
        tr.compact("manual")
        self.claude(f"gen-manual-subagent-{compactor.agent_id}", compactor)
        tr.prompt("continue implementation")
        tr.turn(self.spec.tools_per_turn)
        self.claude("gen-manual-main-manualcompact", tr)

    def slash_session(self) -> None:
        """A slash command with arguments, interrupted, then one typed prompt (the corpus's A7)."""
        sid, cwd = self.uid(), "/home/dev/projects/spotter"
        tr = ClaudeTranscript(self.rng, sid, self.next_start(), cwd, hooks=frozenset({"PreToolUse", "PostToolUse", "Stop"}), version="2.1.38")
        tr.snapshot()
        tr.slash("/team:plan-work", "split the " + _sentence(self.rng, 3).lower() + " into tasks")
        tr.user([{"type": "text", "text": "Base directory for this skill: /home/dev/.claude/skills/plan\n\n# Plan\n" + reply_text(self.rng, 2)}], isMeta=True)
        tr.response([reply_text(self.rng, 1)], [random_tool(self.rng, cwd) for _ in range(3)])
        tr.response([], [Tool("AskUserQuestion", {"questions": [{"question": "Which one first?"}]}, "User has answered your questions.")])
        tr.user([{"type": "text", "text": "[Request interrupted by user]"}])
        text = "create the tasks"
        tr.prompt(text)
        tr.turn(4)
        self.facts.slash_prompts = (text,)
        self.claude("gen-slash-session", tr)

    def snapshots(self) -> None:
        """One session written twice while it grew (the corpus's C1-C4): the first snapshot is cut
        during a Bash call, the second holds the finished turn; the subagent's file gains one line."""
        sid, cwd = self.uid(), "/Users/User/repo/example/cli"
        tr = ClaudeTranscript(self.rng, sid, self.next_start(), cwd, hooks=frozenset({"Stop"}), hook_progress=False, version="2.1.7",
                              model="claude-sonnet-4-5-20250929")
        tr.summary("Command line review and new commands")
        tr.prompt('@"solution-architect (agent)" ' + prompt_text(self.rng))
        agent = f"{self.rng.getrandbits(28):07x}"
        tr.response([reply_text(self.rng, 1)], [])
        sub = self.subagent(tr, agent, "Analyze the existing command structure. " + reply_text(self.rng, 2), tools=6)
        tr.response([], [Tool("Bash", {"command": "ls src/cli/commands"}, "a.ts\nb.ts\n")])
        tr.response([], [Tool("Bash", {"command": "npm test"}, "ok\n")])
        cut = next(i for i in range(len(tr.lines) - 1, 0, -1) if tr.lines[i]["type"] == "assistant") + 1  # after the last Bash call's tool_use
        tr.turn(5)
        first = ClaudeTranscript(self.rng, sid, 0, cwd)
        first.lines = tr.lines[:cut]
        self.claude("gen-snapshot1-first-lines", first)
        self.claude("gen-snapshot2-first-lines", tr)
        self.claude(f"gen-snapshot1-subagent-{agent}", sub)
        sub.hooks = frozenset({"SubagentStop"})  # its SubagentStop hook ran after the first snapshot: one line more
        sub.hook_progress("SubagentStop", sub.uid())
        self.claude(f"gen-snapshot2-subagent-{agent}", sub)

    def ordinary_claude(self, k: int) -> None:
        """A plain session of 3-5 prompts (some short and repeated across sessions)."""
        sid, cwd = self.uid(), f"/workspace/{self.rng.choice(_WORDS)}-{k}"
        tr = ClaudeTranscript(self.rng, sid, self.next_start(), cwd, hooks=frozenset({"Stop"}))
        for _ in range(self.rng.randint(3, 5)):
            tr.prompt(self.rng.choice(SHORT_PROMPTS) if self.rng.random() < 0.25 else prompt_text(self.rng))
            tr.turn(self.rng.randint(0, self.spec.tools_per_turn), texts_per_step=self.rng.randint(1, 2))
        self.claude(f"gen-plain-{sid[:8]}-main-session", tr)

    # ---------------------------------------------------------------- Codex
    def rollout(self, role_file: str, turns: list[str], *, cwd: str, steer_at: int | None = None, abort_at: int | None = None,
                compact_at: int | None = None, unfinished_last: bool = False, truncate_after_call: bool = False,
                tools: int | None = None) -> tuple[int, int, int, int, int]:
        """Write one Codex rollout; returns (user messages, stops, calls, outputs, replayed user messages)."""
        rng, tools = self.rng, self.spec.tools_per_turn if tools is None else tools
        t = self.next_start()
        thread = self.uid()
        lines: list[dict[str, Any]] = []
        counts = {"user": 0, "stops": 0, "calls": 0, "outputs": 0, "replayed": 0}
        history: list[dict[str, Any]] = []

        def put(kind: str, payload: dict[str, Any], step: tuple[int, int] = (5, 900)) -> None:
            nonlocal t
            t += rng.randint(*step)
            lines.append({"timestamp": iso(t), "type": kind, "payload": payload})

        put("session_meta", {"id": thread, "timestamp": iso(t), "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.125.0", "source": "cli",
                             "model_provider": "openai", "base_instructions": {"text": "You are Codex, a coding agent. " + reply_text(rng, 2)},
                             "git": {"commit_hash": f"{rng.getrandbits(160):040x}", "branch": "main"}})
        put("response_item", {"type": "message", "role": "developer",
                              "content": [{"type": "input_text", "text": "<permissions instructions>sandbox: workspace-write</permissions instructions>"}]})

        def user_message(text: str) -> None:
            put("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
            put("event_msg", {"type": "user_message", "message": text, "images": [], "local_images": [], "text_elements": []})
            counts["user"] += 1
            history.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

        def call(turn_id: str, *, output: bool = True) -> None:
            call_id = f"call_{rng.getrandbits(120):030x}"
            put("response_item", {"type": "reasoning", "summary": [], "content": None, "encrypted_content": f"gAAAA{rng.getrandbits(256):064x}"}, (500, 6_000))
            if rng.random() < 0.2:
                patch = f"*** Begin Patch\n*** Update File: src/{rng.choice(_WORDS)}.rs\n@@\n-{rng.choice(_WORDS)}\n+{rng.choice(_WORDS)}\n*** End Patch"
                put("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": call_id, "name": "apply_patch", "input": patch})
                counts["calls"] += 1
                if output:
                    put("event_msg", {"type": "patch_apply_end", "call_id": call_id, "turn_id": turn_id, "stdout": "Success.", "stderr": "", "success": True})
                    put("response_item", {"type": "custom_tool_call_output", "call_id": call_id,
                                          "output": json.dumps({"output": "Success. Updated the following files:\n", "metadata": {"exit_code": 0}})})
                    counts["outputs"] += 1
                return
            cmd = f"rg -n {rng.choice(_WORDS)} src"
            put("response_item", {"type": "function_call", "name": "exec_command", "arguments": json.dumps({"cmd": cmd, "workdir": cwd, "yield_time_ms": 1000}),
                                  "call_id": call_id})
            usage = {"input_tokens": rng.randint(9_000, 90_000), "output_tokens": rng.randint(10, 900)}
            put("event_msg", {"type": "token_count", "info": {"total_token_usage": usage}, "rate_limits": None})
            counts["calls"] += 1
            if output:
                put("event_msg", {"type": "exec_command_end", "call_id": call_id, "turn_id": turn_id, "command": ["/bin/zsh", "-lc", cmd], "cwd": cwd,
                                  "exit_code": 0, "stdout": _sentence(rng, 8), "stderr": ""})
                out = f"Chunk ID: {rng.getrandbits(24):06x}\nWall time: 0.1 seconds\nProcess exited with code 0\nOutput:\n{_sentence(rng, 10)}\n"
                put("response_item", {"type": "function_call_output", "call_id": call_id, "output": out})
                counts["outputs"] += 1

        for i, text in enumerate(turns):
            turn_id = self.uid()
            put("event_msg", {"type": "task_started", "turn_id": turn_id, "started_at": t // 1000, "model_context_window": 258_400,
                              "collaboration_mode_kind": "default"}, (20_000, 200_000))
            put("turn_context", {"turn_id": turn_id, "cwd": cwd, "approval_policy": "on-request", "model": "gpt-5.3-codex", "effort": "high", "summary": "auto",
                                 "sandbox_policy": {"type": "workspace-write", "network_access": False}})
            user_message(text)
            last = i == len(turns) - 1
            if last and truncate_after_call:
                call(turn_id, output=False)
                break
            n = rng.randint(max(1, tools // 2), max(1, tools))
            for j in range(n):
                if j == n // 2 and rng.random() < 0.5:
                    put("event_msg", {"type": "agent_message", "message": reply_text(rng, 1), "phase": "commentary"})
                call(turn_id, output=not (last and unfinished_last and j == n - 1))
                if steer_at == i and j == 0:
                    user_message("also " + prompt_text(rng).lower())  # a steer: a second message in the running turn
                if compact_at == i and j == 0:
                    counts["replayed"] = sum(1 for h in history if h["role"] == "user")
                    put("compacted", {"message": "", "replacement_history": list(history)})
                    put("event_msg", {"type": "context_compacted"})
            if last and unfinished_last:
                break
            if abort_at == i:
                put("event_msg", {"type": "turn_aborted", "turn_id": turn_id, "reason": "interrupted"})
                continue
            answer = reply_text(rng, 4)
            put("event_msg", {"type": "agent_message", "message": answer, "phase": "final_answer"})
            put("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}], "phase": "final_answer"})
            history.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}], "phase": "final_answer"})
            put("event_msg", {"type": "token_count", "info": None, "rate_limits": {"primary": {"used_percent": 13.0}}})
            put("event_msg", {"type": "task_complete", "turn_id": turn_id, "last_agent_message": answer})
            counts["stops"] += 1
        stamp = datetime.fromtimestamp(_ms(lines[0]["timestamp"]) / 1000, UTC).strftime("%Y-%m-%dT%H-%M-%S")
        path = self.root / "codex" / f"{role_file}.rollout-{stamp}-{thread}.jsonl"
        path.write_text("".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False) + "\n" for e in lines))
        return counts["user"], counts["stops"], counts["calls"], counts["outputs"], counts["replayed"]

    def codex(self) -> None:
        """The four Codex shapes of the corpus (D1-D3, E1) and the ordinary rollouts."""
        f = self.facts
        prompts = [prompt_text(self.rng) for _ in range(14)]
        prompts[9] = prompts[3]  # a prompt repeated in the session stays two events
        prompts[12] = "continue"
        u, s, c, o, replayed = self.rollout("gen-long-compacted", prompts, cwd="/redacted/path/59b923df4d", steer_at=5, abort_at=7, compact_at=10)
        f.codex_user_messages, f.codex_replayed = u, replayed
        f.codex_counts["codex_compacted"], f.codex_calls["codex_compacted"] = (u, s), (c, o)
        f.codex_first_prompt, f.codex_project = "show tools", "example-code"
        u, s, c, o, _ = self.rollout("gen-2turns", ["show tools", prompt_text(self.rng)], cwd="/Users/Sample_User/repos/example/example-code",
                                     tools=self.spec.tools_per_turn * 4)
        f.codex_counts["codex_two_turns"], f.codex_calls["codex_two_turns"] = (u, s), (c, o)
        u, s, c, o, _ = self.rollout("gen-7turns-unfinished", [prompt_text(self.rng) for _ in range(7)], cwd="/redacted/path/a0dd7130",
                                     abort_at=3, unfinished_last=True)
        f.codex_counts["codex_unfinished"], f.codex_calls["codex_unfinished"] = (u, s), (c, o)
        u, s, c, o, _ = self.rollout("gen-truncated-mid-toolcall", [prompt_text(self.rng)], cwd="/redacted/path/dda77f33", truncate_after_call=True)
        f.codex_counts["codex_truncated"], f.codex_calls["codex_truncated"] = (u, s), (c, o)

    def ordinary_codex(self, k: int) -> None:
        """A plain rollout of 3-5 turns (some prompts short and repeated across sessions)."""
        turns = [self.rng.choice(SHORT_PROMPTS) if self.rng.random() < 0.25 else prompt_text(self.rng) for _ in range(self.rng.randint(3, 5))]
        self.rollout(f"gen-plain-{k:02d}", turns, cwd=f"/workspace/{self.rng.choice(_WORDS)}-{k}")


def _ms(iso_time: str) -> int:
    return int(datetime.strptime(iso_time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp() * 1000 + 0.5)


def write_sessions(root: Path, spec: SessionSpec | None = None) -> Facts:
    """Write the generated session files under ``root`` (``claude-code/`` and ``codex/``).

    Args:
        root: a directory (created when missing); existing files of the same names are replaced.
        spec: what to generate.

    Returns:
        The :class:`Facts` of what was written. With the default spec: 25 files, about 1,200
        hook events and 290 captures when imported with the gateway capture.
    """
    g = Generator(root, spec or SessionSpec())
    g.hooked()
    g.split()
    g.manual()
    g.slash_session()
    g.snapshots()
    g.codex()
    for k in range(g.spec.extra_sessions):
        if k % 2:
            g.ordinary_codex(k)
        else:
            g.ordinary_claude(k)
    return g.facts
