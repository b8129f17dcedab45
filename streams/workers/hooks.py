"""The faust frames worker: one dedup step reads ``hook-events`` directly (no repartition hop), a fetch at a time.

``hook-events`` is keyed by key group (:mod:`streams.model.key_groups`), so every capture of one body
arrives at one partition, in log order, whatever the partition count. The records of each fetch
reach ``on_records`` one partition at a time (batch delivery inside faust,
:mod:`streams.kafka.batch_delivery`: the app, its consumer group, rebalances, the tables and their
changelogs stay faust's; faust's per-record ``Event`` path does not run for them). Per record it
decodes and adapts (bad input → ``dead-letter``), dedups by the pure
:class:`~streams.frames.dedup.DedupCore` (one core per partition, its watermarks per key group), and
puts the frame event into a ``frames`` batch; a memory tool call (``PostToolUse`` /
``after_tool_call`` of a memory tool, :mod:`streams.memory_calls`) goes to ``memory-calls``. The
core's state is a plain dict per partition in front of the faust table ``dedup-state``: the keys
changed since the last commit are written to the table's changelog topic right before faust
commits (:class:`streams.kafka.rewinding.FlushBeforeCommitConsumer`) and when a partition is
revoked, so the changelog always covers the committed records, one changelog record per changed
key per commit instead of one per capture, followed by the partition's watermark marker (in the
prefix-safe order of :mod:`streams.frames.changelog`: a kill -9 in the middle of a flush changes no
answer); a worker that takes a partition over restores it from the compacted changelog (memory
store: the state is bounded by the window).

The step also derives the KnowHub events of the record (redacted) → ``experience-events``, and
extraction requests → ``kb-extract`` → the **extract** agent (the OpenAI-compatible endpoint, off
by default; results kept in the table ``kb-extractions`` so a re-processed request re-emits them;
that agent takes faust's per-record path: each request is a model call).

Outputs are appended to aiokafka batches (:class:`~streams.kafka.batched_output.BatchedOutput`: no
per-record future); the batches, the changelog writes and the dead letters are sent before faust
commits and each is confirmed acknowledged (a refused one stops the worker with
:class:`~streams.kafka.acknowledgements.OutputRefused` and nothing is committed past it), so
processing is at-least-once, and a record
processed again re-emits the same answers (the core remembers the event ids its frames absorbed),
which the projector ignores by event id.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import faust
import orjson

from streams.experiences.events import ExperienceExtracted, KbEvent, kb_key
from streams.experiences.extract import ChatClient, Completer
from streams.experiences.from_hooks import ExtractionRequest, KbDeriver
from streams.experiences.settings import KbSettings
from streams.experiences.steps import redacted_dead_letter, route_kb_record, run_extraction
from streams.frames.capture import Capture, Skipped
from streams.frames.changelog import PartitionChangelog
from streams.frames.codec import frame_event_to_json, skipped_to_json
from streams.frames.dedup import DedupCore, group_of_key
from streams.frames.steps import memory_call_of, route_hook_event
from streams.kafka.batch_delivery import on_batch
from streams.kafka.batched_output import BatchedOutput
from streams.kafka.connection import ConnectionLike
from streams.kafka.faust_app import internal_specs, make_faust_app, run_app, written_specs
from streams.kafka.lag import worker_group
from streams.kafka.rewinding import on_before_commit
from streams.kafka.topics import Topics, TopicSpec, partition_for
from streams.memory_calls import configured_rules
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import DeadLetter, RejectedInput
from streams.model.key_groups import group_record_key
from streams.model.position import Position
from streams.model.tracked_state import TrackedState
from streams.settings import Settings


@dataclass
class HivestreamApp:
    """The faust app and its parts (exposed for tests and benchmarks).

    ``on_records(tp, records)`` is the batch handler of ``hook-events`` (synchronous) and
    ``after_records()`` what runs after each fetch's handlers (:func:`streams.kafka.batch_delivery.on_batch`).
    """

    app: faust.App
    topics: Topics
    partitions: int
    dedup: Any
    table: Any
    cores: dict[int, DedupCore]
    extract: Any = None
    extractions: Any = None
    on_records: Any = None
    after_records: Any = None

    def copartitioned(self) -> list[str]:
        """The topics that must have as many partitions as ``hook-events``: the tables' changelogs and ``kb-extract``."""
        names = [self.table.changelog_topic_name]
        if self.extractions is not None:
            names += [self.topics.kb_extract, self.extractions.changelog_topic_name]
        return names

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic the app reads or writes, its tables' changelogs and faust's leader topic included
        (create them before starting: faust creates none, :func:`streams.kafka.faust_app.make_faust_app`)."""
        return self.topics.specs(self.partitions) + internal_specs(self.app, self.table, self.extractions)

    def output_specs(self) -> list[TopicSpec]:
        """The topics the app writes (:meth:`topic_specs` without ``hook-events`` and faust's leader topic, which it only reads)."""
        return written_specs(self.app, self.topic_specs(), self.topics.hook_events)


def create_app(
    settings: Settings,
    *,
    connection: ConnectionLike,
    store: str = "rocksdb://",
    partitions: int | None = None,
    frames_version: str = "",
    data_dir: str | None = None,
    kb_settings: KbSettings | None = None,
    completer: Completer | None = None,
) -> HivestreamApp:
    """Build the faust frames worker for ``settings``.

    Args:
        settings: namespace, key strategy, window, lateness, body limit, replication.
        connection: the Kafka connection (:mod:`streams.kafka.connection`).
        store: ``rocksdb://`` (production: rocksdict, local state plus changelog) or
            ``memory://`` (state rebuilt from the changelog on start).
        partitions: partitions of ``hook-events`` (and so of the table and the output topics;
            default: ``settings.partitions``).
        frames_version: suffix of a versioned frames topic (``reprocess``); it also gives the
            app its own consumer group and table, so it starts from offset 0.
        data_dir: base of the workers' data directories (:func:`streams.kafka.workdir.claim_worker_dir`).
        kb_settings: KnowHub settings (default: from ``HIVESTREAM_KB_*``); ``reprocess`` skips the
            KnowHub steps (it rebuilds frames only).
        completer: the extraction endpoint's client (default: a
            :class:`~streams.experiences.extract.ChatClient` from ``kb_settings``, made on first use).

    Returns:
        The app with its agents; run it with :func:`run_worker`.
    """
    n = partitions or settings.partitions
    topics = Topics(settings.topic_namespace, frames_version)
    app_id = worker_group(settings.topic_namespace, frames_version)
    app = make_faust_app(app_id, settings, connection=connection, store=store, partitions=n, data_dir=data_dir)
    hook_events = app.topic(topics.hook_events, partitions=n, internal=False)
    kb_extract = app.topic(topics.kb_extract, partitions=n, internal=False)
    kbs = kb_settings or KbSettings()
    deriver = None if frames_version else KbDeriver(kbs)
    schema: Any = faust.Schema(key_type=str, key_serializer="raw", value_serializer="json")
    extractions = None if deriver is None else app.Table("kb-extractions", default=None, partitions=n, schema=schema)
    # the dedup state: per partition a plain dict (TrackedState) in front of the faust table, written to
    # the table's changelog right before each commit (streams.kafka.rewinding.FlushBeforeCommitConsumer)
    # (bytes keys and values: raw serializers, orjson inside; "memory://local" because a bare "memory://" URL is falsy
    # to faust, which then falls back to the app's store)
    table = app.Table("dedup-state", default=None, partitions=n, store="memory://local", key_type=bytes, value_type=bytes)
    cores: dict[int, DedupCore] = {}
    logs: dict[int, PartitionChangelog] = {}  # the same cores, with their changelog flushes

    out = BatchedOutput(app)
    memory_rules = None if frames_version else configured_rules()  # reprocess rebuilds frames only

    async def flush_state(partition: int | None = None) -> None:
        """Send the keys changed since the last call to the table's changelog (compacted; None deletes), then every open batch."""
        topic = table.changelog_topic.get_topic_name()
        for p, log in list(logs.items()):
            if partition is not None and p != partition:
                continue
            # streams.frames.changelog: the order to write them in; put without an await between, so a flush of the same
            # partition that overlaps (a commit's and a revocation's) cannot interleave its records with these
            for k, v in log.flush():
                out.put(topic, p, k.encode(), None if v is None else orjson.dumps(v))
            await out.send_full()
        await send_pending()  # dead letters of records acked already: in the producer before faust flushes it and commits
        await out.flush()

    async def before_commit() -> None:
        """Every output and state change sent, and each acknowledged (``OutputRefused`` otherwise: no commit)."""
        await flush_state()
        await out.confirm()

    on_before_commit(app, before_commit)

    @app.on_partitions_revoked.connect
    async def _forget(sender: Any, /, *args: Any, signal: Any, **kw: Any) -> None:
        revoked = args[0] if args else kw.get("revoked", ())
        mine = [tp.partition for tp in revoked if tp.topic == topics.hook_events and tp.partition in cores]
        for p in mine:
            await flush_state(p)  # the next owner restores the partition from the changelog
            cores.pop(p, None)
            logs.pop(p, None)
        if mine:
            await app.producer.flush()

    def core_for(partition: int) -> DedupCore:
        core = cores.get(partition)
        if core is None:
            from faust.types import TP

            tp = TP(topics.hook_events, partition)

            def committed(_p: int) -> int | None:
                off = getattr(app.consumer, "_committed_offset", {}).get(tp)  # faust keeps the last committed offsets here
                return int(off) if off is not None else None

            def owns(k: str) -> bool:
                return partition_for(group_record_key(group_of_key(k)), n) == partition

            def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupCore:
                return DedupCore(settings.window, allowed_lateness_ms=settings.allowed_lateness_ms, state=state, committed=committed,
                                 watermarks=watermarks)

            items = [(k.decode(), v) for k, v in list(table.data.items())]
            log = logs[partition] = PartitionChangelog.restore(partition, items, owns, make_core, orjson.loads)
            core = cores[partition] = log.core
        return core

    async def send(topic: str, key: bytes, value: bytes, partition: int | None = None) -> None:
        await out.send_one(topic, key, value, partition)  # its answer is confirmed before the next commit

    async def send_dead(dl: DeadLetter, topic: str = topics.dead_letter) -> None:
        await send(topic, f"{dl.source}:{dl.partition}:{dl.offset}".encode(), dl.model_dump_json().encode())

    async def send_kb(kb: KbEvent | ExtractionRequest | DeadLetter) -> None:
        if isinstance(kb, DeadLetter):
            await send_dead(kb, topics.kb_dead_letter)
        elif isinstance(kb, ExtractionRequest):
            key = kb.request_id.encode()
            await send(topics.kb_extract, key, kb.to_json(), partition_for(key, n))
        else:
            key = kb_key(kb)
            await send(topics.experience_events, key, kb.model_dump_json().encode(), partition_for(key, n))

    pending: list[tuple[DeadLetter, str]] = []  # dead letters of acked records and their topic: sent by faust's producer (key-partitioned)
    pending_lock: list[asyncio.Lock] = []  # made on first use, inside the app's running loop

    async def send_pending() -> None:
        """Hand every pending dead letter to the producer, in order; each leaves ``pending`` only once
        the producer has it, so a commit that runs meanwhile (its before-commit flush calls this too)
        waits for them instead of committing past records whose dead letters were never sent."""
        if not pending_lock:
            pending_lock.append(asyncio.Lock())
        async with pending_lock[0]:
            while pending:
                dl, topic = pending[0]
                await send_dead(dl, topic)
                del pending[0]

    def on_records(tp: Any, records: Sequence[Any]) -> None:
        """One fetch of a hook-events partition → frames, memory-calls, KnowHub outputs (batched), dead letters (pending).

        Synchronous (streams.kafka.batch_delivery): every output is put into a batch, none is awaited.
        """
        p = tp.partition
        core = core_for(p)
        now = wall_clock_ms()
        put, frames_topic, calls_topic, source = out.put, topics.frames, topics.memory_calls, tp.topic
        for r in records:
            raw = r.value
            pos = Position(source, p, r.offset, r.timestamp)
            ev, res = route_hook_event(raw, pos, settings, now)  # decoded once for the three steps
            if isinstance(res, Capture):
                put(frames_topic, p, res.key.encode(), frame_event_to_json(core.process(res)))  # frames has the partitions of hook-events
            elif isinstance(res, DeadLetter):
                pending.append((res, topics.dead_letter))
            else:  # not a turn: its skipped_events row, beside the frames (the frames topic is the frames step's decisions)
                put(frames_topic, p, res.event_id.encode(), skipped_to_json(res))
            if memory_rules is not None and isinstance(res, Skipped) and ev is not None:  # memory_call is None at once for any other hook event
                call = memory_call_of(ev, memory_rules)
                if call is not None:
                    put(calls_topic, p, call.session.encode(), call.to_json())
            if deriver is not None and ev is not None:  # derive stops at once for a record that cannot be a kb one (may_derive)
                for kb in route_kb_record(raw, pos, deriver, now, decoded=ev):
                    put_kb(kb)

    def put_kb(kb: KbEvent | ExtractionRequest | DeadLetter) -> None:
        if isinstance(kb, DeadLetter):
            pending.append((kb, topics.kb_dead_letter))
        elif isinstance(kb, ExtractionRequest):
            key = kb.request_id.encode()
            out.put(topics.kb_extract, partition_for(key, n), key, kb.to_json())
        else:
            key = kb_key(kb)
            out.put(topics.experience_events, partition_for(key, n), key, kb.model_dump_json().encode())

    async def after_records() -> None:
        """After a fetch's batches were acked: hand the filled batches and the dead letters to the producer."""
        await out.send_full()
        await send_pending()

    on_batch(app, topics.hook_events, on_records, after_records)

    @app.agent(hook_events, name="dedup")
    async def dedup(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """Subscribes the app to hook-events; its records go to ``on_records`` a fetch at a time, not
        through this stream (streams.kafka.batch_delivery)."""
        async for _event in stream.events():
            yield None

    clients: list[Completer] = [completer] if completer is not None else []

    def client() -> Completer:
        if not clients:
            clients.append(ChatClient(kbs.extraction_base_url, kbs.extraction_model, kbs.extraction_api_key, kbs.extraction_timeout_s))
        return clients[0]

    async def extract(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """kb-extract → experience-events (extracted experiences) or kb-dead-letter; results kept per request."""
        async for event in stream.events():
            m = event.message
            pos = Position(m.topic, m.partition, m.offset, int(m.timestamp * 1000))
            try:
                req = ExtractionRequest.from_json(event.value or b"")
            except RejectedInput as e:
                await send_kb(redacted_dead_letter(e, event.value or b"", pos, wall_clock_ms(), kbs.privacy_mode))
                yield None
                continue
            assert extractions is not None
            saved = extractions.get(req.request_id)
            if saved is None:
                outs = await asyncio.to_thread(run_extraction, req, client, kbs, pos, wall_clock_ms())
                saved = [{"dead": o.model_dump(mode="json")} if isinstance(o, DeadLetter) else {"event": o.model_dump(mode="json")} for o in outs]
                extractions[req.request_id] = saved
            for item in saved:
                await send_kb(DeadLetter.model_validate(item["dead"]) if "dead" in item else ExperienceExtracted.model_validate(item["event"]))
            yield None

    extract_agent = app.agent(kb_extract, name="extract")(extract) if deriver is not None else None  # not in `reprocess`
    return HivestreamApp(app, topics, n, dedup, table, cores, extract_agent, extractions, on_records, after_records)


def run_worker(h: HivestreamApp, loglevel: str = "warning") -> None:
    """Run a faust worker for ``h`` until it is stopped (SIGTERM/SIGINT); blocks."""
    run_app(h.app, loglevel)
