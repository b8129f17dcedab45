"""The ingest API served by ``hivestream serve`` (the same routes, tokens, limits and answers as
``ingest``, over the local log): tokens, the gateway stamp, per-payload answers with their dead
letters in DuckDB, the body and time limits, unknown runtimes, ``/healthz`` and ``/metrics``."""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from hivestream.hooks.config import MARK_HEADER
from hivestream.hooks.delivery import Verdict, verdict_of
from streams.model.events import HookEvent
from tests.support.hook_stand import hook
from tests.support.serve_harness import ServeProc

TOK_A = "serve-token-of-gateway-a-0123456789"
TOK_B = "serve-token-of-gateway-b-0123456789"
PROMPT = {"session_id": "sec-1", "hook_event_name": "UserPromptSubmit", "prompt": "who am I?", "event_time_ms": 1_790_000_000_000}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProc]:
    work = tmp_path_factory.mktemp("serve-http")
    tokens = work / "tokens"
    tokens.write_text(f"gw-a {TOK_A}\ngw-b sha256:{hashlib.sha256(TOK_B.encode()).hexdigest()}\n")
    proc = ServeProc(work / "memory.duckdb", "--tokens-file", str(tokens), "--max-body-bytes", "65536", "--read-timeout", "1",
                     "--no-report", "--snapshot-every", "0.2")
    try:
        yield proc
    finally:
        assert proc.stop() == 0
        assert TOK_A not in proc.text() and TOK_B not in proc.text(), "a token was logged"


def _post(proc: ServeProc, runtime: str, body: bytes | str, token: str | None = TOK_A) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{proc.url}/v1/hooks/{runtime}", content=body, headers=headers, timeout=30)


def _rows(proc: ServeProc, sql: str) -> list[tuple[Any, ...]]:
    """``sql`` on the snapshot once the loop has applied everything and published it."""
    n = proc.wait_applied()
    snap = Path(f"{proc.db}.snapshot")
    deadline = time.monotonic() + 30
    while True:
        con = duckdb.connect(str(snap), read_only=True)
        try:
            covered = json.loads(con.execute("SELECT positions FROM snapshot_info").fetchone()[0])  # type: ignore[index]
            if (covered and covered[0][2] >= n) or time.monotonic() > deadline:
                return con.execute(sql).fetchall()
        finally:
            con.close()
        time.sleep(0.2)


def _log_values(proc: ServeProc) -> list[bytes]:
    from streams.ingest.hook_log import HOOK_EVENTS, read_chunks

    return [r.value for chunk in read_chunks(Path(f"{proc.db}.hook-events")) for r in chunk if r.kind == HOOK_EVENTS]


def test_no_or_wrong_token_is_401_and_nothing_is_written(served: ServeProc) -> None:
    marker = {**PROMPT, "prompt": "unauthorised attempt"}
    for token in (None, "wrong-token-wrong-token-wrong", TOK_A[:-1]):
        r = _post(served, "claude-code", json.dumps(marker), token)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized" and "Bearer" in r.headers["WWW-Authenticate"]
    assert _post(served, "claude-code", json.dumps(PROMPT), TOK_A).status_code == 200
    assert not any(b"unauthorised attempt" in v for v in _log_values(served))


def test_the_gateway_is_the_tokens_whatever_the_payload_says(served: ServeProc) -> None:
    spoof = {**PROMPT, "prompt": "spoofed", "gateway": "gw-a", "received_at_ms": 1}
    r = _post(served, "auto", json.dumps(spoof), TOK_B)
    assert r.status_code == 200 and r.json()["gateway"] == "gw-b" and r.json()["durable"] == "log"
    ev = next(HookEvent.model_validate_json(v) for v in _log_values(served) if b'"spoofed"' in v)
    assert ev.gateway == "gw-b" and ev.received_at_ms == r.json()["received_at_ms"] != 1


def test_per_payload_answers_and_their_dead_letters_in_duckdb(served: ServeProc) -> None:
    r = _post(served, "auto", json.dumps([{**PROMPT, "prompt": "mixed batch ok"}, {"foo": 1}, 42]))
    got = r.json()
    assert r.status_code == 200 and got["accepted"] == 1 and got["rejected"] == 2
    assert [(x["index"], x["status"], x.get("reason")) for x in got["results"]] == [
        (0, "accepted", None), (1, "rejected", "unknown_payload"), (2, "rejected", "wrong_shape")]
    assert _post(served, "codex", json.dumps([{"foo": 2}])).status_code == 422
    nj = _post(served, "openclaw", b"this is not json at all")
    assert nj.status_code == 400 and nj.json()["error"] == "malformed_json"
    dls = [(i.rsplit(":", 1)[0], r, o) for i, r, o in _rows(served, "SELECT input, reason, original FROM dead_letters")]  # input: route:request id
    assert ("ingest:gw-a:codex", "missing_field", b'{"foo":2}') in dls
    assert ("ingest:gw-a:openclaw", "malformed_json", b"this is not json at all") in dls
    assert any(r[1] == "wrong_shape" for r in dls)
    assert _rows(served, "SELECT count(*) FROM frames WHERE content LIKE '%mixed batch ok'") == [(1,)]


def test_limits_body_size_slow_clients_nesting_and_unknown_runtimes(served: ServeProc) -> None:
    big = json.dumps({**PROMPT, "prompt": "x" * 70_000}).encode()
    assert _post(served, "claude-code", big).status_code == 413

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]

    r = httpx.post(f"{served.url}/v1/hooks/claude-code", content=chunks(), headers={"Authorization": f"Bearer {TOK_A}"}, timeout=30)
    assert r.status_code == 413 and r.json()["error"] == "body_too_large"
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
        s.sendall(f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOK_A}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"session_id\"".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 408"), data[:100]
    nested: object = 1
    for _ in range(100):
        nested = [nested]
    deep = _post(served, "claude-code", json.dumps({**PROMPT, "x": nested}))
    assert deep.status_code == 422 and deep.json()["results"][0]["reason"] == "wrong_shape"
    assert _post(served, "cursor", json.dumps(PROMPT)).status_code == 404


def test_health_and_metrics(served: ServeProc) -> None:
    assert _post(served, "claude-code", json.dumps({**PROMPT, "prompt": "for the metrics"})).status_code == 200
    served.wait_applied()
    status, h = served.health()
    assert status == 200 and h["status"] == "ok" and h["pending"] == 0 and h["dedup"] == "ok" and h["db"] == served.db.name
    text = httpx.get(served.url + "/metrics", timeout=30).text
    for name in ("hivestream_ingest_accepted_total", 'hivestream_ingest_rejected_total{reason="unauthorized"}', "hivestream_ingest_requests_total",
                 "hivestream_serve_log_bytes", "hivestream_serve_applied_offset", "hivestream_serve_unapplied_records 0.0",
                 "hivestream_serve_apply_lag_seconds", "hivestream_serve_frames_total"):
        assert name in text, name


def test_a_runtimes_own_hook_gets_hook_output_and_hivestreams_clients_the_verdict(served: ServeProc, tmp_path: Path) -> None:
    as_installed = {"Authorization": f"Bearer {TOK_A}", MARK_HEADER: "installed by hivestream hooks install"}
    r = httpx.post(f"{served.url}/v1/hooks/claude-code", content=json.dumps({**PROMPT, "prompt": "answered as hook output"}),
                   headers=as_installed, timeout=30)
    assert r.status_code == 200 and r.content == b"{}"  # Claude Code: valid hook output, no key it would not know
    assert any(b"answered as hook output" in v for v in _log_values(served))  # stored all the same, before the answer
    refused = httpx.post(f"{served.url}/v1/hooks/claude-code", content=b'{"foo": 1}', headers=as_installed, timeout=30)
    assert refused.status_code == 422 and refused.json()["dead_lettered"] == 1  # a refusal keeps its status: Claude Code reads only that
    plain = _post(served, "claude-code", json.dumps({**PROMPT, "prompt": "answered with the verdict"}))
    assert plain.json()["accepted"] == 1 and verdict_of(plain.status_code, plain.content) is Verdict.DELIVERED
    spool = tmp_path / "spool"
    ran = hook(["claude-code", "--url", served.url, "--spool-dir", str(spool)], {"HIVESTREAM_INGEST_TOKEN": TOK_A},
               json.dumps({**PROMPT, "prompt": "posted by the command hook"}))
    assert ran.returncode == 0 and ran.stderr == "" and not (spool.exists() and any(spool.rglob("*.hook")))  # its verdict said stored
    assert any(b"posted by the command hook" in v for v in _log_values(served))
