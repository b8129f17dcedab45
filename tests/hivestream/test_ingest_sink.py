"""The ingest sink without a broker: the memoised partitioner equals Kafka's default one, and
concurrent requests sharing one producer each get exactly their own records acknowledged or spooled."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from hivestream.ingest.sink import DurableSink, Record
from hivestream.ingest.spool import Spool
from streams.ingest.partitioner import MemoPartitioner
from streams.ingest.spool_format import decode_kafka_record


def test_memo_partitioner_picks_the_default_partitioners_partition() -> None:
    rng = random.Random(7)
    keys = [f"kg:{g}".encode() for g in range(256)] + [rng.randbytes(rng.randint(0, 40)) for _ in range(500)]
    memo = MemoPartitioner(max_keys=100)
    for n in (1, 2, 4, 7, 12, 256):
        parts = list(range(n))
        for k in keys + keys[:50]:  # repeated keys come from the memo
            assert memo(k, parts, parts) == DefaultPartitioner()(k, parts, parts), (k, n)
    assert 0 < len(memo) <= 100  # bounded: cleared when full
    assert memo(None, [0, 1, 2], [2]) == 2  # no key: an available partition, as the default does


class FakeProducer:
    """aiokafka's ``send`` contract: a future per record, resolved later (a shared batch)."""

    def __init__(self, fail_values: set[bytes], never: set[bytes]) -> None:
        self.fail_values, self.never = fail_values, never
        self.sent: list[Record] = []
        self.pending: list[tuple[asyncio.Future[Any], bytes]] = []

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((topic, key, value))
        self.pending.append((fut, value))
        if len(self.pending) == 1:
            asyncio.get_running_loop().call_later(0.01, self._ack)  # one "produce request" for whatever queued meanwhile
        return fut

    def _ack(self) -> None:
        batch, self.pending = self.pending, []
        for fut, value in batch:
            if value in self.never:
                continue
            if value in self.fail_values:
                fut.set_exception(RuntimeError("NotEnoughReplicas"))
            else:
                fut.set_result(None)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def test_concurrent_writes_share_batches_and_spool_only_their_unacknowledged_records(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    fake = FakeProducer(fail_values={b"v-3-1"}, never={b"v-5-0"})
    sink = DurableSink("unused:9092", spool, produce_timeout_s=0.5, producer_factory=lambda: fake)

    async def main() -> list[str]:
        await sink._ensure_producer()
        reqs = [[("t", f"k{r}".encode(), f"v-{r}-{i}".encode()) for i in range(3)] for r in range(4)]
        return list(await asyncio.gather(*(sink.write(rs) for rs in reqs)))

    where = asyncio.run(main())
    assert where == ["broker", "broker", "broker", "spool"]  # only request 3 had a record the broker refused
    assert len(fake.sent) == 12 and sink.stats.produced == 11 and sink.stats.spooled == 1
    spool.seal()
    spooled = [decode_kafka_record(p) for s in spool.sealed() for p in Spool.read(s)[0]]
    assert spooled == [("t", b"k3", b"v-3-1")]
    assert sink._backlog and sink._producer is None  # a failed send drops the producer: new requests spool until forwarded

    sink2 = DurableSink("unused:9092", Spool(tmp_path / "spool2"), produce_timeout_s=0.2, producer_factory=lambda: fake)

    async def timed_out() -> str:
        await sink2._ensure_producer()
        return await sink2.write([("t", b"k", b"v-5-0"), ("t", b"k", b"v-5-1")])

    assert asyncio.run(timed_out()) == "spool"  # no acknowledgement within the timeout: spooled, never lost
    sink2.spool.seal()
    assert [decode_kafka_record(p)[2] for s in sink2.spool.sealed() for p in Spool.read(s)[0]] == [b"v-5-0"]
