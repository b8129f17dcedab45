"""Helpers for the ``hivestream serve`` tests: the server as a child process, waiting until its dedup
loop has applied the log, every table of a DuckDB file as comparable rows, payloads."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


class ServeProc:
    """``hivestream serve`` as a child process on a free loopback port (or ``port``).

    Args:
        db: the DuckDB file.
        extra: more command-line options.
        port: the port (0: a free one).
        expect_ready: wait for the listening line (False: a start that is meant to fail).
        preexec: run in the child before exec (e.g. a resource limit).
    """

    def __init__(self, db: Path, *extra: str, port: int = 0, expect_ready: bool = True, env: dict[str, str] | None = None,
                 preexec: Callable[[], None] | None = None) -> None:
        args = [sys.executable, "-m", "hivestream", "serve", "--db", str(db), "--port", str(port), *extra]
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        full_env.pop("HIVESTREAM_INGEST_TOKENS_FILE", None)
        self.db = db
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, cwd=REPO_ROOT, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=preexec)
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._pump, daemon=True).start()
        if expect_ready and (not self._ready.wait(90) or self.port == 0):
            self.kill()
            raise RuntimeError("serve did not start:\n" + "".join(self.lines[-30:]))

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"hivestream serve: listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if self.port and line.startswith("  report:"):  # the last line of the start message
                self._ready.set()
        self._ready.set()

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def health(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of ``GET /healthz``."""
        r = httpx.get(self.url + "/healthz", timeout=30)
        body: dict[str, Any] = r.json()
        return r.status_code, body

    def wait_applied(self, timeout_s: float = 120) -> int:
        """Wait until the dedup loop has applied every record of the log; the log's record count.

        Raises:
            TimeoutError: when it has not caught up within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            _s, h = self.health()
            if h["pending"] == 0 and h["applied"] == h["log_records"]:
                return int(h["log_records"])
            if time.monotonic() > deadline:
                raise TimeoutError(f"serve has not applied its log after {timeout_s:.0f} s: {h}")
            time.sleep(0.2)

    def text(self) -> str:
        """Everything it wrote to stderr so far."""
        return "".join(self.lines)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM (graceful), then SIGKILL after 60 s; the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.wait()


SNAPSHOT_TABLES = {"snapshot_info"}


def all_tables(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of ``db`` as its rows in a stable order (``ORDER BY ALL``)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        names = sorted(r[0] for r in con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall())
        return {t: con.execute(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for t in names if t not in SNAPSHOT_TABLES}
    finally:
        con.close()


def hivestream(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``hivestream ARGS`` (exit code not checked)."""
    return subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def prompt(tag: str, i: int, *, session: str | None = None, t0: int = 1_790_000_000_000) -> dict[str, Any]:
    """A Claude Code ``UserPromptSubmit`` payload with its own time and a unique prompt."""
    return {"session_id": session or f"serve-{tag}-{i % 13}", "hook_event_name": "UserPromptSubmit", "cwd": "/w/serve",
            "prompt": f"{tag} prompt number {i}: keep the memory current", "event_time_ms": t0 + i * 1000}


def gateway_echo(tag: str, i: int, *, t0: int = 1_790_000_000_000) -> dict[str, Any]:
    """The OpenClaw gateway's capture of :func:`prompt` ``(tag, i)`` 250 ms earlier (a duplicate of it)."""
    return {"type": "message", "action": "received", "sessionKey": f"gw-{tag}", "timestamp": t0 + i * 1000 - 250,
            "context": {"channelId": f"gw-{tag}", "from": "user", "content": f"{tag} prompt number {i}: keep the memory current"}}
