"""``hivestream serve`` as a process, no broker and no JDK: live payloads become the same tables as
``run`` over its log (byte for byte) and as ``run`` over the same payloads in a file; queries and
the report while it runs; kill -9 under load from dozens of clients; the log's bound and a full
disk (503 with ``Retry-After``, the command hook spools); a torn tail; one process per log and
file; the service file."""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import httpx
import pytest

from streams.frames.dedup import DedupFold
from streams.ingest.hook_log import HOOK_EVENTS, read_chunks
from tests.support.ingest_harness import corpus_payloads, frames_of, payload_lines
from tests.support.kafka_harness import frame_tables
from tests.support.kb_fixtures import scenario_lines
from tests.support.serve_harness import REPO_ROOT, ServeProc, all_tables, gateway_echo, hivestream, prompt
from tests.support.session_sets import generated_set

KB_TABLES = ("experience_submissions", "experience_redactions", "experience_reviews", "experiences", "kb_telemetry", "kb_dead_letters",
             "kb_dedup_state", "kb_positions", "kb_reminder_counters", "kb_hooks_seen")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _memory_calls(n: int = 9, t0: int = 1_790_000_500_000) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        tool = "mcp__hive-mind__recall_memory" if i % 2 else "mcp__hive-mind__save_memory"
        out.append({"hook_event_name": "PostToolUse", "session_id": f"mem-{i % 3}", "ts": t0 + i * 60_000, "tool_name": tool,
                    "tool_input": {"query": f"release checklist {i}", "api_key": "sk-ant-api03-" + "x" * 40 if i == 1 else ""},
                    "tool_response": {"memories": [{"id": i}]}})
    return out


def _workload() -> list[tuple[str, dict[str, Any]]]:
    """(route, payload): prompts with the gateway's echo of each, memory tool calls, KnowHub's day, the generated sessions."""
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(300):
        out.append(("claude-code", prompt("live", i)))
        if i % 3 == 0:
            out.append(("openclaw", gateway_echo("live", i)))
    out += [("claude-code", p) for p in _memory_calls()]
    out += [("auto", p) for p in scenario_lines()]
    with tempfile.TemporaryDirectory() as d:
        sessions = generated_set(Path(d))
        out += corpus_payloads([*sessions.claude_files(), *sessions.codex_files()])[:1500]
    return out


async def _post_mixed(url: str, work: list[tuple[str, dict[str, Any]]], clients: int = 8,
                      by_id: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """Post ``work`` by ``clients`` clients as single posts, arrays and NDJSON; the accepted event ids
    (``by_id``, when given, gets the payload of each)."""
    chunks: list[tuple[str, bytes, int, int]] = []
    i = 0
    while i < len(work):
        rt, p = work[i]
        shape = i % 3
        if shape == 0:
            chunks.append((rt, json.dumps(p).encode(), 1, i))
            i += 1
        else:
            part = work[i:i + (30 if shape == 1 else 17)]
            body = json.dumps([q for _r, q in part]) if shape == 1 else "\n".join(json.dumps(q) for _r, q in part)
            chunks.append(("auto", body.encode(), len(part), i))
            i += len(part)
    queue: asyncio.Queue[tuple[str, bytes, int, int]] = asyncio.Queue()
    for c in chunks:
        queue.put_nowait(c)
    ids: list[str] = []

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            rt, body, n, first = queue.get_nowait()
            async with http.post(f"{url}/v1/hooks/{rt}", data=body) as r:
                got = await r.json()
                assert r.status == 200 and got["accepted"] == n and got["durable"] == "log", (r.status, got)
                ids.extend(x["event_id"] for x in got["results"])
                if by_id is not None:
                    by_id.update((x["event_id"], work[first + x["index"]][1]) for x in got["results"])

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return ids


def test_live_payloads_give_the_tables_run_gives_over_the_log_and_over_a_file(tmp_path: Path) -> None:
    db, report = tmp_path / "memory.duckdb", tmp_path / "live-report.html"
    work = _workload()
    proc = ServeProc(db, "--snapshot-every", "0.2", "--report", str(report), "--report-every", "1")
    try:
        assert f"DuckDB: {db}" in proc.text() and f"report: {report}" in proc.text() and "hook-events" in proc.text()
        by_id: dict[str, dict[str, Any]] = {}
        ids = asyncio.run(_post_mixed(proc.url, work, by_id=by_id))
        assert len(ids) == len(work)
        bad = [httpx.post(proc.url + "/v1/hooks/codex", content=b"not json at all", timeout=30),
               httpx.post(proc.url + "/v1/hooks/auto", json=[{"foo": "bar"}, prompt("mixed", 1)], timeout=30),
               httpx.post(proc.url + "/v1/hooks/claude-code", json={"hook_event_name": "Stop", "ts": "the day after tomorrow"}, timeout=30)]
        assert [r.status_code for r in bad] == [400, 200, 422]
        proc.wait_applied()
        # queries and the report while serve holds the file (serve answers them)
        deadline = time.monotonic() + 30
        while True:
            q = hivestream("query", "totals", "--db", str(db), "--format", "json")
            assert q.returncode == 0, q.stderr
            totals = json.loads(q.stdout)[0]
            if (totals["captures"] >= len(work) - 20 and totals["dead_letters"] >= 3) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert "answered by hivestream serve" in q.stderr and totals["dead_letters"] >= 3
        mem = hivestream("query", "memory-reads-per-write", "--db", str(db), "--format", "json")
        assert mem.returncode == 0 and json.loads(mem.stdout), mem.stderr
        page = tmp_path / "report.html"
        rep = hivestream("report", "--db", str(db), "--out", str(page))
        assert rep.returncode == 0, rep.stderr
        assert 'data-chart="captures-per-day" data-state="plot"' in page.read_text()
        deadline = time.monotonic() + 30
        while not (report.exists() and 'data-state="plot"' in report.read_text()) and time.monotonic() < deadline:
            time.sleep(0.3)
        assert 'data-chart="captures-per-day" data-state="plot"' in report.read_text()
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    log_dir = Path(f"{db}.hook-events")
    served = all_tables(db)
    assert len(served["frames"]) > 300 and len(served["memory_tool_calls"]) >= 9 and served["experience_submissions"]
    assert {r[4] for r in served["dead_letters"]} >= {"malformed_json", "unknown_payload", "bad_timestamp"}
    assert not any("sk-ant-api03" in str(r) for r in served["memory_tool_calls"])
    # run over the log (copied elsewhere: the input name is the log's id, not its path): the same file, table for table
    copy = tmp_path / "elsewhere" / "log"
    copy.parent.mkdir()
    os.rename(log_dir, copy)
    r = hivestream("run", str(copy), "--db", str(tmp_path / "rebuilt.duckdb"))
    assert r.returncode == 0, r.stderr
    assert all_tables(tmp_path / "rebuilt.duckdb") == served
    k = hivestream("kb", "run", str(copy), "--db", str(tmp_path / "kb-only.duckdb"))
    assert k.returncode == 0, k.stderr
    kb_only = all_tables(tmp_path / "kb-only.duckdb")
    assert all(kb_only[t] == served[t] for t in KB_TABLES)
    # and the same frames as `run` over the same payloads in a file
    # and the same frames as `run` over the same payloads in a file in the order the log holds them (the
    # first capture of a body is its frame's writer; concurrent clients decide which arrives first)
    by_id[bad[1].json()["results"][1]["event_id"]] = prompt("mixed", 1)
    order = [json.loads(r.value)["event_id"] for chunk in read_chunks(copy) for r in chunk if r.kind == HOOK_EVENTS]
    in_order = [by_id[e] for e in dict.fromkeys(order)]
    assert frame_tables(db) == frames_of(payload_lines([("auto", p) for p in in_order]), tmp_path, "file")


async def _load(url_of: list[str], requests: list[tuple[bytes, int]], clients: int, acked: Counter[str]) -> int:
    """Post every request until it is answered 200 (retrying through connection errors and 503s, as a hook
    spool would); ``acked`` counts the event ids of the 200s. Returns the attempts that failed."""
    queue: asyncio.Queue[tuple[bytes, int]] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)
    failed = [0]

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body, n = queue.get_nowait()
            while True:
                try:
                    async with http.post(f"{url_of[0]}/v1/hooks/auto", data=body, timeout=aiohttp.ClientTimeout(total=30)) as r:
                        if r.status == 200:
                            got = await r.json()
                            assert got["accepted"] == n, got
                            acked.update(x["event_id"] for x in got["results"])
                            break
                        assert r.status == 503, (r.status, await r.text())
                except (TimeoutError, aiohttp.ClientError):
                    pass
                failed[0] += 1
                await asyncio.sleep(0.05)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients, force_close=False)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return failed[0]


def _swept(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """A ``dedup_state`` table after a full sweep of the closed frames (:meth:`DedupFold.evict`)."""
    core = DedupFold(state={k: json.loads(v) for k, v in rows})
    core.evict()
    return dict(core.state)


def _order_free(tables: dict[str, Any]) -> dict[str, Any]:
    """Frames and captures without what depends on the arrival order of concurrent requests (the
    frame's writer and its fields, which capture is the duplicate)."""
    return {"frames": sorted((r[1], r[8], r[9], r[10], tuple(r[11])) for r in tables["frames"]),  # key, first/last seen, count, sources
            "captures": sorted((r[0], r[2], r[3], r[4], r[5]) for r in tables["captures"])}  # id, source, session, event, time


def test_kill9_under_load_from_dozens_of_clients_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    rnd = random.Random(int(os.environ.get("HIVESTREAM_TEST_SEED", "21")))
    payloads: list[dict[str, Any]] = []
    for i in range(20_000):
        payloads.append(prompt("k9", i, session=f"k9-{i % 50}") if i % 4 else gateway_echo("k9", i - 1))
    requests: list[tuple[bytes, int]] = []
    i = 0
    while i < len(payloads):
        n = rnd.choice([1, 1, 3, 10, 40])
        part = payloads[i:i + n]
        requests.append((json.dumps(part[0] if len(part) == 1 else part).encode(), len(part)))
        i += len(part)
    port = _free_port()
    state: dict[str, Any] = {"proc": ServeProc(db, "--port", str(port), "--snapshot-every", "0.5", "--no-report", port=port)}
    url_of = [state["proc"].url]
    acked: Counter[str] = Counter()
    kills = sorted(rnd.sample(range(3_000, 17_000), 2))

    async def main() -> int:
        async def killer() -> None:
            for target in kills:
                while sum(acked.values()) < target:
                    await asyncio.sleep(0.02)
                state["proc"].kill()
                state["proc"] = await asyncio.to_thread(ServeProc, db, "--port", str(port), "--snapshot-every", "0.5", "--no-report", port=port)

        k = asyncio.get_running_loop().create_task(killer())
        failed = await _load(url_of, requests, 32, acked)
        await k
        return failed

    try:
        failed = asyncio.run(main())
        n = state["proc"].wait_applied(180)
        assert n >= len(payloads)
    finally:
        assert state["proc"].stop() == 0
    assert failed > 0, "no request was cut by a kill: the test did not test anything"
    assert len(acked) == len(payloads)  # every payload answered 200 in the end (its retries carry the same event id)
    con = duckdb.connect(str(db), read_only=True)
    try:
        per_id = dict(con.execute("SELECT event_id, count(*) FROM frame_captures GROUP BY event_id").fetchall())
    finally:
        con.close()
    assert set(per_id) == set(acked) and set(per_id.values()) == {1}  # in the frames exactly once
    r = hivestream("run", f"{db}.hook-events", "--db", str(tmp_path / "rebuilt.duckdb"))
    assert r.returncode == 0, r.stderr
    rebuilt, served = all_tables(tmp_path / "rebuilt.duckdb"), all_tables(db)
    assert {t: v for t, v in rebuilt.items() if t != "dedup_state"} == {t: v for t, v in served.items() if t != "dedup_state"}
    # the dedup core sweeps closed frames every 20,000 captures of a process, so after a restart it sweeps at other
    # points: the live state is the same, what differs is only garbage not yet collected
    assert _swept(rebuilt["dedup_state"]) == _swept(served["dedup_state"]) and len(rebuilt["dedup_state"]) > 100
    # the frames do not depend on which client came first, except for who wrote each (first capture wins)
    want = _order_free(frames_of([json.dumps(p).encode() for p in payloads], tmp_path, "file"))
    bodies = {p.get("prompt") or p["context"]["content"] for p in payloads}
    assert _order_free(frame_tables(db)) == want and len(want["frames"]) == len(bodies) > 15_000


def _hook(url: str, spool: Path, payload: dict[str, Any]) -> None:
    out = subprocess.run([sys.executable, "-m", "hivestream", "hook", "claude-code", "--timeout", "5"], input=json.dumps(payload), text=True,
                         capture_output=True, timeout=60, cwd=REPO_ROOT,
                         env={**os.environ, "HIVESTREAM_INGEST_URL": url, "HIVESTREAM_SPOOL_DIR": str(spool)})
    assert out.returncode == 0 and out.stdout == "", out.stderr


def _refused_until(url: str, tag: str, acked: list[str], limit: int = 400) -> httpx.Response:
    for b in range(limit):
        body = [dict(prompt(tag, b * 50 + i), prompt=f"{tag} {b} {i} " + "x" * 2_000) for i in range(50)]
        r = httpx.post(url + "/v1/hooks/claude-code", json=body, timeout=60)
        if r.status_code != 200:
            return r
        acked += [x["event_id"] for x in r.json()["results"]]
    raise AssertionError("never refused")


@pytest.mark.parametrize("fault", ["log_bound", "disk_full"])
def test_a_full_log_or_disk_is_503_with_retry_after_and_the_hook_spools(tmp_path: Path, fault: str) -> None:
    db, spool = tmp_path / "memory.duckdb", tmp_path / "hook-spool"
    port = _free_port()

    def small_disk() -> None:  # every file this process writes stops at 3 MB: the log's segment, DuckDB's file and WAL
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3_000_000, 3_000_000))

    extra = ["--log-max-bytes", "1500000"] if fault == "log_bound" else []
    proc = ServeProc(db, "--port", str(port), "--no-report", "--snapshot-every", "0", *extra, port=port,
                     preexec=small_disk if fault == "disk_full" else None)
    acked: list[str] = []
    try:
        r = _refused_until(proc.url, fault, acked)
        assert r.status_code == 503 and int(r.headers["Retry-After"]) > 0
        assert r.json()["error"] == ("log_full" if fault == "log_bound" else "log_error")
        status, health = proc.health()
        assert status == 503 and health["status"] in {"log_full", "log_error"}
        late = dict(prompt(fault, 99_999), prompt="too late for the full log " + "y" * 200_000)  # more than is left
        _hook(proc.url, spool, late)
        assert len(list(spool.glob("*.hook"))) == 1  # kept by the hook, not lost
        time.sleep(0.5)
    finally:
        proc.kill()  # a kill -9 on top: everything answered 200 must survive it
    assert acked
    proc = ServeProc(db, "--port", str(port), "--no-report", port=port)  # room again
    try:
        assert proc.health()[0] == 200
        f = hivestream("hook", "flush", env={"HIVESTREAM_INGEST_URL": proc.url, "HIVESTREAM_SPOOL_DIR": str(spool)})
        assert f.returncode == 0 and "forwarded 1, 0 left" in f.stderr, f.stderr
        proc.wait_applied()
    finally:
        assert proc.stop() == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        captured = {r[0] for r in con.execute("SELECT event_id FROM frame_captures").fetchall()}
        bodies = {r[0] for r in con.execute("SELECT content FROM frames").fetchall()}
    finally:
        con.close()
    assert set(acked) <= captured
    assert any(b.endswith(late["prompt"]) for b in bodies)


def test_a_torn_tail_is_dead_lettered_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--no-report")
    try:
        acked = asyncio.run(_post_mixed(proc.url, [("claude-code", prompt("torn", i)) for i in range(200)], clients=4))
    finally:
        proc.kill()
    seg = sorted(Path(f"{db}.hook-events").glob("*.hlog"))[-1]
    whole = seg.read_bytes()
    with seg.open("ab") as f:  # power loss in the middle of the next write: half a record, then zeros
        f.write(whole[:40] + b"\0" * 300)
    proc = ServeProc(db, "--no-report")
    try:
        proc.wait_applied()
        assert "torn bytes after its last whole record" in proc.text()
        more = asyncio.run(_post_mixed(proc.url, [("claude-code", prompt("after", i)) for i in range(20)], clients=2))
        proc.wait_applied()
    finally:
        assert proc.stop() == 0
    con = duckdb.connect(str(db), read_only=True)
    try:
        captured = {r[0] for r in con.execute("SELECT event_id FROM frame_captures").fetchall()}
        torn = con.execute("SELECT reason, octet_length(original) FROM dead_letters").fetchall()
    finally:
        con.close()
    assert set(acked) | set(more) == captured
    assert torn == [("torn_record", 340)]
    r = hivestream("run", f"{db}.hook-events", "--db", str(tmp_path / "rebuilt.duckdb"))
    assert r.returncode == 0 and "skipped" not in r.stderr, r.stderr
    assert all_tables(tmp_path / "rebuilt.duckdb") == all_tables(db)


def test_one_serve_per_log_and_per_file(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    proc = ServeProc(db, "--no-report")
    try:
        same_log = ServeProc(db, "--no-report", expect_ready=False)
        assert same_log.proc.wait(60) == 2
        assert "held by another hivestream serve" in same_log.text()
        same_db = ServeProc(db, "--no-report", "--log-dir", str(tmp_path / "other-log"), expect_ready=False)
        assert same_db.proc.wait(60) == 2
        assert "cannot open" in same_db.text() and "Traceback" not in same_db.text()
        public = ServeProc(tmp_path / "x.duckdb", "--host", "0.0.0.0", expect_ready=False)
        assert public.proc.wait(60) == 2 and "refusing to listen on 0.0.0.0" in public.text()
    finally:
        assert proc.stop() == 0


def test_install_service_writes_a_unit_that_runs_the_same_serve(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CONFIG_HOME": ""}
    r = hivestream("serve", "--db", "rel/memory.duckdb", "--port", "8899", "--retain-days", "30", "--install-service",
                   "--service-platform", "linux", env=env)
    assert r.returncode == 0, r.stderr
    unit = (home / ".config" / "systemd" / "user" / "hivestream-serve.service").read_text()
    exec_line = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    assert f"serve --db {REPO_ROOT / 'rel' / 'memory.duckdb'}" in exec_line and "--port 8899" in exec_line and "--retain-days 30" in exec_line
    assert "systemctl --user enable --now hivestream-serve.service" in r.stdout and "enable-linger" in r.stdout
    assert not (REPO_ROOT / "rel").exists()  # nothing served, nothing created
    m = hivestream("serve", "--db", str(tmp_path / "m.duckdb"), "--install-service", "--service-platform", "darwin", env=env)
    assert m.returncode == 0 and (home / "Library" / "LaunchAgents" / "io.hivestream.serve.plist").exists()
    assert "launchctl bootstrap" in m.stdout
