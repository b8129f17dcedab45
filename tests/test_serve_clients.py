"""A real Claude Code turn (the CLI from npm against the suite's local model stub) through
``hivestream serve`` with the hooks ``hivestream hooks install claude-code`` writes: its frames are in
the DuckDB file within seconds, ``hivestream query`` and ``hivestream report`` show them while serve
runs; no broker, no JDK. And the OpenClaw handler posting to serve."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from projections.reading import open_for_reading
from tests.anthropic_stub import REPLY, AnthropicStub
from tests.serve_harness import REPO_ROOT, ServeProc, hivestream
from tests.test_ingest_clients import _run_handler, claude_bin


def _install(runtime: str, home: Path, url: str, *extra: str) -> None:
    r = subprocess.run([sys.executable, "-m", "hivestream", "hooks", "install", runtime, "--url", url, *extra],
                       env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 0, r.stderr


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
    if cc is None:
        pytest.skip("Claude Code CLI not available (npm could not install @anthropic-ai/claude-code)")
    home, project, db = tmp_path / "home", tmp_path / "project", tmp_path / "memory.duckdb"
    home.mkdir()
    project.mkdir()
    proc = ServeProc(db, "--snapshot-every", "0.5")
    stub = AnthropicStub()
    prompt = f"what is 2+2? (serve, {mode} hooks)"
    try:
        _install("claude-code", home, proc.url, *(["--command"] if mode == "command" else []))
        env = {**os.environ, "HOME": str(home), "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "sk-ant-test-not-a-key",
               "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
               "HIVESTREAM_SPOOL_DIR": str(tmp_path / "hook-spool"), "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        env.pop("HIVESTREAM_INGEST_TOKEN", None)
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
