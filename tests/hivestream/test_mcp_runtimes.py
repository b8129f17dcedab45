"""Real runtimes through the MCP server ``hivestream hooks install … --knowhub`` registers, on a real
``hivestream serve``.

Claude Code (the CLI from npm against the suite's local model stub, which answers with tool calls):
two turns through ``/mcp`` with the capture hooks installed beside it. ``kb_search`` returns an
experience approved beforehand; ``kb_submit`` makes a pending one that ``/api/pending`` lists; after
``/api/approve`` the second turn's search finds it; ``memory_search`` returns the first turn's frame
of the same project and not another project's; the telemetry counts each call once (the hooks'
``PostToolUse`` copies of the calls derive nothing). A turn through ``hivestream mcp`` over stdio (a
client of ``/api``). Codex (``codex exec`` from npm against the Responses stub) connects to ``/mcp``
and offers the model the four tools.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from hivestream.hooks.knowhub_reminder import START_REMINDER
from tests.hivestream.test_ingest_clients import claude_bin, codex_js
from tests.support.agent_api_cases import Api
from tests.support.anthropic_stub import AnthropicStub
from tests.support.openai_responses_stub import ResponsesStub
from tests.support.serve_harness import REPO_ROOT, ServeProc

SERVER = "mcp__hivestream__"
FINAL = "The stub model is done."
TOKEN = "mcp-claude-agent-token-0123456789"
REVIEW_TOKEN = "mcp-claude-review-token-0123456789"
PROJECT = "tidepool"
FIRST_PROMPT = "Why does my Kafka consumer group keep rebalancing?"
SECOND_PROMPT = "What did we learn about the heron exporter?"

Step = tuple[str, dict[str, Any]]


def _scripted(turns: dict[str, list[Step]]) -> Callable[[dict[str, Any]], list[dict[str, Any]]]:
    """The stub model: in a request offering hivestream's tools, the turn's next tool call (by the
    number of tool results so far), then a final text; any other request (a title, a summary) a text."""

    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        tools = {str(t.get("name")) for t in body.get("tools") or []}
        messages = body.get("messages") or []
        first = messages[0]["content"] if messages else ""
        text = first if isinstance(first, str) else json.dumps(first)
        script = next((steps for prompt, steps in turns.items() if prompt in text), None)
        if script is None or not any(t.startswith(SERVER) for t in tools):
            return [{"type": "text", "text": FINAL}]
        done = sum(1 for m in messages for b in (m["content"] if isinstance(m.get("content"), list) else [])
                   if isinstance(b, dict) and b.get("type") == "tool_result")
        if done >= len(script):
            return [{"type": "text", "text": FINAL}]
        tool, args = script[done]
        return [{"type": "tool_use", "id": f"toolu_stub_{done}", "name": SERVER + tool, "input": args}]

    return answer


def _env(home: Path, stub: AnthropicStub, tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
           "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "HIVESTREAM_SPOOL_DIR": str(tmp / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO_ROOT), "MCP_CONNECTION_NONBLOCKING": "0", **extra}  # -p waits for the MCP servers before the first request
    for var in ("HIVESTREAM_AGENT_TOKEN", "HIVESTREAM_INGEST_TOKEN", "HIVESTREAM_URL", "CLAUDE_CONFIG_DIR"):
        if var not in extra:
            env.pop(var, None)
    return env


def _install(home: Path, url: str, env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", "claude-code", "--knowhub", "--url", url], env=env,
                       capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr


def _turn(cc: Path, env: dict[str, str], project: Path, prompt: str) -> dict[str, Any]:
    r = subprocess.run([str(cc), "-p", prompt, "--output-format", "json", "--allowedTools", "mcp__hivestream"],
                       env=env, cwd=project, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _tool_results(requests: list[dict[str, Any]]) -> dict[str, str]:
    """What each tool call answered, as the model read it (by tool-use id), in the requests' order."""
    seen: dict[str, str] = {}
    for body in requests:
        for m in body.get("messages", []):
            for b in m["content"] if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result":
                    c = b.get("content")
                    seen[str(b.get("tool_use_id"))] = c if isinstance(c, str) else "".join(x.get("text", "") for x in c if isinstance(x, dict))
    return seen


def _serve(tmp: Path) -> ServeProc:
    (tmp / "tokens").write_text(f"laptop-1 {TOKEN} scopes=hooks,agent\nreviewer {REVIEW_TOKEN} scopes=review\n")
    return ServeProc(tmp / "memory.duckdb", "--tokens-file", str(tmp / "tokens"))


def _approved(agent: Api, reviewer: Api, task: str, resource: str, result: str) -> str:
    eid = str(agent.post("/api/submit", {"task": task, "resource": resource, "result": result, "confidence": 0.9}).json()["id"])
    assert reviewer.post(f"/api/approve/{eid}", {"reason": "checked"}).json() == {"id": eid, "status": "approved"}
    return eid


def test_claude_code_turns_search_submit_and_recall_through_serves_mcp(tmp_path: Path) -> None:
    cc = claude_bin()
    home, project = tmp_path / "home", tmp_path / PROJECT
    home.mkdir()
    project.mkdir()
    s = _serve(tmp_path)
    agent, reviewer = Api(s.url, TOKEN), Api(s.url, REVIEW_TOKEN)
    stub = AnthropicStub(_scripted({
        FIRST_PROMPT: [("kb_search", {"query": "kafka consumer rebalancing", "limit": 3}),
                       ("kb_submit", {"task": "export heron metrics without gaps", "resource": "heron exporter --flush-every 5s",
                                      "result": "a 5 s flush closed the gaps in the dashboard", "confidence": 0.8})],
        SECOND_PROMPT: [("kb_search", {"query": "heron exporter gaps"}),
                        ("memory_search", {"query": "kafka consumer group rebalancing", "project": PROJECT})],
    }))
    try:
        before = _approved(agent, reviewer, "Kafka consumer group keeps rebalancing <under load>", "kafka-python, max.poll.interval.ms",
                           "Raise max.poll.interval.ms to 600000.")
        other = {"session_id": "other-1", "hook_event_name": "UserPromptSubmit", "cwd": "/w/billing",
                 "prompt": "the billing Kafka consumer group keeps rebalancing too"}
        assert agent.c.post("/v1/hooks/claude-code", json=other).status_code == 200  # another project's frame
        env = _env(home, stub, tmp_path, HIVESTREAM_AGENT_TOKEN=TOKEN, HIVESTREAM_INGEST_TOKEN=TOKEN)
        _install(home, s.url, env)
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["hivestream"]
        assert entry["url"] == s.url + "/mcp" and entry["headers"] == {"Authorization": "Bearer ${HIVESTREAM_AGENT_TOKEN}"}

        first = _turn(cc, env, project, FIRST_PROMPT)
        s.wait_applied()
        pending = reviewer.get("/api/pending").json()["results"]
        assert [p["task"] for p in pending] == ["export heron metrics without gaps"]
        submitted = pending[0]["id"]
        assert reviewer.post(f"/api/approve/{submitted}", {}).json() == {"id": submitted, "status": "approved"}
        first_seen = _tool_results(stub.requests)

        second = _turn(cc, env, project, SECOND_PROMPT)
        s.wait_applied()
    finally:
        stub.close()
        s.stop()
    assert first["result"] == FINAL and second["result"] == FINAL
    seen = _tool_results(stub.requests)
    found_before, submit_answer = first_seen["toolu_stub_0"], first_seen["toolu_stub_1"]
    assert found_before.startswith('<knowhub-experiences trust="untrusted"')
    assert f"1. [{before}] Kafka consumer group keeps rebalancing &lt;under load&gt;" in found_before
    assert submit_answer == f"Submitted to KnowHub as {submitted}: pending (a reviewer approves it before search finds it)."
    found_after, recalled = seen["toolu_stub_0"], seen["toolu_stub_1"]  # the second turn's (its ids restart at 0)
    assert f"1. [{submitted}] export heron metrics without gaps" in found_after
    assert recalled.startswith('<hivestream-memory trust="untrusted"') and f'project="{PROJECT}"' in recalled
    assert FIRST_PROMPT.replace("'", "&#x27;") in recalled and "billing" not in recalled
    start = json.dumps(next(b for b in stub.requests if any(str(t.get("name")).startswith(SERVER) for t in b.get("tools") or [])))
    assert json.dumps(START_REMINDER)[1:-1] in start  # the SessionStart reminder reached the model

    with duckdb.connect(str(s.db), read_only=True) as con:
        telemetry = con.execute("SELECT kind, agent_id, runtime, query FROM kb_telemetry ORDER BY event_time_ms").fetchall()
        submissions = con.execute("SELECT runtime, count(*) FROM experience_submissions GROUP BY runtime ORDER BY runtime").fetchall()
        hook_copies = con.execute(f"SELECT tool FROM memory_tool_calls WHERE tool LIKE '{SERVER}%' ORDER BY event_time_ms").fetchall()
    assert telemetry == [("search", "laptop-1", "mcp", "kafka consumer rebalancing"), ("search", "laptop-1", "mcp", "heron exporter gaps"),
                         ("recall", "laptop-1", "mcp", "kafka consumer group rebalancing")]
    assert submissions == [("api", 1), ("mcp", 1)]  # the one approved beforehand, the one kb_submit made
    assert [t for (t,) in hook_copies] == [SERVER + "kb_search", SERVER + "kb_submit", SERVER + "kb_search"]  # the runtime's record, once each


def test_a_claude_code_turn_through_hivestream_mcp_over_stdio(tmp_path: Path) -> None:
    cc = claude_bin()
    home, project = tmp_path / "home", tmp_path / PROJECT
    home.mkdir()
    project.mkdir()
    s = _serve(tmp_path)
    stub = AnthropicStub(_scripted({FIRST_PROMPT: [("kb_search", {"query": "kafka consumer rebalancing", "limit": 3})]}))
    try:
        eid = _approved(Api(s.url, TOKEN), Api(s.url, REVIEW_TOKEN), "Kafka consumer group keeps rebalancing", "kafka-python",
                        "Raise max.poll.interval.ms.")
        env = _env(home, stub, tmp_path, HIVESTREAM_URL=s.url, HIVESTREAM_AGENT_TOKEN=TOKEN)
        (home / ".claude.json").write_text(json.dumps({"mcpServers": {"hivestream": {
            "type": "stdio", "command": sys.executable, "args": ["-m", "hivestream", "mcp"], "env": {"PYTHONPATH": str(REPO_ROOT)}}}}))
        out = _turn(cc, env, project, FIRST_PROMPT)
        s.wait_applied()
    finally:
        stub.close()
        s.stop()
    assert out["result"] == FINAL
    assert f"1. [{eid}] Kafka consumer group keeps rebalancing" in _tool_results(stub.requests)["toolu_stub_0"]
    with duckdb.connect(str(s.db), read_only=True) as con:
        assert con.execute("SELECT kind, agent_id, query FROM kb_telemetry").fetchall() == [("search", "laptop-1", "kafka consumer rebalancing")]


def test_codex_connects_to_serves_mcp_and_offers_the_model_the_tools(tmp_path: Path) -> None:
    js = codex_js()
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    s = _serve(tmp_path)
    stub = ResponsesStub()
    try:
        (home / ".codex" / "config.toml").write_text(
            f'model = "stub-model"\nmodel_provider = "stub"\n\n[model_providers.stub]\nname = "stub"\nbase_url = "{stub.url}"\n'
            'wire_api = "responses"\nenv_key = "STUB_API_KEY"\n')
        env = {**os.environ, "HOME": str(home), "STUB_API_KEY": "sk-test-not-a-key", "HIVESTREAM_AGENT_TOKEN": TOKEN, "PYTHONPATH": str(REPO_ROOT),
               "HIVESTREAM_SPOOL_DIR": str(tmp_path / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", "codex", "--knowhub", "--url", s.url], env=env,
                           capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["node", str(js), "exec", "--skip-git-repo-check", "what is 2+3?"], env=env, cwd=project, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        stub.close()
        s.stop()
    assert stub.requests
    offered = [t for t in stub.requests[0].get("tools", []) if "hivestream" in str(t.get("name"))]
    assert len(offered) == 1 and sorted(t["name"] for t in offered[0]["tools"]) == ["kb_content", "kb_search", "kb_submit", "memory_search"]
    assert "when a task starts" in json.dumps(offered[0])
