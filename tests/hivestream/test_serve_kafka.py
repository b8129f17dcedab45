"""From one machine to Kafka (the real broker): the same payloads through ``hivestream serve`` and
through ``hivestream ingest`` + worker + projector give equal tables, and ``hivestream produce LOGDIR``
moves serve's log onto ``hook-events`` with the keys and event ids ``ingest`` gave, so a worker and
a projector make serve's frames of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from streams.kafka.topics import Topics
from streams.model.events import HookEvent
from tests.hivestream.test_serve import _memory_calls
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_harness import (
    create_topics,
    dead_letter_reasons,
    frame_tables,
    hivestream_cli,
    project_all,
    run_worker_until_done,
    unique_namespace,
    wait_until,
)
from tests.support.kb_fixtures import scenario_lines
from tests.support.serve_harness import ServeProc, gateway_echo, prompt

pytestmark = pytest.mark.kafka


def _requests() -> list[tuple[str, bytes]]:
    """The same requests for both servers, in one order: singles, arrays, NDJSON, bad bodies."""
    work: list[tuple[str, dict[str, Any]]] = []
    for i in range(400):
        work.append(("claude-code", prompt("k", i)))
        if i % 2 == 0:
            work.append(("openclaw", gateway_echo("k", i)))
    work += [("claude-code", p) for p in _memory_calls()]
    out: list[tuple[str, bytes]] = []
    i = 0
    while i < len(work):
        if i % 5 == 0:
            out.append((work[i][0], json.dumps(work[i][1]).encode()))
            i += 1
        else:
            part = [p for _r, p in work[i:i + 23]]
            out.append(("auto", (json.dumps(part) if i % 2 else "\n".join(map(json.dumps, part))).encode()))
            i += 23
    out += [("auto", json.dumps(p).encode()) for p in scenario_lines()]
    out += [("codex", b"not json at all"), ("auto", json.dumps([{"foo": "bar"}, prompt("mixed", 1)]).encode()),
            ("claude-code", json.dumps({"hook_event_name": "Stop", "ts": "the day after tomorrow"}).encode())]
    return out


def _post_all(url: str, reqs: list[tuple[str, bytes]]) -> list[str]:
    ids: list[str] = []
    with httpx.Client(timeout=60) as http:
        for rt, body in reqs:
            r = http.post(f"{url}/v1/hooks/{rt}", content=body)
            assert r.status_code in (200, 400, 422), r.text[:300]
            if r.status_code != 400:
                ids += [x["event_id"] for x in r.json()["results"] if x["status"] == "accepted"]
    return ids


def test_serve_and_the_kafka_path_agree_and_produce_moves_the_log_unchanged(kafka_bootstrap: str, tmp_path: Path) -> None:
    reqs = _requests()
    db = tmp_path / "memory.duckdb"
    serve = ServeProc(db, "--no-report")
    try:
        served_ids = _post_all(serve.url, reqs)
        serve.wait_applied()
    finally:
        assert serve.stop() == 0
    # the Kafka path on the same requests
    live = Topics(unique_namespace("serve-vs-ingest"))
    create_topics(kafka_bootstrap, live)
    ingest = IngestProc(kafka_bootstrap, live.namespace, tmp_path / "spool")
    try:
        wait_until(lambda: httpx.get(ingest.url + "/healthz").json()["broker"] == "up", 60, "the producer")
        ingest_ids = _post_all(ingest.url, reqs)
    finally:
        ingest.stop()
    assert ingest_ids == served_ids
    run_worker_until_done(kafka_bootstrap, live, tmp_path / "w-live", log=tmp_path / "w-live.log")
    project_all(kafka_bootstrap, live, tmp_path / "kafka.duckdb")
    want = frame_tables(db)
    assert len(want["frames"]) > 300 and len(want["memory_tool_calls"]) > 9  # hive-mind calls and the kb tool calls
    assert frame_tables(tmp_path / "kafka.duckdb") == want
    assert dead_letter_reasons(tmp_path / "kafka.duckdb") == dead_letter_reasons(db)
    # serve's log onto a fresh namespace: the records ingest produced (key and event id), the same frames
    moved = Topics(unique_namespace("serve-produce"))
    out = hivestream_cli(kafka_bootstrap, "produce", str(Path(f"{db}.hook-events")), "--namespace", moved.namespace)
    assert "same keys, values and event ids as ingest" in out

    def pairs(topic: str) -> list[tuple[int, bytes, str]]:
        return sorted((p, k, HookEvent.model_validate_json(v).event_id) for p, k, v in read_topic(kafka_bootstrap, topic))

    assert pairs(moved.hook_events) == pairs(live.hook_events)  # partition, key, event id
    assert len(read_topic(kafka_bootstrap, moved.dead_letter)) == len(read_topic(kafka_bootstrap, live.dead_letter))
    run_worker_until_done(kafka_bootstrap, moved, tmp_path / "w-moved", log=tmp_path / "w-moved.log")
    project_all(kafka_bootstrap, moved, tmp_path / "moved.duckdb")
    assert frame_tables(tmp_path / "moved.duckdb") == want
    assert dead_letter_reasons(tmp_path / "moved.duckdb") == dead_letter_reasons(db)
