"""Benchmark the KnowHub and memory-stub Kafka stages on generated multi-day backlogs.

Inputs (``bench/stage_backlog.py``, deterministic): ``--events`` KnowHub hook lines over twelve days
(OpenClaw plugin sessions and Claude Code / Codex MCP calls of kb_search / kb_content / kb_submit)
and ``--events`` stub log lines over twelve days (40 channels × 4 stubs + 4 global ones, nightly
refreshes, deletes and re-creates, messages with ``--dim``-dimensional embeddings, default 384 =
all-MiniLM-L6-v2), ``--partitions`` partitions (default 4). No target: each stage is printed next
to an anchor measured in the same run, median of ``--runs`` (a fresh namespace per run), peak RSS
the largest, and the CPU time the stage's process spent per record (µs, less sensitive than
wall-clock rates to other jobs on the machine):

* KnowHub ``produce``: ``hivestream produce`` of the hook lines (import, adapt, scrub, key, send) vs
  a raw aiokafka producer of the same pre-serialised records (``bench_kafka.stage_raw_produce``);
* KnowHub worker: ``hivestream worker`` (dedup agent: decode, frames, KnowHub derivation →
  ``experience-events``) from its group's first commit to zero lag vs the faust no-op agent
  (``bench/faust_noop.py``, same app settings) on the same topic;
* ``hivestream kb project`` (``ExperienceProjector``, fresh DuckDB file) vs a raw consume of
  ``experience-events`` with the same client (aiokafka);
* ``hivestream stubs produce`` (parse, route, aiokafka batches) vs a raw aiokafka producer of
  the same routed records;
* ``hivestream stubs worker`` (default match settings: threshold 0.65, top 3, 4,000 tokens; rocksdb
  table) from first commit to zero lag vs a faust no-op agent on ``stub-events``;
* ``hivestream stubs project`` (``StubProjector``, fresh file) vs a raw consume of ``stub-matches``.

``--before REF`` (a commit of this repository, e.g. ``331fd42``, the last one before batch delivery
of the workers) also runs that commit's KnowHub and stub workers in the same run, each on its own
namespace filled by the same ``produce`` (its own consumer group, so it reads every record), from
a temporary ``git worktree`` of REF; the figures print "× before", the rate against the earlier
code's on this machine in this run (the target was "at least 5×"), which a rate recorded
on another day or machine cannot give.

Usage: ``python bench/bench_stages.py [--events 200000] [--runs 3] [--stages kb,stubs] [--before REF]``. Uses
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_kafka import consume_to_zero_lag, peak_rss_mib, stage_produce, stage_raw_consume, stage_raw_produce  # noqa: E402
from bench.stage_backlog import ExperienceBacklogSpec, StubBacklogSpec, kb_backlog, stub_backlog, write_lines  # noqa: E402
from streams.kafka.topics import Topics, ensure_topics  # noqa: E402
from tests.support.kafka_harness import unique_namespace  # noqa: E402


def _figures(records: int, dt: float, cpu: float) -> dict[str, float]:
    """records, rate (records/s over ``dt`` s), peak RSS (MiB) and CPU µs per record (``cpu`` s of this process's threads)."""
    return {"records": records, "rate": records / dt, "rss": peak_rss_mib(), "cpu_us": cpu / max(records, 1) * 1e6}


def stage_stub_produce(bootstrap: str, namespace: str, path: str, partitions: str) -> dict[str, float]:
    """``hivestream stubs produce`` of ``path`` (what the command runs); records sent per second."""
    from streams.stubs.produce import produce_stub_logs

    t0, c0 = time.perf_counter(), time.process_time()
    rep = produce_stub_logs([Path(path)], bootstrap, Topics(namespace).stub_events, int(partitions))
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return _figures(rep.records, dt, cpu)


def stage_stub_raw_produce(bootstrap: str, namespace: str, path: str, partitions: str) -> dict[str, float]:
    """The same routed records (computed beforehand) sent by aiokafka's idempotent producer one ``send()`` each."""
    from aiokafka import AIOKafkaProducer

    from streams.stubs.routing import route_stub_line

    topic = Topics(namespace).stub_events
    recs = []
    for line in Path(path).read_bytes().splitlines():
        if line.strip():
            r = route_stub_line(line, int(partitions))
            recs += [(r.key, line, p) for p in r.partitions]

    async def go() -> tuple[float, float]:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all", linger_ms=10, max_batch_size=1_048_576,
                             max_request_size=2_097_152)
        await p.start()
        t0, c0 = time.perf_counter(), time.process_time()
        futs = [await p.send(topic, v, key=k, partition=part) for k, v, part in recs]
        await p.flush()
        for f in futs:
            await f
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        await p.stop()
        return dt, cpu

    return _figures(len(recs), *asyncio.run(go()))


def stage_kb_project(bootstrap: str, namespace: str) -> dict[str, float]:
    """``hivestream kb project --until-caught-up`` into a fresh file; records/s of experience-events + kb-dead-letter."""
    from projections.experiences.projection import ExperienceProjection
    from projections.experiences.projector import ExperienceProjector

    t = Topics(namespace)
    with tempfile.TemporaryDirectory() as d:
        sink = ExperienceProjection(Path(d) / "kb.duckdb")
        proj = ExperienceProjector(sink, bootstrap, t.experience_events, t.kb_dead_letter)
        t0, c0 = time.perf_counter(), time.process_time()
        rep = proj.run(until_caught_up=True)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        proj.close()
        sink.close()
    return _figures(rep.records, dt, cpu)


def stage_stub_project(bootstrap: str, namespace: str) -> dict[str, float]:
    """``hivestream stubs project --until-caught-up`` (default match settings) into a fresh file; records/s."""
    from projections.stubs.projection import StubProjection
    from projections.stubs.projector import StubProjector
    from streams.stubs.settings import MatchSettings

    t = Topics(namespace)
    with tempfile.TemporaryDirectory() as d:
        sink = StubProjection(Path(d) / "stubs.duckdb")
        sink.check_meta(MatchSettings())
        proj = StubProjector(sink, bootstrap, t.stub_matches, t.stub_dead_letter)
        t0, c0 = time.perf_counter(), time.process_time()
        rep = proj.run(until_caught_up=True)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        proj.close()
        sink.close()
    return _figures(rep.records, dt, cpu)


STAGES: dict[str, Callable[..., dict[str, float]]] = {
    "produce": stage_produce, "raw-produce": stage_raw_produce, "raw-consume": stage_raw_consume, "kb-project": stage_kb_project,
    "stub-produce": stage_stub_produce, "stub-raw-produce": stage_stub_raw_produce, "stub-project": stage_stub_project,
}


def run_stage(name: str, *args: str) -> dict[str, float]:
    """Run one in-process stage in a fresh interpreter; its figures (records, rate, rss, cpu_us)."""
    out = subprocess.run([sys.executable, __file__, "--stage", name, *args], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def noop_agent(topic: str, group: str, partitions: int) -> None:
    """A faust agent of group ``group`` that iterates ``topic`` and does nothing (``bench/faust_noop.py`` for any topic)."""
    from collections.abc import AsyncIterator

    import faust

    from streams.kafka.connection import resolve_connection
    from streams.kafka.faust_app import internal_specs, make_faust_app, run_app
    from streams.settings import Settings

    conn = resolve_connection()
    app = make_faust_app(group, Settings(), connection=conn, store="memory://local", partitions=partitions, data_dir=None)
    ensure_topics(conn, internal_specs(app))  # faust creates no topic (its leader topic here)

    @app.agent(app.topic(topic, internal=False))
    async def noop(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for _event in stream.events():
            yield None

    sys.argv = [sys.argv[0], "worker"]
    run_app(app)


def _fresh(bootstrap: str, prefix: str, partitions: int, stubs: bool) -> Topics:
    t = Topics(unique_namespace(prefix))
    ensure_topics(bootstrap, t.stub_specs(partitions) if stubs else t.specs(partitions))
    return t


def _drop(bootstrap: str, namespaces: list[str]) -> None:
    """Delete every topic of ``namespaces`` (the runs' data; keeps a long-lived broker's disk in check)."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        names = [n for n in admin.list_topics() if any(n.startswith(ns + ".") or n.startswith(ns + "-") for ns in namespaces)]
        if names:
            admin.delete_topics(names)
    finally:
        admin.close()


def before_tree(ref: str, d: Path) -> Path:
    """A checkout of commit ``ref`` of this repository under ``d`` (``git worktree add --detach``); the
    earlier workers run from it with this interpreter (the same installed dependencies).

    Raises:
        subprocess.CalledProcessError: when ``ref`` is not a commit of this repository (or git is missing).
    """
    tree = d / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(tree), ref], check=True)
    return tree


def drop_tree(tree: Path) -> None:
    """Remove the worktree :func:`before_tree` made (and git's record of it)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def bench_kb(bootstrap: str, path: Path, runs: int, partitions: int, d: Path, figs: dict[str, list[dict[str, float]]],
             before: Path | None = None) -> None:
    """Every KnowHub stage and its anchor, ``runs`` times, into ``figs``; with ``before`` (a checkout of an
    earlier commit) also that commit's worker on a namespace of its own filled by the same ``produce``."""
    py = sys.executable
    for i in range(runs):
        if before is not None:
            b = _fresh(bootstrap, "kbb-before", partitions, False)
            run_stage("produce", bootstrap, b.namespace, str(path))
            figs.setdefault("kb-before", []).append(consume_to_zero_lag(
                bootstrap, [py, "-m", "hivestream", "worker", "--namespace", b.namespace, "--data-dir", str(d / f"kb-b{i}")],
                f"{b.namespace}-dedup", b.hook_events, tree=before))
            _drop(bootstrap, [b.namespace])
        t, raw = _fresh(bootstrap, "kbb", partitions, False), _fresh(bootstrap, "kbb-raw", partitions, False)
        figs.setdefault("kb-produce", []).append(run_stage("produce", bootstrap, t.namespace, str(path)))
        figs.setdefault("kb-raw-produce", []).append(run_stage("raw-produce", bootstrap, raw.namespace, str(path)))
        figs.setdefault("kb-worker", []).append(consume_to_zero_lag(
            bootstrap, [py, "-m", "hivestream", "worker", "--namespace", t.namespace, "--data-dir", str(d / f"kb-w{i}")],
            f"{t.namespace}-dedup", t.hook_events))
        figs.setdefault("kb-noop", []).append(consume_to_zero_lag(
            bootstrap, [py, str(ROOT / "bench" / "faust_noop.py"), t.namespace, f"noop-{t.namespace}"], f"noop-{t.namespace}", t.hook_events))
        figs.setdefault("kb-project", []).append(run_stage("kb-project", bootstrap, t.namespace))
        figs.setdefault("kb-raw-consume", []).append(run_stage("raw-consume", bootstrap, t.experience_events))
        _drop(bootstrap, [t.namespace, raw.namespace])


def bench_stubs(bootstrap: str, path: Path, runs: int, partitions: int, d: Path, figs: dict[str, list[dict[str, float]]],
                before: Path | None = None) -> None:
    """Every stub stage and its anchor, ``runs`` times, into ``figs``; with ``before`` also that commit's
    stub worker on a namespace of its own filled by the same ``stubs produce``."""
    py, n = sys.executable, str(partitions)
    for i in range(runs):
        if before is not None:
            b = _fresh(bootstrap, "stb-before", partitions, True)
            run_stage("stub-produce", bootstrap, b.namespace, str(path), n)
            figs.setdefault("stub-before", []).append(consume_to_zero_lag(
                bootstrap, [py, "-m", "hivestream", "stubs", "worker", "--namespace", b.namespace, "--data-dir", str(d / f"stub-b{i}")],
                f"{b.namespace}-stubs", b.stub_events, tree=before))
            _drop(bootstrap, [b.namespace])
        t, raw = _fresh(bootstrap, "stb", partitions, True), _fresh(bootstrap, "stb-raw", partitions, True)
        figs.setdefault("stub-produce", []).append(run_stage("stub-produce", bootstrap, t.namespace, str(path), n))
        figs.setdefault("stub-raw-produce", []).append(run_stage("stub-raw-produce", bootstrap, raw.namespace, str(path), n))
        figs.setdefault("stub-worker", []).append(consume_to_zero_lag(
            bootstrap, [py, "-m", "hivestream", "stubs", "worker", "--namespace", t.namespace, "--data-dir", str(d / f"stub-w{i}")],
            f"{t.namespace}-stubs", t.stub_events))
        figs.setdefault("stub-noop", []).append(consume_to_zero_lag(
            bootstrap, [py, __file__, "--noop", t.stub_events, f"noop-{t.namespace}", n], f"noop-{t.namespace}", t.stub_events))
        figs.setdefault("stub-project", []).append(run_stage("stub-project", bootstrap, t.namespace))
        figs.setdefault("stub-raw-consume", []).append(run_stage("raw-consume", bootstrap, t.stub_matches))
        _drop(bootstrap, [t.namespace, raw.namespace])


ROWS = [
    ("kb-produce", "kb-raw-produce", "hivestream produce, KnowHub hook lines", "raw aiokafka producer, same records"),
    ("kb-worker", "kb-noop", "hivestream worker (frames + KnowHub derivation)", "faust no-op agent, same topic"),
    ("kb-project", "kb-raw-consume", "hivestream kb project -> DuckDB", "raw consume of experience-events (aiokafka)"),
    ("stub-produce", "stub-raw-produce", "hivestream stubs produce", "raw aiokafka producer, same routed records"),
    ("stub-worker", "stub-noop", "hivestream stubs worker (matcher, rocksdb table)", "faust no-op agent, same topic"),
    ("stub-project", "stub-raw-consume", "hivestream stubs project -> DuckDB", "raw consume of stub-matches (aiokafka)"),
]


def report(figs: dict[str, list[dict[str, float]]], before_ref: str = "") -> None:
    """Print each stage, its anchor and the ratio (medians; peak RSS the largest; CPU µs per record the
    median), and for a worker measured at ``before_ref`` too, its rate over that one's."""

    def show(name: str, key: str) -> float:
        f = figs.get(key)
        if not f:
            return float("nan")
        rate = statistics.median(x["rate"] for x in f)
        cpu = f"CPU {statistics.median(x['cpu_us'] for x in f):,.0f} µs/record" if all("cpu_us" in x for x in f) else "CPU not measured"
        print(f"  {name:<50} {rate:>9,.0f} records/s (median of {len(f)}; {int(f[0]['records']):,} records), "
              f"peak RSS {max(x['rss'] for x in f):,.0f} MiB, {cpu}")
        return rate

    for stage, anchor, sname, aname in ROWS:
        if stage not in figs:
            continue
        s, a = show(sname, stage), show("anchor: " + aname, anchor)
        print(f"  ratio {stage} / anchor: {s / a:.3g}" if a > 0 else f"  ratio {stage} / anchor: n/a (nothing timed: too few records)")
        earlier = stage.replace("-worker", "-before")
        if earlier != stage and earlier in figs:
            b = show(f"the same worker at {before_ref} (before)", earlier)
            print(f"  x before ({stage} / the same worker at {before_ref}): " + (f"{s / b:.2f}" if b > 0 else "n/a"))
        print()


def main() -> None:
    """Generate the backlogs, run every stage and its anchor, print the figures and ratios."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--events", type=int, default=200_000, help="lines of each generated backlog")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--dim", type=int, default=384, help="embedding dimensions of the stub backlog (384 = all-MiniLM-L6-v2)")
    ap.add_argument("--stages", default="kb,stubs")
    ap.add_argument("--before", metavar="REF", help="also run the workers of this earlier commit (same run, same records)")
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    ap.add_argument("--noop", nargs=3, metavar=("TOPIC", "GROUP", "PARTITIONS"), help=argparse.SUPPRESS)
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.noop:
        noop_agent(a.noop[0], a.noop[1], int(a.noop[2]))
        return
    if a.stage:
        print(json.dumps(STAGES[a.stage](*a.args)))
        return

    from tests.support.kafka_broker import kafka_broker

    stages = set(a.stages.split(","))
    figs: dict[str, list[dict[str, float]]] = {}
    print(f"command: python bench/bench_stages.py --events {a.events} --runs {a.runs} --partitions {a.partitions} --dim {a.dim} --stages {a.stages}"
          + (f" --before {a.before}" if a.before else ""))
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}, broker on the same machine; "
          f"load average at start {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as td, kafka_broker() as bootstrap:
        d = Path(td)
        before = before_tree(a.before, d) if a.before else None
        try:
            run_all(bootstrap, a, stages, d, figs, before)
        finally:
            if before is not None:
                drop_tree(before)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}\n")
    report(figs, a.before or "")


def run_all(bootstrap: str, a: argparse.Namespace, stages: set[str], d: Path, figs: dict[str, list[dict[str, float]]], before: Path | None) -> None:
    """Generate the chosen backlogs under ``d`` and run their stages (``--stages``) into ``figs``."""
    if "kb" in stages:
        path = d / "kb.jsonl"
        lines = write_lines(path, kb_backlog(ExperienceBacklogSpec(events=a.events)))
        print(f"KnowHub backlog: {lines:,} hook lines ({path.stat().st_size / lines:.0f} bytes each), 12 days", flush=True)
        bench_kb(bootstrap, path, a.runs, a.partitions, d, figs, before)
    if "stubs" in stages:
        path = d / "stubs.jsonl"
        lines = write_lines(path, stub_backlog(StubBacklogSpec(events=a.events, dim=a.dim)))
        print(f"stub backlog: {lines:,} lines ({path.stat().st_size / lines:.0f} bytes each), {a.dim}-dim embeddings, 12 days", flush=True)
        bench_stubs(bootstrap, path, a.runs, a.partitions, d, figs, before)


if __name__ == "__main__":
    main()
