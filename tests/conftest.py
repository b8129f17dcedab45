"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_broker import kafka_broker


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers (``host:port``) of a real Kafka broker for the whole session.

    See :func:`tests.kafka_broker.kafka_broker`: ``KAFKA_BOOTSTRAP_SERVERS``, else Docker via
    testcontainers, else ``deploy/kafka/kafka.sh``; stopped at session end.
    """
    with kafka_broker() as bootstrap:
        yield bootstrap
