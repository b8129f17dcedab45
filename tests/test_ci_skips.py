"""The CI rule for skips (``tests/conftest.py``): under ``CI`` a skip fails the run unless
``ALLOWED_SKIPS`` allows it with its reason; without ``CI`` skips stay skips."""

from __future__ import annotations

import pytest

from tests.conftest import allowed_skip, under_ci
from tests.support.session_sets import NO_CORPUS, corpus_only

PROBE = """
import pytest
from tests.support.session_sets import NO_CORPUS

def test_runs():
    pass

def test_skips_for_a_missing_tool():
    pytest.skip("Codex CLI not available: npm install @openai/codex@0.171.0 exited 1")

def test_a_corpus_variant():
    pytest.skip(NO_CORPUS)

@pytest.mark.parametrize("x", [])
def test_an_empty_parameter_set(x):
    pass

@pytest.mark.xfail(reason="a known failure is no skip")
def test_expected_to_fail():
    assert False
"""


@pytest.mark.parametrize(
    ("ci", "outcomes"),
    [
        ("true", {"passed": 1, "failed": 1, "errors": 1, "skipped": 1, "xfailed": 1}),  # the empty set skips in setup: an error
        ("", {"passed": 1, "skipped": 3, "xfailed": 1}),
        ("false", {"passed": 1, "skipped": 3, "xfailed": 1}),
    ],
)
def test_under_ci_a_skip_fails_unless_it_is_allowed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str,
                                                    outcomes: dict[str, int]) -> None:
    monkeypatch.setenv("CI", ci)
    pytester.makeconftest("from tests.conftest import pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401\n")
    pytester.makepyfile(test_probe=PROBE)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:asyncio", "-rs")
    result.assert_outcomes(**outcomes)
    text = result.stdout.str()
    assert ("no entry of ALLOWED_SKIPS" in text) == under_ci()
    assert "npm install @openai/codex@0.171.0 exited 1" in text  # the reason is shown either way
    assert ("skips allowed under CI" in text) == under_ci()


def test_the_allow_list_matches_node_and_reason_prefixes() -> None:
    assert allowed_skip("tests/streams/test_importers.py::test_x[corpus]", NO_CORPUS) is not None
    assert allowed_skip("tests/streams/test_memory_tools.py::test_y", corpus_only("Codex's hook input schemas")) is not None
    assert allowed_skip("tests/hivestream/test_ingest_reuse_port.py::test_z", "SO_REUSEPORT is Linux/BSD only") is not None
    assert allowed_skip("tests/hivestream/test_serve.py::test_z", "SO_REUSEPORT is Linux/BSD only") is None  # only where it was allowed
    assert allowed_skip("tests/hivestream/test_openclaw_handler.py::test_w", "node not installed") is None
    assert allowed_skip("tests/hivestream/test_ingest_clients.py::test_v", "Claude Code CLI not available: npm is not on PATH") is None
