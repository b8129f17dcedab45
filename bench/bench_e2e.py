"""Benchmark the Kafka path end to end (produce, 2 workers, projector) against ``hivestream run`` in the same run.

Input: ``bench/backlog.py`` with ``--turns`` turns (4 capture events each; default 50,000 turns =
200,000 events), topics of ``--partitions`` partitions (default 4). Each of ``--runs`` runs (median;
peak RSS the largest) measures, one after the other:

* the Kafka path: in a fresh namespace, 2 ``hivestream worker`` processes (each with its own data dir)
  and ``hivestream project`` (a fresh DuckDB file) are started and waited for (every worker says
  ``Worker ready`` after its last assignment and the workers' group is ``Stable`` with 2 members,
  the projector has published its first snapshot). Then the clock starts, ``hivestream produce`` of
  the backlog runs, and the clock stops when, after the produce exited, the workers' group has zero
  committed lag on ``hook-events`` and the projection is caught up: the projector has no consumer
  group (its positions live in DuckDB, committed with the rows), and DuckDB lets no other process
  open the file it writes, so "caught up" is its published snapshot (``<db>.snapshot``, what
  readers query while it runs) covering the end offsets of ``frames``, ``dead-letter`` and
  ``memory-calls``, read after the workers' lag reached zero. The clock therefore includes up
  to ``--snapshot-every`` seconds (the CLI default, 2 s) plus one snapshot copy after the last
  batch. Wall seconds, events/s (backlog lines / wall), CPU µs per event summed over the produce
  (its import processes included), both workers and the projector (from the clock's start to its
  stop), and the peak RSS (VmHWM) of each process;
* the anchor: ``hivestream run`` of the same file into a fresh DuckDB, as a process (a CLI start is
  in both clocks, like the produce's), wall seconds and events/s.

Then the ratio Kafka-path time / run time (goal ≤ 2.0), and, for every run, the projected
``frames``, ``frame_captures`` and dead letters compared with the run's row for row
(``tests.support.kafka_harness.frame_tables``, as in ``tests/streams/test_kafka_backlog.py``): a mismatch exits 1.

Usage: ``python bench/bench_e2e.py [--turns 50000] [--runs 3] [--partitions 4] [--jobs 2] [--snapshot-every 2]``.
Uses ``KAFKA_BOOTSTRAP_SERVERS`` when set, else starts the ``deploy/kafka`` broker (``tests/support/kafka_broker.py``)
and stops it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backlog import BacklogSpec, write_backlog  # noqa: E402
from bench.bench_kafka import _lags, run_stage  # noqa: E402
from bench.procstat import proc_cpu_s, proc_peak_rss_mib  # noqa: E402
from streams.kafka.lag import worker_group  # noqa: E402
from streams.kafka.topics import Topics, ensure_topics  # noqa: E402
from tests.support.kafka_harness import dead_letter_reasons, frame_tables, stop, unique_namespace  # noqa: E402

WORKERS = 2
POLL_S = 0.2


@dataclass
class Proc:
    """A process of the benchmark: its ``Popen``, the peak RSS (MiB) seen of it and of its children
    (import processes, by pid), and its CPU seconds once measured."""

    name: str
    popen: subprocess.Popen[bytes]
    rss: float = 0.0
    child_rss: dict[int, float] = field(default_factory=dict)
    cpu_s: float = 0.0

    def sample(self) -> None:
        """Read the VmHWM of the process and of its children now (a process that is gone keeps its last figure)."""
        pid = self.popen.pid
        try:
            self.rss = max(self.rss, proc_peak_rss_mib(pid))
            kids = [k for task in Path(f"/proc/{pid}/task").iterdir() for k in (task / "children").read_text().split()]
        except (OSError, StopIteration):
            return
        for k in map(int, kids):
            with contextlib.suppress(OSError, StopIteration):
                self.child_rss[k] = max(self.child_rss.get(k, 0.0), proc_peak_rss_mib(k))

    def reap(self) -> int | None:
        """Without blocking: None while the process runs, else its exit code, with its CPU seconds
        (its waited-for children included: ``wait4``) stored in ``cpu_s``."""
        if self.popen.returncode is not None:
            return self.popen.returncode
        pid, status, ru = os.wait4(self.popen.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.cpu_s = ru.ru_utime + ru.ru_stime
        self.popen.returncode = os.waitstatus_to_exitcode(status)
        return self.popen.returncode


def spawn(name: str, bootstrap: str, args: list[str], log: Path | None = None) -> Proc:
    """``hivestream ARGS`` as a process with ``KAFKA_BOOTSTRAP_SERVERS`` and ``PYTHONPATH`` set as in
    ``bench/bench_kafka.py``; its output goes to ``log`` (or nowhere)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "hivestream", *args]
    if log is None:
        return Proc(name, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    with log.open("ab") as out:  # the child holds its own copy
        return Proc(name, subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))


def timed(proc: Proc, deadline: float) -> float:
    """Wait for ``proc`` to exit, sampling its RSS; its wall seconds since now.

    Raises:
        RuntimeError: when it exits non-zero or runs past ``deadline`` (``time.monotonic``).
    """
    t0 = time.perf_counter()
    while (rc := proc.reap()) is None:
        proc.sample()
        if time.monotonic() > deadline:
            stop(proc.popen)
            raise RuntimeError(f"{proc.name} did not finish in time")
        time.sleep(0.05)
    if rc != 0:
        raise RuntimeError(f"{proc.name} exited with {rc}")
    return time.perf_counter() - t0


def workers_ready(bootstrap: str, group: str, logs: list[Path]) -> bool:
    """The workers' group is ``Stable`` with one member per log and every worker has logged
    ``Worker ready`` after its last partition assignment (faust's recovery is done)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    for log in logs:
        text = log.read_text(errors="replace") if log.exists() else ""
        if text.count("Worker ready") < max(1, text.count("Setting newly assigned partitions")):
            return False
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-e2e")
        try:
            g = admin.describe_groups([group]).get(group, {})
        finally:
            admin.close()
    except KafkaError:
        return False
    return bool(g.get("group_state") == "Stable" and len(g.get("members") or []) == len(logs))


def snapshot_positions(db: Path, seen: dict[str, object]) -> dict[tuple[str, int], int] | None:
    """The positions covered by the projector's latest snapshot of ``db`` (``snapshot_info``), or None
    when there is none or it has not changed since the last call (``seen`` holds its identity)."""
    import duckdb

    from projections.reading import snapshot_path

    snap = snapshot_path(db)
    try:
        st = snap.stat()
    except OSError:
        return None
    ident = (st.st_ino, st.st_mtime_ns, st.st_size)
    if seen.get("ident") == ident:
        return None
    try:
        con = duckdb.connect(str(snap), read_only=True)
        try:
            row = con.execute("SELECT positions FROM snapshot_info").fetchone()
        finally:
            con.close()
    except duckdb.Error:
        return None
    seen["ident"] = ident
    return {(t, int(p)): int(o) for t, p, o in json.loads(row[0])} if row else {}


def end_offsets(bootstrap: str, topics: list[str]) -> dict[tuple[str, int], int]:
    """End offset of every partition of ``topics``."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, client_id="bench-e2e")
    try:
        tps = [TopicPartition(t, p) for t in topics for p in sorted(c.partitions_for_topic(t) or ())]
        return {(tp.topic, tp.partition): off for tp, off in c.end_offsets(tps).items()}
    finally:
        c.close()


def kafka_path(bootstrap: str, log: Path, lines: int, d: Path, partitions: int, jobs: int, snapshot_every: float,
               timeout_s: float) -> tuple[dict[str, float], Path]:
    """One end-to-end run of the Kafka path in a fresh namespace (see the module docstring); its
    figures and the projected DuckDB file (the processes are stopped).

    Raises:
        RuntimeError: when a process exits early or the path does not catch up within ``timeout_s``.
    """
    d, log = d.resolve(), log.resolve()  # the processes run in the repository
    ns = unique_namespace("bench-e2e")
    t = Topics(ns)
    ensure_topics(bootstrap, t.specs(partitions))
    db = d / "kafka.duckdb"
    logs = [d / f"worker{i}.log" for i in range(WORKERS)]
    procs = [spawn(f"worker {i}", bootstrap, ["worker", "--namespace", ns, "--data-dir", str(d / f"w{i}"), "--loglevel", "info"], logs[i])
             for i in range(WORKERS)]
    procs.append(spawn("projector", bootstrap, ["project", "--db", str(db), "--namespace", ns, "--snapshot-every", str(snapshot_every)],
                       d / "projector.log"))
    group = worker_group(ns)
    seen: dict[str, object] = {}
    try:
        deadline = time.monotonic() + 300
        while not (workers_ready(bootstrap, group, logs) and snapshot_positions(db, seen) is not None):
            if time.monotonic() > deadline or any(p.reap() is not None for p in procs):
                raise RuntimeError("the workers or the projector did not start")
            time.sleep(0.5)
        cpu0 = [proc_cpu_s(p.popen.pid) for p in procs]
        deadline = time.monotonic() + timeout_s
        t0 = time.perf_counter()
        prod = spawn("produce", bootstrap, ["produce", str(log), "--namespace", ns, "--jobs", str(jobs)])
        produced_s = targets = lag0_s = None
        caught = False
        while not caught:
            for p in (*procs, prod):
                p.sample()
            if any(p.reap() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("a worker or the projector exited" if time.monotonic() <= deadline else "the Kafka path did not catch up")
            if produced_s is None and (rc := prod.reap()) is not None:
                if rc != 0:
                    raise RuntimeError(f"produce exited with {rc}")
                produced_s = time.perf_counter() - t0
            positions = snapshot_positions(db, seen)
            if produced_s is not None and targets is None and _lags(bootstrap, group, [t.hook_events], 1)[t.hook_events] == 0:
                targets = end_offsets(bootstrap, [t.frames, t.dead_letter, t.memory_calls])
                lag0_s = time.perf_counter() - t0
                seen.clear()  # read the current snapshot again against the targets
                positions = snapshot_positions(db, seen)
            if targets is not None and positions is not None:
                caught = all(positions.get(tp, 0) >= end for tp, end in targets.items())
            if not caught:
                time.sleep(POLL_S)
        wall = time.perf_counter() - t0
        each = {p.name: proc_cpu_s(p.popen.pid) - c for p, c in zip(procs, cpu0, strict=True)}
        each[prod.name] = prod.cpu_s
        cpu = sum(each.values())
        for p in procs:
            p.sample()
    finally:
        for p in procs:
            stop(p.popen)
    figs = {"wall": wall, "rate": lines / wall, "cpu_us": cpu / lines * 1e6, "produce_s": produced_s or 0.0, "lag0_s": lag0_s or 0.0,
            "frames": sum(targets.values()) if targets else 0}
    figs.update({f"cpu:{name}": c / lines * 1e6 for name, c in each.items()})
    for p in (*procs, prod):
        figs[f"rss:{p.name}"] = p.rss
        if p.child_rss:
            figs[f"rss:{p.name} import process"] = max(p.child_rss.values())
    return figs, db


def run_anchor(bootstrap: str, log: Path, lines: int, db: Path, jobs: int, timeout_s: float) -> dict[str, float]:
    """``hivestream run`` of ``log`` into the fresh file ``db`` with ``jobs`` import processes, as a process: wall
    seconds, events/s, CPU µs per event (its import processes included), peak RSS of it and its import processes."""
    proc = spawn("run", bootstrap, ["run", str(log), "--db", str(db), "--jobs", str(jobs)])
    wall = timed(proc, time.monotonic() + timeout_s)
    figs = {"wall": wall, "rate": lines / wall, "cpu_us": proc.cpu_s / lines * 1e6, "rss:run": proc.rss}
    if proc.child_rss:
        figs["rss:run import process"] = max(proc.child_rss.values())
    return figs


def same_tables(projected: Path, ran: Path) -> list[str]:
    """What differs between the projection and the run's file: ``frames``, ``frame_captures`` (row for
    row, Kafka positions left out) and the dead letters' reasons; empty when they are equal."""
    got, want = frame_tables(projected), frame_tables(ran)
    diff = [f"{k}: {len(got[k])} rows vs {len(want[k])}" + (" (same count, different rows)" if len(got[k]) == len(want[k]) else "")
            for k in ("frames", "captures") if got[k] != want[k]]
    dl, dr = dead_letter_reasons(projected), dead_letter_reasons(ran)
    if dl != dr:
        diff.append(f"dead letters: {len(dl)} vs {len(dr)}")
    if not want["frames"]:
        diff.append("the run wrote no frames")
    return diff


def main() -> None:
    """Run the Kafka path and the anchor ``--runs`` times, print the figures and the ratio; exit 1 on a table mismatch."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=50_000, help="turns of the backlog (4 events each)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2, help="import processes of hivestream produce and of hivestream run (--jobs)")
    ap.add_argument("--snapshot-every", type=float, default=2.0, help="hivestream project --snapshot-every (the CLI default: 2)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each measured path may take")
    ap.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                    help="send the backlog once, untimed, before the first run (a fresh broker's JVM is still compiling)")
    a = ap.parse_args()

    from tests.support.kafka_broker import kafka_broker

    kafka: list[dict[str, float]] = []
    runs: list[dict[str, float]] = []
    mismatches: list[str] = []
    with tempfile.TemporaryDirectory() as tmp, kafka_broker() as bootstrap:
        d = Path(tmp)
        log = d / "backlog.jsonl"
        lines = write_backlog(log, BacklogSpec(turns=a.turns))
        print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}; backlog: {lines} lines "
              f"({log.stat().st_size / lines:.0f} bytes each), {a.partitions} partitions, {WORKERS} workers, broker on the same machine",
              flush=True)
        if a.warmup:
            warm_ns = unique_namespace("bench-warm")
            ensure_topics(bootstrap, Topics(warm_ns).specs(a.partitions))
            print(f"warm-up (not counted): raw producer {run_stage('raw-produce', bootstrap, warm_ns, str(log))['rate']:,.0f} records/s", flush=True)
        for i in range(a.runs):
            rd = d / f"run{i}"
            rd.mkdir()
            k, projected = kafka_path(bootstrap, log, lines, rd, a.partitions, a.jobs, a.snapshot_every, a.timeout)
            r = run_anchor(bootstrap, log, lines, rd / "run.duckdb", a.jobs, a.timeout)
            diff = same_tables(projected, rd / "run.duckdb")
            mismatches += [f"run {i + 1}: {x}" for x in diff]
            kafka.append(k)
            runs.append(r)
            print(f"run {i + 1}: Kafka path {k['wall']:.2f} s (produce exited at {k['produce_s']:.2f} s, the workers' lag 0 at {k['lag0_s']:.2f} s), "
                  f"hivestream run {r['wall']:.2f} s, ratio {k['wall'] / r['wall']:.2f}; tables {'equal' if not diff else 'DIFFER: ' + '; '.join(diff)}",
                  flush=True)

    def rss(figs: list[dict[str, float]]) -> str:
        keys = sorted({k for f in figs for k in f if k.startswith("rss:")})
        return ", ".join(f"{k[4:]} {max(f.get(k, 0.0) for f in figs):,.0f}" for k in keys)

    kw, rw = statistics.median(k["wall"] for k in kafka), statistics.median(r["wall"] for r in runs)
    print()
    kruns, rruns = ", ".join(f"{k['wall']:.2f}" for k in kafka), ", ".join(f"{r['wall']:.2f}" for r in runs)
    print(f"{'Kafka path: produce + 2 workers + projector':<46} {kw:>7.2f} s {lines / kw:>9,.0f} events/s (median of {len(kafka)}; runs "
          f"{kruns} s), {statistics.median(k['cpu_us'] for k in kafka):.1f} CPU µs/event (all processes)")
    print(f"{'':<46} peak RSS MiB: {rss(kafka)}")
    parts = sorted({k for f in kafka for k in f if k.startswith("cpu:")})
    print(f"{'':<46} CPU µs/event by process (median): " + ", ".join(f"{k[4:]} {statistics.median(f.get(k, 0.0) for f in kafka):.1f}" for k in parts))
    print(f"{'hivestream run (same file, fresh DuckDB)':<46} {rw:>7.2f} s {lines / rw:>9,.0f} events/s (median of {len(runs)}; runs "
          f"{rruns} s), {statistics.median(r['cpu_us'] for r in runs):.1f} CPU µs/event")
    print(f"{'':<46} peak RSS MiB: {rss(runs)}")
    print(f"\nratio Kafka path / run (time): {kw / rw:.2f} (goal <= 2.0)")
    if mismatches:
        print("projection differs from the run's tables:\n  " + "\n  ".join(mismatches))
        sys.exit(1)
    print(f"tables: the projection equals the run's in every run (frames, frame_captures row for row, dead letters; {len(kafka)} runs)")


if __name__ == "__main__":
    main()
