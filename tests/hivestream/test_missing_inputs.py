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
                                             ("-5MB", "memory limit '-5MB' (HIVESTREAM_DUCKDB_MEMORY_LIMIT): must not be negative"),
                                             ("1KB", "Out of Memory Error")])
def test_a_bad_duckdb_memory_limit_is_one_line_and_exit_2(limit: str, says: str, tmp_path: Path) -> None:
    """A memory limit DuckDB cannot read names the variable; one too small for DuckDB is its first line only (not its list of tips)."""
    from hivestream.cli.app import SAMPLES

    res = subprocess.run([sys.executable, "-m", "hivestream", "run", str(SAMPLES / "demo-memory-tools.jsonl"), "--db", str(tmp_path / "m.duckdb"),
                          "--jobs", "0"], cwd=Path(__file__).resolve().parents[2], env={**os.environ, "HIVESTREAM_DUCKDB_MEMORY_LIMIT": limit},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: DuckDB: ") and says in lines[0], res.stderr


def test_a_file_that_is_not_duckdb_is_refused_before_duckdb_opens_it(tmp_path: Path) -> None:
    """A SQLite file given as ``--db`` is refused in one line and left as it was: DuckDB would
    attach it through its SQLite extension (downloading it when it can) and write hivestream's
    tables into it; any other non-DuckDB file is refused the same way."""
    import sqlite3

    from hivestream.cli.app import SAMPLES

    lite = tmp_path / "user.db"
    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE notes (x TEXT)")
    con.commit()
    con.close()
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to hold a header\n")
    for db, kind in ((lite, "a SQLite database"), (text, "another kind of file")):
        before = db.read_bytes()
        res = subprocess.run([sys.executable, "-m", "hivestream", "run", str(SAMPLES / "demo-hook-events.jsonl"), "--db", str(db), "--jobs", "0"],
                             cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "COLUMNS": "1000"})  # rich wraps at the terminal's width
        assert res.returncode == 2, res.stderr
        lines = [line for line in (res.stdout + res.stderr).splitlines() if line.strip()]
        assert len(lines) == 1 and f"{db}: not a DuckDB database file (it is {kind})" in lines[0], res.stdout + res.stderr
        assert db.read_bytes() == before
    ok = tmp_path / "fresh.duckdb"
    res = subprocess.run([sys.executable, "-m", "hivestream", "run", str(SAMPLES / "demo-hook-events.jsonl"), "--db", str(ok), "--jobs", "0"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr  # a new file, and then the same one again
    res = subprocess.run([sys.executable, "-m", "hivestream", "run", str(SAMPLES / "demo-hook-events.jsonl"), "--db", str(ok), "--jobs", "0"],
                         cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
