"""``serve``, ``ingest`` and the readers refuse what cannot work in one line that names the real
cause, and a refused start leaves nothing behind: a corrupt DuckDB file is not "held by a
writer", a directory or a text file is not "held by another process", a port in use creates no
file, a path with quotes still gets its snapshot and report, a numeric option out of range is
refused before anything starts, ``/healthz`` names no path, and a failing disk is not one ERROR
line per request."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import httpx
import pytest

from hivestream.ingest.record_sink import Record
from hivestream.ingest.repeats import RepeatedLines
from projections.frames.snapshot import copy_snapshot
from projections.reading import open_for_reading, snapshot_path
from tests.support.memory_sink import MemorySink, requests
from tests.support.serve_harness import ServeProc, hivestream, prompt


def _corrupt(db: Path) -> None:
    """A DuckDB file whose last blocks are overwritten (DuckDB: "Corrupt database file: ... in block at location ...")."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t AS SELECT range AS x, 'v' || range AS s FROM range(200000)")
    con.execute("CHECKPOINT")
    con.close()
    size = db.stat().st_size
    with db.open("r+b") as f:
        f.seek(size - (256 << 10) + 10)
        f.write(os.urandom((256 << 10) - 10))


def _one_line(r: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr of a command that exited 2."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


def test_a_corrupt_file_is_called_corrupt_not_held_by_a_writer(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    _corrupt(db)
    with duckdb.connect(str(snapshot_path(db))) as snap:  # even with a snapshot beside it, the file is not "held"
        snap.execute("CREATE TABLE snapshot_info (published_at_ms BIGINT, positions VARCHAR)")
    with pytest.raises(FileNotFoundError) as e:
        open_for_reading(db)
    assert "Corrupt database file" in str(e.value) and "writer" not in str(e.value)
    line = _one_line(hivestream("query", "totals", "--db", str(db)))
    assert "Corrupt database file" in line and "writer" not in line and "snapshot" not in line


def test_a_file_without_hivestream_s_tables_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "other.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    line = _one_line(hivestream("query", "totals", "--db", str(db)))
    assert "is not a hivestream projection" in line and "frame_captures" in line


def _immutable(path: Path) -> bool:
    """Make ``path`` immutable (``chattr +i``: root on a file system that has the flag); whether it worked."""
    try:
        return subprocess.run(["chattr", "+i", str(path)], capture_output=True, timeout=30).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("kind", ["directory", "text", "immutable"])
def test_serve_on_a_file_it_cannot_open_names_why_and_leaves_nothing(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "memory.duckdb"
    if kind == "directory":
        db.mkdir()
    elif kind == "text":
        db.write_text("these are my notes\n")
    else:
        duckdb.connect(str(db)).close()
        if not _immutable(db):
            pytest.skip("chattr +i is not available here")
    try:
        before = sorted(p.name for p in tmp_path.iterdir())
        line = _one_line(hivestream("serve", "--db", str(db), "--port", "0", timeout=120))
        assert line.startswith(f"error: cannot open {db}: ") and "another process" not in line, line
        assert {"directory": "Is a directory", "text": "DuckDB database file", "immutable": "Operation not permitted"}[kind] in line
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        if kind == "immutable":
            subprocess.run(["chattr", "-i", str(db)], capture_output=True, timeout=30)


def test_a_file_held_by_another_process_still_says_so(tmp_path: Path) -> None:
    db = tmp_path / "memory.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys, time\nc = duckdb.connect({str(db)!r})\nprint('held', flush=True)\ntime.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        line = _one_line(hivestream("serve", "--db", str(db), "--port", "0", timeout=120))
        assert "another process holds it" in line and "Could not set lock" in line
        assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.duckdb"]  # not even the log directory
    finally:
        holder.kill()
        holder.wait()


def test_a_port_in_use_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        line = _one_line(hivestream("serve", "--db", str(tmp_path / "memory.duckdb"), "--port", str(port), timeout=120))
    assert f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env", [{"HIVESTREAM_EMBED_URL": "ftp://x/v1", "HIVESTREAM_EMBED_MODEL": "m"},
                                 {"HIVESTREAM_EMBED_URL": "notaurl", "HIVESTREAM_EMBED_MODEL": "m"},
                                 {"HIVESTREAM_EMBED_URL": "http://127.0.0.1:9/v1"}], ids=["ftp", "not a url", "no model"])
def test_an_unusable_embeddings_endpoint_stops_serve_in_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    line = _one_line(hivestream("serve", "--db", str(tmp_path / "memory.duckdb"), "--port", str(port), env=env, timeout=120))
    assert line.startswith("error: HIVESTREAM_EMBED_URL")
    assert list(tmp_path.iterdir()) == []


def test_a_path_with_quotes_gets_its_snapshot_and_report_and_healthz_names_no_path(tmp_path: Path) -> None:
    d = tmp_path / "Bob's \"notes\""
    d.mkdir()
    db = d / "it's.duckdb"
    proc = ServeProc(db, "--snapshot-every", "0.2", "--report-every", "0.5")
    try:
        r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("quote", 0), timeout=30)
        assert r.status_code == 200
        proc.wait_applied()
        status, health = proc.health()
        assert status == 200 and health["db"] == "it's.duckdb"
        assert str(d) not in httpx.get(proc.url + "/healthz", timeout=30).text
    finally:
        assert proc.stop() == 0, proc.text()[-2000:]
    assert "publishing the snapshot or the report failed" not in proc.text()
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as snap:
        assert snap.execute("SELECT count(*) FROM frame_captures").fetchone() == (1,)
    assert 'data-chart="captures-per-day" data-state="plot"' in (d / "it's-report.html").read_text()


def test_a_snapshot_of_a_file_named_with_quotes(tmp_path: Path) -> None:
    db = tmp_path / "a'b \"c\".duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE positions (input VARCHAR, src_partition INTEGER, next_offset BIGINT)")
        con.execute("INSERT INTO positions VALUES ('x', 0, 7)")
        cur = con.cursor()
        copy_snapshot(cur, db, 123)
        cur.close()
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as snap:
        assert snap.execute("SELECT published_at_ms, positions FROM snapshot_info").fetchone() == (123, json.dumps([["x", 0, 7]]))


@pytest.mark.parametrize(("args", "says"), [
    (["--port", "70000"], "--port 70000: a TCP port is 0"),
    (["--retain-days", "inf"], "--retain-days inf: expected a finite number of days"),
    (["--retain-days", "nan"], "--retain-days nan: expected a finite number of days"),
    (["--log-max-bytes", "0"], "--log-max-bytes 0: expected at least"),
    (["--max-body-bytes", "0"], "--max-body-bytes 0: expected at least 1024"),
    (["--max-body-bytes", "-1"], "--max-body-bytes -1: expected at least 1024"),
    (["--read-timeout", "-1"], "--read-timeout -1: expected a finite number of seconds above 0"),
    (["--stub-budget", "1e9"], "--stub-budget 1e+09: at most 30 s"),
    (["--stub-refresh-at", "OFF"], "(or 'off')"),
    (["--read-timeout", "0"], "--read-timeout 0: expected a finite number of seconds above 0"),
    (["--retain-bytes", "-5"], "--retain-bytes -5: expected at least 0"),
    (["--snapshot-every", "nan"], "--snapshot-every nan: expected a finite number"),
    (["--report-every", "-1"], "--report-every -1: expected a finite number"),
])
def test_serve_refuses_numbers_that_cannot_work(tmp_path: Path, args: list[str], says: str) -> None:
    line = _one_line(hivestream("serve", "--db", str(tmp_path / "m.duckdb"), "--port", "0", *args, timeout=60))
    assert says in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("args", "says"), [
    (["--port", "65536"], "--port 65536: a TCP port is 0"),
    (["--max-body-bytes", "0"], "--max-body-bytes 0: expected at least 1024"),
    (["--spool-max-bytes", "10"], "--spool-max-bytes 10: expected at least"),
    (["--read-timeout", "nan"], "--read-timeout nan: expected a finite number of seconds above 0"),
    (["--produce-timeout", "-2"], "--produce-timeout -2: expected a finite number of seconds above 0"),
])
def test_ingest_refuses_numbers_that_cannot_work(tmp_path: Path, args: list[str], says: str) -> None:
    line = _one_line(hivestream("ingest", "--spool-dir", str(tmp_path / "spool"), "--port", "0", *args, timeout=60))
    assert says in line
    assert list(tmp_path.iterdir()) == []


class _FailingSink(MemorySink):
    error_reason = "log_error"

    async def write(self, records: list[Record]) -> str:
        raise OSError(28, "No space left on device")


def test_a_failing_disk_is_one_error_line_per_interval_not_one_per_request(caplog: pytest.LogCaptureFixture) -> None:
    from hivestream.ingest.server import IngestConfig

    body = json.dumps(prompt("disk", 0)).encode()
    with caplog.at_level(logging.ERROR, logger="hivestream.ingest"):
        answers = requests(IngestConfig(), _FailingSink(), [("POST", "/v1/hooks/claude-code", body, {})] * 40)
    assert [s for s, _a in answers] == [503] * 40
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "hivestream.ingest"]
    assert len(errors) == 1 and "No space left on device" in errors[0]


def test_repeated_lines_are_counted_and_said_once_per_interval() -> None:
    now = [0.0]
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    logger = logging.getLogger("tests.repeats")
    logger.propagate = False
    logger.addHandler(Collect())
    lines = RepeatedLines(logger, every_s=10.0, clock=lambda: now[0])
    for _ in range(5):
        lines.log("disk full")
    lines.log("another failure")
    now[0] = 12.0
    lines.log("disk full")
    now[0] = 13.0
    lines.log("disk full")
    lines.flush()
    assert seen == ["disk full", "another failure", "disk full (and 4 more like it in the last 12 s)", "disk full (1 more like it in the last 1 s)"]
