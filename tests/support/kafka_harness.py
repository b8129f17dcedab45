"""Helpers for the tests on the real broker: topics, workers as processes, waiting, tables."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from projections.frames.projection import FramesProjection
from projections.frames.projector import Projector
from streams.importers.files import import_file
from streams.kafka.lag import consumer_lag
from streams.kafka.lag import worker_group as lag_worker_group
from streams.kafka.topics import Topics, ensure_topics
from streams.model.deadletter import RejectedInput
from streams.model.events import HookEvent
from streams.produce.keys import hook_event_key

REPO_ROOT = Path(__file__).resolve().parents[2]

BAD_LINES = [
    b"{not json",
    b"[1, 2, 3]",
    b'{"hook_event_name": "Stop", "ts": "2026-01-01T00:00:00Z"}',
    b'{"content": "[hm src:openclaw event:stop]   ", "timestamp": 1}',
    b'{"content": "x", "timestamp": "the day after tomorrow"}',
    b'{"content": "\xff\xfe broken", "timestamp": 1}',
    b'{"schema_version": 7, "event_id": "e"}',
    b'{"type": "message", "action": "sent", "timestamp": 1, "context": {"content": "no session"}}',
    b'{"foo": "bar"}',
]


def hivestream_cli(bootstrap: str, *args: str, timeout: int = 600) -> str:
    """Run ``hivestream ARGS`` against ``bootstrap``; its stdout.

    Raises:
        AssertionError: with its output when it exits non-zero.
    """
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    r = subprocess.run([sys.executable, "-m", "hivestream", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def unique_namespace(prefix: str) -> str:
    """A namespace no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def session_events(root: Path, rounds: int = 1, shift_ms: int = 0) -> list[HookEvent]:
    """Every hook event of the session files under ``root`` (the corpus or the generated set,
    :mod:`tests.support.session_sets`) with the gateway capture, ``rounds`` times (fresh ids, one day apart
    each round), all shifted by ``shift_ms``."""
    base: list[HookEvent] = []
    for p in sorted(root.rglob("*.jsonl")):
        _, items = import_file(p, gateway=True)
        base.extend(ev for _o, _r, ev in items if not isinstance(ev, RejectedInput))
    day = 86_400_000
    return [
        ev if r == 0 and shift_ms == 0 else ev.model_copy(update={"event_id": f"{ev.event_id}-{r}", "event_time_ms": ev.event_time_ms + r * day + shift_ms})
        for r in range(rounds)
        for ev in base
    ]


def memory_tool_events(n: int = 12, t0_ms: int = 1_780_000_000_000) -> list[HookEvent]:
    """Memory tool calls as the runtimes' hooks report them: Claude Code ``PostToolUse`` of hive-mind's
    MCP tools (one with a secret in its arguments, one failed) and OpenClaw ``after_tool_call``."""
    from streams.model.adapters import adapt

    out = []
    for i in range(n):
        t = t0_ms + i * 60_000
        if i % 3 == 2:
            payload: dict[str, Any] = {"hook": "after_tool_call", "timestamp": t, "ctx": {"agentId": f"agent-{i % 2}", "sessionKey": "s-oc"},
                                       "event": {"toolName": "memory_search", "params": {"query": f"deploy notes {i}"}, "result": {"results": [1, 2]}}}
        else:
            tool = "mcp__hive-mind__recall_memory" if i % 3 == 0 else "mcp__hive-mind__save_memory"
            payload = {"hook_event_name": "PostToolUse", "session_id": f"s-cc-{i % 2}", "ts": t, "tool_name": tool,
                       "tool_input": {"query": f"release checklist {i}", "api_key": "sk-ant-api03-" + "x" * 40 if i == 1 else ""},
                       "tool_response": {"memories": [{"id": i}]} if i != 4 else {"error": "timeout"}}
        out.append(adapt(payload))
    return out


def mixed_lines(events: list[HookEvent], bad: Iterable[bytes] = BAD_LINES, seed: int = 7) -> list[tuple[bytes, bytes]]:
    """(key, value) records: the events as JSON keyed as ``hivestream produce`` keys them, with ``bad`` lines mixed in."""
    recs = [(hook_event_key(ev), ev.to_json()) for ev in events]
    rnd = random.Random(seed)
    for b in bad:
        recs.insert(rnd.randrange(len(recs) + 1), (b"bad", b))
    return recs


def write_jsonl(path: Path, recs: list[tuple[bytes, bytes]]) -> Path:
    """The record values as a JSONL file (the embedded runner's input)."""
    path.write_bytes(b"".join(v + b"\n" for _k, v in recs))
    return path


def create_topics(bootstrap: str, topics: Topics, partitions: int = 4) -> None:
    """Create the namespace's topics with ``partitions`` partitions each (dead-letter topics: 1)."""
    ensure_topics(bootstrap, topics.specs(partitions))


def produce(bootstrap: str, topic: str, recs: list[tuple[bytes, bytes]]) -> None:
    """Send the records in order and wait for every acknowledgement."""
    p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=10, acks="all", max_request_size=2_097_152)
    futs = [p.send(topic, key=k, value=v) for k, v in recs]
    p.flush()
    for f in futs:
        f.get(timeout=30)
    p.close()


def start_worker(bootstrap: str, namespace: str, data_dir: Path, *extra: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """``hivestream worker`` as a separate process (rocksdb store in ``data_dir``)."""
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": bootstrap}
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "hivestream", "worker", "--namespace", namespace, "--data-dir", str(data_dir),
         "--loglevel", "info", *extra],
        cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
    )


def kill9(p: subprocess.Popen[bytes]) -> None:
    """SIGKILL and reap."""
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=30)


def stop(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s."""
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill9(p)


def end_offset_sum(bootstrap: str, topic: str) -> int:
    """Sum of the end offsets of every partition of ``topic`` (records ever written)."""
    c = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        parts = c.partitions_for_topic(topic) or set()
        ends = c.end_offsets([TopicPartition(topic, p) for p in parts])
        return sum(ends.values())
    finally:
        c.close()


def group_lag(bootstrap: str, group: str, topics: list[str]) -> int:
    """Records of ``topics`` not yet committed by consumer ``group`` (all, when none committed)."""
    return sum(p.lag for p in consumer_lag(bootstrap, group, topics))


def wait_until(pred: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.5) -> None:
    """Poll ``pred`` until it holds.

    Raises:
        TimeoutError: after ``timeout_s`` seconds, naming ``what``.
    """
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


def worker_group(topics: Topics) -> str:
    """The consumer group of the frames workers of ``topics``."""
    return lag_worker_group(topics.namespace, topics.frames_version)


def wait_worker_done(bootstrap: str, topics: Topics, timeout_s: float = 300) -> None:
    """Wait until the frames worker is done: its consumer group has committed every hook-events
    record (zero committed lag; faust #596 is fixed by :mod:`streams.kafka.faust_app`, so a worker that
    processed everything also commits it).

    Raises:
        TimeoutError: when the group has not caught up after ``timeout_s`` seconds.
    """
    group = worker_group(topics)

    def done() -> bool:
        try:
            return end_offset_sum(bootstrap, topics.hook_events) > 0 and group_lag(bootstrap, group, [topics.hook_events]) == 0
        except KafkaError:  # the group coordinator is not ready yet on a fresh broker
            return False

    wait_until(done, timeout_s, f"consumer group {group} to catch up", every_s=1.0)


def topic_values(bootstrap: str, topic: str) -> Iterator[bytes]:
    """Every non-empty record value of ``topic``, partition by partition from the start to the end
    offsets at the time of the call (read with aiokafka through :class:`projections.reader.consumer.PartitionReader`)."""
    from projections.reader.consumer import PartitionReader, TopicPartition

    c = PartitionReader(bootstrap, client_id="test-topic-values")
    try:
        tps = [TopicPartition(topic, p) for p in c.partitions(topic)]
        c.assign(tps)
        for tp in tps:
            c.seek_to_beginning(tp)
        ends = c.end_offsets(tps)
        pos = dict.fromkeys(tps, 0)
        while any(pos[tp] < ends[tp] for tp in tps):
            for tp, recs in c.poll(timeout_ms=1000, max_records=20_000).items():
                yield from (r.value for r in recs if r.value)
                pos[tp] = recs[-1].offset + 1
    finally:
        c.close()


def project_all(bootstrap: str, topics: Topics, db: Path) -> None:
    """Project the frames and dead-letter topics into ``db`` until caught up."""
    sink = FramesProjection(db)
    proj = Projector(sink, bootstrap, topics.frames, topics.dead_letter, snapshot_every_s=0,
                     memory_calls_topic=None if topics.frames_version else topics.memory_calls)
    try:
        proj.run(until_caught_up=True)
    finally:
        proj.close()
        sink.close()


def frame_tables(db: Path) -> dict[str, Any]:
    """The frames, captures, memory tool calls, skipped events and event details of ``db`` as
    comparable rows (Kafka positions left out)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "frames": con.execute("SELECT frame_id, dedup_key, body_hash, content, source, session, event_type, created_at_ms, "
                                  "first_seen_ms, last_accessed_ms, access_count, sources FROM frames ORDER BY frame_id").fetchall(),
            "captures": con.execute("SELECT event_id, frame_id, source, session, event_type, event_time_ms, is_duplicate, is_late "
                                    "FROM frame_captures ORDER BY event_id").fetchall(),
            "memory_tool_calls": con.execute("SELECT * FROM memory_tool_calls ORDER BY ALL").fetchall(),
            "skipped_events": con.execute("SELECT * EXCLUDE (src_partition, src_offset) FROM skipped_events ORDER BY ALL").fetchall(),
            "event_details": con.execute("SELECT * FROM event_details ORDER BY ALL").fetchall(),
        }
    finally:
        con.close()


def dead_letter_reasons(db: Path) -> list[str]:
    """The reasons of every dead letter in ``db``, sorted."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT reason FROM dead_letters ORDER BY reason").fetchall()]
    finally:
        con.close()


def dumps(rows: object) -> str:
    """Stable text of query results (byte-for-byte comparison)."""
    return json.dumps(rows, default=str, sort_keys=True)


def run_worker_until_done(bootstrap: str, topics: Topics, data_dir: Path, log: Path | None = None) -> None:
    """Start one ``hivestream worker``, wait until it has caught up, stop it."""
    w = start_worker(bootstrap, topics.namespace, data_dir, log=log)
    try:
        wait_worker_done(bootstrap, topics)
    finally:
        stop(w)
