"""A local HTTP stand-in for the ingest server (no broker) whose answers a test chooses per
request, for the command hook's and the OpenClaw handler's delivery tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ingest_harness import REPO_ROOT

Answer = Callable[[str, bytes], tuple[int, bytes]]


def verdict(n: int = 1, truncated: bool = False) -> bytes:
    """The server's JSON verdict on a dead-lettered body."""
    return json.dumps({"error": "malformed_json", "detail": "x", "dead_lettered": n, "truncated": truncated}).encode()


ACCEPTED = json.dumps({"accepted": 1, "rejected": 0, "dead_lettered": 0, "truncated": False, "durable": "broker"}).encode()
"""The server's own 2xx answer (what proves a payload stored)."""


class AnswerStand:
    """Answers every POST with ``answer(path, body)`` (default ``200`` with :data:`ACCEPTED`) and records
    ``(path, body)`` of each, in arrival order (thread-safe)."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda _p, _b: (200, ACCEPTED))
        self.seen: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        stand = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *_a: object) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with stand.lock:
                    stand.seen.append((self.path, body))
                status, out = stand.answer(self.path, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()


def hook(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``python -m hivestream hook ARGS`` with ``env`` added to the environment."""
    return subprocess.run([sys.executable, "-m", "hivestream", "hook", *args], input=stdin, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
