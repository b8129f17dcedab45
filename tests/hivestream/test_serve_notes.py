"""The reader's side of serve's note ``<db>.serve`` (hivestream/serve/read_marker.py, read_client.py)
with notes serve never writes: no serve process, a listener of the test's own where one is needed."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from hivestream.serve import read_client
from hivestream.serve.read_client import ServeUnreachable, ask
from hivestream.serve.read_marker import FORMAT, VERSION, ReadMarker, marker_path, new_token, read_marker, write_marker


def note(db: Path, **fields: object) -> None:
    """A note for ``db`` as serve writes it (0600), with ``fields`` changed."""
    obj = {"format": FORMAT, "version": VERSION, "pid": os.getpid(), "port": 9, "token": new_token(), **fields}
    path = marker_path(db)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(obj).encode())
    os.close(fd)


@pytest.mark.parametrize("token", ["x\ny", "x\r\nX-Injected: 1", "€uro", "a b", ""])
def test_a_note_whose_token_could_not_be_sent_is_no_note(tmp_path: Path, token: str) -> None:
    db = tmp_path / "f.duckdb"
    note(db, token=token)
    assert read_marker(db) is None
    assert ask(db, "GET", "/v1/report") is None  # the caller reads the file or its snapshot; nothing raised


@pytest.mark.parametrize("pid", [0, -1])
def test_a_note_without_a_process_id_of_one_process_is_no_note(tmp_path: Path, pid: int) -> None:
    db = tmp_path / "f.duckdb"
    note(db, pid=pid)
    assert read_marker(db) is None


def test_a_request_http_client_refuses_is_one_line_without_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "f.duckdb"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        write_marker(db, ReadMarker(os.getpid(), s.getsockname()[1], "good-token"))
        bad = ReadMarker(os.getpid(), s.getsockname()[1], "secret\nvalue")
        monkeypatch.setattr(read_client, "read_marker", lambda _db: bad)
        with pytest.raises(ServeUnreachable) as e:
            ask(db, "GET", "/v1/report", timeout_s=5)
    assert "secret" not in str(e.value) and "\n" not in str(e.value)


def test_serve_s_own_token_is_a_note(tmp_path: Path) -> None:
    db = tmp_path / "f.duckdb"
    m = ReadMarker(os.getpid(), 4242, new_token())
    write_marker(db, m)
    assert read_marker(db) == m


async def test_a_query_body_nested_too_deep_is_a_bad_request_not_a_server_error() -> None:
    from types import SimpleNamespace

    import duckdb
    from aiohttp.test_utils import TestClient, TestServer

    from hivestream.serve.progress import Progress
    from hivestream.serve.read_api import ReadApp
    from hivestream.serve.read_gate import ReadGate

    gate = ReadGate()
    gate.set(duckdb.connect(), Path("mem.duckdb"))
    reads = ReadApp(gate, Progress(), SimpleNamespace(next_offset=0), "tok")  # type: ignore[arg-type]
    async with TestClient(TestServer(reads.build())) as client:
        auth = {"Authorization": "Bearer tok"}
        deep = await client.post("/v1/query", data=b"[" * 30_000 + b"]" * 30_000, headers=auth)
        assert deep.status == 400 and (await deep.json())["error"] == "bad_request"
        missing = await client.post("/v1/query", data=json.dumps({"set": "frames", "name": "totals"}), headers=auth)
        assert missing.status == 422 and "\n" not in (await missing.json())["detail"]  # a file without the tables: one line
    reads.pool.shutdown()
    gate.set(None)


@pytest.mark.parametrize("where", ["missing-dir/r.html", "a-dir"])
def test_a_report_serve_answered_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    from typer.testing import CliRunner

    from hivestream.cli.app import app
    from hivestream.serve.read_client import Served

    monkeypatch.setattr(read_client, "served_report", lambda _db: Served(b"<html></html>", "answered by the serve"))
    (tmp_path / "a-dir").mkdir()
    res = CliRunner().invoke(app, ["report", "--db", str(tmp_path / "f.duckdb"), "--out", str(tmp_path / where)])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert "cannot write" in res.output and "Traceback" not in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir"]  # no .tmp left behind


def test_a_report_of_the_file_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    import duckdb
    from typer.testing import CliRunner

    from hivestream.cli.app import app

    db = tmp_path / "f.duckdb"
    duckdb.connect(str(db)).close()
    (tmp_path / "a-dir").mkdir()
    res = CliRunner().invoke(app, ["report", "--db", str(db), "--out", str(tmp_path / "a-dir")])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit) and "Is a directory" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", "f.duckdb"]  # no .tmp left behind
