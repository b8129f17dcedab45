"""The frames worker: one faust app reads ``hook-events`` directly (no repartition hop), a fetch at a time.

``hook-events`` is keyed by key group (:mod:`streams.model.key_groups`), so every capture of one body
arrives at one partition, in log order, whatever the partition count. The Kafka machinery (batch
delivery inside faust, outputs in aiokafka batches, dead letters, the state's changelog flush before
each commit and on revocation, the lazy restore of a partition) is
:class:`~streams.kafka.partitioned_worker.PartitionedWorker`'s; this module supplies its step,
:class:`FramesStep`, and the app around it.

Per record the step routes the hook event (:func:`streams.frames.routing.route_record`, the routing
``run`` shares: bad input → ``dead-letter``), dedups a capture by the pure
:class:`~streams.frames.dedup.DedupFold` (one core per partition, its watermarks per key group) into
a ``frames`` record, writes a skipped event's row beside the frames, and a memory tool call
(``PostToolUse`` / ``after_tool_call`` of a memory tool, :mod:`streams.memory_calls.tool_calls`) to
``memory-calls``. The core's state is a plain dict per partition in front of the faust table
``dedup-state``, written to the table's changelog as one record per changed key per commit
followed by the partition's watermark marker, in the prefix-safe order of
:mod:`streams.frames.changelog` (a kill -9 in the middle of a flush changes no answer); a worker
that takes a partition over restores it from the compacted changelog (memory store: the state is
bounded by the window).

The step also derives the KnowHub events of the record (redacted) → ``experience-events``, and
extraction requests → ``kb-extract`` → the **extract** agent (the OpenAI-compatible endpoint, off
by default; results kept in the table ``kb-extractions`` so a re-processed request re-emits them;
that agent takes faust's per-record path: each request is a model call).

Processing is at-least-once, and a record processed again re-emits the same answers (the core
remembers the event ids its frames absorbed), which the projector ignores by event id.
"""
from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import faust
import orjson

from streams.experiences.events import ExperienceEvent, ExperienceExtracted, kb_key
from streams.experiences.extract import ChatClient, Completer
from streams.experiences.from_hooks import ExperienceDeriver, ExtractionRequest
from streams.experiences.routing import guard_of, route_kb_record, run_extraction
from streams.experiences.settings import ExperienceSettings
from streams.frames.capture import Capture
from streams.frames.changelog import PartitionChangelog, Records
from streams.frames.codec import frame_event_to_json, skipped_to_json
from streams.frames.dedup import DedupFold, group_of_key
from streams.frames.routing import route_record
from streams.kafka.connection import ConnectionLike
from streams.kafka.faust_app import make_faust_app, run_app
from streams.kafka.lag import worker_group
from streams.kafka.partitioned_worker import Outputs, PartitionedWorker, WorkerApp
from streams.kafka.topics import Topics, partition_for
from streams.memory_calls.tool_calls import ToolRule, configured_rules
from streams.model.clock import wall_clock_ms
from streams.model.deadletter import DeadLetter, RejectedInput
from streams.model.key_groups import group_record_key
from streams.model.position import Position
from streams.model.tracked_state import TrackedState
from streams.settings import Settings


@dataclass(frozen=True)
class FramesConfig:
    """What the frames step of every partition shares.

    Attributes:
        settings: key strategy, window, lateness, body limit.
        topics: the namespace's topic names.
        partitions: the partition count of ``hook-events`` (and of the KnowHub outputs).
        rules: the memory tool rules, or None (``reprocess`` rebuilds frames only).
        deriver: the KnowHub derivation, or None (``reprocess``).
    """

    settings: Settings
    topics: Topics
    partitions: int
    rules: Sequence[ToolRule] | None
    deriver: ExperienceDeriver | None


class FramesStep:
    """The frames worker's step on one ``hook-events`` partition (see the module docstring).

    Args:
        log: the partition's dedup core with its changelog flushes.
        config: what every partition's step shares.
    """

    def __init__(self, log: PartitionChangelog, config: FramesConfig) -> None:
        self.log = log
        self.core: DedupFold = log.core
        self.partition = log.partition
        self.config = config

    @classmethod
    def restore(cls, config: FramesConfig, partition: int, items: list[tuple[Any, Any]], committed: Callable[[], int | None]) -> FramesStep:
        """The step of ``partition`` from the ``dedup-state`` table's items (bytes keys, orjson values;
        :meth:`PartitionChangelog.restore`); its core may evict frames below ``committed()``."""
        n, settings = config.partitions, config.settings

        def owns(k: str) -> bool:
            return partition_for(group_record_key(group_of_key(k)), n) == partition

        def make_core(state: TrackedState, watermarks: Mapping[int, int] | None) -> DedupFold:
            return DedupFold(settings.window, allowed_lateness_ms=settings.allowed_lateness_ms, state=state,
                             committed=lambda _p: committed(), watermarks=watermarks)

        decoded = [(k.decode(), v) for k, v in items]
        return cls(PartitionChangelog.restore(partition, decoded, owns, make_core, orjson.loads), config)

    def process(self, records: Sequence[Any], out: Outputs) -> None:
        """One fetch of the partition → frames, memory-calls and KnowHub outputs (batched), dead letters (pending)."""
        p, core, c = self.partition, self.core, self.config
        now = wall_clock_ms()
        put, dead, settings, rules, deriver = out.put, out.dead, c.settings, c.rules, c.deriver
        source, frames_topic, calls_topic, dead_topic = c.topics.hook_events, c.topics.frames, c.topics.memory_calls, c.topics.dead_letter
        for r in records:
            raw = r.value
            pos = Position(source, p, r.offset, r.timestamp)
            ev, res, call = route_record(raw, pos, settings, now, rules)  # decoded once for the frames, memory calls and KnowHub
            if isinstance(res, Capture):
                put(frames_topic, p, res.key.encode(), frame_event_to_json(core.process(res)))  # frames has the partitions of hook-events
            elif isinstance(res, DeadLetter):
                dead(res, dead_topic)
            else:  # not a turn: its skipped_events row, beside the frames (the frames topic holds the frames path's decisions)
                put(frames_topic, p, res.event_id.encode(), skipped_to_json(res))
            if call is not None:
                put(calls_topic, p, call.session.encode(), call.to_json())
            if deriver is not None and ev is not None:  # derive stops at once for a record that cannot be a kb one (may_derive)
                for kb in route_kb_record(raw, pos, deriver, now, decoded=ev):
                    self._put_kb(kb, out)

    def _put_kb(self, kb: ExperienceEvent | ExtractionRequest | DeadLetter, out: Outputs) -> None:
        topics, n = self.config.topics, self.config.partitions
        if isinstance(kb, DeadLetter):
            out.dead(kb, topics.kb_dead_letter)
        elif isinstance(kb, ExtractionRequest):
            key = kb.request_id.encode()
            out.put(topics.kb_extract, partition_for(key, n), key, kb.to_json())
        else:
            key = kb_key(kb)
            out.put(topics.experience_events, partition_for(key, n), key, kb.model_dump_json().encode())

    def drain(self) -> Records:
        """The changelog records of one flush, in the prefix-safe order (:meth:`PartitionChangelog.flush`)."""
        return self.log.flush()


def create_app(
    settings: Settings,
    *,
    connection: ConnectionLike,
    store: str = "rocksdb://",
    partitions: int | None = None,
    frames_version: str = "",
    data_dir: str | None = None,
    kb_settings: ExperienceSettings | None = None,
    completer: Completer | None = None,
) -> WorkerApp:
    """Build the frames worker for ``settings``.

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
        kb_settings: KnowHub settings (default: from ``HIVESTREAM_KB_*``); ``reprocess`` skips
            KnowHub and memory tool calls (it rebuilds frames only).
        completer: the extraction endpoint's client (default: a
            :class:`~streams.experiences.extract.ChatClient` from ``kb_settings``, made on first use).

    Returns:
        The app, its worker and its agents; run it with :func:`run_worker`.
    """
    n = partitions or settings.partitions
    topics = Topics(settings.topic_namespace, frames_version)
    app = make_faust_app(worker_group(settings.topic_namespace, frames_version), settings, connection=connection, store=store,
                         partitions=n, data_dir=data_dir)
    hook_events = app.topic(topics.hook_events, partitions=n, internal=False)
    kb_extract = app.topic(topics.kb_extract, partitions=n, internal=False)
    kbs = kb_settings or ExperienceSettings()
    deriver = None if frames_version else ExperienceDeriver(kbs)
    schema: Any = faust.Schema(key_type=str, key_serializer="raw", value_serializer="json")
    extractions: Any = None if deriver is None else app.Table("kb-extractions", default=None, partitions=n, schema=schema)
    # the dedup state: per partition a plain dict (TrackedState) in front of the faust table, written to
    # the table's changelog right before each commit (streams.kafka.partitioned_worker)
    # (bytes keys and values: raw serializers, orjson inside; "memory://local" because a bare "memory://" URL is falsy
    # to faust, which then falls back to the app's store)
    table = app.Table("dedup-state", default=None, partitions=n, store="memory://local", key_type=bytes, value_type=bytes)
    config = FramesConfig(settings, topics, n, None if frames_version else configured_rules(), deriver)
    worker = PartitionedWorker(app, hook_events, table, partial(FramesStep.restore, config), agent="dedup")
    copartitioned: list[str] = []
    if extractions is not None:  # not in `reprocess`
        app.agent(kb_extract, name="extract")(extract_agent(worker, config, extractions, kbs, completer))
        copartitioned = [topics.kb_extract, extractions.changelog_topic_name]
    return WorkerApp(app, topics, n, worker, topics.specs(n), copartitioned, (extractions,))


def extract_agent(worker: PartitionedWorker, config: FramesConfig, extractions: Any, kbs: ExperienceSettings,
                  completer: Completer | None) -> Callable[[faust.StreamT[bytes]], AsyncIterator[None]]:
    """The **extract** agent's function: ``kb-extract`` → ``experience-events`` (extracted experiences)
    or ``kb-dead-letter``, sent through ``worker``'s outputs; each request's results kept in
    ``extractions`` (a faust table), so a request processed again re-emits them without a model call.
    The client (``completer``, else a :class:`~streams.experiences.extract.ChatClient` from ``kbs``) is
    made on first use."""
    topics, n = config.topics, config.partitions
    clients: list[Completer] = [completer] if completer is not None else []

    def client() -> Completer:
        if not clients:
            clients.append(ChatClient(kbs.extraction_base_url, kbs.extraction_model, kbs.extraction_api_key, kbs.extraction_timeout_s))
        return clients[0]

    async def send(out: ExperienceExtracted | DeadLetter) -> None:
        if isinstance(out, DeadLetter):
            await worker.send_dead(out, topics.kb_dead_letter)
        else:
            key = kb_key(out)
            await worker.batched.send_one(topics.experience_events, key, out.model_dump_json().encode(), partition_for(key, n))

    async def extract(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        async for event in stream.events():
            m = event.message
            pos = Position(m.topic, m.partition, m.offset, int(m.timestamp * 1000))
            try:
                req = ExtractionRequest.from_json(event.value or b"")
            except RejectedInput as e:
                await send(guard_of(kbs.privacy_mode).letter(e, event.value or b"", pos, wall_clock_ms()))
                yield None
                continue
            saved = extractions.get(req.request_id)
            if saved is None:
                outs = await asyncio.to_thread(run_extraction, req, client, kbs, pos, wall_clock_ms())
                saved = [{"dead": o.model_dump(mode="json")} if isinstance(o, DeadLetter) else {"event": o.model_dump(mode="json")} for o in outs]
                extractions[req.request_id] = saved
            for item in saved:
                await send(DeadLetter.model_validate(item["dead"]) if "dead" in item else ExperienceExtracted.model_validate(item["event"]))
            yield None

    return extract


def run_worker(h: WorkerApp, loglevel: str = "warning") -> None:
    """Run a faust worker for ``h`` until it is stopped (SIGTERM/SIGINT); blocks."""
    run_app(h.app, loglevel)
