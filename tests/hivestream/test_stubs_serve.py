"""Memory stubs live through ``hivestream serve`` and a real Claude Code turn (the CLI from npm against the
suite's local model stub): a section archived with ``stubs archive`` (through serve) reaches the model when
a prompt matches its stub, and only then, with the http hooks and with the command hooks; with serve
stopped the turn goes on and the prompt is spooled; the stub tables serve folded equal ``hivestream run``
over serve's log. Prompts are embedded by a local OpenAI-compatible fake (bag of words: deterministic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import duckdb

from tests.hivestream.test_ingest_clients import claude_bin
from tests.hivestream.test_serve_clients import _claude_env, _install
from tests.support.anthropic_stub import REPLY, AnthropicStub
from tests.support.embeddings_fake import EmbeddingsFake
from tests.support.serve_harness import REPO_ROOT, ServeProc, hivestream

ARCHIVED = "Board id 5f2a; weekday lists Mon..Fri."
MEMORY = f"# Memory\n\n## Trello API\n{ARCHIVED}\n\n## Tone\nShort answers.\n"
STUB_TABLES = {"stubs": "channel, stub_id", "stub_messages": "channel, message_id", "stub_matches": "message_id, stub_channel, stub_id"}


def _turn(cc: Path, env: dict[str, str], project: Path, stub: AnthropicStub, prompt: str) -> str:
    """One ``claude -p`` turn; what the model was sent in it (JSON of its requests)."""
    n = len(stub.requests)
    r = subprocess.run([str(cc), "-p", prompt, "--output-format", "json"], env=env, cwd=project, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["result"] == REPLY
    return json.dumps(stub.requests[n:])


def _match(url: str, body: object) -> tuple[int, dict[str, object]]:
    req = urllib.request.Request(f"{url}/api/stubs/match", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY {k}").fetchall() for t, k in STUB_TABLES.items()}
    finally:
        con.close()


def test_a_prompt_that_matches_an_archived_section_reaches_the_model_with_it(tmp_path: Path) -> None:
    cc = claude_bin()
    home, project, db = tmp_path / "home", tmp_path / "shop", tmp_path / "memory.duckdb"
    home.mkdir()
    project.mkdir()
    with EmbeddingsFake(dim=64) as fake:
        embed_env = {"HIVESTREAM_EMBED_URL": fake.base_url, "HIVESTREAM_EMBED_MODEL": "fake-bow"}
        proc = ServeProc(db, "--snapshot-every", "0.5", "--no-report", env=embed_env)
        stub = AnthropicStub()
        try:
            memory = tmp_path / "memory.md"
            memory.write_text(MEMORY, encoding="utf-8")
            a = subprocess.run([sys.executable, "-m", "hivestream", "stubs", "archive", "--db", str(db), "--memory-file", str(memory),
                                "--section", "## Trello API", "--archive-dir", str(tmp_path / "archived"),
                                "--stub-text", "trello board ids weekday lists", "--channel", "shop"],
                               env={**os.environ, **embed_env}, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
            assert a.returncode == 0 and "through" not in a.stderr and "hivestream serve (pid" in a.stdout, a.stdout + a.stderr
            assert ARCHIVED not in memory.read_text(encoding="utf-8")
            env = _claude_env(home, stub, tmp_path)

            _install("claude-code", home, proc.url)  # http hooks
            sent = _turn(cc, env, project, stub, "which trello board ids and weekday lists do we use")
            assert ARCHIVED in sent and "hivestream-stubs" in sent and 'stub=\\"shop#1\\"' in sent
            sent = _turn(cc, env, project, stub, "what is 2+2")
            assert "hivestream-stubs" not in sent and ARCHIVED not in sent

            _install("claude-code", home, proc.url, "--command")  # command hooks: the prompt's waits and prints the context
            sent = _turn(cc, env, project, stub, "trello weekday lists board ids please")
            assert ARCHIVED in sent and "hivestream-stubs" in sent
            with urllib.request.urlopen(f"{proc.url}/healthz", timeout=10) as h:
                stats = json.loads(h.read())["stubs"]
            assert (stats["prompts"], stats["injected"], stats["failed_open"], stats["other_model_stubs"]) == (3, 2, {}, 0)

            # the OpenClaw plugin's before_prompt_build: the channel as the plugin names it
            assert str(_match(proc.url, {"prompt": "trello board ids and weekday lists", "channel": "shop"})[1]["prependContext"]).count(ARCHIVED) == 1
            status, answer = _match(proc.url, {"prompt": "trello board ids and weekday lists", "channel": "shop", "subagent": True})
            assert status == 200 and answer == {"prependContext": "", "why_none": "subagent prompt"}
            assert _match(proc.url, {"prompt": 3})[0] == 400
        finally:
            assert proc.stop() == 0

        try:  # serve stopped: the turn goes on without context and the prompt waits in the spool
            sent = _turn(cc, env, project, stub, "trello board ids weekday lists again")
            assert "hivestream-stubs" not in sent
            spooled = [p.read_bytes() for p in (tmp_path / "hook-spool").glob("**/*.hook")]
            assert any(b'"prompt":"trello board ids weekday lists again"' in s for s in spooled), spooled
        finally:
            stub.close()

    served = _rows(db)
    assert [(r[0], r[1], r[2]) for r in served["stubs"]] == [("shop", 1, "Trello API")]
    assert len(served["stub_messages"]) == 4 and len(served["stub_matches"]) == 3
    assert served["stubs"][0][STUB_COLS.index("match_count")] == 3
    rebuilt = tmp_path / "rebuilt.duckdb"
    r = hivestream("run", str(Path(f"{db}.hook-events")), "--db", str(rebuilt))
    assert r.returncode == 0, r.stderr
    assert _rows(rebuilt) == served


STUB_COLS = ["channel", "stub_id", "title", "stub_text", "archive_path", "archive_tokens", "model", "dim", "refresh_source", "refresh_spec",
             "created_at_ms", "last_matched_at_ms", "last_refreshed_at_ms", "match_count", "deleted"]


def test_the_match_route_refuses_without_a_token_the_agent_scope_or_live_stubs(tmp_path: Path) -> None:
    (tmp_path / "tokens").write_text("gw-hooks tok-hooks-0123456789\ngw-agent tok-agent-0123456789 scopes=agent\n")
    proc = ServeProc(tmp_path / "m.duckdb", "--no-report", "--no-stubs-live", "--tokens-file", str(tmp_path / "tokens"))
    body = json.dumps({"prompt": "hi", "channel": "c"}).encode()
    try:
        def post(token: str | None) -> int:
            headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
            try:
                with urllib.request.urlopen(urllib.request.Request(f"{proc.url}/api/stubs/match", data=body, headers=headers), timeout=10) as r:
                    return int(r.status)
            except urllib.error.HTTPError as e:
                return e.code

        assert (post(None), post("tok-hooks-0123456789"), post("tok-agent-0123456789")) == (401, 403, 409)
    finally:
        assert proc.stop() == 0


def test_the_nightly_refresh_puts_its_events_on_the_log(tmp_path: Path) -> None:
    import asyncio
    import threading

    from hivestream.services.stub_serve import start_nightly
    from hivestream.services.stubs import StubService
    from streams.stubs.events import StubUpserted, encode_embedding
    from streams.stubs.live import LiveStubs
    from tests.support.embeddings_fake import BowEmbedder, bag_of_words

    archive = tmp_path / "a.md"
    archive.write_text("## A\nnew text\n", encoding="utf-8")
    svc = StubService(LiveStubs(), BowEmbedder())
    svc.stub_event(StubUpserted(event_id="u", event_time_ms=1, stub_id=4, channel="shop", title="A", stub_text="a stub", archive_path=str(archive),
                                archive_tokens=1, embedding_b64=encode_embedding(bag_of_words("a stub", 64)), model="fake-bow", dim=64,
                                refresh_source="file-watch"))
    written: list[list[tuple[str, bytes, bytes]]] = []

    class Sink:
        async def write(self, records: list[tuple[str, bytes, bytes]]) -> str:
            written.append(records)
            return "log"

    loop = asyncio.new_event_loop()
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        nightly = start_nightly(svc, "03:20", Sink(), "hivestream.stub-events", loop)  # type: ignore[arg-type]
        summary = nightly.job()  # what the thread runs at 03:20 UTC
        nightly.stop()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
    assert summary == "1 refreshed, 0 unchanged, 0 skipped, 0 failed"
    [(topic, key, value)] = written[0]
    assert (topic, key, json.loads(value)["type"], json.loads(value)["stub_id"]) == ("hivestream.stub-events", b"shop", "stub-refreshed", 4)
