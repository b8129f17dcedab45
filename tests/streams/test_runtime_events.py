"""docs/runtime-events.md, row by row: each runtime's documented payload ends as the page says, in
process (what ``hivestream run`` does with a hook log), through ``hivestream serve`` and through
``hivestream ingest`` + the Kafka worker + the projector: a frame of the row's event type, or a
``skipped_events`` row with its reason (never a dead letter), with the row's details in ``event_details``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from streams.frames.capture import Capture, capture_outcome
from streams.kafka.topics import Topics
from streams.model.adapters import adapt
from streams.model.details import payload_details
from tests.support.runtime_events import PAYLOADS, T0, Row, rows

ROWS = rows()
Outcomes = dict[str, tuple[str, str, dict[str, Any]]]
"""event id → (``frame``/``skipped``, event type or reason, details)."""


def test_every_row_has_its_documented_payload_and_every_payload_a_row() -> None:
    keys = [(r.section, r.event, r.case) for r in ROWS]
    assert len(keys) == len(set(keys)) > 100
    assert set(keys) == set(PAYLOADS)


def _check(row: Row, event_id: str, got: Outcomes) -> None:
    assert event_id in got, f"{row.id}: event {event_id} is neither a capture nor a skipped event"
    kind, what, details = got[event_id]
    assert (kind, what) == (row.kind, row.what), row.id
    missing = [d for d in row.details if details.get(d) in (None, "")]
    assert not missing, f"{row.id}: details {missing} not kept (got {details})"


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_in_process(row: Row) -> None:
    route, payload = PAYLOADS[(row.section, row.event, row.case)]
    ev = adapt(payload, received_at_ms=T0, runtime=route)
    out = capture_outcome(ev)
    kind, what = ("frame", out.event_type) if isinstance(out, Capture) else ("skipped", out.reason)
    _check(row, ev.event_id, {ev.event_id: (kind, what, payload_details(ev.native_event, ev.source, ev.raw) or {})})


def _post_all(url: str) -> dict[tuple[str, str, str], str]:
    """Post every row's payload; row key → the event id the server gave it."""
    ids: dict[tuple[str, str, str], str] = {}
    with httpx.Client(timeout=60) as http:
        for key, (route, payload) in PAYLOADS.items():
            r = http.post(f"{url}/v1/hooks/{route}", content=json.dumps(payload).encode())
            assert r.status_code == 200, (key, r.status_code, r.text[:300])
            (res,) = r.json()["results"]
            assert res["status"] == "accepted", (key, res)
            ids[key] = res["event_id"]
    return ids


def _outcomes(db: Path) -> tuple[Outcomes, int]:
    """The captures and skipped events of ``db`` with their details, and its dead-letter count."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        details = {r[0]: dict(zip([c[0] for c in con.description][1:], r[1:], strict=True))
                   for r in con.execute("SELECT * FROM event_details").fetchall()}
        got: Outcomes = {eid: ("frame", et, details.get(eid, {})) for eid, et in con.execute("SELECT event_id, event_type FROM frame_captures").fetchall()}
        for eid, reason in con.execute("SELECT event_id, reason FROM skipped_events").fetchall():
            assert eid not in got
            got[eid] = ("skipped", reason, details.get(eid, {}))
        ((dead,),) = con.execute("SELECT count(*) FROM dead_letters").fetchall()
        return got, int(dead)
    finally:
        con.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[tuple[str, str, str], str], Outcomes]:
    from tests.support.serve_harness import ServeProc

    db = tmp_path_factory.mktemp("runtime-events-serve") / "memory.duckdb"
    serve = ServeProc(db, "--no-report")
    try:
        ids = _post_all(serve.url)
        serve.wait_applied()
    finally:
        assert serve.stop() == 0
    got, dead = _outcomes(db)
    assert dead == 0  # valid events, every one: none is a dead letter
    return ids, got


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_through_serve(row: Row, served: tuple[dict[tuple[str, str, str], str], Outcomes]) -> None:
    ids, got = served
    _check(row, ids[(row.section, row.event, row.case)], got)


@pytest.fixture(scope="module")
def through_kafka(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[tuple[str, str, str], str], Outcomes]:
    from tests.support.ingest_harness import IngestProc
    from tests.support.kafka_harness import create_topics, project_all, run_worker_until_done, unique_namespace, wait_until

    tmp = tmp_path_factory.mktemp("runtime-events-kafka")
    topics = Topics(unique_namespace("runtime-events"))
    create_topics(kafka_bootstrap, topics)
    ingest = IngestProc(kafka_bootstrap, topics.namespace, tmp / "spool")
    try:
        wait_until(lambda: httpx.get(ingest.url + "/healthz").json()["broker"] == "up", 60, "the producer")
        ids = _post_all(ingest.url)
    finally:
        ingest.stop()
    run_worker_until_done(kafka_bootstrap, topics, tmp / "worker", log=tmp / "worker.log")
    project_all(kafka_bootstrap, topics, tmp / "kafka.duckdb")
    got, dead = _outcomes(tmp / "kafka.duckdb")
    assert dead == 0
    return ids, got


@pytest.mark.kafka
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_row_through_ingest_and_kafka(row: Row, through_kafka: tuple[dict[tuple[str, str, str], str], Outcomes]) -> None:
    ids, got = through_kafka
    _check(row, ids[(row.section, row.event, row.case)], got)
