"""Projection files with data for every chart of the report: the demo samples (frames, memory tool
calls, dead letters), the KnowHub scenario of ``tests/support/kb_fixtures.py`` and the stub scenario of
``tests/projections/test_stub_projection.py``."""

from __future__ import annotations

from pathlib import Path

from hivestream.cli.app import SAMPLES
from hivestream.embedded.experiences import run_kb_files
from hivestream.embedded.frames import run_files
from hivestream.embedded.stubs import run_stub_logs
from streams.stubs.log import read_log, write_log
from tests.projections.test_stub_projection import POLICY, scenario
from tests.support.kb_fixtures import scenario_lines, write_lines


def full_projection(tmp: Path) -> tuple[Path, Path, Path]:
    """(frames db, kb db, stubs db) under ``tmp``, each with data for its charts."""
    frames = tmp / "frames.duckdb"
    run_files(sorted(SAMPLES.glob("*.jsonl")), frames, gateway=True)
    kb = tmp / "kb.duckdb"
    run_kb_files([write_lines(tmp / "kb.jsonl", scenario_lines())], kb)
    stubs = tmp / "stubs.duckdb"
    log = tmp / "stubs.jsonl"
    write_log(log, scenario())
    run_stub_logs([read_log(log)], stubs, POLICY)
    return frames, kb, stubs
