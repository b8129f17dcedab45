"""``hivestream demo --db FILE`` replaces only a file an earlier demo wrote (a newcomer's finding: it deleted any file)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from hivestream.cli.app import app
from hivestream.cli.demo_file import refusal


def test_demo_refuses_a_file_it_did_not_write_and_leaves_it_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    res = CliRunner().invoke(app, ["demo", "--db", str(notes)])
    assert res.exit_code == 2 and "is not a DuckDB file the demo wrote" in " ".join(res.output.split())
    assert notes.read_text() == "mine" and "Traceback" not in res.output
    projection = tmp_path / "memory.duckdb"  # a projection of the user's, made by run
    log = tmp_path / "log.jsonl"
    log.write_text('{"content": "[hm src:claude-code event:stop] a turn", "timestamp": 1790000000000}\n')
    assert CliRunner().invoke(app, ["run", str(log), "--db", str(projection)]).exit_code == 0
    before = projection.read_bytes()
    res = CliRunner().invoke(app, ["demo", "--db", str(projection)])
    assert res.exit_code == 2 and "was not written by hivestream demo" in " ".join(res.output.split())
    assert projection.read_bytes() == before
    res = CliRunner().invoke(app, ["demo", "--db", str(tmp_path)])
    assert res.exit_code == 2 and "is a directory" in res.output


def test_demo_replaces_its_own_file(tmp_path: Path) -> None:
    db = tmp_path / "mydemo.duckdb"
    assert refusal(db) is None
    first = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert first.exit_code == 0, first.output
    assert refusal(db) is None  # the demo marked it
    again = CliRunner().invoke(app, ["demo", "--db", str(db)])
    assert again.exit_code == 0, again.output
    assert [line for line in first.output.splitlines() if "frames" in line] == [line for line in again.output.splitlines() if "frames" in line]
