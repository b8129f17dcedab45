"""A synchronous partition reader for the projectors, over aiokafka's consumer.

The projectors are plain loops (poll a batch, apply it in one DuckDB transaction); they assign
every partition themselves and seek to the positions stored in DuckDB, never using a consumer
group. aiokafka (installed with faust) fetches and decodes record batches about 25 times faster
than kafka-python's consumer here (bench/RESULTS.md), so the reader runs aiokafka's consumer on a
private event loop and offers the few calls the projectors make, with kafka-python's shapes.

The loop runs in its own thread, so aiokafka keeps fetching the next records (its prefetch is
bounded by the fetch sizes) while the projector's thread writes the previous batch to DuckDB,
which releases the GIL while it executes: the two overlap on two cores.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka.structs import TopicPartition

from streams.kafka.clients import aiokafka_consumer
from streams.kafka.connection import ConnectionLike

__all__ = ["PartitionReader", "TopicPartition"]


class PartitionReader:
    """Reads assigned partitions from given offsets; no consumer group, no commits.

    Args:
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        client_id: Kafka ``client.id``.
        max_partition_fetch_bytes: bytes fetched per partition per request (bounds memory with the
            batch size: the reader holds at most one fetch per partition).

    Raises:
        aiokafka.errors.KafkaConnectionError: when the broker cannot be reached.
    """

    def __init__(self, conn: ConnectionLike, *, client_id: str, max_partition_fetch_bytes: int = 4 * 1024 * 1024) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"{client_id}-fetch", daemon=True)
        self._thread.start()

        async def start() -> Any:  # aiokafka binds its consumer to the loop running when it is made
            c = aiokafka_consumer(conn, client_id=client_id, group_id=None, enable_auto_commit=False,
                                  auto_offset_reset="earliest", max_partition_fetch_bytes=max_partition_fetch_bytes,
                                  fetch_max_bytes=4 * max_partition_fetch_bytes)
            try:
                await c.start()
            except BaseException:
                await c.stop()
                raise
            return c

        try:
            self._consumer: Any = self._run(start())
        except BaseException:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
            raise

    def _run(self, coro: Any) -> Any:
        """Run ``coro`` on the reader's loop and wait for its result (its exception is raised here)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run a synchronous aiokafka call inside the loop (some make futures, which needs a running loop)."""

        async def inside() -> Any:
            return fn(*args)

        return self._run(inside())

    async def _refresh_metadata(self) -> None:
        await self._consumer._client.force_metadata_update()  # a plain call that makes a future: only inside the loop

    def partitions(self, topic: str, timeout_s: float = 30.0) -> list[int]:
        """The partitions of ``topic``, sorted.

        Raises:
            RuntimeError: when the topic does not exist within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            self._run(self._refresh_metadata())
            parts = self._call(self._consumer.partitions_for_topic, topic)
            if parts:
                return sorted(parts)
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic!r} does not exist (run `hivestream topics` or start a worker first)")
            time.sleep(0.2)

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Read exactly these partitions."""
        self._call(self._consumer.assign, list(tps))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read ``tp`` from ``offset`` next."""
        self._call(self._consumer.seek, tp, offset)

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        """Read ``tp`` from its first offset next."""
        self._run(self._consumer.seek_to_beginning(tp))

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The next offset to be written in each partition."""
        ends: dict[TopicPartition, int] = self._run(self._consumer.end_offsets(list(tps)))
        return ends

    def offsets_for_times(self, times: Mapping[TopicPartition, int]) -> dict[TopicPartition, Any]:
        """Per partition, the first offset whose record timestamp is at or after the time (epoch ms), or None."""
        found: dict[TopicPartition, Any] = self._run(self._consumer.offsets_for_times(dict(times)))
        return found

    def poll(self, timeout_ms: int = 500, max_records: int = 5000) -> dict[TopicPartition, list[Any]]:
        """Up to ``max_records`` records (``.offset``, ``.key``, ``.value``) per partition, in offset order."""
        got: dict[TopicPartition, list[Any]] = self._run(self._consumer.getmany(timeout_ms=timeout_ms, max_records=max_records))
        return got

    def close(self) -> None:
        """Stop the consumer and its event loop."""
        try:
            self._run(self._consumer.stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()
