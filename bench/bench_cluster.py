"""Benchmark produce, worker and projector on the single plaintext broker and on the three-broker
cluster (replication factor 3, ``min.insync.replicas=2``, SASL_SSL with SCRAM-SHA-512), same input,
same run; each target beside its raw-client anchor, and the cluster beside the single broker as a ratio.

Input: ``bench/backlog.py`` with ``--turns`` turns (4 capture events each; default 50,000 turns =
200,000 events), 4 partitions. Per target (``deploy/kafka/kafka.sh``, then ``deploy/kafka/cluster.sh``,
both started here in private state dirs and stopped afterwards, one at a time):

* ``produce``: ``hivestream produce`` (import, key, idempotent ``acks=all`` send) vs the raw aiokafka
  producer sending the same pre-serialised records on the same connection;
* ``worker``: ``hivestream worker`` from its group's first commit to zero lag (``bench_kafka.consume_to_zero_lag``, over the target's
  connection: on the cluster, SASL_SSL and the ``client.properties`` only);
* ``projector``: ``frames`` → a fresh DuckDB file vs a raw consume of ``frames`` with the same client.

Lag and offsets are read on the PLAINTEXT listener (the measurement, not the measured path).
Usage: ``python bench/bench_cluster.py [--turns 50000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.kafka.connection import KafkaConnection

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from bench.bench_kafka import consume_to_zero_lag  # noqa: E402
from tests.support.kafka_harness import unique_namespace  # noqa: E402


@dataclass(frozen=True)
class Target:
    """Where to measure: ``plain`` for the measurement's own reads, ``env`` for the measured processes."""

    name: str
    plain: str
    env: dict[str, str]


@contextmanager
def single_broker() -> Iterator[Target]:
    """The one-node broker of ``deploy/kafka/kafka.sh`` (PLAINTEXT, replication factor 1)."""
    from tests.support.kafka_broker import local_broker

    with local_broker() as b:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HIVESTREAM_KAFKA_")}
        yield Target("single broker, PLAINTEXT, RF 1", b, {**env, "KAFKA_BOOTSTRAP_SERVERS": b})


@contextmanager
def three_brokers() -> Iterator[Target]:
    """The three-node cluster of ``deploy/kafka/cluster.sh`` (SASL_SSL + SCRAM, RF 3, min ISR 2)."""
    from tests.support.kafka_cluster import local_cluster

    with local_cluster() as c:
        yield Target("3 brokers, SASL_SSL, RF 3, min ISR 2", c.plain, c.env())


def stage(target: Target, name: str, *args: str) -> dict[str, float]:
    """Run ``bench/bench_cluster.py --stage NAME ARGS`` in a fresh process with the target's environment; its figures."""
    out = subprocess.run([sys.executable, str(Path(__file__)), "--stage", name, *args], cwd=ROOT, capture_output=True, text=True,
                         env={**target.env, "PYTHONPATH": str(ROOT)}, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"stage {name} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _conn() -> KafkaConnection:
    """The measured connection: options > ``HIVESTREAM_KAFKA_*`` > ``HIVESTREAM_KAFKA_CONFIG``, as every command resolves it."""
    from streams.kafka.connection import resolve_connection

    return resolve_connection(bootstrap=os.environ["KAFKA_BOOTSTRAP_SERVERS"])


def stage_raw_produce(namespace: str, path: str) -> dict[str, float]:
    """The backlog's records, serialised beforehand, sent by aiokafka's idempotent producer; events/s."""
    import asyncio

    from streams.kafka.clients import aiokafka_producer
    from streams.kafka.topics import Topics
    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import ProduceReport, hook_records

    t = Topics(namespace)
    recs = [(k, v) for topic, k, v in hook_records([Path(path)], t, ProduceReport(), now_ms=wall_clock_ms) if topic == t.hook_events]

    async def go() -> float:
        p = aiokafka_producer(_conn(), enable_idempotence=True, acks="all", linger_ms=10, max_batch_size=1_048_576, max_request_size=2_097_152)
        await p.start()
        t0 = time.perf_counter()
        futs = [await p.send(t.hook_events, v, key=k) for k, v in recs]
        await p.flush()
        for f in futs:
            await f
        dt = time.perf_counter() - t0
        await p.stop()
        return dt

    return {"records": len(recs), "rate": len(recs) / asyncio.run(go())}


def stage_produce(namespace: str, path: str) -> dict[str, float]:
    """``produce_files`` (what ``hivestream produce`` runs) of the backlog; events/s."""
    from streams.kafka.topics import Topics
    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import produce_files

    t0 = time.perf_counter()
    rep = produce_files([Path(path)], _conn(), Topics(namespace), now_ms=wall_clock_ms)
    return {"records": rep.events, "rate": rep.events / (time.perf_counter() - t0)}


def stage_projector(namespace: str) -> dict[str, float]:
    """``frames`` + ``dead-letter`` → a fresh DuckDB file; records/s."""
    from projections.frames.projection import FramesProjection
    from projections.frames.projector import Projector
    from streams.kafka.topics import Topics

    t = Topics(namespace)
    with tempfile.TemporaryDirectory() as d:
        sink = FramesProjection(Path(d) / "bench.duckdb")
        p = Projector(sink, _conn(), t.frames, t.dead_letter, snapshot_every_s=0, batch_max=50_000)
        t0 = time.perf_counter()
        rep = p.run(until_caught_up=True)
        dt = time.perf_counter() - t0
        p.close()
        sink.close()
    return {"records": rep.records, "rate": rep.records / dt}


def stage_raw_consume(topic: str) -> dict[str, float]:
    """Read ``topic`` from the start to its end offsets with the projectors' client; records/s."""
    from projections.reader.consumer import PartitionReader, TopicPartition

    c = PartitionReader(_conn(), client_id="bench-cluster-raw")
    try:
        tps = [TopicPartition(topic, p) for p in c.partitions(topic)]
        c.assign(tps)
        for tp in tps:
            c.seek_to_beginning(tp)
        ends = c.end_offsets(tps)
        pos, n = dict.fromkeys(tps, 0), 0
        t0 = time.perf_counter()
        while any(pos[tp] < ends[tp] for tp in tps):
            for tp, recs in c.poll(timeout_ms=1000, max_records=50_000).items():
                n += len(recs)
                pos[tp] = recs[-1].offset + 1
        return {"records": n, "rate": n / (time.perf_counter() - t0)}
    finally:
        c.close()


STAGES: dict[str, Callable[..., dict[str, float]]] = {
    "raw-produce": stage_raw_produce, "produce": stage_produce, "projector": stage_projector, "raw-consume": stage_raw_consume,
}


def measure(target: Target, log: Path, work: Path) -> dict[str, dict[str, float]]:
    """Every stage and anchor on ``target``: a warm-up send, then produce, raw produce, worker, projector, raw consume."""
    from streams.kafka.topics import Topics

    def topics(ns: str) -> None:
        r = subprocess.run([sys.executable, "-m", "hivestream", "topics", "--namespace", ns, "--partitions", "4"], cwd=ROOT,
                           env=target.env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)

    warm = unique_namespace("bench-warm")
    topics(warm)
    stage(target, "raw-produce", warm, str(log))  # the brokers' JVMs compile their hot paths first
    ns, raw = unique_namespace("bench"), unique_namespace("bench-raw")
    topics(ns)
    topics(raw)
    figs = {"produce": stage(target, "produce", ns, str(log)), "raw-produce": stage(target, "raw-produce", raw, str(log))}
    figs["worker"] = consume_to_zero_lag(target.plain, [sys.executable, "-m", "hivestream", "worker", "--namespace", ns, "--data-dir",
                                                        str(work / f"w-{ns}")], f"{ns}-dedup", Topics(ns).hook_events, env=target.env)
    figs["projector"] = stage(target, "projector", ns)
    figs["raw-consume"] = stage(target, "raw-consume", Topics(ns).frames)
    return figs


def main() -> None:
    """Measure both targets and print the figures, their anchors and the cluster/single ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--stage")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.stage:
        print(json.dumps(STAGES[a.stage](*a.args)))
        return
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "backlog.jsonl"
        lines = write_backlog(log, BacklogSpec(turns=a.turns))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; backlog: {lines} lines, "
              "4 partitions; every broker on this machine", flush=True)
        for make in (single_broker, three_brokers):
            with make() as target:
                results[target.name] = measure(target, log, Path(d))
                print(f"measured: {target.name}", flush=True)
    single, cluster = results.values()
    names = list(results)
    print(f"\n{'stage':<44} {names[0]:>32} {names[1]:>38} {'cluster/single':>15}")
    for key, label in (("produce", "hivestream produce (events/s)"), ("raw-produce", "raw aiokafka producer, same records"),
                       ("worker", "hivestream worker to zero lag (records/s)"), ("projector", "projector frames -> DuckDB (records/s)"),
                       ("raw-consume", "raw consume of frames, same client")):
        s, c = single[key]["rate"], cluster[key]["rate"]
        print(f"{label:<44} {s:>32,.0f} {c:>38,.0f} {c / s:>15.2f}")
    for name, r in results.items():
        print(f"{name}: produce at {r['produce']['rate'] / r['raw-produce']['rate']:.2f} of the raw producer, projector at "
              f"{r['projector']['rate'] / r['raw-consume']['rate']:.2f} of the raw consume; worker peak RSS {r['worker']['rss']:,.0f} MiB, "
              f"{r['worker']['cpu_us']:.0f} CPU µs/record")


if __name__ == "__main__":
    main()
