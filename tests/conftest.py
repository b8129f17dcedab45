"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_broker import kafka_broker
from tests.session_sets import NO_CORPUS, SessionSet, corpus_set, generated_set


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers (``host:port``) of a real Kafka broker for the whole session.

    See :func:`tests.kafka_broker.kafka_broker`: ``KAFKA_BOOTSTRAP_SERVERS``, else Docker via
    testcontainers, else ``deploy/kafka/kafka.sh``; stopped at session end.
    """
    with kafka_broker() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def generated_sessions(tmp_path_factory: pytest.TempPathFactory) -> SessionSet:
    """The generated agent-session files (:func:`tests.session_sets.generated_set`), written once per session."""
    return generated_set(tmp_path_factory.mktemp("sessions"))


@pytest.fixture(scope="session", params=["generated", "corpus"])
def sessions(request: pytest.FixtureRequest) -> SessionSet:
    """Agent-session files in the corpus layout (:mod:`tests.session_sets`): the generated set, then
    the real corpus (skipped, with :data:`tests.session_sets.NO_CORPUS`, where it is absent)."""
    if request.param == "corpus":
        found = corpus_set()
        if found is None:
            pytest.skip(NO_CORPUS)
        return found
    generated: SessionSet = request.getfixturevalue("generated_sessions")
    return generated


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test that asks for a broker without the markers that put it in one broker session.

    ``make test`` (``tests/run_suite.sh``) runs ``-m cluster``, ``-m "kafka and not cluster"`` and
    ``-m "not kafka"`` side by side: a test using the ``kafka_bootstrap`` fixture without ``kafka``
    would start a second broker in the CPU-bound session; one using the three-broker ``cluster``
    fixture needs ``cluster`` and ``kafka`` both (``cluster`` alone is also selected by
    ``not kafka``: two clusters at once). Fixtures are told from parameters of the same name by
    the function that defines them. A test that starts a broker without these fixtures (its own
    fixture calling :func:`tests.kafka_broker.kafka_broker`) is not seen here.

    Raises:
        pytest.UsageError: naming every such test.
    """
    wrong: list[str] = []
    for item in items:
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        uses = {name for name in ("kafka_bootstrap", "cluster") if name in defs and defs[name][-1].func.__name__ == name}
        need = {"kafka"} if "kafka_bootstrap" in uses else set()
        if "cluster" in uses or item.get_closest_marker("cluster") is not None:
            need |= {"kafka", "cluster"}
        missing = sorted(m for m in need if item.get_closest_marker(m) is None)
        if missing:
            wrong.append(f"{item.nodeid} (not marked {', '.join(missing)})")
    if wrong:
        raise pytest.UsageError("tests that need a broker without their markers: " + "; ".join(wrong))
