"""``hivestream stubs topics|produce|worker|project``: the memory-stub matcher on Kafka.

stub logs → ``produce`` → ``<ns>.stub-events`` (keyed by channel, global stubs broadcast) →
``worker`` (faust, the matcher per partition, state in a changelog-backed table) →
``<ns>.stub-matches`` → ``project`` → the same DuckDB tables as ``hivestream stubs run``.
"""

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
from streams.kafka.connection import KafkaConnection
from streams.kafka.topics import WORKER_BATCH_BYTES
from streams.settings import Settings
from streams.stubs.settings import MatchPolicy, MatchSettings

out = Console(width=max(100, Console().width))
err = Console(stderr=True, width=200)

ThresholdOpt = Annotated[float | None, typer.Option("--threshold", help="minimum similarity, -1..1 (default 0.65)")]
TopNOpt = Annotated[int | None, typer.Option("--top-n", help="at most N stubs per message (default 3)")]
BudgetOpt = Annotated[int | None, typer.Option("--budget", help="at most this many archive tokens per message (default 4000)")]


def _ensure(s: Settings, conn: KafkaConnection) -> int:
    """Create the stub topics when missing; the partition count of ``stub-events`` (an existing topic keeps its own)."""
    from streams.kafka.topics import Topics

    t = Topics(s.topic_namespace)
    create_topics(conn, s, t.stub_specs(s.partitions))
    return input_partitions(conn, t.stub_events, s.partitions)


def policy_of(threshold: float | None, top_n: int | None, budget: int | None) -> MatchPolicy:
    """The match settings of ``--threshold``, ``--top-n`` and ``--budget`` (tokens); ``None``: the default.

    Raises:
        ValueError: a value out of range (pydantic's validation error).
    """
    given = {k: v for k, v in (("threshold", threshold), ("top_n", top_n), ("token_budget", budget)) if v is not None}
    return MatchPolicy(defaults=MatchSettings(**given))  # type: ignore[arg-type]


def topics(bootstrap: BootstrapOpt = None, kafka_config: KafkaConfigOpt = None, namespace: NamespaceOpt = None, partitions: PartitionsOpt = None,
           replication_factor: ReplicationOpt = None) -> None:
    """Create the stub topics (idempotent; existing topics are never altered)."""
    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    n = _ensure(s, kafka_connection(bootstrap, kafka_config))
    out.print(f"stub topics of {s.topic_namespace}: {n} partitions")


def produce(
    files: Annotated[list[Path], typer.Argument(help="stub event logs (JSONL), in order")],
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
) -> None:
    """Send stub logs to the stub-events topic (keyed by channel; global stub events to every partition)."""
    from hivestream.cli.inputs import missing
    from streams.kafka.topics import Topics
    from streams.stubs.produce import produce_stub_logs

    problem = missing(files) or next((f"{f} is a directory: name the stub log files" for f in files if f.is_dir()), None)
    if problem is not None:
        err.print(f"[red]error:[/] {escape(problem)}", soft_wrap=True, highlight=False)
        raise typer.Exit(2)

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    quiet_client_logs()
    conn = kafka_connection(bootstrap, kafka_config)
    n = _ensure(s, conn)
    rep = produce_stub_logs(files, conn, Topics(s.topic_namespace).stub_events, n)
    out.print(f"produced {rep.lines} lines as {rep.records} records ({rep.broadcast} global stub events broadcast to {n} partitions)")


def worker(
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    threshold: ThresholdOpt = None,
    top_n: TopNOpt = None,
    budget: BudgetOpt = None,
    store: Annotated[str, typer.Option("--store", help="faust table store: rocksdb:// or memory://")] = "rocksdb://",
    data_dir: Annotated[Path, typer.Option("--data-dir", help="base of the workers' rocksdb state")] = Path(".hivestream-worker"),
    loglevel: Annotated[str, typer.Option("--loglevel")] = "warning",
) -> None:
    """Run the faust stub worker: match messages per channel, write stub-matches (and stub-dead-letter)."""
    from streams.kafka.faust_app import run_app
    from streams.workers.stubs import create_stub_app

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    policy = policy_of(threshold, top_n, budget)
    n = _ensure(s, conn)
    h = create_stub_app(s, policy, connection=conn, partitions=n, store=store, data_dir=str(data_dir))
    refuse_state_mismatch(conn, h.topics.stub_events, n, h.copartitioned())
    create_topics(conn, s, h.topic_specs(), wait_s=SERVICE_TOPIC_WAIT_S)
    refuse_unusable_outputs(conn, h.output_specs(), WORKER_BATCH_BYTES)
    run_app(h.app, loglevel)


def project(
    db: Annotated[Path, typer.Option("--db", help="DuckDB file to write")] = Path("hivestream.duckdb"),
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    threshold: ThresholdOpt = None,
    top_n: TopNOpt = None,
    budget: BudgetOpt = None,
    idle_exit_s: Annotated[float | None, typer.Option("--idle-exit", help="stop after this many seconds without records")] = None,
    until_caught_up: Annotated[bool, typer.Option("--until-caught-up", help="stop at the end offsets seen at start")] = False,
) -> None:
    """Project stub-matches and stub-dead-letter into the stub tables (one transaction per batch with the offsets).

    The match settings are the worker's; they are recorded in the file (what-if reads them).
    """
    from projections.stubs.projection import StubMetaMismatch, StubProjection, match_meta
    from projections.stubs.projector import StubProjector
    from streams.kafka.topics import Topics

    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    policy = policy_of(threshold, top_n, budget)
    _ensure(s, conn)
    t = Topics(s.topic_namespace)
    should_stop = stop_on_signals()
    sink = StubProjection(db)
    try:
        try:
            sink.check_meta(match_meta(policy.defaults))
        except StubMetaMismatch as e:
            err.print(f"[red]error:[/] {e}")
            raise typer.Exit(2) from None
        proj = StubProjector(sink, conn, t.stub_matches, t.stub_dead_letter)
        try:
            rep = proj.run(until_caught_up=until_caught_up, idle_exit_s=idle_exit_s, should_stop=should_stop)
        finally:
            proj.close()
    finally:
        sink.close()
    out.print(f"projected {rep.records} records in {rep.batches} batches: {rep.matches} matches, {rep.messages} messages, "
              f"{rep.dead_letters} dead letters into {db}")


def register(app: typer.Typer) -> None:
    """Add the Kafka commands to the ``stubs`` sub-app."""
    app.command("topics")(topics)
    app.command("produce")(produce)
    app.command("worker")(worker)
    app.command("project")(project)
