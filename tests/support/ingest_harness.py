"""Helpers for the live-ingestion tests: the ingest server as a process, native payloads rebuilt
from the corpus, reading a topic back, and frames computed from records."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from hivestream.embedded.frames import run_files
from streams.importers.files import import_file
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent
from tests.support.kafka_harness import frame_tables

REPO_ROOT = Path(__file__).resolve().parents[2]
_BODY_FIELD = {"UserPromptSubmit": "prompt", "Stop": "last_assistant_message", "SubagentStop": "last_assistant_message"}


class IngestProc:
    """``hivestream ingest`` as a child process on a free loopback port."""

    def __init__(self, bootstrap: str, namespace: str, spool: Path, *extra: str, tokens: Path | None = None, log: Path | None = None,
                 port: int = 0) -> None:
        args = [sys.executable, "-m", "hivestream", "ingest", "--port", str(port), "--bootstrap", bootstrap, "--namespace", namespace,
                "--spool-dir", str(spool), "--partitions", "4", *extra]
        if tokens is not None:
            args += ["--tokens-file", str(tokens)]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("HIVESTREAM_INGEST_TOKENS_FILE", None)
        self.log = log
        self.lines: list[str] = []
        self.proc = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self._ready = threading.Event()
        self.port = 0
        threading.Thread(target=self._pump, daemon=True).start()
        if not self._ready.wait(60):
            self.kill()
            raise RuntimeError("ingest did not start:\n" + "".join(self.lines[-30:]))

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"hivestream ingest: listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self._ready.set()
        self._ready.set()

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (graceful), then SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    """Every record of ``topic`` as ``(partition, key, value)``, partition by partition."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        if not tps:
            return []
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, recs in c.poll(timeout_ms=1000).items():
                out.extend((tp.partition, r.key or b"", r.value or b"") for r in recs)
        return out
    finally:
        c.close()


def native_payload(ev: HookEvent) -> tuple[str, dict[str, Any]] | None:
    """The payload the runtime's hook would have sent for an imported event, with its time
    (``event_time_ms``), and the ingest route for it; ``None`` for events no hook sends."""
    raw = dict(ev.raw or {})
    if ev.source == "openclaw" and ev.native_event in {"message:received", "message:sent"}:
        ctx = dict(raw.get("context") or {})
        ctx["content"] = ev.body
        return "openclaw", {**raw, "context": ctx, "timestamp": ev.event_time_ms}
    if ev.source in {"claude-code", "codex"} and "hook_event_name" in raw and "session_id" in raw:
        name = raw["hook_event_name"]
        if name in _BODY_FIELD and ev.body is not None:
            raw[_BODY_FIELD[name]] = ev.body
        raw["event_time_ms"] = ev.event_time_ms
        return ev.source, raw
    return None


def corpus_payloads(paths: list[Path]) -> list[tuple[str, dict[str, Any]]]:
    """Native payloads of every event the importers find in ``paths`` (with the gateway capture)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for p in paths:
        _fmt, items = import_file(p, gateway=True)
        for _o, _r, ev in items:
            if isinstance(ev, RejectedInput):
                continue
            np = native_payload(ev)
            if np is not None:
                out.append(np)
    return out


def frames_of(lines: list[bytes], work: Path, name: str) -> dict[str, Any]:
    """The frames and captures the embedded runner makes of JSONL ``lines`` (hook payloads or
    serialised events), in a fresh DuckDB file under ``work``."""
    src = work / f"{name}.jsonl"
    src.write_bytes(b"".join(ln + b"\n" for ln in lines))
    db = work / f"{name}.duckdb"
    run_files([src], db)
    return frame_tables(db)


def payload_lines(payloads: list[tuple[str, dict[str, Any]]]) -> list[bytes]:
    """JSONL lines of the payloads (what a hook-event log file of them holds)."""
    return [json.dumps(p, ensure_ascii=False).encode() for _rt, p in payloads]


class StoppableBroker:
    """A broker of our own (``deploy/kafka/kafka.sh`` in a temporary state dir) that a test may
    stop and start again on the same port with its data kept."""

    def __init__(self, state_dir: Path) -> None:
        from tests.support.kafka_broker import _pick_port

        self.state_dir = state_dir
        self.port = _pick_port() if os.environ.get("HIVESTREAM_KAFKA_PORT") is None else int(os.environ["HIVESTREAM_KAFKA_PORT"]) + 7
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _run(self, command: str) -> None:
        from tests.support.kafka_broker import KAFKA_SH, broker_script_env

        env = broker_script_env(HIVESTREAM_KAFKA_HOME=str(self.state_dir), HIVESTREAM_KAFKA_PORT=str(self.port))
        r = subprocess.run(["bash", str(KAFKA_SH), command], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"kafka.sh {command} failed: {r.stderr[-2000:]}")

    def start(self) -> None:
        """Start (or restart) the broker and wait until it answers."""
        self._run("start")

    def stop(self) -> None:
        """Stop the broker (its data stays)."""
        self._run("stop")
