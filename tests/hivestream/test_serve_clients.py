"""A real Claude Code turn (the CLI from npm against the suite's local model stub) through
``hivestream serve`` with the hooks ``hivestream hooks install claude-code`` writes: its frames are in
the DuckDB file within seconds, ``hivestream query`` and ``hivestream report`` show them while serve
runs; no broker, no JDK. Claude Code's own debug log shows it reads serve's answers as valid hook
output, and nothing of hivestream's verdict reaches the model. And the OpenClaw handler posting
to serve."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hivestream.hooks.config import TOKEN_ENV
from projections.reading import open_for_reading
from streams.ingest.hook_log import HOOK_EVENTS, read_chunks
from streams.ingest.hook_output import hook_output
from streams.model.events import HookEvent
from tests.hivestream.test_ingest_clients import _run_handler, claude_bin
from tests.support.anthropic_stub import REPLY, AnthropicStub
from tests.support.hook_stand import AnswerStand
from tests.support.serve_harness import REPO_ROOT, ServeProc, hivestream


def _install(runtime: str, home: Path, url: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "HOME": str(home), **(env or {})}
    if TOKEN_ENV not in (env or {}):
        full.pop(TOKEN_ENV, None)
    r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", runtime, "--url", url, *extra],
                       env=full, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr
    return r


def _claude_env(home: Path, stub: AnthropicStub, tmp: Path) -> dict[str, str]:
    """The environment of a Claude Code run against ``stub`` with ``home`` as HOME (no token)."""
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
           "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
           "HIVESTREAM_SPOOL_DIR": str(tmp / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    env.pop(TOKEN_ENV, None)
    return env


def _one_turn_with_hook_debug(cc: Path, env: dict[str, str], project: Path, prompt: str, debug: Path) -> list[str]:
    """Run one ``claude -p`` turn with ``--debug hooks`` written to ``debug``; the log's lines about hooks."""
    r = subprocess.run([str(cc), "-p", prompt, "--output-format", "json", "--debug", "hooks", "--debug-file", str(debug)],
                       env=env, cwd=project, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["result"] == REPLY
    return [ln for ln in debug.read_text().splitlines() if re.search(r"(?<![\w/.-])[Hh]ooks?\b", ln) and "telemetry" not in ln]


def _frames(db: Path) -> list[dict[str, Any]]:
    """The frames of ``db`` as a reader of its snapshot sees them while serve holds the file."""
    q = hivestream("query", "totals", "--db", str(db), "--format", "json")  # the command works and says where it read: serve itself
    assert q.returncode == 0 and "answered by hivestream serve" in q.stderr, q.stderr
    try:
        con, _fresh = open_for_reading(db)
    except FileNotFoundError:
        return []
    try:
        return [{"content": c} for (c,) in con.execute("SELECT content FROM frames").fetchall()]
    finally:
        con.close()


def _wait_frames(db: Path, want: list[str], timeout_s: float = 60) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        rows = _frames(db)
        if all(any(str(r["content"]).endswith(w) for r in rows) for w in want) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


@pytest.mark.parametrize("mode", ["http", "command"])
def test_a_claude_code_turn_through_serve_is_in_the_file_and_the_report(tmp_path: Path, mode: str) -> None:
    cc = claude_bin()
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "memory.duckdb"
    home.mkdir()
    project.mkdir()
    proc = ServeProc(db, "--snapshot-every", "0.5")
    stub = AnthropicStub()
    prompt = f"what is 2+2? (serve, {mode} hooks)"
    try:
        _install("claude-code", home, proc.url, *(["--command"] if mode == "command" else []))
        env = _claude_env(home, stub, tmp_path)
        if mode == "http":
            r = subprocess.run([str(cc), "-p", prompt, "--output-format", "json"], env=env, cwd=project, capture_output=True, text=True, timeout=180)
            assert r.returncode == 0, r.stderr[-2000:]
            assert json.loads(r.stdout)["result"] == REPLY
            rows = _wait_frames(db, [prompt, REPLY])
        else:  # async command hooks run in the background of a live session
            p = subprocess.Popen([str(cc), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"], env=env,
                                 cwd=project, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert p.stdin is not None and p.stdout is not None
            try:
                p.stdin.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n")
                p.stdin.flush()
                assert next(o for o in map(json.loads, p.stdout) if o.get("type") == "result")["result"] == REPLY
                rows = _wait_frames(db, [prompt, REPLY])
            finally:
                p.stdin.close()
                p.wait(timeout=60)
        assert stub.requests, "Claude Code never called the stub model"
        contents = [str(r["content"]) for r in rows]
        assert any(c.endswith(prompt) and "event:user-prompt-submit" in c and "src:claude-code" in c for c in contents), contents
        assert any(c.endswith(REPLY) and "event:stop" in c for c in contents), contents
        page = tmp_path / "report.html"
        rep = hivestream("report", "--db", str(db), "--out", str(page))
        assert rep.returncode == 0, rep.stderr
        html = page.read_text()
        top = html[html.index('data-chart="top-frames"'):]
        assert top.startswith('data-chart="top-frames" data-state="table"') and "src:claude-code event:stop" in top
        assert "src:claude-code event:user-prom" in top
    finally:
        stub.close()
        assert proc.stop() == 0
    assert not list((tmp_path / "hook-spool").glob("*.hook"))  # nothing left behind by the hooks


def test_claude_code_reads_serves_answers_as_valid_hook_output_and_the_model_sees_no_verdict(tmp_path: Path) -> None:
    cc = claude_bin()
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "memory.duckdb"
    home.mkdir()
    project.mkdir()
    gateway, token = "gw-verdict-canary-5e1f", "answers-test-token-0123456789"  # the gateway id is in every verdict serve gives
    (tmp_path / "tokens").write_text(f"{gateway} {token}\n")
    proc = ServeProc(db, "--tokens-file", str(tmp_path / "tokens"), "--snapshot-every", "0.5", "--no-report")
    stub = AnthropicStub()
    prompt = "what is 2+2? (hook output)"
    try:
        _install("claude-code", home, proc.url, env={TOKEN_ENV: token})
        env = {**_claude_env(home, stub, tmp_path), TOKEN_ENV: token}
        hook_lines = _one_turn_with_hook_debug(cc, env, project, prompt, tmp_path / "claude-debug.log")
        rows = _wait_frames(db, [prompt, REPLY])
        assert stub.requests, "Claude Code never called the stub model"
        model_saw = json.dumps(stub.requests)
    finally:
        stub.close()
        assert proc.stop() == 0
    posts = [ln for ln in hook_lines if "HTTP hook response status" in ln]
    assert len(posts) == 2 and all("status 200, body length 2" in ln for ln in posts), hook_lines  # UserPromptSubmit and Stop: {}
    assert sum("Successfully parsed and validated hook JSON output" in ln for ln in hook_lines) == 2, hook_lines
    assert not [ln for ln in hook_lines if "[ERROR]" in ln or "[WARN]" in ln or "unrecognized keys" in ln or "hook error" in ln.lower()], hook_lines
    contents = [str(r["content"]) for r in rows]
    assert any(c.endswith(prompt) and "event:user-prompt-submit" in c for c in contents) and any(c.endswith(REPLY) for c in contents)
    events = [HookEvent.model_validate_json(r.value) for chunk in read_chunks(Path(f"{db}.hook-events")) for r in chunk if r.kind == HOOK_EVENTS]
    assert {e.native_event for e in events} >= {"UserPromptSubmit", "Stop"} and all(e.gateway == gateway for e in events)
    for verdict_part in [gateway, "dead_lettered", "received_at_ms", *(e.event_id for e in events)]:  # ("durable" is in a tool's schema)
        assert verdict_part not in model_saw, verdict_part


def test_a_hook_answers_additional_context_reaches_the_model_and_a_blocking_setting_is_what_the_installer_warned(tmp_path: Path) -> None:
    cc = claude_bin()
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    (home / ".claude").mkdir(parents=True)
    context = "context-from-memory-3c9d"

    def answer(_path: str, body: bytes) -> tuple[int, bytes]:
        event = json.loads(body).get("hook_event_name")
        return 200, json.dumps(hook_output(event, context if event == "UserPromptSubmit" else None)).encode()

    stand, stub = AnswerStand(answer), AnthropicStub()
    try:
        _install("claude-code", home, stand.url)
        env = _claude_env(home, stub, tmp_path)
        lines = _one_turn_with_hook_debug(cc, env, project, "what is 2+2? (context)", tmp_path / "debug-context.log")
        assert len(stand.seen) == 2 and context in json.dumps(stub.requests[-1])
        assert any("provided additionalContext" in ln for ln in lines), lines
        assert not [ln for ln in lines if "[ERROR]" in ln or "[WARN]" in ln or "unrecognized keys" in ln], lines
        settings = home / ".claude" / "settings.json"
        settings.write_text(json.dumps({**json.loads(settings.read_text()), "allowedHttpHookUrls": ["http://localhost:*/*"]}))
        warned = _install("claude-code", home, stand.url)
        assert warned.stderr.startswith("warning: allowedHttpHookUrls") and len(warned.stderr.splitlines()) == 1
        lines = _one_turn_with_hook_debug(cc, env, project, "what is 2+2? (blocked)", tmp_path / "debug-blocked.log")
        assert len(stand.seen) == 2 and sum("[WARN] HTTP hook blocked" in ln for ln in lines) == 2, lines  # as the installer said
    finally:
        stub.close()
        stand.close()


def test_the_openclaw_handler_posts_to_serve(tmp_path: Path) -> None:
    if not shutil.which("node"):
        pytest.skip("node not installed")
    home, db = tmp_path / "home", tmp_path / "memory.duckdb"
    home.mkdir()
    proc = ServeProc(db, "--snapshot-every", "0.3", "--no-report")
    try:
        _install("openclaw", home, proc.url)
        res = _run_handler(home / ".openclaw" / "hooks" / "hivestream" / "handler.ts", "oc-serve", {**os.environ, "HOME": str(home)}, tmp_path)
        assert res["returned"] == ["undefined", "undefined", "undefined"]
        rows = _wait_frames(db, ["hello from the gateway oc-serve", "reply from the agent oc-serve"])
        assert sum(1 for r in rows if "oc-serve" in str(r["content"])) == 2
    finally:
        assert proc.stop() == 0
