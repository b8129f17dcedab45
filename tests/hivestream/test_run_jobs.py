"""``hivestream run --jobs N``: the import in forked processes gives the same tables as one process.

The runner's import (:mod:`streams.frames.capture_import`) is cut into tasks (chunks of a
hook-event file at line ends, whole session files) that run in an :class:`OrderedPool`; the
runner dedups their outcomes in file order. Small chunks make many tasks per file here, so task
boundaries fall everywhere (inside bursts of one key, next to bad lines).
"""

from __future__ import annotations

import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from bench.backlog import BacklogSpec, write_backlog
from hivestream.cli.app import SAMPLES, app
from hivestream.embedded.frames import run_files
from streams.frames import capture_import
from streams.frames.capture_import import CaptureOptions, file_tasks
from streams.importers.files import read_lines, split_lines
from streams.importers.ordered_pool import OrderedPool
from tests.support.session_sets import SessionSet

TABLES = {
    "frames": "SELECT * FROM frames",
    "frame_captures": "SELECT * FROM frame_captures",
    "dead_letters": "SELECT * EXCLUDE (time_ms) FROM dead_letters",
    "positions": "SELECT * FROM positions",
    "dedup_state": "SELECT * FROM dedup_state",
    "memory_tool_calls": "SELECT * FROM memory_tool_calls",
    "skipped_events": "SELECT * FROM skipped_events",
    "event_details": "SELECT * FROM event_details",
}


def contents(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: sorted(con.execute(q).fetchall(), key=repr) for t, q in TABLES.items()}
    finally:
        con.close()


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture_import, "CHUNK_BYTES", 8_192)


def test_jobs_equal_one_process_on_a_backlog_with_bad_lines(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "backlog.jsonl"
    write_backlog(log, BacklogSpec(turns=3_000, sessions=200, bad_every=50))
    memory = SAMPLES / "demo-memory-tools.jsonl"
    files = [log, memory]
    one = run_files(files, tmp_path / "one.duckdb")
    two = run_files(files, tmp_path / "two.duckdb", jobs=2)
    assert one.captures == two.captures == 12_000
    assert sum(one.dead_letters.values()) > 35 and one.not_turns["empty_body"] > 15
    assert one == two.__class__(**{**two.__dict__, "db": one.db})
    a, b = contents(tmp_path / "one.duckdb"), contents(tmp_path / "two.duckdb")
    assert len(a["frames"]) > 5_000 and a["memory_tool_calls"] and len(a["skipped_events"]) > 15 and len(a["event_details"]) > 7_000
    assert a == b


def test_jobs_equal_one_process_on_the_sessions(sessions: SessionSet, tmp_path: Path, small_chunks: None) -> None:
    files = [*sessions.claude_files(), *sessions.codex_files(), *sorted(SAMPLES.glob("*.jsonl"))]
    one = run_files(files, tmp_path / "one.duckdb", gateway=True)
    three = run_files(files, tmp_path / "three.duckdb", gateway=True, jobs=3)
    assert one.captures == three.captures > 100
    assert one.inputs == three.inputs and list(one.inputs) == [str(p) for p in files]
    assert contents(tmp_path / "one.duckdb") == contents(tmp_path / "three.duckdb")


def test_jobs_rerun_applies_nothing_twice(tmp_path: Path, small_chunks: None) -> None:
    log = tmp_path / "backlog.jsonl"
    write_backlog(log, BacklogSpec(turns=500, sessions=50, bad_every=40))
    db = tmp_path / "d.duckdb"
    run_files([log], db, jobs=2)
    before = contents(db)
    again = run_files([log], db, jobs=2)
    assert again.captures == 0 and again.skipped > 2_000
    assert contents(db) == before


def test_run_cli_jobs(tmp_path: Path) -> None:
    db = tmp_path / "c.duckdb"
    res = CliRunner().invoke(app, ["run", *map(str, sorted(SAMPLES.glob("*.jsonl"))), "--gateway", "--jobs", "2", "--db", str(db)])
    assert res.exit_code == 0, res.output
    ref = tmp_path / "r.duckdb"
    run_files(sorted(SAMPLES.glob("*.jsonl")), ref, gateway=True)
    assert contents(db) == contents(ref)
    bad = CliRunner().invoke(app, ["run", str(SAMPLES), "--jobs", "-1", "--db", str(db)])
    assert bad.exit_code == 2


@pytest.mark.parametrize("data", [
    b"", b"a\n", b"a", b"a\nb", b"a\r\nb\r\n\r\n", b"\n\n\nx\n", b"one\ntwo\nthree\nfour\nfive\n" * 40,
    b'{"x": 1}\n' * 3 + b"no newline at the end",
])
@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_file_tasks_cut_at_line_ends_with_the_file_offsets(tmp_path: Path, data: bytes, chunk: int) -> None:
    p = tmp_path / "f.jsonl"
    p.write_bytes(data)
    tasks = list(file_tasks(p, "hook-events", False, 1, CaptureOptions(), chunk=chunk))
    assert tasks, "every file gives at least one task"
    chunks = [t[2] for t in tasks]
    assert b"".join(c or b"" for c in chunks) == data
    lines: list[tuple[int, bytes]] = []
    for t in tasks:
        assert t[2] is not None
        assert t[2] == b"" or t[2].endswith(b"\n") or t is tasks[-1]
        lines += list(enumerate(split_lines(t[2]), t[3]))
    assert lines == list(enumerate(read_lines(p)))


def test_session_files_are_one_task(tmp_path: Path) -> None:
    f = sorted(SAMPLES.glob("*.jsonl"))[0]
    tasks = list(file_tasks(f, "claude-code", True, 5, CaptureOptions(), chunk=10))
    assert [(t[0], t[2], t[3]) for t in tasks] == [(str(f), None, 0)]


def _slow_square(x: int) -> int:
    time.sleep(0.02 * (x % 3))
    if x == 13:
        raise ValueError("thirteen")
    return x * x


def test_ordered_pool_keeps_submission_order_and_raises_in_turn() -> None:
    with OrderedPool(_slow_square, 3, ahead=2) as pool:
        assert list(pool.map(range(12))) == [x * x for x in range(12)]
        got = []
        with pytest.raises(ValueError, match="thirteen"):
            for r in pool.map(range(10, 20)):
                got.append(r)
        assert got == [100, 121, 144]
    with pytest.raises(ValueError):
        OrderedPool(_slow_square, 0)


_ORPHAN_SCRIPT = """
import sys, time
from streams.importers.ordered_pool import OrderedPool
with OrderedPool(abs, 2) as pool:
    print(" ".join(str(p) for p in pool._ex._processes), flush=True)
    time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\\nState:\\tZ" not in state  # a zombie has ended


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_import_processes_end_with_a_killed_parent() -> None:
    import os
    import signal
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    p = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert p.stdout is not None
    pids = [int(x) for x in p.stdout.readline().split()]
    assert len(pids) == 2 and all(_alive(x) for x in pids)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 10
    while any(_alive(x) for x in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(x) for x in pids), "import processes outlived their parent"


def test_duckdb_runs_one_thread_beside_import_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With import processes the runner's DuckDB connection runs one thread (they hold the other
    cores); in one process it keeps DuckDB's default."""
    from hivestream.embedded import frames as embedded
    from projections.frames.projection import FramesProjection

    seen: list[int] = []

    class Recording(FramesProjection):
        def __init__(self, path: str | Path, con: object = None, **kw: object) -> None:
            super().__init__(path, con, **kw)  # type: ignore[arg-type]
            ((threads,),) = self.con.execute("SELECT current_setting('threads')").fetchall()
            seen.append(int(threads))

    monkeypatch.setattr(embedded, "FramesProjection", Recording)
    memory = SAMPLES / "demo-memory-tools.jsonl"
    run_files([memory], tmp_path / "pooled.duckdb", jobs=2)
    run_files([memory], tmp_path / "one.duckdb", jobs=0)
    default = duckdb.connect().execute("SELECT current_setting('threads')").fetchone()
    assert default is not None
    assert seen == [1, int(default[0])]
