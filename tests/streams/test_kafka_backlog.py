"""The Kafka path on a generated multi-day backlog, two workers, ten kill -9s: equal to ``hivestream run``.

50,000 capture events over twelve days (each turn captured by an OpenClaw gateway and a Claude Code
or Codex backend, 250–350 ms apart; re-sent short prompts; gateway lines that arrive minutes late;
bad lines) are produced by ``hivestream produce`` into four partitions. Two ``hivestream worker``
processes share them; one of them is killed with SIGKILL at ten random points of the output and
started again each time. The backlog spans many fetches and far more than the allowed lateness.
The workers are done when their consumer group has committed every record (zero committed lag:
faust #596's stall is fixed in :mod:`streams.kafka.faust_app`); then ``frames``, ``frame_captures``
(first writers and late flags included) and the dead letters equal the embedded runner's, row for row.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from bench.backlog import BacklogSpec, write_backlog
from streams.kafka.topics import Topics
from tests.support.kafka_harness import (
    dead_letter_reasons,
    end_offset_sum,
    frame_tables,
    group_lag,
    hivestream_cli,
    kill9,
    project_all,
    start_worker,
    stop,
    unique_namespace,
    wait_until,
    wait_worker_done,
    worker_group,
)

pytestmark = pytest.mark.kafka

TURNS = 12_500  # 4 capture events per turn: 50,000 events
KILLS = 10



def test_backlog_two_workers_ten_kills_equal_the_embedded_runner(kafka_bootstrap: str, tmp_path: Path) -> None:
    log = tmp_path / "backlog.jsonl"
    lines = write_backlog(log, BacklogSpec(turns=TURNS, sessions=500, seed=int(os.environ.get("HIVESTREAM_TEST_SEED", "9"))))
    assert lines >= 4 * TURNS
    ref = tmp_path / "embedded.duckdb"
    hivestream_cli(kafka_bootstrap, "run", str(log), "--db", str(ref))

    topics = Topics(unique_namespace("backlog"))
    hivestream_cli(kafka_bootstrap, "topics", "--namespace", topics.namespace, "--partitions", "4")
    hivestream_cli(kafka_bootstrap, "produce", str(log), "--namespace", topics.namespace)
    total = end_offset_sum(kafka_bootstrap, topics.hook_events)
    assert total >= 4 * TURNS

    rnd = random.Random(int(os.environ.get("HIVESTREAM_TEST_SEED", "9")))
    logfile = tmp_path / "workers.log"
    workers = {w: start_worker(kafka_bootstrap, topics.namespace, tmp_path / f"w-{w}", log=logfile) for w in ("a", "b")}
    try:
        for target in sorted(int(total * rnd.uniform(0.05, 0.9)) for _ in range(KILLS)):
            wait_until(lambda t=target: end_offset_sum(kafka_bootstrap, topics.frames) >= t, 300, f"{target} frame events")
            victim = rnd.choice(sorted(workers))
            kill9(workers[victim])
            workers[victim] = start_worker(kafka_bootstrap, topics.namespace, tmp_path / f"w-{victim}", log=logfile)
        wait_worker_done(kafka_bootstrap, topics, timeout_s=600)
        assert group_lag(kafka_bootstrap, worker_group(topics), [topics.hook_events]) == 0
        assert "total lag 0" in hivestream_cli(kafka_bootstrap, "lag", "--namespace", topics.namespace)  # exits 0 only when caught up
    finally:
        for w in workers.values():
            stop(w)

    db = tmp_path / "kafka.duckdb"
    project_all(kafka_bootstrap, topics, db)
    got, want = frame_tables(db), frame_tables(ref)
    assert len(want["captures"]) == 4 * TURNS  # every capture event; the bad lines are extra lines
    assert 1.8 * TURNS <= len(want["frames"]) <= 2 * TURNS  # about two frames a turn (prompt and reply)
    assert set(dead_letter_reasons(ref)) == {"malformed_json", "bad_timestamp"}
    assert {r[1] for r in want["skipped_events"]} == {"empty_body"}  # the backlog's empty replies: valid, not turns
    assert got["frames"] == want["frames"]
    assert got["captures"] == want["captures"]
    assert got["skipped_events"] == want["skipped_events"] and got["event_details"] == want["event_details"]
    assert dead_letter_reasons(db) == dead_letter_reasons(ref)

