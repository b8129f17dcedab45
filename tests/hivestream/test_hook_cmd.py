"""``hivestream hook`` against a local HTTP stand-in for the ingest server (no broker): what it
posts, when it spools, how the next call and ``hook flush`` forward, and Codex notify chaining."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.hook_stand import ACCEPTED
from tests.support.ingest_harness import REPO_ROOT


class Stand:
    """Answers ``status`` to every POST and records (path, Authorization, body)."""

    def __init__(self) -> None:
        self.status = 200
        self.answer = ACCEPTED
        self.seen: list[tuple[str, str | None, bytes]] = []
        stand = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *_a: object) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                stand.seen.append((self.path, self.headers.get("Authorization"), body))
                self.send_response(stand.status)
                self.send_header("Content-Length", str(len(stand.answer)))
                self.end_headers()
                self.wfile.write(stand.answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def stand() -> Iterator[Stand]:
    s = Stand()
    yield s
    s.server.shutdown()
    s.server.server_close()


def hook(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hivestream", "hook", *args], input=stdin, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)


PROMPT = {"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}


def test_posts_stamped_payload_with_token_and_nothing_on_stdout(stand: Stand, tmp_path: Path) -> None:
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_INGEST_TOKEN": "tok-123", "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    r = hook(["claude-code"], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stdout == ""
    path, auth, body = stand.seen[0]
    assert path == "/v1/hooks/claude-code" and auth == "Bearer tok-123"
    sent = json.loads(body)
    assert sent["prompt"] == "hi" and isinstance(sent["event_time_ms"], int)


def test_failures_spool_then_the_next_call_and_flush_forward(stand: Stand, tmp_path: Path) -> None:
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    stand.status = 503
    for i in range(3):
        assert hook(["codex"], env, json.dumps({**PROMPT, "prompt": f"p{i}"})).returncode == 0
    assert len(list(tmp_path.glob("*.hook"))) == 3
    first_bodies = [b for _p, _a, b in stand.seen]
    stand.status, stand.seen = 200, []
    assert hook(["codex", "--flush-max", "2"], env, json.dumps({**PROMPT, "prompt": "p3"})).returncode == 0
    assert len(list(tmp_path.glob("*.hook"))) == 1  # the live one plus two spooled, oldest first
    assert [b for _p, _a, b in stand.seen[1:]] == first_bodies[:2]  # retried byte for byte: the same events
    r = hook(["flush"], env)
    assert r.returncode == 0 and "forwarded 1, 0 left" in r.stderr
    assert stand.seen[-1][2] == first_bodies[2]


def test_server_down_exits_zero_within_the_timeout(tmp_path: Path) -> None:
    env = {"HIVESTREAM_INGEST_URL": "http://127.0.0.1:9", "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    t0 = time.monotonic()
    r = hook(["claude-code", "--timeout", "1"], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stdout == "" and time.monotonic() - t0 < 10
    assert len(list(tmp_path.glob("*.hook"))) == 1
    r = hook(["flush", "--timeout", "1"], env)
    assert r.returncode == 1 and "0 left" not in r.stderr


def test_final_rejections_are_not_kept_and_413_is_set_aside(stand: Stand, tmp_path: Path) -> None:
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    stand.status, stand.answer = 422, b'{"error": "unknown_payload", "dead_lettered": 1, "truncated": false}'  # the server's verdict
    assert hook(["claude-code"], env, json.dumps(PROMPT)).returncode == 0
    assert not list(tmp_path.glob("*.hook"))
    stand.status = 413
    r = hook(["claude-code"], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stdout == "" and "413" in r.stderr and "rejected" in r.stderr
    assert len(list((tmp_path / "rejected").glob("*.hook"))) == 1 and not list(tmp_path.glob("*.hook"))


def test_a_spool_path_that_is_a_file_falls_back_to_the_temp_spool(tmp_path: Path) -> None:
    blocked = tmp_path / "spool"
    blocked.write_text("not a directory")
    fallback = tmp_path / "tmp" / f"hivestream-hook-spool-{os.getuid()}"
    env = {"HIVESTREAM_INGEST_URL": "http://127.0.0.1:9", "HIVESTREAM_SPOOL_DIR": str(blocked), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    r = hook(["claude-code", "--timeout", "1"], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stdout == ""
    assert str(fallback) in r.stderr
    assert len(list(fallback.glob("*.hook"))) == 1  # kept, not lost


def test_codex_notify_takes_the_last_argument_and_runs_the_chained_program(stand: Stand, tmp_path: Path) -> None:
    out = tmp_path / "chained.txt"
    chain = json.dumps(["sh", "-c", f'printf %s "$1" > {out}', "notify"])
    note = {"type": "agent-turn-complete", "thread-id": "t1", "turn-id": "u1", "last-assistant-message": "done"}
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    r = hook(["codex-notify", "--chain", chain, json.dumps(note)], env)
    assert r.returncode == 0 and r.stdout == ""
    assert stand.seen[0][0] == "/v1/hooks/codex-notify" and json.loads(stand.seen[0][2])["thread-id"] == "t1"
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert json.loads(out.read_text()) == note


HEAVY_AT_START = {"dataclasses", "inspect", "socket", "selectors", "threading", "encodings.idna", "hivestream.ingest.spool",
                  "typer", "duckdb", "pydantic", "http.client"}
"""Modules the hook's start must not import (each costs milliseconds per hook firing; bench/bench_serve.py's hook wall time)."""


def test_the_hook_start_imports_none_of_the_costly_modules(stand: Stand, tmp_path: Path) -> None:
    # the console script's fast path (argv[0] named hivestream), a payload posted to a server that accepts it
    code = ("import json, sys\nsys.argv = ['/venv/bin/hivestream', 'hook', 'claude-code']\ntry:\n    import hivestream.cli.app\n"
            "except SystemExit:\n    pass\nprint(json.dumps(sorted(sys.modules)))\n")
    env = {**os.environ, "HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path / "spool")}
    r = subprocess.run([sys.executable, "-c", code], input=json.dumps({"hook_event_name": "Stop", "session_id": "s"}), env=env,
                       capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(stand.seen) == 1 and stand.seen[0][0] == "/v1/hooks/claude-code"
    assert HEAVY_AT_START & set(json.loads(r.stdout.splitlines()[-1])) == set()


@pytest.mark.parametrize("timeout", ["inf", "1e400", "nan", "0", "-1", "abc"])
def test_a_timeout_that_cannot_work_is_the_default(timeout: str, stand: Stand, tmp_path: Path) -> None:
    """``--timeout inf`` added an ``OverflowError`` line to the hook's one line; ``0`` made the socket
    non-blocking. Such values are the default 2 s: a reachable server gets the payload and nothing is
    printed; an unreachable one gets the usual single line, and the payload is spooled."""
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path / "up")}
    r = hook(["claude-code", "--timeout", timeout, "--flush-max", "nan"], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr
    assert len(stand.seen) == 1 and json.loads(stand.seen[0][2])["prompt"] == "hi"
    down = {"HIVESTREAM_INGEST_URL": "http://127.0.0.1:1", "HIVESTREAM_SPOOL_DIR": str(tmp_path / "down")}
    r = hook(["claude-code", "--timeout", timeout], down, json.dumps(PROMPT))
    lines = r.stderr.splitlines()
    assert r.returncode == 0 and r.stdout == "" and len(lines) == 1 and "not delivered" in lines[0], r.stderr
    assert len(list((tmp_path / "down").iterdir())) == 1


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_verdict_with_context_is_printed_as_hook_output(runtime: str, stand: Stand, tmp_path: Path) -> None:
    """A 2xx verdict carrying ``additional_context`` (a prompt's matched memory stubs) is the one thing the hook prints."""
    ctx = '<hivestream-stubs trust="untrusted">Board id 5f2a</hivestream-stubs>'
    stand.answer = json.dumps({"accepted": 1, "rejected": 0, "dead_lettered": 0, "durable": "log", "additional_context": ctx}).encode()
    env = {"HIVESTREAM_INGEST_URL": stand.url, "HIVESTREAM_SPOOL_DIR": str(tmp_path)}
    r = hook([runtime], env, json.dumps(PROMPT))
    assert r.returncode == 0 and r.stderr == ""
    assert json.loads(r.stdout) == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": ctx}}
    # an event that takes no context, or a verdict without one: nothing on stdout
    r = hook([runtime], env, json.dumps(PROMPT | {"hook_event_name": "Stop"}))
    assert r.stdout == ""
    stand.answer = ACCEPTED
    assert hook([runtime], env, json.dumps(PROMPT)).stdout == ""
