"""Benchmark every Kafka stage on a generated multi-day backlog, each next to its anchor in the same run.

Input: ``bench/backlog.py`` with ``--turns`` turns (4 capture events each; default 50,000 turns =
200,000 events over twelve days: 4 gateways, 4 channels, 1,200 sessions, double capture, re-sent
short prompts, late gateway lines, a few bad lines), ``--partitions`` partitions (default 4).
Each stage runs ``--runs`` times (median; peak RSS the largest):

* ``produce``: ``streams.produce.producer.produce_files`` (what ``hivestream produce`` runs) from the file,
  vs a raw aiokafka producer sending the same pre-serialised records one ``send()`` each;
* ``worker``: ``hivestream worker`` from start to a consumer group with zero lag (it commits a
  record only once its frame events are acknowledged), vs the faust no-op agent
  (``bench/faust_noop.py``, same app settings) on the same topic; the Quix Streams dedup job
  (``bench/quix_dedup.py``, the ``bench`` extra) is printed beside it when installed, timed until
  its output is committed too: zero lag on ``hook-events`` and on its ``group_by`` repartition
  topic, whose records it dedups and writes out;
* ``projector``: ``frames`` → DuckDB (a fresh file each run), vs a raw consume of the same topic with
  the same client (aiokafka through :class:`projections.reader.consumer.PartitionReader`).

Each ratio is taken within one run (subject and anchor measured one after the other, alternating
run by run) and printed per run with their median. Usage: ``python bench/bench_kafka.py [--turns
50000] [--runs 3]``. Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka``
broker and stops it.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from bench.procstat import proc_cpu_s, proc_peak_rss_mib  # noqa: E402
from streams.kafka.topics import Topics, ensure_topics  # noqa: E402
from tests.support.kafka_harness import end_offset_sum, stop, unique_namespace  # noqa: E402


def peak_rss_mib() -> float:
    """Peak resident set size of this program, MiB: ``VmHWM``, not ``ru_maxrss``.

    Linux carries a process's ``ru_maxrss`` across ``exec`` (the forked copy of the parent counts),
    so a stage started by a benchmark that holds a large backlog in memory reported the
    benchmark's peak, not its own; ``VmHWM`` belongs to the address space ``exec`` created.
    """
    return proc_peak_rss_mib(os.getpid())


def cpu_s() -> float:
    """CPU seconds (user + system) this process has used so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children (the import processes)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def stage_produce(bootstrap: str, namespace: str, path: str, jobs: str = "0") -> dict[str, float]:
    """``produce_files`` of the backlog into ``namespace`` with ``jobs`` import processes; events/s and
    the CPU µs per event of this process and its import processes."""
    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import produce_files

    t0, c0 = time.perf_counter(), cpu_s() + children_cpu_s()
    rep = produce_files([Path(path)], bootstrap, Topics(namespace), now_ms=wall_clock_ms, jobs=int(jobs))
    dt, cpu = time.perf_counter() - t0, cpu_s() + children_cpu_s() - c0
    return {"records": rep.events, "rate": rep.events / dt, "rss": peak_rss_mib(), "cpu_us": cpu / rep.events * 1e6}


def stage_raw_produce(bootstrap: str, namespace: str, path: str) -> dict[str, float]:
    """The same records, serialised beforehand, sent by aiokafka's idempotent producer one ``send()`` each; events/s."""
    from aiokafka import AIOKafkaProducer

    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import ProduceReport, hook_records

    t = Topics(namespace)
    recs = [(k, v) for topic, k, v in hook_records([Path(path)], t, ProduceReport(), now_ms=wall_clock_ms) if topic == t.hook_events]

    async def go() -> tuple[float, float]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=10, max_batch_size=1_048_576,
                             max_request_size=2_097_152)
        await p.start()
        t0, c0 = time.perf_counter(), cpu_s()
        futs = [await p.send(t.hook_events, v, key=k) for k, v in recs]
        await p.flush()
        for f in futs:
            await f
        dt, cpu = time.perf_counter() - t0, cpu_s() - c0
        await p.stop()
        return dt, cpu

    dt, cpu = asyncio.run(go())
    return {"records": len(recs), "rate": len(recs) / dt, "rss": peak_rss_mib(), "cpu_us": cpu / len(recs) * 1e6}


def stage_projector(bootstrap: str, namespace: str, version: str, batch: str = "20000") -> dict[str, float]:
    """Project ``frames[.version]`` + ``dead-letter`` into a fresh DuckDB file, ``batch`` records per
    transaction; records/s."""
    from projections.frames.projection import FramesProjection
    from projections.frames.projector import Projector

    t = Topics(namespace, version)
    with tempfile.TemporaryDirectory() as d:
        sink = FramesProjection(Path(d) / "bench.duckdb")
        p = Projector(sink, bootstrap, t.frames, t.dead_letter, snapshot_every_s=0, batch_max=int(batch))
        t0, c0 = time.perf_counter(), cpu_s()
        rep = p.run(until_caught_up=True)
        dt, cpu = time.perf_counter() - t0, cpu_s() - c0
        p.close()
        sink.close()
    return {"records": rep.records, "rate": rep.records / dt, "rss": peak_rss_mib(), "cpu_us": cpu / max(rep.records, 1) * 1e6}


def reader_from_start(bootstrap: str, topic: str, client_id: str) -> tuple[Any, list[Any], dict[Any, int]]:
    """The projector's client assigned every partition of ``topic`` at offset 0: (reader, partitions, end offsets)."""
    from projections.reader.consumer import PartitionReader, TopicPartition

    c = PartitionReader(bootstrap, client_id=client_id)
    tps = [TopicPartition(topic, p) for p in c.partitions(topic)]
    c.assign(tps)
    for tp in tps:
        c.seek_to_beginning(tp)
    return c, tps, c.end_offsets(tps)


def stage_raw_consume(bootstrap: str, topic: str) -> dict[str, float]:
    """Consume ``topic`` from offset 0 to its end with the projector's client; records/s."""
    c, tps, ends = reader_from_start(bootstrap, topic, "bench-raw")
    n, t0, c0 = 0, time.perf_counter(), cpu_s()
    pos = dict.fromkeys(tps, 0)
    while any(pos[tp] < ends[tp] for tp in tps):
        for tp, recs in c.poll(timeout_ms=500, max_records=20_000).items():
            n += len(recs)
            pos[tp] = recs[-1].offset + 1
    dt, cpu = time.perf_counter() - t0, cpu_s() - c0
    c.close()
    return {"records": n, "rate": n / dt, "rss": peak_rss_mib(), "cpu_us": cpu / max(n, 1) * 1e6}


def stage_append_floor(bootstrap: str, topic: str, batch: str = "20000") -> dict[str, float]:
    """The least any DuckDB projection of ``topic`` costs here: consume (the projector's client), decode
    into columns (``decode_frame_records``) and append each batch to an index-free table in one
    transaction, with no idempotence check and no fold into ``frames``; records/s."""
    import duckdb
    import pyarrow as pa

    from projections.frames.decode import decode_frame_records
    from projections.frames.projection import CAPTURE_SCHEMA

    c, tps, ends = reader_from_start(bootstrap, topic, "bench-floor")
    size = int(batch)
    with tempfile.TemporaryDirectory() as d:
        con = duckdb.connect(str(Path(d) / "floor.duckdb"), config={"memory_limit": "256MB"})
        sql_type = {pa.int64(): "BIGINT", pa.int32(): "INTEGER", pa.bool_(): "BOOLEAN", pa.string(): "VARCHAR"}
        con.execute("CREATE TABLE captures (" + ", ".join(f"{n} {sql_type[t]}" for n, t in CAPTURE_SCHEMA) + ")")
        n, t0, c0 = 0, time.perf_counter(), cpu_s()
        pos = dict.fromkeys(tps, 0)
        values: list[bytes | None] = []

        def write() -> None:
            cols, _ = decode_frame_records(values)
            tbl = pa.table({name: pa.array(cols[name], type=t) for name, t in CAPTURE_SCHEMA})  # noqa: F841 (read by DuckDB)
            con.execute("BEGIN TRANSACTION")
            con.execute("INSERT INTO captures SELECT * FROM tbl")
            con.execute("COMMIT")
            values.clear()

        while any(pos[tp] < ends[tp] for tp in tps):
            for tp, recs in c.poll(timeout_ms=500, max_records=size).items():
                n += len(recs)
                values.extend(r.value for r in recs)
                pos[tp] = recs[-1].offset + 1
                if len(values) >= size:
                    write()
        if values:
            write()
        dt, cpu = time.perf_counter() - t0, cpu_s() - c0
        con.close()
    c.close()
    return {"records": n, "rate": n / dt, "rss": peak_rss_mib(), "cpu_us": cpu / max(n, 1) * 1e6}


STAGES = {"produce": stage_produce, "append-floor": stage_append_floor,
          "raw-produce": stage_raw_produce, "projector": stage_projector, "raw-consume": stage_raw_consume}


def run_stage(name: str, *args: str) -> dict[str, float]:
    """Run one in-process stage in a fresh interpreter and return its figures."""
    out = subprocess.run([sys.executable, __file__, "--stage", name, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _lags(bootstrap: str, group: str, topics: list[str], default: int) -> dict[str, int]:
    """The group's committed lag per topic (``default`` for each when the broker does not answer)."""
    from kafka.errors import KafkaError

    from streams.kafka.lag import consumer_lag

    try:
        parts = consumer_lag(bootstrap, group, topics)
    except KafkaError:
        return dict.fromkeys(topics, default)
    return {t: sum(p.lag for p in parts if p.topic == t) for t in topics}


def quix_repartition_topics(bootstrap: str, group: str) -> list[str]:
    """The repartition topics Quix Streams created for consumer group ``group`` (``repartition__<group>--…``).

    Raises:
        RuntimeError: when there is none (the job would then be timed on its input topic alone).
    """
    from streams.kafka.clients import kafka_admin

    admin = kafka_admin(bootstrap, client_id="bench-topics")
    try:
        names = sorted(n for n in admin.list_topics() if n.startswith(f"repartition__{group}--"))
    finally:
        admin.close()
    if not names:
        raise RuntimeError(f"no repartition topic of consumer group {group}")
    return names


def consume_to_zero_lag(bootstrap: str, cmd: list[str], group: str, topic: str, timeout_s: float = 3600,
                        env: dict[str, str] | None = None, tree: Path = ROOT,
                        internal: Callable[[], list[str]] | None = None) -> dict[str, float]:
    """Start ``cmd``; from its group's first commit on ``topic`` to zero lag on ``topic`` (and on the
    ``internal`` topics): records of ``topic``, records/s, peak RSS (VmHWM, MiB) and CPU µs per record
    of the process; with ``internal`` topics also ``input_rate``, the rate had the clock stopped at
    zero lag on ``topic`` alone (what was measured before the internal topics were counted).

    Args:
        bootstrap: PLAINTEXT bootstrap servers, for the measurement's own reads (lag, end offsets).
        env: the process's environment (default: this one with ``KAFKA_BOOTSTRAP_SERVERS=bootstrap``);
            ``bench/bench_cluster.py`` passes the cluster's SASL_SSL settings here.
        tree: the checkout whose code ``cmd`` runs (its working directory and ``PYTHONPATH``; default
            this one); ``bench/bench_stages.py --before`` runs an earlier commit's worker this way.
        internal: the topics the job writes and reads back itself (Quix Streams' repartition topic:
            :func:`quix_repartition_topics`), asked once it consumes; the clock stops when the group's
            committed lag on them is zero too, so their work is counted.

    Raises:
        RuntimeError: when the process exits or does not catch up within ``timeout_s`` seconds.
    """
    total = end_offset_sum(bootstrap, topic)
    base = env if env is not None else {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    p = subprocess.Popen(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**base, "PYTHONPATH": str(tree)})
    try:
        deadline = time.monotonic() + timeout_s
        while (lag := _lags(bootstrap, group, [topic], total)[topic]) >= total:
            if time.monotonic() > deadline or p.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} did not start consuming")
            time.sleep(0.05)
        t0, c0, start_lag, hwm = time.perf_counter(), proc_cpu_s(p.pid), lag, 0.0
        topics = [topic, *(internal() if internal else [])]
        input_done: float | None = None
        while sum((lags := _lags(bootstrap, group, topics, total)).values()) > 0:
            if input_done is None and lags[topic] == 0:
                input_done = time.perf_counter() - t0
            if time.monotonic() > deadline or p.poll() is not None:
                raise RuntimeError(f"{cmd[:4]} did not catch up")
            hwm = max(hwm, proc_peak_rss_mib(p.pid))
            time.sleep(0.1)
        dt, cpu = time.perf_counter() - t0, proc_cpu_s(p.pid) - c0
    finally:
        stop(p)
    out = {"records": start_lag, "rate": start_lag / dt, "rss": hwm, "cpu_us": cpu / max(start_lag, 1) * 1e6}
    if internal:
        out["input_rate"] = start_lag / (input_done or dt)
    return out


def main() -> None:
    """Run every stage and print the figures, their anchors and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--turns", type=int, default=50_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--only", choices=("produce", "worker", "projector"), action="append",
                    help="run only these stages and their anchors (repeatable; the worker and projector stages read what produce wrote)")
    ap.add_argument("--jobs", type=int, action="append", default=[],
                    help="also run produce with this many import processes (repeatable), e.g. --jobs 2")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="send the backlog once, untimed, before the first run (a fresh broker's JVM is still compiling)")
    ap.add_argument("--projector-batch", type=int, default=50_000, help="records per projector transaction (hivestream project --batch-size)")
    ap.add_argument("--stage")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.stage:
        print(json.dumps(STAGES[a.stage](*a.args)))
        return

    from tests.support.kafka_broker import kafka_broker

    figs: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as d, kafka_broker() as bootstrap:
        log = Path(d) / "backlog.jsonl"
        lines = write_backlog(log, BacklogSpec(turns=a.turns))
        size = log.stat().st_size
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; backlog: {lines} lines "
              f"({size / lines:.0f} bytes each), {a.partitions} partitions, broker on the same machine", flush=True)
        namespaces = []
        if a.warmup:  # the broker's JVM compiles its hot paths in the first minute; measure after that
            warm_ns = unique_namespace("bench-warm")
            ensure_topics(bootstrap, Topics(warm_ns).specs(a.partitions))
            w = run_stage("raw-produce", bootstrap, warm_ns, str(log))
            print(f"warm-up (not counted): raw producer {w['rate']:,.0f} records/s", flush=True)
        for _ in range(a.runs):
            ns = unique_namespace("bench")
            ensure_topics(bootstrap, Topics(ns).specs(a.partitions))
            namespaces.append(ns)
            figs.setdefault("produce", []).append(run_stage("produce", bootstrap, ns, str(log), "0"))
            for jobs in a.jobs:
                jns = unique_namespace(f"bench-j{jobs}")
                ensure_topics(bootstrap, Topics(jns).specs(a.partitions))
                figs.setdefault(f"produce-j{jobs}", []).append(run_stage("produce", bootstrap, jns, str(log), str(jobs)))
            raw_ns = unique_namespace("bench-raw")
            ensure_topics(bootstrap, Topics(raw_ns).specs(a.partitions))
            figs.setdefault("raw-produce", []).append(run_stage("raw-produce", bootstrap, raw_ns, str(log)))
        only = set(a.only or ("produce", "worker", "projector"))
        ns = namespaces[0]
        t = Topics(ns)
        quix = ROOT / "bench" / "quix_dedup.py"
        has_quix = subprocess.run([sys.executable, "-c", "import quixstreams"], capture_output=True).returncode == 0
        for i in range(a.runs if only & {"worker", "projector"} else 0):
            wd = Path(d) / f"w{i}"
            figs.setdefault("worker", []).append(consume_to_zero_lag(
                bootstrap, [sys.executable, "-m", "hivestream", "worker", "--namespace", ns, "--data-dir", str(wd), "--frames-version", f"b{i}"],
                f"{ns}-dedup-b{i}", t.hook_events))
            figs.setdefault("noop", []).append(consume_to_zero_lag(
                bootstrap, [sys.executable, str(ROOT / "bench" / "faust_noop.py"), ns, f"noop-{ns}-{i}"], f"noop-{ns}-{i}", t.hook_events))
            if has_quix:
                qg = f"quix-{ns}-{i}"
                figs.setdefault("quix", []).append(consume_to_zero_lag(
                    bootstrap, [sys.executable, str(quix), bootstrap, ns, qg, str(Path(d) / f"q{i}")], qg, t.hook_events,
                    internal=lambda qg=qg: quix_repartition_topics(bootstrap, qg)))
        frames = Topics(ns, "b0")
        for _ in range(a.runs if "projector" in only else 0):
            figs.setdefault("projector", []).append(run_stage("projector", bootstrap, ns, "b0", str(a.projector_batch)))
            figs.setdefault("raw-consume", []).append(run_stage("raw-consume", bootstrap, frames.frames))
            figs.setdefault("append-floor", []).append(run_stage("append-floor", bootstrap, frames.frames, str(a.projector_batch)))

    def show(name: str, key: str) -> None:
        f = figs.get(key)
        if not f:
            print(f"{name:<58} not measured")
            return
        rate = statistics.median(x["rate"] for x in f)
        cpu = f", {statistics.median(x['cpu_us'] for x in f):.1f} CPU µs/record" if "cpu_us" in f[0] else ""
        runs = ", ".join(f"{x['rate']:,.0f}" for x in f)
        print(f"{name:<58} {rate:>10,.0f} records/s (median of {len(f)}; runs {runs}), "
              f"peak RSS {max(x['rss'] for x in f):,.0f} MiB{cpu}")

    print()
    show("hivestream produce (import + key + send)", "produce")
    show("raw aiokafka producer, same records", "raw-produce")
    for jobs in a.jobs:
        show(f"hivestream produce --jobs {jobs}", f"produce-j{jobs}")
    show("hivestream worker (decode, dedup, frames)", "worker")
    show("faust no-op agent, same topic", "noop")
    show("Quix Streams dedup job, same topic (to its output committed)", "quix")
    if figs.get("quix"):
        inp = [x["input_rate"] for x in figs["quix"]]
        print(f"{'  (timed to hook-events committed alone, as before:':<58} {statistics.median(inp):>10,.0f} records/s; runs "
              f"{', '.join(f'{x:,.0f}' for x in inp)})")
    show("projector frames -> DuckDB", "projector")
    show("raw consume of frames, same client (aiokafka)", "raw-consume")
    show("floor: consume + decode + DuckDB append, no checks, no fold", "append-floor")

    def ratio(subject: str, anchor: str) -> str:
        """The subject's rate over the anchor's, run by run (each pair measured in the same run), and their median."""
        s, an = figs.get(subject, []), figs.get(anchor, [])
        if not s or not an:
            return "not measured" + (" (pip install -e '.[bench]')" if "quix" in (subject, anchor) else "")
        rs = [x["rate"] / y["rate"] for x, y in zip(s, an, strict=True)]
        return f"{statistics.median(rs):.2f} (runs: {', '.join(f'{r:.2f}' for r in rs)})"

    print(f"\nratio produce / raw producer:     {ratio('produce', 'raw-produce')}")
    for jobs in a.jobs:
        print(f"ratio produce --jobs {jobs} / raw:     {ratio(f'produce-j{jobs}', 'raw-produce')}")
    print(f"ratio worker / faust no-op agent: {ratio('worker', 'noop')}")
    print(f"ratio worker / Quix Streams job:  {ratio('worker', 'quix')}")
    print(f"ratio projector / raw consume:    {ratio('projector', 'raw-consume')} (the append floor's: {ratio('append-floor', 'raw-consume')}; "
          f"projector / floor {ratio('projector', 'append-floor')})")


if __name__ == "__main__":
    main()
