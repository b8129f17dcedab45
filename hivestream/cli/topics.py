"""``hivestream topics [--check]``: create a namespace's topics, or compare the existing ones with what hivestream expects."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from hivestream.cli.console import table
from hivestream.cli.kafka_opts import (
    BootstrapOpt,
    KafkaConfigOpt,
    NamespaceOpt,
    PartitionsOpt,
    ReplicationOpt,
    create_topics,
    kafka_connection,
    kafka_settings,
)
from streams.kafka.connection import KafkaConnection
from streams.kafka.topics import WORKER_BATCH_BYTES, TopicSpec
from streams.settings import Settings

out = Console(width=max(160, Console().width))  # full topic names
err = Console(stderr=True)


def expected_topics(s: Settings, conn: KafkaConnection) -> tuple[list[TopicSpec], frozenset[str]]:
    """Every topic of the namespace hivestream would create, and the names that may be missing
    (the memory-stub topics and the workers' internal topics: made only once those commands ran).

    The workers' changelog and leader topic names come from the workers' faust apps themselves
    (built, never started), so they are exactly what a worker creates.
    """
    from streams.kafka.topics import Topics
    from streams.stubs.settings import MatchPolicy
    from streams.workers.frames import create_app
    from streams.workers.stubs import create_stub_app

    t = Topics(s.topic_namespace)
    core = t.specs(s.partitions)
    hooks = create_app(s, connection=conn, store="memory://", partitions=s.partitions).topic_specs()
    stubs = create_stub_app(s, MatchPolicy(), connection=conn, partitions=s.partitions, store="memory://").topic_specs()
    seen = {x.name for x in core}
    extra: list[TopicSpec] = []
    for spec in hooks + stubs:
        if spec.name not in seen:
            seen.add(spec.name)
            extra.append(spec)
    return core + extra, frozenset(x.name for x in extra)


def topics(
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    partitions: PartitionsOpt = None,
    replication_factor: ReplicationOpt = None,
    check: Annotated[bool, typer.Option("--check", help="create nothing: compare the existing topics with what hivestream expects; "
                                        "exit 1 on a difference")] = False,
) -> None:
    """Create hivestream's topics (idempotent; existing topics are never altered), or check them with --check."""
    s = kafka_settings(namespace, partitions, replication_factor=replication_factor)
    conn = kafka_connection(bootstrap, kafka_config)
    if not check:
        from streams.kafka.topics import Topics

        created = create_topics(conn, s, Topics(s.topic_namespace).specs(s.partitions))
        out.print(f"created: {', '.join(created) or 'none (all exist)'}")
        return
    raise typer.Exit(check_namespace(s, conn))


def check_namespace(s: Settings, conn: KafkaConnection) -> int:
    """Print the namespace's topics and every difference from what hivestream expects; 0 when none, else 1.

    Raises:
        kafka.errors.KafkaError: when the topics cannot be described.
    """
    from streams.kafka.topic_check import broker_defaults, describe_topics, differences

    specs, optional = expected_topics(s, conn)
    states = describe_topics(conn, [x.name for x in specs])
    rf = s.replication_factor
    if rf is None:
        found = broker_defaults(conn).get("default.replication.factor")
        rf = int(found) if found and found.lstrip("-").isdigit() and int(found) > 0 else None
        if rf is None:
            err.print("note: the broker's default.replication.factor cannot be read here: replicas are not checked "
                      "(give --replication-factor)")
    rows: list[tuple[object, ...]] = []
    for spec in specs:
        st = states.get(spec.name)
        if st is None:
            if spec.name not in optional:
                rows.append((spec.name, "missing", "", "", "", "", ""))
            continue
        rows.append((st.name, st.partitions, st.replicas if st.replicas == st.replicas_max else f"{st.replicas}-{st.replicas_max}",
                     st.in_sync, st.configs.get("min.insync.replicas", "?"), st.configs.get("retention.ms", "?"),
                     st.configs.get("cleanup.policy", "?")))
    out.print(table(f"topics of {s.topic_namespace} ({conn.bootstrap_servers})",
                    ["topic", "partitions", "replicas", "in sync (min)", "min ISR", "retention.ms", "cleanup"], rows))
    for st in states.values():
        if st.in_sync < st.replicas:
            err.print(f"note: {st.name} is under-replicated now ({st.in_sync} of {st.replicas} replicas in sync): a broker is down or catching up")
    diffs = differences(specs, states, replication_factor=rf, min_insync_replicas=s.min_insync_replicas, optional=optional,
                        batch_bytes=WORKER_BATCH_BYTES)
    for d in diffs:
        out.print(f"difference: {d}", soft_wrap=True, highlight=False)
    out.print(f"{len(diffs)} difference(s) from what hivestream expects (replicas {rf if rf else 'not checked'}, "
              f"min ISR {s.min_insync_replicas or 'not checked'}); existing topics are never altered" if diffs else
              f"no differences: {sum(1 for x in specs if x.name in states)} topics as hivestream expects "
              f"(replicas {rf if rf else 'not checked'}, min ISR {s.min_insync_replicas or 'not checked'})")
    return 1 if diffs else 0


def register(app: typer.Typer) -> None:
    """Add ``topics`` to the main app."""
    app.command("topics")(topics)
