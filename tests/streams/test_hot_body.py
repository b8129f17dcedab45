"""One body captured 40,000 times inside one window: its dedup-state entry outgrows 1 MiB.

A frame remembers every event id it absorbed (at-least-once re-delivery gets the same answer), so
the changelog record of a hot body's key grows with its captures in the window: ~52 bytes each, past
Kafka's default ``max.message.bytes`` (1,048,588) at ~20,000. The broker refused that record, and the
worker stops on it (a worker that went on would lose the write unseen, and the partition's state
with it). The changelog topics hivestream creates take records up to 16 MiB
(:data:`streams.kafka.faust_app.CHANGELOG_CONFIG`). Here: half the captures, a kill -9 after the
second half was produced, a new worker restoring the >1 MiB records, zero committed lag, and the
tables equal the embedded runner's row for row.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hivestream.embedded.frames import run_files
from streams.kafka.topics import Topics
from streams.produce.keys import hook_event_key
from tests.support.kafka_harness import (
    create_topics,
    dumps,
    frame_tables,
    group_lag,
    kill9,
    produce,
    project_all,
    session_events,
    start_worker,
    stop,
    topic_values,
    unique_namespace,
    wait_until,
    worker_group,
    write_jsonl,
)
from tests.support.session_sets import generated_set

pytestmark = pytest.mark.kafka

N = 40_000


def test_a_hot_body_s_state_entry_past_1_mib_is_written_and_restored(kafka_bootstrap: str, tmp_path: Path) -> None:
    base = next(e for e in session_events(generated_set(tmp_path / "sessions").root) if e.body)
    hot = [base.model_copy(update={"event_id": f"hot-{i:06d}-{'a' * 24}", "event_time_ms": base.event_time_ms + i * 10}) for i in range(N)]
    recs = [(hook_event_key(e), e.to_json()) for e in hot]  # 400 s of captures: one window (10 min)
    topics = Topics(unique_namespace("hot"))
    create_topics(kafka_bootstrap, topics)
    group = worker_group(topics)
    produce(kafka_bootstrap, topics.hook_events, recs[: N // 2])
    w = start_worker(kafka_bootstrap, topics.namespace, tmp_path / "w1", log=tmp_path / "w1.log")
    try:
        wait_until(lambda: w.poll() is not None or group_lag(kafka_bootstrap, group, [topics.hook_events]) == 0, 300, "the first half")
        assert w.poll() is None, (tmp_path / "w1.log").read_text(errors="replace")[-3000:]
        produce(kafka_bootstrap, topics.hook_events, recs[N // 2:])
        time.sleep(2)
    finally:
        kill9(w)
    assert group_lag(kafka_bootstrap, group, [topics.hook_events]) > 0
    w = start_worker(kafka_bootstrap, topics.namespace, tmp_path / "w2", log=tmp_path / "w2.log")
    try:
        wait_until(lambda: w.poll() is not None or group_lag(kafka_bootstrap, group, [topics.hook_events]) == 0, 600, "the rest")
        assert w.poll() is None, (tmp_path / "w2.log").read_text(errors="replace")[-3000:]
    finally:
        stop(w)
    assert group_lag(kafka_bootstrap, group, [topics.hook_events]) == 0
    changelog = f"{group}-dedup-state-changelog"
    assert max(len(v) for v in topic_values(kafka_bootstrap, changelog)) > 1_048_588  # the case: past Kafka's default
    db = tmp_path / "kafka.duckdb"
    project_all(kafka_bootstrap, topics, db)
    ref = tmp_path / "embedded.duckdb"
    run_files([write_jsonl(tmp_path / "in.jsonl", recs)], ref)
    got, want = frame_tables(db), frame_tables(ref)
    assert len(want["captures"]) == N and len(want["frames"]) == 1
    for table in ("frames", "captures"):
        assert dumps(got[table]) == dumps(want[table]), table
