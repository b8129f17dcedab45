"""Benchmark the Kafka path on the real broker, each stage next to the raw consume rate.

Stages, each measured in a fresh process (peak RSS from ``ru_maxrss``) and repeated ``--runs``
times (median events/s):

* raw consume of ``hook-events`` with aiokafka (the client faust uses);
* the faust worker (validate + dedup agents) over the same records: from its first committed
  offset to zero lag on ``hook-events`` and ``captures``, peak RSS of the worker process;
* raw consume of ``frames`` with kafka-python (the client the projector uses);
* the projector over that ``frames`` topic into a fresh DuckDB file.

Usage: ``python bench/bench_kafka.py [--rounds 20] [--runs 3]``. It uses
``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka`` broker and stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from streams.topics import Topics  # noqa: E402
from tests.corpus import CORPUS  # noqa: E402
from tests.kafka_harness import (  # noqa: E402
    corpus_events,
    create_topics,
    end_offset_sum,
    group_lag,
    mixed_lines,
    produce,
    start_worker,
    stop,
    unique_namespace,
    wait_until,
)


def peak_rss_mib() -> float:
    """Peak resident set size of this process, MiB (Linux ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stage_raw_aiokafka(bootstrap: str, topic: str) -> dict[str, float]:
    """Consume ``topic`` from offset 0 to its end with aiokafka; records/s."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from kafka import KafkaConsumer

    meta = KafkaConsumer(bootstrap_servers=bootstrap)
    parts = meta.partitions_for_topic(topic) or set()
    meta.close()

    async def go() -> tuple[int, float]:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        n, t0 = 0, time.perf_counter()
        while True:
            positions = [await c.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                break
            batch = await c.getmany(timeout_ms=500, max_records=5000)
            n += sum(len(v) for v in batch.values())
        dt = time.perf_counter() - t0
        await c.stop()
        return n, dt

    n, dt = asyncio.run(go())
    return {"records": n, "rate": n / dt, "rss": peak_rss_mib()}


def stage_raw_kafka_python(bootstrap: str, topic: str) -> dict[str, float]:
    """Consume ``topic`` from offset 0 to its end with kafka-python; records/s."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None, max_poll_records=5000,
                      fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=8 * 1024 * 1024)
    tps = [TopicPartition(topic, p) for p in c.partitions_for_topic(topic) or set()]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    ends = c.end_offsets(tps)
    n, t0 = 0, time.perf_counter()
    while any(c.position(tp) < ends[tp] for tp in tps):
        n += sum(len(v) for v in c.poll(timeout_ms=500, max_records=5000).values())
    dt = time.perf_counter() - t0
    c.close()
    return {"records": n, "rate": n / dt, "rss": peak_rss_mib()}


def stage_projector(bootstrap: str, namespace: str) -> dict[str, float]:
    """Project ``frames`` + ``dead-letter`` into a fresh DuckDB file; records/s."""
    from projections.projector import Projector
    from projections.sink import DuckSink

    t = Topics(namespace)
    with tempfile.TemporaryDirectory() as d:
        sink = DuckSink(Path(d) / "bench.duckdb")
        p = Projector(sink, bootstrap, t.frames, t.dead_letter, snapshot_every_s=0)
        t0 = time.perf_counter()
        rep = p.run(until_caught_up=True)
        dt = time.perf_counter() - t0
        p.close()
        sink.close()
    return {"records": rep.records, "rate": rep.records / dt, "rss": peak_rss_mib()}


def run_stage(name: str, *args: str) -> dict[str, float]:
    """Run one stage in a fresh interpreter and return its figures."""
    out = subprocess.run([sys.executable, __file__, "--stage", name, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def safe_lag(bootstrap: str, group: str, topics: list[str], default: int) -> int:
    """:func:`group_lag`, or ``default`` while the group coordinator is not ready."""
    from kafka.errors import KafkaError

    try:
        return group_lag(bootstrap, group, topics)
    except KafkaError:
        return default


def worker_run(bootstrap: str, recs: list[tuple[bytes, bytes]], partitions: int) -> tuple[dict[str, float], str]:
    """Produce ``recs`` into a fresh namespace, run one worker until zero lag; its rate and RSS."""
    topics = Topics(unique_namespace("bench"))
    create_topics(bootstrap, topics, partitions=partitions, hook_partitions=partitions)
    produce(bootstrap, topics.hook_events, recs)
    group = f"{topics.namespace}-dedup"
    with tempfile.TemporaryDirectory() as d:
        w = start_worker(bootstrap, topics.namespace, Path(d))
        try:
            total = len(recs)
            wait_until(lambda: safe_lag(bootstrap, group, [topics.hook_events], total) < total, 180, "the worker to start", 0.05)
            t0 = time.perf_counter()
            start_lag = group_lag(bootstrap, group, [topics.hook_events])
            wait_until(lambda: group_lag(bootstrap, group, [topics.hook_events, topics.captures]) == 0, 600, "zero lag", 0.1)
            dt = time.perf_counter() - t0
            status = Path(f"/proc/{w.pid}/status").read_text()
            hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")) / 1024
        finally:
            stop(w)
    return {"records": start_lag, "rate": start_lag / dt, "rss": hwm}, topics.namespace


def main() -> None:
    """Run every stage and print the figures and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--stage")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.stage:
        fn = {"raw-aiokafka": stage_raw_aiokafka, "raw-kafka-python": stage_raw_kafka_python, "projector": stage_projector}[a.stage]
        print(json.dumps(fn(*a.args)))
        return

    from tests.kafka_broker import kafka_broker

    with kafka_broker() as bootstrap:
        recs = mixed_lines(corpus_events(CORPUS, rounds=a.rounds), bad=[])
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; "
              f"{len(recs)} hook-event records ({a.rounds} rounds of the corpus with the gateway capture), "
              f"{a.partitions} partitions")
        workers, namespaces = [], []
        for _ in range(a.runs):
            fig, ns = worker_run(bootstrap, recs, a.partitions)
            workers.append(fig)
            namespaces.append(ns)
        ns = namespaces[-1]
        t = Topics(ns)
        raw_hook = [run_stage("raw-aiokafka", bootstrap, t.hook_events) for _ in range(a.runs)]
        raw_frames = [run_stage("raw-kafka-python", bootstrap, t.frames) for _ in range(a.runs)]
        projector = [run_stage("projector", bootstrap, ns) for _ in range(a.runs)]
        frames_n = end_offset_sum(bootstrap, t.frames)

    def show(name: str, figs: list[dict[str, float]]) -> float:
        rate = statistics.median(f["rate"] for f in figs)
        print(f"{name:<44} {rate:>10,.0f} records/s (median of {len(figs)}), peak RSS {max(f['rss'] for f in figs):,.0f} MiB")
        return rate

    r_raw_hook = show("raw consume hook-events (aiokafka)", raw_hook)
    r_worker = show("faust worker: validate + dedup (hook-events)", workers)
    r_raw_frames = show(f"raw consume frames, {frames_n} records (kafka-python)", raw_frames)
    r_proj = show("projector frames -> DuckDB", projector)
    print(f"ratio dedup agent / raw consume: {r_worker / r_raw_hook:.3f}")
    print(f"ratio projector / raw consume:   {r_proj / r_raw_frames:.3f}")


if __name__ == "__main__":
    main()
