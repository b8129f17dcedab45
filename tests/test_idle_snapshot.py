"""projections.frames.snapshot.publish_idle_snapshot: the projector's checkpoint-and-copy snapshot.

The snapshot must hold exactly the committed rows and positions, be readable by another process
while the writer still holds the file, replace the previous snapshot, ignore what a crashed
publication left behind, and fall back to ``COPY FROM DATABASE`` when a WAL survives the checkpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

from projections.frames.sink import DuckSink
from projections.frames.snapshot import publish_idle_snapshot, publish_snapshot
from projections.reading import snapshot_path
from tests.test_frame_sink import _events

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
    sink = DuckSink(db)
    try:
        sink.apply_batch(events[:500], [], {("ns.frames", 0): 500})
        assert Path(f"{db}.wal").stat().st_size > 0  # the rows are in the WAL only: the copy needs the checkpoint
        stale = Path(f"{snapshot_path(db)}.tmp.wal")
        stale.write_bytes(b"not a WAL: what a publication killed mid-way could leave")
        snap = publish_idle_snapshot(sink, 1_000)
        assert snap == snapshot_path(db) and not stale.exists()
        first = _read_in_another_process(snap)
        assert {t: first[t] for t in TABLES} == _rows(sink.con)
        assert first["snapshot_info"] == [[1_000, json.dumps([["ns.frames", 0, 500]])]]
        assert len(first["frame_captures"]) == 500

        sink.apply_batch(events[500:], [], {("ns.frames", 0): 900})
        publish_idle_snapshot(sink, 2_000)
        second = _read_in_another_process(snap)
        assert {t: second[t] for t in TABLES} == _rows(sink.con)
        # the writer still holds its file: a copy made in this process would have dropped DuckDB's fcntl lock
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
        with DuckSink(db) as sink:
            sink.apply_batch(events, [], {("ns.frames", 1): 600})
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
    sink = DuckSink(db)
    real = sink.con
    try:
        sink.apply_batch(events, [], {("ns.frames", 0): 300})
        sink.con = _NoCheckpoint(real)  # type: ignore[assignment]
        publish_idle_snapshot(sink, 7)
        assert Path(f"{db}.wal").stat().st_size > 0  # no checkpoint ran: a byte copy would have missed these rows
        snap = _read_in_another_process(snapshot_path(db))
        assert {t: snap[t] for t in TABLES} == _rows(real)
        assert len(snap["frame_captures"]) == 300
    finally:
        sink.con = real
        sink.close()
