"""Replacing a projection file (:mod:`hivestream.services.files`): refused while a writer holds it, else atomic with the old side files gone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from hivestream.services.files import HeldByWriter, ensure_not_held, swap_in
from projections.reading import heartbeat_path, snapshot_path


def make(path: Path, value: int) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT ? AS v", [value])


def test_swap_in_replaces_the_file_and_drops_its_side_files(tmp_path: Path) -> None:
    db, new = tmp_path / "p.duckdb", tmp_path / "p.duckdb.replay-tmp"
    make(db, 1)
    make(new, 2)
    for side in (snapshot_path(db), heartbeat_path(db), Path(f"{db}.wal")):
        side.write_text("old")
    swap_in(new, db)
    assert not new.exists() and not snapshot_path(db).exists() and not heartbeat_path(db).exists() and not Path(f"{db}.wal").exists()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT v FROM t").fetchall() == [(2,)]


def test_a_file_a_writer_holds_is_refused_and_kept(tmp_path: Path) -> None:
    db, new = tmp_path / "p.duckdb", tmp_path / "new.duckdb"
    make(db, 1)
    make(new, 2)
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb,sys,time; c=duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(HeldByWriter, match="held by a running writer"):
            swap_in(new, db)
        assert new.exists()
    finally:
        holder.kill()
        holder.wait()
    ensure_not_held(db)
    ensure_not_held(tmp_path / "missing.duckdb")
