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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test that asks for a broker without the marker that puts it in a broker session.

    ``make test`` (``tests/run_suite.sh``) runs ``-m cluster``, ``-m "kafka and not cluster"`` and
    ``-m "not kafka"`` side by side: a test using ``kafka_bootstrap`` without ``kafka`` would start a
    second broker in the CPU-bound session, one using the three-broker ``cluster`` without
    ``cluster`` a second cluster.

    Raises:
        pytest.UsageError: naming every such test.
    """
    wrong = [f"{item.nodeid} (uses {fixture}, not marked {mark})" for item in items
             for fixture, mark in (("kafka_bootstrap", "kafka"), ("cluster", "cluster"))
             if fixture in getattr(item, "fixturenames", ()) and item.get_closest_marker(mark) is None]
    if wrong:
        raise pytest.UsageError("tests that need a broker without its marker: " + "; ".join(wrong))
