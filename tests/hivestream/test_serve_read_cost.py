"""What a read costs serve's ingest is bounded: heavy reads (the report, per-capture analytics) run
one at a time with a short line behind them and a 503 ``Retry-After`` past it, light queries keep
their own thread, the read threads run at a lower CPU priority, the report is kept while nothing new
is applied, and serve's DuckDB runs each query on one thread (in-process, no serve process)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest
from aiohttp.test_utils import TestClient, TestServer

import hivestream.report
from hivestream.embedded.log_run import open_log_run
from hivestream.serve import read_api
from hivestream.serve.progress import Progress
from hivestream.serve.read_api import HEAVY_QUEUE, QUERY_SETS, ReadApp
from hivestream.serve.read_gate import ReadGate
from projections.frames.schema import DDL
from projections.named_query import NamedQuery

AUTH = {"Authorization": "Bearer tok"}


def _reads(progress: Progress | None = None) -> tuple[ReadApp, ReadGate]:
    con = duckdb.connect()
    for stmt in DDL:
        con.execute(stmt)
    gate = ReadGate()
    gate.set(con, Path("mem.duckdb"))
    return ReadApp(gate, progress or Progress(), SimpleNamespace(next_offset=0), "tok"), gate  # type: ignore[arg-type]


async def test_heavy_reads_run_one_at_a_time_a_short_line_waits_and_one_more_is_503(monkeypatch: pytest.MonkeyPatch) -> None:
    running, most, release = [0], [0], threading.Event()
    lock = threading.Lock()

    def slow(_con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[object, ...]]]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(30)
        with lock:
            running[0] -= 1
        return ["x"], [(1,)]

    monkeypatch.setitem(QUERY_SETS["frames"], "window-whatif", NamedQuery("window-whatif", "", "", compute=slow))
    reads, gate = _reads()
    async with TestClient(TestServer(reads.build())) as client:
        heavy = [asyncio.create_task(client.post("/v1/query", json={"set": "frames", "name": "window-whatif"}, headers=AUTH))
                 for _ in range(HEAVY_QUEUE + 1)]

        async def lined_up() -> None:
            while running[0] == 0 or reads._heavy_waiting < HEAVY_QUEUE:
                await asyncio.sleep(0.01)

        try:
            await asyncio.wait_for(lined_up(), 20)
        finally:
            assert most[0] == 1, "two heavy reads ran at once"
        busy = await client.post("/v1/query", json={"set": "frames", "name": "window-whatif"}, headers=AUTH)
        assert busy.status == 503 and (await busy.json())["error"] == "busy" and int(busy.headers["Retry-After"]) > 0
        report = await client.get("/v1/report", headers=AUTH)  # the report is heavy too
        assert report.status == 503 and (await report.json())["error"] == "busy"
        light = await client.post("/v1/query", json={"set": "frames", "name": "totals"}, headers=AUTH)
        assert light.status == 200 and (await light.json())["rows"] == [[0, 0, 0, 0]]  # not behind the heavy one
        release.set()
        answers = await asyncio.gather(*heavy)
        assert [a.status for a in answers] == [200] * (HEAVY_QUEUE + 1)
    assert most[0] == 1
    reads.pool.shutdown()
    gate.set(None)


async def test_the_report_is_made_again_only_once_something_new_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    progress = Progress(applied=7)

    def render(_src: object, *, generated_at_ms: int) -> str:
        made.append(progress.applied)
        return f"<html>{len(made)}</html>"

    monkeypatch.setattr(hivestream.report, "render_html", render)
    reads, gate = _reads(progress)
    async with TestClient(TestServer(reads.build())) as client:
        pages = [await (await client.get("/v1/report", headers=AUTH)).text() for _ in range(3)]
        assert pages == ["<html>1</html>"] * 3 and made == [7]
        progress.applied = 9
        assert await (await client.get("/v1/report", headers=AUTH)).text() == "<html>2</html>"

        def render_while_applying(_src: object, *, generated_at_ms: int) -> str:
            made.append(progress.applied)
            progress.applied += 1  # a batch committed while the page was made: the page is not kept
            return f"<html>{len(made)}</html>"

        monkeypatch.setattr(hivestream.report, "render_html", render_while_applying)
        progress.applied = 11
        assert await (await client.get("/v1/report", headers=AUTH)).text() == "<html>3</html>"
        monkeypatch.setattr(hivestream.report, "render_html", render)
        assert await (await client.get("/v1/report", headers=AUTH)).text() == "<html>4</html>"
        assert await (await client.get("/v1/report", headers=AUTH)).text() == "<html>4</html>"
    assert made == [7, 9, 11, 12]
    reads.pool.shutdown()
    gate.set(None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own CPU priority is Linux's (setpriority on its task id)")
async def test_reads_run_at_a_lower_cpu_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []

    def nice(_con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[object, ...]]]:
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return ["nice"], [(seen[-1],)]

    monkeypatch.setitem(QUERY_SETS["frames"], "totals", NamedQuery("totals", "", "", compute=nice))
    reads, gate = _reads()
    async with TestClient(TestServer(reads.build())) as client:
        for _ in range(3):  # each of the pool's threads, whichever answers
            assert (await client.post("/v1/query", json={"set": "frames", "name": "totals"}, headers=AUTH)).status == 200
    base = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen and all(n >= min(19, base + 10) for n in seen), (seen, base)
    reads.pool.shutdown()
    gate.set(None)


def test_the_heavy_queries_are_the_analytics_and_those_computed_in_python() -> None:
    assert {"window-whatif", "one-sided-turns", "capture-lag"} <= read_api.HEAVY_QUERIES
    assert "totals" not in read_api.HEAVY_QUERIES and "captures-per-day" not in read_api.HEAVY_QUERIES


def test_serve_s_duckdb_runs_a_query_on_one_thread(tmp_path: Path) -> None:
    from hivestream.serve.app import SERVE_DUCKDB_THREADS

    run = open_log_run(tmp_path / "m.duckdb", duckdb_threads=SERVE_DUCKDB_THREADS)
    try:
        assert run.con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    finally:
        run.close()


async def test_a_heavy_read_whose_client_left_keeps_its_slot_until_its_work_ends() -> None:
    reads, gate = _reads()
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def first(_job: object) -> str:
        started.set()
        release.wait(30)
        order.append("first done")
        return "first"

    def second(_job: object) -> str:
        order.append("second ran")
        return "second"

    gone = asyncio.create_task(reads._heavy_in_pool(first))
    await asyncio.to_thread(started.wait, 30)
    gone.cancel()  # the client hung up; its computation goes on in the pool
    nxt = asyncio.create_task(reads._heavy_in_pool(second))
    await asyncio.sleep(0.3)
    assert order == [] and not nxt.done()
    release.set()
    assert await asyncio.wait_for(nxt, 30) == "second"
    assert order == ["first done", "second ran"]
    reads.pool.shutdown()
    gate.set(None)
