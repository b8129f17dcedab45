"""Real clients through ``hivestream ingest``: the Claude Code CLI from npm for one turn against a
local stub of the Anthropic Messages API, with hooks written by ``hivestream hooks install
claude-code`` into a test HOME; the Codex CLI from npm for one ``codex exec`` turn against a local
stub of the Responses API, reaching ingest through the legacy ``notify`` that ``hooks install
codex`` writes (its ``hooks.json`` hooks run only once a user trusts them in ``/hooks``, which a
non-interactive run cannot do); and the OpenClaw handler that ``hooks install openclaw`` writes,
run by Node (posting in the background, spooling when the server is away)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streams.kafka.topics import Topics
from streams.model.events import HookEvent
from tests.support.anthropic_stub import REPLY, AnthropicStub
from tests.support.ingest_harness import REPO_ROOT, IngestProc, frames_of, read_topic
from tests.support.kafka_harness import unique_namespace, wait_until
from tests.support.openai_responses_stub import REPLY as CODEX_REPLY
from tests.support.openai_responses_stub import ResponsesStub

pytestmark = pytest.mark.kafka

TOKEN = "client-test-token-0123456789"
CLAUDE_CODE_VERSION = "2.1.197"
CC_DIR = REPO_ROOT / ".venv" / "claude-code"


def npm_install(prefix: Path, package: str) -> str | None:
    """``npm install --prefix PREFIX PACKAGE`` (no scripts); ``None`` when npm succeeded, else why not:
    npm missing, or its exit status and the first 20 lines of its output without stack frames (a skip
    shows them; under CI the skip fails the run, ``tests/conftest.py``)."""
    if not shutil.which("npm"):
        return "npm is not on PATH"
    try:
        r = subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--ignore-scripts", package],
                           capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return f"npm install {package} did not finish within 600 s"
    if r.returncode == 0:
        return None
    said = [ln for ln in (r.stdout + r.stderr).strip().splitlines() if not re.match(r"(npm error)?\s+at ", ln)]
    return f"npm install {package} exited {r.returncode}:\n" + "\n".join(said[:20])


def claude_bin() -> Path:
    """The Claude Code CLI: ``HIVESTREAM_CLAUDE_BIN``, else npm's package installed once under
    ``.venv/claude-code`` (the native binary the package's postinstall would copy).

    Skips the calling test, with npm's output, when it cannot be had.
    """
    env = os.environ.get("HIVESTREAM_CLAUDE_BIN")
    if env:
        return Path(env)
    native = CC_DIR / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64" / "claude"
    why = None if native.exists() else npm_install(CC_DIR, f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}")
    if not native.exists():
        pytest.skip(f"Claude Code CLI not available: {why or f'npm installed no {native}'}")
    return native


CODEX_VERSION = "0.171.0"
CODEX_DIR = REPO_ROOT / ".venv" / "codex"


def codex_js() -> Path:
    """The Codex CLI entry (``HIVESTREAM_CODEX_JS``, else npm's package installed once under ``.venv/codex``).

    Skips the calling test, with npm's output, when it cannot be had or Node.js is missing.
    """
    env = os.environ.get("HIVESTREAM_CODEX_JS")
    if env:
        return Path(env)
    js = CODEX_DIR / "node_modules" / "@openai" / "codex" / "bin" / "codex.js"
    why = None if js.exists() else npm_install(CODEX_DIR, f"@openai/codex@{CODEX_VERSION}")
    if not js.exists():
        pytest.skip(f"Codex CLI not available: {why or f'npm installed no {js}'}")
    if not shutil.which("node"):
        pytest.skip("Codex CLI not available: node is not on PATH")
    return js


@pytest.fixture(scope="module")
def ingest(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IngestProc, Topics]]:
    work = tmp_path_factory.mktemp("clients")
    (work / "tokens").write_text(f"laptop-1 {TOKEN}\n")
    ns = unique_namespace("clients")
    proc = IngestProc(kafka_bootstrap, ns, work / "spool", tokens=work / "tokens")
    try:
        wait_until(lambda: httpx.get(proc.url + "/healthz").json()["broker"] == "up", 60, "the producer to connect")
        yield proc, Topics(ns)
    finally:
        proc.stop()


def _events(bootstrap: str, topics: Topics) -> list[tuple[bytes, HookEvent]]:
    return [(v, HookEvent.model_validate_json(v)) for _p, _k, v in read_topic(bootstrap, topics.hook_events)]


def _install(runtime: str, home: Path, url: str, *extra: str) -> str:
    """``hooks install`` into ``home`` where the token is set (so the http hooks send it)."""
    r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", runtime, "--url", url, *extra],
                       env={**os.environ, "HOME": str(home), "HIVESTREAM_INGEST_TOKEN": TOKEN}, capture_output=True, text=True, timeout=60,
                       cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("mode", ["http", "command"])
def test_claude_code_one_turn_produces_its_prompt_and_stop_frames(ingest: tuple[IngestProc, Topics], kafka_bootstrap: str,
                                                                  tmp_path: Path, mode: str) -> None:
    cc = claude_bin()
    proc, topics = ingest
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    _install("claude-code", home, proc.url, *(["--command"] if mode == "command" else []))
    prompt = f"what is 2+2? ({mode} hooks)"
    stub = AnthropicStub()
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
           "HIVESTREAM_INGEST_TOKEN": TOKEN, "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
           "DISABLE_AUTOUPDATER": "1", "HIVESTREAM_SPOOL_DIR": str(tmp_path / "hook-spool"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}

    def mine() -> list[tuple[bytes, HookEvent]]:
        return [(v, e) for v, e in _events(kafka_bootstrap, topics) if e.source == "claude-code" and e.project == "project"
                and e.gateway == "laptop-1" and e.raw and e.raw.get("cwd") == str(project)]

    def arrived() -> bool:
        return {e.native_event for _v, e in mine()} >= {"UserPromptSubmit", "Stop"}

    try:
        if mode == "http":  # one-shot print mode: Claude Code posts each hook before going on
            r = subprocess.run([str(cc), "-p", prompt, "--output-format", "json"], env=env, cwd=project, capture_output=True, text=True, timeout=180)
            assert r.returncode == 0, r.stderr[-2000:]
            assert json.loads(r.stdout)["result"] == REPLY
            wait_until(arrived, 60, "Claude Code's hook events")
        else:  # async command hooks run in the background of a live session (a one-shot -p ends them when it exits)
            p = subprocess.Popen([str(cc), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"], env=env,
                                 cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert p.stdin is not None and p.stdout is not None
            try:
                p.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
                p.stdin.flush()
                result = next(o for o in map(json.loads, p.stdout) if o.get("type") == "result")
                assert result["result"] == REPLY
                wait_until(arrived, 60, "Claude Code's hook events")
            finally:
                p.stdin.close()
                p.wait(timeout=60)
        assert stub.requests, "Claude Code never called the stub model"
    finally:
        stub.close()
    got = mine()
    by = {e.native_event: e for _v, e in got}
    assert by["UserPromptSubmit"].body == prompt and by["Stop"].body == REPLY
    assert by["UserPromptSubmit"].session == by["Stop"].session
    frames = frames_of([v for v, _e in got], tmp_path, "cc")["frames"]
    contents = sorted(row[3] for row in frames)
    assert any(c.endswith(prompt) and "event:user-prompt-submit" in c for c in contents)
    assert any(c.endswith(REPLY) and "event:stop" in c for c in contents)


NODE_DRIVER = r"""
const handlerPath = process.argv[2];
const { default: handler } = await import(handlerPath);
const sessionKey = process.argv[3];
const t0 = performance.now();
const ret = [];
ret.push(handler({ type: "message", action: "received", sessionKey, timestamp: new Date(1790000000000),
                   context: { channelId: sessionKey, from: "user-1", content: "hello from the gateway " + sessionKey, messageId: "m1" } }));
ret.push(handler({ type: "message", action: "sent", sessionKey, timestamp: new Date(1790000001000),
                   context: { channelId: sessionKey, to: "user-1", content: "reply from the agent " + sessionKey, messageId: "m2" } }));
ret.push(handler({ type: "command", action: "new", sessionKey }));
const took = performance.now() - t0;
console.log(JSON.stringify({ returned: ret.map((r) => r === undefined ? "undefined" : typeof r), took_ms: took }));
"""


def _run_handler(handler: Path, key: str, env: dict[str, str], tmp: Path) -> dict[str, object]:
    mjs = tmp / f"handler-{key}.mjs"
    shutil.copy(handler, mjs)  # Node 20 runs no .ts; the handler is plain JavaScript, also valid TypeScript
    drv = tmp / "driver.mjs"
    drv.write_text(NODE_DRIVER)
    r = subprocess.run(["node", str(drv), str(mjs), key], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def test_openclaw_handler_posts_without_blocking_and_spools_when_the_server_is_away(ingest: tuple[IngestProc, Topics],
                                                                                 kafka_bootstrap: str, tmp_path: Path) -> None:
    if not shutil.which("node"):
        pytest.skip("node not installed")
    proc, topics = ingest
    home = tmp_path / "home"
    home.mkdir()
    out = _install("openclaw", home, proc.url)
    assert "openclaw hooks enable hivestream" in out
    hook_dir = home / ".openclaw" / "hooks" / "hivestream"
    assert '"events": ["message:received", "message:sent"]' in (hook_dir / "HOOK.md").read_text()
    env = {**os.environ, "HOME": str(home), "HIVESTREAM_INGEST_TOKEN": TOKEN}

    res = _run_handler(hook_dir / "handler.ts", "oc-live", env, tmp_path)
    assert res["returned"] == ["undefined", "undefined", "undefined"]  # nothing for the gateway to await

    away = {**env, "HIVESTREAM_INGEST_URL": "http://127.0.0.1:9"}  # nothing listens on the discard port
    _run_handler(hook_dir / "handler.ts", "oc-away", away, tmp_path)
    spool = home / ".openclaw" / "hivestream-spool" / "pending.ndjson"
    assert len(spool.read_text().splitlines()) == 2
    _run_handler(hook_dir / "handler.ts", "oc-back", env, tmp_path)  # the next successful post forwards the spool

    def texts() -> set[str]:
        return {e.body or "" for _v, e in _events(kafka_bootstrap, topics) if e.source == "openclaw" and e.gateway == "laptop-1"}

    want = {f"{w} {k}" for k in ("oc-live", "oc-away", "oc-back") for w in ("hello from the gateway", "reply from the agent")}
    wait_until(lambda: want <= texts(), 60, "the OpenClaw events")
    assert not spool.exists() or not spool.read_text().strip()
    evs = [e for _v, e in _events(kafka_bootstrap, topics) if e.session == "openclaw-gateway:oc-live"]
    assert sorted(e.event_time_ms for e in evs) == [1790000000000, 1790000001000]
    assert {e.native_event for e in evs} == {"message:received", "message:sent"}


def test_codex_exec_one_turn_reaches_ingest_through_its_notify_program(ingest: tuple[IngestProc, Topics], kafka_bootstrap: str,
                                                                       tmp_path: Path) -> None:
    js = codex_js()
    proc, topics = ingest
    home, project = tmp_path / "home", tmp_path / "codex-project"
    (home / ".codex").mkdir(parents=True)
    project.mkdir()
    stub = ResponsesStub()
    try:
        (home / ".codex" / "config.toml").write_text(
            f'model = "stub-model"\nmodel_provider = "stub"\n\n[model_providers.stub]\nname = "stub"\nbase_url = "{stub.url}"\n'
            'wire_api = "responses"\nenv_key = "STUB_API_KEY"\n')
        out = _install("codex", home, proc.url)
        assert "/hooks" in out  # the trust step is printed
        env = {**os.environ, "HOME": str(home), "STUB_API_KEY": "sk-test-not-a-key", "HIVESTREAM_INGEST_TOKEN": TOKEN,
               "HIVESTREAM_SPOOL_DIR": str(tmp_path / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        prompt = "what is 2+3?"
        r = subprocess.run(["node", str(js), "exec", "--skip-git-repo-check", prompt], env=env, cwd=project, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=180)
        assert r.returncode == 0, r.stderr[-2000:]
        assert CODEX_REPLY in r.stdout and stub.requests
    finally:
        stub.close()

    def mine() -> list[tuple[bytes, HookEvent]]:
        return [(v, e) for v, e in _events(kafka_bootstrap, topics) if e.source == "codex" and e.project == "codex-project"]

    wait_until(lambda: any(e.native_event == "agent-turn-complete" for _v, e in mine()), 60, "Codex's notify event")
    got = mine()
    stop = next(e for _v, e in got if e.native_event == "agent-turn-complete")
    assert stop.body == CODEX_REPLY and stop.gateway == "laptop-1" and stop.raw and stop.raw["input-messages"] == [prompt]
    frames = frames_of([v for v, _e in got], tmp_path, "codex")["frames"]
    assert any(row[3].endswith(CODEX_REPLY) and "src:codex" in row[3] and "event:stop" in row[3] for row in frames)
