"""Benchmark live ingestion with the broker on the same machine.

Cases (each against fresh ``hivestream ingest`` processes on 127.0.0.1 and their own namespace):

* **batches**: JSON arrays of 500 Claude Code payloads posted by ``--batch-clients`` concurrent
  clients; events/s from the first post to the last 2xx (every answer checked: 200, 500
  accepted, durable on the broker).
* **singles**: one payload per request (each a distinct event) from 50 concurrent clients (one
  keep-alive connection each) for ``--seconds``; events/s and the p50/p99 of the request latency
  measured client side. The load generator is autocannon (``bench/ingestload``, Node; ``npm
  install`` on first use), or with ``--load-generator aiohttp`` 50 aiohttp clients on uvloop in
  this process. Checked: no answer but 200 (for a one-payload body, 200 means accepted and
  durable; 422 would mean rejected), and afterwards the namespace's ``hook-events`` holds at
  least as many distinct event ids as there were 200s.
* **hook**: wall time of ``hivestream hook claude-code`` (the console script, payload on stdin)
  posting to the running server; p50/p95 over ``--hook-runs`` runs.

The two throughput cases run against one server process and against ``--servers`` processes
sharing the port (``--reuse-port``, each with its own spool). Request bodies are built before
the clock starts; the aiohttp load generators run on uvloop in this process. For each case it prints
the CPU seconds of the server(s), of the load generator (this process and its children) and of
the broker (found by its listening port), and the load average before and after.

Anchors measured in the same run: the raw aiokafka produce rate of the same record values
(idempotent, ``acks=all``, no HTTP) sent all at once, and by 50 concurrent senders of one record
each awaiting its acknowledgement (the singles case without HTTP); the wall time of
``python -c pass`` for the hook.

Usage: ``python bench/bench_ingest.py [--batches 100] [--seconds 20] [--hook-runs 30] [--servers 2]``.
It uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka`` broker and stops it.
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
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import orjson  # noqa: E402

from bench.procstat import proc_cpu_s  # noqa: E402
from hivestream.ingest.server import loop_factory  # noqa: E402
from tests.support.ingest_harness import IngestProc  # noqa: E402
from tests.support.kafka_broker import kafka_broker  # noqa: E402
from tests.support.kafka_harness import unique_namespace, wait_until  # noqa: E402

BIN = Path(sys.executable).parent
T = TypeVar("T")


def payload(tag: str, i: int) -> dict[str, Any]:
    """A Claude Code UserPromptSubmit payload with a unique prompt of about 120 characters."""
    return {"session_id": f"bench-{tag}-{i % 97}", "hook_event_name": "UserPromptSubmit", "cwd": "/work/bench",
            "transcript_path": "projects/bench/s.jsonl", "permission_mode": "default",
            "prompt": f"{tag} {i}: please refactor the ingestion module and keep the tests green {uuid.uuid4().hex}",
            "event_time_ms": 1_790_000_000_000 + i}


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the event loop the server uses (uvloop when installed)."""
    with asyncio.Runner(loop_factory=loop_factory()) as r:
        return r.run(coro)


def self_cpu_s() -> float:
    """CPU seconds used so far by this process and its finished children (the load generators)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def listening_pid(port: int) -> int | None:
    """The pid of the process listening on TCP ``port`` of 127.0.0.1 (the broker), from ``/proc``; ``None`` if not found."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for ln in lines:
            f = ln.split()
            if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # state LISTEN
                inodes.add(f[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    return int(proc.name)
        except OSError:
            continue
    return None


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``xs`` (nearest rank)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q * len(s)) - 1))]


def records(n: int) -> list[tuple[bytes, bytes]]:
    """(key, value) of ``n`` payloads adapted and serialised as ingest produces them."""
    from streams.model.adapters import adapt
    from streams.produce.encode import event_value
    from streams.produce.keys import hook_event_key

    out = []
    for i in range(n):
        ev = adapt(payload("raw", i))
        out.append((hook_event_key(ev), event_value(ev)))
    return out


async def raw_produce(bootstrap: str, recs: list[tuple[bytes, bytes]], clients: int = 0, seconds: float = 0) -> float:
    """Events/s of aiokafka alone: all ``recs`` at once (``clients`` 0), or ``clients`` concurrent
    senders of one record each awaiting its acknowledgement for ``seconds`` (the anchors)."""
    from aiokafka import AIOKafkaProducer

    p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=1 if clients else 5, max_batch_size=262_144)
    await p.start()
    try:
        topic = f"{unique_namespace('bench-raw')}.hook-events"
        await p.send_and_wait(topic, b"warm-up")
        t0 = time.perf_counter()
        if not clients:
            futs = [await p.send(topic, value=v, key=k) for k, v in recs]
            await asyncio.gather(*futs)
            return len(recs) / (time.perf_counter() - t0)
        stop_at, done = t0 + seconds, [0]

        async def sender(c: int) -> None:
            i = c
            while time.perf_counter() < stop_at:
                k, v = recs[i % len(recs)]
                await (await p.send(topic, value=v, key=k))
                done[0] += 1
                i += clients

        await asyncio.gather(*(sender(c) for c in range(clients)))
        return done[0] / (time.perf_counter() - t0)
    finally:
        await p.stop()


async def batches(url: str, n_batches: int, clients: int, size: int = 500) -> float:
    """Events/s of ``n_batches`` arrays of ``size`` payloads posted by ``clients`` clients."""
    bodies = [json.dumps([payload(f"b{b}", i) for i in range(size)]).encode() for b in range(n_batches)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    headers = {"Content-Type": "application/json"}

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with http.post(f"{url}/v1/hooks/claude-code", data=body, headers=headers) as r:
                got = orjson.loads(await r.read())
                assert r.status == 200 and got["accepted"] == size and got["durable"] == "broker", (r.status, got.get("durable"))

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as http:
        async with http.post(f"{url}/v1/hooks/claude-code", json=payload("warm", 0)) as r:
            assert r.status == 200
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return n_batches * size / (time.perf_counter() - t0)


async def singles(url: str, seconds: float, clients: int = 50) -> tuple[float, list[float]]:
    """Events/s and request latencies (s) of ``clients`` clients posting one payload per request."""
    per_client = int(100 * (seconds + 1)) + 100  # unique bodies per client (100 requests/s each); reused round robin after that
    lat: list[float] = []
    headers = {"Content-Type": "application/json"}
    bodies = [[orjson.dumps(payload(f"s{c}", i)) for i in range(per_client)] for c in range(clients)]
    target = f"{url}/v1/hooks/claude-code"
    sent = [0] * clients

    async def client(cid: int, http: aiohttp.ClientSession, stop_at: float) -> None:
        mine = bodies[cid]
        while time.perf_counter() < stop_at:
            i = sent[cid]
            t = time.perf_counter()
            async with http.post(target, data=mine[i % len(mine)], headers=headers) as r:
                got = await r.read()
                assert r.status == 200 and b'"accepted":1,' in got, (r.status, got[:200])
            lat.append(time.perf_counter() - t)
            sent[cid] = i + 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as http:
        await asyncio.gather(*(client(c, http, time.perf_counter() + 1.0) for c in range(clients)))  # connect and warm up
        lat.clear()
        t0 = time.perf_counter()
        await asyncio.gather(*(client(c, http, t0 + seconds) for c in range(clients)))
        return len(lat) / (time.perf_counter() - t0), lat


LOADGEN = ROOT / "bench" / "ingestload"


def singles_autocannon(url: str, seconds: float, tag: str, clients: int = 50) -> tuple[float, float, float, int, int]:
    """Events/s, p50 and p99 latency (ms), 200 answers and requests posted by autocannon.

    Raises:
        AssertionError: an answer other than 200, an error or a timeout.
    """
    if not (LOADGEN / "node_modules" / "autocannon").is_dir():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=LOADGEN, check=True, capture_output=True)
    out = subprocess.run(["node", str(LOADGEN / "singles.mjs"), f"{url}/v1/hooks/claude-code", str(clients), str(int(seconds)), tag],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    assert r["non2xx"] == 0 and r["errors"] == 0 and r["timeouts"] == 0 and r["2xx"] > 0, {k: r[k] for k in ("2xx", "non2xx", "errors", "timeouts")}
    return r["2xx"] / r["duration"], float(r["latency"]["p50"]), float(r["latency"]["p99"]), int(r["2xx"]), int(r["posted"])


def distinct_events(bootstrap: str, namespace: str) -> int:
    """Distinct event ids on ``<namespace>.hook-events``."""
    from tests.support.ingest_harness import read_topic

    return len({orjson.loads(v)["event_id"] for _p, _k, v in read_topic(bootstrap, f"{namespace}.hook-events")})


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


def start_servers(bootstrap: str, ns: str, n: int, tmp: Path) -> list[IngestProc]:
    """``n`` ingest processes on one port (``--reuse-port`` when ``n`` > 1) for namespace ``ns``, producer connected."""
    extra = ("--reuse-port",) if n > 1 else ()
    procs = [IngestProc(bootstrap, ns, tmp / f"spool-{ns}-0", *extra)]
    for i in range(1, n):
        procs.append(IngestProc(bootstrap, ns, tmp / f"spool-{ns}-{i}", *extra, port=procs[0].port))
    for proc in procs:
        wait_until(lambda p=proc: __import__("httpx").get(p.url + "/healthz").json()["broker"] == "up", 60, "the producer")
    return procs


def measured(procs: list[IngestProc], broker_pid: int | None, what: Callable[[], str]) -> None:
    """Run ``what`` (prints its figure) and print the CPU of the servers, this process and the broker."""
    pids = [p.proc.pid for p in procs]
    load0 = os.getloadavg()[0]
    s0, c0, b0, w0 = [proc_cpu_s(p) for p in pids], self_cpu_s(), proc_cpu_s(broker_pid) if broker_pid else 0.0, time.perf_counter()
    print(what())
    wall = time.perf_counter() - w0
    server = [proc_cpu_s(p) - s for p, s in zip(pids, s0, strict=True)]
    broker = f"{proc_cpu_s(broker_pid) - b0:.1f} s" if broker_pid else "n/a"
    print(f"  over {wall:.1f} s wall: server CPU {' + '.join(f'{s:.1f}' for s in server)} s ({sum(server) / wall:.0%} of one core), "
          f"load generator {self_cpu_s() - c0:.1f} s, broker {broker}; load average {load0:.1f} -> {os.getloadavg()[0]:.1f}")


def batches_case(bootstrap: str, broker_pid: int | None, n: int, a: argparse.Namespace, raw: float, tmp: Path) -> None:
    """The batches case against ``n`` server processes; prints its figures."""
    procs = start_servers(bootstrap, unique_namespace("bench-batches"), n, tmp)
    try:
        def posted() -> str:
            rate = run(batches(procs[0].url, a.batches, a.batch_clients))
            return (f"batches of 500, {n} server process(es), {a.batch_clients} clients, {a.batches * 500} events: "
                    f"{rate:,.0f} events/s; ratio to raw produce {rate / raw:.3f}")
        measured(procs, broker_pid, posted)
    finally:
        for p in procs:
            p.stop()


def singles_case(bootstrap: str, broker_pid: int | None, n: int, a: argparse.Namespace, raw1: float, tmp: Path) -> None:
    """The single-event case against ``n`` server processes; prints its figures, then checks the topic.

    Raises:
        AssertionError: fewer distinct events on ``hook-events`` than 200 answers, or more than were posted.
    """
    ns = unique_namespace("bench-singles")
    procs = start_servers(bootstrap, ns, n, tmp)
    got: dict[str, Any] = {}
    try:
        def one() -> str:
            if a.load_generator == "aiohttp":
                rate, lat = run(singles(procs[0].url, a.seconds))
                ok, p50, p99, got["posted"] = len(lat), pct(lat, 0.5) * 1000, pct(lat, 0.99) * 1000, None
            else:
                rate, p50, p99, ok, got["posted"] = singles_autocannon(procs[0].url, a.seconds, ns)
            got["ok"] = ok
            return (f"single-event posts ({a.load_generator}), {n} server process(es), 50 clients, {a.seconds:.0f} s ({ok} requests "
                    f"answered 200): {rate:,.0f} events/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms; ratio to the raw 50-sender anchor {rate / raw1:.3f}")
        measured(procs, broker_pid, one)
    finally:
        for p in procs:
            p.stop()
    found = distinct_events(bootstrap, ns)
    assert found >= got["ok"], f"{got['ok']} payloads acknowledged, {found} events on hook-events"
    assert got["posted"] is None or found <= got["posted"], f"{found} events on hook-events, only {got['posted']} posted"
    print(f"  checked: {found} distinct events on hook-events for {got['ok']} answers 200")


def main() -> None:
    """Run the cases and print the figures."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--batch-clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hook-runs", type=int, default=30)
    ap.add_argument("--servers", type=int, default=2, help="server processes of the second run of each throughput case")
    ap.add_argument("--load-generator", choices=("autocannon", "aiohttp"), default="autocannon", help="of the single-event case")
    a = ap.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}, load average {os.getloadavg()[0]:.1f}")
    with kafka_broker() as bootstrap, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        broker_pid = listening_pid(int(bootstrap.rsplit(":", 1)[1]))
        recs = records(a.batches * 500)
        raw = run(raw_produce(bootstrap, recs))
        print(f"anchor: raw aiokafka produce of {len(recs)} events at once: {raw:,.0f} events/s")
        raw1 = run(raw_produce(bootstrap, recs, clients=50, seconds=min(10.0, a.seconds)))
        print(f"anchor: raw aiokafka, 50 concurrent senders of one record awaiting each acknowledgement: {raw1:,.0f} events/s")
        for n in sorted({1, a.servers}):
            batches_case(bootstrap, broker_pid, n, a, raw, tmp)
        for n in sorted({1, a.servers}):
            singles_case(bootstrap, broker_pid, n, a, raw1, tmp)
        procs = start_servers(bootstrap, unique_namespace("bench-hook"), 1, tmp)
        try:
            hook, anchor = hook_times(procs[0].url, a.hook_runs, tmp / "hook-spool")
            print(f"hivestream hook wall time ({a.hook_runs} runs): p50 {statistics.median(hook) * 1000:.0f} ms, "
                  f"p95 {pct(hook, 0.95) * 1000:.0f} ms; python -c pass p50 {statistics.median(anchor) * 1000:.0f} ms "
                  f"(ratio {statistics.median(hook) / statistics.median(anchor):.2f})")
        finally:
            procs[0].stop()


if __name__ == "__main__":
    main()
