"""Every refusal is its own dead letter, and reading one again never doubles it: the front door
(``ingest`` and ``serve`` share it) in process, ``hivestream serve`` with ``run`` over its log, and
``ingest`` + the ``dead-letter`` topic + the projector on the real broker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from hivestream.ingest.server import IngestConfig
from projections.frames.projection import FramesBatch, FramesProjection
from streams.kafka.topics import Topics
from streams.model.deadletter import DeadLetter
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_harness import create_topics, produce, project_all, unique_namespace, wait_until
from tests.support.memory_sink import MemorySink, Req, requests
from tests.support.serve_harness import ServeProc, all_tables, hivestream

ROUTE = "/v1/hooks/claude-code"
NOT_JSON = b"this is not json: a refusal"
REFUSALS: list[tuple[bytes, dict[str, str]]] = [
    (NOT_JSON, {}),
    (b"\xff\xfe not UTF-8 either", {}),
    (b"42", {}),
    (json.dumps({"hook_event_name": "Stop", "session_id": "dl-1", "ts": "the day after tomorrow"}).encode(), {}),
    (json.dumps({"foo": "no hook here"}).encode(), {}),
    (json.dumps({"hook_event_name": "Stop"}).encode(), {"Content-Encoding": "gzip"}),  # not gzip: bad_encoding, nothing kept of it
    (json.dumps({"hook_event_name": "Stop"}).encode(), {"Content-Encoding": "gzip"}),  # the same again: a second refusal
    (NOT_JSON, {}),  # the same body again: its own request, its own answer, its own dead letter
]
"""Single-payload refusals on one route, each answered ``"dead_lettered": 1``."""


def _identity(d: DeadLetter) -> tuple[str, int, int, str]:
    return d.source, d.partition, d.offset, d.event_id


def _dead_letter_rows(db: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT input, src_partition, src_offset, event_key, reason, original FROM dead_letters ORDER BY ALL").fetchall()
    finally:
        con.close()


def _check_answers(answers: list[tuple[int, Any]]) -> None:
    assert [s for s, _a in answers] == [400, 400, 422, 422, 422, 400, 400, 400], answers
    assert all(a["dead_lettered"] == 1 and a["truncated"] is False for _s, a in answers), answers


def test_each_refusal_at_the_front_door_has_an_identity_of_its_own_and_a_replay_adds_nothing(tmp_path: Path) -> None:
    sink = MemorySink()
    reqs: list[Req] = [("POST", ROUTE, body, headers) for body, headers in REFUSALS]
    reqs.append(("POST", "/v1/hooks/auto", json.dumps([{"foo": 1}, 42, {"foo": 2}]).encode(), {}))  # three in one request
    answers = requests(IngestConfig(spool_dir=tmp_path / "spool"), sink, reqs)
    _check_answers(answers[:-1])
    assert answers[-1][0] == 422 and answers[-1][1]["dead_lettered"] == 3
    dls = [DeadLetter.model_validate_json(v) for t, _k, v in sink.records if t.endswith("dead-letter")]
    assert len(dls) == len(REFUSALS) + 3
    assert len({_identity(d) for d in dls}) == len(dls)
    assert len({k for t, k, _v in sink.records if t.endswith("dead-letter")}) == len(dls)  # the topic keys too
    assert all(d.source.startswith("ingest:local:claude-code:") for d in dls[:len(REFUSALS)])
    assert len({d.source for d in dls[len(REFUSALS):]}) == 1 and [d.offset for d in dls[len(REFUSALS):]] == [0, 1, 2]
    db = tmp_path / "dl.duckdb"
    sink_db = FramesProjection(db)
    try:
        assert sink_db.apply(FramesBatch(dead_letters=dls))[2] == len(dls)
        assert sink_db.apply(FramesBatch(dead_letters=dls))[2] == 0  # the same records read again (a replay after a crash)
    finally:
        sink_db.close()
    rows = _dead_letter_rows(db)
    assert len(rows) == len(dls)
    assert sorted(r[5] for r in rows if r[0].startswith("ingest:local:claude-code:")) == sorted(
        b"" if h else body for body, h in REFUSALS)


def test_serve_keeps_a_dead_letter_per_refusal_and_run_over_its_log_gives_them_once(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--no-report")
    try:
        answers = []
        for body, headers in REFUSALS:
            r = httpx.post(proc.url + ROUTE, content=body, headers=headers, timeout=30)
            answers.append((r.status_code, r.json()))
        _check_answers(answers)
        proc.wait_applied()
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    served = _dead_letter_rows(db)
    assert len(served) == len(REFUSALS), served
    assert len({r[0] for r in served}) == len(REFUSALS) and all(r[0].startswith("ingest:local:claude-code:") for r in served)
    assert sorted(r[5] for r in served) == sorted(b"" if h else body for body, h in REFUSALS)
    q = hivestream("query", "dead-letters", "--db", str(db), "--format", "json")  # counted per route, not per request
    assert q.returncode == 0, q.stderr
    per_route = json.loads(q.stdout)
    assert {x["input"] for x in per_route} == {"ingest:local:claude-code"} and sum(x["records"] for x in per_route) == len(REFUSALS)
    assert {x["reason"]: x["records"] for x in per_route}["bad_encoding"] == 2
    log_dir = Path(f"{db}.hook-events")
    rebuilt = tmp_path / "rebuilt.duckdb"
    for _ in range(2):  # the second run reads nothing new
        r = hivestream("run", str(log_dir), "--db", str(rebuilt))
        assert r.returncode == 0, r.stderr
        assert _dead_letter_rows(rebuilt) == served
    con = duckdb.connect(str(rebuilt))
    try:  # forget how far the file got: the log's dead-letter records are read and applied again
        con.execute("DELETE FROM positions")
    finally:
        con.close()
    r = hivestream("run", str(log_dir), "--db", str(rebuilt))
    assert r.returncode == 0, r.stderr
    assert _dead_letter_rows(rebuilt) == served
    assert all_tables(rebuilt)["dead_letters"] == all_tables(db)["dead_letters"]


@pytest.mark.kafka
def test_ingest_and_the_projector_keep_a_dead_letter_per_refusal_and_a_replay_adds_nothing(kafka_bootstrap: str, tmp_path: Path) -> None:
    topics = Topics(unique_namespace("dl-identity"))
    create_topics(kafka_bootstrap, topics)
    ingest = IngestProc(kafka_bootstrap, topics.namespace, tmp_path / "spool")
    try:
        wait_until(lambda: httpx.get(ingest.url + "/healthz").json()["broker"] == "up", 60, "the producer to connect")
        answers = []
        for body, headers in REFUSALS:
            r = httpx.post(ingest.url + ROUTE, content=body, headers=headers, timeout=30)
            answers.append((r.status_code, r.json()))
        _check_answers(answers)
        assert all(a["durable"] == "broker" for s, a in answers if s == 422)
    finally:
        ingest.stop()
    db = tmp_path / "kafka.duckdb"
    project_all(kafka_bootstrap, topics, db)
    projected = _dead_letter_rows(db)
    assert len(projected) == len(REFUSALS), projected
    assert sorted(r[5] for r in projected) == sorted(b"" if h else body for body, h in REFUSALS)
    # a second copy of every dead-letter record on the topic (what the spool sends when the broker's
    # acknowledgement came too late), a projector restarted over it, then one that reads the topic from the start
    recs = read_topic(kafka_bootstrap, topics.dead_letter)
    assert len(recs) == len(REFUSALS)
    produce(kafka_bootstrap, topics.dead_letter, [(k, v) for _p, k, v in recs])
    project_all(kafka_bootstrap, topics, db)
    assert _dead_letter_rows(db) == projected
    replayed = tmp_path / "replayed.duckdb"
    shutil.copy(db, replayed)
    con = duckdb.connect(str(replayed))
    try:
        con.execute("DELETE FROM positions")
    finally:
        con.close()
    project_all(kafka_bootstrap, topics, replayed)
    assert _dead_letter_rows(replayed) == projected
