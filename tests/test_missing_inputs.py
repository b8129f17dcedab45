"""A file command given a path that is not there says so in one line and exits 2 (no boxed usage screen, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hivestream.cli.app import app


@pytest.mark.parametrize("command", [["run"], ["produce"], ["kb", "run"], ["stubs", "produce"]])
def test_a_missing_input_is_one_line_and_exit_2(command: list[str], tmp_path: Path) -> None:
    gone = tmp_path / "no-such.jsonl"
    res = CliRunner().invoke(app, [*command, str(gone)])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines == [f"error: no such file or directory: {gone}"], res.output
    assert not gone.exists()


def test_stubs_produce_names_a_directory_in_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["stubs", "produce", str(tmp_path)])
    assert res.exit_code == 2 and res.output.strip() == f"error: {tmp_path} is a directory: name the stub log files", res.output


@pytest.mark.parametrize(("limit", "says"), [("bogus", "memory limit 'bogus' (HIVESTREAM_DUCKDB_MEMORY_LIMIT)"),
                                             ("0", "memory limit '0' (HIVESTREAM_DUCKDB_MEMORY_LIMIT)"),
                                             ("1KB", "Out of Memory Error")])
def test_a_bad_duckdb_memory_limit_is_one_line_and_exit_2(limit: str, says: str, tmp_path: Path) -> None:
    """A memory limit DuckDB cannot read names the variable; one too small for DuckDB is its first line only (not its list of tips)."""
    from hivestream.cli.app import SAMPLES

    res = subprocess.run([sys.executable, "-m", "hivestream", "run", str(SAMPLES / "demo-memory-tools.jsonl"), "--db", str(tmp_path / "m.duckdb"),
                          "--jobs", "0"], cwd=Path(__file__).resolve().parent.parent, env={**os.environ, "HIVESTREAM_DUCKDB_MEMORY_LIMIT": limit},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: DuckDB: ") and says in lines[0], res.stderr
