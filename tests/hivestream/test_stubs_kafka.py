"""Memory stubs live on the Kafka path: ``hivestream ingest`` follows ``stub-events`` and matches prompts at the front door.

Before the stub topic exists a prompt gets nothing and nothing is recorded; once stubs are produced
(``stubs topics``, ``stubs produce``), a matching Claude Code prompt posted to ingest is answered with
the archive's text in ``additionalContext``, a non-matching one and a subagent's with nothing, and the
match route answers the OpenClaw plugin; the door's ``message-embedded`` and ``stub-matched`` events
land on ``stub-events`` keyed by channel, and the tables ``stubs worker`` and ``stubs project`` make
equal ``stubs run`` over the same events; with no broker at all ingest answers at once, spools, and says why
in one line; ``serve`` given the same stubs and hook prompts answers the same
and records the same rows for them. Prompts are embedded by the local OpenAI-compatible fake."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka.errors import KafkaError

from streams.kafka.topics import Topics, partition_for
from streams.stubs.events import StubUpserted, encode_embedding
from tests.support.embeddings_fake import EmbeddingsFake, bag_of_words
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_harness import REPO_ROOT, group_lag, stop, unique_namespace, wait_until
from tests.support.serve_harness import ServeProc
from tests.support.stub_kafka_scenario import stub_tables

ARCHIVED = "Board id 5f2a; weekday lists Mon..Fri."
GLOBAL = "Staging deploys need the release checklist."
T0 = 1_780_000_000_000
HOOK_PROMPTS: list[tuple[int, str, dict[str, object]]] = [
    (1, "trello board ids and weekday lists please", {}),
    (2, "what is two plus two", {}),
    (3, "trello board ids and weekday lists please", {"agent_id": "sub-1"}),
    (4, "the staging deploy release checklist", {}),
]


def _cli(bootstrap: str, *args: str) -> str:
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    r = subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _post(url: str, path: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _prompt(url: str, text: str, n: int, **extra: object) -> str | None:
    """A Claude Code ``UserPromptSubmit`` posted as Claude Code's http hook posts it; the ``additionalContext`` it is answered with."""
    payload = {"hook_event_name": "UserPromptSubmit", "session_id": "sess-k", "cwd": "/w/shop", "prompt": text, "prompt_id": f"p{n}",
               "event_time_ms": T0 + n * 1000, **extra}
    status, out = _post(url, "/v1/hooks/claude-code", payload, {"X-Hivestream-Hook": "1"})
    assert status == 200, out
    hso = out.get("hookSpecificOutput")
    return None if hso is None else str(hso.get("additionalContext"))


def _health(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/healthz", timeout=10) as r:
        stubs: dict[str, Any] = json.loads(r.read())["stubs"]
        return stubs


@pytest.mark.kafka
def test_ingest_matches_prompts_against_the_stubs_of_the_topic(kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = unique_namespace("stublive")
    t = Topics(ns)
    archive, global_archive = tmp_path / "trello-api.md", tmp_path / "deploys.md"
    archive.write_text(f"## Trello API\n{ARCHIVED}\n", encoding="utf-8")
    global_archive.write_text(f"## Deploys\n{GLOBAL}\n", encoding="utf-8")
    stubs = [StubUpserted(event_id=f"u{i}", event_time_ms=T0 - 1000, stub_id=1, channel=channel, title=title, stub_text=text,
                          archive_path=str(path), archive_tokens=20, embedding_b64=encode_embedding(bag_of_words(text, 64)), model="fake-bow",
                          dim=64, refresh_source="file-watch")
             for i, (channel, title, text, path) in enumerate([("shop", "Trello API", "trello board ids weekday lists", archive),
                                                                (None, "Deploys", "staging deploy release checklist", global_archive)])]
    stub_log = tmp_path / "stubs.jsonl"
    stub_log.write_text("".join(s.model_dump_json() + "\n" for s in stubs), encoding="utf-8")

    with EmbeddingsFake(dim=64) as fake:
        monkeypatch.setenv("HIVESTREAM_EMBED_URL", fake.base_url)
        monkeypatch.setenv("HIVESTREAM_EMBED_MODEL", "fake-bow")
        ingest = IngestProc(kafka_bootstrap, ns, tmp_path / "spool")
        worker = None
        try:
            # no stub topic yet: the prompt goes on without context, nothing recorded, one line said
            assert _prompt(ingest.url, "trello board ids and weekday lists please", 0) is None
            wait_until(lambda: _health(ingest.url)["follower"]["state"] == "no topic", 60, "the follower to find no topic")
            assert sum("no topic" in line for line in ingest.lines) == 1, ingest.lines

            assert "4 partitions" in _cli(kafka_bootstrap, "stubs", "topics", "--namespace", ns, "--partitions", "4")
            _cli(kafka_bootstrap, "stubs", "produce", str(stub_log), "--namespace", ns)
            wait_until(lambda: _health(ingest.url)["follower"]["live"] == 2, 60, "ingest to follow both stubs")

            answers = {n: _prompt(ingest.url, text, n, **extra) for n, text, extra in HOOK_PROMPTS}
            assert answers[1] is not None and ARCHIVED in answers[1] and 'stub="shop#1"' in answers[1] and GLOBAL not in answers[1]
            assert answers[2] is None and answers[3] is None  # nothing alike; a subagent's prompt
            assert answers[4] is not None and answers[4].count(GLOBAL) == 1 and ARCHIVED not in answers[4]  # the global stub, broadcast, once
            status, answer = _post(ingest.url, "/api/stubs/match", {"prompt": "trello board ids weekday lists", "channel": "shop", "message_id": "oc-1"})
            assert status == 200 and str(answer["prependContext"]).count(ARCHIVED) == 1
            status, answer = _post(ingest.url, "/api/stubs/match", {"prompt": "nothing alike here", "channel": "shop", "message_id": "oc-2"})
            assert (status, answer["prependContext"]) == (200, "")
            health = _health(ingest.url)
            assert (health["prompts"], health["injected"], health["failed_open"]) == (7, 3, {})

            # the door's events are on stub-events, keyed and partitioned by channel
            produced = {line.encode() for line in stub_log.read_text().splitlines()}
            door = [(p, k, v) for p, k, v in read_topic(kafka_bootstrap, t.stub_events) if v not in produced]
            kinds = [json.loads(v)["type"] for _p, _k, v in door]
            assert kinds.count("message-embedded") == 5 and kinds.count("stub-matched") == 3, kinds
            assert all(k == b"shop" and p == partition_for(b"shop", 4) for p, k, _v in door)

            # the stub worker and projector fold them as `stubs run` does over the same events
            reference = tmp_path / "reference.jsonl"
            reference.write_bytes(stub_log.read_bytes() + b"".join(v + b"\n" for _p, _k, v in door))
            _cli(kafka_bootstrap, "stubs", "run", str(reference), "--db", str(tmp_path / "embedded.duckdb"))
            env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
            with (tmp_path / "worker.log").open("ab") as out:
                worker = subprocess.Popen([sys.executable, "-m", "hivestream", "stubs", "worker", "--namespace", ns, "--data-dir", str(tmp_path / "w")],
                                          cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

            def caught_up() -> bool:
                try:
                    return group_lag(kafka_bootstrap, f"{ns}-stubs", [t.stub_events]) == 0
                except KafkaError:
                    return False

            wait_until(caught_up, 240, "the stub worker to catch up")
        finally:
            if worker is not None:
                stop(worker)
            ingest.stop()

        # serve, given the same stubs and the same hook prompts, answers the same and records the same
        served = tmp_path / "serve.duckdb"
        proc = ServeProc(served, "--no-report", "--stub-refresh-at", "off")
        try:
            review = json.loads(Path(f"{served}.serve").read_text())["ingest"]["review_token"]
            req = urllib.request.Request(f"{proc.url}/v1/stub-events", data=stub_log.read_bytes(),
                                         headers={"Content-Type": "application/x-ndjson", "Authorization": f"Bearer {review}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                assert r.status == 200
            proc.wait_applied()
            assert {n: _prompt(proc.url, text, n, **extra) for n, text, extra in HOOK_PROMPTS} == answers
            proc.wait_applied()
        finally:
            assert proc.stop() == 0
    _cli(kafka_bootstrap, "stubs", "project", "--db", str(tmp_path / "kafka.duckdb"), "--namespace", ns, "--until-caught-up")
    want, got_tables = stub_tables(tmp_path / "embedded.duckdb"), stub_tables(tmp_path / "kafka.duckdb")
    assert len(want["stub_matches"]) == 3 and len(want["stub_messages"]) == 5
    for table in want:
        assert got_tables[table] == want[table], table
    hooks = {f"p{n}" for n, _t, _e in HOOK_PROMPTS}
    by_serve = stub_tables(served)
    for table in ("stub_messages", "stub_matches"):  # the hook prompts' rows (the match route's carry the time they arrived)
        mine = [r for r in got_tables[table] if hooks & set(map(str, r))]
        assert mine and [r for r in by_serve[table] if hooks & set(map(str, r))] == mine, table


def test_without_a_broker_ingest_answers_at_once_and_says_why_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with EmbeddingsFake(dim=64) as fake:
        monkeypatch.setenv("HIVESTREAM_EMBED_URL", fake.base_url)
        monkeypatch.setenv("HIVESTREAM_EMBED_MODEL", "fake-bow")
        ingest = IngestProc(f"127.0.0.1:{port}", unique_namespace("nobroker"), tmp_path / "spool")
        try:
            wait_until(lambda: _health(ingest.url)["follower"]["state"] == "broker unreachable", 60, "the follower to give up a first time")
            assert _prompt(ingest.url, "trello board ids and weekday lists please", 1) is None
            time.sleep(6)  # past a retry
            assert _health(ingest.url)["follower"]["state"] == "broker unreachable"
        finally:
            ingest.stop()
    said = [line for line in ingest.lines if "memory stubs live: cannot read" in line]
    assert len(said) == 1 and "trying again every 5 s" in said[0], ingest.lines
    assert sum("Unable connect" in line for line in ingest.lines) <= 1  # aiokafka's retries of the follower are not logged
    assert list((tmp_path / "spool").rglob("*")), "the prompt waits in the spool"
