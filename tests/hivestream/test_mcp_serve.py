"""The MCP tools on a real ``hivestream serve``: ``/mcp`` answers from the same services as ``/api/*``
(a submission through ``kb_submit`` is pending for the reviewer, searchable through ``kb_search``
once approved; ``memory_search`` recalls the project's frames), with the same tokens and scopes, and
each tool call is one event in the telemetry even when the runtime's ``PostToolUse`` hook reports
the call again."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import duckdb
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.support.agent_api_cases import Api, until
from tests.support.serve_harness import ServeProc, prompt

TOKENS = {"hooks": "hooks-token-0123456789abcdef", "agent": "agent-token-0123456789abcdef", "review": "review-token-0123456789abcdef"}
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@contextlib.asynccontextmanager
async def _client(url: str, token: str) -> AsyncIterator[Client]:
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as hc,
                Client(streamable_http_client(url + "/mcp", http_client=hc)) as client):
        yield client


def _text(result: CallToolResult) -> str:
    assert not result.is_error, result.content
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def _error(result: CallToolResult) -> str:
    assert result.is_error and len(result.content) == 1 and isinstance(result.content[0], TextContent)
    return result.content[0].text


def _post_tool_use(api: Api, tool: str, args: dict[str, object]) -> None:
    """What Claude Code's ``PostToolUse`` hook posts after calling ``tool`` (capture hooks installed beside the MCP server)."""
    hook = {"session_id": "mcp-s1", "hook_event_name": "PostToolUse", "cwd": "/w/heron", "tool_name": tool, "tool_input": args,
            "tool_response": [{"type": "text", "text": "..."}]}
    assert api.c.post("/v1/hooks/claude-code", json=hook).status_code == 200


async def test_the_tools_answer_from_serves_services_and_each_call_counts_once(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"gw-{name} {tok} scopes={name}\n" for name, tok in TOKENS.items()))
    s = ServeProc(tmp_path / "m.duckdb", "--tokens-file", str(tokens))
    try:
        hooks, reviewer = Api(s.url, TOKENS["hooks"]), Api(s.url, TOKENS["review"])
        for body in (prompt("heron1", 1) | {"cwd": "/w/heron", "prompt": "the heron queue drains slowly"},
                     prompt("egret1", 2) | {"cwd": "/w/egret", "prompt": "the heron queue in egret"}):
            assert hooks.c.post("/v1/hooks/claude-code", json=body).status_code == 200
        s.wait_applied()
        async with _client(s.url, TOKENS["agent"]) as mcp:
            submitted = _text(await mcp.call_tool("kb_submit", {"task": "drain the heron queue faster", "resource": "heron-cli --parallel 8",
                                                                "result": "parallel drains took 2 min instead of 20", "confidence": 0.9}))
            assert submitted.startswith("Submitted to KnowHub as ") and submitted.endswith(": pending (a reviewer approves it before search finds it).")
            eid = submitted.removeprefix("Submitted to KnowHub as ").split(":")[0]
            assert [p["id"] for p in reviewer.get("/api/pending").json()["results"]] == [eid]
            before = _text(await mcp.call_tool("kb_search", {"query": "heron queue"}))
            assert reviewer.post(f"/api/approve/{eid}", {"reason": "ok"}).json() == {"id": eid, "status": "approved"}
            found = _text(await mcp.call_tool("kb_search", {"query": "heron queue"}))
            body = _text(await mcp.call_tool("kb_content", {"id": eid}))
            recalled = _text(await mcp.call_tool("memory_search", {"query": "heron queue", "project": "heron"}))
            unscoped = await mcp.call_tool("memory_search", {"query": "heron queue"})  # over HTTP the server knows no working directory
            unknown = await mcp.call_tool("kb_content", {"id": "no-such-experience"})
        for tool, args in (("kb_submit", {"task": "drain the heron queue faster"}), ("kb_search", {"query": "heron queue"}),
                           ("kb_search", {"query": "heron queue"}), ("kb_content", {"id": eid}),
                           ("memory_search", {"query": "heron queue", "project": "heron"})):
            _post_tool_use(hooks, f"mcp__hivestream__{tool}", args)
        until(lambda: s.health()[1]["log_records"] >= 14, 30, "the 14 lines (2 prompts, a submission, a review, 5 telemetry, 5 hook copies) to be in the log")
        s.wait_applied()
    finally:
        assert s.stop() == 0
    assert eid not in before  # pending: not found
    assert f"1. [{eid}] drain the heron queue faster" in found
    assert "<resource>heron-cli --parallel 8</resource>" in body
    assert "the heron queue drains slowly" in recalled and "egret" not in recalled  # the project's frame, not another project's
    assert _error(unscoped) == "memory_search: missing_field: project is required unless scope=all"
    assert _error(unknown) == 'KnowHub has no experience "no-such-experience".'
    with duckdb.connect(str(s.db), read_only=True) as con:
        telemetry = con.execute("SELECT kind, agent_id, runtime, coalesce(query, experience_ref) FROM kb_telemetry ORDER BY event_time_ms").fetchall()
        submissions = con.execute("SELECT count(*), min(agent_id) FROM experience_submissions").fetchone()
    assert sorted(telemetry) == sorted([("search", "gw-agent", "mcp", "heron queue"), ("search", "gw-agent", "mcp", "heron queue"),
                                        ("content", "gw-agent", "mcp", eid), ("recall", "gw-agent", "mcp", "heron queue"),
                                        ("content", "gw-agent", "mcp", "no-such-experience")])
    assert submissions == (1, "gw-agent")


async def test_mcp_on_serve_takes_the_agent_scope(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"gw-{name} {tok} scopes={name}\n" for name, tok in TOKENS.items()))
    s = ServeProc(tmp_path / "m.duckdb", "--tokens-file", str(tokens))
    try:
        async with httpx2.AsyncClient(timeout=30) as hc:
            answers = {name: await hc.post(s.url + "/mcp", content=INIT, headers={**HEADERS, "Authorization": f"Bearer {tok}"})
                       for name, tok in TOKENS.items()}
            none = await hc.post(s.url + "/mcp", content=INIT, headers=HEADERS)
    finally:
        s.stop()
    assert answers["agent"].status_code == 200 and answers["agent"].json()["result"]["serverInfo"]["name"] == "hivestream"
    for name in ("hooks", "review"):
        r = answers[name]
        assert r.status_code == 403 and r.json() == {"error": "forbidden", "detail": f"/mcp needs the agent scope; the token of gateway 'gw-{name}' "
                                                                                    f"has: {name}"}
    assert none.status_code == 401 and none.json() == {"error": "unauthorized", "detail": "missing or unknown bearer token"}
    text = s.text()
    assert all(tok not in text for tok in TOKENS.values()) and "Traceback" not in text
