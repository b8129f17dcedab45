"""Batch delivery inside faust (streams/kafka/batch_delivery.py), through the consumer's own ``getmany``.

The consumer is the one every worker gets (``make_faust_app``); only its aiokafka thread is a fake
(a log per partition, a fetch position, seeks). The checks are the #596 promises on the batch path:
a partition's records reach the handler once per fetch, in offset order, and are acked only after
the handler returned; nothing is delivered while the flow is stopped, after a generation change,
for a paused or revoked partition, or from a fetch older than a seek, and those records come again
from the first undelivered offset; commits pass only processed offsets; and a property test with
random seeks, stops and crashes ends with every record processed at least once, in order per
partition, and the commit at the end of the log.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from faust.types import TP

from streams.kafka.batch_delivery import BatchDeliveryConsumer, on_batch
from streams.kafka.faust_app import make_faust_app
from streams.settings import Settings
from tests.support.consumer_record import Rec

TOPIC = "ns.hook-events"
OTHER = "ns.kb-extract"


class FakeThread:
    """The aiokafka consumer thread: per partition a log of ``n`` records, a fetch position, seeks."""

    def __init__(self, sizes: dict[TP, int], per_fetch: int = 7) -> None:
        self.sizes, self.per_fetch = sizes, per_fetch
        self.pos: dict[TP, int] = {tp: 0 for tp in sizes}
        self.seeks: list[tuple[TP, int]] = []
        self.before_return: Any = None  # called with the records right before a fetch returns them
        self.committed: dict[TP, int] = {}

    async def seek_to_committed(self) -> dict[TP, int]:
        """faust's seek when a fetch returns while the flow is stopped: to the committed offsets."""
        for tp in self.pos:
            self.pos[tp] = self.committed.get(tp, 0)
        return {tp: self.pos[tp] for tp in self.pos}

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: 0 for tp in tps}

    def seek(self, tp: TP, offset: int) -> None:
        self.seeks.append((tp, offset))
        self.pos[tp] = offset

    async def getmany(self, active: Any, timeout: float) -> dict[TP, list[Rec]]:
        out = {}
        for tp, n in self.sizes.items():
            if active is not None and tp not in active:
                continue
            start = self.pos[tp]
            recs = [Rec(tp.topic, tp.partition, o, 1_000 + o, b"k", f"v{o}".encode()) for o in range(start, min(n, start + self.per_fetch))]
            if recs:
                out[tp] = recs
                self.pos[tp] = recs[-1].offset + 1
        if self.before_return is not None:
            self.before_return(out)
        return out


@pytest.fixture
def setup() -> Any:
    app = make_faust_app("batch-test", Settings(), connection="127.0.0.1:9", store="memory://", partitions=2, data_dir=None)
    app.topic(TOPIC, internal=False)
    c = app.consumer
    assert isinstance(c, BatchDeliveryConsumer)
    tps = {TP(TOPIC, 0), TP(TOPIC, 1)}
    thread = FakeThread({tp: 30 for tp in tps})
    c._thread = thread
    c.assignment = lambda: set(tps)  # type: ignore[method-assign]
    c.highwater = lambda tp: thread.sizes[tp]  # type: ignore[method-assign]
    c._set_active_tps(set(tps))  # faust's active partitions (assigned, not paused)
    seen: list[tuple[TP, list[int]]] = []

    def handler(tp: TP, records: Any) -> None:
        seen.append((tp, [r.offset for r in records]))

    on_batch(app, TOPIC, handler)
    for tp in tps:
        c._ledger.seeked(tp, 0)  # as seek_to_committed does on assignment (nothing committed: earliest)
    return app, c, thread, seen, sorted(tps)


async def fetch(c: BatchDeliveryConsumer) -> list[Any]:
    """One pass of faust's fetch loop: what ``getmany`` yields to the per-record path."""
    return [m async for m in c.getmany(timeout=0.0)]


async def test_each_fetch_of_a_partition_is_one_call_in_offset_order_and_acked_after_it(setup: Any) -> None:
    app, c, _thread, seen, (tp0, tp1) = setup
    acked_during: list[list[int]] = []
    on_batch(app, TOPIC, lambda tp, recs: (seen.append((tp, [r.offset for r in recs])), acked_during.append(list(c._acked[tp]))))
    assert await fetch(c) == []  # nothing of the batch topic goes through faust's per-record path
    assert sorted(seen) == [(tp0, list(range(7))), (tp1, list(range(7)))]
    assert acked_during == [[], []]  # not acked while the handler runs
    assert sorted(c._acked[tp0]) == list(range(7)) and c._n_acked == 14
    assert c._new_offset(tp0) == 7  # the commit passes exactly the processed records


async def test_nothing_is_taken_while_the_flow_is_stopped_and_it_comes_again(setup: Any) -> None:
    _app, c, thread, seen, (tp0, tp1) = setup
    thread.before_return = lambda _out: setattr(c, "flow_active", False)  # a rebalance starts during the fetch
    await fetch(c)
    assert seen == [] and not c._acked[tp0]
    thread.before_return = None
    c.flow_active = True
    await fetch(c)  # faust sought back to the committed offsets (0) when it saw the flow stopped
    assert sorted(seen) == [(tp0, list(range(7))), (tp1, list(range(7)))]


async def test_a_generation_change_during_the_fetch_delivers_nothing(setup: Any) -> None:
    app, c, thread, seen, (tp0, _) = setup
    thread.before_return = lambda _out: setattr(app, "consumer_generation_id", app.consumer_generation_id + 1)
    await fetch(c)
    assert seen == []
    thread.before_return = None
    await fetch(c)
    assert (tp0, list(range(7))) in seen


async def test_a_revoked_or_paused_partition_is_skipped_and_refetched(setup: Any) -> None:
    _app, c, thread, seen, (tp0, tp1) = setup
    c._paused_partitions.add(tp1)
    c.assignment = lambda: {tp0, tp1}  # type: ignore[method-assign]
    thread.before_return = lambda out: out.setdefault(tp1, [Rec(TOPIC, 1, 0, 0, None, b"x")])  # fetched although paused
    await fetch(c)
    assert seen == [(tp0, list(range(7)))]
    assert c._ledger.next_offset(tp1) == 0  # not taken: comes again from 0


async def test_records_of_a_fetch_older_than_a_seek_are_not_delivered(setup: Any) -> None:
    _app, c, thread, seen, (tp0, _tp1) = setup
    await fetch(c)
    seen.clear()
    # a seek back to 3 lands while the next fetch (7..13) is in flight
    thread.before_return = lambda _out: (thread.seek(tp0, 3), c._ledger.seeked(tp0, 3))
    await fetch(c)
    assert [s for s in seen if s[0] == tp0] == []
    thread.before_return = None
    await fetch(c)
    assert (tp0, list(range(3, 10))) in seen


async def test_a_handler_error_stops_the_worker_without_acking(setup: Any) -> None:
    app, c, _thread, _seen, (tp0, _) = setup

    def boom(tp: TP, records: Any) -> None:
        raise RuntimeError("bug")

    on_batch(app, TOPIC, boom)
    with pytest.raises(RuntimeError):
        await fetch(c)
    assert not c._acked[tp0] and c._new_offset(tp0) is None


async def test_other_topics_keep_faust_s_per_record_path(setup: Any) -> None:
    _app, c, thread, seen, (tp0, tp1) = setup
    other = TP(OTHER, 0)
    thread.sizes[other] = 2
    thread.pos[other] = 0
    c._ledger.seeked(other, 0)
    c.assignment = lambda: {tp0, tp1, other}  # type: ignore[method-assign]
    c._set_active_tps({tp0, tp1, other})
    messages = await fetch(c)
    assert [(tp, m.offset) for tp, m in messages] == [(other, 0), (other, 1)]
    assert len(seen) == 2


@pytest.mark.parametrize("seed", range(12))
async def test_random_seeks_stops_and_crashes_process_every_record_in_order_and_commit_to_the_end(seed: int) -> None:
    rng = random.Random(seed)
    sizes = {TP(TOPIC, p): rng.randint(20, 120) for p in range(2)}
    processed: dict[TP, list[int]] = {tp: [] for tp in sizes}
    committed: dict[TP, int] = {tp: 0 for tp in sizes}
    for _life in range(6):  # each life a fresh consumer that starts from the committed offsets (a kill -9 between lives)
        app = make_faust_app(f"batch-prop-{seed}", Settings(), connection="127.0.0.1:9", store="memory://", partitions=2, data_dir=None)
        app.topic(TOPIC, internal=False)
        c = app.consumer
        thread = FakeThread(dict(sizes), per_fetch=rng.randint(1, 15))
        thread.committed = committed
        c._thread = thread
        c.assignment = lambda s=sizes: set(s)  # type: ignore[misc]
        c.highwater = lambda tp, s=sizes: s[tp]  # type: ignore[misc]
        c._set_active_tps(set(sizes))

        def handler(tp: TP, records: Any, c: Any = c) -> None:
            offs = [r.offset for r in records]
            assert offs == sorted(offs)
            assert set(range(offs[0])) <= set(processed[tp])  # never skips an offset that was not processed
            processed[tp].extend(offs)

        on_batch(app, TOPIC, handler)
        for tp, off in committed.items():
            thread.pos[tp] = off
            c._ledger.seeked(tp, off)
            c._committed_offset[tp] = off
        for _step in range(rng.randint(5, 40)):
            r = rng.random()
            if r < 0.1:  # a seek back to the committed offset (recovery) while a fetch is in flight
                tp = rng.choice(sorted(sizes))
                thread.before_return = lambda _o, tp=tp, c=c, thread=thread: (thread.seek(tp, committed[tp]), c._ledger.seeked(tp, committed[tp]))
            elif r < 0.2:
                thread.before_return = lambda _o, c=c: setattr(c, "flow_active", False)
            else:
                thread.before_return = None
            await fetch(c)
            c.flow_active = True
            if rng.random() < 0.3:
                for tp in sizes:
                    new = c._new_offset(tp)
                    if new is not None:
                        assert set(range(new)) <= set(processed[tp])  # a commit passes only processed offsets
                        committed[tp] = c._committed_offset[tp] = new
        thread.before_return = None
        for _ in range(200 if _life == 5 else 0):  # the last life runs on until caught up
            await fetch(c)
            for tp in sizes:
                new = c._new_offset(tp)
                if new is not None:
                    committed[tp] = c._committed_offset[tp] = new
            if all(committed[tp] == n for tp, n in sizes.items()):
                break
    for tp, n in sizes.items():
        assert committed[tp] == n
        assert set(processed[tp]) == set(range(n))
