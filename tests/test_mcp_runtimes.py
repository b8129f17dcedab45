"""Real runtimes through the MCP server ``hivestream hooks install … --knowhub`` registers. A Claude
Code turn (the CLI from npm against the suite's local model stub) through ``/mcp`` of a running serve
(in this process, over a fake agent API) and through ``hivestream mcp`` over stdio: the stub model
answers with a ``tool_use`` of ``mcp__hivestream__kb_search``; the call reaches hivestream's MCP
server, and its answer (the escaped, untrusted index) reaches the model's next request; the
``SessionStart`` reminder reached the model's first one. A Codex turn (``codex exec`` from npm
against the Responses stub): Codex connects to ``/mcp`` and offers the model the four tools."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hivestream.hooks.knowhub_reminder import START_REMINDER
from hivestream.ingest.server import IngestConfig
from hivestream.serve.app import ServeConfig, default_log_dir, serve_async
from hivestream.serve.publisher import PublishOptions
from tests.anthropic_stub import AnthropicStub
from tests.fake_agent_api import FakeAgentApi, ThreadedApp, contract_app
from tests.openai_responses_stub import ResponsesStub
from tests.serve_harness import REPO_ROOT
from tests.test_ingest_clients import claude_bin, codex_js

TOOL = "mcp__hivestream__kb_search"
FINAL = "The stub model read the KnowHub index."
TOKEN = "mcp-claude-agent-token-0123456789"


class InProcessServe:
    """``serve_async`` over a fresh file with ``/mcp`` over ``api``, on its own event loop in a thread."""

    def __init__(self, tmp: Path, api: FakeAgentApi, tokens: Path | None = None) -> None:
        from streams.ingest.auth import TokenTable, load_tokens

        db = tmp / "memory.duckdb"
        table = TokenTable(load_tokens(tokens.read_text())) if tokens else TokenTable([])
        cfg = ServeConfig(http=IngestConfig(host="127.0.0.1", port=0, tokens=table), db=db, log_dir=default_log_dir(db),
                          publish=PublishOptions(snapshot_every_s=0))
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        ready = threading.Event()
        self.port = 0
        self.error: BaseException | None = None

        def on_ready(port: int) -> None:
            self.port = port
            ready.set()

        def run() -> None:
            try:
                self._loop.run_until_complete(serve_async(cfg, self._stop, on_ready, agent_api=api))
            except BaseException as e:
                self.error = e
                ready.set()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        assert ready.wait(60) and self.error is None, self.error

    @property
    def url(self) -> str:
        """serve's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop serve (it applies what is durable and closes) and end the thread."""
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(60)
        self._loop.close()
        assert self.error is None, self.error


def _answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """First the kb_search call (when Claude Code offers the tool), then a text once its result came back."""
    tools = {t.get("name") for t in body.get("tools") or []}
    last = body["messages"][-1]["content"] if body.get("messages") else ""
    results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(last, list) else []
    if TOOL in tools and not results:
        return [{"type": "text", "text": "Searching KnowHub first."},
                {"type": "tool_use", "id": "toolu_stub_1", "name": TOOL, "input": {"query": "kafka consumer rebalancing", "limit": 3}}]
    return [{"type": "text", "text": FINAL}]


def _env(home: Path, stub: AnthropicStub, tmp: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
           "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "HIVESTREAM_SPOOL_DIR": str(tmp / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(REPO_ROOT), "MCP_CONNECTION_NONBLOCKING": "0", **extra}  # -p waits for the MCP servers before the first request
    for var in ("HIVESTREAM_AGENT_TOKEN", "HIVESTREAM_INGEST_TOKEN", "CLAUDE_CONFIG_DIR"):
        if var not in extra:
            env.pop(var, None)
    return env


def _install(home: Path, url: str, env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", "claude-code", "--knowhub", "--url", url], env=env,
                       capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr


def _turn(cc: Path, env: dict[str, str], project: Path) -> dict[str, Any]:
    r = subprocess.run([str(cc), "-p", "Why does my Kafka consumer group keep rebalancing?", "--output-format", "json", "--allowedTools", TOOL],
                       env=env, cwd=project, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:] + r.stdout[-2000:]
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _tool_result_text(requests: list[dict[str, Any]]) -> str:
    for body in requests:
        for m in body.get("messages", []):
            for b in m["content"] if isinstance(m.get("content"), list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == "toolu_stub_1":
                    c = b.get("content")
                    return c if isinstance(c, str) else "".join(x.get("text", "") for x in c if isinstance(x, dict))
    raise AssertionError("no kb_search result reached the model")


@pytest.fixture
def kb() -> Iterator[tuple[FakeAgentApi, str]]:
    api = FakeAgentApi()
    eid = api.add("Kafka consumer group keeps rebalancing <under load>", "kafka-python, max.poll.interval.ms",
                  "Raise max.poll.interval.ms to 600000.")
    api.add("DuckDB upsert applied one row of many", "INSERT ... ON CONFLICT", "Aggregate the batch by key first.")
    yield api, eid


def test_a_claude_code_turn_calls_kb_search_through_serves_mcp_and_the_model_reads_the_answer(tmp_path: Path, kb: tuple[FakeAgentApi, str]) -> None:
    cc = claude_bin()
    api, eid = kb
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (tmp_path / "tokens").write_text(f"laptop-1 {TOKEN} scopes=hooks,agent\n")
    serve = InProcessServe(tmp_path, api, tmp_path / "tokens")
    stub = AnthropicStub(_answer)
    try:
        env = _env(home, stub, tmp_path, HIVESTREAM_AGENT_TOKEN=TOKEN, HIVESTREAM_INGEST_TOKEN=TOKEN)
        _install(home, serve.url, env)
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["hivestream"]
        assert entry["headers"] == {"Authorization": "Bearer ${HIVESTREAM_AGENT_TOKEN}"}  # expanded by Claude Code, never written
        out = _turn(cc, env, project)
    finally:
        stub.close()
        serve.close()
    assert out["result"] == FINAL
    searches = [(a, c) for m, a, c in api.calls if m == "search"]
    assert len(searches) == 1 and searches[0][0]["q"] == "kafka consumer rebalancing" and searches[0][0]["limit"] == 3
    assert searches[0][1] is not None and searches[0][1].gateway_id == "laptop-1"  # the token Claude Code sent from the variable
    seen = _tool_result_text(stub.requests)
    assert seen.startswith('<knowhub-experiences trust="untrusted"') and f"1. [{eid}] Kafka consumer group keeps rebalancing &lt;under load&gt;" in seen
    first = json.dumps(next(b for b in stub.requests if TOOL in {t.get("name") for t in b.get("tools") or []}))
    assert json.dumps(START_REMINDER)[1:-1] in first  # the SessionStart reminder reached the model


def test_a_claude_code_turn_through_hivestream_mcp_over_stdio(tmp_path: Path, kb: tuple[FakeAgentApi, str]) -> None:
    cc = claude_bin()
    api, eid = kb
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    stand = ThreadedApp(contract_app(api))
    stub = AnthropicStub(_answer)
    try:
        env = _env(home, stub, tmp_path, HIVESTREAM_URL=stand.url)
        (home / ".claude.json").write_text(json.dumps({"mcpServers": {"hivestream": {
            "type": "stdio", "command": sys.executable, "args": ["-m", "hivestream", "mcp"], "env": {"PYTHONPATH": str(REPO_ROOT)}}}}))
        out = _turn(cc, env, project)
    finally:
        stub.close()
        stand.close()
    assert out["result"] == FINAL
    assert [a["q"] for m, a, _c in api.calls if m == "search"] == ["kafka consumer rebalancing"]
    assert f"[{eid}] Kafka consumer group keeps rebalancing &lt;under load&gt;" in _tool_result_text(stub.requests)


def test_codex_connects_to_serves_mcp_and_offers_the_model_the_tools(tmp_path: Path, kb: tuple[FakeAgentApi, str]) -> None:
    js = codex_js()
    api, _eid = kb
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    (tmp_path / "tokens").write_text(f"codex-1 {TOKEN} scopes=agent\n")
    serve = InProcessServe(tmp_path, api, tmp_path / "tokens")
    stub = ResponsesStub()
    try:
        (home / ".codex" / "config.toml").write_text(
            f'model = "stub-model"\nmodel_provider = "stub"\n\n[model_providers.stub]\nname = "stub"\nbase_url = "{stub.url}"\n'
            'wire_api = "responses"\nenv_key = "STUB_API_KEY"\n')
        env = {**os.environ, "HOME": str(home), "STUB_API_KEY": "sk-test-not-a-key", "HIVESTREAM_AGENT_TOKEN": TOKEN, "PYTHONPATH": str(REPO_ROOT),
               "HIVESTREAM_SPOOL_DIR": str(tmp_path / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", "codex", "--knowhub", "--url", serve.url], env=env,
                           capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(["node", str(js), "exec", "--skip-git-repo-check", "what is 2+3?"], env=env, cwd=project, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        stub.close()
        serve.close()
    assert stub.requests
    offered = [t for t in stub.requests[0].get("tools", []) if "hivestream" in str(t.get("name"))]
    assert len(offered) == 1 and sorted(t["name"] for t in offered[0]["tools"]) == ["kb_content", "kb_search", "kb_submit", "memory_search"]
    assert "when a task starts" in json.dumps(offered[0])
