"""The read side of memory: tool-name classification, real hook-call shapes from the three
runtimes, results counted from responses, the memory_tool_calls projection and its queries, and
no secret of a tool call's arguments in any table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from hivestream.embedded.frames import run_files
from projections.frames.analytics import MEMORY_QUERIES
from projections.frames.memory_calls import MemoryCallProjection
from projections.named_query import run_query
from streams.importers.files import import_file
from streams.memory_calls.tool_calls import DEFAULT_RULES, ToolRule, classify, memory_call, results_returned, split_tool_name
from streams.model.adapters import adapt
from streams.model.events import HookEvent
from tests.streams.test_redact import CASES
from tests.support.corpus import CORPUS
from tests.support.kb_fixtures import cc_tool, oc_tool
from tests.support.kb_privacy import forms, secrets
from tests.support.session_sets import SessionSet, corpus_only

needs_schemas = pytest.mark.skipif(not (CORPUS / "codex-hook-schemas").is_dir(), reason=corpus_only("Codex's hook input schemas"))


@pytest.mark.parametrize(("name", "expected"), [
    ("mcp__hive-mind__recall_memory", ("hive-mind", "read")),
    ("mcp__hive-mind__save_memory", ("hive-mind", "write")),
    ("mcp__hive_mind__search_entities", ("hive-mind", "read")),
    ("mcp__hive-mind__cleanup_frames", ("hive-mind", "write")),
    ("mcp__other__search_entities", None),  # a generic name counts only on a hive-mind server
    ("kb_search", ("knowhub", "read")), ("knowhub.kb_content", ("knowhub", "read")), ("mcp__knowhub__KB-SUBMIT", ("knowhub", "write")),
    ("mcp__openmemory__add_memories", ("mem0", "write")), ("mcp__mem0__search_memories", ("mem0", "read")),
    ("mcp__openmemory__delete_all_memories", ("mem0", "write")), ("list_memories", ("mem0", "read")),
    ("archival_memory_search", ("letta", "read")), ("core_memory_append", ("letta", "write")), ("memory_rethink", ("letta", "write")),
    ("mcp__memory__search_nodes", ("mcp-memory", "read")), ("mcp__memory__create_entities", ("mcp-memory", "write")),
    ("mcp__github__search_nodes", None), ("read_graph", None),
    ("mcp__plugin_claude-mem_mcp-search__search", ("claude-mem", "read")), ("mcp__claude-mem__get_observations", ("claude-mem", "read")),
    ("mcp__web__search", None), ("search", None),
    ("memory_search", ("openclaw-memory", "read")), ("memory_store", ("openclaw-memory", "write")), ("memory_forget", ("openclaw-memory", "write")),
    ("Bash", None), ("Read", None), ("exec_command", None), ("mcp__supabase_right_aim_ops__execute_sql", None), ("", None), (None, None), (42, None),
])
def test_classification(name: object, expected: tuple[str, str] | None) -> None:
    rule = classify(name)
    assert (None if rule is None else (rule.system, rule.op)) == expected


def test_split_and_a_custom_table() -> None:
    assert split_tool_name("mcp__hive-mind__recall_memory") == ("mcp__hive-mind", "recall_memory")
    assert split_tool_name("kb_search") == ("", "kb_search")
    assert split_tool_name("Knowhub.KB-Search") == ("knowhub", "kb_search")
    mine = [ToolRule("lookup_*", "read", "acme", "*acme*"), *DEFAULT_RULES]
    rule = classify("mcp__acme-brain__lookup_notes", mine)
    assert rule is not None and (rule.system, rule.op) == ("acme", "read")
    assert classify("mcp__acme-brain__lookup_notes") is None


@pytest.mark.parametrize(("result", "n"), [
    ([{"type": "text", "text": json.dumps([{"id": 1}, {"id": 2}])}], 2),  # hive-mind recall_memory: MCP content with a JSON list
    ([{"type": "text", "text": 'No memories found for query: "x"'}], 0),  # hive-mind's empty answer
    (json.dumps({"results": [{"id": "a"}]}), 1),  # OpenMemory search_memory returns a JSON string
    ({"results": []}, 0), ({"entities": [{}, {}, {}], "relations": []}, 3), ({"count": 4}, 4),
    ({"content": [{"type": "text", "text": "[]"}], "isError": False}, 0),
    ("Stored memory #3", None), ({"id": "13", "success": True}, None), (None, None), ({"count": True}, None),
])
def test_results_returned(result: Any, n: int | None) -> None:
    assert results_returned(result) == n


def test_claude_code_post_tool_use_shape_from_a_hook_log(sessions: SessionSet) -> None:
    """A PostToolUse line of a Claude Code hook log (the corpus's B3 and its generated kin), with a memory tool in place of its call."""
    log = sessions.path("hook_log")
    line = next(json.loads(x) for x in log.read_text().splitlines() if '"PostToolUse"' in x)
    line |= {"tool_name": "mcp__hive-mind__recall_memory", "tool_input": {"query": "ls output", "limit": 3},
             "tool_response": [{"type": "text", "text": json.dumps([{"id": 7, "content": "total 76"}])}], "tool_use_id": "toolu_1"}
    ev = adapt(line)
    call = memory_call(ev)
    assert call is not None
    assert (call.tool, call.system, call.op, call.agent, call.session, call.source) == (
        "mcp__hive-mind__recall_memory", "hive-mind", "read", "claude-code", line["session_id"], "claude-code")
    assert call.results == 1 and call.error is None and json.loads(call.arguments or "") == {"query": "ls output", "limit": 3}
    assert call.event_time_ms == ev.event_time_ms
    assert memory_call(adapt({**line, "tool_name": "Bash"})) is None
    assert memory_call(adapt({**line, "event": "PreToolUse"})) is None  # only the call's outcome counts, once


@needs_schemas
def test_codex_post_tool_use_shape_from_the_schema() -> None:
    """A Codex PostToolUse with every field the corpus's Codex hook schema requires; arguments as Codex's JSON string."""
    schema = json.loads((CORPUS / "codex-hook-schemas" / "post-tool-use.command.input.schema.json").read_text())
    payload: dict[str, Any] = {"cwd": "/srv/tide", "hook_event_name": "PostToolUse", "model": "gpt-5-codex", "permission_mode": "default",
                               "session_id": "019c8a53-a0dd-7130-bcd7-95445d84846a", "tool_name": "mcp__openmemory__search_memory",
                               "tool_input": json.dumps({"query": "deploy", "project": "tide"}), "tool_response": '{"results": []}',
                               "tool_use_id": "call_1", "transcript_path": None, "turn_id": "t-1", "timestamp": "2026-02-23T12:00:00Z"}
    assert set(schema["required"]) <= set(payload)
    call = memory_call(adapt(payload))
    assert call is not None and (call.source, call.system, call.op, call.results) == ("codex", "mem0", "read", 0)
    assert json.loads(call.arguments or "") == {"query": "deploy", "project": "tide"}


def test_openclaw_after_tool_call_and_failures() -> None:
    """OpenClaw's plugin hook (event.toolName / params / result / error, ctx.agentId / sessionKey), and failed calls."""
    ok = memory_call(adapt(oc_tool(1_780_000_000_000, "sess-9", "agent-x", "memory_search", {"query": "port"}, {"results": [{"p": 1}]})))
    assert ok is not None and (ok.agent, ok.session, ok.source, ok.op, ok.results, ok.error) == (
        "agent-x", "openclaw-gateway:sess-9", "openclaw", "read", 1, None)
    bad = memory_call(adapt(oc_tool(1_780_000_000_000, "sess-9", "agent-x", "kb_search", {"query": "q"}, None, error="HTTP 503")))
    assert bad is not None and bad.error == "HTTP 503" and bad.results is None
    is_error = memory_call(adapt(cc_tool(1_780_000_000_000, "s", "mcp__hive-mind__recall_memory", {"query": ""},
                                         {"isError": True, "content": [{"type": "text", "text": "model_not_configured"}]})))
    assert is_error is not None and is_error.error == "model_not_configured"
    failed = adapt({**cc_tool(1_780_000_000_000, "s", "mcp__hive-mind__save_memory", {"content": "x"}), "hook_event_name": "PostToolUseFailure"})
    call = memory_call(failed)
    assert call is not None and call.error == "tool call failed" and call.op == "write"
    sub = memory_call(adapt({**cc_tool(1_780_000_000_000, "s", "kb_submit", {"task": "t"}), "agent_id": "a77"}))
    assert sub is not None and sub.agent == "claude-code:a77"
    weird = memory_call(adapt(oc_tool(1_780_000_000_000, "s", "a", "memory_store", "not json {", 12)))
    assert weird is not None and weird.arguments == '"not json {"' and weird.results is None  # odd shapes are kept, never a crash


def test_no_tool_call_of_the_sessions_is_a_memory_call(sessions: SessionSet, tmp_path: Path) -> None:
    """The sessions' tool calls (Bash, Read, apply_patch, exec_command, MCP database tools, ...; 1,141 in the corpus) are none of memory's."""
    names: set[str] = set()
    for p in [*sessions.claude_files(), *sessions.codex_files()]:
        for _off, _raw, ev in import_file(p)[1]:
            if isinstance(ev, HookEvent) and ev.native_event in ("PostToolUse", "PostToolUseFailure"):
                names.add(str((ev.raw or {}).get("tool_name")))
    assert {"Bash", "Read", "exec_command", "apply_patch"} <= names and any(n.startswith("mcp__") for n in names)
    assert [n for n in names if classify(n) is not None] == []
    db = tmp_path / "c.duckdb"
    run_files([*sessions.claude_files(), *sessions.codex_files()], db)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM memory_tool_calls").fetchone() == (0,)
    for name in MEMORY_QUERIES:
        assert run_query(con, name, MEMORY_QUERIES)[1] == []
    con.close()


def _hand_calls() -> list[dict[str, Any]]:
    d1, d2 = 1_767_225_600_000, 1_767_225_600_000 + 86_400_000
    recall = "mcp__hive-mind__recall_memory"
    return [
        oc_tool(d1 + 1, "s-a", "A", recall, {"query": "a"}, [{"type": "text", "text": "[1, 2]"}]),  # read, 2 results
        oc_tool(d1 + 2, "s-a", "A", recall, {"query": "b"}, [{"type": "text", "text": "No memories found for query: \"b\""}]),  # empty
        oc_tool(d1 + 3, "s-a", "A", "mcp__hive-mind__save_memory", {"content": "c"}, {"id": "1"}),  # write
        oc_tool(d2 + 4, "s-a", "A", recall, {"query": "d"}, None, error="database is locked"),  # failed read
        oc_tool(d1 + 5, "s-b", "B", "kb_submit", {"task": "t", "result": "r"}, {"ok": True}),  # writes
        oc_tool(d1 + 6, "s-b", "B", "memory_store", {"text": "x"}, {"ok": True}),
        oc_tool(d1 + 7, "s-b", "B", "Bash", {"command": "ls"}, "total 0"),  # not memory
    ]


def test_memory_queries_on_a_hand_made_log(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in _hand_calls()))
    db = tmp_path / "m.duckdb"
    run_files([log], db)
    run_files([log], db)  # applied twice: nothing doubles
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM memory_tool_calls").fetchone() == (6,)
    q = lambda name: run_query(con, name, MEMORY_QUERIES)[1]  # noqa: E731
    # day 1: A read twice and wrote once; B wrote twice (kb_submit, memory_store). Day 2: A's failed read.
    assert q("memory-reads-per-write") == [("2026-01-01", "A", 2, 1, 2.0), ("2026-01-01", "B", 0, 2, 0.0), ("2026-01-02", "A", 1, 0, None)]
    # A's successful recalls: 2, both with a count, one empty; the failed one is an error, not an empty read
    assert q("memory-empty-reads") == [("mcp__hive-mind__recall_memory", "A", 2, 2, 1, 0.5)]
    assert q("memory-tool-errors") == [("mcp__hive-mind__recall_memory", "A", 3, 1, 0.333, "database is locked")]
    con.close()


def test_no_secret_of_a_tool_call_reaches_a_table(tmp_path: Path) -> None:
    """Every strict-mode privacy case in the arguments and the error of memory calls from the three runtimes."""
    lines: list[dict[str, Any]] = []
    for i, c in enumerate(CASES):
        t = 1_780_000_000_000 + i * 1000
        lines.append(oc_tool(t, f"p-{i}", "agent-p", "memory_store", {"text": c.text, "tags": [c.text]}, None, error=f"rejected: {c.text}"))
        args = {"content": c.text, "metadata": {"note": c.text}}
        lines.append(cc_tool(t + 1, f"p-{i}", "mcp__hive-mind__save_memory", json.dumps(args) if i % 2 else args,
                             {"isError": True, "content": [{"type": "text", "text": c.text}]}, source="codex" if i % 2 else "claude-code"))
        lines.append(cc_tool(t + 2, f"p-{i}", "mcp__openmemory__search_memory", {"query": c.text}, json.dumps({"results": [{"memory": c.text}]})))
    log = tmp_path / "secrets.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    db = tmp_path / "s.duckdb"
    run_files([log], db)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM memory_tool_calls").fetchone() == (3 * len(CASES),)
    assert con.execute("SELECT count(*) FROM memory_tool_calls WHERE arguments LIKE '%[REDACTED:%'").fetchone()[0] > len(CASES)  # type: ignore[index]
    cells: list[bytes] = []
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall():
        for row in con.execute(f'SELECT * FROM "{table}"').fetchall():
            cells += [v if isinstance(v, bytes) else str(v).encode() for v in row if v is not None]
    con.close()
    blob = b"\n".join(cells)
    leaked = sorted(s for s in secrets() if any(f in blob for f in forms(s)))
    assert leaked == []


def test_the_projection_writes_nothing_for_other_events(tmp_path: Path) -> None:
    from streams.memory_calls.tool_calls import configured_rules, memory_call

    rules = configured_rules()
    with MemoryCallProjection(tmp_path / "p.duckdb") as p:
        prompt = adapt({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "hi", "ts": 1_780_000_000_000})
        assert memory_call(prompt, rules) is None
        assert p.apply([], {("in", 0): 1}) == 0
        assert p.con.execute("SELECT count(*) FROM memory_tool_calls").fetchone() == (0,) and p.position("in") == 1
        call = memory_call(adapt(oc_tool(1_780_000_000_000, "s", "a", "kb_search", {"query": "q"}, {"results": []})), rules)
        assert call is not None
        assert p.apply([call, call], {("in", 0): 2}) == 2  # offered twice, one row: idempotent on the event id
        assert p.con.execute("SELECT op, results FROM memory_tool_calls").fetchall() == [("read", 0)] and p.position("in") == 2


def test_rules_from_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streams.memory_calls.tool_calls import RULES_ENV, configured_rules, rules_from_json

    f = tmp_path / "rules.json"
    f.write_text(json.dumps([{"name": "Lookup-*", "op": "read", "system": "acme", "server": "*ACME*"}, {"name": "jot", "op": "write", "system": "acme"}]))
    monkeypatch.setenv(RULES_ENV, str(f))
    rules = configured_rules()
    assert rules[2:] == list(DEFAULT_RULES)
    got = [classify(n, rules) for n in ("mcp__acme__lookup_notes", "jot", "mcp__x__lookup_notes", "recall_memory")]
    assert [(r.system, r.op) if r else None for r in got] == [("acme", "read"), ("acme", "write"), None, ("hive-mind", "read")]
    for bad in ("{", "{}", '[{"name": "x", "op": "delete", "system": "s"}]', '[{"op": "read", "system": "s"}]'):
        with pytest.raises(ValueError, match="memory tool rules"):
            rules_from_json(bad)


def test_a_call_survives_a_trip_through_json() -> None:
    """The record the Kafka path can carry to the projector (see the report to the lead)."""
    from streams.memory_calls.tool_calls import MemoryToolCall

    call = memory_call(adapt(oc_tool(1_780_000_000_000, "s", "a", "kb_search", {"query": "q é"}, {"results": [1]})))
    assert call is not None and MemoryToolCall.from_json(call.to_json()) == call
    for bad in (b"{", b"[]", b'{"schema_version": 2}', call.to_json().replace(b'"read"', b'"delete"')):
        with pytest.raises(ValueError, match="memory tool call record"):
            MemoryToolCall.from_json(bad)
