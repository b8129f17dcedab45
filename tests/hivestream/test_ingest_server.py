"""``hivestream ingest`` on the real broker: answers, security, bad input, and corpus payloads
posted live becoming the same frames as the same payloads imported from a file."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from streams.kafka.topics import Topics
from streams.model.deadletter import DeadLetter
from streams.model.events import HookEvent
from streams.produce.keys import hook_event_key
from tests.support.ingest_harness import REPO_ROOT, IngestProc, corpus_payloads, frames_of, payload_lines, read_topic
from tests.support.kafka_harness import unique_namespace, wait_until
from tests.support.session_sets import SessionSet

pytestmark = pytest.mark.kafka

TOK_A = "token-of-gateway-a-0123456789"
TOK_B = "token-of-gateway-b-0123456789"


@pytest.fixture(scope="module")
def server(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IngestProc, str, Topics]]:
    work = tmp_path_factory.mktemp("ingest")
    tokens = work / "tokens"
    tokens.write_text(f"gw-a {TOK_A}\ngw-b sha256:{__import__('hashlib').sha256(TOK_B.encode()).hexdigest()}\n")
    ns = unique_namespace("ingest")
    proc = IngestProc(kafka_bootstrap, ns, work / "spool", "--max-body-bytes", "65536", "--read-timeout", "1", tokens=tokens)
    try:
        wait_until(lambda: httpx.get(proc.url + "/healthz").json()["broker"] == "up", 60, "the producer to connect")
        yield proc, kafka_bootstrap, Topics(ns)
    finally:
        proc.stop()
        assert TOK_A not in "".join(proc.lines) and TOK_B not in "".join(proc.lines), "a token was logged"


def _post(proc: IngestProc, runtime: str, body: bytes | str, token: str | None = TOK_A, **kw: object) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{proc.url}/v1/hooks/{runtime}", content=body, headers=headers, timeout=30, **kw)  # type: ignore[arg-type]


PROMPT = {"session_id": "sec-1", "hook_event_name": "UserPromptSubmit", "prompt": "who am I?", "event_time_ms": 1_790_000_000_000}


def _events(bootstrap: str, topics: Topics) -> list[HookEvent]:
    return [HookEvent.model_validate_json(v) for _p, _k, v in read_topic(bootstrap, topics.hook_events)]


def _dead_letters(bootstrap: str, topics: Topics) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for _p, _k, v in read_topic(bootstrap, topics.dead_letter)]


def test_no_or_wrong_token_is_401_and_nothing_is_written(server: tuple[IngestProc, str, Topics]) -> None:
    proc, bootstrap, topics = server
    marker = {**PROMPT, "prompt": "unauthorised attempt"}
    for token in (None, "wrong-token-wrong-token-wrong", TOK_A[:-1]):
        r = _post(proc, "claude-code", json.dumps(marker), token)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized" and "Bearer" in r.headers["WWW-Authenticate"]
    assert _post(proc, "claude-code", json.dumps(PROMPT), TOK_A).status_code == 200
    assert all(e.body != "unauthorised attempt" for e in _events(bootstrap, topics))


def test_a_gateway_cannot_write_under_another_id(server: tuple[IngestProc, str, Topics]) -> None:
    proc, bootstrap, topics = server
    spoof = {**PROMPT, "prompt": "spoofed", "gateway": "gw-a", "hivestream_gateway": "gw-a", "received_at_ms": 1}
    r = _post(proc, "auto", json.dumps(spoof), TOK_B)
    assert r.status_code == 200 and r.json()["gateway"] == "gw-b"
    ev = next(e for e in _events(bootstrap, topics) if e.body == "spoofed")
    assert ev.gateway == "gw-b" and ev.received_at_ms == r.json()["received_at_ms"] != 1


def test_per_payload_answers_and_dead_letters(server: tuple[IngestProc, str, Topics]) -> None:
    proc, bootstrap, topics = server
    body = json.dumps([{**PROMPT, "prompt": "mixed batch ok"}, {"foo": 1}, 42]).encode()
    r = _post(proc, "auto", body)
    assert r.status_code == 200
    got = r.json()
    assert got["accepted"] == 1 and got["rejected"] == 2 and got["durable"] == "broker"
    assert [(x["index"], x["status"], x.get("reason")) for x in got["results"]] == [
        (0, "accepted", None), (1, "rejected", "unknown_payload"), (2, "rejected", "wrong_shape")]
    all_bad = _post(proc, "auto", json.dumps([{"foo": 2}]))
    assert all_bad.status_code == 422
    dls = _dead_letters(bootstrap, topics)
    assert {"unknown_payload", "wrong_shape"} <= {str(d.reason) for d in dls}
    assert any(d.original() == b'{"foo":2}' and d.source.startswith("ingest:gw-a:auto:") for d in dls)
    ev = next(e for e in _events(bootstrap, topics) if e.body == "mixed batch ok")
    rec = next(k for _p, k, v in read_topic(bootstrap, topics.hook_events) if HookEvent.model_validate_json(v).event_id == ev.event_id)
    assert rec == hook_event_key(ev)


def test_not_json_is_400_and_dead_lettered(server: tuple[IngestProc, str, Topics]) -> None:
    proc, bootstrap, topics = server
    r = _post(proc, "claude-code", b"this is not json at all")
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    assert any(d.original() == b"this is not json at all" and str(d.reason) == "malformed_json" for d in _dead_letters(bootstrap, topics))
    assert _post(proc, "claude-code", b"\xff\xfe\xfd").json()["error"] == "not_utf8"


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_body_its_content_encoding_cannot_decode_is_400_and_dead_lettered(server: tuple[IngestProc, str, Topics], encoding: str) -> None:
    proc, bootstrap, topics = server
    r = httpx.post(f"{proc.url}/v1/hooks/auto", content=json.dumps(PROMPT).encode(), timeout=30,  # plain JSON labelled compressed
                   headers={"Authorization": f"Bearer {TOK_A}", "Content-Encoding": encoding})
    assert r.status_code == 400 and r.json()["error"] == "bad_encoding", r.text
    assert encoding in r.json()["detail"]
    assert any(str(d.reason) == "bad_encoding" and encoding in d.detail for d in _dead_letters(bootstrap, topics))
    assert _post(proc, "claude-code", json.dumps(PROMPT)).status_code == 200  # the server goes on


def test_an_unsupported_content_encoding_is_a_4xx_and_the_server_goes_on(server: tuple[IngestProc, str, Topics]) -> None:
    proc, _bootstrap, _topics = server
    r = httpx.post(f"{proc.url}/v1/hooks/auto", content=b"\x00\x01", timeout=30, headers={"Authorization": f"Bearer {TOK_A}", "Content-Encoding": "br"})
    assert 400 <= r.status_code < 500
    assert _post(proc, "claude-code", json.dumps(PROMPT)).status_code == 200


def test_deep_nesting_is_rejected(server: tuple[IngestProc, str, Topics]) -> None:
    proc, _b, _t = server
    nested: object = 1
    for _ in range(100):
        nested = [nested]
    r = _post(proc, "claude-code", json.dumps({**PROMPT, "x": nested}))
    assert r.status_code == 422 and r.json()["results"][0]["reason"] == "wrong_shape"
    very = b"[" * 60_000 + b"]" * 60_000  # past the JSON parser's recursion limit, under the body limit
    assert _post(proc, "auto", very).status_code in (400, 413)
    assert httpx.get(proc.url + "/healthz").status_code == 200


def test_body_over_the_limit_is_413_with_or_without_length(server: tuple[IngestProc, str, Topics]) -> None:
    proc, _b, _t = server
    big = json.dumps({**PROMPT, "prompt": "x" * 70_000}).encode()
    assert _post(proc, "claude-code", big).status_code == 413

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 8192):
            yield big[i:i + 8192]

    r = _post(proc, "claude-code", chunks())  # chunked: no Content-Length
    assert r.status_code == 413 and r.json()["error"] == "body_too_large"


def test_a_slow_client_is_timed_out(server: tuple[IngestProc, str, Topics]) -> None:
    proc, _b, _t = server
    with socket.create_connection(("127.0.0.1", proc.port), timeout=10) as s:
        s.sendall(f"POST /v1/hooks/claude-code HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOK_A}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"session_id\"".encode())
        t0 = time.monotonic()
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 408"), data[:100]
    assert time.monotonic() - t0 < 9  # answered by the server's read timeout, not by this socket's


def test_unknown_runtime_is_404_and_metrics_and_health_answer(server: tuple[IngestProc, str, Topics]) -> None:
    proc, _b, _t = server
    assert _post(proc, "cursor", json.dumps(PROMPT)).status_code == 404
    health = httpx.get(proc.url + "/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    text = httpx.get(proc.url + "/metrics").text
    for name in ("hivestream_ingest_accepted_total", "hivestream_ingest_rejected_total{reason=\"unauthorized\"}",
                 "hivestream_ingest_spooled_records", "hivestream_ingest_spool_bytes", "hivestream_ingest_forward_lag_seconds",
                 "hivestream_ingest_produce_latency_seconds_bucket"):
        assert name in text, name


def test_a_public_bind_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "hivestream", "ingest", "--host", "0.0.0.0", "--port", "0", "--spool-dir", str(tmp_path / "s")],
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, env={**__import__("os").environ, "HIVESTREAM_INGEST_TOKENS_FILE": ""})
    assert r.returncode == 2 and "refusing to listen on 0.0.0.0" in r.stderr


def test_session_payloads_posted_live_become_the_same_frames_as_the_file(server: tuple[IngestProc, str, Topics], sessions: SessionSet,
                                                                        tmp_path: Path) -> None:
    proc, bootstrap, topics = server
    files = [*sessions.claude_files(), *sessions.codex_files()]
    payloads = corpus_payloads(files)
    runtimes = {rt for rt, _p in payloads}
    assert {"claude-code", "codex", "openclaw"} <= runtimes
    notify = [("codex-notify", {"type": "agent-turn-complete", "thread-id": p["session_id"], "turn-id": p.get("turn_id"),
                                "last-assistant-message": p["last_assistant_message"], "event_time_ms": p["event_time_ms"] + 1})
              for rt, p in payloads if rt == "codex" and p.get("hook_event_name") == "Stop" and p.get("last_assistant_message")][:5]
    payloads += notify
    ids: list[str] = []
    i = 0
    while i < len(payloads):  # mixed: single posts on the runtime's route, batches as arrays and NDJSON on auto
        rt, p = payloads[i]
        if i % 3 == 0:
            r, n = _post(proc, rt, json.dumps(p)), 1
        elif i % 3 == 1:
            r, n = _post(proc, "auto", json.dumps([q for _rt, q in payloads[i:i + 40]])), len(payloads[i:i + 40])
        else:
            r, n = _post(proc, "auto", "\n".join(json.dumps(q) for _rt, q in payloads[i:i + 25])), len(payloads[i:i + 25])
        assert r.status_code == 200, r.text[:500]
        assert r.json()["rejected"] == 0, r.text[:500]
        ids += [x["event_id"] for x in r.json()["results"]]
        i += n
    assert len(ids) == len(payloads)
    by_id = {}
    for _p, key, value in read_topic(bootstrap, topics.hook_events):
        ev = HookEvent.model_validate_json(value)
        assert key == hook_event_key(ev)
        by_id[ev.event_id] = value
    assert set(ids) <= set(by_id)
    assert all(HookEvent.model_validate_json(by_id[x]).gateway == "gw-a" for x in ids)
    live = frames_of([by_id[x] for x in ids], tmp_path, "live")
    imported = frames_of(payload_lines(payloads), tmp_path, "file")
    assert live == imported
    assert len(live["frames"]) > 50 and any(len(r[-1]) > 1 for r in live["frames"])  # real frames, some collapsed across sources

