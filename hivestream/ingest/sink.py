"""Where ``hivestream ingest`` puts accepted records: the broker, else the durable spool.

:class:`DurableSink` owns an aiokafka producer (idempotent, ``acks=all``) and a
:class:`~hivestream.ingest.spool.Spool`. :meth:`DurableSink.write` returns only once every record is
durable: acknowledged by the broker within ``produce_timeout_s``, or fsync'd in the spool (the
records the broker did not acknowledge in time are spooled; if the broker acknowledges them later
too, they reach the topic twice with the same event ids, which every downstream step ignores).
While the spool holds a backlog (from a failure until the forwarder has sent every sealed
segment), or the broker is down, new records go straight to the spool so the forwarder
(:meth:`DurableSink.forward_forever`) sends them oldest first; once it has caught up, requests
produce directly again (records still in the open segment follow within a round, so under
continuous load the server returns to the direct path instead of staying on the spool). The producer is
(re)started in the background whenever it is missing or failed; a start that fails logs its cause
once (:mod:`streams.kafka.preflight` finds it: broker down, wrong password, TLS...), not at every
retry, and the server keeps answering from the spool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hivestream.ingest.record_sink import Gauge, Record
from hivestream.ingest.spool import Segment, Spool, SpoolFull
from streams.ingest.partitioner import MemoPartitioner
from streams.ingest.spool_format import decode_kafka_record, encode_kafka_record
from streams.kafka.clients import aiokafka_producer
from streams.kafka.connection import ConnectionLike, as_connection
from streams.kafka.errors import explain
from streams.kafka.preflight import probe
from streams.kafka.topics import TopicSpec, ensure_topics

log = logging.getLogger("hivestream.ingest")

async def _in_daemon_thread(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a daemon thread, awaited. Unlike :func:`asyncio.to_thread`, a call
    that blocks (kafka-python's admin client bootstrapping against an unreachable broker) does not
    hold up the event loop's shutdown: SIGTERM stops the server at once.

    Raises:
        whatever ``fn`` raises.
    """
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not fut.done():
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

    def target() -> None:
        try:
            result: tuple[bool, Any] = (True, fn(*args, **kwargs))
        except BaseException as e:  # handed to the awaiting task
            result = (False, e)
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *result)

    threading.Thread(target=target, name="hivestream-ingest-admin", daemon=True).start()
    return await fut


def _consume(f: asyncio.Future[Any]) -> None:
    """Retrieve a late record future's outcome, so asyncio does not log it as never retrieved."""
    if not f.cancelled():
        f.exception()


@dataclass
class SinkStats:
    """Counters the metrics endpoint reads (monotonic totals and the broker state)."""

    broker_up: bool = False
    produced: int = 0
    spooled: int = 0
    forwarded: int = 0
    spool_corrupt_bytes: int = 0
    last_error: str = ""


SPOOL_ERROR_HOLD_S = 5.0
"""How long ``/healthz`` says not ready after a spool write failed (seconds)."""


def _free_bytes(d: Path) -> int:
    """Bytes an unprivileged writer may still use on ``d``'s file system (a huge number when unknown)."""
    try:
        st = os.statvfs(d)
    except OSError:
        return 1 << 62
    return st.f_bavail * st.f_frsize


class DurableSink:
    """Broker-or-spool writer with a background forwarder (the :class:`~hivestream.ingest.record_sink.RecordSink` of ``ingest``)."""

    error_reason = "spool_error"

    def __init__(
        self,
        conn: ConnectionLike,
        spool: Spool,
        *,
        produce_timeout_s: float = 5.0,
        topic_specs: list[TopicSpec] | None = None,
        replication_factor: int | None = None,
        min_insync_replicas: int | None = None,
        on_produce_latency: Callable[[float], None] | None = None,
        producer_factory: Callable[[], Any] | None = None,
        headroom_bytes: int = (1 << 20) + (64 << 10),
    ) -> None:
        """Args:
            conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
            spool: the durable spool.
            produce_timeout_s: how long a request waits for the broker's acknowledgement before
                its unacknowledged records are spooled (seconds).
            topic_specs: topics to create (idempotent) when the producer starts.
            replication_factor, min_insync_replicas: of the topics it creates (None: the broker's defaults).
            on_produce_latency: called with each broker round trip's duration (seconds).
            producer_factory: builds the producer (tests); default aiokafka's.
            headroom_bytes: room the spool (and its file system) must have for ``/healthz`` to
                say ready while requests go to the spool (about the largest request's records).
        """
        self.conn = as_connection(conn)
        self.replication = {"replication_factor": replication_factor, "min_insync_replicas": min_insync_replicas}
        self._logged_failure = ""
        self.spool = spool
        self.produce_timeout_s = produce_timeout_s
        self.topic_specs = topic_specs or []
        self.stats = SinkStats()
        self._on_latency = on_produce_latency or (lambda _s: None)
        self._factory = producer_factory or self._aiokafka_producer
        self._producer: Any = None
        self._partitioner = MemoPartitioner()
        self._starting: asyncio.Lock | None = None
        self._topics_ready = False
        self._stopping: set[asyncio.Task[None]] = set()
        self._backlog = spool.records > 0  # spool first until the forwarder has caught up
        self.headroom_bytes = headroom_bytes
        self._spool_failed_at: float | None = None  # monotonic time of the last failed spool write

    def _aiokafka_producer(self) -> Any:
        return aiokafka_producer(
            self.conn,
            client_id="hivestream-ingest",
            enable_idempotence=True,
            acks="all",
            linger_ms=0,  # one produce request in flight: records arriving meanwhile form the next batch anyway
            max_batch_size=262_144,
            max_request_size=2_097_152,
            request_timeout_ms=max(5_000, int(self.produce_timeout_s * 2000)),
            retry_backoff_ms=200,
            partitioner=self._partitioner,
        )

    async def _ensure_producer(self) -> Any:
        if self._producer is not None:
            return self._producer
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._producer is not None:
                return self._producer
            if self._factory == self._aiokafka_producer:
                await probe(self.conn, timeout_s=max(5.0, self.produce_timeout_s))  # fails fast with the cause (no client retry storm)
            if not self._topics_ready and self.topic_specs:
                await _in_daemon_thread(ensure_topics, self.conn, self.topic_specs, timeout_ms=10_000, **self.replication)
                self._topics_ready = True
            p = self._factory()
            try:
                await asyncio.wait_for(p.start(), timeout=max(10.0, self.produce_timeout_s))
            except BaseException:
                with contextlib.suppress(Exception):
                    await p.stop()
                raise
            self._producer = p
            self.stats.broker_up = True
            return p

    async def _drop_producer(self, reason: str) -> None:
        p, self._producer = self._producer, None
        self.stats.broker_up = False
        self.stats.last_error = reason
        if p is not None:
            log.warning("ingest: broker unavailable (%s); spooling", reason)
            task = asyncio.get_running_loop().create_task(self._stop_quietly(p))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    @staticmethod
    async def _stop_quietly(p: Any) -> None:
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(p.stop(), timeout=5)

    async def _send_all(self, records: list[Record], timeout_s: float) -> list[bool]:
        """Send ``records``; which ones the broker acknowledged within ``timeout_s``."""
        p = self._producer
        if p is None:
            async with asyncio.timeout(timeout_s):
                p = await self._ensure_producer()
        t0 = time.monotonic()
        futs: list[asyncio.Future[Any]] = []
        send = p.send
        try:
            async with asyncio.timeout(timeout_s):
                # Records of concurrent requests join the same per-partition batches in aiokafka's
                # accumulator (one produce request in flight per broker: a group commit); each
                # request waits only for its own records' futures.
                for topic, key, value in records:
                    futs.append(await send(topic, value=value, key=key))
                await asyncio.wait(futs)
        except Exception as e:  # a timeout or a send error: the ones not done count as unacknowledged
            log.debug("ingest: send interrupted: %r", e)
        acked = [f.done() and not f.cancelled() and f.exception() is None for f in futs]
        acked += [False] * (len(records) - len(acked))
        if all(acked):
            self._on_latency(time.monotonic() - t0)
        else:
            errs = {repr(f.exception()) for f in futs if f.done() and not f.cancelled() and f.exception() is not None}
            for f in futs:
                if not f.done():  # spooled now; whatever the broker answers later is not waited for
                    f.add_done_callback(_consume)
            await self._drop_producer(", ".join(sorted(errs)) or f"no acknowledgement within {timeout_s:.1f} s")
        return acked

    async def write(self, records: list[Record]) -> str:
        """Make ``records`` durable; returns ``"broker"`` or ``"spool"`` (where the last ones went).

        Raises:
            SpoolFull: the broker did not take them and the spool is full (nothing promised).
            OSError: the spool could not be written (nothing promised).
        """
        if not records:
            return "broker"
        if not self._backlog and self._producer is not None:
            try:
                acked = await self._send_all(records, self.produce_timeout_s)
            except Exception as e:  # broker unreachable: the producer could not start
                await self._drop_producer(repr(e))
                acked = [False] * len(records)
            self.stats.produced += sum(acked)
            records = [r for r, ok in zip(records, acked, strict=True) if not ok]
            if not records:
                return "broker"
        self._backlog = True
        try:
            await asyncio.to_thread(self.spool.append, [encode_kafka_record(t, k, v) for t, k, v in records])
        except OSError:  # (SpoolFull is no OSError: a bound, not a failure)
            self._spool_failed_at = time.monotonic()
            raise
        self._spool_failed_at = None
        self.stats.spooled += len(records)
        return "spool"

    async def forward_once(self) -> int:
        """Forward the sealed segments oldest first; returns the segments forwarded.

        A segment is deleted only after all its records were acknowledged; on the first failure
        the rest stay for the next round.
        """
        if self.spool.records == 0:
            self._backlog = False
            return 0
        await asyncio.to_thread(self.spool.seal)
        sent = 0
        for seg in self.spool.sealed():
            if not await self._forward_segment(seg):
                return sent
            sent += 1
        self._backlog = False  # caught up: new records go to the broker again; the open segment follows next round
        return sent

    async def _forward_segment(self, seg: Segment) -> bool:
        payloads, skipped = await asyncio.to_thread(Spool.read, seg)
        if skipped:
            self.stats.spool_corrupt_bytes += skipped
            log.error("ingest: spool segment %s: %d bytes torn or corrupt were skipped", seg.path.name, skipped)
        records: list[Record] = []
        for pl in payloads:
            try:
                records.append(decode_kafka_record(pl))
            except ValueError as e:
                log.error("ingest: spool segment %s: unreadable record skipped: %s", seg.path.name, e)
        for i in range(0, len(records), 5_000):
            chunk = records[i:i + 5_000]
            try:
                acked = await self._send_all(chunk, max(30.0, self.produce_timeout_s))
            except Exception as e:
                await self._drop_producer(repr(e))
                return False
            if not all(acked):
                return False
            self.stats.forwarded += len(chunk)
        await asyncio.to_thread(self.spool.delete, seg, len(payloads))
        return True

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(ready, ``/healthz`` body): not ready whenever a POST would be refused, i.e. while
        requests go to the spool (a backlog, or no producer) and the spool cannot take one more
        request (``status``: ``spool_full`` within :attr:`headroom_bytes` of its bound,
        ``disk_full`` when its file system has less than that free, ``spool_error`` for
        :data:`SPOOL_ERROR_HOLD_S` after a spool write failed)."""
        sp = self.spool
        status = "ok"
        if self._backlog or self._producer is None:
            if sp.size_bytes + self.headroom_bytes > sp.max_bytes:
                status = "spool_full"
            elif _free_bytes(sp.dir) < self.headroom_bytes:
                status = "disk_full"
            elif self._spool_failed_at is not None and time.monotonic() - self._spool_failed_at < SPOOL_ERROR_HOLD_S:
                status = "spool_error"
        return status == "ok", {"status": status, "broker": "up" if self.stats.broker_up else "down",
                                "spooled_records": sp.records, "spool_bytes": sp.size_bytes}

    def gauges(self) -> list[Gauge]:
        """The spool and broker gauges of ``/metrics`` (:mod:`hivestream.ingest.metrics`)."""
        sp = self.spool
        oldest = sp.oldest_ms()
        return [
            ("hivestream_ingest_spooled_records", "records in the spool now", sp.records),
            ("hivestream_ingest_spool_bytes", "bytes in the spool now", sp.size_bytes),
            ("hivestream_ingest_spooled_total", "records written to the spool since start", self.stats.spooled),
            ("hivestream_ingest_forwarded_total", "records forwarded from the spool since start", self.stats.forwarded),
            ("hivestream_ingest_forward_lag_seconds", "age of the oldest spooled record", 0 if oldest is None else max(0.0, time.time() - oldest / 1000)),
            ("hivestream_ingest_broker_up", "1 when the producer is connected", 1 if self.stats.broker_up else 0),
            ("hivestream_ingest_spool_corrupt_bytes_total", "spool bytes skipped as torn or corrupt", self.stats.spool_corrupt_bytes),
        ]

    def startup_note(self) -> str | None:
        """What an earlier run left in the spool, if anything."""
        n = self.spool.records
        return f"ingest: {n} records left in the spool by an earlier run will be forwarded" if n else None

    async def background(self) -> None:
        """The forwarder (:meth:`forward_forever`)."""
        await self.forward_forever()

    async def forward_forever(self, every_s: float = 0.5) -> None:
        """Forward spooled records until cancelled; keeps (re)starting the producer, with backoff."""
        backoff = every_s
        while True:
            try:
                if self._producer is None:
                    await self._ensure_producer()
                    log.info("ingest: broker reachable")
                    self._logged_failure = ""
                await self.forward_once()
                backoff = every_s
            except asyncio.CancelledError:
                raise
            except Exception as e:
                starting = self._producer is None
                await self._drop_producer(repr(e))
                if starting:
                    await self._log_start_failure(e)
                backoff = min(5.0, backoff * 2)
            await asyncio.sleep(backoff)

    async def _log_start_failure(self, e: Exception) -> None:
        """Log why the producer could not start, once per distinct cause (the probe in :meth:`_ensure_producer`
        names it: :func:`streams.kafka.preflight.probe` sees what aiokafka's "Unable to bootstrap" hides)."""
        why = explain(e, self.conn)  # a KafkaSetupError of the probe in _ensure_producer: its own line
        self.stats.last_error = why
        if why != self._logged_failure:
            self._logged_failure = why
            log.warning("ingest: Kafka not usable, spooling until it is: %s", why)

    async def close(self) -> None:
        """Flush and stop the producer; seal the spool."""
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._producer.flush(), timeout=10)
            await self._drop_producer("shutdown")
        if self._stopping:
            await asyncio.wait(set(self._stopping), timeout=6)
        self.spool.close()


__all__ = ["DurableSink", "Record", "SpoolFull"]
