"""The snapshot for readers on a full disk: a failed copy leaves no file and gives its space back,
the next one waits longer after each failure, a copy that would take the room the log needs is not
tried, and serve keeps answering POSTs and ``/healthz`` ``ok`` meanwhile (a small ``tmpfs``)."""

from __future__ import annotations

import errno
import itertools
import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import httpx
import pytest

import hivestream.serve.publisher as publisher_mod
from hivestream.serve.progress import Progress
from hivestream.serve.publisher import Publisher, PublishOptions
from hivestream.serve.read_gate import ReadGate
from projections.frames.snapshot import copy_snapshot, snapshot_leftovers, snapshot_room
from projections.reading import heartbeat_path, snapshot_path
from tests.support.kafka_harness import wait_until
from tests.support.serve_harness import ServeProc, prompt
from tests.support.small_fs import fill_leaving, free_bytes, small_fs


def _left(db: Path) -> list[str]:
    return [p.name for p in snapshot_leftovers(db) if p.exists()]


def _a_file_of_5_mib(db: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE positions (input VARCHAR, src_partition INTEGER, next_offset BIGINT)")
    con.execute("CREATE TABLE t AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(300000)")  # ~5 MiB of file
    con.execute("CHECKPOINT")
    return con


def test_a_copy_without_room_leaves_no_file_and_gives_its_space_back(tmp_path: Path) -> None:
    with small_fs(tmp_path / "fs", 48 << 20) as fs:
        db = fs / "m.duckdb"
        con = _a_file_of_5_mib(db)
        try:
            fill_leaving(fs, 2 << 20)
            before = free_bytes(fs)
            with pytest.raises((duckdb.Error, OSError)):
                copy_snapshot(con.cursor(), db, 1)
            assert _left(db) == []
            assert free_bytes(fs) >= before - (64 << 10)
            assert not snapshot_path(db).exists()
            (fs / "filler").unlink()
            copy_snapshot(con.cursor(), db, 2)  # the next copy on the same connection works once there is room
            assert _left(db) == [] and snapshot_path(db).exists()
        finally:
            con.close()


def test_a_copy_is_tried_only_when_it_leaves_the_reserve_free(tmp_path: Path) -> None:
    with small_fs(tmp_path / "fs", 64 << 20) as fs:
        db = fs / "m.duckdb"
        _a_file_of_5_mib(db).close()
        filler = fill_leaving(fs, 16 << 20)  # the copy (~5 MiB + 8 MiB for its WAL) would leave less than 8 MiB
        room = snapshot_room(db)
        assert not room.ok and room.reserve_bytes == 8 << 20 and "MiB free" in room.line()
        filler.unlink()
        fill_leaving(fs, 24 << 20)
        assert snapshot_room(db).ok


def test_a_failing_snapshot_is_tried_again_after_a_pause_that_doubles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    tries: list[float] = []
    fail = [True]

    def copy(_cur: object, db: Path, _at: int) -> Path:
        tries.append(now[0])
        if fail[0]:
            raise OSError(errno.ENOSPC, "No space left on device")
        return db

    monkeypatch.setattr(publisher_mod, "copy_snapshot", copy)
    monkeypatch.setattr(publisher_mod, "time", SimpleNamespace(monotonic=lambda: now[0]))
    gate = ReadGate()
    con = duckdb.connect()
    gate.set(con, tmp_path / "m.duckdb")
    pub = Publisher(gate, Progress(), PublishOptions(snapshot_every_s=1.0, reserve_bytes=0))
    caplog.set_level(logging.ERROR, logger="hivestream.serve")
    while now[0] < 600:
        pub.changed()  # records keep coming
        pub.publish()
        now[0] += 0.25
    assert [b - a for a, b in itertools.pairwise(tries)] == [2, 4, 8, 16, 32, 64, 120, 120, 120]
    assert len([r for r in caplog.records if "publishing the snapshot" in r.getMessage()]) == 1  # one line, not one per try
    fail[0] = False
    now[0] = tries[-1] + 120
    pub.publish()
    at = now[0]
    for _ in range(12):
        now[0] += 0.25
        pub.changed()
        pub.publish()
    assert tries[-4:] == [at, at + 1, at + 2, at + 3]  # after a success: every_s again
    gate.set(None)
    con.close()


def _beat(db: Path) -> int:
    """When serve last noted that its snapshot held every record (epoch ms; 0: not yet)."""
    try:
        return int(json.loads(heartbeat_path(db).read_text())["checked_at_ms"])
    except (OSError, ValueError, KeyError):
        return 0


def _post_batches(url: str, tag: str, n: int) -> None:
    for b in range(n):
        r = httpx.post(url + "/v1/hooks/claude-code", json=[prompt(f"{tag}{b}", i) for i in range(500)], timeout=60)
        assert r.status_code == 200, r.text


def test_serve_on_a_nearly_full_disk_takes_posts_stays_healthy_and_leaves_no_snapshot_files(tmp_path: Path) -> None:
    with small_fs(tmp_path / "fs", 160 << 20) as fs:
        db = fs / "memory.duckdb"
        for p in snapshot_leftovers(db):  # what a serve killed in a copy leaves behind
            p.write_bytes(b"x" * 4096)
        proc = ServeProc(db, "--no-report", "--snapshot-every", "0.2")
        try:
            wait_until(lambda: _left(db) == [], 30, "the leftovers of a killed copy to be removed at start", 0.1)
            _post_batches(proc.url, "fill", 40)  # 20,000 captures: a copy of ~8 MiB, a file and WAL of ~18
            proc.wait_applied()
            _post_batches(proc.url, "more", 1)
            proc.wait_applied()
            applied_at = int(time.time() * 1000)
            wait_until(lambda: _beat(db) > applied_at, 120, "a snapshot of every record (its heartbeat)", 0.2)
            filler = fill_leaving(fs, 20 << 20)  # room for the log, not for a copy (~18 MiB + 8 for its WAL) and the reserve (16 MiB)
            published = _beat(db)
            seen: list[tuple[int, str, int, list[str]]] = []
            deadline = time.monotonic() + 120
            while len(seen) < 40 or "the snapshot is not published while its disk is this full" not in proc.text():
                assert time.monotonic() < deadline, "serve never said why no snapshot is published:\n" + proc.text()[-3000:]
                status, health = proc.health()  # each post makes a snapshot due again
                r = httpx.post(proc.url + "/v1/hooks/claude-code", json=prompt("nearly-full", len(seen)), timeout=30)
                seen.append((status, health["status"], r.status_code, _left(db)))
                time.sleep(0.2)
            assert {s[:3] for s in seen} == {(200, "ok", 200)}, seen
            assert all(s[3] == [] for s in seen), seen
            assert _beat(db) == published  # no copy: no heartbeat either
            filler.unlink()
            wait_until(lambda: _beat(db) > published, 120, "the snapshot once there is room again", 0.2)
        finally:
            assert proc.stop() == 0, proc.text()[-3000:]
        assert _left(db) == []
        assert "publishing the snapshot or the report failed" not in proc.text()
