"""The faust app: the validate agent and the dedup agent with its changelog-backed table.

``hook-events`` → **validate** (decode, adapt, hash; bad input → ``dead-letter``) → ``captures``
(repartitioned by dedup key, the ``group_by`` step) → **dedup** (the pure
:class:`~streams.dedup.DedupCore` on a faust table whose changelog topic makes it survive a
restart) → ``frames``.

The validate agent also derives KnowHub events from the same records
(:func:`streams.experiences.kb_step.route_kb_record`, redacted before they are sent) →
``experience-events``; extraction requests → ``kb-extract`` → **extract** (the
OpenAI-compatible endpoint, off by default; its results kept in the table ``kb-extractions`` so a
request processed again re-emits them) → ``experience-events``; failures → ``kb-dead-letter``.

Processing is at-least-once (faust's ``exactly_once`` has open bugs): a record processed again
after a crash re-emits the same frame event, which the projector ignores by event id. No faust
windowed table is used: those expire by wall clock and would break replay of old events; the
table is plain and keys are evicted by event-time watermark.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust

from streams.capture import Capture
from streams.clock import wall_clock_ms
from streams.codec import capture_from_json, capture_to_json, frame_event_to_json
from streams.deadletter import DeadLetter, RejectedInput
from streams.dedup import DedupCore
from streams.experiences.events import ExperienceExtracted, KbEvent, kb_key
from streams.experiences.extract import ChatClient, Completer
from streams.experiences.from_hooks import ExtractionRequest, KbDeriver
from streams.experiences.kb_step import redacted_dead_letter, route_kb_record, run_extraction
from streams.experiences.settings import KbSettings
from streams.settings import Settings
from streams.steps import Position, route_hook_record
from streams.topics import Topics, TopicSpec, partition_for
from streams.workdir import claim_worker_dir


@dataclass
class HivestreamApp:
    """The faust app and its parts (exposed for tests and benchmarks)."""

    app: faust.App
    topics: Topics
    partitions: int
    validate: Any
    dedup: Any
    table: Any
    channels: dict[str, Any]
    extract: Any = None
    extractions: Any = None

    def topic_specs(self) -> list[TopicSpec]:
        """Every topic the app reads or writes, its tables' changelogs included (create them before starting)."""
        return self.topics.specs(self.partitions) + changelog_specs(self.table, self.extractions)


def create_app(
    settings: Settings,
    *,
    store: str = "rocksdb://",
    partitions: int | None = None,
    frames_version: str = "",
    data_dir: str | None = None,
    kb_settings: KbSettings | None = None,
    completer: Completer | None = None,
) -> HivestreamApp:
    """Build the faust app for ``settings``.

    Args:
        settings: bootstrap servers, namespace, key strategy, window, lateness, body limit.
        store: ``rocksdb://`` (production: rocksdict, local state plus changelog) or
            ``memory://`` (unit tests; state is rebuilt from the changelog on start).
        partitions: partitions of ``captures``/``frames`` and of the table (default:
            ``settings.partitions``).
        frames_version: suffix of a versioned frames topic (``reprocess``); it also gives the
            app its own consumer group and table, so it starts from offset 0.
        data_dir: base of the workers' data directories; this worker claims its own slot
            ``<data_dir>/<app id>/worker-<i>`` (:func:`streams.workdir.claim_worker_dir`).
        kb_settings: KnowHub settings (default: from ``HIVESTREAM_KB_*``); the KnowHub steps
            are skipped by ``reprocess`` (``frames_version``), which rebuilds frames only.
        completer: the extraction endpoint's client (default: a
            :class:`~streams.experiences.extract.ChatClient` from ``kb_settings``, made on first use).

    Returns:
        The app with its agents; run it with :func:`run_worker`.
    """
    n = partitions or settings.partitions
    topics = Topics(settings.topic_namespace, frames_version)
    app_id = f"{settings.topic_namespace}-dedup" + (f"-{frames_version}" if frames_version else "")
    app = make_faust_app(app_id, settings, store=store, partitions=n, data_dir=data_dir)
    hook_events = app.topic(topics.hook_events, internal=False)
    captures = app.topic(topics.captures, partitions=n, internal=False)
    frames = app.topic(topics.frames, partitions=n, internal=False)
    dead = app.topic(topics.dead_letter, internal=False)
    kb_events = app.topic(topics.experience_events, partitions=n, internal=False)
    kb_extract = app.topic(topics.kb_extract, partitions=n, internal=False)
    kb_dead = app.topic(topics.kb_dead_letter, internal=False)
    kbs = kb_settings or KbSettings()
    deriver = None if frames_version else KbDeriver(kbs)
    extractions = None if deriver is None else app.Table("kb-extractions", default=None, partitions=n,
                                                         schema=faust.Schema(key_type=str, key_serializer="raw", value_serializer="json"))
    table = app.Table(
        "dedup-state",
        default=None,
        partitions=n,
        schema=faust.Schema(key_type=str, key_serializer="raw", value_serializer="json"),
    )
    window = settings.window
    lateness = settings.allowed_lateness_ms

    async def send_dead(dl: DeadLetter) -> None:
        await dead.send(key=f"{dl.source}:{dl.partition}:{dl.offset}".encode(), value=dl.model_dump_json().encode())

    @app.agent(hook_events)
    async def validate(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """hook-events → captures (by dedup key) or dead-letter."""
        async for event in stream.events():
            m = event.message
            pos = Position(m.topic, m.partition, m.offset, int(m.timestamp * 1000))
            out = route_hook_record(event.value, pos, settings, wall_clock_ms())
            if isinstance(out, Capture):
                key = out.key.encode()
                await captures.send(key=key, value=capture_to_json(out), partition=partition_for(key, n))
            elif isinstance(out, DeadLetter):
                await send_dead(out)
            if deriver is not None:
                for kb in route_kb_record(event.value, pos, deriver, wall_clock_ms()):
                    await send_kb(kb)
            yield None

    async def send_kb(kb: KbEvent | ExtractionRequest | DeadLetter) -> None:
        if isinstance(kb, DeadLetter):
            await kb_dead.send(key=f"{kb.source}:{kb.partition}:{kb.offset}".encode(), value=kb.model_dump_json().encode())
        elif isinstance(kb, ExtractionRequest):
            key = kb.request_id.encode()
            await kb_extract.send(key=key, value=kb.to_json(), partition=partition_for(key, n))
        else:
            key = kb_key(kb)
            await kb_events.send(key=key, value=kb.model_dump_json().encode(), partition=partition_for(key, n))

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

    cores: dict[int, DedupCore] = {}

    def core_for(partition: int) -> DedupCore:
        if partition not in cores:
            cores[partition] = DedupCore(
                window,
                allowed_lateness_ms=lateness,
                state=table,
                owns=lambda k: partition_for(k.encode(), n) == partition,
            )
        return cores[partition]

    @app.agent(captures)
    async def dedup(stream: faust.StreamT[bytes]) -> AsyncIterator[None]:
        """captures → frames, with the dedup state in the changelog-backed table."""
        async for event in stream.events():
            m = event.message
            try:
                cap = capture_from_json(event.value)
            except RejectedInput as e:
                await send_dead(DeadLetter.of(e, event.value or b"", m.topic, m.partition, m.offset, wall_clock_ms()))
                yield None
                continue
            fe = core_for(m.partition).process(cap)
            await frames.send(key=cap.key.encode(), value=frame_event_to_json(fe), partition=m.partition)
            yield None

    channels = {"hook_events": hook_events, "captures": captures, "frames": frames, "dead_letter": dead, "experience_events": kb_events,
                "kb_extract": kb_extract, "kb_dead_letter": kb_dead}
    return HivestreamApp(app, topics, n, validate, dedup, table, channels, extract_agent, extractions)


def changelog_specs(*tables: Any) -> list[TopicSpec]:
    """Specs of the changelog topics of faust ``tables`` (compacted, one partition per table partition).

    The workers create them before faust starts: a changelog topic that faust creates itself
    moments after its consumer fetched the cluster metadata can stay unknown to that consumer
    (0 partitions), and the table's agent then crashes in a loop with ``PartitionsMismatch``.
    """
    return [TopicSpec(t.changelog_topic_name, t.partitions, {"cleanup.policy": "compact"}) for t in tables if t is not None]


def make_faust_app(app_id: str, settings: Settings, *, store: str, partitions: int, data_dir: str | None) -> faust.App:
    """A faust app configured as every hivestream worker is: at-least-once, raw bytes, acks=all,
    commits every second, a 10 s session timeout (a killed worker's partitions move after 10 s,
    not 60 s), no web server; ``data_dir`` is the base of the workers' slot directories
    (:func:`streams.workdir.claim_worker_dir`)."""
    kwargs: dict[str, Any] = {}
    if data_dir:
        kwargs["datadir"] = str(claim_worker_dir(Path(data_dir), app_id))
    app = faust.App(
        app_id,
        broker=f"kafka://{settings.kafka_bootstrap_servers}",
        store=store,
        processing_guarantee="at_least_once",
        topic_partitions=partitions,
        topic_replication_factor=1,
        web_enabled=False,
        key_serializer="raw",
        value_serializer="raw",
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        broker_commit_every=1000,
        broker_commit_interval=1.0,
        broker_session_timeout=10.0,  # a killed worker's partitions move after 10 s, not 60 s
        broker_heartbeat_interval=3.0,
        stream_wait_empty=True,
        **kwargs,
    )
    return app


def run_worker(h: HivestreamApp, loglevel: str = "warning") -> None:
    """Run a faust worker for ``h`` until it is stopped (SIGTERM/SIGINT); blocks."""
    run_app(h.app, loglevel)


def run_app(app: faust.App, loglevel: str = "warning") -> None:
    """Run a faust worker for ``app`` until it is stopped (SIGTERM/SIGINT); blocks."""
    from faust.worker import Worker

    class _Worker(Worker):  # type: ignore[misc]
        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            # mode leaves the root logger at DEBUG and filters in the handler, so every debug
            # call of faust builds a LogRecord per event; set the level on the logger itself.
            super().on_setup_root_logger(logger, level)
            logger.setLevel(level)

    _Worker(app, loglevel=loglevel, quiet=True).execute_from_commandline()
