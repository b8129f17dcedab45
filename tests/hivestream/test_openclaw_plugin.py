"""The OpenClaw KnowHub plugin (``hivestream/hooks/openclaw_knowhub``) under Node, loaded and driven
by a minimal OpenClaw host (``tests/support/openclaw_host.mjs``; OpenClaw's own loader needs Node >= 22.22,
newer than this machine's Node 20): on a real ``hivestream serve``, three sessions with the seed's
reminders (at each run's first LLM call and every third), exactly the reminders hivestream
reconstructs from the plugin's log, the tools answering through the agent API, extraction off by
default (and refused 409 by a server without an extractor); the memory stubs' archived sections
matching a prompt in ``prependContext`` (and nothing for another prompt, a subagent, or with the option off); the installed plugin; extraction, when
on, sent redacted without the hook waiting, and the tools' errors when the API fails (both against
:mod:`tests.support.knowhub_api_stub`, which holds and fails answers on purpose); the client redactor
against hivestream's own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from streams.redaction.redact import RedactionMode, redact
from tests.support.agent_api_cases import Api
from tests.support.embeddings_fake import EmbeddingsFake, bag_of_words
from tests.support.knowhub_api_stub import KnowHubStub
from tests.support.serve_harness import REPO_ROOT, ServeProc

pytestmark = [pytest.mark.node, pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")]

PLUGIN_DIR = REPO_ROOT / "hivestream" / "hooks" / "openclaw_knowhub"
HOST = Path(__file__).resolve().parents[1] / "support" / "openclaw_host.mjs"
AGENT_TOKEN = "agent-token-for-the-plugin-tests-0123456789"
REVIEW_TOKEN = "review-token-for-the-plugin-tests-0123456789"
GATEWAY = "openclaw-1"
A, B, C = ("oc-A", "agent-a"), ("oc-B", "agent-b"), ("oc-C", "agent-c")
SEEDED = {
    "kafka": ({"task": "Kafka consumer group keeps <b>rebalancing</b>\nunder load", "resource": "max.poll.interval.ms",
               "result": "Raised max.poll.interval.ms to 600000; the rebalances stopped.", "confidence": 0.9}, "approved"),
    "duckdb": ({"task": "DuckDB upsert applied one row of many", "resource": "INSERT ... ON CONFLICT",
                "result": "Aggregate the batch by key before the upsert.", "confidence": 0.8}, "approved"),
    "pip": ({"task": "pip install fails on a fresh runner", "resource": "setuptools", "result": "Pin setuptools>=77 in build-system.requires.",
             "confidence": 0.7}, "pending"),
}


@pytest.fixture
def knowhub() -> Iterator[KnowHubStub]:
    stub = KnowHubStub()
    yield stub
    stub.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServeProc, dict[str, str]]]:
    """A serve whose tokens file gives the plugin's token the hooks and agent scopes, with the experiences of :data:`SEEDED` (their ids)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{GATEWAY} {AGENT_TOKEN} scopes=hooks,agent\nreviewer {REVIEW_TOKEN} scopes=review\n")
    s = ServeProc(tmp_path / "kb.duckdb", "--tokens-file", str(tokens), "--snapshot-every", "0", "--no-report")
    try:
        agent, reviewer = Api(s.url, AGENT_TOKEN), Api(s.url, REVIEW_TOKEN)
        ids: dict[str, str] = {}
        for name, (body, status) in SEEDED.items():
            ids[name] = agent.post("/api/submit", {**body, "agent_id": "seeder"}).json()["id"]
            if status == "approved":
                assert reviewer.post(f"/api/approve/{ids[name]}", {}).json()["status"] == "approved"
        yield s, ids
    finally:
        s.stop()


def run_host(tmp: Path, config: dict[str, Any], steps: list[dict[str, Any]], plugin_dir: Path = PLUGIN_DIR) -> dict[str, Any]:
    """Run the host on ``plugin_dir`` with ``config`` (plugins.entries.<id>.config) and ``steps``; its report."""
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"config": config, "steps": steps}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HIVESTREAM_")}
    env["HIVESTREAM_AGENT_TOKEN"] = AGENT_TOKEN
    r = subprocess.run(["node", str(HOST), str(plugin_dir), str(scenario)], env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    report: dict[str, Any] = json.loads(r.stdout.splitlines()[-1])
    assert report["threw"] == [], report["threw"]  # nothing ever throws into the agent
    return report


def llm(who: tuple[str, str], run: str) -> dict[str, Any]:
    return {"op": "llm", "session": who[0], "agent": who[1], "run": run}


def tool(who: tuple[str, str], run: str, name: str, params: dict[str, Any], call: str) -> dict[str, Any]:
    return {"op": "tool", "session": who[0], "agent": who[1], "run": run, "name": name, "params": params, "id": call}


def end(who: tuple[str, str], run: str, messages: list[Any] | None = None) -> dict[str, Any]:
    return {"op": "end", "session": who[0], "agent": who[1], "run": run, "messages": messages or [], "success": True}


SUBMIT = {"task": "Kafka consumer kept rebalancing", "resource": "max.poll.interval.ms", "result": "Raised it to 600000; fixed.",
          "confidence": 0.8}
RUN_MESSAGES = [{"role": "user", "content": "fix the consumer"}, {"role": "assistant", "content": "raised the poll interval"}]


def three_sessions(ids: dict[str, str]) -> list[dict[str, Any]]:
    """Three sessions in the seed's order, interleaved: A runs twice (7 then 3 LLM calls), B once (4),
    C once (2, no agent_end yet); tools and another plugin's tool call between the calls."""
    return [
        llm(A, "a1"), llm(B, "b1"), llm(A, "a1"),
        tool(A, "a1", "kb_search", {"query": "consumer group rebalancing"}, "t1"),
        llm(B, "b1"), llm(A, "a1"),
        {"op": "after_tool", "session": A[0], "agent": A[1], "run": "a1", "name": "exec", "id": "t2"},
        llm(B, "b1"), llm(A, "a1"),
        tool(A, "a1", "kb_submit", SUBMIT, "t3"),
        llm(B, "b1"), end(B, "b1"), llm(A, "a1"),
        tool(A, "a1", "kb_content", {"id": ids["kafka"]}, "t4"),
        tool(A, "a1", "kb_content", {"id": ids["pip"]}, "t5"),
        tool(A, "a1", "kb_content", {"id": "$id:t3"}, "t6"),  # the id serve gave the submission
        tool(A, "a1", "kb_content", {"id": "no-such-id"}, "t7"),
        llm(A, "a1"), llm(A, "a1"), end(A, "a1", RUN_MESSAGES),
        llm(A, "a2"), llm(A, "a2"), llm(A, "a2"), end(A, "a2", RUN_MESSAGES),
        llm(C, "c1"), llm(C, "c1"),
        {"op": "stop"},
    ]


def expected_reminders(steps: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """The seed's cadence, counted here on its own: (session, kind, LLM call of the run)."""
    out, calls = [], Counter[str]()
    for s in steps:
        if s["op"] == "end":
            calls[s["session"]] = 0
        elif s["op"] == "llm":
            calls[s["session"]] += 1
            n = calls[s["session"]]
            out += [(s["session"], "start", n)] if n == 1 else []
            out += [(s["session"], "periodic", n)] if n % 3 == 0 else []
    return out


def injected(report: dict[str, Any]) -> list[tuple[str, str, int]]:
    return [(i["session"], k, i["call"]) for i in report["injections"] for k in i["kinds"]]


def test_reminders_equal_hivestreams_reconstruction_and_tools_answer_through_the_api(tmp_path: Path,
                                                                                    served: tuple[ServeProc, dict[str, str]]) -> None:
    serve, ids = served
    steps = three_sessions(ids)
    report = run_host(tmp_path, {"apiUrl": serve.url, "submittedBy": "dana"}, steps)
    serve.wait_applied()
    reviewer = Api(serve.url, REVIEW_TOKEN)
    pending = reviewer.get("/api/pending").json()["results"]
    assert report["tools"] == ["kb_search", "kb_submit", "kb_content"]
    assert report["hooks"] == ["after_tool_call", "agent_end", "before_prompt_build"]
    # the seed's cadence: a start reminder at each run's first call, one on every third call, per session
    assert injected(report) == expected_reminders(steps)
    assert injected(report) == [(A[0], "start", 1), (B[0], "start", 1), (A[0], "periodic", 3), (B[0], "periodic", 3), (A[0], "periodic", 6),
                                (A[0], "start", 1), (A[0], "periodic", 3), (C[0], "start", 1)]
    assert all("<knowhub-guidance>" in i["system"] and "kb_search" in i["system"] for i in report["injections"])
    # the tools, through serve's agent API with the agent token from HIVESTREAM_AGENT_TOKEN
    res = {r["id"]: r for r in report["toolResults"]}
    text = res["t1"]["text"]
    assert "untrusted historical data" in text and f"[{ids['kafka']}] Kafka consumer group keeps &lt;b&gt;rebalancing&lt;/b&gt;" in text
    assert text.startswith('<knowhub-experiences trust="untrusted">') and "<b>" not in text
    assert "600000" not in text  # an index: titles, not bodies
    assert [r["id"] for r in res["t1"]["details"]["results"]] == [ids["kafka"]]  # approved only: not the pending one
    own = res["t3"]["details"]["id"]
    assert res["t3"]["text"] == f"Submitted to KnowHub as {own}: pending (a reviewer approves it before search finds it)."
    mine = next(p for p in pending if p["id"] == own)
    assert mine["task"] == SUBMIT["task"] and A[1] in mine["agents"]
    full = res["t4"]["text"]
    assert full.startswith(f'<knowhub-experience id="{ids["kafka"]}" trust="untrusted">') and "untrusted historical data" in full
    assert "Result: Raised max.poll.interval.ms to 600000" in full and "&lt;b&gt;" in full
    assert "shown once a reviewer approves it" in res["t5"]["text"] and "setuptools" not in res["t5"]["text"]
    assert "Task: Kafka consumer kept rebalancing" in res["t6"]["text"]  # its writer reads its own pending submission
    assert "has no experience" in res["t7"]["text"] and res["t7"]["details"] == {"error": True}
    # extraction is off by default: nothing was sent to /api/extract
    assert not [o for o in report["order"] if "/api/extract" in o]
    assert not [m for lvl, m in report["logs"] if lvl in ("warn", "error")], report["logs"]
    # hivestream, replaying the plugin's log, says the plugin injected exactly these
    serve.stop()
    with duckdb.connect(str(serve.db), read_only=True) as con:
        rows = con.execute("SELECT session_key, trigger, llm_call, agent_id FROM kb_telemetry WHERE kind = 'reminder'").fetchall()
        reads = con.execute("SELECT kind, agent_id, coalesce(query, experience_ref) FROM kb_telemetry WHERE kind IN ('search', 'content') "
                            "ORDER BY event_time_ms").fetchall()
        submissions = con.execute("SELECT agent_id, count(*) FROM experience_submissions GROUP BY agent_id ORDER BY agent_id").fetchall()
    plugin = Counter((s, "before_agent_start" if k == "start" else "before_prompt_build", 0 if k == "start" else n) for s, k, n in injected(report))
    assert Counter((s, t, n) for s, t, n, _a in rows) == plugin
    assert {(s, a) for s, _t, _n, a in rows} == {(A[0], A[1]), (B[0], B[1]), (C[0], C[1])}
    # each kb call is recorded once, by the API it went through (the plugin's log does not count it again)
    assert reads == [("search", GATEWAY, "consumer group rebalancing"), ("content", GATEWAY, ids["kafka"]), ("content", GATEWAY, ids["pip"]),
                     ("content", GATEWAY, own), ("content", GATEWAY, "no-such-id")]
    assert submissions == [(A[1], 1), ("seeder", 3)]


def test_extraction_stays_off_unless_the_server_has_an_extractor(tmp_path: Path, served: tuple[ServeProc, dict[str, str]]) -> None:
    serve, _ids = served
    steps = [llm(A, "a1"), end(A, "a1", RUN_MESSAGES), {"op": "stop"}]
    report = run_host(tmp_path, {"apiUrl": serve.url, "enableServerExtraction": True}, steps)
    assert "fetch-settled POST /api/extract" in report["order"]  # asked, since the plugin was told to
    warns = [m for lvl, m in report["logs"] if lvl == "warn"]
    assert [w for w in warns if "extraction not requested" in w] == [
        "hivestream-knowhub: extraction not requested: KnowHub answered 409 extraction_disabled: this server has no extractor "
        "(HIVESTREAM_KB_EXTRACTION_ENABLED is off)"]
    assert AGENT_TOKEN not in json.dumps(report)


SECRET = "sk-proj-" + "Zq7Lm2Vx9Rt4Wb8Kc3Hd6Jf1Ng5Ps0Yu"  # invented, in the OpenAI key shape


INDEX = ('<knowhub-experiences trust="untrusted">\n1. [exp-1] Old lesson (score 1.00)\n</knowhub-experiences>\n'
         "Call kb_content with an id for the whole experience.")


def test_extraction_when_enabled_sends_a_redacted_run_in_the_background(tmp_path: Path, knowhub: KnowHubStub) -> None:
    knowhub.extraction = True
    knowhub.hold_extract_s = 1.5
    knowhub.hold_first_hook_s = 1.5
    messages = [
        {"role": "user", "content": f"deploy failed; my key is {SECRET}, mail dana.rivera@example.org, home /Users/dana/app",
         "timestamp": 1},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "private"}, {"type": "text", "text": "Pinned the runner image."},
                                          {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"cmd": "ls"}}]},
        {"role": "toolResult", "toolCallId": "c1", "toolName": "exec", "content": [{"type": "text", "text": "ok"}], "isError": False},
        {"role": "toolResult", "toolCallId": "c2", "toolName": "kb_search", "isError": False, "content": [{"type": "text", "text": INDEX}]},
        {"role": "user", "content": "<knowhub-reminder kind=\"start\">\nNew task: search KnowHub first.\n</knowhub-reminder>\nthanks"},
    ]
    heartbeat = [{**llm(A, "hb"), "trigger": "heartbeat"}, {**end(A, "hb", messages), "trigger": "heartbeat"}]
    steps = [llm(A, "a1"), llm(A, "a1"), end(A, "a1", messages), *heartbeat, llm(B, "b1"), end(B, "b1", []), {"op": "stop"}]
    report = run_host(tmp_path, {"apiUrl": knowhub.url, "enableServerExtraction": True}, steps)
    [req] = knowhub.requests("/api/extract")  # B's run had no messages, the heartbeat turn is no task: nothing to send
    assert [(i["run"], i["kinds"], bool(i["system"])) for i in report["injections"]] == [
        ("a1", ["start"], True), ("a1", [], True), ("hb", [], False), ("b1", ["start"], True)]
    body = req.body
    assert body["session_key"] == A[0] and body["agent_id"] == A[1] and req.auth == f"Bearer {AGENT_TOKEN}"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "user"]
    assert all(set(m) == {"role", "content"} for m in body["messages"])
    sent = json.dumps(body)
    assert SECRET not in sent and "dana.rivera" not in sent and "/Users/dana" not in sent and "private" not in sent
    assert "[REDACTED:openai_key]" in sent and "[REDACTED:email]" in sent and "/Users/[REDACTED:home_user]/app" in sent
    assert "knowhub-" not in sent and "Old lesson" not in sent  # its own reminders and search answers are not sent back
    assert body["messages"][-1]["content"] == "thanks"
    assert "Pinned the runner image.\n[tool call: exec]" in sent.replace("\\n", "\n")
    # neither hook waited for the network: agent_end returned before the held extraction answered,
    # the first prompt build before the held first hook post did
    order = report["order"]
    assert order.index(f"agent_end-resolved {A[0]}") < order.index("fetch-settled POST /api/extract")
    assert order.index(f"before_prompt_build-returned {A[0]} 1") < order.index("fetch-settled POST /v1/hooks/openclaw-plugin")
    # the plugin log: in order, ids only (no prompt, message or tool payload)
    lines = knowhub.hook_lines
    assert [ln["event"]["seq"] for ln in lines] == sorted(ln["event"]["seq"] for ln in lines)
    assert [ln["hook"] for ln in lines] == ["before_agent_start", "before_prompt_build", "before_prompt_build", "agent_end",
                                            "before_agent_start", "before_prompt_build", "agent_end"]
    assert "messages" not in json.dumps(lines) and "deploy failed" not in json.dumps(lines)
    assert all(ln["ctx"]["sessionKey"] in (A[0], B[0]) for ln in lines)


def test_bad_configuration_and_an_unreachable_api_give_tool_errors_never_a_throw(tmp_path: Path, knowhub: KnowHubStub) -> None:
    # a non-loopback plain-http URL is refused (local first): no request at all, the tools say why
    steps = [llm(A, "a1"), tool(A, "a1", "kb_search", {"query": "x"}, "t1"), tool(A, "a1", "kb_submit", SUBMIT, "t2"), end(A, "a1")]
    report = run_host(tmp_path, {"apiUrl": "http://knowhub.example.com:8787", "reminderMode": "sometimes", "timeoutMs": 5}, steps)
    warns = [m for lvl, m in report["logs"] if lvl == "warn"]
    assert any("apiUrl" in w and "plain http to knowhub.example.com is refused" in w for w in warns)
    assert any("reminderMode must be one of both, start, periodic, off" in w for w in warns)
    assert any("timeoutMs must be an integer in 500..60000" in w for w in warns)
    assert not [o for o in report["order"] if o.startswith("fetch-start")]
    assert all("not configured" in r["text"] and r["details"] == {"error": True} for r in report["toolResults"])
    assert injected(report) == [(A[0], "start", 1)]  # the bad reminderMode fell back to "both"
    assert AGENT_TOKEN not in json.dumps(report)
    # an API that fails, then one that is not there: a short error naming the status or the cause
    knowhub.fail_api = True
    report = run_host(tmp_path, {"apiUrl": knowhub.url, "hooksUrl": knowhub.url}, [tool(A, "a1", "kb_search", {"query": "x"}, "t1")])
    assert report["toolResults"][0]["text"] == "kb_search: KnowHub answered 500"
    closed = KnowHubStub()
    gone = closed.url
    closed.close()
    steps = [llm(A, "a1"), tool(A, "a1", "kb_content", {"id": "x"}, "t1"), end(A, "a1"), {"op": "stop"}]
    report = run_host(tmp_path, {"apiUrl": gone}, steps)
    assert report["toolResults"][0]["text"].startswith(f"kb_content: KnowHub at {gone} failed (ECONNREFUSED)")
    warns = [m for lvl, m in report["logs"] if lvl == "warn"]
    assert any("hook events not delivered" in w and "kept and retried" in w for w in warns)
    assert any("hook event(s) not delivered before stop" in w for w in warns)
    assert AGENT_TOKEN not in json.dumps(report)


REDACT_SAMPLES = [
    f"my key is {SECRET} ok",
    "anthropic sk-ant-api03-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6",
    "mail dana.rivera@example.org or git@github.com:org/repo.git",
    "call +44 20 7946 0958 or (415) 555-0134 or 415-555-0134",
    "paths /Users/dana/project, /home/lee/x, /home/Shared/y and C:\\Users\\Jo Ann\\Desktop",
    "Authorization: Bearer abcdef0123456789abcdef",
    "export OPENAI_API_KEY=abc123def456ghi789",
    '"password": "Tr0ub4dor&3horse"',
    "the password for staging is Kx9vQ2mP7zL4",
    "card 4111 1111 1111 1111 and order 1234567890123",
    "aws AKIA" + "IOSFODNN7EXAMPLE and ghp_" + "A" * 36 + " and hf_" + "b" * 34,
    "postgres://admin:s3cr3tPass@db.internal:5432/app",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdef\n-----END RSA PRIVATE KEY-----",
    "slack xoxb-" + "1234567890-abcdefghij" + " hooks.slack.com/services/T000/B000/XXXXXXXX and glpat-" + "x1y2z3" * 4,
    "google AIza" + "Sy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r" + " stripe sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + " npm_" + "c" * 36,
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY and Authorization: Basic dXNlcjpwYXNzd29yZA==",
    "ring 06 12 34 56 78 or 030 123456 78, not the zip 02110-1301 or 12:30",
    "nothing secret here: version 1.2.3, 2026-11-30, token limit 4096, rotate the secret monthly",
]


def test_the_client_redactor_finds_what_hivestreams_strict_rules_find(tmp_path: Path) -> None:
    script = tmp_path / "redact.mjs"
    script.write_text("import { redact } from " + json.dumps((PLUGIN_DIR / "lib" / "redact.js").as_uri()) + ";\n"
                      "import { DEFAULTS } from " + json.dumps((PLUGIN_DIR / "lib" / "config.js").as_uri()) + ";\n"
                      "const samples = JSON.parse(process.argv[2]);\n"
                      "console.log(JSON.stringify({ out: samples.map((s) => redact(s)), defaults: DEFAULTS }));\n")
    r = subprocess.run(["node", str(script), json.dumps(REDACT_SAMPLES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    for sample, js in zip(REDACT_SAMPLES, got["out"], strict=True):
        py = redact(sample, RedactionMode.STRICT)
        assert js["counts"] == {str(k): n for k, n in py.counts.items() if n}, sample
        assert js["text"] == py.text, sample
        assert redact(js["text"], RedactionMode.STRICT).text == js["text"]  # nothing left for the server to find
    # the plugin's own defaults are the manifest's
    schema = json.loads((PLUGIN_DIR / "openclaw.plugin.json").read_text())["configSchema"]["properties"]
    assert got["defaults"] == {k: p["default"] for k, p in schema.items()}


def test_the_installed_plugin_loads_and_answers(tmp_path: Path, served: tuple[ServeProc, dict[str, str]]) -> None:
    from hivestream.hooks.openclaw_plugin import PLUGIN_ID, apply_plugin

    serve, ids = served
    assert apply_plugin(install=True, url=serve.url, scope="user", dry_run=False, home=tmp_path, env={}) == 0
    installed = tmp_path / ".openclaw" / "extensions" / PLUGIN_ID
    config = json.loads((tmp_path / ".openclaw" / "openclaw.json").read_text())["plugins"]["entries"][PLUGIN_ID]["config"]
    steps = [llm(A, "a1"), tool(A, "a1", "kb_search", {"query": "duckdb upsert", "limit": 1}, "t1"), end(A, "a1"), {"op": "stop"}]
    report = run_host(tmp_path, config, steps, plugin_dir=installed)
    assert f"[{ids['duckdb']}] DuckDB upsert applied one row of many" in report["toolResults"][0]["text"]
    # not sharing: a search reads this agent's own experiences only (the seeded ones are another agent's)
    report = run_host(tmp_path, {**config, "shareExperiences": False}, steps[1:2], plugin_dir=installed)
    assert "no approved experience" in report["toolResults"][0]["text"]
    serve.stop()
    with duckdb.connect(str(serve.db), read_only=True) as con:
        searches = con.execute("SELECT query, agent_filter FROM kb_telemetry WHERE kind = 'search' ORDER BY event_time_ms").fetchall()
        hooks = con.execute("SELECT trigger FROM kb_telemetry WHERE kind = 'reminder'").fetchall()
    assert searches == [("duckdb upsert", None), ("duckdb upsert", A[1])]
    assert hooks == [("before_agent_start",)]  # the plugin's log reached serve: its one start reminder


ARCHIVED = "Board id 5f2a; weekday lists Mon..Fri."


def test_a_prompt_matching_a_memory_stub_gets_its_archive_in_prepend_context(tmp_path: Path) -> None:
    from streams.stubs.events import StubUpserted, encode_embedding

    archive = tmp_path / "trello-api.md"
    archive.write_text(f"## Trello API\n{ARCHIVED}\n", encoding="utf-8")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{GATEWAY} {AGENT_TOKEN} scopes=hooks,agent\nreviewer {REVIEW_TOKEN} scopes=review\n")
    with EmbeddingsFake(dim=64) as fake:
        s = ServeProc(tmp_path / "kb.duckdb", "--tokens-file", str(tokens), "--no-report", "--stub-refresh-at", "off",
                      env={"HIVESTREAM_EMBED_URL": fake.base_url, "HIVESTREAM_EMBED_MODEL": "fake-bow"})
        try:
            stub = StubUpserted(event_id="u1", event_time_ms=1_780_000_000_000, stub_id=1, channel=A[0], title="Trello API",
                                stub_text="trello board ids weekday lists", archive_path=str(archive), archive_tokens=12,
                                embedding_b64=encode_embedding(bag_of_words("trello board ids weekday lists", 64)), model="fake-bow", dim=64,
                                refresh_source="file-watch")
            assert Api(s.url, REVIEW_TOKEN).c.post("/v1/stub-events", content=stub.model_dump_json()).status_code == 200
            s.wait_applied()
            asks = "trello board ids and weekday lists please"
            steps = [{**llm(A, "a1"), "prompt": asks}, {**llm(A, "a2"), "prompt": "what is two plus two"},
                     {**llm(("agent:main:subagent:x1", "agent-a"), "s1"), "prompt": asks},  # a subagent: none
                     {**llm(B, "b1"), "prompt": asks, "channel": A[0]}]  # B's conversation, by default its own channel: none
            report = run_host(tmp_path, {"apiUrl": s.url}, steps)
            got = [i["prepend"] for i in report["injections"]]
            assert ARCHIVED in got[0] and "hivestream-stubs" in got[0] and '<knowhub-reminder kind="start">' in got[0]
            assert all("hivestream-stubs" not in g for g in got[1:]), got
            # stubsChannel "channel": the messaging channel (ctx.channelId) names the stubs instead of the conversation
            report = run_host(tmp_path, {"apiUrl": s.url, "stubsChannel": "channel"}, steps[3:])
            assert ARCHIVED in report["injections"][0]["prepend"]
            # stubsMatch off: not asked
            report = run_host(tmp_path, {"apiUrl": s.url, "stubsMatch": False}, steps[:1])
            assert "hivestream-stubs" not in report["injections"][0]["prepend"] and "fetch-start POST /api/stubs/match" not in report["order"]
            assert not [m for lvl, m in report["logs"] if lvl in ("warn", "error")], report["logs"]
            _status, health = s.health()
            assert (health["stubs"]["prompts"], health["stubs"]["injected"]) == (5, 2)
        finally:
            s.stop()
    # a server that matches no stubs (409) or is gone: nothing, never a throw
    s = ServeProc(tmp_path / "off.duckdb", "--tokens-file", str(tokens), "--no-report", "--no-stubs-live")
    try:
        report = run_host(tmp_path, {"apiUrl": s.url}, [{**llm(A, "a1"), "prompt": "trello board ids"}, {**llm(A, "a1"), "prompt": "trello"}])
    finally:
        s.stop()
    assert [i["prepend"].count("hivestream-stubs") for i in report["injections"]] == [0, 0]
    assert [o for o in report["order"] if o == "fetch-start POST /api/stubs/match"] == ["fetch-start POST /api/stubs/match"]  # 409: not asked again
    assert [m for lvl, m in report["logs"] if "memory stubs" in m] == [
        ("hivestream-knowhub: memory stubs: no context (KnowHub answered 409 stubs_live_off: this server matches no memory stubs "
         "(serve without --no-stubs-live, with an embedder))")]
