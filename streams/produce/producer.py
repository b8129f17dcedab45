"""``hivestream produce``: session files and hook-event logs onto the ``hook-events`` topic.

Files are imported exactly as the embedded runner imports them (same importers, same event ids).
Each valid event is produced as a serialised :class:`~streams.model.events.HookEvent` under the record
key :func:`streams.produce.keys.hook_event_key` (the key group of a capture's body hash; a session
otherwise), so every capture of one body lands in one partition in file order. KnowHub-relevant
events (kb tool calls, OpenClaw plugin hooks, KnowHub lines) are redacted first in strict mode
(:func:`streams.redaction.scrub.scrub_kb_event`), so no raw secret reaches the topic. Lines the
importer rejects go straight to the ``dead-letter`` topic with their reason, as the embedded
runner records them.

The records are sent by aiokafka (installed with faust; kafka-python's producer spends ~250 µs per
record in ``record_accumulator.append``) as whole per-partition batches (``create_batch`` /
``send_batch``), with the idempotent producer (``enable_idempotence``, ``acks=all``); the partition
is the one Kafka's default partitioner picks for the key (:func:`streams.kafka.topics.partition_for`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

from streams.importers.files import import_file, read_lines
from streams.kafka.clients import aiokafka_producer, kafka_producer
from streams.kafka.connection import ConnectionLike
from streams.kafka.errors import KafkaSetupError
from streams.kafka.topics import Topics, partition_for
from streams.model.deadletter import DeadLetter
from streams.produce.encode import PlacedRecord, Record, encode_items
from streams.produce.fast_records import encode_lines
from streams.produce.import_pool import ImportPool, as_rejection, value_views
from streams.redaction.redact import RedactionMode

log = logging.getLogger(__name__)

_PARTITION_CACHE = 65_536  # (topic, key) → partition entries kept by send_records


@dataclass
class ProduceReport:
    """What ``produce`` sent: events per file format, dead letters per reason."""

    events: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    formats: dict[str, str] = field(default_factory=dict)


def make_producer(conn: ConnectionLike, **overrides: Any) -> Any:
    """An idempotent kafka-python producer on ``conn`` (``enable_idempotence``, ``acks=all``), batching
    with ``linger_ms=20`` and 256 KiB batches; ``max_request_size`` 2 MiB. For low-volume
    commands (kb reviews, stub imports); bulk imports use :func:`produce_files`.

    Raises:
        kafka.errors.KafkaTimeoutError: when no broker answers within the bootstrap timeout.
    """
    conf: dict[str, Any] = {
        "client_id": "hivestream-produce",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 20,
        "batch_size": 262_144,
        "max_request_size": 2_097_152,
    }
    conf.update(overrides)
    return kafka_producer(conn, **conf)


def hook_records(
    paths: Iterable[Path],
    topics: Topics,
    report: ProduceReport,
    *,
    gateway: bool = False,
    now_ms: Callable[[], int],
    privacy_mode: RedactionMode = RedactionMode.STRICT,
    pool: ImportPool | None = None,
) -> Iterator[Record]:
    """The records ``produce`` sends for ``paths``, in file order (pure but for reading the files).

    Args:
        paths: session files or hook-event JSONL.
        topics: the namespace's topics.
        report: counts events and dead letters as they are yielded.
        gateway: also emit the OpenClaw gateway's double capture.
        now_ms: clock stamping dead letters.
        privacy_mode: how KnowHub-relevant payloads are prepared (strict: redacted).
        pool: import in these worker processes (:class:`streams.produce.import_pool.ImportPool`); the
            records and their order are the same as without.

    Raises:
        OSError: when a file cannot be read.
    """
    if pool is not None:
        for block in hook_blocks(paths, topics, report, gateway=gateway, now_ms=now_ms, privacy_mode=privacy_mode, pool=pool):
            yield from zip(repeat(block[0]), block[1], map(bytes, block[2]), strict=False)
        return
    for path in paths:
        fmt, items = import_file(path, gateway=gateway)
        report.formats[str(path)] = fmt
        origin = f"file:{path.resolve()}"
        encoded = encode_lines(read_lines(path), privacy_mode) if fmt == "hook-events" else encode_items(items, privacy_mode)
        for off, raw, rec in encoded:
            if isinstance(rec, tuple):
                report.events += 1
                yield topics.hook_events, rec[0], rec[1]
                continue
            dl = DeadLetter.of(rec.err, raw, origin, 0, off, now_ms(), event_id=rec.event_id)
            report.dead_letters[str(rec.err.reason)] += 1
            yield topics.dead_letter, f"{origin}:0:{off}".encode(), dl.model_dump_json().encode()


def hook_blocks(
    paths: Iterable[Path],
    topics: Topics,
    report: ProduceReport,
    *,
    gateway: bool = False,
    now_ms: Callable[[], int],
    privacy_mode: RedactionMode = RedactionMode.STRICT,
    pool: ImportPool | None = None,
) -> Iterator[Block]:
    """:func:`hook_records` as runs of records of one topic (:data:`Block`), what :func:`send_blocks` takes.

    With ``pool`` each task's records come as one block (cut where a dead letter falls between
    them), so the sender handles no tuple per record; without, consecutive records are grouped.
    The records, concatenated, are exactly :func:`hook_records`'s. Arguments as :func:`hook_records`.

    Raises:
        OSError: when a file cannot be read.
    """
    if pool is None:
        yield from blocks_of(hook_records(paths, topics, report, gateway=gateway, now_ms=now_ms, privacy_mode=privacy_mode))
        return
    origins: dict[Path, str] = {}
    hook_events, dead_letter = topics.hook_events, topics.dead_letter
    for path, (_n, keys, blob, ends, dead) in pool.results(list(paths), gateway, privacy_mode, report.formats):
        values = value_views(blob, ends)
        report.events += len(keys)
        done = 0
        for pos, off, raw, reason, detail, event_id in dead:
            if pos > done:
                yield hook_events, keys[done:pos], values[done:pos], None
                done = pos
            origin = origins.get(path) or origins.setdefault(path, f"file:{path.resolve()}")
            dl = DeadLetter.of(as_rejection(reason, detail), raw, origin, 0, off, now_ms(), event_id=event_id)
            report.dead_letters[reason] += 1
            yield dead_letter, [f"{origin}:0:{off}".encode()], [dl.model_dump_json().encode()], None
        if done < len(keys):
            yield hook_events, (keys[done:] if done else keys), (values[done:] if done else values), None


Block = tuple[str, list[bytes], list[bytes] | list[memoryview], list[int] | None]
"""(topic, keys, values, partitions or None) of a run of records for one topic: record i is
``(keys[i], values[i])``, sent to ``partitions[i]``, or with None to the default partitioner's pick.
The values are bytes, or ``memoryview`` slices of an import task's blob (:mod:`streams.produce.import_pool`)."""

_BLOCK_RECORDS = 1024


def blocks_of(records: Iterable[Record | PlacedRecord]) -> Iterator[Block]:
    """``records`` as :data:`Block` runs (consecutive records of one topic, all placed or all not, at
    most 1,024 each), in order."""
    topic: str | None = None
    placed = False
    keys: list[bytes] = []
    values: list[bytes] = []
    parts: list[int] = []
    for rec in records:
        is_placed = len(rec) == 4
        if rec[0] != topic or is_placed != placed or len(keys) >= _BLOCK_RECORDS:
            if keys and topic is not None:
                yield topic, keys, values, (parts if placed else None)
            topic, placed, keys, values, parts = rec[0], is_placed, [], [], []
        keys.append(rec[1])
        values.append(rec[2])
        if is_placed:
            parts.append(rec[3])  # type: ignore[misc]
    if keys and topic is not None:
        yield topic, keys, values, (parts if placed else None)


async def send_records(
    records: Iterable[Record | PlacedRecord],
    conn: ConnectionLike,
    *,
    on_sent: Callable[[int], None] | None = None,
    linger_ms: int = 10,
    batch_bytes: int = 1_048_576,
    delivery_timeout_s: float | None = None,
) -> int:
    """Send ``records`` in order with aiokafka's idempotent producer, one batch per partition at a time.

    Each record goes to the partition Kafka's default partitioner picks for its key (or to the one a
    :data:`PlacedRecord` names), so a key's records stay in order. Returns when every record is
    acknowledged (``acks=all``). :func:`send_blocks` of :func:`blocks_of` ``records``.

    Args:
        records: (topic, key, value) triples or (topic, key, value, partition); the topics must exist.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        on_sent: called with the count handed to the producer so far (about every 10,000 records).
        linger_ms: the producer's ``linger.ms``.
        batch_bytes: the producer's batch size (``max_batch_size``), bytes.
        delivery_timeout_s: how long to wait, after the last send, for every record's acknowledgement,
            seconds (Kafka's producer setting ``delivery.timeout.ms``; None: :data:`ACK_TIMEOUT_S`, the
            Java client's default of 120 s).

    Returns:
        The number of records sent.

    Raises:
        kafka errors from aiokafka (``KafkaConnectionError``, ``KafkaTimeoutError``, …) when the broker
        cannot be reached or refuses a record; ``KafkaSetupError`` when the producer gets no id within
        :data:`START_TIMEOUT_S` or the last records no acknowledgement within ``delivery_timeout_s``
        (too few brokers up for ``min.insync.replicas``); ValueError for a record larger than a batch, a
        placed record whose partition the topic does not have, or a ``delivery_timeout_s`` that is not a
        positive number of seconds.
    """
    return await send_blocks(blocks_of(records), conn, on_sent=on_sent, linger_ms=linger_ms, batch_bytes=batch_bytes,
                             delivery_timeout_s=delivery_timeout_s)


async def send_blocks(
    blocks: Iterable[Block],
    conn: ConnectionLike,
    *,
    on_sent: Callable[[int], None] | None = None,
    linger_ms: int = 10,
    batch_bytes: int = 1_048_576,
    delivery_timeout_s: float | None = None,
) -> int:
    """Send the records of ``blocks`` in order (as :func:`send_records`); the per-record work is a
    partition lookup (cached per key: murmur2 in Python costs µs, and keys repeat) and a batch append.

    Args:
        blocks: :data:`Block` runs; the topics must exist.
        conn, on_sent, linger_ms, batch_bytes, delivery_timeout_s: as :func:`send_records`.

    Returns:
        The number of records sent.

    Raises:
        as :func:`send_records`.
    """
    ack_timeout_s = checked_delivery_timeout(delivery_timeout_s)
    producer = aiokafka_producer(conn, client_id="hivestream-produce", enable_idempotence=True, acks="all",
                                 linger_ms=linger_ms, max_batch_size=batch_bytes, max_request_size=2_097_152)
    try:
        await asyncio.wait_for(producer.start(), START_TIMEOUT_S)
    except TimeoutError:
        await _stop_bounded(producer)
        raise KafkaSetupError(f"the cluster gave the idempotent producer no producer id within {START_TIMEOUT_S:g} s: too few brokers "
                              "(or no controller quorum) are up, so min.insync.replicas cannot be met; nothing was written, "
                              "run it again when the brokers are back") from None
    try:
        n_parts: dict[str, int] = {}
        part_of: dict[str, dict[bytes, int]] = {}  # per topic: key -> partition
        batches: dict[str, list[Any]] = {}  # per topic: the open batch of each partition
        pending: list[asyncio.Future[Any]] = []
        n = next_report = 0
        for topic, keys, values, placed in blocks:
            if topic not in n_parts:
                n_parts[topic] = len(await producer.partitions_for(topic))
                part_of[topic], batches[topic] = {}, [None] * n_parts[topic]
            cache, open_batches, nparts = part_of[topic], batches[topic], n_parts[topic]
            if len(cache) >= _PARTITION_CACHE:
                cache.clear()
            for i, key in enumerate(keys):
                if placed is not None:
                    p = placed[i]
                    if not 0 <= p < nparts:
                        raise ValueError(f"partition {p} is not one of the {nparts} partitions of {topic}")
                else:
                    p = cache.get(key)  # type: ignore[assignment]
                    if p is None:
                        p = cache[key] = partition_for(key, nparts)
                value = values[i]
                batch = open_batches[p]
                if batch is None:
                    batch = open_batches[p] = producer.create_batch()
                if batch.append(key=key, value=value, timestamp=None) is None:
                    pending.append(await producer.send_batch(batch, topic, partition=p))
                    batch = open_batches[p] = producer.create_batch()
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        raise ValueError(f"a record of {len(value)} bytes does not fit a {batch_bytes}-byte batch")
            n += len(keys)
            if n >= next_report:
                next_report = n + 10_000
                if on_sent:
                    on_sent(n)
                for f in pending:
                    if f.done():
                        f.result()  # raises the first send error
                pending = [f for f in pending if not f.done()]
        for topic, open_batches in batches.items():
            for p, batch in enumerate(open_batches):
                if batch is not None and batch.record_count():
                    pending.append(await producer.send_batch(batch, topic, partition=p))
        try:
            await asyncio.wait_for(_acknowledged(producer, pending), ack_timeout_s)
        except TimeoutError:
            raise KafkaSetupError(f"the cluster did not acknowledge the last records within {ack_timeout_s:g} s: fewer in-sync "
                                  "replicas than min.insync.replicas, or brokers down; what was acknowledged is kept, run it again "
                                  "(event ids make the rerun harmless)") from None
        if on_sent:
            on_sent(n)
        return n
    finally:
        await _stop_bounded(producer)


START_TIMEOUT_S = 30.0
"""How long ``produce`` waits for its idempotent producer's id (InitProducerId) before it gives up, seconds."""

ACK_TIMEOUT_S = 120.0
"""How long ``produce`` waits, after the last send, for every record's acknowledgement unless told
otherwise, seconds: the Java producer's default ``delivery.timeout.ms`` (120,000 ms)."""

MAX_DELIVERY_TIMEOUT_S = 86_400.0
"""The largest acknowledgement bound taken, seconds (a day)."""

MIN_DELIVERY_TIMEOUT_S = 0.001
"""The smallest acknowledgement bound taken, seconds (Kafka's ``delivery.timeout.ms`` counts whole milliseconds)."""


def parse_seconds(text: str) -> float:
    """A number of seconds as typed on a command line (``"15"``, ``"0.5"``, ``"1e3"``).

    Raises:
        ValueError: a text that is not a decimal number, in one line naming it.
    """
    try:
        return float(text.strip())
    except ValueError:
        raise ValueError(f"the delivery timeout must be a number of seconds, not {text!r}") from None


def checked_delivery_timeout(seconds: float | None) -> float:
    """The acknowledgement bound to use: ``seconds``, or :data:`ACK_TIMEOUT_S` for None.

    Args:
        seconds: the bound asked for, seconds (``produce --delivery-timeout``), or None.

    Returns:
        The bound, seconds (:data:`MIN_DELIVERY_TIMEOUT_S` <= bound <= :data:`MAX_DELIVERY_TIMEOUT_S`).

    Raises:
        ValueError: a bound that is not a finite number of seconds in that range (NaN and infinity
            included), with the value and the range in one line.
    """
    if seconds is None:
        return ACK_TIMEOUT_S
    if not (math.isfinite(seconds) and MIN_DELIVERY_TIMEOUT_S <= seconds <= MAX_DELIVERY_TIMEOUT_S):
        raise ValueError(f"the delivery timeout must be a number of seconds from {MIN_DELIVERY_TIMEOUT_S:g} to "
                         f"{MAX_DELIVERY_TIMEOUT_S:g}, not {seconds!r}")
    return float(seconds)


async def _acknowledged(producer: Any, pending: list[asyncio.Future[Any]]) -> None:
    await producer.flush()
    for f in pending:
        await f


async def _stop_bounded(producer: Any, timeout_s: float = 10.0) -> None:
    """``producer.stop()``, abandoned after ``timeout_s`` (aiokafka's stop waits for brokers that may be gone)."""
    try:
        await asyncio.wait_for(producer.stop(), timeout_s)
    except TimeoutError:
        log.debug("the producer did not stop within %g s; abandoned", timeout_s)  # expected with the brokers gone: the error says why


def produce_files(
    paths: Iterable[Path],
    conn: ConnectionLike,
    topics: Topics,
    *,
    gateway: bool = False,
    now_ms: Callable[[], int],
    on_event: Callable[[int], None] | None = None,
    privacy_mode: RedactionMode = RedactionMode.STRICT,
    jobs: int = 0,
    delivery_timeout_s: float | None = None,
) -> ProduceReport:
    """Import ``paths`` and send every event to ``topics.hook_events`` (dead letters to ``topics.dead_letter``).

    Args:
        paths: session files or hook-event JSONL.
        conn: the Kafka connection (a bare string: PLAINTEXT bootstrap servers).
        topics: the namespace's topics (they must exist).
        gateway: also emit the OpenClaw gateway's double capture.
        now_ms: clock stamping dead letters.
        on_event: called with the count of records sent so far (progress).
        privacy_mode: how KnowHub-relevant payloads are prepared (strict: redacted).
        jobs: import processes beside the sender (:class:`streams.produce.import_pool.ImportPool`; same
            records, same order); 0 imports in this process.
        delivery_timeout_s: the acknowledgement bound of :func:`send_records`, seconds (None: 120 s).

    Raises:
        OSError: when a file cannot be read; aiokafka's errors on a send failure; ``KafkaSetupError``
            as :func:`send_records`.
        ValueError: when ``jobs`` < 0 or ``delivery_timeout_s`` is not a positive number of seconds
            (before any file is read).
    """
    checked_delivery_timeout(delivery_timeout_s)
    report = ProduceReport()
    if jobs == 0:
        records = hook_records(paths, topics, report, gateway=gateway, now_ms=now_ms, privacy_mode=privacy_mode)
        asyncio.run(send_records(records, conn, on_sent=on_event, delivery_timeout_s=delivery_timeout_s))
        return report

    with ImportPool(jobs) as pool:
        blocks = hook_blocks(paths, topics, report, gateway=gateway, now_ms=now_ms, privacy_mode=privacy_mode, pool=pool)
        asyncio.run(send_blocks(blocks, conn, on_sent=on_event, delivery_timeout_s=delivery_timeout_s))
    return report
