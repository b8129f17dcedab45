"""The ingest server's property-based fuzz against a real ``hivestream ingest`` process and the real
broker: the bodies, encodings, tokens and runtimes of :mod:`tests.streams.test_ingest_fuzz` (imported, not
copied) are posted to one server on a fresh namespace, and ``hook-events`` and ``dead-letter`` are
read once at the end.

What holds, from :mod:`hivestream.ingest.server` and :mod:`hivestream.ingest.sink`: every answer is
a JSON verdict, never a 5xx while the broker is up; every event id an answer accepted is on
``hook-events``; the good lines of a mixed request are accepted; every dead letter has a reason.
Counts: a record reaches a topic more than once only through the spool (a send the broker
acknowledged after ``produce_timeout_s``, when the record was already spooled, or a spooled chunk the
forwarder sends again after a failure); the idempotent producer's own retries never duplicate. So
while nothing was spooled (``hivestream_ingest_spooled_total`` is 0) the topics hold exactly what
the answers say (dead letters = the sum of the answers' ``dead_lettered``, hook events = the sum of
``accepted``); once something was spooled, at least that.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.kafka.topics import Topics
from streams.model.deadletter import DeadLetter
from streams.model.events import HookEvent
from tests.streams.test_ingest_fuzz import TOKEN, bodies
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_harness import unique_namespace, wait_until

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def server(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[IngestProc, str, Topics]]:
    work = tmp_path_factory.mktemp("ingest-fuzz")
    tokens = work / "tokens"
    tokens.write_text(f"gw-1 sha256:{hashlib.sha256(TOKEN.encode()).hexdigest()}\n")
    ns = unique_namespace("ingest-fuzz")
    proc = IngestProc(kafka_bootstrap, ns, work / "spool", tokens=tokens)
    try:
        wait_until(lambda: httpx.get(proc.url + "/healthz").json()["broker"] == "up", 60, "the producer to connect")
        yield proc, kafka_bootstrap, Topics(ns)
    finally:
        proc.stop()
        assert TOKEN not in "".join(proc.lines), "a token was logged"


def _spooled_total(proc: IngestProc) -> int:
    m = re.search(r"^hivestream_ingest_spooled_total (\S+)$", httpx.get(proc.url + "/metrics").text, re.M)
    assert m, "no hivestream_ingest_spooled_total in /metrics"
    return int(float(m.group(1)))


def test_every_answer_is_a_verdict_and_the_topics_hold_what_the_answers_say(server: tuple[IngestProc, str, Topics]) -> None:
    proc, bootstrap, topics = server
    answers: list[tuple[int, dict[str, Any]]] = []
    kept: list[str] = []  # event ids of the good lines of mixed requests
    client = httpx.Client(base_url=proc.url, timeout=60)

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body=bodies(), auth=st.sampled_from(["ok", "ok", "none", "wrong"]), encoding=st.sampled_from(["", "gzip", "bad-gzip"]),
           runtime=st.sampled_from(["claude-code", "auto", "codex", "nope"]))
    def post_one(body: tuple[bytes, list[bool]], auth: str, encoding: str, runtime: str) -> None:
        raw, good = body
        headers = {"Authorization": f"Bearer {TOKEN}" if auth == "ok" else "Bearer wrong-token-0123456789"} if auth != "none" else {}
        data = raw
        if encoding:
            headers["Content-Encoding"] = "gzip"
            data = gzip.compress(raw) if encoding == "gzip" else b"\x1f\x8b not gzip"
        r = client.post(f"/v1/hooks/{runtime}", content=data, headers=headers)
        assert r.status_code < 500, (r.status_code, r.text[:300])
        got = orjson.loads(r.content)
        assert isinstance(got, dict), got
        answers.append((r.status_code, got))
        if auth != "ok":
            assert r.status_code == 401 and "dead_lettered" not in got
            return
        assert r.status_code in (200, 400, 404, 422), (r.status_code, got)
        assert isinstance(got["dead_lettered"], int) and got["truncated"] is False
        if r.status_code in (200, 422):
            assert got["dead_lettered"] == got["rejected"] == len(got["results"]) - got["accepted"]
            if good and encoding != "bad-gzip" and runtime in ("claude-code", "auto"):
                accepted = {x["index"]: x["event_id"] for x in got["results"] if x["status"] == "accepted"}
                assert {i for i, g in enumerate(good) if g} <= accepted.keys()  # the good lines of a mixed request are kept
                kept.extend(accepted[i] for i, g in enumerate(good) if g)
        else:
            assert got["dead_lettered"] == 1 and got["error"]

    try:
        post_one()
    finally:
        client.close()
    assert any(s == 200 for s, _g in answers) and any(s in (400, 404, 422) for s, _g in answers)  # both sides were exercised
    wait_until(lambda: httpx.get(proc.url + "/healthz").json()["spooled_records"] == 0, 60, "the spool to drain")
    spooled = _spooled_total(proc)

    events = [HookEvent.model_validate_json(v) for _p, _k, v in read_topic(bootstrap, topics.hook_events)]
    dead = [DeadLetter.model_validate_json(v) for _p, _k, v in read_topic(bootstrap, topics.dead_letter)]
    accepted_ids = [x["event_id"] for _s, g in answers for x in g.get("results", []) if x["status"] == "accepted"]
    on_topic = {e.event_id for e in events}
    assert set(accepted_ids) <= on_topic and set(kept) <= on_topic
    assert on_topic <= set(accepted_ids)  # nothing on hook-events that no answer accepted
    assert all(d.reason and str(d.reason) for d in dead)
    want_dead = sum(int(g.get("dead_lettered", 0)) for _s, g in answers)
    assert want_dead > 0
    if spooled == 0:  # every record went straight to the broker, acknowledged once
        assert len(dead) == want_dead and len(events) == len(accepted_ids)
    else:  # a spooled record may also have been acknowledged late, or forwarded twice
        assert len(dead) >= want_dead and len(events) >= len(accepted_ids)

