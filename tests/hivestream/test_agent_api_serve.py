"""The agent API on ``hivestream serve``: every route's happy path and bad input, read-your-writes,
quarantine and secrets, the scopes of a tokens file and of the loopback user, frames recall scoped
to a project, and telemetry counted once (a ``kb_search`` through hivestream's MCP server too)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.support.agent_api_cases import INJECTION, SECRET_KEY, SECRET_MAIL, Api, assert_error, bad_input, experience, until
from tests.support.serve_harness import ServeProc, gateway_echo, prompt

MAX_BODY = 64 << 10


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServeProc, Api, Api]]:
    """A loopback serve without tokens: the local user's client and the reviewer's (serve's review token)."""
    db = tmp_path_factory.mktemp("api") / "m.duckdb"
    s = ServeProc(db, "--max-body-bytes", str(MAX_BODY))
    try:
        note = json.loads(Path(f"{db}.serve").read_text())
        yield s, Api(s.url), Api(s.url, note["ingest"]["review_token"])
    finally:
        s.stop()


def test_submit_is_readable_at_once_and_searchable_once_approved(served: tuple[ServeProc, Api, Api]) -> None:
    _s, agent, reviewer = served
    r = agent.post("/api/submit", experience("zephyr", agent_id="agent-7", session_key="s-1"))
    assert r.status_code == 200 and set(r.json()) == {"id", "status"} and r.json()["status"] == "pending"
    eid = r.json()["id"]
    got = agent.get(f"/api/content/{eid}")  # read your writes: no wait
    assert got.status_code == 200 and got.json()["status"] == "pending" and got.json()["task"].startswith("configure zephyr")
    assert agent.search_ids("zephyr retries") == []  # pending: not searchable
    assert any(p["id"] == eid for p in reviewer.get("/api/pending").json()["results"])
    assert reviewer.post(f"/api/approve/{eid}", {"reason": "checked"}).json() == {"id": eid, "status": "approved"}
    hits = agent.get("/api/search", q="zephyr retries").json()["results"]  # approve -> searchable at once
    assert [h["id"] for h in hits] == [eid]
    assert set(hits[0]) == {"id", "title", "task", "resource", "result", "confidence", "status", "score"}
    assert hits[0]["title"] == "configure zephyr retries" and hits[0]["status"] == "approved" and hits[0]["score"] > 0
    assert agent.search_ids("zephyr", agent_id="agent-7") == [eid] and agent.search_ids("zephyr", agent_id="someone-else") == []
    again = agent.post("/api/submit", experience("zephyr", agent_id="agent-8"))  # within the window: the same experience
    assert again.json() == {"id": eid, "status": "approved"}
    assert agent.get(f"/api/content/{eid}").json()["submit_count"] == 2


def test_reject_needs_a_reason_and_withholds_the_text(served: tuple[ServeProc, Api, Api]) -> None:
    _s, agent, reviewer = served
    eid = agent.post("/api/submit", experience("quokka")).json()["id"]
    assert_error(reviewer.post(f"/api/reject/{eid}", {}), 400, "missing_field")
    assert_error(reviewer.post(f"/api/reject/{eid}", {"reason": 5}), 400, "wrong_shape")
    assert_error(reviewer.post("/api/approve/no-such-id", {}), 404, "not_found")
    assert_error(reviewer.post(f"/api/approve/{eid}", raw=b"{nope"), 400, "malformed_json")
    assert reviewer.post(f"/api/reject/{eid}", {"reason": "wrong"}).json() == {"id": eid, "status": "rejected"}
    seen = agent.get(f"/api/content/{eid}").json()
    assert seen["status"] == "rejected" and seen["task"] == "" and seen["withheld"] is True
    assert reviewer.get(f"/api/content/{eid}").json()["task"].startswith("configure quokka")


def test_an_injection_is_quarantined_and_never_returned_to_an_agent(served: tuple[ServeProc, Api, Api]) -> None:
    _s, agent, reviewer = served
    r = agent.post("/api/submit", {"task": "walrus setup", "resource": "walrus", "result": INJECTION})
    assert r.status_code == 200 and r.json()["status"] == "quarantined"
    eid = r.json()["id"]
    assert agent.search_ids("walrus setup") == []
    assert_error(agent.get("/api/search", q="walrus", include_quarantined="1"), 403, "forbidden")
    assert_error(agent.get(f"/api/content/{eid}"), 404, "not_found")
    assert reviewer.search_ids("walrus setup", include_quarantined="1") == [eid]
    assert reviewer.get(f"/api/content/{eid}").json()["status"] == "quarantined"
    assert eid in [p["id"] for p in reviewer.get("/api/pending", status="quarantined").json()["results"]]


def test_secrets_are_redacted_before_the_event_exists(served: tuple[ServeProc, Api, Api]) -> None:
    s, agent, reviewer = served
    r = agent.post("/api/submit", {"task": "narwhal deploy", "resource": f"key {SECRET_KEY}", "result": f"mail {SECRET_MAIL} when done"})
    eid = r.json()["id"]
    reviewer.post(f"/api/approve/{eid}", {})
    answers = [r.text, agent.get(f"/api/content/{eid}").text, agent.get("/api/search", q="narwhal deploy").text]
    assert eid in answers[2]
    for text in answers:
        assert SECRET_KEY not in text and SECRET_MAIL not in text
    log = b"".join(p.read_bytes() for p in Path(f"{s.db}.hook-events").rglob("*") if p.is_file())
    assert SECRET_KEY.encode() not in log and SECRET_MAIL.encode() not in log


def test_bad_input_on_every_route(served: tuple[ServeProc, Api, Api]) -> None:
    s, agent, reviewer = served
    big = agent.post("/api/submit", experience("pelican") | {"padding": "x" * (MAX_BODY - 1000)})  # a body of many reads
    assert big.status_code == 200 and big.json()["status"] == "pending"
    assert_error(agent.c.post("/api/submit", content=b"{}", headers={"Content-Encoding": "gzip"}), 415, "bad_encoding")
    bad_input(agent, MAX_BODY)
    assert_error(agent.post("/api/extract", {"session_key": "s", "messages": [{"role": "user", "content": "hi"}]}), 409, "extraction_disabled")
    assert_error(reviewer.get("/api/pending", status="approved"), 400, "bad_status")
    assert_error(reviewer.get("/api/pending", limit="5000"), 400, "bad_limit")
    assert "Traceback" not in s.text() and " 500 " not in s.text()


def test_the_loopback_user_may_not_review(served: tuple[ServeProc, Api, Api]) -> None:
    s, agent, _reviewer = served
    for r in (agent.get("/api/pending"), agent.post("/api/approve/x", {}), agent.post("/api/reject/x", {"reason": "r"})):
        assert_error(r, 403, "forbidden")
        assert ".serve" in r.json()["detail"]  # says where the review token is
    assert_error(Api(s.url, "not-the-review-token-0123456789").get("/api/pending"), 403, "forbidden")


def test_recall_is_scoped_to_the_project_with_provenance(served: tuple[ServeProc, Api, Api]) -> None:
    s, agent, _reviewer = served
    a = prompt("recallA", 1) | {"cwd": "/w/alpha", "prompt": "the ocelot cache needs a warm start"}
    b = prompt("recallB", 2) | {"cwd": "/w/beta", "prompt": "the ocelot cache is cold in beta"}
    echo = gateway_echo("recallA", 1) | {}
    echo["context"] = dict(echo["context"], content="the ocelot cache needs a warm start")
    echo["timestamp"] = a["event_time_ms"] - 200
    for path, body in (("/v1/hooks/claude-code", a), ("/v1/hooks/claude-code", b), ("/v1/hooks/openclaw", echo)):
        assert agent.c.post(path, json=body).status_code == 200
    s.wait_applied()
    alpha = agent.get("/api/memory/search", q="ocelot cache", project="alpha").json()["results"]
    assert [h["content"] for h in alpha] == ["the ocelot cache needs a warm start"]
    assert alpha[0]["project"] == "alpha" and alpha[0]["access_count"] == 2 and sorted(alpha[0]["sources"]) == ["claude-code", "openclaw"]
    assert alpha[0]["first_seen_ms"] <= alpha[0]["last_seen_ms"] and alpha[0]["score"] > 0
    both = agent.get("/api/memory/search", q="ocelot cache", scope="all").json()["results"]
    assert {h["project"] for h in both} == {"alpha", "beta"}
    assert agent.get("/api/memory/search", q="ocelot", project="gamma").json() == {"results": []}


def test_telemetry_counts_each_call_once(tmp_path: Path) -> None:
    s = ServeProc(tmp_path / "t.duckdb")
    try:
        agent = Api(s.url)
        agent.get("/api/search", q="telemetry-marker-one", session_key="tel-1")
        agent.get("/api/content/telemetry-marker-three")
        agent.get("/api/memory/search", q="telemetry-marker-two", scope="all")
        # the runtime's own copy of an MCP call to hivestream's server derives nothing; another KnowHub server's counts
        for tool in ("mcp__hivestream__kb_search", "mcp__knowhub__kb_search"):
            hook = {"session_id": "tel-2", "hook_event_name": "PostToolUse", "cwd": "/w/tel", "tool_name": tool,
                    "tool_input": {"query": f"telemetry-marker-{tool}"}, "tool_response": {"results": []}}
            assert agent.c.post("/v1/hooks/claude-code", json=hook).status_code == 200
        until(lambda: s.health()[1]["log_records"] >= 5, 30, "the telemetry lines to be in the log")
        s.wait_applied()
    finally:
        assert s.stop() == 0
    with duckdb.connect(str(s.db), read_only=True) as con:
        got = [(str(k), str(q or r)) for k, q, r in con.execute("SELECT kind, query, experience_ref FROM kb_telemetry").fetchall()]
    assert sorted(got) == sorted([("search", "telemetry-marker-one"), ("content", "telemetry-marker-three"), ("recall", "telemetry-marker-two"),
                                  ("search", "telemetry-marker-mcp__knowhub__kb_search")])


TOKENS = {"hooks": "hooks-token-0123456789abcdef", "agent": "agent-token-0123456789abcdef", "review": "review-token-0123456789abcdef",
          "read": "read-token-0123456789abcdef"}


def test_each_scope_is_refused_what_it_may_not_do(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("".join(f"gw-{name} {tok} scopes={name}\n" for name, tok in TOKENS.items()))
    s = ServeProc(tmp_path / "s.duckdb", "--tokens-file", str(tokens))
    try:
        hooks, agent, review, read = (Api(s.url, TOKENS[n]) for n in ("hooks", "agent", "review", "read"))
        for c in (Api(s.url), Api(s.url, "unknown-token-0123456789abcdef")):
            assert_error(c.get("/api/search", q="x"), 401, "unauthorized")
            assert_error(c.post("/api/submit", experience("x")), 401, "unauthorized")
        eid = agent.post("/api/submit", experience("ibis")).json()["id"]
        for c in (hooks, review, read):  # only the agent scope submits
            assert_error(c.post("/api/submit", experience("ibis")), 403, "forbidden")
        for c in (hooks, read):  # hooks post, never read memory; read is analytics
            assert_error(c.get("/api/search", q="ibis"), 403, "forbidden")
            assert_error(c.get(f"/api/content/{eid}"), 403, "forbidden")
            assert_error(c.get("/api/memory/search", q="ibis", scope="all"), 403, "forbidden")
            assert_error(c.post("/api/extract", {"session_key": "s", "messages": []}), 403, "forbidden")
        for c in (hooks, agent, read):
            assert_error(c.get("/api/pending"), 403, "forbidden")
            assert_error(c.post(f"/api/approve/{eid}", {}), 403, "forbidden")
            assert_error(c.post(f"/api/reject/{eid}", {"reason": "no"}), 403, "forbidden")
        assert review.post(f"/api/approve/{eid}", {}).json() == {"id": eid, "status": "approved"}
        assert agent.search_ids("ibis retries") == [eid]
        assert hooks.c.post("/v1/hooks/claude-code", json=prompt("scoped", 1)).status_code == 200
        assert agent.c.post("/v1/hooks/claude-code", json=prompt("scoped", 2)).status_code == 403  # an agent token posts no hook events
    finally:
        s.stop()
    text = s.text()
    assert all(tok not in text for tok in TOKENS.values()) and "Traceback" not in text
