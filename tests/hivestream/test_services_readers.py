"""Where the services read (:mod:`hivestream.services.readers`): the file itself when no writer holds
it, else the published snapshot, refused once it is older than the bound; serve's lent cursors."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from hivestream.services.readers import CursorReader, ReadUnavailable, SnapshotReader, Stale, rows
from projections.reading import heartbeat_path, snapshot_path

NOW = 1_800_000_000.0


def make(path: Path, value: int, published_ms: int | None = None) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT ? AS v", [value])
        if published_ms is not None:
            con.execute("CREATE TABLE snapshot_info AS SELECT ?::BIGINT AS published_at_ms, '[]' AS positions", [published_ms])


def test_the_snapshot_is_read_within_its_bound_and_refused_beyond(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    make(snapshot_path(db), 1, int((NOW - 10) * 1000))
    clock = [NOW]
    r = SnapshotReader(db, 30, clock=lambda: clock[0])
    assert rows(r, "SELECT v FROM t") == [(1,)] and "snapshot" in r.freshness()
    clock[0] = NOW + 25
    with pytest.raises(Stale, match="over the 30-s bound"):
        rows(r, "SELECT v FROM t")
    heartbeat_path(db).write_text(json.dumps({"checked_at_ms": int((NOW + 20) * 1000)}))  # caught up since: fresh again
    assert rows(r, "SELECT v FROM t") == [(1,)]
    marker = r.marker()
    fresh = tmp_path / "new.snapshot"
    make(fresh, 2, int((NOW + 24) * 1000))
    fresh.replace(snapshot_path(db))  # a new publication (renamed over the old, as the projector does) is read, and moves the marker
    assert rows(r, "SELECT v FROM t") == [(2,)] and r.marker() != marker
    r.close()


def test_the_file_itself_unless_a_writer_holds_it(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    with pytest.raises(ReadUnavailable, match="no such DuckDB file"):
        rows(SnapshotReader(db), "SELECT 1")
    make(db, 3)
    assert rows(SnapshotReader(db, prefer_file=True), "SELECT v FROM t") == [(3,)]
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb,time; c=duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ReadUnavailable, match="no snapshot"):
            rows(SnapshotReader(db, prefer_file=True), "SELECT v FROM t")
    finally:
        holder.kill()
        holder.wait()


def test_lent_cursors_and_a_gate_that_lends_none(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 7 AS v")

    @contextlib.contextmanager
    def lend() -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        cur = con.cursor()
        try:
            yield cur, tmp_path
        finally:
            cur.close()

    @contextlib.contextmanager
    def none() -> Iterator[tuple[duckdb.DuckDBPyConnection, Path]]:
        raise RuntimeError("the file is being reopened")
        yield  # pragma: no cover

    assert rows(CursorReader(lend, lambda: 5), "SELECT v FROM t") == [(7,)] and CursorReader(lend, lambda: 5).marker() == 5
    with pytest.raises(ReadUnavailable, match="being reopened"):
        rows(CursorReader(none, lambda: 5), "SELECT 1")
