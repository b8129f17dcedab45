"""The Kafka path's commands: ``produce`` (files onto ``hook-events``), ``worker`` and ``reprocess``
(dedup into frames), ``project`` and ``replay`` (frames into DuckDB)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from hivestream.cli.kafka_opts import (
    SERVICE_TOPIC_WAIT_S,
    BootstrapOpt,
    KafkaConfigOpt,
    NamespaceOpt,
    PartitionsOpt,
    ReplicationOpt,
    create_topics,
    input_partitions,
    kafka_connection,
    kafka_settings,
    quiet_client_logs,
    refuse_state_mismatch,
    refuse_unusable_outputs,
    stop_on_signals,
)
from hivestream.cli.run_opts import KeyOpt, WindowOpt, expand_or_exit
from hivestream.services.files import HeldByWriter, ensure_not_held, swap_in
from streams.gc_tuning import tune_gc
from streams.importers.ordered_pool import auto_jobs
from streams.kafka.connection import KafkaConnection
from streams.kafka.topics import WORKER_BATCH_BYTES
from streams.settings import Settings

out = Console(width=max(100, Console().width))
err = Console(stderr=True)


def _not_held(db: Path) -> None:
    """Exit 2 with one line when a writer holds ``db``."""
    try:
        ensure_not_held(db)
    except HeldByWriter as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e


def produce(
    files: Annotated[list[Path], typer.Argument(help="session files, directories or hook-event JSONL, or a serve log directory")],
    gateway: Annotated[bool, typer.Option("--gateway/--no-gateway", help="also emit the OpenClaw gateway's double capture")] = False,
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    jobs: Annotated[int | None, typer.Option("--jobs", min=0, help="import processes beside the sender (same records, same order); "
                                             "0: import in this process; default: one per core for inputs of 4 MiB or more")] = None,
    delivery_timeout: Annotated[str | None, typer.Option(
        "--delivery-timeout", help="seconds to wait, after the last send, for the cluster to acknowledge every record "
                                   "(Kafka's delivery.timeout.ms; default 120); then exit 2, keeping what was acknowledged")] = None,
) -> None:
    """Import files onto the hook-events topic (idempotent producer, batching, progress in events/s)."""
    import time as _time

    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from streams.experiences.settings import ExperienceSettings
    from streams.ingest.hook_log import is_log_dir
    from streams.kafka.topics import Topics
    from streams.model.clock import wall_clock_ms
    from streams.produce.producer import checked_delivery_timeout, parse_seconds, produce_files

    try:  # read here, not by typer: a value that is not a number is one line too, not a usage box
        delivery_timeout_s = None if delivery_timeout is None else checked_delivery_timeout(parse_seconds(delivery_timeout))
    except ValueError as e:
        err.print(f"[red]error:[/] {escape(str(e))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    paths = expand_or_exit(files, err)  # a bad input path is reported before any broker is asked
    quiet_client_logs()
    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    t = Topics(s.topic_namespace)
    create_topics(conn, s, t.specs(s.partitions))
    logs = [p for p in paths if is_log_dir(p)]
    if logs and len(logs) != len(paths):
        err.print("[red]error:[/] produce a serve log on its own (not mixed with files)")
        raise typer.Exit(2)
    if logs:
        _produce_logs(logs, conn, t, delivery_timeout_s, s)
        return
    if jobs is None:
        jobs = auto_jobs(paths)
    tune_gc()
    t0 = _time.monotonic()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err, transient=True) as prog:
        task = prog.add_task("producing", total=None)

        def tick(n: int) -> None:
            rate = n / max(1e-6, _time.monotonic() - t0)
            prog.update(task, description=f"produced {n} events ({rate:,.0f} events/s)")

        rep = produce_files(paths, conn, t, gateway=gateway, now_ms=wall_clock_ms, on_event=tick,
                            privacy_mode=ExperienceSettings().privacy_mode, jobs=jobs, delivery_timeout_s=delivery_timeout_s)
    dt = _time.monotonic() - t0
    dl = ", ".join(f"{k} {v}" for k, v in rep.dead_letters.most_common()) or "none"
    out.print(f"produced {rep.events} events from {len(paths)} files to {t.hook_events} in {dt:.1f} s "
              f"({rep.events / max(dt, 1e-6):,.0f} events/s); dead-lettered at import: {dl}")


def _produce_logs(logs: list[Path], conn: KafkaConnection, t: object, delivery_timeout_s: float | None, s: Settings) -> None:
    """``produce LOGDIR``: each serve log record for record onto the topics (:mod:`hivestream.serve.handoff`)."""
    import time as _time

    from hivestream.serve.handoff import produce_log
    from streams.kafka.topics import Topics

    assert isinstance(t, Topics)

    def stub_partitions() -> int:  # a log holding stub events: onto the stub topics, as `stubs produce` puts them
        create_topics(conn, s, t.stub_specs(s.partitions))
        return input_partitions(conn, t.stub_events, s.partitions)

    for d in logs:
        t0 = _time.monotonic()
        try:
            rep = produce_log(d, conn, t, delivery_timeout_s=delivery_timeout_s, stub_partitions=stub_partitions)
        except ValueError as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(2) from e
        for note in rep.skipped_notes:
            err.print(f"[yellow]note:[/] {note}")
        dt = _time.monotonic() - t0
        stubs = f", {rep.sent['stub-events']} to {t.stub_events}" if rep.sent["stub-events"] else ""
        out.print(f"produced the serve log {d} (offsets {rep.first}..{rep.last}): {rep.sent['hook-events']} records to {t.hook_events}, "
                  f"{rep.sent['dead-letter']} to {t.dead_letter}{stubs} in {dt:.1f} s (same keys, values and event ids as ingest)")


def worker(
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    store: Annotated[str, typer.Option("--store", help="faust table store: rocksdb:// or memory://")] = "rocksdb://",
    data_dir: Annotated[Path, typer.Option("--data-dir", help="base of the workers' rocksdb state (one slot per running worker)")] = Path(".hivestream-worker"),
    frames_version: Annotated[str, typer.Option("--frames-version", help="write a versioned frames topic (see reprocess)")] = "",
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "warning",
) -> None:
    """Run a faust worker: validate hook events, dedup into frames (hook-events is keyed by key group).

    An existing hook-events keeps its partition count (the worker follows it); the worker refuses to
    start when its state (the changelog topics) was built for another count.
    """
    from streams.kafka.topics import Topics
    from streams.workers.frames import create_app, run_worker

    s = kafka_settings(namespace, partitions, window_ms=window_ms, key_strategy=key_strategy, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    source = Topics(s.topic_namespace).hook_events
    n = input_partitions(conn, source, s.partitions)
    h = create_app(s, connection=conn, store=store, partitions=n, frames_version=frames_version, data_dir=str(data_dir))
    refuse_state_mismatch(conn, source, n, h.copartitioned())
    create_topics(conn, s, h.topic_specs(), wait_s=SERVICE_TOPIC_WAIT_S)
    refuse_unusable_outputs(conn, h.output_specs(), WORKER_BATCH_BYTES)
    run_worker(h, loglevel=loglevel)


def reprocess(
    version: Annotated[str, typer.Option("--version", help="name of the new frames topic version, e.g. v2")],
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    store: Annotated[str, typer.Option("--store")] = "rocksdb://",
    data_dir: Annotated[Path, typer.Option("--data-dir")] = Path(".hivestream-worker"),
    window_ms: WindowOpt = None,
    key_strategy: KeyOpt = None,
    loglevel: Annotated[str, typer.Option("--loglevel")] = "warning",
) -> None:
    """Re-run dedup from hook-events offset 0 with another key strategy or window into <ns>.frames.<version>.

    It is a worker with its own consumer group and table; project its topic into another file
    with `hivestream project --frames-version VERSION --db other.duckdb` and compare.
    """
    worker(bootstrap, kafka_config, namespace, partitions, replication_factor, store, data_dir, version, window_ms, key_strategy, loglevel)


def _projector(s: Settings, conn: KafkaConnection, db: Path, frames_version: str, snapshot_every_s: float,
               from_time_ms: int | None = None) -> tuple[object, object]:
    from projections.frames.projection import FramesProjection
    from projections.frames.projector import Projector
    from streams.kafka.topics import Topics

    t = Topics(s.topic_namespace, frames_version)
    create_topics(conn, s, t.specs(s.partitions), wait_s=SERVICE_TOPIC_WAIT_S)
    sink = FramesProjection(db)
    return sink, Projector(sink, conn, t.frames, t.dead_letter, batch_max=s.batch_size,
                           snapshot_every_s=snapshot_every_s, from_time_ms=from_time_ms,
                           memory_calls_topic=None if frames_version else t.memory_calls)


def project(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write")] = Path("hivestream.duckdb"),
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    frames_version: Annotated[str, typer.Option("--frames-version")] = "",
    idle_exit_s: Annotated[float | None, typer.Option("--idle-exit", help="stop after this many seconds without records")] = None,
    snapshot_every_s: Annotated[float, typer.Option("--snapshot-every", help="seconds between published snapshots")] = 2.0,
) -> None:
    """Project the frames and dead-letter topics into DuckDB (one transaction per batch with the offsets)."""
    from projections.frames.projection import FramesProjection
    from projections.frames.projector import Projector

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    sink, proj = _projector(s, kafka_connection(bootstrap, kafka_config), db, frames_version, snapshot_every_s)
    assert isinstance(sink, FramesProjection) and isinstance(proj, Projector)
    should_stop = stop_on_signals()
    tune_gc()
    try:
        rep = proj.run(idle_exit_s=idle_exit_s, should_stop=should_stop)
    finally:
        proj.close()
        sink.close()
    out.print(f"projected {rep.records} records in {rep.batches} batches: {rep.frames_created} frames, "
              f"{rep.duplicates} duplicates, {rep.skipped} events that are not turns, {rep.dead_letters} dead letters into {db}")


def replay(
    db: Annotated[Path, typer.Option("--db", help="the new DuckDB file (built aside, then swapped in atomically)")],
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    frames_version: Annotated[str, typer.Option("--frames-version")] = "",
    from_time: Annotated[str | None, typer.Option("--from-time", help="start at this time (ISO-8601 or epoch) instead of offset 0")] = None,
) -> None:
    """Rebuild the projection from offset 0 (or from a time) into a new file, then swap it in atomically."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from projections.frames.projection import FramesProjection
    from projections.frames.projector import Projector, ProjectorReport

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    _not_held(db)
    tmp = db.with_name(db.name + ".replay-tmp")
    tmp.unlink(missing_ok=True)
    Path(f"{tmp}.wal").unlink(missing_ok=True)
    from_ms = None
    if from_time is not None:
        from streams.model.deadletter import RejectedInput
        from streams.model.timeparse import parse_time_ms

        try:
            from_ms = parse_time_ms(from_time)
        except RejectedInput as e:
            err.print(f"[red]error:[/] --from-time: {e.detail}")
            raise typer.Exit(2) from e
    sink, proj = _projector(s, conn, tmp, frames_version, 0, from_ms)
    assert isinstance(sink, FramesProjection) and isinstance(proj, Projector)
    total = proj.lag()
    with Progress(TextColumn("replaying"), BarColumn(), TextColumn("{task.completed}/{task.total} records"),
                  TimeElapsedColumn(), console=err, transient=True) as prog:
        task = prog.add_task("replay", total=total)

        def tick(_rep: ProjectorReport, lag: int) -> None:
            prog.update(task, completed=total - lag)

        try:
            rep = proj.run(until_caught_up=True, on_progress=tick)
        finally:
            proj.close()
            sink.close()
    try:
        swap_in(tmp, db)
    except HeldByWriter as e:
        err.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    out.print(f"replayed {rep.records} records into {db}: {rep.frames_created} frames, {rep.duplicates} duplicates, "
              f"{rep.skipped} events that are not turns, {rep.dead_letters} dead letters")


def register(app: typer.Typer) -> None:
    """Add the Kafka path's commands to ``app``."""
    for fn in (produce, worker, reprocess, project, replay):
        app.command()(fn)
