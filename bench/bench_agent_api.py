"""Benchmark the agent API's reads and writes.

``--only index`` (default: all parts): search (experiences) and recall (frames) at ``--sizes``
documents (default 100,000 and 1,000,000), through the services as serve runs them
(:class:`hivestream.services.experiences.ExperienceService`, :class:`hivestream.services.recall.RecallService`
on a cursor of one open DuckDB file: index lookup, then the hits' rows read back), one query at a
time, against the anchor SQLite FTS5 (what hive-mind recalls with; ``porter unicode61`` tokenizer,
``bm25()`` ranking, the hits' columns read in the same statement) on the same documents and the same
queries in the same run. Documents: generated English-like text (a 30,000-word vocabulary drawn
Zipf-like; task 8 words, resource 4, result 25; a frame's body 40 words in one of 50 projects);
queries of 1-3 words drawn the same way. Printed: queries/s, p50 and p99 (ms), each ratio
hivestream/FTS5 (rates: >1 is faster; latencies: <1 is faster), and each index's build time.

``--only load``: one ``hivestream serve`` holding ``--seeded`` approved experiences; the p50/p99 of
``GET /api/search`` one at a time for ``--seconds`` while nothing else runs (the anchor), then while
50 concurrent clients post single hook events as fast as serve takes them (its full rate).

``--only writes``: on the same serve, ``--writes`` times: ``POST /api/submit`` then ``GET
/api/content/{id}`` (submit → visible to its writer), and ``POST /api/approve/{id}`` then
``GET /api/search`` until it is found (approve → searchable); the anchor is ``POST /v1/hooks/knowhub``
of an experience line (durable, not yet applied) in the same run.

Usage: ``python bench/bench_agent_api.py [--only index|load|writes] [--sizes 100000,1000000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from hivestream.services.experiences import Caller, ExperienceService  # noqa: E402
from hivestream.services.readers import CursorReader  # noqa: E402
from hivestream.services.recall import RecallService  # noqa: E402
from projections.experiences.schema import KB_DDL  # noqa: E402
from projections.frames.schema import DDL  # noqa: E402
from streams.experiences.settings import ExperienceSettings  # noqa: E402

CALLER = Caller(agent_id="bench")


def vocabulary(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct made-up words of 3-10 letters."""
    letters = np.array(list("abcdefghijklmnoprstuvwy"))
    out: set[str] = set()
    while len(out) < n:
        for ln in rng.integers(3, 11, size=n):
            out.add("".join(rng.choice(letters, size=int(ln))))
            if len(out) >= n:
                break
    return sorted(out)


class Words:
    """Zipf-like draws from a vocabulary."""

    def __init__(self, words: list[str], rng: np.random.Generator) -> None:
        self.words = np.array(words)
        w = 1.0 / np.arange(1, len(words) + 1) ** 0.9
        self.p = w / w.sum()
        self.rng = rng

    def texts(self, n: int, k: int) -> list[str]:
        """``n`` texts of ``k`` words."""
        idx = self.rng.choice(len(self.words), size=(n, k), p=self.p)
        return [" ".join(row) for row in self.words[idx]]


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


@contextlib.contextmanager
def reader_on(path: Path) -> Iterator[CursorReader]:
    """A reader on cursors of one open connection (as serve lends them), its marker fixed (nothing changes)."""
    con = duckdb.connect(str(path), read_only=True)

    @contextlib.contextmanager
    def cursor() -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        cur = con.cursor()
        try:
            yield cur, path
        finally:
            cur.close()

    try:
        yield CursorReader(cursor, lambda: 0)
    finally:
        con.close()


def build_files(n: int, work: Path, words: Words, rng: np.random.Generator) -> tuple[Path, Path, list[tuple[str, str, str]], list[tuple[str, str]]]:
    """The DuckDB file (experiences, frames) and the same documents as lists for FTS5."""
    tasks, resources, results = words.texts(n, 8), words.texts(n, 4), words.texts(n, 25)
    bodies = words.texts(n, 40)
    projects = [f"p{i}" for i in rng.integers(0, 50, size=n)]
    db = work / f"docs-{n}.duckdb"
    with duckdb.connect(str(db)) as con:
        for stmt in KB_DDL + DDL:
            con.execute(stmt)
        ids = [f"e{i:08d}" for i in range(n)]
        exp = pa.table({"experience_id": ids, "dedup_key": ids, "origin": ["submitted"] * n, "task": tasks, "resource": resources,
                        "result": results, "status": ["approved"] * n, "confidence": [0.8] * n, "first_agent_id": ["a"] * n,
                        "agent_ids": [["a"]] * n, "submit_count": [1] * n, "redaction_count": [0] * n, "injection_flag": [False] * n,
                        "injection_rules": [[]] * n, "first_seen_ms": [0] * n, "last_seen_ms": [0] * n})
        con.register("_e", exp)
        con.execute("INSERT INTO experiences BY NAME SELECT * FROM _e")
        con.execute("""INSERT INTO experience_submissions SELECT experience_id, experience_id, dedup_key, 'submitted', task, resource, result,
                       confidence, 'a', '', '', 'kb_submit', 'api', 'strict', 0, [], true, 0, 0, false FROM experiences""")
        fids = [f"f{i:08d}" for i in range(n)]
        frames = pa.table({"frame_id": fids, "dedup_key": fids, "body_hash": fids,
                           "content": [f"[hm src:claude-code session:s{i % 997} event:user-prompt-submit project:{p}] {b}"
                                       for i, (p, b) in enumerate(zip(projects, bodies, strict=True))],
                           "source": ["claude-code"] * n, "session": [f"s{i % 997}" for i in range(n)], "event_type": ["user-prompt-submit"] * n,
                           "project": projects, "first_seen_ms": [0] * n, "last_accessed_ms": [0] * n, "access_count": [1] * n,
                           "sources": [["claude-code"]] * n})
        con.register("_f", frames)
        con.execute("INSERT INTO frames BY NAME SELECT * FROM _f")
        con.execute("CHECKPOINT")
    return db, db, list(zip(tasks, resources, results, strict=True)), list(zip(bodies, projects, strict=True))


def fts5(exps: list[tuple[str, str, str]], frames: list[tuple[str, str]]) -> tuple[sqlite3.Connection, float]:
    """The FTS5 anchor's database (in memory) and its build time (s)."""
    t = time.perf_counter()
    con = sqlite3.connect(":memory:", check_same_thread=False)
    con.execute("CREATE VIRTUAL TABLE exp USING fts5(task, resource, result, tokenize='porter unicode61')")
    con.executemany("INSERT INTO exp (task, resource, result) VALUES (?, ?, ?)", exps)
    con.execute("CREATE VIRTUAL TABLE fr USING fts5(body, project UNINDEXED, tokenize='porter unicode61')")
    con.executemany("INSERT INTO fr (body, project) VALUES (?, ?)", frames)
    con.commit()
    return con, time.perf_counter() - t


def timed(fn: Callable[[Any], Any], items: list[Any]) -> tuple[float, float, float, int]:
    """(queries/s, p50 ms, p99 ms, hits) of ``fn`` over ``items`` one at a time."""
    lat: list[float] = []
    hits = 0
    t0 = time.perf_counter()
    for it in items:
        t = time.perf_counter()
        hits += len(fn(it))
        lat.append((time.perf_counter() - t) * 1000)
    total = time.perf_counter() - t0
    return len(items) / total, statistics.median(lat), pct(lat, 0.99), hits


def bench_index(sizes: list[int], n_queries: int) -> None:
    rng = np.random.default_rng(7)
    words = Words(vocabulary(30_000, rng), rng)
    queries = [" ".join(words.texts(1, int(k))[0].split()) for k in rng.integers(1, 4, size=n_queries)]
    projects = [f"p{i}" for i in rng.integers(0, 50, size=n_queries)]
    print(f"# search and recall, {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    print("| documents | operation | hivestream q/s | p50 ms | p99 ms | FTS5 q/s | p50 ms | p99 ms | rate ratio | p99 ratio "
          "| index build s (hivestream / FTS5) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            db, _same, exps, frames = build_files(n, Path(tmp), words, rng)
            anchor, fts_build = fts5(exps, frames)
            with reader_on(db) as reader:
                svc = ExperienceService(reader, None, ExperienceSettings())
                rec = RecallService(reader)
                t = time.perf_counter()
                svc._search_sync("warm", 5, None, False, CALLER)
                build_exp = time.perf_counter() - t
                t = time.perf_counter()
                rec._search_sync("warm", 5, "p1", False)
                build_fr = time.perf_counter() - t

                def hs_search(q: str, svc: ExperienceService = svc) -> list[Any]:
                    return svc._search_sync(q, 5, None, False, CALLER)

                def hs_recall(qp: tuple[str, str], rec: RecallService = rec) -> list[Any]:
                    return rec._search_sync(qp[0], 5, qp[1], False)

                def match(q: str) -> str:
                    return " OR ".join(f'"{w}"' for w in q.split())

                def fts_search(q: str, anchor: sqlite3.Connection = anchor) -> list[Any]:
                    return anchor.execute("SELECT rowid, task, resource, result, bm25(exp) FROM exp WHERE exp MATCH ? ORDER BY rank LIMIT 5",
                                          [match(q)]).fetchall()

                def fts_recall(qp: tuple[str, str], anchor: sqlite3.Connection = anchor) -> list[Any]:
                    return anchor.execute("SELECT rowid, body, project, bm25(fr) FROM fr WHERE fr MATCH ? AND project = ? ORDER BY rank LIMIT 5",
                                          [match(qp[0]), qp[1]]).fetchall()

                for name, mine, theirs, items, builds in (
                        ("search", hs_search, fts_search, queries, (build_exp, fts_build)),
                        ("recall (one project of 50)", hs_recall, fts_recall, list(zip(queries, projects, strict=True)), (build_fr, fts_build))):
                    timed(mine, items[:20])
                    timed(theirs, items[:20])
                    a = timed(mine, items)
                    b = timed(theirs, items)
                    print(f"| {n:,} | {name} | {a[0]:,.0f} | {a[1]:.2f} | {a[2]:.2f} | {b[0]:,.0f} | {b[1]:.2f} | {b[2]:.2f} | "
                          f"**{a[0] / b[0]:.2f}** | {a[2] / b[2]:.2f} | {builds[0]:.1f} / {builds[1]:.1f} (FTS5: both tables) |", flush=True)
            anchor.close()
            db.unlink()


# --- serve ------------------------------------------------------------------------------------------------


def start_serve(db: Path) -> tuple[Any, str, str]:
    from tests.support.serve_harness import ServeProc

    s = ServeProc(db)
    token = json.loads(Path(f"{db}.serve").read_text())["ingest"]["review_token"]
    return s, s.url, token


def seed(url: str, token: str, n: int) -> None:
    import httpx

    words = Words(vocabulary(5000, np.random.default_rng(3)), np.random.default_rng(4))
    with httpx.Client(base_url=url, timeout=60) as c:
        for i, (task, res) in enumerate(zip(words.texts(n, 8), words.texts(n, 25), strict=True)):
            eid = c.post("/api/submit", json={"task": f"{task} {i}", "resource": "bench", "result": res}).json()["id"]
            c.post(f"/api/approve/{eid}", json={}, headers={"Authorization": f"Bearer {token}"})


async def post_load(url: str, stop: threading.Event, counter: list[int]) -> None:
    import aiohttp

    async def client(k: int) -> None:
        async with aiohttp.ClientSession() as session:
            i = 0
            while not stop.is_set():
                body = {"session_id": f"load-{k}", "hook_event_name": "UserPromptSubmit", "cwd": "/w/load",
                        "prompt": f"load {k} {i} keep the memory current", "event_time_ms": 1_790_000_000_000 + i}
                async with session.post(url + "/v1/hooks/claude-code", json=body) as r:
                    await r.read()
                    if r.status == 200:
                        counter[0] += 1
                i += 1

    await asyncio.gather(*(client(k) for k in range(50)))


def search_latencies(url: str, seconds: float, words: Words) -> list[float]:
    import httpx

    lat: list[float] = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=60) as c:
        while time.monotonic() < deadline:
            q = words.texts(1, 2)[0]
            t = time.perf_counter()
            r = c.get("/api/search", params={"q": q})
            lat.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text
    return lat


def bench_load(seeded: int, seconds: float) -> None:
    words = Words(vocabulary(5000, np.random.default_rng(3)), np.random.default_rng(5))
    with tempfile.TemporaryDirectory() as tmp:
        s, url, token = start_serve(Path(tmp) / "load.duckdb")
        try:
            seed(url, token, seeded)
            idle = search_latencies(url, seconds, words)
            stop, counter = threading.Event(), [0]
            loader = threading.Thread(target=lambda: asyncio.run(post_load(url, stop, counter)), daemon=True)
            loader.start()
            time.sleep(1)
            n0, t0 = counter[0], time.monotonic()
            busy = search_latencies(url, seconds, words)
            rate = (counter[0] - n0) / (time.monotonic() - t0)
            stop.set()
            loader.join(30)
        finally:
            s.stop()
    print(f"# search while serve ingests ({seeded:,} approved experiences, {seconds:g} s each)")
    print("| case | searches | p50 ms | p99 ms | ingest events/s | p99 ratio to idle |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| idle (anchor) | {len(idle):,} | {statistics.median(idle):.1f} | {pct(idle, 0.99):.1f} | 0 | 1.00 |")
    print(f"| 50 clients posting single events | {len(busy):,} | {statistics.median(busy):.1f} | {pct(busy, 0.99):.1f} | {rate:,.0f} | "
          f"**{pct(busy, 0.99) / pct(idle, 0.99):.2f}** |")


def bench_writes(n: int) -> None:
    import httpx

    words = Words(vocabulary(5000, np.random.default_rng(8)), np.random.default_rng(9))
    sub, appr, anchor = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        s, url, token = start_serve(Path(tmp) / "w.duckdb")
        review = {"Authorization": f"Bearer {token}"}
        try:
            with httpx.Client(base_url=url, timeout=60) as c:
                for i, (task, res) in enumerate(zip(words.texts(n, 8), words.texts(n, 25), strict=True)):
                    t = time.perf_counter()
                    line = {"type": "experience-submitted", "event_id": f"anchor-{i}", "task": f"anchor {task}", "resource": "r", "result": res}
                    assert c.post("/v1/hooks/knowhub", json=line).status_code == 200
                    anchor.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    eid = c.post("/api/submit", json={"task": f"unique{i} {task}", "resource": "bench", "result": res}).json()["id"]
                    assert c.get(f"/api/content/{eid}").status_code == 200
                    sub.append((time.perf_counter() - t) * 1000)
                    t = time.perf_counter()
                    c.post(f"/api/approve/{eid}", json={}, headers=review)
                    while eid not in [h["id"] for h in c.get("/api/search", params={"q": f"unique{i}", "limit": 20}).json()["results"]]:
                        time.sleep(0.001)
                    appr.append((time.perf_counter() - t) * 1000)
        finally:
            s.stop()
    print(f"# writes on serve ({n} of each, one at a time)")
    print("| operation | p50 ms | p99 ms | anchor: POST /v1/hooks/knowhub p50 / p99 ms | p50 ratio |")
    print("|---|---:|---:|---:|---:|")
    for name, xs in (("submit → visible to its writer (POST /api/submit, GET /api/content)", sub),
                     ("approve → searchable (POST /api/approve, GET /api/search until found)", appr)):
        print(f"| {name} | {statistics.median(xs):.1f} | {pct(xs, 0.99):.1f} | {statistics.median(anchor):.1f} / {pct(anchor, 0.99):.1f} | "
              f"**{statistics.median(xs) / statistics.median(anchor):.1f}** |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=["index", "load", "writes"])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--seeded", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--writes", type=int, default=200)
    a = ap.parse_args()
    if a.only in (None, "index"):
        bench_index([int(x) for x in a.sizes.split(",")], a.queries)
    if a.only in (None, "load"):
        bench_load(a.seeded, a.seconds)
    if a.only in (None, "writes"):
        bench_writes(a.writes)


if __name__ == "__main__":
    main()
