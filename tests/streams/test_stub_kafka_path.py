"""The memory-stub matcher on the real broker: ``stubs produce`` → faust stub worker (killed with
-9 mid-stream and restarted) → ``stubs project``, equal to the embedded ``stubs run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.errors import KafkaError

from streams.kafka.topics import Topics
from tests.support.kafka_harness import REPO_ROOT, end_offset_sum, group_lag, kill9, stop, unique_namespace, wait_until
from tests.support.stub_kafka_scenario import embedded, message_outcomes, stub_scenario, stub_tables, write_scenario

pytestmark = pytest.mark.kafka

POLICY_FLAGS = ["--threshold", "0.6", "--top-n", "2", "--budget", "500"]  # tests.projections.test_stub_projection.POLICY


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``hivestream`` in a subprocess; fails the test on a non-zero exit."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    r = subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def start_stub_worker(bootstrap: str, ns: str, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    """``hivestream stubs worker`` as a separate process."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "hivestream", "stubs", "worker", "--namespace", ns, "--data-dir", str(data_dir),
                                 "--loglevel", "info", *POLICY_FLAGS], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def test_stub_kafka_path_equals_the_embedded_runner(kafka_bootstrap: str, tmp_path: Path) -> None:
    ns = unique_namespace("stubs")
    t = Topics(ns)
    log = write_scenario(tmp_path / "log.jsonl", stub_scenario(seed=21, n_messages=400))
    embedded(log, tmp_path / "embedded.duckdb")
    want = stub_tables(tmp_path / "embedded.duckdb")

    cli(kafka_bootstrap, "stubs", "topics", "--namespace", ns, "--partitions", "4")
    out = cli(kafka_bootstrap, "stubs", "produce", str(log), "--namespace", ns).stdout
    assert "broadcast to 4 partitions" in out
    lines = sum(1 for raw in log.read_bytes().split(b"\n") if raw.strip())

    messages = {(d["channel"], d["message_id"]) for d in map(_json_or_none, log.read_bytes().splitlines())
                if isinstance(d, dict) and d.get("type") == "message-embedded"}

    def caught_up() -> bool:
        """The worker's consumer group has committed every stub-events record (faust #596's stall,
        which used to stop a restarted worker's commits, is fixed in streams.kafka.faust_app)."""
        try:
            return group_lag(kafka_bootstrap, f"{ns}-stubs", [t.stub_events]) == 0
        except KafkaError:
            return False

    for share in (5, 3, 2):  # kill -9 at a fifth, a third and half of the output
        w = start_stub_worker(kafka_bootstrap, ns, tmp_path / "w", tmp_path / "worker.log")
        try:
            wait_until(lambda s=share: end_offset_sum(kafka_bootstrap, t.stub_matches) >= lines // s, 180, f"1/{share} of the stub output")
        finally:
            kill9(w)
    w = start_stub_worker(kafka_bootstrap, ns, tmp_path / "w", tmp_path / "worker.log")
    try:
        wait_until(caught_up, 240, "the stub worker's consumer group to catch up")
        assert messages <= message_outcomes(kafka_bootstrap, t.stub_matches)
    finally:
        stop(w)

    db = tmp_path / "kafka.duckdb"
    first = cli(kafka_bootstrap, "stubs", "project", "--db", str(db), "--namespace", ns, "--until-caught-up", *POLICY_FLAGS).stdout
    assert "dead letters" in first
    got = stub_tables(db)
    assert want["stub_matches"] and want["stub_dead_letters"]
    for table in want:
        assert got[table] == want[table], table
    again = cli(kafka_bootstrap, "stubs", "project", "--db", str(db), "--namespace", ns, "--idle-exit", "2", *POLICY_FLAGS).stdout
    assert "projected 0 records" in again
    assert stub_tables(db) == got
    # the projection was built with the worker's settings; what-if reads them
    whatif = cli(kafka_bootstrap, "stubs", "whatif", str(log), "--db", str(db), "--threshold", "0.6").stdout
    assert "0.6" in whatif


def _json_or_none(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return None
