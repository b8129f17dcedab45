"""The memory-stub Kafka path on a generated multi-day backlog, two workers, kill -9s: equal to ``stubs run``.

50,000 stub log lines over twelve days (``bench/stage_backlog.py``: 40 channels × 4 stubs and a
global set, nightly refreshes, channel stubs deleted and re-created, a global stub deleted,
messages with 384-dimensional embeddings near a stub or unrelated, subagent and re-sent messages,
bad lines) go through ``hivestream stubs produce`` into four partitions (global stub events
broadcast to each). Two ``hivestream stubs worker`` processes share them; one of them is killed
with SIGKILL at two random points of the output and started again. The input spans many fetches
per partition. When the workers are done, ``hivestream stubs project`` gives the same stub tables
as the embedded ``hivestream stubs run``, row for row.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.errors import KafkaError

from bench.stage_backlog import StubBacklogSpec, stub_backlog, write_lines
from streams.kafka.topics import Topics
from tests.support.kafka_harness import REPO_ROOT, end_offset_sum, group_lag, hivestream_cli, kill9, stop, unique_namespace, wait_until
from tests.support.stub_kafka_scenario import message_outcomes, stub_tables

pytestmark = pytest.mark.kafka

EVENTS = 50_000
KILLS = 2
SEED = int(os.environ.get("HIVESTREAM_TEST_SEED", "9"))
POLICY = ["--threshold", "0.65", "--top-n", "3", "--budget", "4000"]  # the defaults, given to the worker, the projector and `stubs run` alike


def start_stub_worker(bootstrap: str, ns: str, data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    """``hivestream stubs worker`` with :data:`POLICY` as a separate process (rocksdb table in ``data_dir``)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "hivestream", "stubs", "worker", "--namespace", ns, "--data-dir", str(data_dir),
                                 "--loglevel", "info", *POLICY], cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_stub_workers_done(bootstrap: str, t: Topics, timeout_s: float = 600) -> None:
    """Wait until the stub workers' consumer group has committed every ``stub-events`` record (zero
    committed lag; faust #596's stall is fixed in ``streams.kafka.faust_app``).

    Raises:
        TimeoutError: when that does not happen within ``timeout_s`` seconds.
    """

    def done() -> bool:
        try:
            return group_lag(bootstrap, f"{t.namespace}-stubs", [t.stub_events]) == 0
        except KafkaError:
            return False

    wait_until(done, timeout_s, "the stub workers' consumer group to catch up", every_s=2.0)


def test_stub_backlog_two_workers_kill9_equal_the_embedded_runner(kafka_bootstrap: str, tmp_path: Path) -> None:
    log = tmp_path / "stubs.jsonl"
    lines = write_lines(log, stub_backlog(StubBacklogSpec(events=EVENTS, seed=SEED)))
    assert lines >= EVENTS
    ref = tmp_path / "embedded.duckdb"
    hivestream_cli(kafka_bootstrap, "stubs", "run", str(log), "--db", str(ref), *POLICY)
    messages = {(d["channel"], d["message_id"]) for d in map(_json_or_none, log.read_bytes().splitlines())
                if isinstance(d, dict) and d.get("type") == "message-embedded" and not str(d.get("event_id", "")).startswith("bad-")}

    t = Topics(unique_namespace("stub-backlog"))
    hivestream_cli(kafka_bootstrap, "stubs", "topics", "--namespace", t.namespace, "--partitions", "4")
    out = hivestream_cli(kafka_bootstrap, "stubs", "produce", str(log), "--namespace", t.namespace)
    assert "broadcast to 4 partitions" in out
    total = end_offset_sum(kafka_bootstrap, t.stub_events)
    assert total > lines  # global stub events are written to every partition

    rnd = random.Random(SEED)
    wlog = tmp_path / "workers.log"
    workers = {w: start_stub_worker(kafka_bootstrap, t.namespace, tmp_path / f"w-{w}", wlog) for w in ("a", "b")}
    try:
        # stub-matches gets about one record per stub event plus 1.5 per message: aim at 15-75 % of the input
        for target in sorted(int(total * rnd.uniform(0.15, 0.75)) for _ in range(KILLS)):
            wait_until(lambda n=target: end_offset_sum(kafka_bootstrap, t.stub_matches) >= n, 300, f"{target} stub-matches records")
            victim = rnd.choice(sorted(workers))
            kill9(workers[victim])
            workers[victim] = start_stub_worker(kafka_bootstrap, t.namespace, tmp_path / f"w-{victim}", wlog)
        wait_stub_workers_done(kafka_bootstrap, t)
        assert group_lag(kafka_bootstrap, f"{t.namespace}-stubs", [t.stub_events]) == 0
        assert messages <= message_outcomes(kafka_bootstrap, t.stub_matches)
    finally:
        for w in workers.values():
            stop(w)

    db = tmp_path / "kafka.duckdb"
    hivestream_cli(kafka_bootstrap, "stubs", "project", "--db", str(db), "--namespace", t.namespace, "--until-caught-up", *POLICY)
    got, want = stub_tables(db), stub_tables(ref)
    assert len(want["stub_messages"]) == len(messages)
    assert len(want["stub_matches"]) > len(messages) // 4  # the backlog matches: not a table of empty outcomes
    assert {r[0] for r in want["stub_dead_letters"]} == {"malformed_json", "wrong_shape"}
    for table in want:
        assert got[table] == want[table], table


def _json_or_none(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return None
