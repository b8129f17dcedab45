"""An output the broker does not acknowledge stops the worker before any commit passes it.

aiokafka's and faust's producer ``flush`` wait for the batches in flight but do not raise on one
the broker refused, so a worker used to commit the input records behind a refused batch: with the
``frames`` topic's ``max.message.bytes`` below a batch, every offset was committed and no frame was
written (the records were lost for good). Now :meth:`BatchedOutput.confirm` checks the broker's
answer to every batch and dead letter before the commit, and a refusal stops the worker with one
line (:class:`~streams.kafka.batched_output.OutputRefused`), as Kafka Streams' default production
exception handler fails the task.

The units: ``confirm`` on futures (acknowledged, refused, cancelled, sent while it waits), the one
line, and the consumer's commit with a refusing hook. On the real broker (``kafka`` marker): a
worker whose ``frames`` topic starts refusing its batches mid-stream exits non-zero with the line,
and after the topic is fixed a restarted worker's projection equals the embedded runner's row for
row (nothing committed past a refused batch was lost), with zero committed lag.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from streams.kafka.acknowledgements import OutputRefused, Sent, refusal_line
from streams.kafka.batched_output import BatchedOutput
from streams.kafka.errors import remember_secret
from streams.kafka.rewinding import on_before_commit
from streams.kafka.topics import WORKER_BATCH_BYTES
from tests.streams.test_batch_delivery import setup  # noqa: F401  # the consumer every worker gets, on a fake fetch thread
from tests.support.session_sets import SessionSet


class _Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes | None]] = []

    def append(self, *, key: bytes | None, value: bytes | None, timestamp: None) -> object | None:
        if len(self.records) == 2:
            return None  # full: two records a batch
        self.records.append((key, value))
        return object()

    def record_count(self) -> int:
        return len(self.records)

    def size(self) -> int:
        return 61 + sum(len(k or b"") + len(v or b"") + 8 for k, v in self.records)


class _Producer:
    """aiokafka's producer as BatchedOutput uses it: ``send_batch`` returns the delivery future."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int, _Batch, asyncio.Future[Any]]] = []
        self.singles: list[tuple[str, int | None, asyncio.Future[Any]]] = []
        self.raises: Exception | None = None  # raised by the next send at once (before any answer)

    def create_batch(self) -> _Batch:
        return _Batch()

    async def send_batch(self, batch: _Batch, topic: str, *, partition: int) -> asyncio.Future[Any]:
        if self.raises is not None:
            raise self.raises
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((topic, partition, batch, fut))
        return fut

    async def send(self, topic: str, key: bytes, value: bytes, partition: int | None, timestamp: None, headers: None) -> asyncio.Future[Any]:
        """faust's ``producer.send``: aiokafka's delivery future."""
        if self.raises is not None:
            raise self.raises
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.singles.append((topic, partition, fut))
        return fut


class _App:
    def __init__(self) -> None:
        self.raw = _Producer()
        self.producer = self

    def _ensure_producer(self) -> _Producer:
        return self.raw

    async def send(self, *args: Any) -> asyncio.Future[Any]:
        return await self.raw.send(*args)


def _output() -> tuple[BatchedOutput, _Producer]:
    app = _App()
    return BatchedOutput(app), app.raw  # type: ignore[arg-type]


class MessageSizeTooLargeError(Exception):
    """Named as aiokafka's (the hint keys on the name)."""


async def test_confirm_returns_once_every_batch_is_acknowledged() -> None:
    out, prod = _output()
    for i in range(5):
        out.put("ns.frames", i % 2, b"k", b"v%d" % i)
    await out.flush()
    assert sum(b.record_count() for _t, _p, b, _f in prod.sent) == 5
    waiter = asyncio.ensure_future(out.confirm())
    await asyncio.sleep(0)
    assert not waiter.done()  # the broker has not answered yet
    for *_, fut in prod.sent:
        fut.set_result(None)
    await asyncio.wait_for(waiter, 1)
    await out.confirm()  # nothing left to wait for


async def test_a_refused_batch_raises_one_line_and_keeps_raising() -> None:
    out, prod = _output()
    for i in range(6):
        out.put("ns.frames", i % 3, b"k", b"v")
    await out.flush()
    for i, (*_, fut) in enumerate(prod.sent):
        if i == 1:
            fut.set_exception(MessageSizeTooLargeError("[Error 10] MessageSizeTooLargeError"))
        else:
            fut.set_result(None)
    with pytest.raises(OutputRefused) as e:
        await out.confirm()
    line = str(e.value)
    assert "\n" not in line and line.startswith("the broker did not acknowledge 1 output(s) (batches or records)")
    assert "ns.frames partition(s) 1: MessageSizeTooLargeError; largest: a batch of 81 bytes, 2 records; raise ns.frames's " \
           "max.message.bytes above 81" in line
    out.put("ns.frames", 0, b"k", b"later")
    await out.flush()
    prod.sent[-1][3].set_result(None)
    with pytest.raises(OutputRefused):  # sticky: no later commit passes the refused batch either
        await out.confirm()


async def test_a_dead_letter_and_a_batch_sent_while_confirm_waits_are_confirmed() -> None:
    out, prod = _output()
    await out.send_one("ns.dead-letter", b"k", b"dead letter")
    (_topic, _p, dead), = prod.singles
    waiter = asyncio.ensure_future(out.confirm())
    await asyncio.sleep(0)
    out.put("ns.frames", 0, b"k", b"v")
    await out.flush()  # sent while the first confirm waits: a second confirm must wait for it
    second = asyncio.ensure_future(out.confirm())
    dead.set_result(None)
    await asyncio.wait_for(waiter, 1)
    await asyncio.sleep(0)
    assert not second.done()
    prod.sent[-1][3].set_exception(RuntimeError("KafkaTimeoutError"))
    with pytest.raises(OutputRefused, match=r"ns\.frames partition\(s\) 0: RuntimeError: KafkaTimeoutError; largest: one record of"):
        await asyncio.wait_for(second, 1)


async def test_a_send_that_raises_at_once_and_a_cancelled_answer_count_as_refused() -> None:
    out, prod = _output()
    prod.raises = AssertionError("Unrecognized partition")  # aiokafka, for a partition its metadata lacks
    out.put("ns.frames", 3, b"k", b"v")
    await out.flush()  # no exception here: the refusal is kept for the commit's check
    await out.send_one("ns.stub-dead-letter", b"k", b"v")
    prod.raises = None
    await out.send_one("ns.stub-dead-letter", b"k", b"v2")
    prod.singles[-1][2].cancel()
    with pytest.raises(OutputRefused) as e:
        await out.confirm()
    line = str(e.value)
    assert "ns.frames partition(s) 3: AssertionError: Unrecognized partition; largest: one record of" in line
    assert "ns.stub-dead-letter partition by key: AssertionError: Unrecognized partition | ns.stub-dead-letter partition by key: cancelled" in line


def test_the_line_groups_partitions_and_scrubs_secrets() -> None:
    loop = asyncio.new_event_loop()
    try:
        sent = []
        for p in (10, 2, 2, 0):
            f = loop.create_future()
            f.set_exception(PermissionError("denied for user with password hunter2-secret"))
            sent.append(Sent("ns.frames", p, f, 5_000 * p, 3))
        remember_secret("hunter2-secret")
        line = refusal_line(sent)
    finally:
        loop.close()
    assert line.startswith("the broker did not acknowledge 4 output(s)")
    assert ("ns.frames partition(s) 0, 2, 10: PermissionError: denied for user with password ***; largest: a batch of 50,000 bytes, "
            "3 records") in line
    assert "hunter2" not in line and "max.message.bytes" not in line


async def test_the_consumer_commits_nothing_when_an_output_was_refused(setup: Any) -> None:  # noqa: F811
    app, c, _thread, _seen, (tp0, _tp1) = setup
    out, prod = _output()
    out.put("ns.frames", 0, b"k", b"v")

    async def before_commit() -> None:
        await out.flush()
        prod.sent[-1][3].set_exception(MessageSizeTooLargeError())
        await out.confirm()

    on_before_commit(app, before_commit)
    committed: list[Any] = []

    async def commit(offsets: Any) -> bool:
        committed.append(offsets)
        return True

    c._commit = commit  # type: ignore[method-assign]
    assert await c._commit_offsets({tp0: 7}) is False
    assert committed == []
    assert isinstance(c.crash_reason, OutputRefused)


# --- on the real broker --------------------------------------------------------------------------

@pytest.mark.kafka
def test_a_worker_whose_frames_topic_refuses_stops_and_loses_nothing(kafka_bootstrap: str, sessions: SessionSet, tmp_path: Path) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    from hivestream.embedded.frames import run_files
    from streams.kafka.clients import kafka_admin
    from streams.kafka.topics import Topics
    from streams.produce.keys import hook_event_key
    from tests.support.kafka_harness import (
        create_topics,
        dumps,
        end_offset_sum,
        frame_tables,
        group_lag,
        produce,
        project_all,
        run_worker_until_done,
        session_events,
        start_worker,
        stop,
        unique_namespace,
        wait_until,
        wait_worker_done,
        worker_group,
        write_jsonl,
    )

    first = [(hook_event_key(e), e.to_json()) for e in session_events(sessions.root, rounds=1)]
    second = [(hook_event_key(e), e.to_json()) for e in session_events(sessions.root, rounds=1, shift_ms=86_400_000)]
    topics = Topics(unique_namespace("refused"))
    create_topics(kafka_bootstrap, topics)
    produce(kafka_bootstrap, topics.hook_events, first)
    group = worker_group(topics)
    log = tmp_path / "worker.log"
    w = start_worker(kafka_bootstrap, topics.namespace, tmp_path / "w", "--loglevel", "warning", log=log)
    try:
        wait_worker_done(kafka_bootstrap, topics)
        admin = kafka_admin(kafka_bootstrap)
        try:  # the frames topic now takes no batch of the worker's (a frame event is ~0.5-3 KB)
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topics.frames, configs={"max.message.bytes": "200"})])
        finally:
            admin.close()
        frames_before = end_offset_sum(kafka_bootstrap, topics.frames)
        produce(kafka_bootstrap, topics.hook_events, second)
        wait_until(lambda: w.poll() is not None, 120, "the worker to stop on the refused batches")
    finally:
        stop(w)
    assert w.returncode != 0
    text = log.read_text(errors="replace")
    assert "worker stopped: the broker did not acknowledge" in text and f"{topics.frames} partition(s) " in text
    assert "MessageSizeTooLarge" in text and "never retrieved" not in text
    assert group_lag(kafka_bootstrap, group, [topics.hook_events]) > 0  # the refused records were not committed
    assert end_offset_sum(kafka_bootstrap, topics.frames) == frames_before

    admin = kafka_admin(kafka_bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topics.frames, configs={"max.message.bytes": str(2 * WORKER_BATCH_BYTES)})])
    finally:
        admin.close()
    run_worker_until_done(kafka_bootstrap, topics, tmp_path / "w", log=tmp_path / "worker2.log")
    assert group_lag(kafka_bootstrap, group, [topics.hook_events]) == 0
    db = tmp_path / "kafka.duckdb"
    project_all(kafka_bootstrap, topics, db)
    ref = tmp_path / "embedded.duckdb"
    run_files([write_jsonl(tmp_path / "in.jsonl", first + second)], ref)
    got, want = frame_tables(db), frame_tables(ref)
    assert len(want["captures"]) > 400 and len({c[0] for c in want["captures"]} & {c[0] for c in got["captures"]}) > 400
    for table in ("frames", "captures", "memory_tool_calls"):
        assert dumps(got[table]) == dumps(want[table]), table


@pytest.mark.kafka
def test_a_worker_refuses_to_start_on_a_topic_that_takes_no_full_batch(kafka_bootstrap: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    from kafka.admin import ConfigResource, ConfigResourceType

    from streams.kafka.clients import kafka_admin
    from streams.kafka.topics import Topics
    from tests.support.kafka_harness import REPO_ROOT, create_topics, unique_namespace

    topics = Topics(unique_namespace("small"))
    create_topics(kafka_bootstrap, topics)
    admin = kafka_admin(kafka_bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topics.memory_calls, configs={"max.message.bytes": "50000"})])
    finally:
        admin.close()
    env = {**__import__("os").environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hivestream", *args, "--namespace", topics.namespace], cwd=REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=120)

    r = cli("worker", "--store", "memory://", "--data-dir", str(tmp_path / "w"))
    assert r.returncode == 2, r.stdout + r.stderr
    (line,) = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert line.startswith("error: the worker refuses to start: ") and f"{topics.memory_calls}: max.message.bytes=50,000 is below" in line
    leader = f"{topics.namespace}-dedup-__assignor-__leader"  # faust's, read only: not judged at start
    admin = kafka_admin(kafka_bootstrap)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, leader, configs={"max.message.bytes": "1000"})])
    finally:
        admin.close()
    r = cli("worker", "--store", "memory://", "--data-dir", str(tmp_path / "w"))
    assert r.returncode == 2 and leader not in r.stderr, r.stderr
    check = cli("topics", "--check")
    assert check.returncode == 1
    assert f"difference: {topics.memory_calls}: max.message.bytes=50,000 is below hivestream's 1,048,576-byte batches" in check.stdout
