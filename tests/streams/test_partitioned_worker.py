"""The partitioned worker's machinery with a toy step, no broker: lazy restore, outputs and dead
letters, the changelog flush in the step's order before a commit, revocation, the app's topics."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from unittest.mock import AsyncMock

import orjson
import pytest
from faust.types import TP

from streams.kafka.acknowledgements import OutputRefused
from streams.kafka.batch_delivery import batch_topics
from streams.kafka.faust_app import make_faust_app
from streams.kafka.partitioned_worker import Outputs, PartitionedWorker, WorkerApp
from streams.kafka.rewinding import run_before_commit
from streams.kafka.topics import Topics, TopicSpec
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.model.tracked_state import TrackedState, drain_changes
from streams.settings import Settings
from tests.support.consumer_record import Rec
from tests.support.fake_producer import FakeBatch, FakeProducer, acknowledged

SOURCE = "toy.source"
OUT = "toy.out"
DEAD = "toy.dead"


class ToyStep:
    """Counts each value per partition into its state; ``b"bad"`` is a dead letter. Drains by
    descending key, an order no sort by key gives (the worker must keep the step's order)."""

    def __init__(self, partition: int, items: list[tuple[Any, Any]], committed: Callable[[], int | None]) -> None:
        self.partition = partition
        self.items = items
        self.committed = committed
        mine = {k.decode(): orjson.loads(v) for k, v in items if v is not None and k.decode().startswith(f"{partition}:")}
        self.state = TrackedState(mine)

    def process(self, records: Sequence[Any], out: Outputs) -> None:
        p = self.partition
        for r in records:
            if r.value == b"bad":
                err = RejectedInput(Reason.MALFORMED_JSON, "bad")
                out.dead(DeadLetter.of(err, r.value, r.topic, p, r.offset, 0), DEAD)
                continue
            key = f"{p}:{r.value.decode()}"
            self.state[key] = {"n": self.state.get(key, {"n": 0})["n"] + 1}
            out.put(OUT, p, r.key, r.value)

    def drain(self) -> Iterable[tuple[str, Any]]:
        return drain_changes(self.state, lambda k: tuple(-ord(c) for c in k))


@pytest.fixture
def toy() -> tuple[PartitionedWorker, FakeProducer]:
    app = make_faust_app("toy", Settings(), connection="127.0.0.1:9", store="memory://", partitions=2, data_dir=None)
    table = app.Table("toy-state", default=None, partitions=2, store="memory://local", key_type=bytes, value_type=bytes)
    worker = PartitionedWorker(app, app.topic(SOURCE, internal=False), table, ToyStep, agent="toy")
    fake = FakeProducer()
    app.producer.send = AsyncMock(side_effect=acknowledged)  # type: ignore[method-assign]
    app.producer.flush = AsyncMock()  # type: ignore[method-assign]
    app.producer._ensure_producer = lambda: fake  # type: ignore[attr-defined]
    return worker, fake


def fetch(worker: PartitionedWorker, partition: int, values: list[bytes], first: int = 0) -> None:
    """One fetch of ``partition`` through the handler batch delivery calls."""
    handler, _after = batch_topics(worker.app)[SOURCE]
    handler(TP(SOURCE, partition), [Rec(SOURCE, partition, first + i, 1_000 + i, b"k", v) for i, v in enumerate(values)])


def changelog(worker: PartitionedWorker, fake: FakeProducer) -> list[tuple[int, str, Any]]:
    name = worker.table.changelog_topic.get_topic_name()
    return [(p, (k or b"").decode(), None if v is None else orjson.loads(v)) for t, p, k, v in fake.sent if t == name]


def dead_sent(worker: PartitionedWorker) -> list[tuple[str, bytes, str]]:
    send: Any = worker.app.producer.send
    return [(c.args[0], c.args[1], json.loads(c.args[2])["reason"]) for c in send.call_args_list]


def test_the_source_topic_is_delivered_in_batches_and_subscribed_by_a_no_op_agent(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, _fake = toy
    assert batch_topics(worker.app)[SOURCE] == (worker.on_records, worker.after_records)
    assert list(worker.app.agents) == ["toy"] and worker.agent.channel.get_topic_name() == SOURCE


async def test_a_partition_is_restored_from_the_table_on_its_first_batch(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, _fake = toy
    worker.table.data[b"1:x"] = orjson.dumps({"n": 5})
    worker.table.data[b"0:y"] = orjson.dumps({"n": 2})
    assert worker.steps == {}
    worker.app.consumer._committed_offset[TP(SOURCE, 1)] = 42
    fetch(worker, 1, [b"x"])
    step = worker.steps[1]
    assert isinstance(step, ToyStep) and list(worker.steps) == [1]
    assert sorted(step.items) == [(b"0:y", orjson.dumps({"n": 2})), (b"1:x", orjson.dumps({"n": 5}))]  # every partition's items
    assert step.state["1:x"] == {"n": 6} and step.committed() == 42
    fetch(worker, 1, [b"x"], 1)
    assert worker.steps[1] is step and step.state["1:x"] == {"n": 7}  # restored once


async def test_a_commit_writes_each_step_s_changes_in_its_order_then_the_dead_letters(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, fake = toy
    fetch(worker, 0, [b"a", b"bad", b"c", b"b"])
    fetch(worker, 1, [b"a"])
    assert dead_sent(worker) == []  # a dead letter waits for the fetch's after-records hook or a commit
    await run_before_commit(worker.app)
    assert changelog(worker, fake) == [(0, "0:c", {"n": 1}), (0, "0:b", {"n": 1}), (0, "0:a", {"n": 1}), (1, "1:a", {"n": 1})]
    assert dead_sent(worker) == [(DEAD, f"{SOURCE}:0:1".encode(), "malformed_json")]
    assert [(t, p, v) for t, p, _k, v in fake.sent if t == OUT] == [(OUT, 0, b"a"), (OUT, 0, b"c"), (OUT, 0, b"b"), (OUT, 1, b"a")]
    await run_before_commit(worker.app)
    assert len(changelog(worker, fake)) == 4 and len(dead_sent(worker)) == 1  # nothing changed since: nothing again


async def test_a_deleted_key_is_a_tombstone(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, fake = toy
    fetch(worker, 0, [b"a"])
    step = worker.steps[0]
    assert isinstance(step, ToyStep)
    del step.state["0:a"]
    await run_before_commit(worker.app)
    assert changelog(worker, fake) == [(0, "0:a", None)]


async def test_the_after_records_hook_sends_the_dead_letters_once(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, _fake = toy
    fetch(worker, 0, [b"bad", b"bad"], 7)
    await worker.after_records()
    await worker.after_records()
    await run_before_commit(worker.app)
    assert [k for _t, k, _r in dead_sent(worker)] == [f"{SOURCE}:0:7".encode(), f"{SOURCE}:0:8".encode()]


async def test_a_revoked_partition_is_flushed_and_dropped_the_others_kept(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, fake = toy
    fetch(worker, 0, [b"a"])
    fetch(worker, 1, [b"b"])
    await worker.app.on_partitions_revoked.send({TP(SOURCE, 0), TP("another.topic", 1)})
    assert changelog(worker, fake) == [(0, "0:a", {"n": 1})]  # partition 1 is still this worker's: written at its commit
    assert list(worker.steps) == [1]
    flush: Any = worker.app.producer.flush
    assert flush.await_count == 1
    await worker.app.on_partitions_revoked.send({TP(SOURCE, 0)})  # not held any more: nothing to do
    assert flush.await_count == 1


async def test_a_refused_output_fails_the_commit(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, fake = toy

    async def refuse(batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        fut.set_exception(RuntimeError("not leader"))
        return fut

    fake.send_batch = refuse  # type: ignore[method-assign]
    fetch(worker, 0, [b"a"])
    with pytest.raises(OutputRefused, match="not leader"):
        await run_before_commit(worker.app)


def test_the_worker_app_lists_its_topics_the_state_changelog_first(toy: tuple[PartitionedWorker, FakeProducer]) -> None:
    worker, _fake = toy
    other = worker.app.Table("other", default=None, partitions=2)
    specs = [TopicSpec(SOURCE, 2), TopicSpec(OUT, 2), TopicSpec(DEAD, 1)]
    h = WorkerApp(worker.app, Topics("toy"), 2, worker, specs, [OUT], (other, None))
    assert h.table is worker.table
    assert h.copartitioned() == ["toy-toy-state-changelog", OUT]
    names = [t.name for t in h.topic_specs()]
    assert names == [SOURCE, OUT, DEAD, "toy-toy-state-changelog", "toy-other-changelog", "toy-__assignor-__leader"]
    assert [t.name for t in h.output_specs()] == [OUT, DEAD, "toy-toy-state-changelog", "toy-other-changelog"]
