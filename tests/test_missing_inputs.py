"""A file command given a path that is not there says so in one line and exits 2 (no boxed usage screen, no traceback)."""

from __future__ import annotations

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
