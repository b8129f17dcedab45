"""``hivestream ingest`` without a broker: two processes started with ``--reuse-port`` share one
port, each answering 200 only once a payload is in its own spool (found there after a kill -9);
SIGTERM stops a server at once even while its admin client is still trying to reach the broker."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import httpx
import pytest

from hivestream.ingest.spool import Spool
from tests.support.ingest_harness import IngestProc

pytestmark = pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="SO_REUSEPORT is Linux/BSD only")


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_servers_share_a_port_and_each_spools_what_it_accepted(tmp_path: Path) -> None:
    nowhere = f"127.0.0.1:{_dead_port()}"  # no broker there: every accepted payload goes to a spool
    a = IngestProc(nowhere, "reuse", tmp_path / "spool-a", "--reuse-port")
    b = IngestProc(nowhere, "reuse", tmp_path / "spool-b", "--reuse-port", port=a.port)
    try:
        assert a.port == b.port and a.proc.poll() is None and b.proc.poll() is None
        answers = []
        for i in range(40):  # new connections: the kernel spreads them over both listeners
            body = {"session_id": "rp", "hook_event_name": "UserPromptSubmit", "prompt": f"reuse {i}", "event_time_ms": 1_790_000_000_000 + i}
            with httpx.Client(timeout=30) as c:
                r = c.post(f"{a.url}/v1/hooks/claude-code", json=body)
            assert r.status_code == 200 and r.json()["durable"] == "spool", r.text
            answers.append(r.json()["results"][0]["event_id"])
        assert len(set(answers)) == 40
    finally:  # kill -9: a 200 promised the payload was fsync'd in that server's spool
        a.kill()
        b.kill()
    counts = [Spool(tmp_path / d).records for d in ("spool-a", "spool-b")]
    assert sum(counts) == 40, counts
    if sys.platform.startswith("linux"):
        assert all(c > 0 for c in counts), f"one listener took every connection: {counts}"


def test_sigterm_stops_a_server_whose_broker_is_unreachable(tmp_path: Path) -> None:
    proc = IngestProc(f"127.0.0.1:{_dead_port()}", "term", tmp_path / "spool")
    try:
        body = {"session_id": "t", "hook_event_name": "UserPromptSubmit", "prompt": "before the stop", "event_time_ms": 1_790_000_000_000}
        r = httpx.post(f"{proc.url}/v1/hooks/claude-code", json=body, timeout=30)
        assert r.status_code == 200 and r.json()["durable"] == "spool"
    finally:
        proc.stop()  # SIGTERM; SIGKILL only if it has not exited within 30 s
    assert proc.proc.returncode == 0, f"not a clean exit on SIGTERM: {proc.proc.returncode}"
    assert Spool(tmp_path / "spool").records == 1
