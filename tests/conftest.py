"""Shared pytest fixtures, the broker-marker check, and the CI rule for skips.

Under CI (the environment variable ``CI`` set and not ``0``/``false``, as ``.ci/run`` sets it) a
skipped test fails the run unless its skip is in :data:`ALLOWED_SKIPS` with the reason it may skip:
a test that cannot run where the suite is meant to run all of it is reported, not passed over.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from typing import NamedTuple

import pytest

from tests.support.kafka_broker import kafka_broker
from tests.support.session_sets import CORPUS_ONLY, NO_CORPUS, SessionSet, corpus_set, generated_set

pytest_plugins = ["pytester"]  # tests/test_ci_skips.py runs the CI rule on a probe file


class AllowedSkip(NamedTuple):
    """A skip CI accepts: tests whose node id starts with ``node``, skipped with a reason starting with ``reason``, and why."""

    node: str
    reason: str
    why: str


ALLOWED_SKIPS: tuple[AllowedSkip, ...] = (
    AllowedSkip("", NO_CORPUS, "the corpus variant of a test that ran on the generated sessions too; the corpus is read "
                "in place beside the repository, never copied into it"),
    AllowedSkip("", CORPUS_ONLY, "a check only the real corpus can feed (its own published figures, Codex's hook schemas), "
                "read in place beside the repository"),
    AllowedSkip("tests/hivestream/test_ingest_reuse_port.py::", "SO_REUSEPORT is Linux/BSD only", "the platform has no SO_REUSEPORT"),
    AllowedSkip("tests/hivestream/test_run_jobs.py::", "needs Linux /proc", "the platform has no /proc to read a process's memory from"),
    AllowedSkip("tests/hivestream/test_ingest_faults.py::", "these tests stop and start a broker of their own",
                "KAFKA_BOOTSTRAP_SERVERS names an external broker, which these tests must not stop"),
    AllowedSkip("tests/hivestream/test_serve_read_cost.py::", "a thread's own CPU priority is Linux's", "the platform is not Linux"),
    AllowedSkip("tests/hivestream/test_snapshot_disk_full.py::", "a small file system is needed",
                "mounting a small tmpfs needs root or CAP_SYS_ADMIN, which a CI runner need not grant"),
)
"""The skips CI accepts. Anything else skipped under CI (a missing tool such as node or npm, a failed
``npm install``, a missing optional package, an empty parameter set) fails the run."""


def under_ci() -> bool:
    """Whether the suite runs as CI: ``CI`` set to anything but ``""``, ``0``, ``false`` or ``no``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_reason(report: pytest.TestReport) -> str:
    """The reason a skipped test report gives (``pytest.skip``'s message, without the ``Skipped: `` pytest adds)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed_skip(nodeid: str, reason: str) -> AllowedSkip | None:
    """The :data:`ALLOWED_SKIPS` entry that accepts this skip, or ``None``."""
    return next((a for a in ALLOWED_SKIPS if nodeid.startswith(a.node) and reason.startswith(a.reason)), None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI, turn a skip that :data:`ALLOWED_SKIPS` does not accept into a failure that says why."""
    report = yield
    if report.skipped and not hasattr(report, "wasxfail") and under_ci():
        reason = skip_reason(report)
        entry = allowed_skip(item.nodeid, reason)
        if entry is None:
            report.outcome = "failed"
            report.longrepr = (f"skipped under CI, and no entry of ALLOWED_SKIPS (tests/conftest.py) allows this skip:\n{reason}\n"
                               "(make the test run here, or allow its skip there with the reason it may skip)")
        else:
            item.config.stash.setdefault(_ALLOWED, []).append((item.nodeid, entry.why))
    return report


_ALLOWED = pytest.StashKey[list[tuple[str, str]]]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """Under CI, list the skips that were allowed and why."""
    allowed = config.stash.get(_ALLOWED, [])
    if allowed:
        terminalreporter.section("skips allowed under CI (tests/conftest.py ALLOWED_SKIPS)")
        for why in sorted({w for _n, w in allowed}):
            n = sum(1 for _n, w in allowed if w == why)
            terminalreporter.write_line(f"{n:4d}  {why}")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap servers (``host:port``) of a real Kafka broker for the whole session.

    See :func:`tests.support.kafka_broker.kafka_broker`: ``KAFKA_BOOTSTRAP_SERVERS``, else Docker via
    testcontainers, else ``deploy/kafka/kafka.sh``; stopped at session end.
    """
    with kafka_broker() as bootstrap:
        yield bootstrap


@pytest.fixture(scope="session")
def generated_sessions(tmp_path_factory: pytest.TempPathFactory) -> SessionSet:
    """The generated agent-session files (:func:`tests.support.session_sets.generated_set`), written once per session."""
    return generated_set(tmp_path_factory.mktemp("sessions"))


@pytest.fixture(scope="session", params=["generated", "corpus"])
def sessions(request: pytest.FixtureRequest) -> SessionSet:
    """Agent-session files in the corpus layout (:mod:`tests.support.session_sets`): the generated set, then
    the real corpus (skipped, with :data:`tests.support.session_sets.NO_CORPUS`, where it is absent)."""
    if request.param == "corpus":
        found = corpus_set()
        if found is None:
            pytest.skip(NO_CORPUS)
        return found
    generated: SessionSet = request.getfixturevalue("generated_sessions")
    return generated


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a test that asks for a broker without the markers that put it in one broker session.

    ``make test`` (``tests/support/run_suite.sh``) runs ``-m cluster``, ``-m "kafka and not cluster"`` and
    ``-m "not kafka"`` side by side: a test using the ``kafka_bootstrap`` fixture without ``kafka``
    would start a second broker in the CPU-bound session; one using the three-broker ``cluster``
    fixture needs ``cluster`` and ``kafka`` both (``cluster`` alone is also selected by
    ``not kafka``: two clusters at once). Fixtures are told from parameters of the same name by
    the function that defines them. A test that starts a broker without these fixtures (its own
    fixture calling :func:`tests.support.kafka_broker.kafka_broker`) is not seen here.

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
