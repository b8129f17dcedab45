"""Benchmark ``hivestream serve``'s resident memory as its file grows: at 0 captures (the anchor) and
every ``--step`` captures up to ``--captures`` (400,000), then while it answers two reports and a
``window-whatif`` at once.

One ``serve`` per case, default options but the port, on a fresh DuckDB file; batches of 500
distinct prompts posted by 4 clients; after each step the bench waits until the dedup loop has
applied the whole log, then reads ``VmRSS`` of ``/proc/<pid>/status`` (and, at the end, ``VmHWM``,
the peak). Two cases, since what serve must hold depends on the captures' event times:

* **spread**: event times ``--spread-ms`` (100) apart, as a live stream has them: the dedup window
  W (10 min) holds the last 6,000 captures, and the dedup state only those keys whose frame is
  still open.
* **one window**: every capture within one W (event times 1 ms apart, 400 s in all), as a load
  generator posts them: every key's frame stays open, so the dedup state holds every key (exact
  dedup must remember a frame while a capture can still join it).

Printed: RSS per step, the ratio of the last to the anchor, and the slope (KiB per 1,000
captures) over the second half, where a bounded process is flat.

Usage: ``python bench/bench_serve_memory.py [--captures 400000] [--step 100000] [--spread-ms 100]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402

from bench.bench_ingest import payload, run  # noqa: E402
from bench.procstat import proc_peak_rss_mib  # noqa: E402
from hivestream.serve.read_marker import read_marker  # noqa: E402
from tests.support.serve_harness import ServeProc  # noqa: E402

SIZE = 500
T0 = 1_790_000_000_000


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` now (``VmRSS``), MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS")) / 1024


async def post(url: str, first: int, n: int, spread_ms: int) -> None:
    """Post captures ``first`` … ``first + n - 1`` in batches of 500 by 4 clients; capture ``i`` at ``T0 + i * spread_ms``."""
    batches = asyncio.Queue[int]()
    for b in range(first, first + n, SIZE):
        batches.put_nowait(b)

    async def client(http: aiohttp.ClientSession) -> None:
        while not batches.empty():
            b = batches.get_nowait()
            body = orjson.dumps([{**payload(f"m{b}", i), "event_time_ms": T0 + (b + i) * spread_ms} for i in range(SIZE)])
            async with http.post(f"{url}/v1/hooks/claude-code", data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200, r.status
                await r.read()

    async with aiohttp.ClientSession() as http:
        await asyncio.gather(*(client(http) for _ in range(4)))


async def heavy_reads(db: Path) -> list[int]:
    """Two reports and a ``window-whatif`` at once through serve's read routes; their statuses."""
    m = read_marker(db)
    assert m is not None, "serve left no read note"
    base, auth = f"http://127.0.0.1:{m.port}", {"Authorization": f"Bearer {m.token}"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900)) as http:

        async def one(kind: str) -> int:
            req = (http.get(f"{base}/v1/report", headers=auth) if kind == "report" else
                   http.post(f"{base}/v1/query", json={"set": "frames", "name": kind}, headers=auth))
            async with req as r:
                await r.read()
                return r.status

        return list(await asyncio.gather(one("report"), one("report"), one("window-whatif")))


def case(name: str, captures: int, step: int, spread_ms: int) -> None:
    """One serve from 0 to ``captures``, printing RSS at each step."""
    with tempfile.TemporaryDirectory() as tmp:
        serve = ServeProc(Path(tmp) / "memory.duckdb")
        try:
            pid = serve.proc.pid
            time.sleep(2)  # the publisher's first round and the read listener are up
            points = [(0, rss_mib(pid))]
            t0 = time.perf_counter()
            for first in range(0, captures, step):
                run(post(serve.url, first, step, spread_ms))
                serve.wait_applied(timeout_s=900)
                points.append((first + step, rss_mib(pid)))
            took = time.perf_counter() - t0
            statuses = run(heavy_reads(serve.db))
            after_reads, peak = rss_mib(pid), proc_peak_rss_mib(pid)
        finally:
            assert serve.stop() == 0, serve.text()[-2000:]
    r0, (n1, r1) = points[0][1], points[-1]
    half = points[len(points) // 2]
    slope = (r1 - half[1]) * 1024 / max(1, (n1 - half[0]) / 1000)
    print(f"{name}: RSS " + ", ".join(f"{n:,}: {r:,.0f} MiB" for n, r in points) + f" ({took:.0f} s to post and apply)")
    print(f"  ratio at {n1:,} captures to the anchor (empty, {r0:,.0f} MiB): {r1 / r0:.2f}; slope over the second half "
          f"{slope:,.0f} KiB per 1,000 captures; after two reports and a window-whatif at once (answers {statuses}) "
          f"{after_reads:,.0f} MiB, peak {peak:,.0f} MiB", flush=True)


def main() -> None:
    """Run both cases."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--captures", type=int, default=400_000)
    ap.add_argument("--step", type=int, default=100_000)
    ap.add_argument("--spread-ms", type=int, default=100)
    a = ap.parse_args()
    t = time.perf_counter()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    case(f"spread (event times {a.spread_ms} ms apart)", a.captures, a.step, a.spread_ms)
    case("one window (event times 1 ms apart)", a.captures, a.step, 1)
    print(f"total {time.perf_counter() - t:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
