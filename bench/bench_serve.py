"""Benchmark ``hivestream serve`` beside ``hivestream ingest`` on the same machine, in the same run.

Cases (one ``serve`` process on a fresh DuckDB file and one ``ingest`` process on a fresh
namespace of a broker on the same machine, both on 127.0.0.1; ``--runs`` rounds, the order of the
two servers alternating per round; each figure is the median of the rounds, the rounds listed):

* **singles**: one payload per request (each a distinct event) from 50 concurrent aiohttp clients
  on uvloop (one keep-alive connection each) for ``--seconds``: events/s and the p99 of the request
  latency measured client side. Checked: every answer 200 with one payload accepted; afterwards
  serve's log holds at least as many records as there were 200s.
* **batches**: ``--batches`` JSON arrays of 500 payloads posted by ``--batch-clients`` clients:
  events/s from the first post to the last 2xx and the p99 of the request latency. Checked: every
  answer 200, 500 accepted, ``durable`` ``log`` (serve) or ``broker`` (ingest).
* **2xx to a queryable frame**: on a file that already holds ``--prefill`` records (100,000; topped
  up with batches when the throughput cases posted fewer), one payload posted to serve with an
  event time on a day of its own, then what ``hivestream query captures-per-day --db FILE`` does
  after its start-up (:func:`hivestream.serve.read_client.read_named`: it asks the serve holding
  the file) polled every 50 ms until the probe's day is a row; p50 and p99 over ``--probes``
  probes with serve idle and as many while 2 more clients post a batch of 500 every 0.5 s each
  (2,000 events/s, below what the dedup loop applies). Anchors in the same run: the snapshot
  ``<db>.snapshot`` (what readers saw before serve answered reads; ``--snapshot-probes``
  probes, idle), and the wall time of whole ``hivestream query captures-per-day`` commands
  (process start included).
* **hook**: wall time of ``hivestream hook claude-code`` (the console script, payload on stdin)
  against the running serve and against the running ingest; p50 over ``--hook-runs`` runs each.

After each serve round the bench waits until serve's dedup loop has applied its whole log (``GET
/healthz``) and prints how long that took after the last 2xx, so no round inherits the previous
one's backlog; the records applied per second from a batches case's first post until caught up
are the dedup loop's rate, anchored on ``hivestream run LOGDIR --jobs 0`` over the whole log at the
end. Anchors measured in the same run: ingest for serve; raw aiokafka (idempotent, ``acks=all``,
no HTTP: all records at once, and 50 concurrent one-record senders) for ingest; the log alone
(:class:`hivestream.serve.log_writer.HookLog`, in this process: one append + fsync per 500 records)
for serve's batches; the snapshot and the 1-2 s goal for the freshness; ``python -c pass``
and the 100 ms goal for the hook. For each case it prints the CPU seconds of the server.

Usage: ``python bench/bench_serve.py [--runs 3] [--seconds 10] [--batches 40] [--probes 20] [--snapshot-probes 5]
[--prefill 100000] [--hook-runs 20]``.
It uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka`` broker
(:func:`tests.support.kafka_broker.local_broker`) and stops it at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import duckdb  # noqa: E402
import httpx  # noqa: E402
import orjson  # noqa: E402

from bench.bench_ingest import hook_times, payload, pct, raw_produce, records, run, singles  # noqa: E402
from bench.procstat import proc_cpu_s  # noqa: E402
from hivestream.serve.read_api import QUERY_SETS  # noqa: E402
from hivestream.serve.read_client import read_named  # noqa: E402
from projections.reading import open_for_reading  # noqa: E402
from tests.support.ingest_harness import IngestProc  # noqa: E402
from tests.support.kafka_broker import local_broker  # noqa: E402
from tests.support.kafka_harness import create_topics, unique_namespace, wait_until  # noqa: E402
from tests.support.serve_harness import ServeProc, hivestream  # noqa: E402

SIZE = 500
PROBE_LIMIT_S = 30.0  # a probe not queryable by then is counted at this figure (and said so)
POLL_S = 0.05  # between two reads (each as `hivestream query` reads: it asks serve, or opens the snapshot)
PROBE_DAY0_MS = 946_684_800_000  # 2000-01-01 UTC: probe i's capture is dated day i after it, a row of captures-per-day of its own
DAY_MS = 86_400_000
LOAD_EVERY_S = 0.5  # each background client of the freshness probes posts one batch of 500 per this many seconds


@contextlib.contextmanager
def broker() -> Iterator[str]:
    """``KAFKA_BOOTSTRAP_SERVERS`` when set, else a local broker started (and stopped) here."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if env:
        yield env
        return
    with local_broker() as bootstrap:
        yield bootstrap


async def batches(url: str, n_batches: int, clients: int, tag: str, durable: str) -> tuple[float, list[float]]:
    """Events/s and request latencies (s) of ``n_batches`` arrays of 500 payloads posted by ``clients`` clients.

    Raises:
        AssertionError: an answer other than 200 with 500 accepted and ``durable``.
    """
    bodies = [orjson.dumps([payload(f"{tag}-{b}", i) for i in range(SIZE)]) for b in range(n_batches)]
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    headers = {"Content-Type": "application/json"}
    lat: list[float] = []

    async def client(http: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            t = time.perf_counter()
            async with http.post(f"{url}/v1/hooks/claude-code", data=body, headers=headers) as r:
                got = orjson.loads(await r.read())
                assert r.status == 200 and got["accepted"] == SIZE and got["durable"] == durable, (r.status, got.get("durable"))
            lat.append(time.perf_counter() - t)

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as http:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        return n_batches * SIZE / (time.perf_counter() - t0), lat


def log_alone(n_batches: int, tmp: Path) -> float:
    """Events/s of the serve log alone: ``n_batches`` appends of 500 ingest-encoded records, one fsync each."""
    from hivestream.serve.log_writer import HookLog
    from streams.ingest.hook_log import HOOK_EVENTS

    recs = records(n_batches * SIZE)
    log = HookLog(tmp / "log-alone")
    try:
        t0 = time.perf_counter()
        for b in range(n_batches):
            log.append([[(HOOK_EVENTS, k, v) for k, v in recs[b * SIZE:(b + 1) * SIZE]]], int(time.time() * 1000))
        return n_batches * SIZE / (time.perf_counter() - t0)
    finally:
        log.close()


def applied_after(serve: ServeProc) -> tuple[float, int]:
    """Seconds until serve's dedup loop has applied its whole log, and the log's record count."""
    t0 = time.perf_counter()
    n = serve.wait_applied(timeout_s=600)
    return time.perf_counter() - t0, n


def in_snapshot(db: Path, event_id: str) -> bool:
    """Whether the snapshot serve publishes (``<db>.snapshot``) holds the capture ``event_id`` yet (the anchor)."""
    try:
        con, _how = open_for_reading(db)
    except (FileNotFoundError, OSError):
        return False
    try:
        return con.execute("SELECT count(*) FROM frame_captures WHERE event_id = ?", [event_id]).fetchone() == (1,)
    except duckdb.Error:  # a snapshot swapped while it was read: try again
        return False
    finally:
        con.close()


def queried(db: Path, day: str) -> bool:
    """Whether ``hivestream query captures-per-day --db db`` (its reading, after start-up) shows a row of ``day`` yet."""
    _cols, rows, how = read_named(db, "frames", QUERY_SETS["frames"], "captures-per-day")
    assert how.startswith("answered by hivestream serve"), how  # the user's path while serve runs: serve answers
    return any(r[0] == day for r in rows)


def probe_payload(tag: str, i: int) -> tuple[dict[str, Any], str]:
    """Probe ``i``'s payload, dated on a day of its own, and that day (``YYYY-MM-DD``)."""
    t = PROBE_DAY0_MS + i * DAY_MS
    return {**payload(f"{tag}-probe", i), "event_time_ms": t}, time.strftime("%Y-%m-%d", time.gmtime(t / 1000))


async def probes(serve: ServeProc, n: int, tag: str, first: int, load_clients: int = 0, snapshot: bool = False) -> list[float]:
    """Seconds from each probe's 2xx until its frame is queryable (``snapshot``: in the snapshot);
    ``load_clients`` post batches meanwhile; probes are numbered from ``first`` (each its own day)."""
    out: list[float] = []
    done = asyncio.Event()

    async def load(http: aiohttp.ClientSession, c: int) -> None:
        b, t0 = 0, time.perf_counter()
        while not done.is_set():
            body = orjson.dumps([payload(f"{tag}-load{c}-{b}", i) for i in range(SIZE)])
            async with http.post(f"{serve.url}/v1/hooks/claude-code", data=body, headers={"Content-Type": "application/json"}) as r:
                assert r.status == 200, r.status
            b += 1
            await asyncio.sleep(max(0.0, t0 + b * LOAD_EVERY_S - time.perf_counter()))  # paced: a steady rate, not a growing backlog

    async with aiohttp.ClientSession() as http:
        loads = [asyncio.create_task(load(http, c)) for c in range(load_clients)]
        await asyncio.sleep(1.0 if load_clients else 0)
        for i in range(first, first + n):
            body, day = probe_payload(tag, i)
            async with http.post(f"{serve.url}/v1/hooks/claude-code", json=body) as r:
                got = orjson.loads(await r.read())
                assert r.status == 200 and got["accepted"] == 1, got
            t0 = time.perf_counter()
            eid = got["results"][0]["event_id"]
            while not await asyncio.to_thread(partial(in_snapshot, serve.db, eid) if snapshot else partial(queried, serve.db, day)):
                if time.perf_counter() - t0 > PROBE_LIMIT_S:
                    break
                await asyncio.sleep(POLL_S)
            out.append(time.perf_counter() - t0)
            await asyncio.sleep(0.2)
        done.set()
        await asyncio.gather(*loads)
    return out


def prefill(serve: ServeProc, at_least: int, tag: str) -> int:
    """Post batches of 500 to serve until its log holds ``at_least`` records; wait until applied; the record count."""
    n = serve.wait_applied(timeout_s=600)
    b = 0
    while n < at_least:
        k = min(40, (at_least - n + SIZE - 1) // SIZE)
        run(batches(serve.url, k, 4, f"{tag}{b}", "log"))
        b += 1
        n = serve.wait_applied(timeout_s=900)
    return n


def query_command_s(db: Path, runs: int) -> list[float]:
    """Wall times (s) of whole ``hivestream query captures-per-day --db db`` commands (process start included)."""
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        r = hivestream("query", "captures-per-day", "--db", str(db), "--format", "csv")
        out.append(time.perf_counter() - t)
        assert r.returncode == 0 and r.stderr.startswith("answered by hivestream serve"), r.stderr[-500:]
    return out


def cpu_of(pid: int, what: Callable[[], Any]) -> tuple[Any, float, float]:
    """(what(), server CPU seconds, wall seconds)."""
    c0, w0 = proc_cpu_s(pid), time.perf_counter()
    got = what()
    return got, proc_cpu_s(pid) - c0, time.perf_counter() - w0


def med(xs: list[float]) -> float:
    """Median."""
    return statistics.median(xs)


def rounds(xs: list[float], fmt: str = "{:,.0f}") -> str:
    """The per-round figures, for the record."""
    return " / ".join(fmt.format(x) for x in xs)


def main() -> None:
    """Run the cases and print every figure with its anchor and ratio."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--batch-clients", type=int, default=8)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--snapshot-probes", type=int, default=5)
    ap.add_argument("--prefill", type=int, default=100_000)
    ap.add_argument("--hook-runs", type=int, default=20)
    a = ap.parse_args()
    t_start = time.perf_counter()
    print(f"python {platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    with broker() as bootstrap, tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        recs = records(a.batches * SIZE)
        raw = run(raw_produce(bootstrap, recs))
        raw1 = run(raw_produce(bootstrap, recs, clients=50, seconds=5.0))
        alone = log_alone(a.batches, tmp)
        print(f"anchors: raw aiokafka produce of {len(recs)} records at once {raw:,.0f} events/s; 50 one-record senders {raw1:,.0f} events/s; "
              f"serve's log alone ({a.batches} appends of 500 records, one fsync each) {alone:,.0f} events/s")
        topics = unique_namespace("bench-serve-ingest")
        from streams.kafka.topics import Topics
        create_topics(bootstrap, Topics(topics))
        serve = ServeProc(tmp / "memory.duckdb", "--no-report")
        ingest = IngestProc(bootstrap, topics, tmp / "ingest-spool")
        try:
            wait_until(lambda: httpx.get(ingest.url + "/healthz").json()["broker"] == "up", 60, "the producer")
            fig: dict[str, dict[str, list[float]]] = {k: {"s_rate": [], "s_p99": [], "b_rate": [], "b_p99": [], "s_cpu": [], "b_cpu": []}
                                                     for k in ("serve", "ingest")}
            catchup: list[float] = []
            dedup_rate: list[float] = []
            posted = {"serve": 0, "ingest": 0}
            for r in range(a.runs):
                order = [("serve", serve.url, serve.proc.pid, "log"), ("ingest", ingest.url, ingest.proc.pid, "broker")]
                for name, url, pid, durable in (order if r % 2 == 0 else order[::-1]):
                    (rate, lat), cpu, wall = cpu_of(pid, partial(run, singles(url, a.seconds)))
                    f = fig[name]
                    f["s_rate"].append(rate)
                    f["s_p99"].append(pct(lat, 0.99) * 1000)
                    f["s_cpu"].append(cpu / wall)
                    posted[name] += len(lat)
                    if name == "serve":
                        dt, n = applied_after(serve)
                        catchup.append(dt)
                        assert n >= posted["serve"], f"serve's log holds {n} records for {posted['serve']} answers 200"
                    n0, t0 = serve.wait_applied(), time.perf_counter()
                    (rate, lat), cpu, wall = cpu_of(pid, partial(run, batches(url, a.batches, a.batch_clients, f"{name}{r}", durable)))
                    f["b_rate"].append(rate)
                    f["b_p99"].append(pct(lat, 0.99) * 1000)
                    f["b_cpu"].append(cpu / wall)
                    posted[name] += a.batches * SIZE
                    if name == "serve":
                        dt, n = applied_after(serve)
                        catchup.append(dt)
                        dedup_rate.append((n - n0) / (time.perf_counter() - t0))
                print(f"  round {r + 1} done ({time.perf_counter() - t_start:.0f} s in)", flush=True)
            s, i = fig["serve"], fig["ingest"]
            print(f"single-event posts, 50 clients, {a.seconds:.0f} s x {a.runs} rounds (median; rounds):")
            print(f"  serve  {med(s['s_rate']):,.0f} events/s ({rounds(s['s_rate'])}), p99 {med(s['s_p99']):.1f} ms "
                  f"({rounds(s['s_p99'], '{:.1f}')}), server {med(s['s_cpu']):.0%} of one core")
            print(f"  ingest {med(i['s_rate']):,.0f} events/s ({rounds(i['s_rate'])}), p99 {med(i['s_p99']):.1f} ms "
                  f"({rounds(i['s_p99'], '{:.1f}')}), server {med(i['s_cpu']):.0%} of one core")
            print(f"  ratio serve / ingest: rate {med(s['s_rate']) / med(i['s_rate']):.2f}, p99 {med(s['s_p99']) / med(i['s_p99']):.2f}; "
                  f"ingest / raw 50-sender anchor {med(i['s_rate']) / raw1:.3f}")
            print(f"batches of 500, {a.batch_clients} clients, {a.batches * SIZE:,} events x {a.runs} rounds (median; rounds):")
            print(f"  serve  {med(s['b_rate']):,.0f} events/s ({rounds(s['b_rate'])}), p99 {med(s['b_p99']):.0f} ms "
                  f"({rounds(s['b_p99'])}), server {med(s['b_cpu']):.0%} of one core")
            print(f"  ingest {med(i['b_rate']):,.0f} events/s ({rounds(i['b_rate'])}), p99 {med(i['b_p99']):.0f} ms "
                  f"({rounds(i['b_p99'])}), server {med(i['b_cpu']):.0%} of one core")
            print(f"  ratio serve / ingest: rate {med(s['b_rate']) / med(i['b_rate']):.2f}, p99 {med(s['b_p99']) / med(i['b_p99']):.2f}; "
                  f"serve / its log alone {med(s['b_rate']) / alone:.3f}; ingest / raw produce {med(i['b_rate']) / raw:.3f}")
            print(f"serve's dedup loop caught up {rounds(catchup, '{:.1f}')} s after the last 2xx of each serve case "
                  f"(log {serve.wait_applied():,} records; {sum(posted.values()):,} payloads posted to the two servers in all)")
            log_n = serve.wait_applied()
            t0 = time.perf_counter()
            out = hivestream("run", f"{serve.db}.hook-events", "--db", str(tmp / "rebuilt.duckdb"), "--jobs", "0", timeout=900)
            assert out.returncode == 0, out.stderr[-2000:]
            run_rate = log_n / (time.perf_counter() - t0)
            print(f"serve's dedup loop, batches cases (records applied from the first post until caught up, per second): "
                  f"{med(dedup_rate):,.0f} events/s ({rounds(dedup_rate)}); anchor `hivestream run LOGDIR --jobs 0` over the whole log "
                  f"({log_n:,} records, process start included) {run_rate:,.0f} events/s; ratio {med(dedup_rate) / run_rate:.2f}")
            held = prefill(serve, a.prefill, "prefill")
            print(f"freshness: serve's file holds {held:,} log records before the probes", flush=True)
            idle = run(probes(serve, a.probes, "idle", 0))
            busy = run(probes(serve, a.probes, "busy", a.probes, load_clients=2))
            snap = run(probes(serve, a.snapshot_probes, "snap", 2 * a.probes, snapshot=True))
            cmd = query_command_s(serve.db, 5)
            _st, health = serve.health()
            print(f"  serve after the probes: {health['log_records']:,} log records, {health['applied']:,} applied, pending {health['pending']}; "
                  f"its error lines: {[ln.strip()[:200] for ln in serve.lines if ' ERROR ' in ln][:5] or 'none'}")
            for what, xs in (("idle", idle), (f"while 2 clients post a batch of 500 every {LOAD_EVERY_S:g} s ({2 * SIZE / LOAD_EVERY_S:,.0f} events/s)", busy)):
                print(f"2xx to a queryable frame (`hivestream query captures-per-day` asking serve), {len(xs)} probes, serve {what}: "
                      f"p50 {med(xs) * 1000:.0f} ms, p99 {pct(xs, 0.99) * 1000:.0f} ms; ratio p50 to the snapshot anchor "
                      f"{med(xs) / med(snap):.3f}, p99 to the 1 s goal {pct(xs, 0.99):.2f}"
                      f"{'' if max(xs) < PROBE_LIMIT_S else f'; {sum(x >= PROBE_LIMIT_S for x in xs)} probes not queryable within {PROBE_LIMIT_S:g} s'}")
            print(f"  anchor: the snapshot <db>.snapshot (--snapshot-every 1), {len(snap)} probes, serve idle: p50 {med(snap) * 1000:.0f} ms, "
                  f"p99 {pct(snap, 0.99) * 1000:.0f} ms"
                  f"{'' if max(snap) < PROBE_LIMIT_S else f' ({sum(x >= PROBE_LIMIT_S for x in snap)} past {PROBE_LIMIT_S:g} s)'}")
            print(f"  a whole `hivestream query captures-per-day --db FILE` command (process start included), 5 runs: p50 {med(cmd) * 1000:.0f} ms")
            for name, url in (("serve", serve.url), ("ingest", ingest.url)):
                hook, anchor = hook_times(url, a.hook_runs, tmp / f"hook-spool-{name}")
                print(f"hivestream hook wall time against {name} ({a.hook_runs} runs): p50 {med(hook) * 1000:.0f} ms, p95 "
                      f"{pct(hook, 0.95) * 1000:.0f} ms; ratio to the 100 ms goal {med(hook) / 0.1:.2f}; python -c pass p50 "
                      f"{med(anchor) * 1000:.0f} ms (ratio {med(hook) / med(anchor):.2f})")
        finally:
            assert serve.stop() == 0, serve.text()[-2000:]
            ingest.stop()
    print(f"total {time.perf_counter() - t_start:.0f} s; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
