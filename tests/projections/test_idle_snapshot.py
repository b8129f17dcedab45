"""projections.frames.snapshot.publish_idle_snapshot: the projector's checkpoint-and-copy snapshot.

The snapshot must hold exactly the committed rows and positions, be readable by another process
while the writer still holds the file, replace the previous snapshot, ignore what a crashed
publication left behind, and fall back to ``COPY FROM DATABASE`` when a WAL survives the checkpoint.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from projections import file_copy
from projections.file_copy import HeldFileCopy
from projections.frames.projection import FramesBatch, FramesProjection
from projections.frames.snapshot import publish_idle_snapshot, publish_snapshot
from projections.reading import snapshot_path
from tests.projections.test_frame_sink import _events
from tests.support.kafka_harness import unique_namespace

REPO_ROOT = Path(__file__).resolve().parents[2]

TABLES = ("frames", "frame_captures", "positions", "dead_letters", "memory_tool_calls")
_READER = """
import duckdb, json, sys
con = duckdb.connect(sys.argv[1], read_only=True)
out = {t: [list(map(str, r)) for r in con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()] for t in sys.argv[2:]}
out["snapshot_info"] = [list(r) for r in con.execute("SELECT published_at_ms, positions FROM snapshot_info").fetchall()]
print(json.dumps(out))
"""


def _rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[list[str]]]:
    return {t: [list(map(str, r)) for r in con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()] for t in TABLES}


def _read_in_another_process(snap: Path) -> dict[str, Any]:
    """The snapshot's tables as a separate process reads them (the writer holds the projection file meanwhile)."""
    out = subprocess.run([sys.executable, "-c", _READER, str(snap), *TABLES], capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def test_the_snapshot_holds_the_committed_rows_while_the_writer_holds_the_file(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    events = _events(900)
    sink = FramesProjection(db)
    try:
        sink.apply(FramesBatch.of_events(events[:500]), {("ns.frames", 0): 500})
        assert Path(f"{db}.wal").stat().st_size > 0  # the rows are in the WAL only: the copy needs the checkpoint
        stale = Path(f"{snapshot_path(db)}.tmp.wal")
        stale.write_bytes(b"not a WAL: what a publication killed mid-way could leave")
        snap = publish_idle_snapshot(sink, 1_000)
        assert snap == snapshot_path(db) and not stale.exists()
        first = _read_in_another_process(snap)
        assert {t: first[t] for t in TABLES} == _rows(sink.con)
        assert first["snapshot_info"] == [[1_000, json.dumps([["ns.frames", 0, 500]])]]
        assert len(first["frame_captures"]) == 500

        sink.apply(FramesBatch.of_events(events[500:]), {("ns.frames", 0): 900})
        publish_idle_snapshot(sink, 2_000)
        second = _read_in_another_process(snap)
        assert {t: second[t] for t in TABLES} == _rows(sink.con)
        # the writer still holds its file: a copy that closed its descriptor of it would have dropped DuckDB's fcntl lock
        other = subprocess.run([sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1], read_only=True)", str(db)],
                               capture_output=True, text=True, timeout=120, check=False)
        assert other.returncode != 0 and "lock" in other.stderr.lower(), other.stderr
        assert len(second["frame_captures"]) == 900
        assert second["snapshot_info"] == [[2_000, json.dumps([["ns.frames", 0, 900]])]]
    finally:
        sink.close()


def test_the_same_tables_as_copy_from_database(tmp_path: Path) -> None:
    events = _events(600, seed=9)
    got = []
    for publish in (publish_idle_snapshot, publish_snapshot):
        db = tmp_path / f"{publish.__name__}.duckdb"
        with FramesProjection(db) as sink:
            sink.apply(FramesBatch.of_events(events), {("ns.frames", 1): 600})
            publish(sink, 5)
        got.append(_read_in_another_process(snapshot_path(db)))
    assert got[0] == got[1]


class _NoCheckpoint:
    """A connection whose CHECKPOINT does nothing (as when DuckDB leaves the WAL in place)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.strip().upper() == "CHECKPOINT":
            return self._con
        return self._con.execute(sql, *args)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self._con.cursor()


def test_a_wal_left_after_the_checkpoint_takes_the_copy_path(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    events = _events(300, seed=4)
    sink = FramesProjection(db)
    real = sink.con
    try:
        sink.apply(FramesBatch.of_events(events), {("ns.frames", 0): 300})
        sink.con = _NoCheckpoint(real)  # type: ignore[assignment]
        publish_idle_snapshot(sink, 7)
        assert Path(f"{db}.wal").stat().st_size > 0  # no checkpoint ran: a byte copy would have missed these rows
        snap = _read_in_another_process(snapshot_path(db))
        assert {t: snap[t] for t in TABLES} == _rows(real)
        assert len(snap["frame_captures"]) == 300
    finally:
        sink.con = real
        sink.close()


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_held_file_copy_copies_every_byte_and_keeps_one_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   kernel_copy: bool) -> None:
    src = tmp_path / "src.bin"
    data = os.urandom(file_copy._CHUNK * 2 + 12_345)  # three chunks, the last one partial
    src.write_bytes(data)
    if not kernel_copy:  # a kernel or file system without copy_file_range between these files: pread / pwrite
        def refuse(*_a: Any, **_k: Any) -> int:
            raise OSError(errno.EXDEV, "cross-device")
        monkeypatch.setattr(os, "copy_file_range", refuse)
    copier = HeldFileCopy(src)
    try:
        assert copier.copy_to(tmp_path / "a.bin") == len(data)
        assert (tmp_path / "a.bin").read_bytes() == data
        fd = copier._fd
        src.write_bytes(data[:100])  # the file changed: the next copy has its bytes, through the same descriptor
        assert copier.copy_to(tmp_path / "a.bin") == 100 and (tmp_path / "a.bin").read_bytes() == data[:100]
        assert copier._fd == fd
    finally:
        copier.close()
    assert copier._fd is None


def test_a_failed_copy_removes_its_partial_file_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(file_copy._CHUNK + 10))
    calls = []

    def full_disk(src_fd: int, dst_fd: int, count: int, offset_src: int, offset_dst: int) -> int:
        calls.append(count)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        os.pwrite(dst_fd, os.pread(src_fd, count, offset_src), offset_dst)
        return count

    monkeypatch.setattr(os, "copy_file_range", full_disk)
    copier = HeldFileCopy(src)
    with pytest.raises(OSError, match="No space left"):
        copier.copy_to(tmp_path / "part.bin")
    copier.close()
    assert not (tmp_path / "part.bin").exists()


@pytest.mark.kafka
def test_a_publication_that_fails_is_one_line_from_the_projector(kafka_bootstrap: str, tmp_path: Path) -> None:
    """A directory where the snapshot's temporary copy goes: `project` stops with one line and exit 2, no traceback."""
    db = tmp_path / "p.duckdb"
    (tmp_path / "p.duckdb.snapshot.tmp").mkdir()
    done = subprocess.run([sys.executable, "-m", "hivestream", "project", "--db", str(db), "--namespace", unique_namespace("snapfail"),
                           "--bootstrap", kafka_bootstrap, "--idle-exit", "2"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "p.duckdb.snapshot.tmp" in lines[0], done.stderr


def test_a_path_with_a_quote_is_copied(tmp_path: Path) -> None:
    """``COPY FROM DATABASE`` attaches the copy by its path: a quote in it is part of the name, not the end of the SQL string."""
    db = tmp_path / "it's memory.duckdb"
    with FramesProjection(db) as sink:
        sink.apply(FramesBatch.of_events(_events(50, seed=3)), {("ns.frames", 0): 50})
        publish_snapshot(sink, 5)
    assert len(_read_in_another_process(snapshot_path(db))["frame_captures"]) == 50
    assert not Path(f"{snapshot_path(db)}.tmp").exists()
