"""Benchmark what heavy reads cost ``hivestream serve``'s ingest: single-event posts alone, and while
two clients read back to back.

One ``serve`` (default options but the port) on a fresh DuckDB file, prefilled with ``--prefill``
captures (batches of 500 distinct prompts; the dedup loop caught up before anything is measured).
Then, ``--runs`` rounds of three cases each, the cases' order rotating per round:

* **alone** (the anchor): 50 concurrent aiohttp clients on uvloop, one keep-alive connection each,
  post one payload per request for ``--seconds``; events/s and the p99 of the request latency
  measured client side (every answer checked: 200, one payload accepted).
* **two reports**: the same posts while 2 more clients each ``GET /v1/report`` (the HTML report of
  the whole file, with the read token of ``<db>.serve``) back to back; the reports answered, and
  the answers other than 200 (503 ``Retry-After`` is a refusal, not an error), are counted.
* **two window-whatif**: the same with ``POST /v1/query {"set": "frames", "name": "window-whatif"}``.

Figures are medians of the rounds (the rounds listed), each loaded case printed as a ratio to the
anchor of the same run: the fraction of ingest's rate that remains under two concurrent heavy
reads. Also printed: the CPU share of serve per case, how long the reads took, and how far the
dedup loop was behind at the end of each case (records posted but not yet in DuckDB) and how long
it took to catch up.

Usage: ``python bench/bench_serve_reads.py [--runs 3] [--seconds 10] [--prefill 100000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from bench.bench_ingest import pct, run, singles  # noqa: E402
from bench.bench_serve import prefill  # noqa: E402
from bench.procstat import proc_cpu_s  # noqa: E402
from hivestream.serve.read_marker import read_marker  # noqa: E402
from tests.support.serve_harness import ServeProc  # noqa: E402

READERS = 2
CASES = ("alone", "report", "window-whatif")


async def loaded(url: str, read_url: str, token: str, seconds: float, kind: str) -> tuple[float, list[float], list[float], dict[int, int]]:
    """Single posts for ``seconds`` while :data:`READERS` clients read ``kind`` back to back (``alone``: no reads).

    Returns:
        (events/s, post latencies s, read latencies s of the reads answered 200, read answers by status).
    """
    stop = asyncio.Event()
    read_lat: list[float] = []
    statuses: dict[int, int] = {}
    headers = {"Authorization": f"Bearer {token}"}

    async def reader(http: aiohttp.ClientSession) -> None:
        while not stop.is_set():
            t = time.perf_counter()
            if kind == "report":
                req = http.get(f"{read_url}/v1/report", headers=headers)
            else:
                req = http.post(f"{read_url}/v1/query", json={"set": "frames", "name": kind}, headers=headers)
            async with req as r:
                await r.read()
                statuses[r.status] = statuses.get(r.status, 0) + 1
                if r.status == 200:
                    read_lat.append(time.perf_counter() - t)
                elif r.status == 503:
                    await asyncio.sleep(float(r.headers.get("Retry-After", "1")))

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
        readers = [asyncio.create_task(reader(http)) for _ in range(READERS if kind != "alone" else 0)]
        rate, lat = await singles(url, seconds)  # its first second (connecting, warming up) is not measured: the reads are under way
        stop.set()
        await asyncio.gather(*readers)
    return rate, lat, read_lat, statuses


def main() -> None:
    """Run the cases and print every figure with its anchor and ratio."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--prefill", type=int, default=100_000)
    a = ap.parse_args()
    t_start = time.perf_counter()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as tmp_dir:
        serve = ServeProc(Path(tmp_dir) / "memory.duckdb")
        try:
            held = prefill(serve, a.prefill, "prefill")
            marker = read_marker(serve.db)
            assert marker is not None, "serve left no read note"
            read_url = f"http://127.0.0.1:{marker.port}"
            print(f"serve's file holds {held:,} log records before the cases ({time.perf_counter() - t_start:.0f} s in)", flush=True)
            fig: dict[str, dict[str, list[float]]] = {k: {"rate": [], "p99": [], "cpu": [], "reads": [], "read_s": [], "behind": [], "catchup": []}
                                                     for k in CASES}
            refused: dict[str, dict[int, int]] = {k: {} for k in CASES}
            for r in range(a.runs):
                order = CASES[r % len(CASES):] + CASES[:r % len(CASES)]
                for kind in order:
                    serve.wait_applied(timeout_s=900)
                    c0, w0 = proc_cpu_s(serve.proc.pid), time.perf_counter()
                    rate, lat, read_lat, statuses = run(loaded(serve.url, read_url, marker.token, a.seconds, kind))
                    f = fig[kind]
                    f["cpu"].append((proc_cpu_s(serve.proc.pid) - c0) / (time.perf_counter() - w0))
                    f["rate"].append(rate)
                    f["p99"].append(pct(lat, 0.99) * 1000)
                    f["reads"].append(len(read_lat))
                    f["behind"].append(serve.health()[1]["pending"])
                    t0 = time.perf_counter()
                    serve.wait_applied(timeout_s=900)
                    f["catchup"].append(time.perf_counter() - t0)
                    if read_lat:
                        f["read_s"].append(statistics.median(read_lat))
                    for s, n in statuses.items():
                        if s != 200:
                            refused[kind][s] = refused[kind].get(s, 0) + n
                print(f"  round {r + 1} done ({time.perf_counter() - t_start:.0f} s in)", flush=True)
            _, health = serve.health()
            print(f"serve after the cases: {health['log_records']:,} log records, pending {health['pending']}")
        finally:
            assert serve.stop() == 0, serve.text()[-2000:]
    base = fig["alone"]
    b_rate, b_p99 = statistics.median(base["rate"]), statistics.median(base["p99"])
    print(f"single-event posts, 50 clients, {a.seconds:.0f} s x {a.runs} rounds, on a file of {held:,} records (median; rounds):")
    for kind in CASES:
        f = fig[kind]
        rate, p99 = statistics.median(f["rate"]), statistics.median(f["p99"])
        rounds = " / ".join(f"{x:,.0f}" for x in f["rate"])
        line = (f"  {kind:<13} {rate:,.0f} events/s ({rounds}), p99 {p99:.0f} ms ({' / '.join(f'{x:.0f}' for x in f['p99'])}), "
                f"serve {statistics.median(f['cpu']):.0%} of one core; the dedup loop {statistics.median(f['behind']):,.0f} records behind "
                f"at the end, caught up {statistics.median(f['catchup']):.1f} s later")
        if kind != "alone":
            line += (f"; {READERS} readers got {sum(f['reads']):.0f} answers (median {statistics.median(f['read_s']) if f['read_s'] else 0:.2f} s)"
                     f"{f', refused {refused[kind]}' if refused[kind] else ''}; ratio to alone: rate {rate / b_rate:.2f}, p99 {p99 / b_p99:.2f}")
        print(line)
    print(f"total {time.perf_counter() - t_start:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
