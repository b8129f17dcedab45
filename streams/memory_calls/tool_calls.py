"""The read side of memory: which tool calls in ``hook-events`` are memory reads or writes (pure).

A memory tool call arrives as a Claude Code / Codex ``PostToolUse`` (or ``PostToolUseFailure``)
hook event, or as an OpenClaw ``after_tool_call`` plugin hook. :func:`memory_call` classifies it
by its tool name against a table of :class:`ToolRule` patterns and returns one
:class:`MemoryToolCall` row (or ``None`` for any other event). Tool arguments and the error text
pass through the KnowHub privacy redaction (:func:`streams.redaction.scrub.scrub_value`, always
strict here) before they are put in a row; the result is never stored, only how many items it
returned when its shape shows it (:func:`results_returned`).

Tool names are matched after splitting the MCP / plugin prefix off: ``mcp__hive-mind__recall_memory``
has the server ``hive-mind`` and the base name ``recall_memory`` (separators ``__``, ``.``, ``/``,
``:``; case and ``-``/``_`` ignored in the base name). A rule matches when its ``name`` glob
matches the base name and its ``server`` glob matches the server part (``""`` for a bare name).

Default rules, looked up in each project's public source:

* hive-mind (marolinik/waggle-os, ``packages/hive-mind-mcp-server``: its registration test lists
  the 21 tools): ``save_memory`` / ``recall_memory`` on any server; the knowledge, identity,
  awareness, workspace, harvest, cleanup, ingest and wiki tools only on a ``*hive*mind*`` server.
* KnowHub (the KnowHub integration design (docs/design.md#sources)): ``kb_search``, ``kb_content`` (reads),
  ``kb_submit`` (write).
* mem0's OpenMemory MCP server (mem0ai/mem0 ``openmemory/api/app/mcp_server.py``): ``add_memories``,
  ``search_memory``, ``list_memories``, ``delete_memories``, ``delete_all_memories``; the mem0 MCP
  server's ``add_memory``, ``search_memories``, ``get_memories``, ``get_memory``, ``update_memory``,
  ``delete_memory``.
* Letta's memory tools: ``core_memory_append`` / ``core_memory_replace``, ``archival_memory_insert``
  / ``archival_memory_search``, ``conversation_search``, ``memory_insert`` / ``memory_replace`` /
  ``memory_rethink``.
* The MCP reference "memory" server (modelcontextprotocol/servers ``src/memory``): ``create_entities``,
  ``create_relations``, ``add_observations``, ``delete_*`` (writes), ``read_graph``,
  ``search_nodes``, ``open_nodes`` (reads), on a ``*memory*`` server.
* claude-mem (thedotmack/claude-mem, skill ``mem-search``): ``search``, ``timeline``,
  ``get_observations`` on a ``*claude*mem*`` / ``*mem*search*`` server.
* OpenClaw's memory plugins: ``memory_search`` / ``memory_get`` (memory-core), ``memory_recall`` /
  ``memory_store`` / ``memory_forget`` (memory-lancedb).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import orjson

from streams.model.events import HookEvent
from streams.redaction.redact import RedactionMode, redact
from streams.redaction.scrub import scrub_value

Op = Literal["read", "write"]

MAX_ARGUMENTS_CHARS = 4000
"""Redacted arguments longer than this (JSON characters) are cut, with a marker."""
MAX_ERROR_CHARS = 500

_SPLIT = re.compile(r"__|[./:]")
_POST_TOOL = frozenset({"PostToolUse", "PostToolUseFailure"})
TOOL_CALL_EVENTS = _POST_TOOL | {"after_tool_call"}
"""The native events :func:`memory_call` reads (any other event records no memory tool call)."""


@dataclass(frozen=True)
class ToolRule:
    """One classification rule.

    Attributes:
        name: glob over the base tool name, lower case with ``-`` read as ``_`` (e.g. ``recall_memory``, ``memory_*``).
        op: ``read`` or ``write``.
        system: the memory system's name, stored with each call.
        server: glob over the server part of the name (``""`` for a bare name); ``*`` = any.
    """

    name: str
    op: Op
    system: str
    server: str = "*"


def _rules(system: str, op: Op, names: str, server: str = "*") -> list[ToolRule]:
    return [ToolRule(n, op, system, server) for n in names.split()]


DEFAULT_RULES: tuple[ToolRule, ...] = tuple(
    _rules("hive-mind", "read", "recall_memory")
    + _rules("hive-mind", "write", "save_memory")
    + _rules("hive-mind", "read", "search_entities get_identity get_awareness list_workspaces harvest_sources get_page search_wiki compile_health",
             "*hive*mind*")
    + _rules("hive-mind", "write", "save_entity create_relation set_identity set_awareness clear_awareness create_workspace harvest_import "
             "cleanup_frames cleanup_entities ingest_source compile_wiki", "*hive*mind*")
    + _rules("knowhub", "read", "kb_search kb_content")
    + _rules("knowhub", "write", "kb_submit")
    + _rules("mem0", "read", "search_memory search_memories list_memories get_memories get_memory get_all_memories")
    + _rules("mem0", "write", "add_memories add_memory update_memory delete_memory delete_memories delete_all_memories")
    + _rules("letta", "read", "archival_memory_search conversation_search conversation_search_date")
    + _rules("letta", "write", "core_memory_append core_memory_replace archival_memory_insert memory_insert memory_replace memory_rethink")
    + _rules("mcp-memory", "read", "read_graph search_nodes open_nodes", "*memory*")
    + _rules("mcp-memory", "write", "create_entities create_relations add_observations delete_entities delete_observations delete_relations",
             "*memory*")
    + _rules("claude-mem", "read", "search timeline get_observations", "*claude*mem*")
    + _rules("claude-mem", "read", "search timeline get_observations", "*mem*search*")
    + _rules("openclaw-memory", "read", "memory_search memory_get memory_recall")
    + _rules("openclaw-memory", "write", "memory_store memory_forget")
)


def rules_from_json(text: str) -> list[ToolRule]:
    """Rules from JSON: a list of ``{"name": glob, "op": "read"|"write", "system": str, "server": glob (optional)}``.

    Raises:
        ValueError: not such a list (the message names the first bad entry).
    """
    try:
        items = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"memory tool rules: not JSON ({e})") from None
    if not isinstance(items, list):
        raise ValueError("memory tool rules: expected a JSON list of objects")
    out: list[ToolRule] = []
    for i, d in enumerate(items):
        ok = (isinstance(d, dict) and isinstance(d.get("name"), str) and d["name"] and d.get("op") in ("read", "write")
              and isinstance(d.get("system"), str) and isinstance(d.get("server", "*"), str))
        if not ok:
            raise ValueError(f"memory tool rules: entry {i} needs name, op (read|write), system and optionally server: {d!r}"[:300])
        out.append(ToolRule(d["name"].lower().replace("-", "_"), d["op"], d["system"], d.get("server", "*").lower()))
    return out


def split_tool_name(name: str) -> tuple[str, str]:
    """``(server, base)`` of a tool name, both lower case, ``-`` → ``_`` in the base.

    ``mcp__hive-mind__recall_memory`` → ``("mcp__hive-mind", "recall_memory")``; ``kb_search`` →
    ``("", "kb_search")``.
    """
    n = name.strip().lower()
    parts = _SPLIT.split(n)
    base = parts[-1].replace("-", "_")
    server = n[: len(n) - len(parts[-1])].rstrip("_./:")
    return server, base


def classify(name: object, rules: Sequence[ToolRule] = DEFAULT_RULES) -> ToolRule | None:
    """The first rule matching tool ``name``, or ``None`` (not a memory tool, or not a string).

    Answers are cached per rule table (a table is kept alive with its cache, keyed by its identity).
    """
    if not isinstance(name, str) or not name.strip():
        return None
    entry = _TABLES.get(id(rules))
    if entry is None or entry[0] is not rules:
        entry = _TABLES[id(rules)] = (rules, {})
    cache = entry[1]
    if name not in cache:
        if len(cache) > 10_000:
            cache.clear()
        server, base = split_tool_name(name)
        cache[name] = next((r for r in rules if fnmatchcase(base, r.name) and fnmatchcase(server, r.server)), None)
    return cache[name]


_TABLES: dict[int, tuple[Sequence[ToolRule], dict[str, ToolRule | None]]] = {}


@dataclass(frozen=True)
class MemoryToolCall:
    """One row of ``memory_tool_calls``.

    Attributes:
        event_id: the hook event's id (idempotency key).
        tool: the tool name as called; system / op: from the matching rule.
        agent: OpenClaw ``ctx.agentId``, else ``<source>:<agent_id>`` for a backend subagent, else the source.
        session: the hook event's session scope; source: the runtime (``claude-code``, ``codex``, ``openclaw``).
        event_time_ms: epoch ms.
        results: items the response returned, when its shape shows it (else ``None``).
        error: the failure text (redacted, ≤ 500 characters), ``None`` when the call succeeded.
        arguments: the redacted arguments as JSON (≤ 4,000 characters), ``None`` when the event has none.
    """

    event_id: str
    tool: str
    system: str
    op: Op
    agent: str
    session: str
    source: str
    event_time_ms: int
    results: int | None
    error: str | None
    arguments: str | None

    def to_json(self) -> bytes:
        """The row as a JSON object (UTF-8), e.g. a Kafka record value carrying it to the projector.

        Written by orjson (compact; ~5× the standard library's speed); a value orjson refuses (an
        ``int`` past 64 bits, a lone surrogate) goes through ``json.dumps``, which raises
        ``UnicodeEncodeError`` for the surrogate as before."""
        d = {"schema_version": 1, **{k: getattr(self, k) for k in _FIELDS}}
        try:
            return orjson.dumps(d)
        except TypeError:  # orjson.JSONEncodeError is a TypeError
            return json.dumps(d, ensure_ascii=False).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> MemoryToolCall:
        """Parse :meth:`to_json`'s output.

        Raises:
            ValueError: not such an object (wrong JSON, schema version, field or type).
        """
        try:
            d = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise ValueError(f"memory tool call record is not JSON: {type(e).__name__}") from None
        if not isinstance(d, dict) or d.get("schema_version") != 1 or set(d) != {"schema_version", *_FIELDS}:
            raise ValueError("memory tool call record: expected a schema_version 1 object with the row's fields")
        texts = ("event_id", "tool", "system", "agent", "session", "source")
        if (not all(isinstance(d[k], str) for k in texts) or d["op"] not in ("read", "write") or type(d["event_time_ms"]) is not int
                or not (d["results"] is None or type(d["results"]) is int) or not all(d[k] is None or isinstance(d[k], str) for k in ("error", "arguments"))):
            raise ValueError("memory tool call record: a field has the wrong type")
        return cls(**{k: d[k] for k in _FIELDS})

    def row(self) -> tuple[object, ...]:
        """The values in ``memory_tool_calls`` column order."""
        return (self.event_id, self.tool, self.system, self.op, self.agent, self.session, self.source, self.event_time_ms,
                self.results, self.error, self.arguments)


_FIELDS = ("event_id", "tool", "system", "op", "agent", "session", "source", "event_time_ms", "results", "error", "arguments")

_EMPTY_TEXT = re.compile(r"^\s*(no (memories|results|matches|experiences|entries|observations)\b|nothing found|\[\]\s*$|\{\}\s*$)", re.I)
_LIST_KEYS = ("results", "memories", "experiences", "hits", "items", "entities", "observations", "matches", "passages")
_COUNT_KEYS = ("count", "total", "hit_count", "num_results")


def results_returned(result: Any, _depth: int = 0) -> int | None:
    """How many items a memory read's response returned, or ``None`` when its shape does not say.

    Shapes: a JSON list (its length); an object with a list under ``results`` / ``memories`` /
    ``experiences`` / ``hits`` / ``items`` / ``entities`` / ``observations`` / ``matches`` /
    ``passages``, or a non-negative ``count`` / ``total`` / ``hit_count`` / ``num_results``; MCP
    ``content`` blocks (``[{"type": "text", "text": ...}]``, also under ``content``) whose text is
    one of these as JSON; a string holding JSON; a text such as ``No memories found for query``
    (hive-mind's empty answer) or ``No results`` → 0.
    """
    if _depth > 4 or result is None:
        return None
    if isinstance(result, str):
        if _EMPTY_TEXT.match(result):
            return 0
        try:
            return results_returned(json.loads(result), _depth + 1)
        except (ValueError, RecursionError):
            return None
    if isinstance(result, list):
        if result and all(isinstance(b, dict) and b.get("type") == "text" for b in result):
            counts = [results_returned(b.get("text"), _depth + 1) for b in result]
            known = [c for c in counts if c is not None]
            return sum(known) if known else None
        return len(result)
    if isinstance(result, dict):
        for k in _LIST_KEYS:
            if isinstance(result.get(k), list):
                return len(result[k])
        for k in _COUNT_KEYS:
            v = result.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
        for k in ("content", "result", "output", "structuredContent"):
            if k in result:
                return results_returned(result[k], _depth + 1)
    return None


def _error_of(ev: HookEvent, result: Any, explicit: Any) -> str | None:
    """The failure text of a call: an explicit error, a failure event, MCP ``isError``, an ``Error:`` answer."""
    if explicit not in (None, "", False):
        return explicit if isinstance(explicit, str) else json.dumps(explicit, default=str)
    if ev.native_event == "PostToolUseFailure":
        return "tool call failed"
    if isinstance(result, dict) and result.get("isError") is True:
        content = result.get("content")
        texts = [b.get("text") for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        return " ".join(t for t in texts if isinstance(t, str)) or "isError"
    if isinstance(result, str) and result.lstrip().lower().startswith("error"):
        return result
    return None


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f" [truncated: {len(text) - limit} more characters]"


def _arguments(args: Any) -> str | None:
    if args is None:
        return None
    if isinstance(args, str):  # Codex passes arguments as a JSON string
        with contextlib.suppress(ValueError, RecursionError):
            args = json.loads(args)
    clean = scrub_value(args, RedactionMode.STRICT)
    return _clip(_ARGUMENTS_JSON(clean), MAX_ARGUMENTS_CHARS)


_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str).encode
"""``json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)`` without building the encoder per call."""


@lru_cache(maxsize=4096)
def _safe(text: str) -> str:
    return redact(text, RedactionMode.STRICT).text


def memory_call(ev: HookEvent, rules: Sequence[ToolRule] = DEFAULT_RULES) -> MemoryToolCall | None:
    """The memory tool call a hook event records, or ``None`` when it records none.

    Args:
        ev: any hook event; only ``PostToolUse`` / ``PostToolUseFailure`` (Claude Code, Codex) and
            OpenClaw ``after_tool_call`` events can be memory tool calls.
        rules: the classification table (default :data:`DEFAULT_RULES`), first match wins.

    Never raises: arguments of any shape are stored redacted, a result of an unknown shape gives
    ``results = None``. Follows :mod:`streams.experiences.from_hooks` for where each runtime puts
    the tool name, arguments, result and error.
    """
    raw = ev.raw or {}
    agent = ev.source
    if ev.native_event == "after_tool_call" and ev.source == "openclaw":
        event: dict[str, Any] = raw["event"] if isinstance(raw.get("event"), dict) else {}
        ctx: dict[str, Any] = raw["ctx"] if isinstance(raw.get("ctx"), dict) else {}
        name, args, result, explicit = event.get("toolName") or ctx.get("toolName"), event.get("params"), event.get("result"), event.get("error")
        agent = str(ctx.get("agentId") or ev.parent or ev.source)
    elif ev.native_event in _POST_TOOL:
        name, args, result, explicit = raw.get("tool_name"), raw.get("tool_input"), raw.get("tool_response"), raw.get("error")
        if isinstance(raw.get("agent_id"), str) and raw["agent_id"]:
            agent = f"{ev.source}:{raw['agent_id']}"
    else:
        return None
    rule = classify(name, rules)
    if rule is None:
        return None
    error = _error_of(ev, result, explicit)
    return MemoryToolCall(
        event_id=ev.event_id,
        tool=str(name),
        system=rule.system,
        op=rule.op,
        agent=_safe(agent),
        session=_safe(ev.session),
        source=ev.source,
        event_time_ms=ev.event_time_ms,
        results=None if error is not None else results_returned(result),
        error=None if error is None else _clip(_safe(error), MAX_ERROR_CHARS),
        arguments=_arguments(args),
    )


RULES_ENV = "HIVESTREAM_MEMORY_TOOL_RULES"
"""A JSON file of extra rules (see :func:`streams.memory_calls.rules_from_json`), tried before the defaults."""


def configured_rules() -> list[ToolRule]:
    """The rules from ``$HIVESTREAM_MEMORY_TOOL_RULES`` (when set) followed by the defaults.

    Raises:
        ValueError: the file is not a valid rule list; OSError: it cannot be read.
    """
    path = os.environ.get(RULES_ENV)
    extra = rules_from_json(Path(path).read_text(encoding="utf-8")) if path else []
    return [*extra, *DEFAULT_RULES]
