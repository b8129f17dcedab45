"""``hivestream serve`` restarted deep inside a log segment: SIGTERM and kill -9 under load, with and
without retention, after the log holds megabytes past where the reader's chunk ends. Every payload
answered 2xx is in ``frame_captures`` exactly once, and ``run`` over the log gives serve's tables."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import duckdb
import pytest

from streams.ingest.hook_log import segments
from tests.support.serve_harness import ServeProc, all_tables, hivestream, prompt

BODY = "y" * 3_000  # ~6.5 KB a record: 650 payloads pass the follower's 4 MiB chunk


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _payload(i: int) -> dict[str, Any]:
    return dict(prompt("deep", i), prompt=f"deep prompt {i} {BODY}")


async def _post(proc: list[ServeProc], first: int, n: int, acked: Counter[str], clients: int = 6, per: int = 20) -> int:
    """Post payloads ``first .. first+n-1`` in requests of ``per``, retrying each until it is answered 200
    (as the command hook's spool would); ``acked`` counts the 200s' event ids. Returns the failed attempts."""
    queue: asyncio.Queue[list[dict[str, Any]]] = asyncio.Queue()
    for i in range(first, first + n, per):
        queue.put_nowait([_payload(j) for j in range(i, min(first + n, i + per))])
    failed = [0]

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            part = queue.get_nowait()
            while True:
                try:
                    async with http.post(f"{proc[0].url}/v1/hooks/claude-code", json=part, timeout=aiohttp.ClientTimeout(total=30)) as r:
                        if r.status == 200:
                            got = await r.json()
                            assert got["accepted"] == len(part), got
                            acked.update(x["event_id"] for x in got["results"])
                            break
                        assert r.status == 503, (r.status, await r.text())
                except (TimeoutError, aiohttp.ClientError):
                    pass
                failed[0] += 1
                await asyncio.sleep(0.05)

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return failed[0]


@pytest.mark.parametrize("retain", [False, True], ids=["keep", "retain"])
def test_restarts_deep_in_a_segment_lose_nothing_acknowledged(tmp_path: Path, retain: bool) -> None:
    db = tmp_path / "memory.duckdb"
    port = _free_port()
    extra = ["--port", str(port), "--no-report", "--snapshot-every", "0", *(["--retain-bytes", "1"] if retain else [])]
    proc = [ServeProc(db, *extra, port=port)]
    acked: Counter[str] = Counter()
    try:
        asyncio.run(_post(proc, 0, 2_000, acked))  # ~7 MB: the position ends past 4 MiB of the first segment
        proc[0].wait_applied()
        assert proc[0].stop() == 0
        proc[0] = ServeProc(db, *extra, port=port)  # a clean restart deep inside the segment

        async def load_with_restarts() -> int:
            async def restarts() -> None:
                for target, how in ((2_600, "kill"), (3_400, "term"), (4_300, "kill")):
                    while sum(acked.values()) < target:
                        await asyncio.sleep(0.02)
                    if how == "kill":
                        proc[0].kill()
                    else:
                        assert proc[0].stop() == 0
                    proc[0] = await asyncio.to_thread(ServeProc, db, *extra, port=port)

            r = asyncio.get_running_loop().create_task(restarts())
            failed = await _post(proc, 2_000, 4_000 if retain else 3_000, acked)
            await r
            return failed

        failed = asyncio.run(load_with_restarts())
        assert failed > 0, "no request was cut by a restart: the test did not test anything"
        n = proc[0].wait_applied(180)
        if retain:  # the first 16 MiB segment is sealed and applied: retention (every 10 s) deletes it, nothing else
            for _ in range(150):
                if segments(Path(f"{db}.hook-events"))[0].base > 0:
                    break
                asyncio.run(asyncio.sleep(0.2))
            assert segments(Path(f"{db}.hook-events"))[0].base > 0, "retention never deleted the applied segment"
        _status, health = proc[0].health()
        assert health["pending"] == 0 and health["applied"] == n
    finally:
        assert proc[0].stop() == 0, proc[0].text()[-2000:]
    assert len(acked) == (6_000 if retain else 5_000)
    con = duckdb.connect(str(db), read_only=True)
    try:
        per_id = dict(con.execute("SELECT event_id, count(*) FROM frame_captures GROUP BY event_id").fetchall())
        dead = con.execute("SELECT DISTINCT reason FROM dead_letters").fetchall()
    finally:
        con.close()
    assert set(per_id) == set(acked) and set(per_id.values()) == {1}  # every 2xx payload, exactly once
    assert set(dead) <= {("torn_record",)}  # a write a kill -9 cut (never answered) is all that may be dead-lettered
    if not retain:  # run over the log gives serve's file, table for table
        r = hivestream("run", f"{db}.hook-events", "--db", str(tmp_path / "rebuilt.duckdb"))
        assert r.returncode == 0, r.stderr
        served, rebuilt = all_tables(db), all_tables(tmp_path / "rebuilt.duckdb")
        assert {t: v for t, v in rebuilt.items() if t != "dedup_state"} == {t: v for t, v in served.items() if t != "dedup_state"}
        assert json.loads(hivestream("query", "totals", "--db", str(db), "--format", "json").stdout)[0]["captures"] == 5_000


def test_run_and_kb_run_resume_a_file_whose_position_is_deep_in_a_segment(tmp_path: Path) -> None:
    """``run LOGDIR --db`` and ``kb run LOGDIR --db`` over a file that already holds 12 MB of the log
    (past ``read_chunks``' 8 MiB chunk) apply what the log gained since."""
    db = tmp_path / "memory.duckdb"
    proc = [ServeProc(db, "--no-report", "--snapshot-every", "0")]
    acked: Counter[str] = Counter()
    try:
        asyncio.run(_post(proc, 0, 1_800, acked))
        proc[0].wait_applied()
    finally:
        assert proc[0].stop() == 0
    log_dir = f"{db}.hook-events"
    rebuilt, kb_only = tmp_path / "rebuilt.duckdb", tmp_path / "kb.duckdb"
    for args in (("run", log_dir, "--db", str(rebuilt)), ("kb", "run", log_dir, "--db", str(kb_only))):
        assert hivestream(*args).returncode == 0
    proc[0] = ServeProc(db, "--no-report", "--snapshot-every", "0")
    try:
        asyncio.run(_post(proc, 1_800, 20, acked))
        proc[0].wait_applied()
    finally:
        assert proc[0].stop() == 0
    r = hivestream("run", log_dir, "--db", str(rebuilt))
    k = hivestream("kb", "run", log_dir, "--db", str(kb_only))
    assert r.returncode == 0 and k.returncode == 0, r.stderr + k.stderr
    served = all_tables(db)
    assert all_tables(rebuilt)["frame_captures"] == served["frame_captures"] and len(served["frame_captures"]) == 1_820
    assert all_tables(kb_only)["kb_positions"] == served["kb_positions"]


def test_an_unreadable_log_never_moves_the_applied_position(tmp_path: Path) -> None:
    """Records the reader cannot give (their segment removed under serve) are not jumped over: the
    position stays, ``/healthz``'s error says why, and retention keeps the log."""
    from hivestream.embedded.log_run import open_log_run
    from hivestream.serve.follower import Follower, FollowerOptions
    from hivestream.serve.log_writer import HookLog, Retention
    from hivestream.serve.progress import Progress
    from streams.ingest.hook_log import HOOK_EVENTS

    hl = HookLog(tmp_path / "log", segment_bytes=300)
    for i in range(5):
        hl.append([[(HOOK_EVENTS, b"k", json.dumps(_payload(i)).encode())]], 1)
    for seg in segments(tmp_path / "log"):
        seg.path.unlink()
    progress = Progress()
    f = Follower(hl, lambda: open_log_run(tmp_path / "m.duckdb"), progress, FollowerOptions(retention=Retention(max_bytes=1), idle_s=0.01))
    try:
        assert f.step() is False and f.step() is False
        assert progress.applied == 0 and "no record of the log readable at offset 0" in progress.last_error
    finally:
        f.close()
        hl.close()
