"""Command-line options shared by the Kafka commands (``hivestream`` and ``hivestream stubs``)."""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Annotated

import typer

from streams.settings import Settings

BootstrapOpt = Annotated[str | None, typer.Option("--bootstrap", help="Kafka bootstrap servers (default: KAFKA_BOOTSTRAP_SERVERS or 127.0.0.1:19092)")]
NamespaceOpt = Annotated[str | None, typer.Option("--namespace", help="topic namespace (default: HIVESTREAM_TOPIC_NAMESPACE or hivestream)")]
PartitionsOpt = Annotated[int | None, typer.Option("--partitions", help="partitions of the topics created (default: HIVESTREAM_PARTITIONS or 4)")]


def kafka_settings(bootstrap: str | None, namespace: str | None, partitions: int | None, **more: object) -> Settings:
    """Settings from the environment with the given options on top (``None`` = not given).

    Raises:
        pydantic.ValidationError: on an invalid value.
    """
    overrides: dict[str, object] = {k: v for k, v in more.items() if v is not None}
    if bootstrap:
        overrides["kafka_bootstrap_servers"] = bootstrap
    if namespace:
        overrides["topic_namespace"] = namespace
    if partitions:
        overrides["partitions"] = partitions
    return Settings(**overrides)  # type: ignore[arg-type]


def stop_on_signals() -> Callable[[], bool]:
    """Install SIGTERM/SIGINT handlers that ask a long-running command to stop after its current
    batch; returns the ``should_stop`` predicate to poll."""
    stop = {"flag": False}

    def on_signal(_sig: int, _frame: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return lambda: stop["flag"]
