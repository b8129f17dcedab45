"""The KnowHub Kafka path on a generated multi-day backlog, two workers, kill -9s: equal to ``kb run``.

15,000 KnowHub hook lines over twelve days (``bench/stage_backlog.py``: OpenClaw plugin sessions and
Claude Code / Codex MCP calls of kb_search / kb_content / kb_submit; lessons re-submitted within and
beyond the one-day experience window, re-worded in case and spacing; redacted and quarantined
submissions, failed and bad calls) go through ``hivestream produce`` into four partitions. Two
``hivestream worker`` processes share them; one is killed with SIGKILL at two random points of the
output and started again. When they are done, ``hivestream kb project`` gives the same KnowHub
tables as the embedded ``hivestream kb run``, row for row (dead letters: key, reason and detail,
since offsets and the serialised original differ by design, as in ``tests/streams/test_kb_kafka_path.py``).
The size is what CI time allows: the KnowHub steps cost about 1 ms of CPU per line on each path.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

from bench.stage_backlog import ExperienceBacklogSpec, kb_backlog, write_lines
from streams.kafka.topics import Topics
from tests.streams.test_kb_pipeline import tables
from tests.support.kafka_harness import (
    create_topics,
    end_offset_sum,
    group_lag,
    hivestream_cli,
    kill9,
    start_worker,
    stop,
    topic_values,
    unique_namespace,
    wait_until,
    wait_worker_done,
    worker_group,
)

pytestmark = pytest.mark.kafka

EVENTS = 15_000
KILLS = 2
SEED = int(os.environ.get("HIVESTREAM_TEST_SEED", "9"))


def event_ids(bootstrap: str, topic: str) -> set[str]:
    """The ``event_id`` of every record on ``topic``."""
    return {str(json.loads(v)["event_id"]) for v in topic_values(bootstrap, topic)}


def test_kb_backlog_two_workers_kill9_equal_the_embedded_runner(kafka_bootstrap: str, tmp_path: Path) -> None:
    log = tmp_path / "kb.jsonl"
    lines = write_lines(log, kb_backlog(ExperienceBacklogSpec(events=EVENTS, seed=SEED)))
    assert lines >= EVENTS
    ref = tmp_path / "embedded.duckdb"
    out = " ".join(hivestream_cli(kafka_bootstrap, "kb", "run", str(log), "--db", str(ref)).split())
    derived = re.search(r"KnowHub events: (.*?); extraction", out)
    assert derived, out
    expected_events = sum(int(n) for n in re.findall(r" (\d+)", " " + derived.group(1)))

    t = Topics(unique_namespace("kb-backlog"))
    create_topics(kafka_bootstrap, t, partitions=4)
    hivestream_cli(kafka_bootstrap, "produce", str(log), "--namespace", t.namespace)
    total = end_offset_sum(kafka_bootstrap, t.hook_events)
    assert total == lines

    rnd = random.Random(SEED)
    wlog = tmp_path / "workers.log"
    workers = {w: start_worker(kafka_bootstrap, t.namespace, tmp_path / f"w-{w}", log=wlog) for w in ("a", "b")}
    try:
        for target in sorted(int(expected_events * rnd.uniform(0.15, 0.75)) for _ in range(KILLS)):
            wait_until(lambda n=target: end_offset_sum(kafka_bootstrap, t.experience_events) >= n, 300, f"{target} KnowHub events")
            victim = rnd.choice(sorted(workers))
            kill9(workers[victim])
            workers[victim] = start_worker(kafka_bootstrap, t.namespace, tmp_path / f"w-{victim}", log=wlog)
        wait_worker_done(kafka_bootstrap, t, timeout_s=600)  # zero committed lag (faust #596 fixed in streams.kafka.faust_app)
        assert group_lag(kafka_bootstrap, worker_group(t), [t.hook_events]) == 0
        assert len(event_ids(kafka_bootstrap, t.experience_events)) >= expected_events
    finally:
        for w in workers.values():
            stop(w)

    db = tmp_path / "kafka.duckdb"
    hivestream_cli(kafka_bootstrap, "kb", "project", "--db", str(db), "--namespace", t.namespace, "--until-caught-up")
    got, want = tables(db), tables(ref)
    exps = want["experiences"]
    assert len(exps) < sum(r[10] for r in exps)  # submissions collapsed into experiences within the window
    assert len({r[1] for r in exps}) < len(exps)  # and a lesson came back after the window: a second experience
    assert {r[6] for r in exps} == {"pending", "quarantined"}
    assert want["experience_redactions"] and want["kb_telemetry"]
    for name in ("experiences", "experience_submissions", "experience_redactions", "experience_reviews", "kb_telemetry"):
        assert got[name] == want[name], name
    assert sorted(r[1:4] for r in got["kb_dead_letters"]) == sorted(r[1:4] for r in want["kb_dead_letters"])
    assert {r[2] for r in want["kb_dead_letters"]} >= {"missing_field", "malformed_json"}
