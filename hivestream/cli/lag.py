"""``hivestream lag``: the committed lag of the frames workers' consumer group (or any group)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from hivestream.cli.console import table
from hivestream.cli.kafka_opts import BootstrapOpt, KafkaConfigOpt, NamespaceOpt, kafka_connection, kafka_settings

out = Console()
err = Console(stderr=True)


def lag(
    bootstrap: BootstrapOpt = None,
    kafka_config: KafkaConfigOpt = None,
    namespace: NamespaceOpt = None,
    group: Annotated[str | None, typer.Option("--group", help="consumer group (default: the workers' group, <namespace>-dedup)")] = None,
    topic: Annotated[list[str] | None, typer.Option("--topic", help="topic(s) (default: <namespace>.hook-events)")] = None,
) -> None:
    """Committed offset, end offset and lag per partition; exit 0 when the group has caught up, 1 otherwise."""
    from kafka.errors import KafkaError
    from rich.markup import escape

    from streams.kafka.errors import explain
    from streams.kafka.lag import consumer_lag, worker_group
    from streams.kafka.topics import Topics

    s = kafka_settings(namespace, None)
    conn = kafka_connection(bootstrap, kafka_config)
    g = group or worker_group(s.topic_namespace)
    topics = topic or [Topics(s.topic_namespace).hook_events]
    try:
        parts = consumer_lag(conn, g, topics)
    except KafkaError as e:
        err.print(f"[red]error:[/] cannot read the lag of {g}: {escape(explain(e, conn))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    if not parts:
        err.print(f"[red]error:[/] no partitions found for {', '.join(topics)}")
        raise typer.Exit(2)
    rows: list[tuple[object, ...]] = [(p.topic, p.partition, "-" if p.committed is None else p.committed, p.end, p.lag) for p in parts]
    out.print(table(f"consumer group {g}", ["topic", "partition", "committed", "end", "lag"], rows))
    total = sum(p.lag for p in parts)
    out.print(f"total lag {total}")
    raise typer.Exit(0 if total == 0 else 1)


def register(app: typer.Typer) -> None:
    """Add ``lag`` to the main app."""
    app.command("lag")(lag)
