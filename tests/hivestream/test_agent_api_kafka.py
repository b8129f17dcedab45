"""The agent API on the Kafka path: ``hivestream ingest --db`` (the routes), the worker, ``kb project``
and ``project`` (the projections and their snapshots). A submission is answered at once and readable
by its writer from the event; it is searchable once a reviewer approved it and the projector's next
snapshot has it; quarantined experiences are never returned to an agent; secrets never reach
``hook-events``; bad input and wrong scopes are refused as on serve; a snapshot older than the bound
is refused (503 ``stale``); ``/mcp`` on ingest answers from the same snapshot, for the agent scope only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams.kafka.topics import Topics
from tests.support.agent_api_cases import INJECTION, SECRET_KEY, SECRET_MAIL, Api, assert_error, bad_input, experience, mcp_call, until
from tests.support.ingest_harness import IngestProc, read_topic
from tests.support.kafka_harness import REPO_ROOT, create_topics, start_worker, stop, unique_namespace
from tests.support.serve_harness import prompt

pytestmark = pytest.mark.kafka

TOKENS = {"hooks": "hooks-token-0123456789abcdef", "agent": "agent-token-0123456789abcdef", "review": "review-token-0123456789abcdef"}
MAX_BODY = 64 << 10


def projector(bootstrap: str, ns: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    """``hivestream ARGS --namespace ns`` as a child process (a projector)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    return subprocess.Popen([sys.executable, "-m", "hivestream", *args, "--namespace", ns], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=open(log, "ab"))


def test_agent_api_on_the_kafka_path(kafka_bootstrap: str, tmp_path: Path) -> None:
    ns = unique_namespace("api")
    t = Topics(ns)
    create_topics(kafka_bootstrap, t, partitions=4)
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"gw-{n} {tok} scopes={n}\n" for n, tok in TOKENS.items()))
    kb_db, frames_db = tmp_path / "kb.duckdb", tmp_path / "frames.duckdb"
    procs = [start_worker(kafka_bootstrap, ns, tmp_path / "w", log=tmp_path / "worker.log"),
             projector(kafka_bootstrap, ns, "kb", "project", "--db", str(kb_db), "--snapshot-every", "0.5", log=tmp_path / "kb.log"),
             projector(kafka_bootstrap, ns, "project", "--db", str(frames_db), "--snapshot-every", "0.5", log=tmp_path / "frames.log")]
    ingest = IngestProc(kafka_bootstrap, ns, tmp_path / "spool", "--db", str(kb_db), "--frames-db", str(frames_db), "--max-staleness", "5",
                        "--max-body-bytes", str(MAX_BODY), tokens=tokens)
    try:
        agent, review, hooks = Api(ingest.url, TOKENS["agent"]), Api(ingest.url, TOKENS["review"]), Api(ingest.url, TOKENS["hooks"])
        assert hooks.c.post("/v1/hooks/claude-code", json=prompt("kafka", 1) | {"cwd": "/w/heron", "prompt": "the heron index rebuild"}).status_code == 200
        until(lambda: agent.get("/api/search", q="anything").status_code == 200, 180, "the first snapshots")

        r = agent.post("/api/submit", experience("heron", agent_id="agent-k"))
        assert r.status_code == 200 and r.json()["status"] == "pending"
        eid = r.json()["id"]
        mine = agent.get(f"/api/content/{eid}")  # from the event itself until the projector has it
        assert mine.status_code == 200 and mine.json()["task"].startswith("configure heron")
        until(lambda: "projected" not in agent.get(f"/api/content/{eid}").json(), 120, "the projector's snapshot to hold the submission")
        assert agent.search_ids("heron retries") == []
        assert eid in [p["id"] for p in review.get("/api/pending").json()["results"]]
        assert review.post(f"/api/approve/{eid}", {}).json() == {"id": eid, "status": "approved"}
        until(lambda: agent.search_ids("heron retries") == [eid], 120, "the approval to be searchable")
        err, found = mcp_call(ingest.url, TOKENS["agent"], "kb_search", {"query": "heron retries"})  # /mcp on ingest: the same snapshot
        assert not err and f"1. [{eid}] configure heron retries" in found
        err, body = mcp_call(ingest.url, TOKENS["agent"], "kb_content", {"id": eid})
        assert not err and "<resource>heron client library</resource>" in body
        hooks_mcp = hooks.c.post("/mcp", content=b"{}", headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        assert_error(hooks_mcp, 403, "forbidden")

        q = agent.post("/api/submit", {"task": "egret setup", "resource": f"key {SECRET_KEY}", "result": INJECTION + f" mail {SECRET_MAIL}"})
        assert q.json()["status"] == "quarantined"
        qid = q.json()["id"]
        until(lambda: review.get(f"/api/content/{qid}").status_code == 200 and "projected" not in review.get(f"/api/content/{qid}").json(),
              120, "the quarantined submission to be projected")
        assert_error(agent.get(f"/api/content/{qid}"), 404, "not_found")
        assert agent.search_ids("egret setup") == [] and review.search_ids("egret setup", include_quarantined="1") == [qid]
        for text in (q.text, review.get(f"/api/content/{qid}").text):
            assert SECRET_KEY not in text and SECRET_MAIL not in text

        until(lambda: bool(agent.get("/api/memory/search", q="heron index", project="heron").json()["results"]), 120, "the frame's recall")
        assert agent.get("/api/memory/search", q="heron index", project="other").json() == {"results": []}

        bad_input(agent, MAX_BODY)
        assert_error(agent.post("/api/extract", {"session_key": "s", "messages": [{"role": "user", "content": "x"}]}), 409, "extraction_disabled")
        for c in (hooks, review):
            assert_error(c.post("/api/submit", experience("x")), 403, "forbidden")
        assert_error(hooks.get("/api/search", q="heron"), 403, "forbidden")
        assert_error(agent.get("/api/pending"), 403, "forbidden")
        assert_error(Api(ingest.url).get("/api/search", q="heron"), 401, "unauthorized")

        stop(procs[1])  # the knowledge base projector stops: its snapshot grows older than the 5-s bound
        until(lambda: agent.get("/api/search", q="heron").status_code == 503, 30, "the snapshot to be refused as stale")
        assert_error(agent.get("/api/search", q="heron"), 503, "stale")
        err, text = mcp_call(ingest.url, TOKENS["agent"], "kb_search", {"query": "heron"})
        assert err and text.startswith("kb_search: stale: ") and "\n" not in text
    finally:
        ingest.stop()
        for p in procs:
            stop(p)
    raw = b"".join(v for _p, _k, v in read_topic(kafka_bootstrap, t.hook_events))
    assert SECRET_KEY.encode() not in raw and SECRET_MAIL.encode() not in raw
    assert all(tok not in "".join(ingest.lines) for tok in TOKENS.values())
    assert "Traceback" not in "".join(ingest.lines)
