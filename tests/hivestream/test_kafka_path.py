"""The Kafka path on the real broker: produce → faust worker → projector, against the embedded runner.

Every scenario uses its own topic namespace with four partitions per topic, shared by the
workers; ``hook-events`` is keyed by key group as ``hivestream produce`` keys it, so the tables
equal the embedded runner's row for row (first writers included). Both paths share the dedup
core: these prove transport, partitioning and recovery (``tests/streams/test_dedup_reference.py`` checks
the dedup). Each runs on the generated sessions and on the real corpus when it is there.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

from hivestream.embedded.frames import run_files
from projections.frames.queries import QUERIES
from streams.kafka.topics import Topics
from tests.support.kafka_harness import (
    REPO_ROOT,
    create_topics,
    dead_letter_reasons,
    dumps,
    end_offset_sum,
    frame_tables,
    kill9,
    memory_tool_events,
    mixed_lines,
    produce,
    project_all,
    run_worker_until_done,
    session_events,
    start_worker,
    stop,
    unique_namespace,
    wait_until,
    wait_worker_done,
    write_jsonl,
)
from tests.support.session_sets import SessionSet

pytestmark = pytest.mark.kafka

ROUNDS = 3  # the sessions three times over (fresh ids, a day apart): about 3,600 generated events, 7,700 of the corpus


@pytest.fixture(scope="module")
def workload(sessions: SessionSet, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The input records and the embedded runner's result on them."""
    d = tmp_path_factory.mktemp("workload")
    recs = mixed_lines(session_events(sessions.root, rounds=ROUNDS) + memory_tool_events())
    jsonl = write_jsonl(d / "input.jsonl", recs)
    ref = d / "embedded.duckdb"
    report = run_files([jsonl], ref)
    return {"recs": recs, "ref": ref, "captures": report.captures, "dir": d}


def run_namespace(bootstrap: str, workload: dict[str, Any], name: str) -> Topics:
    topics = Topics(unique_namespace(name))
    create_topics(bootstrap, topics)
    produce(bootstrap, topics.hook_events, workload["recs"])
    return topics


@pytest.fixture(scope="module")
def live(kafka_bootstrap: str, workload: dict[str, Any]) -> dict[str, Any]:
    """One uninterrupted worker run and its projection."""
    topics = run_namespace(kafka_bootstrap, workload, "live")
    d: Path = workload["dir"]
    run_worker_until_done(kafka_bootstrap, topics, d / "w-live", log=d / "w-live.log")
    db = d / "live.duckdb"
    project_all(kafka_bootstrap, topics, db)
    return {"topics": topics, "db": db}


def test_end_to_end_equals_the_embedded_runner(live: dict[str, Any], workload: dict[str, Any]) -> None:
    got, want = frame_tables(live["db"]), frame_tables(workload["ref"])
    assert len(want["frames"]) > 300
    assert got["frames"] == want["frames"]
    assert got["captures"] == want["captures"]
    assert len(want["memory_tool_calls"]) == 12 and got["memory_tool_calls"] == want["memory_tool_calls"]
    assert not any("sk-ant-api03" in str(row) for row in got["memory_tool_calls"])
    assert len(want["skipped_events"]) > 100 and got["skipped_events"] == want["skipped_events"]  # the tool and lifecycle events
    assert got["event_details"] == want["event_details"]


def test_bad_input_lands_on_dead_letter_with_a_reason(live: dict[str, Any], workload: dict[str, Any]) -> None:
    got = dead_letter_reasons(live["db"])
    assert got == dead_letter_reasons(workload["ref"])
    assert Counter(got) == Counter({"malformed_json": 1, "wrong_shape": 1, "missing_field": 2,
                                    "bad_timestamp": 1, "not_utf8": 1, "unknown_schema_version": 1, "unknown_payload": 1})
    skipped = [r for r in frame_tables(live["db"])["skipped_events"] if r[1] == "empty_body"]  # the empty body: valid, not a turn
    assert len(skipped) == 1
    con = duckdb.connect(str(live["db"]), read_only=True)
    inputs = {r[0] for r in con.execute("SELECT DISTINCT input FROM dead_letters").fetchall()}
    con.close()
    assert inputs <= {live["topics"].hook_events}


def test_kill9_of_the_worker_mid_stream(kafka_bootstrap: str, workload: dict[str, Any], live: dict[str, Any]) -> None:
    topics = run_namespace(kafka_bootstrap, workload, "kill")
    d: Path = workload["dir"]
    rnd = random.Random(int(os.environ.get("HIVESTREAM_TEST_SEED", "11")))
    total = workload["captures"]
    for fraction in sorted(rnd.uniform(0.15, 0.85) for _ in range(2)):
        w = start_worker(kafka_bootstrap, topics.namespace, d / "w-kill", log=d / "w-kill.log")
        target = int(total * fraction)
        try:
            wait_until(lambda t=target: end_offset_sum(kafka_bootstrap, topics.frames) >= t, 180, f"{target} frame events")
        finally:
            kill9(w)
    run_worker_until_done(kafka_bootstrap, topics, d / "w-kill", log=d / "w-kill.log")
    db = d / "kill.duckdb"
    project_all(kafka_bootstrap, topics, db)
    assert frame_tables(db) == frame_tables(live["db"])


def test_a_second_worker_takes_over_when_one_dies(kafka_bootstrap: str, workload: dict[str, Any], live: dict[str, Any]) -> None:
    topics = run_namespace(kafka_bootstrap, workload, "pair")
    d: Path = workload["dir"]
    a = start_worker(kafka_bootstrap, topics.namespace, d / "w-a", log=d / "w-pair.log")
    b = start_worker(kafka_bootstrap, topics.namespace, d / "w-b", log=d / "w-pair.log")
    try:
        wait_until(lambda: end_offset_sum(kafka_bootstrap, topics.frames) >= workload["captures"] // 3, 180, "a third of the frames")
        kill9(a)
        wait_worker_done(kafka_bootstrap, topics)
    finally:
        stop(a)
        stop(b)
    db = d / "pair.duckdb"
    project_all(kafka_bootstrap, topics, db)
    assert frame_tables(db) == frame_tables(live["db"])


def _project_cmd(bootstrap: str, topics: Topics, db: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hivestream", "project", "--db", str(db), "--namespace", topics.namespace,
            "--bootstrap", bootstrap, *extra]


def test_kill9_of_the_projector_and_queries_while_it_runs(kafka_bootstrap: str, live: dict[str, Any], tmp_path: Path) -> None:
    """Three projector runs, each killed at a random point after its first snapshot; while each runs,
    a query reads that snapshot (the file is held); the last run, to the end, equals the live projection."""
    topics: Topics = live["topics"]
    db = tmp_path / "proj.duckdb"
    snap = db.with_name(db.name + ".snapshot")
    env = {**os.environ, "HIVESTREAM_BATCH_SIZE": "300"}
    rnd = random.Random(5)
    seen: list[int] = []
    for _ in range(3):
        started = time.time()
        p = subprocess.Popen(_project_cmd(kafka_bootstrap, topics, db, "--snapshot-every", "0.2"), cwd=REPO_ROOT, env=env)
        try:
            wait_until(lambda p=p, t=started: p.poll() is not None or (snap.exists() and snap.stat().st_mtime > t), 120, "this projector's first snapshot")
            assert p.poll() is None, f"the projector exited with {p.returncode}"
            time.sleep(rnd.uniform(0.5, 3.0))
            q = subprocess.run([sys.executable, "-m", "hivestream", "query", "totals", "--db", str(db), "--format", "json"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
            assert p.poll() is None, "the projector stopped before the query ended: the query did not run beside it"
        finally:
            kill9(p) if p.poll() is None else None
        assert q.returncode == 0, q.stderr
        said = " ".join(q.stderr.split())
        assert "answered from the snapshot" in said and "a writer holds" in said, said
        (row,) = json.loads(q.stdout)
        seen.append(int(row["captures"]))
    subprocess.run(_project_cmd(kafka_bootstrap, topics, db, "--idle-exit", "3"), cwd=REPO_ROOT, env=env, check=True, timeout=300)
    final = frame_tables(db)
    assert final == frame_tables(live["db"])
    assert all(0 <= n <= len(final["captures"]) for n in seen) and max(seen) > 0


def test_replay_into_a_new_file_gives_the_same_query_results(kafka_bootstrap: str, live: dict[str, Any], tmp_path: Path) -> None:
    topics: Topics = live["topics"]
    new = tmp_path / "replayed.duckdb"
    subprocess.run([sys.executable, "-m", "hivestream", "replay", "--db", str(new), "--namespace", topics.namespace,
                    "--bootstrap", kafka_bootstrap], cwd=REPO_ROOT, check=True, timeout=300)
    a = duckdb.connect(str(live["db"]), read_only=True)
    b = duckdb.connect(str(new), read_only=True)
    for name, q in QUERIES.items():
        assert dumps(a.execute(q.sql).fetchall()) == dumps(b.execute(q.sql).fetchall()), name
    a.close()
    b.close()
    assert not new.with_name(new.name + ".replay-tmp").exists()


def test_a_month_old_log_gives_the_same_frames(kafka_bootstrap: str, sessions: SessionSet, tmp_path: Path) -> None:
    month = 30 * 86_400_000
    events = session_events(sessions.root)
    old = [ev.model_copy(update={"event_time_ms": ev.event_time_ms - month}) for ev in events]
    live_db = tmp_path / "now.duckdb"
    run_files([write_jsonl(tmp_path / "now.jsonl", mixed_lines(events, bad=[]))], live_db)
    topics = Topics(unique_namespace("old"))
    create_topics(kafka_bootstrap, topics)
    produce(kafka_bootstrap, topics.hook_events, mixed_lines(old, bad=[]))
    run_worker_until_done(kafka_bootstrap, topics, tmp_path / "w-old")
    db = tmp_path / "old.duckdb"
    project_all(kafka_bootstrap, topics, db)
    got, want = frame_tables(db)["frames"], frame_tables(live_db)["frames"]
    assert len(got) == len(want) > 100
    for g, w_ in zip(got, want, strict=True):
        assert g[:7] == w_[:7] and g[10:] == w_[10:]  # ids, content, provenance, counts, sources
        assert (g[7] + month, g[8] + month, g[9] + month) == w_[7:10]  # times shifted by exactly a month


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=timeout, check=True)


def test_cli_produce_worker_project_and_reprocess(kafka_bootstrap: str, sessions: SessionSet, tmp_path: Path) -> None:
    """The session files through `hivestream produce`, `worker` and `project` equal `hivestream run`;
    `reprocess` with body+event into frames.v2 equals `hivestream run --key-strategy body+event`."""
    topics = Topics(unique_namespace("cli"))
    create_topics(kafka_bootstrap, topics)
    corpus = [str(d) for d in sessions.dirs()]
    common = ["--bootstrap", kafka_bootstrap, "--namespace", topics.namespace]
    res = _cli("produce", *corpus, "--gateway", *common)
    assert "produced" in res.stdout and "events/s" in res.stdout
    run_worker_until_done(kafka_bootstrap, topics, tmp_path / "w")
    _cli("project", "--db", str(tmp_path / "k.duckdb"), "--idle-exit", "3", *common)
    _cli("run", *corpus, "--gateway", "--db", str(tmp_path / "e.duckdb"))
    assert frame_tables(tmp_path / "k.duckdb") == frame_tables(tmp_path / "e.duckdb")

    v2 = Topics(topics.namespace, "v2")
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    r = subprocess.Popen([sys.executable, "-m", "hivestream", "reprocess", "--version", "v2", "--key-strategy", "body+event",
                          "--data-dir", str(tmp_path / "w2"), *common], cwd=REPO_ROOT, env=env)
    try:
        wait_worker_done(kafka_bootstrap, v2)
    finally:
        stop(r)
    _cli("project", "--frames-version", "v2", "--db", str(tmp_path / "k2.duckdb"), "--idle-exit", "3", *common)
    _cli("run", *corpus, "--gateway", "--key-strategy", "body+event", "--db", str(tmp_path / "e2.duckdb"))
    got, base = frame_tables(tmp_path / "k2.duckdb"), frame_tables(tmp_path / "k.duckdb")
    assert got == frame_tables(tmp_path / "e2.duckdb")
    assert len(got["frames"]) >= len(base["frames"])  # body+event never merges across event types
    assert all(row[1].startswith(row[6] + ":") for row in got["frames"])  # dedup_key = event type + body hash


def test_replay_from_a_time(kafka_bootstrap: str, live: dict[str, Any], tmp_path: Path) -> None:
    topics: Topics = live["topics"]
    common = ["--namespace", topics.namespace, "--bootstrap", kafka_bootstrap]
    _cli("replay", "--db", str(tmp_path / "all.duckdb"), "--from-time", "1970-01-01T00:00:00Z", *common)
    assert frame_tables(tmp_path / "all.duckdb") == frame_tables(live["db"])
    _cli("replay", "--db", str(tmp_path / "none.duckdb"), "--from-time", "2999-01-01T00:00:00Z", *common)
    assert frame_tables(tmp_path / "none.duckdb") == {"frames": [], "captures": [], "memory_tool_calls": [], "skipped_events": [],
                                                      "event_details": []}


def test_replay_refuses_to_swap_a_file_a_writer_holds(kafka_bootstrap: str, live: dict[str, Any], tmp_path: Path) -> None:
    held = tmp_path / "held.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ok', flush=True); time.sleep(60)",
                               str(held)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        res = subprocess.run([sys.executable, "-m", "hivestream", "replay", "--db", str(held), "--namespace", live["topics"].namespace,
                              "--bootstrap", kafka_bootstrap], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and "held by a running writer" in " ".join(res.stderr.split())  # rich wraps long paths
    finally:
        kill9(holder)
