"""Benchmark live ingestion with the broker on the same machine.

Cases (each against a fresh ``hivestream ingest`` process on 127.0.0.1 and its own namespace):

* **batches**: JSON arrays of 500 Claude Code payloads posted by 4 concurrent clients; events/s
  from the first post to the last 2xx (every event acknowledged by the broker).
* **singles**: one payload per request from 50 concurrent clients for ``--seconds``; events/s and
  the p50/p99 of the request latency (client side, connection kept alive).
* **hook**: wall time of ``hivestream hook claude-code`` (the console script, payload on stdin)
  posting to the running server; p50/p95 over ``--hook-runs`` runs.

Anchors measured in the same run: the raw aiokafka produce rate of the same record values
(idempotent, ``acks=all``, no HTTP), and the wall time of ``python -c pass`` for the hook.

Usage: ``python bench/bench_ingest.py [--batches 100] [--seconds 20] [--hook-runs 30]``. It uses
``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka`` broker and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from tests.ingest_harness import IngestProc  # noqa: E402
from tests.kafka_broker import kafka_broker  # noqa: E402
from tests.kafka_harness import unique_namespace, wait_until  # noqa: E402

BIN = Path(sys.executable).parent


def payload(tag: str, i: int) -> dict[str, Any]:
    """A Claude Code UserPromptSubmit payload with a unique prompt of about 120 characters."""
    return {"session_id": f"bench-{tag}-{i % 97}", "hook_event_name": "UserPromptSubmit", "cwd": "/work/bench",
            "transcript_path": "projects/bench/s.jsonl", "permission_mode": "default",
            "prompt": f"{tag} {i}: please refactor the ingestion module and keep the tests green {uuid.uuid4().hex}",
            "event_time_ms": 1_790_000_000_000 + i}


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu_s() -> float:
    """CPU seconds used so far by this process (the load generator)."""
    t = os.times()
    return t.user + t.system


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


async def raw_produce(bootstrap: str, n: int) -> float:
    """Events/s of aiokafka alone producing ``n`` serialised events (the anchor)."""
    from aiokafka import AIOKafkaProducer

    from streams.adapters import adapt
    from streams.keying import hook_event_key
    from streams.producer import event_value

    recs = []
    for i in range(n):
        ev = adapt(payload("raw", i))
        recs.append((hook_event_key(ev), event_value(ev)))
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=5, max_batch_size=262_144)
    await p.start()
    try:
        topic = f"{unique_namespace('bench-raw')}.hook-events"
        await p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        futs = [await p.send(topic, value=v, key=k) for k, v in recs]
        await asyncio.gather(*futs)
        return n / (time.perf_counter() - t0)
    finally:
        await p.stop()


async def batches(url: str, n_batches: int, size: int = 500, clients: int = 4) -> float:
    """Events/s of ``n_batches`` arrays of ``size`` payloads posted by ``clients`` clients."""
    bodies = [json.dumps([payload(f"b{b}", i) for i in range(size)]).encode() for b in range(n_batches)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with http.post(f"{url}/v1/hooks/claude-code", data=body, headers={"Content-Type": "application/json"}) as r:
                got = await r.json()
                assert r.status == 200 and got["accepted"] == size and got["durable"] == "broker", (r.status, got.get("durable"))

    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/hooks/claude-code", json=payload("warm", 0)) as r:
            assert r.status == 200
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return n_batches * size / (time.perf_counter() - t0)


async def singles(url: str, seconds: float, clients: int = 50) -> tuple[float, list[float]]:
    """Events/s and request latencies (s) of ``clients`` clients posting one payload per request."""
    lat: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client(cid: int, http: aiohttp.ClientSession) -> None:
        i = 0
        while time.perf_counter() < stop_at:
            t = time.perf_counter()
            async with http.post(f"{url}/v1/hooks/claude-code", json=payload(f"s{cid}", i)) as r:
                await r.read()
                assert r.status == 200
            lat.append(time.perf_counter() - t)
            i += 1

    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, http) for c in range(clients)))
        return len(lat) / (time.perf_counter() - t0), lat


def hook_times(url: str, runs: int, spool: Path) -> tuple[list[float], list[float]]:
    """Wall times (s) of ``hivestream hook claude-code`` and of ``python -c pass``."""
    env = {**os.environ, "HIVESTREAM_INGEST_URL": url, "HIVESTREAM_SPOOL_DIR": str(spool)}
    hook, anchor = [], []
    for i in range(runs):
        body = json.dumps(payload("hook", i))
        t = time.perf_counter()
        subprocess.run([str(BIN / "hivestream"), "hook", "claude-code"], input=body, env=env, text=True, check=True, capture_output=True)
        hook.append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        anchor.append(time.perf_counter() - t)
    assert not list(spool.glob("*.hook")), "a hook run spooled: the server did not answer"
    return hook, anchor


def main() -> None:
    """Run the cases and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hook-runs", type=int, default=30)
    a = ap.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}")
    with kafka_broker() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        raw = asyncio.run(raw_produce(bootstrap, a.batches * 500))
        print(f"anchor: raw aiokafka produce of {a.batches * 500} events: {raw:,.0f} events/s")
        for case in ("batches", "singles", "hook"):
            proc = IngestProc(bootstrap, unique_namespace(f"bench-{case}"), Path(tmp) / f"spool-{case}")
            try:
                wait_until(lambda p=proc: __import__("httpx").get(p.url + "/healthz").json()["broker"] == "up", 60, "the producer")
                s0, c0, w0 = cpu_s(proc.proc.pid), self_cpu_s(), time.perf_counter()
                if case == "batches":
                    rate = asyncio.run(batches(proc.url, a.batches))
                    print(f"batches of 500 (4 clients, {a.batches * 500} events): {rate:,.0f} events/s; ratio to raw produce {rate / raw:.3f}")
                elif case == "singles":
                    rate, lat = asyncio.run(singles(proc.url, a.seconds))
                    print(f"single-event posts, 50 clients, {a.seconds:.0f} s ({len(lat)} requests): {rate:,.0f} events/s, "
                          f"p50 {pct(lat, 0.5) * 1000:.1f} ms, p99 {pct(lat, 0.99) * 1000:.1f} ms; ratio to raw produce {rate / raw:.3f}")
                else:
                    hook, anchor = hook_times(proc.url, a.hook_runs, Path(tmp) / "hook-spool")
                    print(f"hivestream hook wall time ({a.hook_runs} runs): p50 {statistics.median(hook) * 1000:.0f} ms, "
                          f"p95 {pct(hook, 0.95) * 1000:.0f} ms; python -c pass p50 {statistics.median(anchor) * 1000:.0f} ms "
                          f"(ratio {statistics.median(hook) / statistics.median(anchor):.2f})")
                if case != "hook":
                    wall = time.perf_counter() - w0
                    print(f"  server CPU {cpu_s(proc.proc.pid) - s0:.1f} s, load generator CPU {self_cpu_s() - c0:.1f} s, "
                          f"over {wall:.1f} s wall ({(cpu_s(proc.proc.pid) - s0) / wall:.0%} of one core for the server)")
            finally:
                proc.stop()


if __name__ == "__main__":
    main()
