"""``hivestream serve --db FILE``: the ingest server's HTTP API over the local hook-event log, and the
dedup loop that keeps ``FILE`` current, in one process (no broker, no JVM).

Start: lock and open the log (:class:`~hivestream.serve.log_writer.HookLog`; a torn tail left by a
crash is cut off and dead-lettered into the log as ``torn_record``), open the DuckDB file (the
settings guards of the frames and of the memory stubs apply), start the dedup loop in a thread
(:class:`~hivestream.serve.follower.Follower`: it first applies whatever the log holds beyond the
file's position, to every projection of the file: frames, KnowHub experiences, memory stubs) and
the publisher in another (:class:`~hivestream.serve.publisher.Publisher`: snapshot, heartbeat,
report), open the read listener, then listen (:func:`hivestream.ingest.server.serve` with the log's
sink and the stub route, :mod:`hivestream.serve.stub_route`) and leave its note ``<db>.serve``
(:mod:`hivestream.serve.read_marker`: the read listener, the ingest address and, on loopback without
a tokens file, a review token made at each start: only its bearer may post ``experience-reviewed``
events and stub writes there). Stop (SIGTERM, SIGINT): stop accepting, answer what is queued,
remove the note and stop the read listener, let the loop apply what is durable, publish a last
snapshot and report, checkpoint and close. A kill -9 at any moment loses nothing that was answered
2xx: it is in the log, and the next start applies it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from aiohttp import web

from hivestream.embedded.log_run import LogRun, open_log_run
from hivestream.ingest import server
from hivestream.ingest.server import IngestConfig
from hivestream.serve.follower import Follower, FollowerOptions
from hivestream.serve.log_sink import LogSink
from hivestream.serve.log_writer import HookLog
from hivestream.serve.progress import Progress
from hivestream.serve.publisher import Publisher, PublishOptions
from hivestream.serve.read_api import ReadApp, start_reads
from hivestream.serve.read_gate import ReadGate
from hivestream.serve.read_marker import IngestNote, ReadMarker, new_token, remove_marker, write_marker
from hivestream.serve.start_undo import StartUndo, probe_listen
from hivestream.serve.stub_route import ServeApp
from hivestream.serve.stubs_hook import StubsAtServe
from streams.experiences.extract import Completer
from streams.experiences.settings import ExperienceSettings
from streams.ingest.hook_log import DEAD_LETTER, log_origin
from streams.kafka.topics import Topics
from streams.model.clock import Clock, wall_clock_ms
from streams.model.deadletter import DeadLetter, Reason, RejectedInput
from streams.settings import Settings
from streams.stubs.settings import MatchPolicy

log = logging.getLogger("hivestream.serve")

SERVE_DUCKDB_THREADS = 1
"""DuckDB's threads in serve: each query runs on the thread that asks (the dedup loop's, a read's,
the publisher's), so a heavy read takes at most one core, at the read threads' lower priority, and
the HTTP side keeps the other (the dedup loop applied as fast as with DuckDB's default of one
thread per core: ~11,000 records/s either way on two cores)."""


def default_log_dir(db: Path) -> Path:
    """Where serve keeps the log of ``db`` unless told: ``<db>.hook-events/`` beside it."""
    return db.with_name(db.name + ".hook-events")


def default_report(db: Path) -> Path:
    """The report serve refreshes unless told: ``<db stem>-report.html`` beside it."""
    return db.with_name(db.stem + "-report.html")


@dataclass(frozen=True)
class ServeReads:
    """What an extra route on serve's port (the agent API) reads serve through: cursors of the dedup
    loop's connection (:meth:`ReadGate.cursor`), the log offset applied, and the log's durable end."""

    gate: ReadGate
    applied: Callable[[], int]
    durable_end: Callable[[], int]


@dataclass
class ServeConfig:
    """Settings of one ``serve`` process.

    Attributes:
        http: the HTTP side, as ``ingest`` takes it (host, port, tokens, limits, answers).
        db: the DuckDB file.
        log_dir: the hook-event log directory.
        log_max_bytes: bound of the log (bytes; past it: 503).
        segment_bytes: size of a log segment (bytes).
        follower: the dedup loop's pacing (retention, chunks).
        publish: the snapshot's and the report's pacing.
        settings: dedup settings (as ``run`` takes them).
        kb_settings: KnowHub settings.
        stub_policy: the memory stubs' match settings (None: those the file holds, else the defaults;
            :func:`hivestream.embedded.stubs.log_policy`).
        api: given what serve reads through, the routes to add beside ``/v1/hooks/*`` (the agent API and ``/mcp``); ``None``: none.
        stubs_live: prompts matched against the memory stubs at the hook routes, the nightly refresh
            (:class:`~hivestream.serve.stubs_hook.StubsAtServe`); ``None``: off.
    """

    http: IngestConfig
    db: Path
    log_dir: Path
    log_max_bytes: int = 8 << 30
    segment_bytes: int = 16 << 20
    follower: FollowerOptions = field(default_factory=FollowerOptions)
    publish: PublishOptions = field(default_factory=PublishOptions)
    settings: Settings = field(default_factory=Settings)
    kb_settings: ExperienceSettings = field(default_factory=ExperienceSettings)
    stub_policy: MatchPolicy | None = None
    api: Callable[[ServeReads], Callable[[web.Application, server.IngestApp], None]] | None = None
    stubs_live: StubsAtServe | None = None


def connect_host(bind: str) -> str:
    """The address a local client reaches a server bound to ``bind`` at: loopback for a wildcard
    bind (``0.0.0.0``, ``::``, empty), else ``bind`` itself (without IPv6 brackets)."""
    host = bind.strip("[]")
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    return "::1" if host == "::" else host


def dead_letter_torn(hook_log: HookLog, clock: Clock) -> None:
    """Append the torn tail found at open (if any) to the log as a ``torn_record`` dead letter.

    Raises:
        OSError: when the log cannot be written.
    """
    torn = hook_log.torn
    if torn is None:
        return
    now = clock()
    origin = log_origin(hook_log.log_id)
    err = RejectedInput(Reason.TORN_RECORD, f"{len(torn.data)} bytes after the last whole record of log segment {torn.segment} "
                                            f"(from byte {torn.at}): a write cut by a crash or a power loss, never acknowledged")
    dl = DeadLetter.of(err, torn.data, origin, 0, hook_log.next_offset, now)
    key = f"{dl.source}:{dl.time_ms}:{dl.offset}".encode()
    hook_log.append([[(DEAD_LETTER, key, dl.model_dump_json().encode())]], now)
    hook_log.torn = None


async def serve_async(cfg: ServeConfig, stop: asyncio.Event, on_ready: Callable[[int], None] | None = None,
                      completer: Completer | None = None, clock: Clock = wall_clock_ms) -> None:
    """Run serve until ``stop`` is set.

    Raises:
        hivestream.ingest.server.ConfigError: a non-loopback bind without tokens.
        hivestream.serve.log_writer.LogBusy: another serve holds the log.
        projections.frames.sink.MetaMismatch: the file was built with other dedup settings.
        duckdb.IOException: another process holds the file.
        ValueError: the log directory holds something else.
        OSError: the address is in use, the log cannot be opened or repaired.

    A start that fails before it listens leaves nothing it created behind (:mod:`hivestream.serve.start_undo`).
    """
    server.check_bind(cfg.http)
    probe_listen(cfg.http.host, cfg.http.port)  # a port in use is refused before anything is created
    undo = StartUndo.before(cfg.db, cfg.log_dir, cfg.publish.report)

    def ready(port: int) -> None:
        undo.listening = True
        if on_ready is not None:
            on_ready(port)

    try:
        await _serve(cfg, stop, ready, completer, clock, undo)
    except BaseException:
        undo.remove()
        raise


async def _serve(cfg: ServeConfig, stop: asyncio.Event, on_ready: Callable[[int], None], completer: Completer | None, clock: Clock,
                 undo: StartUndo) -> None:
    hook_log = HookLog(cfg.log_dir, max_bytes=cfg.log_max_bytes, segment_bytes=cfg.segment_bytes)
    undo.log_held = True
    stubs = cfg.stubs_live
    try:
        dead_letter_torn(hook_log, clock)
        progress = Progress()

        def open_run() -> LogRun:  # DuckDB on one thread: a read's query takes one core at most (its own, at a lower priority)
            run = open_log_run(cfg.db, cfg.settings, cfg.kb_settings, completer=completer, duckdb_threads=SERVE_DUCKDB_THREADS,
                               stub_policy=cfg.stub_policy, stub_listener=None if stubs is None else stubs.listener)
            undo.db_held = True
            return run

        gate = ReadGate()
        publisher = Publisher(gate, progress, replace(cfg.publish, log_dir=cfg.log_dir), clock)
        follower = Follower(hook_log, open_run, progress, cfg.follower, clock, gate=gate, on_applied=publisher.changed)
        threads = [threading.Thread(target=follower.run, name="hivestream-serve-dedup", daemon=True),
                   threading.Thread(target=publisher.run, name="hivestream-serve-publish", daemon=True)]
        for t in threads:
            t.start()
        token = new_token()
        http = replace(cfg.http, review_token=new_token() if len(cfg.http.tokens) == 0 else None)
        reads = ReadApp(gate, progress, hook_log, token, clock)
        read_runner = None
        try:
            read_runner, read_port = await start_reads(reads)

            def ready(port: int) -> None:
                if stubs is not None:  # said once listening: a start that fails says one line only
                    log.info("%s", stubs.note)
                write_marker(cfg.db, ReadMarker(os.getpid(), read_port, token, IngestNote(connect_host(http.host), port, http.review_token)))
                on_ready(port)

            topics = Topics(http.namespace)
            sink = LogSink(hook_log, topics, progress, db=cfg.db.name, retry_after_s=http.retry_after_s,
                           headroom_bytes=2 * http.max_body_bytes, clock=clock)
            door = None if stubs is None else stubs.door(topics.stub_events)
            if stubs is not None:
                stubs.start(sink, topics.stub_events, asyncio.get_running_loop())
            mount = None if cfg.api is None else cfg.api(ServeReads(gate, lambda: progress.applied, lambda: hook_log.durable()[0]))
            await server.serve(http, stop, ready, sink=sink, name="serve", app=ServeApp, mount=mount, door=door)
        finally:
            if stubs is not None:
                await asyncio.to_thread(stubs.stop)
            remove_marker(cfg.db, token)
            if read_runner is not None:
                await read_runner.cleanup()
            follower.stop.set()
            await asyncio.to_thread(threads[0].join)  # the loop applies what is durable
            publisher.stop.set()
            await asyncio.to_thread(threads[1].join)  # and the last snapshot and report are published
            await asyncio.to_thread(reads.pool.shutdown, True)  # the loop runs meanwhile: reads abandoned at stop get interrupted
            follower.close()
    finally:
        hook_log.close()


def run(cfg: ServeConfig, on_ready: Callable[[int], None] | None = None, completer: Completer | None = None) -> None:
    """Blocking entry point of ``hivestream serve``: serves until SIGTERM or SIGINT (on uvloop when installed).

    Raises:
        as :func:`serve_async`.
    """

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve_async(cfg, stop, on_ready, completer)

    with asyncio.Runner(loop_factory=server.loop_factory()) as runner:
        runner.run(main())
