"""Reading a projection file while a projector may hold it: the file itself when no writer holds
it, else the snapshot the projector publishes beside it (DuckDB lets no second process open a file
a writer holds), with the heartbeat that says how fresh it is."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb

from projections.duck_file import check_duckdb_file, first_line, held_by_another


def snapshot_path(db: str | Path) -> Path:
    """Where the projector publishes the read-only snapshot of ``db``: ``<db>.snapshot``."""
    return Path(f"{db}.snapshot")


def heartbeat_path(db: str | Path) -> Path:
    """Where the projector notes when it last checked for new records: ``<db>.snapshot.heartbeat``."""
    return Path(f"{db}.snapshot.heartbeat")


def open_for_reading(db: Path) -> tuple[duckdb.DuckDBPyConnection, str]:
    """Open ``db`` read-only, or its published snapshot while a projector holds it.

    Returns:
        (connection, a sentence that says how fresh the answer is).

    Raises:
        FileNotFoundError: when neither the file nor a snapshot exists, the file is locked and no
            snapshot was published yet, or the file is no readable DuckDB file (DuckDB's reason).
    """
    snap = snapshot_path(db)
    if db.exists():
        try:
            check_duckdb_file(db)
            return duckdb.connect(str(db), read_only=True), f"answered from {db} (no writer holds it: up to date)"
        except duckdb.Error as e:
            if not held_by_another(e):  # not a writer's lock: a corrupt file, a directory, not a DuckDB file, ...
                raise FileNotFoundError(f"cannot read {db} as a DuckDB file: {first_line(e)}") from None
            if not snap.exists():
                raise FileNotFoundError(f"{db} is held by a writer and no snapshot {snap} was published yet") from None
    if not snap.exists():
        raise FileNotFoundError(f"no such DuckDB file: {db}")
    con = duckdb.connect(str(snap), read_only=True)
    row = con.execute("SELECT published_at_ms, positions FROM snapshot_info").fetchone()
    published, positions = (int(row[0]), json.loads(row[1])) if row else (0, [])
    age_s = max(0.0, time.time() - published / 1000)
    covered = ", ".join(f"{t}[{p}]@{o}" for t, p, o in positions[:8])
    beat = ""
    hb = heartbeat_path(db)
    if hb.exists():
        try:
            checked = int(json.loads(hb.read_text())["checked_at_ms"])
            beat = f"; the projector last checked for new records {max(0.0, time.time() - checked / 1000):.1f} s ago"
        except (ValueError, KeyError, OSError):
            beat = ""
    return con, (f"answered from the snapshot {snap} published {age_s:.1f} s ago (a writer holds {db}){beat}; "
                 f"positions: {covered}")
